//===- Version.h - what --version prints --------------------------*- C++ -*-===//
#ifndef PIPEC_SUPPORT_VERSION_H
#define PIPEC_SUPPORT_VERSION_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/CommandLine.h"

namespace mlir::pipec {
/// "pipec 0.4.0 (git 1234abcd5678), LLVM 22.1.8".
std::string versionString();
/// Makes `--version` of the tool print `<tool>: ` + versionString().
void setVersionPrinter(llvm::StringRef tool);
/// Hides (cl::Hidden: listed by --help-hidden) every option outside `shown`
/// and --help/--version, so that --help lists the tool's own.
void hideOtherOptions(llvm::ArrayRef<const llvm::cl::OptionCategory *> shown);
} // namespace mlir::pipec

#endif
