//===- PipeDialect.h - the pipe dialect -------------------------*- C++ -*-===//
#ifndef PIPEC_DIALECTS_PIPE_PIPEDIALECT_H
#define PIPEC_DIALECTS_PIPE_PIPEDIALECT_H

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/CallInterfaces.h"
#include "mlir/Interfaces/ControlFlowInterfaces.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "dialects/pipe/PipeDialect.h.inc"
#include "dialects/pipe/PipeEnums.h.inc"

namespace mlir::pipec::pipe {
/// A schedule name, always printed as a string ("1f1b" is not a keyword);
/// a keyword is accepted on input.
ParseResult parseScheduleName(AsmParser &parser, ScheduleKind &kind);
void printScheduleName(AsmPrinter &printer, ScheduleKind kind);
} // namespace mlir::pipec::pipe

#define GET_TYPEDEF_CLASSES
#include "dialects/pipe/PipeTypes.h.inc"

#define GET_ATTRDEF_CLASSES
#include "dialects/pipe/PipeAttrs.h.inc"

#define GET_OP_CLASSES
#include "dialects/pipe/PipeOps.h.inc"

namespace mlir::pipec::pipe {
/// The micro-batch an instruction works on: `offset`, plus the index of its
/// enclosing pipe.loop when `base` is set.
struct MicroBatchIndex {
  Value base;
  int64_t offset = 0;
  /// The micro-batch for loop index `k` (ignored without a base).
  int64_t at(int64_t k) const { return base ? k + offset : offset; }
};
/// The micro-batch of a feed, forward, backward, send, recv, report_loss,
/// save or restore; nullopt for other ops.
std::optional<MicroBatchIndex> getMicroBatchIndex(Operation *op);

/// The send (recv) next to `op` (a pipe.send or pipe.recv) in its block,
/// after it (`after`) or before it, to (from) the same peer for the same
/// micro-batch; saves between them are passed over (they define nothing and
/// move no data between devices). Null if there is none.
Operation *adjacentTransfer(Operation *op, bool after);

/// Calls `fn` for every instruction `program` runs in one step, in order,
/// with its micro-batch (-1 for instructions without one): a pipe.loop's
/// body once for every index of its range, the loop op itself not at all.
void forEachInstruction(ProgramOp program,
                        llvm::function_ref<void(Operation *, int64_t)> fn);

/// The steps without data a no-flush program runs after the last step to
/// finish the micro-batches in flight: ceil(-lowest micro-batch / M); 0 for
/// a synchronous program.
int64_t drainSteps(ProgramOp program);

/// Calls `fn` for every instruction a run of `steps` steps executes, in
/// order, with its global micro-batch t*M + mb (-1 for instructions
/// without one): for a no-flush program, the body for t = 0 .. steps-1
/// and then drainSteps more times, skipping instructions whose global
/// micro-batch lies outside [0, steps*M); for a synchronous program, one
/// step (forEachInstruction), whatever `steps`.
void forEachInstructionInRun(ProgramOp program, int64_t steps,
                             llvm::function_ref<void(Operation *, int64_t)> fn);

/// The weight version a no-flush forward, backward or update with version
/// `version` relative to `clock` names for global micro-batch `u`: u +
/// version, or floor(u / M) + version.
int64_t versionAt(VersionClock clock, int64_t version, int64_t u,
                  int64_t microbatches);
} // namespace mlir::pipec::pipe

#endif
