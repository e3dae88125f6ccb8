//===- pipe-timeline.cpp - Gantt charts of measured and simulated runs ----===//
//
//   pipe-timeline TRACE.json [TRACE2.json ...] -o timeline.png
//                 [--from-step K] [--steps N] [--width PX]
//
// One panel per Chrome trace (pipe-run --trace: a measured run;
// pipe-simulate --trace: the simulator's prediction for the same plan),
// stacked, one row per device: forwards blue, backwards green, weight
// gradients teal, updates orange, transfers (the time a device spent in a
// send or receive) grey below the compute row. Every panel has its own
// time axis from its first to its last event (after --from-step steps of
// a measured trace are skipped). Prints per panel and device the busy
// share, so the picture and the numbers agree.
//
//===----------------------------------------------------------------------===//
#include "../common/Canvas.h"

#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <string>
#include <vector>

using namespace pipec;

namespace {

[[noreturn]] void fail(const std::string &message) {
  std::fprintf(stderr, "pipe-timeline: error: %s\n", message.c_str());
  std::exit(1);
}

enum class Kind { Forward, Backward, Weight, Update, Transfer, Step, Other };

Kind classify(llvm::StringRef name, llvm::StringRef cat) {
  if (cat == "op" || cat == "idle")
    return Kind::Other;
  if (cat == "step" || name == "step" || name == "drain")
    return Kind::Step;
  if (name.size() > 1 && std::isdigit(static_cast<unsigned char>(name[1]))) {
    if (name[0] == 'F')
      return Kind::Forward;
    if (name[0] == 'B')
      return Kind::Backward;
    if (name[0] == 'W')
      return Kind::Weight;
  }
  if (name.starts_with("update"))
    return Kind::Update;
  if (name.starts_with("send") || name.starts_with("recv") ||
      name.starts_with("allreduce") || name.starts_with("average") ||
      cat == "send" || cat == "recv" || cat == "allreduce")
    return Kind::Transfer;
  return Kind::Other;
}

struct Box {
  int64_t device;
  Kind kind;
  double start, end; // us
};

struct Panel {
  std::string title;
  std::vector<Box> boxes;
  int64_t devices = 0;
  double begin = 0, end = 0;
};

Panel readTrace(const std::string &path, int fromStep, bool fromStepGiven, int steps) {
  auto buffer = llvm::MemoryBuffer::getFile(path);
  if (!buffer)
    fail("cannot read " + path + ": " + buffer.getError().message());
  auto json = llvm::json::parse((*buffer)->getBuffer());
  if (!json)
    fail(path + " is not JSON: " + llvm::toString(json.takeError()));
  const llvm::json::Object *root = json->getAsObject();
  const llvm::json::Array *events = root ? root->getArray("traceEvents") : nullptr;
  if (!events)
    fail(path + " is not a Chrome trace (no \"traceEvents\"); write one with "
                "pipe-run --trace or pipe-simulate --trace");
  Panel panel;
  bool simulated = false;
  std::vector<Box> all;
  std::map<int64_t, std::vector<std::pair<double, double>>> stepsOf;
  for (const llvm::json::Value &v : *events) {
    const llvm::json::Object *e = v.getAsObject();
    if (!e)
      continue;
    if (e->getString("ph") == "M") {
      if (const llvm::json::Object *args = e->getObject("args"))
        simulated |= args->getString("name").value_or("").starts_with("simulated");
      continue;
    }
    if (e->getString("ph") != "X")
      continue;
    llvm::StringRef name = e->getString("name").value_or("");
    llvm::StringRef cat = e->getString("cat").value_or("");
    int64_t pid = e->getInteger("pid").value_or(0);
    // A complete ("X") event has both, numbers (drawn at 0 before).
    if (!e->getNumber("ts") || !e->getNumber("dur"))
      fail(path + ": event '" + name.str() + "' has no numeric \"ts\" and \"dur\" (a Chrome "
                  "trace's complete events have both, in microseconds)");
    double ts = *e->getNumber("ts"), dur = *e->getNumber("dur");
    if (!std::isfinite(ts) || !std::isfinite(dur) || dur < 0)
      fail(path + ": event '" + name.str() + "' has ts " + std::to_string(ts) + " and dur " +
           std::to_string(dur) + " (a Chrome trace's durations are >= 0 microseconds)");
    Kind kind = classify(name, cat);
    if (kind == Kind::Step) {
      stepsOf[pid].push_back({ts, ts + dur});
      continue;
    }
    if (kind == Kind::Other || pid < 0 || pid > 4096)
      continue;
    all.push_back({pid, kind, ts, ts + dur});
    panel.devices = std::max(panel.devices, pid + 1);
  }
  if (all.empty())
    fail(path + " has no stage events (F, B, W, update) to draw");
  // A window of steps of a measured run: rank 0's step events bound it.
  double lo = -1e300, hi = 1e300;
  if (!stepsOf.empty()) {
    auto &s = stepsOf.begin()->second;
    std::sort(s.begin(), s.end());
    // The default skips the first (warm-up) step where there are others.
    if (!fromStepGiven && fromStep >= int(s.size()))
      fromStep = 0;
    if (fromStep >= int(s.size()))
      fail(path + " has " + std::to_string(s.size()) + " steps; --from-step " +
           std::to_string(fromStep) + " is past them");
    lo = s[fromStep].first;
    if (steps > 0 && fromStep + steps < int(s.size()))
      hi = s[fromStep + steps].first;
  }
  panel.begin = 1e300;
  panel.end = -1e300;
  for (const Box &b : all) {
    if (b.end <= lo || b.start >= hi)
      continue;
    Box c = b;
    c.start = std::max(c.start, lo);
    c.end = std::min(c.end, hi);
    panel.boxes.push_back(c);
    panel.begin = std::min(panel.begin, c.start);
    panel.end = std::max(panel.end, c.end);
  }
  if (panel.boxes.empty())
    fail(path + ": no events in the steps chosen");
  panel.title = llvm::sys::path::filename(path).str() +
                (simulated ? " (simulated)" : " (measured)");
  return panel;
}

Rgb colour(Kind k) {
  switch (k) {
  case Kind::Forward: return {31, 119, 180};
  case Kind::Backward: return {44, 160, 44};
  case Kind::Weight: return {23, 190, 207};
  case Kind::Update: return {255, 127, 14};
  default: return {160, 160, 160};
  }
}

} // namespace

int main(int argc, char **argv) {
  std::vector<std::string> traces;
  std::string out;
  int fromStep = 1, steps = 2, width = 1200;
  bool fromStepGiven = false;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc)
        fail(a + " needs a value");
      return argv[++i];
    };
    auto integer = [&]() {
      std::string text = value();
      char *end = nullptr;
      long v = std::strtol(text.c_str(), &end, 10);
      if (text.empty() || *end != '\0' || v < INT_MIN || v > INT_MAX)
        fail(a + " must be an integer, not '" + text + "'");
      return int(v);
    };
    if (a == "-o")
      out = value();
    else if (a == "--from-step") {
      fromStep = integer();
      fromStepGiven = true;
    } else if (a == "--steps")
      steps = integer();
    else if (a == "--width")
      width = integer();
    else if (a == "--help" || a == "-h") {
      std::printf("usage: pipe-timeline TRACE.json [TRACE2.json ...] -o "
                  "timeline.png [--from-step K (default 1)] [--steps N "
                  "(default 2; 0: all)] [--width PX]\n");
      return 0;
    } else if (!a.empty() && a[0] == '-')
      fail("unknown option '" + a + "' (see --help)");
    else
      traces.push_back(a);
  }
  if (traces.empty() || out.empty())
    fail("give one or more traces and -o timeline.png (see --help)");
  if (fromStep < 0 || steps < 0 || width < 300 || width > 20000)
    fail("--from-step and --steps must be >= 0, --width in [300, 20000]");

  std::vector<Panel> panels;
  for (const std::string &t : traces)
    panels.push_back(readTrace(t, fromStep, fromStepGiven, steps));

  const int left = 90, right = 20, rowH = 26, gap = 6, titleH = 22, axisH = 26;
  int height = 10;
  for (const Panel &p : panels)
    height += titleH + int(p.devices) * (rowH + gap) + axisH + 10;
  Canvas canvas(width, height);
  int y = 10;
  for (const Panel &p : panels) {
    canvas.text(left, y, p.title, kBlack, 2);
    y += titleH;
    double span = std::max(1e-9, p.end - p.begin);
    int plotW = width - left - right;
    auto xOf = [&](double t) {
      return left + int(std::lround((t - p.begin) / span * plotW));
    };
    std::vector<double> busy(p.devices, 0.0);
    for (int64_t d = 0; d < p.devices; ++d) {
      int top = y + int(d) * (rowH + gap);
      canvas.text(8, top + 8, "device " + std::to_string(d), kBlack);
      canvas.fill(left, top, width - right, top + rowH - 1, {245, 245, 245});
    }
    for (const Box &b : p.boxes) {
      int top = y + int(b.device) * (rowH + gap);
      int x0 = xOf(b.start), x1 = std::max(x0, xOf(b.end) - 1);
      if (b.kind == Kind::Transfer) {
        canvas.fill(x0, top + rowH - 6, x1, top + rowH - 2, colour(b.kind));
      } else {
        canvas.fill(x0, top + 2, x1, top + rowH - 8, colour(b.kind));
        if (b.kind != Kind::Update)
          busy[b.device] += b.end - b.start;
      }
    }
    y += int(p.devices) * (rowH + gap);
    canvas.hline(left, width - right, y, kBlack);
    for (int i = 0; i <= 4; ++i) {
      int x = left + plotW * i / 4;
      canvas.vline(x, y, y + 4, kBlack);
      char label[32];
      std::snprintf(label, sizeof label, "%.2f ms", span * i / 4 / 1e3);
      canvas.text(std::min(x, width - right - canvas.textWidth(label)), y + 8,
                  label, kBlack);
    }
    y += axisH + 10;
    std::printf("%s: %.3f ms shown; busy (forward/backward) per device:", p.title.c_str(),
                span / 1e3);
    for (int64_t d = 0; d < p.devices; ++d)
      std::printf(" %lld: %.0f%%", (long long)d, 100.0 * busy[d] / span);
    std::printf("\n");
  }
  std::string png = canvas.png();
  std::ofstream f(out, std::ios::binary);
  if (!f || !f.write(png.data(), std::streamsize(png.size())))
    fail("cannot write " + out);
  std::printf("pipe-timeline: wrote %s (%d x %d)\n", out.c_str(), width, height);
  return 0;
}
