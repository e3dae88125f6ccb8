//===- Plan.cpp - OUT/plan.json --------------------------------------------===//
#include "pipec/Target/Plan.h"
#include "pipec/Target/PlanVersion.h"
#include "pipec/Transforms/WholeBatch.h"
#include "dialects/pipe/PipeAttrNames.h"

#include "pipec/Analysis/CostModel.h"
#include "pipec/Conversion/Passes.h"
#include "pipec/Conversion/RuntimeABI.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/raw_ostream.h"

#include "dialects/onnx/OnnxDialect.h"
#include "dialects/onnx/ShapeHelpers.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"

#include <map>

using namespace mlir;
using namespace mlir::pipec;

static std::string typeText(Type t) {
  std::string s;
  llvm::raw_string_ostream os(s);
  os << t;
  return s;
}

llvm::json::Object mlir::pipec::describeBuffers(DictionaryAttr info) {
  int64_t paramBytes = 0, stateBytes = 0, inputBytes = 0, versionBytes = 0,
          accumulatorBytes = 0, inFlightBytes = 0;
  llvm::json::Array params, state, inputs;
  auto describe = [&](DictionaryAttr d, int64_t &bytes) {
    auto shape = d.getAs<DenseI64ArrayAttr>("shape").asArrayRef();
    int64_t n = 1;
    for (int64_t s : shape)
      n *= s;
    int64_t dtype = d.getAs<IntegerAttr>("dtype").getInt();
    bytes += n * runtimeDtypeBytes(dtype);
    return llvm::json::Object{
        {"name", d.getAs<StringAttr>("name").getValue().str()},
        {"shape", llvm::json::Array(shape)},
        {"elements", n},
        {"dtype", dtype},
        {"kind", d.getAs<StringAttr>("kind").getValue().str()}};
  };
  for (Attribute a : info.getAs<ArrayAttr>("inputs"))
    inputs.push_back(describe(cast<DictionaryAttr>(a), inputBytes));
  for (Attribute a : info.getAs<ArrayAttr>("persistent")) {
    auto d = cast<DictionaryAttr>(a);
    StringRef kind = d.getAs<StringAttr>("kind").getValue();
    if (kind == "param" || kind == "frozen")
      params.push_back(describe(d, paramBytes));
    else if (kind == "version")
      state.push_back(describe(d, versionBytes));
    else if (kind == "accumulator")
      state.push_back(describe(d, accumulatorBytes));
    else if (kind == "activations")
      state.push_back(describe(d, inFlightBytes));
    else
      state.push_back(describe(d, stateBytes));
  }
  int64_t activationBytes =
      info.getAs<IntegerAttr>("peak_activation_bytes").getInt();
  return llvm::json::Object{
      {"inputs", std::move(inputs)},
      {"parameters", std::move(params)},
      {"state", std::move(state)},
      {"memory",
       llvm::json::Object{
           {"parameter_bytes", paramBytes},
           {"optimizer_state_bytes", stateBytes},
           {"input_bytes", inputBytes},
           {"peak_activation_bytes", activationBytes},
           // No-flush methods: the weight versions besides the parameters,
           // the gradient accumulators and the activations in flight
           // between steps (0 for synchronous schedules).
           {"weight_version_bytes", versionBytes},
           {"gradient_accumulator_bytes", accumulatorBytes},
           {"in_flight_activation_bytes", inFlightBytes},
           {"total_bytes", paramBytes + stateBytes + inputBytes +
                               activationBytes + versionBytes +
                               accumulatorBytes + inFlightBytes}}}};
}

llvm::json::Object mlir::pipec::describeStages(ModuleOp module) {
  llvm::json::Object nodeStages;
  std::map<int64_t, double> flopsOfStage;
  CostModel costs;
  for (auto stage : module.getOps<pipe::StageOp>()) {
    double &flops = flopsOfStage[stage.getStage()];
    stage.walk([&](Operation *op) {
      if (op->getDialect() && op->getDialect()->getNamespace() == "onnx")
        flops += costs.getOpCost(op).flops;
      // The importer names every op after its ONNX node (a NameLoc).
      op->getLoc()->walk([&](Location loc) {
        if (auto name = dyn_cast<NameLoc>(loc)) {
          nodeStages[name.getName().getValue().str()] = stage.getStage();
          return WalkResult::interrupt();
        }
        return WalkResult::advance();
      });
    });
  }
  llvm::json::Array stageCosts;
  int64_t total = 0;
  for (auto [stage, flops] : flopsOfStage) {
    stageCosts.push_back(llvm::json::Object{
        {"stage", stage}, {"flops_per_microbatch", int64_t(flops)}});
    total += int64_t(flops);
  }
  return llvm::json::Object{{"node_stages", std::move(nodeStages)},
                            {"stage_costs", std::move(stageCosts)},
                            {"total_flops_per_microbatch", total}};
}

llvm::json::Object mlir::pipec::describeDevice(pipe::ProgramOp program,
                                               DictionaryAttr info,
                                               StringRef executable,
                                               llvm::json::Array &transfers) {
  int64_t k = program.getDevice();
  llvm::json::Array schedule;
  pipe::forEachInstruction(program, [&](Operation *op, int64_t mb) {
    std::string text;
    // A whole-batch stage's forward or backward (--batchnorm full-batch)
    // computes all M micro-batches: M entries, as pipe-verify-schedule
    // counts it, so that pipe-simulate charges it M micro-batches.
    if (isa<pipe::ForwardOp, pipe::BackwardOp>(op) &&
        op->hasAttr(wholebatch::kWholeBatch)) {
      std::string kind = isa<pipe::ForwardOp>(op) ? "F" : "B";
      for (int64_t u = 0; u < program.getMicrobatches(); ++u)
        schedule.push_back(kind + std::to_string(mb + u));
      return;
    }
    if (isa<pipe::ForwardOp>(op)) {
      text = "F" + std::to_string(mb);
    } else if (auto b = dyn_cast<pipe::BackwardOp>(op)) {
      text = (b.getPart() == pipe::BackwardPart::Weight ? "W" : "B") +
             std::to_string(mb);
    } else if (auto s = dyn_cast<pipe::SendOp>(op)) {
      text = llvm::formatv("send {0} mb {1} to {2}", s.getTag(), mb, s.getPeer());
      auto type = cast<RankedTensorType>(s.getValue().getType());
      transfers.push_back(llvm::json::Object{
          {"from", k},
          {"to", s.getPeer()},
          {"tag", s.getTag().str()},
          {"mb", mb},
          // A no-flush program's mb is relative to the step: its tag is
          // mpi_tag + (t*M + mb) mod 16 at step t (mpi_tag the mb-0 tag).
          {"mpi_tag", transferTag(s.getTag(), program.isNoFlush() ? 0 : mb)},
          {"type", typeText(type)},
          {"bytes", runtimeTensorBytes(type)}});
    } else if (auto r = dyn_cast<pipe::RecvOp>(op)) {
      text = llvm::formatv("recv {0} mb {1} from {2}", r.getTag(), mb, r.getPeer());
    } else if (auto fd = dyn_cast<pipe::FeedOp>(op)) {
      text = fd->hasAttr(pipe::attrs::kWholeStep)
                 ? llvm::formatv("feed {0} (whole step) mb {1}", fd.getInput(), mb).str()
                 : llvm::formatv("feed {0} mb {1}", fd.getInput(), mb).str();
    } else if (isa<pipe::UpdateOp>(op)) {
      text = "update";
    } else if (isa<pipe::ZeroGradOp>(op)) {
      text = "zero_grad";
    } else if (isa<pipe::ReportLossOp>(op)) {
      text = "loss mb " + std::to_string(mb);
    } else {
      return;
    }
    schedule.push_back(text);
  });

  llvm::json::Object buffers = describeBuffers(info);
  llvm::json::Array params, inputs;
  for (const llvm::json::Value &p : *buffers.getArray("parameters"))
    params.push_back(p.getAsObject()->getString("name")->str());
  for (const llvm::json::Value &p : *buffers.getArray("inputs"))
    inputs.push_back(p.getAsObject()->getString("name")->str());
  llvm::json::Object memory = std::move(*buffers.getObject("memory"));
  memory.erase("total_bytes");
  llvm::json::Array stages;
  for (int64_t s : program.getStages())
    stages.push_back(s);
  // Micro-batches whose activations this device holds at once, as the
  // scheduler recorded it (GPipe: M; 1F1B: at most p - s).
  llvm::json::Value peakInFlight = nullptr;
  if (auto peak = program->getAttrOfType<IntegerAttr>(pipe::attrs::kPeakInFlight))
    peakInFlight = peak.getInt();
  // The weight versions kept, against METHODS.md's count (PipeDream p - s,
  // with vertical sync p; 2BW 2; synchronous 1).
  int64_t versions = 1;
  for (auto wb : program.getInstructions().getOps<pipe::WeightBufferOp>())
    versions = std::max<int64_t>(versions, wb.getVersions());
  int64_t p = program->getParentOfType<ModuleOp>()
                  ? llvm::range_size(program->getParentOfType<ModuleOp>()
                                         .getOps<pipe::ProgramOp>())
                  : 1;
  int64_t stage = program.getStages().front();
  int64_t theory = 1;
  if (program.getSchedule() == pipe::ScheduleKind::PipeDream)
    theory = program.getVerticalSync() ? p : p - stage;
  else if (program.getSchedule() == pipe::ScheduleKind::PipeDream2BW)
    theory = 2;
  // SpecTrain and PipeMare: the live weights, plus on a stage with a delay
  // τ = p-1-s the predicted forward weights (SpecTrain) or the corrected
  // backward weights (PipeMare with T2), rewritten before each use.
  int64_t delay = p - 1 - stage;
  llvm::json::Value prediction = nullptr, lrWarmup = nullptr,
                    discrepancy = nullptr;
  program.walk([&](Operation *op) {
    if (auto pr = dyn_cast<pipe::PredictOp>(op))
      prediction = llvm::json::Object{
          {"direction", pipe::stringifyPredictDirection(pr.getDirection()).str()},
          {"gap", pr.getGap()},
          {"reads", isa<pipe::BackwardOp>(pr->getNextNode()) ? "backward"
                                                              : "forward"}};
    if (auto up = dyn_cast<pipe::UpdateOp>(op)) {
      if (auto k = up.getAnnealSteps())
        lrWarmup = llvm::json::Object{
            {"updates", *k}, {"lr_scale", up.getLrScale()->convertToDouble()}};
      if (auto g = up.getDiscrepancy())
        discrepancy = g->convertToDouble();
    }
  });
  if (program.getSchedule() == pipe::ScheduleKind::SpecTrain ||
      program.getSchedule() == pipe::ScheduleKind::PipeMare)
    theory = prediction.kind() == llvm::json::Value::Null ? 1 : 2;
  llvm::json::Object method{
      {"delay", program.isNoFlush() ? llvm::json::Value(delay)
                                    : llvm::json::Value(nullptr)},
      {"prediction", std::move(prediction)},
      {"lr_warmup", std::move(lrWarmup)},
      {"discrepancy_correction", std::move(discrepancy)},
      {"name", pipe::stringifyScheduleKind(program.getSchedule()).str()},
      {"no_flush", program.isNoFlush()},
      {"vertical_sync", program.getVerticalSync()},
      {"weight_versions", versions},
      {"weight_versions_formula", theory},
      {"drain_steps", pipe::drainSteps(program)},
      {"advance", program.getAdvance() ? llvm::json::Value(*program.getAdvance())
                                       : llvm::json::Value(nullptr)}};
  // The weights the evaluation entry reads (pipe-run --eval-data).
  llvm::json::Value evalWeights = nullptr;
  program.walk([&](pipe::WeightBufferOp wb) {
    EvalWeights read = evalWeightsOf(program, wb.getWeights());
    if (read.newest)
      evalWeights = llvm::json::Object{
          {"newest", true},
          {"clock", read.stepClock ? "step" : "micro-batch"},
          {"version", read.version},
          {"last_microbatch", read.last}};
    else
      evalWeights = llvm::json::Object{{"newest", false}, {"slot", read.slot}};
  });
  method["eval_weights"] = std::move(evalWeights);
  // Several pipelines: how the replicas of this stage are tied.
  llvm::json::Value replicas = nullptr;
  program.walk([&](Operation *op) {
    if (auto avg = dyn_cast<pipe::AverageOp>(op))
      replicas = llvm::json::Object{
          {"kind", "avgpipe"},
          {"group", llvm::json::Array(avg.getGroup())},
          {"alpha", avg.getAlpha().convertToDouble()},
          {"period", avg.getPeriod()},
          {"centre_version", avg.getCentre()}};
    else if (auto red = dyn_cast<pipe::AllReduceOp>(op))
      replicas = llvm::json::Object{{"kind", "dp"},
                                    {"group", llvm::json::Array(red.getGroup())}};
  });
  return llvm::json::Object{
      {"method", std::move(method)},
      {"pipeline", program.getPipeline().value_or(0)},
      {"replicas", std::move(replicas)},
      {"peak_in_flight_microbatches", std::move(peakInFlight)},
      {"device", k},
      {"executable", executable.str()},
      {"stages", std::move(stages)},
      {"schedule_kind", pipe::stringifyScheduleKind(program.getSchedule()).str()},
      {"microbatches", program.getMicrobatches()},
      {"schedule", std::move(schedule)},
      {"reads_data", std::move(inputs)},
      {"reports_loss", info.getAs<BoolAttr>("has_loss").getValue()},
      {"parameters", std::move(params)},
      {"memory", std::move(memory)}};
}

LogicalResult mlir::pipec::writePlan(StringRef path, llvm::json::Object plan,
                                     std::string &error) {
  plan["version"] = kPlanVersion;
  // Each executable's hash: pipe-run refuses an OUT whose device<k> another
  // compile wrote (its ranks would wait on each other for ever, or train
  // with another's settings).
  if (const llvm::json::Array *names = plan.getArray("executables")) {
    llvm::json::Array hashes;
    llvm::SmallString<256> dir = llvm::sys::path::parent_path(path);
    for (const llvm::json::Value &name : *names) {
      llvm::SmallString<256> file = dir;
      llvm::sys::path::append(file, name.getAsString().value_or(""));
      std::optional<std::string> hash = executableHash(file);
      if (!hash) {
        error = ("cannot read " + file + " to hash it").str();
        return failure();
      }
      hashes.push_back(*hash);
    }
    plan["executable_hashes"] = std::move(hashes);
  }
  std::error_code ec;
  llvm::raw_fd_ostream os(path, ec, llvm::sys::fs::OF_Text);
  if (ec) {
    error = ("cannot write " + path + ": " + ec.message()).str();
    return failure();
  }
  os << llvm::formatv("{0:2}", llvm::json::Value(std::move(plan))) << "\n";
  return success();
}

llvm::json::Array mlir::pipec::describeData(ModuleOp module) {
  llvm::json::Array data;
  auto forward = module.lookupSymbol<func::FuncOp>("forward");
  if (!forward)
    return data;
  // Labels: the second operand of a classification loss, a graph input.
  llvm::DenseMap<Value, std::pair<int64_t, std::optional<int64_t>>> labels;
  llvm::DenseMap<Value, std::string> reductions; // absent: mean
  forward.walk([&](Operation *op) {
    if (!isa<onnx::SoftmaxCrossEntropyLossOp, onnx::NegativeLogLikelihoodLossOp>(op))
      return;
    auto scores = dyn_cast<RankedTensorType>(op->getOperand(0).getType());
    if (!scores || scores.getRank() < 2 || scores.isDynamicDim(1))
      return;
    std::optional<int64_t> ignore;
    if (auto i = op->getAttrOfType<IntegerAttr>("ignore_index"))
      ignore = i.getInt();
    // The labels' graph input, through ops that only reshape it (a
    // sequence model's (B, T) targets flattened to B*T).
    Value label = onnx::stripReshapes(op->getOperand(1));
    labels[label] = {scores.getDimSize(1), ignore};
    if (auto r = op->getAttrOfType<StringAttr>("reduction"))
      reductions[label] = r.getValue().str();
  });
  // Indices: a graph input a Gather reads as its indices (token ids into an
  // embedding table), through reshapes and casts: the extent of the axis
  // gathered from (the smallest, if it indexes several).
  llvm::DenseMap<Value, int64_t> indexExtents;
  forward.walk([&](onnx::GatherOp op) {
    auto data = dyn_cast<RankedTensorType>(op.getData().getType());
    if (!data || data.getRank() == 0)
      return;
    int64_t axis = op.getAxis();
    if (axis < 0)
      axis += data.getRank();
    if (axis < 0 || axis >= data.getRank() || data.isDynamicDim(axis))
      return;
    Value indices = onnx::stripReshapes(op.getIndices());
    while (auto cast = indices.getDefiningOp<onnx::CastOp>())
      indices = onnx::stripReshapes(cast.getInput());
    if (!isa<BlockArgument>(indices))
      return;
    auto [it, inserted] = indexExtents.try_emplace(indices, data.getDimSize(axis));
    if (!inserted)
      it->second = std::min(it->second, data.getDimSize(axis));
  });
  for (BlockArgument arg : forward.getArguments()) {
    auto name = forward.getArgAttrOfType<StringAttr>(arg.getArgNumber(),
                                                     pipe::attrs::kInput);
    auto type = dyn_cast<RankedTensorType>(arg.getType());
    if (!name || !type || type.getRank() == 0)
      continue;
    std::optional<int64_t> dtype = pipertDtype(type.getElementType());
    llvm::json::Object entry{
        {"name", name.getValue().str()},
        {"dtype", dtype ? llvm::json::Value(*dtype) : llvm::json::Value(nullptr)},
        {"sample_shape", llvm::json::Array(type.getShape().drop_front())},
        {"classes", nullptr},
        {"ignore_index", nullptr},
        {"loss_reduction", nullptr},
        {"index_extent", nullptr}};
    if (auto it = indexExtents.find(arg); it != indexExtents.end())
      entry["index_extent"] = it->second;
    if (auto it = labels.find(arg); it != labels.end()) {
      entry["classes"] = it->second.first;
      if (it->second.second)
        entry["ignore_index"] = *it->second.second;
      auto r = reductions.find(arg);
      entry["loss_reduction"] = r != reductions.end() ? r->second : "mean";
    }
    data.push_back(std::move(entry));
  }
  return data;
}
