//===- pipe-simulate.cpp - predict a compiled pipeline's step time --------===//
//
//   pipe-simulate OUT [--profile P.json] [--flops-per-second F] [--steps K]
//                 [--latency S] [--bandwidth B] [--trace sim.json]
//
// Replays the per-device programs pipe-compile wrote into OUT/plan.json
// (device_plans[].schedule, every schedule and method) with the schedule
// simulator of lib/Analysis (rendezvous transfers: a send and its recv
// complete together, latency + bytes / bandwidth after both are posted) and
// costs per stage: measured ones from a profile, else the plan's FLOPs at a
// given rate (backward = 2x forward). Prints the predicted step time (steady
// state over K steps), each device's busy share, its time waiting in
// transfers, its peak in-flight micro-batches and its memory (plan.json's
// per-device buffers, as compiled); --trace writes the
// simulated run as a Chrome trace, to set beside pipe-run --trace's.
//
//===----------------------------------------------------------------------===//
#include "../common/MpiFlags.h"
#include "pipec/Analysis/Profile.h"
#include "pipec/Analysis/Schedule.h"
#include "pipec/Support/Version.h"
#include "pipec/Target/PlanVersion.h"

#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <map>
#include <set>
#include <regex>

using namespace mlir::pipec;
namespace sched = mlir::pipec::schedule;
namespace cl = llvm::cl;

static cl::OptionCategory simCat("Simulation");
static cl::opt<std::string> outDir(cl::Positional, cl::desc("<OUT>"),
                                   cl::Required, cl::cat(simCat));
static cl::opt<std::string> profilePath(
    "profile", cl::value_desc("P.json"), cl::cat(simCat),
    cl::desc("Measured costs: pipe-profile's op profile of the model (each "
             "stage's nodes at the plan's micro-batch size, as pipe-compile "
             "--profile predicts), or stage costs {\"stages\": [{\"stage\": s, "
             "\"forward_s\": f, \"backward_s\": b, \"update_s\": u}], "
             "\"latency_s\": l, \"bandwidth_bytes_per_s\": w} (--write-profile's); "
             "anything absent comes from the options below"));
static cl::opt<std::string> measuredPath(
    "measured", cl::value_desc("t.json"), cl::cat(simCat),
    cl::desc("A pipe-run --trace of a run of these stages: its stage events "
             "(median per stage of forwards, backwards, updates) are the "
             "profile, and its measured step time is printed beside the "
             "prediction"));
static cl::opt<std::string> writeProfilePath(
    "write-profile", cl::value_desc("P.json"), cl::cat(simCat),
    cl::desc("Write the costs used (e.g. those from --measured) as a profile"));
static cl::opt<double> flopsPerSecond(
    "flops-per-second", cl::init(1e10), cl::cat(simCat),
    cl::desc("Compute rate for stages without a profile (default: 1e10)"));
static cl::opt<double> backwardFactor(
    "backward-factor", cl::init(2.0), cl::cat(simCat),
    cl::desc("Backward cost as a multiple of the forward's (default: 2)"));
static cl::opt<double> latency("latency", cl::init(5e-6), cl::cat(simCat),
                               cl::desc("Seconds per transfer (default: 5e-6)"));
static cl::opt<double> bandwidth(
    "bandwidth", cl::init(5e9), cl::cat(simCat),
    cl::desc("Transfer bytes per second (default: 5e9)"));
static cl::opt<double> memoryBandwidth(
    "memory-bandwidth", cl::init(1e10), cl::cat(simCat),
    cl::desc("Bytes per second of an update, which reads weights, gradients "
             "and optimizer state and writes weights and state (default: 1e10)"));
static cl::opt<bool> rendezvous(
    "rendezvous", cl::cat(simCat),
    cl::desc("Every send waits for its receiver (the model the verifier proves deadlock-free); "
             "by default, as the CPU runtime does, sends return at once up to a size: 4 MiB "
             "with single-copy shared memory (or PIPERT_SEND_BUFFER), else 256 KiB (the "
             "shared-memory rings, PIPERT_SHM_RING/4; none with PIPERT_SHM=0)"));
static cl::opt<int> steps("steps", cl::init(3), cl::cat(simCat),
                          cl::desc("Steps simulated; the step time is the "
                                   "steady state's (default: 3)"));
static cl::opt<std::string> tracePath(
    "trace", cl::value_desc("sim.json"), cl::cat(simCat),
    cl::desc("Write the simulated run as a Chrome trace"));

namespace {

[[noreturn]] void fail(const std::string &message);

/// Entry `index` of plan.json's array `array`, which must be an object.
const llvm::json::Object &planEntry(const llvm::json::Value &v, const char *array,
                                    size_t index) {
  const llvm::json::Object *o = v.getAsObject();
  if (!o)
    fail(std::string("plan.json: ") + array + "[" + std::to_string(index) +
         "] is not an object; compile again with this pipe-compile");
  return *o;
}

/// A decimal integer of plan.json's schedule strings or a trace's event
/// names (matched by a regex already), failing where it does not fit.
int64_t parseCount(const std::string &text, const std::string &where) {
  try {
    return std::stoll(text);
  } catch (const std::exception &) {
    fail(where + ": " + text + " does not fit a 64-bit integer");
  }
}

[[noreturn]] void fail(const std::string &message) {
  llvm::errs() << "pipe-simulate: error: " << message << "\n";
  std::exit(2);
}

struct StageCost {
  double forward = 0, backward = 0, update = 0;
};

struct Device {
  int64_t stage = 0;
  sched::Program step;
  std::vector<std::string> labels; // per instruction of `step`
  double updateSeconds = 0;
  /// The plan's memory of the device: every byte field of its `memory`.
  int64_t memoryBytes = 0;
};

/// One step's program from plan.json's instruction strings.
Device parseDevice(const llvm::json::Object &plan, int64_t index,
                   const std::map<std::pair<std::string, int64_t>, int64_t> &bytes) {
  Device dev;
  const llvm::json::Array *stages = plan.getArray("stages");
  if (!stages || stages->size() != 1)
    fail("device " + std::to_string(index) +
         " holds several stages; interleaved programs are not simulated");
  std::optional<int64_t> stage = (*stages)[0].getAsInteger();
  if (!stage)
    fail("plan.json: device_plans[" + std::to_string(index) +
         "].stages holds no integer; compile again with this pipe-compile");
  dev.stage = *stage;
  const llvm::json::Array *schedule = plan.getArray("schedule");
  if (!schedule)
    fail("device " + std::to_string(index) + " has no \"schedule\"");
  static const std::regex compute("^([FBW])(-?[0-9]+)$");
  static const std::regex transfer("^(send|recv) (.*) mb (-?[0-9]+) (to|from) ([0-9]+)$");
  for (const llvm::json::Value &v : *schedule) {
    std::string text = v.getAsString().value_or("").str();
    std::smatch m;
    sched::Instr instr;
    if (std::regex_match(text, m, compute)) {
      int64_t mb = parseCount(m[2], "plan.json: device " + std::to_string(index) + "'s " + text);
      instr = m[1] == "F" ? sched::Instr::forward(dev.stage, mb)
                          : sched::Instr::backward(dev.stage, mb);
      if (m[1] == "W")
        instr.kind = sched::InstrKind::BackwardWeight;
    } else if (std::regex_match(text, m, transfer)) {
      const std::string where = "plan.json: device " + std::to_string(index) + "'s " + text;
      int64_t mb = parseCount(m[3], where), peer = parseCount(m[5], where);
      // The payload carries the size for the transfer's duration.
      std::string tag = m[2];
      auto it = bytes.find({tag, mb});
      std::string payload = it == bytes.end() ? "" : std::to_string(it->second);
      instr = m[1] == "send" ? sched::Instr::send(peer, mb, tag, payload)
                             : sched::Instr::recv(peer, mb, tag, payload);
    } else if (text == "update") {
      instr = sched::Instr::update(dev.stage);
    } else {
      instr.kind = sched::InstrKind::Other; // feed, zero_grad, loss: no time
    }
    dev.step.push_back(instr);
    dev.labels.push_back(text);
  }
  return dev;
}

} // namespace

int main(int argc, char **argv) {
  setVersionPrinter("pipe-simulate");
  hideOtherOptions({&simCat});
  cl::ParseCommandLineOptions(
      argc, argv,
      "pipe-simulate: predicts the step time of a compiled pipeline\n");
  if (steps < 1)
    fail("--steps must be at least 1");
  // Every step's events are kept (about 1 KB a device a step).
  if (steps > 100000)
    fail("--steps " + std::to_string(steps) +
         ": at most 100000 (the steady state shows after a few steps)");
  {
    auto check = [](const cl::opt<double> &o, bool zeroOk) {
      const double v = o.getValue();
      if (!std::isfinite(v) || v < 0 || (v == 0 && !zeroOk)) {
        char text[64];
        std::snprintf(text, sizeof text, "%g", v);
        fail("--" + o.ArgStr.str() + " must be a finite number " + (zeroOk ? ">= 0" : "> 0") +
             ", not " + text);
      }
    };
    check(flopsPerSecond, false);
    check(bandwidth, false);
    check(memoryBandwidth, false);
    check(backwardFactor, true);
    check(latency, true);
  }
  std::string path = outDir + "/plan.json";
  auto buffer = llvm::MemoryBuffer::getFile(path);
  if (!buffer)
    fail("cannot read " + path + " (run pipe-compile -o " + outDir + " first)");
  llvm::Expected<llvm::json::Value> parsed = llvm::json::parse((*buffer)->getBuffer());
  if (!parsed)
    fail(path + ": not valid JSON (" + llvm::toString(parsed.takeError()) + ")");
  const llvm::json::Object *root = parsed->getAsObject();
  const llvm::json::Array *plans = root ? root->getArray("device_plans") : nullptr;
  if (root && !plans && root->getInteger("devices").value_or(0) == 1 &&
      !root->get("microbatches"))
    fail(path + " is a one-device plan without micro-batches: there is no schedule to "
                "simulate (compile with --stages or --microbatches, or time it with pipe-run)");
  if (!plans || plans->empty())
    fail(path + ": no \"device_plans\"; compile again with this pipe-compile");
  if (std::optional<int64_t> version = root->getInteger("version");
      !version || *version != mlir::pipec::kPlanVersion)
    fail(path + ": plan version " +
         (version ? std::to_string(*version) : std::string("none")) +
         ", this pipe-simulate reads version " + std::to_string(mlir::pipec::kPlanVersion) +
         "; compile again with this pipe-compile");
  int64_t microbatches = root->getInteger("microbatches").value_or(1);

  // Costs: the plan's FLOPs at the rate, then the profile's measurements.
  std::map<int64_t, StageCost> costs;
  if (const llvm::json::Array *sc = root->getArray("stage_costs"))
    for (const llvm::json::Value &v : *sc) {
      const llvm::json::Object *o = &planEntry(v, "stage_costs", size_t(&v - &*sc->begin()));
      int64_t s = o->getInteger("stage").value_or(0);
      double f = o->getNumber("flops_per_microbatch").value_or(0) / flopsPerSecond;
      costs[s].forward = f;
      costs[s].backward = f * backwardFactor;
    }
  double linkLatency = latency, linkBandwidth = bandwidth;
  std::map<int64_t, bool> measuredUpdate;
  // An op profile from pipe-profile, and its fit of whole steps.
  std::optional<OpProfile> opProfile;
  StepFit opFit;
  if (!profilePath.empty()) {
    auto pb = llvm::MemoryBuffer::getFile(profilePath);
    if (!pb)
      fail("cannot read profile " + profilePath);
    llvm::Expected<llvm::json::Value> pv = llvm::json::parse((*pb)->getBuffer());
    if (!pv)
      fail(profilePath + ": not valid JSON (" + llvm::toString(pv.takeError()) + ")");
    const llvm::json::Object *po = pv->getAsObject();
    if (!po)
      fail(profilePath + ": not a JSON object");
    if (po->get("ops")) {
      // pipe-profile's op profile: each stage's nodes (plan.json's
      // node_stages) at the plan's micro-batch size, scaled and with the
      // fixed cost per step as the planner charges them (fitStep).
      std::string error;
      std::optional<OpProfile> prof = readProfile(profilePath, error);
      if (!prof)
        fail(error);
      // The model the plan was compiled from (pipe-compile copies it to
      // OUT): a profile of another model may share node names.
      if (auto model = llvm::MemoryBuffer::getFile(outDir + "/model.onnx");
          model && !prof->modelHash.empty()) {
        std::string hash = hashModel((*model)->getBuffer());
        if (hash != prof->modelHash)
          fail(profilePath + " was measured for another model (hash " + prof->modelHash +
               ", " + outDir + "/model.onnx's is " + hash + "): run pipe-profile on " +
               root->getString("model").value_or("the model").str());
      }
      std::string target = root->getString("target").value_or("cpu").str();
      if (!prof->target.empty() && prof->target != target)
        fail(profilePath + " was measured for --target " + prof->target + ", the plan is for " +
             target + ": profile again with pipe-profile --target " + target);
      const llvm::json::Object *nodeStages = root->getObject("node_stages");
      if (!nodeStages)
        fail(path + ": no \"node_stages\"; compile again with this pipe-compile");
      double samples = double(root->getInteger("batch").value_or(1)) / double(microbatches);
      StepFit fit = fitStep(*prof);
      // Stages of a pipeline: the ops as they run beside the other ranks
      // where the profile measured it (as the planner scales them).
      // (Stages, not devices: data-parallel replicas of one stage are not
      // a pipeline.)
      std::set<int64_t> stageSet;
      for (const llvm::json::Value &v : *plans)
        if (const llvm::json::Object *o = v.getAsObject())
          if (const llvm::json::Array *st = o->getArray("stages"))
            for (const llvm::json::Value &x : *st)
              if (std::optional<int64_t> i = x.getAsInteger())
                stageSet.insert(*i);
      double calibration =
          stageSet.size() > 1 && prof->pipelineFactor > 0 ? prof->pipelineFactor : fit.scale;
      std::map<int64_t, StageCost> opCosts;
      int64_t known = 0;
      for (const auto &[node, stageValue] : *nodeStages) {
        std::optional<int64_t> st = stageValue.getAsInteger();
        if (!st)
          continue;
        StageCost &c = opCosts[*st];
        if (std::optional<double> f = prof->forwardAt(node.str(), samples)) {
          c.forward += calibration * *f;
          ++known;
        }
        if (std::optional<double> b = prof->backwardAt(node.str(), samples))
          c.backward += calibration * *b;
      }
      if (known == 0)
        fail(profilePath + " measures none of the plan's nodes: a profile of "
                           "another model (run pipe-profile on " +
             root->getString("model").value_or("the model").str() + ")");
      for (auto &[st, c] : opCosts) {
        costs[st].forward = c.forward;
        costs[st].backward = c.backward;
      }
      opProfile = std::move(prof);
      opFit = fit;
    } else if (!po->get("stages")) {
      fail(profilePath + ": neither an op profile (pipe-profile -o) nor stage "
                         "costs (\"stages\", pipe-simulate --write-profile)");
    }
    if (const llvm::json::Array *ps = po->getArray("stages"))
      for (const llvm::json::Value &v : *ps) {
        const llvm::json::Object *o = v.getAsObject();
        std::optional<int64_t> s = o ? o->getInteger("stage") : std::nullopt;
        if (!s)
          fail(profilePath + ": a stage entry without \"stage\"");
        if (auto f = o->getNumber("forward_s"))
          costs[*s].forward = *f;
        if (auto b = o->getNumber("backward_s"))
          costs[*s].backward = *b;
        if (auto u = o->getNumber("update_s")) {
          costs[*s].update = *u;
          measuredUpdate[*s] = true;
        }
      }
    linkLatency = po->getNumber("latency_s").value_or(linkLatency);
    linkBandwidth = po->getNumber("bandwidth_bytes_per_s").value_or(linkBandwidth);
    if (opProfile && opProfile->linkBandwidth > 0) {
      linkLatency = opProfile->linkLatency;
      linkBandwidth = opProfile->linkBandwidth;
    }
  }

  // A measured run: medians of its stage events, and of its steps.
  std::optional<double> measuredStep;
  // The trace's steps and per stage its updates (checked against the plan's).
  int64_t tracedSteps = 0;
  std::map<int64_t, int64_t> tracedUpdates;
  std::set<int64_t> tracedStages;
  if (!measuredPath.empty()) {
    auto tb = llvm::MemoryBuffer::getFile(measuredPath);
    if (!tb)
      fail("cannot read trace " + measuredPath);
    llvm::Expected<llvm::json::Value> tv = llvm::json::parse((*tb)->getBuffer());
    if (!tv)
      fail(measuredPath + ": not valid JSON (" + llvm::toString(tv.takeError()) + ")");
    const llvm::json::Object *to = tv->getAsObject();
    const llvm::json::Array *events = to ? to->getArray("traceEvents") : nullptr;
    if (!events)
      fail(measuredPath + ": no \"traceEvents\" (write it with pipe-run --trace)");
    std::map<std::pair<int64_t, char>, std::vector<double>> samples;
    std::vector<double> stepTimes;
    static const std::regex stageEvent("^(F|B|W|update)-?[0-9]* ?s([0-9]+)$");
    for (const llvm::json::Value &v : *events) {
      const llvm::json::Object *e = v.getAsObject();
      if (!e || e->getString("ph").value_or("") != "X")
        continue;
      std::string name = e->getString("name").value_or("").str();
      double dur = e->getNumber("dur").value_or(0) / 1e6;
      if (name == "step" && e->getInteger("pid").value_or(-1) == 0) {
        stepTimes.push_back(dur);
        continue;
      }
      std::smatch m;
      if (e->getString("cat").value_or("") != "stage" ||
          !std::regex_match(name, m, stageEvent))
        continue;
      char kind = m[1].str()[0];
      int64_t stage = parseCount(m[2], measuredPath + ": event " + name);
      samples[{stage, kind}].push_back(dur);
      tracedStages.insert(stage);
      if (kind == 'u')
        ++tracedUpdates[stage];
    }
    if (samples.empty())
      fail(measuredPath + ": no stage events (a trace of this pipe-run, with "
                          "programs compiled by this pipe-compile)");
    auto median = [](std::vector<double> v) {
      std::sort(v.begin(), v.end());
      return v[v.size() / 2];
    };
    for (auto &[key, v] : samples) {
      StageCost &c = costs[key.first];
      if (key.second == 'F')
        c.forward = median(v);
      else if (key.second == 'B')
        c.backward = median(v);
      else if (key.second == 'u') {
        c.update = median(v);
        measuredUpdate[key.first] = true;
      }
    }
    // Weight gradients computed for a group of micro-batches at once (the
    // deferred Gemms, "W" events): their total spread over the stage's
    // backwards.
    for (auto &[key, v] : samples) {
      auto b = samples.find({key.first, 'B'});
      if (key.second != 'W' || b == samples.end())
        continue;
      double total = 0;
      for (double d : v)
        total += d;
      costs[key.first].backward += total / double(b->second.size());
    }
    tracedSteps = int64_t(stepTimes.size());
    // The first steps warm up (allocation, page faults): the later half.
    if (stepTimes.size() > 1)
      stepTimes.erase(stepTimes.begin(), stepTimes.begin() + stepTimes.size() / 2);
    if (!stepTimes.empty())
      measuredStep = median(stepTimes);
  }
  if (!writeProfilePath.empty()) {
    llvm::json::Array stagesOut;
    for (auto &[st, c] : costs)
      stagesOut.push_back(llvm::json::Object{{"stage", st},
                                             {"forward_s", c.forward},
                                             {"backward_s", c.backward},
                                             {"update_s", c.update}});
    std::error_code ec;
    llvm::raw_fd_ostream os(writeProfilePath, ec);
    if (ec)
      fail("cannot write " + writeProfilePath + ": " + ec.message());
    os << llvm::json::Value(llvm::json::Object{
        {"stages", std::move(stagesOut)},
        {"latency_s", linkLatency},
        {"bandwidth_bytes_per_s", linkBandwidth}});
  }

  std::map<std::pair<std::string, int64_t>, int64_t> bytes;
  if (const llvm::json::Array *ts = root->getArray("transfers"))
    for (const llvm::json::Value &v : *ts) {
      const llvm::json::Object *o = &planEntry(v, "transfers", size_t(&v - &*ts->begin()));
      bytes[{o->getString("tag").value_or("").str(), o->getInteger("mb").value_or(0)}] =
          o->getInteger("bytes").value_or(0);
    }

  std::vector<Device> devices;
  for (const llvm::json::Value &v : *plans) {
    const llvm::json::Object *o = &planEntry(v, "device_plans", devices.size());
    Device dev = parseDevice(*o, int64_t(devices.size()), bytes);
    // A synchronous step runs each micro-batch's forward and backward once
    // (an edited plan.json without one would simulate a shorter step). Not
    // checked: the no-flush methods' steps (micro-batches of other steps in
    // flight) and whole-batch stages (one forward for all).
    const llvm::json::Object *method = o->getObject("method");
    if (!(method && method->getBoolean("no_flush").value_or(false)) &&
        !root->get("whole_batch_stages")) {
      std::vector<sched::OrderProblem> problems = sched::checkComputeOrder(
          dev.step, int64_t(devices.size()), {dev.stage}, microbatches);
      if (!problems.empty())
        fail("plan.json: device " + std::to_string(devices.size()) + "'s schedule: " +
             problems.front().message + "; compile again with this pipe-compile");
    }
    if (!costs.count(dev.stage))
      fail("no cost for stage " + std::to_string(dev.stage) +
           " (neither plan.json's stage_costs nor --profile has it)");
    dev.updateSeconds = costs[dev.stage].update;
    if (const llvm::json::Object *mem = o->getObject("memory"))
      for (const auto &[key, value] : *mem)
        if (llvm::StringRef(key).ends_with("_bytes") && key != "total_bytes")
          dev.memoryBytes += value.getAsInteger().value_or(0);
    if (!measuredUpdate[dev.stage])
      if (const llvm::json::Object *mem = o->getObject("memory")) {
        // Read weights and gradients, write weights; read and write state.
        double rate = opProfile && opProfile->updateBytesPerSecond > 0
                          ? opProfile->updateBytesPerSecond
                          : double(memoryBandwidth);
        dev.updateSeconds =
            double(3 * mem->getInteger("parameter_bytes").value_or(0) +
                   2 * mem->getInteger("optimizer_state_bytes").value_or(0)) /
            rate;
        // An op profile's fixed cost per step (feeding, the loss, the step
        // loop) on every device, charged with its updates as the planner
        // does (shared among them where a method updates per micro-batch).
        int64_t updates = llvm::count_if(dev.step, [](const sched::Instr &i) {
          return i.kind == sched::InstrKind::Update;
        });
        dev.updateSeconds += opFit.fixed / double(std::max<int64_t>(1, updates));
      }
    devices.push_back(std::move(dev));
  }

  // A trace of another plan (other stages, or updates per step: GPipe's
  // one against PipeDream's M) would calibrate this one with wrong costs.
  if (tracedSteps > 0) {
    std::map<int64_t, int64_t> devicesOfStage, updatesOfStage;
    for (const Device &dev : devices) {
      ++devicesOfStage[dev.stage];
      updatesOfStage[dev.stage] = llvm::count_if(
          dev.step, [](const sched::Instr &i) { return i.kind == sched::InstrKind::Update; });
    }
    std::set<int64_t> planStages;
    for (const auto &[stage, n] : devicesOfStage)
      planStages.insert(stage);
    if (tracedStages != planStages)
      fail(measuredPath + " traced " + std::to_string(tracedStages.size()) +
           " stage(s), the plan in " + outDir + " has " + std::to_string(planStages.size()) +
           ": give a trace of this plan (pipe-run " + outDir + " --trace T.json)");
    for (const auto &[stage, n] : tracedUpdates) {
      double perStep = double(n) / double(tracedSteps * devicesOfStage[stage]);
      if (std::llround(perStep) != updatesOfStage[stage])
        fail(measuredPath + " updates stage " + std::to_string(stage) + " " +
             llvm::formatv("{0:f1}", perStep).str() + " times a step, the plan in " + outDir +
             " " + std::to_string(updatesOfStage[stage]) + " times" +
             ": a trace of another plan; give one of this plan (pipe-run " + outDir +
             " --trace T.json)");
    }
  }

  // K steps: each device's step repeated, micro-batches numbered on (a
  // no-flush program's negative ones are the previous step's).
  auto run = [&](int k) {
    std::vector<sched::Program> programs;
    for (const Device &dev : devices) {
      sched::Program p;
      for (int t = 0; t < k; ++t)
        for (sched::Instr instr : dev.step) {
          if (instr.hasMb())
            instr.mb += int64_t(t) * microbatches;
          p.push_back(instr);
        }
      programs.push_back(std::move(p));
    }
    sched::SimulationOptions options;
    options.duration = [&](int64_t d, const sched::Instr &instr) -> int64_t {
      const StageCost &c = costs[devices[d].stage];
      double s = 0;
      switch (instr.kind) {
      case sched::InstrKind::Forward:
        s = c.forward;
        break;
      case sched::InstrKind::Backward:
      case sched::InstrKind::BackwardWeight:
        s = c.backward;
        break;
      case sched::InstrKind::Update:
        s = devices[d].updateSeconds;
        break;
      case sched::InstrKind::Send: {
        double sent = instr.payload.empty() ? 0 : std::stod(instr.payload);
        // An op profile's measured transfer times where it has them.
        s = opProfile && !opProfile->linkTimes.empty() ? opProfile->linkSeconds(sent)
                                                        : linkLatency + sent / linkBandwidth;
        break;
      }
      default:
        break;
      }
      return int64_t(std::llround(s * 1e9));
    };
    const int ranks = int(devices.size());
    if (!rendezvous && pipectools::runtimeBuffersSends(ranks)) {
      const double limit = double(pipectools::runtimeBufferedSendBytes(ranks));
      options.bufferedSend = [limit](int64_t, const sched::Instr &instr) {
        return (instr.payload.empty() ? 0 : std::stod(instr.payload)) <= limit;
      };
      options.receiverCopies = true;
      // The receiver pays the copy (the bytes at the link's bandwidth); the
      // rest of the transfer's time passes in flight.
      options.receiverCopy = [&](int64_t d, const sched::Instr &instr) -> int64_t {
        double sent = instr.payload.empty() ? 0 : std::stod(instr.payload);
        return int64_t(std::llround(sent / linkBandwidth * 1e9));
      };
    }
    return std::make_pair(sched::simulate(programs, options), programs);
  };
  auto [result, programs] = run(steps);
  if (!result.ok())
    fail("the programs do not run: " + result.failure->message);
  double stepTime = double(result.makespan) / 1e9 / steps;
  if (steps > 1) {
    auto first = run(1).first;
    stepTime = double(result.makespan - first.makespan) / 1e9 / (steps - 1);
  }

  llvm::outs() << "pipe-simulate: " << outDir << ": " << devices.size()
               << " devices, "
               << (*plans)[0].getAsObject()->getString("schedule_kind").value_or("?")
               << ", M = " << microbatches << ", " << steps
               << (steps == 1 ? " step" : " steps") << " simulated\n";
  llvm::outs() << llvm::format("predicted step time: %.6g s (%.6g s for %d)\n",
                               stepTime, double(result.makespan) / 1e9, int(steps));
  if (measuredStep)
    llvm::outs() << llvm::format("measured step time (%s): %.6g s, predicted / "
                                 "measured = %.3f\n",
                                 measuredPath.c_str(), *measuredStep,
                                 stepTime / *measuredStep);
  llvm::outs() << "device  stage  compute  update  transfer wait  idle  peak in-flight  "
                  "peak memory\n";
  double total = double(result.makespan);
  double computeAll = 0;
  for (size_t d = 0; d < devices.size(); ++d) {
    double compute = 0, update = 0, wait = 0;
    for (const sched::Slot &s : result.timeline[d])
      compute += double(s.end - s.start);
    for (const sched::Slot &s : result.otherTimeline[d]) {
      const sched::Instr &instr = programs[d][s.index];
      (instr.kind == sched::InstrKind::Update ? update : wait) += double(s.end - s.start);
    }
    computeAll += compute;
    double idle = total - compute - update - wait;
    llvm::outs() << llvm::format("%6zu  %5lld  %6.1f%%  %5.1f%%  %12.1f%%  %4.1f%%  %14lld  "
                                 "%8.2f MiB\n", d,
                                 (long long)devices[d].stage, 100 * compute / total,
                                 100 * update / total, 100 * wait / total,
                                 100 * std::max(idle, 0.0) / total,
                                 (long long)result.peakInFlight[d],
                                 double(devices[d].memoryBytes) / double(1 << 20));
  }
  llvm::outs() << llvm::format(
      "bubble (share of device time not in forward/backward): %.4f\n",
      1.0 - computeAll / (total * double(devices.size())));

  if (!tracePath.empty()) {
    llvm::json::Array events;
    for (size_t d = 0; d < devices.size(); ++d) {
      events.push_back(llvm::json::Object{
          {"ph", "M"}, {"name", "process_name"}, {"pid", int64_t(d)}, {"tid", 0},
          {"args", llvm::json::Object{{"name", "simulated device " + std::to_string(d)}}}});
      auto add = [&](const sched::Slot &s) {
        const Device &dev = devices[d];
        const std::string &label = dev.labels[s.index % dev.labels.size()];
        events.push_back(llvm::json::Object{
            {"ph", "X"}, {"pid", int64_t(d)}, {"tid", 0}, {"name", label},
            {"ts", double(s.start) / 1e3}, {"dur", double(s.end - s.start) / 1e3}});
      };
      for (const sched::Slot &s : result.timeline[d])
        add(s);
      for (const sched::Slot &s : result.otherTimeline[d])
        add(s);
    }
    std::error_code ec;
    llvm::raw_fd_ostream os(tracePath, ec);
    if (ec)
      fail("cannot write " + tracePath + ": " + ec.message());
    os << llvm::json::Value(llvm::json::Object{{"traceEvents", std::move(events)}});
  }
  return 0;
}
