//===- pipe-translate.cpp - translations in and out of pipec's IR ---------===//
//
//   pipe-translate --import-onnx model.onnx [--input-shape x=32x784] [-o out.mlir]
//
//===----------------------------------------------------------------------===//
#include "pipec/Autodiff/VjpOpInterface.h"
#include "pipec/Import/OnnxImporter.h"
#include "pipec/InitAll.h"
#include "pipec/Support/Diagnostics.h"
#include "pipec/Support/Version.h"

#include "llvm/Support/FileSystem.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Tools/mlir-translate/MlirTranslateMain.h"
#include "mlir/Tools/mlir-translate/Translation.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/SourceMgr.h"

using namespace mlir;

// --help shows these and the translations; LLVM's options: --help-hidden.
static llvm::cl::OptionCategory importCat("ONNX import");

static llvm::cl::list<std::string> inputShapes(
    "input-shape", llvm::cl::cat(importCat),
    llvm::cl::desc("Bind a graph input's shape (x=32x784) or a symbolic "
                   "dimension (batch=32); repeatable or comma-joined with ';'"),
    llvm::cl::value_desc("name=DxD..."));
static llvm::cl::opt<std::string> lossName(
    "loss", llvm::cl::cat(importCat),
    llvm::cl::desc("Graph output that is the training loss "
                           "(default: detected)"),
    llvm::cl::init(""));
static llvm::cl::list<std::string> frozenParams(
    "frozen", llvm::cl::cat(importCat),
    llvm::cl::desc("Initializers to keep frozen (no gradient)"),
    llvm::cl::CommaSeparated);

int main(int argc, char **argv) {
  pipec::setVersionPrinter("pipe-translate");
  if (argc == 2 && StringRef(argv[1]) == "--list-onnx-operators") {
    DialectRegistry registry;
    pipec::registerAllDialects(registry);
    MLIRContext context(registry);
    for (const std::string &name : pipec::supportedOnnxOperators(&context))
      llvm::outs() << name << "\n";
    return 0;
  }
  if (argc == 2 && StringRef(argv[1]) == "--onnx-operator-table") {
    // The coverage table (docs/onnx-operators.md is this output): every
    // ONNX operator the importer takes, its domain, and whether autodiff
    // differentiates it. pipec's own gradient and optimizer ops (ReluGrad,
    // SGD, ...) are left out.
    DialectRegistry registry;
    pipec::registerAllDialects(registry);
    MLIRContext context(registry);
    context.loadAllAvailableDialects();
    static const llvm::StringSet<> training = {"Gradient", "Momentum", "Adam",
                                               "Adagrad"};
    // pipec's own: Attention is pipe-fuse-attention's fused op (ONNX has
    // it from opset 23, which the importer does not read).
    static const llvm::StringSet<> internal = {"ReduceToShape", "SGD",
                                               "AdamW", "Attention"};
    int total = 0, withGrad = 0;
    std::string rows;
    for (const std::string &name : pipec::supportedOnnxOperators(&context)) {
      StringRef n(name);
      if (n.ends_with("Grad") || internal.contains(n))
        continue;
      auto op = RegisteredOperationName::lookup("onnx." + name, &context);
      // Decomposed at import (GroupNormalization, InstanceNormalization)
      // into differentiable ops.
      bool grad = op ? op->hasInterface<pipec::autodiff::VjpOpInterface>()
                     : true;
      bool train = training.contains(n);
      // Unrolled at import (ImportControlFlow.cpp): the tensor ops they
      // become are differentiated.
      bool unrolled = n == "Loop" || n.starts_with("Sequence") ||
                      n == "SplitToSequence" || n == "ConcatFromSequence";
      ++total;
      withGrad += grad;
      rows += "| " + name + " | " +
              (train ? "ai.onnx.preview.training" : "ai.onnx") + " | " +
              (unrolled ? "yes (unrolled at import into tensor ops)"
               : grad   ? "yes"
               : train  ? "(the training algorithm)"
                        : "none (integer, boolean or constant result)") +
              " |\n";
    }
    llvm::outs() << "# ONNX operators\n\nWritten by `pipe-translate "
                    "--onnx-operator-table` (a test checks that this file is "
                    "its output). Opsets 6-21; what an operator refuses "
                    "(attributes, modes) is an import error naming the node."
                    "\n\n| operator | domain | gradient |\n| --- | --- | --- |\n"
                 << rows << "\n" << total << " operators, " << withGrad
                 << " with a gradient rule; every one has CPU and CUDA kernels.\n";
    return 0;
  }
  TranslateToMLIRRegistration importOnnx(
      "import-onnx", "import an ONNX model (.onnx or .onnxtext)",
      [](llvm::SourceMgr &sourceMgr,
         MLIRContext *context) -> OwningOpRef<Operation *> {
        pipec::OneLineDiagnosticHandler diagnostics(context, "pipe-translate");
        const llvm::MemoryBuffer *buffer =
            sourceMgr.getMemoryBuffer(sourceMgr.getMainFileID());
        pipec::ImportOptions options;
        for (const std::string &entry : inputShapes) {
          SmallVector<StringRef> parts;
          StringRef(entry).split(parts, ';', -1, false);
          for (StringRef part : parts) {
            std::string name;
            std::vector<int64_t> shape;
            if (!pipec::parseInputShapeBinding(part, name, shape)) {
              emitError(UnknownLoc::get(context))
                  << "--input-shape '" << part
                  << "' is malformed; write name=32x784 (a graph input) or "
                     "name=32 (a symbolic dimension), sizes up to 2^31";
              return nullptr;
            }
            options.inputShapes[name] = shape;
          }
        }
        options.lossName = lossName;
        options.frozen.assign(frozenParams.begin(), frozenParams.end());
        OwningOpRef<ModuleOp> module = pipec::importOnnxModel(
            context, buffer->getBuffer(), buffer->getBufferIdentifier(),
            options);
        if (!module)
          return nullptr;
        return OwningOpRef<Operation *>(module.release());
      },
      [](DialectRegistry &registry) {
        pipec::registerAllDialects(registry);
      });
  pipec::hideOtherOptions({&importCat});
  // The input file, named as every other error is (mlir-translate's own
  // message has no tool name).
  for (int i = 1; i < argc; ++i) {
    StringRef a(argv[i]);
    if (a == "-o" || a == "--input-shape" || a == "-input-shape" || a == "--loss" ||
        a == "-loss" || a == "--frozen" || a == "-frozen") {
      ++i; // its value
      continue;
    }
    if (a.starts_with("-") || a.empty())
      continue;
    if (!llvm::sys::fs::exists(a) || llvm::sys::fs::is_directory(a)) {
      llvm::errs() << "pipe-translate: error: " << a << ": "
                   << (llvm::sys::fs::exists(a) ? "is a directory" : "no such file") << "\n";
      return 1;
    }
  }
  return failed(mlirTranslateMain(argc, argv, "pipec translation driver"));
}
