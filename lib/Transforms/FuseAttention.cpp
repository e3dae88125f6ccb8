//===- FuseAttention.cpp - pipe-fuse-attention: exported attention as one op ===//
//
// torch.onnx writes multi-head attention (q, k, v of (B, T, H*dh), split
// into heads) as
//
//   %qh = Transpose(Reshape(%q, [B, T, H, dh])) {perm = [0, 2, 1, 3]}
//   %kt = Transpose(Reshape(%k, [B, S, H, dh])) {perm = [0, 2, 3, 1]}
//   %vh = Transpose(Reshape(%v, [B, S, H, dh])) {perm = [0, 2, 1, 3]}
//   %s  = MatMul(%qh, %kt)
//   %s2 = Mul(%s, c) | Div(%s, c)                      (optional)
//   %s3 = Where(%future, -inf, %s2) | Add(%s2, %mask)  (optional)
//   %p  = Softmax(%s3) {axis = -1}
//   %o  = MatMul(%p, %vh)
//   %y  = Reshape(Transpose(%o) {perm = [0, 2, 1, 3]}, [B, T, H*dh])
//
// (kᵀ also as two Transposes, [0, 2, 1, 3] then [0, 1, 3, 2]). This pass
// replaces each such chain by one onnx.Attention(%q, %k, %v) {q_num_heads =
// H, scale, is_causal} carrying %y's location; where q, k and v are the
// three equal parts of one Split along the last axis (self-attention's fused
// projection) and nothing else reads that Split, by onnx.Attention(%x,
// none, none) on the unsplit %x. The Where's constant mask (or an added
// constant %mask of 0 and -inf, of (T, S) behind leading 1s) becomes
// is_causal when it masks exactly j > i, else the op's attn_mask (its
// negation: ONNX's boolean mask is true where a position attends).
//
// nn.MultiheadAttention (torch 1.13) writes its heads sequence first, the
// batch and the heads merged into one axis of (B*H, L, dh) values, q, k
// and v of (L, B, H*dh):
//
//   %qh = Transpose(Reshape(%q, [T, B*H, dh])) {perm = [1, 0, 2]}
//   %kt = Transpose(Reshape(%k, [S, B*H, dh])) {perm = [1, 2, 0]}
//   %vh = Transpose(Reshape(%v, [S, B*H, dh])) {perm = [1, 0, 2]}
//   %s  = MatMul(Div(%qh, c) | Mul(%qh, c) | %qh, %kt)
//   %s2 = Mul(%s, c) | Div(%s, c)                      (optional)
//   %s3 = Add(%s2, %mask)                              (optional)
//   %p  = Softmax(%s3) {axis = -1}
//   %o  = MatMul(%p, %vh)
//   %y  = Reshape(Transpose(%o) {perm = [1, 0, 2]}, [T*B, H*dh] | [T, B, H*dh])
//
// with %mask a constant (T, S) of 0 and -inf (nn.Transformer's square
// subsequent mask: is_causal), a key padding mask or a float (T, S) mask.
// This becomes onnx.Attention {seq_first = 1} on q, k and v (on the
// (T, B, 3*H*dh) projection once, where they are its three equal Slices)
// where they are, its Y (T, B, H*dh) (and a Reshape): no copy, against the
// chain's five transposed copies, its (B*H, T, S) scores and their softmax
// in memory.
//
// The 4-D form's K and V may be key/value heads repeated for grouped-query
// attention (Hugging Face's repeat_kv, torch's repeat_interleave over the
// heads axis): the op reads the unrepeated heads (B, H', S, dh).
//
// In every form a training-mode Dropout may stand between the softmax and
// P V (BERT's and GPT-2's attention dropout: ratio a constant in (0, 1),
// its mask unused): the op gets `dropout` = the ratio, and its kernels
// drop the probabilities with the mask that Dropout would draw.
//
// Each intermediate value of the chain (%s to the final Transpose) must
// have no other use; a chain one of whose inner ops is named in `keep` (a
// manual cut point) stays as it is. Same function: the products, the scale
// and the softmax are those of the chain, done per head in one kernel.
//
//===----------------------------------------------------------------------===//
#include "pipec/Analysis/CostModel.h"
#include "dialects/onnx/ShapeHelpers.h"
#include "dialects/pipe/PipeAttrNames.h"
#include "pipec/Autodiff/OnnxBuilder.h"
#include "pipec/Transforms/Passes.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/DialectResourceBlobManager.h"
#include "mlir/IR/Matchers.h"

#include <cmath>
#include <cstring>

namespace mlir::pipec {
#define GEN_PASS_DEF_PIPEFUSEATTENTION
#include "pipec/Transforms/Passes.h.inc"
} // namespace mlir::pipec

using namespace mlir;
using namespace mlir::pipec;

namespace {

std::optional<double> splatValue(Value v) { return onnx::getSplatFloat(v); }

SmallVector<int64_t> permOf(Operation *op) {
  SmallVector<int64_t> r;
  if (auto a = op->getAttrOfType<DenseI64ArrayAttr>("perm"))
    r.assign(a.asArrayRef().begin(), a.asArrayRef().end());
  return r;
}

bool isPerm(Operation *op, ArrayRef<int64_t> want) {
  return op && isa<onnx::TransposeOp>(op) && ArrayRef<int64_t>(permOf(op)) == want;
}

/// The Reshape under a head split: `v` = Transpose(Reshape(x), forward), or
/// with `transposed` Transpose(Reshape(x), direct) or Transpose(Transpose(
/// Reshape(x), forward), swap). `ops` gets the Transposes and the Reshape.
onnx::ReshapeOp headsReshape(Value v, bool transposed, ArrayRef<int64_t> forward,
                             ArrayRef<int64_t> swap, ArrayRef<int64_t> direct,
                             SmallVector<Operation *> &ops) {
  Operation *t = v.getDefiningOp();
  if (!t)
    return {};
  if (transposed && isPerm(t, swap)) {
    ops.push_back(t);
    t = t->getOperand(0).getDefiningOp();
    if (!isPerm(t, forward))
      return {};
  } else if (!isPerm(t, transposed ? direct : forward)) {
    return {};
  }
  ops.push_back(t);
  auto reshape = t->getOperand(0).getDefiningOp<onnx::ReshapeOp>();
  if (reshape)
    ops.push_back(reshape);
  return reshape;
}

/// `v` = Transpose(Reshape(x, [B, L, H, dh]), perm) with x of (B, L, H*dh):
/// returns x (and H, dh); perm [0, 2, 1, 3] (heads forward) or, with
/// `transposed`, [0, 2, 3, 1] or [0, 2, 1, 3] followed by [0, 1, 3, 2].
struct Head {
  Value x;
  int64_t heads, dh;
  SmallVector<Operation *> ops;
};
std::optional<Head> matchHeads(Value v, bool transposed) {
  Head h;
  auto reshape = headsReshape(v, transposed, {0, 2, 1, 3}, {0, 1, 3, 2}, {0, 2, 3, 1}, h.ops);
  if (!reshape)
    return std::nullopt;
  auto out = dyn_cast<RankedTensorType>(reshape->getResult(0).getType());
  auto in = dyn_cast<RankedTensorType>(reshape->getOperand(0).getType());
  if (!out || !in || !out.hasStaticShape() || !in.hasStaticShape() || out.getRank() != 4 ||
      in.getRank() != 3 || in.getDimSize(0) != out.getDimSize(0) ||
      in.getDimSize(1) != out.getDimSize(1) ||
      in.getDimSize(2) != out.getDimSize(2) * out.getDimSize(3))
    return std::nullopt;
  h.x = reshape->getOperand(0);
  h.heads = out.getDimSize(2);
  h.dh = out.getDimSize(3);
  return h;
}

/// A constant bool (T, S) or (1, 1, T, S) mask's values, row-major.
std::optional<SmallVector<bool>> boolMask(Value v, int64_t t, int64_t s) {
  auto c = v.getDefiningOp<onnx::ConstantOp>();
  if (!c)
    return std::nullopt;
  auto dense = dyn_cast_or_null<DenseIntElementsAttr>(c->getAttr("value"));
  if (!dense || !dense.getElementType().isInteger(1))
    return std::nullopt;
  auto shape = dense.getType().getShape();
  bool ok = (shape.size() == 2 && shape[0] == t && shape[1] == s) ||
            (shape.size() == 4 && shape[0] == 1 && shape[1] == 1 && shape[2] == t &&
             shape[3] == s);
  if (!ok)
    return std::nullopt;
  SmallVector<bool> r;
  for (bool b : dense.getValues<bool>())
    r.push_back(b);
  return r;
}

/// Sequence-first heads (nn.MultiheadAttention): `v` = Transpose(Reshape(x,
/// [L, B*H, dh]), perm) with x of (L, B, H*dh); perm [1, 0, 2], or with
/// `transposed` [1, 2, 0] or [1, 0, 2] followed by [0, 2, 1]. Returns x and
/// heads = H, dh; `batch` is B.
std::optional<Head> matchSeqFirstHeads(Value v, bool transposed, int64_t &batch) {
  Head h;
  auto reshape = headsReshape(v, transposed, {1, 0, 2}, {0, 2, 1}, {1, 2, 0}, h.ops);
  if (!reshape)
    return std::nullopt;
  auto out = dyn_cast<RankedTensorType>(reshape->getResult(0).getType());
  auto in = dyn_cast<RankedTensorType>(reshape->getOperand(0).getType());
  if (!out || !in || !out.hasStaticShape() || !in.hasStaticShape() || out.getRank() != 3 ||
      in.getRank() != 3 || in.getDimSize(0) != out.getDimSize(0) || out.getDimSize(2) <= 0 ||
      in.getDimSize(2) % out.getDimSize(2) != 0)
    return std::nullopt;
  h.dh = out.getDimSize(2);
  h.heads = in.getDimSize(2) / h.dh;
  batch = in.getDimSize(1);
  if (batch * h.heads != out.getDimSize(1))
    return std::nullopt;
  h.x = reshape->getOperand(0);
  return h;
}

/// The values of a constant f32 (or bool: 0 and 1) tensor, row-major: an
/// onnx.Constant (dense, or a resource blob, the importer's form of large
/// initializers), or computed from one through Unsqueeze, Squeeze, Reshape
/// and Trilu (torch writes nn.Transformer's square subsequent mask as Trilu
/// of a -inf splat, a bool causal mask as Trilu of ones). `ops` gets the
/// ops computed through.
std::optional<SmallVector<float>> constantFloats(Value v, SmallVector<Operation *> &ops) {
  auto type = dyn_cast<RankedTensorType>(v.getType());
  if (!type || !type.hasStaticShape() ||
      !(type.getElementType().isF32() || type.getElementType().isInteger(1)))
    return std::nullopt;
  const int64_t n = type.getNumElements();
  Operation *def = v.getDefiningOp();
  if (!def)
    return std::nullopt;
  if (isa<onnx::UnsqueezeOp, onnx::SqueezeOp, onnx::ReshapeOp>(def)) {
    std::optional<SmallVector<float>> r = constantFloats(def->getOperand(0), ops);
    if (r)
      ops.push_back(def);
    return r;
  }
  if (auto where = dyn_cast<onnx::WhereOp>(def)) {
    // Where(C, X, Y) of constants, each a splat or of the result's size
    // (torch turns a bool attn_mask into its float one so: Where(M, -inf,
    // zeros)).
    SmallVector<Operation *> wops;
    std::optional<SmallVector<float>> c = constantFloats(where.getCondition(), wops),
                                      x = constantFloats(where.getX(), wops),
                                      y = constantFloats(where.getY(), wops);
    auto fits = [&](const std::optional<SmallVector<float>> &a) {
      return a && (a->size() == 1 || int64_t(a->size()) == n);
    };
    if (!fits(c) || !fits(x) || !fits(y))
      return std::nullopt;
    auto at = [](const SmallVector<float> &a, int64_t i) { return a.size() == 1 ? a[0] : a[i]; };
    SmallVector<float> r;
    for (int64_t i = 0; i < n; ++i)
      r.push_back(at(*c, i) != 0.f ? at(*x, i) : at(*y, i));
    ops.append(wops.begin(), wops.end());
    ops.push_back(def);
    return r;
  }
  if (auto tri = dyn_cast<onnx::TriluOp>(def)) {
    auto in = dyn_cast<RankedTensorType>(tri.getInput().getType());
    if (!in || in.getRank() < 2)
      return std::nullopt;
    int64_t k = 0;
    if (tri.getK() && !isa<NoneType>(tri.getK().getType())) {
      std::optional<SmallVector<int64_t>> kv = onnx::getConstantInts(tri.getK());
      if (!kv || kv->size() != 1)
        return std::nullopt;
      k = (*kv)[0];
    }
    std::optional<SmallVector<float>> r = constantFloats(tri.getInput(), ops);
    if (!r)
      return std::nullopt;
    const bool upper = tri.getUpper() != 0;
    const int64_t rows = in.getDimSize(in.getRank() - 2), cols = in.getDimSize(in.getRank() - 1);
    for (int64_t e = 0; e < int64_t(r->size()); ++e) {
      const int64_t i = (e / cols) % rows, j = e % cols;
      if (upper ? j - i < k : j - i > k)
        (*r)[e] = 0.f;
    }
    ops.push_back(def);
    return r;
  }
  ElementsAttr attr = onnx::getConstantAttr(v);
  if (!attr)
    return std::nullopt;
  SmallVector<float> r;
  if (type.getElementType().isInteger(1)) {
    auto values = attr.tryGetValues<bool>();
    if (!values)
      return std::nullopt;
    for (bool b : *values)
      r.push_back(b ? 1.f : 0.f);
  } else if (auto values = attr.tryGetValues<float>()) {
    r.assign(values->begin(), values->end());
  } else if (auto values = attr.tryGetValues<APFloat>()) {
    for (const APFloat &f : *values)
      r.push_back(f.convertToFloat());
  } else if (auto resource = dyn_cast<DenseResourceElementsAttr>(attr)) {
    AsmResourceBlob *blob = resource.getRawHandle().getBlob();
    if (!blob || blob->getData().size() != size_t(n) * sizeof(float))
      return std::nullopt;
    r.resize(size_t(n));
    std::memcpy(r.data(), blob->getData().data(), size_t(n) * sizeof(float));
  } else {
    return std::nullopt;
  }
  if (int64_t(r.size()) == 1 && n > 1) // a splat
    r.assign(size_t(n), r[0]);
  if (int64_t(r.size()) != n)
    return std::nullopt;
  return r;
}

/// A constant float (T, S) additive mask (or of shape (1, ..., 1, T, S)) of
/// 0 and -inf only:
/// true where a position attends (0). Also through a Mul by a positive
/// scalar constant, which leaves 0 and -inf as they are (torch's baddbmm
/// writes its beta = 1 that way); `ops` gets the Mul.
std::optional<SmallVector<bool>> additiveMask(Value v, int64_t t, int64_t s,
                                              SmallVector<Operation *> &ops) {
  if (auto mul = v.getDefiningOp<onnx::MulOp>()) {
    std::optional<double> a = splatValue(mul.getA()), b = splatValue(mul.getB());
    Value inner = b && *b > 0 ? mul.getA() : a && *a > 0 ? mul.getB() : Value();
    if (!inner || !v.hasOneUse())
      return std::nullopt;
    std::optional<SmallVector<bool>> r = additiveMask(inner, t, s, ops);
    if (r)
      ops.push_back(mul);
    return r;
  }
  // (T, S) behind any number of leading 1s.
  auto type = dyn_cast<RankedTensorType>(v.getType());
  if (!type || !type.hasStaticShape() || !type.getElementType().isF32())
    return std::nullopt;
  ArrayRef<int64_t> shape = type.getShape();
  if (shape.size() < 2 || shape[shape.size() - 2] != t || shape.back() != s ||
      llvm::any_of(shape.drop_back(2), [](int64_t d) { return d != 1; }))
    return std::nullopt;
  std::optional<SmallVector<float>> values = constantFloats(v, ops);
  if (!values || int64_t(values->size()) != t * s)
    return std::nullopt;
  SmallVector<bool> r;
  for (float f : *values) {
    if (f == 0.f)
      r.push_back(true);
    else if (std::isinf(f) && f < 0)
      r.push_back(false);
    else
      return std::nullopt;
  }
  return r;
}

/// A key padding mask from the data, added to the scores as torch 1.13's
/// nn.MultiheadAttention writes it: [Mul(, c > 0)] Where(C, -inf, Z) with
/// C = Reshape(Expand(R, [B, H, 1, S]), [B*H, 1, S]), R a bool (B, 1, 1, S)
/// (true: a padded key) and Z zeros or a constant additive (T, S) mask (a
/// float attn_mask the padding was filled into); or C = Or(M, that) with
/// M a constant bool (T, S) mask behind leading 1s (a bool attn_mask, true
/// where masked) and Z zeros. Returns R; `attend` gets Z's or M's mask
/// (true: attend), `heads` H; `ops` the Mul, the Where, the Or, the Reshape
/// and the Expand.
Value paddingMask(Value v, int64_t t, int64_t s, int64_t &heads,
                  std::optional<SmallVector<bool>> &attend, SmallVector<Operation *> &ops) {
  if (!v.hasOneUse())
    return {};
  if (auto mul = v.getDefiningOp<onnx::MulOp>()) {
    std::optional<double> a = splatValue(mul.getA()), b = splatValue(mul.getB());
    Value inner = b && *b > 0 ? mul.getA() : a && *a > 0 ? mul.getB() : Value();
    if (!inner)
      return {};
    Value r = paddingMask(inner, t, s, heads, attend, ops);
    if (r)
      ops.push_back(mul);
    return r;
  }
  auto where = v.getDefiningOp<onnx::WhereOp>();
  if (!where)
    return {};
  std::optional<double> fill = splatValue(where.getX());
  if (!fill || !std::isinf(*fill) || *fill > 0)
    return {};
  SmallVector<Operation *> zops;
  std::optional<double> zero = splatValue(where.getY());
  if (!zero || *zero != 0) {
    attend = additiveMask(where.getY(), t, s, zops);
    if (!attend)
      return {};
  }
  Value cond = where.getCondition();
  if (auto orOp = cond.getDefiningOp<onnx::OrOp>()) {
    if (attend)
      return {};
    for (int which = 0; which < 2 && !attend; ++which) {
      Value m = orOp->getOperand(which);
      auto mt = dyn_cast<RankedTensorType>(m.getType());
      if (!mt || mt.getRank() < 2 || mt.getDimSize(mt.getRank() - 2) != t ||
          mt.getDimSize(mt.getRank() - 1) != s ||
          llvm::any_of(mt.getShape().drop_back(2), [](int64_t d) { return d != 1; }))
        continue;
      SmallVector<Operation *> mops;
      std::optional<SmallVector<float>> masked = constantFloats(m, mops);
      if (!masked || int64_t(masked->size()) != t * s)
        continue;
      attend.emplace();
      for (float f : *masked)
        attend->push_back(f == 0.f);
      zops.append(mops.begin(), mops.end());
      zops.push_back(orOp);
      cond = orOp->getOperand(1 - which);
    }
    if (!attend)
      return {};
  }
  auto ct = dyn_cast<RankedTensorType>(cond.getType());
  auto reshape = cond.getDefiningOp<onnx::ReshapeOp>();
  if (!ct || !ct.hasStaticShape() || ct.getRank() != 3 || ct.getDimSize(1) != 1 ||
      ct.getDimSize(2) != s || !reshape)
    return {};
  auto expand = reshape->getOperand(0).getDefiningOp<onnx::ExpandOp>();
  if (!expand)
    return {};
  auto et = dyn_cast<RankedTensorType>(expand->getResult(0).getType());
  auto rt = dyn_cast<RankedTensorType>(expand->getOperand(0).getType());
  if (!et || !rt || !et.hasStaticShape() || !rt.hasStaticShape() || et.getRank() != 4 ||
      rt.getRank() != 4 || !rt.getElementType().isInteger(1))
    return {};
  // (B, 1, 1, S) expanded over the heads, then the batch-major (B*H) merge.
  const int64_t b = rt.getDimSize(0);
  if (rt.getShape() != ArrayRef<int64_t>{b, 1, 1, s} || et.getDimSize(0) != b ||
      et.getDimSize(2) != 1 || et.getDimSize(3) != s ||
      ct.getDimSize(0) != b * et.getDimSize(1))
    return {};
  heads = et.getDimSize(1);
  ops.append(zops.begin(), zops.end());
  ops.append({where, reshape, expand});
  return expand->getOperand(0);
}

/// Key/value heads repeated for grouped-query attention: `v` of (B, kv*g,
/// S, dh) with head h a copy of head h / g of a (B, kv, S, dh) tensor,
/// written as Hugging Face's repeat_kv (Reshape(Expand(Unsqueeze(x) at
/// axis 2, to (B, kv, g, S, dh)))) or as torch 1.13 exports
/// repeat_interleave(g, dim=1) (that per head of Split(x) along axis 1,
/// the heads Concat'ed in order). Returns x and sets `group` to g (> 1),
/// `ops` getting the pattern's ops; null if `v` is not so. The shapes alone tell: Unsqueeze and Reshape
/// move no data, and the Expand broadcasts its one axis of 1.
Value repeatedHeads(Value v, int64_t &group, SmallVector<Operation *> &ops) {
  auto shape = [](Value x) -> ArrayRef<int64_t> {
    auto t = dyn_cast<RankedTensorType>(x.getType());
    return t && t.hasStaticShape() ? t.getShape() : ArrayRef<int64_t>();
  };
  SmallVector<Operation *> found;
  // Reshape(Expand(Unsqueeze(x))): x and g, or null.
  auto one = [&](Value r, int64_t &g) -> Value {
    auto reshape = r.getDefiningOp<onnx::ReshapeOp>();
    auto expand = reshape ? reshape->getOperand(0).getDefiningOp<onnx::ExpandOp>() : nullptr;
    auto unsq = expand ? expand->getOperand(0).getDefiningOp<onnx::UnsqueezeOp>() : nullptr;
    if (!unsq)
      return {};
    Value x = unsq->getOperand(0);
    ArrayRef<int64_t> xs = shape(x), us = shape(unsq->getResult(0)),
                      es = shape(expand->getResult(0)), rs = shape(r);
    if (xs.size() != 4 || us.size() != 5 || es.size() != 5 || rs.size() != 4)
      return {};
    const int64_t b = xs[0], kv = xs[1], sq = xs[2], dh = xs[3];
    if (us != ArrayRef<int64_t>{b, kv, 1, sq, dh} || es[0] != b || es[1] != kv || es[3] != sq ||
        es[4] != dh || es[2] < 1 || rs != ArrayRef<int64_t>{b, kv * es[2], sq, dh})
      return {};
    g = es[2];
    found.append({reshape, expand, unsq});
    return x;
  };
  int64_t g = 0;
  if (Value x = one(v, g); x && g > 1) {
    group = g;
    ops.append(found.begin(), found.end());
    return x;
  }
  found.clear();
  g = 0;
  auto concat = v.getDefiningOp<onnx::ConcatOp>();
  ArrayRef<int64_t> vs = shape(v);
  if (!concat || vs.size() != 4 || (concat.getAxis() != 1 && concat.getAxis() != -3))
    return {};
  SmallVector<Value> parts;
  for (Value in : concat.getInputs()) {
    int64_t gj = 0;
    Value y = one(in, gj);
    if (!y || gj <= 1 || (g && gj != g) || shape(y).size() != 4 || shape(y)[1] != 1)
      return {};
    g = gj;
    parts.push_back(y);
  }
  if (parts.empty())
    return {};
  found.push_back(concat);
  if (parts.size() == 1) {
    group = g;
    ops.append(found.begin(), found.end());
    return parts[0];
  }
  auto split = parts[0].getDefiningOp<onnx::SplitOp>();
  if (!split || split->getNumResults() != parts.size())
    return {};
  auto axis = split->getAttrOfType<IntegerAttr>("axis");
  if (!axis || (axis.getInt() != 1 && axis.getInt() != -3))
    return {};
  for (auto [j, y] : llvm::enumerate(parts))
    if (y != split->getResult(j))
      return {};
  Value x = split->getOperand(0);
  ArrayRef<int64_t> xs = shape(x);
  if (xs.size() != 4 || xs[1] != int64_t(parts.size()) || xs[0] != vs[0] || xs[2] != vs[2] ||
      xs[3] != vs[3])
    return {};
  group = g;
  found.push_back(split);
  ops.append(found.begin(), found.end());
  return x;
}

/// Whether `v` is computed from a trained parameter (a function argument
/// marked pipe.trainable).
bool fromTrainable(Value v) {
  SmallVector<Value> work{v};
  llvm::DenseSet<Value> seen;
  while (!work.empty()) {
    Value x = work.pop_back_val();
    if (!seen.insert(x).second)
      continue;
    if (auto arg = dyn_cast<BlockArgument>(x)) {
      auto fn = dyn_cast<FunctionOpInterface>(arg.getOwner()->getParentOp());
      if (fn && fn.getArgAttr(arg.getArgNumber(), pipe::attrs::kTrainable))
        return true;
      continue;
    }
    if (Operation *def = x.getDefiningOp())
      for (Value o : def->getOperands())
        work.push_back(o);
  }
  return false;
}

/// A float mask added to the scores that onnx.Attention can take as its
/// float attn_mask: f32 of rank 2..4 broadcast to `full` (B, H, T, S)
/// behind leading 1s, every axis but S's 1 or full, not computed from a
/// trained parameter (the fused op has no gradient for it). BERT's (1 -
/// m) * finfo.min padding mask, a -1e4 fill, ALiBi's constant bias.
bool floatBias(Value m, ArrayRef<int64_t> full) {
  auto t = dyn_cast<RankedTensorType>(m.getType());
  if (!t || !t.hasStaticShape() || !t.getElementType().isF32() || t.getRank() < 2 ||
      t.getRank() > 4)
    return false;
  for (int64_t i = 0, r = t.getRank(); i < r; ++i) {
    int64_t d = t.getDimSize(i), want = full[4 - r + i];
    if (i == r - 1 ? d != want : d != 1 && d != want)
      return false;
  }
  return !fromTrainable(m);
}

/// [lo, hi) of x's last axis if `v` = Slice(x, [lo], [hi], [-1 | rank-1])
/// (no steps or step 1).
std::optional<std::pair<int64_t, int64_t>> lastAxisSlice(Value v, Value &x) {
  auto sl = v.getDefiningOp<onnx::SliceOp>();
  if (!sl)
    return std::nullopt;
  auto single = [](Value c) -> std::optional<int64_t> {
    auto k = c.getDefiningOp<onnx::ConstantOp>();
    if (!k)
      return std::nullopt;
    auto d = dyn_cast_or_null<DenseIntElementsAttr>(k->getAttr("value"));
    if (!d || d.getNumElements() != 1)
      return std::nullopt;
    return (*d.getValues<APInt>().begin()).getSExtValue();
  };
  auto in = dyn_cast<RankedTensorType>(sl->getOperand(0).getType());
  if (!in || !in.hasStaticShape())
    return std::nullopt;
  std::optional<int64_t> lo = single(sl->getOperand(1)), hi = single(sl->getOperand(2));
  if (!lo || !hi || sl->getNumOperands() < 4 || isa<NoneType>(sl->getOperand(3).getType()))
    return std::nullopt;
  std::optional<int64_t> axis = single(sl->getOperand(3));
  if (!axis || (*axis != -1 && *axis != in.getRank() - 1))
    return std::nullopt;
  if (sl->getNumOperands() > 4 && !isa<NoneType>(sl->getOperand(4).getType())) {
    std::optional<int64_t> step = single(sl->getOperand(4));
    if (!step || *step != 1)
      return std::nullopt;
  }
  x = sl->getOperand(0);
  return std::make_pair(*lo, *hi);
}

struct FuseAttentionPass : mlir::pipec::impl::PipeFuseAttentionBase<FuseAttentionPass> {
  using Base::Base;

  bool kept(ArrayRef<Operation *> ops) const {
    return llvm::any_of(ops, [&](Operation *op) {
      return llvm::is_contained(keep, CostModel::getNodeName(op->getLoc()).str());
    });
  }

  /// What P V reads of the softmax `sm`: its result, or the output of a
  /// training-mode Dropout of it (its only use; a constant ratio in (0,
  /// 1), no mask read), whose ratio `dropout` gets and `inner` the op.
  static Value probsRead(onnx::SoftmaxOp sm, double &dropout, SmallVector<Operation *> &inner) {
    dropout = 0.0;
    Value p = sm.getResult();
    if (!p.hasOneUse())
      return p;
    auto drop = dyn_cast<onnx::DropoutOp>(*p.getUsers().begin());
    if (!drop || drop.getData() != p || (drop.getMask() && !drop.getMask().use_empty()))
      return p;
    Value mode = drop.getTrainingMode();
    std::optional<SmallVector<int64_t>> on =
        mode && !isa<NoneType>(mode.getType()) ? onnx::getConstantInts(mode) : std::nullopt;
    if (!on || on->size() != 1 || (*on)[0] == 0)
      return p;
    double ratio = 0.5; // ONNX's default
    Value r = drop.getRatio();
    if (r && !isa<NoneType>(r.getType())) {
      std::optional<double> c = splatValue(r);
      if (!c)
        return p;
      ratio = *c;
    }
    if (!(ratio > 0.0 && ratio < 1.0))
      return p;
    dropout = ratio;
    inner.push_back(drop);
    return drop.getOutput();
  }

  /// The chain after the softmax: P V (the only use of `p`, what it reads
  /// of the softmax), the heads back by a Transpose of `backPerm`, and the
  /// merging Reshape (returned; null if the chain is not so). `inner` gets
  /// P V and the Transpose.
  static onnx::ReshapeOp matchTail(Value p, ArrayRef<int64_t> backPerm,
                                   SmallVector<Operation *> &inner, onnx::MatMulOp &pv) {
    if (!p.hasOneUse())
      return {};
    pv = dyn_cast<onnx::MatMulOp>(*p.getUsers().begin());
    if (!pv || pv.getA() != p || !pv.getResult().hasOneUse())
      return {};
    inner.push_back(pv);
    Operation *back = *pv.getResult().getUsers().begin();
    if (!isPerm(back, backPerm) || !back->getResult(0).hasOneUse())
      return {};
    inner.push_back(back);
    return dyn_cast<onnx::ReshapeOp>(*back->getResult(0).getUsers().begin());
  }

  /// Where `x` (used once) = Add(scores, mask) with an additive constant
  /// mask (additiveMask): steps `x` to the scores and returns the mask's
  /// attend values; `failed` when x is an Add of anything else.
  static std::optional<SmallVector<bool>> peelAddedMask(Value &x, int64_t t, int64_t s,
                                                        SmallVector<Operation *> &inner,
                                                        bool &failed) {
    failed = false;
    auto add = x.getDefiningOp<onnx::AddOp>();
    if (!add)
      return std::nullopt;
    std::optional<SmallVector<bool>> attend;
    if (x.hasOneUse() && (attend = additiveMask(add.getB(), t, s, inner)))
      x = add.getA();
    else if (x.hasOneUse() && (attend = additiveMask(add.getA(), t, s, inner)))
      x = add.getB();
    else {
      failed = true;
      return std::nullopt;
    }
    inner.push_back(add);
    return attend;
  }

  /// onnx.Attention's attn_mask operand: the (T, S) bool constant of
  /// `attend` (true = attend), or `none`.
  static Value maskOperand(OpBuilder &b, Location loc, const std::optional<SmallVector<bool>> &attend,
                           int64_t t, int64_t s, Value none) {
    if (!attend)
      return none;
    auto type = RankedTensorType::get({t, s}, b.getI1Type());
    return onnx::ConstantOp::create(b, loc, type,
                                    DenseElementsAttr::get(type, ArrayRef<bool>(*attend)))
        ->getResult(0);
  }

  /// onnx.Attention of `type` on `operands` (Q, K, V, mask) with `heads`
  /// (3-D forms), `scale`, `causal`, `seqFirst` and `dropout` (0: none);
  /// it and the operands'
  /// defining ops without a stage get `stageFrom`'s pipe.stage, if any.
  static onnx::AttentionOp createAttention(OpBuilder &b, Location loc, Type type,
                                           ArrayRef<Value> operands, std::optional<int64_t> heads,
                                           double scale, bool causal, bool seqFirst,
                                           double dropout, Operation *stageFrom) {
    SmallVector<NamedAttribute> attrs{b.getNamedAttr("scale", b.getF32FloatAttr(float(scale)))};
    if (dropout > 0.0)
      attrs.push_back(b.getNamedAttr("dropout", b.getF32FloatAttr(float(dropout))));
    if (heads)
      attrs.push_back(b.getNamedAttr("q_num_heads", b.getI64IntegerAttr(*heads)));
    if (causal)
      attrs.push_back(b.getNamedAttr("is_causal", b.getI64IntegerAttr(1)));
    if (seqFirst)
      attrs.push_back(b.getNamedAttr("seq_first", b.getI64IntegerAttr(1)));
    auto att = onnx::AttentionOp::create(b, loc, TypeRange{type}, operands, attrs);
    if (Attribute stage = stageFrom->getAttr(pipe::attrs::kStage)) {
      att->setAttr(pipe::attrs::kStage, stage);
      for (Value o : operands)
        if (Operation *def = o.getDefiningOp(); def && !def->hasAttr(pipe::attrs::kStage))
          def->setAttr(pipe::attrs::kStage, stage);
    }
    return att;
  }

  /// Fuses the chain through `sm`; false if it is not one.
  bool fuse(onnx::SoftmaxOp sm) {
    auto st = dyn_cast<RankedTensorType>(sm.getType());
    if (!st || st.getRank() != 4 || !st.hasStaticShape() || !st.getElementType().isF32())
      return false;
    if (sm.getAxis() != -1 && sm.getAxis() != 3)
      return false;
    const int64_t t = st.getDimSize(2), s = st.getDimSize(3);
    SmallVector<Operation *> inner; // the chain's ops, the root excluded
    inner.push_back(sm);
    // Forward: P V (its only use; a Dropout between), heads back and
    // merged (the tail, where the heads were split here).
    double dropout;
    Value pr = probsRead(sm, dropout, inner);
    auto pv = pr.hasOneUse() ? dyn_cast<onnx::MatMulOp>(*pr.getUsers().begin()) : nullptr;
    if (!pv || pv.getA() != pr)
      return false;
    SmallVector<Operation *> tail;
    onnx::MatMulOp tailPv;
    auto merge = matchTail(pr, {0, 2, 1, 3}, tail, tailPv);
    auto yt = merge ? dyn_cast<RankedTensorType>(merge.getType()) : RankedTensorType();
    if (!yt || yt.getRank() != 3)
      merge = {};
    // Backward from the softmax: mask, scale, Q Kᵀ.
    Value x = sm.getInput();
    std::optional<SmallVector<bool>> future;
    // A mask from the data (true: masked) of (B | 1, H | 1, T | 1, S), e.g.
    // a key padding mask pad[:, None, None, :]; or a float one added.
    Value runtimeMasked, floatMask;
    bool negateMask = false;
    if (auto where = x.getDefiningOp<onnx::WhereOp>()) {
      std::optional<double> fill = splatValue(where.getX());
      if (!fill || !std::isinf(*fill) || *fill > 0 || !x.hasOneUse())
        return false;
      future = boolMask(where.getCondition(), t, s);
      if (!future) {
        auto ct = dyn_cast<RankedTensorType>(where.getCondition().getType());
        auto oneOr = [&](int64_t axis, int64_t full) {
          return ct.getDimSize(axis) == 1 || ct.getDimSize(axis) == full;
        };
        if (!ct || !ct.hasStaticShape() || ct.getRank() != 4 ||
            !ct.getElementType().isInteger(1) || !oneOr(0, st.getDimSize(0)) ||
            !oneOr(1, st.getDimSize(1)) || !oneOr(2, t) || ct.getDimSize(3) != s ||
            where.getCondition().getDefiningOp<onnx::ConstantOp>())
          return false;
        runtimeMasked = where.getCondition();
      }
      inner.push_back(where);
      x = where.getY();
    } else {
      // An additive constant mask of 0 and -inf (a precomputed mask
      // buffer added to the scores): future = where it is -inf.
      bool failed;
      std::optional<SmallVector<bool>> attend = peelAddedMask(x, t, s, inner, failed);
      if (failed) {
        // Any other float mask added to the scores: the op's float
        // attn_mask (the scores are the operand of the full shape).
        auto add = x.getDefiningOp<onnx::AddOp>();
        SmallVector<int64_t> full(st.getShape());
        for (int which = 0; which < 2 && !floatMask; ++which) {
          Value m = add->getOperand(1 - which), sc = add->getOperand(which);
          if (sc.getType() == st && floatBias(m, full)) {
            floatMask = m;
            inner.push_back(add);
            x = sc;
          }
        }
        if (!floatMask || !sm.getInput().hasOneUse())
          return false;
      } else if (auto sub = x.getDefiningOp<onnx::SubOp>();
                 sub && !attend && x.hasOneUse() && sub.getA().getType() == st &&
                 floatBias(sub.getB(), SmallVector<int64_t>(st.getShape()))) {
        // A float mask subtracted (ALiBi's -slope |i - j|): its negation.
        floatMask = sub.getB();
        negateMask = true;
        inner.push_back(sub);
        x = sub.getA();
      }
      if (attend) {
        future.emplace();
        for (bool a : *attend)
          future->push_back(!a);
      }
    }
    double scaleFactor = 1.0;
    bool scaled = false;
    if (auto mul = x.getDefiningOp<onnx::MulOp>()) {
      Value other;
      if (std::optional<double> c = splatValue(mul.getB())) {
        scaleFactor = *c;
        other = mul.getA();
      } else if (std::optional<double> c = splatValue(mul.getA())) {
        scaleFactor = *c;
        other = mul.getB();
      }
      if (!other || !x.hasOneUse())
        return false;
      scaled = true;
      inner.push_back(mul);
      x = other;
    } else if (auto div = x.getDefiningOp<onnx::DivOp>()) {
      std::optional<double> c = splatValue(div.getB());
      if (!c || *c == 0 || !x.hasOneUse())
        return false;
      scaleFactor = 1.0 / *c;
      scaled = true;
      inner.push_back(div);
      x = div.getA();
    }
    auto qk = x.getDefiningOp<onnx::MatMulOp>();
    if (!qk || !x.hasOneUse())
      return false;
    inner.push_back(qk);
    // Without a scale the scores are unscaled: scale 1.
    if (!scaled)
      scaleFactor = 1.0;
    std::optional<Head> q, k, v;
    if (merge) {
      q = matchHeads(qk.getA(), false);
      k = matchHeads(qk.getB(), true);
      v = matchHeads(pv.getB(), false);
    }
    bool split3d = q && k && v && q->heads == k->heads && q->heads == v->heads &&
                   q->dh == k->dh && q->dh == v->dh;
    if (split3d) {
      auto qt = cast<RankedTensorType>(q->x.getType());
      auto kt = cast<RankedTensorType>(k->x.getType());
      split3d = qt.getDimSize(1) == t && kt.getDimSize(1) == s &&
                yt.getShape() == ArrayRef<int64_t>(qt.getShape());
    }
    // The mask: exactly j > i is causal; else attn_mask = its negation.
    bool causal = false;
    std::optional<SmallVector<bool>> attend;
    if (future) {
      bool isCausal = true;
      for (int64_t i = 0; i < t && isCausal; ++i)
        for (int64_t j = 0; j < s; ++j)
          if ((*future)[i * s + j] != (j > i)) {
            isCausal = false;
            break;
          }
      if (isCausal) {
        causal = true;
      } else {
        attend.emplace();
        for (bool b : *future)
          attend->push_back(!b);
      }
    }
    // The mask operand, before the op (and after what it reads).
    auto maskValue = [&](OpBuilder &b, Location loc, Value none) -> Value {
      autodiff::OnnxBuilder ob(b, loc);
      return runtimeMasked ? ob.create<onnx::NotOp>({runtimeMasked})
             : floatMask   ? (negateMask ? ob.create<onnx::NegOp>({floatMask}) : floatMask)
                           : maskOperand(b, loc, attend, t, s, none);
    };
    if (!split3d)
      return fuseFourD(sm, st, qk, pv, inner, scaleFactor, causal, dropout, maskValue);
    inner.append(tail.begin(), tail.end());
    for (Head *h : {&*q, &*k, &*v})
      inner.append(h->ops.begin(), h->ops.end());
    if (kept(inner))
      return false;
    // Self-attention on one projection: the three parts of a Split.
    auto qt = cast<RankedTensorType>(q->x.getType());
    Value qIn = q->x, kIn = k->x, vIn = v->x;
    auto split = qIn.getDefiningOp<onnx::SplitOp>();
    bool packed = false;
    if (split && split->getNumResults() == 3 && split->getResult(0) == qIn &&
        split->getResult(1) == kIn && split->getResult(2) == vIn &&
        llvm::all_of(split->getResults(), [](Value r) { return r.hasOneUse(); })) {
      auto in = dyn_cast<RankedTensorType>(split->getOperand(0).getType());
      int64_t axis = split->getAttrOfType<IntegerAttr>("axis")
                         ? split->getAttrOfType<IntegerAttr>("axis").getInt()
                         : 0;
      if (in && in.getRank() == 3 && (axis == 2 || axis == -1) &&
          in.getDimSize(2) == 3 * qt.getDimSize(2))
        packed = true;
    }
    OpBuilder b(merge);
    Location loc = merge.getLoc();
    Value none = onnx::NoValueOp::create(b, loc, b.getNoneType());
    Value mask = maskValue(b, loc, none);
    SmallVector<Value> operands;
    if (packed)
      operands = {split->getOperand(0), none, none, mask};
    else
      operands = {qIn, kIn, vIn, mask};
    auto att = createAttention(b, loc, merge.getType(), operands, q->heads, scaleFactor, causal,
                               /*seqFirst=*/false, dropout, merge);
    merge.getResult().replaceAllUsesWith(att->getResult(0));
    // Erase what is now dead: the chain, the heads' reshapes and
    // transposes, the Split, and the constants only they used.
    SmallVector<Operation *> work{merge};
    work.append(inner.begin(), inner.end());
    if (packed)
      work.push_back(split);
    eraseDead(work);
    return true;
  }

  /// The batch-first chain whose heads were not split from (B, T, H*dh)
  /// here (rotary positions applied to q and k of (B, H, T, dh); k and v
  /// repeated for grouped-query attention): onnx.Attention's 4-D form on
  /// Q, K (under Kᵀ's Transpose [0, 1, 3, 2]) and V themselves, its Y of
  /// (B, H, T, dh) in P V's place; what followed P V stays. `inner` holds
  /// the chain from the softmax to Q Kᵀ.
  template <typename MaskFn>
  bool fuseFourD(onnx::SoftmaxOp sm, RankedTensorType st, onnx::MatMulOp qk, onnx::MatMulOp pv,
                 SmallVector<Operation *> inner, double scaleFactor, bool causal,
                 double dropout, MaskFn &&maskValue) {
    auto kT = qk.getB().getDefiningOp<onnx::TransposeOp>();
    if (!kT || !isPerm(kT, {0, 1, 3, 2}) || !qk.getB().hasOneUse())
      return false;
    Value q = qk.getA(), k = kT->getOperand(0), v = pv.getB();
    const int64_t b = st.getDimSize(0), h = st.getDimSize(1), t = st.getDimSize(2),
                  s = st.getDimSize(3);
    // K and V repeated over the heads (grouped-query attention): the op
    // reads the key/value heads themselves.
    int64_t gk = 1, gv = 1;
    SmallVector<Operation *> repeats;
    Value kx = repeatedHeads(k, gk, repeats), vx = repeatedHeads(v, gv, repeats);
    if (kx && vx && gk == gv) {
      k = kx;
      v = vx;
    } else {
      repeats.clear();
    }
    auto qt = dyn_cast<RankedTensorType>(q.getType());
    auto kt = dyn_cast<RankedTensorType>(k.getType());
    auto vt = dyn_cast<RankedTensorType>(v.getType());
    if (!qt || !kt || !vt || !qt.hasStaticShape() || qt.getRank() != 4 ||
        !qt.getElementType().isF32() || !kt.hasStaticShape())
      return false;
    const int64_t dh = qt.getDimSize(3), kvh = kt.getDimSize(1);
    if (qt.getShape() != ArrayRef<int64_t>{b, h, t, dh} || kt != vt || kvh <= 0 ||
        h % kvh != 0 || kt.getShape() != ArrayRef<int64_t>{b, kvh, s, dh} ||
        kt.getElementType() != qt.getElementType())
      return false;
    inner.append({kT, pv});
    if (kept(inner))
      return false;
    OpBuilder bld(pv);
    Location loc = pv.getLoc();
    Value none = onnx::NoValueOp::create(bld, loc, bld.getNoneType());
    SmallVector<Value> operands{q, k, v, maskValue(bld, loc, none)};
    auto att = createAttention(bld, loc, pv.getType(), operands, std::nullopt, scaleFactor, causal,
                               /*seqFirst=*/false, dropout, pv);
    pv.getResult().replaceAllUsesWith(att->getResult(0));
    // The repeats go with the chain where nothing else reads them.
    inner.append(repeats.begin(), repeats.end());
    eraseDead(inner);
    return true;
  }

  /// Erases the ops of `work` that have no use, repeatedly, and the
  /// constants (and NoValues) only they used.
  static void eraseDead(SmallVector<Operation *> &work) {
    bool changed = true;
    while (changed) {
      changed = false;
      for (Operation *&op : work) {
        if (!op || !op->use_empty())
          continue;
        SmallVector<Operation *> defs;
        for (Value operand : op->getOperands())
          if (Operation *def = operand.getDefiningOp();
              def && isa<onnx::ConstantOp, onnx::NoValueOp>(def))
            defs.push_back(def);
        op->erase();
        op = nullptr;
        changed = true;
        for (Operation *def : defs)
          if (def->use_empty())
            def->erase();
      }
    }
  }

  /// Multiplies `factor` by the constant of a Mul or Div that defines `v`
  /// (its only use being the chain) and steps `v` over it; `ops` gets it.
  static bool peelScale(Value &v, double &factor, SmallVector<Operation *> &ops) {
    if (!v.hasOneUse())
      return false;
    if (auto mul = v.getDefiningOp<onnx::MulOp>()) {
      if (std::optional<double> c = splatValue(mul.getB())) {
        factor *= *c;
        v = mul.getA();
      } else if (std::optional<double> c = splatValue(mul.getA())) {
        factor *= *c;
        v = mul.getB();
      } else {
        return false;
      }
      ops.push_back(mul);
      return true;
    }
    if (auto div = v.getDefiningOp<onnx::DivOp>()) {
      std::optional<double> c = splatValue(div.getB());
      if (!c || *c == 0)
        return false;
      factor /= *c;
      v = div.getA();
      ops.push_back(div);
      return true;
    }
    return false;
  }

  /// Fuses nn.MultiheadAttention's sequence-first chain through `sm` (the
  /// file comment); false if it is not one.
  bool fuseSeqFirst(onnx::SoftmaxOp sm) {
    auto st = dyn_cast<RankedTensorType>(sm.getType());
    if (!st || st.getRank() != 3 || !st.hasStaticShape() || !st.getElementType().isF32())
      return false;
    if (int64_t(sm.getAxis()) != -1 && int64_t(sm.getAxis()) != 2)
      return false;
    const int64_t t = st.getDimSize(1), s = st.getDimSize(2);
    SmallVector<Operation *> inner{sm};
    onnx::MatMulOp pv;
    double dropout;
    auto merge = matchTail(probsRead(sm, dropout, inner), {1, 0, 2}, inner, pv);
    if (!merge)
      return false;
    auto yt = dyn_cast<RankedTensorType>(merge.getType());
    if (!yt || !yt.hasStaticShape())
      return false;
    // Backward from the softmax: an additive mask, a scale of the scores,
    // Q Kᵀ, a scale of Q (torch 1.13 divides q by sqrt(dh) first).
    Value x = sm.getInput();
    bool failed;
    std::optional<SmallVector<bool>> attend = peelAddedMask(x, t, s, inner, failed);
    // Or a key padding mask from the data (true: padded), whose heads
    // are checked against the chain's below, or a float mask added.
    Value padded, floatMask;
    int64_t padHeads = 0;
    if (failed) {
      auto add = x.getDefiningOp<onnx::AddOp>();
      if (!add || !x.hasOneUse())
        return false;
      for (int which = 0; which < 2 && !padded; ++which) {
        attend.reset();
        SmallVector<Operation *> maskOps;
        padded = paddingMask(add->getOperand(1 - which), t, s, padHeads, attend, maskOps);
        if (padded) {
          inner.append(maskOps.begin(), maskOps.end());
          inner.push_back(add);
          x = add->getOperand(which);
        }
      }
      if (!padded) {
        // A float mask added to the scores, the same for every pair:
        // (T, S) behind leading 1s (a -1e4 fill, a constant bias).
        int64_t pairs = st.getDimSize(0);
        for (int which = 0; which < 2 && !floatMask; ++which) {
          Value m = add->getOperand(1 - which), sc = add->getOperand(which);
          auto mt = dyn_cast<RankedTensorType>(m.getType());
          if (sc.getType() == st && mt &&
              floatBias(m, {1, pairs, t, s}) &&
              (mt.getRank() < 3 || mt.getDimSize(mt.getRank() - 3) == 1)) {
            floatMask = m;
            inner.push_back(add);
            x = sc;
          }
        }
        if (!floatMask)
          return false;
      }
    }
    double scaleFactor = 1.0;
    peelScale(x, scaleFactor, inner);
    auto qk = x.getDefiningOp<onnx::MatMulOp>();
    if (!qk || !x.hasOneUse())
      return false;
    inner.push_back(qk);
    Value qa = qk.getA();
    peelScale(qa, scaleFactor, inner);
    int64_t bq = 0, bk = 0, bv = 0;
    std::optional<Head> q = matchSeqFirstHeads(qa, false, bq);
    std::optional<Head> k = matchSeqFirstHeads(qk.getB(), true, bk);
    std::optional<Head> v = matchSeqFirstHeads(pv.getB(), false, bv);
    if (!q || !k || !v || q->heads != k->heads || q->heads != v->heads || q->dh != k->dh ||
        q->dh != v->dh || bq != bk || bq != bv || st.getDimSize(0) != bq * q->heads)
      return false;
    const int64_t batch = bq, d = q->heads * q->dh;
    if (padded && (padHeads != q->heads ||
                   cast<RankedTensorType>(padded.getType()).getDimSize(0) != batch))
      return false;
    auto qt = cast<RankedTensorType>(q->x.getType());
    auto kt = cast<RankedTensorType>(k->x.getType());
    auto vt = cast<RankedTensorType>(v->x.getType());
    if (qt.getDimSize(0) != t || kt.getDimSize(0) != s || vt.getDimSize(0) != s)
      return false;
    ArrayRef<int64_t> ys = yt.getShape();
    if (!(ys == ArrayRef<int64_t>{t * batch, d} || ys == ArrayRef<int64_t>{t, batch, d}))
      return false;
    for (Head *h : {&*q, &*k, &*v})
      inner.append(h->ops.begin(), h->ops.end());
    if (kept(inner))
      return false;
    bool causal = false;
    if (attend) {
      causal = true;
      for (int64_t i = 0; i < t && causal; ++i)
        for (int64_t j = 0; j < s; ++j)
          if ((*attend)[i * s + j] != (j <= i)) {
            causal = false;
            break;
          }
      if (causal)
        attend.reset();
    }
    // A key padding mask with a constant one other than causal is left
    // as it is (the two would be combined into one (B, 1, T, S) mask).
    if (padded && attend)
      return false;
    // Self-attention on one projection: q, k and v its three equal Slices
    // along the last axis, read by nothing else.
    Value proj, pk, pvx;
    std::optional<std::pair<int64_t, int64_t>> rq = lastAxisSlice(q->x, proj),
                                                rk = lastAxisSlice(k->x, pk),
                                                rv = lastAxisSlice(v->x, pvx);
    bool packed = rq && rk && rv && proj == pk && proj == pvx && *rq == std::make_pair(0l, d) &&
                  *rk == std::make_pair(d, 2 * d) && *rv == std::make_pair(2 * d, 3 * d) &&
                  q->x.hasOneUse() && k->x.hasOneUse() && v->x.hasOneUse() &&
                  cast<RankedTensorType>(proj.getType()).getDimSize(2) == 3 * d;
    OpBuilder b(merge);
    Location loc = merge.getLoc();
    autodiff::OnnxBuilder ob(b, loc);
    Value none = ob.none();
    // A key padding mask attends where a key is not padded: Not(R) of
    // (B, 1, 1, S), batched with the data.
    Value mask = padded      ? ob.create<onnx::NotOp>({padded})
                 : floatMask ? floatMask
                             : maskOperand(b, loc, attend, t, s, none);
    // The op reads q, k and v where they are and writes Y (T, B, H*dh)
    // sequence first (seq_first: the kernels' strides; no copies).
    SmallVector<Value> operands;
    SmallVector<Operation *> slices;
    if (packed) {
      operands = {proj, none, none, mask};
      for (Value part : {q->x, k->x, v->x})
        slices.push_back(part.getDefiningOp());
    } else {
      operands = {q->x, k->x, v->x, mask};
    }
    auto att = createAttention(b, loc, RankedTensorType::get({t, batch, d}, yt.getElementType()),
                               operands, q->heads, scaleFactor, causal, /*seqFirst=*/true,
                               dropout, merge);
    Value y = att->getResult(0);
    if (ys.size() == 2)
      y = ob.reshape(y, yt);
    if (Attribute stage = merge->getAttr(pipe::attrs::kStage)) {
      for (Operation *def = y.getDefiningOp(); def && def != att;
           def = def->getOperand(0).getDefiningOp()) {
        def->setAttr(pipe::attrs::kStage, stage);
        for (Value o : def->getOperands())
          if (Operation *c = o.getDefiningOp(); c && isa<onnx::ConstantOp>(c))
            c->setAttr(pipe::attrs::kStage, stage);
      }
    }
    merge.getResult().replaceAllUsesWith(y);
    SmallVector<Operation *> work{merge};
    work.append(inner.begin(), inner.end());
    work.append(slices.begin(), slices.end());
    eraseDead(work);
    return true;
  }

  void runOnOperation() override {
    SmallVector<onnx::SoftmaxOp> roots;
    getOperation().walk([&](onnx::SoftmaxOp op) { roots.push_back(op); });
    for (onnx::SoftmaxOp sm : roots)
      if (!fuse(sm))
        (void)fuseSeqFirst(sm);
  }
};

} // namespace
