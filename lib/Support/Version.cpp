//===- Version.cpp - what --version prints --------------------------------===//
#include "pipec/Support/Version.h"

#include "pipec/Support/GitCommit.inc"

#include "llvm/Config/llvm-config.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/raw_ostream.h"

#include <string>

std::string mlir::pipec::versionString() {
  return std::string("pipec ") + PIPEC_VERSION + " (git " + PIPEC_GIT_COMMIT +
         "), LLVM " + LLVM_VERSION_STRING;
}

void mlir::pipec::setVersionPrinter(llvm::StringRef tool) {
  static std::string name;
  name = tool.str();
  llvm::cl::SetVersionPrinter([](llvm::raw_ostream &os) {
    os << name << ": " << versionString() << "\n";
  });
}

void mlir::pipec::hideOtherOptions(
    llvm::ArrayRef<const llvm::cl::OptionCategory *> shown) {
  for (auto &entry : llvm::cl::getRegisteredOptions()) {
    llvm::cl::Option *option = entry.second;
    bool ours = llvm::any_of(option->Categories, [&](auto *c) {
      return llvm::is_contained(shown, c);
    });
    llvm::StringRef name = entry.first;
    bool generic = name == "help" || name == "help-list" || name == "version";
    if (!ours && !generic && option->getOptionHiddenFlag() == llvm::cl::NotHidden)
      option->setHiddenFlag(llvm::cl::Hidden);
  }
}
