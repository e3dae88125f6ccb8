//===- LowerPrograms.cpp - pipe.program → one device's step function -----===//
//
// A program is a straight-line list of instructions, and a synchronous step
// keeps no value across steps except the weights and the optimizer state, so
// one device's program is rewritten into the same kind of function that
// pipe-autodiff + pipe-add-optimizer produce for one device (onnx ops in one
// block, tensor semantics), which pipe-lower-to-runtime's step lowering then
// turns into buffers and kernel calls. The buffer planning and op lowering are
// therefore shared with the one-device flow:
//   - pipe.weight_buffer: one `pipe.param` argument per parameter (initial
//     value from the module's function that declares the same pipe.param),
//     optimizer state arguments named like pipe-add-optimizer names them;
//   - pipe.feed: an argument holding the whole mini-batch of the input (the
//     driver's data feed fills it), sliced to micro-batch k's rows;
//   - pipe.forward/backward: the stage body inlined with the slot's weights;
//     the weight gradients a backward returns are summed into the accumulator
//     (pipe.zero_grad resets it), pipe.accumulate adds into it;
//   - pipe.send/recv: calls to `@__pipe_send` / `@__pipe_recv` carrying the
//     peer and a tag, which the step lowering turns into pipert_send and
//     pipert_recv on the world communicator. Sends block by default: the
//     verified schedules are deadlock-free with rendezvous sends, and an
//     isend of a large message only progresses while its rank is inside MPI,
//     so a rank computing its next micro-batch would hold its peer waiting.
//     With nonblocking-sends, pipert_isend, all waited for at the end of the
//     step, the sent buffers kept alive until then (for schedules verified
//     with buffered sends);
//   - pipe.update: the onnx optimizer op pipe-add-optimizer would build, on the
//     accumulated gradient times grad_scale;
//   - pipe.report_loss: the step's loss is the mean of the micro-batch losses.
//
//===----------------------------------------------------------------------===//
#include "pipec/Autodiff/OnnxBuilder.h"
#include "pipec/Conversion/Passes.h"
#include "pipec/Conversion/RuntimeABI.h"

#include "dialects/onnx/OnnxDialect.h"
#include "dialects/pipe/PipeDialect.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/SymbolTable.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/StringMap.h"

namespace mlir::pipec {
#define GEN_PASS_DEF_LOWERPROGRAMS
#include "pipec/Conversion/Passes.h.inc"
} // namespace mlir::pipec

using namespace mlir;
using namespace mlir::pipec;
using namespace mlir::pipec::autodiff;

int64_t mlir::pipec::transferTag(StringRef tag, int64_t mb) {
  // FNV-1a of the tag, then the micro-batch in the low bits; within MPI's
  // guaranteed 32767. Equal tags of one pair of ranks also match in posting
  // order, which the verified schedule fixes, so a hash collision is harmless.
  uint32_t h = 2166136261u;
  for (char c : tag) {
    h ^= static_cast<uint8_t>(c);
    h *= 16777619u;
  }
  return static_cast<int64_t>(h % 2048u) * 16 + (mb % 16);
}

namespace {

struct Buffer {
  int64_t stage;
  SmallVector<std::string> names;
  SmallVector<Value> params;              // slot 0, current SSA values
  SmallVector<Value> grads;               // accumulator (null: zero)
  bool updated = false;
};

class ProgramLowering {
public:
  ProgramLowering(ModuleOp module, pipe::ProgramOp program,
                  bool nonblockingSends)
      : module(module), program(program), b(program.getContext()),
        ob(b, program.getLoc()), nonblockingSends(nonblockingSends) {}

  FailureOr<func::FuncOp> run();

private:
  Value addArgument(Type type, DictionaryAttr attrs) {
    argAttrs.push_back(attrs);
    return body->addArgument(type, program.getLoc());
  }
  Attribute initOf(StringRef name);
  LogicalResult inlineStage(Operation *call, StringRef callee,
                            ArrayRef<Value> weights, ValueRange inputs,
                            SmallVector<Value> &results);
  Value sliceRows(Value x, int64_t first, int64_t rows, Location loc);
  LogicalResult update(pipe::UpdateOp op, Buffer &buf);
  Value stepCounter();

  ModuleOp module;
  pipe::ProgramOp program;
  OpBuilder b;
  OnnxBuilder ob;
  bool nonblockingSends;
  Block *body = nullptr;
  SmallVector<Attribute> argAttrs;
  DenseMap<Value, Value> values; // program value → function value
  DenseMap<Value, Buffer *> buffers;
  std::vector<std::unique_ptr<Buffer>> bufferStore;
  llvm::StringMap<Value> feeds;  // input name → whole mini-batch argument
  SmallVector<Value> losses;
  SmallVector<Value> sent; // kept alive until the end of the step
  Value count, nextCount;
  SmallVector<Value> results;
  SmallVector<Attribute> resultAttrs;

  DictionaryAttr updateOf(StringRef name) {
    return b.getDictionaryAttr(
        b.getNamedAttr("pipe.update", b.getStringAttr(name)));
  }
  /// The private declaration `@<prefix>_<type>` a transfer marker calls.
  StringRef transferCallee(StringRef prefix, FunctionType type) {
    std::string name = prefix.str();
    llvm::raw_string_ostream os(name);
    os << "_" << (type.getNumInputs() ? type.getInput(0) : type.getResult(0));
    for (char &c : name)
      if (!llvm::isAlnum(c) && c != '_')
        c = '_';
    if (auto f = module.lookupSymbol<func::FuncOp>(name))
      return f.getSymName();
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(module.getBody());
    auto decl = func::FuncOp::create(b, module.getLoc(), name, type);
    decl.setPrivate();
    return decl.getSymName();
  }
};

Attribute ProgramLowering::initOf(StringRef name) {
  Attribute found;
  module.walk([&](func::FuncOp f) {
    if (found)
      return WalkResult::interrupt();
    for (unsigned i = 0; i < f.getNumArguments(); ++i)
      if (auto n = f.getArgAttrOfType<StringAttr>(i, "pipe.param"))
        if (n.getValue() == name)
          if (Attribute init = f.getArgAttr(i, "pipe.init")) {
            found = init;
            return WalkResult::interrupt();
          }
    return WalkResult::advance();
  });
  return found;
}

Value ProgramLowering::sliceRows(Value x, int64_t first, int64_t rows,
                                 Location loc) {
  auto type = cast<RankedTensorType>(x.getType());
  auto vec = [&](int64_t v) {
    auto t = RankedTensorType::get({1}, b.getI64Type());
    OperationState st(loc, "onnx.Constant");
    st.addAttribute("value", DenseElementsAttr::get(t, ArrayRef<int64_t>{v}));
    st.addTypes(t);
    return b.create(st)->getResult(0);
  };
  SmallVector<int64_t> shape(type.getShape());
  shape[0] = rows;
  auto resultType = RankedTensorType::get(shape, type.getElementType());
  OperationState st(loc, "onnx.Slice");
  st.addOperands({x, vec(first), vec(first + rows), vec(0), vec(1)});
  st.addTypes(resultType);
  return b.create(st)->getResult(0);
}

LogicalResult ProgramLowering::inlineStage(Operation *call, StringRef callee,
                                           ArrayRef<Value> weights,
                                           ValueRange inputs,
                                           SmallVector<Value> &results) {
  auto stage = module.lookupSymbol<pipe::StageOp>(callee);
  if (!stage)
    return call->emitError("no pipe.stage @") << callee;
  Block &entry = stage.getBody().front();
  if (entry.getNumArguments() != weights.size() + inputs.size())
    return call->emitError("@")
           << callee << " takes " << entry.getNumArguments()
           << " arguments, the call passes " << weights.size() << " weights and "
           << inputs.size() << " inputs";
  IRMapping map;
  unsigned i = 0;
  for (Value w : weights)
    map.map(entry.getArgument(i++), w);
  for (Value v : inputs)
    map.map(entry.getArgument(i++), values.lookup(v));
  for (Operation &op : entry) {
    if (auto ret = dyn_cast<pipe::ReturnOp>(op)) {
      for (Value v : ret.getOperands())
        results.push_back(map.lookup(v));
      return success();
    }
    Operation *clone = b.clone(op, map);
    // Locations say which micro-batch an op belongs to in traces and errors.
    clone->setLoc(call->getLoc());
  }
  return call->emitError("@") << callee << " has no pipe.return";
}

Value ProgramLowering::stepCounter() {
  if (!count) {
    auto i64Scalar = RankedTensorType::get({}, b.getI64Type());
    count = addArgument(
        i64Scalar,
        b.getDictionaryAttr(
            {b.getNamedAttr("pipe.init",
                            DenseElementsAttr::get(i64Scalar,
                                                   b.getI64IntegerAttr(0))),
             b.getNamedAttr("pipe.state", b.getStringAttr("step"))}));
    nextCount = ob.add(count, ob.scalarI64(1));
  }
  return count;
}

LogicalResult ProgramLowering::update(pipe::UpdateOp op, Buffer &buf) {
  if (buf.updated)
    return op.emitError("pipe-lower-programs: a synchronous step updates a "
                        "buffer once (schedules that update per micro-batch "
                        "keep weights across steps in other slots, which this "
                        "lowering does not support yet)");
  if (op.getLrScale() || op.getAnnealSteps())
    return op.emitError("pipe-lower-programs: lr_scale / anneal_steps "
                        "(PipeMare) are not supported by this lowering");
  buf.updated = true;
  ob.setLoc(op.getLoc());
  Type f32 = b.getF32Type();
  Value rate = ob.scalar(f32, op.getLr().convertToDouble());
  double wd = op.getWeightDecay() ? op.getWeightDecay()->convertToDouble() : 0.0;
  pipe::OptimizerKind kind = op.getKind();
  SmallVector<StringRef> slots;
  switch (kind) {
  case pipe::OptimizerKind::Momentum:
  case pipe::OptimizerKind::Nesterov:
    slots = {"momentum_buffer"};
    break;
  case pipe::OptimizerKind::Adam:
  case pipe::OptimizerKind::AdamW:
    slots = {"exp_avg", "exp_avg_sq"};
    break;
  case pipe::OptimizerKind::Adagrad:
    slots = {"sum"};
    break;
  default:
    break;
  }
  Value t = stepCounter();
  for (auto [i, x] : llvm::enumerate(buf.params)) {
    auto type = cast<RankedTensorType>(x.getType());
    auto zeros = DenseElementsAttr::get(type, b.getZeroAttr(type.getElementType()));
    SmallVector<Value> state;
    for (StringRef slot : slots)
      state.push_back(addArgument(
          type, b.getDictionaryAttr(
                    {b.getNamedAttr("pipe.init", zeros),
                     b.getNamedAttr("pipe.state",
                                    b.getStringAttr(buf.names[i] + "." +
                                                    slot.str()))})));
    Value g = buf.grads[i];
    if (!g)
      g = ob.splat(type, 0.0);
    if (auto scale = op.getGradScale())
      if (scale->convertToDouble() != 1.0)
        g = ob.mul(g, ob.scalar(f32, scale->convertToDouble()));
    SmallVector<Value> outs;
    switch (kind) {
    case pipe::OptimizerKind::SGD:
      outs.push_back(ob.create<onnx::SGDOp>({rate, x, g},
                                            {ob.f32Attr("weight_decay", wd)}));
      break;
    case pipe::OptimizerKind::Momentum:
    case pipe::OptimizerKind::Nesterov: {
      double damp = op.getDampening() ? op.getDampening()->convertToDouble() : 0.0;
      Operation *u = ob.build<onnx::MomentumOp>(
          {rate, t, x, g, state[0]},
          {ob.f32Attr("alpha", op.getMomentum()->convertToDouble()),
           ob.f32Attr("beta", 1.0 - damp),
           ob.attr("mode", b.getStringAttr(kind == pipe::OptimizerKind::Nesterov
                                               ? "nesterov"
                                               : "standard")),
           ob.f32Attr("norm_coefficient", wd)},
          2);
      outs.append(u->result_begin(), u->result_end());
      break;
    }
    case pipe::OptimizerKind::Adam:
    case pipe::OptimizerKind::AdamW: {
      double decoupled = 0.0;
      if (kind == pipe::OptimizerKind::AdamW)
        decoupled = wd;
      else if (wd != 0)
        g = ob.add(g, ob.mul(x, ob.scalar(f32, wd)));
      Operation *u = ob.build<onnx::AdamWOp>(
          {rate, nextCount, x, g, state[0], state[1]},
          {ob.f32Attr("beta1", op.getBeta1()->convertToDouble()),
           ob.f32Attr("beta2", op.getBeta2()->convertToDouble()),
           ob.f32Attr("epsilon", op.getEpsilon()->convertToDouble()),
           ob.f32Attr("weight_decay", decoupled)},
          3);
      outs.append(u->result_begin(), u->result_end());
      break;
    }
    case pipe::OptimizerKind::Adagrad: {
      Operation *u = ob.build<onnx::AdagradOp>(
          {rate, t, x, g, state[0]},
          {ob.f32Attr("decay_factor", 0.0),
           ob.f32Attr("epsilon", op.getEpsilon()->convertToDouble()),
           ob.f32Attr("norm_coefficient", wd)},
          2);
      outs.append(u->result_begin(), u->result_end());
      break;
    }
    }
    if (ob.failed())
      return op.emitError("pipe-lower-programs: cannot build the update");
    results.push_back(outs[0]);
    resultAttrs.push_back(updateOf(buf.names[i]));
    for (auto [slot, value] : llvm::zip(slots, ArrayRef(outs).drop_front())) {
      results.push_back(value);
      resultAttrs.push_back(updateOf(buf.names[i] + "." + slot.str()));
    }
    buf.params[i] = outs[0];
    buf.grads[i] = Value();
  }
  return success();
}

FailureOr<func::FuncOp> ProgramLowering::run() {
  Location loc = program.getLoc();
  int64_t microbatches = program.getMicrobatches();
  body = new Block();
  b.setInsertionPointToEnd(body);
  auto fail = [&]() -> FailureOr<func::FuncOp> {
    delete body;
    return failure();
  };

  for (Operation &instr : program.getInstructions()) {
    b.setInsertionPointToEnd(body);
    ob.setLoc(instr.getLoc());
    Location iloc = instr.getLoc();
    if (auto wb = dyn_cast<pipe::WeightBufferOp>(instr)) {
      if (wb.getVersions() != 1) {
        wb.emitError("pipe-lower-programs: only one weight version is "
                     "supported (synchronous schedules)");
        return fail();
      }
      auto buf = std::make_unique<Buffer>();
      buf->stage = wb.getStage();
      for (auto [nameAttr, typeAttr] :
           llvm::zip(wb.getParamNames(), wb.getParamTypes())) {
        StringRef name = cast<StringAttr>(nameAttr).getValue();
        Type type = cast<TypeAttr>(typeAttr).getValue();
        SmallVector<NamedAttribute> attrs = {
            b.getNamedAttr("pipe.param", b.getStringAttr(name)),
            b.getNamedAttr("pipe.trainable", b.getUnitAttr())};
        if (Attribute init = initOf(name))
          attrs.push_back(b.getNamedAttr("pipe.init", init));
        buf->names.push_back(name.str());
        buf->params.push_back(addArgument(type, b.getDictionaryAttr(attrs)));
        buf->grads.push_back(Value());
      }
      buffers[wb.getWeights()] = buf.get();
      bufferStore.push_back(std::move(buf));
      continue;
    }
    auto bufferOf = [&](Value w) -> Buffer * { return buffers.lookup(w); };
    if (auto z = dyn_cast<pipe::ZeroGradOp>(instr)) {
      Buffer *buf = bufferOf(z.getWeights());
      for (Value &g : buf->grads)
        g = Value();
      continue;
    }
    if (auto feed = dyn_cast<pipe::FeedOp>(instr)) {
      auto type = cast<RankedTensorType>(feed.getValue().getType());
      if (type.getRank() == 0) {
        feed.emitError("pipe-lower-programs: a fed input needs a batch axis");
        return fail();
      }
      Value &whole = feeds[feed.getInput()];
      SmallVector<int64_t> shape(type.getShape());
      shape[0] *= microbatches;
      auto wholeType = RankedTensorType::get(shape, type.getElementType());
      if (!whole)
        whole = addArgument(wholeType,
                            b.getDictionaryAttr(b.getNamedAttr(
                                "pipe.input", b.getStringAttr(feed.getInput()))));
      if (whole.getType() != wholeType) {
        feed.emitError("pipe-lower-programs: input '")
            << feed.getInput() << "' is fed with different micro-batch types";
        return fail();
      }
      int64_t rows = type.getDimSize(0);
      values[feed.getValue()] =
          microbatches == 1 ? whole
                            : sliceRows(whole, feed.getMb() * rows, rows, iloc);
      continue;
    }
    if (auto fwd = dyn_cast<pipe::ForwardOp>(instr)) {
      SmallVector<Value> weights;
      if (fwd.getWeights())
        weights = bufferOf(fwd.getWeights())->params;
      SmallVector<Value> outs;
      if (failed(inlineStage(fwd, fwd.getCallee(), weights, fwd.getInputs(), outs)))
        return fail();
      for (auto [r, v] : llvm::zip(fwd.getResults(), outs))
        values[r] = v;
      continue;
    }
    if (auto bwd = dyn_cast<pipe::BackwardOp>(instr)) {
      Buffer *buf = bwd.getWeights() ? bufferOf(bwd.getWeights()) : nullptr;
      SmallVector<Value> weights;
      if (buf)
        weights = buf->params;
      SmallVector<Value> outs;
      if (failed(inlineStage(bwd, bwd.getCallee(), weights, bwd.getInputs(), outs)))
        return fail();
      unsigned n = bwd.getNumResults();
      for (unsigned i = 0; i < n; ++i)
        values[bwd.getResult(i)] = outs[i];
      if (buf && bwd.getPart() != pipe::BackwardPart::Input) {
        if (outs.size() != n + buf->params.size()) {
          bwd.emitError("pipe-lower-programs: @")
              << bwd.getCallee() << " returns " << outs.size()
              << " values, expected " << n << " + " << buf->params.size()
              << " weight gradients";
          return fail();
        }
        for (unsigned i = 0; i < buf->params.size(); ++i) {
          Value g = outs[n + i];
          buf->grads[i] = buf->grads[i] ? ob.add(buf->grads[i], g) : g;
        }
      }
      continue;
    }
    if (auto acc = dyn_cast<pipe::AccumulateOp>(instr)) {
      Buffer *buf = bufferOf(acc.getWeights());
      int64_t i = acc.getParam();
      Value g = values.lookup(acc.getGrad());
      buf->grads[i] = buf->grads[i] ? ob.add(buf->grads[i], g) : g;
      continue;
    }
    if (auto send = dyn_cast<pipe::SendOp>(instr)) {
      Value v = values.lookup(send.getValue());
      StringRef callee = transferCallee(
          kPipeSendCallee, b.getFunctionType({v.getType()}, {}));
      auto call = func::CallOp::create(b, iloc, callee, TypeRange{},
                                       ValueRange{v});
      call->setAttr("pipe.peer", b.getI64IntegerAttr(send.getPeer()));
      call->setAttr("pipe.tag", b.getI64IntegerAttr(
                                    transferTag(send.getTag(), send.getMb())));
      if (nonblockingSends)
        sent.push_back(v);
      else
        call->setAttr("pipe.blocking", b.getUnitAttr());
      continue;
    }
    if (auto recv = dyn_cast<pipe::RecvOp>(instr)) {
      StringRef callee = transferCallee(
          kPipeRecvCallee, b.getFunctionType({}, {recv.getValue().getType()}));
      auto call = func::CallOp::create(b, iloc, callee,
                                       TypeRange{recv.getValue().getType()},
                                       ValueRange{});
      call->setAttr("pipe.peer", b.getI64IntegerAttr(recv.getPeer()));
      call->setAttr("pipe.tag", b.getI64IntegerAttr(
                                    transferTag(recv.getTag(), recv.getMb())));
      values[recv.getValue()] = call.getResult(0);
      continue;
    }
    if (auto upd = dyn_cast<pipe::UpdateOp>(instr)) {
      if (failed(update(upd, *bufferOf(upd.getWeights()))))
        return fail();
      continue;
    }
    if (auto rep = dyn_cast<pipe::ReportLossOp>(instr)) {
      Value l = values.lookup(rep.getLoss());
      auto type = cast<RankedTensorType>(l.getType());
      if (type.getRank() != 0)
        l = ob.reshape(l, RankedTensorType::get({}, type.getElementType()));
      losses.push_back(l);
      continue;
    }
    instr.emitError("pipe-lower-programs: ")
        << instr.getName() << " is not supported by this lowering "
        << "(synchronous schedules: feed, forward, backward, send, recv, "
           "zero_grad, accumulate, update, report_loss)";
    return fail();
  }

  b.setInsertionPointToEnd(body);
  ob.setLoc(loc);
  if (!losses.empty()) {
    Value sum = losses[0];
    for (Value l : ArrayRef(losses).drop_front())
      sum = ob.add(sum, l);
    // pipe-microbatch records how micro-batch losses make the step's loss
    // (1/M for a mean-reduced loss, 1 for a sum); without it, their mean.
    double scale = 1.0 / losses.size();
    if (auto s = module->getAttrOfType<FloatAttr>("pipe.loss_scale"))
      scale = s.getValueAsDouble();
    if (scale != 1.0)
      sum = ob.mul(sum, ob.scalar(b.getF32Type(), scale));
    results.insert(results.begin(), sum);
    resultAttrs.insert(resultAttrs.begin(),
                       b.getDictionaryAttr(b.getNamedAttr("pipe.loss",
                                                          b.getUnitAttr())));
  }
  if (nextCount) {
    results.push_back(nextCount);
    resultAttrs.push_back(updateOf("step"));
  }
  // The sent tensors are results that nothing keeps: they hold their buffers
  // until the sends are waited for at the end of the step.
  for (Value v : sent) {
    results.push_back(v);
    resultAttrs.push_back(b.getDictionaryAttr(
        b.getNamedAttr("pipe.sent", b.getUnitAttr())));
  }
  if (ob.failed())
    return fail();
  func::ReturnOp::create(b, loc, results);

  SmallVector<Type> argTypes(body->getArgumentTypes());
  b.setInsertionPoint(program);
  std::string name = ("train_step_device" + llvm::Twine(program.getDevice())).str();
  auto fn = func::FuncOp::create(b, loc, name,
                                 b.getFunctionType(argTypes,
                                                   ValueRange(results).getTypes()));
  fn.getBody().push_back(body);
  fn.setAllArgAttrs(argAttrs);
  fn.setAllResultAttrs(resultAttrs);
  fn->setAttr("pipe.device", b.getI64IntegerAttr(program.getDevice()));
  fn->setAttr("pipe.microbatches", b.getI64IntegerAttr(microbatches));
  return fn;
}

struct LowerProgramsPass
    : public mlir::pipec::impl::LowerProgramsBase<LowerProgramsPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    SmallVector<pipe::ProgramOp> programs(module.getOps<pipe::ProgramOp>());
    if (programs.empty()) {
      module.emitError("pipe-lower-programs: the module has no pipe.program");
      return signalPassFailure();
    }
    pipe::ProgramOp chosen;
    if (device < 0) {
      if (programs.size() != 1) {
        module.emitError("pipe-lower-programs: the module has ")
            << programs.size()
            << " programs; pick the device to lower with device=<k>";
        return signalPassFailure();
      }
      chosen = programs[0];
    } else {
      for (pipe::ProgramOp p : programs)
        if (p.getDevice() == device)
          chosen = p;
      if (!chosen) {
        module.emitError("pipe-lower-programs: no pipe.program for device ")
            << static_cast<int64_t>(device);
        return signalPassFailure();
      }
    }
    if (chosen.getPipeline() && *chosen.getPipeline() != 0) {
      chosen.emitError("pipe-lower-programs: several pipelines (AvgPipe) are "
                       "not supported by this lowering");
      return signalPassFailure();
    }
    ProgramLowering lowering(module, chosen, nonblockingSends);
    FailureOr<func::FuncOp> fn = lowering.run();
    if (failed(fn))
      return signalPassFailure();
    // Everything else of the pipe level is done with.
    for (pipe::ProgramOp p : programs)
      p.erase();
    for (auto s : llvm::to_vector(module.getOps<pipe::StageOp>()))
      s.erase();
    if (onnxOnly)
      return;
    for (auto f : llvm::to_vector(module.getOps<func::FuncOp>()))
      if (f != *fn && !f.isExternal())
        f.erase();
    if (failed(lowerStepFunction(module, *fn, target == "cuda")))
      return signalPassFailure();
  }
};

} // namespace
