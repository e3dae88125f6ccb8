//===- PlanVersion.h - the plan.json version ---------------------*- C++ -*-===//
//
// Shared by the writer (lib/Target/Plan.cpp) and pipe-run, which links no
// MLIR. Bumped when a field of plan.json changes meaning or goes away
// (docs/plan-json.md).
//
//===----------------------------------------------------------------------===//
#ifndef PIPEC_TARGET_PLANVERSION_H
#define PIPEC_TARGET_PLANVERSION_H

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/xxhash.h"

#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>

namespace mlir::pipec {
inline constexpr int64_t kPlanVersion = 1;

/// A device executable's hash as plan.json's "executable_hashes" records it
/// (XXH3, 16 hex digits); nullopt where the file cannot be read.
inline std::optional<std::string> executableHash(llvm::StringRef path) {
  auto buffer = llvm::MemoryBuffer::getFile(path, /*IsText=*/false,
                                            /*RequiresNullTerminator=*/false);
  if (!buffer)
    return std::nullopt;
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx",
                (unsigned long long)llvm::xxh3_64bits((*buffer)->getBuffer()));
  return std::string(hex);
}
} // namespace mlir::pipec

#endif
