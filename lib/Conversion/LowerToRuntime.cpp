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
#include "pipec/Conversion/Passes.h"
#include "pipec/Conversion/RuntimeABI.h"

#include "dialects/onnx/OnnxDialect.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"
#include "mlir/IR/SymbolTable.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/StringSwitch.h"

#include <functional>
#include <map>

namespace mlir::pipec {
#define GEN_PASS_DEF_LOWERTORUNTIME
#include "pipec/Conversion/Passes.h.inc"
} // namespace mlir::pipec

using namespace mlir;
using namespace mlir::pipec;

namespace {

constexpr int64_t kBlockAlign = 64;

int64_t roundUp(int64_t v, int64_t a) { return (v + a - 1) / a * a; }

RankedTensorType tensorType(Value v) {
  return dyn_cast<RankedTensorType>(v.getType());
}

/// Ops whose result is their first operand's bytes under another shape.
bool isAliasOp(Operation *op) {
  StringRef n = op->getName().getStringRef();
  if (n == "onnx.Identity" || n == "onnx.Reshape" || n == "onnx.Flatten" ||
      n == "onnx.Squeeze" || n == "onnx.Unsqueeze")
    return true;
  if (n == "onnx.Cast")
    return getElementTypeOrSelf(op->getOperand(0).getType()) ==
           getElementTypeOrSelf(op->getResult(0).getType());
  return false;
}

/// Kernels that allow an output to be written over an input of its shape.
bool allowsInPlace(Operation *op) {
  return llvm::StringSwitch<bool>(op->getName().getStringRef())
      .Cases({"onnx.Momentum", "onnx.Adam", "onnx.Adagrad", "onnx.SGD",
              "onnx.AdamW"},
             true)
      .Cases({"onnx.Add", "onnx.Sub", "onnx.Mul", "onnx.Div"}, true)
      .Cases({"onnx.Relu", "onnx.Neg", "onnx.Tanh", "onnx.Sigmoid", "onnx.Erf",
              "onnx.Sqrt", "onnx.Exp", "onnx.Log"},
             true)
      .Default(false);
}

/// Results a kernel may skip (its nullable outputs): unused ones get no
/// buffer.
bool isNullableResult(Operation *op, unsigned i) {
  StringRef n = op->getName().getStringRef();
  if (n == "onnx.ConvGrad")
    return true; // one call per used result
  if (i == 0)
    return false;
  return llvm::StringSwitch<bool>(n)
      .Cases({"onnx.LayerNormalization", "onnx.BatchNormalization",
              "onnx.MaxPool", "onnx.Dropout", "onnx.SoftmaxCrossEntropyLoss",
              "onnx.LayerNormalizationGrad", "onnx.BatchNormalizationGrad"},
             true)
      .Default(false);
}

/// Where a value's bytes live.
struct Placement {
  enum Kind { None, Constant, Input, Persistent, Step, Block, Alias, Output };
  Kind kind = None;
  int64_t index = -1; // input/persistent/output index, or block id
  int64_t offset = 0; // unused today: blocks hold one value at a time
  Value aliasOf;      // for Alias
};

struct BlockInfo {
  int64_t bytes = 0;
  int64_t allocBefore = -1; // op index before which it is allocated
  int64_t freeAfter = -1;   // op index after which it is freed
};

class StepLowering {
public:
  StepLowering(ModuleOp module, func::FuncOp source, bool cuda,
               const StepFunctionOptions &options = {})
      : module(module), source(source), cuda(cuda), options(options),
        b(source.getLoc(), source.getContext()) {}

  LogicalResult run();

private:
  // --- analysis ---
  LogicalResult classifyArguments();
  LogicalResult classifyResults();
  void computeConstants();
  LogicalResult planBuffers();
  Value rootOf(Value v);

  // --- emission helpers ---
  Type ptrType() { return LLVM::LLVMPointerType::get(b.getContext()); }
  Value i64c(int64_t v) { return arith::ConstantIntOp::create(b, v, 64); }
  Value i32c(int64_t v) { return arith::ConstantIntOp::create(b, v, 32); }
  Value f32c(double v) {
    return arith::ConstantFloatOp::create(b, b.getF32Type(),
                                          APFloat(static_cast<float>(v)));
  }
  Value nullPtr() { return LLVM::ZeroOp::create(b, ptrType()); }
  Value pointerOf(Value memref);
  Value wrapPointer(Value ptr, int64_t bytes);
  Value viewOf(Value block, RankedTensorType type);
  Value i64Array(ArrayRef<int64_t> values);
  Value ptrArray(ArrayRef<Value> ptrs);
  void call(StringRef callee, ArrayRef<Value> args);
  Value callPtr(StringRef callee, ArrayRef<Value> args);

  // Operand access for the kernels.
  Value P(Value v);                 // buffer pointer (null for none)
  Value rankOf(Value v) { return i64c(tensorType(v).getRank()); }
  Value shapeOf(Value v) { return i64Array(tensorType(v).getShape()); }
  Value out(Operation *op, unsigned i) {
    return i < op->getNumResults() ? P(op->getResult(i)) : nullPtr();
  }
  std::optional<ElementsAttr> constantOf(Value v) {
    auto it = constants.find(v);
    if (it == constants.end())
      return std::nullopt;
    return it->second;
  }
  FailureOr<SmallVector<int64_t>> constInts(Operation *op, Value v,
                                            StringRef what);
  FailureOr<Value> scalarF32(Operation *op, Value v, StringRef what);
  FailureOr<Value> scalarI64(Operation *op, Value v, StringRef what);
  Value memrefFor(Value v);

  LogicalResult lowerOp(Operation *op);
  LogicalResult lowerConvLike(Operation *op, bool conv);
  /// The onnx.*Grad ops of OnnxGradientOps.td; sets `handled` when `op` is
  /// one of them (success or not).
  LogicalResult lowerGradientOp(Operation *op);
  bool handled = false;

  ModuleOp module;
  func::FuncOp source;
  bool cuda;
  StepFunctionOptions options;
  ImplicitLocOpBuilder b;
  func::FuncOp step;
  Value ctxArg, inputsArg, persistentArg, lossArg, stepArg;

  SmallVector<BlockArgument> inputs, persistent;
  DenseMap<Value, int64_t> inputIndex, persistentIndex;
  BlockArgument stepCounter;
  SmallVector<NamedAttribute> persistentKinds;
  Value lossValue;
  // Result value → persistent index it becomes for the next step.
  SmallVector<std::pair<Value, int64_t>> updates;
  // Callable functions: result value → index of the caller's output buffer.
  SmallVector<std::pair<Value, int64_t>> outputs;
  DenseMap<Value, int64_t> directOutput; // computed in the caller's buffer

  DenseMap<Value, ElementsAttr> constants;
  DenseMap<Operation *, int64_t> order;
  DenseMap<Value, Placement> placement;
  DenseMap<Value, int64_t> lastUse;
  SmallVector<BlockInfo> blocks;
  int64_t peakBytes = 0;
  DenseSet<Value> inPlace; // update results written over their argument

  // Emission state.
  DenseMap<Value, Value> memrefs;         // tensor value → typed memref
  DenseMap<int64_t, Value> blockMemrefs;  // block id → memref<Nxi8>
  std::map<std::vector<int64_t>, Value> i64Arrays;
  unsigned globalCounter = 0;
  /// Globals are named after a callable function, so that several lowered
  /// into one module do not clash.
  std::string globalPrefix() const {
    return options.callable ? options.name.str() + "_" : "__pipe_";
  }
  SmallVector<Value> constantCopies; // cuda: device copies freed at the end
};

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
    if (source.getArgAttr(i, "pipe.input")) {
      inputIndex[arg] = inputs.size();
      inputs.push_back(arg);
    } else if (source.getArgAttr(i, "pipe.step")) {
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
    if (auto out = source.getResultAttrOfType<IntegerAttr>(i, "pipe.result_buffer")) {
      if (!options.callable)
        return source.emitError("result ")
               << i << " is marked pipe.result_buffer, which only a callable "
               << "function (a stage of a lowered program) has";
      outputs.push_back({value, out.getInt()});
      continue;
    }
    if (source.getResultAttr(i, "pipe.loss")) {
      auto type = tensorType(value);
      if (!type || type.getNumElements() != 1 || !type.getElementType().isF32())
        return source.emitError("the loss (result ")
               << i << ") must be one f32 element";
      lossValue = value;
      continue;
    }
    if (auto n = source.getResultAttrOfType<StringAttr>(i, "pipe.update")) {
      target = argByName("pipe.param", n.getValue());
      if (target < 0)
        target = argByName("pipe.state", n.getValue());
      if (target < 0)
        return source.emitError("result ")
               << i << " updates '" << n.getValue()
               << "', but no argument has that pipe.param or pipe.state";
    } else if (auto idx =
                   source.getResultAttrOfType<IntegerAttr>(i, "pipe.update")) {
      auto arg = source.getArgument(idx.getInt());
      if (!persistentIndex.count(arg))
        return source.emitError("result ")
               << i << " updates argument " << idx.getInt()
               << ", which is not a persistent buffer";
      target = persistentIndex[arg];
    } else if (auto n = source.getResultAttrOfType<StringAttr>(i, "pipe.param")) {
      target = argByName("pipe.param", n.getValue());
    } else if (auto n = source.getResultAttrOfType<StringAttr>(i, "pipe.state")) {
      target = argByName("pipe.state", n.getValue());
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
    if (op.getName().getStringRef() == "onnx.Constant") {
      if (auto v = op.getAttrOfType<ElementsAttr>("value"))
        constants[op.getResult(0)] = v;
      continue;
    }
    // Shape computations left unfolded (Shape, Range, ConstantOfShape,
    // Reshape of a constant, ...): fold them now that operands are known.
    if (op.getName().getStringRef() == "onnx.Dropout" || op.getNumResults() == 0)
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
        if (op.getName().getStringRef() != "onnx.Shape")
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
      else if (isAliasOp(&op))
        placement[r] = {Placement::Alias, -1, 0, op.getOperand(0)};
    }
  }
  for (Operation &op : body)
    for (Value v : op.getOperands()) {
      Value root = rootOf(v);
      lastUse[root] = std::max(lastUse.lookup(root), order[&op]);
    }

  DenseMap<Value, int64_t> updateTarget;
  for (auto [value, target] : updates)
    updateTarget[value] = target;
  // Outputs defined by a kernel (not an alias, constant or argument), each
  // returned once, go straight into the caller's buffer.
  DenseMap<Value, int> outputUses;
  for (auto [value, index] : outputs)
    ++outputUses[value];
  for (auto [value, index] : outputs)
    if (outputUses[value] == 1 && !placement.count(value) &&
        !updateTarget.count(value) && value.getDefiningOp())
      directOutput[value] = index;

  std::multimap<int64_t, int64_t> freeBlocks; // bytes → block id
  DenseSet<int64_t> held;
  int64_t liveBytes = 0;
  DenseMap<Value, int64_t> blockOfRoot;
  for (Operation &op : body.without_terminator()) {
    int64_t i = order[&op];
    for (Value r : op.getResults()) {
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
        if (argLast < i || (argLast == i && allowsInPlace(&op))) {
          placement[r] = {Placement::Persistent, t->second};
          inPlace.insert(r);
          continue;
        }
      }
      int64_t bytes = roundUp(std::max<int64_t>(runtimeTensorBytes(type), 1),
                              kBlockAlign);
      int64_t id;
      auto fit = freeBlocks.lower_bound(bytes); // best fit: smallest >= bytes
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

//===----------------------------------------------------------------------===//
// Emission helpers
//===----------------------------------------------------------------------===//

Value StepLowering::pointerOf(Value memref) {
  Value index = memref::ExtractAlignedPointerAsIndexOp::create(b, memref);
  Value i64 = arith::IndexCastOp::create(b, b.getI64Type(), index);
  return LLVM::IntToPtrOp::create(b, ptrType(), i64);
}

Value StepLowering::wrapPointer(Value ptr, int64_t bytes) {
  MLIRContext *ctx = b.getContext();
  Type i64 = b.getI64Type();
  auto arr = LLVM::LLVMArrayType::get(i64, 1);
  auto descType = LLVM::LLVMStructType::getLiteral(
      ctx, {ptrType(), ptrType(), i64, arr, arr});
  Value d = LLVM::PoisonOp::create(b, descType);
  d = LLVM::InsertValueOp::create(b, d, ptr, ArrayRef<int64_t>{0});
  d = LLVM::InsertValueOp::create(b, d, ptr, ArrayRef<int64_t>{1});
  d = LLVM::InsertValueOp::create(b, d, i64c(0), ArrayRef<int64_t>{2});
  d = LLVM::InsertValueOp::create(b, d, i64c(bytes), ArrayRef<int64_t>{3, 0});
  d = LLVM::InsertValueOp::create(b, d, i64c(1), ArrayRef<int64_t>{4, 0});
  auto type = MemRefType::get({bytes}, b.getI8Type());
  return UnrealizedConversionCastOp::create(b, type, d).getResult(0);
}

/// Element type of a buffer: bools are bytes, integers signless.
static Type bufferElementType(Type t) {
  if (auto it = dyn_cast<IntegerType>(t))
    return IntegerType::get(t.getContext(), std::max(8u, it.getWidth()));
  return t;
}

Value StepLowering::viewOf(Value block, RankedTensorType type) {
  auto memrefType = MemRefType::get(type.getShape(),
                                    bufferElementType(type.getElementType()));
  Value zero = arith::ConstantIndexOp::create(b, 0);
  return memref::ViewOp::create(b, memrefType, block, zero, ValueRange{});
}

Value StepLowering::i64Array(ArrayRef<int64_t> values) {
  if (values.empty())
    return nullPtr();
  std::vector<int64_t> key(values.begin(), values.end());
  auto it = i64Arrays.find(key);
  if (it != i64Arrays.end())
    return it->second;
  auto type = MemRefType::get({static_cast<int64_t>(values.size())},
                              b.getI64Type());
  std::string name = globalPrefix() + "i64_" + std::to_string(globalCounter++);
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPoint(step);
    auto init = DenseElementsAttr::get(
        RankedTensorType::get(type.getShape(), b.getI64Type()), values);
    memref::GlobalOp::create(b, name, b.getStringAttr("private"), type, init,
                             /*constant=*/true, IntegerAttr());
  }
  // Materialised in the entry block so that every later use is dominated.
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(&step.getBody().front());
  Value g = memref::GetGlobalOp::create(b, type, name);
  Value p = pointerOf(g);
  i64Arrays[key] = p;
  return p;
}

Value StepLowering::ptrArray(ArrayRef<Value> ptrs) {
  Value count = i64c(ptrs.size());
  Value array = LLVM::AllocaOp::create(b, ptrType(), ptrType(), count, 8);
  for (auto [i, p] : llvm::enumerate(ptrs)) {
    Value slot = LLVM::GEPOp::create(b, ptrType(), ptrType(), array,
                                     ArrayRef<LLVM::GEPArg>{(int32_t)i});
    LLVM::StoreOp::create(b, p, slot);
  }
  return array;
}

void StepLowering::call(StringRef callee, ArrayRef<Value> args) {
  SmallVector<Type> types;
  for (Value v : args)
    types.push_back(v.getType());
  if (!module.lookupSymbol<func::FuncOp>(callee)) {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(module.getBody());
    auto decl = func::FuncOp::create(b, callee,
                                     b.getFunctionType(types, TypeRange{}));
    decl.setPrivate();
  }
  func::CallOp::create(b, callee, TypeRange{}, args);
}

Value StepLowering::callPtr(StringRef callee, ArrayRef<Value> args) {
  SmallVector<Type> types;
  for (Value v : args)
    types.push_back(v.getType());
  if (!module.lookupSymbol<func::FuncOp>(callee)) {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(module.getBody());
    auto decl = func::FuncOp::create(b, callee,
                                     b.getFunctionType(types, {ptrType()}));
    decl.setPrivate();
  }
  return func::CallOp::create(b, callee, TypeRange{ptrType()}, args)
      .getResult(0);
}

Value StepLowering::memrefFor(Value v) {
  auto it = memrefs.find(v);
  if (it != memrefs.end())
    return it->second;
  auto type = tensorType(v);
  const Placement &p = placement[v];
  Value result;
  switch (p.kind) {
  case Placement::Alias: {
    Value src = memrefFor(p.aliasOf);
    auto memrefType = MemRefType::get(type.getShape(),
                                      bufferElementType(type.getElementType()));
    SmallVector<int64_t> strides(type.getRank(), 1);
    for (int64_t d = type.getRank() - 2; d >= 0; --d)
      strides[d] = strides[d + 1] * type.getDimSize(d + 1);
    result = memref::ReinterpretCastOp::create(b, memrefType, src, 0,
                                               type.getShape(), strides);
    break;
  }
  case Placement::Constant: {
    ElementsAttr attr = constants[v];
    std::vector<char> bytes;
    Type elem = bufferElementType(type.getElementType());
    auto memrefType = MemRefType::get(type.getShape(), elem);
    Attribute init = attr;
    if (!isa<DenseElementsAttr>(attr) || type.getElementType() != elem) {
      if (!elementsToRuntimeBytes(attr, bytes))
        return nullptr;
      init = DenseElementsAttr::getFromRawBuffer(
          RankedTensorType::get(type.getShape(), elem),
          ArrayRef<char>(bytes.data(), bytes.size()));
    }
    std::string name = globalPrefix() + "const_" + std::to_string(globalCounter++);
    {
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPoint(step);
      memref::GlobalOp::create(b, name, b.getStringAttr("private"), memrefType,
                               init, /*constant=*/true,
                               b.getI64IntegerAttr(kBlockAlign));
    }
    result = memref::GetGlobalOp::create(b, memrefType, name);
    if (cuda) {
      // Kernels read device memory: a per-step device copy of the constant.
      int64_t n = runtimeTensorBytes(type);
      Value dev = callPtr("pipert_alloc", {ctxArg, i64c(n)});
      call("pipert_copy_to_device", {ctxArg, dev, pointerOf(result), i64c(n)});
      constantCopies.push_back(dev);
      result = viewOf(wrapPointer(dev, n), type);
    }
    break;
  }
  case Placement::Input:
  case Placement::Persistent: {
    Value array = p.kind == Placement::Input ? inputsArg : persistentArg;
    int64_t index = p.index;
    Value slot = LLVM::GEPOp::create(b, ptrType(), ptrType(), array,
                                     ArrayRef<LLVM::GEPArg>{(int32_t)index});
    Value ptr = LLVM::LoadOp::create(b, ptrType(), slot);
    result = viewOf(wrapPointer(ptr, runtimeTensorBytes(type)), type);
    break;
  }
  case Placement::Block:
    result = viewOf(blockMemrefs[p.index], type);
    break;
  case Placement::Output: {
    // The caller's output buffers: the array the 4th argument points to.
    Value slot = LLVM::GEPOp::create(b, ptrType(), ptrType(), lossArg,
                                     ArrayRef<LLVM::GEPArg>{(int32_t)p.index});
    Value ptr = LLVM::LoadOp::create(b, ptrType(), slot);
    result = viewOf(wrapPointer(ptr, runtimeTensorBytes(type)), type);
    break;
  }
  case Placement::Step:
  case Placement::None:
    return nullptr;
  }
  memrefs[v] = result;
  return result;
}

Value StepLowering::P(Value v) {
  if (isa<NoneType>(v.getType()))
    return nullPtr();
  Value m = memrefFor(v);
  if (!m)
    return nullPtr();
  return pointerOf(m);
}

FailureOr<SmallVector<int64_t>> StepLowering::constInts(Operation *op, Value v,
                                                        StringRef what) {
  SmallVector<int64_t> out;
  if (isa<NoneType>(v.getType()))
    return out;
  auto c = constantOf(v);
  if (!c) {
    op->emitError() << what << " must be a compile-time constant";
    return failure();
  }
  for (APInt x : c->getValues<APInt>())
    out.push_back(x.getSExtValue());
  return out;
}

FailureOr<Value> StepLowering::scalarF32(Operation *op, Value v,
                                         StringRef what) {
  if (auto c = constantOf(v)) {
    auto fp = c->getValues<APFloat>();
    if (fp.begin() != fp.end()) {
      APFloat x = *fp.begin();
      bool lost;
      x.convert(APFloat::IEEEsingle(), APFloat::rmNearestTiesToEven, &lost);
      return f32c(x.convertToFloat());
    }
  }
  auto type = tensorType(v);
  if (!type || !type.getElementType().isF32() || type.getNumElements() != 1) {
    op->emitError() << what << " must be one f32 element";
    return failure();
  }
  // A runtime scalar: read it back to the host.
  auto host = memref::AllocaOp::create(b, MemRefType::get({1}, b.getF32Type()));
  call("pipert_copy_to_host", {ctxArg, pointerOf(host), P(v), i64c(4)});
  return Value(memref::LoadOp::create(b, host, ValueRange{
                                                   arith::ConstantIndexOp::create(b, 0)}));
}

FailureOr<Value> StepLowering::scalarI64(Operation *op, Value v,
                                         StringRef what) {
  if (v == stepCounter)
    return stepArg;
  if (auto c = constantOf(v)) {
    auto ints = c->getValues<APInt>();
    if (ints.begin() != ints.end())
      return i64c((*ints.begin()).getSExtValue());
  }
  auto type = tensorType(v);
  if (!type || !type.getElementType().isInteger(64) ||
      type.getNumElements() != 1) {
    op->emitError() << what << " must be one i64 element";
    return failure();
  }
  auto host = memref::AllocaOp::create(b, MemRefType::get({1}, b.getI64Type()));
  call("pipert_copy_to_host", {ctxArg, pointerOf(host), P(v), i64c(8)});
  return Value(memref::LoadOp::create(b, host, ValueRange{
                                                   arith::ConstantIndexOp::create(b, 0)}));
}

//===----------------------------------------------------------------------===//
// Ops
//===----------------------------------------------------------------------===//

int64_t attrInt(Operation *op, StringRef name, int64_t dflt) {
  if (auto a = op->getAttrOfType<IntegerAttr>(name))
    return a.getInt();
  return dflt;
}
double attrF(Operation *op, StringRef name, double dflt) {
  if (auto a = op->getAttrOfType<FloatAttr>(name))
    return a.getValueAsDouble();
  return dflt;
}
std::string attrStr(Operation *op, StringRef name, StringRef dflt) {
  if (auto a = op->getAttrOfType<StringAttr>(name))
    return a.str();
  return dflt.str();
}
std::optional<SmallVector<int64_t>> attrInts(Operation *op, StringRef name) {
  Attribute a = op->getAttr(name);
  if (!a)
    return std::nullopt;
  SmallVector<int64_t> out;
  if (auto d = dyn_cast<DenseI64ArrayAttr>(a))
    out.assign(d.asArrayRef().begin(), d.asArrayRef().end());
  else if (auto arr = dyn_cast<ArrayAttr>(a)) {
    for (Attribute e : arr)
      if (auto i = dyn_cast<IntegerAttr>(e))
        out.push_back(i.getInt());
  } else
    return std::nullopt;
  return out;
}

int64_t unaryCode(StringRef name) {
  return llvm::StringSwitch<int64_t>(name)
      .Case("onnx.Neg", 1)
      .Case("onnx.Relu", 2)
      .Case("onnx.Tanh", 3)
      .Case("onnx.Sigmoid", 4)
      .Case("onnx.Erf", 5)
      .Case("onnx.Sqrt", 6)
      .Case("onnx.Exp", 7)
      .Case("onnx.Log", 8)
      .Case("onnx.Abs", 9)
      .Case("onnx.Reciprocal", 10)
      .Default(-1);
}

int64_t binaryCode(StringRef name) {
  return llvm::StringSwitch<int64_t>(name)
      .Case("onnx.Add", 0)
      .Case("onnx.Sub", 1)
      .Case("onnx.Mul", 2)
      .Case("onnx.Div", 3)
      .Case("onnx.Pow", 4)
      .Default(-1);
}

int64_t reductionCode(StringRef r) {
  return llvm::StringSwitch<int64_t>(r).Case("none", 0).Case("sum", 1).Default(2);
}

/// Resolves ONNX auto_pad into explicit pads (begins then ends) for the
/// spatial axes of a convolution or pooling.
SmallVector<int64_t> resolvePads(Operation *op, ArrayRef<int64_t> in,
                                 ArrayRef<int64_t> kernel,
                                 ArrayRef<int64_t> strides,
                                 ArrayRef<int64_t> dilations) {
  size_t n = in.size();
  std::string autoPad = attrStr(op, "auto_pad", "NOTSET");
  SmallVector<int64_t> pads(2 * n, 0);
  if (autoPad == "NOTSET") {
    if (auto p = attrInts(op, "pads"))
      if (p->size() == 2 * n)
        pads = *p;
    return pads;
  }
  if (autoPad == "VALID")
    return pads;
  for (size_t i = 0; i < n; ++i) {
    int64_t outDim = (in[i] + strides[i] - 1) / strides[i];
    int64_t total = std::max<int64_t>(
        (outDim - 1) * strides[i] + (kernel[i] - 1) * dilations[i] + 1 - in[i], 0);
    int64_t small = total / 2, large = total - small;
    pads[i] = autoPad == "SAME_LOWER" ? large : small;
    pads[i + n] = autoPad == "SAME_LOWER" ? small : large;
  }
  return pads;
}

LogicalResult StepLowering::lowerConvLike(Operation *op, bool conv) {
  StringRef name = op->getName().getStringRef();
  Value x = op->getOperand(0);
  auto xt = tensorType(x);
  int64_t rank = xt.getRank();
  if (rank != 3 && rank != 4)
    return op->emitError() << name << " is lowered for 1-D and 2-D inputs "
                                      "(rank 3 or 4), not rank "
                           << rank;
  int64_t spatial = rank - 2;
  SmallVector<int64_t> inSpatial(xt.getShape().drop_front(2));
  SmallVector<int64_t> kernel;
  if (conv)
    kernel.assign(tensorType(op->getOperand(1)).getShape().drop_front(2).begin(),
                  tensorType(op->getOperand(1)).getShape().drop_front(2).end());
  else if (name != "onnx.GlobalAveragePool")
    kernel = *attrInts(op, "kernel_shape");
  SmallVector<int64_t> strides =
      attrInts(op, "strides").value_or(SmallVector<int64_t>(spatial, 1));
  SmallVector<int64_t> dilations =
      attrInts(op, "dilations").value_or(SmallVector<int64_t>(spatial, 1));
  SmallVector<int64_t> pads =
      resolvePads(op, inSpatial, kernel, strides, dilations);
  // 1-D is 2-D with H = kH = 1.
  auto to2d = [&](ArrayRef<int64_t> v, int64_t fill) {
    SmallVector<int64_t> r(v.begin(), v.end());
    if (spatial == 1)
      r.insert(r.begin(), fill);
    return r;
  };
  auto shape4 = [&](ArrayRef<int64_t> s) {
    SmallVector<int64_t> r(s.begin(), s.end());
    if (spatial == 1)
      r.insert(r.begin() + 2, 1);
    return r;
  };
  SmallVector<int64_t> pads4 = pads;
  if (spatial == 1)
    pads4 = {0, pads[0], 0, pads[1]};
  Value xShape = i64Array(shape4(xt.getShape()));
  Value padsV = i64Array(pads4);
  Value stridesV = i64Array(to2d(strides, 1));
  Value dilationsV = i64Array(to2d(dilations, 1));
  if (conv) {
    Value w = op->getOperand(1);
    call("pipert_conv2d_f32",
         {ctxArg, P(x), xShape, P(w), i64Array(shape4(tensorType(w).getShape())),
          P(op->getOperand(2)), padsV, stridesV, dilationsV,
          i64c(attrInt(op, "group", 1)), out(op, 0)});
    return success();
  }
  Value kernelV = i64Array(to2d(kernel, 1));
  int64_t ceil = attrInt(op, "ceil_mode", 0);
  if (name == "onnx.MaxPool") {
    if (attrInt(op, "storage_order", 0) != 0)
      return op->emitError("MaxPool with storage_order=1 is not supported");
    call("pipert_maxpool2d_f32",
         {ctxArg, P(x), xShape, kernelV, padsV, stridesV, dilationsV,
          i32c(ceil), out(op, 0), out(op, 1)});
    return success();
  }
  for (int64_t d : dilations)
    if (d != 1)
      return op->emitError("AveragePool with dilations is not supported");
  call("pipert_avgpool2d_f32",
       {ctxArg, P(x), xShape, kernelV, padsV, stridesV, i32c(ceil),
        i32c(attrInt(op, "count_include_pad", 0)), out(op, 0)});
  return success();
}

LogicalResult StepLowering::lowerGradientOp(Operation *op) {
  StringRef name = op->getName().getStringRef();
  handled = true;
  auto operand = [&](unsigned i) { return op->getOperand(i); };
  auto numel = [&](Value v) { return i64c(tensorType(v).getNumElements()); };
  auto resultShape = [&](unsigned i) { return shapeOf(op->getResult(i)); };
  auto resultRank = [&](unsigned i) { return rankOf(op->getResult(i)); };
  auto normAxis = [&](int64_t axis, int64_t rank) {
    return axis < 0 ? axis + rank : axis;
  };
  auto lossArgs = [&]() -> SmallVector<Value> {
    auto ii = op->getAttrOfType<IntegerAttr>("ignore_index");
    return {i32c(ii ? 1 : 0), i64c(ii ? ii.getInt() : 0),
            i32c(reductionCode(attrStr(op, "reduction", "mean")))};
  };

  if (name == "onnx.ReluGrad" || name == "onnx.ErfGrad" ||
      name == "onnx.TanhGrad" || name == "onnx.SigmoidGrad") {
    std::string fn = "pipert_" + name.drop_front(5).drop_back(4).lower() +
                     "_grad_f32";
    call(fn, {ctxArg, P(operand(0)), P(operand(1)), numel(operand(1)),
              out(op, 0)});
    return success();
  }
  if (name == "onnx.ReduceToShape") {
    Value dy = operand(0);
    call("pipert_reduce_to_shape_f32", {ctxArg, P(dy), rankOf(dy), shapeOf(dy),
                                        resultRank(0), resultShape(0),
                                        out(op, 0)});
    return success();
  }
  if (name == "onnx.SoftmaxGrad" || name == "onnx.LogSoftmaxGrad") {
    Value y = operand(0);
    int64_t rank = tensorType(y).getRank();
    call(name == "onnx.SoftmaxGrad" ? "pipert_softmax_grad_f32"
                                    : "pipert_log_softmax_grad_f32",
         {ctxArg, P(y), P(operand(1)), rankOf(y), shapeOf(y),
          i64c(normAxis(attrInt(op, "axis", -1), rank)), out(op, 0)});
    return success();
  }
  if (name == "onnx.LayerNormalizationGrad") {
    Value x = operand(0);
    int64_t rank = tensorType(x).getRank();
    call("pipert_layer_norm_grad_f32",
         {ctxArg, P(x), rankOf(x), shapeOf(x),
          i64c(normAxis(attrInt(op, "axis", -1), rank)), P(operand(1)),
          P(operand(2)), P(operand(3)), P(operand(4)), out(op, 0), out(op, 1),
          out(op, 2)});
    return success();
  }
  if (name == "onnx.BatchNormalizationGrad") {
    Value x = operand(0);
    call("pipert_batch_norm_grad_f32",
         {ctxArg, P(x), rankOf(x), shapeOf(x), P(operand(1)), P(operand(2)),
          P(operand(3)), P(operand(4)), out(op, 0), out(op, 1), out(op, 2)});
    return success();
  }
  if (name == "onnx.ConvGrad" || name == "onnx.MaxPoolGrad" ||
      name == "onnx.AveragePoolGrad") {
    // The forward input's shape: X's, or the `shape` operand's (the result).
    auto xt = name == "onnx.AveragePoolGrad" ? tensorType(op->getResult(0))
                                              : tensorType(operand(1));
    if (name == "onnx.MaxPoolGrad")
      xt = tensorType(operand(0));
    int64_t rank = xt.getRank();
    if (rank != 3 && rank != 4)
      return op->emitError() << name << " is lowered for rank 3 and 4 only";
    bool oneD = rank == 3;
    auto shape4 = [&](ArrayRef<int64_t> s) {
      SmallVector<int64_t> r(s.begin(), s.end());
      if (oneD)
        r.insert(r.begin() + 2, 1);
      return r;
    };
    auto pair = [&](StringRef attr, int64_t fill) {
      SmallVector<int64_t> v =
          attrInts(op, attr).value_or(SmallVector<int64_t>(rank - 2, fill));
      if (oneD)
        v.insert(v.begin(), 1);
      return i64Array(v);
    };
    SmallVector<int64_t> pads =
        attrInts(op, "pads").value_or(SmallVector<int64_t>(2 * (rank - 2), 0));
    if (oneD)
      pads = {0, pads[0], 0, pads[1]};
    Value padsV = i64Array(pads), stridesV = pair("strides", 1);
    Value xShape = i64Array(shape4(xt.getShape()));
    if (name == "onnx.ConvGrad") {
      Value dy = operand(0), x = operand(1), w = operand(2);
      Value wShape = i64Array(shape4(tensorType(w).getShape()));
      Value dil = pair("dilations", 1);
      Value group = i64c(attrInt(op, "group", 1));
      if (placement[op->getResult(0)].kind != Placement::None)
        call("pipert_conv2d_grad_input_f32", {ctxArg, P(dy), P(w), wShape, xShape,
                                              padsV, stridesV, dil, group,
                                              out(op, 0)});
      if (placement[op->getResult(1)].kind != Placement::None)
        call("pipert_conv2d_grad_weight_f32", {ctxArg, P(x), xShape, P(dy),
                                               wShape, padsV, stridesV, dil,
                                               group, out(op, 1)});
      if (placement[op->getResult(2)].kind != Placement::None)
        call("pipert_conv2d_grad_bias_f32",
             {ctxArg, P(dy), i64Array(shape4(tensorType(dy).getShape())),
              out(op, 2)});
      return success();
    }
    Value kernel = pair("kernel_shape", 1);
    Value ceil = i32c(attrInt(op, "ceil_mode", 0));
    if (name == "onnx.MaxPoolGrad") {
      call("pipert_maxpool2d_grad_f32",
           {ctxArg, P(operand(0)), xShape, P(operand(1)), kernel, padsV,
            stridesV, pair("dilations", 1), ceil, out(op, 0)});
      return success();
    }
    call("pipert_avgpool2d_grad_f32",
         {ctxArg, P(operand(0)), xShape, kernel, padsV, stridesV, ceil,
          i32c(attrInt(op, "count_include_pad", 0)), out(op, 0)});
    return success();
  }
  if (name == "onnx.GlobalAveragePoolGrad") {
    call("pipert_global_avgpool_grad_f32",
         {ctxArg, P(operand(0)), resultRank(0), resultShape(0), out(op, 0)});
    return success();
  }
  if (name == "onnx.SliceGrad") {
    auto starts = constInts(op, operand(2), "SliceGrad starts");
    auto ends = constInts(op, operand(3), "SliceGrad ends");
    auto axes = constInts(op, operand(4), "SliceGrad axes");
    auto steps = constInts(op, operand(5), "SliceGrad steps");
    if (failed(starts) || failed(ends) || failed(axes) || failed(steps))
      return failure();
    call("pipert_slice_grad_f32",
         {ctxArg, P(operand(0)), resultRank(0), resultShape(0),
          i64c(starts->size()), i64Array(*starts), i64Array(*ends),
          axes->empty() ? nullPtr() : i64Array(*axes),
          steps->empty() ? nullPtr() : i64Array(*steps), out(op, 0)});
    return success();
  }
  if (name == "onnx.GatherGrad") {
    Value idx = operand(2);
    if (!getElementTypeOrSelf(idx.getType()).isInteger(64))
      return op->emitError("GatherGrad indices must be i64");
    int64_t rank = tensorType(op->getResult(0)).getRank();
    call("pipert_gather_grad_f32",
         {ctxArg, P(operand(0)), resultRank(0), resultShape(0), P(idx),
          rankOf(idx), shapeOf(idx),
          i64c(normAxis(attrInt(op, "axis", 0), rank)), out(op, 0)});
    return success();
  }
  if (name == "onnx.DropoutGrad") {
    int64_t training = 0;
    if (!isa<NoneType>(operand(3).getType())) {
      auto t = constantOf(operand(3));
      if (!t)
        return op->emitError("DropoutGrad training_mode must be a "
                             "compile-time constant");
      training = (*t->getValues<APInt>().begin()).getBoolValue();
    }
    Value ratio = f32c(training ? 0.5 : 0.0);
    if (training && !isa<NoneType>(operand(2).getType())) {
      auto r = scalarF32(op, operand(2), "DropoutGrad ratio");
      if (failed(r))
        return failure();
      ratio = *r;
    }
    call("pipert_dropout_grad_f32", {ctxArg, P(operand(0)), P(operand(1)),
                                     numel(operand(0)), ratio, out(op, 0)});
    return success();
  }
  if (name == "onnx.SoftmaxCrossEntropyLossGrad") {
    Value logProb = operand(1);
    SmallVector<Value> args = {ctxArg, P(operand(0)), P(logProb),
                               rankOf(logProb), shapeOf(logProb),
                               P(operand(2)), P(operand(3))};
    args.append(lossArgs());
    args.push_back(out(op, 0));
    call("pipert_softmax_cross_entropy_loss_grad_f32", args);
    return success();
  }
  if (name == "onnx.NegativeLogLikelihoodLossGrad") {
    SmallVector<Value> args = {ctxArg, P(operand(0)), resultRank(0),
                               resultShape(0), P(operand(2)), P(operand(3))};
    args.append(lossArgs());
    args.push_back(out(op, 0));
    call("pipert_nll_loss_grad_f32", args);
    return success();
  }
  handled = false;
  return failure();
}

LogicalResult StepLowering::lowerOp(Operation *op) {
  StringRef name = op->getName().getStringRef();
  auto operand = [&](unsigned i) { return op->getOperand(i); };
  auto elemOf = [&](Value v) { return getElementTypeOrSelf(v.getType()); };
  auto requireF32 = [&](Value v) -> LogicalResult {
    if (!elemOf(v).isF32())
      return op->emitError() << name << " is lowered for f32 only, not "
                             << elemOf(v);
    return success();
  };
  auto dtypeOf = [&](Value v) { return i32c(*pipertDtype(elemOf(v))); };
  auto numel = [&](Value v) { return i64c(tensorType(v).getNumElements()); };
  auto normAxis = [&](int64_t axis, int64_t rank) {
    return axis < 0 ? axis + rank : axis;
  };

  if (auto call = dyn_cast<func::CallOp>(op))
    return op->emitError() << "pipe-lower-to-runtime: no lowering for a call "
                              "to @"
                           << call.getCallee()
                           << " (a step is onnx ops; pipe-lower-programs "
                              "lowers transfers itself)";

  // Results that are constants or aliases need no kernel.
  if (name == "onnx.Constant" || name == "onnx.NoValue" || isAliasOp(op))
    return success();
  if (op->getNumResults() && llvm::all_of(op->getResults(), [&](Value r) {
        return placement[r].kind == Placement::Constant;
      }))
    return success();

  if (int64_t code = unaryCode(name); code >= 0) {
    if (failed(requireF32(operand(0))))
      return failure();
    call("pipert_unary_f32",
         {ctxArg, i32c(code), P(operand(0)), numel(operand(0)), out(op, 0)});
    return success();
  }
  if (int64_t code = binaryCode(name); code >= 0) {
    Value a = operand(0), c = operand(1);
    Type e = elemOf(a);
    if (elemOf(c) != e)
      return op->emitError() << name << " with operands of different element "
                                        "types is not supported";
    StringRef fn;
    if (e.isF32())
      fn = "pipert_binary_f32";
    else if (e.isInteger(64) && code != 4)
      fn = "pipert_binary_i64";
    else
      return op->emitError() << name << " is lowered for f32 (and i64 "
                                        "except Pow), not "
                             << e;
    call(fn, {ctxArg, i32c(code), P(a), rankOf(a), shapeOf(a), P(c), rankOf(c),
              shapeOf(c), out(op, 0)});
    return success();
  }
  if (name == "onnx.Equal") {
    Value a = operand(0), c = operand(1);
    StringRef fn = elemOf(a).isF32() ? "pipert_equal_f32"
                   : elemOf(a).isInteger(64) ? "pipert_equal_i64"
                                             : "";
    if (fn.empty())
      return op->emitError("Equal is lowered for f32 and i64 only");
    call(fn, {ctxArg, P(a), rankOf(a), shapeOf(a), P(c), rankOf(c), shapeOf(c),
              out(op, 0)});
    return success();
  }
  if (name == "onnx.Where") {
    Value c = operand(0), x = operand(1), y = operand(2);
    call("pipert_where", {ctxArg, dtypeOf(x), P(c), rankOf(c), shapeOf(c), P(x),
                          rankOf(x), shapeOf(x), P(y), rankOf(y), shapeOf(y),
                          out(op, 0)});
    return success();
  }
  if (name == "onnx.Cast") {
    Value x = operand(0);
    auto to = pipertDtype(elemOf(op->getResult(0)));
    if (!to)
      return op->emitError("Cast to an element type the runtime lacks");
    call("pipert_cast",
         {ctxArg, dtypeOf(x), P(x), i32c(*to), out(op, 0), numel(x)});
    return success();
  }
  if (name == "onnx.Gemm") {
    Value a = operand(0), bb = operand(1), c = operand(2);
    if (failed(requireF32(a)))
      return failure();
    int64_t ta = attrInt(op, "transA", 0), tb = attrInt(op, "transB", 0);
    auto as = tensorType(a).getShape(), bs = tensorType(bb).getShape();
    int64_t m = ta ? as[1] : as[0], k = ta ? as[0] : as[1];
    int64_t n = tb ? bs[0] : bs[1];
    bool hasC = !isa<NoneType>(c.getType());
    call("pipert_gemm_f32",
         {ctxArg, P(a), P(bb), P(c), i64c(hasC ? tensorType(c).getRank() : 0),
          hasC ? shapeOf(c) : nullPtr(), i64c(m), i64c(n), i64c(k), i32c(ta),
          i32c(tb), f32c(attrF(op, "alpha", 1.0)), f32c(attrF(op, "beta", 1.0)),
          out(op, 0)});
    return success();
  }
  if (name == "onnx.MatMul") {
    Value a = operand(0), c = operand(1);
    if (failed(requireF32(a)))
      return failure();
    call("pipert_matmul_f32", {ctxArg, P(a), rankOf(a), shapeOf(a), P(c),
                               rankOf(c), shapeOf(c), out(op, 0)});
    return success();
  }
  if (name == "onnx.Softmax" || name == "onnx.LogSoftmax") {
    Value x = operand(0);
    if (failed(requireF32(x)))
      return failure();
    int64_t rank = tensorType(x).getRank();
    call(name == "onnx.Softmax" ? "pipert_softmax_f32" : "pipert_log_softmax_f32",
         {ctxArg, P(x), rankOf(x), shapeOf(x),
          i64c(normAxis(attrInt(op, "axis", -1), rank)), out(op, 0)});
    return success();
  }
  if (name == "onnx.LayerNormalization") {
    Value x = operand(0);
    if (failed(requireF32(x)))
      return failure();
    if (attrInt(op, "stash_type", 1) != 1)
      return op->emitError("LayerNormalization with stash_type other than "
                           "float is not supported");
    int64_t rank = tensorType(x).getRank();
    call("pipert_layer_norm_f32",
         {ctxArg, P(x), rankOf(x), shapeOf(x),
          i64c(normAxis(attrInt(op, "axis", -1), rank)),
          f32c(attrF(op, "epsilon", 1e-5)), P(operand(1)), P(operand(2)),
          out(op, 0), out(op, 1), out(op, 2)});
    return success();
  }
  if (name == "onnx.BatchNormalization") {
    Value x = operand(0);
    if (failed(requireF32(x)))
      return failure();
    float eps = attrF(op, "epsilon", 1e-5);
    if (attrInt(op, "training_mode", 0)) {
      call("pipert_batch_norm_training_f32",
           {ctxArg, P(x), rankOf(x), shapeOf(x), P(operand(1)), P(operand(2)),
            P(operand(3)), P(operand(4)), f32c(eps),
            f32c(attrF(op, "momentum", 0.9)), out(op, 0), out(op, 1),
            out(op, 2), nullPtr(), nullPtr()});
    } else {
      call("pipert_batch_norm_inference_f32",
           {ctxArg, P(x), rankOf(x), shapeOf(x), P(operand(1)), P(operand(2)),
            P(operand(3)), P(operand(4)), f32c(eps), out(op, 0)});
    }
    return success();
  }
  if (name == "onnx.Conv")
    return lowerConvLike(op, /*conv=*/true);
  if (name == "onnx.MaxPool" || name == "onnx.AveragePool")
    return lowerConvLike(op, /*conv=*/false);
  if (name == "onnx.GlobalAveragePool") {
    Value x = operand(0);
    call("pipert_global_avgpool_f32",
         {ctxArg, P(x), rankOf(x), shapeOf(x), out(op, 0)});
    return success();
  }
  if (name == "onnx.Dropout") {
    Value x = operand(0);
    if (failed(requireF32(x)))
      return failure();
    Value ratio = f32c(0.5);
    if (!isa<NoneType>(operand(1).getType())) {
      auto r = scalarF32(op, operand(1), "Dropout ratio");
      if (failed(r))
        return failure();
      ratio = *r;
    }
    int64_t training = 0;
    if (!isa<NoneType>(operand(2).getType())) {
      auto t = constantOf(operand(2));
      if (!t)
        return op->emitError("Dropout training_mode must be a compile-time "
                             "constant");
      training = (*t->getValues<APInt>().begin()).getBoolValue();
    }
    call("pipert_dropout_f32", {ctxArg, P(x), numel(x), ratio, i32c(training),
                                out(op, 0), out(op, 1)});
    return success();
  }
  if (name == "onnx.ReduceMean" || name == "onnx.ReduceSum") {
    Value x = operand(0);
    if (failed(requireF32(x)))
      return failure();
    auto axes = constInts(op, operand(1), "the axes of " + name.str());
    if (failed(axes))
      return failure();
    call("pipert_reduce_f32",
         {ctxArg, i32c(name == "onnx.ReduceMean" ? 1 : 0), P(x), rankOf(x),
          shapeOf(x), i64c(axes->size()), i64Array(*axes),
          i32c(attrInt(op, "noop_with_empty_axes", 0)), out(op, 0)});
    return success();
  }
  if (name == "onnx.SoftmaxCrossEntropyLoss" ||
      name == "onnx.NegativeLogLikelihoodLoss") {
    Value x = operand(0), labels = operand(1), weights = operand(2);
    if (failed(requireF32(x)))
      return failure();
    if (!elemOf(labels).isInteger(64))
      return op->emitError() << name << " labels must be i64 (Cast them)";
    auto ii = op->getAttrOfType<IntegerAttr>("ignore_index");
    Value hasIgnore = i32c(ii ? 1 : 0), ignore = i64c(ii ? ii.getInt() : 0);
    Value reduction = i32c(reductionCode(attrStr(op, "reduction", "mean")));
    if (name == "onnx.SoftmaxCrossEntropyLoss")
      call("pipert_softmax_cross_entropy_loss_f32",
           {ctxArg, P(x), rankOf(x), shapeOf(x), P(labels), P(weights),
            hasIgnore, ignore, reduction, out(op, 0), out(op, 1)});
    else
      call("pipert_nll_loss_f32",
           {ctxArg, P(x), rankOf(x), shapeOf(x), P(labels), P(weights),
            hasIgnore, ignore, reduction, out(op, 0)});
    return success();
  }
  if (name == "onnx.Transpose") {
    Value x = operand(0);
    int64_t rank = tensorType(x).getRank();
    SmallVector<int64_t> perm;
    if (auto p = attrInts(op, "perm"))
      perm = *p;
    else
      for (int64_t i = rank - 1; i >= 0; --i)
        perm.push_back(i);
    call("pipert_transpose", {ctxArg, dtypeOf(x), P(x), rankOf(x), shapeOf(x),
                              i64Array(perm), out(op, 0)});
    return success();
  }
  if (name == "onnx.Concat") {
    Value y = op->getResult(0);
    int64_t rank = tensorType(y).getRank();
    int64_t axis = normAxis(attrInt(op, "axis", 0), rank);
    SmallVector<Value> ptrs;
    SmallVector<int64_t> sizes;
    for (Value x : op->getOperands()) {
      ptrs.push_back(P(x));
      sizes.push_back(tensorType(x).getDimSize(axis));
    }
    call("pipert_concat",
         {ctxArg, dtypeOf(y), i64c(ptrs.size()), ptrArray(ptrs), i64Array(sizes),
          i64c(rank), shapeOf(y), i64c(axis), out(op, 0)});
    return success();
  }
  if (name == "onnx.Split") {
    Value x = operand(0);
    int64_t rank = tensorType(x).getRank();
    int64_t axis = normAxis(attrInt(op, "axis", 0), rank);
    SmallVector<Value> ptrs;
    SmallVector<int64_t> sizes;
    for (unsigned i = 0; i < op->getNumResults(); ++i) {
      ptrs.push_back(out(op, i));
      sizes.push_back(tensorType(op->getResult(i)).getDimSize(axis));
    }
    call("pipert_split", {ctxArg, dtypeOf(x), P(x), rankOf(x), shapeOf(x),
                          i64c(axis), i64c(ptrs.size()), i64Array(sizes),
                          ptrArray(ptrs)});
    return success();
  }
  if (name == "onnx.Slice") {
    Value x = operand(0);
    auto starts = constInts(op, operand(1), "Slice starts");
    auto ends = constInts(op, operand(2), "Slice ends");
    auto axes = constInts(op, operand(3), "Slice axes");
    auto steps = constInts(op, operand(4), "Slice steps");
    if (failed(starts) || failed(ends) || failed(axes) || failed(steps))
      return failure();
    call("pipert_slice",
         {ctxArg, dtypeOf(x), P(x), rankOf(x), shapeOf(x), i64c(starts->size()),
          i64Array(*starts), i64Array(*ends),
          axes->empty() ? nullPtr() : i64Array(*axes),
          steps->empty() ? nullPtr() : i64Array(*steps), out(op, 0)});
    return success();
  }
  if (name == "onnx.Gather") {
    Value data = operand(0), idx = operand(1);
    if (!elemOf(idx).isInteger(64))
      return op->emitError("Gather indices must be i64 (Cast them)");
    int64_t rank = tensorType(data).getRank();
    call("pipert_gather",
         {ctxArg, dtypeOf(data), P(data), rankOf(data), shapeOf(data), P(idx),
          rankOf(idx), shapeOf(idx), i64c(normAxis(attrInt(op, "axis", 0), rank)),
          out(op, 0)});
    return success();
  }
  if (name == "onnx.Expand") {
    Value x = operand(0), y = op->getResult(0);
    call("pipert_expand", {ctxArg, dtypeOf(x), P(x), rankOf(x), shapeOf(x),
                           rankOf(y), shapeOf(y), out(op, 0)});
    return success();
  }

  // ai.onnx.preview.training optimizers: one call per tensor.
  if (name == "onnx.Momentum" || name == "onnx.Adam" || name == "onnx.Adagrad") {
    unsigned groups = name == "onnx.Adam" ? 4 : 3;
    unsigned n = (op->getNumOperands() - 2) / groups;
    auto lr = scalarF32(op, operand(0), name.str() + " learning rate R");
    auto t = scalarI64(op, operand(1), name.str() + " update count T");
    if (failed(lr) || failed(t))
      return failure();
    for (unsigned i = 0; i < n; ++i) {
      Value x = operand(2 + i), g = operand(2 + n + i), s1 = operand(2 + 2 * n + i);
      if (failed(requireF32(x)))
        return failure();
      if (name == "onnx.Momentum") {
        call("pipert_momentum_f32",
             {ctxArg, *lr, *t, f32c(attrF(op, "alpha", 0.9)),
              f32c(attrF(op, "beta", 1.0)),
              f32c(attrF(op, "norm_coefficient", 0.0)),
              i32c(attrStr(op, "mode", "standard") == "nesterov"), P(x), P(g),
              P(s1), numel(x), out(op, i), out(op, n + i)});
      } else if (name == "onnx.Adam") {
        Value s2 = operand(2 + 3 * n + i);
        call("pipert_adam_f32",
             {ctxArg, *lr, *t, f32c(attrF(op, "alpha", 0.9)),
              f32c(attrF(op, "beta", 0.999)), f32c(attrF(op, "epsilon", 1e-6)),
              f32c(attrF(op, "norm_coefficient", 0.0)),
              f32c(attrF(op, "norm_coefficient_post", 0.0)), P(x), P(g), P(s1),
              P(s2), numel(x), out(op, i), out(op, n + i), out(op, 2 * n + i)});
      } else {
        call("pipert_adagrad_f32",
             {ctxArg, *lr, *t, f32c(attrF(op, "decay_factor", 0.0)),
              f32c(attrF(op, "epsilon", 1e-6)),
              f32c(attrF(op, "norm_coefficient", 0.0)), P(x), P(g), P(s1),
              numel(x), out(op, i), out(op, n + i)});
      }
    }
    return success();
  }

  if (name == "onnx.SGD") {
    auto lr = scalarF32(op, operand(0), "SGD learning rate R");
    if (failed(lr) || failed(requireF32(operand(1))))
      return failure();
    call("pipert_sgd_f32", {ctxArg, *lr, f32c(attrF(op, "weight_decay", 0.0)),
                            P(operand(1)), P(operand(2)), numel(operand(1)),
                            out(op, 0)});
    return success();
  }
  if (name == "onnx.AdamW") {
    auto lr = scalarF32(op, operand(0), "AdamW learning rate R");
    auto t = scalarI64(op, operand(1), "AdamW update count T");
    if (failed(lr) || failed(t) || failed(requireF32(operand(2))))
      return failure();
    call("pipert_adamw_f32",
         {ctxArg, *lr, *t, f32c(attrF(op, "beta1", 0.9)),
          f32c(attrF(op, "beta2", 0.999)), f32c(attrF(op, "epsilon", 1e-8)),
          f32c(attrF(op, "weight_decay", 0.01)), P(operand(2)), P(operand(3)),
          P(operand(4)), P(operand(5)), numel(operand(2)), out(op, 0),
          out(op, 1), out(op, 2)});
    return success();
  }
  if (succeeded(lowerGradientOp(op)))
    return success();
  if (handled)
    return failure();
  return op->emitError() << "pipe-lower-to-runtime: no lowering for " << name;
}

//===----------------------------------------------------------------------===//
// Driver
//===----------------------------------------------------------------------===//

LogicalResult StepLowering::run() {
  if (!source.getBody().hasOneBlock())
    return source.emitError("the step function must have one block");
  if (failed(classifyArguments()) || failed(classifyResults()))
    return failure();
  computeConstants();
  if (failed(planBuffers()))
    return failure();

  MLIRContext *ctx = b.getContext();
  b.setInsertionPoint(source);
  Type ptr = ptrType();
  step = func::FuncOp::create(
      b, options.name,
      b.getFunctionType({ptr, ptr, ptr, ptr, b.getI64Type()}, {}));
  Block *entry = step.addEntryBlock();
  ctxArg = entry->getArgument(0);
  inputsArg = entry->getArgument(1);
  persistentArg = entry->getArgument(2);
  lossArg = entry->getArgument(3);
  stepArg = entry->getArgument(4);
  b.setInsertionPointToEnd(entry);

  Block &body = source.getBody().front();
  auto freeBlocksAfter = [&](int64_t index) {
    for (auto [id, block] : llvm::enumerate(blocks))
      if (block.freeAfter == index)
        call("pipert_free", {ctxArg, pointerOf(blockMemrefs[id])});
  };
  for (Operation &op : body.without_terminator()) {
    int64_t index = order[&op];
    b.setLoc(op.getLoc());
    for (auto [id, block] : llvm::enumerate(blocks))
      if (block.allocBefore == index) {
        Value p = callPtr("pipert_alloc", {ctxArg, i64c(block.bytes)});
        blockMemrefs[id] = wrapPointer(p, block.bytes);
      }
    if (failed(lowerOp(&op)))
      return failure();
    freeBlocksAfter(index);
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
  freeBlocksAfter(order[body.getTerminator()]);
  for (Value dev : constantCopies)
    call("pipert_free", {ctxArg, dev});
  func::ReturnOp::create(b);

  if (options.callable) {
    step.setPrivate();
    step->setAttr("pipe.peak_bytes", b.getI64IntegerAttr(peakBytes));
    source.erase();
    return success();
  }
  // Metadata for the object emitter, the driver and plan.json.
  auto describe = [&](BlockArgument arg, StringRef kind) {
    auto type = tensorType(arg);
    unsigned i = arg.getArgNumber();
    std::string name = "arg" + std::to_string(i);
    for (StringRef key : {"pipe.input", "pipe.param", "pipe.state"})
      if (auto s = source.getArgAttrOfType<StringAttr>(i, key))
        name = s.str();
    SmallVector<NamedAttribute> fields = {
        b.getNamedAttr("name", b.getStringAttr(name)),
        b.getNamedAttr("kind", b.getStringAttr(kind)),
        b.getNamedAttr("dtype",
                       b.getI64IntegerAttr(*pipertDtype(type.getElementType()))),
        b.getNamedAttr("shape", b.getDenseI64ArrayAttr(type.getShape()))};
    if (Attribute init = source.getArgAttr(i, "pipe.init"))
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
    StringRef kind = source.getArgAttr(i, "pipe.state") ? "state"
                     : source.getArgAttr(i, "pipe.param")
                         ? (source.getArgAttr(i, "pipe.trainable") ? "param"
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

} // namespace

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
    if (target != "cpu" && target != "cuda") {
      module.emitError() << "pipe-lower-to-runtime: unknown target '" << target
                         << "' (cpu, cuda)";
      return signalPassFailure();
    }
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
    if (module.lookupSymbol(kStepFunctionName)) {
      module.emitError() << "pipe-lower-to-runtime: @" << kStepFunctionName
                         << " already exists";
      return signalPassFailure();
    }
    // The other functions (the forward a training step was built from, an
    // imported training algorithm) are not part of the program.
    SmallVector<func::FuncOp> others;
    for (auto f : module.getOps<func::FuncOp>())
      if (f != source && !f.isExternal())
        others.push_back(f);
    StepLowering lowering(module, source, target == "cuda");
    if (failed(lowering.run()))
      return signalPassFailure();
    for (func::FuncOp f : others)
      f.erase();
  }
};

} // namespace
