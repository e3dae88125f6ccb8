//===- PipeDialect.cpp -----------------------------------------------------===//
#include "dialects/pipe/PipeDialect.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"

using namespace mlir;
using namespace mlir::pipec::pipe;

#include "dialects/pipe/PipeDialect.cpp.inc"

void PipeDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "dialects/pipe/PipeOps.cpp.inc"
      >();
}

#define GET_OP_CLASSES
#include "dialects/pipe/PipeOps.cpp.inc"
