//===- Executable.h - LLVM dialect → object → executable -------*- C++ -*-===//
#ifndef PIPEC_TARGET_EXECUTABLE_H
#define PIPEC_TARGET_EXECUTABLE_H

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Support/LLVM.h"

#include <string>

namespace mlir::pipec {

struct ProgramOptions {
  /// The `pipe.program` dictionary of the step function (see
  /// pipe-lower-to-runtime), read before the LLVM conversion.
  DictionaryAttr program;
  /// Written into pipert_program_info.
  int64_t batch = 0;
  std::string modelFile; // relative to the executable's directory
  std::string optimizer = "none";
  /// Pipeline parallelism: this executable's device (= MPI rank) among
  /// `devices`; 1 device runs without a transport.
  int64_t device = 0;
  int64_t devices = 1;
  /// Several pipelines (pipeline i's stage s is device i * devices/pipelines
  /// + s): the runtime feeds each its own mini-batches and averages the
  /// logged loss.
  int64_t pipelines = 1;
};

/// Translates a module in the LLVM dialect (holding @pipe_step) to LLVM IR,
/// adds the constant pipert_program_info (names, shapes, initial values) and
/// `main` calling pipert_train_main, and writes an object file for the host.
LogicalResult emitProgramObject(ModuleOp module, const ProgramOptions &options,
                                StringRef objectPath, std::string &error);

/// Links an object into an executable with the system's C++ driver against
/// libpipert_<target> (cpu or cuda), with an rpath to the runtime's
/// directory. The directory is PIPEC_RUNTIME_DIR from the environment, else
/// the build tree's lib/.
LogicalResult linkProgram(StringRef objectPath, StringRef executablePath,
                          StringRef target, std::string &error);

} // namespace mlir::pipec

#endif
