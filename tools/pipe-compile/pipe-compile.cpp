//===- pipe-compile.cpp - ONNX model → per-device training executables ----===//
//
//   pipe-compile MODEL.onnx -o OUT [--batch B] [--optimizer sgd|momentum|
//       nesterov|adam|adamw|adagrad] [--lr F] [--momentum F]
//       [--weight-decay F] [--target cpu|cuda] [--input-shape x=8x32]
//       [--emit-mlir] [--forward-only]
//
// Chains the passes (import → pipe-autodiff → pipe-add-optimizer →
// pipe-lower-to-runtime → LLVM), then emits OUT/device0 (an executable that
// runs pipert_train_main), OUT/model.onnx (for --save) and OUT/plan.json.
// With --emit-mlir the IR after each stage is kept as OUT/<n>-<stage>.mlir.
//
//===----------------------------------------------------------------------===//
#include "pipec/Conversion/Passes.h"
#include "pipec/Conversion/RuntimeABI.h"
#include "pipec/Import/OnnxImporter.h"
#include "pipec/InitAll.h"
#include "pipec/Support/Diagnostics.h"
#include "pipec/Target/Executable.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/AsmState.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;
namespace cl = llvm::cl;

static cl::opt<std::string> modelPath(cl::Positional, cl::desc("<model.onnx>"),
                                      cl::Required);
static cl::opt<std::string> outDir("o", cl::desc("Output directory"),
                                   cl::value_desc("OUT"), cl::Required);
static cl::opt<int64_t> batch("batch",
                              cl::desc("Samples per step (binds the symbolic "
                                       "'batch' dimension)"),
                              cl::init(0));
static cl::opt<std::string>
    optimizer("optimizer",
              cl::desc("sgd, momentum, nesterov, adam, adamw or adagrad"),
              cl::init("sgd"));
static cl::opt<double> lr("lr", cl::desc("Learning rate"), cl::init(0.01));
static cl::opt<double> momentum("momentum",
                                cl::desc("Momentum (momentum, nesterov)"),
                                cl::init(0.9));
static cl::opt<double> weightDecay("weight-decay", cl::desc("Weight decay"),
                                   cl::init(0.0));
static cl::opt<std::string> target("target", cl::desc("cpu or cuda"),
                                   cl::init("cpu"));
static cl::list<std::string>
    inputShapes("input-shape",
                cl::desc("Bind a graph input's shape (x=32x784) or a symbolic "
                         "dimension (batch=32)"),
                cl::value_desc("name=DxD..."));
static cl::opt<bool> emitMlir("emit-mlir",
                              cl::desc("Keep the IR after each stage in OUT/"));
static cl::opt<bool>
    forwardOnly("forward-only",
                cl::desc("Compile the forward pass only (the loss, no "
                         "gradients or updates)"));

namespace {

const char *const kOptimizers[] = {"sgd",  "momentum", "nesterov",
                                   "adam", "adamw",    "adagrad"};

int fail(const llvm::Twine &message) {
  llvm::errs() << "pipe-compile: error: " << message << "\n";
  return 1;
}

bool writeFile(StringRef path, llvm::function_ref<void(llvm::raw_ostream &)> fn) {
  std::error_code ec;
  llvm::raw_fd_ostream os(path, ec, llvm::sys::fs::OF_Text);
  if (ec)
    return false;
  fn(os);
  return true;
}

std::string stagePath(StringRef name) {
  SmallString<256> p(outDir);
  llvm::sys::path::append(p, name);
  return std::string(p);
}

} // namespace

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  pipec::registerAllPasses();
  cl::ParseCommandLineOptions(argc, argv, "pipec compiler driver\n");

  if (!llvm::is_contained(kOptimizers, optimizer))
    return fail("unknown optimizer '" + optimizer +
                "' (sgd, momentum, nesterov, adam, adamw, adagrad)");
  if (target != "cpu" && target != "cuda")
    return fail("unknown target '" + target + "' (cpu, cuda)");
  if (batch < 0)
    return fail("--batch must be positive");

  DialectRegistry registry;
  pipec::registerAllDialects(registry);
  MLIRContext context(registry);
  context.loadAllAvailableDialects();
  pipec::OneLineDiagnosticHandler diagnostics(&context, "pipe-compile");

  // Import.
  auto buffer = llvm::MemoryBuffer::getFile(modelPath);
  if (!buffer)
    return fail("cannot read " + modelPath + ": " + buffer.getError().message());
  pipec::ImportOptions importOptions;
  if (batch > 0)
    importOptions.inputShapes["batch"] = {batch};
  for (const std::string &entry : inputShapes) {
    std::string name;
    std::vector<int64_t> shape;
    if (!pipec::parseInputShapeBinding(entry, name, shape))
      return fail("--input-shape '" + entry +
                  "' is malformed; write name=32x784 or name=32");
    importOptions.inputShapes[name] = shape;
  }
  OwningOpRef<ModuleOp> module = pipec::importOnnxModel(
      &context, (*buffer)->getBuffer(), modelPath, importOptions);
  if (!module)
    return 1;

  // The batch is the first axis of every graph input.
  auto forward = module->lookupSymbol<func::FuncOp>("forward");
  if (!forward)
    return fail("the imported module has no @forward");
  int64_t modelBatch = 0;
  for (unsigned i = 0; i < forward.getNumArguments(); ++i) {
    if (!forward.getArgAttr(i, "pipe.input"))
      continue;
    auto type = cast<RankedTensorType>(forward.getArgument(i).getType());
    StringRef name =
        forward.getArgAttrOfType<StringAttr>(i, "pipe.input").getValue();
    if (type.getRank() == 0)
      return fail("graph input '" + name + "' is a scalar; it has no batch axis");
    if (modelBatch == 0)
      modelBatch = type.getDimSize(0);
    if (type.getDimSize(0) != modelBatch)
      return fail("graph inputs disagree on the batch size (" +
                  llvm::Twine(modelBatch) + " vs " +
                  llvm::Twine(type.getDimSize(0)) + " for '" + name + "')");
    if (batch > 0 && type.getDimSize(0) != batch)
      return fail("batch mismatch: the model's input '" + name +
                  "' has batch " + llvm::Twine(type.getDimSize(0)) +
                  ", but --batch is " + llvm::Twine(batch));
  }
  if (modelBatch == 0)
    return fail("the model has no graph inputs to feed");

  if (std::error_code ec = llvm::sys::fs::create_directories(outDir))
    return fail("cannot create " + outDir + ": " + ec.message());
  auto dumpStage = [&](StringRef name) {
    if (emitMlir)
      writeFile(stagePath(name), [&](llvm::raw_ostream &os) {
        module->print(os);
      });
  };
  dumpStage("0-import.mlir");

  // Training step: gradients and the optimizer update.
  if (!forwardOnly) {
    for (StringRef pass : {"pipe-autodiff", "pipe-add-optimizer"})
      if (!PassInfo::lookup(pass) && !PassPipelineInfo::lookup(pass))
        return fail("pass '" + pass +
                    "' is not available in this build; compile with "
                    "--forward-only to build the forward pass alone");
    std::string pipeline;
    llvm::raw_string_ostream ps(pipeline);
    ps << "pipe-autodiff,pipe-add-optimizer{kind=" << optimizer
       << " lr=" << llvm::formatv("{0:e9}", lr.getValue());
    if (optimizer == "momentum" || optimizer == "nesterov")
      ps << " momentum=" << llvm::formatv("{0:e9}", momentum.getValue());
    if (weightDecay.getNumOccurrences())
      ps << " weight-decay=" << llvm::formatv("{0:e9}", weightDecay.getValue());
    ps << "}";
    PassManager pm(&context);
    if (failed(parsePassPipeline(pipeline, pm, llvm::errs())))
      return fail("cannot build the training pipeline '" + pipeline + "'");
    if (failed(pm.run(*module)))
      return 1;
    dumpStage("1-train.mlir");
  }

  // Buffers and runtime calls.
  {
    PassManager pm(&context);
    pipec::LowerToRuntimeOptions options;
    options.target = target;
    pm.addPass(pipec::createLowerToRuntime(options));
    if (failed(pm.run(*module)))
      return 1;
    dumpStage("2-runtime.mlir");
  }
  auto step = module->lookupSymbol<func::FuncOp>(pipec::kStepFunctionName);
  DictionaryAttr program =
      step ? step->getAttrOfType<DictionaryAttr>(pipec::kProgramAttrName)
           : DictionaryAttr();
  if (!program)
    return fail("pipe-lower-to-runtime left no @pipe_step");
  {
    PassManager pm(&context);
    pipec::buildLowerToLLVMPipeline(pm);
    if (failed(pm.run(*module)))
      return 1;
    dumpStage("3-llvm.mlir");
  }

  // Object, executable, the model for --save, plan.json.
  pipec::ProgramOptions programOptions;
  programOptions.program = program;
  programOptions.batch = modelBatch;
  programOptions.modelFile = "model.onnx";
  programOptions.optimizer = forwardOnly ? std::string("none") : optimizer.getValue();
  std::string objectPath = stagePath("device0.o");
  std::string exePath = stagePath("device0");
  std::string error;
  if (failed(pipec::emitProgramObject(*module, programOptions, objectPath,
                                      error)))
    return fail(error);
  if (failed(pipec::linkProgram(objectPath, exePath, target, error)))
    return fail(error);
  if (!emitMlir)
    llvm::sys::fs::remove(objectPath);
  std::string modelCopy = stagePath("model.onnx");
  if (std::error_code ec = llvm::sys::fs::copy_file(modelPath, modelCopy))
    return fail("cannot copy the model to " + modelCopy + ": " + ec.message());

  int64_t paramBytes = 0, stateBytes = 0, inputBytes = 0;
  llvm::json::Array params, state, inputs;
  auto describe = [&](DictionaryAttr d, int64_t &bytes) {
    auto shape = d.getAs<DenseI64ArrayAttr>("shape").asArrayRef();
    int64_t n = 1;
    for (int64_t s : shape)
      n *= s;
    int64_t dtype = d.getAs<IntegerAttr>("dtype").getInt();
    int64_t elem = dtype == 7 || dtype == 11 ? 8 : dtype == 10 ? 2
                   : dtype == 2 || dtype == 3 || dtype == 9 ? 1
                                                            : 4;
    bytes += n * elem;
    return llvm::json::Object{
        {"name", d.getAs<StringAttr>("name").getValue()},
        {"shape", llvm::json::Array(shape)},
        {"elements", n},
        {"dtype", dtype},
        {"kind", d.getAs<StringAttr>("kind").getValue()}};
  };
  for (Attribute a : program.getAs<ArrayAttr>("inputs"))
    inputs.push_back(describe(cast<DictionaryAttr>(a), inputBytes));
  for (Attribute a : program.getAs<ArrayAttr>("persistent")) {
    auto d = cast<DictionaryAttr>(a);
    StringRef kind = d.getAs<StringAttr>("kind").getValue();
    if (kind == "param" || kind == "frozen")
      params.push_back(describe(d, paramBytes));
    else
      state.push_back(describe(d, stateBytes));
  }
  int64_t activationBytes =
      program.getAs<IntegerAttr>("peak_activation_bytes").getInt();
  llvm::json::Object plan{
      {"model", llvm::sys::path::filename(modelPath)},
      {"batch", modelBatch},
      {"target", target},
      {"devices", 1},
      {"optimizer",
       llvm::json::Object{{"name", forwardOnly ? std::string("none")
                                               : optimizer.getValue()},
                          {"lr", lr.getValue()},
                          {"momentum", momentum.getValue()},
                          {"weight_decay", weightDecay.getValue()}}},
      {"inputs", std::move(inputs)},
      {"parameters", std::move(params)},
      {"state", std::move(state)},
      {"memory",
       llvm::json::Object{{"parameter_bytes", paramBytes},
                          {"optimizer_state_bytes", stateBytes},
                          {"input_bytes", inputBytes},
                          {"activation_bytes", activationBytes},
                          {"total_bytes", paramBytes + stateBytes + inputBytes +
                                              activationBytes}}},
      {"executables", llvm::json::Array{"device0"}}};
  if (!writeFile(stagePath("plan.json"), [&](llvm::raw_ostream &os) {
        os << llvm::formatv("{0:2}", llvm::json::Value(std::move(plan))) << "\n";
      }))
    return fail("cannot write " + stagePath("plan.json"));
  return diagnostics.errorCount() ? 1 : 0;
}
