//===- LowerToRuntime.cpp - onnx ops → buffers + pipert calls -------------===//
//
// The function is straight-line tensor code (one block), so it is lowered in
// one walk in program order rather than by a dialect conversion: every value
// gets a buffer up front (planned by liveness), then every op becomes one
// call to its kernel. Buffers are memrefs: a planned block is a
// memref<Nxi8> from pipert_alloc, a value is a typed memref.view into it, and
// a kernel receives the view's aligned pointer.
//
//===----------------------------------------------------------------------===//
#include "StepLowering.h"
#include "pipec/Analysis/CostModel.h"
#include "dialects/pipe/PipeAttrNames.h"

#include "pipec/Conversion/Passes.h"
#include "pipec/Conversion/RuntimeABI.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"

namespace mlir::pipec {
#define GEN_PASS_DEF_LOWERTORUNTIME
#include "pipec/Conversion/Passes.h.inc"
} // namespace mlir::pipec

using namespace mlir;
using namespace mlir::pipec;
using namespace mlir::pipec::steplowering;

namespace mlir::pipec::steplowering {

//===----------------------------------------------------------------------===//
// Driver
//===----------------------------------------------------------------------===//

LogicalResult StepLowering::run() {
  if (!source.getBody().hasOneBlock())
    return source.emitError("the step function must have one block");
  fuseSplitTransposes(source);
  legalizeIntegerOps(source);
  if (failed(classifyArguments()) || failed(classifyResults()))
    return failure();
  computeConstants();
  fuseSgdIntoGemms();
  hoistUpdates();
  if (failed(planBuffers()))
    return failure();

  MLIRContext *ctx = b.getContext();
  b.setInsertionPoint(source);
  StepArguments args;
  step = createStepFunction(b, b.getLoc(), options.name, args);
  ctxArg = args.ctx;
  inputsArg = args.inputs;
  persistentArg = args.persistent;
  lossArg = args.lossOrOutputs;
  stepArg = args.step;
  Block *entry = &step.getBody().front();
  b.setInsertionPointToEnd(entry);

  Block &body = source.getBody().front();
  // The planned blocks live in one arena, allocated at entry and freed
  // before the return: one pipert_alloc and one pipert_free a call instead
  // of a pair per block (the example transformer's micro-batch had 23 pairs
  // on each rank of a 2-stage pipeline). Blocks whose lifetimes do not
  // overlap may share its bytes (first fit, in order of allocation).
  Value arena;
  {
    SmallVector<int64_t> offsets(blocks.size(), 0);
    SmallVector<int64_t> placed;
    int64_t total = 0;
    SmallVector<int64_t> byAlloc;
    for (int64_t id = 0, e = int64_t(blocks.size()); id < e; ++id)
      byAlloc.push_back(id);
    llvm::sort(byAlloc, [&](int64_t x, int64_t y) {
      return std::make_pair(blocks[x].allocBefore, x) <
             std::make_pair(blocks[y].allocBefore, y);
    });
    for (int64_t id : byAlloc) {
      const BlockInfo &blk = blocks[id];
      // The blocks live with it, by offset.
      SmallVector<std::pair<int64_t, int64_t>> busy;
      for (int64_t other : placed)
        if (blocks[other].allocBefore <= blk.freeAfter &&
            blk.allocBefore <= blocks[other].freeAfter)
          busy.push_back({offsets[other], offsets[other] + blocks[other].bytes});
      llvm::sort(busy);
      int64_t at = 0;
      for (auto [lo, hi] : busy) {
        if (at + blk.bytes <= lo)
          break;
        at = std::max(at, hi);
      }
      offsets[id] = at;
      total = std::max(total, at + blk.bytes);
      placed.push_back(id);
    }
    if (!blocks.empty()) {
      arena = callPtr("pipert_alloc", {ctxArg, i64c(total)});
      for (auto [id, block] : llvm::enumerate(blocks)) {
        Value p = LLVM::GEPOp::create(b, b.getLoc(), ptrType(), b.getI8Type(), arena,
                                      ArrayRef<LLVM::GEPArg>{i64c(offsets[id])});
        blockMemrefs[id] = wrapPointer(p, block.bytes);
      }
    }
  }
  auto freeArena = [&] {
    if (arena)
      call("pipert_free", {ctxArg, arena});
  };
  // Per-op timing: the phase of each op (forward: what the loss depends
  // on; backward: other ops of an ONNX node; update: the rest).
  DenseSet<Operation *> forwardOps;
  SmallVector<Attribute> opTable;
  if (options.profileOps) {
    SmallVector<Value> worklist;
    Operation *terminator = body.getTerminator();
    for (unsigned i = 0; i < source.getNumResults(); ++i)
      if (source.getResultAttr(i, pipe::attrs::kLoss))
        worklist.push_back(terminator->getOperand(i));
    while (!worklist.empty()) {
      Operation *def = worklist.pop_back_val().getDefiningOp();
      if (def && forwardOps.insert(def).second)
        worklist.append(def->operand_begin(), def->operand_end());
    }
  }
  for (Operation &op : body.without_terminator()) {
    b.setLoc(op.getLoc());
    Value begin;
    if (options.profileOps && !op.hasTrait<OpTrait::ConstantLike>())
      begin = callRuntime(b, b.getLoc(), module, "pipert_trace_stage_begin",
                          {ctxArg}, {b.getI64Type()})
                  .getResult(0);
    if (failed(lowerOp(&op)))
      return failure();
    if (begin) {
      StringRef node = CostModel::getNodeName(op.getLoc());
      int32_t phase = forwardOps.contains(&op) ? 0 : node.empty() ? 2 : 1;
      call("pipert_trace_op_end",
           {ctxArg, i64c(int64_t(opTable.size())), i32c(phase), begin});
      opTable.push_back(b.getArrayAttr(
          {b.getStringAttr(node), b.getI32IntegerAttr(phase)}));
    }
  }
  b.setLoc(source.getLoc());
  // The next step's parameters and state, where not written in place.
  for (auto [value, target] : updates) {
    if (inPlace.count(value) || value == persistent[target])
      continue;
    Value dst = memrefFor(persistent[target]);
    call("pipert_copy_device",
         {ctxArg, pointerOf(dst), P(value),
          i64c(runtimeTensorBytes(tensorType(value)))});
  }
  if (lossValue)
    call("pipert_copy_to_host", {ctxArg, lossArg, P(lossValue), i64c(4)});
  for (auto [value, slot] : metricValues) {
    Value dst = LLVM::GEPOp::create(b, ptrType(), b.getF32Type(), lossArg,
                                    ArrayRef<LLVM::GEPArg>{(int32_t)slot});
    call("pipert_copy_to_host", {ctxArg, dst, P(value), i64c(4)});
  }
  // A callable function's 4th argument is the array of its output buffers.
  for (auto [value, index] : outputs) {
    if (directOutput.count(value))
      continue;
    Value slot = LLVM::GEPOp::create(b, ptrType(), ptrType(), lossArg,
                                     ArrayRef<LLVM::GEPArg>{(int32_t)index});
    Value dst = LLVM::LoadOp::create(b, ptrType(), slot);
    call("pipert_copy_device",
         {ctxArg, dst, P(value), i64c(runtimeTensorBytes(tensorType(value)))});
  }
  freeArena();
  for (Value dev : constantCopies)
    call("pipert_free", {ctxArg, dev});
  func::ReturnOp::create(b);

  if (options.profileOps)
    step->setAttr("pipe.op_table", b.getArrayAttr(opTable));
  if (options.callable) {
    step.setPrivate();
    step->setAttr(pipe::attrs::kPeakBytes, b.getI64IntegerAttr(peakBytes));
    source.erase();
    return success();
  }
  // Metadata for the object emitter, the driver and plan.json.
  auto describe = [&](BlockArgument arg, StringRef kind) {
    auto type = tensorType(arg);
    unsigned i = arg.getArgNumber();
    std::string name = "arg" + std::to_string(i);
    for (StringRef key : {pipe::attrs::kInput, pipe::attrs::kParam, pipe::attrs::kState})
      if (auto s = source.getArgAttrOfType<StringAttr>(i, key))
        name = s.str();
    SmallVector<NamedAttribute> fields = {
        b.getNamedAttr("name", b.getStringAttr(name)),
        b.getNamedAttr("kind", b.getStringAttr(kind)),
        b.getNamedAttr("dtype",
                       b.getI64IntegerAttr(*pipertDtype(type.getElementType()))),
        b.getNamedAttr("shape", b.getDenseI64ArrayAttr(type.getShape()))};
    if (Attribute init = source.getArgAttr(i, pipe::attrs::kInit))
      fields.push_back(b.getNamedAttr("init", init));
    return DictionaryAttr::get(ctx, fields);
  };
  SmallVector<Attribute> inputInfo, persistentInfo;
  for (BlockArgument arg : inputs)
    inputInfo.push_back(describe(arg, "input"));
  DenseSet<int64_t> updated;
  for (auto [value, target] : updates)
    updated.insert(target);
  for (BlockArgument arg : persistent) {
    unsigned i = arg.getArgNumber();
    StringRef kind = source.getArgAttr(i, pipe::attrs::kState) ? "state"
                     : source.getArgAttr(i, pipe::attrs::kParam)
                         ? (source.getArgAttr(i, pipe::attrs::kTrainable) ? "param"
                                                                   : "frozen")
                         : "state";
    persistentInfo.push_back(describe(arg, kind));
  }
  step->setAttr(kProgramAttrName,
                b.getDictionaryAttr(
                    {b.getNamedAttr("inputs", b.getArrayAttr(inputInfo)),
                     b.getNamedAttr("persistent", b.getArrayAttr(persistentInfo)),
                     b.getNamedAttr("peak_activation_bytes",
                                    b.getI64IntegerAttr(peakBytes)),
                     b.getNamedAttr("has_loss", b.getBoolAttr(bool(lossValue))),
                     b.getNamedAttr("trains", b.getBoolAttr(!updates.empty()))}));
  source.erase();
  return success();
}

} // namespace mlir::pipec::steplowering

LogicalResult mlir::pipec::checkStepLowering(ModuleOp module, StringRef pass,
                                             StringRef target) {
  if (target != "cpu" && target != "cuda")
    return module.emitError()
           << pass << ": unknown target '" << target << "' (cpu, cuda)";
  if (module.lookupSymbol(kStepFunctionName))
    return module.emitError()
           << pass << ": @" << kStepFunctionName << " already exists";
  return success();
}

LogicalResult
mlir::pipec::lowerStepFunction(ModuleOp module, func::FuncOp source, bool cuda,
                               const StepFunctionOptions &options) {
  if (module.lookupSymbol(options.name))
    return module.emitError() << "@" << options.name << " already exists";
  StepLowering lowering(module, source, cuda, options);
  if (failed(lowering.run()))
    return failure();
  return success();
}

namespace {

struct LowerToRuntimePass
    : public mlir::pipec::impl::LowerToRuntimeBase<LowerToRuntimePass> {
  using LowerToRuntimeBase::LowerToRuntimeBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (failed(checkStepLowering(module, getArgument(), target)))
      return signalPassFailure();
    func::FuncOp source;
    if (!funcName.empty()) {
      source = module.lookupSymbol<func::FuncOp>(funcName);
    } else {
      // The training step when there is one, else the forward pass.
      source = module.lookupSymbol<func::FuncOp>("train_step");
      if (!source || source.isExternal())
        source = module.lookupSymbol<func::FuncOp>("forward");
    }
    if (!source || source.isExternal()) {
      module.emitError() << "pipe-lower-to-runtime: no function "
                         << (funcName.empty() ? "@train_step or @forward"
                                              : "@" + funcName)
                         << " to lower";
      return signalPassFailure();
    }
    // The other functions (the forward a training step was built from, an
    // imported training algorithm) are not part of the program.
    SmallVector<func::FuncOp> others;
    for (auto f : module.getOps<func::FuncOp>())
      if (f != source && !f.isExternal())
        others.push_back(f);
    StepFunctionOptions stepOptions;
    stepOptions.profileOps = profileOps;
    StepLowering lowering(module, source, target == "cuda", stepOptions);
    if (failed(lowering.run()))
      return signalPassFailure();
    for (func::FuncOp f : others)
      f.erase();
  }
};

} // namespace
