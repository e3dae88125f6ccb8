//===- onnx_conformance_test.cpp - pipert kernels vs ONNX node tests ------===//
//
// Runs every single-node case of Debian's libonnx-testdata whose op pipert
// implements through the test-side dispatcher and compares with ONNX's own
// tolerance (rtol 1e-3, atol 1e-7). Cases with attributes or dtypes pipert
// does not support are skipped and counted, with the reason printed.
//
//===----------------------------------------------------------------------===//
#include "dispatch.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <map>

using namespace pipert_test;

namespace {

// ONNX's tolerance; no case needs its own.
constexpr double kRtol = 1e-3, kAtol = 1e-7;

// Known defects of the ONNX 1.12 test data, corrected on a copy of the node
// and printed. test_adam_multiple: onnx/backend/test/case/node/adam.py
// computes the expected values with epsilon = 1e-2 but never sets that
// attribute on the node, so the node's default (1e-6) disagrees with them.
onnx::NodeProto corrected_node(const std::string &name, const onnx::NodeProto &node) {
  onnx::NodeProto copy = node;
  if (name == "test_adam_multiple") {
    auto *a = copy.add_attribute();
    a->set_name("epsilon");
    a->set_type(onnx::AttributeProto::FLOAT);
    a->set_f(1e-2f);
    std::printf("[ NOTE ] %s: epsilon=1e-2 added, as the generator's reference uses it\n",
                name.c_str());
  }
  return copy;
}

struct Counts {
  int attempted = 0, passed = 0, skipped = 0;
  std::map<std::string, int> per_op; // attempted cases by op type
};

Counts run_cases(bool optimizers) {
  Counts c;
  pipert_context *ctx = pipert_context_create(1, 42);
  for (const std::string &name : list_cases()) {
    NodeCase nc;
    std::string why;
    if (!load_case(name, nc, why)) {
      // Cases with several nodes or non-tensor values are not single-op
      // kernel cases; only report those whose op we would otherwise run.
      continue;
    }
    const onnx::NodeProto node = corrected_node(name, nc.model.graph().node(0));
    if (is_optimizer_op(node) != optimizers)
      continue;
    bool counted = false, ok = true;
    std::string failure;
    for (size_t s = 0; s < nc.sets.size(); ++s) {
      Outcome o = run_node(ctx, node, nc.opset, nc.sets[s].inputs);
      if (o.kind == Outcome::NotOurs)
        break;
      if (o.kind == Outcome::Skipped) {
        std::printf("[ SKIP ] %s (%s): %s\n", name.c_str(), node.op_type().c_str(), o.why.c_str());
        ++c.skipped;
        counted = false;
        ok = false;
        break;
      }
      counted = true;
      const auto &expected = nc.sets[s].outputs;
      if (o.outputs.size() != expected.size()) {
        ok = false;
        failure = "output count " + std::to_string(o.outputs.size()) + " vs " +
                  std::to_string(expected.size());
        break;
      }
      for (size_t k = 0; k < expected.size(); ++k) {
        std::string diff = compare(o.outputs[k], expected[k], kRtol, kAtol);
        if (!diff.empty()) {
          ok = false;
          failure = "data set " + std::to_string(s) + ", output " + std::to_string(k) + ": " + diff;
          break;
        }
      }
      if (!ok)
        break;
    }
    if (!counted)
      continue;
    ++c.attempted;
    ++c.per_op[node.op_type()];
    if (ok) {
      ++c.passed;
    } else {
      ADD_FAILURE() << name << " (" << node.op_type() << "): " << failure;
    }
  }
  pipert_context_destroy(ctx);
  std::printf("cases by op:");
  for (const auto &[op, count] : c.per_op)
    std::printf(" %s %d", op.c_str(), count);
  std::printf("\n");
  std::printf("attempted %d, passed %d, skipped %d\n", c.attempted, c.passed, c.skipped);
  return c;
}

} // namespace

TEST(OnnxConformance, ForwardKernels) {
  Counts c = run_cases(false);
  EXPECT_EQ(c.attempted, c.passed);
  // Guard against the data going missing or the dispatcher matching nothing.
  EXPECT_GE(c.attempted, 200);
}

TEST(OnnxConformance, Optimizers) {
  Counts c = run_cases(true);
  EXPECT_EQ(c.attempted, c.passed);
  // test_momentum, _multiple, test_nesterov_momentum, test_adam, _multiple,
  // test_adagrad, _multiple.
  EXPECT_EQ(c.attempted, 7);
}
