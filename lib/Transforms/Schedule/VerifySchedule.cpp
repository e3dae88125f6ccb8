//===- VerifySchedule.cpp - pipe-verify-schedule --------------------------===//
//
// Proves that the pipe.program ops of a module, run together, finish: every
// send meets its recv in an order both devices reach, and every device runs
// each micro-batch's forward and then its backward exactly once per stage.
//
//===----------------------------------------------------------------------===//
#include "ProgramSimulation.h"
#include "dialects/pipe/PipeAttrNames.h"
#include "pipec/Transforms/SchedulePasses.h"

namespace mlir::pipec {
#define GEN_PASS_DEF_PIPEVERIFYSCHEDULE
#include "pipec/Transforms/Passes.h.inc"
} // namespace mlir::pipec

using namespace mlir;
using namespace mlir::pipec;
namespace sched = mlir::pipec::schedule;

namespace {
/// Checks the activation buffers of one program over a whole step: a
/// pipe.restore finds the micro-batch it names in slot mb mod depth, and a
/// pipe.save never overwrites a micro-batch a later restore still reads.
LogicalResult verifyActivationBuffers(pipe::ProgramOp program) {
  // How many restores each (buffer, micro-batch) has in the step.
  DenseMap<std::pair<Operation *, int64_t>, int64_t> restoresLeft;
  pipe::forEachInstruction(program, [&](Operation *op, int64_t mb) {
    if (auto restore = dyn_cast<pipe::RestoreOp>(op))
      ++restoresLeft[{restore.getBuffer().getDefiningOp(), mb}];
  });
  struct Slot {
    int64_t mb = -1;
    Operation *savedBy = nullptr;
  };
  DenseMap<std::pair<Operation *, int64_t>, Slot> slots;
  bool ok = true;
  pipe::forEachInstruction(program, [&](Operation *op, int64_t mb) {
    if (!ok)
      return;
    auto save = dyn_cast<pipe::SaveOp>(op);
    auto restore = dyn_cast<pipe::RestoreOp>(op);
    if (!save && !restore)
      return;
    auto decl = (save ? save.getBuffer() : restore.getBuffer())
                    .getDefiningOp<pipe::ActivationBufferOp>();
    if (!decl)
      return; // The op verifier reports it.
    Slot &slot = slots[{decl, mb % decl.getDepth()}];
    if (save) {
      if (slot.savedBy && slot.mb != mb &&
          restoresLeft.lookup({decl, slot.mb}) > 0) {
        InFlightDiagnostic diag =
            op->emitError()
            << "device " << program.getDevice() << ": this save of mb " << mb
            << " into buffer \"" << decl.getName() << "\" (depth "
            << decl.getDepth() << ") overwrites mb " << slot.mb
            << ", which a later pipe.restore still reads";
        diag.attachNote(slot.savedBy->getLoc())
            << "mb " << slot.mb << " was saved here";
        ok = false;
        return;
      }
      slot = {mb, op};
      return;
    }
    if (!slot.savedBy || slot.mb != mb) {
      InFlightDiagnostic diag =
          op->emitError() << "device " << program.getDevice()
                          << ": this restore of mb " << mb << " from buffer \""
                          << decl.getName() << "\" finds ";
      if (slot.savedBy)
        diag << "mb " << slot.mb << " in its slot";
      else
        diag << "nothing saved in its slot";
      ok = false;
      return;
    }
    --restoresLeft[{decl, mb}];
  });
  return success(ok);
}

struct PipeVerifySchedulePass
    : public pipec::impl::PipeVerifyScheduleBase<PipeVerifySchedulePass> {
  using Base::Base;

  void runOnOperation() override {
    markAllAnalysesPreserved();
    FailureOr<ProgramSet> set = collectPrograms(getOperation());
    if (failed(set))
      return signalPassFailure();

    bool ok = true;
    for (pipe::ProgramOp program : set->programs)
      ok &= succeeded(verifyActivationBuffers(program));
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
              << "the other " << set->describe(*problem.related);
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
      auto recorded = program->getAttrOfType<IntegerAttr>(pipe::attrs::kPeakInFlight);
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
