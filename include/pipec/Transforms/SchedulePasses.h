//===- SchedulePasses.h - pipeline scheduling passes ------------*- C++ -*-===//
#ifndef PIPEC_TRANSFORMS_SCHEDULEPASSES_H
#define PIPEC_TRANSFORMS_SCHEDULEPASSES_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

#include "dialects/pipe/PipeDialect.h"

namespace mlir::pipec {

#define GEN_PASS_DECL
#include "pipec/Transforms/SchedulePasses.h.inc"

#define GEN_PASS_REGISTRATION
#include "pipec/Transforms/SchedulePasses.h.inc"

} // namespace mlir::pipec

#endif // PIPEC_TRANSFORMS_SCHEDULEPASSES_H
