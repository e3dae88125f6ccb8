//===- PipeDialect.h - the pipe dialect -------------------------*- C++ -*-===//
#ifndef PIPEC_DIALECTS_PIPE_PIPEDIALECT_H
#define PIPEC_DIALECTS_PIPE_PIPEDIALECT_H

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "dialects/pipe/PipeDialect.h.inc"

#define GET_OP_CLASSES
#include "dialects/pipe/PipeOps.h.inc"

#endif
