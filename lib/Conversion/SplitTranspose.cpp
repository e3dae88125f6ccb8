//===- SplitTranspose.cpp - attention's head split as one transpose --------===//
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
//===----------------------------------------------------------------------===//
#include "StepLowering.h"

#include "pipec/Autodiff/OnnxBuilder.h"
#include "dialects/onnx/OnnxDialect.h"

using namespace mlir;
using namespace mlir::pipec;

namespace mlir::pipec::steplowering {

namespace {

bool rewrite(onnx::SplitOp split) {
  Operation *op = split;
  auto xType = dyn_cast<RankedTensorType>(op->getOperand(0).getType());
  if (!xType || !xType.hasStaticShape() || op->getNumResults() < 2)
    return false;
  int64_t rank = xType.getRank();
  auto axisAttr = op->getAttrOfType<IntegerAttr>("axis");
  int64_t a = axisAttr ? axisAttr.getInt() : 0;
  if (a < 0)
    a += rank;
  if (a < 0 || a >= rank)
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
  auto permOf = [](Operation *t) {
    auto p = t->getAttrOfType<DenseI64ArrayAttr>("perm");
    return p ? SmallVector<int64_t>(p.asArrayRef()) : SmallVector<int64_t>();
  };
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
    if (swapPart[i]) {
      SmallVector<int64_t> sw;
      for (int64_t j = 0; j < k; ++j)
        sw.push_back(j);
      std::swap(sw[k - 2], sw[k - 1]);
      OperationState ws(loc, onnx::TransposeOp::getOperationName());
      ws.addOperands(v);
      ws.addTypes(transposes[i]->getResult(0).getType());
      ws.addAttribute("perm", b.getDenseI64ArrayAttr(sw));
      v = b.create(ws)->getResult(0);
    }
    transposes[i]->getResult(0).replaceAllUsesWith(v);
  }
  for (int64_t i = 0; i < n; ++i) {
    transposes[i]->erase();
    reshapes[i]->erase();
  }
  op->erase();
  return !ob.failed();
}

} // namespace

void fuseSplitTransposes(func::FuncOp f) {
  SmallVector<onnx::SplitOp> splits;
  f.walk([&](onnx::SplitOp s) { splits.push_back(s); });
  for (onnx::SplitOp s : splits)
    rewrite(s);
}

} // namespace mlir::pipec::steplowering
