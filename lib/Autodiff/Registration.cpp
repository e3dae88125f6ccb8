//===- Registration.cpp - attaching the VJP rules to the onnx ops ----------===//
#include "Rules.h"

#include "pipec/Autodiff/Autodiff.h"

using namespace mlir;
using namespace mlir::pipec;
using namespace mlir::pipec::autodiff;

namespace {
template <typename OpTy>
struct VjpModel : public VjpOpInterface::ExternalModel<VjpModel<OpTy>, OpTy> {
  LogicalResult buildVjp(Operation *op, VjpContext &ctx) const {
    return vjp(llvm::cast<OpTy>(op), ctx);
  }
  Operation *prepareForVjp(Operation *op, OpBuilder &builder) const {
    return prepare(llvm::cast<OpTy>(op), builder);
  }
};
} // namespace

void mlir::pipec::autodiff::registerVjpRules(DialectRegistry &registry) {
  registry.addExtension(+[](MLIRContext *ctx, onnx::ONNXDialect *) {
#define PIPEC_ATTACH_VJP(OP) onnx::OP::attachInterface<VjpModel<onnx::OP>>(*ctx);
    PIPEC_VJP_OPS(PIPEC_ATTACH_VJP)
#undef PIPEC_ATTACH_VJP
  });
}

Operation *mlir::pipec::autodiff::cloneWithResults(Operation *op, OpBuilder &b,
                                                   unsigned numResults) {
  OnnxBuilder ob(b, op->getLoc());
  Operation *copy = ob.build(op->getName().getStringRef(), op->getOperands(),
                             op->getAttrs(), numResults);
  if (ob.failed()) {
    copy->erase();
    return nullptr;
  }
  return copy;
}
