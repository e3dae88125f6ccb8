//===- StepLowering.h - the step lowering's class ---------------*- C++ -*-===//
//
// Private to lib/Conversion. StepLowering turns one straight-line onnx step
// function into buffers + calls of the pipert runtime. Its methods are
// defined across:
//   - StepBufferPlan.cpp: classification of arguments and results, constant
//     folding, liveness-based buffer planning;
//   - StepEmission.cpp: emission helpers (pointers, views, globals, calls,
//     operand access) and the attribute helpers of the kernels;
//   - LowerOps.cpp: lowerOp and lowerConvLike, one kernel call per op;
//   - LowerGradientOps.cpp: lowerGradientOp (the ops of OnnxGradientOps.td);
//   - LowerToRuntime.cpp: run (the driver), lowerStepFunction and the pass.
//
//===----------------------------------------------------------------------===//
#ifndef PIPEC_LIB_CONVERSION_STEPLOWERING_H
#define PIPEC_LIB_CONVERSION_STEPLOWERING_H

#include "StepBufferPlan.h"

#include "pipec/Conversion/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace mlir::pipec::steplowering {

class StepLowering {
public:
  StepLowering(ModuleOp module, func::FuncOp source, bool cuda,
               const StepFunctionOptions &options = {})
      : module(module), source(source), cuda(cuda), options(options),
        b(source.getLoc(), source.getContext()) {}

  LogicalResult run();

private:
  // --- analysis ---
  LogicalResult classifyArguments();
  LogicalResult classifyResults();
  void computeConstants();
  void fuseSgdIntoGemms();
  void hoistUpdates();
  LogicalResult planBuffers();
  Value rootOf(Value v);

  // --- emission helpers ---
  Type ptrType() { return LLVM::LLVMPointerType::get(b.getContext()); }
  Value i64c(int64_t v) { return arith::ConstantIntOp::create(b, v, 64); }
  Value i32c(int64_t v) { return arith::ConstantIntOp::create(b, v, 32); }
  Value f32c(double v) {
    return arith::ConstantFloatOp::create(b, b.getF32Type(),
                                          APFloat(static_cast<float>(v)));
  }
  Value nullPtr() { return LLVM::ZeroOp::create(b, ptrType()); }
  Value pointerOf(Value memref);
  Value wrapPointer(Value ptr, int64_t bytes);
  Value viewOf(Value block, RankedTensorType type);
  Value i64Array(ArrayRef<int64_t> values);
  Value f32Array(ArrayRef<float> values); // null when empty
  Value ptrArray(ArrayRef<Value> ptrs);
  void call(StringRef callee, ArrayRef<Value> args);
  Value callPtr(StringRef callee, ArrayRef<Value> args);

  // Operand access for the kernels.
  Value P(Value v);                 // buffer pointer (null for none)
  Value rankOf(Value v) { return i64c(tensorType(v).getRank()); }
  Value shapeOf(Value v) { return i64Array(tensorType(v).getShape()); }
  Value out(Operation *op, unsigned i) {
    return i < op->getNumResults() ? P(op->getResult(i)) : nullPtr();
  }
  std::optional<ElementsAttr> constantOf(Value v) {
    auto it = constants.find(v);
    if (it == constants.end())
      return std::nullopt;
    return it->second;
  }
  FailureOr<SmallVector<int64_t>> constInts(Operation *op, Value v,
                                            StringRef what);
  /// Slice's and SliceGrad's window from the constant operands `first` ..
  /// `first` + 3 (starts, ends, axes, steps): the kernels' arguments count,
  /// starts, ends, axes (null: all), steps (null: ones).
  FailureOr<SmallVector<Value>> sliceWindow(Operation *op, unsigned first,
                                            StringRef what);
  /// A one-element runtime tensor read back to the host.
  Value hostScalar(Value v, Type elementType);
  FailureOr<Value> scalarF32(Operation *op, Value v, StringRef what);
  FailureOr<Value> scalarI64(Operation *op, Value v, StringRef what);
  Value memrefFor(Value v);

  LogicalResult lowerOp(Operation *op);
  LogicalResult lowerConvLike(Operation *op, bool conv);
  /// onnx.Attention and onnx.AttentionGrad (pipert_attention(_grad)_f32).
  LogicalResult lowerAttention(Operation *op);
  /// The onnx.*Grad ops of OnnxGradientOps.td; sets `handled` when `op` is
  /// one of them (success or not).
  LogicalResult lowerGradientOp(Operation *op);
  bool handled = false;

  ModuleOp module;
  func::FuncOp source;
  bool cuda;
  StepFunctionOptions options;
  ImplicitLocOpBuilder b;
  func::FuncOp step;
  Value ctxArg, inputsArg, persistentArg, lossArg, stepArg;

  SmallVector<BlockArgument> inputs, persistent;
  DenseMap<Value, int64_t> inputIndex, persistentIndex;
  BlockArgument stepCounter;
  SmallVector<NamedAttribute> persistentKinds;
  Value lossValue;
  // An evaluation's counts (pipe.metric): value → its float slot after the loss.
  SmallVector<std::pair<Value, int64_t>> metricValues;
  // Result value → persistent index it becomes for the next step.
  SmallVector<std::pair<Value, int64_t>> updates;
  // Callable functions: result value → index of the caller's output buffer.
  SmallVector<std::pair<Value, int64_t>> outputs;
  DenseMap<Value, int64_t> directOutput; // computed in the caller's buffer

  DenseMap<Value, ElementsAttr> constants;
  DenseMap<Operation *, int64_t> order;
  DenseMap<Value, Placement> placement;
  DenseMap<Value, int64_t> lastUse;
  SmallVector<BlockInfo> blocks;
  int64_t peakBytes = 0;
  DenseSet<Value> inPlace; // update results written over their argument
  // Gradients whose kernel adds them into their accumulator (its
  // `accumulate` flag), and the Adds (acc + gradient) that this replaces,
  // which emit nothing.
  DenseSet<Value> accumulated;
  DenseSet<Operation *> foldedAdds;
  // Concats whose parts their kernels compute in its buffer (no call).
  DenseSet<Operation *> inPlaceConcats;
  /// The kernel's `accumulate` flag for `op`'s results: bit k for
  /// results[k] accumulated.
  Value accumulateBits(Operation *op, ArrayRef<unsigned> results) {
    int64_t bits = 0;
    for (auto [k, i] : llvm::enumerate(results))
      if (accumulated.contains(op->getResult(i)))
        bits |= int64_t(1) << k;
    return i32c(bits);
  }

  // Emission state.
  DenseMap<Value, Value> memrefs;         // tensor value → typed memref
  DenseMap<int64_t, Value> blockMemrefs;  // block id → memref<Nxi8>
  std::map<std::vector<int64_t>, Value> i64Arrays;
  unsigned globalCounter = 0;
  /// Globals are named after a callable function, so that several lowered
  /// into one module do not clash.
  std::string globalPrefix() const {
    return options.callable || options.name != kStepFunctionName
               ? options.name.str() + "_"
               : "__pipe_";
  }
  SmallVector<Value> constantCopies; // cuda: device copies freed at the end
};

/// A pipert_activation_f32/_grad_f32 call's op code and attributes.
struct ActivationCall {
  int64_t code;
  double alpha, beta;
};
ActivationCall activationCall(Operation *op);

/// A pipert_resize_f32 / _grad_f32 call's arguments: x and y as
/// (outer, D, H, W) over the last three axes, their scales (none: the sizes
/// form) and roi (starts, ends; empty when absent) and the mode codes.
struct ResizeCall {
  SmallVector<int64_t> x4, y4;
  std::optional<SmallVector<float>> scales3;
  SmallVector<float> roi6;
  int64_t mode, coord, nearest;
};
FailureOr<ResizeCall> resizeCall(Operation *op, ArrayRef<int64_t> in,
                                 ArrayRef<int64_t> out,
                                 std::optional<ArrayRef<float>> scales,
                                 ArrayRef<float> roi);

// Attributes of the op being lowered, with their ONNX defaults.
int64_t attrInt(Operation *op, StringRef name, int64_t dflt);
double attrF(Operation *op, StringRef name, double dflt);
std::string attrStr(Operation *op, StringRef name, StringRef dflt);
/// The pipert direction code of an LSTM/GRU (or its gradient op):
/// 0 forward, 1 reverse, 2 bidirectional.
int32_t recurrentDirection(Operation *op);
std::optional<SmallVector<int64_t>> attrInts(Operation *op, StringRef name);
/// The runtime's code of a loss's `reduction` (none 0, sum 1, mean 2).
int64_t reductionCode(StringRef r);

/// A 1-D convolution's N x C x L shape as the 2-D kernels' N x C x 1 x L
/// (unchanged where `oneD` is false).
inline SmallVector<int64_t> convShape2d(ArrayRef<int64_t> s, bool oneD) {
  SmallVector<int64_t> r(s.begin(), s.end());
  if (oneD)
    r.insert(r.begin() + 2, 1);
  return r;
}

/// Attention's head split (Split, then a Reshape and a Transpose of each
/// part) as one Transpose and a Split along its leading axis, which the
/// buffer planner aliases (SplitTranspose.cpp).
void fuseSplitTransposes(func::FuncOp f);

/// Integer ops in the forms the kernels compute: narrow integers in i64,
/// Abs, Neg and ReduceSum of integers in Where, Sub, CumSum and Slice
/// (IntegerOps.cpp).
void legalizeIntegerOps(func::FuncOp f);

} // namespace mlir::pipec::steplowering

#endif // PIPEC_LIB_CONVERSION_STEPLOWERING_H
