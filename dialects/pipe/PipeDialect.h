//===- PipeDialect.h - the pipe dialect -------------------------*- C++ -*-===//
#ifndef PIPEC_DIALECTS_PIPE_PIPEDIALECT_H
#define PIPEC_DIALECTS_PIPE_PIPEDIALECT_H

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/CallInterfaces.h"
#include "mlir/Interfaces/ControlFlowInterfaces.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "dialects/pipe/PipeDialect.h.inc"
#include "dialects/pipe/PipeEnums.h.inc"

namespace mlir::pipec::pipe {
/// A schedule name, always printed as a string ("1f1b" is not a keyword);
/// a keyword is accepted on input.
ParseResult parseScheduleName(AsmParser &parser, ScheduleKind &kind);
void printScheduleName(AsmPrinter &printer, ScheduleKind kind);
} // namespace mlir::pipec::pipe

#define GET_TYPEDEF_CLASSES
#include "dialects/pipe/PipeTypes.h.inc"

#define GET_ATTRDEF_CLASSES
#include "dialects/pipe/PipeAttrs.h.inc"

#define GET_OP_CLASSES
#include "dialects/pipe/PipeOps.h.inc"

#endif
