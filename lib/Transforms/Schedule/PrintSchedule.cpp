//===- PrintSchedule.cpp - pipe-print-schedule ----------------------------===//
//
// Prints the programs of a module as a time table: for people reading a
// schedule, and for golden tests of the scheduler.
//
//===----------------------------------------------------------------------===//
#include "ProgramSimulation.h"
#include "pipec/Transforms/SchedulePasses.h"

#include "llvm/Support/Format.h"
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
    if (forwardCost < 1 || backwardCost < 1 || weightCost < 1) {
      module.emitError() << "pipe-print-schedule: costs must be >= 1";
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
       << " slots; (p-1)/(M+p-1) = "
       << llvm::format("%.3f", sched::theoreticalBubbleFraction(p, m)) << "\n";
    std::vector<int64_t> deviceIds;
    for (pipe::ProgramOp program : set->programs)
      deviceIds.push_back(program.getDevice());
    os << sched::formatTimeTable(set->devices, result, deviceIds);
    os.flush();
  }
};
} // namespace
