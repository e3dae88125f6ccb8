//===- PartitionPasses.h - pipeline partitioning passes ---------*- C++ -*-===//
#ifndef PIPEC_TRANSFORMS_PARTITIONPASSES_H
#define PIPEC_TRANSFORMS_PARTITIONPASSES_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

namespace mlir::pipec {

#define GEN_PASS_DECL
#include "pipec/Transforms/PartitionPasses.h.inc"

#define GEN_PASS_REGISTRATION
#include "pipec/Transforms/PartitionPasses.h.inc"

} // namespace mlir::pipec

#endif // PIPEC_TRANSFORMS_PARTITIONPASSES_H
