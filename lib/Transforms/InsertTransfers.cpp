//===- InsertTransfers.cpp - pipe-insert-transfers: cut-crossing values ----===//
//
// After pipe-split-stages a stage's forward may read a value of any earlier
// stage. Pipelined devices only talk to their neighbours (pipe-schedule
// sends stage s's results to s+1 and their gradients back), so a value
// skipping stages is relayed: each stage in between takes it and returns it
// under a new name, and its backward passes the gradient back (added to its
// own contribution when it has one). Then every transfer is recorded on the
// module for plan.json.
//
//===----------------------------------------------------------------------===//
#include "pipec/Autodiff/OnnxBuilder.h"
#include "dialects/pipe/PipeAttrNames.h"
#include "pipec/Transforms/Passes.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/StringMap.h"

namespace mlir::pipec {
#define GEN_PASS_DEF_PIPEINSERTTRANSFERS
#include "pipec/Transforms/Passes.h.inc"
} // namespace mlir::pipec

using namespace mlir;
using namespace mlir::pipec;

static std::string stringAttrOf(DictionaryAttr attrs, StringRef key) {
  if (!attrs)
    return "";
  if (auto s = attrs.getAs<StringAttr>(key))
    return s.str();
  return "";
}

namespace {
struct Stage {
  pipe::StageOp fwd, bwd;
};

struct PipeInsertTransfersPass
    : public pipec::impl::PipeInsertTransfersBase<PipeInsertTransfersPass> {
  using Base::Base;
  void runOnOperation() override;

private:
  std::vector<Stage> stages;
  /// The stage whose forward computes a named value (its result), by name.
  llvm::StringMap<int64_t> producer;
  /// Memo of relays: (name, stage) -> the name stage's forward gets it as.
  std::map<std::pair<std::string, int64_t>, std::string> relayed;
  /// The relays built: (stage r, name r takes, name r returns).
  SmallVector<std::tuple<int64_t, std::string, std::string>> relays;

  FailureOr<std::string> nameAt(const std::string &name, int64_t stage);
};
} // namespace

static std::optional<unsigned> argNamed(pipe::StageOp op, StringRef key,
                                        StringRef name) {
  for (unsigned i = op.getParams(); i < op.getNumArguments(); ++i)
    if (stringAttrOf(op.getArgAttrDict(i), key) == name)
      return i;
  return std::nullopt;
}

static std::optional<unsigned> resultNamed(pipe::StageOp op, StringRef key,
                                           StringRef name) {
  for (unsigned i = 0; i < op.getNumResults(); ++i)
    if (stringAttrOf(op.getResultAttrDict(i), key) == name)
      return i;
  return std::nullopt;
}

static void addResult(pipe::StageOp op, unsigned index, Value v,
                      DictionaryAttr attrs) {
  auto ret = llvm::cast<pipe::ReturnOp>(op.getBody().front().getTerminator());
  (void)op.insertResult(index, v.getType(), attrs);
  ret->insertOperands(index, v);
}

static DictionaryAttr nameDict(MLIRContext *ctx, StringRef key,
                               StringRef value) {
  Builder b(ctx);
  return b.getDictionaryAttr(b.getNamedAttr(key, b.getStringAttr(value)));
}

/// The name under which the forward of `stage` receives `name` from the
/// previous stage, relaying it through the stages in between.
FailureOr<std::string> PipeInsertTransfersPass::nameAt(const std::string &name,
                                                       int64_t stage) {
  auto it = producer.find(name);
  if (it == producer.end())
    return stages[stage].fwd.emitError()
           << "@" << stages[stage].fwd.getSymName() << " takes '" << name
           << "', which no earlier forward returns";
  if (it->second >= stage)
    return stages[stage].fwd.emitError()
           << "@" << stages[stage].fwd.getSymName() << " takes '" << name
           << "' from stage " << it->second << ", which is not earlier";
  if (it->second == stage - 1)
    return name;
  auto memo = relayed.find({name, stage});
  if (memo != relayed.end())
    return memo->second;
  auto prev = nameAt(name, stage - 1);
  if (failed(prev))
    return failure();
  int64_t r = stage - 1;
  pipe::StageOp fwd = stages[r].fwd;
  MLIRContext *ctx = fwd.getContext();
  std::optional<unsigned> arg = argNamed(fwd, pipe::attrs::kName, *prev);
  Value in;
  if (arg) {
    in = fwd.getArgument(*arg);
  } else {
    // Before the trailing state arguments (pipe.stage's order).
    unsigned index = fwd.getNumArguments() - unsigned(fwd.getNumStateArgs());
    Type type = stages[it->second].fwd.getResultTypes()[*resultNamed(
        stages[it->second].fwd, pipe::attrs::kName, name)];
    (void)fwd.insertArgument(index, type, nameDict(ctx, pipe::attrs::kName, *prev),
                             fwd.getLoc());
    in = fwd.getArgument(index);
  }
  std::string out = name + ".s" + std::to_string(r);
  addResult(fwd, fwd.getNumResults(), in, nameDict(ctx, pipe::attrs::kName, out));
  relays.push_back({r, *prev, out});
  return relayed[{name, stage}] = out;
}

void PipeInsertTransfersPass::runOnOperation() {
  ModuleOp module = getOperation();
  MLIRContext *ctx = &getContext();
  std::map<int64_t, Stage> byIndex;
  for (auto op : module.getOps<pipe::StageOp>()) {
    Stage &s = byIndex[op.getStage()];
    pipe::StageOp &slot =
        op.getPhase() == pipe::Phase::Forward ? s.fwd : s.bwd;
    if (op.getPhase() != pipe::Phase::Forward &&
        op.getPhase() != pipe::Phase::Backward) {
      op.emitError() << "pipe-insert-transfers handles forward and backward "
                        "stages only";
      return signalPassFailure();
    }
    if (slot) {
      op.emitError() << "a second " << pipe::stringifyPhase(op.getPhase())
                     << " function for stage " << op.getStage();
      return signalPassFailure();
    }
    slot = op;
  }
  if (byIndex.empty()) {
    module.emitError() << "pipe-insert-transfers: no pipe.stage (run "
                          "--pipe-split-stages first)";
    return signalPassFailure();
  }
  for (auto &[index, s] : byIndex) {
    if (index != int64_t(stages.size()) || !s.fwd || !s.bwd) {
      module.emitError() << "pipe-insert-transfers: stage " << stages.size()
                         << " needs one forward and one backward function";
      return signalPassFailure();
    }
    stages.push_back(s);
  }
  for (auto [index, s] : llvm::enumerate(stages))
    for (unsigned i = 0; i < s.fwd.getNumResults(); ++i) {
      std::string name = stringAttrOf(s.fwd.getResultAttrDict(i), pipe::attrs::kName);
      if (!name.empty())
        producer[name] = index;
    }

  // Forward: rename the far-away reads to the relayed names.
  for (auto [index, s] : llvm::enumerate(stages)) {
    for (unsigned i = s.fwd.getParams(); i < s.fwd.getNumArguments(); ++i) {
      std::string name = stringAttrOf(s.fwd.getArgAttrDict(i), pipe::attrs::kName);
      if (name.empty())
        continue;
      auto local = nameAt(name, index);
      if (failed(local))
        return signalPassFailure();
      if (*local == name)
        continue;
      s.fwd.setArgAttr(i, pipe::attrs::kName, StringAttr::get(ctx, *local));
      if (auto a = argNamed(s.bwd, pipe::attrs::kName, name))
        s.bwd.setArgAttr(*a, pipe::attrs::kName, StringAttr::get(ctx, *local));
      if (auto r = resultNamed(s.bwd, pipe::attrs::kGrad, name))
        s.bwd.setResultAttr(*r, pipe::attrs::kGrad, StringAttr::get(ctx, *local));
    }
  }
  // Backward: each relay passes the gradient of what it returned back as
  // the gradient of what it took, from the last stage down.
  llvm::sort(relays, [](auto &a, auto &b) {
    return std::get<0>(a) > std::get<0>(b);
  });
  for (auto &[r, in, out] : relays) {
    pipe::StageOp next = stages[r + 1].bwd, bwd = stages[r].bwd;
    if (!resultNamed(next, pipe::attrs::kGrad, out))
      continue; // no gradient flows back
    Type type;
    for (unsigned i = 0; i < stages[r].fwd.getNumResults(); ++i)
      if (stringAttrOf(stages[r].fwd.getResultAttrDict(i), pipe::attrs::kName) == out)
        type = stages[r].fwd.getResultTypes()[i];
    unsigned index = bwd.getNumArguments() - unsigned(bwd.getNumStateArgs());
    (void)bwd.insertArgument(index, type, nameDict(ctx, pipe::attrs::kGrad, out),
                             bwd.getLoc());
    Value incoming = bwd.getArgument(index);
    auto ret =
        llvm::cast<pipe::ReturnOp>(bwd.getBody().front().getTerminator());
    if (auto existing = resultNamed(bwd, pipe::attrs::kGrad, in)) {
      OpBuilder b(ret);
      autodiff::OnnxBuilder ob(b, bwd.getLoc());
      Value sum = ob.add(ret.getOperand(*existing), incoming);
      if (ob.failed()) {
        bwd.emitError("pipe-insert-transfers: cannot add the gradient "
                      "relayed from stage ")
            << r;
        return signalPassFailure();
      }
      sum.getDefiningOp()->setAttr(pipe::attrs::kStage, b.getI64IntegerAttr(r));
      ret->setOperand(*existing, sum);
    } else {
      unsigned at = bwd.getNumResults() - bwd.getParams();
      addResult(bwd, at, incoming, nameDict(ctx, pipe::attrs::kGrad, in));
    }
  }

  // The record of what crosses each cut, per micro-batch.
  Builder b(ctx);
  SmallVector<Attribute> transfers;
  auto record = [&](StringRef tag, int64_t from, int64_t to, StringRef phase,
                    Type type) {
    auto t = llvm::cast<ShapedType>(type);
    int64_t bytes =
        t.getNumElements() * ((t.getElementTypeBitWidth() + 7) / 8);
    transfers.push_back(b.getDictionaryAttr(
        {b.getNamedAttr("tag", b.getStringAttr(tag)),
         b.getNamedAttr("from", b.getI64IntegerAttr(from)),
         b.getNamedAttr("to", b.getI64IntegerAttr(to)),
         b.getNamedAttr("phase", b.getStringAttr(phase)),
         b.getNamedAttr("type", TypeAttr::get(type)),
         b.getNamedAttr("bytes", b.getI64IntegerAttr(bytes))}));
  };
  for (auto [index, s] : llvm::enumerate(stages)) {
    if (index == 0)
      continue;
    for (unsigned i = s.fwd.getParams(); i < s.fwd.getNumArguments(); ++i) {
      std::string name = stringAttrOf(s.fwd.getArgAttrDict(i), pipe::attrs::kName);
      if (!name.empty())
        record(name, index - 1, index, "forward", s.fwd.getArgumentTypes()[i]);
    }
    for (unsigned i = 0; i < s.bwd.getNumResults() - s.bwd.getParams(); ++i) {
      std::string name = stringAttrOf(s.bwd.getResultAttrDict(i), pipe::attrs::kGrad);
      if (!name.empty())
        record(name + ".grad", index, index - 1, "backward",
               s.bwd.getResultTypes()[i]);
    }
  }
  module->setAttr(pipe::attrs::kTransfers, b.getArrayAttr(transfers));
}
