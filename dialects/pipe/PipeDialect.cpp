//===- PipeDialect.cpp -----------------------------------------------------===//
#include "dialects/pipe/PipeDialect.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace mlir::pipec::pipe;

#include "dialects/pipe/PipeDialect.cpp.inc"
#include "dialects/pipe/PipeEnums.cpp.inc"

//===----------------------------------------------------------------------===//
// Schedule names
//===----------------------------------------------------------------------===//

// Schedule names such as "1f1b" are not keywords, so they are always printed
// as strings; a keyword is accepted on input where the name is one.
namespace mlir::pipec::pipe {
ParseResult parseScheduleName(AsmParser &parser, ScheduleKind &kind) {
  SMLoc loc = parser.getCurrentLocation();
  std::string name;
  if (parser.parseKeywordOrString(&name))
    return failure();
  std::optional<ScheduleKind> parsed = symbolizeScheduleKind(name);
  if (!parsed)
    return parser.emitError(loc) << "unknown schedule '" << name << "'";
  kind = *parsed;
  return success();
}

void printScheduleName(AsmPrinter &printer, ScheduleKind kind) {
  printer.printString(stringifyScheduleKind(kind));
}
} // namespace mlir::pipec::pipe

#define GET_TYPEDEF_CLASSES
#include "dialects/pipe/PipeTypes.cpp.inc"

#define GET_ATTRDEF_CLASSES
#include "dialects/pipe/PipeAttrs.cpp.inc"

void PipeDialect::initialize() {
  addTypes<
#define GET_TYPEDEF_LIST
#include "dialects/pipe/PipeTypes.cpp.inc"
      >();
  addAttributes<
#define GET_ATTRDEF_LIST
#include "dialects/pipe/PipeAttrs.cpp.inc"
      >();
  addOperations<
#define GET_OP_LIST
#include "dialects/pipe/PipeOps.cpp.inc"
      >();
}
