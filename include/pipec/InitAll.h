//===- InitAll.h - register pipec's dialects and passes --------*- C++ -*-===//
#ifndef PIPEC_INITALL_H
#define PIPEC_INITALL_H

namespace mlir {
class DialectRegistry;
namespace pipec {
/// The onnx and pipe dialects plus the upstream ones pipec's IR uses (func,
/// arith, tensor, ...).
void registerAllDialects(DialectRegistry &registry);
/// Every pipec pass and pass pipeline, plus the upstream passes tools need.
void registerAllPasses();
} // namespace pipec
} // namespace mlir

#endif
