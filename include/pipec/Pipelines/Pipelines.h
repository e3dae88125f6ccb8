//===- Pipelines.h - pipec's named pass pipelines ---------------*- C++ -*-===//
//
// The flow pipe-compile runs, as pass pipelines with typed options, so that
// `pipe-opt --pipe-train-pipeline='stages=4 microbatches=8 schedule=1f1b'`
// produces the verified per-device programs pipe-compile produces, and
// `pipe-opt --pipe-lower-device='device=1'` one device's @pipe_step as
// pipert calls (pipe-compile then runs pipe-lower-to-llvm's conversions).
// pipe-compile builds its pass managers from these same functions.
//
//===----------------------------------------------------------------------===//
#ifndef PIPEC_PIPELINES_PIPELINES_H
#define PIPEC_PIPELINES_PIPELINES_H

#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassOptions.h"

namespace mlir::pipec {

enum class ScheduleOption { GPipe, OneFOneB, AdvanceForward };
/// sync: the schedule (GPipe, 1F1B); the no-flush methods of METHODS.md.
enum class MethodOption { Sync, PipeDream, TwoBW, SpecTrain, PipeMare };
enum class PartitionOption { Balanced, DP, Manual, Layers };
enum class OptimizerOption { SGD, Momentum, Nesterov, Adam, AdamW, Adagrad };
enum class TargetOption { CPU, CUDA };

/// The names the command lines use ("1f1b", "dp", "adamw", "cuda", ...).
llvm::StringRef stringify(ScheduleOption value);
llvm::StringRef stringify(MethodOption value);
llvm::StringRef stringify(PartitionOption value);
llvm::StringRef stringify(OptimizerOption value);
llvm::StringRef stringify(TargetOption value);

struct TrainPipelineOptions : public PassPipelineOptions<TrainPipelineOptions> {
  Option<int64_t> stages{*this, "stages",
                         llvm::cl::desc("pipeline stages (devices)"),
                         llvm::cl::init(1)};
  Option<int64_t> microbatches{*this, "microbatches",
                               llvm::cl::desc("micro-batches per step"),
                               llvm::cl::init(1)};
  Option<ScheduleOption> schedule{
      *this, "schedule", llvm::cl::desc("the pipeline schedule"),
      llvm::cl::init(ScheduleOption::OneFOneB),
      llvm::cl::values(
          clEnumValN(ScheduleOption::GPipe, "gpipe", "all forwards, then all backwards"),
          clEnumValN(ScheduleOption::OneFOneB, "1f1b",
                     "one forward one backward (PipeDream-Flush)"),
          clEnumValN(ScheduleOption::AdvanceForward, "afp",
                     "advance forward propagation: 1F1B with `advance` more "
                     "warm-up forwards"))};
  Option<bool> fuseAttention{
      *this, "fuse-attention",
      llvm::cl::desc("fuse exported multi-head attention into onnx.Attention "
                     "(pipe-fuse-attention)"),
      llvm::cl::init(true)};
  Option<int64_t> advance{
      *this, "advance",
      llvm::cl::desc("afp: warm-up forwards beyond 1F1B's (0: 1F1B, >= M: GPipe)"),
      llvm::cl::init(0)};
  Option<MethodOption> method{
      *this, "method",
      llvm::cl::desc("synchronous (the schedule) or a no-flush method"),
      llvm::cl::init(MethodOption::Sync),
      llvm::cl::values(
          clEnumValN(MethodOption::Sync, "sync", "the synchronous schedule"),
          clEnumValN(MethodOption::PipeDream, "pipedream",
                     "1F1B without flush, weight stashing, an update per "
                     "micro-batch"),
          clEnumValN(MethodOption::TwoBW, "2bw",
                     "PipeDream-2BW: two weight versions, an update per step"),
          clEnumValN(MethodOption::SpecTrain, "spectrain",
                     "no stashing; forwards on weights predicted along the "
                     "optimizer's direction"),
          clEnumValN(MethodOption::PipeMare, "pipemare",
                     "no stashing; optional per-stage lr warm-up (T1) and "
                     "backward-weight correction (T2)"))};
  Option<int64_t> lrWarmup{
      *this, "lr-warmup",
      llvm::cl::desc("pipemare T1: lr/tau annealed to lr over K updates (0: off)"),
      llvm::cl::init(0)};
  Option<double> discrepancyCorrection{
      *this, "discrepancy-correction",
      llvm::cl::desc("pipemare T2: delta's decay gamma in [0, 1) (default: off)"),
      llvm::cl::init(-1.0)};
  Option<bool> recompute{
      *this, "recompute",
      llvm::cl::desc("backwards recompute their stage's forward from its inputs "
                     "(less activation memory; always on for spectrain and "
                     "pipemare)"),
      llvm::cl::init(false)};
  Option<bool> verticalSync{
      *this, "vertical-sync",
      llvm::cl::desc("pipedream: every stage reads W(u - (p-1))"),
      llvm::cl::init(false)};
  Option<int64_t> pipelines{
      *this, "pipelines",
      llvm::cl::desc("P pipelines of the stages (P*stages devices)"),
      llvm::cl::init(1)};
  Option<std::string> replication{
      *this, "replication",
      llvm::cl::desc("pipelines > 1: dp (gradient averaging) or avgpipe "
                     "(elastic averaging)"),
      llvm::cl::init("dp")};
  Option<double> avgAlpha{*this, "avg-alpha",
                          llvm::cl::desc("avgpipe: averaging rate in (0, 1)"),
                          llvm::cl::init(0.5)};
  Option<int64_t> avgPeriod{*this, "avg-period",
                            llvm::cl::desc("avgpipe: average every T steps"),
                            llvm::cl::init(1)};
  Option<PartitionOption> partition{
      *this, "partition", llvm::cl::desc("how ops are assigned to stages"),
      llvm::cl::init(PartitionOption::Balanced),
      llvm::cl::values(
          clEnumValN(PartitionOption::Balanced, "balanced", "cost-model DP over cut points"),
          clEnumValN(PartitionOption::DP, "dp", "PipeDream's dynamic program"),
          clEnumValN(PartitionOption::Manual, "manual", "cuts by ONNX node name"),
          clEnumValN(PartitionOption::Layers, "layers", "equal runs of layers"))};
  Option<std::string> profile{
      *this, "profile",
      llvm::cl::desc("pipe-profile JSON: measured op times for the partitioner"),
      llvm::cl::init("")};
  ListOption<std::string> cuts{
      *this, "cuts",
      llvm::cl::desc("ONNX node names ending stages 0..p-2 (partition=manual)")};
  // partition=dp weighs compute against transfers: the rates of the
  // machine (pipe-compile sets its target's; the defaults are an
  // accelerator's).
  Option<double> peakGflops{*this, "peak-gflops",
                            llvm::cl::desc("dp cost model: peak arithmetic rate, GFLOP/s"),
                            llvm::cl::init(100000.0)};
  Option<double> memoryGBps{*this, "memory-gbps",
                            llvm::cl::desc("dp cost model: memory bandwidth, GB/s"),
                            llvm::cl::init(2000.0)};
  Option<double> linkGBps{*this, "link-gbps",
                          llvm::cl::desc("dp cost model: bandwidth between stages, GB/s"),
                          llvm::cl::init(25.0)};
  Option<OptimizerOption> optimizer{
      *this, "optimizer", llvm::cl::desc("the optimizer"),
      llvm::cl::init(OptimizerOption::SGD),
      llvm::cl::values(clEnumValN(OptimizerOption::SGD, "sgd", "plain SGD"),
                       clEnumValN(OptimizerOption::Momentum, "momentum", "SGD with momentum"),
                       clEnumValN(OptimizerOption::Nesterov, "nesterov", "Nesterov momentum"),
                       clEnumValN(OptimizerOption::Adam, "adam", "Adam"),
                       clEnumValN(OptimizerOption::AdamW, "adamw", "AdamW"),
                       clEnumValN(OptimizerOption::Adagrad, "adagrad", "Adagrad"))};
  Option<double> lr{*this, "lr", llvm::cl::desc("learning rate"),
                    llvm::cl::init(0.01)};
  Option<double> momentum{*this, "momentum",
                          llvm::cl::desc("momentum (momentum, nesterov)"),
                          llvm::cl::init(0.9)};
  Option<double> weightDecay{*this, "weight-decay",
                             llvm::cl::desc("weight decay (default: none)"),
                             llvm::cl::init(-1.0)};
  Option<std::string> lrSchedule{
      *this, "lr-schedule",
      llvm::cl::desc("learning-rate schedule: constant, linear or cosine"),
      llvm::cl::init("constant")};
  Option<int64_t> warmupSteps{*this, "warmup-steps",
                              llvm::cl::desc("linear warm-up steps of the schedule"),
                              llvm::cl::init(0)};
  Option<int64_t> decaySteps{
      *this, "decay-steps",
      llvm::cl::desc("linear, cosine: the step where the decay ends"),
      llvm::cl::init(0)};
  Option<double> minLr{*this, "min-lr",
                       llvm::cl::desc("linear, cosine: the rate at the end of the decay"),
                       llvm::cl::init(0.0)};
  Option<double> clipGradNorm{
      *this, "clip-grad-norm",
      llvm::cl::desc("scale each step's gradients to a global L2 norm of at most this "
                     "(synchronous schedules; 0: off)"),
      llvm::cl::init(0.0)};
  Option<std::string> batchnorm{
      *this, "batchnorm",
      llvm::cl::desc("training-mode BatchNormalization statistics: "
                     "micro-batch (each micro-batch its own) or full-batch "
                     "(the whole mini-batch's: its stages run once per step "
                     "on all micro-batches, GPipe only)"),
      llvm::cl::init("micro-batch")};
  Option<bool> loop{*this, "loop",
                    llvm::cl::desc("micro-batch loops in the programs (false: "
                                   "one instruction per micro-batch)"),
                    llvm::cl::init(true)};
};

/// Partition, differentiate, add the optimizer, micro-batch, split into
/// stages and insert transfers: the module of pipe.stage ops
/// (pipe-compile's 1-stages.mlir).
void buildStagesPipeline(OpPassManager &pm, const TrainPipelineOptions &options);

/// The fusions that open buildStagesPipeline: pipe-fold-dropout,
/// pipe-fuse-gelu and (where
/// `fuseAttention`) pipe-fuse-attention, leaving chains that contain a node
/// of `cuts` as they are. pipe-compile runs them on a copy of the forward
/// for the planner, so that it partitions the graph the compile will.
void buildFusionPipeline(OpPassManager &pm, ArrayRef<std::string> cuts, bool fuseAttention);
/// Schedule and verify: one pipe.program per device (2-programs.mlir). M
/// and the optimizer come from the module (pipe-microbatch and
/// pipe-add-optimizer record them).
void buildSchedulePipeline(OpPassManager &pm, const TrainPipelineOptions &options);

struct LowerDeviceOptions : public PassPipelineOptions<LowerDeviceOptions> {
  Option<int64_t> device{*this, "device",
                         llvm::cl::desc("the device whose program to lower"),
                         llvm::cl::init(0)};
  Option<TargetOption> target{
      *this, "target", llvm::cl::desc("the runtime backend"),
      llvm::cl::init(TargetOption::CPU),
      llvm::cl::values(clEnumValN(TargetOption::CPU, "cpu", "OpenBLAS + MPI"),
                       clEnumValN(TargetOption::CUDA, "cuda", "cuBLAS + CUDA + NCCL"))};
  Option<int64_t> deferWeightGrads{
      *this, "defer-weight-grads",
      llvm::cl::desc("linear layers' weight and bias gradients for groups of "
                     "micro-batches of at most this many rows together; on a "
                     "stage that sends input gradients, a micro-batch's alone "
                     "after its backward's sends where no group fits (0: in "
                     "the backward)"),
      llvm::cl::init(64)};
  Option<bool> eval{*this, "eval",
                    llvm::cl::desc("also the evaluation entry @pipe_eval (as "
                                   "pipe-compile builds it)"),
                    llvm::cl::init(true)};
};

/// One device's program to its @pipe_step and kernel calls
/// (pipe-lower-programs; pipe-compile's device<k>-runtime.mlir).
void buildLowerDevicePipeline(OpPassManager &pm, const LowerDeviceOptions &options);

/// Registers pipe-train-pipeline, pipe-stages-pipeline,
/// pipe-schedule-pipeline and pipe-lower-device.
void registerPipelines();

} // namespace mlir::pipec

#endif
