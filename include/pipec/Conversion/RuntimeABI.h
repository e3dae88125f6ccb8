//===- RuntimeABI.h - facts about the pipert C ABI the compiler needs -*- C++ -*-===//
#ifndef PIPEC_CONVERSION_RUNTIMEABI_H
#define PIPEC_CONVERSION_RUNTIMEABI_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/BuiltinTypes.h"

#include <optional>
#include <vector>

namespace mlir::pipec {

/// pipert_dtype code (ONNX TensorProto.DataType) of an element type, or
/// nullopt for types the runtime has no kernels for.
std::optional<int64_t> pipertDtype(Type elementType);
/// Bytes of one element of pipert_dtype `code`; 0 for an unknown code.
int64_t runtimeDtypeBytes(int64_t code);
/// Bytes of one element in a runtime buffer (bool is one byte).
int64_t runtimeElementBytes(Type elementType);
/// Bytes of a whole statically shaped tensor.
int64_t runtimeTensorBytes(ShapedType type);
/// The elements of a dense or dense_resource attribute as the bytes of a
/// runtime buffer (C order, bool as uint8 0/1); false if it cannot.
bool elementsToRuntimeBytes(Attribute attr, std::vector<char> &bytes);

/// The C signature of a step (pipert_step_fn) and of the callable pieces of
/// a lowered program: (ctx, inputs, persistent, loss or outputs, step).
FunctionType stepFunctionType(MLIRContext *ctx);

/// The arguments of such a function, by role.
struct StepArguments {
  Value ctx, inputs, persistent, lossOrOutputs, step;
};

/// Creates function `name` with the step's signature at `b`'s insertion
/// point, with its entry block; `args` receives the block's arguments.
func::FuncOp createStepFunction(OpBuilder &b, Location loc, StringRef name,
                                StepArguments &args);

/// A call of the runtime's C function `callee` on `args` with `results`;
/// the first call declares it (private, at the start of `module`) with the
/// argument and result types of that call.
func::CallOp callRuntime(OpBuilder &b, Location loc, ModuleOp module,
                         StringRef callee, ValueRange args,
                         TypeRange results = {});

} // namespace mlir::pipec

#endif
