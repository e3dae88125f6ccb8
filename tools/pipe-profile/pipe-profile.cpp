//===- pipe-profile.cpp - measure a model's op costs on this machine ------===//
//
//   pipe-profile MODEL.onnx --data D.npz -o P.json [--rows 8,16,32]
//                [--steps K] [--kernel-threads N] [--target cpu|cuda] [--no-link]
//                [--keep DIR] [--repeats R]
//
// For each micro-batch size of --rows (default: the model's batch), compiles
// the one-device training step with per-op timing (pipe-compile
// --profile-ops --batch R), runs it for K steps (pipe-run --trace), and takes
// each op's median time over the later half of the steps, less what an op
// event itself costs (the trace's op_event_overhead_us); sums them per ONNX
// node into forward and backward times (the gradient ops autodiff made of a
// node count as its backward) and the optimizer's ops into an update rate;
// a second run without per-op events gives the whole step (which the planner
// fits as a fixed cost per step plus the ops: fitStep). --repeats rounds
// over the sizes, each time the fastest round's.
// Then measures the link between two ranks (pipe-linkbench under mpirun:
// latency and bandwidth of the runtime's transport) and, on the CPU, how
// much longer the ops run as two pipeline stages beside each other (a
// 2-stage run, M = 1: pipeline_compute_factor). Writes the profile
// (docs/profile-json.md) tagged with the model's hash and this machine, for
// pipe-compile --profile and --auto.
//
//===----------------------------------------------------------------------===//
#include "../common/MpiFlags.h"
#include "pipec/Analysis/Profile.h"
#include "pipec/Support/Version.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <cstdlib>
#include <map>
#include <unistd.h>

using namespace mlir::pipec;
namespace cl = llvm::cl;

static cl::OptionCategory profileCat("Profiling");
static cl::opt<std::string> modelPath(cl::Positional, cl::desc("<model.onnx>"),
                                      cl::Required, cl::cat(profileCat));
static cl::opt<std::string> dataPath("data", cl::value_desc("D.npz"), cl::Required,
                                     cl::cat(profileCat),
                                     cl::desc("Training data (as for pipe-run)"));
static cl::opt<std::string> outPath("o", cl::value_desc("P.json"), cl::Required,
                                    cl::cat(profileCat),
                                    cl::desc("The profile to write"));
static cl::list<int64_t> rowsOpt(
    "rows", cl::CommaSeparated, cl::cat(profileCat),
    cl::desc("Micro-batch sizes to measure (a symbolic batch axis is needed "
             "for sizes other than the model's) (default: the model's batch)"));
static cl::opt<int> steps("steps", cl::init(8), cl::cat(profileCat),
                          cl::desc("Steps run per size; the first is not "
                                   "counted (default: 8)"));
static cl::opt<int> repeats(
    "repeats", cl::init(3), cl::cat(profileCat),
    cl::desc("Rounds over the sizes; each time is the fastest round's "
             "(default: 3)"));
static cl::opt<int> threads("kernel-threads", cl::init(1), cl::cat(profileCat),
                            cl::desc("Kernel threads, as pipe-run's (default: 1)"));
static cl::opt<std::string> target("target", cl::init("cpu"), cl::cat(profileCat),
                                   cl::desc("cpu or cuda (default: cpu)"));
static cl::opt<bool> noLink("no-link", cl::cat(profileCat),
                            cl::desc("Do not measure the link between two ranks"));
static cl::opt<bool> force("force", cl::cat(profileCat),
                           cl::desc("Measure again even if -o already holds a "
                                    "profile of this model, machine, target and "
                                    "sizes"));
static cl::opt<std::string> keepDir(
    "keep", cl::value_desc("DIR"), cl::cat(profileCat),
    cl::desc("Keep the compiled programs, traces and logs in DIR"));

namespace {

[[noreturn]] void fail(const llvm::Twine &message) {
  llvm::errs() << "pipe-profile: error: " << message << "\n";
  std::exit(1);
}

std::string toolPath(llvm::StringRef name) {
  std::string self = llvm::sys::fs::getMainExecutable(
      "pipe-profile", reinterpret_cast<void *>(&toolPath));
  llvm::SmallString<256> path(llvm::sys::path::parent_path(self));
  llvm::sys::path::append(path, name);
  if (llvm::sys::fs::can_execute(path))
    return std::string(path);
  if (auto found = llvm::sys::findProgramByName(name))
    return *found;
  fail("cannot find " + name + " next to pipe-profile or on PATH");
}

/// Runs `args`, output to `log`; true if it succeeded, else `failure` says
/// why (the log's last error line).
bool runTool(const std::vector<std::string> &args, const std::string &log,
             const std::string &what, std::string &failure) {
  std::vector<llvm::StringRef> refs(args.begin(), args.end());
  std::optional<llvm::StringRef> redirects[] = {std::nullopt, llvm::StringRef(log),
                                                llvm::StringRef(log)};
  std::string error;
  int rc = llvm::sys::ExecuteAndWait(refs[0], refs, std::nullopt, redirects, 0, 0,
                                     &error);
  if (rc == 0)
    return true;
  std::string last;
  if (auto buffer = llvm::MemoryBuffer::getFile(log)) {
    llvm::SmallVector<llvm::StringRef> lines;
    (*buffer)->getBuffer().trim().split(lines, '\n');
    for (auto it = lines.rbegin(); it != lines.rend(); ++it)
      if (it->contains("error")) {
        last = it->trim().str();
        break;
      }
    if (last.empty() && !lines.empty())
      last = lines.back().trim().str();
  }
  failure = what + " failed" + (last.empty() ? (error.empty() ? "" : ": " + error)
                                             : ": " + last);
  return false;
}

/// Runs `args`, output to `log`; on failure, fails with the log's last line.
void runOrFail(const std::vector<std::string> &args, const std::string &log,
               const std::string &what) {
  std::string failure;
  if (!runTool(args, log, what, failure))
    fail(failure);
}

llvm::json::Value readJson(const std::string &path) {
  auto buffer = llvm::MemoryBuffer::getFile(path);
  if (!buffer)
    fail("cannot read " + path);
  auto json = llvm::json::parse((*buffer)->getBuffer());
  if (!json)
    fail(path + " is not JSON: " + llvm::toString(json.takeError()));
  return std::move(*json);
}

double median(std::vector<double> v) {
  if (v.empty())
    return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

struct Measured {
  llvm::StringMap<double> forward, backward;
  double update = 0, step = 0;
  int64_t updateBytes = 0;
  /// What one op event adds to the op it times (the trace's
  /// op_event_overhead_us), taken off every op's time.
  double opEvent = 0;
};

Measured measure(int64_t rows, bool bindBatch, const std::string &dir,
                 bool compileFirst) {
  std::string out = dir + "/rows" + std::to_string(rows);
  std::vector<std::string> compile{toolPath("pipe-compile"), modelPath, "-o", out,
                                   "--profile-ops", "--target", target};
  if (bindBatch)
    compile.insert(compile.end(), {"--batch", std::to_string(rows)});
  if (compileFirst)
    runOrFail(compile, out + ".compile.log",
              "pipe-compile (micro-batch " + std::to_string(rows) + ")");
  std::string trace = out + ".trace.json";
  runOrFail({toolPath("pipe-run"), out, "--data", dataPath, "--steps",
             std::to_string(steps), "--no-shuffle", "--quiet", "--threads",
             std::to_string(threads), "--trace", trace},
            out + ".run.log", "pipe-run (micro-batch " + std::to_string(rows) + ")");
  llvm::json::Value plan = readJson(out + "/plan.json");
  const llvm::json::Array *table = plan.getAsObject()->getArray("op_profile");
  if (!table)
    fail(out + "/plan.json has no op_profile (pipe-compile too old?)");
  std::vector<std::pair<std::string, int64_t>> ops;
  for (const llvm::json::Value &entry : *table) {
    const llvm::json::Object *o = entry.getAsObject();
    ops.push_back({o->getString("node").value_or("").str(),
                   o->getInteger("phase").value_or(2)});
  }
  Measured m;
  if (const llvm::json::Object *memory = plan.getAsObject()->getObject("memory"))
    m.updateBytes = 3 * memory->getInteger("parameter_bytes").value_or(0) +
                    2 * memory->getInteger("optimizer_state_bytes").value_or(0);
  llvm::json::Value events = readJson(trace);
  const llvm::json::Array *list = events.getAsObject()->getArray("traceEvents");
  if (!list)
    fail(trace + " has no traceEvents");
  if (const llvm::json::Object *other = events.getAsObject()->getObject("otherData"))
    m.opEvent = other->getNumber("op_event_overhead_us").value_or(0) * 1e-6;
  std::vector<std::vector<double>> times(ops.size());
  std::vector<double> stepTimes;
  for (const llvm::json::Value &event : *list) {
    const llvm::json::Object *e = event.getAsObject();
    if (!e)
      continue;
    llvm::StringRef cat = e->getString("cat").value_or("");
    llvm::StringRef name = e->getString("name").value_or("");
    double dur = e->getNumber("dur").value_or(0) * 1e-6;
    if (cat == "step" && name == "step") {
      stepTimes.push_back(dur);
    } else if (cat == "op") {
      auto [phase, id] = name.split(" op");
      uint64_t index;
      if (!llvm::to_integer(id, index, 10) || index >= times.size())
        continue;
      times[index].push_back(std::max(0.0, dur - m.opEvent));
    }
  }
  // The step as it runs without per-op events (each costs a clock read
  // and a record; with hundreds of ops a step they add 10% and more): a
  // second run with only the step log. Four times the steps (at least 32):
  // the steps after the first still warm up for a few more (the MLP's
  // second to sixth steps are 10-25% slower than its later ones), and
  // without per-op events the run is short.
  std::string log = out + ".steps.jsonl";
  runOrFail({toolPath("pipe-run"), out, "--data", dataPath, "--steps",
             std::to_string(std::max(4 * steps, 32)), "--no-shuffle", "--quiet", "--threads",
             std::to_string(threads), "--log", log},
            out + ".run2.log", "pipe-run (micro-batch " + std::to_string(rows) + ")");
  stepTimes.clear();
  if (auto buffer = llvm::MemoryBuffer::getFile(log)) {
    llvm::SmallVector<llvm::StringRef> lines;
    (*buffer)->getBuffer().split(lines, '\n', -1, false);
    double previous = -1;
    for (llvm::StringRef line : lines) {
      auto row = llvm::json::parse(line);
      if (!row) {
        llvm::consumeError(row.takeError());
        continue;
      }
      std::optional<double> t =
          row->getAsObject() ? row->getAsObject()->getNumber("time_s") : std::nullopt;
      if (!t)
        continue;
      if (previous >= 0)
        stepTimes.push_back(*t - previous);
      previous = *t;
    }
  }
  // The first step warms caches and allocators: not counted (the log's
  // differences start at the second step already). Other processes only
  // ever slow a step down: the fastest fifth is the machine's own pace.
  std::sort(stepTimes.begin(), stepTimes.end());
  m.step = stepTimes.empty() ? 0 : stepTimes[stepTimes.size() / 5];
  for (size_t i = 0; i < ops.size(); ++i) {
    // The first steps warm up: the later half. oneDNN's first calls of a
    // shape stay slow for a few steps (the example transformer's fc1
    // forward at 64 rows: 58, 11, 14, then 3 us), and with the first step
    // alone dropped a median of 7 landed on them now and then (fc1 at
    // 14 us a call in the profile, 5x its time).
    std::vector<double> &t = times[i];
    t.erase(t.begin(), t.begin() + t.size() / 2);
    double time = median(t);
    auto &[node, phase] = ops[i];
    if (phase == 0)
      m.forward[node] += time;
    else if (phase == 1)
      m.backward[node] += time;
    else
      m.update += time;
  }
  return m;
}

/// `into` becomes the faster of it and `m`, time by time (other processes
/// only ever slow a run down).
void keepFastest(Measured &into, const Measured &m) {
  auto least = [](llvm::StringMap<double> &a, const llvm::StringMap<double> &b) {
    for (const auto &e : b) {
      auto [it, inserted] = a.try_emplace(e.getKey(), e.getValue());
      if (!inserted)
        it->second = std::min(it->second, e.getValue());
    }
  };
  least(into.forward, m.forward);
  least(into.backward, m.backward);
  into.update = std::min(into.update, m.update);
  if (m.step > 0)
    into.step = into.step > 0 ? std::min(into.step, m.step) : m.step;
  into.opEvent = std::min(into.opEvent, m.opEvent);
}

} // namespace

int main(int argc, char **argv) {
  mlir::pipec::hideOtherOptions({&profileCat});
  mlir::pipec::setVersionPrinter("pipe-profile");
  cl::ParseCommandLineOptions(argc, argv, "pipec profiler: measured op costs\n");
  if (target != "cpu" && target != "cuda")
    fail("--target must be cpu or cuda, not '" + target + "'");
  if (steps < 2)
    fail("--steps must be >= 2 (the first step is not counted)");
  if (repeats < 1)
    fail("--repeats must be >= 1");
  if (threads < 1)
    fail("--kernel-threads must be >= 1");
  auto model = llvm::MemoryBuffer::getFile(modelPath);
  if (!model)
    fail("cannot read " + modelPath + ": " + model.getError().message());
  if (!llvm::sys::fs::exists(dataPath))
    fail("cannot read --data " + dataPath);
  // Where the profile goes, before minutes of measuring: an existing,
  // writable directory, and not a directory itself.
  {
    llvm::StringRef parent = llvm::sys::path::parent_path(outPath);
    if (parent.empty())
      parent = ".";
    if (!llvm::sys::fs::is_directory(parent))
      fail("-o " + outPath + ": no directory '" + parent + "'");
    if (llvm::sys::fs::access(parent, llvm::sys::fs::AccessMode::Write))
      fail("-o " + outPath + ": cannot write into '" + parent + "'");
    if (llvm::sys::fs::is_directory(outPath))
      fail("-o " + outPath + ": is a directory (name the profile file)");
  }

  // A profile is a cache: one already at -o for this model, machine, target
  // and sizes (and link) is kept.
  if (!force && llvm::sys::fs::exists(outPath)) {
    std::string error;
    if (std::optional<OpProfile> old = readProfile(outPath, error)) {
      std::vector<int64_t> want(rowsOpt.begin(), rowsOpt.end());
      std::sort(want.begin(), want.end());
      want.erase(std::unique(want.begin(), want.end()), want.end());
      bool sameRows = want.empty() ? old->rows.size() == 1 : old->rows == want;
      if (old->modelHash == hashModel((*model)->getBuffer()) &&
          old->machine == machineId() && old->target == target && sameRows &&
          (noLink || (old->linkBandwidth > 0 &&
                      (target != "cpu" || old->pipelineFactor > 0)))) {
        llvm::outs() << "pipe-profile: " << outPath
                     << " already holds this model on this machine (" 
                     << old->ops.size() << " nodes); kept (--force measures "
                        "again)\n";
        return 0;
      }
    }
  }

  llvm::SmallString<128> dir;
  if (!keepDir.empty()) {
    dir = keepDir;
    if (std::error_code ec = llvm::sys::fs::create_directories(dir))
      fail("cannot create " + keepDir + ": " + ec.message());
  } else if (std::error_code ec =
                 llvm::sys::fs::createUniqueDirectory("pipe-profile", dir)) {
    fail("cannot create a temporary directory: " + ec.message());
  }

  std::vector<int64_t> rows(rowsOpt.begin(), rowsOpt.end());
  for (int64_t r : rows)
    if (r < 1)
      fail("--rows must be positive sizes");
  std::sort(rows.begin(), rows.end());
  rows.erase(std::unique(rows.begin(), rows.end()), rows.end());
  bool bindBatch = !rows.empty();
  // --repeats rounds over the sizes, each time by time the fastest round:
  // a burst of other work slows every step of a short run, and rounds
  // apart in time miss it.
  std::vector<Measured> measured;
  for (int round = 0; round < repeats; ++round) {
    if (rows.empty()) {
      Measured m = measure(0, false, std::string(dir), round == 0);
      if (round == 0)
        measured.push_back(m);
      else
        keepFastest(measured[0], m);
      continue;
    }
    for (size_t i = 0; i < rows.size(); ++i) {
      if (round == 0) {
        llvm::outs() << "pipe-profile: micro-batch " << rows[i] << "\n";
        llvm::outs().flush();
      }
      Measured m = measure(rows[i], bindBatch, std::string(dir), round == 0);
      if (round == 0)
        measured.push_back(m);
      else
        keepFastest(measured[i], m);
    }
  }
  if (rows.empty()) {
    llvm::json::Value plan = readJson(std::string(dir) + "/rows0/plan.json");
    rows.push_back(plan.getAsObject()->getInteger("batch").value_or(1));
  }

  OpProfile profile;
  profile.modelHash = hashModel((*model)->getBuffer());
  profile.machine = machineId();
  profile.target = target;
  profile.rows = rows;
  std::map<std::string, bool> nodes;
  for (const Measured &m : measured) {
    for (const auto &e : m.forward)
      nodes[e.getKey().str()] = true;
    for (const auto &e : m.backward)
      nodes[e.getKey().str()] = true;
  }
  nodes.erase("");
  for (const auto &[node, unused] : nodes) {
    OpTimes &t = profile.ops[node];
    for (const Measured &m : measured) {
      t.forward.push_back(m.forward.lookup(node));
      t.backward.push_back(m.backward.lookup(node));
    }
  }
  double updateRate = 0;
  // The update does not depend on the micro-batch: its fastest measurement
  // (other processes only slow it down).
  for (const Measured &m : measured) {
    profile.opEventSeconds = std::max(profile.opEventSeconds, m.opEvent);
    if (m.update > 0 && (profile.updateSeconds == 0 || m.update < profile.updateSeconds))
      profile.updateSeconds = m.update;
  }
  for (const Measured &m : measured) {
    profile.stepSeconds.push_back(m.step);
    if (m.update > 0 && m.updateBytes > 0)
      updateRate = std::max(updateRate, double(m.updateBytes) / m.update);
  }
  profile.updateBytesPerSecond = updateRate;

  if (!noLink) {
    llvm::outs() << "pipe-profile: link between two ranks\n";
    llvm::outs().flush();
    const char *mpirun = std::getenv("PIPEC_MPIRUN");
    std::vector<std::string> args{mpirun ? mpirun : "mpirun"};
    if (auto found = llvm::sys::findProgramByName(args[0]))
      args[0] = *found;
    else
      fail("cannot find " + args[0] + " (the link is measured under MPI; "
           "--no-link skips it)");
    // As pipe-run launches ranks (single-copy where allowed).
    for (std::string &flag : pipectools::sharedMemoryMpiFlags())
      args.push_back(flag);
    setenv("OMPI_MCA_mpi_yield_when_idle", "1", 0);
    setenv("OMPI_MCA_hwloc_base_binding_policy", "none", 0);
    std::string linkJson = std::string(dir) + "/link.json";
    args.insert(args.end(), {"-np", "2", toolPath("pipe-linkbench"), "--json",
                             linkJson, "--max-bytes", "16777216", "--iters", "50"});
    // Three launches, the least latency and the most bandwidth: whether the
    // two ranks each get a core of their own varies from one launch to the
    // next on a busy machine (4-byte latencies of 0.6 us or 2 us on the
    // same one), and other processes only ever slow a transfer down.
    std::vector<std::pair<double, double>> linkTimes;
    for (int launch = 0; launch < 3; ++launch) {
      runOrFail(args, std::string(dir) + "/link.log", "pipe-linkbench");
      llvm::json::Value link = readJson(linkJson);
      double latency = link.getAsObject()->getNumber("latency_s").value_or(0);
      double bandwidth =
          link.getAsObject()->getNumber("bandwidth_bytes_per_s").value_or(0);
      if (latency > 0 && (profile.linkLatency == 0 || latency < profile.linkLatency))
        profile.linkLatency = latency;
      profile.linkBandwidth = std::max(profile.linkBandwidth, bandwidth);
      // Each size's time, the least over the launches.
      if (const llvm::json::Array *sizes = link.getAsObject()->getArray("rows"))
        for (const llvm::json::Value &entry : *sizes) {
          const llvm::json::Object *row = entry.getAsObject();
          std::optional<double> bytes = row ? row->getNumber("bytes") : std::nullopt;
          std::optional<double> time = row ? row->getNumber("pipert_s") : std::nullopt;
          if (!bytes || !time || !(*time > 0))
            continue;
          auto it = std::find_if(linkTimes.begin(), linkTimes.end(),
                                 [&](auto &p) { return p.first == *bytes; });
          if (it == linkTimes.end())
            linkTimes.push_back({*bytes, *time});
          else
            it->second = std::min(it->second, *time);
        }
    }
    std::sort(linkTimes.begin(), linkTimes.end());
    profile.linkTimes = linkTimes;
  }

  // The ops beside a second rank: the model as a 2-stage pipeline with one
  // micro-batch of the largest size, whose stages run one after the other;
  // the medians of its stages' forward and backward events over the same
  // nodes' times in the one-device step. The fastest of --repeats runs.
  if (!noLink && target == "cpu" && profile.opsAt(rows.size() - 1) > 0) {
    llvm::outs() << "pipe-profile: two stages at micro-batch " << rows.back() << "\n";
    llvm::outs().flush();
    std::string out = std::string(dir) + "/pipeline2";
    std::vector<std::string> compile{toolPath("pipe-compile"), modelPath, "-o", out,
                                     "--stages", "2", "--microbatches", "1",
                                     "--schedule", "gpipe", "--target", target};
    if (bindBatch)
      compile.insert(compile.end(), {"--batch", std::to_string(rows.back())});
    std::string failure;
    bool ok = runTool(compile, out + ".compile.log", "pipe-compile --stages 2", failure);
    for (int round = 0; ok && round < repeats; ++round) {
      std::string trace = out + ".trace.json";
      ok = runTool({toolPath("pipe-run"), out, "--data", dataPath, "--steps",
                    std::to_string(std::max(4 * steps, 32)), "--no-shuffle", "--quiet",
                    "--threads", std::to_string(threads), "--trace", trace},
                   out + ".run.log", "pipe-run (2 stages)", failure);
      if (!ok)
        break;
      llvm::json::Value events = readJson(trace);
      const llvm::json::Array *list = events.getAsObject()->getArray("traceEvents");
      std::map<std::string, std::vector<double>> stageTimes;
      for (const llvm::json::Value &event : list ? *list : llvm::json::Array()) {
        const llvm::json::Object *e = event.getAsObject();
        if (!e || e->getString("cat").value_or("") != "stage")
          continue;
        // "F0 s1", "B0 s0" (not the updates).
        llvm::StringRef name = e->getString("name").value_or("");
        if (name.starts_with("F") || name.starts_with("B") || name.starts_with("W"))
          stageTimes[name.str()].push_back(e->getNumber("dur").value_or(0) * 1e-6);
      }
      double sum = 0;
      for (auto &[name, t] : stageTimes) {
        // The first steps warm up: the later half.
        t.erase(t.begin(), t.begin() + t.size() / 2);
        sum += median(t);
      }
      double factor = sum / profile.opsAt(rows.size() - 1);
      if (sum > 0 && (profile.pipelineFactor == 0 || factor < profile.pipelineFactor))
        profile.pipelineFactor = factor;
    }
    if (!ok)
      llvm::outs() << "pipe-profile: not measured beside a second rank (" << failure
                   << "); pipelines are planned with the one-device times\n";
  }

  std::string error;
  if (!writeProfile(outPath, profile, error))
    fail(error);
  if (keepDir.empty())
    llvm::sys::fs::remove_directories(dir);
  StepFit fit = fitStep(profile);
  llvm::outs() << "pipe-profile: " << profile.ops.size() << " nodes at "
               << rows.size() << " micro-batch size(s); step "
               << llvm::format("%.3f", profile.stepSeconds.back() * 1e3)
               << " ms at " << rows.back() << " samples = "
               << llvm::format("%.1f", fit.fixed * 1e6) << " us per step + "
               << llvm::format("%.2f", fit.scale) << " x the ops";
  if (profile.linkBandwidth > 0)
    llvm::outs() << llvm::format("; link %.1f us + %.2f GB/s",
                                 profile.linkLatency * 1e6,
                                 profile.linkBandwidth / 1e9);
  if (profile.pipelineFactor > 0)
    llvm::outs() << llvm::format("; ops beside a second rank %.2f x", profile.pipelineFactor);
  llvm::outs() << "; wrote " << outPath << "\n";
  return 0;
}
