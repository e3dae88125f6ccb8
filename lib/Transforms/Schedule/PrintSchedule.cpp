//===- PrintSchedule.cpp - pipe-print-schedule ----------------------------===//
//
// Prints the programs of a module as a time table: for people reading a
// schedule, and for golden tests of the scheduler.
//
//===----------------------------------------------------------------------===//
#include "ProgramSimulation.h"
#include "pipec/Transforms/WholeBatch.h"
#include "pipec/Transforms/SchedulePasses.h"

#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"

#include <map>
#include "llvm/Support/raw_ostream.h"

namespace mlir::pipec {
#define GEN_PASS_DEF_PIPEPRINTSCHEDULE
#include "pipec/Transforms/Passes.h.inc"
} // namespace mlir::pipec

using namespace mlir;
using namespace mlir::pipec;
namespace sched = mlir::pipec::schedule;

namespace {
struct PipePrintSchedulePass
    : public pipec::impl::PipePrintScheduleBase<PipePrintSchedulePass> {
  using Base::Base;

  void runOnOperation() override {
    markAllAnalysesPreserved();
    ModuleOp module = getOperation();
    // The table has a column per time slot: costs are small integers.
    constexpr int64_t kMaxCost = 1000;
    if (forwardCost < 1 || backwardCost < 1 || weightCost < 1 || forwardCost > kMaxCost ||
        backwardCost > kMaxCost || weightCost > kMaxCost) {
      module.emitError() << "pipe-print-schedule: costs must be in [1, " << kMaxCost
                         << "] (time slots of the table)";
      return signalPassFailure();
    }
    FailureOr<ProgramSet> set = collectPrograms(module);
    if (failed(set))
      return signalPassFailure();
    if (set->programs.empty()) {
      module.emitError() << "pipe-print-schedule: no pipe.program to print";
      return signalPassFailure();
    }

    sched::SimulationOptions options;
    options.bufferedSends = bufferedSends;
    options.forwardCost = forwardCost;
    options.backwardCost = options.backwardInputCost = backwardCost;
    options.backwardWeightCost = weightCost;
    sched::SimulationResult result = sched::simulate(set->devices, options);
    if (!result.ok()) {
      emitSimulationFailure(*set, *result.failure, bufferedSends);
      return signalPassFailure();
    }

    pipe::ProgramOp first = set->programs.front();
    int64_t p = int64_t(set->programs.size());
    int64_t m = first.getMicrobatches();
    llvm::raw_ostream &os = llvm::outs();
    os << "schedule \"" << pipe::stringifyScheduleKind(first.getSchedule())
       << "\": " << p << " device" << (p == 1 ? "" : "s") << ", " << m
       << " micro-batch" << (m == 1 ? "" : "es") << ", " << result.makespan
       << " slots";
    // A synchronous step's bubble; a no-flush run idles only while it fills
    // and drains.
    if (!first.isNoFlush())
      os << "; (p-1)/(M+p-1) = "
         << llvm::format("%.3f", sched::theoreticalBubbleFraction(p, m));
    os << "\n";
    if (first.isNoFlush())
      os << "no flush: a run of " << runSteps(set->programs)
         << " steps (micro-batches 0.." << runSteps(set->programs) * m - 1
         << ") and its drain; idle only while the pipeline fills and "
            "drains\n";
    std::vector<int64_t> deviceIds;
    for (pipe::ProgramOp program : set->programs)
      deviceIds.push_back(program.getDevice());
    os << sched::formatTimeTable(set->devices, result, deviceIds);
    // --batchnorm full-batch: devices whose stage runs once on all M
    // micro-batches (shown as M forwards and M backwards in a row: they wait
    // for every micro-batch and serialise them).
    SmallVector<int64_t> whole;
    for (pipe::ProgramOp program : set->programs)
      if (llvm::any_of(program.getInstructions().getOps<pipe::ForwardOp>(),
                       [](pipe::ForwardOp f) {
                         return f->hasAttr(wholebatch::kWholeBatch);
                       }))
        whole.push_back(program.getDevice());
    if (!whole.empty()) {
      os << "whole-batch stages (--batchnorm full-batch) on device"
         << (whole.size() == 1 ? "" : "s");
      for (int64_t d : whole)
        os << " " << d;
      os << ": forward and backward once per step on all " << m
         << " micro-batches\n";
    }
    // The weight version each forward and backward reads.
    for (pipe::ProgramOp program : set->programs) {
      if (!program.isNoFlush())
        continue;
      auto text = [](pipe::VersionClock clock, int64_t version) {
        std::string s = clock == pipe::VersionClock::Step ? "t" : "u";
        if (version)
          s += (version > 0 ? " + " : " - ") + std::to_string(std::abs(version));
        return s;
      };
      for (auto buffer :
           program.getInstructions().getOps<pipe::WeightBufferOp>()) {
        Value weights = buffer.getWeights();
        // Updates done when a steady-state micro-batch's forward and
        // backward ran (methods that update in place name no versions).
        std::map<int64_t, int64_t> atForward, atBackward;
        int64_t updates = 0;
        pipe::forEachInstructionInRun(
            program, runSteps(set->programs), [&](Operation *op, int64_t u) {
              if (auto f = dyn_cast<pipe::ForwardOp>(op); f && f.getWeights() == weights)
                atForward[u] = updates;
              if (auto b = dyn_cast<pipe::BackwardOp>(op); b && b.getWeights() == weights)
                atBackward[u] = updates;
              if (auto up = dyn_cast<pipe::UpdateOp>(op); up && up.getWeights() == weights)
                ++updates;
            });
        int64_t steady = atBackward.empty() ? 0 : atBackward.rbegin()->first;
        auto live = [&](const std::map<int64_t, int64_t> &at) {
          auto it = at.find(steady);
          return it == at.end() ? std::string("W")
                                : "W(" + text(pipe::VersionClock::MicroBatch,
                                              it->second - steady) + ")";
        };
        // What a slot other than 0 holds: the pipe.predict that writes it.
        auto predicted = [&](int64_t slot, const std::string &base) {
          std::string described = "slot " + std::to_string(slot);
          program.walk([&](pipe::PredictOp pr) {
            if (pr.getWeights() != weights || pr.getTo() != slot)
              return;
            std::string gap = std::to_string(pr.getGap());
            described = pr.getDirection() == pipe::PredictDirection::Velocity
                            ? base + " - " + gap + "*lr*v (predicted)"
                            : base + " - " + gap + "*delta (corrected)";
          });
          return described;
        };
        std::string fwd = "-", bwd = "-", update = "none";
        // What a forward or backward of this buffer reads.
        auto reads = [&](auto compute, std::string &out,
                         const std::map<int64_t, int64_t> &at) {
          if (!compute || compute.getWeights() != weights || !compute.getVersion())
            return;
          int64_t version = *compute.getVersion();
          if (compute.getVersionClock() != pipe::VersionClock::Slot)
            out = "W(" + text(compute.getVersionClock(), version) + ")";
          else
            out = version ? predicted(version, live(at)) : live(at);
        };
        program.walk([&](Operation *op) {
          reads(dyn_cast<pipe::ForwardOp>(op), fwd, atForward);
          reads(dyn_cast<pipe::BackwardOp>(op), bwd, atBackward);
          if (auto u = dyn_cast<pipe::UpdateOp>(op); u && u.getWeights() == weights) {
            if (u.getVersion())
              update = u.getVersionClock() == pipe::VersionClock::Step
                           ? "one per step (t)"
                           : "one per micro-batch (u)";
            else if (u.getMb())
              update = "one per micro-batch (u), in place";
            else
              return;
            auto g = [](double v) {
              std::string out;
              llvm::raw_string_ostream(out) << llvm::format("%g", v);
              return out;
            };
            if (auto scale = u.getLrScale()) {
              double inv = 1.0 / scale->convertToDouble();
              update += std::abs(inv - std::round(inv)) < 1e-9
                            ? "; lr * (1/" + g(std::round(inv)) + ")"
                            : "; lr * " + g(scale->convertToDouble());
              if (auto k = u.getAnnealSteps())
                update += "^(1 - min(k/" + std::to_string(*k) +
                          ", 1)) at update k";
            }
            if (auto gamma = u.getDiscrepancy())
              update += "; delta <- " + g(gamma->convertToDouble()) +
                        "*delta + " + g(1.0 - gamma->convertToDouble()) +
                        "*(W(k+1) - W(k))";
          }
        });
        os << "device " << program.getDevice() << " stage "
           << buffer.getStage() << ": " << buffer.getVersions()
           << (buffer.getVersions() == 1 ? " version" : " versions")
           << "; forward of mb u (step t) reads " << fwd << ", backward "
           << bwd << "; updates: " << update << "\n";
      }
    }
    os.flush();
  }
};
} // namespace
