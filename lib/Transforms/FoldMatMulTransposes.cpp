//===- FoldMatMulTransposes.cpp - pipe-fold-matmul-transposes --------------===//
//
// PyTorch exports a Linear layer on a 3-D input as MatMul(x, Transpose(W)),
// and MatMul's VJP rule differentiates a batched MatMul one batch index at a
// time: dA = MatMul(g, Transpose(b)), dB = ReduceToShape(MatMul(Transpose(a),
// g)). On a [B, T, K] x [K, N] layer that is B GEMMs of depth T writing a
// B-times larger product, a sum over it and a transpose per weight, plus a
// transpose of every weight in the forward. This pass hands the transposes
// to BLAS instead (onnx.Gemm's transA / transB, on the rows of the batch
// axes flattened):
//
//   MatMul(A[..., K], Transpose(W[N, K]))
//       -> Reshape(Gemm(Reshape(A, [P, K]), W, transB = 1), [..., N])
//   MatMul(Transpose(X[M, K]), G[M, N])          -> Gemm(X, G, transA = 1)
//   ReduceToShape(MatMul(Transpose(X[..., M, K]), G[..., M, N]), [K, N])
//       -> Gemm(Reshape(X, [P, K]), Reshape(G, [P, N]), transA = 1)
//   Transpose(Transpose(x, p), q)                -> Transpose(x, p.q), or x
//   Transpose(Gemm(a, b, tA, tB))                -> Gemm(b, a, !tB, !tA)
//
// (Transpose swapping the last two axes; Gemm without C; f32, static
// shapes; a Gemm or MatMul folded into its user only when that is its only
// use.) The new ops keep the replaced op's location (its ONNX node name, for
// pipe-profile) and its pipe.* attributes (the stage); ops left unused are
// erased.
//
//===----------------------------------------------------------------------===//
#include "dialects/onnx/OnnxDialect.h"
#include "dialects/onnx/ShapeHelpers.h"
#include "pipec/Autodiff/OnnxBuilder.h"
#include "pipec/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

namespace mlir::pipec {
#define GEN_PASS_DEF_PIPEFOLDMATMULTRANSPOSES
#include "pipec/Transforms/Passes.h.inc"
} // namespace mlir::pipec

using namespace mlir;
using namespace mlir::pipec;

static SmallVector<int64_t> permOf(onnx::TransposeOp t) {
  int64_t rank = llvm::cast<RankedTensorType>(t.getData().getType()).getRank();
  SmallVector<int64_t> perm;
  if (auto p = t.getPerm())
    perm.assign(p->begin(), p->end());
  else
    for (int64_t i = rank - 1; i >= 0; --i)
      perm.push_back(i);
  return perm;
}

static bool swapsLastTwo(ArrayRef<int64_t> perm) {
  int64_t r = static_cast<int64_t>(perm.size());
  if (r < 2)
    return false;
  for (int64_t i = 0; i < r - 2; ++i)
    if (perm[i] != i)
      return false;
  return perm[r - 2] == r - 1 && perm[r - 1] == r - 2;
}

/// `v`'s type when it is an f32 tensor of static shape, else null.
static RankedTensorType staticF32(Value v) {
  auto t = llvm::dyn_cast<RankedTensorType>(v.getType());
  if (!t || !t.hasStaticShape() || !t.getElementType().isF32())
    return {};
  return t;
}

/// The Transpose swapping the last two axes that defines `v`, or null.
static onnx::TransposeOp swapOf(Value v) {
  auto t = v.getDefiningOp<onnx::TransposeOp>();
  if (!t || !swapsLastTwo(permOf(t)))
    return {};
  return t;
}

namespace {
/// Builds the replacement of one op before it, then marks the new ops like
/// the old one.
class Rewrite {
public:
  explicit Rewrite(Operation *root)
      : root(root), b(root), ob(b, root->getLoc()), prev(root->getPrevNode()) {}

  autodiff::OnnxBuilder &builder() { return ob; }

  Value gemm(Value a, Value bv, int64_t ta, int64_t tb, Attribute alpha = {},
             Attribute beta = {}) {
    SmallVector<NamedAttribute> attrs{ob.i64Attr("transA", ta),
                                      ob.i64Attr("transB", tb)};
    if (alpha)
      attrs.push_back(ob.attr("alpha", alpha));
    if (beta)
      attrs.push_back(ob.attr("beta", beta));
    return ob.create<onnx::GemmOp>({a, bv, ob.none()}, attrs);
  }

  /// `x` as a [rows, last axis] matrix.
  Value rows(Value x) {
    auto t = llvm::cast<RankedTensorType>(x.getType());
    int64_t last = t.getShape().back();
    return ob.reshape(x, RankedTensorType::get({t.getNumElements() / last, last},
                                               t.getElementType()));
  }

  /// Replaces the root's only result with `v` (reshaped to its type).
  LogicalResult finish(Value v) {
    v = ob.reshape(v, root->getResult(0).getType());
    if (ob.failed() || v.getType() != root->getResult(0).getType())
      return failure();
    Operation *first = prev ? prev->getNextNode() : &root->getBlock()->front();
    for (Operation *op = first; op && op != root; op = op->getNextNode())
      for (NamedAttribute a : root->getAttrs())
        if (a.getName().getValue().starts_with("pipe."))
          op->setAttr(a.getName(), a.getValue());
    root->getResult(0).replaceAllUsesWith(v);
    root->erase();
    return success();
  }

private:
  Operation *root;
  OpBuilder b;
  autodiff::OnnxBuilder ob;
  Operation *prev;
};
} // namespace

/// Rewrites `op` by one of the rules above; false if none applies.
static bool rewriteOne(Operation *op) {
  if (auto outer = llvm::dyn_cast<onnx::TransposeOp>(op)) {
    if (!staticF32(outer.getData()))
      return false;
    SmallVector<int64_t> q = permOf(outer);
    if (auto inner = outer.getData().getDefiningOp<onnx::TransposeOp>()) {
      SmallVector<int64_t> p = permOf(inner), composed(q.size());
      bool identity = true;
      for (size_t i = 0; i < q.size(); ++i) {
        composed[i] = p[q[i]];
        identity &= composed[i] == static_cast<int64_t>(i);
      }
      Rewrite r(op);
      Value x = inner.getData();
      if (!identity)
        x = r.builder().create<onnx::TransposeOp>(
            {x}, {r.builder().i64ArrayAttr("perm", composed)});
      return succeeded(r.finish(x));
    }
    auto g = outer.getData().getDefiningOp<onnx::GemmOp>();
    if (g && g->hasOneUse() && onnx::isNone(g.getC()) && q.size() == 2 &&
        q[0] == 1 && q[1] == 0) {
      Rewrite r(op);
      return succeeded(r.finish(r.gemm(g.getB(), g.getA(), 1 - g.getTransB(),
                                       1 - g.getTransA(), g.getAlphaAttr(),
                                       g.getBetaAttr())));
    }
    return false;
  }
  if (auto mm = llvm::dyn_cast<onnx::MatMulOp>(op)) {
    auto ta = staticF32(mm.getA()), tb = staticF32(mm.getB());
    if (!ta || !tb || !staticF32(mm.getY()) || ta.getRank() < 2 ||
        tb.getRank() != 2)
      return false;
    if (auto t = swapOf(mm.getB())) {
      Rewrite r(op);
      return succeeded(r.finish(r.gemm(r.rows(mm.getA()), t.getData(), 0, 1)));
    }
    if (ta.getRank() == 2)
      if (auto t = swapOf(mm.getA())) {
        Rewrite r(op);
        return succeeded(r.finish(r.gemm(t.getData(), mm.getB(), 1, 0)));
      }
    return false;
  }
  if (auto red = llvm::dyn_cast<onnx::ReduceToShapeOp>(op)) {
    auto mm = red.getDY().getDefiningOp<onnx::MatMulOp>();
    auto ty = staticF32(red.getDX());
    if (!mm || !mm->hasOneUse() || !ty || ty.getRank() != 2)
      return false;
    onnx::TransposeOp t = swapOf(mm.getA());
    if (!t)
      return false;
    Value x = t.getData(), g = mm.getB();
    auto tx = staticF32(x), tg = staticF32(g);
    if (!tx || !tg || tx.getRank() < 3 || tx.getRank() != tg.getRank())
      return false;
    ArrayRef<int64_t> xs = tx.getShape(), gs = tg.getShape();
    int64_t r = tx.getRank();
    // Same batch axes (no broadcasting), same M; the sum is over all of them.
    if (xs.drop_back(1) != gs.drop_back(1) || ty.getShape()[0] != xs[r - 1] ||
        ty.getShape()[1] != gs[r - 1])
      return false;
    Rewrite rw(op);
    return succeeded(rw.finish(rw.gemm(rw.rows(x), rw.rows(g), 1, 0)));
  }
  return false;
}

namespace {
struct PipeFoldMatMulTransposesPass
    : public pipec::impl::PipeFoldMatMulTransposesBase<
          PipeFoldMatMulTransposesPass> {
  using Base::Base;

  void runOnOperation() override {
    for (auto func : getOperation().getOps<func::FuncOp>()) {
      if (func.isExternal())
        continue;
      Block &body = func.getBody().front();
      bool changed = true;
      while (changed) {
        changed = false;
        for (Operation &op : llvm::make_early_inc_range(body))
          changed |= rewriteOne(&op);
        for (Operation &op : llvm::make_early_inc_range(llvm::reverse(body)))
          if (isOpTriviallyDead(&op))
            op.erase();
      }
    }
  }
};
} // namespace
