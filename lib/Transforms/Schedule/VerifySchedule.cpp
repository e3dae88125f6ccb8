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
LogicalResult verifyActivationBuffers(pipe::ProgramOp program, int64_t steps) {
  // How many restores each (buffer, micro-batch) has in the step.
  DenseMap<std::pair<Operation *, int64_t>, int64_t> restoresLeft;
  pipe::forEachInstructionInRun(program, steps, [&](Operation *op, int64_t mb) {
    if (auto restore = dyn_cast<pipe::RestoreOp>(op))
      ++restoresLeft[{restore.getBuffer().getDefiningOp(), mb}];
  });
  struct Slot {
    int64_t mb = -1;
    Operation *savedBy = nullptr;
  };
  DenseMap<std::pair<Operation *, int64_t>, Slot> slots;
  bool ok = true;
  pipe::forEachInstructionInRun(program, steps, [&](Operation *op, int64_t mb) {
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

/// The versions a weight buffer of a no-flush program must keep
/// (METHODS.md): PipeDream p - s on stage s (vertical sync: p), 2BW 2;
/// SpecTrain the live weights and, on a stage with a delay (s < p-1), the
/// predicted ones; PipeMare the live weights and, with the discrepancy
/// correction on such a stage, the corrected backward weights.
int64_t theoreticalVersions(pipe::ProgramOp program,
                            pipe::WeightBufferOp buffer, int64_t stages) {
  int64_t stage = buffer.getStage();
  switch (program.getSchedule()) {
  case pipe::ScheduleKind::PipeDream:
    return program.getVerticalSync() ? stages : stages - stage;
  case pipe::ScheduleKind::PipeDream2BW:
    return 2;
  case pipe::ScheduleKind::SpecTrain:
    return stage < stages - 1 ? 2 : 1;
  case pipe::ScheduleKind::PipeMare: {
    bool corrected = false;
    program.walk([&](pipe::UpdateOp u) {
      corrected |= u.getWeights() == buffer.getWeights() &&
                   u.getDiscrepancy().has_value();
    });
    return corrected && stage < stages - 1 ? 2 : 1;
  }
  default:
    return 1;
  }
}

/// SpecTrain and PipeMare keep no stashed versions: the update writes slot
/// 0 in place, and slot 1 holds weights a pipe.predict wrote for the one
/// forward (SpecTrain) or backward (PipeMare) that reads it. Over a run:
/// every read of slot 1 finds a prediction made for its own micro-batch
/// after the buffer's last update, and the prediction's gap is the number
/// of updates the stage makes between that micro-batch's forward and its
/// backward (SpecTrain's d, PipeMare's τ) wherever it matters (after the
/// stage's first update).
LogicalResult verifyPredictedVersions(pipe::ProgramOp program, int64_t steps) {
  bool ok = true;
  // Updates done when each micro-batch's forward and backward ran.
  DenseMap<Operation *, int64_t> updates;
  std::map<std::pair<Operation *, int64_t>, int64_t> atForward, atBackward;
  pipe::forEachInstructionInRun(program, steps, [&](Operation *op, int64_t u) {
    if (auto f = dyn_cast<pipe::ForwardOp>(op); f && f.getWeights())
      atForward[{f.getWeights().getDefiningOp(), u}] =
          updates[f.getWeights().getDefiningOp()];
    if (auto b = dyn_cast<pipe::BackwardOp>(op); b && b.getWeights())
      atBackward[{b.getWeights().getDefiningOp(), u}] =
          updates[b.getWeights().getDefiningOp()];
    if (auto up = dyn_cast<pipe::UpdateOp>(op))
      ++updates[up.getWeights().getDefiningOp()];
  });
  struct Slot {
    int64_t mb = -1;      // the micro-batch a prediction was made for
    int64_t updates = -1; // the buffer's updates when it was made
  };
  std::map<std::pair<Operation *, int64_t>, Slot> slots;
  updates.clear();
  pipe::forEachInstructionInRun(program, steps, [&](Operation *op, int64_t u) {
    if (!ok)
      return;
    if (auto up = dyn_cast<pipe::UpdateOp>(op)) {
      if (up.getVersion() && up.getVersionClock() != pipe::VersionClock::Slot) {
        op->emitError() << "device " << program.getDevice() << ": "
                        << pipe::stringifyScheduleKind(program.getSchedule())
                        << " updates the live weights in place (no version)";
        ok = false;
      }
      ++updates[up.getWeights().getDefiningOp()];
      return;
    }
    if (auto pr = dyn_cast<pipe::PredictOp>(op)) {
      Operation *buffer = pr.getWeights().getDefiningOp();
      slots[{buffer, pr.getTo()}] = {u, updates[buffer]};
      // The micro-batch's forward-to-backward distance, in updates.
      auto f = atForward.find({buffer, u});
      auto b = atBackward.find({buffer, u});
      if (f == atForward.end() || b == atBackward.end() || f->second == 0)
        return;
      int64_t distance = b->second - f->second;
      if (pr.getGap() != distance) {
        op->emitError() << "device " << program.getDevice() << ": mb " << u
                        << " runs its backward " << distance
                        << " updates after its forward, but the prediction's "
                           "gap is "
                        << pr.getGap();
        ok = false;
      }
      return;
    }
    Value weights;
    std::optional<int64_t> version;
    if (auto f = dyn_cast<pipe::ForwardOp>(op)) {
      weights = f.getWeights();
      version = f.getVersion();
    } else if (auto b = dyn_cast<pipe::BackwardOp>(op)) {
      weights = b.getWeights();
      version = b.getVersion();
    }
    if (!weights || !version || *version == 0)
      return;
    Operation *buffer = weights.getDefiningOp();
    Slot slot = slots[{buffer, *version}];
    if (slot.mb != u || slot.updates != updates[buffer]) {
      op->emitError() << "device " << program.getDevice() << ": mb " << u
                      << " reads slot " << *version
                      << ", which holds no prediction made for it since the "
                         "last update";
      ok = false;
    }
  });
  return success(ok);
}

/// Checks the weight versions of a no-flush program over a run: buffer of
/// V versions holds W(v) in slot v mod V (every slot starts as W(0)); an
/// update `%w[v]` must find W(v) there and the newest, and writes W(v+1) to
/// slot v+1 mod V; a forward or backward reading version v (W(0) for v <
/// 0) must find it in its slot, not a version written over it.
LogicalResult verifyWeightVersions(pipe::ProgramOp program, int64_t steps,
                                   int64_t stages) {
  if (!program.isNoFlush())
    return success();
  int64_t m = program.getMicrobatches();
  bool ok = true;
  for (auto buffer : program.getInstructions().getOps<pipe::WeightBufferOp>()) {
    int64_t expected = theoreticalVersions(program, buffer, stages);
    if (buffer.getVersions() != expected) {
      buffer.emitError() << "device " << program.getDevice()
                         << ": the weight buffer of stage " << buffer.getStage()
                         << " keeps " << buffer.getVersions()
                         << " versions, but "
                         << pipe::stringifyScheduleKind(program.getSchedule())
                         << (program.getVerticalSync() ? " with vertical sync" : "")
                         << " on " << stages << " stages needs " << expected;
      ok = false;
    }
  }
  if (!ok)
    return failure();
  if (program.getSchedule() == pipe::ScheduleKind::SpecTrain ||
      program.getSchedule() == pipe::ScheduleKind::PipeMare)
    return verifyPredictedVersions(program, steps);
  struct Versions {
    SmallVector<int64_t> slot; // the version each slot holds
    int64_t newest = 0;
  };
  DenseMap<Operation *, Versions> state;
  auto slotOf = [](int64_t v, int64_t n) { return ((v % n) + n) % n; };
  pipe::forEachInstructionInRun(program, steps, [&](Operation *op, int64_t u) {
    if (!ok)
      return;
    Value weights;
    std::optional<int64_t> version;
    pipe::VersionClock clock = pipe::VersionClock::Slot;
    if (auto f = dyn_cast<pipe::ForwardOp>(op)) {
      weights = f.getWeights();
      version = f.getVersion();
      clock = f.getVersionClock();
    } else if (auto b = dyn_cast<pipe::BackwardOp>(op)) {
      weights = b.getWeights();
      version = b.getVersion();
      clock = b.getVersionClock();
    } else if (auto up = dyn_cast<pipe::UpdateOp>(op)) {
      weights = up.getWeights();
      version = up.getVersion();
      clock = up.getVersionClock();
    }
    if (!weights)
      return;
    auto buffer = weights.getDefiningOp<pipe::WeightBufferOp>();
    if (!buffer)
      return;
    int64_t count = buffer.getVersions();
    Versions &vs = state[buffer];
    if (vs.slot.empty())
      vs.slot.assign(count, 0);
    if (!version || clock == pipe::VersionClock::Slot) {
      if (isa<pipe::UpdateOp>(op)) {
        op->emitError() << "device " << program.getDevice()
                        << ": an update of a no-flush program must name the "
                           "version it starts from (%w[u], %w[t])";
        ok = false;
      }
      return;
    }
    int64_t v = pipe::versionAt(clock, *version, u, m);
    int64_t want = std::max<int64_t>(v, 0);
    int64_t slot = slotOf(v, count);
    if (isa<pipe::UpdateOp>(op)) {
      if (v != vs.newest || vs.slot[slot] != v) {
        op->emitError() << "device " << program.getDevice()
                        << ": the update for mb " << u << " starts from W("
                        << v << "), but the newest weights are W(" << vs.newest
                        << ")";
        ok = false;
        return;
      }
      vs.newest = v + 1;
      vs.slot[slotOf(v + 1, count)] = v + 1;
      return;
    }
    if (vs.slot[slot] != want) {
      InFlightDiagnostic diag =
          op->emitError() << "device " << program.getDevice() << ": mb " << u
                          << " reads W(" << want << ") from slot " << slot
                          << " of the " << count
                          << "-version buffer of stage " << buffer.getStage()
                          << ", which holds W(" << vs.slot[slot] << ")";
      if (vs.slot[slot] > want)
        diag << ": the version was overwritten";
      else
        diag << ": the version does not exist yet";
      ok = false;
    }
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
    int64_t steps = runSteps(set->programs);
    int64_t noFlush = llvm::count_if(
        set->programs, [](pipe::ProgramOp p) { return p.isNoFlush(); });
    if (noFlush && noFlush != int64_t(set->programs.size())) {
      set->programs.front().emitError()
          << "the programs mix no-flush methods and synchronous schedules";
      return signalPassFailure();
    }
    for (pipe::ProgramOp program : set->programs) {
      ok &= succeeded(verifyActivationBuffers(program, steps));
      ok &= succeeded(verifyWeightVersions(program, steps,
                                           int64_t(set->programs.size())));
    }
    for (auto [d, program] : llvm::enumerate(set->programs)) {
      std::vector<int64_t> stages(program.getStages().begin(),
                                  program.getStages().end());
      int64_t total = program.isNoFlush()
                          ? steps * program.getMicrobatches()
                          : program.getMicrobatches();
      for (const sched::OrderProblem &problem : sched::checkComputeOrder(
               set->devices[d], int64_t(d), stages, total)) {
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

    // The stages of one pipeline (with --pipelines P, each of the P
    // pipelines' devices holds the same stage indices).
    int64_t pipelineStages = 0;
    for (pipe::ProgramOp program : set->programs)
      for (int64_t s : program.getStages())
        pipelineStages = std::max(pipelineStages, s + 1);
    for (auto [d, program] : llvm::enumerate(set->programs)) {
      // Advance forward propagation keeps min(p-s+K, M) micro-batches.
      if (std::optional<int64_t> advance = program.getAdvance()) {
        int64_t p = pipelineStages, m = program.getMicrobatches();
        int64_t s = program.getStages().front();
        int64_t expected = sched::theoreticalPeakInFlight(
            sched::ScheduleKind::AdvanceForward, p, m, s, *advance);
        if (result.peakInFlight[d] != expected) {
          program.emitError() << "device " << program.getDevice() << " holds up to "
                              << result.peakInFlight[d]
                              << " micro-batches of activations, but advance "
                              << *advance << " on stage " << s << " of " << p
                              << " with M = " << m << " keeps min(p-s+K, M) = "
                              << expected;
          ok = false;
        }
      }
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
