//===- pipe-opt.cpp - mlir-opt with the pipec dialects and passes ---------===//
#include "pipec/InitAll.h"
#include "pipec/Support/Version.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"

int main(int argc, char **argv) {
  mlir::DialectRegistry registry;
  mlir::pipec::registerAllDialects(registry);
  mlir::pipec::registerAllPasses();
  mlir::pipec::setVersionPrinter("pipe-opt");
  // LLVM's own options (code generation, targets) behind --help-hidden; the
  // passes and mlir-opt's options, registered below, stay.
  mlir::pipec::hideOtherOptions({});
  return mlir::asMainReturnCode(
      mlir::MlirOptMain(argc, argv, "pipec optimizer driver\n", registry));
}
