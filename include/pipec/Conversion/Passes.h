//===- Passes.h - onnx → runtime calls → LLVM -------------------*- C++ -*-===//
#ifndef PIPEC_CONVERSION_PASSES_H
#define PIPEC_CONVERSION_PASSES_H

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Pass/Pass.h"

namespace mlir::pipec {

#define GEN_PASS_DECL
#include "pipec/Conversion/Passes.h.inc"

/// Name of the generated step function and of its metadata attribute.
inline constexpr llvm::StringLiteral kStepFunctionName = "pipe_step";
/// A no-flush program's second entry point, called once after the drain
/// (pipert_program_info::finish).
inline constexpr llvm::StringLiteral kFinishFunctionName = "pipe_finish";
/// The evaluation entry point (pipert_program_info::eval), same ABI as the
/// step: the mini-batch's loss in inference mode, no update.
inline constexpr llvm::StringLiteral kEvalFunctionName = "pipe_eval";
inline constexpr llvm::StringLiteral kProgramAttrName = "pipe.program";

/// The upstream conversions after pipe-lower-to-runtime: func, arith,
/// memref, cf → LLVM dialect, then reconcile-unrealized-casts.
void buildLowerToLLVMPipeline(OpPassManager &pm);

/// The MPI tag of a transfer: deterministic in (tag string, micro-batch).
int64_t transferTag(StringRef tag, int64_t mb);

/// The weights a device's evaluation entry (@pipe_eval) reads, for the
/// pipe.program `program`: either a fixed version slot (`slot`: 0, or the
/// AvgPipe centre), or (PipeDream, 2BW) the newest version: after t steps,
/// the one the update of micro-batch u = min((t-1)*M + last, K*M - 1) wrote,
/// slot clock(u) + version + 1 with clock(u) = u (`stepClock` false) or
/// floor(u / M); none yet where u < 0 (slot 0).
struct EvalWeights {
  int64_t slot = 0;
  bool newest = false;
  bool stepClock = false;
  int64_t version = 0;
  int64_t last = 0;
};
/// For the weight buffer `weights` of `program` (a pipe.program).
EvalWeights evalWeightsOf(Operation *program, Value weights);

struct StepFunctionOptions {
  /// The name of the lowered function.
  StringRef name = kStepFunctionName;
  /// A callable piece of a device program (a stage's forward or backward, an
  /// update) rather than the step: its results marked `pipe.result_buffer = i` are
  /// copied to the i-th pointer of the array its 4th argument points to, it
  /// is private, and it carries `pipe.peak_bytes` instead of the program
  /// metadata. Same signature as the step: (ctx, inputs, persistent,
  /// outputs, step).
  bool callable = false;
  /// Time every op: `pipert_trace_op_end(ctx, id, phase, begin)` after each
  /// op's kernels (phase 0: the ops the loss depends on, 1: other ops of an
  /// ONNX node, the gradients autodiff made of it, 2: the rest, the
  /// optimizer), and `pipe.op_table = [[node, phase], ...]` (by id) on the
  /// lowered function.
  bool profileOps = false;
};

/// What both lowerings check before writing @pipe_step: a known target and
/// no @pipe_step yet; the error names `pass`.
LogicalResult checkStepLowering(ModuleOp module, StringRef pass,
                                StringRef target);

/// pipe-lower-to-runtime's rewrite of one step function `source` (erased)
/// into @pipe_step (or the function `options` names); shared by
/// pipe-lower-programs.
LogicalResult lowerStepFunction(ModuleOp module, func::FuncOp source, bool cuda,
                                const StepFunctionOptions &options = {});

/// pipe-lower-to-runtime then the LLVM conversions (pipeline
/// "pipe-lower-to-llvm").
struct LowerToLLVMOptions : public PassPipelineOptions<LowerToLLVMOptions> {
  Option<std::string> target{*this, "target",
                             llvm::cl::desc("cpu or cuda"),
                             llvm::cl::init("cpu")};
};

void registerConversionPassesAndPipelines();

#define GEN_PASS_REGISTRATION
#include "pipec/Conversion/Passes.h.inc"

} // namespace mlir::pipec

#endif
