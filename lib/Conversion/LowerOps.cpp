//===- LowerOps.cpp - onnx ops → pipert kernel calls ----------------------===//
//
// StepLowering::lowerOp: one call of a pipert kernel per onnx op of the step
// (elementwise, matmul/gemm, normalisations, convolution and pooling in
// lowerConvLike, losses, shape ops, the ai.onnx.preview.training optimizers);
// the gradient ops are in LowerGradientOps.cpp.
//
//===----------------------------------------------------------------------===//
#include "StepLowering.h"

#include "dialects/onnx/ShapeHelpers.h"

#include "pipec/Conversion/RuntimeABI.h"

#include "dialects/onnx/OnnxDialect.h"

#include "llvm/ADT/StringSwitch.h"
#include "llvm/ADT/TypeSwitch.h"

#include <limits>

using namespace mlir;
using namespace mlir::pipec;

namespace mlir::pipec::steplowering {

/// The PIPERT_SCATTER_* code of a ScatterND/ScatterElements reduction.
static int64_t scatterReduction(StringRef reduction) {
  return llvm::StringSwitch<int64_t>(reduction)
      .Case("add", 1)
      .Case("mul", 2)
      .Case("max", 3)
      .Case("min", 4)
      .Default(0);
}

/// The pipert_unary_op code of an elementwise op (pipert_kernels.h), or -1.
int64_t unaryCode(Operation *op) {
  return llvm::TypeSwitch<Operation *, int64_t>(op)
      .Case<onnx::NegOp>([](auto) { return 1; })
      .Case<onnx::ReluOp>([](auto) { return 2; })
      .Case<onnx::TanhOp>([](auto) { return 3; })
      .Case<onnx::SigmoidOp>([](auto) { return 4; })
      .Case<onnx::ErfOp>([](auto) { return 5; })
      .Case<onnx::SqrtOp>([](auto) { return 6; })
      .Case<onnx::ExpOp>([](auto) { return 7; })
      .Case<onnx::LogOp>([](auto) { return 8; })
      .Case<onnx::AbsOp>([](auto) { return 9; })
      .Case<onnx::ReciprocalOp>([](auto) { return 10; })
      .Case<onnx::SinOp>([](auto) { return 11; })
      .Case<onnx::CosOp>([](auto) { return 12; })
      .Default([](Operation *) { return -1; });
}

/// The pipert_binary_op code of an elementwise op, or -1.
int64_t binaryCode(Operation *op) {
  return llvm::TypeSwitch<Operation *, int64_t>(op)
      .Case<onnx::AddOp>([](auto) { return 0; })
      .Case<onnx::SubOp>([](auto) { return 1; })
      .Case<onnx::MulOp>([](auto) { return 2; })
      .Case<onnx::DivOp>([](auto) { return 3; })
      .Case<onnx::PowOp>([](auto) { return 4; })
      .Case<onnx::MaxOp>([](auto) { return 5; })
      .Case<onnx::MinOp>([](auto) { return 6; })
      .Case<onnx::ModOp>([](onnx::ModOp m) { return m.getFmod() ? 7 : 8; })
      .Default([](Operation *) { return -1; });
}

/// The pipert_activation_op code of a forward op or of a UnaryGrad's
/// `activation` name, with its alpha and beta; code -1 if none.
ActivationCall activationCall(Operation *op) {
  auto byName = [](StringRef name) -> int64_t {
    return llvm::StringSwitch<int64_t>(name)
        .Case("LeakyRelu", 0)
        .Case("Elu", 1)
        .Case("Selu", 2)
        .Case("Softplus", 3)
        .Case("HardSigmoid", 4)
        .Case("HardSwish", 5)
        .Case("Gelu", 6)
        .Case("GeluTanh", 7)
        .Case("Clip", 8)
        .Case("Sign", 9)
        .Case("Floor", 10)
        .Case("Ceil", 11)
        .Case("Abs", 12)
        .Case("Reciprocal", 13)
        .Default(-1);
  };
  if (auto g = dyn_cast<onnx::UnaryGradOp>(op))
    return {byName(g.getActivation()), g.getAlpha().convertToFloat(),
            g.getBeta().convertToFloat()};
  if (!isa<onnx::LeakyReluOp, onnx::EluOp, onnx::SeluOp, onnx::SoftplusOp,
           onnx::HardSigmoidOp, onnx::HardSwishOp, onnx::GeluOp, onnx::SignOp,
           onnx::FloorOp, onnx::CeilOp>(op))
    return {-1, 0, 0};
  StringRef name = op->getName().stripDialect();
  if (auto gelu = dyn_cast<onnx::GeluOp>(op); gelu && gelu.getApproximate() == "tanh")
    name = "GeluTanh";
  double alpha = attrF(op, "alpha", 0.0), beta = attrF(op, "beta", 0.0);
  if (isa<onnx::SeluOp>(op))
    beta = attrF(op, "gamma", 0.0);
  return {byName(name), alpha, beta};
}

/// spatial axes of a convolution or pooling.
SmallVector<int64_t> resolvePads(Operation *op, ArrayRef<int64_t> in,
                                 ArrayRef<int64_t> kernel,
                                 ArrayRef<int64_t> strides,
                                 ArrayRef<int64_t> dilations) {
  size_t n = in.size();
  std::string autoPad = attrStr(op, "auto_pad", "NOTSET");
  SmallVector<int64_t> pads(2 * n, 0);
  if (autoPad == "NOTSET") {
    if (auto p = attrInts(op, "pads"))
      if (p->size() == 2 * n)
        pads = *p;
    return pads;
  }
  if (autoPad == "VALID")
    return pads;
  for (size_t i = 0; i < n; ++i) {
    int64_t outDim = (in[i] + strides[i] - 1) / strides[i];
    int64_t total = std::max<int64_t>(
        (outDim - 1) * strides[i] + (kernel[i] - 1) * dilations[i] + 1 - in[i], 0);
    int64_t small = total / 2, large = total - small;
    pads[i] = autoPad == "SAME_LOWER" ? large : small;
    pads[i + n] = autoPad == "SAME_LOWER" ? small : large;
  }
  return pads;
}

FailureOr<ResizeCall> resizeCall(Operation *op, ArrayRef<int64_t> in,
                                 ArrayRef<int64_t> out,
                                 std::optional<ArrayRef<float>> scales,
                                 ArrayRef<float> roi) {
  ResizeCall c;
  c.mode = llvm::StringSwitch<int64_t>(attrStr(op, "mode", "nearest"))
               .Case("nearest", 0)
               .Case("linear", 1)
               .Case("cubic", 2)
               .Default(-1);
  c.coord = llvm::StringSwitch<int64_t>(
                attrStr(op, "coordinate_transformation_mode", "half_pixel"))
                .Case("half_pixel", 0)
                .Case("asymmetric", 1)
                .Case("align_corners", 2)
                .Case("pytorch_half_pixel", 3)
                .Case("tf_half_pixel_for_nn", 4)
                .Case("tf_crop_and_resize", 5)
                .Case("half_pixel_symmetric", 6)
                .Default(-1);
  c.nearest = llvm::StringSwitch<int64_t>(
                  attrStr(op, "nearest_mode", "round_prefer_floor"))
                  .Case("round_prefer_floor", 0)
                  .Case("round_prefer_ceil", 1)
                  .Case("floor", 2)
                  .Case("ceil", 3)
                  .Default(-1);
  if (c.mode < 0 || c.coord < 0 || c.nearest < 0)
    return op->emitError() << op->getName().stripDialect()
                           << " has an unknown mode";
  int64_t rank = in.size(), lead = std::max<int64_t>(rank - 3, 0);
  int64_t outer = 1;
  for (int64_t i = 0; i < lead; ++i) {
    bool resized = in[i] != out[i] || (scales && (*scales)[i] != 1.f) ||
                   (!roi.empty() && (roi[i] != 0.f || roi[i + rank] != 1.f));
    if (resized)
      return op->emitError() << op->getName().stripDialect()
                             << " resizes axis " << i << " of rank " << rank
                             << "; only the last three axes may be resized";
    outer *= in[i];
  }
  c.x4 = {outer};
  c.y4 = {outer};
  if (scales)
    c.scales3 = SmallVector<float>();
  SmallVector<float> starts, ends;
  for (int64_t k = rank - 3; k < rank; ++k) {
    bool real = k >= 0;
    c.x4.push_back(real ? in[k] : 1);
    c.y4.push_back(real ? out[k] : 1);
    if (scales)
      c.scales3->push_back(real ? (*scales)[k] : 1.f);
    starts.push_back(real && !roi.empty() ? roi[k] : 0.f);
    ends.push_back(real && !roi.empty() ? roi[k + rank] : 1.f);
  }
  if (!roi.empty()) {
    c.roi6 = starts;
    c.roi6.append(ends);
  }
  return c;
}

LogicalResult StepLowering::lowerConvLike(Operation *op, bool conv) {
  StringRef name = op->getName().getStringRef();
  Value x = op->getOperand(0);
  auto xt = tensorType(x);
  int64_t rank = xt.getRank();
  if (rank != 3 && rank != 4)
    return op->emitError() << name << " is lowered for 1-D and 2-D inputs "
                                      "(rank 3 or 4), not rank "
                           << rank;
  int64_t spatial = rank - 2;
  SmallVector<int64_t> inSpatial(xt.getShape().drop_front(2));
  SmallVector<int64_t> kernel;
  if (conv)
    kernel.assign(tensorType(op->getOperand(1)).getShape().drop_front(2).begin(),
                  tensorType(op->getOperand(1)).getShape().drop_front(2).end());
  else if (!isa<onnx::GlobalAveragePoolOp>(op))
    kernel = *attrInts(op, "kernel_shape");
  SmallVector<int64_t> strides =
      attrInts(op, "strides").value_or(SmallVector<int64_t>(spatial, 1));
  SmallVector<int64_t> dilations =
      attrInts(op, "dilations").value_or(SmallVector<int64_t>(spatial, 1));
  SmallVector<int64_t> pads =
      resolvePads(op, inSpatial, kernel, strides, dilations);
  // 1-D is 2-D with H = kH = 1.
  auto to2d = [&](ArrayRef<int64_t> v, int64_t fill) {
    SmallVector<int64_t> r(v.begin(), v.end());
    if (spatial == 1)
      r.insert(r.begin(), fill);
    return r;
  };
  auto shape4 = [&](ArrayRef<int64_t> s) { return convShape2d(s, spatial == 1); };
  SmallVector<int64_t> pads4 = pads;
  if (spatial == 1)
    pads4 = {0, pads[0], 0, pads[1]};
  Value xShape = i64Array(shape4(xt.getShape()));
  Value padsV = i64Array(pads4);
  Value stridesV = i64Array(to2d(strides, 1));
  Value dilationsV = i64Array(to2d(dilations, 1));
  if (conv) {
    Value w = op->getOperand(1);
    call("pipert_conv2d_f32",
         {ctxArg, P(x), xShape, P(w), i64Array(shape4(tensorType(w).getShape())),
          P(op->getOperand(2)), padsV, stridesV, dilationsV,
          i64c(attrInt(op, "group", 1)), out(op, 0)});
    return success();
  }
  Value kernelV = i64Array(to2d(kernel, 1));
  int64_t ceil = attrInt(op, "ceil_mode", 0);
  if (isa<onnx::MaxPoolOp>(op)) {
    if (attrInt(op, "storage_order", 0) != 0)
      return op->emitError("MaxPool with storage_order=1 is not supported");
    call("pipert_maxpool2d_f32",
         {ctxArg, P(x), xShape, kernelV, padsV, stridesV, dilationsV,
          i32c(ceil), out(op, 0), out(op, 1)});
    return success();
  }
  for (int64_t d : dilations)
    if (d != 1)
      return op->emitError("AveragePool with dilations is not supported");
  call("pipert_avgpool2d_f32",
       {ctxArg, P(x), xShape, kernelV, padsV, stridesV, i32c(ceil),
        i32c(attrInt(op, "count_include_pad", 0)), out(op, 0)});
  return success();
}

LogicalResult StepLowering::lowerAttention(Operation *op) {
  bool grad = isa<onnx::AttentionGradOp>(op);
  Value q = op->getOperand(0), k = op->getOperand(1), v = op->getOperand(2);
  if (!getElementTypeOrSelf(q.getType()).isF32())
    return op->emitError() << op->getName() << " is lowered for f32 only";
  auto heads = op->getAttrOfType<IntegerAttr>("q_num_heads");
  auto kvHeads = op->getAttrOfType<IntegerAttr>("kv_num_heads");
  auto sizes = onnx::attentionSizes(
      op, q, k, v,
      heads ? std::optional<int64_t>(heads.getInt()) : std::nullopt,
      kvHeads ? std::optional<int64_t>(kvHeads.getInt()) : std::nullopt);
  if (failed(sizes))
    return failure();
  const onnx::AttentionSizes &z = *sizes;
  for (int64_t d : {z.batch, z.heads, z.kvHeads, z.t, z.s, z.dh})
    if (ShapedType::isDynamic(d))
      return op->emitError() << op->getName() << " needs static shapes";
  auto scaleAttr = op->getAttrOfType<FloatAttr>("scale");
  float scale = onnx::attentionScale(
      scaleAttr ? std::optional<float>(float(scaleAttr.getValueAsDouble()))
                : std::nullopt,
      z.dh);
  // (batch, head, row) strides of Q, K, V and Y, in floats; the fused
  // projection's K and V are its column blocks D and 2 D.
  const int64_t D = z.heads * z.dh;
  SmallVector<int64_t> st;
  Value qp = P(q), kp, vp;
  auto offset = [&](Value ptr, int64_t n) -> Value {
    return LLVM::GEPOp::create(b, ptrType(), b.getF32Type(), ptr,
                               ArrayRef<LLVM::GEPArg>{LLVM::GEPArg(int32_t(n))});
  };
  // Sequence first (T, B, .): a sample's rows are B rows apart, the next
  // sample one row on.
  const bool sf = z.seqFirst;
  switch (z.form) {
  case onnx::AttentionSizes::Packed:
    for (int i = 0; i < 3; ++i)
      st.append(sf ? SmallVector<int64_t>{3 * D, z.dh, z.batch * 3 * D}
                   : SmallVector<int64_t>{z.t * 3 * D, z.dh, 3 * D});
    kp = offset(qp, D);
    vp = offset(qp, 2 * D);
    break;
  case onnx::AttentionSizes::Separate3D:
    st = sf ? SmallVector<int64_t>{D, z.dh, z.batch * D, D, z.dh, z.batch * D, D, z.dh,
                                   z.batch * D}
            : SmallVector<int64_t>{z.t * D, z.dh, D, z.s * D, z.dh, D, z.s * D, z.dh, D};
    kp = P(k);
    vp = P(v);
    break;
  case onnx::AttentionSizes::FourD:
    // K and V of kvHeads heads (grouped-query attention: fewer than Q's).
    st = {z.heads * z.t * z.dh, z.t * z.dh, z.dh, z.kvHeads * z.s * z.dh, z.s * z.dh,
          z.dh, z.kvHeads * z.s * z.dh, z.s * z.dh, z.dh};
    kp = P(k);
    vp = P(v);
    break;
  }
  if (z.form == onnx::AttentionSizes::FourD)
    st.append({z.heads * z.t * z.dh, z.t * z.dh, z.dh});
  else if (sf)
    st.append({D, z.dh, z.batch * D});
  else
    st.append({z.t * D, z.dh, D});
  SmallVector<Value> args{ctxArg, qp, kp, vp, i64Array(st), i64c(z.batch),
                          i64c(z.heads), i64c(z.kvHeads), i64c(z.t), i64c(z.s),
                          i64c(z.dh), f32c(scale)};
  // The dropout ratio of the probabilities (0: none; inference mode has
  // removed the attribute).
  auto dropAttr = op->getAttrOfType<FloatAttr>("dropout");
  Value dropout = f32c(dropAttr ? float(dropAttr.getValueAsDouble()) : 0.f);
  if (!grad) {
    auto att = cast<onnx::AttentionOp>(op);
    // The mask's (batch, head, row) strides: its shape broadcast to (B, H,
    // T, S) behind leading 1s, a stride of 0 where an axis is 1 (a key
    // padding mask of (B, 1, 1, S): (S, 0, 0)); null for none.
    Value maskStrides = nullPtr();
    if (auto mt = dyn_cast<RankedTensorType>(att.getAttnMask().getType())) {
      SmallVector<int64_t> dims(4 - mt.getRank(), 1);
      dims.append(mt.getShape().begin(), mt.getShape().end());
      int64_t row = dims[3], head = dims[2] * row, batch = dims[1] * head;
      maskStrides = i64Array({dims[0] == 1 ? 0 : batch, dims[1] == 1 ? 0 : head,
                              dims[2] == 1 ? 0 : row});
    }
    // A bool mask (true: attend) or a float one, added to the scores.
    Value mask = att.getAttnMask();
    bool floatMask = !isa<NoneType>(mask.getType()) &&
                     isa<FloatType>(getElementTypeOrSelf(mask.getType()));
    args.append({i32c(att.getIsCausal()), dropout, floatMask ? nullPtr() : P(mask),
                 floatMask ? P(mask) : nullPtr(), maskStrides, out(op, 0), out(op, 1)});
    call("pipert_attention_f32", args);
    return success();
  }
  // AttentionGrad: (Q K V Probs dY) -> dQ [dK dV]; a fused projection's
  // gradient gets dq, dk, dv in its column blocks.
  Value dq = out(op, 0), dk, dv;
  if (z.form == onnx::AttentionSizes::Packed) {
    dk = offset(dq, D);
    dv = offset(dq, 2 * D);
  } else {
    dk = out(op, 1);
    dv = out(op, 2);
  }
  args.append({i32c(attrInt(op, "is_causal", 0)), dropout, P(op->getOperand(3)),
               P(op->getOperand(4)),
               dq, dk, dv});
  call("pipert_attention_grad_f32", args);
  return success();
}

LogicalResult StepLowering::lowerOp(Operation *op) {
  StringRef name = op->getName().getStringRef();
  auto operand = [&](unsigned i) { return op->getOperand(i); };
  auto elemOf = [&](Value v) { return getElementTypeOrSelf(v.getType()); };
  auto requireF32 = [&](Value v) -> LogicalResult {
    if (!elemOf(v).isF32())
      return op->emitError() << name << " is lowered for f32 only, not "
                             << elemOf(v);
    return success();
  };
  auto dtypeOf = [&](Value v) { return i32c(*pipertDtype(elemOf(v))); };
  auto numel = [&](Value v) { return i64c(tensorType(v).getNumElements()); };
  auto normAxis = [&](int64_t axis, int64_t rank) {
    return axis < 0 ? axis + rank : axis;
  };

  if (auto call = dyn_cast<func::CallOp>(op))
    return op->emitError() << "pipe-lower-to-runtime: no lowering for a call "
                              "to @"
                           << call.getCallee()
                           << " (a step is onnx ops; pipe-lower-programs "
                              "lowers transfers itself)";

  // Results that are constants or aliases need no kernel; nor does an Add
  // of a gradient into its accumulator that the gradient's kernel does
  // itself, or a Concat whose parts were computed in its buffer.
  if (isa<onnx::ConstantOp, onnx::NoValueOp>(op) || isAliasOp(op) || foldedAdds.contains(op) ||
      inPlaceConcats.contains(op))
    return success();
  if (op->getNumResults() && llvm::all_of(op->getResults(), [&](Value r) {
        return placement[r].kind == Placement::Constant;
      }))
    return success();

  if (int64_t code = unaryCode(op); code >= 0) {
    if (failed(requireF32(operand(0))))
      return failure();
    call("pipert_unary_f32",
         {ctxArg, i32c(code), P(operand(0)), numel(operand(0)), out(op, 0)});
    return success();
  }
  if (int64_t code = binaryCode(op); code >= 0) {
    Value a = operand(0), c = operand(1);
    Type e = elemOf(a);
    if (elemOf(c) != e)
      return op->emitError() << name << " with operands of different element "
                                        "types is not supported";
    StringRef fn;
    if (e.isF32())
      fn = "pipert_binary_f32";
    else if (e.isInteger(64) && code != 4)
      fn = "pipert_binary_i64";
    else
      return op->emitError() << name << " is lowered for f32 (and i64 "
                                        "except Pow), not "
                             << e << "; Cast the operands";
    call(fn, {ctxArg, i32c(code), P(a), rankOf(a), shapeOf(a), P(c), rankOf(c),
              shapeOf(c), out(op, 0)});
    return success();
  }
  if (ActivationCall act = activationCall(op);
      act.code >= 0 && !isa<onnx::UnaryGradOp>(op)) {
    if (failed(requireF32(operand(0))))
      return failure();
    call("pipert_activation_f32",
         {ctxArg, i32c(act.code), f32c(act.alpha), f32c(act.beta),
          P(operand(0)), numel(operand(0)), out(op, 0)});
    return success();
  }
  if (isa<onnx::ClipOp>(op)) {
    Value x = operand(0);
    if (failed(requireF32(x)))
      return failure();
    Value lo = f32c(-std::numeric_limits<double>::infinity());
    Value hi = f32c(std::numeric_limits<double>::infinity());
    for (auto [i, bound] : llvm::enumerate(SmallVector<Value *>{&lo, &hi})) {
      if (isa<NoneType>(operand(i + 1).getType()))
        continue;
      auto v = scalarF32(op, operand(i + 1), i ? "Clip max" : "Clip min");
      if (failed(v))
        return failure();
      *bound = *v;
    }
    call("pipert_activation_f32", {ctxArg, i32c(8), lo, hi, P(x), numel(x),
                                   out(op, 0)});
    return success();
  }
  if (isa<onnx::LessOp, onnx::LessOrEqualOp, onnx::GreaterOp,
          onnx::GreaterOrEqualOp>(op)) {
    Value a = operand(0), c = operand(1);
    int64_t code = isa<onnx::LessOp>(op)          ? 0
                   : isa<onnx::LessOrEqualOp>(op) ? 1
                   : isa<onnx::GreaterOp>(op)     ? 2
                                                  : 3;
    StringRef fn = elemOf(a).isF32() ? "pipert_compare_f32"
                   : elemOf(a).isInteger(64) ? "pipert_compare_i64"
                                             : "";
    if (fn.empty())
      return op->emitError() << name << " is lowered for f32 and i64 only, not "
                             << elemOf(a);
    call(fn, {ctxArg, i32c(code), P(a), rankOf(a), shapeOf(a), P(c), rankOf(c),
              shapeOf(c), out(op, 0)});
    return success();
  }
  if (isa<onnx::AndOp, onnx::OrOp>(op)) {
    Value a = operand(0), c = operand(1);
    call("pipert_logical", {ctxArg, i32c(isa<onnx::AndOp>(op) ? 0 : 1), P(a),
                            rankOf(a), shapeOf(a), P(c), rankOf(c), shapeOf(c),
                            out(op, 0)});
    return success();
  }
  if (isa<onnx::NotOp>(op)) {
    call("pipert_not", {ctxArg, P(operand(0)), numel(operand(0)), out(op, 0)});
    return success();
  }
  if (isa<onnx::EqualOp>(op)) {
    Value a = operand(0), c = operand(1);
    StringRef fn = elemOf(a).isF32() ? "pipert_equal_f32"
                   : elemOf(a).isInteger(64) ? "pipert_equal_i64"
                                             : "";
    if (fn.empty())
      return op->emitError("Equal is lowered for f32 and i64 only");
    call(fn, {ctxArg, P(a), rankOf(a), shapeOf(a), P(c), rankOf(c), shapeOf(c),
              out(op, 0)});
    return success();
  }
  if (isa<onnx::WhereOp>(op)) {
    Value c = operand(0), x = operand(1), y = operand(2);
    call("pipert_where", {ctxArg, dtypeOf(x), P(c), rankOf(c), shapeOf(c), P(x),
                          rankOf(x), shapeOf(x), P(y), rankOf(y), shapeOf(y),
                          out(op, 0)});
    return success();
  }
  if (isa<onnx::CastOp>(op)) {
    Value x = operand(0);
    auto to = pipertDtype(elemOf(op->getResult(0)));
    if (!to)
      return op->emitError("Cast to an element type the runtime lacks");
    call("pipert_cast",
         {ctxArg, dtypeOf(x), P(x), i32c(*to), out(op, 0), numel(x)});
    return success();
  }
  if (isa<onnx::GemmOp>(op)) {
    Value a = operand(0), bb = operand(1), c = operand(2);
    if (failed(requireF32(a)))
      return failure();
    int64_t ta = attrInt(op, "transA", 0), tb = attrInt(op, "transB", 0);
    auto as = tensorType(a).getShape(), bs = tensorType(bb).getShape();
    int64_t m = ta ? as[1] : as[0], k = ta ? as[0] : as[1];
    int64_t n = tb ? bs[0] : bs[1];
    bool hasC = !isa<NoneType>(c.getType());
    call("pipert_gemm_f32",
         {ctxArg, P(a), P(bb), P(c), i64c(hasC ? tensorType(c).getRank() : 0),
          hasC ? shapeOf(c) : nullPtr(), i64c(m), i64c(n), i64c(k), i32c(ta),
          i32c(tb), f32c(attrF(op, "alpha", 1.0)), f32c(attrF(op, "beta", 1.0)),
          out(op, 0)});
    return success();
  }
  if (isa<onnx::MatMulOp>(op)) {
    Value a = operand(0), c = operand(1);
    if (failed(requireF32(a)))
      return failure();
    // An operand that is a transpose of its last two axes, read only by
    // MatMuls, is read in place with the transposed flag.
    auto untransposed = [&](Value v) -> std::pair<Value, int32_t> {
      Operation *def = v.getDefiningOp();
      if (def && isTransposeIntoMatMul(def) &&
          placement[v].kind == Placement::Alias)
        return {def->getOperand(0), 1};
      return {v, 0};
    };
    auto [ua, ta] = untransposed(a);
    auto [uc, tc] = untransposed(c);
    if (ta || tc) {
      call("pipert_matmul_t_f32",
           {ctxArg, P(ua), rankOf(ua), shapeOf(ua), i32c(ta), P(uc), rankOf(uc),
            shapeOf(uc), i32c(tc), out(op, 0)});
      return success();
    }
    call("pipert_matmul_f32", {ctxArg, P(a), rankOf(a), shapeOf(a), P(c),
                               rankOf(c), shapeOf(c), out(op, 0)});
    return success();
  }
  if (isa<onnx::AttentionOp>(op))
    return lowerAttention(op);
  if (isa<onnx::SoftmaxOp, onnx::LogSoftmaxOp>(op)) {
    Value x = operand(0);
    if (failed(requireF32(x)))
      return failure();
    int64_t rank = tensorType(x).getRank();
    call(isa<onnx::SoftmaxOp>(op) ? "pipert_softmax_f32"
                                  : "pipert_log_softmax_f32",
         {ctxArg, P(x), rankOf(x), shapeOf(x),
          i64c(normAxis(attrInt(op, "axis", -1), rank)), out(op, 0)});
    return success();
  }
  if (isa<onnx::LayerNormalizationOp>(op)) {
    Value x = operand(0);
    if (failed(requireF32(x)))
      return failure();
    if (attrInt(op, "stash_type", 1) != 1)
      return op->emitError("LayerNormalization with stash_type other than "
                           "float is not supported");
    int64_t rank = tensorType(x).getRank();
    call("pipert_layer_norm_f32",
         {ctxArg, P(x), rankOf(x), shapeOf(x),
          i64c(normAxis(attrInt(op, "axis", -1), rank)),
          f32c(attrF(op, "epsilon", 1e-5)), P(operand(1)), P(operand(2)),
          out(op, 0), out(op, 1), out(op, 2)});
    return success();
  }
  if (isa<onnx::BatchNormalizationOp>(op)) {
    Value x = operand(0);
    if (failed(requireF32(x)))
      return failure();
    float eps = attrF(op, "epsilon", 1e-5);
    if (attrInt(op, "training_mode", 0)) {
      call("pipert_batch_norm_training_f32",
           {ctxArg, P(x), rankOf(x), shapeOf(x), P(operand(1)), P(operand(2)),
            P(operand(3)), P(operand(4)), f32c(eps),
            f32c(attrF(op, "momentum", 0.9)), out(op, 0), out(op, 1),
            out(op, 2), nullPtr(), nullPtr()});
    } else {
      call("pipert_batch_norm_inference_f32",
           {ctxArg, P(x), rankOf(x), shapeOf(x), P(operand(1)), P(operand(2)),
            P(operand(3)), P(operand(4)), f32c(eps), out(op, 0)});
    }
    return success();
  }
  if (isa<onnx::LSTMOp, onnx::GRUOp>(op)) {
    if (failed(onnx::checkRecurrentSupported(op)))
      return failure();
    bool lstm = isa<onnx::LSTMOp>(op);
    auto xs = tensorType(operand(0)).getShape();
    int64_t hidden = tensorType(operand(2)).getDimSize(2);
    SmallVector<Value> args{ctxArg, P(operand(0)), P(operand(1)),
                            P(operand(2)), P(operand(3)), P(operand(5))};
    if (lstm)
      args.push_back(P(operand(6)));
    args.append({i64c(xs[0]), i64c(xs[1]), i64c(xs[2]), i64c(hidden),
                 i32c(recurrentDirection(op))});
    if (!lstm)
      args.push_back(i32c(attrInt(op, "linear_before_reset", 0)));
    args.append({out(op, 0), out(op, 1)});
    if (lstm)
      args.push_back(out(op, 2));
    // The training form's saved states (null where the op has none).
    args.push_back(out(op, lstm ? 3 : 2));
    call(lstm ? "pipert_lstm_f32" : "pipert_gru_f32", args);
    return success();
  }
  if (isa<onnx::ConvOp>(op))
    return lowerConvLike(op, /*conv=*/true);
  if (auto ct = dyn_cast<onnx::ConvTransposeOp>(op)) {
    // Y is the input gradient of Conv(Y-shaped input, W) at dy = X.
    Value x = ct.getX(), w = ct.getW();
    if (failed(requireF32(x)))
      return failure();
    auto xt = tensorType(x), wt = tensorType(w), yt = tensorType(ct.getY());
    int64_t rank = xt.getRank();
    if (rank != 3 && rank != 4)
      return op->emitError() << name << " is lowered for 1-D and 2-D inputs "
                                        "(rank 3 or 4), not rank "
                             << rank;
    auto window = onnx::convTransposeWindow(op, xt, wt);
    if (failed(window))
      return failure();
    if (llvm::any_of(window->pads, [](int64_t p) { return p < 0; }))
      return op->emitError() << name << " whose output_shape exceeds its "
                                        "natural extent (negative pads) is "
                                        "not supported";
    bool oneD = rank == 3;
    auto shape4 = [&](ArrayRef<int64_t> s) { return convShape2d(s, oneD); };
    auto pair = [&](ArrayRef<int64_t> v) {
      SmallVector<int64_t> r(v.begin(), v.end());
      if (oneD)
        r.insert(r.begin(), 1);
      return i64Array(r);
    };
    SmallVector<int64_t> pads = window->pads;
    if (oneD)
      pads = {0, pads[0], 0, pads[1]};
    SmallVector<int64_t> y4 = shape4(yt.getShape());
    call("pipert_conv2d_grad_input_f32",
         {ctxArg, P(x), P(w), i64Array(shape4(wt.getShape())), i64Array(y4),
          i64Array(pads), pair(window->strides), pair(window->dilations),
          i64c(ct.getGroup()), out(op, 0)});
    if (!isa<NoneType>(ct.getB().getType())) {
      // y += B over (M, 1, 1), in place.
      call("pipert_binary_f32",
           {ctxArg, i32c(0), out(op, 0), i64c(4), i64Array(y4), P(ct.getB()),
            i64c(3), i64Array({y4[1], 1, 1}), out(op, 0)});
    }
    return success();
  }
  if (auto resize = dyn_cast<onnx::ResizeOp>(op)) {
    Value x = resize.getX();
    if (failed(requireF32(x)))
      return failure();
    auto geometry = onnx::resizeGeometry(op);
    if (failed(geometry))
      return failure();
    if (!geometry->known)
      return op->emitError() << name << " needs constant scales or sizes (and "
                                        "roi) to be lowered";
    std::optional<ArrayRef<float>> scales;
    if (geometry->scales)
      scales = ArrayRef<float>(*geometry->scales);
    auto c = resizeCall(op, tensorType(x).getShape(),
                        tensorType(resize.getY()).getShape(), scales,
                        geometry->roi);
    if (failed(c))
      return failure();
    call("pipert_resize_f32",
         {ctxArg, P(x), i64Array(c->x4), i64Array(c->y4),
          c->scales3 ? f32Array(*c->scales3) : nullPtr(), f32Array(c->roi6),
          i32c(c->mode), i32c(c->coord), i32c(c->nearest),
          f32c(resize.getCubicCoeffA().convertToFloat()),
          i32c(resize.getExcludeOutside()),
          f32c(resize.getExtrapolationValue().convertToFloat()), out(op, 0)});
    return success();
  }
  if (isa<onnx::MaxPoolOp, onnx::AveragePoolOp>(op))
    return lowerConvLike(op, /*conv=*/false);
  if (isa<onnx::GlobalAveragePoolOp>(op)) {
    Value x = operand(0);
    call("pipert_global_avgpool_f32",
         {ctxArg, P(x), rankOf(x), shapeOf(x), out(op, 0)});
    return success();
  }
  if (isa<onnx::DropoutOp>(op)) {
    Value x = operand(0);
    if (failed(requireF32(x)))
      return failure();
    Value ratio = f32c(0.5);
    if (!isa<NoneType>(operand(1).getType())) {
      auto r = scalarF32(op, operand(1), "Dropout ratio");
      if (failed(r))
        return failure();
      ratio = *r;
    }
    int64_t training = 0;
    if (!isa<NoneType>(operand(2).getType())) {
      auto t = constantOf(operand(2));
      if (!t)
        return op->emitError("Dropout training_mode must be a compile-time "
                             "constant");
      training = (*t->getValues<APInt>().begin()).getBoolValue();
    }
    call("pipert_dropout_f32", {ctxArg, P(x), numel(x), ratio, i32c(training),
                                out(op, 0), out(op, 1)});
    return success();
  }
  if (isa<onnx::ReduceMeanOp, onnx::ReduceSumOp, onnx::ReduceMaxOp,
          onnx::ReduceMinOp>(op)) {
    Value x = operand(0);
    if (failed(requireF32(x)))
      return failure();
    auto axes = constInts(op, operand(1), "the axes of " + name.str());
    if (failed(axes))
      return failure();
    int64_t code = isa<onnx::ReduceSumOp>(op)    ? 0
                   : isa<onnx::ReduceMeanOp>(op) ? 1
                   : isa<onnx::ReduceMaxOp>(op)  ? 2
                                                 : 3;
    call("pipert_reduce_f32",
         {ctxArg, i32c(code), P(x), rankOf(x),
          shapeOf(x), i64c(axes->size()), i64Array(*axes),
          i32c(attrInt(op, "noop_with_empty_axes", 0)), out(op, 0)});
    return success();
  }
  if (isa<onnx::ArgMaxOp, onnx::ArgMinOp>(op)) {
    Value x = operand(0);
    if (failed(requireF32(x)))
      return failure();
    int64_t rank = tensorType(x).getRank();
    call("pipert_arg_reduce_f32",
         {ctxArg, i32c(isa<onnx::ArgMaxOp>(op) ? 2 : 3), P(x), rankOf(x),
          shapeOf(x), i64c(normAxis(attrInt(op, "axis", 0), rank)),
          i32c(attrInt(op, "select_last_index", 0)), out(op, 0)});
    return success();
  }
  if (isa<onnx::CumSumOp>(op)) {
    Value x = operand(0);
    Type e = elemOf(x);
    if (!e.isF32() && !e.isF64() && !e.isInteger(32) && !e.isInteger(64))
      return op->emitError() << "CumSum is lowered for f32, f64, i32 and i64, "
                                "not "
                             << e;
    auto axis = constInts(op, operand(1), "the axis of CumSum");
    if (failed(axis))
      return failure();
    if (axis->size() != 1)
      return op->emitError("CumSum's axis must be one integer");
    int64_t rank = tensorType(x).getRank();
    call("pipert_cumsum",
         {ctxArg, dtypeOf(x), P(x), rankOf(x), shapeOf(x),
          i64c(rank ? normAxis((*axis)[0], rank) : 0),
          i32c(attrInt(op, "exclusive", 0)), i32c(attrInt(op, "reverse", 0)),
          out(op, 0)});
    return success();
  }
  if (isa<onnx::TileOp>(op)) {
    Value x = operand(0);
    auto reps = constInts(op, operand(1), "the repeats of Tile");
    if (failed(reps))
      return failure();
    call("pipert_tile", {ctxArg, dtypeOf(x), P(x), rankOf(x), shapeOf(x),
                         i64Array(*reps), out(op, 0)});
    return success();
  }
  if (auto pad = dyn_cast<onnx::PadOp>(op)) {
    Value x = operand(0);
    Type e = elemOf(x);
    if (!e.isF32() && !e.isF64() && !e.isInteger(64) && !e.isInteger(32) &&
        !e.isInteger(8) && !e.isInteger(1))
      return op->emitError() << "Pad is lowered for f32, f64, i64, i32, i8 and "
                                "bool, not "
                             << e;
    int64_t rank = tensorType(x).getRank();
    auto pads = onnx::fullPads(pad, rank);
    if (!pads)
      return op->emitError("Pad's pads (and axes) must be compile-time "
                           "constants");
    StringRef mode = pad.getMode();
    int64_t code = mode == "constant" ? 0 : mode == "reflect" ? 1 : 2;
    if (code == 1)
      for (int64_t i = 0; i < rank; ++i) {
        int64_t d = tensorType(x).getDimSize(i);
        if (((*pads)[i] > 0 || (*pads)[i + rank] > 0) &&
            ((*pads)[i] >= d || (*pads)[i + rank] >= d))
          return op->emitError() << "Pad in reflect mode needs pads below the "
                                    "axis extent (axis "
                                 << i << " has " << d << ")";
      }
    Value value = f32c(0.0);
    if (!isa<NoneType>(operand(2).getType())) {
      if (e.isF32()) {
        auto v = scalarF32(op, operand(2), "Pad constant_value");
        if (failed(v))
          return failure();
        value = *v;
      } else {
        // Other element types: a compile-time constant, passed as float.
        auto c = constantOf(operand(2));
        if (!c)
          return op->emitError() << "Pad's constant_value must be a "
                                    "compile-time constant for "
                                 << e;
        if (isa<FloatType>(e))
          value = f32c((*c->getValues<APFloat>().begin()).convertToDouble());
        else
          value = f32c(double((*c->getValues<APInt>().begin()).getSExtValue()));
      }
    }
    call("pipert_pad", {ctxArg, dtypeOf(x), i32c(code), P(x), rankOf(x),
                        shapeOf(x), i64Array(*pads), value, out(op, 0)});
    return success();
  }
  if (isa<onnx::TriluOp>(op)) {
    Value x = operand(0);
    Value k = i64c(0);
    if (!isa<NoneType>(operand(1).getType())) {
      auto v = scalarI64(op, operand(1), "Trilu k");
      if (failed(v))
        return failure();
      k = *v;
    }
    call("pipert_trilu", {ctxArg, dtypeOf(x), P(x), rankOf(x), shapeOf(x),
                          i32c(attrInt(op, "upper", 1)), k, out(op, 0)});
    return success();
  }
  if (isa<onnx::SoftmaxCrossEntropyLossOp, onnx::NegativeLogLikelihoodLossOp>(
          op)) {
    Value x = operand(0), labels = operand(1), weights = operand(2);
    if (failed(requireF32(x)))
      return failure();
    if (!elemOf(labels).isInteger(64))
      return op->emitError() << name << " labels must be i64 (Cast them)";
    auto ii = op->getAttrOfType<IntegerAttr>("ignore_index");
    Value hasIgnore = i32c(ii ? 1 : 0), ignore = i64c(ii ? ii.getInt() : 0);
    Value reduction = i32c(reductionCode(attrStr(op, "reduction", "mean")));
    if (isa<onnx::SoftmaxCrossEntropyLossOp>(op))
      call("pipert_softmax_cross_entropy_loss_f32",
           {ctxArg, P(x), rankOf(x), shapeOf(x), P(labels), P(weights),
            hasIgnore, ignore, reduction, out(op, 0), out(op, 1)});
    else
      call("pipert_nll_loss_f32",
           {ctxArg, P(x), rankOf(x), shapeOf(x), P(labels), P(weights),
            hasIgnore, ignore, reduction, out(op, 0)});
    return success();
  }
  if (isa<onnx::TransposeOp>(op)) {
    Value x = operand(0);
    int64_t rank = tensorType(x).getRank();
    SmallVector<int64_t> perm;
    if (auto p = attrInts(op, "perm"))
      perm = *p;
    else
      for (int64_t i = rank - 1; i >= 0; --i)
        perm.push_back(i);
    call("pipert_transpose", {ctxArg, dtypeOf(x), P(x), rankOf(x), shapeOf(x),
                              i64Array(perm), out(op, 0)});
    return success();
  }
  if (isa<onnx::ConcatOp>(op)) {
    Value y = op->getResult(0);
    int64_t rank = tensorType(y).getRank();
    int64_t axis = normAxis(attrInt(op, "axis", 0), rank);
    SmallVector<Value> ptrs;
    SmallVector<int64_t> sizes;
    for (Value x : op->getOperands()) {
      ptrs.push_back(P(x));
      sizes.push_back(tensorType(x).getDimSize(axis));
    }
    call("pipert_concat",
         {ctxArg, dtypeOf(y), i64c(ptrs.size()), ptrArray(ptrs), i64Array(sizes),
          i64c(rank), shapeOf(y), i64c(axis), out(op, 0)});
    return success();
  }
  if (isa<onnx::SplitOp>(op)) {
    Value x = operand(0);
    int64_t rank = tensorType(x).getRank();
    int64_t axis = normAxis(attrInt(op, "axis", 0), rank);
    SmallVector<Value> ptrs;
    SmallVector<int64_t> sizes;
    for (unsigned i = 0; i < op->getNumResults(); ++i) {
      ptrs.push_back(out(op, i));
      sizes.push_back(tensorType(op->getResult(i)).getDimSize(axis));
    }
    call("pipert_split", {ctxArg, dtypeOf(x), P(x), rankOf(x), shapeOf(x),
                          i64c(axis), i64c(ptrs.size()), i64Array(sizes),
                          ptrArray(ptrs)});
    return success();
  }
  if (isa<onnx::SliceOp>(op)) {
    Value x = operand(0);
    auto window = sliceWindow(op, 1, "Slice");
    if (failed(window))
      return failure();
    SmallVector<Value> args = {ctxArg, dtypeOf(x), P(x), rankOf(x), shapeOf(x)};
    args.append(window->begin(), window->end());
    args.push_back(out(op, 0));
    call("pipert_slice", args);
    return success();
  }
  if (isa<onnx::GatherOp>(op)) {
    Value data = operand(0), idx = operand(1);
    if (!elemOf(idx).isInteger(64))
      return op->emitError("Gather indices must be i64 (Cast them)");
    int64_t rank = tensorType(data).getRank();
    call("pipert_gather",
         {ctxArg, dtypeOf(data), P(data), rankOf(data), shapeOf(data), P(idx),
          rankOf(idx), shapeOf(idx), i64c(normAxis(attrInt(op, "axis", 0), rank)),
          out(op, 0)});
    return success();
  }
  if (isa<onnx::GatherElementsOp>(op)) {
    Value data = operand(0), idx = operand(1);
    if (!elemOf(idx).isInteger(64))
      return op->emitError("GatherElements indices must be i64 (Cast them)");
    int64_t rank = tensorType(data).getRank();
    call("pipert_gather_elements",
         {ctxArg, dtypeOf(data), P(data), rankOf(data), shapeOf(data), P(idx),
          shapeOf(idx), i64c(normAxis(attrInt(op, "axis", 0), rank)),
          out(op, 0)});
    return success();
  }
  if (auto scatter = dyn_cast<onnx::ScatterElementsOp>(op)) {
    Value data = operand(0), idx = operand(1), upd = operand(2);
    if (!elemOf(idx).isInteger(64))
      return op->emitError("ScatterElements indices must be i64 (Cast them)");
    int64_t rank = tensorType(data).getRank();
    call("pipert_scatter_elements",
         {ctxArg, dtypeOf(data), P(data), rankOf(data), shapeOf(data), P(idx),
          shapeOf(idx), P(upd), i64c(normAxis(attrInt(op, "axis", 0), rank)),
          i64c(scatterReduction(scatter.getReduction())), out(op, 0)});
    return success();
  }
  if (isa<onnx::GatherNDOp>(op)) {
    Value data = operand(0), idx = operand(1);
    if (!elemOf(idx).isInteger(64))
      return op->emitError("GatherND indices must be i64 (Cast them)");
    call("pipert_gather_nd",
         {ctxArg, dtypeOf(data), P(data), rankOf(data), shapeOf(data), P(idx),
          rankOf(idx), shapeOf(idx), i64c(attrInt(op, "batch_dims", 0)),
          out(op, 0)});
    return success();
  }
  if (auto scatter = dyn_cast<onnx::ScatterNDOp>(op)) {
    Value data = operand(0), idx = operand(1), upd = operand(2);
    if (!elemOf(idx).isInteger(64))
      return op->emitError("ScatterND indices must be i64 (Cast them)");
    call("pipert_scatter_nd",
         {ctxArg, dtypeOf(data), P(data), rankOf(data), shapeOf(data), P(idx),
          rankOf(idx), shapeOf(idx), P(upd),
          i64c(scatterReduction(scatter.getReduction())), out(op, 0)});
    return success();
  }
  if (isa<onnx::ExpandOp>(op)) {
    Value x = operand(0), y = op->getResult(0);
    call("pipert_expand", {ctxArg, dtypeOf(x), P(x), rankOf(x), shapeOf(x),
                           rankOf(y), shapeOf(y), out(op, 0)});
    return success();
  }

  // ai.onnx.preview.training optimizers: one call per tensor.
  if (isa<onnx::MomentumOp, onnx::AdamOp, onnx::AdagradOp>(op)) {
    unsigned groups = isa<onnx::AdamOp>(op) ? 4 : 3;
    unsigned n = (op->getNumOperands() - 2) / groups;
    auto lr = scalarF32(op, operand(0), name.str() + " learning rate R");
    auto t = scalarI64(op, operand(1), name.str() + " update count T");
    if (failed(lr) || failed(t))
      return failure();
    for (unsigned i = 0; i < n; ++i) {
      Value x = operand(2 + i), g = operand(2 + n + i), s1 = operand(2 + 2 * n + i);
      if (failed(requireF32(x)))
        return failure();
      if (isa<onnx::MomentumOp>(op)) {
        call("pipert_momentum_f32",
             {ctxArg, *lr, *t, f32c(attrF(op, "alpha", 0.9)),
              f32c(attrF(op, "beta", 1.0)),
              f32c(attrF(op, "norm_coefficient", 0.0)),
              i32c(attrStr(op, "mode", "standard") == "nesterov"), P(x), P(g),
              P(s1), numel(x), out(op, i), out(op, n + i)});
      } else if (isa<onnx::AdamOp>(op)) {
        Value s2 = operand(2 + 3 * n + i);
        call("pipert_adam_f32",
             {ctxArg, *lr, *t, f32c(attrF(op, "alpha", 0.9)),
              f32c(attrF(op, "beta", 0.999)), f32c(attrF(op, "epsilon", 1e-6)),
              f32c(attrF(op, "norm_coefficient", 0.0)),
              f32c(attrF(op, "norm_coefficient_post", 0.0)), P(x), P(g), P(s1),
              P(s2), numel(x), out(op, i), out(op, n + i), out(op, 2 * n + i)});
      } else {
        call("pipert_adagrad_f32",
             {ctxArg, *lr, *t, f32c(attrF(op, "decay_factor", 0.0)),
              f32c(attrF(op, "epsilon", 1e-6)),
              f32c(attrF(op, "norm_coefficient", 0.0)), P(x), P(g), P(s1),
              numel(x), out(op, i), out(op, n + i)});
      }
    }
    return success();
  }

  if (isa<onnx::SGDOp>(op)) {
    auto lr = scalarF32(op, operand(0), "SGD learning rate R");
    if (failed(lr) || failed(requireF32(operand(1))))
      return failure();
    call("pipert_sgd_f32", {ctxArg, *lr, f32c(attrF(op, "weight_decay", 0.0)),
                            P(operand(1)), P(operand(2)), numel(operand(1)),
                            out(op, 0)});
    return success();
  }
  if (isa<onnx::AdamWOp>(op)) {
    auto lr = scalarF32(op, operand(0), "AdamW learning rate R");
    auto t = scalarI64(op, operand(1), "AdamW update count T");
    if (failed(lr) || failed(t) || failed(requireF32(operand(2))))
      return failure();
    call("pipert_adamw_f32",
         {ctxArg, *lr, *t, f32c(attrF(op, "beta1", 0.9)),
          f32c(attrF(op, "beta2", 0.999)), f32c(attrF(op, "epsilon", 1e-8)),
          f32c(attrF(op, "weight_decay", 0.01)), P(operand(2)), P(operand(3)),
          P(operand(4)), P(operand(5)), numel(operand(2)), out(op, 0),
          out(op, 1), out(op, 2)});
    return success();
  }
  if (succeeded(lowerGradientOp(op)))
    return success();
  if (handled)
    return failure();
  return op->emitError() << "pipe-lower-to-runtime: no lowering for " << name;
}


} // namespace mlir::pipec::steplowering
