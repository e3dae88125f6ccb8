//===- LossPlot.cpp - pipe-run --plot: the loss curve as a PNG ------------===//
#include "LossPlot.h"
#include "../common/Canvas.h"

#include "llvm/Support/JSON.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <sstream>

#include <zlib.h>

namespace pipec {
namespace {

/// Round tick spacing: 1, 2 or 5 times a power of ten, about `n` ticks.
double niceStep(double span, int n) {
  if (!(span > 0))
    return 1;
  double raw = span / n, mag = std::pow(10, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0, 10.0})
    if (m * mag >= raw)
      return m * mag;
  return 10 * mag;
}

std::string formatTick(double v, double step) {
  char buf[32];
  if (step >= 1 && std::fabs(v) < 1e7)
    std::snprintf(buf, sizeof buf, "%.0f", v);
  else if (std::fabs(v) >= 1e-3 || v == 0)
    std::snprintf(buf, sizeof buf, "%.*f",
                  std::min(6, std::max(0, int(-std::floor(std::log10(step))))), v);
  else
    std::snprintf(buf, sizeof buf, "%.1e", v);
  return buf;
}

} // namespace

std::string writeLossPlot(const std::string &path,
                          const std::vector<LossPoint> &points,
                          const std::string &title) {
  std::vector<const LossPoint *> finite;
  bool anyEval = false, anyAccuracy = false;
  for (const LossPoint &p : points) {
    if (p.loss && std::isfinite(*p.loss))
      finite.push_back(&p);
    anyEval |= p.eval;
    anyAccuracy |= p.eval && p.accuracy && std::isfinite(*p.accuracy);
  }
  if (finite.empty())
    return "no finite loss to plot";
  // With accuracies, a right-hand axis of 0-100% for them.
  const int W = 800, H = 480, left = 80, right = anyAccuracy ? 64 : 24, top = 44,
            bottom = 56;
  Canvas c(W, H);
  long long s0 = points.front().step, s1 = points.back().step;
  if (s1 == s0)
    s1 = s0 + 1;
  double lo = *finite.front()->loss, hi = lo;
  for (const LossPoint *p : finite) {
    lo = std::min(lo, *p->loss);
    hi = std::max(hi, *p->loss);
  }
  if (hi - lo < 1e-12 * std::max(1.0, std::fabs(hi))) {
    lo -= 0.5 * std::max(std::fabs(lo), 1e-3);
    hi += 0.5 * std::max(std::fabs(hi), 1e-3);
  }
  double ystep = niceStep(hi - lo, 5);
  double y0 = std::floor(lo / ystep) * ystep, y1 = std::ceil(hi / ystep) * ystep;
  double xstep = std::max(1.0, niceStep(double(s1 - s0), 8));
  int plotW = W - left - right, plotH = H - top - bottom;
  auto X = [&](double s) {
    return left + int(std::lround((s - s0) / double(s1 - s0) * plotW));
  };
  auto Y = [&](double v) {
    return top + plotH - int(std::lround((v - y0) / (y1 - y0) * plotH));
  };

  for (double v = y0; v <= y1 + ystep / 2; v += ystep) {
    int y = Y(v);
    c.hline(left, left + plotW, y, kGrid);
    std::string t = formatTick(v, ystep);
    c.text(left - 8 - c.textWidth(t), y - 3, t, kBlack);
  }
  for (double s = std::ceil(s0 / xstep) * xstep; s <= s1; s += xstep) {
    int x = X(s);
    c.vline(x, top, top + plotH, kGrid);
    std::string t = formatTick(s, xstep);
    c.text(x - c.textWidth(t) / 2, top + plotH + 8, t, kBlack);
  }
  c.hline(left, left + plotW, top + plotH, kBlack);
  c.vline(left, top, top + plotH, kBlack);
  c.text(left + plotW / 2 - c.textWidth("step") / 2, H - 22, "step", kBlack);
  c.text(8, top - 18, "loss", kBlack);
  c.text(left + plotW / 2 - c.textWidth(title, 2) / 2, 10, title, kBlack, 2);
  auto YA = [&](double a) { return top + plotH - int(std::lround(a * plotH)); };
  if (anyAccuracy) {
    c.vline(left + plotW, top, top + plotH, kBlack);
    for (int pct = 0; pct <= 100; pct += 20) {
      int y = YA(pct / 100.0);
      c.hline(left + plotW, left + plotW + 4, y, kBlack);
      c.text(left + plotW + 8, y - 3, std::to_string(pct) + "%", kBlack);
    }
    std::string label = "accuracy";
    c.text(W - 8 - c.textWidth(label), top - 18, label, kBlack);
  }
  if (anyEval) {
    // The legend: the evaluations' squares (loss, and accuracy).
    std::string label = "eval loss";
    int x = left + plotW - c.textWidth(label) - 4;
    c.fill(x - 12, top - 16, x - 6, top - 10, kEval);
    c.text(x, top - 16, label, kBlack);
    if (anyAccuracy) {
      std::string acc = "eval accuracy";
      int xa = x - 24 - c.textWidth(acc);
      c.fill(xa - 12, top - 16, xa - 6, top - 10, kAccuracy);
      c.text(xa, top - 16, acc, kBlack);
    }
  }

  // The curve; a step without a finite loss breaks it and gets a red tick.
  // Evaluations: squares joined by a line of their own colour.
  const LossPoint *prev = nullptr, *prevEval = nullptr, *prevAccuracy = nullptr;
  for (const LossPoint &p : points) {
    if (p.eval && p.accuracy && std::isfinite(*p.accuracy)) {
      // Clamped to the axis: an accuracy is in [0, 1].
      double a = std::min(1.0, std::max(0.0, *p.accuracy));
      int x = X(double(p.step)), y = YA(a);
      if (prevAccuracy)
        c.line(X(double(prevAccuracy->step)),
               YA(std::min(1.0, std::max(0.0, *prevAccuracy->accuracy))), x, y, kAccuracy);
      c.fill(x - 3, y - 3, x + 3, y + 3, kAccuracy);
      prevAccuracy = &p;
    } else if (p.eval) {
      prevAccuracy = nullptr;
    }
    if (p.eval) {
      if (!p.loss || !std::isfinite(*p.loss)) {
        prevEval = nullptr;
        continue;
      }
      int x = X(double(p.step)), y = Y(*p.loss);
      if (prevEval)
        c.line(X(double(prevEval->step)), Y(*prevEval->loss), x, y, kEval);
      c.fill(x - 3, y - 3, x + 3, y + 3, kEval);
      prevEval = &p;
      continue;
    }
    if (!p.loss || !std::isfinite(*p.loss)) {
      c.vline(X(double(p.step)), top + plotH - 6, top + plotH, kGap);
      prev = nullptr;
      continue;
    }
    if (prev)
      c.line(X(double(prev->step)), Y(*prev->loss), X(double(p.step)), Y(*p.loss),
             kCurve);
    else
      c.line(X(double(p.step)), Y(*p.loss), X(double(p.step)), Y(*p.loss), kCurve);
    prev = &p;
  }

  std::ofstream f(path, std::ios::binary);
  std::string bytes = c.png();
  f.write(bytes.data(), std::streamsize(bytes.size()));
  if (!f)
    return "cannot write " + path;
  return "";
}

std::string readLossLog(const std::string &path, std::vector<LossPoint> &points) {
  std::ifstream f(path);
  if (!f)
    return "cannot read " + path;
  std::string line;
  int n = 0;
  while (std::getline(f, line)) {
    ++n;
    if (line.find_first_not_of(" \t\r") == std::string::npos)
      continue;
    llvm::Expected<llvm::json::Value> v = llvm::json::parse(line);
    if (!v) {
      llvm::consumeError(v.takeError());
      return path + ":" + std::to_string(n) + ": not a JSON line";
    }
    const llvm::json::Object *o = v->getAsObject();
    std::optional<int64_t> step = o ? o->getInteger("step") : std::nullopt;
    if (!step)
      return path + ":" + std::to_string(n) + ": no \"step\"";
    LossPoint p{*step, std::nullopt};
    if (o->get("eval_loss")) {
      // null where the evaluation's loss was not finite: no marker.
      p.loss = o->getNumber("eval_loss");
      p.eval = true;
      // null where every label was ignored, absent without a count.
      p.accuracy = o->getNumber("eval_accuracy");
    } else if (std::optional<double> loss = o->getNumber("loss")) {
      p.loss = *loss;
    }
    points.push_back(p);
  }
  std::stable_sort(points.begin(), points.end(),
                   [](const LossPoint &a, const LossPoint &b) { return a.step < b.step; });
  return "";
}

} // namespace pipec
