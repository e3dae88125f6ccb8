//===- PipeDialect.cpp -----------------------------------------------------===//
#include "dialects/pipe/PipeDialect.h"
#include "dialects/pipe/PipeAttrNames.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/StringSwitch.h"
#include "llvm/ADT/TypeSwitch.h"

#include <functional>

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

//===----------------------------------------------------------------------===//
// Discardable attributes
//===----------------------------------------------------------------------===//
//
// What the pipe.* attributes mean, where passes put them:
//   ops          pipe.stage (the stage an op runs on, pipe-assign-stages),
//                pipe.cost (the cost model's numbers, annotate-costs),
//                pipe.clip (the global-norm clipping ops,
//                pipe-add-optimizer)
//   module/step  pipe.microbatches, pipe.batch_size, pipe.loss_scale and
//                pipe.loss_combine (pipe-microbatch), pipe.optimizer
//                (pipe-add-optimizer), pipe.transfers (pipe-insert-transfers),
//                pipe.num_stages, pipe.stage_costs (pipe-assign-stages),
//                pipe.producer, pipe.opset (the importer),
//                pipe.classification_losses (a device's module, pipe-compile)
//   programs     pipe.peak_in_flight (pipe-schedule)
//   lowered      pipe.device, pipe.program, pipe.peak_bytes
//   arguments    pipe.input, pipe.param, pipe.trainable, pipe.init,
//                pipe.state, pipe.step, pipe.name, pipe.grad
//   results      pipe.loss, pipe.output (the graph output's name), pipe.name,
//                pipe.grad, pipe.update, pipe.param, pipe.state,
//                pipe.result_buffer (a callable piece of a lowered program:
//                the caller's buffer the result is written to),
//                pipe.metric (an evaluation's count: its output slot)
// Attributes with other pipe.* names are left alone.

namespace {
/// Checks the kind (and range) of a known pipe.* attribute; `where` names
/// the holder in the message.
LogicalResult verifyPipeAttr(Operation *op, NamedAttribute attr,
                             const llvm::Twine &where, Type valueType = {}) {
  StringRef name = attr.getName().getValue();
  Attribute value = attr.getValue();
  auto fail = [&](StringRef what) -> LogicalResult {
    return op->emitError() << where << " has " << name << " = " << value
                           << ", but it must be " << what;
  };
  auto integer = [&](int64_t min, StringRef what) -> LogicalResult {
    auto i = dyn_cast<IntegerAttr>(value);
    if (!i || !i.getType().isSignlessInteger() ||
        i.getValue().getSExtValue() < min)
      return fail(what);
    return success();
  };
  auto string = [&]() -> LogicalResult {
    auto s = dyn_cast<StringAttr>(value);
    if (!s || s.getValue().empty())
      return fail("a non-empty string");
    return success();
  };
  auto unit = [&]() -> LogicalResult {
    return isa<UnitAttr>(value) ? success() : fail("a unit attribute");
  };
  // A string that is one of two words.
  auto oneOf = [&](StringRef a, StringRef b) -> LogicalResult {
    auto s = dyn_cast<StringAttr>(value);
    return s && (s.getValue() == a || s.getValue() == b)
               ? success()
               : fail(("\"" + a + "\" or \"" + b + "\"").str());
  };
  return llvm::StringSwitch<std::function<LogicalResult()>>(name)
      .Case(attrs::kStage, [&] { return integer(0, "a stage index >= 0"); })
      .Case(attrs::kMicrobatches,
            [&] { return integer(1, "a micro-batch count >= 1"); })
      .Case(attrs::kBatchSize, [&] { return integer(1, "a batch size >= 1"); })
      .Case(attrs::kNumStages, [&] { return integer(1, "a stage count >= 1"); })
      .Case(attrs::kPeakInFlight,
            [&] { return integer(0, "a micro-batch count >= 0"); })
      .Case(attrs::kDevice, [&] { return integer(0, "a device index >= 0"); })
      .Case(attrs::kPeakBytes, [&] { return integer(0, "a byte count >= 0"); })
      .Case(attrs::kResultBuffer,
            [&] { return integer(0, "an output buffer index >= 0"); })
      .Case(attrs::kOpset, [&] { return integer(1, "an opset version"); })
      .Case(attrs::kClassificationLosses,
            [&] { return integer(0, "a count of loss ops >= 0"); })
      .Case(attrs::kMetric,
            [&] { return integer(1, "an output slot >= 1 (after the loss)"); })
      .Case(attrs::kLossScale,
            [&]() -> LogicalResult {
              auto f = dyn_cast<FloatAttr>(value);
              return f && f.getValueAsDouble() > 0
                         ? success()
                         : fail("a positive float");
            })
      .Case(attrs::kLossMean, [&] { return oneOf("step", "micro-batch"); })
      .Case(attrs::kLossCombine, [&] { return oneOf("mean", "sum"); })
      .Cases({attrs::kOptimizer, attrs::kProgram, attrs::kCost},
             [&]() -> LogicalResult {
               return isa<DictionaryAttr>(value) ? success()
                                                 : fail("a dictionary");
             })
      .Case(attrs::kTransfers,
            [&]() -> LogicalResult {
              return isa<ArrayAttr>(value) ? success() : fail("an array");
            })
      .Cases({attrs::kName, attrs::kParam, attrs::kInput, attrs::kGrad,
              attrs::kState, attrs::kProducer, attrs::kOutput, attrs::kStepInput},
             string)
      .Cases({attrs::kLoss, attrs::kTrainable, attrs::kStep, attrs::kRecompute,
              attrs::kPackNext, attrs::kWholeStep, attrs::kClip},
             unit)
      .Case(attrs::kUpdate,
            [&]() -> LogicalResult {
              if (auto s = dyn_cast<StringAttr>(value); s && !s.empty())
                return success();
              if (auto i = dyn_cast<IntegerAttr>(value);
                  i && i.getValue().getSExtValue() >= 0)
                return success();
              return fail("the name or the argument index of what it updates");
            })
      .Case(attrs::kInit,
            [&]() -> LogicalResult {
              auto elements = dyn_cast<ElementsAttr>(value);
              if (!elements)
                return fail("the initial value (elements)");
              if (valueType && elements.getType() != valueType)
                return op->emitError()
                       << where << " has pipe.init of type "
                       << elements.getType() << ", but the value is "
                       << valueType;
              return success();
            })
      .Default([]() -> LogicalResult { return success(); })();
}
} // namespace

LogicalResult PipeDialect::verifyOperationAttribute(Operation *op,
                                                    NamedAttribute attr) {
  return verifyPipeAttr(op, attr, "'" + op->getName().getStringRef() + "'");
}

LogicalResult PipeDialect::verifyRegionArgAttribute(Operation *op,
                                                    unsigned region,
                                                    unsigned index,
                                                    NamedAttribute attr) {
  Type type;
  if (region < op->getNumRegions() && !op->getRegion(region).empty() &&
      index < op->getRegion(region).getNumArguments())
    type = op->getRegion(region).getArgument(index).getType();
  return verifyPipeAttr(op, attr, "argument " + llvm::Twine(index), type);
}

LogicalResult PipeDialect::verifyRegionResultAttribute(Operation *op,
                                                       unsigned region,
                                                       unsigned index,
                                                       NamedAttribute attr) {
  return verifyPipeAttr(op, attr, "result " + llvm::Twine(index));
}
