//===- Microbatch.cpp - pipe-microbatch: one micro-batch of the step -------===//
//
// Rewrites the training step so that it computes one micro-batch of B/M
// samples. A forward analysis gives every value one of four batch states:
//
//   free      does not depend on the samples (weights, constants, state)
//   batched   holds one slice per sample along one axis (`axis`)
//   sum       a sum over the samples (a weight gradient): the step's value is
//             the sum of the micro-batches' values
//   mean      a mean over the samples (a mean-reduced loss): the step's value
//             is the mean of the micro-batches' values
//   step      a non-linear function of a sum or mean (the optimizer's
//             update): it can only be computed once per step, from the
//             combined values, so it must not meet per-sample values and
//             reach neither the loss nor a gradient result
//   running   a state update computed from one micro-batch (a training-mode
//             BatchNormalization's running statistics): each micro-batch
//             applies it in turn, in micro-batch order; it may only be a
//             pipe.update result
//
// Training-mode BatchNormalization normalises each micro-batch with its own
// statistics (as GPipe and torch's pipelining do); with M = 1 that is the
// step's. With batchnorm=full-batch the stages holding one are whole-batch
// stages instead (pipec/Transforms/WholeBatch.h): their ops keep B, and
// marker Concat/Split ops convert at their boundaries.
// from the pipe.input arguments (batched on axis 0) through each op's
// semantics. Only linear ops may consume sums and means, so that combining
// the micro-batches' results as above is exact; anything else that mixes
// samples (batch statistics, a Slice over the batch, a non-loss reduction
// that feeds on) is an error on that op. Then the shape operands that name a
// batched dimension are rewritten, the arguments retyped and every op's
// result types re-inferred.
//
//===----------------------------------------------------------------------===//
#include "pipec/Autodiff/OnnxBuilder.h"
#include "dialects/pipe/PipeAttrNames.h"
#include "pipec/Transforms/Passes.h"
#include "pipec/Transforms/WholeBatch.h"

#include "dialects/onnx/ShapeHelpers.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SetVector.h"

namespace mlir::pipec {
#define GEN_PASS_DEF_PIPEMICROBATCH
#include "pipec/Transforms/Passes.h.inc"
} // namespace mlir::pipec

using namespace mlir;
using namespace mlir::pipec;

namespace {

struct BatchState {
  enum Kind { Free, Batched, Sum, Mean, Step, Running };
  Kind kind = Free;
  int64_t axis = -1;
  /// Batched: the batch may be one factor of its axis, merged with others
  /// by a reshape (torch's attention reshapes (T, B, D) into (T, B*H, d)
  /// and (T*B, D)): the axis's extent is outer * B * inner, the sample
  /// index the middle digit. A micro-batch divides B, so the axis by M.
  int64_t outer = 1, inner = 1;

  static BatchState free() { return {}; }
  static BatchState batched(int64_t a) { return {Batched, a}; }
  static BatchState sum() { return {Sum, -1}; }
  static BatchState mean() { return {Mean, -1}; }
  static BatchState step() { return {Step, -1}; }
  static BatchState running() { return {Running, -1}; }
  /// The same batch factors on another axis.
  BatchState on(int64_t a) const {
    BatchState s = *this;
    s.axis = a;
    return s;
  }
  bool isPlain() const { return outer == 1 && inner == 1; }
  bool sameFactors(const BatchState &o) const {
    return outer == o.outer && inner == o.inner;
  }
  bool isFree() const { return kind == Free; }
  bool isBatched() const { return kind == Batched; }
  bool isReduced() const { return kind == Sum || kind == Mean; }
};

/// A shape operand entry to divide by M: operand `operand` of `op`,
/// element `index`.
struct ShapeRewrite {
  Operation *op;
  unsigned operand;
  int64_t index;
};


struct PipeMicrobatchPass
    : public pipec::impl::PipeMicrobatchBase<PipeMicrobatchPass> {
  using Base::Base;

  void runOnOperation() override;

private:
  llvm::DenseMap<Value, BatchState> states;
  SmallVector<ShapeRewrite> rewrites;
  /// For a value in state `step`: the op that first made one.
  llvm::DenseMap<Value, Operation *> stepOrigin;
  int64_t batch = 0;
  /// Gradient ops of mean-reduced losses: they divide by the micro-batch's
  /// size, the step by B, so their incoming gradient is scaled by 1/M.
  SmallVector<Operation *> meanLossGrads;
  /// Mean-reduced losses with class weights: their mean is over the
  /// labels' weights, not a fixed share per micro-batch.
  SmallVector<Operation *> weightedMeans;
  /// --batchnorm full-batch: the whole-batch stages (ops keep B).
  llvm::SmallSetVector<int64_t, 4> wholeStages;

  bool isWhole(Operation *op) const;
  LogicalResult insertWholeBatchBoundaries(func::FuncOp step);
  BatchState stateOf(Value v) const { return states.lookup(v); }
  LogicalResult analyze(Operation *op);
  void noteOrigin(InFlightDiagnostic &d, Value v);
  FailureOr<SmallVector<BatchState>> transfer(Operation *op);
  FailureOr<BatchState> elementwise(Operation *op, unsigned numOperands);
  /// Splat constants that span the batch: rebuilt with the micro-batch's
  /// extent on the axis.
  llvm::SetVector<std::pair<Operation *, int64_t>> splatRewrites;
  /// GatherND/ScatterND indices that name the samples (PyTorch's
  /// `h[:, i] = v` scatters at (b, i) for every sample b): operand `operand`
  /// of `op`, a constant whose axis `index` runs over the batch; each
  /// micro-batch takes its first B/M rows, which name its own samples.
  SmallVector<ShapeRewrite> sampleIndexRewrites;
  std::optional<int64_t> sampleAxis(Value indices, int64_t component);
  /// Takes spreadUniformly's shape operands (their entry) and splats (their
  /// axis) to rewrite.
  void respread(ArrayRef<std::pair<Operation *, int64_t>> expands) {
    for (auto [op, at] : expands) {
      if (isa<onnx::ConstantOp>(op))
        splatRewrites.insert({op, at});
      else
        rewrites.push_back({op, 1, at});
    }
  }
  /// The ops that computed a spread value for several users: each user that
  /// takes it per micro-batch got its own copy, so the ones left unused are
  /// erased after the analysis.
  llvm::SetVector<Operation *> spreadOrigins;
  /// Makes `v` (uniform along the batch: spreadUniformly's `spread` and
  /// `expands`) batched for `user`. Where a value of the chain has other
  /// users (a count over the batch of the same Expand, say), `user` gets its
  /// own copy of the chain, placed before it, so that the others keep the
  /// whole batch's value; else the chain itself is batched.
  void spreadFor(Operation *user, Value v, BatchState factors,
                 ArrayRef<std::pair<Value, int64_t>> spread,
                 ArrayRef<std::pair<Operation *, int64_t>> expands);
  bool spreadUniformly(Value v, int64_t axis,
                       SmallVectorImpl<std::pair<Value, int64_t>> &spread,
                       SmallVectorImpl<std::pair<Operation *, int64_t>> &expands,
                       int depth);
  FailureOr<BatchState> reshapeLike(Operation *op, Value data, Value result,
                                    unsigned shapeOperand);
};

} // namespace

static RankedTensorType rankedType(Value v) {
  return llvm::dyn_cast<RankedTensorType>(v.getType());
}

static int64_t intAttr(Operation *op, StringRef name, int64_t dflt) {
  if (auto a = op->getAttrOfType<IntegerAttr>(name))
    return a.getInt();
  return dflt;
}

static StringRef strAttr(Operation *op, StringRef name, StringRef dflt) {
  if (auto a = op->getAttrOfType<StringAttr>(name))
    return a.getValue();
  return dflt;
}

static bool isConstantOp(Value v) {
  Operation *def = v.getDefiningOp();
  return def && def->getNumOperands() == 0;
}

static int64_t product(ArrayRef<int64_t> dims) {
  int64_t p = 1;
  for (int64_t d : dims)
    p *= d;
  return p;
}

static InFlightDiagnostic batchError(Operation *op) {
  return op->emitOpError() << "cannot be micro-batched: ";
}

/// Elementwise ops with numpy broadcasting over all their operands.
static bool isElementwise(Operation *op) {
  return llvm::isa<onnx::AddOp, onnx::SubOp, onnx::MulOp, onnx::DivOp,
                   onnx::PowOp, onnx::EqualOp, onnx::WhereOp, onnx::ReluOp,
                   onnx::NegOp, onnx::TanhOp, onnx::SigmoidOp, onnx::ErfOp,
                   onnx::SqrtOp, onnx::ExpOp, onnx::LogOp, onnx::SinOp, onnx::CosOp, onnx::IdentityOp,
                   onnx::CastOp, onnx::ReluGradOp, onnx::TanhGradOp,
                   onnx::SigmoidGradOp, onnx::ErfGradOp, onnx::AbsOp,
                   onnx::ReciprocalOp, onnx::SignOp, onnx::FloorOp,
                   onnx::CeilOp, onnx::SoftplusOp, onnx::HardSwishOp,
                   onnx::NotOp, onnx::LeakyReluOp, onnx::EluOp, onnx::SeluOp,
                   onnx::HardSigmoidOp, onnx::GeluOp, onnx::ClipOp,
                   onnx::MaxOp, onnx::MinOp, onnx::ModOp, onnx::LessOp,
                   onnx::LessOrEqualOp, onnx::GreaterOp,
                   onnx::GreaterOrEqualOp, onnx::AndOp, onnx::OrOp,
                   onnx::UnaryGradOp>(op);
}

/// Ops through which a sum or mean over the batch stays one (linear in it).
static bool isLinearIn(Operation *op, unsigned operand) {
  if (llvm::isa<onnx::AddOp, onnx::SubOp, onnx::NegOp, onnx::IdentityOp,
                onnx::ReshapeOp, onnx::TransposeOp, onnx::FlattenOp,
                onnx::SqueezeOp, onnx::UnsqueezeOp, onnx::ReduceSumOp,
                onnx::ReduceMeanOp, onnx::ReduceToShapeOp, onnx::ExpandOp>(op))
    return operand == 0 || llvm::isa<onnx::AddOp, onnx::SubOp>(op);
  if (llvm::isa<onnx::MulOp>(op))
    return true;
  if (llvm::isa<onnx::DivOp>(op))
    return operand == 0;
  return false;
}

FailureOr<BatchState> PipeMicrobatchPass::elementwise(Operation *op,
                                                      unsigned numOperands) {
  auto resultType = rankedType(op->getResult(0));
  if (!resultType)
    return op->emitOpError() << "needs a ranked result to be micro-batched";
  int64_t rank = resultType.getRank();
  std::optional<int64_t> axis;
  BatchState factors;
  bool reduced = false;
  BatchState::Kind reducedKind = BatchState::Free;
  for (unsigned i = 0; i < numOperands; ++i) {
    BatchState s = stateOf(op->getOperand(i));
    if (s.isBatched()) {
      int64_t a = s.axis + rank - rankedType(op->getOperand(i)).getRank();
      if (axis && *axis != a)
        return batchError(op) << "its operands have the batch on different "
                                 "axes ("
                              << *axis << " and " << a << ")";
      if (axis && !factors.sameFactors(s))
        return batchError(op) << "its operands merge the batch with other "
                                 "dimensions differently on axis "
                              << a;
      axis = a;
      factors = s;
    } else if (s.isReduced()) {
      if (reduced && reducedKind != s.kind)
        return batchError(op) << "it combines a sum and a mean over the batch";
      reduced = true;
      reducedKind = s.kind;
    }
  }
  if (reduced) {
    if (axis)
      return batchError(op) << "it combines a value reduced over the batch "
                               "with a per-sample value";
    // Scaling by or adding a constant commutes with combining the
    // micro-batches; anything else (a weight-dependent factor, a non-linear
    // op) can only run once on the combined value.
    bool linear = true;
    for (unsigned i = 0; i < numOperands; ++i) {
      Value v = op->getOperand(i);
      BatchState s = stateOf(v);
      if (s.isReduced() && !isLinearIn(op, i))
        linear = false;
      if (s.isFree() && !isConstantOp(v))
        linear = false;
    }
    if (llvm::isa<onnx::AddOp, onnx::SubOp>(op) &&
        reducedKind == BatchState::Sum &&
        llvm::any_of(op->getOperands(),
                     [&](Value v) { return stateOf(v).isFree(); }))
      linear = false;
    if (!linear)
      return BatchState::step();
    return BatchState{reducedKind, -1};
  }
  if (!axis)
    return BatchState::free();
  // A batch-independent operand must broadcast along the batch axis.
  for (unsigned i = 0; i < numOperands; ++i) {
    Value v = op->getOperand(i);
    if (!stateOf(v).isFree())
      continue;
    auto t = rankedType(v);
    if (!t)
      continue;
    int64_t a = *axis - (rank - t.getRank());
    if (a < 0 || t.getDimSize(a) == 1)
      continue;
    // A batch-independent value spread over the batch (the gradient of a
    // mean: Expand of a scalar, and elementwise ops of it, such as its
    // negation) is uniform along it: it is batched too, its Expands taking
    // the micro-batch's extent.
    SmallVector<std::pair<Value, int64_t>> spread;
    SmallVector<std::pair<Operation *, int64_t>> expands;
    if (spreadUniformly(v, a, spread, expands, 0)) {
      spreadFor(op, v, factors, spread, expands);
      continue;
    }
    return batchError(op) << "operand #" << i << " (" << v.getType()
                          << ") does not depend on the batch but spans "
                             "the batch axis "
                          << *axis;
  }
  return factors.on(*axis);
}

void PipeMicrobatchPass::spreadFor(Operation *user, Value v, BatchState factors,
                                   ArrayRef<std::pair<Value, int64_t>> spread,
                                   ArrayRef<std::pair<Operation *, int64_t>> expands) {
  llvm::SmallPtrSet<Operation *, 8> chain;
  for (auto [value, at] : spread)
    if (Operation *d = value.getDefiningOp())
      chain.insert(d);
  bool shared = false;
  for (auto [value, at] : spread)
    for (Operation *u : value.getUsers())
      shared |= u != user && !chain.contains(u);
  if (!shared) {
    for (auto [value, at] : spread)
      states[value] = factors.on(at);
    respread(expands);
    return;
  }
  // The chain's ops in block order, cloned before `user` (with its stage).
  SmallVector<Operation *> ordered(chain.begin(), chain.end());
  llvm::sort(ordered, [](Operation *a, Operation *b) { return a->isBeforeInBlock(b); });
  IRMapping map;
  OpBuilder b(user);
  Attribute stage = user->getAttr(pipe::attrs::kStage);
  for (Operation *d : ordered) {
    Operation *copy = b.clone(*d, map);
    if (stage && d->hasAttr(pipe::attrs::kStage))
      copy->setAttr(pipe::attrs::kStage, stage);
    spreadOrigins.insert(d);
  }
  for (auto [value, at] : spread)
    states[map.lookup(value)] = factors.on(at);
  SmallVector<std::pair<Operation *, int64_t>> copies;
  for (auto [op, at] : expands)
    copies.push_back({map.lookup(op->getResult(0)).getDefiningOp(), at});
  respread(copies);
  for (OpOperand &operand : user->getOpOperands())
    if (operand.get() == v)
      operand.set(map.lookup(v));
}

/// Whether the batch-independent value `v` is uniform along its `axis`, so
/// that a micro-batch's rows of it are its first rows: an Expand of a value
/// that does not span the axis, or an elementwise op of values that are
/// uniform along it or broadcast there (extent 1, or not reaching it), or a
/// reshape of one that only adds or drops extents of 1. Adds the values
/// that span the axis to `spread` (each with its axis) and the Expands and
/// Reshapes whose shape operand takes the micro-batch to `expands`; a value
/// already spread (batched on the axis) is taken as it is.
bool PipeMicrobatchPass::spreadUniformly(
    Value v, int64_t axis, SmallVectorImpl<std::pair<Value, int64_t>> &spread,
    SmallVectorImpl<std::pair<Operation *, int64_t>> &expands, int depth) {
  auto t = rankedType(v);
  if (!t || depth > 32)
    return false;
  if (axis < 0 || t.getDimSize(axis) == 1)
    return true;
  BatchState s = stateOf(v);
  if (s.isBatched())
    return s.axis == axis;
  if (!s.isFree())
    return false;
  if (llvm::any_of(spread, [&](auto &entry) { return entry.first == v; }))
    return true;
  Operation *def = v.getDefiningOp();
  if (!def || def->getNumResults() != 1)
    return false;
  // A splat constant (a fill value such as -100 for ignored labels):
  // rebuilt at the micro-batch's shape.
  if (isa<onnx::ConstantOp>(def)) {
    auto dense = llvm::dyn_cast_or_null<DenseElementsAttr>(def->getAttr("value"));
    if (!dense || !dense.isSplat())
      return false;
    expands.push_back({def, axis});
    spread.push_back({v, axis});
    return true;
  }
  if (auto expand = dyn_cast<onnx::ExpandOp>(def)) {
    auto in = rankedType(expand.getInput());
    // The shape may be shorter than the result (numpy broadcasting): its
    // entry for the axis, if it has one and it is not 1 (the input's extent
    // then), takes the micro-batch.
    auto entries = onnx::getConstantInts(expand.getShape());
    if (!in || !entries ||
        !spreadUniformly(expand.getInput(), axis - (t.getRank() - in.getRank()), spread,
                         expands, depth + 1))
      return false;
    int64_t entry = axis - (t.getRank() - int64_t(entries->size()));
    if (entry >= 0 && (*entries)[entry] != 1)
      expands.push_back({expand, entry});
    spread.push_back({v, axis});
    return true;
  }
  // A reshape that only adds or drops extents of 1 (the gradient of a
  // keepdims=0 reduction): the axis is the same non-1 extent.
  if (llvm::isa<onnx::ReshapeOp, onnx::UnsqueezeOp, onnx::SqueezeOp>(def)) {
    Value data = def->getOperand(0);
    auto in = rankedType(data);
    if (!in || !in.hasStaticShape() || !t.hasStaticShape())
      return false;
    auto nonUnit = [](ArrayRef<int64_t> shape) {
      SmallVector<int64_t> dims;
      for (int64_t d : shape)
        if (d != 1)
          dims.push_back(d);
      return dims;
    };
    if (nonUnit(in.getShape()) != nonUnit(t.getShape()))
      return false;
    // The axis's place among the extents other than 1.
    int64_t place = 0;
    for (int64_t d = 0; d < axis; ++d)
      place += t.getDimSize(d) != 1;
    int64_t inAxis = -1;
    for (int64_t d = 0, seen = 0; d < in.getRank() && inAxis < 0; ++d)
      if (in.getDimSize(d) != 1 && seen++ == place)
        inAxis = d;
    if (inAxis < 0 || !spreadUniformly(data, inAxis, spread, expands, depth + 1))
      return false;
    if (isa<onnx::ReshapeOp>(def)) {
      auto entries = onnx::getConstantInts(def->getOperand(1));
      if (!entries || (*entries)[axis] <= 0)
        return false;
      expands.push_back({def, axis});
    }
    spread.push_back({v, axis});
    return true;
  }
  if (!isElementwise(def))
    return false;
  for (Value operand : def->getOperands()) {
    if (onnx::isNone(operand))
      continue;
    auto ot = rankedType(operand);
    if (!ot || !spreadUniformly(operand, axis - (t.getRank() - ot.getRank()), spread,
                                expands, depth + 1))
      return false;
  }
  spread.push_back({v, axis});
  return true;
}

/// Reshape-like: the batch factor keeps its place in the row-major order of
/// the elements (pre extents before it, post after), so it lands in the one
/// result axis whose extent splits as outer * B * inner around it; a reshape
/// that splits the batch factor itself between axes is refused.
FailureOr<BatchState> PipeMicrobatchPass::reshapeLike(Operation *op, Value data,
                                                      Value result,
                                                      unsigned shapeOperand) {
  BatchState s = stateOf(data);
  if (!s.isBatched())
    return s;
  auto in = rankedType(data), out = rankedType(result);
  if (!in || !out || !in.hasStaticShape() || !out.hasStaticShape())
    return op->emitOpError() << "needs static shapes to be micro-batched";
  int64_t pre = product(in.getShape().take_front(s.axis)) * s.outer;
  int64_t post = s.inner * product(in.getShape().drop_front(s.axis + 1));
  int64_t acc = 1;
  for (int64_t b = 0; b < out.getRank() && acc <= pre; ++b) {
    int64_t d = out.getDimSize(b);
    if (pre % acc == 0) {
      int64_t outer = pre / acc;
      if (d % (outer * batch) == 0 &&
          d / (outer * batch) * product(out.getShape().drop_front(b + 1)) ==
              post) {
        if (shapeOperand != ~0u) {
          auto entries = onnx::getConstantInts(op->getOperand(shapeOperand));
          if (!entries)
            return batchError(op) << "its shape is not a constant";
          if ((*entries)[b] > 0)
            rewrites.push_back({op, shapeOperand, b});
        }
        BatchState r = s.on(b);
        r.outer = outer;
        r.inner = d / (outer * batch);
        return r;
      }
    }
    acc *= d;
  }
  return batchError(op) << "it splits the batch (" << batch
                        << " samples, axis " << s.axis << " of "
                        << data.getType()
                        << (s.isPlain() ? "" : ", merged with other dimensions")
                        << ") across dimensions of " << result.getType();
}

/// The axis of a constant GatherND/ScatterND indices tensor (..., k) along
/// which the tuples' `component` is the position itself (0, 1, ..., B-1 for
/// the B samples) while nothing else changes: the tuples address each
/// sample alike. nullopt when there is none.
std::optional<int64_t> PipeMicrobatchPass::sampleAxis(Value indices,
                                                      int64_t component) {
  auto type = onnx::getRanked(indices);
  auto values = onnx::getConstantInts(indices);
  if (!type || !type.hasStaticShape() || !values || type.getRank() < 2 ||
      !type.getElementType().isInteger(64))
    return std::nullopt;
  ArrayRef<int64_t> shape = type.getShape();
  int64_t q = type.getRank(), k = shape[q - 1];
  SmallVector<int64_t> strides(q, 1);
  for (int64_t i = q - 2; i >= 0; --i)
    strides[i] = strides[i + 1] * shape[i + 1];
  for (int64_t a = 0; a < q - 1; ++a) {
    if (shape[a] != batch)
      continue;
    bool ok = true;
    for (int64_t n = 0; ok && n < static_cast<int64_t>(values->size()); ++n) {
      int64_t pos = (n / strides[a]) % shape[a], j = n % k;
      int64_t v = (*values)[n] < 0 ? (*values)[n] + batch : (*values)[n];
      // The same entry of the tuple at position 0 along a.
      int64_t base = n - pos * strides[a];
      ok = j == component ? v == pos : v == (*values)[base];
    }
    if (ok)
      return a;
  }
  return std::nullopt;
}

/// The batch state of each result of `op`, from its operands'.
FailureOr<SmallVector<BatchState>> PipeMicrobatchPass::transfer(Operation *op) {
  unsigned n = op->getNumResults();
  auto same = [&](BatchState s) { return SmallVector<BatchState>(n, s); };
  bool anyBatch = llvm::any_of(op->getOperands(), [&](Value v) {
    return !stateOf(v).isFree();
  });
  if (!anyBatch)
    return same(BatchState::free());
  bool anyStep = false, anyBatched = false;
  for (Value v : op->getOperands()) {
    anyStep |= stateOf(v).kind == BatchState::Step;
    anyBatched |= stateOf(v).isBatched();
  }
  if (anyStep && anyBatched)
    return batchError(op)
           << "it combines per-sample values with a value that can only be "
              "computed once per step (from the combined micro-batches)";
  if (anyStep)
    return same(BatchState::step());
  for (Value v : op->getOperands())
    if (stateOf(v).kind == BatchState::Running)
      return batchError(op)
             << "it reads a running statistic computed from one micro-batch, "
                "which each micro-batch updates in turn; it can only update "
                "its state";
  if (isElementwise(op)) {
    auto s = elementwise(op, op->getNumOperands());
    if (failed(s))
      return failure();
    return same(*s);
  }
  // Ops that are linear in a reduced first operand and keep it reduced.
  BatchState first = stateOf(op->getOperand(0));
  if (first.isReduced() && llvm::isa<onnx::ReshapeOp, onnx::TransposeOp,
                                     onnx::FlattenOp, onnx::SqueezeOp,
                                     onnx::UnsqueezeOp, onnx::ReduceSumOp,
                                     onnx::ReduceMeanOp,
                                     onnx::ReduceToShapeOp, onnx::ExpandOp>(op))
    return same(first);
  if (llvm::any_of(op->getOperands(),
                   [&](Value v) { return stateOf(v).isReduced(); })) {
    if (anyBatched)
      return batchError(op) << "it combines a value reduced over the batch "
                               "with a per-sample value";
    return same(BatchState::step());
  }

  // The batch factors results inherit: the (first) batched operand's.
  BatchState src;
  for (Value v : op->getOperands())
    if (stateOf(v).isBatched()) {
      src = stateOf(v);
      break;
    }
  auto moved = [&](int64_t axis) { return src.on(axis); };
  auto batchedAt = [&](unsigned i) -> std::optional<int64_t> {
    BatchState s = stateOf(op->getOperand(i));
    if (s.isBatched())
      return s.axis;
    return std::nullopt;
  };
  auto onlyOperand0 = [&]() -> LogicalResult {
    for (unsigned i = 1; i < op->getNumOperands(); ++i)
      if (!stateOf(op->getOperand(i)).isFree())
        return batchError(op) << "operand #" << i << " depends on the batch";
    return success();
  };

  if (llvm::isa<onnx::SoftmaxOp, onnx::LogSoftmaxOp>(op)) {
    int64_t rank = rankedType(op->getOperand(0)).getRank();
    int64_t axis = intAttr(op, "axis", -1);
    if (axis < 0)
      axis += rank;
    if (axis == *batchedAt(0))
      return batchError(op) << "it normalizes over the batch axis";
    return same(stateOf(op->getOperand(0)));
  }
  if (llvm::isa<onnx::SoftmaxGradOp, onnx::LogSoftmaxGradOp>(op)) {
    auto s = elementwise(op, 2);
    if (failed(s))
      return failure();
    int64_t rank = rankedType(op->getOperand(0)).getRank();
    int64_t axis = intAttr(op, "axis", -1);
    if (axis < 0)
      axis += rank;
    if (axis == s->axis)
      return batchError(op) << "it normalizes over the batch axis";
    return same(*s);
  }
  if (auto reduce = llvm::dyn_cast<onnx::ReduceMeanOp>(op);
      reduce ||
      llvm::isa<onnx::ReduceSumOp, onnx::ReduceMaxOp, onnx::ReduceMinOp>(op)) {
    if (failed(onlyOperand0()))
      return failure();
    auto t = rankedType(op->getOperand(0));
    int64_t rank = t.getRank(), a = *batchedAt(0);
    SmallVector<int64_t> axes;
    if (!onnx::isNone(op->getOperand(1))) {
      auto values = onnx::getConstantInts(op->getOperand(1));
      if (!values)
        return batchError(op) << "its axes are not a constant";
      for (int64_t x : *values)
        axes.push_back(x < 0 ? x + rank : x);
    }
    if (axes.empty() && !intAttr(op, "noop_with_empty_axes", 0))
      axes = llvm::to_vector(llvm::seq<int64_t>(0, rank));
    if (llvm::is_contained(axes, a)) {
      if (llvm::isa<onnx::ReduceMaxOp, onnx::ReduceMinOp>(op))
        return batchError(op) << "it takes the extremum over the batch axis";
      return same(reduce ? BatchState::mean() : BatchState::sum());
    }
    if (intAttr(op, "keepdims", 1))
      return same(moved(a));
    int64_t before = llvm::count_if(axes, [&](int64_t x) { return x < a; });
    return same(moved(a - before));
  }
  // Issue 15's reductions and data ops: the batch axis must be left alone.
  if (llvm::isa<onnx::ArgMaxOp, onnx::ArgMinOp>(op)) {
    int64_t rank = rankedType(op->getOperand(0)).getRank();
    int64_t axis = intAttr(op, "axis", 0), a = *batchedAt(0);
    if (axis < 0)
      axis += rank;
    if (axis == a)
      return batchError(op) << "it takes the extremum over the batch axis";
    return same(BatchState::batched(
        !intAttr(op, "keepdims", 1) && axis < a ? a - 1 : a));
  }
  if (llvm::isa<onnx::CumSumOp, onnx::TriluOp, onnx::TileOp, onnx::PadOp>(op)) {
    if (failed(onlyOperand0()))
      return failure();
    int64_t rank = rankedType(op->getOperand(0)).getRank(), a = *batchedAt(0);
    if (llvm::isa<onnx::CumSumOp>(op)) {
      auto axis = onnx::getConstantInts(op->getOperand(1));
      if (!axis || axis->size() != 1)
        return batchError(op) << "its axis is not a constant";
      if (((*axis)[0] < 0 ? (*axis)[0] + rank : (*axis)[0]) == a)
        return batchError(op) << "it sums along the batch axis";
    } else if (llvm::isa<onnx::TriluOp>(op)) {
      if (a >= rank - 2)
        return batchError(op) << "the batch is on one of its matrix axes";
    } else if (llvm::isa<onnx::TileOp>(op)) {
      auto reps = onnx::getConstantInts(op->getOperand(1));
      if (!reps || (*reps)[a] != 1)
        return batchError(op) << "it repeats along the batch axis (or its "
                                 "repeats are not a constant)";
    } else {
      auto pads = onnx::fullPads(llvm::cast<onnx::PadOp>(op), rank);
      if (!pads || (*pads)[a] != 0 || (*pads)[a + rank] != 0)
        return batchError(op) << "it pads the batch axis (or its pads are "
                                 "not a constant)";
    }
    return same(stateOf(op->getOperand(0)));
  }
  if (auto resize = llvm::dyn_cast<onnx::ResizeOp>(op)) {
    // The batch axis must keep its extent and scale; a `sizes` operand
    // names it, like a Reshape target.
    if (failed(onlyOperand0()))
      return failure();
    int64_t a = *batchedAt(0);
    auto geometry = onnx::resizeGeometry(op);
    if (failed(geometry))
      return failure();
    auto in = rankedType(op->getOperand(0));
    if (!geometry->known || geometry->outShape[a] != in.getDimSize(a) ||
        (geometry->scales && (*geometry->scales)[a] != 1.f) ||
        (!geometry->roi.empty() &&
         (geometry->roi[a] != 0.f || geometry->roi[a + in.getRank()] != 1.f)))
      return batchError(op) << "it resizes the batch axis (or its scales or "
                               "sizes are not constants)";
    if (!onnx::isNone(resize.getSizes())) {
      // The sizes entry of the batch axis (opset 18's axes may leave it out).
      int64_t entry = a, rank = in.getRank();
      if (auto axes = resize.getAxes()) {
        auto it = llvm::find_if(*axes, [&](int64_t x) {
          return (x < 0 ? x + rank : x) == a;
        });
        entry = it == axes->end() ? -1 : it - axes->begin();
      }
      if (entry >= 0)
        rewrites.push_back({op, 3, entry});
    }
    return same(stateOf(op->getOperand(0)));
  }
  if (llvm::isa<onnx::ResizeGradOp>(op)) {
    if (failed(onlyOperand0()))
      return failure();
    int64_t a = *batchedAt(0);
    auto scales = op->getAttrOfType<DenseF32ArrayAttr>("scales");
    if (scales && scales[a] != 1.f)
      return batchError(op) << "it resizes the batch axis";
    rewrites.push_back({op, 1, a});
    return same(stateOf(op->getOperand(0)));
  }
  if (llvm::isa<onnx::ReduceExtremumGradOp>(op)) {
    // (X, dY, axes): dX has X's batch axis; dY has it too, or is a mean's
    // gradient spread over the batch (Expand of a batch-independent value,
    // batched like in elementwise()).
    std::optional<int64_t> x = batchedAt(0);
    if (!x)
      return batchError(op) << "its input must be batched";
    Value dy = op->getOperand(1);
    auto xt = rankedType(op->getOperand(0)), dt = rankedType(dy);
    int64_t dyAxis = *x;
    if (dt.getRank() < xt.getRank()) {
      auto axes = onnx::isNone(op->getOperand(2))
                      ? std::optional<SmallVector<int64_t>>(SmallVector<int64_t>())
                      : onnx::getConstantInts(op->getOperand(2));
      if (!axes)
        return batchError(op) << "its axes are not a constant";
      for (int64_t r : *axes)
        if ((r < 0 ? r + xt.getRank() : r) < *x)
          --dyAxis;
    }
    if (stateOf(dy).isFree()) {
      SmallVector<std::pair<Value, int64_t>> spread;
      SmallVector<std::pair<Operation *, int64_t>> expands;
      if (spreadUniformly(dy, dyAxis, spread, expands, 0))
        spreadFor(op, dy, BatchState::batched(dyAxis), spread, expands);
    }
    BatchState ds = stateOf(op->getOperand(1));
    if (!ds.isBatched() || ds.axis != dyAxis)
      return batchError(op) << "its gradient is not batched like its input";
    return same(BatchState::batched(*x));
  }
  if (llvm::isa<onnx::TileGradOp, onnx::PadGradOp>(op)) {
    // (dY, shape, ...): dX keeps dY's batch axis (not tiled or padded).
    if (failed(onlyOperand0()))
      return failure();
    int64_t a = *batchedAt(0);
    rewrites.push_back({op, 1, a});
    return same(BatchState::batched(a));
  }
  if (llvm::isa<onnx::SoftmaxCrossEntropyLossOp,
                onnx::NegativeLogLikelihoodLossOp>(op)) {
    std::optional<int64_t> x = batchedAt(0), y = batchedAt(1);
    if ((x && *x != 0) || (y && *y != 0) || !x || !y ||
        !stateOf(op->getOperand(0)).sameFactors(stateOf(op->getOperand(1))) ||
        (op->getNumOperands() > 2 && !stateOf(op->getOperand(2)).isFree()))
      return batchError(op) << "its scores and labels must both have the "
                               "batch on axis 0";
    StringRef reduction = strAttr(op, "reduction", "mean");
    SmallVector<BatchState> results(n, moved(0));
    if (reduction == "mean") {
      // With class weights the mean is weighted by the labels' weights, not
      // a fixed share per micro-batch. (ignore_index, which PyTorch always
      // exports, is accepted: exact as long as every micro-batch has as
      // many non-ignored labels, e.g. none ignored; see Passes.td.)
      // With class weights the mean is over the labels' weights: exact
      // where the step's weights are summed (below), else refused there.
      if (op->getNumOperands() > 2 && !onnx::isNone(op->getOperand(2)))
        weightedMeans.push_back(op);
      results[0] = BatchState::mean();
    } else if (reduction == "sum") {
      results[0] = BatchState::sum();
    }
    return results;
  }
  if (llvm::isa<onnx::SoftmaxCrossEntropyLossGradOp,
                onnx::NegativeLogLikelihoodLossGradOp>(op)) {
    bool sce = llvm::isa<onnx::SoftmaxCrossEntropyLossGradOp>(op);
    if (batchedAt(2) != 0 || (sce && batchedAt(1) != 0))
      return batchError(op) << "its labels must have the batch on axis 0";
    // (dLoss, ...): a mean or sum loss's gradient is one value for the
    // step; reduction none's one per sample, batched like the labels (or
    // uniform along the batch: the gradient of their mean).
    Value dloss = op->getOperand(0);
    if (strAttr(op, "reduction", "mean") == "none") {
      if (stateOf(dloss).isFree()) {
        SmallVector<std::pair<Value, int64_t>> spread;
        SmallVector<std::pair<Operation *, int64_t>> expands;
        if (spreadUniformly(dloss, 0, spread, expands, 0)) {
          spreadFor(op, dloss, stateOf(op->getOperand(2)), spread, expands);
          dloss = op->getOperand(0);
        }
      }
      if (batchedAt(0) != 0 || !stateOf(dloss).sameFactors(stateOf(op->getOperand(2))))
        return batchError(op) << "its per-sample loss gradient must have the batch on "
                                 "axis 0 like its labels";
    } else if (!stateOf(dloss).isFree()) {
      return batchError(op) << "its loss gradient depends on the samples (a "
                               "mean or sum loss's is one value for the step)";
    }
    if (!sce)
      rewrites.push_back({op, 1, 0});
    if (strAttr(op, "reduction", "mean") == "mean")
      meanLossGrads.push_back(op);
    return same(moved(0));
  }
  if (auto gemm = llvm::dyn_cast<onnx::GemmOp>(op)) {
    bool ta = intAttr(op, "transA", 0), tb = intAttr(op, "transB", 0);
    std::optional<int64_t> a = batchedAt(0), b = batchedAt(1);
    bool contractA = a && *a == (ta ? 0 : 1);
    bool contractB = b && *b == (tb ? 1 : 0);
    if (contractA != contractB)
      return batchError(op) << "it contracts the batch axis of one operand "
                               "with a batch-independent one";
    if (contractA) {
      if (!onnx::isNone(op->getOperand(2)) &&
          !stateOf(op->getOperand(2)).isFree())
        return batchError(op) << "its bias depends on the batch";
      if (!onnx::isNone(op->getOperand(2)))
        return batchError(op) << "it adds a bias to a sum over the batch";
      return same(BatchState::sum());
    }
    std::optional<int64_t> axis;
    if (a)
      axis = 0;
    if (b) {
      if (axis)
        return batchError(op) << "both operands are batched";
      axis = 1;
    }
    if (std::optional<int64_t> c = batchedAt(2)) {
      int64_t cRank = rankedType(op->getOperand(2)).getRank();
      if (!axis || *c + 2 - cRank != *axis)
        return batchError(op) << "its bias has the batch on another axis";
    }
    return same(moved(*axis));
  }
  if (llvm::isa<onnx::MatMulOp>(op)) {
    auto ta = rankedType(op->getOperand(0)), tb = rankedType(op->getOperand(1));
    int64_t r = rankedType(op->getResult(0)).getRank();
    if (ta.getRank() < 2 || tb.getRank() < 2)
      return batchError(op) << "a 1-D operand of MatMul is not supported";
    std::optional<int64_t> a = batchedAt(0), b = batchedAt(1);
    bool contractA = a && *a == ta.getRank() - 1;
    bool contractB = b && *b == tb.getRank() - 2;
    if (contractA != contractB)
      return batchError(op) << "it contracts the batch axis of one operand "
                               "with a batch-independent one";
    if (contractA)
      return same(BatchState::sum()); // per batch index, a sum over samples
    std::optional<int64_t> axis;
    if (a)
      axis = *a == ta.getRank() - 2 ? r - 2 : *a + r - ta.getRank();
    if (b) {
      int64_t bAxis = *b == tb.getRank() - 1 ? r - 1 : *b + r - tb.getRank();
      if (axis && *axis != bAxis)
        return batchError(op) << "its operands have the batch on different "
                                 "axes";
      axis = bAxis;
    }
    return same(moved(*axis));
  }
  if (llvm::isa<onnx::TransposeOp>(op)) {
    int64_t a = *batchedAt(0);
    auto perm = op->getAttrOfType<DenseI64ArrayAttr>("perm");
    int64_t rank = rankedType(op->getOperand(0)).getRank();
    if (!perm)
      return same(moved(rank - 1 - a));
    auto it = llvm::find(perm.asArrayRef(), a);
    return same(moved(it - perm.asArrayRef().begin()));
  }
  if (llvm::isa<onnx::ReshapeOp>(op)) {
    if (failed(onlyOperand0()))
      return failure();
    auto s = reshapeLike(op, op->getOperand(0), op->getResult(0), 1);
    if (failed(s))
      return failure();
    return same(*s);
  }
  if (llvm::isa<onnx::FlattenOp, onnx::SqueezeOp, onnx::UnsqueezeOp,
                onnx::IdentityOp>(op)) {
    if (failed(onlyOperand0()))
      return failure();
    auto s = reshapeLike(op, op->getOperand(0), op->getResult(0), ~0u);
    if (failed(s))
      return failure();
    return same(*s);
  }
  if (auto expand = llvm::dyn_cast<onnx::ExpandOp>(op)) {
    if (failed(onlyOperand0()))
      return failure();
    int64_t r = rankedType(op->getResult(0)).getRank();
    int64_t a = *batchedAt(0) + r - rankedType(op->getOperand(0)).getRank();
    auto entries = onnx::getConstantInts(op->getOperand(1));
    if (!entries)
      return batchError(op) << "its shape is not a constant";
    int64_t index = a - (r - int64_t(entries->size()));
    if (index >= 0 && (*entries)[index] != 1)
      rewrites.push_back({op, 1, index});
    return same(moved(a));
  }
  if (llvm::isa<onnx::ReduceToShapeOp>(op)) {
    if (failed(onlyOperand0()))
      return failure();
    auto target = rankedType(op->getResult(0));
    int64_t a = *batchedAt(0) -
                (rankedType(op->getOperand(0)).getRank() - target.getRank());
    if (a < 0 || target.getDimSize(a) == 1)
      return same(BatchState::sum());
    rewrites.push_back({op, 1, a});
    return same(moved(a));
  }
  if (auto concat = llvm::dyn_cast<onnx::ConcatOp>(op)) {
    auto s = elementwise(op, op->getNumOperands());
    if (failed(s))
      return failure();
    int64_t rank = rankedType(op->getResult(0)).getRank();
    int64_t axis = intAttr(op, "axis", 0);
    if (axis < 0)
      axis += rank;
    if (s->isBatched() && s->axis == axis)
      return batchError(op) << "it concatenates along the batch axis";
    for (auto [i, v] : llvm::enumerate(op->getOperands()))
      if (stateOf(v).isFree())
        return batchError(op) << "operand #" << i
                              << " does not depend on the batch but spans it";
    return same(*s);
  }
  if (llvm::isa<onnx::SplitOp>(op)) {
    if (failed(onlyOperand0()))
      return failure();
    int64_t rank = rankedType(op->getOperand(0)).getRank();
    int64_t axis = intAttr(op, "axis", 0);
    if (axis < 0)
      axis += rank;
    if (axis == *batchedAt(0))
      return batchError(op) << "it splits along the batch axis";
    return same(stateOf(op->getOperand(0)));
  }
  if (llvm::isa<onnx::SliceOp>(op)) {
    if (failed(onlyOperand0()))
      return failure();
    int64_t rank = rankedType(op->getOperand(0)).getRank();
    auto axes = onnx::isNone(op->getOperand(3))
                    ? std::optional<SmallVector<int64_t>>(
                          llvm::to_vector(llvm::seq<int64_t>(0, rank)))
                    : onnx::getConstantInts(op->getOperand(3));
    if (!axes)
      return batchError(op) << "its axes are not a constant";
    for (int64_t x : *axes)
      if ((x < 0 ? x + rank : x) == *batchedAt(0)) {
        auto in = rankedType(op->getOperand(0));
        auto out = rankedType(op->getResult(0));
        if (in.getDimSize(*batchedAt(0)) != out.getDimSize(*batchedAt(0)))
          return batchError(op) << "it slices the batch axis";
        return batchError(op) << "it names the batch axis (slice it per "
                                 "micro-batch is not supported)";
      }
    return same(stateOf(op->getOperand(0)));
  }
  if (auto gather = llvm::dyn_cast<onnx::GatherOp>(op)) {
    int64_t rank = rankedType(op->getOperand(0)).getRank();
    int64_t axis = intAttr(op, "axis", 0);
    if (axis < 0)
      axis += rank;
    int64_t indRank = rankedType(op->getOperand(1)).getRank();
    std::optional<int64_t> d = batchedAt(0), ind = batchedAt(1);
    if (d && ind)
      return batchError(op) << "both its data and its indices are batched";
    if (ind)
      return same(moved(axis + *ind));
    if (*d == axis)
      return batchError(op) << "it gathers along the batch axis";
    return same(moved(*d < axis ? *d : *d + indRank - 1));
  }
  if (llvm::isa<onnx::GatherGradOp>(op)) {
    // (dY, shape, indices): dX has `shape`, the data's.
    int64_t axis = intAttr(op, "axis", 0);
    auto data = rankedType(op->getResult(0));
    if (axis < 0)
      axis += data.getRank();
    int64_t indRank = rankedType(op->getOperand(2)).getRank();
    std::optional<int64_t> g = batchedAt(0), ind = batchedAt(2);
    if (ind) {
      // An embedding's gradient: a scatter-add over the samples.
      if (!g || *g != axis + *ind)
        return batchError(op) << "its gradient and indices disagree on the "
                                 "batch axis";
      return same(BatchState::sum());
    }
    if (!g || (*g >= axis && *g < axis + indRank))
      return batchError(op) << "it scatters along the batch axis";
    int64_t a = *g < axis ? *g : *g - indRank + 1;
    rewrites.push_back({op, 1, a});
    return same(moved(a));
  }
  if (llvm::isa<onnx::GatherElementsOp, onnx::ScatterElementsOp,
                onnx::GatherElementsGradOp, onnx::ScatterElementsGradOp>(op)) {
    // Entry by entry along `axis`: data (GatherElementsGrad's dY), indices
    // and updates share their other axes, so the batch must be one of those
    // (torch.gather(logits, 1, y[:, None])), each operand batched there or
    // uniform along it (a zeros tensor scattered into), or it is the axis
    // itself when a batch-independent table is gathered from per sample.
    bool gatherGrad = llvm::isa<onnx::GatherElementsGradOp>(op);
    bool gather = llvm::isa<onnx::GatherElementsOp>(op);
    SmallVector<unsigned> tensors = {0, gatherGrad ? 2u : 1u};
    if (llvm::isa<onnx::ScatterElementsOp>(op))
      tensors.push_back(2);
    int64_t rank = rankedType(op->getOperand(0)).getRank();
    int64_t axis = intAttr(op, "axis", 0);
    if (axis < 0)
      axis += rank;
    std::optional<int64_t> a;
    BatchState factors;
    for (unsigned i : tensors)
      if (std::optional<int64_t> b = batchedAt(i)) {
        if (a && (*a != *b || !factors.sameFactors(stateOf(op->getOperand(i)))))
          return batchError(op) << "its operands have the batch on different "
                                   "axes ("
                                << *a << " and " << *b << ")";
        a = b;
        factors = stateOf(op->getOperand(i));
      }
    if (!a)
      return batchError(op) << "only its shape depends on the batch";
    if (*a == axis) {
      if (gather && !batchedAt(0))
        return same(moved(axis)); // a table's entries, per sample
      if (gatherGrad && batchedAt(0) && batchedAt(2))
        return same(BatchState::sum()); // the table's gradient
      return batchError(op) << (gather || gatherGrad ? "it gathers" : "it scatters")
                            << " along the batch axis";
    }
    for (unsigned i : tensors) {
      Value v = op->getOperand(i);
      if (!stateOf(v).isFree())
        continue;
      SmallVector<std::pair<Value, int64_t>> spread;
      SmallVector<std::pair<Operation *, int64_t>> expands;
      if (!spreadUniformly(v, *a, spread, expands, 0) ||
          rankedType(v).getDimSize(*a) == 1)
        return batchError(op) << "operand #" << i << " (" << v.getType()
                              << ") does not depend on the batch but spans "
                                 "the batch axis "
                              << *a;
      spreadFor(op, v, factors, spread, expands);
    }
    if (gatherGrad)
      rewrites.push_back({op, 1, *a});
    return same(factors.on(*a));
  }
  if (llvm::isa<onnx::GatherNDOp, onnx::GatherNDGradOp>(op)) {
    // GatherND (data, indices): y.shape = indices.shape[:-1] +
    // data.shape[b + k:]. GatherNDGrad (dY, shape, indices): dX has data's.
    bool grad = llvm::isa<onnx::GatherNDGradOp>(op);
    unsigned idxOperand = grad ? 2 : 1;
    int64_t b = intAttr(op, "batch_dims", 0);
    auto idxType = rankedType(op->getOperand(idxOperand));
    int64_t q = idxType.getRank(), k = idxType.getDimSize(q - 1);
    std::optional<int64_t> d = batchedAt(0), ind = batchedAt(idxOperand);
    if (ind) {
      // Batch axes paired by batch_dims: the samples' own tuples.
      if (b >= 1 && *ind == 0 && d && *d == 0) {
        if (grad)
          rewrites.push_back({op, 1, 0});
        return same(moved(0));
      }
      if (b >= 1 || *ind == q - 1)
        return batchError(op) << "its indices are batched on an axis that is "
                                 "not one of batch_dims paired with its data's";
      if (!grad) {
        if (d)
          return batchError(op) << "both its data and its indices are batched";
        return same(moved(*ind)); // per-sample tuples into a table
      }
      if (!d || *d != *ind)
        return batchError(op) << "its gradient and indices disagree on the "
                                 "batch axis";
      return same(BatchState::sum()); // a table's gradient: over the samples
    }
    // Indices shared by every sample: the batch must be in the slices, or
    // the tuples name each sample alike (`h[:, i]` gathers at (b, i)).
    int64_t first = grad ? q - 1 : b + k; // the slices' first axis in operand 0
    if (d && *d < first && b == 0 && stateOf(op->getOperand(0)).isPlain()) {
      if (!grad) {
        if (auto a = sampleAxis(op->getOperand(idxOperand), *d)) {
          sampleIndexRewrites.push_back({op, idxOperand, *a});
          return same(moved(*a));
        }
      } else {
        for (int64_t j = 0; j < k; ++j)
          if (sampleAxis(op->getOperand(idxOperand), j) == *d) {
            sampleIndexRewrites.push_back({op, idxOperand, *d});
            rewrites.push_back({op, 1, j});
            return same(moved(j));
          }
      }
    }
    if (!d || *d < first)
      return batchError(op) << (grad ? "it scatters" : "it gathers")
                            << " along the batch axis (with indices that do "
                               "not name every sample alike)";
    int64_t a = grad ? *d - (q - 1) + b + k : *d - (b + k) + (q - 1);
    if (grad)
      rewrites.push_back({op, 1, a});
    return same(moved(a));
  }
  if (llvm::isa<onnx::ScatterNDOp, onnx::ScatterNDGradOp>(op)) {
    // ScatterND (data, indices, updates): updates.shape = indices.shape[:-1]
    // + data.shape[k:]; ScatterNDGrad (dY, indices) has data's shape.
    if (!stateOf(op->getOperand(1)).isFree())
      return batchError(op) << "its indices depend on the batch";
    auto idxType = rankedType(op->getOperand(1));
    int64_t q = idxType.getRank(), k = idxType.getDimSize(q - 1);
    std::optional<int64_t> d = batchedAt(0);
    if (!d)
      return batchError(op) << "operand #0 does not depend on the batch but "
                               "spans it (its updates do)";
    // The batch in the slices, or tuples that name each sample alike
    // (PyTorch's `h[:, i] = v` scatters at (b, i) for every sample b): then
    // the updates have the samples on the indices' sample axis.
    int64_t updatesAxis = *d - k + (q - 1);
    if (*d < k) {
      std::optional<int64_t> a;
      if (stateOf(op->getOperand(0)).isPlain())
        a = sampleAxis(op->getOperand(1), *d);
      if (!a)
        return batchError(op) << "it scatters along the batch axis (with "
                                 "indices that do not name every sample alike: "
                                 "assign to all of them, as h[:, i] = v, or use "
                                 "--microbatches 1)";
      sampleIndexRewrites.push_back({op, 1, *a});
      updatesAxis = *a;
    }
    if (llvm::isa<onnx::ScatterNDOp>(op)) {
      std::optional<int64_t> u = batchedAt(2);
      if (!u)
        return batchError(op) << "operand #2 does not depend on the batch but "
                                 "spans it";
      if (*u != updatesAxis ||
          !stateOf(op->getOperand(2)).sameFactors(stateOf(op->getOperand(0))))
        return batchError(op) << "its data and updates disagree on the batch "
                                 "axis";
    }
    return same(stateOf(op->getOperand(0)));
  }
  if (llvm::isa<onnx::AveragePoolGradOp, onnx::GlobalAveragePoolGradOp,
                onnx::SliceGradOp>(op)) {
    if (failed(onlyOperand0()))
      return failure();
    int64_t a = *batchedAt(0);
    if (llvm::isa<onnx::SliceGradOp>(op) ? false : a != 0)
      return batchError(op) << "the batch must be on axis 0";
    rewrites.push_back({op, 1, a});
    return same(moved(a));
  }
  if (llvm::isa<onnx::ConvOp, onnx::ConvTransposeOp, onnx::MaxPoolOp,
                onnx::AveragePoolOp, onnx::GlobalAveragePoolOp>(op)) {
    if (failed(onlyOperand0()) || *batchedAt(0) != 0)
      return batchError(op) << "only its input may be batched, on axis 0";
    return same(moved(0));
  }
  if (llvm::isa<onnx::ConvGradOp>(op)) {
    // (dY, X, W, ...) -> (dX, dW, dB): dW and dB sum over the samples.
    if (batchedAt(0) != 0 || batchedAt(1) != 0)
      return batchError(op) << "its gradient and input must be batched on "
                               "axis 0";
    SmallVector<BatchState> r(n, BatchState::sum());
    r[0] = moved(0);
    return r;
  }
  if (llvm::isa<onnx::MaxPoolGradOp>(op)) {
    if (batchedAt(0) != 0 || batchedAt(1) != 0)
      return batchError(op) << "its input and gradient must be batched on "
                               "axis 0";
    return same(moved(0));
  }
  if (llvm::isa<onnx::DropoutOp, onnx::DropoutGradOp>(op)) {
    if (llvm::isa<onnx::DropoutOp>(op) && failed(onlyOperand0()))
      return failure();
    auto s = elementwise(op, llvm::isa<onnx::DropoutGradOp>(op) ? 2 : 1);
    if (failed(s))
      return failure();
    return same(*s);
  }
  if (llvm::isa<onnx::AttentionOp, onnx::AttentionGradOp>(op)) {
    // Attention (Q K V attn_mask) and AttentionGrad (Q K V Probs dY): every
    // tensor but the mask batched on axis 0 alike (Probs (B, H, T, S) too);
    // the results (Y, Probs; dQ, dK, dV) likewise. The mask is the same
    // for every sample, or per sample (a key padding mask of (B, 1, 1, S))
    // batched on axis 0 as Q is.
    // With seq_first Q, K, V, dY and Y (T | S, B, .) are batched on axis
    // 1, Probs (B, H, T, S) and the mask on axis 0 still.
    bool grad = llvm::isa<onnx::AttentionGradOp>(op);
    auto sf = op->getAttrOfType<IntegerAttr>("seq_first");
    const int64_t axis = sf && sf.getInt() == 1 ? 1 : 0;
    BatchState q = stateOf(op->getOperand(0));
    for (unsigned i = 0; i < op->getNumOperands(); ++i) {
      Value v = op->getOperand(i);
      if (llvm::isa<NoneType>(v.getType()))
        continue;
      BatchState st = stateOf(v);
      if (!grad && i == 3) {
        if (!st.isFree() &&
            !(st.isBatched() && st.axis == 0 && st.isPlain() && st.sameFactors(q) &&
              rankedType(v).getRank() == 4))
          return batchError(op) << "its attn_mask depends on the batch other than "
                                   "as a (batch, 1 | heads, 1 | T, S) mask batched "
                                   "on axis 0 as Q is";
        continue;
      }
      const int64_t want = grad && i == 3 ? 0 : axis;
      if (!(st.isBatched() && st.axis == want && st.isPlain() && st.sameFactors(q)))
        return batchError(op) << "operand #" << i << " must be batched on axis " << want
                              << " as Q is";
    }
    SmallVector<BatchState> r = same(moved(axis));
    if (!grad && r.size() > 1)
      r[1] = moved(0); // the probabilities (B, H, T, S)
    return r;
  }
  if (llvm::isa<onnx::LayerNormalizationOp>(op)) {
    if (failed(onlyOperand0()))
      return failure();
    int64_t rank = rankedType(op->getOperand(0)).getRank();
    int64_t axis = intAttr(op, "axis", -1);
    if (axis < 0)
      axis += rank;
    if (*batchedAt(0) >= axis)
      return batchError(op) << "it normalizes over the batch axis";
    return same(stateOf(op->getOperand(0)));
  }
  if (llvm::isa<onnx::LayerNormalizationGradOp>(op)) {
    // (X, Scale, Mean, InvStdDev, dY) -> (dX, dScale, dB)
    std::optional<int64_t> x = batchedAt(0);
    if (!x || batchedAt(4) != x)
      return batchError(op) << "its input and gradient must share the batch "
                               "axis";
    SmallVector<BatchState> r(n, BatchState::sum());
    r[0] = moved(*x);
    return r;
  }
  if (auto bn = llvm::dyn_cast<onnx::BatchNormalizationOp>(op)) {
    // (X, scale, B, input_mean, input_var) -> (Y, running_mean, running_var)
    if (failed(onlyOperand0()) || *batchedAt(0) != 0)
      return batchError(op) << "only its input may be batched, on axis 0";
    SmallVector<BatchState> r(n, BatchState::running());
    r[0] = moved(0);
    return r;
  }
  if (llvm::isa<onnx::BatchNormalizationGradOp>(op)) {
    // (X, scale, dY) -> (dX, dscale, dB): the micro-batch's statistics.
    if (batchedAt(0) != 0 || batchedAt(2) != 0 ||
        !stateOf(op->getOperand(1)).isFree())
      return batchError(op) << "its input and gradient must be batched on "
                               "axis 0";
    SmallVector<BatchState> r(n, BatchState::sum());
    r[0] = moved(0);
    return r;
  }
  if (llvm::isa<onnx::LSTMOp, onnx::GRUOp, onnx::LSTMGradOp, onnx::GRUGradOp>(
          op)) {
    // Layout 0: X (seq, batch, in) on axis 1, initial_h/_c and Y_h/Y_c
    // (dirs, batch, hidden) on 1, Y (seq, dirs, batch, hidden) on 2, the
    // training form's saved states (dirs * planes * seq, batch, hidden) on
    // 1; W, R, B, sequence_lens free. The gradient op (X W R B h0 [c0] dY
    // dY_h [dY_c] Saved) -> (dX dW dR dB dh0 [dc0]): dW, dR, dB sum over
    // the samples.
    bool grad = llvm::isa<onnx::LSTMGradOp, onnx::GRUGradOp>(op);
    bool lstm = llvm::isa<onnx::LSTMOp, onnx::LSTMGradOp>(op);
    if (intAttr(op, "layout", 0) != 0)
      return batchError(op) << "only layout 0 is micro-batched";
    unsigned states = grad ? 4 : 5, numStates = lstm ? 2 : 1;
    unsigned dY = states + numStates;
    for (unsigned i = 0; i < op->getNumOperands(); ++i) {
      Value v = op->getOperand(i);
      BatchState s = stateOf(v);
      int64_t want = -1;
      if (i == 0 || (i >= states && i < states + numStates))
        want = 1;
      if (grad && i >= dY)
        want = i == dY ? 2 : 1;
      if (want < 0 && !s.isFree())
        return batchError(op) << "operand #" << i << " depends on the batch";
      if (want >= 0 && !llvm::isa<NoneType>(v.getType()) &&
          !(s.isBatched() && s.axis == want && s.isPlain()))
        return batchError(op) << "operand #" << i << " must be batched on axis "
                              << want << " (layout 0)";
    }
    if (!grad) {
      SmallVector<BatchState> r(n, BatchState::batched(1));
      r[0] = BatchState::batched(2);
      return r;
    }
    SmallVector<BatchState> r(n, BatchState::batched(1));
    r[1] = r[2] = r[3] = BatchState::sum();
    return r;
  }
  if (llvm::isa<onnx::ShapeOp>(op))
    return batchError(op) << "it reads the batch size as data";
  return op->emitOpError()
         << "has no micro-batching rule: cannot tell where the batch axis of "
            "its results is";
}

LogicalResult PipeMicrobatchPass::analyze(Operation *op) {
  auto results = transfer(op);
  if (failed(results))
    return failure();
  for (auto [v, s] : llvm::zip(op->getResults(), *results)) {
    if (s.isBatched() && !rankedType(v))
      return op->emitOpError() << "a batched result must be a ranked tensor";
    states[v] = s;
    if (s.kind == BatchState::Step) {
      Operation *origin = op;
      for (Value operand : op->getOperands())
        if (Operation *o = stepOrigin.lookup(operand))
          origin = o;
      stepOrigin[v] = origin;
    }
  }
  return success();
}

void PipeMicrobatchPass::noteOrigin(InFlightDiagnostic &d, Value v) {
  if (Operation *origin = stepOrigin.lookup(v)) {
    // A term of the weights added to a mean loss (an L2 penalty): its
    // gradient would be taken per micro-batch at 1/M.
    bool penalty = llvm::isa<onnx::AddOp, onnx::SubOp>(origin) &&
                   llvm::any_of(origin->getOperands(), [&](Value o) {
                     return stateOf(o).isFree() && !isConstantOp(o);
                   });
    d.attachNote(origin->getLoc())
        << "'" << origin->getName() << "' here is not linear in a reduction over the batch"
        << (penalty ? " (it adds a term computed from the weights alone: for an L2 penalty "
                      "use --weight-decay, or compile with --microbatches 1)"
                    : "");
  }
  else if (Operation *def = v.getDefiningOp())
    d.attachNote(def->getLoc()) << "computed here";
}


static int64_t stageOfOp(Operation *op) {
  if (auto s = op->getAttrOfType<IntegerAttr>(pipe::attrs::kStage))
    return s.getInt();
  return 0;
}

bool PipeMicrobatchPass::isWhole(Operation *op) const {
  return !wholeStages.empty() && wholeStages.contains(stageOfOp(op));
}

/// Whole-batch stages keep the batch B; the values crossing between them and
/// micro-batched stages (or the data inputs) go through markers: a Concat of
/// M copies of the micro-batch value in the reading whole-batch stage (copy
/// k is micro-batch k once pipe-schedule wires them), a Split into M parts
/// in the producing whole-batch stage (part k is micro-batch k's slice).
LogicalResult
PipeMicrobatchPass::insertWholeBatchBoundaries(func::FuncOp step) {
  Block &body = step.getBody().front();
  OpBuilder b(step.getContext());
  int64_t m = microbatches;
  llvm::DenseMap<Value, Value> splitOf;
  std::map<std::pair<const void *, int64_t>, Value> concatOf;
  auto checkPlain = [&](Operation *user, Value v,
                        BatchState s) -> LogicalResult {
    if (s.isPlain())
      return success();
    return user->emitOpError()
           << "crosses between a whole-batch and a micro-batched stage "
              "(--batchnorm full-batch) with a value batched on a merged "
              "axis (#"
           << s.axis << " of " << v.getType()
           << "): only a plain batch axis is cut into micro-batches there";
  };
  auto splitFor = [&](Value v, BatchState s) -> Value {
    Value &part = splitOf[v];
    if (part)
      return part;
    Operation *def = v.getDefiningOp();
    b.setInsertionPointAfter(def);
    auto t = llvm::cast<RankedTensorType>(v.getType());
    SmallVector<int64_t> shape(t.getShape());
    shape[s.axis] /= m;
    SmallVector<Type> types(m, t.clone(shape));
    Value none = onnx::NoValueOp::create(b, def->getLoc(),
                                         b.getNoneType());
    auto split = onnx::SplitOp::create(b, def->getLoc(), types, v, none,
                                       b.getI64IntegerAttr(s.axis),
                                       IntegerAttr());
    split->setAttr(pipe::attrs::kStage,
                   b.getI64IntegerAttr(stageOfOp(def)));
    split->setAttr(wholebatch::kSplit, b.getUnitAttr());
    for (Value r : split.getResults())
      states[r] = s;
    return part = split.getResult(0);
  };
  for (Operation &op : llvm::make_early_inc_range(body.without_terminator())) {
    // The clipping ops (pipe-add-optimizer) read every stage's gradient;
    // pipe-split-stages drops them for pipe.clip_grad_norm.
    if (op.hasAttr(wholebatch::kSplit) || op.hasAttr(wholebatch::kConcat) ||
        op.hasAttr(pipe::attrs::kClip) || llvm::isa<onnx::NoValueOp>(op))
      continue;
    bool whole = isWhole(&op);
    int64_t stage = stageOfOp(&op);
    for (OpOperand &use : op.getOpOperands()) {
      Value v = use.get();
      BatchState s = stateOf(v);
      Operation *def = v.getDefiningOp();
      bool fromWhole = def && isWhole(def);
      int64_t fromStage = def ? stageOfOp(def) : -1;
      if (fromWhole == whole && (!whole || fromStage == stage))
        continue;
      if (s.isFree())
        continue;
      if (!s.isBatched() && op.hasAttr(pipe::attrs::kGradSum))
        return op.emitOpError()
               << "sums the gradient contributions of stage " << fromStage
               << (fromWhole ? " (whole-batch)" : " (micro-batched)")
               << " and stage " << stage
               << (whole ? " (whole-batch)" : " (micro-batched)")
               << " to one weight, such as a weight two stages share (tied "
                  "embeddings): --batchnorm full-batch cannot add a "
                  "whole-batch stage's step gradient to micro-batched ones; "
                  "cut so that its readers share a stage (--partition manual "
                  "--cut), or use --batchnorm micro-batch";
      if (!s.isBatched())
        return op.emitOpError()
               << "reads a value that is not per sample (a reduction over "
                  "the batch) from another stage across a whole-batch stage "
                  "boundary (--batchnorm full-batch)";
      if (failed(checkPlain(&op, v, s)))
        return failure();
      Value micro = fromWhole ? splitFor(v, s) : v;
      if (!whole) {
        use.set(micro);
        continue;
      }
      Value &concat = concatOf[{micro.getAsOpaquePointer(), stage}];
      if (!concat) {
        b.setInsertionPoint(&op);
        SmallVector<Value> copies(m, micro);
        auto c = onnx::ConcatOp::create(b, op.getLoc(), v.getType(), copies,
                                        b.getI64IntegerAttr(s.axis));
        c->setAttr(pipe::attrs::kStage, b.getI64IntegerAttr(stage));
        c->setAttr(wholebatch::kConcat, b.getUnitAttr());
        states[c.getResult()] = s;
        concat = c.getResult();
      }
      use.set(concat);
    }
  }
  return success();
}

void PipeMicrobatchPass::runOnOperation() {
  ModuleOp module = getOperation();
  auto step = module.lookupSymbol<func::FuncOp>(funcName);
  if (!step || step.isExternal()) {
    module.emitError() << "pipe-microbatch: no function @" << funcName
                       << " (run --pipe-autodiff first)";
    return signalPassFailure();
  }
  if (microbatches < 1) {
    step.emitError() << "pipe-microbatch: microbatches must be at least 1, got "
                     << int64_t(microbatches);
    return signalPassFailure();
  }
  // The batch dims grow by the replicas: keep them far from overflowing.
  if (replicas > (int64_t(1) << 20)) {
    step.emitError() << "pipe-microbatch: replicas must be at most " << (int64_t(1) << 20)
                     << ", got " << int64_t(replicas);
    return signalPassFailure();
  }
  if (step->hasAttr(pipe::attrs::kMicrobatches)) {
    step.emitError() << "@" << funcName << " is micro-batched already";
    return signalPassFailure();
  }
  Block &body = step.getBody().front();
  auto ret = llvm::cast<func::ReturnOp>(body.getTerminator());

  // The batch size, from the data inputs.
  std::optional<unsigned> firstInput;
  for (unsigned i = 0; i < step.getNumArguments(); ++i) {
    if (!step.getArgAttr(i, pipe::attrs::kInput))
      continue;
    auto t = rankedType(step.getArgument(i));
    if (!t || t.getRank() == 0 || t.isDynamicDim(0)) {
      step.emitError() << "pipe-microbatch: input #" << i
                       << " needs a static batch axis 0, got "
                       << step.getArgument(i).getType();
      return signalPassFailure();
    }
    if (!firstInput) {
      firstInput = i;
      batch = t.getDimSize(0);
    } else if (t.getDimSize(0) != batch) {
      step.emitError() << "pipe-microbatch: inputs #" << *firstInput << " and #"
                       << i << " disagree on the batch size (" << batch
                       << " and " << t.getDimSize(0) << ")";
      return signalPassFailure();
    }
    states[step.getArgument(i)] = BatchState::batched(0);
  }
  if (!firstInput) {
    step.emitError() << "pipe-microbatch: @" << funcName
                     << " has no pipe.input argument to take the batch from";
    return signalPassFailure();
  }
  if (batch % microbatches != 0) {
    step.emitError() << "pipe-microbatch: the batch size B = " << batch
                     << " is not divisible by microbatches M = "
                     << int64_t(microbatches);
    return signalPassFailure();
  }

  // One micro-batch of one pipeline splits nothing: a step that could not
  // be micro-batched (a class-weighted mean loss, per-sample losses
  // combined non-linearly, ...) runs as it is, its loss the step's.
  const bool unsplit = microbatches == 1 && replicas == 1;
  auto asItIs = [&] {
    OpBuilder b(step.getContext());
    step->setAttr(pipe::attrs::kMicrobatches, b.getI64IntegerAttr(1));
    step->setAttr(pipe::attrs::kBatchSize, b.getI64IntegerAttr(batch));
    step->setAttr(pipe::attrs::kLossCombine, b.getStringAttr("mean"));
    step->setAttr(pipe::attrs::kLossScale, b.getF64FloatAttr(1.0));
  };
  bool refused = false;
  {
    std::optional<ScopedDiagnosticHandler> quiet;
    if (unsplit)
      quiet.emplace(&getContext(), [&](Diagnostic &d) {
        if (d.getSeverity() != DiagnosticSeverity::Error)
          return failure();
        refused = true;
        return success();
      });
    for (Operation &op : body.without_terminator())
      if (failed(analyze(&op))) {
        if (!unsplit)
          return signalPassFailure();
        refused = true;
        break;
      }
  }
  if (refused)
    return asItIs();
  // Chains copied for their per-micro-batch users and used no more.
  SmallVector<Operation *> origins(spreadOrigins.begin(), spreadOrigins.end());
  for (bool erased = true; erased;) {
    erased = false;
    for (Operation *&origin : origins)
      if (origin && origin->use_empty()) {
        // (No state may outlive its value: a later op could take its place.)
        for (Value r : origin->getResults())
          states.erase(r);
        origin->erase();
        origin = nullptr;
        erased = true;
      }
  }

  // The results: the loss a mean or sum over the batch, gradients sums.
  std::optional<unsigned> lossIndex;
  for (unsigned r = 0; r < step.getNumResults(); ++r) {
    Value v = ret.getOperand(r);
    BatchState s = stateOf(v);
    if (step.getResultAttr(r, pipe::attrs::kLoss)) {
      lossIndex = r;
      if (!s.isReduced()) {
        if (unsplit)
          return asItIs();
        InFlightDiagnostic d = step.emitError()
                               << "pipe-microbatch: the loss (result #" << r
                               << ") is not a mean or sum over the batch";
        noteOrigin(d, v);
        return signalPassFailure();
      }
      continue;
    }
    if (step.getResultAttr(r, pipe::attrs::kUpdate)) {
      if (s.kind == BatchState::Running)
        continue;
      if (s.isBatched()) {
        step.emitError() << "pipe-microbatch: update result #" << r
                         << " has one value per sample";
        return signalPassFailure();
      }
      continue;
    }
    if (s.kind != BatchState::Sum && !(s.isFree() && isConstantOp(v))) {
      if (unsplit)
        return asItIs();
      InFlightDiagnostic d = step.emitError()
                             << "pipe-microbatch: result #" << r
                             << " is not a sum over the batch: summed over "
                                "the micro-batches it would not be the "
                                "step's";
      noteOrigin(d, v);
      return signalPassFailure();
    }
  }
  if (!lossIndex) {
    step.emitError() << "pipe-microbatch: @" << funcName
                     << " has no pipe.loss result";
    return signalPassFailure();
  }
  bool lossIsMean =
      stateOf(ret.getOperand(*lossIndex)).kind == BatchState::Mean;

  // --batchnorm full-batch: the stages of training-mode BatchNormalizations
  // run on the whole batch.
  if (batchnorm != "micro-batch" && batchnorm != "full-batch") {
    step.emitError() << "pipe-microbatch: batchnorm must be micro-batch or "
                        "full-batch, not '"
                     << batchnorm << "'";
    return signalPassFailure();
  }
  if (batchnorm == "full-batch" && microbatches > 1) {
    for (Operation &op : body.without_terminator())
      if (auto bn = llvm::dyn_cast<onnx::BatchNormalizationOp>(op);
          bn && bn.getTrainingMode() == 1)
        wholeStages.insert(stageOfOp(&op));
    if (!wholeStages.empty() && failed(insertWholeBatchBoundaries(step)))
      return signalPassFailure();
  }
  // A loss computed by a whole-batch stage is the step's: it is reported
  // for every micro-batch and averaged back.
  bool wholeLoss = false;
  if (Operation *def = ret.getOperand(*lossIndex).getDefiningOp())
    wholeLoss = isWhole(def);

  if (replicas < 1) {
    step.emitError() << "pipe-microbatch: replicas must be >= 1, not " << int64_t(replicas);
    return signalPassFailure();
  }
  if (ignoredLabels != "step" && ignoredLabels != "micro-batch") {
    step.emitError() << "pipe-microbatch: ignored-labels must be step or "
                        "micro-batch, not '"
                     << ignoredLabels << "'";
    return signalPassFailure();
  }
  // A mean loss with ignore_index averages over the labels it counts. Where
  // it can, the step's loss is the mean over the step's counted labels:
  // the loss op feeds the returned loss through ops linear in it (Mul or
  // Div by a batch-independent value, Neg, Identity), and its labels are a
  // function of graph inputs alone. Those ops are cloned onto new
  // arguments holding the inputs' whole step (pipe.step_input; with
  // replicas = P, all P pipelines' batches), C is counted from the cloned
  // labels, and the loss op and its gradient op become sums scaled by 1/C
  // (P/C). Else the micro-batches' means are averaged (pipe.loss_mean).
  // Mean losses with ignore_index or class weights made the step's mean
  // (their loss and gradient ops sum-reduced, scaled by 1/C).
  llvm::SmallPtrSet<Operation *, 4> exactLosses, exactGrads;
  bool ignoring = false;
  auto weighted = [](Operation *op) {
    return op->getNumOperands() > 2 && !onnx::isNone(op->getOperand(2));
  };
  auto isLossOp = [](Operation *op) {
    return llvm::isa<onnx::SoftmaxCrossEntropyLossOp, onnx::NegativeLogLikelihoodLossOp>(op);
  };
  SmallVector<Operation *> ignoringLosses;
  for (Operation &op : body.without_terminator())
    if (isLossOp(&op) && (op.hasAttr("ignore_index") || weighted(&op)) &&
        strAttr(&op, "reduction", "mean") == "mean" && !isWhole(&op)) {
      ignoring = true;
      ignoringLosses.push_back(&op);
    }
  OpBuilder b(step.getContext());
  // `use` times 1/M, computed right before its user (on the user's stage).
  auto scaleByInverseM = [&](OpOperand &use, const char *what) -> LogicalResult {
    Value v = use.get();
    auto type = llvm::cast<RankedTensorType>(v.getType());
    Operation *user = use.getOwner();
    b.setInsertionPoint(user);
    autodiff::OnnxBuilder ob(b, user->getLoc());
    auto scale = onnx::ConstantOp::create(
        b, user->getLoc(), type,
        DenseElementsAttr::get(
            type, b.getFloatAttr(type.getElementType(), 1.0 / double(microbatches))));
    Value scaled = ob.mul(v, scale);
    if (ob.failed() || scaled.getType() != type)
      return user->emitError("pipe-microbatch: cannot scale ") << what;
    if (Attribute stage = user->getAttr(pipe::attrs::kStage)) {
      scale->setAttr(pipe::attrs::kStage, stage);
      scaled.getDefiningOp()->setAttr(pipe::attrs::kStage, stage);
    }
    use.set(scaled);
    return success();
  };
  if (ignoring && (microbatches > 1 || replicas > 1) && ignoredLabels == "step") {
    // The returned loss as a sum of terms: from it through ops linear in
    // it (Add and Sub, Mul or Div by a batch-independent value, Neg,
    // Identity) to its terms, each where it is used (BERT's MLM + NSP: two
    // cross-entropies added). A term is a loss op to make the step's mean,
    // or (with several terms) a mean over the batch or a constant, which
    // the sum over the micro-batches then takes 1/M of.
    Value lossRet = ret.getOperand(*lossIndex);
    struct Term {
      OpOperand *use;
      Operation *ce = nullptr, *grad = nullptr;
      llvm::SetVector<Operation *> slice;
      llvm::SetVector<BlockArgument> fed;
    };
    SmallVector<Term> terms;
    bool fits = true;
    SmallVector<OpOperand *> uses{&ret->getOpOperand(*lossIndex)};
    while (fits && !uses.empty()) {
      OpOperand *use = uses.pop_back_val();
      Value v = use->get();
      Operation *d = v.getDefiningOp();
      if (stateOf(v).isFree() && v != lossRet) {
        // A constant added to the loss.
        fits = isConstantOp(v);
        terms.push_back({use});
        continue;
      }
      if (!v.hasOneUse() && v != lossRet) {
        fits = false;
        break;
      }
      if (d && llvm::isa<onnx::IdentityOp, onnx::NegOp>(d)) {
        uses.push_back(&d->getOpOperand(0));
        continue;
      }
      if (d && llvm::isa<onnx::MulOp, onnx::DivOp>(d)) {
        // Times (or over) a batch-independent value: one operand free, the
        // loss the other (a Div's numerator).
        bool free0 = stateOf(d->getOperand(0)).isFree();
        bool free1 = stateOf(d->getOperand(1)).isFree();
        if (free0 == free1 || (llvm::isa<onnx::DivOp>(d) && !free1)) {
          fits = false;
          break;
        }
        uses.push_back(&d->getOpOperand(free1 ? 0 : 1));
        continue;
      }
      if (d && llvm::isa<onnx::AddOp, onnx::SubOp>(d)) {
        uses.push_back(&d->getOpOperand(1));
        uses.push_back(&d->getOpOperand(0));
        continue;
      }
      terms.push_back({use});
    }
    // Several terms: the loss a mean over the batch (Mean + Mean; not a sum,
    // nor scaled by a weight-dependent factor).
    if (terms.size() > 1 && stateOf(lossRet).kind != BatchState::Mean)
      fits = false;
    SmallVector<Operation *> grads;
    for (Operation *g : meanLossGrads)
      if (!isWhole(g))
        grads.push_back(g);
    for (Term &t : terms) {
      if (!fits)
        break;
      Value v = t.use->get();
      Operation *ce = v.getDefiningOp();
      if (!ce || !isLossOp(ce) || !llvm::is_contained(ignoringLosses, ce)) {
        // Another term: a mean over the batch or a constant.
        auto type = llvm::dyn_cast<RankedTensorType>(v.getType());
        fits = terms.size() > 1 && type && type.getElementType().isF32() &&
               (stateOf(v).kind == BatchState::Mean || stateOf(v).isFree());
        continue;
      }
      // Its gradient op: the one mean-reduced loss gradient of its labels.
      for (Operation *g : grads)
        if (g->getOperand(2) == ce->getOperand(1) &&
            g->getAttr("ignore_index") == ce->getAttr("ignore_index") &&
            (!weighted(ce) || g->getOperand(3) == ce->getOperand(2)) &&
            llvm::isa<onnx::SoftmaxCrossEntropyLossOp>(ce) ==
                llvm::isa<onnx::SoftmaxCrossEntropyLossGradOp>(g)) {
          if (t.grad)
            fits = false; // two candidates: whose is whose?
          t.grad = g;
        }
      if (!t.grad || exactGrads.contains(t.grad)) {
        fits = false;
        break;
      }
      t.ce = ce;
      exactLosses.insert(ce);
      exactGrads.insert(t.grad);
      // The labels' computation from the graph inputs (constants shared).
      SmallVector<Value> stack{ce->getOperand(1)};
      while (fits && !stack.empty()) {
        Value l = stack.pop_back_val();
        if (auto arg = llvm::dyn_cast<BlockArgument>(l)) {
          fits = arg.getOwner() == &body &&
                 step.getArgAttr(arg.getArgNumber(), pipe::attrs::kInput);
          t.fed.insert(arg);
          continue;
        }
        Operation *d = l.getDefiningOp();
        if (isConstantOp(l) || llvm::isa<onnx::NoValueOp>(d))
          continue;
        if (d->getNumRegions() || isWhole(d) ||
            llvm::isa<onnx::DropoutOp>(d) ||
            (llvm::isa<onnx::AttentionOp>(d) && d->hasAttr("dropout")) ||
            !llvm::isa<onnx::ShapeInferenceOpInterface>(d)) {
          fits = false;
          break;
        }
        if (t.slice.insert(d))
          llvm::append_range(stack, d->getOperands());
      }
    }
    // Every ignoring loss a term, every ignoring gradient its.
    for (Operation *op : ignoringLosses)
      fits = fits && exactLosses.contains(op);
    for (Operation *g : grads)
      fits = fits && (exactGrads.contains(g) ||
                      (!g->hasAttr("ignore_index") && onnx::isNone(g->getOperand(3))));
    if (!fits) {
      exactLosses.clear();
      exactGrads.clear();
    }
    llvm::DenseMap<BlockArgument, Value> wholeArgs;
    for (Term &t : fits ? terms : SmallVector<Term>{}) {
      if (!t.ce) {
        // times 1/M: the micro-batches' losses are summed.
        if (failed(scaleByInverseM(*t.use, "a loss term")))
          return signalPassFailure();
        continue;
      }
      Operation *ce = t.ce, *grad = t.grad;
      llvm::SetVector<Operation *> &slice = t.slice;
      llvm::SetVector<BlockArgument> &fed = t.fed;
      Attribute stage = ce->getAttr(pipe::attrs::kStage);
      // The whole step's arguments, each after its input's.
      IRMapping whole;
      for (BlockArgument arg : fed) {
        if (auto it = wholeArgs.find(arg); it != wholeArgs.end()) {
          whole.map(Value(arg), it->second);
          continue;
        }
        unsigned at = arg.getArgNumber();
        auto type = llvm::cast<RankedTensorType>(arg.getType());
        SmallVector<int64_t> shape(type.getShape());
        shape[0] *= replicas;
        auto name = step.getArgAttrOfType<StringAttr>(at, pipe::attrs::kInput);
        if (failed(step.insertArgument(
                at + 1, type.clone(shape),
                b.getDictionaryAttr({b.getNamedAttr(pipe::attrs::kStepInput, name)}),
                arg.getLoc())))
          return signalPassFailure();
        whole.map(Value(arg), Value(body.getArgument(at + 1)));
        wholeArgs[arg] = body.getArgument(at + 1);
      }
      // Splat constants spread over the batch (a fill value): the whole
      // step's own, at B (x P) rows.
      SmallVector<Operation *> wholeSplats;
      for (auto [op, at] : splatRewrites) {
        auto dense = llvm::cast<DenseElementsAttr>(op->getAttr("value"));
        auto splatType = llvm::cast<RankedTensorType>(dense.getType());
        SmallVector<int64_t> shape(splatType.getShape());
        shape[at] *= replicas;
        b.setInsertionPointAfter(op);
        Operation *copy = b.clone(*op);
        copy->setAttr("value", dense.resizeSplat(splatType.clone(shape)));
        copy->getResult(0).setType(splatType.clone(shape));
        whole.map(op->getResult(0), copy->getResult(0));
        wholeSplats.push_back(copy);
      }
      // The labels' ops, cloned in order before the loss op (a batch size
      // in a shape operand times P for the pipelines' batches).
      llvm::DenseMap<Operation *, SmallVector<const ShapeRewrite *>> shapeRewrites;
      for (const ShapeRewrite &rw : rewrites)
        shapeRewrites[rw.op].push_back(&rw);
      b.setInsertionPoint(ce);
      for (Operation &op : body.without_terminator()) {
        if (!slice.contains(&op))
          continue;
        Operation *copy = b.clone(op, whole);
        if (stage)
          copy->setAttr(pipe::attrs::kStage, stage);
        if (replicas > 1) {
          for (const ShapeRewrite *rw : shapeRewrites.lookup(&op)) {
            Value shape = copy->getOperand(rw->operand);
            auto entries = onnx::getConstantInts(shape);
            if (!entries) {
              op.emitOpError() << "needs a constant shape operand #" << rw->operand
                               << " to count the labels of every pipeline";
              return signalPassFailure();
            }
            (*entries)[rw->index] *= replicas;
            auto type = RankedTensorType::get({int64_t(entries->size())}, b.getI64Type());
            Operation *def = b.clone(*shape.getDefiningOp());
            def->setAttr("value", DenseElementsAttr::get(type, ArrayRef(*entries)));
            copy->setOperand(rw->operand, def->getResult(0));
          }
          if (failed(llvm::cast<onnx::ShapeInferenceOpInterface>(copy).inferShapes()))
            return signalPassFailure();
        }
      }
      for (Operation *copy : wholeSplats)
        if (copy->use_empty())
          copy->erase();
      Value labels = whole.lookupOrDefault(ce->getOperand(1));
      auto labelType = llvm::cast<RankedTensorType>(labels.getType());
      autodiff::OnnxBuilder ob(b, ce->getLoc());
      auto ignore = ce->getAttrOfType<IntegerAttr>("ignore_index");
      auto scalarType = RankedTensorType::get({}, labelType.getElementType());
      // C: the labels not ignored (each its class's weight, with class
      // weights).
      Value ignoreValue, ignored, counted, ones, safe, zero, gathered, shares;
      if (ignore) {
        ignoreValue = onnx::ConstantOp::create(
            b, ce->getLoc(), scalarType,
            DenseElementsAttr::get(scalarType,
                                   b.getIntegerAttr(labelType.getElementType(),
                                                    ignore.getValue().getSExtValue())));
        ignored = ob.create<onnx::EqualOp>({labels, ignoreValue});
        counted = ob.create<onnx::NotOp>({ignored});
        ones = ob.create<onnx::CastOp>({counted}, {ob.i64Attr("to", 1)}); // FLOAT
      }
      if (weighted(ce)) {
        // An ignored label's class index (ignore_index, e.g. -100) is not
        // one: 0 gathered there, and masked out.
        safe = labels;
        if (ignore) {
          zero = onnx::ConstantOp::create(
              b, ce->getLoc(), scalarType,
              DenseElementsAttr::get(scalarType,
                                     b.getIntegerAttr(labelType.getElementType(), 0)));
          safe = ob.create<onnx::WhereOp>({ignored, zero, labels});
        }
        gathered = ob.create<onnx::GatherOp>({ce->getOperand(2), safe},
                                             {ob.i64Attr("axis", 0)});
        shares = ignore ? ob.mul(gathered, ones) : gathered;
      } else {
        shares = ones;
      }
      Type f32 = b.getF32Type();
      Value count =
          ob.create<onnx::ReduceSumOp>({shares, ob.none()}, {ob.i64Attr("keepdims", 0)});
      // 1/C, or P/C across P data-parallel pipelines (their average).
      Value numerator, inverse;
      if (replicas > 1) {
        numerator = ob.scalar(f32, double(replicas));
        inverse = ob.div(numerator, count);
      } else {
        inverse = ob.create<onnx::ReciprocalOp>({count});
      }
      b.setInsertionPointAfter(ce);
      Value lossValue = ce->getResult(0);
      Value scaledLoss = ob.mul(lossValue, inverse);
      b.setInsertionPoint(grad);
      ob.setLoc(grad->getLoc());
      Value scaledGrad = ob.mul(grad->getOperand(0), inverse);
      if (ob.failed() || scaledLoss.getType() != lossValue.getType() ||
          scaledGrad.getType() != grad->getOperand(0).getType() ||
          llvm::cast<RankedTensorType>(count.getType()).getElementType() != f32) {
        ce->emitError("pipe-microbatch: cannot count the step's labels");
        return signalPassFailure();
      }
      for (Value c : {ignoreValue, ignored, counted, ones, zero, safe, gathered, shares, count,
                      count.getDefiningOp()->getOperand(1), inverse, scaledLoss, numerator})
        if (stage && c && c.getDefiningOp() && c != labels)
          c.getDefiningOp()->setAttr(pipe::attrs::kStage, stage);
      if (Attribute gs = grad->getAttr(pipe::attrs::kStage))
        scaledGrad.getDefiningOp()->setAttr(pipe::attrs::kStage, gs);
      lossValue.replaceAllUsesExcept(scaledLoss, scaledLoss.getDefiningOp());
      grad->setOperand(0, scaledGrad);
      ce->setAttr("reduction", b.getStringAttr("sum"));
      grad->setAttr("reduction", b.getStringAttr("sum"));
      lossIsMean = false;
    }
  }

  // A class-weighted mean not made the step's: the micro-batches' weighted
  // means averaged are not the step's (per-micro-batch methods, which
  // update on each micro-batch's own mean, take it).
  if ((microbatches > 1 || replicas > 1) && ignoredLabels == "step")
    for (Operation *op : weightedMeans)
      if (!exactLosses.contains(op) && !isWhole(op)) {
        batchError(op) << "a mean-reduced loss with class weights is not the mean of "
                          "its micro-batches' losses, and the step's weights cannot be "
                          "summed here (the loss must reach the returned loss through "
                          "Mul/Div by a constant, Neg or Identity, and its labels be "
                          "computed from graph inputs): use --microbatches 1, or "
                          "reduction sum";
        return signalPassFailure();
      }

  // Rewrite, retype, re-infer.
  for (ShapeRewrite &rw : rewrites) {
    if (isWhole(rw.op))
      continue;
    Value shape = rw.op->getOperand(rw.operand);
    auto entries = onnx::getConstantInts(shape);
    if (!entries) {
      rw.op->emitOpError() << "needs a constant shape operand #" << rw.operand
                           << " to be micro-batched";
      return signalPassFailure();
    }
    // Each use gets its own constant: rewrites are per use.
    if ((*entries)[rw.index] % microbatches != 0) {
      rw.op->emitOpError() << "has a batch dimension of "
                           << (*entries)[rw.index]
                           << " not divisible by microbatches M = "
                           << int64_t(microbatches);
      return signalPassFailure();
    }
    (*entries)[rw.index] /= microbatches;
    b.setInsertionPoint(rw.op);
    auto type = RankedTensorType::get({int64_t(entries->size())},
                                      b.getI64Type());
    Operation *def = shape.getDefiningOp();
    Operation *copy = b.clone(*def);
    copy->setAttr("value", DenseElementsAttr::get(type, ArrayRef(*entries)));
    rw.op->setOperand(rw.operand, copy->getResult(0));
    if (def->use_empty()) {
      states.erase(def->getResult(0));
      def->erase();
    }
  }
  for (ShapeRewrite &rw : sampleIndexRewrites) {
    if (isWhole(rw.op))
      continue;
    Value indices = rw.op->getOperand(rw.operand);
    auto type = llvm::cast<RankedTensorType>(indices.getType());
    auto values = onnx::getConstantInts(indices);
    SmallVector<int64_t> shape(type.getShape());
    int64_t rows = shape[rw.index] / microbatches, inner = 1;
    for (int64_t d : ArrayRef(shape).drop_front(rw.index + 1))
      inner *= d;
    // The first B/M positions along the sample axis: they name the samples
    // of whichever micro-batch runs.
    SmallVector<int64_t> kept;
    for (size_t n = 0; n < values->size(); ++n)
      if ((int64_t(n) / inner) % shape[rw.index] < rows)
        kept.push_back((*values)[n]);
    shape[rw.index] = rows;
    b.setInsertionPoint(rw.op);
    auto newType = RankedTensorType::get(shape, type.getElementType());
    Value copy = b.create<onnx::ConstantOp>(
        rw.op->getLoc(), newType,
        DenseElementsAttr::get(newType, ArrayRef(kept)));
    rw.op->setOperand(rw.operand, copy);
  }
  for (auto [op, at] : splatRewrites) {
    if (isWhole(op))
      continue;
    auto dense = llvm::cast<DenseElementsAttr>(op->getAttr("value"));
    auto t = llvm::cast<RankedTensorType>(dense.getType());
    SmallVector<int64_t> shape(t.getShape());
    if (shape[at] % microbatches != 0) {
      op->emitOpError() << "has a batch dimension of " << shape[at]
                        << " not divisible by microbatches M = " << int64_t(microbatches);
      return signalPassFailure();
    }
    shape[at] /= microbatches;
    b.setInsertionPoint(op);
    Operation *copy = b.clone(*op);
    copy->setAttr("value", dense.resizeSplat(t.clone(shape)));
    copy->getResult(0).setType(t.clone(shape));
    op->getResult(0).replaceAllUsesWith(copy->getResult(0));
    // The copy already has the micro-batch's type; the erased op's state
    // must not outlive it (a later op allocated at its address would
    // inherit it and be divided twice: two splats scattered together).
    states.erase(op->getResult(0));
    op->erase();
  }
  SmallVector<Type> argTypes(step.getArgumentTypes());
  for (unsigned i = 0; i < step.getNumArguments(); ++i) {
    if (!step.getArgAttr(i, pipe::attrs::kInput))
      continue;
    auto t = rankedType(step.getArgument(i));
    SmallVector<int64_t> shape(t.getShape());
    shape[0] /= microbatches;
    argTypes[i] = t.clone(shape);
    step.getArgument(i).setType(argTypes[i]);
  }
  for (Operation &op : body.without_terminator()) {
    SmallVector<Type> expected;
    bool whole = isWhole(&op);
    for (Value r : op.getResults()) {
      BatchState s = stateOf(r);
      Type t = r.getType();
      if (s.isBatched() && !whole) {
        auto rt = llvm::cast<RankedTensorType>(t);
        SmallVector<int64_t> shape(rt.getShape());
        shape[s.axis] /= microbatches;
        t = rt.clone(shape);
      }
      expected.push_back(t);
    }
    if (auto shaped = llvm::dyn_cast<onnx::ShapeInferenceOpInterface>(&op)) {
      if (failed(shaped.inferShapes()))
        return signalPassFailure();
    } else if (llvm::any_of(op.getOperands(),
                            [&](Value v) { return !stateOf(v).isFree(); })) {
      op.emitOpError() << "has no shape function to re-infer its types";
      return signalPassFailure();
    }
    for (auto [r, t] : llvm::zip(op.getResults(), expected))
      if (r.getType() != t) {
        op.emitOpError() << "after micro-batching result #"
                         << r.getResultNumber() << " is " << r.getType()
                         << ", expected " << t;
        return signalPassFailure();
      }
  }
  for (Operation *op : meanLossGrads) {
    // A whole-batch stage's loss gradient is the step's already.
    if (isWhole(op) || exactGrads.contains(op))
      continue;
    if (failed(scaleByInverseM(op->getOpOperand(0), "the loss gradient")))
      return signalPassFailure();
  }
  step.setType(FunctionType::get(&getContext(), argTypes,
                                 step.getResultTypes()));
  if (ignoring && (microbatches > 1 || replicas > 1))
    step->setAttr(pipe::attrs::kLossMean,
                  b.getStringAttr(!exactLosses.empty() || (wholeLoss && replicas == 1) ? "step"
                                                                            : "micro-batch"));
  step->setAttr(pipe::attrs::kMicrobatches, b.getI64IntegerAttr(microbatches));
  step->setAttr(pipe::attrs::kBatchSize, b.getI64IntegerAttr(batch));
  step->setAttr(pipe::attrs::kLossCombine,
                b.getStringAttr(lossIsMean || wholeLoss ? "mean" : "sum"));
  step->setAttr(pipe::attrs::kLossScale,
                b.getF64FloatAttr(lossIsMean || wholeLoss
                                      ? 1.0 / double(microbatches)
                                      : 1.0));
  if (!wholeStages.empty()) {
    SmallVector<int64_t> sorted(wholeStages.begin(), wholeStages.end());
    llvm::sort(sorted);
    step->setAttr(wholebatch::kStages, b.getI64ArrayAttr(sorted));
  }
}
