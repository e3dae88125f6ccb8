//===- StepBufferPlan.cpp - buffer planning of the step lowering ----------===//
//
// The analysis half of the step lowering: which arguments are inputs,
// persistent buffers or the step counter; which results update a persistent
// buffer, are the loss or go to a caller's output buffer; which values fold
// to constants; and where every other value lives. Blocks are planned by
// liveness in program order (best fit among freed blocks), aliases share
// their root's storage, and an update is written in place when nothing
// reads the old value any more.
//
//===----------------------------------------------------------------------===//
#include "StepLowering.h"
#include "dialects/pipe/PipeAttrNames.h"

#include "pipec/Conversion/RuntimeABI.h"

#include "dialects/onnx/OnnxDialect.h"

#include <map>

using namespace mlir;
using namespace mlir::pipec;

namespace mlir::pipec::steplowering {

bool isTransposeIntoMatMul(Operation *op) {
  auto t = dyn_cast<onnx::TransposeOp>(op);
  if (!t || op->use_empty())
    return false;
  auto type = dyn_cast<RankedTensorType>(op->getOperand(0).getType());
  if (!type || type.getRank() < 2 || !type.getElementType().isF32())
    return false;
  int64_t rank = type.getRank();
  auto perm = op->getAttrOfType<DenseI64ArrayAttr>("perm");
  if (!perm || int64_t(perm.size()) != rank)
    return false;
  for (int64_t i = 0; i + 2 < rank; ++i)
    if (perm[i] != i)
      return false;
  if (perm[rank - 2] != rank - 1 || perm[rank - 1] != rank - 2)
    return false;
  // pipert_matmul_t_f32 takes operands of rank 2 or more (a 1-D operand of
  // MatMul is promoted by pipert_matmul_f32 only).
  return llvm::all_of(op->getUsers(), [](Operation *user) {
    if (!isa<onnx::MatMulOp>(user))
      return false;
    return llvm::all_of(user->getOperands(), [](Value v) {
      auto t = dyn_cast<RankedTensorType>(v.getType());
      return t && t.getRank() >= 2;
    });
  });
}

namespace {
/// Whether `whole` (the Split's operand, the Concat's result) and every one
/// of `parts` are statically shaped and every axis of `whole` before `op`'s
/// axis has extent 1: the parts then lie back to back in it.
bool contiguousAlongAxis(Operation *op, Value whole, ValueRange parts) {
  auto type = dyn_cast<RankedTensorType>(whole.getType());
  if (!type || !type.hasStaticShape())
    return false;
  auto axisAttr = op->getAttrOfType<IntegerAttr>("axis");
  int64_t axis = axisAttr ? axisAttr.getInt() : 0;
  if (axis < 0)
    axis += type.getRank();
  for (int64_t d = 0; d < axis; ++d)
    if (type.getDimSize(d) != 1)
      return false;
  return llvm::all_of(parts, [](Value v) {
    auto t = dyn_cast<RankedTensorType>(v.getType());
    return t && t.hasStaticShape();
  });
}
} // namespace

bool isContiguousSplit(Operation *op) {
  return isa<onnx::SplitOp>(op) &&
         contiguousAlongAxis(op, op->getOperand(0), op->getResults());
}

/// A Concat along an axis that every axis before it has extent 1: its parts
/// lie back to back in its result.
bool isContiguousConcat(Operation *op) {
  return isa<onnx::ConcatOp>(op) &&
         contiguousAlongAxis(op, op->getResult(0), op->getOperands());
}

/// Ops whose result is their first operand's bytes under another shape.
bool isAliasOp(Operation *op) {
  // A Split into contiguous parts: each an alias at its offset.
  if (isContiguousSplit(op))
    return true;
  // A transpose of the last two axes read only by MatMuls: they read its
  // operand with the transposed flag (pipert_matmul_t_f32) instead.
  if (isTransposeIntoMatMul(op))
    return true;
  if (isa<onnx::IdentityOp, onnx::ReshapeOp, onnx::FlattenOp, onnx::SqueezeOp,
          onnx::UnsqueezeOp>(op))
    return true;
  if (isa<onnx::CastOp>(op))
    return getElementTypeOrSelf(op->getOperand(0).getType()) ==
           getElementTypeOrSelf(op->getResult(0).getType());
  return false;
}

/// Kernels that allow an output to be written over an input of its shape.
bool allowsInPlace(Operation *op) {
  return isa<onnx::MomentumOp, onnx::AdamOp, onnx::AdagradOp, onnx::SGDOp,
             onnx::AdamWOp>(op) ||
         isa<onnx::AddOp, onnx::SubOp, onnx::MulOp, onnx::DivOp>(op) ||
         isa<onnx::ReluOp, onnx::NegOp, onnx::TanhOp, onnx::SigmoidOp,
             onnx::ErfOp, onnx::SqrtOp, onnx::ExpOp, onnx::LogOp, onnx::SinOp,
             onnx::CosOp>(op);
}

/// The operands whose block a kernel's first result may be written over:
/// every operand of the elementwise kernels (each output element computed
/// from the inputs' elements at its index and broadcast ones, every input
/// element read before the output element at its index is stored), and
/// LayerNormalizationGrad's dy (a row's dy is read before its dx is stored).
SmallVector<unsigned> inPlaceOperands(Operation *op) {
  if (isa<onnx::LayerNormalizationGradOp>(op))
    return {4};
  if (op->getNumResults() != 1 ||
      !(isa<onnx::AddOp, onnx::SubOp, onnx::MulOp, onnx::DivOp>(op) ||
        isa<onnx::ReluOp, onnx::NegOp, onnx::TanhOp, onnx::SigmoidOp, onnx::ErfOp,
            onnx::SqrtOp, onnx::ExpOp, onnx::LogOp, onnx::GeluOp>(op) ||
        isa<onnx::UnaryGradOp, onnx::ReluGradOp, onnx::ErfGradOp, onnx::TanhGradOp,
            onnx::SigmoidGradOp>(op)))
    return {};
  return llvm::to_vector(llvm::seq<unsigned>(0, op->getNumOperands()));
}

/// Results whose kernel can add them into the buffer's values (the
/// parameter gradients of the norms and the convolution: their kernels'
/// `accumulate` flag).
bool kernelAccumulates(OpResult r) {
  Operation *op = r.getOwner();
  return r.getResultNumber() >= 1 &&
         isa<onnx::LayerNormalizationGradOp, onnx::BatchNormalizationGradOp,
             onnx::ConvGradOp>(op);
}

/// Results a kernel may skip (its nullable outputs): unused ones get no
/// buffer.
bool isNullableResult(Operation *op, unsigned i) {
  if (isa<onnx::ConvGradOp>(op))
    return true; // one call per used result
  if (isa<onnx::LSTMOp, onnx::GRUOp, onnx::LSTMGradOp, onnx::GRUGradOp>(op))
    return true; // every output of the recurrent kernels is nullable
  if (i == 0)
    return false;
  return isa<onnx::LayerNormalizationOp, onnx::BatchNormalizationOp,
             onnx::MaxPoolOp, onnx::DropoutOp, onnx::SoftmaxCrossEntropyLossOp,
             onnx::AttentionOp,
             onnx::LayerNormalizationGradOp,
             onnx::BatchNormalizationGradOp>(op);
}

//===----------------------------------------------------------------------===//
// Analysis
//===----------------------------------------------------------------------===//

LogicalResult StepLowering::classifyArguments() {
  for (BlockArgument arg : source.getArguments()) {
    unsigned i = arg.getArgNumber();
    auto type = tensorType(arg);
    if (!type || !type.hasStaticShape())
      return source.emitError("argument ")
             << i << " must be a statically shaped tensor, not "
             << arg.getType();
    if (!pipertDtype(type.getElementType()))
      return source.emitError("argument ")
             << i << " has element type " << type.getElementType()
             << ", which the runtime has no kernels for";
    if (source.getArgAttr(i, pipe::attrs::kInput)) {
      inputIndex[arg] = inputs.size();
      inputs.push_back(arg);
    } else if (source.getArgAttr(i, pipe::attrs::kStep)) {
      if (type.getNumElements() != 1)
        return source.emitError("pipe.step argument ")
               << i << " must hold one element";
      stepCounter = arg;
    } else {
      persistentIndex[arg] = persistent.size();
      persistent.push_back(arg);
    }
  }
  return success();
}

LogicalResult StepLowering::classifyResults() {
  auto ret = cast<func::ReturnOp>(source.getBody().front().getTerminator());
  auto argByName = [&](StringRef attr, StringRef name) -> int64_t {
    for (BlockArgument arg : persistent)
      if (auto s = source.getArgAttrOfType<StringAttr>(arg.getArgNumber(), attr))
        if (s.getValue() == name)
          return persistentIndex[arg];
    return -1;
  };
  DenseSet<int64_t> updated;
  for (auto [i, value] : llvm::enumerate(ret.getOperands())) {
    int64_t target = -1;
    if (auto out = source.getResultAttrOfType<IntegerAttr>(i, pipe::attrs::kResultBuffer)) {
      if (!options.callable)
        return source.emitError("result ")
               << i << " is marked pipe.result_buffer, which only a callable "
               << "function (a stage of a lowered program) has";
      outputs.push_back({value, out.getInt()});
      continue;
    }
    if (auto slot = source.getResultAttrOfType<IntegerAttr>(i, pipe::attrs::kMetric)) {
      auto type = tensorType(value);
      if (!type || type.getNumElements() != 1 || !type.getElementType().isF32())
        return source.emitError("the count (result ")
               << i << ") must be one f32 element";
      metricValues.push_back({value, slot.getInt()});
      continue;
    }
    if (source.getResultAttr(i, pipe::attrs::kLoss)) {
      auto type = tensorType(value);
      if (!type || type.getNumElements() != 1 || !type.getElementType().isF32())
        return source.emitError("the loss (result ")
               << i << ") must be one f32 element";
      lossValue = value;
      continue;
    }
    if (auto n = source.getResultAttrOfType<StringAttr>(i, pipe::attrs::kUpdate)) {
      target = argByName(pipe::attrs::kParam, n.getValue());
      if (target < 0)
        target = argByName(pipe::attrs::kState, n.getValue());
      if (target < 0)
        return source.emitError("result ")
               << i << " updates '" << n.getValue()
               << "', but no argument has that pipe.param or pipe.state";
    } else if (auto idx =
                   source.getResultAttrOfType<IntegerAttr>(i, pipe::attrs::kUpdate)) {
      auto arg = source.getArgument(idx.getInt());
      if (!persistentIndex.count(arg))
        return source.emitError("result ")
               << i << " updates argument " << idx.getInt()
               << ", which is not a persistent buffer";
      target = persistentIndex[arg];
    } else if (auto n = source.getResultAttrOfType<StringAttr>(i, pipe::attrs::kParam)) {
      target = argByName(pipe::attrs::kParam, n.getValue());
    } else if (auto n = source.getResultAttrOfType<StringAttr>(i, pipe::attrs::kState)) {
      target = argByName(pipe::attrs::kState, n.getValue());
    }
    if (target < 0)
      continue; // a plain graph output: computed, not kept
    if (!updated.insert(target).second)
      return source.emitError("two results update persistent buffer ")
             << target;
    if (value.getType() != persistent[target].getType())
      return source.emitError("result ")
             << i << " has type " << value.getType()
             << " but updates an argument of type "
             << persistent[target].getType();
    updates.push_back({value, target});
  }
  return success();
}

void StepLowering::computeConstants() {
  for (Operation &op : source.getBody().front().without_terminator()) {
    if (isa<onnx::ConstantOp>(op)) {
      if (auto v = op.getAttrOfType<ElementsAttr>("value"))
        constants[op.getResult(0)] = v;
      continue;
    }
    // Shape computations left unfolded (Shape, Range, ConstantOfShape,
    // Reshape of a constant, ...): fold them now that operands are known.
    if (isa<onnx::DropoutOp>(op) || op.getNumResults() == 0)
      continue;
    SmallVector<Attribute> operands;
    bool allKnown = true;
    for (Value v : op.getOperands()) {
      if (isa<NoneType>(v.getType())) {
        operands.push_back(nullptr);
        continue;
      }
      auto it = constants.find(v);
      if (it == constants.end()) {
        // Shape only needs the static type, not the values.
        if (!isa<onnx::ShapeOp>(op))
          allKnown = false;
        operands.push_back(nullptr);
        continue;
      }
      operands.push_back(it->second);
    }
    if (!allKnown)
      continue;
    SmallVector<OpFoldResult> folded;
    if (failed(op.fold(operands, folded)) || folded.size() != op.getNumResults())
      continue;
    for (auto [result, f] : llvm::zip(op.getResults(), folded))
      if (auto attr = dyn_cast_if_present<ElementsAttr>(
              dyn_cast_if_present<Attribute>(f)))
        if (attr.getType() == result.getType())
          constants[result] = attr;
  }
}

Value StepLowering::rootOf(Value v) {
  while (true) {
    auto it = placement.find(v);
    if (it == placement.end() || it->second.kind != Placement::Alias)
      return v;
    v = it->second.aliasOf;
  }
}

/// A plain SGD update of a weight whose gradient is one Gemm's result, read
/// by nothing else (x' = x - lr g, g = alpha op(A) op(B), lr a constant, no
/// weight decay), becomes that Gemm with C = x: x' = (-lr alpha) op(A)
/// op(B) + x, placed after the last read of x, so that planBuffers writes
/// it in place and the kernel adds into the weight (pipert_gemm_f32's
/// accumulation, as for a gradient accumulator). No gradient buffer, and
/// no pass of the update over the weight and its gradient (the GPT's 25
/// MiB of weights: read twice and written once a step by pipert_sgd_f32).
/// The product is rounded to float and added to x as the update adds lr g:
/// within an ulp of x - lr g (the kernels' rounding of -lr alpha acc + x).
void StepLowering::fuseSgdIntoGemms() {
  Block &body = source.getBody().front();
  for (auto &[value, target] : updates) {
    auto sgd = value.getDefiningOp<onnx::SGDOp>();
    if (!sgd || sgd->getBlock() != &body || attrF(sgd, "weight_decay", 0.0) != 0.0)
      continue;
    Value x = sgd->getOperand(1), g = sgd->getOperand(2);
    auto gemm = g.getDefiningOp<onnx::GemmOp>();
    auto rate = constants.find(sgd->getOperand(0));
    if (x != persistent[target] || !gemm || gemm->getBlock() != &body || !g.hasOneUse() ||
        !isa<NoneType>(gemm->getOperand(2).getType()) || g.getType() != x.getType() ||
        rate == constants.end() || rate->second.getNumElements() != 1 ||
        !rate->second.getElementType().isF32() || !sgd.getType().getElementType().isF32())
      continue;
    const double lr = rate->second.getValues<APFloat>()[0].convertToDouble();
    const double alpha = attrF(gemm, "alpha", 1.0);
    // After every other read of x, through its views, and after the Gemm's
    // operands (where it already is).
    Operation *last = gemm;
    bool returned = false; // the old weight is also a result: keep the update apart
    SmallVector<Value> views{x};
    while (!views.empty()) {
      Value v = views.pop_back_val();
      for (Operation *user : v.getUsers()) {
        Operation *op = body.findAncestorOpInBlock(*user);
        if (!op || op == sgd)
          continue;
        if (op->hasTrait<OpTrait::IsTerminator>())
          returned = true;
        else if (last->isBeforeInBlock(op))
          last = op;
        if (isAliasOp(user))
          views.append(user->result_begin(), user->result_end());
      }
    }
    if (returned)
      continue;
    OpBuilder ob(source.getContext());
    ob.setInsertionPointAfter(last);
    SmallVector<NamedAttribute> attrs(gemm->getAttrs());
    llvm::erase_if(attrs, [](NamedAttribute a) {
      return a.getName() == "alpha" || a.getName() == "beta";
    });
    attrs.push_back(ob.getNamedAttr("alpha", ob.getF32FloatAttr(float(-lr * alpha))));
    attrs.push_back(ob.getNamedAttr("beta", ob.getF32FloatAttr(1.f)));
    Operation *fused = ob.create(gemm->getLoc(), gemm->getName().getIdentifier(),
                                 ValueRange{gemm->getOperand(0), gemm->getOperand(1), x},
                                 TypeRange{x.getType()}, attrs);
    sgd.getResult().replaceAllUsesWith(fused->getResult(0));
    sgd->erase();
    gemm->erase();
    value = fused->getResult(0);
  }
}

/// An optimizer's update of a persistent buffer moves up to right after the
/// last op it has to follow: the definitions of its operands (the
/// gradient, the learning rate) and every read of the values it replaces
/// (the weight's other uses, through reshapes and other views of it). It
/// then runs while its gradient is still in cache, where the updates all
/// ran after the last backward op, and the gradient's block is free for
/// the backward ops after it. The same ops on the same operands: the same
/// bits. Every update is still after each read of the old value, so it
/// is still written in place (planBuffers).
void StepLowering::hoistUpdates() {
  Block &body = source.getBody().front();
  SmallVector<Operation *> optimizers;
  for (auto [value, target] : updates)
    if (Operation *u = value.getDefiningOp();
        u && u->getBlock() == &body &&
        isa<onnx::SGDOp, onnx::MomentumOp, onnx::AdamOp, onnx::AdagradOp, onnx::AdamWOp>(u) &&
        !llvm::is_contained(optimizers, u))
      optimizers.push_back(u);
  if (optimizers.empty())
    return;
  // The buffers each optimizer op replaces.
  DenseMap<Operation *, SmallVector<Value>> replaces;
  for (auto [value, target] : updates)
    if (Operation *u = value.getDefiningOp(); u && llvm::is_contained(optimizers, u))
      replaces[u].push_back(persistent[target]);
  llvm::sort(optimizers, [](Operation *a, Operation *b) { return a->isBeforeInBlock(b); });
  for (Operation *u : optimizers) {
    Operation *last = nullptr;
    auto follow = [&](Operation *op) {
      if (op)
        op = body.findAncestorOpInBlock(*op);
      if (!op || op == u)
        return;
      if (!last || last->isBeforeInBlock(op))
        last = op;
    };
    for (Value operand : u->getOperands())
      follow(operand.getDefiningOp());
    // Every read of a replaced buffer, through the ops that are views of it.
    SmallVector<Value> views(replaces[u].begin(), replaces[u].end());
    while (!views.empty()) {
      Value v = views.pop_back_val();
      for (Operation *user : v.getUsers()) {
        if (user == u)
          continue;
        follow(user);
        if (isAliasOp(user))
          views.append(user->result_begin(), user->result_end());
      }
    }
    if (last && last->isBeforeInBlock(u))
      u->moveAfter(last);
  }
}

LogicalResult StepLowering::planBuffers() {
  Block &body = source.getBody().front();
  int64_t index = 0;
  for (Operation &op : body)
    order[&op] = index++;
  int64_t returnIndex = index - 1;

  for (BlockArgument arg : inputs)
    placement[arg] = {Placement::Input, inputIndex[arg]};
  for (BlockArgument arg : persistent)
    placement[arg] = {Placement::Persistent, persistentIndex[arg]};
  if (stepCounter)
    placement[stepCounter] = {Placement::Step};

  // Aliases and constants first, so that liveness is per storage root.
  for (Operation &op : body.without_terminator()) {
    for (Value r : op.getResults()) {
      if (isa<NoneType>(r.getType()))
        placement[r] = {Placement::None};
      else if (constants.count(r))
        placement[r] = {Placement::Constant};
      else if (isAliasOp(&op)) {
        // A contiguous Split's part r lies after the parts before it.
        int64_t offset = 0;
        if (isContiguousSplit(&op))
          for (Value prev : op.getResults()) {
            if (prev == r)
              break;
            offset += runtimeTensorBytes(tensorType(prev));
          }
        placement[r] = {Placement::Alias, -1, offset, op.getOperand(0)};
      }
    }
  }
  // A Concat whose parts are contiguous (every axis before its own of
  // extent 1) and each the result of a kernel read by nothing else (or a
  // reshape of one): each part is computed in its slice of the Concat's
  // buffer, an alias of the Concat's result at its offset, and the Concat
  // is no call (attention's dq, dk and dv, SplitTranspose.cpp). The
  // Concat's buffer is placed with its first part's kernel.
  DenseMap<Value, Value> concatOfPart; // a part's kernel result → the Concat's
  for (Operation &op : body.without_terminator()) {
    if (!isContiguousConcat(&op) || placement.count(op.getResult(0)) ||
        llvm::any_of(updates, [&](auto u) { return u.first == op.getResult(0); }))
      continue;
    SmallVector<Value> roots;
    for (Value o : op.getOperands()) {
      Value r = o;
      if (Operation *def = o.getDefiningOp(); def && isa<onnx::ReshapeOp>(def) &&
                                              placement.count(o) && o.hasOneUse())
        r = def->getOperand(0);
      auto res = dyn_cast<OpResult>(r);
      if (!res || !r.hasOneUse() || placement.count(r) || llvm::is_contained(roots, r) ||
          res.getOwner()->getBlock() != &body ||
          runtimeTensorBytes(tensorType(r)) != runtimeTensorBytes(tensorType(o))) {
        roots.clear();
        break;
      }
      roots.push_back(r);
    }
    if (roots.empty())
      continue;
    int64_t offset = 0;
    for (Value r : roots) {
      placement[r] = {Placement::Alias, -1, offset, op.getResult(0)};
      concatOfPart[r] = op.getResult(0);
      offset += runtimeTensorBytes(tensorType(r));
    }
    inPlaceConcats.insert(&op);
  }
  for (Operation &op : body)
    for (Value v : op.getOperands()) {
      Value root = rootOf(v);
      lastUse[root] = std::max(lastUse.lookup(root), order[&op]);
    }

  DenseMap<Value, int64_t> updateTarget;
  for (auto [value, target] : updates)
    updateTarget[value] = target;
  // A gradient accumulated by an Add written in place (acc + g, the
  // accumulator read by nothing else, g by nothing else), where g's kernel
  // can add into its output itself (the norm and convolution parameter
  // gradients' `accumulate` flag): the kernel writes into the accumulator
  // and the Add emits nothing. The same bits; one runtime call fewer per
  // gradient and micro-batch (a transformer block's layer norms: 4).
  for (Operation &op : body.without_terminator()) {
    auto add = dyn_cast<onnx::AddOp>(op);
    if (!add)
      continue;
    auto t = updateTarget.find(add.getResult());
    if (t == updateTarget.end())
      continue;
    Value acc = persistent[t->second];
    for (unsigned k : {0u, 1u}) {
      Value g = add->getOperand(1 - k);
      auto res = dyn_cast<OpResult>(g);
      if (add->getOperand(k) != acc || !acc.hasOneUse() || !res || !g.hasOneUse() ||
          g.getType() != acc.getType() || add.getType() != acc.getType() ||
          !kernelAccumulates(res))
        continue;
      placement[g] = {Placement::Persistent, t->second};
      placement[add.getResult()] = {Placement::Persistent, t->second};
      inPlace.insert(add.getResult());
      accumulated.insert(g);
      foldedAdds.insert(&op);
      break;
    }
  }
  // Outputs defined by a kernel (not an alias, constant or argument), each
  // returned once, go straight into the caller's buffer.
  DenseMap<Value, int> outputUses;
  for (auto [value, index] : outputs)
    ++outputUses[value];
  for (auto [value, index] : outputs)
    if (outputUses[value] == 1 && !placement.count(value) &&
        !updateTarget.count(value) && value.getDefiningOp())
      directOutput[value] = index;
  // An output that is another shape of a kernel's result (a Gemm's input
  // rows, Reshape of the layer norm's output, kept for the backward): the
  // kernel writes into the caller's buffer and the view needs no copy
  // (the transformer's forward copied 22 KB a micro-batch so).
  DenseMap<Value, int> rootOutputs;
  for (auto [value, index] : outputs)
    if (placement.count(value) && placement[value].kind == Placement::Alias)
      ++rootOutputs[rootOf(value)];
  for (auto [value, index] : outputs) {
    if (outputUses[value] != 1 || !placement.count(value) ||
        placement[value].kind != Placement::Alias || updateTarget.count(value))
      continue;
    Value root = rootOf(value);
    auto rootType = tensorType(root), type = tensorType(value);
    if (rootOutputs[root] != 1 || outputUses.count(root) || placement.count(root) ||
        updateTarget.count(root) || !root.getDefiningOp() || !rootType || !type ||
        isTransposeIntoMatMul(value.getDefiningOp()) ||
        runtimeTensorBytes(rootType) != runtimeTensorBytes(type))
      continue;
    directOutput[root] = index;
    directOutput[value] = index;
  }

  std::multimap<int64_t, int64_t> freeBlocks; // bytes → block id
  DenseSet<int64_t> held;
  int64_t liveBytes = 0;
  DenseMap<Value, int64_t> blockOfRoot;
  for (Operation &op : body.without_terminator()) {
    int64_t i = order[&op];
    SmallVector<Value> toPlace;
    for (Value r : op.getResults())
      if (auto c = concatOfPart.find(r);
          c != concatOfPart.end() && !placement.count(c->second) &&
          !llvm::is_contained(toPlace, c->second))
        toPlace.push_back(c->second);
    toPlace.append(op.result_begin(), op.result_end());
    for (Value r : toPlace) {
      if (placement.count(r))
        continue;
      auto type = tensorType(r);
      if (!type || !type.hasStaticShape())
        return op.emitError("result type ")
               << r.getType() << " is not a statically shaped tensor";
      if (!pipertDtype(type.getElementType()))
        return op.emitError("result element type ")
               << type.getElementType() << " has no runtime kernels";
      if (!lastUse.count(r)) {
        if (isNullableResult(&op, cast<OpResult>(r).getResultNumber())) {
          placement[r] = {Placement::None};
          continue;
        }
        lastUse[r] = i; // dead result: freed right after its op
      }
      // A callable's output is computed in the caller's buffer.
      if (auto out = directOutput.find(r); out != directOutput.end()) {
        placement[r] = {Placement::Output, out->second};
        continue;
      }
      // An update of a parameter or state goes straight into its buffer
      // once nothing reads the old value any more.
      auto t = updateTarget.find(r);
      if (t != updateTarget.end()) {
        Value arg = persistent[t->second];
        int64_t argLast = lastUse.lookup(rootOf(arg));
        // A Gemm adds into its C in place (a weight gradient accumulated
        // by its Gemm): when the buffer is its C alone, of Y's shape.
        auto gemm = dyn_cast<onnx::GemmOp>(op);
        Value root = rootOf(arg);
        bool accumulates = gemm && rootOf(gemm.getC()) == root &&
                           rootOf(gemm.getA()) != root && rootOf(gemm.getB()) != root &&
                           gemm.getC().getType() == r.getType();
        if (argLast < i || (argLast == i && (allowsInPlace(&op) || accumulates))) {
          placement[r] = {Placement::Persistent, t->second};
          inPlace.insert(r);
          continue;
        }
      }
      // An elementwise kernel's result (or a layer norm gradient's dx)
      // written over an operand of its size whose block dies here
      // (inPlaceOperands): no new block, and the kernel stores into
      // lines its own loads just brought in instead of reading a fresh
      // block's lines for ownership first (a GELU gradient over 2 MiB out
      // of cache: 330 -> 213 us).
      if (r == op.getResult(0)) {
        bool placed = false;
        for (unsigned k : inPlaceOperands(&op)) {
          Value o = op.getOperand(k);
          Value root = rootOf(o);
          auto b = blockOfRoot.find(root);
          auto ot = tensorType(o), rt = tensorType(root);
          if (b == blockOfRoot.end() || lastUse.lookup(root) != i || !ot || !rt ||
              ot.getElementType() != type.getElementType() ||
              ot.getNumElements() != type.getNumElements() ||
              runtimeTensorBytes(rt) != runtimeTensorBytes(type))
            continue;
          // The operand is the block's bytes in order: the root itself or a
          // reshape of it (not a Split's part, not a transposed view).
          if (o != root && (placement[o].kind != Placement::Alias || placement[o].offset != 0 ||
                            !isa_and_present<onnx::IdentityOp, onnx::ReshapeOp, onnx::FlattenOp,
                                             onnx::SqueezeOp, onnx::UnsqueezeOp, onnx::CastOp>(
                                o.getDefiningOp())))
            continue;
          int64_t id = b->second;
          blockOfRoot.erase(b);
          blockOfRoot[r] = id;
          placement[r] = {Placement::Block, id};
          placed = true;
          break;
        }
        if (placed)
          continue;
      }
      int64_t bytes = roundUp(std::max<int64_t>(runtimeTensorBytes(type), 1),
                              kBlockAlign);
      int64_t id;
      // Best fit: the smallest free size >= bytes, and of the blocks of that
      // size the one freed last, whose lines are the likeliest to be in
      // cache still.
      auto fit = freeBlocks.lower_bound(bytes);
      if (fit != freeBlocks.end())
        fit = std::prev(freeBlocks.upper_bound(fit->first));
      if (fit != freeBlocks.end()) {
        id = fit->second;
        freeBlocks.erase(fit);
      } else {
        id = blocks.size();
        blocks.push_back({bytes, i, -1});
        liveBytes += bytes;
        peakBytes = std::max(peakBytes, liveBytes);
      }
      held.insert(id);
      blocks[id].freeAfter = -1;
      placement[r] = {Placement::Block, id};
      blockOfRoot[r] = id;
    }
    // Release the blocks whose values are all dead after this op (after
    // placing its results, so that outputs never share an input's block).
    SmallVector<Value> roots;
    for (Value v : op.getOperands())
      roots.push_back(rootOf(v));
    for (Value r : op.getResults())
      roots.push_back(rootOf(r));
    for (Value root : roots) {
      auto it = blockOfRoot.find(root);
      if (it == blockOfRoot.end() || lastUse.lookup(root) != i)
        continue;
      int64_t id = it->second;
      blockOfRoot.erase(it);
      held.erase(id);
      blocks[id].freeAfter = i;
      freeBlocks.insert({blocks[id].bytes, id});
    }
  }
  // What is still held (results, the loss) is freed at the end of the step.
  for (int64_t id : held)
    blocks[id].freeAfter = returnIndex;
  return success();
}

} // namespace mlir::pipec::steplowering
