//===- RuntimeABI.cpp - facts about the pipert C ABI ----------------------===//
#include "pipec/Conversion/RuntimeABI.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/IR/DialectResourceBlobManager.h"

// The runtime's C ABI itself: the element type codes come from there.
#include "pipert/pipert.h"

using namespace mlir;

// The codes are ONNX's TensorProto.DataType, which the importer and the
// saved models use too.
static_assert(PIPERT_F32 == 1 && PIPERT_U8 == 2 && PIPERT_I8 == 3 &&
                  PIPERT_I32 == 6 && PIPERT_I64 == 7 && PIPERT_BOOL == 9 &&
                  PIPERT_F16 == 10 && PIPERT_F64 == 11,
              "pipert_dtype codes must be ONNX's TensorProto.DataType");

std::optional<int64_t> mlir::pipec::pipertDtype(Type t) {
  if (t.isF32())
    return PIPERT_F32;
  if (t.isF16())
    return PIPERT_F16;
  if (t.isF64())
    return PIPERT_F64;
  if (t.isInteger(1))
    return PIPERT_BOOL;
  if (auto it = dyn_cast<IntegerType>(t)) {
    if (it.getWidth() == 8)
      return it.isUnsigned() ? PIPERT_U8 : PIPERT_I8;
    if (it.getWidth() == 32 && !it.isUnsigned())
      return PIPERT_I32;
    if (it.getWidth() == 64 && !it.isUnsigned())
      return PIPERT_I64;
  }
  return std::nullopt;
}

int64_t mlir::pipec::runtimeDtypeBytes(int64_t code) {
  switch (static_cast<pipert_dtype>(code)) {
  case PIPERT_F64:
  case PIPERT_I64:
    return 8;
  case PIPERT_F32:
  case PIPERT_I32:
    return 4;
  case PIPERT_F16:
    return 2;
  case PIPERT_U8:
  case PIPERT_I8:
  case PIPERT_BOOL:
    return 1;
  }
  return 0;
}

int64_t mlir::pipec::runtimeElementBytes(Type t) {
  if (t.isInteger(1))
    return 1;
  return (t.getIntOrFloatBitWidth() + 7) / 8;
}

int64_t mlir::pipec::runtimeTensorBytes(ShapedType type) {
  return type.getNumElements() * runtimeElementBytes(type.getElementType());
}

bool mlir::pipec::elementsToRuntimeBytes(Attribute attr, std::vector<char> &bytes) {
  auto shaped = dyn_cast_or_null<TypedAttr>(attr);
  if (!shaped)
    return false;
  auto type = dyn_cast<ShapedType>(shaped.getType());
  if (!type || !type.hasStaticShape())
    return false;
  Type elem = type.getElementType();
  int64_t n = type.getNumElements();
  int64_t elemBytes = runtimeElementBytes(elem);
  bytes.assign(static_cast<size_t>(n * elemBytes), 0);
  if (auto dense = dyn_cast<DenseElementsAttr>(attr)) {
    if (elem.isInteger(1)) {
      int64_t i = 0;
      for (bool v : dense.getValues<bool>())
        bytes[i++] = v ? 1 : 0;
      return true;
    }
    ArrayRef<char> raw = dense.getRawData();
    if (dense.isSplat()) {
      if (static_cast<int64_t>(raw.size()) < elemBytes)
        return false;
      for (int64_t i = 0; i < n; ++i)
        std::memcpy(bytes.data() + i * elemBytes, raw.data(), elemBytes);
      return true;
    }
    if (static_cast<int64_t>(raw.size()) != n * elemBytes)
      return false;
    std::memcpy(bytes.data(), raw.data(), raw.size());
    return true;
  }
  if (auto resource = dyn_cast<DenseResourceElementsAttr>(attr)) {
    AsmResourceBlob *blob = resource.getRawHandle().getBlob();
    if (!blob)
      return false;
    ArrayRef<char> raw = blob->getData();
    if (elem.isInteger(1) || static_cast<int64_t>(raw.size()) != n * elemBytes)
      return false;
    std::memcpy(bytes.data(), raw.data(), raw.size());
    return true;
  }
  return false;
}

namespace {
/// A runtime function's signature as pipert_abi.def spells it.
struct RuntimeSignature {
  const char *name, *result, *arguments;
};
constexpr RuntimeSignature kRuntimeFunctions[] = {
#define PIPERT_FUNCTION(name, result, ...) {#name, #result, #__VA_ARGS__},
#include "pipert/pipert_abi.def"
#undef PIPERT_FUNCTION
};

/// The .def's spelling of an MLIR type at a runtime call ("" if none).
StringRef abiTypeName(Type t) {
  if (llvm::isa<LLVM::LLVMPointerType>(t))
    return "ptr";
  if (t.isInteger(64))
    return "i64";
  if (t.isInteger(32))
    return "i32";
  if (t.isF32())
    return "f32";
  return "";
}
} // namespace

/// Checks a call the compiler is about to emit against pipert_abi.def: a
/// mismatch is a bug of the compiler (or of the table), never of the input.
static void checkRuntimeCall(StringRef callee, TypeRange args,
                             TypeRange results) {
  if (!callee.starts_with("pipert_"))
    return; // the program's own functions (stages, updates)
  const RuntimeSignature *sig = nullptr;
  for (const RuntimeSignature &f : kRuntimeFunctions)
    if (callee == f.name)
      sig = &f;
  auto describe = [](TypeRange types) {
    std::string text;
    llvm::raw_string_ostream os(text);
    llvm::interleaveComma(types, os, [&](Type t) {
      StringRef name = abiTypeName(t);
      if (name.empty())
        os << t;
      else
        os << name;
    });
    return text;
  };
  if (!sig)
    llvm::report_fatal_error(llvm::Twine("pipec: internal error: a call of ") +
                             callee +
                             ", which runtime/include/pipert/pipert_abi.def "
                             "does not list");
  SmallVector<StringRef> want;
  StringRef(sig->arguments).split(want, ',');
  bool ok = want.size() == args.size() &&
            (StringRef(sig->result).trim() == "void" ? results.empty()
                                                     : results.size() == 1 &&
                                                           abiTypeName(results[0]) ==
                                                               StringRef(sig->result).trim());
  for (size_t i = 0; ok && i < want.size(); ++i)
    ok = abiTypeName(args[i]) == want[i].trim();
  if (!ok)
    llvm::report_fatal_error(
        llvm::Twine("pipec: internal error: a call of ") + callee + "(" +
        describe(args) + ") -> (" + describe(results) +
        ") does not match pipert_abi.def: " + sig->result + " " + callee +
        "(" + sig->arguments + ")");
}

func::CallOp mlir::pipec::callRuntime(OpBuilder &b, Location loc,
                                      ModuleOp module, StringRef callee,
                                      ValueRange args, TypeRange results) {
  checkRuntimeCall(callee, args.getTypes(), results);
  if (!module.lookupSymbol<func::FuncOp>(callee)) {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(module.getBody());
    auto decl = func::FuncOp::create(
        b, loc, callee, b.getFunctionType(args.getTypes(), results));
    decl.setPrivate();
  }
  return func::CallOp::create(b, loc, callee, results, args);
}

FunctionType mlir::pipec::stepFunctionType(MLIRContext *ctx) {
  Type ptr = LLVM::LLVMPointerType::get(ctx);
  return FunctionType::get(ctx, {ptr, ptr, ptr, ptr, IntegerType::get(ctx, 64)},
                           {});
}

func::FuncOp mlir::pipec::createStepFunction(OpBuilder &b, Location loc,
                                             StringRef name,
                                             StepArguments &args) {
  auto fn = func::FuncOp::create(b, loc, name,
                                 stepFunctionType(b.getContext()));
  Block *entry = fn.addEntryBlock();
  args = {entry->getArgument(0), entry->getArgument(1), entry->getArgument(2),
          entry->getArgument(3), entry->getArgument(4)};
  return fn;
}
