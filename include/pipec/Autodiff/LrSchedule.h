//===- LrSchedule.h - learning-rate schedules as onnx ops -------*- C++ -*-===//
//
// A learning-rate schedule: the rate of an update is lr · f(x), x the
// steps done before it (its optimizer's update count over the updates a
// step makes: 1 for every synchronous plan and 2BW, M for PipeDream's
// update per micro-batch, so x is fractional there). With W warm-up steps
// and decay ending at step N (Hugging Face's schedules, with a floor):
//
//   f(x) = x / W                              x < W
//        = r + (1 − r) · d(p),  p = min(max((x − W) / (N − W), 0), 1)
//   d(p) = 1 (constant), 1 − p (linear), (1 + cos πp) / 2 (cosine)
//
// r = min_lr / lr (default 0). Past N the rate stays at min_lr. constant
// with W = 0 is no schedule.
//
// Both places that build an optimizer's update (pipe-add-optimizer for a
// one-device step, pipe-lower-programs for pipe.update) compute the rate
// from the update count with `scheduledRate`, so the ops run where the
// update does (CPU or CUDA).
//
//===----------------------------------------------------------------------===//
#ifndef PIPEC_AUTODIFF_LRSCHEDULE_H
#define PIPEC_AUTODIFF_LRSCHEDULE_H

#include "pipec/Autodiff/OnnxBuilder.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"

#include <string>

namespace mlir::pipec {

struct LrSchedule {
  std::string kind = "constant"; // constant, linear or cosine
  int64_t warmupSteps = 0;
  int64_t decaySteps = 0; // the step where the decay ends (linear, cosine)
  double minLr = 0;
  int64_t updatesPerStep = 1;

  /// The schedule of the options (pipe-add-optimizer's, pipe-schedule's,
  /// pipe-compile's flags: lr-schedule, warmup-steps, decay-steps, min-lr).
  static LrSchedule of(StringRef kind, int64_t warmupSteps, int64_t decaySteps, double minLr) {
    LrSchedule s;
    s.kind = kind.str();
    s.warmupSteps = warmupSteps;
    s.decaySteps = decaySteps;
    s.minLr = minLr;
    return s;
  }

  /// No schedule: every update at lr.
  bool isConstant() const { return kind == "constant" && warmupSteps == 0; }

  /// "" when the schedule is well formed for learning rate `lr`, else what
  /// is wrong (the option names are pipe-compile's).
  std::string check(double lr) const;

  /// {kind, warmup_steps, decay_steps, min_lr[, updates_per_step]}.
  DictionaryAttr toAttr(Builder &b, bool withUpdatesPerStep) const;
  /// From toAttr's form; "" or what is wrong in `error`.
  static LrSchedule fromAttr(DictionaryAttr dict, std::string &error);
};

/// lr · f(count / updatesPerStep) as a 0-d f32 tensor; `count` is a 0-d i64
/// tensor, the updates done before this one. A constant schedule gives the
/// constant lr.
Value scheduledRate(autodiff::OnnxBuilder &ob, Value count, double lr,
                    const LrSchedule &schedule);

} // namespace mlir::pipec

#endif
