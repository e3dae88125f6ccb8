//===- Plan.h - OUT/plan.json, written by pipe-compile -----------*- C++ -*-===//
//
// The one writer of plan.json (schema: docs/plan-json.md). pipe-compile
// gathers what the compiled programs say (their lowered metadata, the
// schedule, the stage computations) through these functions; pipe-run reads
// the file with a JSON parser.
//
//===----------------------------------------------------------------------===//
#ifndef PIPEC_TARGET_PLAN_H
#define PIPEC_TARGET_PLAN_H

#include "dialects/pipe/PipeDialect.h"
#include "pipec/Target/PlanVersion.h"

#include "mlir/IR/BuiltinOps.h"
#include "llvm/Support/JSON.h"

#include <string>

namespace mlir::pipec {

/// What the training data must hold, from the imported @forward: one entry
/// per graph input {name, dtype (pipert/ONNX code), sample_shape (the dims
/// after the batch axis), classes (for the labels of a SoftmaxCrossEntropyLoss
/// or NegativeLogLikelihoodLoss: the score's class count, else null),
/// ignore_index (or null)}. pipe-run checks a data file against it before it
/// launches anything.
llvm::json::Array describeData(ModuleOp module);

/// The buffers a lowered step declares (its pipe.program metadata):
/// "inputs", "parameters", "state" (each a list of {name, shape, elements,
/// dtype, kind}) and "memory" {parameter_bytes, optimizer_state_bytes,
/// input_bytes, peak_activation_bytes, total_bytes}.
llvm::json::Object describeBuffers(DictionaryAttr programInfo);

/// What the stage computations of `module` are: "node_stages" (ONNX node
/// name → stage), "stage_costs" [{stage, flops_per_microbatch}] and
/// "total_flops_per_microbatch", FLOPs from the cost model.
llvm::json::Object describeStages(ModuleOp module);

/// One device of a pipeline: its program as a readable list (loops
/// expanded), its buffers, and the transfers it sends (appended to
/// `transfers`).
llvm::json::Object describeDevice(pipe::ProgramOp program,
                                  DictionaryAttr programInfo,
                                  llvm::StringRef executable,
                                  llvm::json::Array &transfers);

/// Writes `plan` with its "version" to `path`.
LogicalResult writePlan(llvm::StringRef path, llvm::json::Object plan,
                        std::string &error);

} // namespace mlir::pipec

#endif
