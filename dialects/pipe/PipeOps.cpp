//===- PipeOps.cpp - pipe dialect ops: syntax and verifiers ----------------===//
//
// Verifiers check what one op can see: its own attributes, its program (device,
// stages, micro-batch count), the weight buffer it names and, through
// verifySymbolUses, the stage computation it calls. Whole-program properties
// (send/recv orders match, versions consistent over a step) belong to the
// verify pass.
//
//===----------------------------------------------------------------------===//
#include "dialects/pipe/PipeDialect.h"
#include "dialects/pipe/PipeAttrNames.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/Interfaces/FunctionImplementation.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallPtrSet.h"
#include "llvm/ADT/SmallSet.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/ADT/TypeSwitch.h"

#include <cmath>

using namespace mlir;
using namespace mlir::pipec::pipe;

//===----------------------------------------------------------------------===//
// Helpers
//===----------------------------------------------------------------------===//

static std::string typeList(TypeRange types) {
  std::string s;
  llvm::raw_string_ostream os(s);
  os << '(';
  llvm::interleaveComma(types, os);
  os << ')';
  return s;
}

static std::string intList(ArrayRef<int64_t> values) {
  std::string s;
  llvm::raw_string_ostream os(s);
  os << '[';
  llvm::interleaveComma(values, os);
  os << ']';
  return s;
}

/// The micro-batch index must lie in [0, microbatches) of the program: a
/// constant, or `%k + offset` with %k the index of the enclosing loop, for
/// every %k the loop runs.
static LogicalResult verifyMicroBatch(Operation *op, int64_t mb,
                                      Value base = Value()) {
  auto program = op->getParentOfType<ProgramOp>();
  if (!program)
    return success(); // HasParent reports it.
  int64_t count = program.getMicrobatches();
  int64_t lo = mb, hi = mb;
  // A no-flush program names micro-batches of earlier steps still in flight
  // with negative indices.
  bool noFlush = program.isNoFlush();
  if (base) {
    auto loop = dyn_cast<LoopOp>(op->getParentOp());
    if (!loop || base != loop.getIndex())
      return op->emitOpError()
             << "names its micro-batch relative to " << base
             << ", which is not the index of its enclosing pipe.loop";
    if (loop.getTripCount() < 1)
      return success(); // The loop reports it.
    lo = loop.getLower() + mb;
    hi = loop.getUpper() - 1 + mb;
  }
  if ((lo < 0 && !noFlush) || hi >= count) {
    InFlightDiagnostic diag = op->emitOpError();
    diag << "micro-batch " << (lo < 0 && !noFlush ? lo : hi);
    if (base)
      diag << " (of " << lo << ".." << hi << " over the loop)";
    diag << " is out of range " << (noFlush ? "(-inf" : "[0") << ", " << count
         << ") of program @" << program.getSymName();
    return diag;
  }
  return success();
}

/// A point-to-point peer: another device, with a non-negative index.
static LogicalResult verifyPeer(Operation *op, int64_t peer) {
  if (peer < 0)
    return op->emitOpError() << "peer device " << peer << " is negative";
  auto program = op->getParentOfType<ProgramOp>();
  if (program && peer == program.getDevice())
    return op->emitOpError() << "peer device " << peer
                             << " is the program's own device";
  return success();
}

/// A collective group: at least two distinct non-negative devices, this one
/// among them.
/// A device group: at least `minSize` distinct non-negative devices, the
/// program's own among them.
static LogicalResult verifyGroup(Operation *op, ArrayRef<int64_t> group,
                                 size_t minSize = 2) {
  if (group.size() < minSize)
    return op->emitOpError() << "group " << intList(group) << " needs at least "
                             << (minSize == 1 ? "one device" : "two devices");
  llvm::SmallSet<int64_t, 8> seen;
  for (int64_t device : group) {
    if (device < 0)
      return op->emitOpError() << "group has negative device " << device;
    if (!seen.insert(device).second)
      return op->emitOpError() << "group lists device " << device << " twice";
  }
  auto program = op->getParentOfType<ProgramOp>();
  if (program && !seen.contains(program.getDevice()))
    return op->emitOpError() << "group " << intList(group)
                             << " does not contain the program's device "
                             << program.getDevice();
  return success();
}

/// The weight buffer a `!pipe.weights` handle comes from.
static FailureOr<WeightBufferOp> getBuffer(Operation *op, Value weights) {
  auto buffer = weights.getDefiningOp<WeightBufferOp>();
  if (!buffer) {
    op->emitOpError() << "weights must be defined by a pipe.weight_buffer";
    return failure();
  }
  return buffer;
}

static LogicalResult verifySlot(Operation *op, WeightBufferOp buffer,
                                int64_t slot, StringRef what) {
  if (slot < 0 || slot >= buffer.getVersions())
    return op->emitOpError()
           << what << " " << slot
           << " is out of range: the weight buffer of stage "
           << buffer.getStage() << " keeps " << buffer.getVersions()
           << (buffer.getVersions() == 1 ? " version" : " versions");
  return success();
}

/// Two distinct, valid slots of one buffer.
static LogicalResult verifySlotPair(Operation *op, Value weights, int64_t from,
                                    StringRef fromName, int64_t to,
                                    StringRef toName) {
  FailureOr<WeightBufferOp> buffer = getBuffer(op, weights);
  if (failed(buffer) || failed(verifySlot(op, *buffer, from, fromName)) ||
      failed(verifySlot(op, *buffer, to, toName)))
    return failure();
  if (from == to)
    return op->emitOpError() << fromName << " and " << toName
                             << " are the same slot " << from;
  return success();
}

//===----------------------------------------------------------------------===//
// Custom directives
//===----------------------------------------------------------------------===//

// Beside the attribute's own directive, so that the ops' code finds both.
namespace mlir::pipec::pipe {
static ParseResult parseScheduleName(OpAsmParser &parser,
                                     ScheduleKindAttr &attr) {
  ScheduleKind kind;
  if (parseScheduleName(static_cast<AsmParser &>(parser), kind))
    return failure();
  attr = ScheduleKindAttr::get(parser.getContext(), kind);
  return success();
}

static void printScheduleName(OpAsmPrinter &printer, Operation *,
                              ScheduleKindAttr attr) {
  printScheduleName(static_cast<AsmPrinter &>(printer), attr.getValue());
}
} // namespace mlir::pipec::pipe

/// An optional ` + N` / ` - N` after a base (loop index, clock): its value,
/// 0 when absent.
static ParseResult parseOptionalSignedOffset(OpAsmParser &parser,
                                             int64_t &value) {
  value = 0;
  int64_t sign = 0;
  if (succeeded(parser.parseOptionalPlus()))
    sign = 1;
  else if (succeeded(parser.parseOptionalMinus()))
    sign = -1;
  if (!sign)
    return success();
  if (parser.parseInteger(value))
    return failure();
  value *= sign;
  return success();
}

/// ` + N`, ` - N` or nothing, the printed form of the above.
static void printSignedOffset(OpAsmPrinter &printer, int64_t value) {
  if (value > 0)
    printer << " + " << value;
  else if (value < 0)
    printer << " - " << -value;
}

/// What follows the `mb` keyword: `3`, `%k`, `%k + 2`, `%k - 1`.
static ParseResult
parseMicroBatchIndex(OpAsmParser &parser,
                     std::optional<OpAsmParser::UnresolvedOperand> &base,
                     IntegerAttr &offset) {
  OpAsmParser::UnresolvedOperand operand;
  OptionalParseResult hasBase = parser.parseOptionalOperand(operand);
  int64_t value = 0;
  if (hasBase.has_value()) {
    if (failed(*hasBase))
      return failure();
    base = operand;
    if (parseOptionalSignedOffset(parser, value))
      return failure();
  } else if (parser.parseInteger(value)) {
    return failure();
  }
  offset = parser.getBuilder().getI64IntegerAttr(value);
  return success();
}

/// `mb 3`, `mb %k`, `mb %k + 2`, `mb %k - 1`: a micro-batch index, constant
/// or relative to a loop index.
static ParseResult
parseMicroBatch(OpAsmParser &parser,
                std::optional<OpAsmParser::UnresolvedOperand> &base,
                IntegerAttr &offset) {
  if (parser.parseKeyword("mb"))
    return failure();
  return parseMicroBatchIndex(parser, base, offset);
}

/// An optional ` mb %k - 1` (update, zero_grad of a no-flush program).
static ParseResult
parseOptMicroBatch(OpAsmParser &parser,
                   std::optional<OpAsmParser::UnresolvedOperand> &base,
                   IntegerAttr &offset) {
  if (failed(parser.parseOptionalKeyword("mb")))
    return success();
  return parseMicroBatchIndex(parser, base, offset);
}

/// A weight version: `0` (a slot), `u`, `u - 2`, `t - 1`.
static ParseResult parseVersion(OpAsmParser &parser, VersionClockAttr &clock,
                                IntegerAttr &version) {
  MLIRContext *ctx = parser.getContext();
  int64_t value = 0;
  VersionClock kind = VersionClock::Slot;
  if (succeeded(parser.parseOptionalKeyword("u")))
    kind = VersionClock::MicroBatch;
  else if (succeeded(parser.parseOptionalKeyword("t")))
    kind = VersionClock::Step;
  if (kind == VersionClock::Slot ? parser.parseInteger(value)
                                 : parseOptionalSignedOffset(parser, value))
    return failure();
  if (kind != VersionClock::Slot)
    clock = VersionClockAttr::get(ctx, kind);
  version = parser.getBuilder().getI64IntegerAttr(value);
  return success();
}

static void printVersion(OpAsmPrinter &printer, Operation *,
                         VersionClockAttr clock, IntegerAttr version) {
  int64_t value = version ? version.getValue().getSExtValue() : 0;
  VersionClock kind = clock ? clock.getValue() : VersionClock::Slot;
  if (kind == VersionClock::Slot) {
    printer << value;
    return;
  }
  printer << (kind == VersionClock::MicroBatch ? "u" : "t");
  printSignedOffset(printer, value);
}

/// An optional `[u - 1]` after an update's weights.
static ParseResult parseOptVersion(OpAsmParser &parser, VersionClockAttr &clock,
                                   IntegerAttr &version) {
  if (failed(parser.parseOptionalLSquare()))
    return success();
  if (parseVersion(parser, clock, version) || parser.parseRSquare())
    return failure();
  return success();
}

static void printOptVersion(OpAsmPrinter &printer, Operation *op,
                            VersionClockAttr clock, IntegerAttr version) {
  if (!version)
    return;
  printer << "[";
  printVersion(printer, op, clock, version);
  printer << "]";
}

static void printMicroBatch(OpAsmPrinter &printer, Operation *, Value base,
                            IntegerAttr offset) {
  int64_t value = offset.getValue().getSExtValue();
  printer << "mb ";
  if (!base) {
    printer << value;
    return;
  }
  printer << base;
  printSignedOffset(printer, value);
}

static void printOptMicroBatch(OpAsmPrinter &printer, Operation *op, Value base,
                               IntegerAttr offset) {
  if (offset)
    printMicroBatch(printer, op, base, offset);
}

/// `("fc1.weight": tensor<4x8xf32>, ...)`
static ParseResult parseParamList(OpAsmParser &parser, ArrayAttr &names,
                                  ArrayAttr &types) {
  Builder &b = parser.getBuilder();
  SmallVector<Attribute> nameAttrs, typeAttrs;
  if (parser.parseCommaSeparatedList(
          OpAsmParser::Delimiter::Paren, [&]() -> ParseResult {
            std::string name;
            Type type;
            if (parser.parseString(&name) || parser.parseColonType(type))
              return failure();
            nameAttrs.push_back(b.getStringAttr(name));
            typeAttrs.push_back(TypeAttr::get(type));
            return success();
          }))
    return failure();
  names = b.getArrayAttr(nameAttrs);
  types = b.getArrayAttr(typeAttrs);
  return success();
}

static void printParamList(OpAsmPrinter &printer, Operation *,
                           ArrayAttr names, ArrayAttr types) {
  printer << '(';
  llvm::interleaveComma(llvm::zip(names, types), printer, [&](auto pair) {
    auto [name, type] = pair;
    printer.printAttributeWithoutType(name);
    printer << ": ";
    printer.printAttributeWithoutType(type);
  });
  printer << ')';
}

/// An optional `input` or `weight` keyword; absent means `full`.
static ParseResult parseBackwardPart(OpAsmParser &parser,
                                     BackwardPartAttr &attr) {
  StringRef keyword;
  if (failed(parser.parseOptionalKeyword(&keyword, {"full", "input", "weight"})))
    return success();
  attr = BackwardPartAttr::get(parser.getContext(),
                               *symbolizeBackwardPart(keyword));
  return success();
}

static void printBackwardPart(OpAsmPrinter &printer, Operation *,
                              BackwardPartAttr attr) {
  if (attr && attr.getValue() != BackwardPart::Full)
    printer << stringifyBackwardPart(attr.getValue()) << ' ';
}

#define GET_OP_CLASSES
#include "dialects/pipe/PipeOps.cpp.inc"

//===----------------------------------------------------------------------===//
// StageOp
//===----------------------------------------------------------------------===//

void StageOp::build(OpBuilder &builder, OperationState &state, StringRef name,
                    Phase phase, int64_t stage, int64_t params,
                    FunctionType type) {
  state.addAttribute(getSymNameAttrName(state.name),
                     builder.getStringAttr(name));
  state.addAttribute(getFunctionTypeAttrName(state.name), TypeAttr::get(type));
  state.addAttribute(getPhaseAttrName(state.name),
                     PhaseAttr::get(builder.getContext(), phase));
  state.addAttribute(getStageAttrName(state.name),
                     builder.getI64IntegerAttr(stage));
  state.addAttribute(getParamsAttrName(state.name),
                     builder.getI64IntegerAttr(params));
  state.addRegion();
}

// pipe.stage @name <phase> stage N [params K] (%a: T, ...) -> (...)
//     [attributes {...}] { body }
ParseResult StageOp::parse(OpAsmParser &parser, OperationState &result) {
  Builder &b = parser.getBuilder();
  StringAttr name;
  if (parser.parseSymbolName(name, getSymNameAttrName(result.name),
                             result.attributes))
    return failure();

  SMLoc phaseLoc = parser.getCurrentLocation();
  StringRef phaseName;
  if (parser.parseKeyword(&phaseName))
    return failure();
  std::optional<Phase> phase = symbolizePhase(phaseName);
  if (!phase)
    return parser.emitError(phaseLoc) << "unknown phase '" << phaseName
                                      << "'";
  result.addAttribute(getPhaseAttrName(result.name),
                      PhaseAttr::get(b.getContext(), *phase));

  int64_t stage;
  if (parser.parseKeyword("stage") || parser.parseInteger(stage))
    return failure();
  result.addAttribute(getStageAttrName(result.name),
                      b.getI64IntegerAttr(stage));
  if (succeeded(parser.parseOptionalKeyword("params"))) {
    int64_t params;
    if (parser.parseInteger(params))
      return failure();
    result.addAttribute(getParamsAttrName(result.name),
                        b.getI64IntegerAttr(params));
  }

  SmallVector<OpAsmParser::Argument> args;
  SmallVector<Type> resultTypes;
  SmallVector<DictionaryAttr> resultAttrs;
  bool isVariadic = false;
  if (function_interface_impl::parseFunctionSignatureWithArguments(
          parser, /*allowVariadic=*/false, args, isVariadic, resultTypes,
          resultAttrs))
    return failure();
  SmallVector<Type> argTypes =
      llvm::to_vector(llvm::map_range(args, [](auto &a) { return a.type; }));
  result.addAttribute(getFunctionTypeAttrName(result.name),
                      TypeAttr::get(b.getFunctionType(argTypes, resultTypes)));
  call_interface_impl::addArgAndResultAttrs(
      b, result, args, resultAttrs, getArgAttrsAttrName(result.name),
      getResAttrsAttrName(result.name));

  if (parser.parseOptionalAttrDictWithKeyword(result.attributes))
    return failure();
  Region *body = result.addRegion();
  SMLoc bodyLoc = parser.getCurrentLocation();
  OptionalParseResult parsed =
      parser.parseOptionalRegion(*body, args, /*enableNameShadowing=*/false);
  if (!parsed.has_value())
    return parser.emitError(bodyLoc) << "expected the stage's body";
  return *parsed;
}

void StageOp::print(OpAsmPrinter &p) {
  p << ' ';
  p.printSymbolName(getSymName());
  p << ' ' << stringifyPhase(getPhase()) << " stage " << getStage();
  if (getParams() != 0)
    p << " params " << getParams();
  p << ' ';
  function_interface_impl::printFunctionSignature(
      p, *this, getArgumentTypes(), /*isVariadic=*/false, getResultTypes());
  function_interface_impl::printFunctionAttributes(
      p, *this,
      {getFunctionTypeAttrName(), getArgAttrsAttrName(), getResAttrsAttrName(),
       getPhaseAttrName(), getStageAttrName(), getParamsAttrName()});
  if (!getBody().empty()) {
    p << ' ';
    p.printRegion(getBody(), /*printEntryBlockArgs=*/false,
                  /*printBlockTerminators=*/true);
  }
}

int64_t StageOp::getNumStateArgs() {
  int64_t n = 0;
  for (int64_t i = int64_t(getArgumentTypes().size()) - 1;
       i >= getParams() && getArgAttr(i, attrs::kState); --i)
    ++n;
  return n;
}

LogicalResult StageOp::verify() {
  if (getStage() < 0)
    return emitOpError() << "stage " << getStage() << " is negative";
  int64_t params = getParams();
  ArrayRef<Type> inputs = getArgumentTypes();
  if (params < 0 || params > static_cast<int64_t>(inputs.size()))
    return emitOpError() << "has " << params << " weight parameters but only "
                         << inputs.size() << " arguments";
  if (getBody().empty())
    return emitOpError() << "needs a body";
  int64_t firstState = int64_t(inputs.size()) - getNumStateArgs();
  for (int64_t i = 0; i < firstState; ++i)
    if (getArgAttr(i, attrs::kState))
      return emitOpError() << "argument " << i
                           << " is marked pipe.state but is not among the "
                              "trailing state arguments";
  for (unsigned r = 0; r < getResultTypes().size(); ++r) {
    auto update = getResultAttrOfType<StringAttr>(r, attrs::kUpdate);
    if (!update)
      continue;
    if (getPhase() != Phase::Forward)
      return emitOpError() << "result " << r
                           << " updates state, which only a forward may do";
    bool found = false;
    for (int64_t i = firstState; i < int64_t(inputs.size()); ++i)
      if (getArgAttrOfType<StringAttr>(i, attrs::kState) == update &&
          inputs[i] == getResultTypes()[r])
        found = true;
    if (!found)
      return emitOpError() << "result " << r << " updates '"
                           << update.getValue()
                           << "', which is not a state argument of its type";
  }

  // The weight gradients a backward returns are those of its weights, in
  // order, so that the caller can add them to the buffer's accumulator.
  ArrayRef<Type> paramTypes = getParamTypes();
  ArrayRef<Type> results = getResultTypes();
  switch (getPhase()) {
  case Phase::Forward:
  case Phase::BackwardInput:
    break;
  case Phase::Backward:
    if (results.size() < paramTypes.size() ||
        results.take_back(paramTypes.size()) != paramTypes)
      return emitOpError()
             << "of phase 'backward' must end its results with the gradients "
                "of its weights "
             << typeList(paramTypes) << ", but returns " << typeList(results);
    break;
  case Phase::BackwardWeight:
    if (paramTypes.empty())
      return emitOpError() << "of phase 'backward_weight' needs weights";
    if (results != paramTypes)
      return emitOpError()
             << "of phase 'backward_weight' must return exactly the gradients "
                "of its weights "
             << typeList(paramTypes) << ", but returns " << typeList(results);
    break;
  }
  return success();
}

LogicalResult ReturnOp::verify() {
  auto stage = (*this)->getParentOfType<StageOp>();
  ArrayRef<Type> expected = stage.getResultTypes();
  if (getOperandTypes() != TypeRange(expected))
    return emitOpError() << "returns " << typeList(getOperandTypes())
                         << " but @" << stage.getSymName() << " declares "
                         << typeList(expected);
  return success();
}

//===----------------------------------------------------------------------===//
// ProgramOp
//===----------------------------------------------------------------------===//

void ProgramOp::build(OpBuilder &builder, OperationState &state,
                      StringRef name, int64_t device, ArrayRef<int64_t> stages,
                      ScheduleKind schedule, int64_t microbatches,
                      std::optional<int64_t> pipeline) {
  state.addAttribute(getSymNameAttrName(state.name),
                     builder.getStringAttr(name));
  state.addAttribute(getDeviceAttrName(state.name),
                     builder.getI64IntegerAttr(device));
  state.addAttribute(getStagesAttrName(state.name),
                     builder.getDenseI64ArrayAttr(stages));
  state.addAttribute(getScheduleAttrName(state.name),
                     ScheduleKindAttr::get(builder.getContext(), schedule));
  state.addAttribute(getMicrobatchesAttrName(state.name),
                     builder.getI64IntegerAttr(microbatches));
  if (pipeline)
    state.addAttribute(getPipelineAttrName(state.name),
                       builder.getI64IntegerAttr(*pipeline));
  state.addRegion()->emplaceBlock();
}

bool ProgramOp::isNoFlush() {
  switch (getSchedule()) {
  case ScheduleKind::PipeDream:
  case ScheduleKind::PipeDream2BW:
  case ScheduleKind::PipeMare:
  case ScheduleKind::SpecTrain:
    return true;
  default:
    return false;
  }
}

LogicalResult ProgramOp::verify() {
  if (getDevice() < 0)
    return emitOpError() << "device " << getDevice() << " is negative";
  if (getMicrobatches() < 1)
    return emitOpError() << "needs at least one micro-batch, has "
                         << getMicrobatches();
  ArrayRef<int64_t> stages = getStages();
  if (stages.empty())
    return emitOpError() << "holds no stage";
  llvm::SmallSet<int64_t, 8> seen;
  for (int64_t stage : stages) {
    if (stage < 0)
      return emitOpError() << "stage " << stage << " is negative";
    if (!seen.insert(stage).second)
      return emitOpError() << "lists stage " << stage << " twice";
  }
  if (std::optional<int64_t> pipeline = getPipeline(); pipeline && *pipeline < 0)
    return emitOpError() << "pipeline " << *pipeline << " is negative";
  if (std::optional<int64_t> advance = getAdvance()) {
    if (getSchedule() != ScheduleKind::AdvanceForward)
      return emitOpError() << "advance applies to the afp schedule only";
    if (*advance < 0)
      return emitOpError() << "advance " << *advance << " is negative";
  }
  if (getVerticalSync() && getSchedule() != ScheduleKind::PipeDream)
    return emitOpError() << "vertical_sync applies to the pipedream schedule "
                            "only, not "
                         << stringifyScheduleKind(getSchedule());

  // One program per device: report it on the later one.
  for (Operation *prev = (*this)->getPrevNode(); prev;
       prev = prev->getPrevNode())
    if (auto other = dyn_cast<ProgramOp>(prev);
        other && other.getDevice() == getDevice())
      return emitOpError() << "runs on device " << getDevice()
                           << ", which program @" << other.getSymName()
                           << " already runs on";
  return success();
}

//===----------------------------------------------------------------------===//
// Weight buffers
//===----------------------------------------------------------------------===//

void WeightBufferOp::getAsmResultNames(OpAsmSetValueNameFn setNameFn) {
  setNameFn(getWeights(), "w" + std::to_string(getStage()));
}

LogicalResult WeightBufferOp::verify() {
  auto program = (*this)->getParentOfType<ProgramOp>();
  if (!program.holdsStage(getStage()))
    return emitOpError() << "holds weights of stage " << getStage()
                         << ", which program @" << program.getSymName()
                         << " does not hold (stages "
                         << intList(program.getStages()) << ")";
  if (getVersions() < 1)
    return emitOpError() << "needs at least one version, has "
                         << getVersions();
  ArrayAttr names = getParamNames(), types = getParamTypes();
  if (names.size() != types.size())
    return emitOpError() << "has " << names.size() << " parameter names but "
                         << types.size() << " types";
  if (names.empty())
    return emitOpError() << "holds no parameters";
  llvm::StringSet<> seen;
  for (auto [nameAttr, typeAttr] : llvm::zip(names, types)) {
    StringRef name = llvm::cast<StringAttr>(nameAttr).getValue();
    if (name.empty())
      return emitOpError() << "has a parameter with an empty name";
    if (!seen.insert(name).second)
      return emitOpError() << "lists parameter \"" << name << "\" twice";
    auto type = llvm::dyn_cast<RankedTensorType>(
        llvm::cast<TypeAttr>(typeAttr).getValue());
    if (!type || !type.hasStaticShape())
      return emitOpError() << "parameter \"" << name
                           << "\" must be a statically shaped tensor, not "
                           << llvm::cast<TypeAttr>(typeAttr).getValue();
  }
  for (Operation *prev = (*this)->getPrevNode(); prev;
       prev = prev->getPrevNode())
    if (auto other = dyn_cast<WeightBufferOp>(prev);
        other && other.getStage() == getStage())
      return emitOpError() << "declares a second weight buffer for stage "
                           << getStage();
  return success();
}

LogicalResult StashOp::verify() {
  return verifySlotPair(*this, getWeights(), getFrom(), "source version",
                        getTo(), "target version");
}

LogicalResult PredictOp::verify() {
  if (failed(verifySlotPair(*this, getWeights(), getFrom(), "source version",
                            getTo(), "target version")))
    return failure();
  if (getGap() < 0)
    return emitOpError() << "version gap " << getGap() << " is negative";
  if (getMb() && failed(verifyMicroBatch(*this, *getMb(), getMbBase())))
    return failure();
  if (getMbBase() && !getMb())
    return emitOpError() << "has a micro-batch index without an offset";
  bool velocity = getDirection() == PredictDirection::Velocity;
  if (velocity && !(getLr() && getLr()->convertToDouble() > 0))
    return emitOpError() << "a velocity prediction needs a positive lr";
  if (!velocity && getLr())
    return emitOpError() << "a delta prediction takes no lr (δ is a weight "
                            "change already)";
  auto program = (*this)->getParentOfType<ProgramOp>();
  bool found = false;
  program.walk([&](UpdateOp update) {
    if (update.getWeights() == getWeights() &&
        (velocity ? update.hasVelocity() : bool(update.getDiscrepancy())))
      found = true;
  });
  if (!found && velocity)
    return emitOpError() << "needs a velocity: its weight buffer must be "
                            "updated in this program by an sgd, momentum, "
                            "nesterov, adam or adamw pipe.update";
  if (!found)
    return emitOpError() << "needs a weight velocity δ: its weight buffer "
                            "must be updated in this program by a pipe.update "
                            "with discrepancy(γ)";
  return success();
}

LogicalResult AverageOp::verify() {
  if (failed(verifySlotPair(*this, getWeights(), getVersion(), "version",
                            getCentre(), "centre version")) ||
      failed(verifyGroup(*this, getGroup())))
    return failure();
  double alpha = getAlpha().convertToDouble();
  if (!(alpha > 0 && alpha <= 1))
    return emitOpError() << "alpha " << alpha << " is outside (0, 1]";
  if (getPeriod() < 1)
    return emitOpError() << "period " << getPeriod()
                         << " must be at least one step";
  return success();
}

//===----------------------------------------------------------------------===//
// Gradients and optimizer
//===----------------------------------------------------------------------===//

LogicalResult AccumulateOp::verify() {
  FailureOr<WeightBufferOp> buffer = getBuffer(*this, getWeights());
  if (failed(buffer))
    return failure();
  int64_t param = getParam();
  if (param < 0 || param >= buffer->getNumParams())
    return emitOpError() << "parameter " << param
                         << " is out of range: the buffer holds "
                         << buffer->getNumParams();
  Type expected = buffer->getParamTypeList()[param];
  if (getGrad().getType() != expected)
    return emitOpError() << "gradient of type " << getGrad().getType()
                         << " does not match parameter " << param << " of type "
                         << expected;
  return success();
}

LogicalResult AllReduceOp::verify() {
  FailureOr<WeightBufferOp> buffer = getBuffer(*this, getWeights());
  if (failed(buffer) || failed(verifyGroup(*this, getGroup())))
    return failure();
  if (std::optional<ArrayRef<int64_t>> params = getParams()) {
    if (params->empty())
      return emitOpError() << "lists no parameters";
    llvm::SmallSet<int64_t, 8> seen;
    for (int64_t param : *params) {
      if (param < 0 || param >= buffer->getNumParams())
        return emitOpError() << "parameter " << param
                             << " is out of range: the buffer holds "
                             << buffer->getNumParams();
      if (!seen.insert(param).second)
        return emitOpError() << "lists parameter " << param << " twice";
    }
  }
  return success();
}

LogicalResult ClipGradNormOp::verify() {
  double maxNorm = getMaxNorm().convertToDouble();
  if (!(std::isfinite(maxNorm) && maxNorm > 0))
    return emitOpError() << "max " << maxNorm << " must be a finite number > 0";
  // A pipeline of one stage clips alone.
  if (failed(verifyGroup(*this, getGroup(), /*minSize=*/1)))
    return failure();
  if (isa<LoopOp>((*this)->getParentOp()))
    return emitOpError() << "runs once a step: it must not be inside a pipe.loop";
  if (auto program = (*this)->getParentOfType<ProgramOp>()) {
    if (program.isNoFlush())
      return emitOpError() << "needs a synchronous program: a no-flush "
                              "program updates its stages at different times";
  }
  llvm::SmallPtrSet<Value, 4> buffers;
  for (Value w : getWeights()) {
    if (failed(getBuffer(*this, w)))
      return failure();
    if (!buffers.insert(w).second)
      return emitOpError() << "lists a weight buffer twice";
  }
  return success();
}

bool UpdateOp::hasVelocity() {
  switch (getKind()) {
  case OptimizerKind::Momentum:
  case OptimizerKind::Nesterov:
  case OptimizerKind::Adam:
  case OptimizerKind::AdamW:
  case OptimizerKind::SGD:
    return true;
  case OptimizerKind::Adagrad:
    return false;
  }
  llvm_unreachable("unknown optimizer kind");
}

LogicalResult ZeroGradOp::verify() {
  if (getMb())
    return verifyMicroBatch(*this, *getMb(), getMbBase());
  if (getMbBase())
    return emitOpError() << "has a micro-batch index without an offset";
  return success();
}

LogicalResult UpdateOp::verify() {
  if (failed(getBuffer(*this, getWeights())))
    return failure();
  if (getMb() && failed(verifyMicroBatch(*this, *getMb(), getMbBase())))
    return failure();
  if (getMbBase() && !getMb())
    return emitOpError() << "has a micro-batch index without an offset";
  if (getVersion() && getVersionClock() == VersionClock::Slot)
    return emitOpError() << "names a fixed slot; an update names the version "
                            "it starts from (u, t) in a no-flush program";
  if (getVersion() && !getMb())
    return emitOpError() << "names its version relative to a micro-batch "
                            "but has none (mb)";
  OptimizerKind kind = getKind();
  StringRef kindName = stringifyOptimizerKind(kind);

  // Which hyper-parameters each optimizer takes: required, or allowed.
  enum Use { No, Optional, Required };
  auto use = [&](StringRef name) -> Use {
    bool isMomentum = kind == OptimizerKind::Momentum;
    bool usesMomentum = isMomentum || kind == OptimizerKind::Nesterov;
    bool isAdam = kind == OptimizerKind::Adam || kind == OptimizerKind::AdamW;
    if (name == "momentum")
      return usesMomentum ? Required : No;
    if (name == "dampening")
      return isMomentum ? Optional : No;
    if (name == "beta1" || name == "beta2")
      return isAdam ? Required : No;
    if (name == "epsilon")
      return isAdam || kind == OptimizerKind::Adagrad ? Required : No;
    return Optional;
  };
  struct Hyper {
    StringRef name;
    std::optional<double> value;
  };
  auto value = [](std::optional<APFloat> v) -> std::optional<double> {
    if (!v)
      return std::nullopt;
    return v->convertToDouble();
  };
  Hyper hypers[] = {{"momentum", value(getMomentum())},
                    {"dampening", value(getDampening())},
                    {"beta1", value(getBeta1())},
                    {"beta2", value(getBeta2())},
                    {"epsilon", value(getEpsilon())},
                    {"weight_decay", value(getWeightDecay())},
                    {"lr_scale", value(getLrScale())},
                    {"grad_scale", value(getGradScale())}};
  for (const Hyper &h : hypers) {
    Use u = use(h.name);
    if (u == No && h.value)
      return emitOpError() << "'" << h.name << "' does not apply to the "
                           << kindName << " optimizer";
    if (u == Required && !h.value)
      return emitOpError() << "the " << kindName << " optimizer needs '"
                           << h.name << "'";
  }

  // Ranges, written so that NaN fails them too.
  auto in = [](std::optional<double> v, double lo, bool loOpen, double hi,
               bool hiOpen) {
    if (!v)
      return true;
    bool aboveLo = loOpen ? *v > lo : *v >= lo;
    bool belowHi = hiOpen ? *v < hi : *v <= hi;
    return aboveLo && belowHi;
  };
  constexpr double inf = std::numeric_limits<double>::infinity();
  double lr = getLr().convertToDouble();
  if (!(lr > 0) || lr == inf)
    return emitOpError() << "learning rate " << lr << " must be positive";
  if (!in(value(getMomentum()), 0, false, 1, true))
    return emitOpError() << "momentum must be in [0, 1)";
  if (!in(value(getDampening()), 0, false, 1, false))
    return emitOpError() << "dampening must be in [0, 1]";
  if (!in(value(getBeta1()), 0, false, 1, true) ||
      !in(value(getBeta2()), 0, false, 1, true))
    return emitOpError() << "beta1 and beta2 must be in [0, 1)";
  if (!in(value(getEpsilon()), 0, true, inf, true))
    return emitOpError() << "epsilon must be positive";
  if (!in(value(getWeightDecay()), 0, false, inf, true))
    return emitOpError() << "weight decay must not be negative";
  if (!in(value(getLrScale()), 0, true, inf, true))
    return emitOpError() << "lr_scale must be positive";
  if (!in(value(getGradScale()), 0, true, inf, true))
    return emitOpError() << "grad_scale must be positive";
  if (!in(value(getDiscrepancy()), 0, false, 1, true))
    return emitOpError() << "discrepancy γ must be in [0, 1)";
  if (std::optional<int64_t> steps = getAnnealSteps()) {
    if (*steps < 1)
      return emitOpError() << "anneal_steps must be at least 1";
    if (!getLrScale())
      return emitOpError() << "anneal_steps needs an lr_scale to anneal";
  }
  return success();
}

//===----------------------------------------------------------------------===//
// Forward and backward
//===----------------------------------------------------------------------===//

/// Checks an optional `weights %w[version]` clause.
static LogicalResult verifyWeightsClause(Operation *op, Value weights,
                                         std::optional<int64_t> version,
                                         VersionClock clock) {
  if (!weights) {
    if (version)
      return op->emitOpError() << "names a weight version but passes no weights";
    return success();
  }
  if (!version)
    return op->emitOpError() << "passes weights without a version";
  FailureOr<WeightBufferOp> buffer = getBuffer(op, weights);
  if (failed(buffer))
    return failure();
  if (clock != VersionClock::Slot) {
    // Relative versions: pipe-verify-schedule checks that the version read
    // is still in the buffer when the instruction runs.
    auto program = op->getParentOfType<ProgramOp>();
    if (program && !program.isNoFlush())
      return op->emitOpError()
             << "names a version relative to its micro-batch or step, which "
                "only a no-flush program (pipedream, pipedream_2bw) may";
    return success();
  }
  return verifySlot(op, *buffer, *version, "weight version");
}

LogicalResult ForwardOp::verify() {
  if (failed(verifyMicroBatch(*this, getMb(), getMbBase())))
    return failure();
  return verifyWeightsClause(*this, getWeights(), getVersion(),
                             getVersionClock());
}

LogicalResult BackwardOp::verify() {
  if (failed(verifyMicroBatch(*this, getMb(), getMbBase())))
    return failure();
  if (getPart() == BackwardPart::Weight && !getResults().empty())
    return emitOpError() << "computing weight gradients only has no results";
  return verifyWeightsClause(*this, getWeights(), getVersion(),
                             getVersionClock());
}

/// Checks a call of a stage computation: the callee is a pipe.stage of the
/// right phase, of a stage this program holds, fed the weights of its own
/// stage, and its signature matches the operands and results.
static LogicalResult verifyStageCall(Operation *op,
                                     SymbolTableCollection &symbolTable,
                                     FlatSymbolRefAttr calleeAttr, Phase phase,
                                     ValueRange inputs, TypeRange results,
                                     Value weights) {
  Operation *symbol = symbolTable.lookupNearestSymbolFrom(op, calleeAttr);
  if (!symbol)
    return op->emitOpError() << "calls " << calleeAttr
                             << ", which is not defined";
  auto callee = dyn_cast<StageOp>(symbol);
  if (!callee)
    return op->emitOpError() << "calls " << calleeAttr << ", which is a '"
                             << symbol->getName() << "', not a pipe.stage";
  if (callee.getPhase() != phase)
    return op->emitOpError() << "needs a stage computation of phase '"
                             << stringifyPhase(phase) << "', but "
                             << calleeAttr << " is of phase '"
                             << stringifyPhase(callee.getPhase()) << "'";
  auto program = op->getParentOfType<ProgramOp>();
  if (program && !program.holdsStage(callee.getStage()))
    return op->emitOpError() << "calls " << calleeAttr << " of stage "
                             << callee.getStage() << ", which program @"
                             << program.getSymName() << " does not hold";

  SmallVector<Type> paramTypes;
  if (weights) {
    auto buffer = weights.getDefiningOp<WeightBufferOp>();
    if (!buffer)
      return failure(); // Reported by the op's verifier.
    if (buffer.getStage() != callee.getStage())
      return op->emitOpError() << "passes the weights of stage "
                               << buffer.getStage() << " to " << calleeAttr
                               << " of stage " << callee.getStage();
    paramTypes = buffer.getParamTypeList();
  }
  if (static_cast<int64_t>(paramTypes.size()) != callee.getParams())
    return op->emitOpError() << "passes " << paramTypes.size()
                             << " weight tensors, but " << calleeAttr
                             << " takes " << callee.getParams();
  if (TypeRange(paramTypes) != TypeRange(callee.getParamTypes()))
    return op->emitOpError() << "passes weights of types "
                             << typeList(paramTypes) << ", but " << calleeAttr
                             << " takes " << typeList(callee.getParamTypes());
  ArrayRef<Type> calleeInputs = callee.getInputTypes();
  if (inputs.getTypes() != TypeRange(calleeInputs))
    return op->emitOpError() << "passes inputs " << typeList(inputs.getTypes())
                             << ", but " << calleeAttr << " takes "
                             << typeList(calleeInputs) << " after its weights";

  // Weight gradients go to the accumulator, not to the op's results.
  ArrayRef<Type> calleeResults = callee.getResultTypes();
  if (phase == Phase::Backward)
    calleeResults = calleeResults.drop_back(callee.getParams());
  else if (phase == Phase::BackwardWeight)
    calleeResults = {};
  if (results != TypeRange(calleeResults))
    return op->emitOpError() << "has results " << typeList(results)
                             << ", but " << calleeAttr << " gives "
                             << typeList(calleeResults);
  return success();
}

LogicalResult
ForwardOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  return verifyStageCall(*this, symbolTable, getCalleeAttr(), Phase::Forward,
                         getInputs(), getResultTypes(), getWeights());
}

LogicalResult
BackwardOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  Phase phase = Phase::Backward;
  if (getPart() == BackwardPart::Input)
    phase = Phase::BackwardInput;
  else if (getPart() == BackwardPart::Weight)
    phase = Phase::BackwardWeight;
  return verifyStageCall(*this, symbolTable, getCalleeAttr(), phase,
                         getInputs(), getResultTypes(), getWeights());
}

//===----------------------------------------------------------------------===//
// Data, transfers, logs
//===----------------------------------------------------------------------===//

LogicalResult FeedOp::verify() {
  if (getInput().empty())
    return emitOpError() << "needs the name of a graph input";
  return verifyMicroBatch(*this, getMb(), getMbBase());
}

static LogicalResult verifyTransfer(Operation *op, int64_t peer, int64_t mb,
                                    Value base, StringRef tag) {
  if (failed(verifyPeer(op, peer)) || failed(verifyMicroBatch(op, mb, base)))
    return failure();
  if (tag.empty())
    return op->emitOpError() << "needs a non-empty tag";
  return success();
}

LogicalResult SendOp::verify() {
  return verifyTransfer(*this, getPeer(), getMb(), getMbBase(), getTag());
}

LogicalResult RecvOp::verify() {
  return verifyTransfer(*this, getPeer(), getMb(), getMbBase(), getTag());
}

LogicalResult ReportLossOp::verify() {
  auto type = llvm::cast<RankedTensorType>(getLoss().getType());
  if (!llvm::isa<FloatType>(type.getElementType()))
    return emitOpError() << "loss must be a floating-point tensor, not "
                         << type;
  if (!type.hasStaticShape() || type.getNumElements() != 1)
    return emitOpError() << "loss must hold exactly one element, not "
                         << type;
  return verifyMicroBatch(*this, getMb(), getMbBase());
}

LogicalResult ReportMetricOp::verify() {
  auto type = llvm::cast<RankedTensorType>(getValue().getType());
  if (!type.getElementType().isF32() || !type.hasStaticShape() ||
      type.getNumElements() != 1)
    return emitOpError() << "a count must be one f32 element, not " << type;
  if (getSlot() < 1)
    return emitOpError() << "slot " << getSlot()
                         << " is the loss's; a count's slot is 1 or more";
  return verifyMicroBatch(*this, getMb(), getMbBase());
}

//===----------------------------------------------------------------------===//
// Micro-batch loops and activation buffers
//===----------------------------------------------------------------------===//

void LoopOp::build(OpBuilder &builder, OperationState &state, int64_t lower,
                   int64_t upper) {
  state.addAttribute(getLowerAttrName(state.name),
                     builder.getI64IntegerAttr(lower));
  state.addAttribute(getUpperAttrName(state.name),
                     builder.getI64IntegerAttr(upper));
  Block &body = state.addRegion()->emplaceBlock();
  body.addArgument(builder.getIndexType(), state.location);
}

/// `pipe.loop %k = 0 to 6 [attributes {...}] { ... }`
ParseResult LoopOp::parse(OpAsmParser &parser, OperationState &result) {
  OpAsmParser::Argument index;
  int64_t lower = 0, upper = 0;
  if (parser.parseArgument(index) || parser.parseEqual() ||
      parser.parseInteger(lower) || parser.parseKeyword("to") ||
      parser.parseInteger(upper) ||
      parser.parseOptionalAttrDictWithKeyword(result.attributes))
    return failure();
  Builder &b = parser.getBuilder();
  index.type = b.getIndexType();
  result.addAttribute("lower", b.getI64IntegerAttr(lower));
  result.addAttribute("upper", b.getI64IntegerAttr(upper));
  Region *body = result.addRegion();
  if (parser.parseRegion(*body, {index}))
    return failure();
  if (body->empty())
    body->emplaceBlock();
  return success();
}

void LoopOp::print(OpAsmPrinter &printer) {
  printer << " " << getIndex() << " = " << getLower() << " to " << getUpper();
  printer.printOptionalAttrDictWithKeyword((*this)->getAttrs(),
                                           {"lower", "upper"});
  printer << " ";
  printer.printRegion(getBody(), /*printEntryBlockArgs=*/false);
}

void LoopOp::getAsmBlockArgumentNames(Region &region,
                                      OpAsmSetValueNameFn setNameFn) {
  if (!region.empty() && region.front().getNumArguments() == 1)
    setNameFn(region.front().getArgument(0), "k");
}

LogicalResult LoopOp::verify() {
  Block &body = getInstructions();
  if (body.getNumArguments() != 1 || !body.getArgument(0).getType().isIndex())
    return emitOpError() << "body must take one index argument, the "
                            "micro-batch index";
  auto program = (*this)->getParentOfType<ProgramOp>();
  bool noFlush = program && program.isNoFlush();
  if ((getLower() < 0 && !noFlush) || getUpper() <= getLower())
    return emitOpError() << "range [" << getLower() << ", " << getUpper()
                         << ") must be non-empty"
                         << (noFlush ? "" : " and non-negative");
  return success();
}

void ActivationBufferOp::getAsmResultNames(OpAsmSetValueNameFn setNameFn) {
  setNameFn(getBuffer(), "act");
}

LogicalResult ActivationBufferOp::verify() {
  if (getName().empty())
    return emitOpError() << "needs a name";
  if (getDepth() < 1)
    return emitOpError() << "needs a depth of at least one, has "
                         << getDepth();
  auto type = llvm::dyn_cast<RankedTensorType>(getType());
  if (!type || !type.hasStaticShape())
    return emitOpError() << "holds " << getType()
                         << ", not a statically shaped tensor";
  return success();
}

/// The activation buffer an instruction names, checked against the type of
/// the value it stores or reads.
static LogicalResult verifyActivationAccess(Operation *op, Value buffer,
                                            Type valueType) {
  auto decl = buffer.getDefiningOp<ActivationBufferOp>();
  if (!decl)
    return op->emitOpError()
           << "needs a buffer defined by pipe.activation_buffer";
  if (decl.getType() != valueType)
    return op->emitOpError() << "accesses buffer \"" << decl.getName()
                             << "\" of " << decl.getType() << " as "
                             << valueType;
  return success();
}

LogicalResult SaveOp::verify() {
  if (failed(verifyMicroBatch(*this, getMb(), getMbBase())))
    return failure();
  return verifyActivationAccess(*this, getBuffer(), getValue().getType());
}

LogicalResult RestoreOp::verify() {
  if (failed(verifyMicroBatch(*this, getMb(), getMbBase())))
    return failure();
  return verifyActivationAccess(*this, getBuffer(), getValue().getType());
}

std::optional<MicroBatchIndex>
mlir::pipec::pipe::getMicroBatchIndex(Operation *op) {
  return llvm::TypeSwitch<Operation *, std::optional<MicroBatchIndex>>(op)
      .Case<FeedOp, ForwardOp, BackwardOp, SendOp, RecvOp, ReportLossOp,
            ReportMetricOp, SaveOp, RestoreOp>([](auto typed) {
        return MicroBatchIndex{typed.getMbBase(), typed.getMb()};
      })
      .Case<UpdateOp, ZeroGradOp, PredictOp>(
          [](auto typed) -> std::optional<MicroBatchIndex> {
            if (!typed.getMb())
              return std::nullopt;
            return MicroBatchIndex{typed.getMbBase(), *typed.getMb()};
          })
      .Default([](Operation *) { return std::nullopt; });
}

Operation *mlir::pipec::pipe::adjacentTransfer(Operation *op, bool after) {
  Operation *other = after ? op->getNextNode() : op->getPrevNode();
  while (isa_and_nonnull<SaveOp>(other))
    other = after ? other->getNextNode() : other->getPrevNode();
  if (!other || other->getName() != op->getName())
    return nullptr;
  std::optional<MicroBatchIndex> x = getMicroBatchIndex(op),
                                 y = getMicroBatchIndex(other);
  if (!x || !y || x->base != y->base || x->offset != y->offset)
    return nullptr;
  int64_t peer = isa<SendOp>(op) ? cast<SendOp>(op).getPeer() : cast<RecvOp>(op).getPeer();
  int64_t otherPeer =
      isa<SendOp>(other) ? cast<SendOp>(other).getPeer() : cast<RecvOp>(other).getPeer();
  return peer == otherPeer ? other : nullptr;
}

void mlir::pipec::pipe::forEachInstruction(
    ProgramOp program, llvm::function_ref<void(Operation *, int64_t)> fn) {
  auto visit = [&](Operation &op, int64_t k) {
    std::optional<MicroBatchIndex> mb = getMicroBatchIndex(&op);
    fn(&op, mb ? mb->at(k) : -1);
  };
  for (Operation &op : program.getInstructions()) {
    auto loop = dyn_cast<LoopOp>(op);
    if (!loop) {
      visit(op, 0);
      continue;
    }
    for (int64_t k = loop.getLower(); k < loop.getUpper(); ++k)
      for (Operation &inner : loop.getInstructions())
        visit(inner, k);
  }
}

int64_t mlir::pipec::pipe::drainSteps(ProgramOp program) {
  if (!program.isNoFlush())
    return 0;
  int64_t lowest = 0;
  forEachInstruction(program, [&](Operation *op, int64_t mb) {
    if (getMicroBatchIndex(op))
      lowest = std::min(lowest, mb);
  });
  int64_t m = program.getMicrobatches();
  return (-lowest + m - 1) / m;
}

void mlir::pipec::pipe::forEachInstructionInRun(
    ProgramOp program, int64_t steps,
    llvm::function_ref<void(Operation *, int64_t)> fn) {
  if (!program.isNoFlush())
    return forEachInstruction(program, fn);
  int64_t m = program.getMicrobatches();
  int64_t total = steps * m, calls = steps + drainSteps(program);
  for (int64_t t = 0; t < calls; ++t)
    forEachInstruction(program, [&](Operation *op, int64_t mb) {
      if (!getMicroBatchIndex(op)) {
        if (t < steps)
          fn(op, -1);
        return;
      }
      int64_t u = t * m + mb;
      if (u >= 0 && u < total)
        fn(op, u);
    });
}

int64_t mlir::pipec::pipe::versionAt(VersionClock clock, int64_t version,
                                     int64_t u, int64_t microbatches) {
  switch (clock) {
  case VersionClock::Slot:
    return version;
  case VersionClock::MicroBatch:
    return u + version;
  case VersionClock::Step: {
    int64_t t = u >= 0 ? u / microbatches : -((-u + microbatches - 1) / microbatches);
    return t + version;
  }
  }
  return version;
}
