//===- ProgramSimulation.h - pipe.program ops as schedules -------*- C++ -*-===//
//
// Translates the pipe.program ops of a module into the instruction lists of
// pipec/Analysis/Schedule.h, and the simulator's findings back into
// diagnostics on the ops. Shared by pipe-verify-schedule and
// pipe-print-schedule.
//
//===----------------------------------------------------------------------===//
#ifndef PIPEC_LIB_TRANSFORMS_SCHEDULE_PROGRAMSIMULATION_H
#define PIPEC_LIB_TRANSFORMS_SCHEDULE_PROGRAMSIMULATION_H

#include "pipec/Analysis/Schedule.h"

#include "dialects/pipe/PipeDialect.h"
#include "mlir/IR/BuiltinOps.h"

namespace mlir::pipec {

struct ProgramSet {
  /// The programs, ordered by device; simulation index d is programs[d].
  SmallVector<pipe::ProgramOp> programs;
  std::vector<schedule::Program> devices;
  /// ops[d][i]: the op of instruction i of programs[d]; an op in a
  /// pipe.loop stands for one instruction per iteration.
  SmallVector<SmallVector<Operation *>> ops;
  /// mbs[d][i]: the micro-batch of instruction i (-1: none).
  SmallVector<SmallVector<int64_t>> mbs;

  /// The op of an instruction; the program op itself for its end.
  Operation *opAt(schedule::InstrRef ref) const;
  /// The micro-batch of an instruction (-1: none, or the end).
  int64_t mbAt(schedule::InstrRef ref) const;
  /// describeInstruction of the instruction `ref`.
  std::string describe(schedule::InstrRef ref) const;
  /// The simulated instruction's payload (a transfer's type, what a
  /// collective's members must agree on); "" for the end.
  std::string payloadAt(schedule::InstrRef ref) const {
    const schedule::Program &list = devices[ref.device];
    return ref.index >= 0 && ref.index < int64_t(list.size()) ? list[ref.index].payload : "";
  }
  int64_t deviceOf(int64_t index) const {
    return pipe::ProgramOp(programs[index]).getDevice();
  }
};

/// Collects the programs of `module`. Fails, with an error on the op, where
/// a send or recv names a device that has no program. No-flush programs are
/// expanded over a run of `runSteps(...)` steps (pipe::forEachInstructionInRun),
/// with global micro-batch indices.
FailureOr<ProgramSet> collectPrograms(ModuleOp module);

/// The steps a no-flush run is checked over: long enough to reach the
/// steady state and drain from it (drain * 2 + 3); 1 for synchronous ones.
int64_t runSteps(ArrayRef<pipe::ProgramOp> programs);

/// Reports a failed simulation: an error on the failing instruction and a
/// note on the other one involved.
void emitSimulationFailure(const ProgramSet &set,
                           const schedule::SimulationFailure &failure,
                           bool bufferedSends);

/// "recv of mb 1 tag "h" from device 0", "forward @s0_fwd of mb 2", ...;
/// `mb` is the micro-batch the op works on in this instance (an op in a
/// loop runs for several).
std::string describeInstruction(Operation *op, int64_t mb);

} // namespace mlir::pipec

#endif
