//===- pipe-compile.cpp - ONNX model → per-device training executables ----===//
//
//   pipe-compile MODEL.onnx -o OUT [--batch B] [--optimizer sgd|momentum|
//       nesterov|adam|adamw|adagrad] [--lr F] [--momentum F]
//       [--weight-decay F] [--lr-schedule constant|linear|cosine
//       [--warmup-steps W] [--decay-steps N] [--min-lr F]]
//       [--target cpu|cuda] [--input-shape x=8x32]
//       [--emit-mlir] [--forward-only]
//       [--stages N --microbatches M --schedule gpipe|1f1b|afp [--advance K]
//        [--method sync|pipedream|2bw|spectrain|pipemare|avgpipe
//         [--vertical-sync] [--lr-warmup K] [--discrepancy-correction G]]
//        [--recompute] [--batchnorm micro-batch|full-batch]
//        [--pipelines P [--avg-alpha A] [--avg-period T]]
//        [--partition balanced|manual|layers] [--cut NODE,...]
//        [--from-mlir PIPE.mlir] [--show-schedule]]
//
// Pipeline parallelism (--stages N > 1, --microbatches M > 1: one device
// accumulating the gradients of M micro-batches, or --from-mlir): import →
// pipe-assign-stages → pipe-autodiff → pipe-add-optimizer → pipe-microbatch →
// pipe-split-stages → pipe-insert-transfers → pipe-schedule →
// pipe-verify-schedule → pipe-pack-transfers → pipe-lower-programs (once per
// device) → LLVM →
// OUT/device0 ... OUT/device<N-1> and OUT/plan.json. `--from-mlir PIPE.mlir`
// starts instead from pipe IR: `pipe.stage` functions (then pipe-schedule
// builds the programs with --schedule/--microbatches) or complete
// `pipe.program`s; MODEL.onnx then only provides the parameters' initial
// values (the @forward function's pipe.init, matched by pipe.param name) and
// the model that --save writes; every parameter and input the stages take
// must be its, with the same types (else a one-line error).
//
// Chains the passes (import → pipe-autodiff → pipe-add-optimizer →
// pipe-lower-to-runtime → LLVM), then emits OUT/device0 (an executable that
// runs pipert_train_main), OUT/model.onnx (for --save) and OUT/plan.json.
// With --emit-mlir the IR after each stage is kept as OUT/<n>-<stage>.mlir.
//
//===----------------------------------------------------------------------===//
#include "../common/MpiFlags.h"
#include "pipec/Transforms/WholeBatch.h"
#include "pipec/Conversion/Passes.h"
#include "dialects/pipe/PipeAttrNames.h"
#include "llvm/ADT/SetVector.h"
#include "pipec/Conversion/RuntimeABI.h"
#include "pipec/Autodiff/Inference.h"
#include "pipec/Autodiff/LrSchedule.h"
#include "pipec/Import/OnnxImporter.h"
#include "pipec/Pipelines/Pipelines.h"
#include "pipec/Target/Plan.h"
#include "pipec/Transforms/SchedulePasses.h"
#include "pipec/InitAll.h"
#include "pipec/Support/Diagnostics.h"
#include "pipec/Support/Version.h"
#include "pipec/Target/Executable.h"

#include "dialects/pipe/PipeDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Parser/Parser.h"
#include "mlir/IR/AsmState.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/raw_ostream.h"

#include "pipec/Analysis/Profile.h"
#include "pipec/Transforms/Planner.h"

#include <chrono>
#include <cmath>
#include <limits>
#include <cstdio>
#include <map>
#include <set>
#include <tuple>

using namespace mlir;
namespace pipe = mlir::pipec::pipe;
namespace cl = llvm::cl;

// --help shows these groups only (LLVM's options: --help-hidden).
static cl::OptionCategory trainingCat("Training");
static cl::OptionCategory pipelineCat("Pipeline parallelism");
static cl::OptionCategory methodCat("Asynchronous methods and several pipelines");
static cl::OptionCategory outputCat("Input and output");
static cl::OptionCategory plannerCat("Planner");

static cl::opt<std::string> modelPath(cl::Positional, cl::cat(outputCat), cl::desc("<model.onnx>"),
                                      cl::Required);
static cl::opt<std::string> outDir("o", cl::cat(outputCat), cl::desc("Output directory"),
                                   cl::value_desc("OUT"), cl::Required);
static cl::opt<int64_t> batch("batch", cl::cat(trainingCat),
                              cl::desc("Samples per step (binds the symbolic "
                                       "'batch' dimension) (default: the model's batch)"),
                              cl::init(0));
static cl::opt<std::string>
    optimizer("optimizer", cl::cat(trainingCat),
              cl::desc("sgd, momentum, nesterov, adam, adamw or adagrad (default: sgd)"),
              cl::init("sgd"));
static cl::opt<double> lr("lr", cl::cat(trainingCat), cl::desc("Learning rate (default: 0.01)"), cl::init(0.01));
static cl::opt<double> momentum("momentum", cl::cat(trainingCat),
                                cl::desc("Momentum (momentum, nesterov) (default: 0.9)"),
                                cl::init(0.9));
static cl::opt<double> weightDecay("weight-decay", cl::cat(trainingCat), cl::desc("Weight decay"),
                                   cl::init(0.0));
static cl::opt<std::string>
    lrScheduleKind("lr-schedule", cl::cat(trainingCat),
                   cl::desc("constant, linear or cosine: the learning rate of each step "
                            "(after --warmup-steps from 0), decaying to --min-lr at step "
                            "--decay-steps (Hugging Face's schedules; default: constant)"),
                   cl::init("constant"));
static cl::opt<int64_t> warmupSteps("warmup-steps", cl::cat(trainingCat),
                                    cl::desc("Steps of linear learning-rate warm-up from 0 "
                                             "(default: 0)"),
                                    cl::init(0));
static cl::opt<int64_t> decaySteps("decay-steps", cl::cat(trainingCat),
                                   cl::desc("--lr-schedule linear or cosine: the step where "
                                            "the decay reaches --min-lr (e.g. pipe-run's --steps)"),
                                   cl::init(0));
static cl::opt<double> minLr("min-lr", cl::cat(trainingCat),
                             cl::desc("--lr-schedule linear or cosine: the learning rate at "
                                      "the end of the decay (default: 0)"),
                             cl::init(0.0));
static cl::opt<double> clipGradNorm(
    "clip-grad-norm", cl::cat(trainingCat), cl::value_desc("MAX"),
    cl::desc("Scale each step's gradients to a global L2 norm of at most MAX before the "
             "update (torch.nn.utils.clip_grad_norm_; in a pipeline the norm is over every "
             "stage's gradients; synchronous schedules and AvgPipe, each pipeline its own; default: no clipping)"),
    cl::init(0.0));
static cl::opt<std::string> target("target", cl::cat(outputCat), cl::desc("cpu or cuda (default: cpu)"),
                                   cl::init("cpu"));
static cl::list<std::string>
    inputShapes("input-shape", cl::cat(trainingCat),
                cl::desc("Bind a graph input's shape (x=32x784) or a symbolic "
                         "dimension (batch=32)"),
                cl::value_desc("name=DxD..."));
static cl::opt<std::string> lossOutput(
    "loss", cl::cat(trainingCat),
    cl::desc("The graph output that is the training loss (default: detected)"),
    cl::value_desc("NAME"));
static cl::list<std::string> frozenParams(
    "frozen", cl::cat(trainingCat), cl::CommaSeparated,
    cl::desc("Initializers to keep frozen (not trained; in a pipeline, state of the stage "
             "reading them)"),
    cl::value_desc("a,b,..."));
static cl::opt<bool> emitMlir("emit-mlir", cl::cat(outputCat),
                              cl::desc("Keep the IR after each stage in OUT/"));
static cl::opt<bool>
    forwardOnly("forward-only", cl::cat(trainingCat),
                cl::desc("Compile the forward pass only (the loss, no "
                         "gradients or updates)"));

static cl::opt<int64_t> numStages("stages", cl::cat(pipelineCat),
                                   cl::desc("Pipeline stages (devices) (default: 1)"),
                                   cl::init(1));
static cl::opt<int64_t> microbatches("microbatches", cl::cat(pipelineCat),
                                     cl::desc("Micro-batches per step; on one device (--stages 1) the "
                                              "step accumulates their gradients (default: 1)"),
                                     cl::init(1));
static cl::opt<int64_t> deferWeightGrads(
    "defer-weight-grads", cl::cat(pipelineCat), cl::value_desc("ROWS"),
    cl::desc("Synchronous schedules with M > 1: a linear layer's weight and bias "
             "gradients are computed for G micro-batches at once, G the largest "
             "divisor of M whose G micro-batches have at most ROWS rows (one GEMM "
             "over G*rows instead of G small ones); where G is 1, on a stage that "
             "sends input gradients, each micro-batch's after those sends (the "
             "peer gets its gradient sooner); 0: in the backward (default: 64)"),
    cl::init(64));
static cl::opt<std::string> scheduleKind("schedule", cl::cat(pipelineCat),
                                         cl::desc("gpipe, 1f1b or afp (default: 1f1b)"),
                                         cl::init("1f1b"));
static cl::opt<int64_t>
    advance("advance", cl::cat(pipelineCat),
            cl::desc("--schedule afp: warm-up forwards beyond 1F1B's (AvgPipe's "
                     "advance forward propagation; 0: 1F1B, >= M: GPipe) (default: 0)"),
            cl::init(0));
static cl::opt<std::string>
    method("method", cl::cat(methodCat),
           cl::desc("sync (the --schedule), or a no-flush method: pipedream "
                    "(weight stashing, an update per micro-batch), 2bw "
                    "(two versions, an update per step), spectrain (weight "
                    "prediction) or pipemare (no stashing, --lr-warmup, "
                    "--discrepancy-correction); or avgpipe (--pipelines) (default: sync)"),
           cl::init("sync"));
static cl::opt<int64_t>
    lrWarmup("lr-warmup", cl::cat(methodCat),
             cl::desc("--method pipemare (T1): stage s starts at lr/tau_s, "
                      "tau_s = p-1-s, and anneals geometrically to lr over K "
                      "updates (default: 0, off)"),
             cl::init(0));
static cl::opt<std::string> discrepancyCorrection(
    "discrepancy-correction", cl::cat(methodCat), cl::value_desc("G"),
    cl::desc("--method pipemare (T2): backward weights W - tau_s*delta, "
             "delta <- G*delta + (1-G)*(W(k+1) - W(k)); G in [0, 1) (0.9 is "
             "METHODS.md's default)"),
    cl::init(""));
static cl::opt<bool> noFuseAttention(
    "no-fuse-attention", cl::cat(pipelineCat),
    cl::desc("keep attention as the exported MatMul/Softmax/MatMul ops "
             "instead of one fused onnx.Attention per head group (for "
             "comparing; the fused op is faster and holds less memory)"));
static cl::opt<bool>
    recompute("recompute", cl::cat(pipelineCat),
              cl::desc("backwards recompute their stage's forward from its "
                       "inputs: only stage inputs stay in flight (always on "
                       "for spectrain and pipemare)"));
static cl::opt<int64_t>
    numPipelines("pipelines", cl::cat(pipelineCat),
                 cl::desc("P pipelines of --stages each (P*stages devices): "
                          "data parallelism across pipelines, or AvgPipe with "
                          "--method avgpipe (default: 1)"),
                 cl::init(1));
static cl::opt<double> avgAlpha("avg-alpha", cl::cat(methodCat),
                                cl::desc("--method avgpipe: elastic averaging "
                                         "rate alpha in (0, 1) (default: 0.5)"),
                                cl::init(0.5));
static cl::opt<int64_t> avgPeriod("avg-period", cl::cat(methodCat),
                                  cl::desc("--method avgpipe: average after "
                                           "every T steps (default: 1)"),
                                  cl::init(1));
static cl::opt<bool>
    verticalSync("vertical-sync", cl::cat(methodCat),
                 cl::desc("--method pipedream: every stage uses the weights "
                          "of W(u - (p-1)) for micro-batch u"));
static cl::opt<std::string>
    partition("partition", cl::cat(pipelineCat), cl::desc("balanced, dp, manual or layers (default: balanced)"),
              cl::init("balanced"));
static cl::list<std::string> cuts("cut", cl::cat(pipelineCat), cl::CommaSeparated,
                                  cl::desc("--partition manual: ONNX nodes "
                                           "after which a stage ends"));
static cl::opt<std::string>
    fromMlir("from-mlir", cl::cat(outputCat),
             cl::desc("Start from pipe IR (pipe.stage functions, optionally "
                      "pipe.program ops) instead of partitioning MODEL.onnx"),
             cl::value_desc("PIPE.mlir"));
static cl::opt<std::string> batchnorm(
    "batchnorm", cl::cat(pipelineCat),
    cl::desc("training-mode BatchNormalization statistics with M > 1: "
             "micro-batch (each its own) or full-batch (the whole "
             "mini-batch's, exact: the stages holding one run once per step "
             "on all micro-batches; --schedule gpipe) (default: micro-batch)"),
    cl::init("micro-batch"));
static cl::opt<bool> showSchedule("show-schedule", cl::cat(outputCat),
                                  cl::desc("Print the schedule table"));

static cl::opt<bool> autoPlan(
    "auto", cl::cat(plannerCat),
    cl::desc("Choose --stages, --microbatches and --schedule: simulate every "
             "plan of at most --devices devices and compile the fastest that "
             "fits --memory-per-device; prints the best candidates"));
static cl::opt<int64_t> numDevices("devices", cl::cat(plannerCat),
                                   cl::desc("--auto: devices available (default: 1)"),
                                   cl::init(1));
static cl::opt<bool> autoDryRun(
    "auto-dry-run", cl::cat(plannerCat),
    cl::desc("--auto: print the candidates and the choice, write nothing "
             "(plans for more devices than this machine has; under "
             "--memory-per-device candidates are still compiled in memory to "
             "check their fit)"));
static cl::list<std::string> autoMethods(
    "auto-methods", cl::CommaSeparated, cl::cat(plannerCat),
    cl::value_desc("pipedream,2bw,spectrain,pipemare"),
    cl::desc("--auto may also choose these no-flush methods (1F1B without a "
             "flush between steps: no fill and drain per step, but stale "
             "weights, so they train differently; see --method)"));
static cl::opt<bool> allowPipelines(
    "allow-pipelines", cl::cat(plannerCat),
    cl::desc("--auto may also choose P > 1 data-parallel pipelines (each "
             "reads its own mini-batch: P x batch samples per step); plans "
             "are then ranked by samples per second"));
static cl::opt<std::string> memoryPerDevice(
    "memory-per-device", cl::cat(plannerCat), cl::value_desc("BYTES"),
    cl::desc("The most a device may hold (e.g. 8G, 512M; default: no limit): "
             "--auto plans within it; an explicit --stages plan is re-cut to "
             "fit or refused (plans are compiled to check: plan.json's "
             "per-device totals)"),
    cl::init(""));
static cl::opt<std::string> profilePath(
    "profile", cl::cat(plannerCat), cl::value_desc("P.json"),
    cl::desc("Measured op times of this model on this machine (pipe-profile): "
             "the partitioner and --auto use them instead of the roofline"));
static cl::opt<bool> profileOps(
    "profile-ops", cl::cat(plannerCat),
    cl::desc("One device: time every op when run with pipe-run --trace "
             "(what pipe-profile measures); plan.json's op_profile names them"));
static cl::opt<int> autoRows("auto-candidates", cl::cat(plannerCat),
                             cl::desc("--auto: candidates printed (default: 10)"),
                             cl::init(10));

namespace {

/// "8G", "512M", "64K", "1000": bytes; -1 if malformed.
int64_t parseBytes(StringRef text) {
  text = text.trim();
  int64_t scale = 1;
  if (!text.empty()) {
    char last = llvm::toUpper(text.back());
    if (last == 'B' && text.size() > 1) {
      text = text.drop_back();
      last = llvm::toUpper(text.back());
    }
    if (last == 'K' || last == 'M' || last == 'G' || last == 'T') {
      scale = last == 'K' ? 1LL << 10 : last == 'M' ? 1LL << 20
              : last == 'G' ? 1LL << 30 : 1LL << 40;
      text = text.drop_back();
    }
  }
  double value = 0;
  if (text.empty() || text.getAsDouble(value) || !(value > 0))
    return -1;
  return int64_t(value * double(scale));
}

const char *const kOptimizers[] = {"sgd",  "momentum", "nesterov",
                                   "adam", "adamw",    "adagrad"};

int fail(const llvm::Twine &message) {
  llvm::outs().flush(); // what was printed before it, first
  llvm::errs() << "pipe-compile: error: " << message << "\n";
  return 1;
}

bool writeFile(StringRef path, llvm::function_ref<void(llvm::raw_ostream &)> fn) {
  std::error_code ec;
  llvm::raw_fd_ostream os(path, ec, llvm::sys::fs::OF_Text);
  if (ec)
    return false;
  fn(os);
  return true;
}

/// `tensor<8x32xf32>` as MLIR prints it.
std::string typeText(Type type) {
  std::string text;
  llvm::raw_string_ostream os(text);
  type.print(os);
  return text;
}

std::string stagePath(StringRef name) {
  SmallString<256> p(outDir);
  llvm::sys::path::append(p, name);
  return std::string(p);
}

/// Runs `pipeline` on `module`; false (after printing why) on failure.
bool runPipeline(ModuleOp module, StringRef pipeline) {
  PassManager pm(module.getContext());
  if (failed(parsePassPipeline(pipeline, pm, llvm::errs()))) {
    llvm::errs() << "pipe-compile: error: cannot build the pipeline '"
                 << pipeline << "'\n";
    return false;
  }
  return succeeded(pm.run(module));
}

/// What device `program` needs of `module`: the module's attributes, its
/// program, the stage computations the program calls, and bodiless
/// declarations of the functions that give parameters their initial values
/// (pipe.init on arguments). Cloning the whole module (every stage of every
/// device) for each device made compile time grow with devices x model.
OwningOpRef<ModuleOp> deviceModule(ModuleOp module, pipe::ProgramOp program) {
  OwningOpRef<ModuleOp> device = ModuleOp::create(module.getLoc());
  (*device)->setAttrs(module->getAttrDictionary());
  // The device keeps only @forward's declaration: its classification
  // losses, for the evaluation's accuracy.
  if (auto forward = module.lookupSymbol<func::FuncOp>("forward");
      forward && !forward.isDeclaration())
    (*device)->setAttr(pipe::attrs::kClassificationLosses,
                       IntegerAttr::get(IntegerType::get(module.getContext(), 64),
                                        pipec::countClassificationLosses(forward)));
  OpBuilder b(device->getBodyRegion());
  b.setInsertionPointToEnd(device->getBody());
  for (auto f : module.getOps<func::FuncOp>()) {
    bool initialises = false;
    for (unsigned i = 0; i < f.getNumArguments() && !initialises; ++i)
      initialises = bool(f.getArgAttr(i, pipe::attrs::kInit));
    if (!initialises)
      continue;
    auto decl = func::FuncOp::create(b, f.getLoc(), f.getSymName(),
                                     f.getFunctionType());
    decl.setPrivate();
    if (ArrayAttr args = f.getAllArgAttrs())
      decl.setAllArgAttrs(args);
  }
  llvm::SetVector<Operation *> stages;
  program.walk([&](Operation *op) {
    FlatSymbolRefAttr callee;
    if (auto fwd = dyn_cast<pipe::ForwardOp>(op))
      callee = fwd.getCalleeAttr();
    else if (auto bwd = dyn_cast<pipe::BackwardOp>(op))
      callee = bwd.getCalleeAttr();
    if (callee)
      if (Operation *stage = module.lookupSymbol(callee))
        stages.insert(stage);
  });
  for (Operation *stage : stages)
    b.clone(*stage);
  b.clone(*program);
  return device;
}

/// The flags of the methods and of several pipelines, into the options of
/// pipe-train-pipeline or of pipe-schedule (the same field names): one
/// place, so that a new flag reaches both the import and the --from-mlir
/// path. `gamma`: PipeMare's T2 decay (< 0: off).
template <typename Options>
void methodFlagsInto(Options &o, double gamma) {
  o.verticalSync = verticalSync.getValue();
  o.lrWarmup = lrWarmup.getValue();
  o.discrepancyCorrection = gamma;
  o.pipelines = numPipelines.getValue();
  o.replication = method == "avgpipe" ? "avgpipe" : "dp";
  o.avgAlpha = avgAlpha.getValue();
  o.avgPeriod = avgPeriod.getValue();
}

/// The options of pipe-train-pipeline from the command line (after --auto
/// has set its choices), the partition given; `gamma`: PipeMare's T2 decay
/// (< 0: off).
void trainOptionsFromFlags(pipec::TrainPipelineOptions &o,
                           pipec::PartitionOption strategy, double gamma) {
  o.stages = numStages.getValue();
  o.microbatches = microbatches.getValue();
  o.schedule = scheduleKind == "gpipe" ? pipec::ScheduleOption::GPipe
               : scheduleKind == "afp" ? pipec::ScheduleOption::AdvanceForward
                                       : pipec::ScheduleOption::OneFOneB;
  o.advance = advance.getValue();
  o.method = method == "pipedream"   ? pipec::MethodOption::PipeDream
             : method == "2bw"       ? pipec::MethodOption::TwoBW
             : method == "spectrain" ? pipec::MethodOption::SpecTrain
             : method == "pipemare"  ? pipec::MethodOption::PipeMare
                                     : pipec::MethodOption::Sync;
  methodFlagsInto(o, gamma);
  o.recompute = recompute.getValue();
  o.fuseAttention = !noFuseAttention;
  o.batchnorm = batchnorm.getValue();
  o.partition = strategy;
  o.cuts = llvm::to_vector(cuts);
  o.profile = profilePath.getValue();
  // --partition dp weighs compute against transfers at the target's rates
  // (the planner's round numbers; a profile's measured link where it has
  // one): the accelerator defaults made transfers so dear on the CPU that
  // it cut where the fewest bytes cross (the CNN: all but the loss on
  // stage 0).
  if (target == "cuda") {
    o.peakGflops = 50e3;
    o.memoryGBps = 2e3;
    o.linkGBps = 20.0;
  } else {
    o.peakGflops = 30.0;
    o.memoryGBps = 10.0;
    o.linkGBps = 5.0;
  }
  if (!profilePath.empty()) {
    std::string error;
    if (std::optional<pipec::OpProfile> p = pipec::readProfile(profilePath, error);
        p && p->linkBandwidth > 0)
      o.linkGBps = p->linkBandwidth / 1e9;
  }
  o.optimizer = llvm::StringSwitch<pipec::OptimizerOption>(optimizer)
                    .Case("momentum", pipec::OptimizerOption::Momentum)
                    .Case("nesterov", pipec::OptimizerOption::Nesterov)
                    .Case("adam", pipec::OptimizerOption::Adam)
                    .Case("adamw", pipec::OptimizerOption::AdamW)
                    .Case("adagrad", pipec::OptimizerOption::Adagrad)
                    .Default(pipec::OptimizerOption::SGD);
  o.lr = lr.getValue();
  o.momentum = momentum.getValue();
  o.weightDecay = weightDecay.getNumOccurrences() ? weightDecay.getValue() : -1.0;
  o.lrSchedule = lrScheduleKind.getValue();
  o.warmupSteps = warmupSteps.getValue();
  o.decaySteps = decaySteps.getValue();
  o.minLr = minLr.getValue();
  o.clipGradNorm = clipGradNorm.getValue();
}

/// The learning-rate schedule of the flags.
pipec::LrSchedule lrScheduleFlags() {
  return pipec::LrSchedule::of(lrScheduleKind.getValue(), warmupSteps.getValue(),
                               decaySteps.getValue(), minLr.getValue());
}

/// plan.json's optimizer clip_grad_norm: null without clipping.
llvm::json::Value clipGradNormJson() {
  if (!(clipGradNorm > 0))
    return nullptr;
  return clipGradNorm.getValue();
}

/// plan.json's optimizer lr_schedule: null without one.
llvm::json::Value lrScheduleJson() {
  pipec::LrSchedule s = lrScheduleFlags();
  if (s.isConstant())
    return nullptr;
  return llvm::json::Object{{"kind", s.kind},
                            {"warmup_steps", s.warmupSteps},
                            {"decay_steps", s.decaySteps},
                            {"min_lr", s.minLr}};
}

/// plan.json's optimizer momentum: the value momentum and nesterov use
/// (default 0.9), null for the optimizers without one.
llvm::json::Value momentumUsed() {
  if (optimizer == "momentum" || optimizer == "nesterov")
    return momentum.getValue();
  return nullptr;
}

/// The one-device training step's passes: gradients and the optimizer
/// update (pipe-opt's syntax).
std::string oneDeviceTrainPipeline() {
  std::string pipeline;
  llvm::raw_string_ostream ps(pipeline);
  ps << "pipe-fold-dropout,pipe-fuse-gelu," << (noFuseAttention ? "" : "pipe-fuse-attention,")
     << "pipe-autodiff,pipe-add-optimizer{kind=" << optimizer
     << " lr=" << llvm::formatv("{0:e9}", lr.getValue());
  if (optimizer == "momentum" || optimizer == "nesterov")
    ps << " momentum=" << llvm::formatv("{0:e9}", momentum.getValue());
  if (weightDecay.getNumOccurrences())
    ps << " weight-decay=" << llvm::formatv("{0:e9}", weightDecay.getValue());
  if (!lrScheduleFlags().isConstant())
    ps << " lr-schedule=" << lrScheduleKind.getValue()
       << " warmup-steps=" << warmupSteps.getValue()
       << " decay-steps=" << decaySteps.getValue()
       << " min-lr=" << llvm::formatv("{0:e9}", minLr.getValue());
  if (clipGradNorm > 0)
    ps << " clip-grad-norm=" << llvm::formatv("{0:e9}", clipGradNorm.getValue());
  ps << "}";
  return pipeline;
}

/// What the lowering wrote on @pipe_step (pipec::kProgramAttrName: inputs,
/// persistent buffers, peak bytes); null where it left none.
DictionaryAttr stepInfo(ModuleOp module) {
  auto step = module.lookupSymbol<func::FuncOp>(pipec::kStepFunctionName);
  return step ? step->getAttrOfType<DictionaryAttr>(pipec::kProgramAttrName)
              : DictionaryAttr();
}

/// The memory total of plan.json for a compiled @pipe_step's description.
int64_t programBytes(DictionaryAttr info) {
  llvm::json::Object described = pipec::describeBuffers(info);
  return described.getObject("memory")->getInteger("total_bytes").value_or(0);
}

/// Per device: the bytes a plan's compiled program holds (plan.json's
/// memory total: parameters, optimizer state, inputs, the step's buffers,
/// weight versions and what stays in flight between steps), found by
/// compiling `imported` (left as it is) with `options` down to the runtime
/// calls; std::nullopt where the plan does not compile (its diagnostics
/// are not printed: the plan is then not taken).
std::optional<std::vector<int64_t>>
compiledMemory(ModuleOp imported, const pipec::TrainPipelineOptions &options) {
  MLIRContext *context = imported.getContext();
  ScopedDiagnosticHandler quiet(context, [](Diagnostic &) { return success(); });
  OwningOpRef<ModuleOp> module(imported.clone());
  // One device, one micro-batch: the one-device step (no pipe.program).
  if (options.stages == 1 && options.pipelines == 1 && options.microbatches == 1 &&
      options.method == pipec::MethodOption::Sync && !options.recompute) {
    PassManager pm(context);
    if (failed(parsePassPipeline(oneDeviceTrainPipeline(), pm)))
      return std::nullopt;
    pipec::LowerToRuntimeOptions lower;
    lower.target = target;
    pm.addPass(pipec::createLowerToRuntime(lower));
    if (failed(pm.run(*module)))
      return std::nullopt;
    DictionaryAttr info = stepInfo(*module);
    if (!info)
      return std::nullopt;
    return std::vector<int64_t>{programBytes(info)};
  }
  {
    PassManager pm(context);
    pipec::buildStagesPipeline(pm, options);
    pipec::buildSchedulePipeline(pm, options);
    if (failed(pm.run(*module)))
      return std::nullopt;
  }
  std::vector<int64_t> bytes;
  for (pipe::ProgramOp program : module->getOps<pipe::ProgramOp>()) {
    OwningOpRef<ModuleOp> device = deviceModule(*module, program);
    pipec::LowerDeviceOptions lower;
    lower.device = program.getDevice();
    lower.target = target == "cuda" ? pipec::TargetOption::CUDA : pipec::TargetOption::CPU;
    lower.deferWeightGrads = deferWeightGrads;
    PassManager pm(context);
    pipec::buildLowerDevicePipeline(pm, lower);
    if (failed(pm.run(*device)))
      return std::nullopt;
    DictionaryAttr info = stepInfo(*device);
    if (!info)
      return std::nullopt;
    bytes.push_back(programBytes(info));
  }
  if (bytes.empty())
    return std::nullopt;
  return bytes;
}

/// The pipeline-parallel back end: `module` holds pipe.program ops (one per
/// device) and the pipe.stage functions they call; writes OUT/device<k> and
/// OUT/plan.json.
/// Removes what an earlier compile left in OUT (plan.json, device*), right
/// before this one writes its own: a compile that makes fewer devices, or
/// fails while writing them, leaves no plan or executable of the old one for
/// pipe-run to find, while a bad flag, a model the passes refuse or
/// --auto-dry-run leaves OUT as it was. "" or the error.
std::string removeStaleOutputs() {
  std::error_code ec;
  std::vector<std::string> stale;
  for (llvm::sys::fs::directory_iterator it(outDir, ec), end; it != end && !ec;
       it.increment(ec)) {
    StringRef name = llvm::sys::path::filename(it->path());
    StringRef rest = name;
    bool device = rest.consume_front("device") && !rest.empty() &&
                  llvm::isDigit(rest.front());
    if (name == "plan.json" || device)
      stale.push_back(it->path());
  }
  for (const std::string &path : stale)
    if (std::error_code rm = llvm::sys::fs::remove(path))
      return "cannot remove " + path + " (left by an earlier compile): " + rm.message();
  return "";
}

int compilePrograms(ModuleOp module, int64_t modelBatch,
                    const llvm::json::Object &planBase) {
  SmallVector<pipe::ProgramOp> programs(module.getOps<pipe::ProgramOp>());
  llvm::sort(programs, [](pipe::ProgramOp a, pipe::ProgramOp b) {
    return a.getDevice() < b.getDevice();
  });
  int64_t devices = programs.size();
  int64_t pipelineCount = 1;
  for (pipe::ProgramOp p : programs)
    pipelineCount = std::max<int64_t>(pipelineCount, p.getPipeline().value_or(0) + 1);
  if (numStages.getNumOccurrences() && numStages * pipelineCount != devices)
    return fail("--stages " + llvm::Twine(numStages.getValue()) +
                ", but the schedule has " + llvm::Twine(devices) + " devices");
  for (auto [i, p] : llvm::enumerate(programs))
    if (p.getDevice() != static_cast<int64_t>(i))
      return fail("the programs must be for devices 0.." +
                  llvm::Twine(devices - 1) + " (device " +
                  llvm::Twine(p.getDevice()) + " is there)");

  // The mini-batch: the fed micro-batch rows times M.
  int64_t miniBatch = modelBatch;
  for (pipe::ProgramOp p : programs)
    p.walk([&](pipe::FeedOp feed) {
      if (feed->hasAttr(pipe::attrs::kWholeStep))
        return; // the step's rows already
      miniBatch = cast<RankedTensorType>(feed.getValue().getType()).getDimSize(0) *
                  p.getMicrobatches();
    });

  if (std::string error = removeStaleOutputs(); !error.empty())
    return fail(error);

  // plan.json (docs/plan-json.md): what each device runs, transfers,
  // memory; stage costs.
  llvm::json::Array devicePlans, transfers, executables;
  std::string evalUnavailable;
  // The top-1 accuracy: counted by the loss's devices, or why not.
  bool accuracy = false;
  std::string noAccuracy;
  std::string error;
  for (pipe::ProgramOp program : programs) {
    int64_t k = program.getDevice();
    OwningOpRef<ModuleOp> device = deviceModule(module, program);
    {
      pipec::LowerDeviceOptions lower;
      lower.device = k;
      lower.target = target == "cuda" ? pipec::TargetOption::CUDA : pipec::TargetOption::CPU;
      lower.deferWeightGrads = deferWeightGrads;
      lower.eval = true;
      PassManager pm(module.getContext());
      pipec::buildLowerDevicePipeline(pm, lower);
      if (failed(pm.run(*device)))
        return 1;
    }
    DictionaryAttr info = stepInfo(*device);
    if (!info)
      return fail("pipe-lower-programs left no @pipe_step for device " +
                  llvm::Twine(k));
    // Every device needs its evaluation entry; the first that has none says
    // why.
    if (auto available = info.getAs<BoolAttr>("eval");
        (!available || !available.getValue()) && evalUnavailable.empty()) {
      auto why = info.getAs<StringAttr>("eval_unavailable");
      evalUnavailable = why ? why.getValue().str() : std::string("no evaluation entry");
    }
    if (auto n = info.getAs<IntegerAttr>("eval_metrics"); n && n.getInt() > 0)
      accuracy = true;
    if (auto why = info.getAs<StringAttr>("accuracy_unavailable"); why && noAccuracy.empty())
      noAccuracy = why.getValue().str();
    std::string name = "device" + std::to_string(k);
    if (emitMlir)
      writeFile(stagePath(name + "-runtime.mlir"),
                [&](llvm::raw_ostream &os) { device->print(os); });
    {
      PassManager pm(module.getContext());
      pipec::buildLowerToLLVMPipeline(pm);
      if (failed(pm.run(*device)))
        return 1;
    }
    pipec::ProgramOptions options;
    options.program = info;
    options.batch = miniBatch;
    options.modelFile = "model.onnx";
    options.optimizer = optimizer.getValue();
    options.device = k;
    options.devices = devices;
    options.pipelines = pipelineCount;
    std::string objectPath = stagePath(name + ".o");
    if (failed(pipec::emitProgramObject(*device, options, objectPath, error)))
      return fail(error);
    if (failed(pipec::linkProgram(objectPath, stagePath(name), target, error)))
      return fail(error);
    if (!emitMlir)
      llvm::sys::fs::remove(objectPath);
    executables.push_back(name);

    devicePlans.push_back(pipec::describeDevice(program, info, name, transfers));
  }

  llvm::json::Object plan = planBase;
  plan["eval"] = llvm::json::Object{
      {"available", evalUnavailable.empty()},
      {"unavailable", evalUnavailable.empty() ? llvm::json::Value(nullptr)
                                              : llvm::json::Value(evalUnavailable)},
      {"accuracy", evalUnavailable.empty() && accuracy},
      {"accuracy_unavailable",
       !evalUnavailable.empty() || accuracy ? llvm::json::Value(nullptr)
       : noAccuracy.empty()                 ? llvm::json::Value("no device counts it")
                                            : llvm::json::Value(noAccuracy)}};
  plan["batch"] = miniBatch;
  plan["devices"] = devices;
  plan["pipelines"] = pipelineCount;
  plan["microbatches"] = programs.front().getMicrobatches();
  plan["schedule"] = pipe::stringifyScheduleKind(programs.front().getSchedule());
  // --batchnorm full-batch: the stages that run once per step on all M
  // micro-batches (their forward and backward serialise the micro-batches).
  if (auto whole = module->getAttrOfType<ArrayAttr>(
          pipec::wholebatch::kStages)) {
    llvm::json::Array stagesJson;
    for (Attribute a : whole)
      stagesJson.push_back(llvm::cast<IntegerAttr>(a).getInt());
    plan["whole_batch_stages"] = std::move(stagesJson);
  }
  for (auto &[key, value] : pipec::describeStages(module))
    plan[key] = std::move(value);
  plan["transfers"] = std::move(transfers);
  plan["device_plans"] = std::move(devicePlans);
  plan["executables"] = std::move(executables);
  if (failed(pipec::writePlan(stagePath("plan.json"), std::move(plan), error)))
    return fail(error);
  return 0;
}

} // namespace

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  pipec::registerAllPasses();
  mlir::pipec::hideOtherOptions({&trainingCat, &pipelineCat, &methodCat, &outputCat, &plannerCat});
  mlir::pipec::setVersionPrinter("pipe-compile");
  cl::ParseCommandLineOptions(argc, argv, "pipec compiler driver\n");

  if (!llvm::is_contained(kOptimizers, optimizer))
    return fail("unknown optimizer '" + optimizer +
                "' (sgd, momentum, nesterov, adam, adamw, adagrad)");
  if (target != "cpu" && target != "cuda")
    return fail("unknown target '" + target + "' (cpu, cuda)");
  if (batch < 0 || (batch == 0 && batch.getNumOccurrences()))
    return fail("--batch must be positive");
  if (batch > (int64_t(1) << 31))
    return fail("--batch " + std::to_string(batch.getValue()) + " is more than 2^31 samples");

  DialectRegistry registry;
  pipec::registerAllDialects(registry);
  MLIRContext context(registry);
  context.loadAllAvailableDialects();
  pipec::OneLineDiagnosticHandler diagnostics(&context, "pipe-compile");

  // Import.
  auto buffer = llvm::MemoryBuffer::getFile(modelPath);
  if (!buffer)
    return fail("cannot read " + modelPath + ": " + buffer.getError().message());
  pipec::ImportOptions importOptions;
  importOptions.lossName = lossOutput;
  importOptions.frozen.assign(frozenParams.begin(), frozenParams.end());
  if (batch > 0)
    importOptions.inputShapes["batch"] = {batch};
  for (const std::string &entry : inputShapes) {
    std::string name;
    std::vector<int64_t> shape;
    if (!pipec::parseInputShapeBinding(entry, name, shape))
      return fail("--input-shape '" + entry +
                  "' is malformed; write name=32x784 or name=32 (sizes up to 2^31)");
    if (llvm::is_contained(shape, 0))
      return fail("--input-shape '" + entry + "': sizes must be at least 1");
    importOptions.inputShapes[name] = shape;
  }
  OwningOpRef<ModuleOp> module = pipec::importOnnxModel(
      &context, (*buffer)->getBuffer(), modelPath, importOptions);
  if (!module)
    return 1;

  // The batch is the first axis of every graph input.
  auto forward = module->lookupSymbol<func::FuncOp>("forward");
  // A TrainingInfoProto's algorithm graph is not run (its Gradient xs say
  // what is trained): say what is done instead.
  if (module->lookupSymbol("training_algorithm") && !forwardOnly)
    llvm::errs() << "pipe-compile: warning: " << modelPath
                 << ": its TrainingInfoProto algorithm is not run; pipe-compile "
                    "differentiates the loss itself and updates what the algorithm's "
                    "Gradient nodes train with --optimizer "
                 << optimizer << " (lr " << llvm::formatv("{0}", lr.getValue())
                 << "), and binds only the algorithm's outputs that are such updates "
                    "or running statistics\n";
  if (!forward)
    return fail("the imported module has no @forward");
  // ONNX does not tell a PyTorch buffer from a parameter: every float
  // initializer a gradient reaches is trained unless --frozen names it.
  // Some buffers are known by name (Hugging Face's rotary inv_freq and
  // cos/sin caches, ALiBi slopes) or by value (an additive attention mask:
  // only 0 and large negative numbers): say so, with the flag to keep them.
  if (!forwardOnly) {
    std::vector<std::string> buffers, kinds;
    for (unsigned i = 0; i < forward.getNumArguments(); ++i) {
      auto name = forward.getArgAttrOfType<StringAttr>(i, pipe::attrs::kParam);
      if (!name || !forward.getArgAttr(i, pipe::attrs::kTrainable))
        continue;
      StringRef n = name.getValue();
      StringRef leaf = n.rsplit('.').second.empty() ? n : n.rsplit('.').second;
      std::string kind;
      if (leaf == "inv_freq" || leaf == "cos_cached" || leaf == "sin_cached" ||
          leaf == "_cos_cached" || leaf == "_sin_cached")
        kind = "a rotary embedding's";
      else if (n.contains_insensitive("alibi") || leaf == "slopes")
        kind = "ALiBi's slopes";
      else if (auto init = forward.getArgAttrOfType<DenseFPElementsAttr>(i, pipe::attrs::kInit)) {
        bool masking = false, onlyMask = true;
        for (APFloat v : init.getValues<APFloat>()) {
          double d = v.convertToDouble();
          if (d <= -1e4) {
            masking = true;
          } else if (d != 0.0) {
            onlyMask = false; // a weight: its first values tell
            break;
          }
        }
        if (masking && onlyMask)
          kind = "an additive mask (0 and large negative values)";
      }
      if (kind.empty())
        continue;
      buffers.push_back(n.str());
      kinds.push_back(n.str() + ": " + kind);
    }
    if (!buffers.empty())
      llvm::errs() << "pipe-compile: warning: " << modelPath << ": "
                   << (buffers.size() == 1 ? "an initializer looks like a PyTorch buffer ("
                                           : "initializers look like PyTorch buffers (")
                   << llvm::join(kinds, "; ")
                   << "); PyTorch does not train buffers, and ONNX does not tell them from "
                      "weights, so pipec would: pass --frozen "
                   << llvm::join(buffers, ",") << " to keep "
                   << (buffers.size() == 1 ? "it" : "them") << " as PyTorch does\n";
  }
  llvm::json::Array dataSpec = pipec::describeData(*module);
  int64_t modelBatch = 0;
  for (unsigned i = 0; i < forward.getNumArguments(); ++i) {
    if (!forward.getArgAttr(i, pipe::attrs::kInput))
      continue;
    auto type = cast<RankedTensorType>(forward.getArgument(i).getType());
    StringRef name =
        forward.getArgAttrOfType<StringAttr>(i, pipe::attrs::kInput).getValue();
    if (type.getRank() == 0)
      return fail("graph input '" + name + "' is a scalar; it has no batch axis");
    if (modelBatch == 0)
      modelBatch = type.getDimSize(0);
    if (type.getDimSize(0) != modelBatch)
      return fail("graph inputs disagree on the batch size (" +
                  llvm::Twine(modelBatch) + " vs " +
                  llvm::Twine(type.getDimSize(0)) + " for '" + name + "')");
    if (batch > 0 && type.getDimSize(0) != batch)
      return fail("batch mismatch: the model's input '" + name +
                  "' has batch " + llvm::Twine(type.getDimSize(0)) +
                  ", but --batch is " + llvm::Twine(batch));
  }
  if (modelBatch == 0)
    return fail("the model has no graph inputs to feed");

  if (std::error_code ec = llvm::sys::fs::create_directories(outDir))
    return fail("cannot create " + outDir + ": " + ec.message());
  auto dumpStage = [&](StringRef name) {
    if (emitMlir)
      writeFile(stagePath(name), [&](llvm::raw_ostream &os) {
        module->print(os);
      });
  };
  // The imported module keeps its locations (the ONNX node names, which name
  // stages and transfers), so that pipe-opt replays the later stages from it.
  if (emitMlir)
    writeFile(stagePath("0-import.mlir"), [&](llvm::raw_ostream &os) {
      module->print(os, OpPrintingFlags().enableDebugInfo());
    });

  // A measured profile: of this model, on this machine, for this target.
  std::optional<pipec::OpProfile> profile;
  if (!profilePath.empty()) {
    std::string error;
    profile = pipec::readProfile(profilePath, error);
    if (!profile ||
        !pipec::checkProfile(*profile, profilePath,
                             pipec::hashModel((*buffer)->getBuffer()), target,
                             error))
      return fail(error);
  }

  // What the planner partitions: the forward as the compile partitions it,
  // GELU and attention chains fused (the --cut points kept), made once on a
  // copy of the module. On the imported graph it priced such a chain op by
  // op (with a profile, whose one-device step runs the fused op under the
  // chain's last node, the inner nodes had no measured time), and the
  // memory re-cuts it proposed could fall inside a chain, which then
  // compiled unfused and bigger.
  OwningOpRef<ModuleOp> fusedModule;
  func::FuncOp fusedForward;
  auto plannedForward = [&]() -> func::FuncOp {
    if (fusedForward)
      return fusedForward;
    fusedModule = cast<ModuleOp>(module->getOperation()->clone());
    PassManager pm(&context);
    std::vector<std::string> kept(cuts.begin(), cuts.end());
    mlir::pipec::buildFusionPipeline(pm, kept, !noFuseAttention);
    if (succeeded(pm.run(*fusedModule)))
      fusedForward = fusedModule->lookupSymbol<func::FuncOp>("forward");
    if (!fusedForward)
      fusedForward = forward; // (the compile reports what the fusions refuse)
    return fusedForward;
  };

  // The planner's time model: the profile where given, else the roofline
  // at round numbers of the target.
  auto plannerOptions = [&]() {
    pipec::planner::PlannerOptions options;
    options.devices = numDevices;
    options.batch = modelBatch;
    options.maxPipelines = allowPipelines ? numDevices : 1;
    // Transfers as the runtime will make them on this machine.
    options.bufferedSends = target != "cuda" && pipectools::runtimeBuffersSends();
    options.bufferedSendBytes = pipectools::runtimeBufferedSendBytes(int(numDevices));
    for (const std::string &m : autoMethods)
      options.asyncMethods.push_back(m);
    // PipeMare's T2 where given (checked below): a second weight copy and
    // two passes over the weights per micro-batch.
    double gammaGiven = -1.0;
    if (!discrepancyCorrection.empty() &&
        !StringRef(discrepancyCorrection.getValue()).getAsDouble(gammaGiven))
      options.discrepancyCorrection = gammaGiven;
    if (!memoryPerDevice.empty())
      options.memoryPerDevice = parseBytes(memoryPerDevice);
    options.optimizerStateFactor =
        optimizer == "sgd" ? 0 : (optimizer == "adam" || optimizer == "adamw") ? 2 : 1;
    if (target == "cuda") {
      options.cost.peakFlops = 50e12;
      options.cost.memoryBandwidth = 2e12;
      options.perOpSeconds = 10e-6;
      options.linkLatency = 10e-6;
      options.linkBandwidth = 20e9;
      options.updateBytesPerSecond = 1e12;
    } else {
      // One core of a current CPU with OpenBLAS (bench/train_step.py's
      // machines): what the roofline needs to be in seconds.
      options.cost.peakFlops = 30e9;
      options.cost.memoryBandwidth = 10e9;
      options.perOpSeconds = 3e-6;
    }
    if (profile) {
      options.cost.profile = &*profile;
      // A measured link (bandwidth > 0) replaces both numbers.
      if (profile->linkBandwidth > 0) {
        options.linkLatency = profile->linkLatency;
        options.linkBandwidth = profile->linkBandwidth;
      }
      if (profile->updateBytesPerSecond > 0)
        options.updateBytesPerSecond = profile->updateBytesPerSecond;
    }
    return options;
  };

  // A planner's candidate as pipe-train-pipeline options, partitioned at
  // `cutNodes` (empty: the balanced partition).
  auto compiledCandidate = [&](const pipec::planner::Candidate &c,
                               const std::vector<std::string> &cutNodes,
                               const pipec::planner::PlannerOptions &planner) {
    pipec::TrainPipelineOptions o;
    trainOptionsFromFlags(o,
                          cutNodes.empty() ? pipec::PartitionOption::Balanced
                                           : pipec::PartitionOption::Manual,
                          -1.0);
    o.stages = c.stages;
    o.microbatches = c.microbatches;
    o.pipelines = c.pipelines;
    o.schedule = c.schedule == pipec::schedule::ScheduleKind::GPipe ? pipec::ScheduleOption::GPipe
                 : c.schedule == pipec::schedule::ScheduleKind::AdvanceForward
                     ? pipec::ScheduleOption::AdvanceForward
                     : pipec::ScheduleOption::OneFOneB;
    o.advance = c.advance;
    o.method = c.method == "pipedream"   ? pipec::MethodOption::PipeDream
               : c.method == "2bw"       ? pipec::MethodOption::TwoBW
               : c.method == "spectrain" ? pipec::MethodOption::SpecTrain
               : c.method == "pipemare"  ? pipec::MethodOption::PipeMare
                                         : pipec::MethodOption::Sync;
    o.replication = "dp";
    o.lrWarmup = c.method == "pipemare" ? lrWarmup.getValue() : 0;
    o.discrepancyCorrection = c.method == "pipemare" ? planner.discrepancyCorrection : -1.0;
    o.cuts = cutNodes;
    return compiledMemory(*module, o);
  };

  // Under --memory-per-device: the partition of plan `c` whose compiled
  // programs fit, the balanced one first. The planner's estimate (an upper
  // bound of what a stage keeps, off by a factor of up to 2.5 either way)
  // chooses the cuts: where the balanced partition does not fit once
  // compiled, the estimate's fastest cuts under the limit scaled by how far
  // the estimate was off (compiled / estimated), up to 3 rounds. Each try
  // is compiled down to the runtime calls (plan.json's memory totals);
  // `smallest` keeps the least peak seen, `tries` counts the compiles and
  // `shown` the lines printed about those that do not fit.
  struct Fitted {
    std::vector<std::string> cuts;
    int64_t peak = 0;
  };
  int tries = 0, tooBig = 0;
  constexpr int kLinesShown = 5;
  // The plan of least memory compiled (named in a refusal).
  int64_t leastPeak = -1;
  std::string leastPlan;
  auto fitCompiled = [&](const pipec::planner::Candidate &c,
                         const pipec::planner::PlannerOptions &options,
                         int64_t &smallest) -> std::optional<Fitted> {
    const int64_t limit = options.memoryPerDevice;
    auto check = [&](const std::vector<std::string> &cutNodes,
                     int64_t estimated) -> std::optional<int64_t> {
      ++tries;
      std::optional<std::vector<int64_t>> bytes = compiledCandidate(c, cutNodes, options);
      if (!bytes)
        return std::nullopt;
      int64_t peak = *std::max_element(bytes->begin(), bytes->end());
      if (smallest < 0 || peak < smallest)
        smallest = peak;
      if (leastPeak < 0 || peak < leastPeak) {
        leastPeak = peak;
        leastPlan = c.describe() +
                    (cutNodes.empty() ? std::string() : " cut after " + llvm::join(cutNodes, ","));
      }
      if (peak > limit && ++tooBig <= kLinesShown)
        llvm::outs() << "pipe-compile: " << c.describe()
                     << (cutNodes.empty() ? "" : " cut after " + llvm::join(cutNodes, ","))
                     << " needs " << pipec::planner::formatBytes(peak)
                     << " on its fullest device once compiled (estimated "
                     << pipec::planner::formatBytes(estimated)
                     << "): more than --memory-per-device " << memoryPerDevice << " ("
                     << pipec::planner::formatBytes(limit) << ")\n";
      return peak;
    };
    pipec::planner::PlannerOptions unlimited = options;
    unlimited.memoryPerDevice = 0;
    std::optional<pipec::planner::Candidate> balanced = pipec::planner::evaluatePlan(
        plannedForward(), unlimited, c.stages, c.microbatches, c.schedule, c.advance, c.pipelines);
    const int64_t balancedEstimate =
        c.cutNodes.empty() || !balanced ? c.peakMemory : balanced->peakMemory;
    std::optional<int64_t> peak = check({}, balancedEstimate);
    if (!peak)
      return std::nullopt;
    if (*peak <= limit)
      return Fitted{{}, *peak};
    if (c.method != "sync" || c.stages == 1)
      return std::nullopt;
    // The estimate's cuts under the limit scaled by how far the estimate
    // was off (for the balanced partition, then for each cut tried: up to
    // 3 rounds), then under ever tighter limits (10% a round, while the
    // estimate still finds cuts) and looser ones (up to the balanced
    // partition's estimate), so that the cuts found do not hinge on one
    // scaled limit; at most kCutCompiles compiled.
    constexpr int kCutCompiles = 12;
    std::vector<std::vector<std::string>> tried;
    int compiles = 0;
    // Compiles the estimate's cuts under `scaledLimit`: nullopt where it
    // finds none (tighter limits find none either), else whether they fit
    // and the figures of those compiled.
    auto tryCuts = [&](double scaledLimit, double &estimated,
                       double &compiled) -> std::optional<std::optional<Fitted>> {
      pipec::planner::PlannerOptions scaled = options;
      scaled.memoryPerDevice = std::max<int64_t>(1, int64_t(scaledLimit));
      std::optional<pipec::planner::Candidate> cut = pipec::planner::evaluatePlan(
          plannedForward(), scaled, c.stages, c.microbatches, c.schedule, c.advance, c.pipelines);
      if (!cut || !cut->fits)
        return std::nullopt;
      if (cut->cutNodes.empty() || llvm::is_contained(tried, cut->cutNodes))
        return std::optional<Fitted>();
      tried.push_back(cut->cutNodes);
      ++compiles;
      std::optional<int64_t> got = check(cut->cutNodes, cut->peakMemory);
      if (!got)
        return std::optional<Fitted>();
      if (*got <= limit)
        return std::optional<Fitted>(Fitted{cut->cutNodes, *got});
      estimated = double(cut->peakMemory);
      compiled = double(*got);
      return std::optional<Fitted>();
    };
    double estimated = double(balancedEstimate), compiled = double(*peak);
    const double start = double(limit) * estimated / compiled;
    for (int round = 0; round < 3 && compiles < kCutCompiles; ++round) {
      std::optional<std::optional<Fitted>> r =
          tryCuts(double(limit) * estimated / compiled, estimated, compiled);
      if (!r)
        break;
      if (*r)
        return *r;
    }
    double rung = start;
    for (int round = 0; round < 24 && compiles < kCutCompiles; ++round) {
      rung *= 0.9;
      double e = 0, k = 1;
      std::optional<std::optional<Fitted>> r = tryCuts(rung, e, k);
      if (!r)
        break;
      if (*r)
        return *r;
    }
    // And looser ones, up to the balanced partition's estimate: the
    // estimate may be further off for some cuts than for the balanced.
    rung = start;
    for (int round = 0; round < 24 && compiles < kCutCompiles &&
                        rung * 1.1 < double(balancedEstimate);
         ++round) {
      rung *= 1.1;
      double e = 0, k = 1;
      std::optional<std::optional<Fitted>> r = tryCuts(rung, e, k);
      if (r && *r)
        return *r;
    }
    return std::nullopt;
  };

  // --auto: choose stages, micro-batches and the schedule.
  llvm::json::Object autoRecord;
  // --auto chose another method than the pipemare the PipeMare flags ask
  // for (it says so).
  bool autoDroppedPipeMareFlags = false;
  if (autoPlan && autoRows < 1)
    return fail("--auto-candidates must be >= 1 (the candidates printed), not " +
                llvm::Twine(autoRows.getValue()));
  if (autoPlan) {
    if (clipGradNorm > 0 && autoMethods.getNumOccurrences())
      return fail("--clip-grad-norm needs a synchronous schedule, which --auto-methods "
                  "would let --auto replace by a no-flush method: drop one of the two");
    for (cl::Option *given : {static_cast<cl::Option *>(&numStages),
                              static_cast<cl::Option *>(&microbatches),
                              static_cast<cl::Option *>(&scheduleKind),
                              static_cast<cl::Option *>(&advance),
                              static_cast<cl::Option *>(&numPipelines),
                              static_cast<cl::Option *>(&method)})
      if (given->getNumOccurrences())
        return fail("--auto chooses --stages, --microbatches and --schedule "
                    "itself: drop --" + given->ArgStr);
    if (partition.getNumOccurrences() && partition != "balanced")
      return fail("--auto plans with the balanced partition: drop --partition");
    if (!cuts.empty())
      return fail("--auto plans with the balanced partition (and cuts of its own where "
                  "memory needs them): drop --cut");
    if (forwardOnly)
      return fail("--auto plans training: drop --forward-only");
    // Its time model has every stage micro-batched: whole-batch stages
    // (GPipe only, their micro-batches serialised) are not among its plans.
    if (batchnorm == "full-batch")
      return fail("--auto does not plan --batchnorm full-batch (whole-batch "
                  "stages): give --stages, --microbatches and --schedule "
                  "gpipe");
    if (numDevices < 1)
      return fail("--devices must be >= 1 (got " +
                  llvm::Twine(numDevices.getValue()) + ")");
    pipec::planner::PlannerOptions options = plannerOptions();
    if (options.memoryPerDevice < 0)
      return fail("--memory-per-device '" + memoryPerDevice +
                  "' is not a size; write e.g. 8G, 512M or 1048576");
    for (const std::string &m : autoMethods) {
      if (m != "pipedream" && m != "2bw" && m != "spectrain" && m != "pipemare")
        return fail("--auto-methods: '" + m + "' is not one --auto searches "
                    "(pipedream, 2bw, spectrain, pipemare)");
      if (m == "spectrain" && optimizer == "adagrad")
        return fail("--auto-methods spectrain: spectrain predicts along the "
                    "optimizer's step direction, which adagrad does not "
                    "define: drop it or use --optimizer sgd, momentum, "
                    "nesterov, adam or adamw");
    }
    if ((lrWarmup.getNumOccurrences() || discrepancyCorrection.getNumOccurrences()) &&
        !llvm::is_contained(autoMethods, std::string("pipemare")))
      return fail("--lr-warmup and --discrepancy-correction apply to --method "
                  "pipemare: with --auto, add pipemare to --auto-methods");
    pipec::planner::PlanSearch search =
        pipec::planner::searchPlans(plannedForward(), options);
    if (search.candidates.empty())
      return fail("--auto found no plan for " + modelPath);
    llvm::outs() << "pipe-compile: --auto: " << search.candidates.size()
                 << " plans for " << numDevices << " device(s), batch "
                 << modelBatch << ", predicted from "
                 << (profile ? "the profile " + profilePath.getValue()
                             : std::string("the cost model (no --profile)"))
                 << ":\n"
                 << pipec::planner::formatCandidates(search, autoRows);
    // Under a memory limit the estimate only ranks the plans (it is an
    // upper bound of what a stage keeps, off by a factor of up to 2.5
    // either way): the plan taken is the preferred one whose compiled
    // programs fit, each looked at compiled down to its runtime calls
    // (plan.json's memory): in order until one fits, for at most
    // kCheckSeconds once kLeastChecked are compiled.
    std::optional<pipec::planner::Candidate> chosen = search.best;
    std::vector<int64_t> compiledPeak(search.candidates.size(), -1);
    // The partition compiled for the plan taken (the balanced one where it
    // fits, though the estimate cut it).
    std::optional<size_t> chosenIndex;
    std::vector<size_t> checkedOrder;
    if (options.memoryPerDevice > 0) {
      // Under a memory limit the estimate only ranks the plans: the plan
      // taken is the preferred one whose compiled programs fit
      // (fitCompiled), in order, for at most kCheckSeconds once
      // kLeastChecked are compiled. Plans estimated at more than
      // kOverestimate x the limit are not tried.
      constexpr int kLeastChecked = 4;
      constexpr double kCheckSeconds = 20.0;
      constexpr int64_t kOverestimate = 3;
      const auto started = std::chrono::steady_clock::now();
      std::vector<size_t> order;
      for (size_t i = 0; i < search.candidates.size(); ++i)
        if (search.candidates[i].fits ||
            search.candidates[i].peakMemory <= kOverestimate * options.memoryPerDevice)
          order.push_back(i);
      std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
        return pipec::planner::preferred(search.candidates[a], search.candidates[b]);
      });
      // Plans that differ only in their cuts are tried once.
      std::set<std::tuple<int64_t, int64_t, int64_t, int, int64_t, std::string>> seen;
      chosen.reset();
      int64_t smallest = -1;
      for (size_t i : order) {
        if (tries >= kLeastChecked &&
            std::chrono::duration<double>(std::chrono::steady_clock::now() - started)
                    .count() > kCheckSeconds)
          break;
        pipec::planner::Candidate c = search.candidates[i];
        if (!seen.insert({c.stages, c.pipelines, c.microbatches, int(c.schedule), c.advance,
                          c.method})
                 .second)
          continue;
        int64_t least = -1;
        std::optional<Fitted> fitted = fitCompiled(c, options, least);
        checkedOrder.push_back(i);
        compiledPeak[i] = fitted ? fitted->peak : least;
        if (least >= 0 && (smallest < 0 || least < smallest))
          smallest = least;
        if (fitted) {
          c.cutNodes = fitted->cuts;
          chosen = c;
          chosenIndex = i;
          break;
        }
      }
      if (tooBig > kLinesShown)
        llvm::outs() << "pipe-compile: --auto: " << tooBig - kLinesShown
                     << " more compiled plans need more than --memory-per-device "
                     << memoryPerDevice << "\n";
      if (!chosen && smallest >= 0)
        return fail("no plan fits --memory-per-device " + memoryPerDevice +
                    ": of the " + llvm::Twine(tries) +
                    " preferred plans and cuts compiled, the smallest (" + leastPlan +
                    ") needs " + llvm::Twine(leastPeak) +
                    " bytes on its fullest device; allow that, or add devices");
    }
    if (!chosen)
      return fail("no plan fits --memory-per-device " + memoryPerDevice +
                  ": the smallest plan is estimated at " +
                  llvm::Twine(search.smallestMemory) +
                  " bytes per device (more than 3x the limit, so none was compiled to "
                  "check; the estimate can be 2x off either way): allow more, or add "
                  "devices");
    const pipec::planner::Candidate &best = *chosen;
    llvm::outs() << "pipe-compile: --auto chose " << best.describe() << "\n";
    llvm::outs().flush();
    if (autoDryRun)
      return 0;
    numStages = best.stages;
    numPipelines = best.pipelines;
    if (!best.cutNodes.empty()) {
      partition = std::string("manual");
      cuts.clear();
      for (const std::string &node : best.cutNodes)
        cuts.push_back(node);
      llvm::outs() << "pipe-compile: --auto cuts after "
                   << llvm::join(best.cutNodes, ", ")
                   << " (the balanced partition does not fit the memory)\n";
    }
    microbatches = best.microbatches;
    scheduleKind = std::string(pipec::schedule::stringifyScheduleKind(best.schedule));
    advance = best.advance;
    if (best.method != "sync")
      method = best.method;
    if (best.method != "pipemare" &&
        (lrWarmup.getNumOccurrences() || discrepancyCorrection.getNumOccurrences())) {
      llvm::outs() << "pipe-compile: --auto chose " << best.method
                   << ", not pipemare: --lr-warmup and "
                      "--discrepancy-correction are not used\n";
      autoDroppedPipeMareFlags = true;
      lrWarmup = 0;
      discrepancyCorrection = std::string();
    }
    // The rows: under a memory limit the plan taken, then those compiled
    // (in the order tried), then the others; at most 10.
    std::vector<size_t> rowOrder;
    if (chosenIndex)
      rowOrder.push_back(*chosenIndex);
    for (size_t i : checkedOrder)
      if (!llvm::is_contained(rowOrder, i))
        rowOrder.push_back(i);
    for (size_t i = 0; i < search.candidates.size(); ++i)
      if (!llvm::is_contained(rowOrder, i))
        rowOrder.push_back(i);
    llvm::json::Array rows;
    for (size_t i : llvm::ArrayRef(rowOrder).take_front(10)) {
      const pipec::planner::Candidate &c = search.candidates[i];
      const bool compiled = compiledPeak[i] >= 0;
      rows.push_back(llvm::json::Object{
          {"stages", c.stages},
          {"pipelines", c.pipelines},
          {"microbatches", c.microbatches},
          {"schedule", pipec::schedule::stringifyScheduleKind(c.schedule)},
          {"method", c.method},
          {"advance", c.advance},
          {"step_s", c.stepSeconds},
          {"samples_per_s", c.throughput},
          {"bubble", c.bubble},
          {"peak_memory_bytes", c.peakMemory},
          {"compiled_peak_memory_bytes",
           compiledPeak[i] >= 0 ? llvm::json::Value(compiledPeak[i])
                                : llvm::json::Value(nullptr)},
          {"fits", compiled ? compiledPeak[i] <= options.memoryPerDevice : c.fits},
          {"fits_by", compiled ? "compiled" : "estimate"},
          {"cuts", llvm::json::Array(chosenIndex && *chosenIndex == i ? best.cutNodes
                                                                     : c.cutNodes)}});
    }
    autoRecord = llvm::json::Object{
        {"devices", numDevices.getValue()},
        {"memory_per_device",
         options.memoryPerDevice > 0 ? llvm::json::Value(options.memoryPerDevice)
                                     : llvm::json::Value(nullptr)},
        {"costs", profile ? "profile" : "cost model"},
        {"evaluated", int64_t(search.candidates.size())},
        {"chosen", best.describe()},
        {"why", "the most samples per second predicted (one pipeline: the "
                "shortest step) of the " +
                    std::to_string(search.candidates.size()) +
                    " plans simulated (ties within 0.5% go to fewer devices, then "
                    "less memory)" +
                    (options.memoryPerDevice > 0
                         ? std::string("; under the memory limit the first in that order "
                                       "whose compiled programs fit on every device (" +
                                       std::to_string(checkedOrder.size()) +
                                       " compiled)")
                         : std::string())},
        {"candidates", std::move(rows)}};
  } else if (numDevices.getNumOccurrences() ||
             allowPipelines.getNumOccurrences() ||
             autoDryRun.getNumOccurrences()) {
    return fail("--devices, --allow-pipelines and --auto-dry-run apply to "
                "--auto only");
  } else if (autoMethods.getNumOccurrences()) {
    return fail("--auto-methods applies to --auto only");
  } else if (autoRows.getNumOccurrences()) {
    return fail("--auto-candidates applies to --auto only");
  }

  if (numStages < 1)
    return fail("--stages must be >= 1");
  if (batchnorm != "micro-batch" && batchnorm != "full-batch")
    return fail("--batchnorm must be micro-batch or full-batch, not '" +
                batchnorm + "'");
  if (microbatches < 1)
    return fail("--microbatches must be >= 1");
  if (deferWeightGrads < 0)
    return fail("--defer-weight-grads must be >= 0 rows (0: per micro-batch), not " +
                llvm::Twine(deferWeightGrads.getValue()));
  if (scheduleKind != "gpipe" && scheduleKind != "1f1b" && scheduleKind != "afp")
    return fail("--schedule must be gpipe, 1f1b or afp, not '" + scheduleKind + "'");
  if (advance < 0)
    return fail("--advance must be >= 0 (got " + llvm::Twine(advance.getValue()) + ")");
  if (advance.getNumOccurrences() && !autoPlan && scheduleKind != "afp")
    return fail("--advance applies to --schedule afp only");
  if (method != "sync" && method != "pipedream" && method != "2bw" &&
      method != "spectrain" && method != "pipemare" && method != "avgpipe")
    return fail("--method must be sync, pipedream, 2bw, spectrain, pipemare "
                "or avgpipe, not '" + method + "'");
  bool noFlushMethod = method == "pipedream" || method == "2bw" ||
                       method == "spectrain" || method == "pipemare";
  {
    // A NaN or infinite rate would compile (plan.json then holds a null)
    // and train to NaN; a negative one ascends.
    auto number = [](double v) {
      char text[64];
      std::snprintf(text, sizeof text, "%g", v);
      return std::string(text);
    };
    if (!(std::isfinite(lr.getValue()) && lr > 0))
      return fail("--lr must be a finite number > 0, not " + number(lr));
    // The updates compute in float32: a rate below its normal range is 0
    // there (the weights never move), one above it infinite.
    if (lr < std::numeric_limits<float>::min() || lr > std::numeric_limits<float>::max())
      return fail("--lr " + number(lr) + " is outside float32's range (1.2e-38 to 3.4e+38), "
                  "which the updates compute in");
    if (momentum.getNumOccurrences() &&
        !(std::isfinite(momentum.getValue()) && momentum >= 0 && momentum < 1))
      return fail("--momentum must be in [0, 1), not " + number(momentum));
    if (momentum.getNumOccurrences() && optimizer != "momentum" && optimizer != "nesterov")
      return fail("--momentum applies to --optimizer momentum or nesterov, not " +
                  optimizer + " (which would ignore it)");
    if (weightDecay.getNumOccurrences() &&
        !(std::isfinite(weightDecay.getValue()) && weightDecay >= 0))
      return fail("--weight-decay must be a finite number >= 0, not " +
                  number(weightDecay));
    if (std::string bad = lrScheduleFlags().check(lr.getValue()); !bad.empty())
      return fail(bad);
    if (clipGradNorm.getNumOccurrences() &&
        !(std::isfinite(clipGradNorm.getValue()) && clipGradNorm > 0 &&
          clipGradNorm <= std::numeric_limits<float>::max()))
      return fail("--clip-grad-norm must be a finite number > 0 (the largest gradient norm "
                  "kept), not " +
                  number(clipGradNorm));
    if (clipGradNorm > 0 && method != "sync" && method != "avgpipe")
      return fail("--clip-grad-norm needs a synchronous schedule: --method " + method +
                  " updates the stages at different times, so a step has no one gradient "
                  "to clip by its global norm (drop --method or --clip-grad-norm)");
  }
  if (lrWarmup < 0)
    return fail("--lr-warmup must be >= 0 updates (got " +
                llvm::Twine(lrWarmup.getValue()) + ")");
  double gamma = -1.0;
  if (discrepancyCorrection.getNumOccurrences() && !autoDroppedPipeMareFlags) {
    StringRef text = discrepancyCorrection.getValue();
    if (text.getAsDouble(gamma) || !(gamma >= 0 && gamma < 1))
      return fail("--discrepancy-correction must be a decay in [0, 1), not '" +
                  text + "'");
  }
  if ((lrWarmup.getNumOccurrences() ||
       discrepancyCorrection.getNumOccurrences()) &&
      method != "pipemare" && !autoDroppedPipeMareFlags)
    return fail("--lr-warmup and --discrepancy-correction apply to --method "
                "pipemare only");
  if (method == "spectrain" && optimizer == "adagrad")
    return fail("--method spectrain predicts along the optimizer's step "
                "direction, which adagrad does not define: use --optimizer "
                "sgd, momentum, nesterov, adam or adamw");
  if (numPipelines < 1)
    return fail("--pipelines must be >= 1 (got " +
                llvm::Twine(numPipelines.getValue()) + ")");
  if (numPipelines > 1 && noFlushMethod)
    return fail("--pipelines runs synchronous pipelines (--method sync or "
                "avgpipe), not --method " + method);
  if (!(avgAlpha > 0 && avgAlpha < 1)) {
    char text[64];
    std::snprintf(text, sizeof text, "%g", avgAlpha.getValue());
    return fail(llvm::Twine("--avg-alpha must be in (0, 1), not ") + text);
  }
  if (avgPeriod < 1)
    return fail("--avg-period must be >= 1 (got " +
                llvm::Twine(avgPeriod.getValue()) + ")");
  if ((avgAlpha.getNumOccurrences() || avgPeriod.getNumOccurrences()) &&
      method != "avgpipe")
    return fail("--avg-alpha and --avg-period apply to --method avgpipe only");
  // METHODS.md: with P = 1 there is nothing to average (the base schedule).
  if (method == "avgpipe" && numPipelines <= 1 && !autoPlan)
    llvm::errs() << "pipe-compile: note: --method avgpipe with one pipeline is the base "
                    "schedule, exactly (nothing to average"
                 << (avgAlpha.getNumOccurrences() || avgPeriod.getNumOccurrences()
                         ? ": --avg-alpha and --avg-period have no effect"
                         : "")
                 << "); --pipelines P >= 2 runs P pipelines averaged\n";
  if (verticalSync && method != "pipedream")
    return fail("--vertical-sync applies to --method pipedream only");
  if (noFlushMethod && scheduleKind.getNumOccurrences() &&
      scheduleKind != "1f1b")
    return fail("--method " + method + " runs 1F1B without a flush; drop "
                "--schedule " + scheduleKind);
  if (method == "2bw" && microbatches < numStages)
    return fail("--method 2bw needs at least as many micro-batches as stages "
                "(--microbatches " + llvm::Twine(microbatches.getValue()) +
                " < --stages " + llvm::Twine(numStages.getValue()) + ")");
  if (method != "sync" && forwardOnly)
    return fail("--forward-only does not train: drop --method");
  if (recompute && forwardOnly)
    return fail("--recompute applies to training: drop --forward-only");
  if (clipGradNorm.getNumOccurrences() && forwardOnly)
    return fail("--clip-grad-norm applies to training: drop --forward-only");
  if (forwardOnly)
    for (const cl::Option *o : std::initializer_list<const cl::Option *>{
             &optimizer, &lr, &momentum, &weightDecay, &lrScheduleKind, &warmupSteps,
             &decaySteps, &minLr})
      if (o->getNumOccurrences())
        return fail("--" + o->ArgStr + " applies to training, which --forward-only does "
                    "not do: drop one of them");
  // An explicit plan under a memory limit: the balanced partition if its
  // compiled programs fit, else cuts that do (fitCompiled).
  if (!autoPlan && !memoryPerDevice.empty()) {
    if (method != "sync" || numPipelines > 1 || forwardOnly || !fromMlir.empty() ||
        !cuts.empty() || (partition.getNumOccurrences() && partition != "balanced"))
      return fail("--memory-per-device plans the balanced partition of a "
                  "synchronous pipeline: drop --method, --pipelines, "
                  "--partition, --cut, --from-mlir and --forward-only");
    pipec::planner::PlannerOptions options = plannerOptions();
    if (options.memoryPerDevice <= 0)
      return fail("--memory-per-device '" + memoryPerDevice +
                  "' is not a size; write e.g. 8G, 512M or 1048576");
    std::optional<pipec::planner::Candidate> c = pipec::planner::evaluatePlan(
        plannedForward(), options, numStages, microbatches,
        *pipec::schedule::parseScheduleKind(scheduleKind), advance);
    if (!c)
      return fail("--memory-per-device: cannot evaluate " +
                  llvm::Twine(numStages.getValue()) + " stages x M = " +
                  llvm::Twine(microbatches.getValue()) + " for " + modelPath);
    // The programs compiled decide (fitCompiled): the balanced partition,
    // else cuts the estimate finds. (One stage with M micro-batches is
    // evaluated as M = 1; what is compiled has M.)
    int64_t smallest = -1;
    c->microbatches = microbatches;
    std::optional<Fitted> fitted = fitCompiled(*c, options, smallest);
    if (!fitted)
      return fail("no partition into " + llvm::Twine(numStages.getValue()) +
                  " stages found that fits --memory-per-device " + memoryPerDevice +
                  " (the " + (tries > 1 ? "smallest of " + std::to_string(tries) +
                                              " partitions compiled"
                                        : std::string("balanced one")) +
                  " needs " + llvm::Twine(smallest >= 0 ? smallest : c->peakMemory) +
                  " bytes on its fullest device): allow more, or add stages or "
                  "micro-batches (--auto searches them)");
    c->cutNodes = fitted->cuts;
    if (!c->cutNodes.empty()) {
      partition = std::string("manual");
      cuts.clear();
      for (const std::string &node : c->cutNodes)
        cuts.push_back(node);
      llvm::outs() << "pipe-compile: cuts after "
                   << llvm::join(c->cutNodes, ", ")
                   << " (the balanced partition does not fit "
                      "--memory-per-device " << memoryPerDevice << ")\n";
    }
  }
  std::optional<llvm::json::Object> prediction;
  // With a profile, what the planner predicts for this plan (the balanced
  // partition, a synchronous schedule, one pipeline).
  if (profile && !autoPlan && !forwardOnly && fromMlir.empty() && method == "sync" &&
      numPipelines == 1 && partition == "balanced") {
    if (std::optional<pipec::planner::Candidate> c =
            pipec::planner::evaluatePlan(
                plannedForward(), plannerOptions(), numStages, microbatches,
                *pipec::schedule::parseScheduleKind(scheduleKind), advance)) {
      llvm::outs() << llvm::formatv(
          "pipe-compile: predicted step {0:f3} ms ({1:f1} samples/s, bubble "
          "{2:f3}, peak {3} bytes per device) from {4}\n",
          c->stepSeconds * 1e3, c->throughput, c->bubble, c->peakMemory,
          profilePath.getValue());
      prediction = llvm::json::Object{
          {"step_s", c->stepSeconds},
          {"samples_per_s", c->throughput},
          {"bubble", c->bubble},
          {"peak_memory_bytes", c->peakMemory},
          {"profile", profilePath.getValue()}};
    }
  }
  if (profileOps && (numStages > 1 || microbatches > 1 || numPipelines > 1 ||
                     method != "sync" || recompute || forwardOnly))
    return fail("--profile-ops times the one-device training step: drop "
                "--stages, --microbatches, --pipelines, --method, --recompute and "
                "--forward-only");
  for (const std::string &cut : cuts)
    if (cut.empty())
      return fail("--cut: an empty node name (two commas in a row, or one at an end); "
                  "give --cut A,B with the ONNX node names after which each stage ends");
  // --cut without --stages: the cuts say how many (k cuts, k + 1 stages).
  if (!cuts.empty() && !numStages.getNumOccurrences())
    numStages = int(cuts.size()) + 1;
  if (numStages > 1 || microbatches > 1 || !fromMlir.empty() || showSchedule ||
      method != "sync" || numPipelines > 1 || recompute) {
    // --cut names the cuts: --partition manual (which it implies).
    if (!cuts.empty() && partition != "manual") {
      if (partition.getNumOccurrences())
        return fail("--cut names the cuts of --partition manual, but --partition is '" +
                    partition + "' (which chooses its own): drop one of them");
      partition = std::string("manual");
    }
    pipec::PartitionOption strategy = pipec::PartitionOption::Balanced;
    if (partition == "dp")
      strategy = pipec::PartitionOption::DP;
    else if (partition == "manual")
      strategy = pipec::PartitionOption::Manual;
    else if (partition == "layers")
      strategy = pipec::PartitionOption::Layers;
    else if (partition != "balanced")
      return fail("--partition must be balanced, dp, manual or layers, not '" +
                  partition + "'");
    // The options of pipe-train-pipeline, from the command line.
    pipec::TrainPipelineOptions trainOptions;
    trainOptionsFromFlags(trainOptions, strategy, gamma);
    if (forwardOnly)
      return fail("--forward-only has no pipeline form");
    std::string modelCopy = stagePath("model.onnx");
    if (std::error_code ec = llvm::sys::fs::copy_file(modelPath, modelCopy))
      return fail("cannot copy the model to " + modelCopy + ": " + ec.message());
    OwningOpRef<ModuleOp> pipeModule;
    if (!fromMlir.empty()) {
      llvm::SourceMgr sourceMgr;
      ParserConfig config(&context);
      pipeModule = parseSourceFile<ModuleOp>(fromMlir, config);
      if (!pipeModule)
        return fail("cannot parse " + fromMlir);
      // The IR must be MODEL.onnx's: every parameter a stage takes is one
      // of its initializers with the same type, every input it feeds one
      // of its inputs with the same samples (else the run fails later, or
      // trains another model's weights).
      llvm::StringMap<Type> modelParams, modelInputs;
      for (unsigned i = 0; i < forward.getNumArguments(); ++i) {
        if (auto p = forward.getArgAttrOfType<StringAttr>(i, pipe::attrs::kParam))
          modelParams[p.getValue()] = forward.getArgument(i).getType();
        if (auto in = forward.getArgAttrOfType<StringAttr>(i, pipe::attrs::kInput))
          modelInputs[in.getValue()] = forward.getArgument(i).getType();
      }
      std::string mismatch;
      pipeModule->walk([&](pipe::StageOp stage) {
        for (unsigned i = 0; i < stage.getNumArguments() && mismatch.empty(); ++i) {
          Type type = stage.getArgument(i).getType();
          std::string where = "stage @" + stage.getSymName().str();
          if (auto p = stage.getArgAttrOfType<StringAttr>(i, pipe::attrs::kParam)) {
            auto it = modelParams.find(p.getValue());
            if (it == modelParams.end())
              mismatch = where + " takes parameter '" + p.getValue().str() + "', which " +
                         modelPath + " does not have";
            else if (it->second != type)
              mismatch = where + " takes parameter '" + p.getValue().str() + "' as " +
                         typeText(type) + ", but in " + modelPath + " it is " +
                         typeText(it->second);
            continue;
          }
          auto in = stage.getArgAttrOfType<StringAttr>(i, pipe::attrs::kInput);
          if (!in)
            in = stage.getArgAttrOfType<StringAttr>(i, pipe::attrs::kStepInput);
          if (!in)
            continue;
          auto it = modelInputs.find(in.getValue());
          auto got = dyn_cast<RankedTensorType>(type);
          auto want = it == modelInputs.end() ? RankedTensorType()
                                              : dyn_cast<RankedTensorType>(it->second);
          if (!want)
            mismatch = where + " feeds input '" + in.getValue().str() + "', which " +
                       modelPath + " does not have";
          else if (!got || got.getRank() != want.getRank() ||
                   got.getElementType() != want.getElementType() ||
                   got.getShape().drop_front() != want.getShape().drop_front())
            mismatch = where + " feeds input '" + in.getValue().str() + "' as " +
                       typeText(type) + ", but in " + modelPath + " it is " +
                       typeText(want) + " (other samples)";
        }
        return mismatch.empty() ? WalkResult::advance() : WalkResult::interrupt();
      });
      if (!mismatch.empty())
        return fail("--from-mlir " + fromMlir + ": " + mismatch +
                    ": give the model this IR was made from");
      // The initial values: the imported @forward's pipe.init, by name.
      if (!pipeModule->lookupSymbol("forward")) {
        OpBuilder b(pipeModule->getBodyRegion());
        b.clone(*forward);
      }
    } else {
      PassManager pm(&context);
      pipec::buildStagesPipeline(pm, trainOptions);
      if (failed(pm.run(*module)))
        return 1;
      pipeModule = std::move(module);
    }
    if (emitMlir)
      writeFile(stagePath("1-stages.mlir"),
                [&](llvm::raw_ostream &os) { pipeModule->print(os); });
    {
      PassManager pm(&context);
      if (!fromMlir.empty()) {
        // Pipe IR from elsewhere: M and the optimizer come from the command
        // line (they override the module's, if it has them).
        if (!pipeModule->getOps<pipe::ProgramOp>().empty() && clipGradNorm > 0)
          return fail("--clip-grad-norm: " + fromMlir +
                      " has its programs scheduled already; clip in them "
                      "(pipe.clip_grad_norm before each update) or give pipe.stage "
                      "functions only");
        if (pipeModule->getOps<pipe::ProgramOp>().empty()) {
          pipec::PipeScheduleOptions schedule;
          schedule.kind = method == "sync" || method == "avgpipe"
                              ? scheduleKind.getValue()
                              : method.getValue();
          methodFlagsInto(schedule, gamma);
          schedule.advance = advance.getValue();
          schedule.microbatches = microbatches.getValue();
          schedule.optimizer = optimizer.getValue();
          schedule.lr = lr.getValue();
          if (optimizer == "momentum" || optimizer == "nesterov")
            schedule.momentum = momentum.getValue();
          if (weightDecay.getNumOccurrences())
            schedule.weightDecay = weightDecay.getValue();
          schedule.lrSchedule = lrScheduleKind.getValue();
          schedule.warmupSteps = warmupSteps.getValue();
          schedule.decaySteps = decaySteps.getValue();
          schedule.minLr = minLr.getValue();
          schedule.clipGradNorm = clipGradNorm.getValue();
          pm.addPass(pipec::createPipeSchedule(schedule));
        }
        pm.addPass(pipec::createPipeVerifySchedule());
        pm.addPass(pipec::createPipePackTransfers());
      } else {
        pipec::buildSchedulePipeline(pm, trainOptions);
      }
      if (failed(pm.run(*pipeModule)))
        return 1;
    }
    if (emitMlir)
      writeFile(stagePath("2-programs.mlir"),
                [&](llvm::raw_ostream &os) { pipeModule->print(os); });
    if (showSchedule) {
      llvm::outs().flush();
      if (!runPipeline(*pipeModule, "pipe-print-schedule"))
        return 1;
    }
    // How a mean loss with ignore_index is taken over the micro-batches
    // (pipe-microbatch): the step's mean, or the micro-batches' averaged.
    auto lossMean = (*pipeModule)->getAttrOfType<StringAttr>(pipe::attrs::kLossMean);
    bool checked = false;
    if (lossMean)
      for (llvm::json::Value &v : dataSpec)
        if (llvm::json::Object *entry = v.getAsObject();
            entry && entry->getInteger("ignore_index")) {
          (*entry)["loss_mean"] = lossMean.getValue().str();
          checked = true;
        }
    // Labels computed inside the model: pipe-run cannot look for the
    // ignored ones in the data, so say it here.
    if (lossMean && lossMean.getValue() == "micro-batch" && !checked) {
      const bool perMicroBatch =
          method == "pipedream" || method == "spectrain" || method == "pipemare";
      llvm::errs() << "pipe-compile: warning: " << modelPath << ": "
                   << (perMicroBatch
                           ? "each update takes its micro-batch's mean over the labels the "
                             "loss does not ignore (ignore_index; NaN for a micro-batch "
                             "with none)"
                           : "the loss averages the micro-batches' means over the labels it "
                             "does not ignore (ignore_index), which is not the step's mean "
                             "where they count different numbers")
                   << "; its labels are computed from the inputs, so pipe-run cannot check "
                      "the data for ignored ones\n";
    }
    llvm::json::Object planBase{
        {"model", llvm::sys::path::filename(modelPath).str()},
        {"loss_mean", lossMean ? llvm::json::Value(lossMean.getValue().str())
                               : llvm::json::Value(nullptr)},
        {"data", std::move(dataSpec)},
        {"target", target},
        {"optimizer",
         llvm::json::Object{{"name", optimizer.getValue()},
                            {"lr", lr.getValue()},
                            {"momentum", momentumUsed()},
                            {"weight_decay", weightDecay.getValue()},
                            {"lr_schedule", lrScheduleJson()},
                            {"clip_grad_norm", clipGradNormJson()}}}};
    if (autoPlan)
      planBase["auto"] = llvm::json::Value(std::move(autoRecord));
    if (prediction)
      planBase["prediction"] = std::move(*prediction);
    if (int rc = compilePrograms(*pipeModule, modelBatch, planBase))
      return rc;
    return diagnostics.errorCount() ? 1 : 0;
  }

  // The evaluation entry (pipe-run --eval-data): the forward in inference
  // mode, over the step's buffers; a copy taken before training changes it.
  OwningOpRef<func::FuncOp> evalForward;
  if (!forwardOnly)
    evalForward = forward.clone();
  // Training step: gradients and the optimizer update.
  if (!forwardOnly) {
    for (StringRef pass : {"pipe-fold-dropout", "pipe-fuse-gelu", "pipe-fuse-attention",
                            "pipe-autodiff", "pipe-add-optimizer"})
      if (!PassInfo::lookup(pass) && !PassPipelineInfo::lookup(pass))
        return fail("pass '" + pass +
                    "' is not available in this build; compile with "
                    "--forward-only to build the forward pass alone");
    std::string pipeline = oneDeviceTrainPipeline();
    PassManager pm(&context);
    if (failed(parsePassPipeline(pipeline, pm, llvm::errs())))
      return fail("cannot build the training pipeline '" + pipeline + "'");
    if (failed(pm.run(*module)))
      return 1;
    dumpStage("1-train.mlir");
  }

  // Buffers and runtime calls.
  {
    PassManager pm(&context);
    pipec::LowerToRuntimeOptions options;
    options.target = target;
    options.profileOps = profileOps;
    pm.addPass(pipec::createLowerToRuntime(options));
    if (failed(pm.run(*module)))
      return 1;
  }
  auto step = module->lookupSymbol<func::FuncOp>(pipec::kStepFunctionName);
  DictionaryAttr program =
      step ? step->getAttrOfType<DictionaryAttr>(pipec::kProgramAttrName)
           : DictionaryAttr();
  if (!program)
    return fail("pipe-lower-to-runtime left no @pipe_step");
  if (evalForward) {
    // Only the loss: no state update, no other output.
    func::FuncOp fn = evalForward.release();
    fn.setName("pipe.eval_source");
    auto ret = cast<func::ReturnOp>(fn.getBody().front().getTerminator());
    llvm::BitVector drop(fn.getNumResults());
    SmallVector<Value> kept;
    for (unsigned i = 0; i < fn.getNumResults(); ++i) {
      if (fn.getResultAttr(i, pipe::attrs::kLoss))
        kept.push_back(ret.getOperand(i));
      else
        drop.set(i);
    }
    ret->setOperands(kept);
    if (failed(fn.eraseResults(drop)))
      return fail("cannot build the evaluation entry");
    pipec::toInferenceMode(fn.getBody().front());
    // The top-1 accuracy's counts, after the loss (pipe.metric slots).
    std::string noAccuracy;
    std::optional<pipec::AccuracyCounts> counts =
        pipec::buildAccuracyCounts(fn.getBody().front(), 1, noAccuracy);
    if (!counts && noAccuracy.empty())
      return fail("cannot build the evaluation's accuracy counts");
    if (counts) {
      OpBuilder rb(&context);
      for (auto [slot, v] :
           {std::pair<int64_t, Value>{pipec::kMetricCorrect, counts->correct},
            std::pair<int64_t, Value>{pipec::kMetricCounted, counts->counted}}) {
        if (failed(fn.insertResult(fn.getNumResults(), v.getType(),
                                   rb.getDictionaryAttr(rb.getNamedAttr(
                                       pipe::attrs::kMetric, rb.getI64IntegerAttr(slot))))))
          return fail("cannot add the accuracy counts to the evaluation entry");
        ret->insertOperands(ret->getNumOperands(), v);
      }
    }
    module->push_back(fn);
    pipec::StepFunctionOptions options;
    options.name = pipec::kEvalFunctionName;
    if (failed(pipec::lowerStepFunction(*module, fn, target == "cuda", options)))
      return 1;
    // It reads the step's buffers: the same inputs, and its parameters and
    // state first among the step's persistent ones, in the same order.
    auto evalFn = module->lookupSymbol<func::FuncOp>(pipec::kEvalFunctionName);
    DictionaryAttr evalInfo =
        evalFn ? evalFn->getAttrOfType<DictionaryAttr>(pipec::kProgramAttrName)
               : DictionaryAttr();
    auto names = [](DictionaryAttr info, StringRef group) {
      std::vector<std::string> out;
      if (auto list = info ? info.getAs<ArrayAttr>(group) : ArrayAttr())
        for (Attribute a : list)
          out.push_back(cast<DictionaryAttr>(a).getAs<StringAttr>("name").getValue().str());
      return out;
    };
    std::vector<std::string> stepInputs = names(program, "inputs"),
                             stepPersistent = names(program, "persistent"),
                             evalInputs = names(evalInfo, "inputs"),
                             evalPersistent = names(evalInfo, "persistent");
    if (!evalInfo || evalInputs != stepInputs || evalPersistent.size() > stepPersistent.size() ||
        !std::equal(evalPersistent.begin(), evalPersistent.end(), stepPersistent.begin()))
      return fail("internal error: the evaluation entry's buffers are not the step's "
                  "(compile with --forward-only to evaluate instead)");
    evalFn->removeAttr(pipec::kProgramAttrName);
    NamedAttrList fields(program);
    fields.set("eval", BoolAttr::get(&context, true));
    if (counts)
      fields.set("eval_metrics", IntegerAttr::get(IntegerType::get(&context, 64),
                                                  pipec::kMetricCounted));
    else
      fields.set("accuracy_unavailable", StringAttr::get(&context, noAccuracy));
    program = fields.getDictionary(&context);
  }
  dumpStage("2-runtime.mlir");
  llvm::json::Array opProfile;
  if (auto table = step->getAttrOfType<ArrayAttr>("pipe.op_table"))
    for (auto [id, entry] : llvm::enumerate(table.getAsRange<ArrayAttr>()))
      opProfile.push_back(llvm::json::Object{
          {"id", int64_t(id)},
          {"node", cast<StringAttr>(entry[0]).getValue()},
          {"phase", cast<IntegerAttr>(entry[1]).getInt()}});
  {
    PassManager pm(&context);
    pipec::buildLowerToLLVMPipeline(pm);
    if (failed(pm.run(*module)))
      return 1;
    dumpStage("3-llvm.mlir");
  }

  // Object, executable, the model for --save, plan.json.
  pipec::ProgramOptions programOptions;
  programOptions.program = program;
  programOptions.batch = modelBatch;
  programOptions.modelFile = "model.onnx";
  programOptions.optimizer = forwardOnly ? std::string("none") : optimizer.getValue();
  std::string objectPath = stagePath("device0.o");
  std::string exePath = stagePath("device0");
  std::string error = removeStaleOutputs();
  if (!error.empty())
    return fail(error);
  if (failed(pipec::emitProgramObject(*module, programOptions, objectPath,
                                      error)))
    return fail(error);
  if (failed(pipec::linkProgram(objectPath, exePath, target, error)))
    return fail(error);
  if (!emitMlir)
    llvm::sys::fs::remove(objectPath);
  std::string modelCopy = stagePath("model.onnx");
  if (std::error_code ec = llvm::sys::fs::copy_file(modelPath, modelCopy))
    return fail("cannot copy the model to " + modelCopy + ": " + ec.message());

  llvm::json::Object plan{
      {"model", llvm::sys::path::filename(modelPath).str()},
      {"loss_mean", nullptr}, // one micro-batch: the step's mean as it is
      {"data", std::move(dataSpec)},
      {"batch", modelBatch},
      {"target", target},
      {"devices", 1},
      {"optimizer",
       llvm::json::Object{{"name", forwardOnly ? std::string("none")
                                               : optimizer.getValue()},
                          {"lr", lr.getValue()},
                          {"momentum", momentumUsed()},
                          {"weight_decay", weightDecay.getValue()},
                          {"lr_schedule", lrScheduleJson()},
                          {"clip_grad_norm", clipGradNormJson()}}},
      {"executables", llvm::json::Array{"device0"}}};
  for (auto &[key, value] : pipec::describeBuffers(program))
    plan[key] = std::move(value);
  {
    auto available = program.getAs<BoolAttr>("eval");
    auto metrics = program.getAs<IntegerAttr>("eval_metrics");
    auto noCounts = program.getAs<StringAttr>("accuracy_unavailable");
    plan["eval"] = llvm::json::Object{
        {"available", available && available.getValue()},
        {"unavailable", available ? llvm::json::Value(nullptr)
                                  : llvm::json::Value("--forward-only compiles no training "
                                                      "step to evaluate between")},
        {"accuracy", bool(metrics)},
        {"accuracy_unavailable", metrics || !noCounts ? llvm::json::Value(nullptr)
                                                      : llvm::json::Value(noCounts.getValue())}};
  }
  if (autoPlan)
    plan["auto"] = llvm::json::Value(std::move(autoRecord));
  if (profileOps)
    plan["op_profile"] = std::move(opProfile);
  if (prediction)
    plan["prediction"] = std::move(*prediction);
  if (failed(pipec::writePlan(stagePath("plan.json"), std::move(plan), error)))
    return fail(error);
  return diagnostics.errorCount() ? 1 : 0;
}
