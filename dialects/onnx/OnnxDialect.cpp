//===- OnnxDialect.cpp -----------------------------------------------------===//
#include "dialects/onnx/OnnxDialect.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "mlir/IR/TypeUtilities.h"
#include "llvm/Support/SaveAndRestore.h"

using namespace mlir;
using namespace mlir::pipec::onnx;

#include "dialects/onnx/OnnxDialect.cpp.inc"
#include "dialects/onnx/OnnxInterfaces.cpp.inc"

void ONNXDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "dialects/onnx/OnnxOps.cpp.inc"
      >();
}

Operation *ONNXDialect::materializeConstant(OpBuilder &builder,
                                            Attribute value, Type type,
                                            Location loc) {
  if (llvm::isa<NoneType>(type))
    return NoValueOp::create(builder, loc, type);
  if (auto elements = llvm::dyn_cast<ElementsAttr>(value))
    return ConstantOp::create(builder, loc, type, elements);
  return nullptr;
}

/// Set while `inferShapes` runs an op's verifier before typing its results:
/// the declared result types are placeholders then, not worth comparing.
static thread_local bool resultTypesPending = false;

LogicalResult ShapeInferenceOpInterface::inferShapes() {
  Operation *op = getOperation();
  // A shape function reads operands and attributes through the ODS
  // accessors, which assume the op's operand counts, operand types and
  // attributes are as declared; an op built generically (by the importer)
  // may not be. Verify those first.
  {
    llvm::SaveAndRestore pending(resultTypesPending, true);
    if (failed(op->getName().verifyInvariants(op)))
      return failure();
  }
  SmallVector<Type> types;
  if (failed(inferResultTypes(types)))
    return failure();
  if (types.size() != op->getNumResults())
    return op->emitOpError() << "has " << op->getNumResults()
                             << " results but its shape function gives "
                             << types.size();
  for (auto [result, type] : llvm::zip(getOperation()->getResults(), types))
    result.setType(type);
  return success();
}

namespace mlir::pipec::onnx {
LogicalResult verifyInferredTypes(Operation *op) {
  if (resultTypesPending)
    return success();
  auto iface = llvm::cast<ShapeInferenceOpInterface>(op);
  SmallVector<Type> types;
  if (failed(iface.inferResultTypes(types)))
    return failure();
  if (types.size() != op->getNumResults())
    return op->emitOpError() << "has " << op->getNumResults()
                             << " results but its shape function gives "
                             << types.size();
  for (auto [i, pair] : llvm::enumerate(llvm::zip(op->getResultTypes(), types))) {
    auto [declared, inferred] = pair;
    auto d = llvm::dyn_cast<TensorType>(declared);
    auto f = llvm::dyn_cast<TensorType>(inferred);
    if (!d || !f)
      continue;
    if (d.getElementType() != f.getElementType())
      return op->emitOpError() << "result #" << i << " has element type "
                               << d.getElementType() << " but should be "
                               << f.getElementType();
    if (!d.hasRank() || !f.hasRank())
      continue;
    if (d.getRank() != f.getRank() ||
        failed(verifyCompatibleShape(d.getShape(), f.getShape())))
      return op->emitOpError() << "result #" << i << " has type " << declared
                               << " but its operands give " << inferred;
  }
  return success();
}
} // namespace mlir::pipec::onnx
