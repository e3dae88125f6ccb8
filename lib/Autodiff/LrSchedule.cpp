//===- LrSchedule.cpp - learning-rate schedules as onnx ops ---------------===//
#include "pipec/Autodiff/LrSchedule.h"
#include "dialects/onnx/OnnxDialect.h"

#include <cmath>

using namespace mlir;
using namespace mlir::pipec;

std::string LrSchedule::check(double lr) const {
  if (kind != "constant" && kind != "linear" && kind != "cosine")
    return "--lr-schedule must be constant, linear or cosine, not '" + kind + "'";
  if (warmupSteps < 0)
    return "--warmup-steps must be >= 0";
  if (updatesPerStep < 1)
    return "a schedule's updates per step must be >= 1";
  if (!(minLr >= 0) || !std::isfinite(minLr))
    return "--min-lr must be a finite number >= 0";
  if (kind == "constant") {
    if (decaySteps != 0)
      return "--decay-steps applies to --lr-schedule linear or cosine";
    if (minLr != 0)
      return "--min-lr applies to --lr-schedule linear or cosine";
    return "";
  }
  if (decaySteps <= warmupSteps)
    return "--lr-schedule " + kind + " needs --decay-steps N, the step where the decay ends, "
           "above --warmup-steps (" + std::to_string(warmupSteps) + ")" +
           (decaySteps ? ", not " + std::to_string(decaySteps) : std::string(""));
  if (minLr > lr)
    return "--min-lr must not exceed --lr";
  return "";
}

DictionaryAttr LrSchedule::toAttr(Builder &b, bool withUpdatesPerStep) const {
  SmallVector<NamedAttribute> entries{
      b.getNamedAttr("kind", b.getStringAttr(kind)),
      b.getNamedAttr("warmup_steps", b.getI64IntegerAttr(warmupSteps)),
      b.getNamedAttr("decay_steps", b.getI64IntegerAttr(decaySteps)),
      b.getNamedAttr("min_lr", b.getF64FloatAttr(minLr))};
  if (withUpdatesPerStep)
    entries.push_back(
        b.getNamedAttr("updates_per_step", b.getI64IntegerAttr(updatesPerStep)));
  return b.getDictionaryAttr(entries);
}

LrSchedule LrSchedule::fromAttr(DictionaryAttr dict, std::string &error) {
  LrSchedule s;
  error.clear();
  for (NamedAttribute e : dict) {
    StringRef key = e.getName().getValue();
    if (key == "kind") {
      auto name = dyn_cast<StringAttr>(e.getValue());
      if (!name) {
        error = "lr_schedule: 'kind' must be a string";
        return s;
      }
      s.kind = name.getValue().str();
      continue;
    }
    if (key == "min_lr") {
      auto f = dyn_cast<FloatAttr>(e.getValue());
      auto i = dyn_cast<IntegerAttr>(e.getValue());
      if (!f && !i) {
        error = "lr_schedule: 'min_lr' must be a number";
        return s;
      }
      s.minLr = f ? f.getValueAsDouble() : double(i.getValue().getSExtValue());
      continue;
    }
    int64_t *slot = key == "warmup_steps"       ? &s.warmupSteps
                    : key == "decay_steps"      ? &s.decaySteps
                    : key == "updates_per_step" ? &s.updatesPerStep
                                                : nullptr;
    if (!slot) {
      error = "lr_schedule: unknown key '" + key.str() +
              "' (kind, warmup_steps, decay_steps, min_lr, updates_per_step)";
      return s;
    }
    auto i = dyn_cast<IntegerAttr>(e.getValue());
    if (!i) {
      error = "lr_schedule: '" + key.str() + "' must be an integer";
      return s;
    }
    *slot = i.getValue().getSExtValue();
  }
  return s;
}

Value mlir::pipec::scheduledRate(autodiff::OnnxBuilder &ob, Value count, double lr,
                                 const LrSchedule &s) {
  Type f32 = ob.builder().getF32Type();
  if (s.isConstant())
    return ob.scalar(f32, lr);
  // x: steps done, fractional when a step makes several updates.
  Value x = ob.create<onnx::CastOp>({count}, {ob.i64Attr("to", 1 /* FLOAT */)});
  if (s.updatesPerStep != 1)
    x = ob.div(x, ob.scalar(f32, double(s.updatesPerStep)));
  const double w = double(s.warmupSteps);
  Value factor = ob.scalar(f32, 1.0);
  if (s.kind != "constant") {
    const double r = lr > 0 ? s.minLr / lr : 0.0;
    Value t = ob.div(ob.sub(x, ob.scalar(f32, w)),
                     ob.scalar(f32, double(s.decaySteps) - w));
    Value p = ob.create<onnx::MinOp>(
        {ob.create<onnx::MaxOp>({t, ob.scalar(f32, 0.0)}), ob.scalar(f32, 1.0)});
    Value d = s.kind == "linear"
                  ? ob.sub(ob.scalar(f32, 1.0), p)
                  : ob.add(ob.scalar(f32, 0.5),
                           ob.mul(ob.scalar(f32, 0.5),
                                  ob.create<onnx::CosOp>({ob.mul(p, ob.scalar(f32, M_PI))})));
    factor = ob.add(ob.scalar(f32, r), ob.mul(ob.scalar(f32, 1.0 - r), d));
  }
  if (w > 0) {
    Value warming = ob.create<onnx::LessOp>({x, ob.scalar(f32, w)});
    factor = ob.create<onnx::WhereOp>({warming, ob.div(x, ob.scalar(f32, w)), factor});
  }
  return ob.mul(ob.scalar(f32, lr), factor);
}
