//===- Differentiate.cpp - the reverse sweep -------------------------------===//
//
// Activity analysis, then one backward sweep over the straight-line forward:
// a value gets a gradient when it is a float tensor that depends on some
// differentiated input ("varied") and that the loss depends on ("useful").
// Everything else (integer tensors, shapes, frozen parameters, branches
// that do not reach the loss) gets none, so no dead gradient code is built.
//
//===----------------------------------------------------------------------===//
#include "pipec/Autodiff/Autodiff.h"
#include "dialects/pipe/PipeAttrNames.h"
#include "pipec/Autodiff/VjpOpInterface.h"

#include "dialects/onnx/OnnxDialect.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/ScopeExit.h"

#include "mlir/Interfaces/FunctionInterfaces.h"

using namespace mlir;
using namespace mlir::pipec;
using namespace mlir::pipec::autodiff;

#include "pipec/Autodiff/VjpOpInterface.cpp.inc"

Value VjpContext::resultGradOrZeros(unsigned i) {
  if (Value g = resultGrads[i])
    return g;
  return splat(op->getResult(i).getType(), 0.0);
}

static bool isFloatTensor(Value v) {
  auto t = llvm::dyn_cast<RankedTensorType>(v.getType());
  return t && llvm::isa<FloatType>(t.getElementType());
}

namespace {
struct Activity {
  llvm::DenseSet<Value> varied, useful;
  bool isActive(Value v) const {
    return isFloatTensor(v) && varied.contains(v) && useful.contains(v);
  }
};
} // namespace

/// The forward ops: those of `block` before `end`.
static SmallVector<Operation *> forwardOps(Block *block, Operation *end) {
  SmallVector<Operation *> ops;
  for (Operation &op : *block) {
    if (&op == end)
      break;
    ops.push_back(&op);
  }
  return ops;
}

/// Stages (see docs/pipeline-passes.md): every op a VJP rule builds for op X
/// gets X's `pipe.stage`; the sum of a value's gradients gets the stage of
/// the value's producer (a parameter's owner stage for an argument), so a
/// tied weight's contributions from other stages are summed at its owner.
static constexpr llvm::StringLiteral kStage = pipe::attrs::kStage;

static Attribute producerStage(Value v) {
  if (Operation *def = v.getDefiningOp())
    return def->getAttr(kStage);
  auto arg = llvm::cast<BlockArgument>(v);
  if (auto func = llvm::dyn_cast<FunctionOpInterface>(
          arg.getOwner()->getParentOp()))
    return func.getArgAttr(arg.getArgNumber(), kStage);
  return {};
}

namespace {
/// Collects the ops a builder inserts, to give them a stage afterwards.
struct InsertedOps : public OpBuilder::Listener {
  SmallVector<Operation *> ops;
  void notifyOperationInserted(Operation *op,
                               OpBuilder::InsertPoint) override {
    ops.push_back(op);
  }
  /// Sets `stage` (when there is one) on the ops inserted so far, forgets them.
  void assign(Attribute stage) {
    if (stage)
      for (Operation *op : ops)
        op->setAttr(kStage, stage);
    ops.clear();
  }
};
} // namespace

static Activity analyze(ArrayRef<Operation *> ops, Value loss,
                        ArrayRef<Value> wrt) {
  Activity a;
  for (Value v : wrt)
    if (isFloatTensor(v))
      a.varied.insert(v);
  for (Operation *op : ops)
    if (llvm::any_of(op->getOperands(),
                     [&](Value v) { return a.varied.contains(v); }))
      for (Value r : op->getResults())
        if (isFloatTensor(r))
          a.varied.insert(r);
  a.useful.insert(loss);
  for (Operation *op : llvm::reverse(ops))
    if (llvm::any_of(op->getResults(),
                     [&](Value v) { return a.useful.contains(v); }))
      for (Value v : op->getOperands())
        a.useful.insert(v);
  return a;
}

FailureOr<SmallVector<Value>>
mlir::pipec::autodiff::buildGradients(OpBuilder &builder, Value &loss,
                                      SmallVectorImpl<Value> &wrt) {
  Block *block = builder.getInsertionBlock();
  Operation *end = builder.getInsertionPoint() == block->end()
                       ? nullptr
                       : &*builder.getInsertionPoint();

  // Let the rules ask for what they need saved, before anything refers to
  // the forward ops.
  {
    SmallVector<Operation *> ops = forwardOps(block, end);
    Activity activity = analyze(ops, loss, wrt);
    for (Operation *op : ops) {
      auto vjp = llvm::dyn_cast<VjpOpInterface>(op);
      if (!vjp || !llvm::any_of(op->getResults(), [&](Value r) {
            return activity.isActive(r);
          }))
        continue;
      OpBuilder b(op);
      Operation *replacement = vjp.prepareForVjp(b);
      if (!replacement)
        return failure();
      if (replacement == op)
        continue;
      if (Attribute stage = op->getAttr(kStage))
        replacement->setAttr(kStage, stage);
      for (unsigned i = 0; i < op->getNumResults(); ++i) {
        Value from = op->getResult(i), to = replacement->getResult(i);
        if (loss == from)
          loss = to;
        for (Value &v : wrt)
          if (v == from)
            v = to;
        from.replaceAllUsesWith(to);
      }
      op->erase();
    }
  }

  SmallVector<Operation *> ops = forwardOps(block, end);
  // The activity analysis follows operands: an op with regions may read
  // parameters inside them (captured from above) while it has no operand,
  // and would be taken for a constant (zero gradients).
  for (Operation *op : ops)
    if (op->getNumRegions() > 0)
      return op->emitOpError()
             << "has regions: the autodiff differentiates straight-line ops "
                "(control flow such as ONNX If, Loop or Scan is not supported)";
  Activity activity = analyze(ops, loss, wrt);
  llvm::DenseMap<Value, Value> grads;
  // A pipeline activation's gradient contributions, one per contributing
  // stage (see below), added up by `gradOf` when first read.
  struct Partial {
    Attribute stage;
    Value value;
    Location loc;
  };
  llvm::DenseMap<Value, SmallVector<Partial>> partials;
  OpBuilder::Listener *previousListener = builder.getListener();
  InsertedOps inserted;
  builder.setListener(&inserted);
  llvm::scope_exit restoreListener(
      [&] { builder.setListener(previousListener); });
  OnnxBuilder seed(builder, loss.getLoc());
  auto lossType = llvm::dyn_cast<RankedTensorType>(loss.getType());
  if (!lossType || !isFloatTensor(loss))
    return emitError(loss.getLoc())
           << "the loss must be a ranked float tensor, got " << loss.getType();
  grads[loss] = seed.splat(lossType, 1.0);
  inserted.assign(producerStage(loss));
  // The gradient of `v`: its sum, or its partials added up in the
  // producer's stage, each sum at the location of the op its newer
  // contribution came from (as the sums of one device are).
  auto gradOf = [&](Value v) -> FailureOr<Value> {
    if (!activity.isActive(v))
      return Value();
    auto it = partials.find(v);
    if (it == partials.end())
      return grads.lookup(v);
    SmallVector<Partial> list = std::move(it->second);
    partials.erase(it);
    Value total = list.front().value;
    for (const Partial &p : ArrayRef<Partial>(list).drop_front()) {
      OnnxBuilder sum(builder, p.loc);
      total = sum.add(total, p.value);
      if (sum.failed())
        return failure();
      if (auto add = total.getDefiningOp<onnx::AddOp>())
        add->setAttr(pipe::attrs::kGradSum, builder.getUnitAttr());
      inserted.assign(producerStage(v));
    }
    grads[v] = total;
    return total;
  };

  for (Operation *op : llvm::reverse(ops)) {
    SmallVector<Value> resultGrads;
    bool any = false;
    for (Value r : op->getResults()) {
      FailureOr<Value> g = gradOf(r);
      if (failed(g))
        return failure();
      resultGrads.push_back(*g);
      any |= static_cast<bool>(*g);
    }
    if (!any)
      continue;
    SmallVector<bool> wanted;
    bool wantsAny = false;
    for (Value v : op->getOperands()) {
      wanted.push_back(activity.isActive(v));
      wantsAny |= wanted.back();
    }
    if (!wantsAny)
      continue;
    auto vjp = llvm::dyn_cast<VjpOpInterface>(op);
    if (!vjp)
      return op->emitOpError()
             << "has no VJP rule: cannot differentiate through '"
             << op->getName() << "'";
    VjpContext ctx(builder, op, resultGrads, wanted);
    if (failed(vjp.buildVjp(ctx)) || ctx.failed())
      return failure();
    inserted.assign(op->getAttr(kStage));
    for (auto [i, built] : llvm::enumerate(ctx.getOperandGrads())) {
      if (!wanted[i])
        continue;
      Value g = built;
      if (!g)
        return op->emitOpError()
               << "VJP rule built no gradient for operand #" << i;
      Value operand = op->getOperand(i);
      if (g.getType() != operand.getType())
        return op->emitOpError()
               << "VJP rule gave a gradient of type " << g.getType()
               << " for operand #" << i << " of type " << operand.getType();
      // A gradient passed on unchanged (the result's own: Add, Sub's first
      // operand, Identity) to a value an earlier stage computes gets a copy
      // in this op's stage, marked with the operand (pipe.grad_operand): so
      // the stage split sends it from here as that operand's gradient,
      // rather than finding one value that is the gradient of the result
      // (a later stage's) and of the operand (an earlier stage's) at once.
      Attribute here = op->getAttr(kStage);
      Attribute there = operand.getDefiningOp() ? producerStage(operand) : Attribute();
      if (here && there && here != there && llvm::is_contained(resultGrads, g)) {
        OnnxBuilder pass(builder, op->getLoc());
        g = pass.create<onnx::IdentityOp>({g});
        if (pass.failed())
          return failure();
        g.getDefiningOp()->setAttr(pipe::attrs::kGradOperand,
                                   builder.getI64IntegerAttr(i));
        inserted.assign(here);
      }
      // An activation of a pipeline (its producer has a stage): its
      // contributions are kept per contributing stage and added up when
      // its gradient is first read. Two contributions from one later stage
      // are summed there (pipe.grad_sum, and pipe.grad_operand = i: the
      // sum crosses to the producer as the gradient of operand i of the op
      // at its location), so that the stage sends it one gradient, even
      // where another stage's came in between. The others are summed in
      // the producer's stage, in the order they came (the order of one
      // device's sums).
      Attribute producer = producerStage(operand);
      if (operand.getDefiningOp() && producer) {
        Attribute from = g.getDefiningOp() ? g.getDefiningOp()->getAttr(kStage) : Attribute();
        SmallVector<Partial> &list = partials[operand];
        Partial *same = nullptr;
        if (from && from != producer)
          for (Partial &p : list)
            if (p.stage == from)
              same = &p;
        if (!same) {
          list.push_back({from, g, op->getLoc()});
          continue;
        }
        OnnxBuilder sum(builder, op->getLoc());
        same->value = sum.add(same->value, g);
        if (sum.failed())
          return failure();
        if (auto add = same->value.getDefiningOp<onnx::AddOp>()) {
          add->setAttr(pipe::attrs::kGradSum, builder.getUnitAttr());
          add->setAttr(pipe::attrs::kGradOperand, builder.getI64IntegerAttr(i));
        }
        inserted.assign(from);
        continue;
      }
      Value &acc = grads[operand];
      if (!acc) {
        acc = g;
        continue;
      }
      OnnxBuilder sum(builder, op->getLoc());
      acc = sum.add(acc, g);
      if (sum.failed())
        return failure();
      if (auto add = acc.getDefiningOp<onnx::AddOp>())
        add->setAttr(pipe::attrs::kGradSum, builder.getUnitAttr());
      inserted.assign(producer);
    }
  }

  SmallVector<Value> result;
  for (Value v : wrt) {
    FailureOr<Value> g = gradOf(v);
    if (failed(g))
      return failure();
    result.push_back(*g);
  }
  return result;
}
