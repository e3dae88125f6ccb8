//===- Profile.cpp - measured op costs: JSON, hashes, lookups -------------===//
#include "pipec/Analysis/Profile.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <fstream>
#include <thread>

using namespace mlir::pipec;

std::string mlir::pipec::hashModel(llvm::StringRef bytes) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : bytes) {
    h ^= c;
    h *= 1099511628211ull;
  }
  std::string text;
  llvm::raw_string_ostream os(text);
  os << llvm::format_hex_no_prefix(h, 16);
  return text;
}

std::string mlir::pipec::machineId() {
  std::string model = "unknown cpu";
  std::ifstream cpuinfo("/proc/cpuinfo");
  for (std::string line; std::getline(cpuinfo, line);) {
    if (line.rfind("model name", 0) == 0) {
      size_t colon = line.find(':');
      if (colon != std::string::npos)
        model = llvm::StringRef(line).substr(colon + 1).trim().str();
      break;
    }
  }
  return model + " x" + std::to_string(std::thread::hardware_concurrency());
}

static std::optional<double> fitAt(const std::vector<int64_t> &rows,
                                   const std::vector<double> &times,
                                   double samples) {
  size_t n = std::min(rows.size(), times.size());
  if (n == 0)
    return std::nullopt;
  double floor = *std::min_element(times.begin(), times.begin() + n) * 0.1;
  if (n == 1)
    return std::max(floor, times[0] * samples / double(rows[0]));
  double mx = 0, my = 0;
  for (size_t i = 0; i < n; ++i) {
    mx += double(rows[i]);
    my += times[i];
  }
  mx /= double(n);
  my /= double(n);
  double sxx = 0, sxy = 0;
  for (size_t i = 0; i < n; ++i) {
    sxx += (double(rows[i]) - mx) * (double(rows[i]) - mx);
    sxy += (double(rows[i]) - mx) * (times[i] - my);
  }
  double slope = sxx > 0 ? std::max(0.0, sxy / sxx) : 0.0;
  double intercept = my - slope * mx;
  return std::max(floor, intercept + slope * samples);
}

std::optional<double> OpProfile::forwardAt(llvm::StringRef node,
                                           double samples) const {
  auto it = ops.find(node);
  if (it == ops.end())
    return std::nullopt;
  return fitAt(rows, it->second.forward, samples);
}

std::optional<double> OpProfile::backwardAt(llvm::StringRef node,
                                            double samples) const {
  auto it = ops.find(node);
  return it == ops.end() ? std::nullopt
                         : fitAt(rows, it->second.backward, samples);
}

double OpProfile::opsAt(size_t i) const {
  double sum = 0;
  for (const auto &entry : ops) {
    const OpTimes &t = entry.getValue();
    if (i < t.forward.size())
      sum += t.forward[i];
    if (i < t.backward.size())
      sum += t.backward[i];
  }
  return sum;
}

double OpProfile::linkSeconds(double bytes) const {
  if (linkTimes.empty())
    return linkLatency + (linkBandwidth > 0 ? bytes / linkBandwidth : 0.0);
  if (bytes <= linkTimes.front().first)
    return linkTimes.front().second;
  for (size_t i = 1; i < linkTimes.size(); ++i) {
    auto [b0, t0] = linkTimes[i - 1];
    auto [b1, t1] = linkTimes[i];
    if (bytes <= b1)
      return t0 + (t1 - t0) * (bytes - b0) / (b1 - b0);
  }
  auto [b, t] = linkTimes.back();
  return t + (linkBandwidth > 0 ? (bytes - b) / linkBandwidth : 0.0);
}

StepFit mlir::pipec::fitStepCost(const std::vector<double> &ops,
                                 const std::vector<double> &steps,
                                 double update) {
  std::vector<double> x, y;
  for (size_t i = 0; i < std::min(ops.size(), steps.size()); ++i)
    if (ops[i] > 0 && steps[i] - update > 0) {
      x.push_back(ops[i]);
      y.push_back(steps[i] - update);
    }
  StepFit fit;
  if (x.empty())
    return fit;
  // Weighted least squares, weight 1/y^2: each step's residual relative to
  // it.
  double sw = 0, sx = 0, sy = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    double w = 1.0 / (y[i] * y[i]);
    sw += w;
    sx += w * x[i];
    sy += w * y[i];
  }
  double mx = sx / sw, my = sy / sw, sxx = 0, sxy = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    double w = 1.0 / (y[i] * y[i]);
    sxx += w * (x[i] - mx) * (x[i] - mx);
    sxy += w * (x[i] - mx) * (y[i] - my);
  }
  // Through the origin (no fixed cost): scale = sum w x y / sum w x^2.
  auto proportional = [&] {
    double xy = 0, xx = 0;
    for (size_t i = 0; i < x.size(); ++i) {
      double w = 1.0 / (y[i] * y[i]);
      xy += w * x[i] * y[i];
      xx += w * x[i] * x[i];
    }
    return StepFit{0.0, std::clamp(xy / xx, 0.5, 2.0)};
  };
  if (x.size() == 1 || sxx <= 1e-12 * sw * mx * mx) {
    // One size: what the ops do not explain is fixed.
    if (my >= mx)
      return StepFit{my - mx, 1.0};
    return proportional();
  }
  fit.scale = std::clamp(sxy / sxx, 0.5, 2.0);
  fit.fixed = my - fit.scale * mx;
  if (fit.fixed < 0)
    return proportional();
  return fit;
}

StepFit mlir::pipec::fitStep(const OpProfile &profile) {
  std::vector<double> ops;
  for (size_t i = 0; i < profile.rows.size(); ++i)
    ops.push_back(profile.opsAt(i));
  return fitStepCost(ops, profile.stepSeconds, profile.updateSeconds);
}

static bool readNumbers(const llvm::json::Value *value,
                        std::vector<double> &out) {
  const llvm::json::Array *array = value ? value->getAsArray() : nullptr;
  if (!array)
    return false;
  for (const llvm::json::Value &v : *array) {
    std::optional<double> d = v.getAsNumber();
    if (!d || !(*d >= 0))
      return false;
    out.push_back(*d);
  }
  return true;
}

std::optional<OpProfile> mlir::pipec::readProfile(llvm::StringRef path,
                                                  std::string &error) {
  auto buffer = llvm::MemoryBuffer::getFile(path);
  if (!buffer) {
    error = "cannot read profile " + path.str() + ": " +
            buffer.getError().message();
    return std::nullopt;
  }
  llvm::Expected<llvm::json::Value> json =
      llvm::json::parse((*buffer)->getBuffer());
  if (!json) {
    error = "profile " + path.str() + " is not JSON: " +
            llvm::toString(json.takeError());
    return std::nullopt;
  }
  auto bad = [&](const llvm::Twine &what) {
    error = ("profile " + path + ": " + what +
             " (write it with pipe-profile; schema: docs/profile-json.md)")
                .str();
    return std::nullopt;
  };
  const llvm::json::Object *root = json->getAsObject();
  if (!root || root->getString("kind") != "pipec-op-profile")
    return bad("not a pipec op profile (\"kind\": \"pipec-op-profile\")");
  if (root->getInteger("version") != kProfileVersion)
    return bad("version " +
               llvm::Twine(root->getInteger("version").value_or(-1)) +
               ", this pipec reads version " + llvm::Twine(kProfileVersion));
  OpProfile profile;
  profile.modelHash = root->getString("model_hash").value_or("").str();
  profile.machine = root->getString("machine").value_or("").str();
  profile.target = root->getString("target").value_or("").str();
  std::vector<double> rows;
  if (!readNumbers(root->get("rows"), rows) || rows.empty())
    return bad("\"rows\" must be a non-empty list of micro-batch sizes");
  for (double r : rows) {
    if (r < 1 || r != double(int64_t(r)))
      return bad("\"rows\" must hold positive integers");
    if (!profile.rows.empty() && int64_t(r) <= profile.rows.back())
      return bad("\"rows\" must be increasing");
    profile.rows.push_back(int64_t(r));
  }
  if (root->get("step_s") &&
      (!readNumbers(root->get("step_s"), profile.stepSeconds) ||
       profile.stepSeconds.size() != profile.rows.size()))
    return bad("\"step_s\" must hold one time per entry of \"rows\"");
  profile.updateBytesPerSecond =
      root->getNumber("update_bytes_per_s").value_or(0);
  profile.updateSeconds = root->getNumber("update_s").value_or(0);
  profile.opEventSeconds = root->getNumber("op_event_s").value_or(0);
  if (!(profile.updateSeconds >= 0) || !(profile.opEventSeconds >= 0))
    return bad("\"update_s\" and \"op_event_s\" must be seconds (>= 0)");
  profile.pipelineFactor = root->getNumber("pipeline_compute_factor").value_or(0);
  if (!(profile.pipelineFactor >= 0))
    return bad("\"pipeline_compute_factor\" must be a ratio (> 0, or 0: not measured)");
  if (const llvm::json::Object *link = root->getObject("link")) {
    profile.linkLatency = link->getNumber("latency_s").value_or(0);
    profile.linkBandwidth = link->getNumber("bandwidth_bytes_per_s").value_or(0);
    if (const llvm::json::Array *sizes = link->getArray("sizes")) {
      for (const llvm::json::Value &entry : *sizes) {
        const llvm::json::Array *pair = entry.getAsArray();
        std::optional<double> bytes, seconds;
        if (pair && pair->size() == 2) {
          bytes = (*pair)[0].getAsNumber();
          seconds = (*pair)[1].getAsNumber();
        }
        if (!bytes || !seconds || !(*bytes > 0) || !(*seconds >= 0) ||
            (!profile.linkTimes.empty() && *bytes <= profile.linkTimes.back().first))
          return bad("\"link\".\"sizes\" must be [bytes, seconds] pairs by "
                     "increasing bytes");
        profile.linkTimes.push_back({*bytes, *seconds});
      }
    }
  }
  const llvm::json::Object *ops = root->getObject("ops");
  if (!ops)
    return bad("no \"ops\" object");
  for (const auto &[name, value] : *ops) {
    const llvm::json::Object *op = value.getAsObject();
    OpTimes times;
    if (!op || !readNumbers(op->get("forward_s"), times.forward) ||
        !readNumbers(op->get("backward_s"), times.backward) ||
        times.forward.size() != profile.rows.size() ||
        times.backward.size() != profile.rows.size())
      return bad("op '" + name.str() +
                 "' needs \"forward_s\" and \"backward_s\" with one time per "
                 "entry of \"rows\"");
    profile.ops[name.str()] = std::move(times);
  }
  return profile;
}

bool mlir::pipec::writeProfile(llvm::StringRef path, const OpProfile &profile,
                               std::string &error) {
  llvm::json::Object ops;
  for (const auto &entry : profile.ops)
    ops[entry.getKey()] = llvm::json::Object{
        {"forward_s", llvm::json::Array(entry.getValue().forward)},
        {"backward_s", llvm::json::Array(entry.getValue().backward)}};
  llvm::json::Object root{
      {"kind", "pipec-op-profile"},
      {"version", kProfileVersion},
      {"model_hash", profile.modelHash},
      {"machine", profile.machine},
      {"target", profile.target},
      {"rows", llvm::json::Array(profile.rows)},
      {"step_s", llvm::json::Array(profile.stepSeconds)},
      {"update_bytes_per_s", profile.updateBytesPerSecond},
      {"update_s", profile.updateSeconds},
      {"op_event_s", profile.opEventSeconds},
      {"pipeline_compute_factor", profile.pipelineFactor},
      {"link", [&] {
         llvm::json::Array sizes;
         for (auto [bytes, seconds] : profile.linkTimes)
           sizes.push_back(llvm::json::Array{bytes, seconds});
         return llvm::json::Object{
             {"latency_s", profile.linkLatency},
             {"bandwidth_bytes_per_s", profile.linkBandwidth},
             {"sizes", std::move(sizes)}};
       }()},
      {"ops", std::move(ops)}};
  std::error_code ec;
  llvm::raw_fd_ostream os(path, ec, llvm::sys::fs::OF_Text);
  if (ec) {
    error = "cannot write " + path.str() + ": " + ec.message();
    return false;
  }
  os << llvm::formatv("{0:2}", llvm::json::Value(std::move(root))) << "\n";
  return true;
}

bool mlir::pipec::checkProfile(const OpProfile &profile, llvm::StringRef path,
                               llvm::StringRef modelHash,
                               llvm::StringRef target, std::string &error) {
  if (profile.modelHash != modelHash) {
    error = "profile " + path.str() + " was measured for another model (hash " +
            profile.modelHash + ", this model's is " + modelHash.str() +
            "): run pipe-profile on this model";
    return false;
  }
  std::string here = machineId();
  if (profile.machine != here) {
    error = "profile " + path.str() + " was measured on another machine ('" +
            profile.machine + "', this is '" + here +
            "'): run pipe-profile here";
    return false;
  }
  if (profile.target != target) {
    error = "profile " + path.str() + " was measured for --target " +
            profile.target + ", not " + target.str() +
            ": run pipe-profile --target " + target.str();
    return false;
  }
  return true;
}
