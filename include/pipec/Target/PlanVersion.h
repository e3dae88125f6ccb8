//===- PlanVersion.h - the plan.json version ---------------------*- C++ -*-===//
//
// Shared by the writer (lib/Target/Plan.cpp) and pipe-run, which links no
// MLIR. Bumped when a field of plan.json changes meaning or goes away
// (docs/plan-json.md).
//
//===----------------------------------------------------------------------===//
#ifndef PIPEC_TARGET_PLANVERSION_H
#define PIPEC_TARGET_PLANVERSION_H

#include <cstdint>

namespace mlir::pipec {
inline constexpr int64_t kPlanVersion = 1;
} // namespace mlir::pipec

#endif
