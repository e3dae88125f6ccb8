//===- SplitStages.cpp - pipe-split-stages: one pipe.stage per phase -------===//
//
// Cuts the stage-annotated training step into `pipe.stage` functions, one
// forward and one backward per stage, in the calling convention pipe-schedule
// reads (Passes.td): values are connected by name attributes, and a
// value crosses a cut only where a later stage (or the backward of another
// stage) needs it. Constants are cloned into every function that uses them.
// The optimizer's ops are dropped: the update is `pipe.update` in the
// programs, configured by the module's `pipe.optimizer`.
//
//===----------------------------------------------------------------------===//
#include "pipec/Autodiff/OnnxBuilder.h"
#include "dialects/pipe/PipeAttrNames.h"
#include "pipec/Transforms/Passes.h"
#include "pipec/Transforms/WholeBatch.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/StringSet.h"

#include <functional>

namespace mlir::pipec {
#define GEN_PASS_DEF_PIPESPLITSTAGES
#include "pipec/Transforms/Passes.h.inc"
} // namespace mlir::pipec

using namespace mlir;
using namespace mlir::pipec;

namespace {

enum Phase { Forward = 0, Backward = 1 };

/// One function being built: its values, in the order they were asked for.
struct Part {
  int64_t stage = 0;
  Phase phase = Forward;
  SmallVector<Operation *> ops;
  /// Weight arguments (block arguments of the step), in parameter order.
  SmallVector<BlockArgument> weights;
  /// Other arguments: values of the step defined elsewhere, with their
  /// argument attributes.
  llvm::MapVector<Value, NamedAttribute> inputs;
  /// A backward under recompute: the forward ops it re-runs.
  llvm::SetVector<Operation *> recomputed;
  /// Results other than the weight gradients, with their attributes.
  SmallVector<std::pair<Value, NamedAttribute>> outputs;

  void addOutput(Value v, NamedAttribute attr) {
    if (!llvm::is_contained(outputs, std::make_pair(v, attr)))
      outputs.push_back({v, attr});
  }
};

struct PipeSplitStagesPass
    : public pipec::impl::PipeSplitStagesBase<PipeSplitStagesPass> {
  using Base::Base;
  void runOnOperation() override;

private:
  func::FuncOp step;
  llvm::DenseMap<Operation *, Phase> phaseOf;
  llvm::DenseMap<Operation *, int64_t> stageOf;
  /// Owner stage of each trainable parameter argument.
  llvm::DenseMap<Value, int64_t> owner;
  llvm::DenseMap<Value, StringAttr> paramName, inputName;
  /// Arguments holding a graph input's whole step (pipe.step_input).
  llvm::DenseMap<Value, StringAttr> stepInputName;
  /// Parameters that are not trained (running statistics, frozen weights):
  /// state the stages that read them hold, by name; the stages reading each.
  llvm::DenseMap<Value, StringAttr> stateName;
  llvm::MapVector<Value, llvm::SmallSetVector<int64_t, 2>> stateUsers;
  llvm::DenseMap<Value, std::string> tags;
  /// A crossing gradient contribution -> the others of the same primal
  /// from the same stage, added to it before it is sent.
  std::map<std::pair<const void *, std::string>, SmallVector<Value>>
      extraContributions;
  llvm::StringSet<> usedTags;
  std::vector<Part> parts; // index 2 * stage + phase

  Part &part(int64_t stage, Phase phase) { return parts[2 * stage + phase]; }
  StringRef tagOf(Value v);
  NamedAttribute named(StringRef key, StringRef value) {
    Builder b(&getContext());
    return b.getNamedAttr(key, b.getStringAttr(value));
  }
  LogicalResult needForward(Part &user, Value v, Operation *at);
  SmallVector<Value> candidatesOf(Value grad, int64_t from, int64_t to);
  FailureOr<Value> primalOf(Value grad, int64_t from, int64_t to);
  LogicalResult
  splitSharedGradients(const llvm::DenseMap<BlockArgument, Value> &weightGrads);
  /// (crossing gradient, receiving stage) -> its primal.
  std::map<std::pair<const void *, int64_t>, Value> primalFor;
  LogicalResult build(Part &p,
                      const llvm::DenseMap<BlockArgument, Value> &weightGrads,
                      const llvm::DenseSet<Value> &zeroed);
};
} // namespace

static std::string stringAttrOf(DictionaryAttr attrs, StringRef key) {
  if (auto s = attrs ? attrs.getAs<StringAttr>(key) : StringAttr())
    return s.str();
  return "";
}

static bool isCloneable(Value v) {
  Operation *def = v.getDefiningOp();
  return def && def->getNumOperands() == 0 && def->getNumRegions() == 0;
}

StringRef PipeSplitStagesPass::tagOf(Value v) {
  auto it = tags.find(v);
  if (it != tags.end())
    return it->second;
  std::string base;
  if (StringAttr p = paramName.lookup(v))
    base = p.str();
  else if (StringAttr in = inputName.lookup(v))
    base = in.str();
  else if (auto result = llvm::dyn_cast<OpResult>(v)) {
    Operation *op = result.getOwner();
    if (auto name = llvm::dyn_cast<NameLoc>(op->getLoc()))
      base = name.getName().str();
    if (!base.empty() && op->getNumResults() > 1)
      base += ":" + std::to_string(result.getResultNumber());
  }
  if (base.empty())
    base = "v" + std::to_string(tags.size());
  std::string tag = base;
  for (int i = 1; usedTags.contains(tag); ++i)
    tag = base + "." + std::to_string(i);
  usedTags.insert(tag);
  return tags[v] = tag;
}

/// Makes forward value `v` available to `user` (a forward, or a backward
/// reading what its forward took or produced): as a weight, a fed input, a
/// result of its own forward, or a named input from the stage computing it.
LogicalResult PipeSplitStagesPass::needForward(Part &user, Value v,
                                               Operation *at) {
  Part &fwd = part(user.stage, Forward);
  if (auto arg = llvm::dyn_cast<BlockArgument>(v)) {
    if (owner.count(v)) {
      if (owner.lookup(v) == user.stage)
        return success(); // a weight of this stage
      // A tied weight read by another stage: its owner's forward sends it.
      part(owner.lookup(v), Forward)
          .addOutput(v, named(pipe::attrs::kName, tagOf(v)));
      fwd.inputs.insert({v, named(pipe::attrs::kName, tagOf(v))});
      if (user.phase == Backward)
        user.inputs.insert({v, named(pipe::attrs::kName, tagOf(v))});
      return success();
    }
    if (StringAttr name = inputName.lookup(v)) {
      fwd.inputs.insert({v, named(pipe::attrs::kInput, name.getValue())});
      if (user.phase == Backward)
        user.inputs.insert({v, named(pipe::attrs::kInput, name.getValue())});
      return success();
    }
    if (StringAttr name = stepInputName.lookup(v)) {
      fwd.inputs.insert({v, named(pipe::attrs::kStepInput, name.getValue())});
      if (user.phase == Backward)
        user.inputs.insert({v, named(pipe::attrs::kStepInput, name.getValue())});
      return success();
    }
    if (StringAttr name = stateName.lookup(v)) {
      user.inputs.insert({v, named(pipe::attrs::kState, name.getValue())});
      stateUsers[v].insert(user.stage);
      return success();
    }
    return at->emitOpError()
           << "uses argument #" << arg.getArgNumber() << " of @"
           << step.getSymName()
           << ", which is neither a parameter nor a pipe.input";
  }
  Operation *def = v.getDefiningOp();
  int64_t defStage = stageOf.lookup(def);
  // The last stage runs each backward right after its forward (on the same
  // weights): recomputing there would save nothing.
  bool recomputes = recompute && user.stage + 1 < int64_t(parts.size() / 2);
  // A fused attention that drops its probabilities (its mask seeded by a
  // draw at each call, not kept as a Dropout's is) is not run again: the
  // backward takes its results from the forward.
  auto recomputable = [](Operation *op) {
    auto att = llvm::dyn_cast_or_null<onnx::AttentionOp>(op);
    auto drop = att ? att->getAttrOfType<FloatAttr>("dropout") : FloatAttr();
    return !drop || drop.getValueAsDouble() == 0.0;
  };
  if (defStage == user.stage && user.phase == Backward && recomputes && recomputable(def)) {
    // Re-run what computes it, and make what that reads available.
    SmallVector<Operation *> stack = {def};
    while (!stack.empty()) {
      Operation *op = stack.pop_back_val();
      if (!user.recomputed.insert(op))
        continue;
      if (auto dropout = llvm::dyn_cast<onnx::DropoutOp>(op);
          dropout && dropout.getMask()) {
        // Run again, a training-mode Dropout would draw another mask: the
        // backward keeps the forward's (a byte an element) and re-applies
        // it to the recomputed input (see the clones below).
        Value mask = dropout.getMask();
        fwd.addOutput(mask, named(pipe::attrs::kName, tagOf(mask)));
        user.inputs.insert({mask, named(pipe::attrs::kName, tagOf(mask))});
      }
      for (Value operand : op->getOperands()) {
        if (isCloneable(operand))
          continue;
        Operation *d = operand.getDefiningOp();
        if (d && stageOf.lookup(d) == user.stage &&
            (!phaseOf.count(d) || phaseOf.lookup(d) == Forward) && recomputable(d)) {
          stack.push_back(d);
          continue;
        }
        if (failed(needForward(user, operand, op)))
          return failure();
      }
    }
    return success();
  }
  if (defStage == user.stage) {
    if (user.phase == Backward) {
      fwd.addOutput(v, named(pipe::attrs::kName, tagOf(v)));
      user.inputs.insert({v, named(pipe::attrs::kName, tagOf(v))});
    }
    return success();
  }
  if (defStage > user.stage)
    return at->emitOpError() << "in stage " << user.stage
                             << " uses a forward value of the later stage "
                             << defStage;
  part(defStage, Forward).addOutput(v, named(pipe::attrs::kName, tagOf(v)));
  fwd.inputs.insert({v, named(pipe::attrs::kName, tagOf(v))});
  if (user.phase == Backward)
    user.inputs.insert({v, named(pipe::attrs::kName, tagOf(v))});
  return success();
}

/// `v`, or the value a whole-batch concat marker (--batchnorm full-batch)
/// reads in its place.
static Value throughConcat(Value v) {
  Operation *def = v.getDefiningOp();
  return def && def->hasAttr(wholebatch::kConcat) ? def->getOperand(0) : v;
}

/// Extends `values` through the ops of `ops` whose VJP passes a gradient on
/// unchanged (both operands of an Add, the first of a Sub or an Identity),
/// keeping the operands of type `type`.
static void addPassedOn(llvm::SetVector<Value> &values, ArrayRef<Operation *> ops, Type type) {
  for (unsigned i = 0; i < values.size(); ++i) {
    Operation *def = values[i].getDefiningOp();
    if (!def || !llvm::is_contained(ops, def))
      continue;
    unsigned passed = llvm::isa<onnx::AddOp>(def)                       ? 2
                      : llvm::isa<onnx::SubOp, onnx::IdentityOp>(def) ? 1
                                                                       : 0;
    for (unsigned j = 0; j < passed; ++j)
      if (throughConcat(def->getOperand(j)).getType() == type)
        values.insert(throughConcat(def->getOperand(j)));
  }
}

/// The forward value whose gradient `grad` (computed by the backward of
/// stage `from`, used by stage `to`) is: a value of forward `to` that forward
/// `from` reads, of grad's type. Several candidates are told apart by the
/// forward op whose VJP rule built `grad` (those ops share its location).
/// The candidates among `candidates` that `start` is, or passes its gradient
/// on to through `reader`'s forward ops (Adds, Identities) of `type`.
static SmallVector<Value> reachedFrom(Value start, ArrayRef<Value> candidates, Part &reader,
                                      Type type) {
  llvm::SetVector<Value> reach;
  reach.insert(start);
  addPassedOn(reach, reader.ops, type);
  SmallVector<Value> hit;
  for (Value c : candidates)
    if (reach.contains(c))
      hit.push_back(c);
  return hit;
}

SmallVector<Value> PipeSplitStagesPass::candidatesOf(Value grad, int64_t from,
                                                   int64_t to) {
  Part &reader = part(from, Forward);
  // The value the VJP rule built: under whole-batch stages (--batchnorm
  // full-batch) `grad` is part 0 of a pipe.microbatch_split of it.
  Value built = grad;
  if (Operation *def = grad.getDefiningOp(); def && def->hasAttr(wholebatch::kSplit))
    built = def->getOperand(0);
  SmallVector<Value> candidates;
  for (auto &[v, attr] : reader.inputs) {
    bool definedInTo = llvm::isa<BlockArgument>(v)
                           ? owner.count(v) && owner.lookup(v) == to
                           : stageOf.lookup(v.getDefiningOp()) == to;
    if (definedInTo && v.getType() == grad.getType())
      candidates.push_back(v);
  }
  // A gradient the autodiff passed on to operand i of the forward op at its
  // location, or summed for it in a later stage than the operand's
  // (pipe.grad_operand): that operand's. The op is in the reading stage
  // (a passed-on gradient) or in the receiving one (a sum).
  if (Operation *def = built.getDefiningOp(); def && candidates.size() > 1)
    if (auto index = def->getAttrOfType<IntegerAttr>(pipe::attrs::kGradOperand))
      for (Part &p : parts) {
        if (p.phase != Forward || (p.stage != from && p.stage != to))
          continue;
        for (Operation *op : p.ops)
          if (op->getLoc() == def->getLoc() && !op->hasAttr(wholebatch::kConcat) &&
              index.getInt() < int64_t(op->getNumOperands())) {
            // A candidate is the operand, or (read from a whole-batch
            // stage) a micro-batch part of it.
            Value operand = throughConcat(op->getOperand(index.getInt()));
            for (Value c : candidates) {
              Operation *split = c.getDefiningOp();
              if (c == operand || (split && split->hasAttr(wholebatch::kSplit) &&
                                   split->getOperand(0) == operand))
                return {c};
            }
          }
      }
  // A VJP op with a result per operand of its forward op (the norms', Conv's
  // and the recurrent ops' gradients): result i is operand i's gradient. A
  // norm's scale and bias have one type, so that which one a gradient is
  // cannot be told from the types (a LayerNorm shared by two stages: the
  // later stage's scale and bias contributions were summed as one).
  if (Operation *def = built.getDefiningOp();
      def && candidates.size() > 1 &&
      llvm::isa<onnx::LayerNormalizationGradOp, onnx::BatchNormalizationGradOp,
                onnx::ConvGradOp, onnx::LSTMGradOp, onnx::GRUGradOp,
                onnx::AttentionGradOp>(def)) {
    unsigned r = llvm::cast<OpResult>(built).getResultNumber();
    for (Part &p : parts) {
      if (p.phase != Forward)
        continue;
      for (Operation *op : p.ops) {
        if (op->getLoc() != def->getLoc() || op->hasAttr(wholebatch::kConcat) ||
            r >= op->getNumOperands())
          continue;
        SmallVector<Value> hit =
            reachedFrom(throughConcat(op->getOperand(r)), candidates, reader, grad.getType());
        if (hit.size() == 1)
          return hit;
      }
    }
  }
  if (candidates.size() > 1) {
    // The values whose gradient `grad` is: the operands of the forward op
    // whose VJP rule built it (they share its location), and through the
    // ops whose rule passes a gradient on unchanged (Add, Sub's first
    // operand, Identity) the operands of those. Whole-batch stages
    // (--batchnorm full-batch) put markers in between: the gradient is
    // part 0 of a pipe.microbatch_split of the one the rule built, and the
    // forward op reads the value through a pipe.microbatch_concat.
    Location loc = built.getDefiningOp()->getLoc();
    llvm::SetVector<Value> gradOf;
    for (Operation *op : reader.ops)
      if (op->getLoc() == loc)
        for (Value operand : op->getOperands())
          if (throughConcat(operand).getType() == grad.getType())
            gradOf.insert(throughConcat(operand));
    // No op of the reading stage is at that location: the op whose VJP
    // built the gradient is in a later stage, and the gradient reaches the
    // receiving stage's value through the reading stage's Adds (a residual
    // Add relays the gradient of its sum to the stream it continues: cuts
    // after a block's ln2 and after its residual Add). Taken where that op
    // reads one value of the gradient's type, so whose gradient it built is
    // clear.
    if (gradOf.empty()) {
      llvm::SetVector<Value> seeds;
      for (Part &p : parts)
        if (p.phase == Forward && p.stage != from)
          for (Operation *op : p.ops)
            if (op->getLoc() == loc)
              for (Value operand : op->getOperands())
                if (throughConcat(operand).getType() == grad.getType())
                  seeds.insert(throughConcat(operand));
      if (seeds.size() == 1)
        gradOf.insert(seeds.front());
    }
    addPassedOn(gradOf, reader.ops, grad.getType());
    SmallVector<Value> narrowed;
    for (Value c : candidates)
      if (gradOf.contains(c))
        narrowed.push_back(c);
    candidates = narrowed;
    // A Concat's gradient is a Split whose result i is operand i's (a
    // DenseNet concatenates several same-typed feature maps of the previous
    // stage).
    if (candidates.size() > 1)
      if (auto split = built.getDefiningOp<onnx::SplitOp>())
        for (Operation *op : reader.ops)
          if (auto concat = llvm::dyn_cast<onnx::ConcatOp>(op);
              concat && op->getLoc() == loc &&
              !op->hasAttr(wholebatch::kConcat) &&
              concat->getNumOperands() == split->getNumResults()) {
            Value operand = throughConcat(concat->getOperand(
                llvm::cast<OpResult>(built).getResultNumber()));
            if (llvm::is_contained(candidates, operand))
              candidates = {operand};
            break;
          }
  }
  // Still several: the forward op at the gradient's location is a product
  // (Mul, MatMul, Gemm, Conv) whose VJP computes an operand's gradient from
  // the other operands (Mul: da = dy b; MatMul: dA = dY Bᵀ, dB = Aᵀ dY). So
  // `grad` is of the one operand of that op its builder does not read
  // (directly or through a transpose), where exactly one is unread; and of
  // the candidate that operand is, or the one candidate it passes its
  // gradient on to through the stage's forward Adds (GELU's
  // x * (erf(x/sqrt 2) + 1) cut after the Erf: the Add's other operand is a
  // constant; attention's softmax(QKᵀ) V cut after the Softmax). Anything
  // else stays refused: a gradient that an Add passes to several candidates
  // is a contribution to each, not the gradient of one.
  if (candidates.size() > 1) {
    Operation *builder = built.getDefiningOp();
    llvm::SetVector<Value> read;
    for (Value operand : builder->getOperands()) {
      read.insert(operand);
      if (auto transpose = operand.getDefiningOp<onnx::TransposeOp>())
        read.insert(transpose->getOperand(0));
    }
    SmallVector<Operation *> located;
    for (Operation *op : reader.ops)
      if (op->getLoc() == builder->getLoc())
        located.push_back(op);
    if (located.size() == 1) {
      llvm::SetVector<Value> unread;
      for (Value operand : located.front()->getOperands()) {
        Value v = throughConcat(operand);
        if (v.getType() == grad.getType() && !read.contains(v) && !read.contains(operand))
          unread.insert(v);
      }
      if (unread.size() == 1) {
        SmallVector<Value> hit = reachedFrom(unread.front(), candidates, reader, grad.getType());
        if (hit.size() == 1)
          candidates = hit;
      }
    }
  }
  return candidates;
}

FailureOr<Value> PipeSplitStagesPass::primalOf(Value grad, int64_t from,
                                               int64_t to) {
  SmallVector<Value> candidates = candidatesOf(grad, from, to);
  if (candidates.size() != 1)
    return grad.getDefiningOp()->emitOpError()
           << "computes a gradient that stage " << to
           << " uses, but it is not clear of which of the "
           << candidates.size()
           << " values stage " << from << " receives from stage " << to
           << " (a gradient crosses a cut only as the gradient of an "
              "activation)";
  return candidates.front();
}

/// One gradient value can be the contribution to two values a later stage
/// reads: an Add passes its sum's gradient on to both operands, so a cut
/// right before a block's residual Add (the stream and the branch cross it)
/// sends one gradient that is the stream's and the branch's. The receiving
/// backward reads it as the one's or as the other's at each use, told by
/// the forward ops at the use's location (`whose` below). The candidate of
/// the first use keeps the value; each other one read gets its own copy (an
/// onnx.Identity in the sending backward: a view, sent as a message of its
/// own), so that every crossing gradient is the contribution to one primal
/// (the primals' other contributions are added to theirs on the way). Where
/// a use cannot be told, nothing changes and primalOf refuses the cut.
LogicalResult PipeSplitStagesPass::splitSharedGradients(
    const llvm::DenseMap<BlockArgument, Value> &weightGrads) {
  const int64_t numStages = static_cast<int64_t>(parts.size() / 2);
  for (int64_t to = 0; to < numStages; ++to) {
    Part &bwd = part(to, Backward);
    Part &fwd = part(to, Forward);
    llvm::SetVector<Value> crossing;
    for (Operation *op : bwd.ops)
      for (Value v : op->getOperands()) {
        Operation *def = v.getDefiningOp();
        if (!isCloneable(v) && def && phaseOf.count(def) &&
            phaseOf.lookup(def) == Backward && stageOf.lookup(def) != to)
          crossing.insert(v);
      }
    llvm::DenseSet<Operation *> inBackward(bwd.ops.begin(), bwd.ops.end());
    for (Value v : crossing) {
      const int64_t from = stageOf.lookup(v.getDefiningOp());
      SmallVector<Value> candidates = candidatesOf(v, from, to);
      if (candidates.size() < 2)
        continue;
      if (llvm::any_of(bwd.weights,
                       [&](BlockArgument w) { return weightGrads.lookup(w) == v; }))
        continue;
      SmallVector<llvm::SetVector<Value>> reach;
      for (Value c : candidates) {
        reach.emplace_back();
        reach.back().insert(c);
        addPassedOn(reach.back(), fwd.ops, v.getType());
      }
      // The candidate whose gradient a use reads (std::nullopt: not clear),
      // told by the forward ops at its location. A VJP op of forward op F
      // reads the gradient of F's result: the candidate whose values F
      // computes. A sum of two contributions to a value (pipe.grad_sum,
      // located at the op whose VJP gave the newer one, which read the
      // value) is of the candidate whose values that op reads; where none
      // or several are (the op is in the later stage, or reads values of
      // both), by the uses of the sum, which must agree. So is a whole-batch
      // concat marker (--batchnorm full-batch: one per value and stage, at
      // its first user's location).
      llvm::DenseMap<Operation *, std::optional<unsigned>> memo;
      std::function<std::optional<unsigned>(Operation *)> whose =
          [&](Operation *user) -> std::optional<unsigned> {
        if (auto it = memo.find(user); it != memo.end())
          return it->second;
        const bool marker = user->hasAttr(wholebatch::kConcat);
        const bool sum = llvm::isa<onnx::AddOp>(user) && user->hasAttr(pipe::attrs::kGradSum);
        std::optional<unsigned> which;
        bool clash = false;
        for (Operation *f : marker ? ArrayRef<Operation *>() : ArrayRef(fwd.ops)) {
          if (f->getLoc() != user->getLoc())
            continue;
          for (unsigned i = 0; i < candidates.size(); ++i) {
            bool hit = sum ? llvm::any_of(f->getOperands(),
                                          [&](Value o) {
                                            return reach[i].contains(throughConcat(o));
                                          })
                           : llvm::any_of(f->getResults(),
                                          [&](Value r) { return reach[i].contains(r); });
            if (!hit)
              continue;
            clash |= which && *which != i;
            which = i;
          }
        }
        if (!clash && (which || !(marker || sum)))
          return memo[user] = which;
        if (!(marker || sum) || user->getResult(0).use_empty())
          return memo[user] = std::nullopt;
        which.reset();
        for (Operation *next : user->getResult(0).getUsers()) {
          std::optional<unsigned> w =
              inBackward.contains(next) ? whose(next) : std::nullopt;
          if (!w || (which && *which != *w))
            return memo[user] = std::nullopt;
          which = w;
        }
        return memo[user] = which;
      };
      // Per use of `v`, its candidate; a whole-batch marker whose users
      // read different candidates' gradients is split like `v`: per use of
      // its result (markerUses), a clone reading the candidate's copy.
      SmallVector<std::pair<OpOperand *, unsigned>> uses;
      SmallVector<std::tuple<Operation *, OpOperand *, unsigned>> markerUses;
      bool clear = true;
      for (OpOperand &use : v.getUses()) {
        Operation *owner = use.getOwner();
        if (!inBackward.contains(owner))
          continue;
        if (std::optional<unsigned> which = whose(owner)) {
          uses.push_back({&use, *which});
          continue;
        }
        if (!owner->hasAttr(wholebatch::kConcat) ||
            llvm::any_of(markerUses, [&](auto &m) { return std::get<0>(m) == owner; })) {
          clear = owner->hasAttr(wholebatch::kConcat); // a marker reads v once per micro-batch
          if (!clear)
            break;
          continue;
        }
        for (OpOperand &next : owner->getResult(0).getUses()) {
          std::optional<unsigned> w =
              inBackward.contains(next.getOwner()) ? whose(next.getOwner()) : std::nullopt;
          if (!w) {
            clear = false;
            break;
          }
          markerUses.push_back({owner, &next, *w});
        }
        if (!clear)
          break;
      }
      if (!clear || (uses.empty() && markerUses.empty()))
        continue;
      SmallVector<unsigned> used;
      for (auto &[use, i] : uses)
        if (!llvm::is_contained(used, i))
          used.push_back(i);
      for (auto &[marker, use, i] : markerUses)
        if (!llvm::is_contained(used, i))
          used.push_back(i);
      primalFor[{v.getAsOpaquePointer(), to}] = candidates[used.front()];
      Operation *def = v.getDefiningOp();
      Part &sender = part(from, Backward);
      for (unsigned i : ArrayRef<unsigned>(used).drop_front()) {
        OpBuilder b(def->getContext());
        b.setInsertionPointAfter(def);
        autodiff::OnnxBuilder ob(b, def->getLoc());
        Value copy = ob.create<onnx::IdentityOp>({v});
        if (ob.failed())
          return failure();
        Operation *id = copy.getDefiningOp();
        id->setAttr(pipe::attrs::kStage, def->getAttr(pipe::attrs::kStage));
        phaseOf[id] = Backward;
        stageOf[id] = from;
        sender.ops.insert(std::next(llvm::find(sender.ops, def)), id);
        for (auto &[use, j] : uses)
          if (j == i)
            use->set(copy);
        llvm::DenseMap<Operation *, Operation *> clones;
        for (auto &[marker, use, j] : markerUses) {
          if (j != i)
            continue;
          Operation *&clone = clones[marker];
          if (!clone) {
            IRMapping map;
            map.map(v, copy);
            OpBuilder mb(marker);
            mb.setInsertionPointAfter(marker);
            clone = mb.clone(*marker, map);
            phaseOf[clone] = Backward;
            stageOf[clone] = to;
            bwd.ops.insert(std::next(llvm::find(bwd.ops, marker)), clone);
          }
          use->set(clone->getResult(0));
        }
        primalFor[{copy.getAsOpaquePointer(), to}] = candidates[i];
      }
    }
  }
  return success();
}

void PipeSplitStagesPass::runOnOperation() {
  ModuleOp module = getOperation();
  phaseOf.clear();
  stageOf.clear();
  owner.clear();
  paramName.clear();
  inputName.clear();
  stepInputName.clear();
  stateName.clear();
  stateUsers.clear();
  tags.clear();
  extraContributions.clear();
  usedTags.clear();
  parts.clear();
  primalFor.clear();
  step = module.lookupSymbol<func::FuncOp>(funcName);
  if (!step || step.isExternal()) {
    module.emitError() << "pipe-split-stages: no function @" << funcName;
    return signalPassFailure();
  }
  if (!module.getOps<pipe::StageOp>().empty()) {
    module.emitError() << "pipe-split-stages: the module has pipe.stage ops "
                          "already";
    return signalPassFailure();
  }
  Block &body = step.getBody().front();
  auto ret = llvm::cast<func::ReturnOp>(body.getTerminator());
  // Stages are cut between straight-line ops: an op with regions would
  // carry values across the cut that no operand names.
  for (Operation &op : body)
    if (op.getNumRegions() > 0) {
      op.emitOpError() << "has regions: pipe-split-stages cuts straight-line ops "
                          "(control flow is not supported)";
      return signalPassFailure();
    }

  // Arguments: inputs, trainable parameters with their owners.
  SmallVector<BlockArgument> params;
  llvm::StringMap<unsigned> inputArg;
  for (BlockArgument arg : step.getArguments()) {
    unsigned i = arg.getArgNumber();
    if (auto name = step.getArgAttrOfType<StringAttr>(i, pipe::attrs::kInput)) {
      // The data feeds inputs by name: two arguments of one name would read
      // one array (each stage that takes one feeds it as its own type).
      if (auto [it, fresh] = inputArg.try_emplace(name.getValue(), i); !fresh) {
        step.emitError() << "arguments #" << it->second << " and #" << i
                         << " are both graph input '" << name.getValue() << "'";
        return signalPassFailure();
      }
      inputName[arg] = name;
    }
    if (auto name = step.getArgAttrOfType<StringAttr>(i, pipe::attrs::kStepInput))
      stepInputName[arg] = name;
    auto name = step.getArgAttrOfType<StringAttr>(i, pipe::attrs::kParam);
    if (name && !step.getArgAttr(i, pipe::attrs::kTrainable))
      stateName[arg] = name;
    if (!name || !step.getArgAttr(i, pipe::attrs::kTrainable))
      continue;
    auto stage = step.getArgAttrOfType<IntegerAttr>(i, pipe::attrs::kStage);
    if (!stage) {
      step.emitError() << "parameter '" << name.getValue()
                       << "' has no owner stage (pipe.stage): run "
                          "--pipe-assign-stages before --pipe-autodiff";
      return signalPassFailure();
    }
    owner[arg] = stage.getInt();
    paramName[arg] = name;
    params.push_back(arg);
  }

  // The loss and each parameter's gradient: a pipe.grad result, or the
  // gradient operand of the optimizer op whose result is its pipe.update.
  std::optional<Value> loss;
  llvm::DenseMap<BlockArgument, Value> weightGrads;
  SmallVector<std::pair<BlockArgument, Value>> stateUpdates;
  auto optimizer = step->getAttrOfType<DictionaryAttr>(pipe::attrs::kOptimizer);
  for (unsigned r = 0; r < step.getNumResults(); ++r) {
    Value v = ret.getOperand(r);
    if (step.getResultAttr(r, pipe::attrs::kLoss))
      loss = v;
    StringAttr gradOf = step.getResultAttrOfType<StringAttr>(r, pipe::attrs::kGrad);
    StringAttr updateOf =
        step.getResultAttrOfType<StringAttr>(r, pipe::attrs::kUpdate);
    StringAttr name = gradOf ? gradOf : updateOf;
    if (!name)
      continue;
    BlockArgument param;
    for (BlockArgument p : params)
      if (paramName.lookup(p) == name)
        param = p;
    if (!param && updateOf) {
      // State a forward updates (a BatchNormalization's running statistic).
      for (auto &[arg, n] : stateName)
        if (n == updateOf)
          stateUpdates.push_back({llvm::cast<BlockArgument>(arg), v});
      continue;
    }
    if (!param)
      continue; // optimizer state and the step counter
    if (gradOf) {
      weightGrads[param] = v;
      continue;
    }
    Operation *update = v.getDefiningOp();
    if (!update ||
        !llvm::isa<onnx::SGDOp, onnx::MomentumOp, onnx::AdamWOp,
                   onnx::AdagradOp>(update)) {
      step.emitError() << "pipe-split-stages: the update of '"
                       << name.getValue()
                       << "' is not an onnx.SGD/Momentum/AdamW/Adagrad op";
      return signalPassFailure();
    }
    Value g = update->getOperand(llvm::isa<onnx::SGDOp>(update) ? 2 : 3);
    // Adam's L2 penalty is added to the gradient before the update
    // (pipe-add-optimizer); pipe.update adds it itself.
    if (optimizer && optimizer.getAs<StringAttr>("kind") &&
        optimizer.getAs<StringAttr>("kind").getValue() == "adam")
      if (auto add = g.getDefiningOp<onnx::AddOp>())
        if (auto wd = optimizer.getAs<FloatAttr>("weight_decay");
            wd && wd.getValueAsDouble() != 0)
          g = add.getOperand(0);
    // Global-norm clipping (pipe-add-optimizer clip-grad-norm) needs every
    // stage's gradients: the programs' pipe.clip_grad_norm does it.
    if (auto mul = g.getDefiningOp<onnx::MulOp>(); mul && mul->hasAttr(pipe::attrs::kClip))
      g = mul.getOperand(0);
    weightGrads[param] = g;
  }
  if (!loss) {
    step.emitError() << "pipe-split-stages: @" << funcName
                     << " has no pipe.loss result";
    return signalPassFailure();
  }
  for (BlockArgument p : params)
    if (!weightGrads.count(p)) {
      step.emitError() << "pipe-split-stages: no gradient for parameter '"
                       << paramName.lookup(p).getValue() << "'";
      return signalPassFailure();
    }

  // Phases: the forward computes the loss; the backward the gradients; the
  // rest (the optimizer) is dropped.
  llvm::SetVector<Operation *> worklist;
  auto slice = [&](ArrayRef<Value> roots, Phase phase) {
    SmallVector<Value> stack(roots.begin(), roots.end());
    while (!stack.empty()) {
      Operation *def = stack.pop_back_val().getDefiningOp();
      if (!def || isCloneable(def->getResult(0)) || phaseOf.count(def))
        continue;
      phaseOf[def] = phase;
      llvm::append_range(stack, def->getOperands());
    }
  };
  SmallVector<Value> forwardRoots{*loss};
  for (auto &[arg, v] : stateUpdates)
    forwardRoots.push_back(v);
  slice(forwardRoots, Forward);
  SmallVector<Value> gradRoots;
  for (BlockArgument p : params)
    gradRoots.push_back(weightGrads[p]);
  slice(gradRoots, Backward);

  int64_t numStages = 0;
  for (Operation &op : body.without_terminator()) {
    if (!phaseOf.count(&op))
      continue;
    auto stage = op.getAttrOfType<IntegerAttr>(pipe::attrs::kStage);
    if (!stage || stage.getInt() < 0) {
      op.emitOpError() << "has no pipe.stage: run --pipe-assign-stages on "
                          "the forward before --pipe-autodiff";
      return signalPassFailure();
    }
    stageOf[&op] = stage.getInt();
    numStages = std::max(numStages, stage.getInt() + 1);
  }
  for (auto &[p, s] : owner)
    numStages = std::max(numStages, s + 1);
  parts.resize(2 * numStages);
  for (int64_t s = 0; s < numStages; ++s)
    for (Phase ph : {Forward, Backward}) {
      part(s, ph).stage = s;
      part(s, ph).phase = ph;
    }
  for (BlockArgument p : params) {
    part(owner[p], Forward).weights.push_back(p);
    part(owner[p], Backward).weights.push_back(p);
  }
  for (Operation &op : body.without_terminator())
    if (phaseOf.count(&op))
      part(stageOf[&op], phaseOf[&op]).ops.push_back(&op);
  if (Operation *def = loss->getDefiningOp(); def && phaseOf.count(def))
    part(stageOf[def], Forward).addOutput(*loss, named(pipe::attrs::kLoss, ""));

  // What crosses: forward values first (they decide the names of the
  // activations), then the backward's saved values and gradients.
  for (int64_t s = 0; s < numStages; ++s)
    for (Operation *op : part(s, Forward).ops)
      for (Value v : op->getOperands()) {
        if (isCloneable(v) ||
            (v.getDefiningOp() && stageOf.lookup(v.getDefiningOp()) == s))
          continue;
        if (failed(needForward(part(s, Forward), v, op)))
          return signalPassFailure();
      }
  // State updates: a result of the forward of the one stage that holds the
  // state.
  for (auto &[arg, v] : stateUpdates) {
    Operation *def = v.getDefiningOp();
    StringRef name = stateName.lookup(arg).getValue();
    if (!def || !phaseOf.count(def)) {
      step.emitError() << "pipe-split-stages: the update of state '" << name
                       << "' is not computed by the forward";
      return signalPassFailure();
    }
    int64_t s = stageOf.lookup(def);
    for (Value operand : def->getOperands())
      if (llvm::isa<BlockArgument>(operand) && stateName.count(operand) &&
          failed(needForward(part(s, Forward), operand, def)))
        return signalPassFailure();
    for (int64_t user : stateUsers[arg])
      if (user != s) {
        def->emitOpError() << "in stage " << s << " updates state '" << name
                           << "', which stage " << user
                           << " reads too: a stage's state is held by its "
                              "device only; give each stage its own";
        return signalPassFailure();
      }
    part(s, Forward).addOutput(v, named(pipe::attrs::kUpdate, name));
  }
  // Gradients crossing: per (from, primal) the contributions, summed on the
  // sending side; on the receiving side the first use reads the received
  // sum and the others read zeros.
  llvm::DenseSet<Value> zeroed;            // contributions read as zeros
  // Per primal, the contribution its stage receives: from the nearest
  // contributing stage, into which the later stages' contributions are
  // added on their way back (pipe-insert-transfers relays them).
  llvm::DenseMap<Value, Value> firstContribution;
  // Per (primal, stage), the contribution a stage other than the nearest
  // sends on its own, into which that stage's others are added.
  llvm::DenseMap<std::pair<void *, int64_t>, Value> sentOnItsOwn;
  // The crossing gradients and their primals (primalFor), first: the
  // contribution a primal's stage receives is the one from the nearest
  // stage. A gradient that is the contribution to several of them is
  // received once for each.
  if (failed(splitSharedGradients(weightGrads)))
    return signalPassFailure();
  auto crossing = [&](Part &user, Value v) -> FailureOr<Value> {
    if (isCloneable(v))
      return Value();
    Operation *def = v.getDefiningOp();
    if (!def || !phaseOf.count(def) || phaseOf.lookup(def) == Forward)
      return Value();
    int64_t from = stageOf.lookup(def);
    if (from == user.stage)
      return Value();
    auto &cached = primalFor[{v.getAsOpaquePointer(), user.stage}];
    if (!cached) {
      auto primal = primalOf(v, from, user.stage);
      if (failed(primal))
        return failure();
      cached = *primal;
    }
    return cached;
  };
  auto forEachBackwardUse = [&](auto fn) -> LogicalResult {
    for (int64_t s = 0; s < numStages; ++s) {
      Part &bwd = part(s, Backward);
      for (Operation *op : bwd.ops)
        for (Value v : op->getOperands())
          if (failed(fn(bwd, v, op)))
            return failure();
      for (BlockArgument p : bwd.weights)
        if (failed(fn(bwd, weightGrads[p], ret.getOperation())))
          return failure();
    }
    return success();
  };
  if (failed(forEachBackwardUse([&](Part &user, Value v, Operation *) {
        auto primal = crossing(user, v);
        if (failed(primal))
          return failure();
        if (!*primal)
          return success();
        Value &first = firstContribution[*primal];
        int64_t from = stageOf.lookup(v.getDefiningOp());
        if (!first || from < stageOf.lookup(first.getDefiningOp()))
          first = v;
        return success();
      })))
    return signalPassFailure();
  auto needBackward = [&](Part &user, Value v, Operation *at) -> LogicalResult {
    auto primal = crossing(user, v);
    if (failed(primal))
      return failure();
    if (!*primal) {
      Operation *def = v.getDefiningOp();
      if (isCloneable(v) ||
          (def && phaseOf.count(def) && phaseOf.lookup(def) == Backward))
        return success();
      return needForward(user, v, at);
    }
    int64_t from = stageOf.lookup(v.getDefiningOp());
    Value first = firstContribution.lookup(*primal);
    if (first != v) {
      zeroed.insert(v);
      if (stageOf.lookup(first.getDefiningOp()) == from) {
        auto &extras = extraContributions[{first.getAsOpaquePointer(),
                                           tagOf(*primal).str()}];
        if (!llvm::is_contained(extras, v))
          extras.push_back(v);
      } else {
        // Sent on its own; the stages in between add it to theirs. A
        // stage's several contributions go as one sum (two results tagged
        // with one gradient name would be two messages for one value: a
        // LayerNorm applied twice in the last of 3 stages, its weights
        // owned by the first).
        Value &lead = sentOnItsOwn[{primal->getAsOpaquePointer(), from}];
        if (!lead) {
          lead = v;
          part(from, Backward)
              .addOutput(v, named(pipe::attrs::kGrad, tagOf(*primal)));
        } else if (lead != v) {
          auto &extras = extraContributions[{lead.getAsOpaquePointer(),
                                             tagOf(*primal).str()}];
          if (!llvm::is_contained(extras, v))
            extras.push_back(v);
        }
      }
      return success();
    }
    part(user.stage, Forward)
        .addOutput(*primal, named(pipe::attrs::kName, tagOf(*primal)));
    user.inputs.insert({v, named(pipe::attrs::kGrad, tagOf(*primal))});
    part(from, Backward).addOutput(v, named(pipe::attrs::kGrad, tagOf(*primal)));
    return success();
  };
  if (failed(forEachBackwardUse(needBackward)))
    return signalPassFailure();

  Builder b(&getContext());
  for (Part &p : parts)
    if (failed(build(p, weightGrads, zeroed)))
      return signalPassFailure();

  // The step's facts the programs need, on the module.
  for (StringRef key : {pipe::attrs::kMicrobatches, pipe::attrs::kBatchSize,
                        pipe::attrs::kLossCombine, pipe::attrs::kLossScale,
                        pipe::attrs::kLossMean, wholebatch::kStages})
    if (Attribute a = step->getAttr(key))
      module->setAttr(key, a);
  if (optimizer) {
    SmallVector<NamedAttribute> entries;
    for (NamedAttribute e : optimizer) {
      if (e.getName() == "lr_decay") {
        if (auto f = llvm::dyn_cast<FloatAttr>(e.getValue());
            f && f.getValueAsDouble() != 0) {
          step.emitError() << "pipe-split-stages: pipe.update has no "
                              "Adagrad lr_decay";
          return signalPassFailure();
        }
        continue;
      }
      entries.push_back(e);
    }
    auto kind = optimizer.getAs<StringAttr>("kind");
    if (!kind || !pipe::symbolizeOptimizerKind(kind.getValue())) {
      step.emitError() << "pipe-split-stages: optimizer "
                       << optimizer.get("kind")
                       << " has no pipe.update form";
      return signalPassFailure();
    }
    module->setAttr(pipe::attrs::kOptimizer, b.getDictionaryAttr(entries));
  }
  step.erase();
}

LogicalResult PipeSplitStagesPass::build(
    Part &p, const llvm::DenseMap<BlockArgument, Value> &weightGrads,
    const llvm::DenseSet<Value> &zeroed) {
  MLIRContext *ctx = &getContext();
  OpBuilder b(ctx);
  b.setInsertionPoint(step);
  SmallVector<Type> argTypes;
  SmallVector<Attribute> argAttrs;
  for (BlockArgument w : p.weights) {
    argTypes.push_back(w.getType());
    argAttrs.push_back(b.getDictionaryAttr(
        named(pipe::attrs::kParam, paramName.lookup(w).getValue())));
  }
  // Inputs, then the state (trailing, see pipe.stage).
  auto isState = [](NamedAttribute attr) {
    return attr.getName() == pipe::attrs::kState;
  };
  SmallVector<std::pair<Value, NamedAttribute>> inputs;
  for (bool state : {false, true})
    for (auto &[v, attr] : p.inputs)
      if (isState(attr) == state)
        inputs.push_back({v, attr});
  for (auto &[v, attr] : inputs) {
    argTypes.push_back(v.getType());
    argAttrs.push_back(b.getDictionaryAttr(attr));
  }
  // Results: a backward's crossing gradients, then its weight gradients; a
  // forward's loss first, then its named values.
  SmallVector<Value> results;
  SmallVector<Attribute> resultAttrs;
  auto addResult = [&](Value v, NamedAttribute attr) {
    results.push_back(v);
    if (attr.getName() == pipe::attrs::kLoss)
      resultAttrs.push_back(b.getDictionaryAttr(
          b.getNamedAttr(pipe::attrs::kLoss, b.getUnitAttr())));
    else
      resultAttrs.push_back(b.getDictionaryAttr(attr));
  };
  if (p.phase == Forward) {
    for (auto &[v, attr] : p.outputs)
      if (attr.getName() == pipe::attrs::kLoss)
        addResult(v, attr);
    for (auto &[v, attr] : p.outputs)
      if (attr.getName() != pipe::attrs::kLoss)
        addResult(v, attr);
  } else {
    for (auto &[v, attr] : p.outputs)
      addResult(v, attr);
    for (BlockArgument w : p.weights) {
      results.push_back(weightGrads.lookup(w));
      resultAttrs.push_back(b.getDictionaryAttr({}));
    }
  }
  SmallVector<Type> resultTypes;
  for (Value v : results)
    resultTypes.push_back(v.getType());

  std::string name = ("s" + Twine(p.stage) +
                      (p.phase == Forward ? "_fwd" : "_bwd"))
                         .str();
  auto stage = pipe::StageOp::create(
      b, step.getLoc(), name,
      p.phase == Forward ? pipe::Phase::Forward : pipe::Phase::Backward,
      p.stage, p.weights.size(), b.getFunctionType(argTypes, resultTypes));
  stage.setAllArgAttrs(argAttrs);
  stage.setAllResultAttrs(resultAttrs);
  if (p.phase == Backward && recompute && p.stage + 1 < int64_t(parts.size() / 2))
    stage->setAttr(pipe::attrs::kRecompute, b.getUnitAttr());
  Block *block = new Block();
  stage.getBody().push_back(block);
  IRMapping map;
  for (BlockArgument w : p.weights)
    map.map(w, block->addArgument(w.getType(), w.getLoc()));
  for (auto &[v, attr] : inputs)
    map.map(v, block->addArgument(v.getType(), v.getLoc()));
  b.setInsertionPointToStart(block);

  // The value `v` has in this function: mapped, a cloned constant, or
  // zeros for a gradient contribution received as part of another.
  auto lookup = [&](Value v, Location loc) -> Value {
    if (Value m = map.lookupOrNull(v))
      return m;
    if (isCloneable(v)) {
      Operation *copy = b.clone(*v.getDefiningOp());
      map.map(v.getDefiningOp()->getResults(), copy->getResults());
      return map.lookup(v);
    }
    if (zeroed.contains(v) && stageOf.lookup(v.getDefiningOp()) != p.stage) {
      auto t = llvm::cast<RankedTensorType>(v.getType());
      Value zeros = onnx::ConstantOp::create(
          b, loc, t,
          DenseElementsAttr::get(t, b.getZeroAttr(t.getElementType())));
      map.map(v, zeros);
      return zeros;
    }
    return Value();
  };
  // A recomputing backward re-runs its forward ops first, in step order.
  SmallVector<Operation *> ops(p.recomputed.begin(), p.recomputed.end());
  llvm::sort(ops, [](Operation *a, Operation *b) { return a->isBeforeInBlock(b); });
  llvm::append_range(ops, p.ops);
  for (Operation *op : ops) {
    // A zero contribution added to something is that something.
    if (llvm::isa<onnx::AddOp>(op)) {
      Value x = op->getOperand(0), y = op->getOperand(1);
      if (zeroed.contains(y) && !map.lookupOrNull(y) && x.getType() == op->getResult(0).getType() &&
          map.lookupOrNull(x)) {
        map.map(op->getResult(0), map.lookup(x));
        continue;
      }
      if (zeroed.contains(x) && !map.lookupOrNull(x) && y.getType() == op->getResult(0).getType() &&
          map.lookupOrNull(y)) {
        map.map(op->getResult(0), map.lookup(y));
        continue;
      }
    }
    for (Value v : op->getOperands())
      if (!lookup(v, op->getLoc()))
        return op->emitOpError() << "pipe-split-stages: operand "
                                 << v.getType() << " is not available in @"
                                 << name;
    auto dropout = llvm::dyn_cast<onnx::DropoutOp>(op);
    if (dropout && dropout.getMask() && p.recomputed.contains(op)) {
      // The recomputed Dropout: the forward's mask (an input) applied to
      // the recomputed input. DropoutGrad's x * mask / (1 - ratio) is the
      // forward's formula, so the output is the forward's to the bit.
      Value out = onnx::DropoutGradOp::create(
          b, op->getLoc(), dropout.getOutput().getType(),
          map.lookup(dropout.getData()), map.lookup(dropout.getMask()),
          map.lookup(dropout.getRatio()), map.lookup(dropout.getTrainingMode()));
      map.map(dropout.getOutput(), out);
      continue;
    }
    b.clone(*op, map);
  }
  SmallVector<Value> mapped;
  for (Value v : results) {
    Value m = lookup(v, step.getLoc());
    if (!m)
      return step.emitError() << "pipe-split-stages: a result of @" << name
                              << " is not computed there";
    auto extras = extraContributions.find(
        {v.getAsOpaquePointer(),
         stringAttrOf(llvm::cast<DictionaryAttr>(resultAttrs[mapped.size()]),
                      pipe::attrs::kGrad)});
    if (p.phase == Backward && extras != extraContributions.end())
      for (Value extra : extras->second) {
        autodiff::OnnxBuilder ob(b, extra.getLoc());
        Value sum = ob.add(m, map.lookup(extra));
        if (ob.failed() || sum.getType() != v.getType())
          return emitError(extra.getLoc(),
                           "pipe-split-stages: cannot sum the contributions "
                           "to a gradient");
        if (Attribute s = extra.getDefiningOp()->getAttr(pipe::attrs::kStage))
          sum.getDefiningOp()->setAttr(pipe::attrs::kStage, s);
        m = sum;
      }
    mapped.push_back(m);
  }
  pipe::ReturnOp::create(b, step.getLoc(), mapped);
  return success();
}
