//===- SplitTranspose.cpp - attention's head split and merge as one transpose ===//
//
// Part of the step lowering (StepLowering::run, before the buffers are
// planned). Attention splits its fused projection into q, k and v and moves
// the heads forward, one Transpose per part:
//
//   %s:3 = onnx.Split(%x) {axis = a}            x: [..., 3*c, ...]
//   %r_i = onnx.Reshape(%s#i) -> [..., f0, f1, ...]   (c = f0*f1*...)
//   %t_i = onnx.Transpose(%r_i) {perm = P_i}
//
// That is one copy for the Split and one per part for the Transposes: four
// kernel calls of a few KB each in every micro-batch's forward (the example
// transformer's 2 x 8 x 96 at 2 samples: 277 ns, against 120 for one
// transpose of the whole). Rewritten, the parts' axis becomes an axis of
// its own, one Transpose moves it first and the heads forward at once, and
// the Split along that leading axis is free (its parts are contiguous: the
// buffer planner makes them aliases of the transposed tensor at offsets):
//
//   %x5 = onnx.Reshape(%x) -> [..., 3, f0, f1, ...]
//   %t  = onnx.Transpose(%x5) {perm = (a, P shifted past a)}
//   %u:3 = onnx.Split(%t) {axis = 0}
//   %v_i = onnx.Reshape(%u#i) -> t_i's type
//
// Every part must be reshaped alike and transposed with the same P, or with
// P and then its last two axes swapped (attention's kᵀ): such a part keeps
// a Transpose of its last two axes, which a MatMul reads in place
// (isTransposeIntoMatMul). No part may be a result of the function: a
// pipeline stage's forward returns q, kᵀ and v for its backward, and there
// each Transpose writes its part into the caller's buffer, which a part of
// one transposed tensor could not (it would be copied). So it is the
// one-device step (and a stage that recomputes) that gains. The same bits:
// only copies change.
//
// The backward's mirror (rewriteConcat, below) merges the heads of dq, dk
// and dv with one Transpose instead of three and a Concat, in every
// backward (a pipeline stage's too: its parts are not results).
//
//===----------------------------------------------------------------------===//
#include "StepLowering.h"

#include "pipec/Autodiff/OnnxBuilder.h"
#include "dialects/onnx/OnnxDialect.h"

using namespace mlir;
using namespace mlir::pipec;

namespace mlir::pipec::steplowering {

namespace {

/// `op`'s axis attribute (default 0) as an index of a rank-`rank` tensor;
/// -1 when out of range.
int64_t axisOf(Operation *op, int64_t rank) {
  auto axisAttr = op->getAttrOfType<IntegerAttr>("axis");
  int64_t a = axisAttr ? axisAttr.getInt() : 0;
  if (a < 0)
    a += rank;
  return a >= 0 && a < rank ? a : -1;
}

/// A Transpose's permutation (empty without one).
SmallVector<int64_t> permOf(Operation *t) {
  auto p = t->getAttrOfType<DenseI64ArrayAttr>("perm");
  return p ? SmallVector<int64_t>(p.asArrayRef()) : SmallVector<int64_t>();
}

/// A Transpose of v's last two axes, of type `type`.
Value swapLastTwo(OpBuilder &b, Location loc, Value v, Type type) {
  int64_t k = cast<RankedTensorType>(v.getType()).getRank();
  SmallVector<int64_t> sw;
  for (int64_t j = 0; j < k; ++j)
    sw.push_back(j);
  std::swap(sw[k - 2], sw[k - 1]);
  OperationState ws(loc, onnx::TransposeOp::getOperationName());
  ws.addOperands(v);
  ws.addTypes(type);
  ws.addAttribute("perm", b.getDenseI64ArrayAttr(sw));
  return b.create(ws)->getResult(0);
}

bool rewrite(onnx::SplitOp split) {
  Operation *op = split;
  auto xType = dyn_cast<RankedTensorType>(op->getOperand(0).getType());
  if (!xType || !xType.hasStaticShape() || op->getNumResults() < 2)
    return false;
  int64_t rank = xType.getRank();
  int64_t a = axisOf(op, rank);
  if (a < 0)
    return false;
  int64_t n = op->getNumResults();
  if (xType.getDimSize(a) % n != 0)
    return false;
  int64_t c = xType.getDimSize(a) / n;
  // Every part: one Reshape to the same shape, then one Transpose.
  SmallVector<Operation *> reshapes, transposes;
  RankedTensorType partShape;
  for (Value r : op->getResults()) {
    auto rt = dyn_cast<RankedTensorType>(r.getType());
    if (!rt || rt.getDimSize(a) != c || !r.hasOneUse())
      return false;
    Operation *reshape = *r.getUsers().begin();
    if (!isa<onnx::ReshapeOp>(reshape) || !reshape->getResult(0).hasOneUse())
      return false;
    auto st = dyn_cast<RankedTensorType>(reshape->getResult(0).getType());
    if (!st || !st.hasStaticShape() || (partShape && st != partShape))
      return false;
    partShape = st;
    Operation *t = *reshape->getResult(0).getUsers().begin();
    if (!isa<onnx::TransposeOp>(t))
      return false;
    // A part the function returns (an activation a pipeline stage keeps
    // for its backward) is written straight into the caller's buffer by
    // its Transpose; as a part of one transposed tensor it would be copied
    // there instead, so those stay as they are.
    if (llvm::any_of(t->getUsers(), [](Operation *u) { return isa<func::ReturnOp>(u); }))
      return false;
    reshapes.push_back(reshape);
    transposes.push_back(t);
  }
  // The part's shape factors the split axis: x's axes before it, then
  // factors of c, then x's axes after it.
  ArrayRef<int64_t> s = partShape.getShape();
  int64_t k = partShape.getRank();
  int64_t m = k - (rank - 1); // factors of c
  if (m < 1)
    return false;
  int64_t prod = 1;
  for (int64_t i = 0; i < k; ++i) {
    if (i < a) {
      if (s[i] != xType.getDimSize(i))
        return false;
    } else if (i < a + m) {
      prod *= s[i];
    } else if (s[i] != xType.getDimSize(i - m + 1)) {
      return false;
    }
  }
  if (prod != c)
    return false;
  // One permutation, or it and then its last two axes swapped.
  SmallVector<int64_t> perm = permOf(transposes[0]);
  if (int64_t(perm.size()) != k || k < 2)
    return false;
  auto swapped = [&](ArrayRef<int64_t> p) {
    SmallVector<int64_t> q(p);
    std::swap(q[k - 2], q[k - 1]);
    return q;
  };
  // The base permutation: the one a part's Transpose has unswapped.
  SmallVector<bool> swapPart(n, false);
  {
    SmallVector<int64_t> other = swapped(perm);
    int64_t plain = 0;
    for (int64_t i = 0; i < n; ++i) {
      SmallVector<int64_t> p = permOf(transposes[i]);
      if (p == perm)
        ++plain;
      else if (p != other)
        return false;
    }
    if (plain == 0)
      return false;
    for (int64_t i = 0; i < n; ++i)
      swapPart[i] = permOf(transposes[i]) != perm;
  }
  // [..., n, f0, f1, ...]: the parts' axis at a.
  SmallVector<int64_t> x5(s.take_front(a));
  x5.push_back(n);
  x5.append(s.begin() + a, s.end());
  SmallVector<int64_t> q = {a};
  for (int64_t p : perm)
    q.push_back(p < a ? p : p + 1);
  SmallVector<int64_t> tShape;
  for (int64_t p : q)
    tShape.push_back(x5[p]);
  auto elem = xType.getElementType();
  SmallVector<int64_t> plainShape;
  for (int64_t p : perm)
    plainShape.push_back(s[p]);
  auto plainType = RankedTensorType::get(plainShape, elem);

  OpBuilder b(op);
  Location loc = op->getLoc();
  autodiff::OnnxBuilder ob(b, loc);
  Value reshaped = ob.reshape(op->getOperand(0), RankedTensorType::get(x5, elem));
  OperationState ts(loc, onnx::TransposeOp::getOperationName());
  ts.addOperands(reshaped);
  ts.addTypes(RankedTensorType::get(tShape, elem));
  ts.addAttribute("perm", b.getDenseI64ArrayAttr(q));
  Value t = b.create(ts)->getResult(0);
  SmallVector<int64_t> partDims(tShape);
  partDims[0] = 1;
  OperationState ss(loc, onnx::SplitOp::getOperationName());
  ss.addOperands({t, ob.i64s(SmallVector<int64_t>(n, 1))});
  ss.addTypes(SmallVector<Type>(n, RankedTensorType::get(partDims, elem)));
  ss.addAttribute("axis", b.getI64IntegerAttr(0));
  Operation *parts = b.create(ss);
  for (int64_t i = 0; i < n; ++i) {
    Value v = ob.reshape(parts->getResult(i), plainType);
    if (swapPart[i])
      v = swapLastTwo(b, loc, v, transposes[i]->getResult(0).getType());
    transposes[i]->getResult(0).replaceAllUsesWith(v);
  }
  for (int64_t i = 0; i < n; ++i) {
    transposes[i]->erase();
    reshapes[i]->erase();
  }
  op->erase();
  return !ob.failed();
}

// The backward's mirror: the head merge of each gradient and their Concat,
//
//   %t_i = onnx.Transpose(%x_i) {perm = P_i}       x_i: [..., f0, f1, ...]
//   %r_i = onnx.Reshape(%t_i) -> [..., c, ...]       (merges t_i's axes a..)
//   %c   = onnx.Concat(%r_0, ..., %r_n-1) {axis = a}
//
// becomes one Concat along a new leading axis and one Transpose:
//
//   %s_i = onnx.Reshape(%x_i) -> [1, x_i's shape]
//   %c5  = onnx.Concat(%s_0, ...) {axis = 0}       [n, x's shape]
//   %t   = onnx.Transpose(%c5) {perm = Q}          t's axes with n at a
//   %c'  = onnx.Reshape(%t) -> %c's type
//
// The buffer planner places each %x_i in its slice of %c5's buffer (a
// contiguous Concat whose parts are their kernels' results: the kernels
// write there and the Concat is no call), so the attention backward's three
// Transposes and Concat of dq, dk and dv become one Transpose. A part whose
// Transpose swaps its last two axes first (dk, from kᵀ's gradient) keeps
// that swap as a Transpose of its own. The same bits: only copies change.
bool rewriteConcat(onnx::ConcatOp concat) {
  Operation *op = concat;
  auto cType = dyn_cast<RankedTensorType>(op->getResult(0).getType());
  int64_t n = op->getNumOperands();
  if (!cType || !cType.hasStaticShape() || n < 2)
    return false;
  int64_t rank = cType.getRank();
  int64_t a = axisOf(op, rank);
  if (a < 0)
    return false;
  // Every part: a Transpose (one use), then a Reshape (one use).
  SmallVector<Operation *> reshapes, transposes;
  RankedTensorType partType;
  int64_t k = -1;
  for (Value o : op->getOperands()) {
    Operation *reshape = o.getDefiningOp();
    if (!reshape || !isa<onnx::ReshapeOp>(reshape) || !o.hasOneUse())
      return false;
    Value tv = reshape->getOperand(0);
    Operation *t = tv.getDefiningOp();
    if (!t || !isa<onnx::TransposeOp>(t) || !tv.hasOneUse())
      return false;
    auto xt = dyn_cast<RankedTensorType>(t->getOperand(0).getType());
    auto pt = dyn_cast<RankedTensorType>(o.getType());
    if (!xt || !xt.hasStaticShape() || (k >= 0 && xt.getRank() != k) || !pt ||
        (partType && pt != partType) || int64_t(permOf(t).size()) != xt.getRank())
      return false;
    k = xt.getRank();
    partType = pt;
    reshapes.push_back(reshape);
    transposes.push_back(t);
  }
  int64_t m = k - (rank - 1); // t's axes merged into the part's axis a
  if (k < 2 || m < 1)
    return false;
  // σ∘P: the part transposed by P after a swap of its last two axes.
  auto swapped = [&](ArrayRef<int64_t> p) {
    SmallVector<int64_t> q(p);
    for (int64_t &v : q)
      v = v == k - 2 ? k - 1 : v == k - 1 ? k - 2 : v;
    return q;
  };
  // The base permutation P: the one most parts have; every other part must
  // have σ∘P (attention's dk, from the gradient of kᵀ).
  SmallVector<int64_t> perm;
  int64_t best = 0;
  for (Operation *t : transposes) {
    SmallVector<int64_t> p = permOf(t);
    int64_t count = llvm::count_if(transposes, [&](Operation *u) { return permOf(u) == p; });
    if (count > best) {
      best = count;
      perm = p;
    }
  }
  SmallVector<bool> swapPart;
  RankedTensorType xType; // the parts' x, the swapped ones' swapped back
  auto elem = cType.getElementType();
  for (Operation *t : transposes) {
    SmallVector<int64_t> p = permOf(t);
    bool sw = p != perm;
    if (sw && p != swapped(perm))
      return false;
    swapPart.push_back(sw);
    auto xt = cast<RankedTensorType>(t->getOperand(0).getType());
    SmallVector<int64_t> shape(xt.getShape());
    if (sw)
      std::swap(shape[k - 2], shape[k - 1]);
    auto eff = RankedTensorType::get(shape, elem);
    if (xType && eff != xType)
      return false;
    xType = eff;
  }
  // t's shape, and the part as t with axes a .. a+m-1 merged.
  SmallVector<int64_t> tShape;
  for (int64_t p : perm)
    tShape.push_back(xType.getDimSize(p));
  ArrayRef<int64_t> ps = partType.getShape();
  int64_t prod = 1;
  for (int64_t j = 0; j < m; ++j)
    prod *= tShape[a + j];
  for (int64_t j = 0; j < rank; ++j) {
    int64_t want = j < a ? tShape[j] : j == a ? prod : tShape[j + m - 1];
    if (ps[j] != want)
      return false;
  }
  if (cType.getDimSize(a) != n * prod)
    return false;
  // [n, x...] transposed to t's axes with the parts' axis at a.
  SmallVector<int64_t> x5 = {n};
  x5.append(xType.getShape().begin(), xType.getShape().end());
  SmallVector<int64_t> q;
  for (int64_t j = 0; j < a; ++j)
    q.push_back(perm[j] + 1);
  q.push_back(0);
  for (int64_t j = a; j < k; ++j)
    q.push_back(perm[j] + 1);
  SmallVector<int64_t> outShape;
  for (int64_t p : q)
    outShape.push_back(x5[p]);

  OpBuilder b(op);
  Location loc = op->getLoc();
  autodiff::OnnxBuilder ob(b, loc);
  SmallVector<int64_t> oneX = {1};
  oneX.append(xType.getShape().begin(), xType.getShape().end());
  auto oneType = RankedTensorType::get(oneX, elem);
  SmallVector<Value> parts;
  for (int64_t i = 0; i < n; ++i) {
    Value x = transposes[i]->getOperand(0);
    if (swapPart[i])
      x = swapLastTwo(b, loc, x, xType);
    parts.push_back(ob.reshape(x, oneType));
  }
  OperationState cs(loc, onnx::ConcatOp::getOperationName());
  cs.addOperands(parts);
  cs.addTypes(RankedTensorType::get(x5, elem));
  cs.addAttribute("axis", b.getI64IntegerAttr(0));
  Value c5 = b.create(cs)->getResult(0);
  OperationState ts(loc, onnx::TransposeOp::getOperationName());
  ts.addOperands(c5);
  ts.addTypes(RankedTensorType::get(outShape, elem));
  ts.addAttribute("perm", b.getDenseI64ArrayAttr(q));
  Value t = b.create(ts)->getResult(0);
  Value merged = ob.reshape(t, cType);
  op->getResult(0).replaceAllUsesWith(merged);
  op->erase();
  for (int64_t i = 0; i < n; ++i) {
    reshapes[i]->erase();
    transposes[i]->erase();
  }
  return !ob.failed();
}

} // namespace

void fuseSplitTransposes(func::FuncOp f) {
  SmallVector<onnx::SplitOp> splits;
  f.walk([&](onnx::SplitOp s) { splits.push_back(s); });
  for (onnx::SplitOp s : splits)
    rewrite(s);
  SmallVector<onnx::ConcatOp> concats;
  f.walk([&](onnx::ConcatOp c) { concats.push_back(c); });
  for (onnx::ConcatOp c : concats)
    rewriteConcat(c);
}

} // namespace mlir::pipec::steplowering
