//===- Executable.cpp - LLVM dialect → object → executable ----------------===//
#include "pipec/Target/Executable.h"

#include "pipec/Conversion/Passes.h"
#include "pipec/Conversion/RuntimeABI.h"

// The runtime's C ABI: the structs the program describes itself with.
#include "pipert/pipert_driver.h"

#include <cstddef>

#include "mlir/Target/LLVMIR/Dialect/Builtin/BuiltinToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/LLVMIR/LLVMToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Export.h"
#include "llvm/IR/Constants.h"
#include "llvm/IR/IRBuilder.h"
#include "llvm/IR/LegacyPassManager.h"
#include "llvm/IR/Module.h"
#include "llvm/IR/Verifier.h"
#include "llvm/MC/TargetRegistry.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/Target/TargetMachine.h"
#include "llvm/Target/TargetOptions.h"
#include "llvm/TargetParser/Host.h"

#ifndef PIPEC_RUNTIME_LIBRARY_DIR
#define PIPEC_RUNTIME_LIBRARY_DIR ""
#endif

using namespace mlir;

namespace {

int64_t kindCode(StringRef kind) {
  if (kind == "input")
    return PIPERT_TENSOR_INPUT;
  if (kind == "input_pipelines")
    return PIPERT_TENSOR_INPUT_PIPELINES;
  if (kind == "param")
    return PIPERT_TENSOR_PARAM;
  if (kind == "frozen")
    return PIPERT_TENSOR_FROZEN;
  return PIPERT_TENSOR_STATE;
}

/// Whether the LLVM struct `type` lays out like the C struct whose field
/// offsets and size are given (the program is compiled for this host).
bool sameLayout(const llvm::DataLayout &layout, llvm::StructType *type,
                ArrayRef<size_t> offsets, size_t size) {
  const llvm::StructLayout *l = layout.getStructLayout(type);
  if (l->getSizeInBytes() != size || type->getNumElements() != offsets.size())
    return false;
  for (auto [i, offset] : llvm::enumerate(offsets))
    if (l->getElementOffset(i) != offset)
      return false;
  return true;
}

/// A private constant global holding `data`.
llvm::Constant *constantBytes(llvm::Module &m, ArrayRef<char> data,
                              const llvm::Twine &name, unsigned align) {
  auto *init = llvm::ConstantDataArray::getRaw(
      StringRef(data.data(), data.size()), data.size(),
      llvm::Type::getInt8Ty(m.getContext()));
  auto *g = new llvm::GlobalVariable(m, init->getType(), /*isConstant=*/true,
                                     llvm::GlobalValue::PrivateLinkage, init, name);
  g->setAlignment(llvm::Align(align));
  return g;
}

llvm::Constant *cString(llvm::Module &m, StringRef s, const llvm::Twine &name) {
  auto *init = llvm::ConstantDataArray::getString(m.getContext(), s);
  auto *g = new llvm::GlobalVariable(m, init->getType(), true,
                                     llvm::GlobalValue::PrivateLinkage, init, name);
  g->setUnnamedAddr(llvm::GlobalValue::UnnamedAddr::Global);
  return g;
}

LogicalResult addProgramInfo(llvm::Module &m, const pipec::ProgramOptions &opts,
                             std::string &error) {
  llvm::LLVMContext &c = m.getContext();
  auto *ptr = llvm::PointerType::get(c, 0);
  auto *i32 = llvm::Type::getInt32Ty(c);
  auto *i64 = llvm::Type::getInt64Ty(c);
  auto *tensorTy = llvm::StructType::create(
      c, {ptr, i32, i32, ptr, ptr, i64, i32}, "pipert_tensor_info");
  auto *programTy = llvm::StructType::create(
      c, {i32, i32, ptr, i32, ptr, i64, ptr, ptr, ptr, i32, i32, i32, i32, i32,
          ptr, ptr, i32},
      "pipert_program_info");
  // The structs above are pipert_driver.h's; a field added or moved there
  // without the same change here is caught before any program is built.
  const llvm::DataLayout &layout = m.getDataLayout();
  if (!sameLayout(layout, tensorTy,
                  {offsetof(pipert_tensor_info, name),
                   offsetof(pipert_tensor_info, dtype),
                   offsetof(pipert_tensor_info, ndim),
                   offsetof(pipert_tensor_info, shape),
                   offsetof(pipert_tensor_info, init),
                   offsetof(pipert_tensor_info, init_bytes),
                   offsetof(pipert_tensor_info, kind)},
                  sizeof(pipert_tensor_info)) ||
      !sameLayout(layout, programTy,
                  {offsetof(pipert_program_info, abi_version),
                   offsetof(pipert_program_info, n_inputs),
                   offsetof(pipert_program_info, inputs),
                   offsetof(pipert_program_info, n_persistent),
                   offsetof(pipert_program_info, persistent),
                   offsetof(pipert_program_info, batch),
                   offsetof(pipert_program_info, model_file),
                   offsetof(pipert_program_info, optimizer),
                   offsetof(pipert_program_info, step),
                   offsetof(pipert_program_info, device),
                   offsetof(pipert_program_info, n_devices),
                   offsetof(pipert_program_info, has_loss),
                   offsetof(pipert_program_info, drain_steps),
                   offsetof(pipert_program_info, pipelines),
                   offsetof(pipert_program_info, finish),
                   offsetof(pipert_program_info, eval),
                   offsetof(pipert_program_info, eval_metrics)},
                  sizeof(pipert_program_info))) {
    error = "internal error: the program description the compiler emits no "
            "longer matches pipert_driver.h (rebuild pipec from one checkout)";
    return failure();
  }

  auto tensors = [&](StringRef group) -> FailureOr<std::pair<llvm::Constant *, int64_t>> {
    auto list = opts.program.getAs<ArrayAttr>(group);
    if (!list)
      return std::make_pair(static_cast<llvm::Constant *>(llvm::ConstantPointerNull::get(ptr)), int64_t(0));
    std::vector<llvm::Constant *> entries;
    for (auto [i, a] : llvm::enumerate(list)) {
      auto d = cast<DictionaryAttr>(a);
      StringRef name = d.getAs<StringAttr>("name").getValue();
      auto shape = d.getAs<DenseI64ArrayAttr>("shape").asArrayRef();
      std::string tag = (group + "." + llvm::Twine(i)).str();
      llvm::Constant *shapePtr = llvm::ConstantPointerNull::get(ptr);
      if (!shape.empty())
        shapePtr = constantBytes(
            m, ArrayRef<char>(reinterpret_cast<const char *>(shape.data()),
                              shape.size() * sizeof(int64_t)),
            "pipe.shape." + tag, 8);
      llvm::Constant *init = llvm::ConstantPointerNull::get(ptr);
      int64_t initBytes = 0;
      if (Attribute attr = d.get("init")) {
        std::vector<char> bytes;
        if (!pipec::elementsToRuntimeBytes(attr, bytes)) {
          error = ("cannot read the initial value of '" + name + "'").str();
          return failure();
        }
        initBytes = bytes.size();
        init = constantBytes(m, bytes, "pipe.init." + tag, 64);
      }
      entries.push_back(llvm::ConstantStruct::get(
          tensorTy,
          {cString(m, name, "pipe.name." + tag),
           llvm::ConstantInt::get(i32, d.getAs<IntegerAttr>("dtype").getInt()),
           llvm::ConstantInt::get(i32, shape.size()), shapePtr, init,
           llvm::ConstantInt::get(i64, initBytes),
           llvm::ConstantInt::get(i32, kindCode(d.getAs<StringAttr>("kind").getValue()))}));
    }
    auto *arrTy = llvm::ArrayType::get(tensorTy, entries.size());
    auto *g = new llvm::GlobalVariable(m, arrTy, true,
                                       llvm::GlobalValue::PrivateLinkage,
                                       llvm::ConstantArray::get(arrTy, entries),
                                       "pipe." + group);
    return std::make_pair(static_cast<llvm::Constant *>(g), int64_t(entries.size()));
  };
  auto inputs = tensors("inputs");
  if (failed(inputs))
    return failure();
  auto persistent = tensors("persistent");
  if (failed(persistent))
    return failure();
  auto hasLossAttr = opts.program.getAs<BoolAttr>("has_loss");
  bool hasLoss = !hasLossAttr || hasLossAttr.getValue();
  llvm::Function *step = m.getFunction(pipec::kStepFunctionName);
  if (!step) {
    error = "the module has no @pipe_step (run pipe-lower-to-runtime first)";
    return failure();
  }
  // No-flush programs: the drain steps and the function that publishes the
  // newest weights (pipe-lower-programs).
  int64_t drainSteps = 0;
  if (auto d = opts.program.getAs<IntegerAttr>("drain_steps"))
    drainSteps = d.getInt();
  llvm::Function *finish = m.getFunction(pipec::kFinishFunctionName);
  llvm::Function *eval = m.getFunction(pipec::kEvalFunctionName);
  int64_t evalMetrics = 0;
  if (auto n = opts.program.getAs<IntegerAttr>("eval_metrics"); n && eval)
    evalMetrics = n.getInt();
  llvm::Constant *model = opts.modelFile.empty()
                              ? static_cast<llvm::Constant *>(llvm::ConstantPointerNull::get(ptr))
                              : cString(m, opts.modelFile, "pipe.model");
  auto *info = new llvm::GlobalVariable(
      m, programTy, true, llvm::GlobalValue::ExternalLinkage,
      llvm::ConstantStruct::get(
          programTy,
          {llvm::ConstantInt::get(i32, PIPERT_PROGRAM_ABI_VERSION),
           llvm::ConstantInt::get(i32, inputs->second), inputs->first,
           llvm::ConstantInt::get(i32, persistent->second), persistent->first,
           llvm::ConstantInt::get(i64, opts.batch), model,
           cString(m, opts.optimizer, "pipe.optimizer"), step,
           llvm::ConstantInt::get(i32, opts.device),
           llvm::ConstantInt::get(i32, opts.devices),
           llvm::ConstantInt::get(i32, hasLoss ? 1 : 0),
           llvm::ConstantInt::get(i32, drainSteps),
           llvm::ConstantInt::get(i32, opts.pipelines),
           finish ? static_cast<llvm::Constant *>(finish)
                  : llvm::ConstantPointerNull::get(ptr),
           eval ? static_cast<llvm::Constant *>(eval)
                : llvm::ConstantPointerNull::get(ptr),
           llvm::ConstantInt::get(i32, evalMetrics)}),
      "pipe_program_info");
  (void)info;

  // int main(int argc, char **argv) { return pipert_train_main(argc, argv, &info); }
  auto *trainMainTy = llvm::FunctionType::get(i32, {i32, ptr, ptr}, false);
  llvm::FunctionCallee trainMain =
      m.getOrInsertFunction("pipert_train_main", trainMainTy);
  auto *mainFn = llvm::Function::Create(
      llvm::FunctionType::get(i32, {i32, ptr}, false),
      llvm::GlobalValue::ExternalLinkage, "main", m);
  llvm::IRBuilder<> b(llvm::BasicBlock::Create(c, "entry", mainFn));
  b.CreateRet(b.CreateCall(trainMain,
                           {mainFn->getArg(0), mainFn->getArg(1), info}));
  return success();
}

} // namespace

LogicalResult mlir::pipec::emitProgramObject(ModuleOp module,
                                             const ProgramOptions &options,
                                             StringRef objectPath,
                                             std::string &error) {
  if (!options.program) {
    error = "no pipe.program metadata (run pipe-lower-to-runtime first)";
    return failure();
  }
  registerBuiltinDialectTranslation(*module.getContext());
  registerLLVMDialectTranslation(*module.getContext());
  llvm::LLVMContext llvmContext;
  std::unique_ptr<llvm::Module> llvmModule =
      translateModuleToLLVMIR(module, llvmContext, "pipe_program");
  if (!llvmModule) {
    error = "translation to LLVM IR failed";
    return failure();
  }

  llvm::InitializeNativeTarget();
  llvm::InitializeNativeTargetAsmPrinter();
  llvm::Triple triple(llvm::sys::getDefaultTargetTriple());
  std::string lookupError;
  const llvm::Target *target =
      llvm::TargetRegistry::lookupTarget(triple, lookupError);
  if (!target) {
    error = "no LLVM target for " + triple.str() + ": " + lookupError;
    return failure();
  }
  llvm::TargetOptions targetOptions;
  // The program is calls into the runtime, whose kernels do the work:
  // instruction selection without the optimising scheduler and register
  // allocator loses nothing measurable at run time, and their cost grows
  // faster than linearly in a function's length.
  std::unique_ptr<llvm::TargetMachine> machine(target->createTargetMachine(
      triple, "generic", "", targetOptions, llvm::Reloc::PIC_, std::nullopt,
      llvm::CodeGenOptLevel::None));
  llvmModule->setTargetTriple(triple);
  llvmModule->setDataLayout(machine->createDataLayout());
  if (failed(addProgramInfo(*llvmModule, options, error)))
    return failure();
  std::string verifyErrors;
  llvm::raw_string_ostream verifyStream(verifyErrors);
  if (llvm::verifyModule(*llvmModule, &verifyStream)) {
    error = "invalid LLVM IR: " + verifyErrors;
    return failure();
  }

  std::error_code ec;
  llvm::raw_fd_ostream out(objectPath, ec, llvm::sys::fs::OF_None);
  if (ec) {
    error = ("cannot write " + objectPath + ": " + ec.message()).str();
    return failure();
  }
  llvm::legacy::PassManager pm;
  if (machine->addPassesToEmitFile(pm, out, nullptr,
                                   llvm::CodeGenFileType::ObjectFile)) {
    error = "the target cannot emit object files";
    return failure();
  }
  pm.run(*llvmModule);
  out.flush();
  return success();
}

LogicalResult mlir::pipec::linkProgram(StringRef objectPath,
                                       StringRef executablePath,
                                       StringRef target, std::string &error) {
  std::string libDir = PIPEC_RUNTIME_LIBRARY_DIR;
  if (const char *env = std::getenv("PIPEC_RUNTIME_DIR"))
    libDir = env;
  std::string lib = ("pipert_" + target).str();
  SmallString<256> libPath(libDir);
  llvm::sys::path::append(libPath, "lib" + lib + ".so");
  if (!llvm::sys::fs::exists(libPath)) {
    error = ("runtime library " + libPath + " not found (target '" + target +
             "'; set PIPEC_RUNTIME_DIR)")
                .str();
    return failure();
  }
  auto linker = llvm::sys::findProgramByName("c++");
  if (!linker)
    linker = llvm::sys::findProgramByName("cc");
  if (!linker) {
    error = "no system linker driver (c++ or cc) on PATH";
    return failure();
  }
  std::string rpath = "-Wl,-rpath," + libDir;
  std::string libFlag = "-L" + libDir;
  std::string libName = "-l" + lib;
  SmallVector<StringRef> args = {*linker,        objectPath, "-o",
                                 executablePath, libFlag,    libName,
                                 rpath};
  std::string message;
  int rc = llvm::sys::ExecuteAndWait(*linker, args, std::nullopt, {}, 0, 0,
                                     &message);
  if (rc != 0) {
    error = "linking " + executablePath.str() + " failed" +
            (message.empty() ? "" : ": " + message);
    return failure();
  }
  return success();
}
