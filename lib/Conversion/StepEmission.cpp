//===- StepEmission.cpp - emission helpers of the step lowering -----------===//
//
// What the kernel lowerings build with: pointers to and views of buffers
// (memrefs), wrapped runtime pointers, i64 arrays as constant globals,
// alloca'd pointer arrays, runtime calls (declaring the callee on first
// use), the memref of a value by its placement, scalar operands read as
// constants or copied back to the host, and the attribute helpers.
//
//===----------------------------------------------------------------------===//
#include "StepLowering.h"

#include "pipec/Conversion/RuntimeABI.h"

#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "llvm/ADT/StringSwitch.h"

using namespace mlir;
using namespace mlir::pipec;

namespace mlir::pipec::steplowering {

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

Value StepLowering::f32Array(ArrayRef<float> values) {
  if (values.empty())
    return nullPtr();
  auto type = MemRefType::get({static_cast<int64_t>(values.size())},
                              b.getF32Type());
  std::string name = globalPrefix() + "f32_" + std::to_string(globalCounter++);
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPoint(step);
    auto init = DenseElementsAttr::get(
        RankedTensorType::get(type.getShape(), b.getF32Type()), values);
    memref::GlobalOp::create(b, name, b.getStringAttr("private"), type, init,
                             /*constant=*/true, IntegerAttr());
  }
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(&step.getBody().front());
  return pointerOf(memref::GetGlobalOp::create(b, type, name));
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
  callRuntime(b, b.getLoc(), module, callee, args);
}

Value StepLowering::callPtr(StringRef callee, ArrayRef<Value> args) {
  return callRuntime(b, b.getLoc(), module, callee, args, {ptrType()})
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
    if (p.offset) {
      // A part of its root (a contiguous Split's): a view from there.
      Value at = LLVM::GEPOp::create(b, ptrType(), b.getI8Type(), pointerOf(src),
                                     ValueRange{i64c(p.offset)});
      result = viewOf(wrapPointer(at, runtimeTensorBytes(type)), type);
      break;
    }
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
  return hostScalar(v, b.getF32Type());
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
  return hostScalar(v, b.getI64Type());
}

Value StepLowering::hostScalar(Value v, Type elementType) {
  auto host = memref::AllocaOp::create(b, MemRefType::get({1}, elementType));
  call("pipert_copy_to_host",
       {ctxArg, pointerOf(host), P(v),
        i64c(runtimeElementBytes(elementType))});
  return memref::LoadOp::create(b, host,
                                ValueRange{arith::ConstantIndexOp::create(b, 0)});
}

FailureOr<SmallVector<Value>>
StepLowering::sliceWindow(Operation *op, unsigned first, StringRef what) {
  static constexpr StringLiteral names[] = {"starts", "ends", "axes",
                                            "steps"};
  SmallVector<SmallVector<int64_t>> parts;
  for (auto [i, part] : llvm::enumerate(names)) {
    auto ints = constInts(op, op->getOperand(first + i),
                          (what + " " + part).str());
    if (failed(ints))
      return failure();
    parts.push_back(std::move(*ints));
  }
  auto optional = [&](ArrayRef<int64_t> v) {
    return v.empty() ? nullPtr() : i64Array(v);
  };
  return SmallVector<Value>{i64c(parts[0].size()), i64Array(parts[0]),
                            i64Array(parts[1]), optional(parts[2]),
                            optional(parts[3])};
}

//===----------------------------------------------------------------------===//
// Attributes
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
int32_t recurrentDirection(Operation *op) {
  std::string d = attrStr(op, "direction", "forward");
  return d == "forward" ? 0 : d == "reverse" ? 1 : 2;
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

int64_t reductionCode(StringRef r) {
  return llvm::StringSwitch<int64_t>(r).Case("none", 0).Case("sum", 1).Default(2);
}

/// Resolves ONNX auto_pad into explicit pads (begins then ends) for the

} // namespace mlir::pipec::steplowering
