//===- VerifySchedule.cpp - pipe-verify-schedule --------------------------===//
//
// Proves that the pipe.program ops of a module, run together, finish: every
// send meets its recv in an order both devices reach, and every device runs
// each micro-batch's forward and then its backward exactly once per stage.
//
//===----------------------------------------------------------------------===//
#include "ProgramSimulation.h"
#include "pipec/Transforms/SchedulePasses.h"

namespace mlir::pipec {
#define GEN_PASS_DEF_PIPEVERIFYSCHEDULE
#include "pipec/Transforms/SchedulePasses.h.inc"
} // namespace mlir::pipec

using namespace mlir;
using namespace mlir::pipec;
namespace sched = mlir::pipec::schedule;

namespace {
struct PipeVerifySchedulePass
    : public pipec::impl::PipeVerifyScheduleBase<PipeVerifySchedulePass> {
  using Base::Base;

  void runOnOperation() override {
    markAllAnalysesPreserved();
    FailureOr<ProgramSet> set = collectPrograms(getOperation());
    if (failed(set))
      return signalPassFailure();

    bool ok = true;
    for (auto [d, program] : llvm::enumerate(set->programs)) {
      std::vector<int64_t> stages(program.getStages().begin(),
                                  program.getStages().end());
      for (const sched::OrderProblem &problem : sched::checkComputeOrder(
               set->devices[d], int64_t(d), stages,
               program.getMicrobatches())) {
        Operation *at = set->opAt(problem.at);
        InFlightDiagnostic diag =
            at->emitError() << "device " << program.getDevice() << ": "
                            << problem.message;
        if (problem.related)
          diag.attachNote(set->opAt(*problem.related)->getLoc())
              << "the other " << describeInstruction(set->opAt(*problem.related));
        ok = false;
      }
    }
    if (!ok)
      return signalPassFailure();

    sched::SimulationOptions options;
    options.bufferedSends = bufferedSends;
    sched::SimulationResult result = sched::simulate(set->devices, options);
    if (!result.ok()) {
      emitSimulationFailure(*set, *result.failure, bufferedSends);
      return signalPassFailure();
    }

    for (auto [d, program] : llvm::enumerate(set->programs)) {
      auto recorded = program->getAttrOfType<IntegerAttr>("pipe.peak_in_flight");
      if (recorded && recorded.getInt() != result.peakInFlight[d]) {
        program.emitError() << "pipe.peak_in_flight is " << recorded.getInt()
                            << ", but device " << program.getDevice()
                            << " holds up to " << result.peakInFlight[d]
                            << " micro-batches of activations";
        ok = false;
      }
    }
    if (!ok)
      signalPassFailure();
  }
};
} // namespace
