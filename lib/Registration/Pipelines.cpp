//===- Pipelines.cpp - pipec's named pass pipelines ------------------------===//
#include "pipec/Pipelines/Pipelines.h"

#include "pipec/Conversion/Passes.h"
#include "pipec/Transforms/PartitionPasses.h"
#include "pipec/Transforms/Passes.h"
#include "pipec/Transforms/SchedulePasses.h"

#include "mlir/Pass/PassRegistry.h"

using namespace mlir;
using namespace mlir::pipec;

// Indexed by the enums' values, in their declaration order.
StringRef mlir::pipec::stringify(ScheduleOption value) {
  static constexpr StringLiteral names[] = {"gpipe", "1f1b", "afp"};
  return names[static_cast<int>(value)];
}

StringRef mlir::pipec::stringify(MethodOption value) {
  static constexpr StringLiteral names[] = {"sync", "pipedream", "2bw",
                                            "spectrain", "pipemare"};
  return names[static_cast<int>(value)];
}

StringRef mlir::pipec::stringify(PartitionOption value) {
  static constexpr StringLiteral names[] = {"balanced", "dp", "manual",
                                            "layers"};
  return names[static_cast<int>(value)];
}

StringRef mlir::pipec::stringify(OptimizerOption value) {
  static constexpr StringLiteral names[] = {"sgd",  "momentum", "nesterov",
                                            "adam", "adamw",    "adagrad"};
  return names[static_cast<int>(value)];
}

StringRef mlir::pipec::stringify(TargetOption value) {
  static constexpr StringLiteral names[] = {"cpu", "cuda"};
  return names[static_cast<int>(value)];
}

void mlir::pipec::buildFusionPipeline(OpPassManager &pm, ArrayRef<std::string> cuts,
                                      bool fuseAttention) {
  PipeFoldDropoutOptions dropout;
  dropout.keep = llvm::to_vector(cuts);
  pm.addPass(createPipeFoldDropout(dropout));
  PipeFuseGeluOptions fuse;
  fuse.keep = llvm::to_vector(cuts);
  pm.addPass(createPipeFuseGelu(fuse));
  if (fuseAttention) {
    PipeFuseAttentionOptions attention;
    attention.keep = llvm::to_vector(cuts);
    pm.addPass(createPipeFuseAttention(attention));
  }
}

void mlir::pipec::buildStagesPipeline(OpPassManager &pm,
                                      const TrainPipelineOptions &options) {
  PipeAssignStagesOptions assign;
  assign.stages = options.stages;
  assign.strategy = stringify(options.partition).str();
  assign.cuts = llvm::to_vector(options.cuts);
  assign.profile = options.profile;
  if (options.partition == PartitionOption::DP) {
    assign.peakGflops = options.peakGflops;
    assign.memoryGBps = options.memoryGBps;
    assign.linkGBps = options.linkGBps;
  }
  buildFusionPipeline(pm, llvm::to_vector(options.cuts), options.fuseAttention);
  pm.addPass(createPipeAssignStages(assign));
  pm.addPass(createPipeAutodiff());
  PipeAddOptimizerOptions optimizer;
  optimizer.kind = stringify(options.optimizer).str();
  optimizer.lr = options.lr;
  if (options.optimizer == OptimizerOption::Momentum ||
      options.optimizer == OptimizerOption::Nesterov)
    optimizer.momentum = options.momentum;
  optimizer.weightDecay = options.weightDecay;
  optimizer.lrSchedule = options.lrSchedule;
  optimizer.warmupSteps = options.warmupSteps;
  optimizer.decaySteps = options.decaySteps;
  optimizer.minLr = options.minLr;
  optimizer.clipGradNorm = options.clipGradNorm;
  pm.addPass(createPipeAddOptimizer(optimizer));
  PipeMicrobatchOptions microbatch;
  microbatch.microbatches = options.microbatches;
  microbatch.batchnorm = options.batchnorm;
  // Methods that update per micro-batch train on each micro-batch's own
  // mean (METHODS.md); the others on the step's.
  microbatch.ignoredLabels = options.method == MethodOption::PipeDream ||
                                     options.method == MethodOption::SpecTrain ||
                                     options.method == MethodOption::PipeMare
                                 ? "micro-batch"
                                 : "step";
  // Data-parallel pipelines average their gradients: the mean is over all
  // their batches' counted labels.
  microbatch.replicas =
      options.pipelines > 1 && options.replication == "dp" ? int64_t(options.pipelines)
                                                           : int64_t(1);
  pm.addPass(createPipeMicrobatch(microbatch));
  PipeSplitStagesOptions split;
  split.recompute = options.recompute ||
                    options.method == MethodOption::SpecTrain ||
                    options.method == MethodOption::PipeMare;
  pm.addPass(createPipeSplitStages(split));
  pm.addPass(createPipeInsertTransfers());
}

void mlir::pipec::buildSchedulePipeline(OpPassManager &pm,
                                        const TrainPipelineOptions &options) {
  PipeScheduleOptions schedule;
  schedule.kind = options.method == MethodOption::Sync
                      ? stringify(options.schedule).str()
                      : stringify(options.method).str();
  schedule.verticalSync = options.verticalSync;
  schedule.lrWarmup = options.lrWarmup;
  schedule.discrepancyCorrection = options.discrepancyCorrection;
  schedule.advance = options.advance;
  schedule.pipelines = options.pipelines;
  schedule.replication = options.replication;
  schedule.avgAlpha = options.avgAlpha;
  schedule.avgPeriod = options.avgPeriod;
  schedule.loop = options.loop;
  pm.addPass(createPipeSchedule(schedule));
  pm.addPass(createPipeVerifySchedule());
  pm.addPass(createPipePackTransfers());
}

void mlir::pipec::buildLowerDevicePipeline(OpPassManager &pm,
                                           const LowerDeviceOptions &options) {
  LowerProgramsOptions lower;
  lower.device = options.device;
  lower.target = stringify(options.target).str();
  lower.deferWeightGrads = options.deferWeightGrads;
  lower.eval = options.eval;
  pm.addPass(createLowerPrograms(lower));
}

void mlir::pipec::registerPipelines() {
  PassPipelineRegistration<TrainPipelineOptions>(
      "pipe-train-pipeline",
      "what pipe-compile runs up to the per-device programs: partition, "
      "autodiff, optimizer, micro-batching, stages, transfers, schedule, "
      "verify, packed transfers",
      [](OpPassManager &pm, const TrainPipelineOptions &options) {
        buildStagesPipeline(pm, options);
        buildSchedulePipeline(pm, options);
      });
  PassPipelineRegistration<TrainPipelineOptions>(
      "pipe-stages-pipeline",
      "the first half of pipe-train-pipeline: up to the pipe.stage functions "
      "and their transfers",
      buildStagesPipeline);
  PassPipelineRegistration<TrainPipelineOptions>(
      "pipe-schedule-pipeline",
      "the second half of pipe-train-pipeline: schedule, verify and pack transfers (M and "
      "the optimizer from the module)",
      buildSchedulePipeline);
  PassPipelineRegistration<LowerDeviceOptions>(
      "pipe-lower-device",
      "one device's program to its @pipe_step and kernel calls "
      "(pipe-lower-programs)",
      buildLowerDevicePipeline);
}
