//===- LowerPrograms.cpp - pipe.program → one device's step function -----===//
//
// One device's program becomes its @pipe_step (the ABI of
// pipe-lower-to-runtime: ctx, inputs, persistent, loss, step) in two layers:
//
//   - every stage computation the program calls (a pipe.stage, forward or
//     backward) and every optimizer update becomes one function in the onnx
//     dialect, lowered by the step lowering of pipe-lower-to-runtime in its
//     callable form (same signature; results marked pipe.result_buffer are copied
//     to the caller's buffers). A stage is compiled once per device however
//     many micro-batches run it; a backward adds its weight gradients into
//     the accumulators it is passed (in place);
//   - the program itself becomes the step's control: scf.for for each
//     pipe.loop, pointer arithmetic for the micro-batch's rows of a fed input
//     and for the slot (mb mod depth) of an activation buffer, pipert_send /
//     pipert_recv with tags computed from the micro-batch index, and calls
//     of the functions above with arrays of buffer pointers.
//
// Storage: parameters, optimizer state and the step counter are the device's
// persistent buffers (named as pipe-add-optimizer names them, so checkpoints
// and the saved ONNX read the same); fed inputs are the whole mini-batch (M
// micro-batches of rows, filled by the driver); gradient accumulators,
// activation buffers and one buffer per value an instruction defines are
// allocated at the start of the step and freed at its end. A value saved
// into an activation buffer by the instruction after its definition is
// computed directly in its slot. Micro-batch losses go to one float each;
// the step's loss is their sum times pipe.loss_scale (else their mean).
//
// No-flush programs (PipeDream, 2BW): the body is one step of the steady
// state, run for steps 0 .. K-1 and then pipe.drainSteps more times. Every
// instruction with a micro-batch computes its global index u = step*M + mb
// and runs its runtime calls only for u in [0, K*M) (K from
// pipert_run_steps). What lives across steps is persistent (checkpointed):
// the weight versions (slot 0 the parameter, slots 1..V-1 `<name>@v<i>`,
// copied from slot 0 at step 0), the gradient accumulators and the
// activation buffers (`pipe.act<i>.<name>`, slot u mod depth). A version
// `%w[u - 2]` reads slot (u - 2) mod V; an update `%w[v]` copies slot v mod V
// to slot v+1 mod V and updates it there in place. A second entry point,
// @pipe_finish, copies the newest version into slot 0 after the drain.
//
// Deferred weight gradients (synchronous GPipe/1F1B/AFP programs, M > 1):
// a linear layer's weight gradient dW = Aᵀ B (a Gemm with transA = 1 over
// the micro-batch's r rows, added to its accumulator) and its bias gradient
// (ReduceToShape of the same dY) are computed for a group of G micro-batches
// at once, G the largest divisor of M with G*r <= defer-weight-grads rows
// (64 by default). Where G is 1, a stage whose backward sends input
// gradients to another device still defers them, each micro-batch's alone:
// then what the deferral buys is where the Gemm runs, after the transfers
// that follow the backward (zero bubble's B before W), so the previous
// stage gets its input gradient without waiting for the weight gradients
// (the example transformer, 2 ranks, M = 4: 3-7% off the step,
// bench/README.md). A first stage sends none, and one device has no peer:
// there it would only move the Gemm and hold its operands longer (the
// first stage's activation buffers one slot deeper: 0.90 -> 1.10 MB on the
// transformer at batch 64, M = 4), so they keep it in the backward. The
// group's rows of an operand are read
// where they already lie back to back: a fed input's in the mini-batch, an
// activation buffer's in its slots (made deeper, planDeferred), a result of
// the forward right before in a buffer of G slots the forward writes
// (groupedKeys); other operands (dY) are written by the backward into slot
// mb mod G of a small buffer. After the group's last backward (backwards run
// in micro-batch order in these schedules) and the transfers that follow
// it, one Gemm over the G*r rows (one ReduceToShape for the bias) adds them
// to the accumulators (emitGroupFlush). A Gemm over 16 rows and the
// read-modify-write of its 128 x 32 accumulator cost 0.57 us where 64 rows
// cost 2.0: per micro-batch, that and the bias's reduction and addition
// made 2-sample micro-batches slower than 4-sample ones.
//
// The evaluation entry (option `eval`; pipe-run --eval-data): @pipe_eval,
// with the step's ABI, built from the device's training program: its forward
// stage function cloned in inference mode (Dropout's training_mode false,
// BatchNormalization's training_mode 0 on the running statistics, the
// running-statistic updates dropped), called in a pipe.loop over the M
// micro-batches in GPipe order: feed or receive its inputs, the forward,
// report the loss, send the activations the training program sends (the
// same peers and order, under tags of their own: "<name>.eval", never one of
// the pair's training tags, since a no-flush program's messages may be in
// flight between steps). It reads the step's own buffers (weights and state
// by name, inputs by key) and writes none of them, and keeps no activation:
// nothing the next step reads changes. Which weights: the synchronous
// schedules' one copy; AvgPipe's centre (its version slot), what --save
// writes; SpecTrain's and PipeMare's live slot 0; PipeDream's and 2BW's
// newest version, the slot the update of the last micro-batch updated so
// far wrote (computed from the step argument: after t steps that is micro-
// batch (t-1)*M + the latest one a step's updates name, at most K*M-1, so
// after the drain it is the version @pipe_finish publishes). A device's
// evaluation runs after its step's last instruction and before the next
// step's first; every transfer of the evaluation is matched within it
// (GPipe's forwards: stage s receives from s-1 and sends to s+1), so a job
// that is deadlock-free step by step stays so with evaluations between
// steps. A whole-batch stage (--batchnorm full-batch) evaluates as it
// trains: one forward on all M micro-batches, straight-line, its M copies of
// each input fed or received and of each sent result sent.
//
// Sends block by default: the verified schedules are deadlock-free with
// rendezvous sends, and an isend of a large message only progresses while
// its rank is inside MPI. With nonblocking-sends (straight-line programs
// only, whose buffers are never reused within a step), pipert_isend, all
// waited for at the end of the step.
//
//===----------------------------------------------------------------------===//
#include "pipec/Autodiff/Inference.h"
#include "pipec/Autodiff/LrSchedule.h"
#include "pipec/Autodiff/OnnxBuilder.h"
#include "dialects/pipe/PipeAttrNames.h"
#include "pipec/Conversion/Passes.h"
#include "pipec/Conversion/RuntimeABI.h"
#include "pipec/Transforms/WholeBatch.h"

#include "dialects/onnx/OnnxDialect.h"
#include "dialects/pipe/PipeDialect.h"

#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/SymbolTable.h"
#include "llvm/ADT/BitVector.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"

#include <array>
#include <map>
#include <set>
#include <tuple>

namespace mlir::pipec {
#define GEN_PASS_DEF_LOWERPROGRAMS
#include "pipec/Conversion/Passes.h.inc"
} // namespace mlir::pipec

using namespace mlir;
using namespace mlir::pipec;
using namespace mlir::pipec::autodiff;

static uint32_t tagHash(StringRef tag) {
  // FNV-1a of the tag, then the micro-batch in the low bits; within MPI's
  // guaranteed 32767. Equal tags of one pair of ranks also match in posting
  // order, which the verified schedule fixes, so a hash collision is harmless.
  uint32_t h = 2166136261u;
  for (char c : tag) {
    h ^= static_cast<uint8_t>(c);
    h *= 16777619u;
  }
  return h % 2048u;
}

int64_t mlir::pipec::transferTag(StringRef tag, int64_t mb) {
  return static_cast<int64_t>(tagHash(tag)) * 16 + (mb % 16);
}

EvalWeights mlir::pipec::evalWeightsOf(Operation *op, Value trained) {
  auto train = cast<pipe::ProgramOp>(op);
  EvalWeights read;
  train.walk([&](pipe::AverageOp avg) {
    if (avg.getWeights() == trained)
      read.slot = avg.getCentre();
  });
  // The updates' latest micro-batch in a step, relative to it, decides
  // which version is the newest after a given number of steps (SpecTrain
  // and PipeMare update their slot 0 in place: no version attribute).
  train.walk([&](pipe::UpdateOp u) {
    std::optional<pipe::MicroBatchIndex> mb = pipe::getMicroBatchIndex(u);
    if (u.getWeights() != trained || !u.getVersion() || !mb)
      return;
    int64_t top = mb->offset;
    if (mb->base)
      top += cast<pipe::LoopOp>(mb->base.getParentBlock()->getParentOp()).getUpper() - 1;
    read.last = read.newest ? std::max(read.last, top) : top;
    read.newest = true;
    read.stepClock = u.getVersionClock() == pipe::VersionClock::Step;
    read.version = *u.getVersion();
  });
  return read;
}


namespace {

/// A buffer of the device's persistent state, as the driver sees it. Kinds:
/// param, frozen, state (optimizer state, the step counter), and for
/// no-flush programs version (weight version slots 1..V-1), accumulator
/// (gradients) and activations (in flight): all but param and frozen are
/// checkpointed state to the driver.
struct DeviceArg {
  std::string name, kind;
  RankedTensorType type;
  Attribute init;
};

/// One stage's weights on this device.
/// On an evaluation program's weight buffer: [update clock, update version,
/// the latest micro-batch a step updates (relative to the step)], where the
/// forward reads the newest version (PipeDream, 2BW).
static constexpr llvm::StringLiteral kEvalNewest = "pipe.eval_newest";

struct WeightBuffer {
  int64_t stage = 0;
  int64_t versions = 1;
  SmallVector<std::string> names;
  SmallVector<RankedTensorType> types;
  SmallVector<int64_t> persistentIndex; // of each parameter (slot 0)
  /// slotIndex[i][v]: persistent index of version slot v of parameter i.
  SmallVector<SmallVector<int64_t>> slotIndex;
  SmallVector<Value> grads;             // accumulator pointers (entry block)
  /// The no-flush update of the buffer (for @pipe_finish).
  pipe::UpdateOp update;
  /// The optimizer step function and the persistent indices of its state,
  /// built by the buffer's first update and shared by the others (a
  /// no-flush program updates one buffer at several places).
  std::string updateFn;
  SmallVector<int64_t> stateIndex;
  /// The state slots of each parameter, in stateIndex's order (parameter
  /// major): stateIndex[i * stateSlots.size() + j] is slot j of parameter i.
  SmallVector<std::string> stateSlots;
  DictionaryAttr updateAttrs;
  /// The first update of the buffer in program order (its hyper-parameters
  /// are the buffer's; pipe.predict reads them and its state).
  pipe::UpdateOp firstUpdate;
  /// An evaluation's forward reads the newest version (kEvalNewest), the
  /// slot computed once at the entry.
  std::optional<std::array<int64_t, 3>> evalNewest;
  Value evalSlot;
};

/// The micro-batches whose weight gradients one deferred Gemm computes:
/// the largest divisor G of m with G * rows <= maxRows (see the header).
int64_t deferGroup(int64_t m, int64_t rows, int64_t maxRows) {
  int64_t g = 1;
  for (int64_t d = 2; d <= m; ++d)
    if (m % d == 0 && d * rows <= maxRows)
      g = d;
  return g;
}

/// A weight gradient a backward stage function leaves to the end of the
/// step (see the header): parameter `param`'s Gemm over dY (`a`, [rows,
/// out]) and X (`b`, [rows, in]), and the bias `bias` (-1: none) that sums
/// dY's rows.
struct DeferredGrad {
  int64_t param = -1, bias = -1;
  bool biasOfB = false; // the bias sums b's rows, else a's
  int64_t group = 1;    // micro-batches a deferred Gemm covers
  RankedTensorType a, b;
  /// The activation buffer an operand is restored from, where the
  /// deferred Gemm reads the group's rows there (its slots contiguous,
  /// kept for the group: deferredRingDepth); else null and the backward
  /// writes the operand into the group's buffer.
  Value aRing, bRing;
  DictionaryAttr gemmAttrs;
};

/// A weight buffer's deferred gradients: the backward function that writes
/// them, the buffers of a group's A and B rows (two per gradient) and the
/// function that adds them to the accumulators.
struct DeferredStore {
  std::string backward, function;
  SmallVector<Value> buffers;
};

/// An activation buffer: `depth` slots of `bytes` each.
struct Ring {
  Value base;
  int64_t depth = 1, bytes = 0;
};

/// How a callable function's buffers are bound at a call: its inputs,
/// persistent and output pointer arrays.
struct CallArrays {
  SmallVector<Value> inputs, persistent, outputs;
};

class ProgramLowering {
public:
  ProgramLowering(ModuleOp module, pipe::ProgramOp program, bool cuda,
                  bool nonblockingSends, bool onnxOnly, int64_t deferRows)
      : module(module), program(program), cuda(cuda),
        nonblockingSends(nonblockingSends), onnxOnly(onnxOnly),
        deferRows(deferRows), b(program.getContext()) {}

  LogicalResult run();

  /// Whether the program sends or receives (a device of a pipeline).
  bool transfers() {
    if (!hasTransfers)
      hasTransfers = program
                         .walk([](Operation *op) {
                           return isa<pipe::SendOp, pipe::RecvOp>(op) ? WalkResult::interrupt()
                                                                      : WalkResult::advance();
                         })
                         .wasInterrupted();
    return *hasTransfers;
  }
  std::optional<bool> hasTransfers;

  /// Lower as the evaluation entry of the device whose step `training`
  /// lowered: the function is @pipe_eval and every buffer it reads is one
  /// of that step's (persistent and input indices by name).
  void evaluationOf(const ProgramLowering &training) { layout = &training; }

private:
  /// The step whose buffers an evaluation entry reads (evaluationOf).
  const ProgramLowering *layout = nullptr;
  /// The index of `name` in the step's persistent buffers (evaluation).
  FailureOr<int64_t> layoutPersistent(Operation *at, StringRef name) const;

  // --- the onnx-level functions ---
  Attribute initOf(StringRef name);
  FailureOr<StringRef> stageFunction(Operation *call, pipe::StageOp stage,
                                     pipe::BackwardPart part);
  FailureOr<StringRef> updateFunction(pipe::UpdateOp op, WeightBuffer &buf,
                                      bool countsStep,
                                      SmallVector<int64_t> &stateIndex);
  StringRef accumulateFunction(RankedTensorType type);
  /// The function adding a backward's deferred gradients (a group's rows)
  /// to their accumulators: persistent [the accumulators of `grads`, in
  /// order], inputs [A, B rows of each gradient].
  StringRef deferredFunction(StringRef backward, ArrayRef<DeferredGrad> grads,
                             const WeightBuffer &buf);
  /// y = xᵀ of a matrix: the function a step-constant weight's transpose
  /// is computed with (stepTranspose).
  StringRef transposeFunction(RankedTensorType type);
  /// Whether the weights of `weights` are the same for every forward of a
  /// step: a synchronous program whose only write of them is its update,
  /// at the top level, after every forward that reads them.
  bool constantWithinStep(Value weights);
  /// The transpose of parameter `i` of `weights` (pointer `w`) for a
  /// forward: computed once at the start of the step where the weights
  /// are constant within it, else right before the call.
  Value stepTranspose(Value weights, WeightBuffer *buf, int64_t i, Value w);
  std::string uniqueName(StringRef base);
  /// A callable function `name` (".onnx" appended in onnx-only mode) of
  /// `body`, which returns `results`, before the program, with these
  /// argument and result attributes; recorded in onnxFunctions.
  void addFunction(Location at, StringRef name, Block *body, ValueRange results,
                   ArrayRef<DictionaryAttr> argAttrs,
                   ArrayRef<DictionaryAttr> resultAttrs);
  /// The device's buffer of stage state `name` (pipe.state arguments):
  /// persistent, initialised and saved like a parameter.
  FailureOr<Value> statePointer(Operation *at, StringRef name,
                                RankedTensorType type);
  llvm::StringMap<std::pair<Value, Type>> stateBuffers;

  // --- emission of the step's control ---
  Type ptrType() { return LLVM::LLVMPointerType::get(b.getContext()); }
  Value i64c(int64_t v) { return arith::ConstantIntOp::create(b, loc, v, 64); }
  Value i32c(int64_t v) { return arith::ConstantIntOp::create(b, loc, v, 32); }
  Value offsetPtr(Value base, Value bytes) {
    return LLVM::GEPOp::create(b, loc, ptrType(), b.getI8Type(), base,
                               ValueRange{bytes});
  }
  Value loadSlot(Value array, int64_t index) {
    Value slot = LLVM::GEPOp::create(b, loc, ptrType(), ptrType(), array,
                                     ArrayRef<LLVM::GEPArg>{(int32_t)index});
    return LLVM::LoadOp::create(b, loc, ptrType(), slot);
  }
  void call(StringRef callee, ArrayRef<Value> args);
  Value callPtr(StringRef callee, ArrayRef<Value> args);
  /// A buffer allocated at the start of the step and freed at its end.
  Value allocate(int64_t bytes);
  /// An array of `n` pointers on the stack of the step (entry block).
  Value pointerArray(size_t n);
  /// pointerArray holding `ptrs` (stored here); null when there are none.
  Value filledPointerArray(ArrayRef<Value> ptrs);
  /// callPtr(callee, args) (a receive's post), under the no-flush guard
  /// where there is one: a null request when the guard is off.
  Value postGuarded(StringRef callee, ArrayRef<Value> args);
  void callFunction(StringRef callee, const CallArrays &arrays);
  /// callFunction, recorded as a "stage" trace event when tracing is on
  /// (kind 0 forward, 1 backward, 2 weight backward, 3 update).
  void callTraced(StringRef callee, const CallArrays &arrays, int32_t kind,
                  int64_t stage, Value mb);
  Value microBatch(Operation *op);
  /// The index activation-buffer slots and tags use: the global
  /// micro-batch in a no-flush program, else the step's.
  Value ringIndex(Operation *op);
  /// `v mod n`, never negative.
  Value euclidMod(Value v, int64_t n);
  /// The weight version `clock + version` names for `op`'s micro-batch.
  Value versionOf(Operation *op, pipe::VersionClock clock, int64_t version);
  /// The pointer of version slot `slot` (i64) of parameter `i`.
  Value slotPointer(WeightBuffer &buf, int64_t i, Value slot);
  /// The pointers of the weights `op` reads: slot 0, or the version its
  /// clock names.
  SmallVector<Value> weightPointers(Operation *op, WeightBuffer &buf,
                                    std::optional<int64_t> version,
                                    pipe::VersionClock clock);
  Value ringSlot(Value buffer, Value mb);
  LogicalResult emitFinish();
  /// The buffer for value `v` an instruction defines: its activation-buffer
  /// slot when the next use saves it there, else a buffer of its own.
  Value storageFor(Value v, Value mb);
  LogicalResult lowerInstruction(Operation &op);
  /// Lowers a block of instructions (the program's, a loop body's), each
  /// receive as a post (pipert_irecv, where the pipe.recv is) and a wait
  /// (pipert_wait) deferred past the sends and receives that follow it.
  LogicalResult lowerInstructions(Block &ops);
  /// Whether the waits of pendingRecvs must be done before `op` runs.
  bool needsReceived(Operation &op);
  void waitReceived();
  LogicalResult prepareUpdate(WeightBuffer &buf, pipe::UpdateOp upd);
  LogicalResult lowerPredict(pipe::PredictOp pr);

  ModuleOp module;
  pipe::ProgramOp program;
  bool cuda, nonblockingSends, onnxOnly;
  int64_t deferRows;
  OpBuilder b;
  Location loc = UnknownLoc::get(program.getContext());

  func::FuncOp step;
  Block *entry = nullptr;
  Value ctxArg, inputsArg, persistentArg, lossArg, stepArg, comm;
  SmallVector<Value> allocations;
  int64_t allocatedBytes = 0, calleePeakBytes = 0;
  /// The step's buffers' arena (allocate), its size operand and bytes.
  Value arena, arenaSize;
  int64_t arenaBytes = 0;
  /// Where the step's own code starts (run): what runs once at the start
  /// of a step goes before it.
  Operation *codeStart = nullptr;
  /// Per forward stage function: the parameters whose transposes it takes
  /// as extra inputs, in order (stageFunction).
  llvm::StringMap<SmallVector<int64_t>> transposedParams;
  /// The step-constant transposes computed at the start of the step.
  std::map<std::pair<const void *, int64_t>, Value> stepTransposes;
  DenseMap<Value, bool> constantWeights;
  /// Per backward stage function: its deferred weight gradients.
  llvm::StringMap<SmallVector<DeferredGrad>> deferredGrads;
  /// Per weight buffer: the step buffers of its deferred gradients.
  DenseMap<Value, DeferredStore> deferredStores;
  /// Activation buffers a deferred Gemm reads a group's rows from: the
  /// depth they need (a multiple of the group, see planDeferred).
  DenseMap<Value, int64_t> ringDepthFor;
  /// Forward results a deferred Gemm reads a group's rows from: (stage,
  /// result number) → the first such result, which names the buffer of G
  /// slots (a Ring in `rings`) every forward of that stage writes it into.
  std::map<std::pair<const void *, unsigned>, Value> groupedKeys;
  /// The ring of a forward's result where it has one (groupedKeys).
  Value groupedRing(Value result);
  /// A backward's group flush not yet emitted: after the transfers that
  /// follow the backward (lowerInstructions), then emitGroupFlush.
  struct GroupFlush {
    SmallVector<DeferredGrad> *grads; // deferredGrads' entry (stable)
    Value weights;                    // deferredStores' key
    WeightBuffer *buf;
    Value slot, mb;
    bool beforeForward; // rows in a forward's grouped result
    int forwards = 0;   // forwards lowered since the backward
  };
  std::optional<GroupFlush> pendingFlush;
  void emitGroupFlush();
  /// Builds the backward stage functions before the program's buffers
  /// are lowered: their deferred gradients decide some rings' depths.
  LogicalResult planDeferred();

  /// Transfers sent as one message (planPackedTransfers): the first send
  /// or receive of each group → the group, in order; the others are
  /// lowered with it.
  DenseMap<Operation *, SmallVector<Operation *>> packedGroups;
  DenseSet<Operation *> packedMembers;
  LogicalResult planPackedTransfers();
  /// An array of i64 constants on the step's stack, filled at its entry.
  Value i64Array(ArrayRef<int64_t> values);

  SmallVector<DeviceArg> deviceInputs, devicePersistent;
  llvm::StringMap<int64_t> inputIndex; // fed input name → index
  int64_t stepIndex = -1;              // the step counter's persistent index
  DenseMap<Value, std::unique_ptr<WeightBuffer>> weightBuffers;
  DenseMap<Value, Ring> rings;
  DenseMap<Value, Value> pointers;     // program tensor value → buffer pointer
  DenseMap<Value, Value> loopIndex;    // pipe.loop index → i64
  DenseSet<Operation *> elidedSaves;   // saves computed in place
  DenseSet<Operation *> elidedReports; // losses computed in their slot
  llvm::StringMap<std::string> functions; // key → callable function name
  SmallVector<func::FuncOp> onnxFunctions;
  pipe::UpdateOp lastUpdate;
  Value lossBuffer;
  bool reportsLoss = false;
  int64_t reportedLosses = 0;
  // An evaluation's counts (pipe.report_metric): slot s's M micro-batch
  // values at metricBuffer[(s - 1) * M ...], summed into the output array.
  Value metricBuffer;
  int64_t metricSlots = 0;
  SmallVector<Value> pendingSends;
  /// Receives posted and not yet waited for: the received value and its
  /// request (null where a no-flush guard skipped the post).
  SmallVector<std::pair<Value, Value>> pendingRecvs;

  // Several pipelines: the buffers averaged with their replicas (centre in
  // a version slot), and the replicas' communicator.
  DenseSet<Value> averaged;
  DenseMap<Value, int64_t> centreSlot;
  /// Buffers a pipe.predict extrapolates along the optimizer's direction.
  DenseSet<Value> velocityPredicted;
  DenseMap<Value, pipe::UpdateOp> firstUpdates;
  Value replicaComm;
  Value pipelineComm;
  Value getReplicaComm();
  LogicalResult checkReplicaGroup(Operation *op, ArrayRef<int64_t> group);
  Value getPipelineComm();
  Value entryComm(Value &cache, StringRef getter);
  LogicalResult lowerClipGradNorm(pipe::ClipGradNormOp clip);

  // No-flush programs.
  bool noFlush = false;
  Value stepBase, totalMbs; // step*M and K*M (i64)
  /// While an instruction is lowered: whether its micro-batch is in the
  /// run; runtime calls are made under it.
  Value guard;
  int64_t activationBuffers = 0;
};

Attribute ProgramLowering::initOf(StringRef name) {
  Attribute found;
  module.walk([&](func::FuncOp f) {
    if (found)
      return WalkResult::interrupt();
    for (unsigned i = 0; i < f.getNumArguments(); ++i)
      if (auto n = f.getArgAttrOfType<StringAttr>(i, pipe::attrs::kParam))
        if (n.getValue() == name)
          if (Attribute init = f.getArgAttr(i, pipe::attrs::kInit)) {
            found = init;
            return WalkResult::interrupt();
          }
    return WalkResult::advance();
  });
  return found;
}

std::string ProgramLowering::uniqueName(StringRef base) {
  std::string name = ("__pipe_" + base).str();
  for (char &c : name)
    if (!llvm::isAlnum(c) && c != '_')
      c = '_';
  std::string candidate = name;
  for (int i = 1; module.lookupSymbol(candidate) ||
                  module.lookupSymbol(candidate + ".onnx");
       ++i)
    candidate = name + "_" + std::to_string(i);
  return candidate;
}

void ProgramLowering::addFunction(Location at, StringRef name, Block *body,
                                  ValueRange results, ArrayRef<DictionaryAttr> argAttrs,
                                  ArrayRef<DictionaryAttr> resultAttrs) {
  OpBuilder::InsertionGuard insertion(b);
  b.setInsertionPoint(program);
  auto fn = func::FuncOp::create(
      b, at, onnxOnly ? (name + ".onnx").str() : name.str(),
      b.getFunctionType(body->getArgumentTypes(), results.getTypes()));
  fn.getBody().push_back(body);
  fn.setAllArgAttrs(argAttrs);
  fn.setAllResultAttrs(resultAttrs);
  onnxFunctions.push_back(fn);
}

/// The function of a stage computation: arguments [weights (persistent),
/// accumulators (persistent, backward with weight gradients), inputs];
/// results [outputs...], then the accumulators plus the weight gradients,
/// written in place.
FailureOr<StringRef> ProgramLowering::stageFunction(Operation *call,
                                                    pipe::StageOp stage,
                                                    pipe::BackwardPart part) {
  std::string key = ("stage:" + stage.getSymName()).str();
  if (auto it = functions.find(key); it != functions.end())
    return StringRef(it->second);

  int64_t params = stage.getParams();
  bool gradients = stage.getPhase() != pipe::Phase::Forward &&
                   stage.getPhase() != pipe::Phase::BackwardInput &&
                   params > 0;
  Block &source = stage.getBody().front();
  ArrayRef<Type> argTypes = stage.getArgumentTypes();
  ArrayRef<Type> resultTypes = stage.getResultTypes();
  size_t outputs = resultTypes.size() - (gradients ? params : 0);

  auto *body = new Block();
  SmallVector<DictionaryAttr> argAttrs;
  IRMapping map;
  SmallVector<Value> accs;
  for (int64_t i = 0; i < params; ++i) {
    map.map(source.getArgument(i), body->addArgument(argTypes[i], stage.getLoc()));
    argAttrs.push_back(b.getDictionaryAttr({}));
  }
  if (gradients)
    for (int64_t i = 0; i < params; ++i) {
      accs.push_back(body->addArgument(argTypes[i], stage.getLoc()));
      argAttrs.push_back(b.getDictionaryAttr({}));
    }
  // The stage's state: persistent, after the accumulators.
  size_t firstState = argTypes.size() - stage.getNumStateArgs();
  llvm::StringMap<int64_t> stateArg;
  for (size_t i = firstState; i < argTypes.size(); ++i) {
    stateArg[stage.getArgAttrOfType<StringAttr>(i, pipe::attrs::kState)
                 .getValue()] = body->getNumArguments();
    map.map(source.getArgument(i), body->addArgument(argTypes[i], stage.getLoc()));
    argAttrs.push_back(b.getDictionaryAttr({}));
  }
  for (size_t i = params; i < firstState; ++i) {
    map.map(source.getArgument(i), body->addArgument(argTypes[i], stage.getLoc()));
    argAttrs.push_back(b.getDictionaryAttr(b.getNamedAttr(
        pipe::attrs::kInput, b.getStringAttr("in" + std::to_string(i - params)))));
  }
  OpBuilder fb(b.getContext());
  fb.setInsertionPointToEnd(body);
  OnnxBuilder ob(fb, stage.getLoc());
  SmallVector<Value> results;
  SmallVector<DictionaryAttr> resultAttrs;
  // Deferred weight gradients (see the header): a synchronous program's
  // backward with several micro-batches, each of at most deferRows rows.
  pipe::ScheduleKind kind = program.getSchedule();
  // Not a whole-batch stage (--batchnorm full-batch): its backward runs
  // once a step.
  bool mayDefer = gradients && !noFlush && program.getMicrobatches() > 1 &&
                  deferRows > 0 && pipe::getMicroBatchIndex(call).has_value() &&
                  !call->hasAttr(wholebatch::kWholeBatch) &&
                  !stage->hasAttr(wholebatch::kWholeBatch) &&
                  (kind == pipe::ScheduleKind::GPipe ||
                   kind == pipe::ScheduleKind::OneFOneB ||
                   kind == pipe::ScheduleKind::AdvanceForward);
  SmallVector<DeferredGrad> deferred;
  SmallVector<Value> deferredValues; // dY, X of each, in order
  for (Operation &op : source) {
    auto ret = dyn_cast<pipe::ReturnOp>(op);
    if (!ret) {
      fb.clone(op, map);
      continue;
    }
    // Which returned gradients are deferred: Gemms dYᵀ X first (returned
    // once, nothing else reading them), then the biases summing a deferred
    // Gemm's dY over its rows.
    DenseMap<int64_t, onnx::GemmOp> deferGemm; // parameter → its Gemm
    DenseMap<int64_t, int64_t> deferBias;      // bias parameter → weight's
    DenseMap<int64_t, bool> biasOfB;           // the bias sums B's rows
    if (mayDefer) {
      DenseMap<Value, int64_t> byA;
      int64_t group = 0;
      DenseSet<int64_t> withBias;
      auto gradient = [&](size_t i) {
        return i >= outputs && !stage.getResultAttr(i, pipe::attrs::kUpdate);
      };
      // fn(p, g) for each weight gradient g (parameter p) returned once,
      // of its accumulator's type, that nothing else in the body reads.
      auto soleGradients = [&](auto fn) {
        for (auto [i, v] : llvm::enumerate(ret.getOperands())) {
          if (!gradient(i))
            continue;
          int64_t p = int64_t(i - outputs);
          Value m = map.lookupOrDefault(v);
          if (m.use_empty() && llvm::count(ret.getOperands(), v) == 1 &&
              m.getType() == accs[p].getType())
            fn(p, m);
        }
      };
      soleGradients([&](int64_t p, Value m) {
        auto gemm = m.getDefiningOp<onnx::GemmOp>();
        if (!gemm || !isa<NoneType>(gemm.getC().getType()) || gemm.getTransA() != 1 ||
            gemm.getTransB() != 0 || gemm.getAlpha().convertToDouble() != 1.0 ||
            byA.count(gemm.getA()))
          return;
        auto a = dyn_cast<RankedTensorType>(gemm.getA().getType());
        auto x = dyn_cast<RankedTensorType>(gemm.getB().getType());
        if (!a || !x || !a.hasStaticShape() || !x.hasStaticShape() || a.getRank() != 2 ||
            x.getRank() != 2 || a.getDimSize(0) != x.getDimSize(0) ||
            !a.getElementType().isF32() || !x.getElementType().isF32())
          return;
        // One group size a function (its Gemms' rows are the micro-batch's
        // rows, but a layer may see other rows: those stay per micro-batch).
        int64_t g = deferGroup(program.getMicrobatches(), a.getDimSize(0), deferRows);
        // A group of one micro-batch only where the backward's input
        // gradients go to another device: there the Gemm goes after the
        // sends that follow it (see the header); elsewhere (one device, a
        // first stage) it would only move the Gemm and hold its rows.
        if ((g < 2 && !(transfers() && outputs > 0)) || (group && g != group))
          return;
        group = g;
        deferGemm[p] = gemm;
        byA[gemm.getA()] = p;
      });
      // A bias sums the rows of either operand (dY is A of dW = dYᵀ X, B
      // of dW = Xᵀ dY).
      DenseMap<Value, int64_t> byRows;
      for (auto [p, gemm] : deferGemm)
        for (Value v : {gemm.getA(), gemm.getB()})
          if (!byRows.count(v))
            byRows[v] = p;
      soleGradients([&](int64_t q, Value m) {
        auto red = m.getDefiningOp<onnx::ReduceToShapeOp>();
        if (!red)
          return;
        auto it = byRows.find(red->getOperand(0));
        auto type = cast<RankedTensorType>(m.getType());
        if (it == byRows.end() || withBias.count(it->second) || type.getRank() != 1 ||
            type.getDimSize(0) !=
                cast<RankedTensorType>(red->getOperand(0).getType()).getDimSize(1))
          return;
        deferBias[q] = it->second;
        biasOfB[q] = red->getOperand(0) != deferGemm[it->second].getA();
        withBias.insert(it->second);
      });
      for (auto [p, gemm] : deferGemm) {
        DeferredGrad d;
        d.param = p;
        for (auto [q, w] : deferBias)
          if (w == p) {
            d.bias = q;
            d.biasOfB = biasOfB[q];
          }
        d.a = cast<RankedTensorType>(gemm.getA().getType());
        d.b = cast<RankedTensorType>(gemm.getB().getType());
        d.group = group;
        d.gemmAttrs = gemm->getAttrDictionary();
        deferred.push_back(d);
      }
      llvm::sort(deferred, [](const DeferredGrad &x, const DeferredGrad &y) {
        return x.param < y.param;
      });
      // An operand the backward restores from an activation buffer whose
      // slots are back to back is read there by the deferred Gemm (no copy).
      // So is a result of the same micro-batch's forward in the same block
      // (a last stage's forward and backward, back to back): the forward
      // writes it into slot mb mod G of a buffer of G (groupedResults).
      auto bwdOp = dyn_cast<pipe::BackwardOp>(call);
      auto ringOf = [&](Value v) -> Value {
        auto arg = dyn_cast<BlockArgument>(v);
        if (!bwdOp || !arg || arg.getOwner() != body ||
            runtimeTensorBytes(cast<RankedTensorType>(v.getType())) % 64 != 0)
          return Value();
        for (size_t k = params; k < firstState; ++k) {
          if (map.lookupOrNull(source.getArgument(k)) != v)
            continue;
          Value in = bwdOp.getInputs()[k - params];
          // Every call of this function must find the operand there (the
          // function reads it in place): a schedule whose calls take it
          // from different places (1F1B's warm-up and steady state, say)
          // has the backward copy it into the group's buffer instead.
          // `holds(other, operand)`: the other call's operand is there too.
          auto otherCalls = [&](llvm::function_ref<bool(pipe::BackwardOp, Value)> holds) {
            bool all = true;
            call->getParentOfType<ModuleOp>()->walk([&](pipe::BackwardOp other) {
              if (other != bwdOp && other.getCalleeAttr() == bwdOp.getCalleeAttr())
                all &= holds(other, other.getInputs()[k - params]);
            });
            return all;
          };
          auto everyCall = [&](Value ring) {
            auto rf = ring.getDefiningOp<pipe::FeedOp>();
            bool same = otherCalls([&](pipe::BackwardOp, Value o) {
              auto r = o.getDefiningOp<pipe::RestoreOp>();
              auto f = o.getDefiningOp<pipe::FeedOp>();
              return (r && r.getBuffer() == ring) || (f && rf && f.getInput() == rf.getInput());
            });
            return same ? ring : Value();
          };
          if (auto restore = in.getDefiningOp<pipe::RestoreOp>())
            return everyCall(restore.getBuffer());
          // A fed input: its micro-batches' rows are back to back in the
          // mini-batch the driver filled.
          // (Not a whole-step feed: its rows are the step's, not a group's.)
          if (auto f = in.getDefiningOp<pipe::FeedOp>())
            return f->hasAttr(pipe::attrs::kWholeStep) ? Value() : everyCall(in);
          auto fwd = in.getDefiningOp<pipe::ForwardOp>();
          std::optional<pipe::MicroBatchIndex> fmb =
              fwd ? pipe::getMicroBatchIndex(fwd) : std::nullopt;
          std::optional<pipe::MicroBatchIndex> bmb = pipe::getMicroBatchIndex(call);
          if (!fwd || fwd->getBlock() != call->getBlock() || !fmb || !bmb ||
              fmb->base != bmb->base || fmb->offset != bmb->offset)
            return Value();
          // So must every other call: its micro-batch's forward result,
          // right before it (1F1B's first backward of a warm-up can read
          // its forward's result where the steady state restores it).
          bool adjacentEverywhere = otherCalls([&](pipe::BackwardOp other, Value o) {
            auto ofwd = o.getDefiningOp<pipe::ForwardOp>();
            auto omb = ofwd ? pipe::getMicroBatchIndex(ofwd) : std::nullopt;
            auto obmb = pipe::getMicroBatchIndex(other);
            return ofwd && ofwd.getCalleeAttr() == fwd.getCalleeAttr() &&
                   cast<OpResult>(o).getResultNumber() == cast<OpResult>(in).getResultNumber() &&
                   ofwd->getBlock() == other->getBlock() && omb && obmb &&
                   omb->base == obmb->base && omb->offset == obmb->offset;
          });
          if (!adjacentEverywhere)
            return Value();
          auto key = std::make_pair(fwd.getCalleeAttr().getAttr().getAsOpaquePointer(),
                                    cast<OpResult>(in).getResultNumber());
          auto [it, added] = groupedKeys.try_emplace(key, in);
          return it->second;
        }
        return Value();
      };
      for (DeferredGrad &d : deferred) {
        onnx::GemmOp gemm = deferGemm[d.param];
        d.aRing = ringOf(gemm.getA());
        d.bRing = ringOf(gemm.getB());
        if (!d.aRing)
          deferredValues.push_back(gemm.getA());
        if (!d.bRing)
          deferredValues.push_back(gemm.getB());
      }
      // The per-micro-batch Gemms and reductions are gone.
      for (auto [q, p] : deferBias)
        map.lookupOrDefault(ret.getOperand(size_t(outputs + q))).getDefiningOp()->erase();
      for (auto [p, gemm] : deferGemm)
        gemm.erase();
    }
    for (auto [i, v] : llvm::enumerate(ret.getOperands())) {
      if (i >= outputs && !stage.getResultAttr(i, pipe::attrs::kUpdate) &&
          (deferGemm.count(int64_t(i - outputs)) || deferBias.count(int64_t(i - outputs))))
        continue; // added at the end of the step (deferredFunction)
      Value mapped = map.lookupOrDefault(v);
      if (auto state =
              stage.getResultAttrOfType<StringAttr>(i, pipe::attrs::kUpdate)) {
        // The state's new value, written in place.
        results.push_back(mapped);
        resultAttrs.push_back(b.getDictionaryAttr(b.getNamedAttr(
            pipe::attrs::kUpdate,
            b.getI64IntegerAttr(stateArg.lookup(state.getValue())))));
        continue;
      }
      if (i < outputs) {
        results.push_back(mapped);
        resultAttrs.push_back(b.getDictionaryAttr(
            b.getNamedAttr(pipe::attrs::kResultBuffer, b.getI64IntegerAttr(i))));
        continue;
      }
      int64_t p = int64_t(i - outputs);
      ob.setLoc(ret.getLoc());
      // A weight gradient a Gemm computes (a linear layer's) is added by
      // that Gemm: C = the accumulator, beta = 1, written in place; no
      // gradient buffer and no Add pass over it per micro-batch.
      // Only a value returned once: the same Gemm may be the gradient of two
      // weights (Gemm(X, W1 + W2)), or a stage output too.
      auto gemm = mapped.getDefiningOp<onnx::GemmOp>();
      if (gemm && mapped.use_empty() && llvm::count(ret.getOperands(), v) == 1 &&
          isa<NoneType>(gemm.getC().getType()) &&
          gemm.getY().getType() == accs[p].getType()) {
        OpBuilder gb(gemm);
        auto fused = cast<onnx::GemmOp>(gb.clone(*gemm));
        fused->setOperand(2, accs[p]);
        fused->setAttr(fused.getBetaAttrName(), gb.getF32FloatAttr(1.0f));
        gemm.erase();
        results.push_back(fused.getY());
      } else {
        results.push_back(ob.add(accs[p], mapped));
      }
      // The accumulator's argument number: after the weights.
      resultAttrs.push_back(b.getDictionaryAttr(b.getNamedAttr(
          pipe::attrs::kUpdate, b.getI64IntegerAttr(params + p))));
    }
  }
  // The deferred gradients' dY and X, written into the micro-batch's rows
  // of the step buffers the call passes after the outputs.
  for (auto [k, v] : llvm::enumerate(deferredValues)) {
    results.push_back(v);
    resultAttrs.push_back(b.getDictionaryAttr(b.getNamedAttr(
        pipe::attrs::kResultBuffer, b.getI64IntegerAttr(int64_t(outputs + k)))));
  }
  if (ob.failed()) {
    delete body;
    return call->emitError("pipe-lower-programs: cannot build the gradient "
                           "accumulation of @")
           << stage.getSymName();
  }
  // A linear layer's forward, X Wᵀ (Gemm transB = 1 of a weight): with
  // several micro-batches, the forward takes Wᵀ as an extra input, made once
  // per step where the weights are constant within it (stepTranspose), and
  // multiplies without a transpose. The small GEMM kernel otherwise
  // transposes W on every call: ~0.3 us of a 16 x 128 x 32 product's 1.0,
  // ~2 us a micro-batch of the example transformer at 2 samples.
  SmallVector<int64_t> transposed;
  // Only where it pays and keeps the bits: on the CPU, for weights constant
  // within the step (else every call would transpose anyway), and for the
  // shapes the CPU runtime's small kernel takes with transB = 1 (it
  // multiplies the same transposed panel then; elsewhere a library would
  // sum in another order: linalg.cpp's use_small).
  auto fwdOp = dyn_cast<pipe::ForwardOp>(call);
  WeightBuffer *wbuf = nullptr;
  if (fwdOp && fwdOp.getWeights())
    if (auto it = weightBuffers.find(fwdOp.getWeights()); it != weightBuffers.end())
      wbuf = it->second.get();
  auto smallKernel = [](onnx::GemmOp gemm) {
    auto y = dyn_cast<RankedTensorType>(gemm.getY().getType());
    auto w = cast<RankedTensorType>(gemm.getB().getType());
    if (!y || !y.hasStaticShape() || !w.hasStaticShape())
      return false;
    int64_t m = y.getDimSize(0), n = w.getDimSize(0), k = w.getDimSize(1);
    int64_t work = m * n * k;
    if (k > 512 || n > 512)
      return false;
    return (n % 16 == 0 && work <= 131072) || (k <= 32 && work < 16384);
  };
  if (stage.getPhase() == pipe::Phase::Forward && program.getMicrobatches() > 1 &&
      !cuda && !noFlush && wbuf && wbuf->versions == 1 &&
      constantWithinStep(fwdOp.getWeights())) {
    DenseMap<int64_t, Value> wt;
    SmallVector<onnx::GemmOp> gemms;
    for (Operation &op : *body)
      if (auto gemm = dyn_cast<onnx::GemmOp>(op))
        if (gemm.getTransB() == 1 && gemm.getTransA() == 0)
          if (auto arg = dyn_cast<BlockArgument>(gemm.getB());
              arg && arg.getOwner() == body && int64_t(arg.getArgNumber()) < params &&
              cast<RankedTensorType>(arg.getType()).getRank() == 2 && smallKernel(gemm))
            gemms.push_back(gemm);
    for (onnx::GemmOp gemm : gemms) {
      auto arg = cast<BlockArgument>(gemm.getB());
      int64_t i = arg.getArgNumber();
      Value &t = wt[i];
      if (!t) {
        auto type = cast<RankedTensorType>(arg.getType());
        auto tType = RankedTensorType::get({type.getDimSize(1), type.getDimSize(0)},
                                           type.getElementType());
        t = body->addArgument(tType, stage.getLoc());
        argAttrs.push_back(b.getDictionaryAttr(b.getNamedAttr(
            pipe::attrs::kInput, b.getStringAttr("wt" + std::to_string(i)))));
        transposed.push_back(i);
      }
      gemm->setOperand(1, t);
      gemm->setAttr(gemm.getTransBAttrName(), fb.getI64IntegerAttr(0));
    }
  }
  func::ReturnOp::create(fb, stage.getLoc(), results);

  std::string name = uniqueName(stage.getSymName());
  if (!transposed.empty())
    transposedParams[name] = transposed;
  if (!deferred.empty())
    deferredGrads[name] = deferred;
  addFunction(stage.getLoc(), name, body, results, argAttrs, resultAttrs);
  return StringRef(functions[key] = name);
}

FailureOr<int64_t> ProgramLowering::layoutPersistent(Operation *at,
                                                     StringRef name) const {
  for (auto [i, arg] : llvm::enumerate(layout->devicePersistent))
    if (arg.name == name)
      return int64_t(i);
  return at->emitError("pipe-lower-programs: the evaluation reads '")
         << name << "', which the device's step does not hold";
}

FailureOr<Value> ProgramLowering::statePointer(Operation *at, StringRef name,
                                               RankedTensorType type) {
  auto it = stateBuffers.find(name);
  if (it != stateBuffers.end()) {
    if (it->second.second != type)
      return at->emitError("pipe-lower-programs: state '")
             << name << "' is used with types " << it->second.second << " and "
             << type;
    return it->second.first;
  }
  if (!pipertDtype(type.getElementType()))
    return at->emitError("pipe-lower-programs: state '")
           << name << "' has a type the runtime has no kernels for";
  int64_t index = devicePersistent.size();
  if (layout) {
    FailureOr<int64_t> shared = layoutPersistent(at, name);
    if (failed(shared))
      return failure();
    index = *shared;
  } else {
    Attribute init = initOf(name);
    if (!init)
      return at->emitError("pipe-lower-programs: state '")
             << name << "' has no initial value (pipe.init)";
    devicePersistent.push_back({name.str(), "param", type, init});
  }
  OpBuilder::InsertionGuard insertion(b);
  b.setInsertionPointToStart(entry);
  Value ptr = loadSlot(persistentArg, index);
  stateBuffers[name] = {ptr, type};
  return ptr;
}

/// `acc += g` for pipe.accumulate: arguments [acc (persistent), g (input)].
StringRef ProgramLowering::accumulateFunction(RankedTensorType type) {
  std::string typeName;
  llvm::raw_string_ostream os(typeName);
  os << type;
  std::string key = "accumulate:" + typeName;
  if (auto it = functions.find(key); it != functions.end())
    return it->second;
  auto *body = new Block();
  Value acc = body->addArgument(type, program.getLoc());
  Value g = body->addArgument(type, program.getLoc());
  OpBuilder fb(b.getContext());
  fb.setInsertionPointToEnd(body);
  OnnxBuilder ob(fb, program.getLoc());
  Value sum = ob.add(acc, g);
  func::ReturnOp::create(fb, program.getLoc(), sum);
  std::string name = uniqueName("accumulate_" + typeName);
  OpBuilder::InsertionGuard insertion(b);
  b.setInsertionPoint(program);
  auto fn = func::FuncOp::create(b, program.getLoc(),
                                 onnxOnly ? name + ".onnx" : name,
                                 b.getFunctionType({type, type}, {type}));
  fn.getBody().push_back(body);
  fn.setArgAttrs(1, b.getDictionaryAttr(
                        b.getNamedAttr(pipe::attrs::kInput, b.getStringAttr("g"))));
  fn.setResultAttrs(0, b.getDictionaryAttr(b.getNamedAttr(
                           pipe::attrs::kUpdate, b.getI64IntegerAttr(0))));
  onnxFunctions.push_back(fn);
  return functions[key] = name;
}

StringRef ProgramLowering::deferredFunction(StringRef backward,
                                            ArrayRef<DeferredGrad> grads,
                                            const WeightBuffer &buf) {
  std::string key = ("deferred:" + backward).str();
  if (auto it = functions.find(key); it != functions.end())
    return it->second;
  Location at = program.getLoc();
  auto *body = new Block();
  SmallVector<DictionaryAttr> argAttrs, resultAttrs;
  // Persistent: each gradient's accumulator, then its bias's.
  SmallVector<Value> accs;
  for (const DeferredGrad &d : grads) {
    accs.push_back(body->addArgument(buf.types[d.param], at));
    argAttrs.push_back(b.getDictionaryAttr({}));
    if (d.bias >= 0) {
      accs.push_back(body->addArgument(buf.types[d.bias], at));
      argAttrs.push_back(b.getDictionaryAttr({}));
    }
  }
  // Inputs: the Gemm's A and B rows of all micro-batches, in micro-batch
  // order.
  SmallVector<Value> rows;
  for (auto [k, d] : llvm::enumerate(grads)) {
    for (RankedTensorType t : {d.a, d.b}) {
      auto whole = RankedTensorType::get({t.getDimSize(0) * d.group, t.getDimSize(1)},
                                         t.getElementType());
      rows.push_back(body->addArgument(whole, at));
      argAttrs.push_back(b.getDictionaryAttr(b.getNamedAttr(
          pipe::attrs::kInput, b.getStringAttr("rows" + std::to_string(rows.size() - 1)))));
    }
  }
  OpBuilder fb(b.getContext());
  fb.setInsertionPointToEnd(body);
  OnnxBuilder ob(fb, at);
  SmallVector<Value> results;
  int64_t acc = 0;
  for (auto [k, d] : llvm::enumerate(grads)) {
    Value ra = rows[2 * k], rb = rows[2 * k + 1];
    // acc += Aᵀ B over all rows: the backward's Gemm with C = the
    // accumulator, beta = 1 (written in place).
    NamedAttrList attrs(d.gemmAttrs);
    attrs.set("beta", fb.getF32FloatAttr(1.0f));
    OperationState state(at, onnx::GemmOp::getOperationName());
    state.addOperands({ra, rb, accs[acc]});
    state.addTypes(buf.types[d.param]);
    state.addAttributes(attrs);
    results.push_back(fb.create(state)->getResult(0));
    resultAttrs.push_back(b.getDictionaryAttr(
        b.getNamedAttr(pipe::attrs::kUpdate, b.getI64IntegerAttr(acc))));
    ++acc;
    if (d.bias >= 0) {
      results.push_back(
          ob.add(accs[acc], ob.reduceToShape(d.biasOfB ? rb : ra, buf.types[d.bias])));
      resultAttrs.push_back(b.getDictionaryAttr(
          b.getNamedAttr(pipe::attrs::kUpdate, b.getI64IntegerAttr(acc))));
      ++acc;
    }
  }
  func::ReturnOp::create(fb, at, results);
  std::string name = uniqueName(("deferred_" + backward).str());
  addFunction(at, name, body, results, argAttrs, resultAttrs);
  return functions[key] = name;
}

StringRef ProgramLowering::transposeFunction(RankedTensorType type) {
  std::string typeName;
  llvm::raw_string_ostream os(typeName);
  os << type;
  std::string key = "transpose:" + typeName;
  if (auto it = functions.find(key); it != functions.end())
    return it->second;
  auto tType = RankedTensorType::get({type.getDimSize(1), type.getDimSize(0)},
                                     type.getElementType());
  auto *body = new Block();
  Value w = body->addArgument(type, program.getLoc());
  OpBuilder fb(b.getContext());
  fb.setInsertionPointToEnd(body);
  Value t = onnx::TransposeOp::create(fb, program.getLoc(), tType, w,
                                      fb.getDenseI64ArrayAttr({1, 0}));
  func::ReturnOp::create(fb, program.getLoc(), t);
  std::string name = uniqueName("transpose_" + typeName);
  OpBuilder::InsertionGuard insertion(b);
  b.setInsertionPoint(program);
  auto fn = func::FuncOp::create(b, program.getLoc(),
                                 onnxOnly ? name + ".onnx" : name,
                                 b.getFunctionType({type}, {tType}));
  fn.getBody().push_back(body);
  fn.setArgAttrs(0, b.getDictionaryAttr(
                        b.getNamedAttr(pipe::attrs::kInput, b.getStringAttr("w"))));
  fn.setResultAttrs(0, b.getDictionaryAttr(b.getNamedAttr(
                           pipe::attrs::kResultBuffer, b.getI64IntegerAttr(0))));
  onnxFunctions.push_back(fn);
  return functions[key] = name;
}

bool ProgramLowering::constantWithinStep(Value weights) {
  if (auto it = constantWeights.find(weights); it != constantWeights.end())
    return it->second;
  bool constant = !noFlush;
  Block &top = program.getInstructions();
  // The instruction of the program's own block that holds `op`.
  auto topLevel = [&](Operation *op) {
    while (op && op->getBlock() != &top)
      op = op->getParentOp();
    return op;
  };
  Operation *lastForward = nullptr;
  SmallVector<Operation *> writers;
  for (Operation *user : weights.getUsers()) {
    if (isa<pipe::ForwardOp>(user)) {
      Operation *t = topLevel(user);
      if (t && (!lastForward || lastForward->isBeforeInBlock(t)))
        lastForward = t;
      continue;
    }
    // Readers of the weights, writers of their gradients only.
    if (isa<pipe::BackwardOp, pipe::ZeroGradOp, pipe::AccumulateOp, pipe::AllReduceOp>(user))
      continue;
    writers.push_back(user);
  }
  for (Operation *w : writers)
    if (!isa<pipe::UpdateOp>(w) || w->getBlock() != &top ||
        (lastForward && !lastForward->isBeforeInBlock(w)))
      constant = false;
  return constantWeights[weights] = constant;
}

Value ProgramLowering::stepTranspose(Value weights, WeightBuffer *buf, int64_t i, Value w) {
  auto type = cast<RankedTensorType>(buf->types[i]);
  StringRef fn = transposeFunction(type);
  int64_t bytes = runtimeTensorBytes(type);
  // Slot 0 is what a forward reads only with a single version.
  if (buf->versions != 1 || !constantWithinStep(weights)) {
    Value t = allocate(bytes);
    CallArrays arrays;
    arrays.inputs.push_back(w);
    arrays.outputs.push_back(t);
    callFunction(fn, arrays);
    return t;
  }
  Value &t = stepTransposes[{weights.getAsOpaquePointer(), i}];
  if (!t) {
    t = allocate(bytes);
    OpBuilder::InsertionGuard insertion(b);
    Value savedGuard = guard;
    guard = Value();
    b.setInsertionPoint(codeStart);
    CallArrays arrays;
    arrays.inputs.push_back(loadSlot(persistentArg, buf->slotIndex[i][0]));
    arrays.outputs.push_back(t);
    callFunction(fn, arrays);
    guard = savedGuard;
  }
  return t;
}

// The groups pipe-pack-transfers marked (pipe.pack_next on each transfer
// that travels with the next one): one message per group.
LogicalResult ProgramLowering::planPackedTransfers() {
  // The peer packs what the marks say: a mark this device cannot follow is
  // an error, never a single message where the peer expects one group.
  WalkResult result = program.walk([&](Operation *op) -> WalkResult {
    if (!isa<pipe::SendOp, pipe::RecvOp>(op) || packedMembers.contains(op) ||
        !op->hasAttr(pipe::attrs::kPackNext))
      return WalkResult::advance();
    if (nonblockingSends)
      return op->emitError("pipe-lower-programs: nonblocking-sends cannot lower a "
                           "transfer marked pipe.pack_next (pipe-pack-transfers); "
                           "lower the programs without the marks");
    SmallVector<Operation *> group = {op};
    for (Operation *cur = op; cur->hasAttr(pipe::attrs::kPackNext);) {
      Operation *next = pipe::adjacentTransfer(cur, true);
      if (!next)
        return cur->emitError("pipe-lower-programs: this transfer is marked "
                              "pipe.pack_next but no transfer to the same peer "
                              "for the same micro-batch follows it (the program "
                              "changed after pipe-pack-transfers): rerun "
                              "pipe-pack-transfers on every device's program");
      group.push_back(next);
      cur = next;
    }
    for (Operation *member : ArrayRef(group).drop_front())
      packedMembers.insert(member);
    packedGroups[op] = std::move(group);
    return WalkResult::advance();
  });
  return failure(result.wasInterrupted());
}

Value ProgramLowering::i64Array(ArrayRef<int64_t> values) {
  OpBuilder::InsertionGuard insertion(b);
  b.setInsertionPointToStart(entry);
  Value array = LLVM::AllocaOp::create(b, loc, ptrType(), b.getI64Type(),
                                       i64c(int64_t(values.size())), 8);
  for (auto [i, v] : llvm::enumerate(values)) {
    Value slot = LLVM::GEPOp::create(b, loc, ptrType(), b.getI64Type(), array,
                                     ArrayRef<LLVM::GEPArg>{(int32_t)i});
    LLVM::StoreOp::create(b, loc, i64c(v), slot);
  }
  return array;
}

/// The optimizer step of one weight buffer: the onnx optimizer op
/// pipe-add-optimizer would build, on the accumulated gradient times
/// grad_scale. Arguments (all persistent): parameters, accumulators,
/// optimizer state, the step counter; results: the new parameters and
/// state, and the next count when `countsStep`. `stateIndex` receives the
/// device persistent index of each state argument, in order.
FailureOr<StringRef>
ProgramLowering::updateFunction(pipe::UpdateOp op, WeightBuffer &buf,
                                bool countsStep,
                                SmallVector<int64_t> &stateIndex) {
  if (op.getAnnealSteps() && !noFlush)
    return op.emitError("pipe-lower-programs: anneal_steps counts the updates "
                        "of a no-flush program (PipeMare)");
  auto *body = new Block();
  SmallVector<DictionaryAttr> argAttrs;
  SmallVector<Value> results;
  SmallVector<DictionaryAttr> resultAttrs;
  auto named = [&](StringRef key, StringRef value) {
    return b.getNamedAttr(key, b.getStringAttr(value));
  };
  auto updateOf = [&](StringRef name) {
    return b.getDictionaryAttr(named(pipe::attrs::kUpdate, name));
  };
  Location l = op.getLoc();
  SmallVector<Value> params, grads;
  for (auto [name, type] : llvm::zip(buf.names, buf.types)) {
    params.push_back(body->addArgument(type, l));
    argAttrs.push_back(b.getDictionaryAttr(named(pipe::attrs::kParam, name)));
  }
  for (RankedTensorType type : buf.types) {
    grads.push_back(body->addArgument(type, l));
    argAttrs.push_back(b.getDictionaryAttr({}));
  }
  pipe::OptimizerKind kind = op.getKind();
  SmallVector<StringRef> slots;
  switch (kind) {
  case pipe::OptimizerKind::Momentum:
  case pipe::OptimizerKind::Nesterov:
    slots = {"momentum_buffer"};
    break;
  case pipe::OptimizerKind::Adam:
  case pipe::OptimizerKind::AdamW:
    slots = {"exp_avg", "exp_avg_sq"};
    break;
  case pipe::OptimizerKind::Adagrad:
    slots = {"sum"};
    break;
  default:
    break;
  }
  // SpecTrain predicts plain SGD along its last gradient; PipeMare's
  // discrepancy correction along the running weight velocity.
  bool keepsGrad = kind == pipe::OptimizerKind::SGD &&
                   velocityPredicted.contains(op.getWeights());
  if (keepsGrad)
    slots.push_back("last_grad");
  std::optional<double> gamma;
  if (auto d = op.getDiscrepancy()) {
    gamma = d->convertToDouble();
    slots.push_back("delta");
  }
  for (StringRef slot : slots)
    buf.stateSlots.push_back(slot.str());
  SmallVector<SmallVector<Value>> state(params.size());
  for (auto [i, type] : llvm::enumerate(buf.types))
    for (StringRef slot : slots) {
      std::string name = buf.names[i] + "." + slot.str();
      auto zeros =
          DenseElementsAttr::get(type, b.getZeroAttr(type.getElementType()));
      state[i].push_back(body->addArgument(type, l));
      argAttrs.push_back(b.getDictionaryAttr(named(pipe::attrs::kState, name)));
      stateIndex.push_back(devicePersistent.size());
      devicePersistent.push_back({name, "state", type, zeros});
    }
  auto i64Scalar = RankedTensorType::get({}, b.getI64Type());
  Value count = body->addArgument(i64Scalar, l);
  argAttrs.push_back(b.getDictionaryAttr(named(pipe::attrs::kState, "step")));

  OpBuilder fb(b.getContext());
  fb.setInsertionPointToEnd(body);
  OnnxBuilder ob(fb, l);
  Type f32 = b.getF32Type();
  LrSchedule schedule;
  if (DictionaryAttr dict = op.getLrScheduleAttr()) {
    std::string error;
    schedule = LrSchedule::fromAttr(dict, error);
    if (error.empty())
      error = schedule.check(op.getLr().convertToDouble());
    if (!error.empty()) {
      delete body;
      return op.emitError("pipe-lower-programs: ") << error;
    }
  }
  Value rate = scheduledRate(ob, count, op.getLr().convertToDouble(), schedule);
  if (auto scale = op.getLrScale()) {
    // lr * scale^(1 - min(k/K, 1)), k the updates before this one (PipeMare
    // T1); min(x, 1) = x - relu(x - 1). Without anneal_steps, lr * scale.
    Value exponent = ob.scalar(f32, 1.0);
    if (auto steps = op.getAnnealSteps()) {
      Value k = ob.create<onnx::CastOp>(
          {count}, {ob.i64Attr("to", 1 /* TensorProto.FLOAT */)});
      Value x = ob.div(k, ob.scalar(f32, double(*steps)));
      Value over = ob.create<onnx::ReluOp>({ob.sub(x, ob.scalar(f32, 1.0))});
      exponent = ob.sub(exponent, ob.sub(x, over));
    }
    rate = ob.mul(rate, ob.create<onnx::PowOp>(
                            {ob.scalar(f32, scale->convertToDouble()), exponent}));
  }
  double wd = op.getWeightDecay() ? op.getWeightDecay()->convertToDouble() : 0.0;
  Value nextCount = ob.add(count, ob.scalarI64(1));
  for (auto [i, x] : llvm::enumerate(params)) {
    Value g = grads[i];
    if (auto scale = op.getGradScale())
      if (scale->convertToDouble() != 1.0)
        g = ob.mul(g, ob.scalar(f32, scale->convertToDouble()));
    SmallVector<Value> outs;
    switch (kind) {
    case pipe::OptimizerKind::SGD:
      outs.push_back(ob.create<onnx::SGDOp>({rate, x, g},
                                            {ob.f32Attr("weight_decay", wd)}));
      break;
    case pipe::OptimizerKind::Momentum:
    case pipe::OptimizerKind::Nesterov: {
      double damp =
          op.getDampening() ? op.getDampening()->convertToDouble() : 0.0;
      Operation *u = ob.build<onnx::MomentumOp>(
          {rate, count, x, g, state[i][0]},
          {ob.f32Attr("alpha", op.getMomentum()->convertToDouble()),
           ob.f32Attr("beta", 1.0 - damp),
           ob.attr("mode",
                   b.getStringAttr(kind == pipe::OptimizerKind::Nesterov
                                       ? "nesterov"
                                       : "standard")),
           ob.f32Attr("norm_coefficient", wd)},
          2);
      outs.append(u->result_begin(), u->result_end());
      break;
    }
    case pipe::OptimizerKind::Adam:
    case pipe::OptimizerKind::AdamW: {
      double decoupled = 0.0;
      if (kind == pipe::OptimizerKind::AdamW)
        decoupled = wd;
      else if (wd != 0)
        g = ob.add(g, ob.mul(x, ob.scalar(f32, wd)));
      Operation *u = ob.build<onnx::AdamWOp>(
          {rate, nextCount, x, g, state[i][0], state[i][1]},
          {ob.f32Attr("beta1", op.getBeta1()->convertToDouble()),
           ob.f32Attr("beta2", op.getBeta2()->convertToDouble()),
           ob.f32Attr("epsilon", op.getEpsilon()->convertToDouble()),
           ob.f32Attr("weight_decay", decoupled)},
          3);
      outs.append(u->result_begin(), u->result_end());
      break;
    }
    case pipe::OptimizerKind::Adagrad: {
      Operation *u = ob.build<onnx::AdagradOp>(
          {rate, count, x, g, state[i][0]},
          {ob.f32Attr("decay_factor", 0.0),
           ob.f32Attr("epsilon", op.getEpsilon()->convertToDouble()),
           ob.f32Attr("norm_coefficient", wd)},
          2);
      outs.append(u->result_begin(), u->result_end());
      break;
    }
    }
    if (keepsGrad)
      outs.push_back(g);
    if (gamma) {
      // δ ← γδ + (1-γ)(W(k+1) - W(k)).
      Value delta = state[i].back();
      outs.push_back(ob.add(ob.mul(delta, ob.scalar(f32, *gamma)),
                            ob.mul(ob.sub(outs[0], x), ob.scalar(f32, 1.0 - *gamma))));
    }
    if (ob.failed()) {
      delete body;
      return op.emitError("pipe-lower-programs: cannot build the update");
    }
    results.push_back(outs[0]);
    resultAttrs.push_back(updateOf(buf.names[i]));
    for (auto [slot, value] : llvm::zip(slots, ArrayRef(outs).drop_front())) {
      results.push_back(value);
      resultAttrs.push_back(updateOf(buf.names[i] + "." + slot.str()));
    }
  }
  if (countsStep) {
    results.push_back(nextCount);
    resultAttrs.push_back(updateOf("step"));
  }
  func::ReturnOp::create(fb, l, results);

  std::string name = uniqueName("update_stage" + std::to_string(buf.stage));
  addFunction(l, name, body, results, argAttrs, resultAttrs);
  functions["update:" + name] = name;
  return StringRef(functions["update:" + name]);
}

void ProgramLowering::call(StringRef callee, ArrayRef<Value> args) {
  if (!guard) {
    callRuntime(b, loc, module, callee, args);
    return;
  }
  auto ifOp = scf::IfOp::create(b, loc, guard, /*withElseRegion=*/false);
  OpBuilder::InsertionGuard g(b);
  b.setInsertionPoint(ifOp.thenBlock()->getTerminator());
  callRuntime(b, loc, module, callee, args);
}

Value ProgramLowering::callPtr(StringRef callee, ArrayRef<Value> args) {
  return callRuntime(b, loc, module, callee, args, {ptrType()}).getResult(0);
}

// The step's buffers (rings, accumulators, the losses) live the whole step:
// they are places in one arena, allocated at entry and freed at the end, one
// pipert_alloc/pipert_free a step instead of a pair per buffer (the example
// transformer's 2-stage programs had ~60). Its size, known once the
// program is lowered, is set then.
Value ProgramLowering::allocate(int64_t bytes) {
  bytes = std::max<int64_t>(bytes, 1);
  OpBuilder::InsertionGuard insertion(b);
  if (!arena) {
    b.setInsertionPointToStart(entry);
    arenaSize = arith::ConstantOp::create(b, loc, b.getI64IntegerAttr(0));
    arena = callPtr("pipert_alloc", {ctxArg, arenaSize});
    allocations.push_back(arena);
  }
  b.setInsertionPointAfter(arena.getDefiningOp());
  Value p = LLVM::GEPOp::create(b, loc, ptrType(), b.getI8Type(), arena,
                                ArrayRef<LLVM::GEPArg>{i64c(arenaBytes)});
  // Each buffer 64-byte aligned, as pipert_alloc's blocks are.
  arenaBytes += (bytes + 63) / 64 * 64;
  arenaSize.getDefiningOp<arith::ConstantOp>().setValueAttr(
      b.getI64IntegerAttr(arenaBytes));
  allocatedBytes += bytes;
  return p;
}

Value ProgramLowering::pointerArray(size_t n) {
  OpBuilder::InsertionGuard insertion(b);
  b.setInsertionPointToStart(entry);
  return LLVM::AllocaOp::create(b, loc, ptrType(), ptrType(),
                                i64c(std::max<size_t>(n, 1)), 8);
}

Value ProgramLowering::filledPointerArray(ArrayRef<Value> ptrs) {
  if (ptrs.empty())
    return LLVM::ZeroOp::create(b, loc, ptrType());
  Value array = pointerArray(ptrs.size());
  for (auto [i, p] : llvm::enumerate(ptrs)) {
    Value slot = LLVM::GEPOp::create(b, loc, ptrType(), ptrType(), array,
                                     ArrayRef<LLVM::GEPArg>{(int32_t)i});
    LLVM::StoreOp::create(b, loc, p, slot);
  }
  return array;
}

Value ProgramLowering::postGuarded(StringRef callee, ArrayRef<Value> args) {
  if (!guard)
    return callPtr(callee, args);
  auto ifOp = scf::IfOp::create(b, loc, TypeRange{ptrType()}, guard,
                                /*withElseRegion=*/true);
  OpBuilder::InsertionGuard g(b);
  b.setInsertionPointToStart(ifOp.thenBlock());
  scf::YieldOp::create(b, loc, callPtr(callee, args));
  b.setInsertionPointToStart(ifOp.elseBlock());
  scf::YieldOp::create(b, loc, Value(LLVM::ZeroOp::create(b, loc, ptrType())));
  return ifOp.getResult(0);
}

void ProgramLowering::callFunction(StringRef callee, const CallArrays &arrays) {
  Value in = filledPointerArray(arrays.inputs), pers = filledPointerArray(arrays.persistent),
        out = filledPointerArray(arrays.outputs);
  call(callee, {ctxArg, in, pers, out, stepArg});
}

void ProgramLowering::callTraced(StringRef callee, const CallArrays &arrays,
                                 int32_t kind, int64_t stage, Value mb) {
  Value begin = callRuntime(b, loc, module, "pipert_trace_stage_begin", {ctxArg},
                            {b.getI64Type()})
                    .getResult(0);
  callFunction(callee, arrays);
  call("pipert_trace_stage_end",
       {ctxArg, i32c(kind), i64c(stage), mb ? mb : i64c(0), begin});
}

Value ProgramLowering::microBatch(Operation *op) {
  std::optional<pipe::MicroBatchIndex> mb = pipe::getMicroBatchIndex(op);
  assert(mb && "an instruction without a micro-batch");
  if (!mb->base)
    return i64c(mb->offset);
  Value k = loopIndex.lookup(mb->base);
  if (mb->offset == 0)
    return k;
  return arith::AddIOp::create(b, loc, k, i64c(mb->offset));
}

Value ProgramLowering::ringIndex(Operation *op) {
  Value mb = microBatch(op);
  if (!noFlush)
    return mb;
  return arith::AddIOp::create(b, loc, stepBase, mb);
}

Value ProgramLowering::euclidMod(Value v, int64_t n) {
  if (n == 1)
    return i64c(0);
  Value r = arith::RemSIOp::create(b, loc, v, i64c(n));
  Value negative = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt, r,
                                         i64c(0));
  return arith::SelectOp::create(b, loc, negative,
                                 arith::AddIOp::create(b, loc, r, i64c(n)), r);
}

Value ProgramLowering::versionOf(Operation *op, pipe::VersionClock clock,
                                 int64_t version) {
  Value u = ringIndex(op);
  Value base = u;
  if (clock == pipe::VersionClock::Step) {
    // floor(u / M); u < 0 only where the instruction is skipped.
    base = arith::FloorDivSIOp::create(b, loc, u,
                                       i64c(program.getMicrobatches()));
  }
  if (version == 0)
    return base;
  return arith::AddIOp::create(b, loc, base, i64c(version));
}

Value ProgramLowering::slotPointer(WeightBuffer &buf, int64_t i, Value slot) {
  Value ptr = loadSlot(persistentArg, buf.slotIndex[i][0]);
  for (int64_t v = 1; v < buf.versions; ++v) {
    Value is = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, slot,
                                     i64c(v));
    ptr = arith::SelectOp::create(b, loc, is,
                                  loadSlot(persistentArg, buf.slotIndex[i][v]),
                                  ptr);
  }
  return ptr;
}

SmallVector<Value>
ProgramLowering::weightPointers(Operation *op, WeightBuffer &buf,
                                std::optional<int64_t> version,
                                pipe::VersionClock clock) {
  SmallVector<Value> ptrs;
  if (buf.evalNewest && buf.versions > 1) {
    // After `step` steps (the evaluation's step argument; past the run, its
    // drain), the last update was of micro-batch u = (step - 1) * M + last,
    // at most K * M - 1: it wrote slot clock(u) + version + 1. None yet
    // (u < 0): every slot holds W(0).
    if (buf.evalSlot) {
      for (size_t i = 0; i < buf.names.size(); ++i)
        ptrs.push_back(slotPointer(buf, i, buf.evalSlot));
      return ptrs;
    }
    {
    OpBuilder::InsertionGuard atEntry(b);
    b.setInsertionPoint(codeStart);
    auto [clockCode, updateVersion, last] = *buf.evalNewest;
    int64_t m = program.getMicrobatches();
    Value steps = callRuntime(b, loc, module, "pipert_run_steps", {ctxArg},
                              {b.getI64Type()})
                      .getResult(0);
    Value u = arith::AddIOp::create(
        b, loc,
        arith::MulIOp::create(b, loc, arith::SubIOp::create(b, loc, stepArg, i64c(1)),
                              i64c(m)),
        i64c(last));
    Value end = arith::SubIOp::create(b, loc, arith::MulIOp::create(b, loc, steps, i64c(m)),
                                      i64c(1));
    u = arith::MinSIOp::create(b, loc, u, end);
    Value base = u;
    if (pipe::VersionClock(clockCode) == pipe::VersionClock::Step)
      base = arith::FloorDivSIOp::create(b, loc, u, i64c(m));
    Value newest = euclidMod(arith::AddIOp::create(b, loc, base, i64c(updateVersion + 1)),
                             buf.versions);
    Value any = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::sge, u, i64c(0));
    buf.evalSlot = arith::SelectOp::create(b, loc, any, newest, i64c(0));
    }
    return weightPointers(op, buf, version, clock);
  }
  if (clock == pipe::VersionClock::Slot || buf.versions == 1) {
    // A fixed slot (SpecTrain's and PipeMare's predicted weights in 1).
    int64_t slot = clock == pipe::VersionClock::Slot ? version.value_or(0) : 0;
    for (size_t i = 0; i < buf.names.size(); ++i)
      ptrs.push_back(loadSlot(persistentArg, buf.slotIndex[i][slot]));
    return ptrs;
  }
  Value slot = euclidMod(versionOf(op, clock, version.value_or(0)), buf.versions);
  for (size_t i = 0; i < buf.names.size(); ++i)
    ptrs.push_back(slotPointer(buf, i, slot));
  return ptrs;
}

Value ProgramLowering::ringSlot(Value buffer, Value mb) {
  const Ring &ring = rings[buffer];
  Value slot = ring.depth == 1 ? i64c(0)
               : noFlush       ? euclidMod(mb, ring.depth)
                         : arith::RemUIOp::create(b, loc, mb, i64c(ring.depth))
                               .getResult();
  return offsetPtr(ring.base,
                   arith::MulIOp::create(b, loc, slot, i64c(ring.bytes)));
}

Value ProgramLowering::groupedRing(Value result) {
  auto fwd = result.getDefiningOp<pipe::ForwardOp>();
  if (!fwd)
    return Value();
  auto it = groupedKeys.find(
      std::make_pair(fwd.getCalleeAttr().getAttr().getAsOpaquePointer(),
                     cast<OpResult>(result).getResultNumber()));
  return it == groupedKeys.end() ? Value() : it->second;
}

Value ProgramLowering::storageFor(Value v, Value mb) {
  if (Value ring = groupedRing(v); ring && rings.count(ring))
    return ringSlot(ring, mb);
  Operation *def = v.getDefiningOp();
  std::optional<pipe::MicroBatchIndex> defMb = pipe::getMicroBatchIndex(def);
  for (Operation *user : v.getUsers())
    if (auto save = dyn_cast<pipe::SaveOp>(user)) {
      std::optional<pipe::MicroBatchIndex> saveMb =
          pipe::getMicroBatchIndex(save);
      if (defMb && saveMb->base == defMb->base &&
          saveMb->offset == defMb->offset && !elidedSaves.count(save) &&
          save.getValue() == v) {
        elidedSaves.insert(save);
        return ringSlot(save.getBuffer(), mb);
      }
    }
  // A micro-batch's loss that only its report reads: computed in its float
  // of the step's losses (no copy a micro-batch).
  if (v.hasOneUse() && lossBuffer && defMb)
    if (auto rep = dyn_cast<pipe::ReportLossOp>(*v.getUsers().begin())) {
      std::optional<pipe::MicroBatchIndex> repMb = pipe::getMicroBatchIndex(rep);
      auto type = cast<RankedTensorType>(v.getType());
      if (repMb && repMb->base == defMb->base && repMb->offset == defMb->offset &&
          type.getElementType().isF32() && type.getNumElements() == 1) {
        elidedReports.insert(rep);
        return offsetPtr(lossBuffer,
                         arith::MulIOp::create(b, loc, microBatch(def), i64c(4)));
      }
    }
  return allocate(runtimeTensorBytes(cast<RankedTensorType>(v.getType())));
}

/// The step counter and the buffer's optimizer step function (built by its
/// first update, or by a pipe.predict that reads the update's state before
/// it); every update of one buffer must agree on its hyper-parameters.
LogicalResult ProgramLowering::prepareUpdate(WeightBuffer &buf,
                                             pipe::UpdateOp upd) {
  if (stepIndex < 0) {
    auto i64Scalar = RankedTensorType::get({}, b.getI64Type());
    stepIndex = devicePersistent.size();
    devicePersistent.push_back(
        {"step", "state", i64Scalar,
         DenseElementsAttr::get(i64Scalar, b.getI64IntegerAttr(0))});
  }
  // The hyper-parameters, without where the update runs.
  NamedAttrList hyper(upd->getAttrDictionary());
  for (StringRef where : {"mb", "version", "version_clock", "operandSegmentSizes"})
    hyper.erase(where);
  DictionaryAttr attrs = hyper.getDictionary(upd.getContext());
  if (buf.updateFn.empty()) {
    // Every update of a no-flush program is one optimizer step.
    FailureOr<StringRef> built =
        updateFunction(upd, buf, noFlush || upd == lastUpdate, buf.stateIndex);
    if (failed(built))
      return failure();
    buf.updateFn = built->str();
    buf.updateAttrs = attrs;
  } else if (attrs != buf.updateAttrs) {
    return upd.emitError("pipe-lower-programs: the updates of one weight "
                         "buffer must use the same optimizer and "
                         "hyper-parameters");
  }
  return success();
}

/// pipe.predict: slot `to` = slot `from` - gap * lr * direction, per
/// parameter (runtime kernels on the buffer's persistent state).
LogicalResult ProgramLowering::lowerPredict(pipe::PredictOp pr) {
  WeightBuffer &buf = *weightBuffers[pr.getWeights()];
  if (!buf.firstUpdate)
    return pr.emitError("pipe-lower-programs: pipe.predict needs an update "
                        "of its buffer in the program");
  if (failed(prepareUpdate(buf, buf.firstUpdate)))
    return failure();
  if (pr.getFrom() >= buf.versions || pr.getTo() >= buf.versions)
    return pr.emitError("pipe-lower-programs: pipe.predict names a slot the "
                        "buffer does not have");
  pipe::UpdateOp upd = buf.firstUpdate;
  bool velocity = pr.getDirection() == pipe::PredictDirection::Velocity;
  auto slotOf = [&](StringRef name) -> int64_t {
    auto it = llvm::find(buf.stateSlots, name);
    return it == buf.stateSlots.end() ? -1 : it - buf.stateSlots.begin();
  };
  pipe::OptimizerKind kind = upd.getKind();
  bool adam = kind == pipe::OptimizerKind::Adam ||
              kind == pipe::OptimizerKind::AdamW;
  SmallVector<int64_t> directionSlots;
  if (!velocity)
    directionSlots = {slotOf("delta")};
  else if (adam)
    directionSlots = {slotOf("exp_avg"), slotOf("exp_avg_sq")};
  else if (kind == pipe::OptimizerKind::SGD)
    directionSlots = {slotOf("last_grad")};
  else
    directionSlots = {slotOf("momentum_buffer")};
  if (llvm::is_contained(directionSlots, -1))
    return pr.emitError("pipe-lower-programs: the update of this buffer keeps "
                        "no ")
           << (velocity ? "step direction" : "weight velocity δ")
           << " for pipe.predict";
  for (auto [i, type] : llvm::enumerate(buf.types))
    if (!type.getElementType().isF32())
      return pr.emitError("pipe-lower-programs: pipe.predict of ")
             << type << ": the runtime predicts f32 weights only";

  // All of it only for micro-batches of the run.
  OpBuilder::InsertionGuard insertion(b);
  if (guard) {
    auto ifOp = scf::IfOp::create(b, loc, guard, /*withElseRegion=*/false);
    b.setInsertionPoint(ifOp.thenBlock()->getTerminator());
  }
  Value savedGuard = guard;
  guard = Value();
  float gap = float(pr.getGap());
  float lr = velocity ? float(pr.getLr()->convertToDouble()) : 1.0f;
  Value count;
  if (velocity && adam) {
    // Adam's bias corrections need the update count (on the device).
    Value host;
    {
      // In the entry block: a loop iteration must not grow the stack.
      OpBuilder::InsertionGuard atEntry(b);
      b.setInsertionPointToStart(entry);
      host = LLVM::AllocaOp::create(b, loc, ptrType(), b.getI64Type(),
                                    i64c(1), 8);
    }
    call("pipert_copy_to_host",
         {ctxArg, host, loadSlot(persistentArg, stepIndex), i64c(8)});
    count = LLVM::LoadOp::create(b, loc, b.getI64Type(), host);
  }
  auto f32c = [&](double v) -> Value {
    return arith::ConstantFloatOp::create(b, loc, b.getF32Type(),
                                          APFloat(static_cast<float>(v)));
  };
  size_t perParam = buf.stateSlots.size();
  for (auto [i, type] : llvm::enumerate(buf.types)) {
    Value w = loadSlot(persistentArg, buf.slotIndex[i][pr.getFrom()]);
    Value out = loadSlot(persistentArg, buf.slotIndex[i][pr.getTo()]);
    auto state = [&](int64_t j) {
      return loadSlot(persistentArg, buf.stateIndex[i * perParam + j]);
    };
    Value n = i64c(type.getNumElements());
    if (velocity && adam) {
      call("pipert_predict_adam_f32",
           {ctxArg, w, state(directionSlots[0]), state(directionSlots[1]), count,
            f32c(upd.getBeta1()->convertToDouble()),
            f32c(upd.getBeta2()->convertToDouble()),
            f32c(upd.getEpsilon()->convertToDouble()), f32c(gap), f32c(lr), n,
            out});
    } else {
      call("pipert_predict_weights_f32",
           {ctxArg, w, state(directionSlots[0]), f32c(gap), f32c(lr), n, out});
    }
  }
  guard = savedGuard;
  return success();
}

// Deferring a receive's wait past later sends cannot deadlock a program
// that is deadlock-free with blocking receives: the receive is still posted
// where the pipe.recv is, so every send of a peer completes no later than
// before, and a wait blocks only its own rank; what a peer needs of this
// rank (its sends and posted receives) happens no later than before. It
// removes a round trip from 1F1B's steady state: the last stage receives
// the next activation, then sends the gradient, and its neighbour waits for
// that gradient; with the wait deferred, the gradient goes out while the
// activation is still on its way (2 ranks, M = 8: 7 us of waiting per
// micro-batch on each rank).
bool ProgramLowering::needsReceived(Operation &op) {
  if (isa<pipe::RecvOp>(op))
    return false;
  auto pending = [&](Value v) {
    return llvm::any_of(pendingRecvs, [&](auto &p) { return p.first == v; });
  };
  if (auto send = dyn_cast<pipe::SendOp>(op)) {
    if (auto it = packedGroups.find(&op); it != packedGroups.end())
      return llvm::any_of(it->second, [&](Operation *s) {
        return pending(cast<pipe::SendOp>(s).getValue());
      });
    return pending(send.getValue());
  }
  // A save computed in place (the receive wrote the activation slot).
  if (auto save = dyn_cast<pipe::SaveOp>(op))
    return !elidedSaves.count(save);
  return true;
}

void ProgramLowering::waitReceived() {
  for (auto &[value, req] : pendingRecvs)
    if (req) // null: received with the group's first value
      callRuntime(b, loc, module, "pipert_wait", {ctxArg, req});
  pendingRecvs.clear();
}

LogicalResult ProgramLowering::lowerInstructions(Block &ops) {
  for (Operation &op : ops) {
    // A group's deferred gradients go as late as their rows allow: after
    // the transfers (and a forward) that follow the group's last backward,
    // so that a peer waiting for what they send is not kept waiting; before
    // the next backward (it writes the next group's rows), before a forward
    // that writes a grouped result's slot, and before a wait (the rank
    // computes them instead of waiting).
    // At most one forward in between (the rings keep one more micro-batch
    // than the group needs, planDeferred). Never inside a loop that follows
    // (its body would run the flush every iteration: 3 stages at M = 4 added
    // stage 0's first micro-batch's weight gradient three times).
    if (pendingFlush &&
        (isa<pipe::BackwardOp, pipe::UpdateOp, pipe::AllReduceOp, pipe::AverageOp,
             pipe::ClipGradNormOp, pipe::LoopOp>(op) ||
         (isa<pipe::ForwardOp>(op) &&
          (pendingFlush->beforeForward || pendingFlush->forwards++ > 0)) ||
         (!pendingRecvs.empty() && needsReceived(op))))
      emitGroupFlush();
    if (!pendingRecvs.empty() && needsReceived(op)) {
      loc = op.getLoc();
      waitReceived();
    }
    if (failed(lowerInstruction(op)))
      return failure();
  }
  if (pendingFlush)
    emitGroupFlush();
  waitReceived();
  return success();
}

void ProgramLowering::emitGroupFlush() {
  GroupFlush f = *pendingFlush;
  pendingFlush.reset();
  DeferredStore &store = deferredStores[f.weights];
  // After the group's last micro-batch (slot G - 1): one call over the
  // group's rows (a group of one: after every micro-batch).
  OpBuilder::InsertionGuard g(b);
  if (f.grads->front().group > 1) {
    Value last = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, f.slot,
                                       i64c(f.grads->front().group - 1));
    auto ifOp = scf::IfOp::create(b, loc, last, /*withElseRegion=*/false);
    b.setInsertionPoint(ifOp.thenBlock()->getTerminator());
  }
  CallArrays group;
  for (const DeferredGrad &d : *f.grads) {
    group.persistent.push_back(f.buf->grads[d.param]);
    if (d.bias >= 0)
      group.persistent.push_back(f.buf->grads[d.bias]);
  }
  // A ring operand's rows: the group's first micro-batch's slot on (the
  // ring's depth is a multiple of the group).
  Value first = arith::SubIOp::create(b, loc, f.mb, i64c(f.grads->front().group - 1));
  size_t k = 0;
  for (const DeferredGrad &d : *f.grads)
    for (Value ring : {d.aRing, d.bRing}) {
      Value base = store.buffers[k++];
      if (!base) {
        if (auto feed = ring.getDefiningOp<pipe::FeedOp>())
          base = offsetPtr(loadSlot(inputsArg, inputIndex.lookup(feed.getInput())),
                           arith::MulIOp::create(b, loc, first,
                                                 i64c(runtimeTensorBytes(cast<RankedTensorType>(
                                                     feed.getValue().getType())))));
        else
          base = ringSlot(ring, first);
      }
      group.inputs.push_back(base);
    }
  // A "W" trace event (backward weight): pipe-simulate --measured spreads
  // it over the stage's backwards.
  callTraced(store.function, group, 2, f.buf->stage, f.mb);
}

LogicalResult ProgramLowering::lowerInstruction(Operation &instr) {
  loc = instr.getLoc();
  // A no-flush instruction runs only for micro-batches of the run.
  guard = Value();
  if (noFlush && pipe::getMicroBatchIndex(&instr)) {
    Value u = ringIndex(&instr);
    Value lo = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::sge, u,
                                     i64c(0));
    Value hi = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt, u,
                                     totalMbs);
    guard = arith::AndIOp::create(b, loc, lo, hi);
  }
  auto bytesOf = [](Value v) {
    return runtimeTensorBytes(cast<RankedTensorType>(v.getType()));
  };

  if (auto wb = dyn_cast<pipe::WeightBufferOp>(instr)) {
    if (wb.getVersions() != 1 && !noFlush && !averaged.contains(wb.getWeights()) &&
        !layout)
      return wb.emitError("pipe-lower-programs: a synchronous schedule keeps "
                          "one weight version (a second one only as the "
                          "centre of pipe.average)");
    auto buf = std::make_unique<WeightBuffer>();
    buf->stage = wb.getStage();
    buf->versions = wb.getVersions();
    for (auto [nameAttr, typeAttr] :
         llvm::zip(wb.getParamNames(), wb.getParamTypes())) {
      StringRef name = cast<StringAttr>(nameAttr).getValue();
      auto type = dyn_cast<RankedTensorType>(cast<TypeAttr>(typeAttr).getValue());
      if (!type || !pipertDtype(type.getElementType()))
        return wb.emitError("pipe-lower-programs: parameter '")
               << name << "' has a type the runtime has no kernels for";
      buf->names.push_back(name.str());
      buf->types.push_back(type);
      if (layout) {
        // The step's buffers: slot v of each parameter by its name.
        buf->slotIndex.emplace_back();
        for (int64_t v = 0; v < buf->versions; ++v) {
          FailureOr<int64_t> index = layoutPersistent(
              wb, v == 0 ? name.str() : (name + "@v" + Twine(v)).str());
          if (failed(index))
            return failure();
          buf->slotIndex.back().push_back(*index);
        }
        buf->persistentIndex.push_back(buf->slotIndex.back().front());
        if (auto newest = wb->getAttrOfType<DenseI64ArrayAttr>(kEvalNewest))
          buf->evalNewest = {newest[0], newest[1], newest[2]};
        continue;
      }
      buf->persistentIndex.push_back(devicePersistent.size());
      buf->slotIndex.push_back({int64_t(devicePersistent.size())});
      devicePersistent.push_back({name.str(), "param", type, initOf(name)});
      for (int64_t v = 1; v < buf->versions; ++v) {
        buf->slotIndex.back().push_back(devicePersistent.size());
        devicePersistent.push_back(
            {(name + "@v" + Twine(v)).str(), "version", type, Attribute()});
      }
      if (!noFlush) {
        buf->grads.push_back(allocate(runtimeTensorBytes(type)));
        continue;
      }
      // Accumulated over steps (2BW): persistent, zero at the start.
      int64_t index = devicePersistent.size();
      devicePersistent.push_back(
          {name.str() + ".grad_accum", "accumulator", type,
           DenseElementsAttr::get(type, b.getZeroAttr(type.getElementType()))});
      OpBuilder::InsertionGuard insertion(b);
      b.setInsertionPointToStart(entry);
      buf->grads.push_back(loadSlot(persistentArg, index));
    }
    // Every version is W(0) before the first update.
    if (buf->versions > 1 && !layout) {
      Value first = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq,
                                          stepArg, i64c(0));
      auto ifOp = scf::IfOp::create(b, loc, first, /*withElseRegion=*/false);
      OpBuilder::InsertionGuard insertion(b);
      b.setInsertionPoint(ifOp.thenBlock()->getTerminator());
      for (auto [i, type] : llvm::enumerate(buf->types))
        for (int64_t v = 1; v < buf->versions; ++v)
          callRuntime(b, loc, module, "pipert_copy_device",
                      {ctxArg, loadSlot(persistentArg, buf->slotIndex[i][v]),
                       loadSlot(persistentArg, buf->slotIndex[i][0]),
                       i64c(runtimeTensorBytes(type))});
    }
    buf->firstUpdate = firstUpdates.lookup(wb.getWeights());
    weightBuffers[wb.getWeights()] = std::move(buf);
    return success();
  }
  if (auto ab = dyn_cast<pipe::ActivationBufferOp>(instr)) {
    auto type = cast<RankedTensorType>(ab.getType());
    Ring ring;
    ring.depth = ab.getDepth();
    ring.bytes = (runtimeTensorBytes(type) + 63) / 64 * 64;
    if (auto it = ringDepthFor.find(ab.getBuffer()); it != ringDepthFor.end())
      ring.depth = std::max(ring.depth, it->second);
    if (!noFlush) {
      ring.base = allocate(ring.bytes * ring.depth);
    } else {
      // In flight across steps: persistent, checkpointed.
      auto storage = RankedTensorType::get({ring.bytes * ring.depth / 4},
                                           b.getF32Type());
      int64_t index = devicePersistent.size();
      devicePersistent.push_back(
          {("pipe.act" + Twine(activationBuffers++) + "." + ab.getName()).str(),
           "activations", storage, Attribute()});
      OpBuilder::InsertionGuard insertion(b);
      b.setInsertionPointToStart(entry);
      ring.base = loadSlot(persistentArg, index);
    }
    rings[ab.getBuffer()] = ring;
    return success();
  }
  if (auto pr = dyn_cast<pipe::PredictOp>(instr))
    return lowerPredict(pr);
  if (auto z = dyn_cast<pipe::ZeroGradOp>(instr)) {
    WeightBuffer &buf = *weightBuffers[z.getWeights()];
    for (auto [g, type] : llvm::zip(buf.grads, buf.types))
      call("pipert_memset_zero", {ctxArg, g, i64c(runtimeTensorBytes(type))});
    return success();
  }
  if (auto loop = dyn_cast<pipe::LoopOp>(instr)) {
    if (nonblockingSends)
      return loop.emitError("pipe-lower-programs: nonblocking-sends needs a "
                            "straight-line program (pipe-schedule loop=false): "
                            "a loop reuses its buffers every iteration");
    Value lower = arith::ConstantIndexOp::create(b, loc, loop.getLower());
    Value upper = arith::ConstantIndexOp::create(b, loc, loop.getUpper());
    Value one = arith::ConstantIndexOp::create(b, loc, 1);
    auto forOp = scf::ForOp::create(b, loc, lower, upper, one);
    OpBuilder::InsertionGuard insertion(b);
    b.setInsertionPoint(forOp.getBody()->getTerminator());
    loopIndex[loop.getIndex()] = arith::IndexCastOp::create(
        b, loc, b.getI64Type(), forOp.getInductionVar());
    if (failed(lowerInstructions(loop.getInstructions())))
      return failure();
    guard = Value();
    return success();
  }
  if (auto feed = dyn_cast<pipe::FeedOp>(instr)) {
    auto type = cast<RankedTensorType>(feed.getValue().getType());
    if (type.getRank() == 0)
      return feed.emitError("pipe-lower-programs: a fed input needs a batch axis");
    // A whole-step feed (pipe.whole_step) has the step's batch already, or
    // the batches of the step of every data-parallel pipeline (more rows
    // than the step's batch: the driver's "input_pipelines").
    const bool wholeStep = feed->hasAttr(pipe::attrs::kWholeStep);
    SmallVector<int64_t> shape(type.getShape());
    if (!wholeStep)
      shape[0] *= program.getMicrobatches();
    auto batchAttr = module->getAttrOfType<IntegerAttr>(pipe::attrs::kBatchSize);
    const bool allPipelines = wholeStep && batchAttr && shape[0] > batchAttr.getInt();
    auto wholeType = RankedTensorType::get(shape, type.getElementType());
    std::string key = feed.getInput().str();
    if (allPipelines)
      key += std::string("\0pipelines", 10);
    int64_t index;
    if (layout) {
      // The step's input buffer.
      auto shared = layout->inputIndex.find(key);
      if (shared == layout->inputIndex.end() ||
          layout->deviceInputs[shared->second].type != wholeType)
        return feed.emitError("pipe-lower-programs: the evaluation feeds input '")
               << feed.getInput() << "' as " << wholeType
               << ", which the step does not";
      index = shared->second;
    } else {
      auto [it, added] = inputIndex.try_emplace(key, int64_t(deviceInputs.size()));
      if (added)
        deviceInputs.push_back(
            {feed.getInput().str(), allPipelines ? "input_pipelines" : "input", wholeType, {}});
      else if (deviceInputs[it->second].type != wholeType)
        return feed.emitError("pipe-lower-programs: input '")
               << feed.getInput() << "' is fed with different micro-batch types";
      index = it->second;
    }
    Value whole = loadSlot(inputsArg, index);
    if (wholeStep) {
      pointers[feed.getValue()] = whole;
      return success();
    }
    Value offset =
        arith::MulIOp::create(b, loc, microBatch(feed), i64c(bytesOf(feed)));
    pointers[feed.getValue()] = offsetPtr(whole, offset);
    return success();
  }
  if (isa<pipe::ForwardOp, pipe::BackwardOp>(instr)) {
    auto fwd = dyn_cast<pipe::ForwardOp>(instr);
    auto bwd = dyn_cast<pipe::BackwardOp>(instr);
    FlatSymbolRefAttr calleeAttr =
        fwd ? fwd.getCalleeAttr() : bwd.getCalleeAttr();
    auto stage = module.lookupSymbol<pipe::StageOp>(calleeAttr);
    if (!stage)
      return instr.emitError("no pipe.stage ") << calleeAttr;
    pipe::BackwardPart part = bwd ? bwd.getPart() : pipe::BackwardPart::Input;
    FailureOr<StringRef> callee = stageFunction(&instr, stage, part);
    if (failed(callee))
      return failure();
    Value weights = fwd ? fwd.getWeights() : bwd.getWeights();
    ValueRange inputs = fwd ? fwd.getInputs() : bwd.getInputs();
    CallArrays arrays;
    WeightBuffer *buf = weights ? weightBuffers[weights].get() : nullptr;
    if (buf) {
      arrays.persistent = weightPointers(
          &instr, *buf, fwd ? fwd.getVersion() : bwd.getVersion(),
          fwd ? fwd.getVersionClock() : bwd.getVersionClock());
      bool gradients = stage.getPhase() != pipe::Phase::Forward &&
                       stage.getPhase() != pipe::Phase::BackwardInput;
      if (gradients)
        arrays.persistent.append(buf->grads.begin(), buf->grads.end());
    }
    ArrayRef<Type> stageArgs = stage.getArgumentTypes();
    for (size_t i = stageArgs.size() - stage.getNumStateArgs();
         i < stageArgs.size(); ++i) {
      FailureOr<Value> ptr = statePointer(
          &instr,
          stage.getArgAttrOfType<StringAttr>(i, pipe::attrs::kState).getValue(),
          cast<RankedTensorType>(stageArgs[i]));
      if (failed(ptr))
        return failure();
      arrays.persistent.push_back(*ptr);
    }
    for (Value v : inputs)
      arrays.inputs.push_back(pointers.lookup(v));
    if (auto it = transposedParams.find(*callee); it != transposedParams.end()) {
      if (!buf)
        return instr.emitError("pipe-lower-programs: the forward of @")
               << stage.getSymName() << " multiplies by a weight but reads none";
      for (int64_t i : it->second)
        arrays.inputs.push_back(stepTranspose(weights, buf, i, arrays.persistent[i]));
    }
    Value mb = ringIndex(&instr);
    for (Value r : instr.getResults()) {
      Value p = storageFor(r, mb);
      pointers[r] = p;
      arrays.outputs.push_back(p);
    }
    // A backward with deferred gradients writes its A and B rows into slot
    // mb mod G of the group's buffers; after the group's last micro-batch,
    // one call adds the group's gradients (see the header).
    SmallVector<DeferredGrad> *deferred = nullptr;
    DeferredStore *store = nullptr;
    Value slot;
    if (auto it = deferredGrads.find(*callee); it != deferredGrads.end()) {
      deferred = &it->second;
      int64_t group = deferred->front().group;
      auto [st, added] = deferredStores.try_emplace(weights);
      store = &st->second;
      if (added) {
        store->backward = callee->str();
        for (const DeferredGrad &d : *deferred)
          for (auto [t, ring] : {std::pair(d.a, d.aRing), std::pair(d.b, d.bRing)})
            store->buffers.push_back(ring ? Value()
                                          : allocate(runtimeTensorBytes(t) * group));
        store->function = deferredFunction(*callee, *deferred, *buf).str();
      } else if (store->backward != *callee) {
        return instr.emitError("pipe-lower-programs: the weights of @")
               << stage.getSymName() << " get deferred gradients from two "
               << "backward functions";
      }
      // Every call restores the ring operands from the buffers the
      // function was built for.
      for (const DeferredGrad &d : *deferred)
        for (Value ring : {d.aRing, d.bRing}) {
          if (ring && !llvm::any_of(inputs, [&](Value in) {
                auto r = in.getDefiningOp<pipe::RestoreOp>();
                auto f = in.getDefiningOp<pipe::FeedOp>();
                auto rf = ring.getDefiningOp<pipe::FeedOp>();
                // A grouped forward result: of this micro-batch's forward,
                // right before in this block (its G slots assume it).
                auto fwd = in.getDefiningOp<pipe::ForwardOp>();
                auto fmb = fwd ? pipe::getMicroBatchIndex(fwd) : std::nullopt;
                auto bmb = pipe::getMicroBatchIndex(&instr);
                bool adjacent = fwd && fwd->getBlock() == instr.getBlock() && fmb && bmb &&
                                fmb->base == bmb->base && fmb->offset == bmb->offset;
                return (r && r.getBuffer() == ring) ||
                       (adjacent && groupedRing(in) == ring) ||
                       (f && rf && f.getInput() == rf.getInput());
              }))
            return instr.emitError("pipe-lower-programs: this call of @")
                   << stage.getSymName() << " restores its deferred gradient's "
                   << "operand from another activation buffer than the first";
        }
      slot = arith::RemUIOp::create(b, loc, microBatch(&instr), i64c(group));
      size_t k = 0;
      for (const DeferredGrad &d : *deferred)
        for (RankedTensorType t : {d.a, d.b}) {
          Value base = store->buffers[k++];
          if (base)
            arrays.outputs.push_back(offsetPtr(
                base, arith::MulIOp::create(b, loc, slot, i64c(runtimeTensorBytes(t)))));
        }
    }
    int32_t kind = fwd ? 0 : bwd.getPart() == pipe::BackwardPart::Weight ? 2 : 1;
    callTraced(*callee, arrays, kind, stage.getStage(), microBatch(&instr));
    if (deferred) {
      if (pendingFlush)
        emitGroupFlush();
      bool beforeForward = llvm::any_of(*deferred, [](const DeferredGrad &d) {
        return llvm::any_of(std::array<Value, 2>{d.aRing, d.bRing}, [](Value r) {
          return r && !r.getDefiningOp<pipe::ActivationBufferOp>() &&
                 !r.getDefiningOp<pipe::FeedOp>();
        });
      });
      pendingFlush =
          GroupFlush{deferred, weights, buf, slot, ringIndex(&instr), beforeForward, 0};
    }
    return success();
  }
  if (auto acc = dyn_cast<pipe::AccumulateOp>(instr)) {
    WeightBuffer &buf = *weightBuffers[acc.getWeights()];
    int64_t i = acc.getParam();
    StringRef callee = accumulateFunction(buf.types[i]);
    CallArrays arrays;
    arrays.persistent.push_back(buf.grads[i]);
    arrays.inputs.push_back(pointers.lookup(acc.getGrad()));
    callFunction(callee, arrays);
    return success();
  }
  if (auto save = dyn_cast<pipe::SaveOp>(instr)) {
    if (elidedSaves.count(save))
      return success();
    Value slot = ringSlot(save.getBuffer(), ringIndex(save));
    call("pipert_copy_device", {ctxArg, slot, pointers.lookup(save.getValue()),
                                i64c(bytesOf(save.getValue()))});
    return success();
  }
  if (auto restore = dyn_cast<pipe::RestoreOp>(instr)) {
    pointers[restore.getValue()] =
        ringSlot(restore.getBuffer(), ringIndex(restore));
    return success();
  }
  if (isa<pipe::SendOp, pipe::RecvOp>(instr)) {
    auto send = dyn_cast<pipe::SendOp>(instr);
    auto recv = dyn_cast<pipe::RecvOp>(instr);
    Value v = send ? send.getValue() : recv.getValue();
    auto type = cast<RankedTensorType>(v.getType());
    std::optional<int64_t> dtype = pipertDtype(type.getElementType());
    if (!dtype)
      return instr.emitError("pipe-lower-programs: cannot transfer ")
             << type << ": the runtime has no such element type";
    if (!comm) {
      OpBuilder::InsertionGuard insertion(b);
      b.setInsertionPointToStart(entry);
      comm = callPtr("pipert_comm_world", {ctxArg});
    }
    Value mb = ringIndex(&instr);
    // (hash(tag) mod 2048) * 16 + mb mod 16, as transferTag computes it
    // (the global micro-batch in a no-flush program).
    Value low = noFlush ? euclidMod(mb, 16)
                        : arith::RemUIOp::create(b, loc, mb, i64c(16)).getResult();
    Value tag64 = arith::AddIOp::create(
        b, loc,
        i64c(int64_t(tagHash(send ? send.getTag() : recv.getTag())) * 16), low);
    Value tag = arith::TruncIOp::create(b, loc, b.getI32Type(), tag64);
    int64_t peer = send ? send.getPeer() : recv.getPeer();
    if (packedMembers.contains(&instr))
      return success(); // sent or received with the first of its group
    // The buffer a transfer of `value` reads (a send) or fills (a receive:
    // its own, or its activation slot where a save follows).
    auto transferBuffer = [&](Value value) {
      if (send)
        return pointers.lookup(value);
      Value buffer = storageFor(value, mb);
      pointers[value] = buffer;
      return buffer;
    };
    if (auto it = packedGroups.find(&instr); it != packedGroups.end()) {
      // One message: the group's buffers gathered (scattered) in order.
      SmallVector<Value> buffers;
      SmallVector<int64_t> bytes;
      for (Operation *op : it->second) {
        Value value = send ? cast<pipe::SendOp>(op).getValue()
                           : cast<pipe::RecvOp>(op).getValue();
        buffers.push_back(transferBuffer(value));
        bytes.push_back(bytesOf(value));
      }
      SmallVector<Value> args = {ctxArg, comm, filledPointerArray(buffers), i64Array(bytes),
                                 i32c(int64_t(buffers.size())), i32c(peer), tag};
      if (send) {
        call("pipert_send_packed", args);
        return success();
      }
      Value req = postGuarded("pipert_irecv_packed", args);
      // One request: waited for with the first value; the others wait
      // with it (waitReceived waits for every pending receive at once).
      for (auto [i, op] : llvm::enumerate(it->second))
        pendingRecvs.push_back({cast<pipe::RecvOp>(op).getValue(), i == 0 ? req : Value()});
      return success();
    }
    SmallVector<Value> args = {ctxArg, comm, transferBuffer(v), i64c(type.getNumElements()),
                               i32c(*dtype), i32c(peer), tag};
    if (recv) {
      // Posted here, waited for when an instruction needs it
      // (lowerInstructions): the sends after it go out meanwhile.
      pendingRecvs.push_back({v, postGuarded("pipert_irecv", args)});
    } else if (nonblockingSends)
      pendingSends.push_back(callPtr("pipert_isend", args));
    else
      call("pipert_send", args);
    return success();
  }
  if (auto red = dyn_cast<pipe::AllReduceOp>(instr)) {
    // The gradients of the stage's replicas across pipelines (DP x PP).
    if (failed(checkReplicaGroup(red, red.getGroup())))
      return failure();
    WeightBuffer &buf = *weightBuffers[red.getWeights()];
    Value comm = getReplicaComm();
    int32_t op = red.getReduction() == pipe::ReduceKind::Mean ? 1 : 0;
    for (auto [i, type] : llvm::enumerate(buf.types)) {
      if (auto only = red.getParams(); only && !llvm::is_contained(*only, int64_t(i)))
        continue;
      if (!type.getElementType().isF32())
        return red.emitError("pipe-lower-programs: pipe.allreduce of ")
               << type << ": the runtime reduces f32 only";
      call("pipert_allreduce_f32", {ctxArg, comm, buf.grads[i],
                                    i64c(type.getNumElements()), i32c(op)});
    }
    return success();
  }
  if (auto clip = dyn_cast<pipe::ClipGradNormOp>(instr))
    return lowerClipGradNorm(clip);
  if (auto avg = dyn_cast<pipe::AverageOp>(instr)) {
    // EASGD over the replicas: d = x - c; x -= a d; c += a sum_i d_i.
    if (failed(checkReplicaGroup(avg, avg.getGroup())))
      return failure();
    WeightBuffer &buf = *weightBuffers[avg.getWeights()];
    if (avg.getVersion() != 0 || avg.getCentre() >= buf.versions)
      return avg.emitError("pipe-lower-programs: pipe.average averages the "
                           "live weights (slot 0) with a centre in another "
                           "slot of the buffer");
    Value comm = getReplicaComm();
    // After steps T, 2T, ...: (step + 1) mod T == 0.
    int64_t period = avg.getPeriod();
    Value due = arith::CmpIOp::create(
        b, loc, arith::CmpIPredicate::eq,
        arith::RemSIOp::create(b, loc,
                               arith::AddIOp::create(b, loc, stepArg, i64c(1)),
                               i64c(period)),
        i64c(0));
    auto ifOp = scf::IfOp::create(b, loc, due, /*withElseRegion=*/false);
    OpBuilder::InsertionGuard insertion(b);
    b.setInsertionPoint(ifOp.thenBlock()->getTerminator());
    Value alpha = arith::ConstantFloatOp::create(
        b, loc, b.getF32Type(),
        APFloat(static_cast<float>(avg.getAlpha().convertToDouble())));
    for (auto [i, type] : llvm::enumerate(buf.types)) {
      if (!type.getElementType().isF32())
        return avg.emitError("pipe-lower-programs: pipe.average of ")
               << type << ": the runtime averages f32 only";
      Value n = i64c(type.getNumElements());
      Value x = loadSlot(persistentArg, buf.slotIndex[i][0]);
      Value centre = loadSlot(persistentArg, buf.slotIndex[i][avg.getCentre()]);
      Value diff = allocate(runtimeTensorBytes(type));
      call("pipert_easgd_local_f32", {ctxArg, alpha, centre, x, diff, n});
      call("pipert_allreduce_f32", {ctxArg, comm, diff, n, i32c(0)});
      call("pipert_easgd_center_f32", {ctxArg, alpha, diff, centre, n});
    }
    return success();
  }
  if (auto upd = dyn_cast<pipe::UpdateOp>(instr)) {
    WeightBuffer &buf = *weightBuffers[upd.getWeights()];
    if (failed(prepareUpdate(buf, upd)))
      return failure();
    StringRef callee = buf.updateFn;
    ArrayRef<int64_t> stateIndex = buf.stateIndex;
    CallArrays arrays;
    if (upd.getVersion() && buf.versions > 1) {
      // W(v+1) from W(v): copy slot v mod V to slot v+1 mod V, update there.
      buf.update = upd;
      Value v = versionOf(upd, upd.getVersionClock(), *upd.getVersion());
      Value from = euclidMod(v, buf.versions);
      Value to = euclidMod(arith::AddIOp::create(b, loc, v, i64c(1)),
                           buf.versions);
      for (auto [i, type] : llvm::enumerate(buf.types)) {
        Value dst = slotPointer(buf, i, to);
        call("pipert_copy_device", {ctxArg, dst, slotPointer(buf, i, from),
                                    i64c(runtimeTensorBytes(type))});
        arrays.persistent.push_back(dst);
      }
    } else {
      for (int64_t index : buf.persistentIndex)
        arrays.persistent.push_back(loadSlot(persistentArg, index));
    }
    arrays.persistent.append(buf.grads.begin(), buf.grads.end());
    for (int64_t index : stateIndex)
      arrays.persistent.push_back(loadSlot(persistentArg, index));
    arrays.persistent.push_back(loadSlot(persistentArg, stepIndex));
    callTraced(callee, arrays, 3, buf.stage, Value());
    return success();
  }
  if (auto rep = dyn_cast<pipe::ReportLossOp>(instr)) {
    auto type = cast<RankedTensorType>(rep.getLoss().getType());
    if (!type.getElementType().isF32())
      return rep.emitError("pipe-lower-programs: the loss must be f32, not ")
             << type.getElementType();
    if (elidedReports.count(rep))
      return success();
    Value slot = offsetPtr(
        lossBuffer, arith::MulIOp::create(b, loc, microBatch(rep), i64c(4)));
    call("pipert_copy_device",
         {ctxArg, slot, pointers.lookup(rep.getLoss()), i64c(4)});
    return success();
  }
  if (auto metric = dyn_cast<pipe::ReportMetricOp>(instr)) {
    Value index = arith::AddIOp::create(b, loc, microBatch(metric),
                                        i64c((metric.getSlot() - 1) * program.getMicrobatches()));
    call("pipert_copy_device",
         {ctxArg, offsetPtr(metricBuffer, arith::MulIOp::create(b, loc, index, i64c(4))),
          pointers.lookup(metric.getValue()), i64c(4)});
    return success();
  }
  return instr.emitError("pipe-lower-programs: ")
         << instr.getName() << " is not supported by this lowering "
         << "(synchronous schedules: feed, forward, backward, send, recv, "
            "loop, activation_buffer, save, restore, zero_grad, accumulate, "
            "update, report_loss)";
}

LogicalResult ProgramLowering::planDeferred() {
  if (noFlush || deferRows <= 0 || program.getMicrobatches() <= 1)
    return success();
  // Each backward's function, built now (stageFunction caches it): which
  // rings its deferred Gemms read. A ring keeps a group's slots from the
  // group's first forward until the group's Gemm, which runs after its
  // last backward and at most one more forward (lowerInstructions): at that
  // backward the stage holds at most `depth` micro-batches, the group's
  // last one the oldest, so the group's first slot is not written again
  // for depth + G micro-batches; rounded up to a multiple of G (the
  // group's slots back to back), at most M (every micro-batch its own).
  WalkResult walk = program.walk([&](pipe::BackwardOp bwd) {
    auto stage = module.lookupSymbol<pipe::StageOp>(bwd.getCalleeAttr());
    if (!stage)
      return WalkResult::advance();
    FailureOr<StringRef> callee = stageFunction(bwd, stage, bwd.getPart());
    if (failed(callee))
      return WalkResult::interrupt();
    auto it = deferredGrads.find(*callee);
    if (it == deferredGrads.end())
      return WalkResult::advance();
    for (const DeferredGrad &d : it->second)
      for (Value ring : {d.aRing, d.bRing}) {
        if (!ring)
          continue;
        int64_t g = d.group, m = program.getMicrobatches();
        if (ring.getDefiningOp<pipe::FeedOp>())
          continue; // the mini-batch itself
        auto ab = ring.getDefiningOp<pipe::ActivationBufferOp>();
        if (!ab) {
          // A forward's result read by the backward right after it: G
          // slots (the group's), rewritten from the next group's first
          // forward on, after the group's Gemm.
          if (!rings.count(ring)) {
            Ring r;
            r.depth = g;
            r.bytes = runtimeTensorBytes(cast<RankedTensorType>(ring.getType()));
            r.base = allocate(r.bytes * g);
            rings[ring] = r;
          }
          continue;
        }
        int64_t depth = ab.getDepth();
        int64_t need = std::min(m, (depth + g + g - 1) / g * g);
        int64_t &cur = ringDepthFor[ring];
        cur = std::max({cur, need, depth});
      }
    return WalkResult::advance();
  });
  return failure(walk.wasInterrupted());
}

LogicalResult ProgramLowering::run() {
  loc = program.getLoc();
  int64_t microbatches = program.getMicrobatches();
  noFlush = program.isNoFlush();
  program.walk([&](pipe::AverageOp avg) {
    averaged.insert(avg.getWeights());
    centreSlot[avg.getWeights()] = avg.getCentre();
  });
  program.walk([&](pipe::PredictOp pr) {
    if (pr.getDirection() == pipe::PredictDirection::Velocity)
      velocityPredicted.insert(pr.getWeights());
  });
  program.walk([&](pipe::UpdateOp u) { firstUpdates.try_emplace(u.getWeights(), u); });
  DenseSet<Value> updated;
  Operation *twice = nullptr;
  pipe::forEachInstruction(program, [&](Operation *op, int64_t) {
    if (isa<pipe::ReportLossOp>(op)) {
      reportsLoss = true;
      ++reportedLosses;
    }
    if (auto metric = dyn_cast<pipe::ReportMetricOp>(op))
      metricSlots = std::max(metricSlots, metric.getSlot());
    if (auto u = dyn_cast<pipe::UpdateOp>(op)) {
      lastUpdate = u;
      if (!updated.insert(u.getWeights()).second && !twice)
        twice = op;
    }
  });
  if (twice && !noFlush)
    return twice->emitError(
        "pipe-lower-programs: a synchronous step updates a buffer once "
        "(schedules that update per micro-batch keep weights across steps in "
        "other slots, which this lowering does not support yet)");

  b.setInsertionPoint(program);
  Type ptr = ptrType();
  std::string stepName = layout ? kEvalFunctionName.str()
                         : onnxOnly ? "pipe_step"
                                    : kStepFunctionName.str();
  StepArguments args;
  step = createStepFunction(b, loc, stepName, args);
  entry = &step.getBody().front();
  ctxArg = args.ctx;
  inputsArg = args.inputs;
  persistentArg = args.persistent;
  lossArg = args.lossOrOutputs;
  stepArg = args.step;
  b.setInsertionPointToEnd(entry);
  // Everything the step allocates goes before this point, the code after.
  auto marker = LLVM::ZeroOp::create(b, loc, ptr);
  codeStart = marker;
  b.setInsertionPointAfter(marker);
  if (reportsLoss) {
    lossBuffer = allocate(4 * microbatches);
    call("pipert_memset_zero", {ctxArg, lossBuffer, i64c(4 * microbatches)});
  }
  if (metricSlots > 0) {
    int64_t bytes = 4 * microbatches * metricSlots;
    metricBuffer = allocate(bytes);
    call("pipert_memset_zero", {ctxArg, metricBuffer, i64c(bytes)});
  }
  if (noFlush) {
    stepBase = arith::MulIOp::create(b, loc, stepArg, i64c(microbatches));
    Value steps = callRuntime(b, loc, module, "pipert_run_steps", {ctxArg},
                              {b.getI64Type()})
                      .getResult(0);
    totalMbs = arith::MulIOp::create(b, loc, steps, i64c(microbatches));
  }

  if (failed(planPackedTransfers()) || failed(planDeferred()) ||
      failed(lowerInstructions(program.getInstructions())))
    return failure();
  guard = Value();

  loc = program.getLoc();
  if (reportsLoss) {
    // The micro-batch losses, summed in micro-batch order on the host.
    Value host = LLVM::AllocaOp::create(b, loc, ptr, b.getF32Type(),
                                        i64c(microbatches), 4);
    call("pipert_copy_to_host", {ctxArg, host, lossBuffer, i64c(4 * microbatches)});
    Value sum = LLVM::LoadOp::create(b, loc, b.getF32Type(), host);
    for (int64_t k = 1; k < microbatches; ++k) {
      Value p = LLVM::GEPOp::create(b, loc, ptr, b.getF32Type(), host,
                                    ArrayRef<LLVM::GEPArg>{(int32_t)k});
      sum = arith::AddFOp::create(b, loc, sum,
                                  LLVM::LoadOp::create(b, loc, b.getF32Type(), p));
    }
    // pipe-microbatch records how micro-batch losses make the step's loss
    // (1/M for a mean-reduced loss, 1 for a sum); without it, their mean.
    double scale = 1.0 / double(reportedLosses);
    if (auto s = module->getAttrOfType<FloatAttr>(pipe::attrs::kLossScale))
      scale = s.getValueAsDouble();
    if (scale != 1.0)
      sum = arith::MulFOp::create(
          b, loc, sum,
          arith::ConstantFloatOp::create(b, loc, b.getF32Type(),
                                         APFloat(static_cast<float>(scale))));
    LLVM::StoreOp::create(b, loc, sum, lossArg);
  }
  if (metricSlots > 0) {
    // Each count's micro-batch values, summed into its slot after the loss.
    int64_t n = microbatches * metricSlots;
    Value host = LLVM::AllocaOp::create(b, loc, ptr, b.getF32Type(), i64c(n), 4);
    call("pipert_copy_to_host", {ctxArg, host, metricBuffer, i64c(4 * n)});
    auto at = [&](Value base, int64_t i) -> Value {
      return LLVM::GEPOp::create(b, loc, ptr, b.getF32Type(), base,
                                 ArrayRef<LLVM::GEPArg>{(int32_t)i});
    };
    for (int64_t slot = 1; slot <= metricSlots; ++slot) {
      Value sum;
      for (int64_t k = 0; k < microbatches; ++k) {
        Value v = LLVM::LoadOp::create(b, loc, b.getF32Type(),
                                       at(host, (slot - 1) * microbatches + k));
        sum = sum ? arith::AddFOp::create(b, loc, sum, v).getResult() : v;
      }
      LLVM::StoreOp::create(b, loc, sum, at(lossArg, slot));
    }
  }
  if (!pendingSends.empty()) {
    call("pipert_wait_all",
         {ctxArg, filledPointerArray(pendingSends), i32c(pendingSends.size())});
  }
  for (Value p : allocations)
    call("pipert_free", {ctxArg, p});
  func::ReturnOp::create(b, loc);
  marker.erase();
  if ((noFlush || !averaged.empty()) && !layout && failed(emitFinish()))
    return failure();

  // The callable functions: buffers and kernel calls.
  if (!onnxOnly) {
    for (func::FuncOp fn : onnxFunctions) {
      std::string name = fn.getSymName().str();
      StepFunctionOptions options;
      options.callable = true;
      options.name = name;
      fn.setSymName(name + ".onnx");
      if (failed(lowerStepFunction(module, fn, cuda, options)))
        return failure();
      if (auto lowered = module.lookupSymbol<func::FuncOp>(name))
        if (auto peak = lowered->getAttrOfType<IntegerAttr>(pipe::attrs::kPeakBytes))
          calleePeakBytes = std::max(calleePeakBytes, peak.getInt());
    }
  } else {
    // Declarations for the calls, beside the onnx-level bodies.
    for (func::FuncOp fn : onnxFunctions) {
      StringRef name = fn.getSymName().drop_back(strlen(".onnx"));
      if (!module.lookupSymbol(name)) {
        OpBuilder::InsertionGuard insertion(b);
        b.setInsertionPoint(step);
        auto decl = func::FuncOp::create(b, loc, name,
                                         stepFunctionType(b.getContext()));
        decl.setPrivate();
      }
    }
  }

  // Metadata for the object emitter, the driver and plan.json (the step's:
  // an evaluation entry reads its buffers).
  if (layout)
    return success();
  MLIRContext *ctx = b.getContext();
  auto describe = [&](const DeviceArg &arg) {
    SmallVector<NamedAttribute> fields = {
        b.getNamedAttr("name", b.getStringAttr(arg.name)),
        b.getNamedAttr("kind", b.getStringAttr(arg.kind)),
        b.getNamedAttr("dtype", b.getI64IntegerAttr(
                                    *pipertDtype(arg.type.getElementType()))),
        b.getNamedAttr("shape", b.getDenseI64ArrayAttr(arg.type.getShape()))};
    if (arg.init)
      fields.push_back(b.getNamedAttr("init", arg.init));
    return DictionaryAttr::get(ctx, fields);
  };
  SmallVector<Attribute> inputInfo, persistentInfo;
  for (const DeviceArg &arg : deviceInputs)
    inputInfo.push_back(describe(arg));
  for (const DeviceArg &arg : devicePersistent)
    persistentInfo.push_back(describe(arg));
  step->setAttr(
      kProgramAttrName,
      b.getDictionaryAttr(
          {b.getNamedAttr("inputs", b.getArrayAttr(inputInfo)),
           b.getNamedAttr("persistent", b.getArrayAttr(persistentInfo)),
           b.getNamedAttr("peak_activation_bytes",
                          b.getI64IntegerAttr(allocatedBytes + calleePeakBytes)),
           b.getNamedAttr("has_loss", b.getBoolAttr(reportsLoss)),
           b.getNamedAttr("trains", b.getBoolAttr(bool(lastUpdate)))}));
  if (noFlush) {
    auto dict = step->getAttrOfType<DictionaryAttr>(kProgramAttrName);
    NamedAttrList fields(dict);
    fields.set("drain_steps", b.getI64IntegerAttr(pipe::drainSteps(program)));
    step->setAttr(kProgramAttrName, fields.getDictionary(ctx));
  }
  step->setAttr(pipe::attrs::kDevice, b.getI64IntegerAttr(program.getDevice()));
  step->setAttr(pipe::attrs::kMicrobatches, b.getI64IntegerAttr(microbatches));
  return success();
}

/// @pipe_finish(ctx, inputs, persistent, loss, K): after the drain, the
/// newest version of each versioned buffer, W(v+1) for the update of the
/// run's last micro-batch K*M - 1, goes to slot 0, the parameter that
/// checkpoints name and --save writes.
Value ProgramLowering::getReplicaComm() {
  return entryComm(replicaComm, "pipert_replica_comm");
}

/// The ranks of this device's pipeline (pipert_pipeline_comm): asked for
/// at the start of every step, so that every rank makes it (a collective)
/// at the same point of its first step.
Value ProgramLowering::getPipelineComm() {
  return entryComm(pipelineComm, "pipert_pipeline_comm");
}

/// A communicator the runtime hands out (`getter`), asked for once at the
/// start of the step and kept in `cache`.
Value ProgramLowering::entryComm(Value &cache, StringRef getter) {
  if (!cache) {
    OpBuilder::InsertionGuard insertion(b);
    b.setInsertionPointToStart(entry);
    cache = callPtr(getter, {ctxArg});
  }
  return cache;
}

/// pipe.clip_grad_norm: the accumulators of the listed buffers, scaled as
/// their updates scale them, clipped together with the rest of the
/// pipeline's (runtime: pipert_clip_grad_norm_f32).
LogicalResult ProgramLowering::lowerClipGradNorm(pipe::ClipGradNormOp clip) {
  // The runtime's pipeline group: devices k*S .. k*S + S - 1 of pipeline k.
  SmallVector<int64_t> sorted(clip.getGroup());
  llvm::sort(sorted);
  int64_t size = int64_t(sorted.size());
  int64_t pipeline = program.getPipeline().value_or(0);
  bool ok = sorted.front() == pipeline * size;
  for (int64_t i = 1; ok && i < size; ++i)
    ok = sorted[size_t(i)] == sorted.front() + i;
  if (!ok)
    return clip.emitError("pipe-lower-programs: pipe.clip_grad_norm must run among the "
                          "devices of this device's pipeline (k*S .. k*S + S - 1 for "
                          "pipeline k of S stages)");
  SmallVector<Value> grads;
  SmallVector<int64_t> counts;
  std::optional<double> scale;
  for (Value w : clip.getWeights()) {
    WeightBuffer &buf = *weightBuffers[w];
    if (!buf.firstUpdate)
      return clip.emitError("pipe-lower-programs: pipe.clip_grad_norm of a buffer that "
                            "no pipe.update of the program updates");
    double s = buf.firstUpdate.getGradScale()
                   ? buf.firstUpdate.getGradScale()->convertToDouble()
                   : 1.0;
    if (scale && *scale != s)
      return clip.emitError("pipe-lower-programs: pipe.clip_grad_norm needs one "
                            "grad_scale on the updates of its buffers");
    scale = s;
    for (auto [i, type] : llvm::enumerate(buf.types)) {
      if (!type.getElementType().isF32())
        return clip.emitError("pipe-lower-programs: pipe.clip_grad_norm of ")
               << type << ": the runtime clips f32 only";
      grads.push_back(buf.grads[i]);
      counts.push_back(type.getNumElements());
    }
  }
  Value comm = size > 1 ? getPipelineComm() : Value(LLVM::ZeroOp::create(b, loc, ptrType()));
  Value countArray = counts.empty() ? Value(LLVM::ZeroOp::create(b, loc, ptrType()))
                                    : i64Array(counts);
  auto f32c = [&](double v) -> Value {
    return arith::ConstantFloatOp::create(b, loc, b.getF32Type(),
                                          APFloat(static_cast<float>(v)));
  };
  call("pipert_clip_grad_norm_f32",
       {ctxArg, comm, filledPointerArray(grads), countArray, i32c(int64_t(grads.size())),
        f32c(scale.value_or(1.0)), f32c(clip.getMaxNorm().convertToDouble())});
  return success();
}

/// The runtime averages over its stage group: the devices running this
/// device's stage in every pipeline (device i*p + s of pipeline i).
LogicalResult ProgramLowering::checkReplicaGroup(Operation *op,
                                                 ArrayRef<int64_t> group) {
  int64_t device = program.getDevice();
  int64_t pipeline = program.getPipeline().value_or(0);
  SmallVector<int64_t> sorted(group);
  llvm::sort(sorted);
  bool ok = sorted.size() >= 2 && llvm::is_contained(sorted, device);
  if (ok) {
    int64_t stride = sorted[1] - sorted[0];
    for (size_t i = 0; ok && i < sorted.size(); ++i)
      ok = stride > 0 && sorted[i] == sorted[0] + int64_t(i) * stride &&
           sorted[0] < stride;
    ok = ok && pipeline < int64_t(sorted.size()) &&
         sorted[size_t(pipeline)] == device;
  }
  if (!ok)
    return op->emitError("pipe-lower-programs: ")
           << op->getName()
           << " must run among the replicas of this device's stage, one per "
              "pipeline (devices s, p+s, 2p+s, ...)";
  return success();
}

LogicalResult ProgramLowering::emitFinish() {
  OpBuilder::InsertionGuard guardInsertion(b);
  b.setInsertionPointAfter(step);
  loc = program.getLoc();
  StepArguments args;
  std::string name = onnxOnly ? "pipe_finish" : kFinishFunctionName.str();
  func::FuncOp finish = createStepFunction(b, loc, name, args);
  Value savedCtx = ctxArg, savedPersistent = persistentArg;
  ctxArg = args.ctx;
  persistentArg = args.persistent;
  guard = Value();
  b.setInsertionPointToEnd(&finish.getBody().front());
  int64_t m = program.getMicrobatches();
  for (auto &entry : weightBuffers) {
    WeightBuffer &buf = *entry.second;
    if (auto it = centreSlot.find(entry.first); it != centreSlot.end()) {
      // AvgPipe: the centre is what the run trained.
      for (auto [i, type] : llvm::enumerate(buf.types))
        callRuntime(b, loc, module, "pipert_copy_device",
                    {ctxArg, loadSlot(persistentArg, buf.slotIndex[i][0]),
                     loadSlot(persistentArg, buf.slotIndex[i][it->second]),
                     i64c(runtimeTensorBytes(type))});
      continue;
    }
    if (buf.versions == 1 || !buf.update)
      continue;
    Value total = arith::MulIOp::create(b, loc, args.step, i64c(m));
    Value last = arith::SubIOp::create(b, loc, total, i64c(1));
    Value base = last;
    if (buf.update.getVersionClock() == pipe::VersionClock::Step)
      base = arith::FloorDivSIOp::create(b, loc, last, i64c(m));
    Value newest = arith::AddIOp::create(
        b, loc, base, i64c(buf.update.getVersion().value_or(0) + 1));
    Value slot = euclidMod(newest, buf.versions);
    Value ran = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::sgt, total,
                                      i64c(0));
    Value moved = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ne, slot,
                                        i64c(0));
    auto ifOp = scf::IfOp::create(b, loc, arith::AndIOp::create(b, loc, ran, moved),
                                  /*withElseRegion=*/false);
    OpBuilder::InsertionGuard inner(b);
    b.setInsertionPoint(ifOp.thenBlock()->getTerminator());
    for (auto [i, type] : llvm::enumerate(buf.types))
      callRuntime(b, loc, module, "pipert_copy_device",
                  {ctxArg, loadSlot(persistentArg, buf.slotIndex[i][0]),
                   slotPointer(buf, i, slot), i64c(runtimeTensorBytes(type))});
  }
  func::ReturnOp::create(b, loc);
  ctxArg = savedCtx;
  persistentArg = savedPersistent;
  return success();
}

/// The evaluation program of `train`'s device (see the header), inserted
/// before it with its forward stage function in inference mode; a null op
/// and the reason in `unavailable` where the device has none.
static FailureOr<pipe::ProgramOp> buildEvalProgram(ModuleOp module,
                                                   pipe::ProgramOp train,
                                                   std::string &unavailable,
                                                   std::string &noAccuracy) {
  SmallVector<pipe::ForwardOp> forwards;
  train.walk([&](pipe::ForwardOp f) { forwards.push_back(f); });
  if (forwards.empty()) {
    unavailable = "the device runs no forward";
    return pipe::ProgramOp();
  }
  pipe::ForwardOp first = forwards.front();
  auto stage = module.lookupSymbol<pipe::StageOp>(first.getCalleeAttr());
  if (!stage)
    return first.emitError("no pipe.stage ") << first.getCalleeAttr();
  for (pipe::ForwardOp f : forwards)
    if (f.getCallee() != first.getCallee()) {
      unavailable = "the device runs two forward functions";
      return pipe::ProgramOp();
    }
  // A whole-batch stage (--batchnorm full-batch): one forward on all M
  // micro-batches, each input and each sent result in M copies.
  const bool whole =
      first->hasAttr(wholebatch::kWholeBatch) || stage->hasAttr(wholebatch::kWholeBatch);
  MLIRContext *ctx = module.getContext();
  OpBuilder b(train);
  Location loc = train.getLoc();

  // The forward in inference mode, without its state updates.
  auto evalStage = cast<pipe::StageOp>(b.clone(*stage));
  std::string name = (stage.getSymName() + "_eval").str();
  for (int i = 1; module.lookupSymbol(name); ++i)
    name = (stage.getSymName() + "_eval" + Twine(i)).str();
  evalStage.setSymName(name);
  {
    Block &body = evalStage.getBody().front();
    auto ret = cast<pipe::ReturnOp>(body.getTerminator());
    llvm::BitVector drop(evalStage.getNumResults());
    SmallVector<Value> kept;
    for (unsigned i = 0; i < evalStage.getNumResults(); ++i) {
      if (evalStage.getResultAttr(i, pipe::attrs::kUpdate))
        drop.set(i);
      else
        kept.push_back(ret.getOperand(i));
    }
    ret->setOperands(kept);
    if (failed(evalStage.eraseResults(drop)))
      return evalStage.emitError("pipe-lower-programs: cannot drop the state "
                                 "updates of the evaluation forward");
    toInferenceMode(body);
    // The loss's stage also counts the labels it predicts right (the top-1
    // accuracy), results in pipe.metric slots.
    unsigned losses = 0;
    for (unsigned i = 0; i < evalStage.getNumResults(); ++i)
      losses += evalStage.getResultAttr(i, pipe::attrs::kLoss) ? 1 : 0;
    // Decided over the whole model where its imported forward is still
    // here (pipe-compile): a classification term on another stage would
    // make this stage's one look like the loss's only one.
    std::optional<int64_t> modelTerms;
    if (auto n = module->getAttrOfType<IntegerAttr>(pipe::attrs::kClassificationLosses))
      modelTerms = n.getInt();
    else if (auto forward = module.lookupSymbol<func::FuncOp>("forward");
             forward && !forward.isDeclaration())
      modelTerms = countClassificationLosses(forward);
    int64_t here = 0;
    for (Operation &op : body)
      here += isa<onnx::SoftmaxCrossEntropyLossOp, onnx::NegativeLogLikelihoodLossOp>(op);
    if (losses > 0 && modelTerms && *modelTerms != 1) {
      noAccuracy = noAccuracyReason(*modelTerms);
    } else if (losses > 0 && modelTerms && here == 0) {
      noAccuracy = "the classification loss runs on an earlier stage than the loss's last "
                   "ops (pipec counts the accuracy on the loss's stage only)";
    } else if (losses > 0) {
      std::optional<AccuracyCounts> counts = buildAccuracyCounts(body, losses, noAccuracy);
      if (!counts && noAccuracy.empty())
        return failure();
      if (counts) {
        OpBuilder rb(ctx);
        for (auto [slot, v] : {std::pair<int64_t, Value>{kMetricCorrect, counts->correct},
                               std::pair<int64_t, Value>{kMetricCounted, counts->counted}}) {
          unsigned index = evalStage.getNumResults();
          if (failed(evalStage.insertResult(
                  index, v.getType(),
                  rb.getDictionaryAttr(rb.getNamedAttr(pipe::attrs::kMetric,
                                                       rb.getI64IntegerAttr(slot))))))
            return evalStage.emitError("pipe-lower-programs: cannot add the accuracy "
                                       "counts to the evaluation forward");
          ret->insertOperands(ret->getNumOperands(), v);
        }
      }
    }
  }

  // The activations the training program sends and receives, in its order
  // (both ends of a cut use the receiver's argument order).
  llvm::StringSet<> resultNames, argNames;
  for (unsigned i = 0; i < evalStage.getNumResults(); ++i)
    if (auto n = evalStage.getResultAttrOfType<StringAttr>(i, pipe::attrs::kName))
      resultNames.insert(n.getValue());
  ArrayRef<Type> argTypes = evalStage.getArgumentTypes();
  size_t firstState = argTypes.size() - evalStage.getNumStateArgs();
  for (size_t i = evalStage.getParams(); i < firstState; ++i)
    if (auto n = evalStage.getArgAttrOfType<StringAttr>(i, pipe::attrs::kName))
      argNames.insert(n.getValue());
  SmallVector<std::pair<std::string, int64_t>> sends;
  llvm::StringMap<int64_t> recvPeer;
  // The tags of every message between this device and each peer, by
  // direction: both ends of a pair see the same ones.
  std::map<std::pair<int64_t, bool>, std::set<uint32_t>> pairTags;
  train.walk([&](Operation *op) {
    if (auto send = dyn_cast<pipe::SendOp>(op)) {
      pairTags[{send.getPeer(), true}].insert(tagHash(send.getTag()));
      if (resultNames.contains(send.getTag()) &&
          llvm::none_of(sends, [&](auto &s) { return s.first == send.getTag(); }))
        sends.push_back({send.getTag().str(), send.getPeer()});
    } else if (auto recv = dyn_cast<pipe::RecvOp>(op)) {
      pairTags[{recv.getPeer(), false}].insert(tagHash(recv.getTag()));
      if (argNames.contains(recv.getTag()))
        recvPeer.try_emplace(recv.getTag(), recv.getPeer());
    }
  });
  // An evaluation's message has a tag of its own: a no-flush program's
  // messages of the steps' micro-batches may still be in flight between
  // steps, so no evaluation tag may be one of theirs on the same pair.
  auto evalTag = [&](StringRef name, int64_t peer, bool send) {
    const std::set<uint32_t> &taken = pairTags[{peer, send}];
    std::string tag = (name + ".eval").str();
    for (int i = 2; taken.count(tagHash(tag)); ++i)
      tag = (name + ".eval" + Twine(i)).str();
    return tag;
  };

  int64_t m = train.getMicrobatches();
  auto program = pipe::ProgramOp::create(
      b, loc, (train.getSymName() + "_eval").str(), train.getDevice(),
      train.getStages(), pipe::ScheduleKind::GPipe, m, train.getPipeline());
  program.getBody().push_back(new Block());
  b.setInsertionPointToStart(&program.getBody().front());
  Value weights;
  IntegerAttr version;
  if (Value trained = first.getWeights()) {
    auto wb = trained.getDefiningOp<pipe::WeightBufferOp>();
    if (!wb)
      return first.emitError("pipe-lower-programs: the forward's weights are not "
                             "a pipe.weight_buffer of the program");
    auto evalBuffer = cast<pipe::WeightBufferOp>(b.clone(*wb));
    weights = evalBuffer.getWeights();
    // AvgPipe: the centre, what the run trains (and --save writes);
    // PipeDream and 2BW: the newest version.
    EvalWeights read = evalWeightsOf(train, trained);
    version = b.getI64IntegerAttr(read.slot);
    if (read.newest)
      evalBuffer->setAttr(kEvalNewest,
                          b.getDenseI64ArrayAttr(
                              {int64_t(read.stepClock ? pipe::VersionClock::Step
                                                      : pipe::VersionClock::MicroBatch),
                               read.version, read.last}));
  }
  // The micro-batches in a loop; a whole-batch stage's straight-line.
  Value k;
  if (!whole) {
    auto loop = pipe::LoopOp::create(b, loc, 0, m);
    b.setInsertionPointToStart(&loop.getInstructions());
    k = loop.getIndex();
  }
  const int64_t params = evalStage.getParams();
  SmallVector<Value> inputs;
  for (size_t i = params; i < firstState; ++i) {
    // Copy mb of a whole-batch stage's input (every input is per micro-batch).
    int64_t mb = whole ? int64_t(i - params) % m : 0;
    DictionaryAttr attrs = evalStage.getArgAttrDict(i);
    auto input = attrs ? attrs.getAs<StringAttr>(pipe::attrs::kInput) : StringAttr();
    auto stepInput = attrs ? attrs.getAs<StringAttr>(pipe::attrs::kStepInput) : StringAttr();
    auto named = attrs ? attrs.getAs<StringAttr>(pipe::attrs::kName) : StringAttr();
    if (input || stepInput) {
      auto feed = pipe::FeedOp::create(b, loc, argTypes[i],
                                       (input ? input : stepInput).getValue(), mb, k);
      if (!input)
        feed->setAttr(pipe::attrs::kWholeStep, b.getUnitAttr());
      inputs.push_back(feed);
      continue;
    }
    auto peer = named ? recvPeer.find(named.getValue()) : recvPeer.end();
    if (peer == recvPeer.end())
      return evalStage.emitError("pipe-lower-programs: the device's program "
                                 "receives no argument ")
             << i << " of its forward";
    inputs.push_back(pipe::RecvOp::create(b, loc, argTypes[i], peer->second, mb,
                                          evalTag(named.getValue(), peer->second, false),
                                          k));
  }
  auto fwd = pipe::ForwardOp::create(
      b, loc, evalStage.getResultTypes(), FlatSymbolRefAttr::get(evalStage.getSymNameAttr()),
      inputs, weights, version,
      weights ? pipe::VersionClockAttr::get(ctx, pipe::VersionClock::Slot)
              : pipe::VersionClockAttr(),
      b.getI64IntegerAttr(0), k);
  if (whole)
    fwd->setAttr(wholebatch::kWholeBatch, b.getUnitAttr());
  // Each name's results in order: one, or a whole-batch stage's M copies of
  // a sent one (micro-batch c).
  std::map<std::pair<std::string, int64_t>, Value> byName;
  llvm::StringMap<int64_t> copiesOf;
  for (auto [i, result] : llvm::enumerate(fwd.getResults())) {
    if (evalStage.getResultAttr(i, pipe::attrs::kLoss))
      for (int64_t mb = 0; mb < (whole ? m : 1); ++mb)
        pipe::ReportLossOp::create(b, loc, result, mb, k);
    // A whole-batch stage's counts are over all M micro-batches already.
    if (auto slot = evalStage.getResultAttrOfType<IntegerAttr>(i, pipe::attrs::kMetric))
      pipe::ReportMetricOp::create(b, loc, result, slot.getInt(), 0, k);
    if (auto n = evalStage.getResultAttrOfType<StringAttr>(i, pipe::attrs::kName))
      byName.try_emplace({n.getValue().str(), copiesOf[n.getValue()]++}, result);
  }
  for (int64_t mb = 0; mb < (whole ? m : 1); ++mb)
    for (auto &[tag, peer] : sends) {
      auto found = byName.find({tag, mb});
      Value v = found == byName.end() ? Value() : found->second;
      if (!v)
        return evalStage.emitError("pipe-lower-programs: the evaluation forward has no "
                                   "result '")
               << tag << "' for micro-batch " << mb;
      pipe::SendOp::create(b, loc, v, peer, mb, evalTag(tag, peer, true), k);
    }
  return program;
}

struct LowerProgramsPass
    : public mlir::pipec::impl::LowerProgramsBase<LowerProgramsPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    SmallVector<pipe::ProgramOp> programs(module.getOps<pipe::ProgramOp>());
    if (programs.empty()) {
      module.emitError("pipe-lower-programs: the module has no pipe.program");
      return signalPassFailure();
    }
    pipe::ProgramOp chosen;
    if (device < 0) {
      if (programs.size() != 1) {
        module.emitError("pipe-lower-programs: the module has ")
            << programs.size()
            << " programs; pick the device to lower with device=<k>";
        return signalPassFailure();
      }
      chosen = programs[0];
    } else {
      for (pipe::ProgramOp p : programs)
        if (p.getDevice() == device)
          chosen = p;
      if (!chosen) {
        module.emitError("pipe-lower-programs: no pipe.program for device ")
            << static_cast<int64_t>(device);
        return signalPassFailure();
      }
    }
    if (failed(checkStepLowering(module, getArgument(), target)))
      return signalPassFailure();
    // The functions the module had (the imported forward, the training step
    // the stages were split from) are not part of the device's program.
    SmallVector<func::FuncOp> before(module.getOps<func::FuncOp>());
    // The evaluation program first: it is built from the training program
    // and the forward stage, which the step's lowering keeps.
    pipe::ProgramOp evalProgram;
    std::string unavailable, noAccuracy;
    if (eval) {
      FailureOr<pipe::ProgramOp> built =
          buildEvalProgram(module, chosen, unavailable, noAccuracy);
      if (failed(built))
        return signalPassFailure();
      evalProgram = *built;
    }
    ProgramLowering lowering(module, chosen, target == "cuda",
                             nonblockingSends, onnxOnly, deferWeightGrads);
    if (failed(lowering.run()))
      return signalPassFailure();
    if (evalProgram) {
      ProgramLowering evaluation(module, evalProgram, target == "cuda",
                                 /*nonblockingSends=*/false, onnxOnly, 0);
      evaluation.evaluationOf(lowering);
      if (failed(evaluation.run()))
        return signalPassFailure();
    }
    if (eval && !onnxOnly) {
      auto step = module.lookupSymbol<func::FuncOp>(kStepFunctionName);
      if (step)
        if (auto info = step->getAttrOfType<DictionaryAttr>(kProgramAttrName)) {
          NamedAttrList fields(info);
          fields.set("eval", BoolAttr::get(module.getContext(), bool(evalProgram)));
          if (!evalProgram)
            fields.set("eval_unavailable", StringAttr::get(module.getContext(), unavailable));
          bool counts = false;
          if (evalProgram)
            evalProgram.walk([&](pipe::ReportMetricOp) { counts = true; });
          if (counts)
            fields.set("eval_metrics", IntegerAttr::get(IntegerType::get(module.getContext(), 64),
                                                        kMetricCounted));
          else if (!noAccuracy.empty())
            fields.set("accuracy_unavailable",
                       StringAttr::get(module.getContext(), noAccuracy));
          step->setAttr(kProgramAttrName, fields.getDictionary(module.getContext()));
        }
    }
    // Everything else of the pipe level is done with.
    for (pipe::ProgramOp p : programs)
      p.erase();
    if (evalProgram)
      evalProgram.erase();
    // Read by the evaluation program only (pipe-compile's device modules):
    // the lowered module is the same as pipe-opt's from the whole module.
    module->removeAttr(pipe::attrs::kClassificationLosses);
    for (auto s : llvm::to_vector(module.getOps<pipe::StageOp>()))
      s.erase();
    if (onnxOnly)
      return;
    for (func::FuncOp f : before)
      f.erase();
  }
};

} // namespace
