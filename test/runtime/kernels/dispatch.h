//===- dispatch.h - test-side lowering of one ONNX node to pipert ---------===//
//
// Plays the compiler's part for the conformance tests: resolves attributes
// and output shapes of one ONNX node and calls the pipert kernel for it.
//
//===----------------------------------------------------------------------===//
#ifndef PIPERT_TEST_KERNELS_DISPATCH_H
#define PIPERT_TEST_KERNELS_DISPATCH_H

#include "onnx_testdata.h"
#include "pipert/pipert_kernels.h"

namespace pipert_test {

struct Outcome {
  enum Kind { Ran, Skipped, NotOurs } kind = NotOurs;
  std::string why;             // for Skipped
  std::vector<Tensor> outputs; // for Ran, in node output order
};

// Runs `node` (of opset `opset` in its domain) on `inputs` (by name).
Outcome run_node(pipert_context *ctx, const onnx::NodeProto &node, int64_t opset,
                 const std::map<std::string, Tensor> &inputs);

// True for ops of ai.onnx.preview.training the dispatcher lowers.
bool is_optimizer_op(const onnx::NodeProto &node);

} // namespace pipert_test

#endif
