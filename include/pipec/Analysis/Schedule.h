//===- Schedule.h - pipeline schedules and their simulator ------*- C++ -*-===//
//
// Synchronous pipeline schedules (GPipe, 1F1B-flush) as per-device
// instruction lists, and a simulator that runs such lists together.  Nothing
// here depends on MLIR: the passes translate `pipe.program` ops to and from
// these lists, and unit tests drive them directly.
//
// Device s holds stage s.  A schedule is a list per device of
//   F mb k | B mb k | send to peer (mb, tag) | recv from peer (mb, tag) | update
// The generator orders every device's sends and receives along one global
// order of transfers, so its programs are deadlock-free even when every send
// blocks until the peer receives (rendezvous), not only with buffered sends.
//
//===----------------------------------------------------------------------===//
#ifndef PIPEC_ANALYSIS_SCHEDULE_H
#define PIPEC_ANALYSIS_SCHEDULE_H

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace mlir::pipec::schedule {

/// AdvanceForward: AvgPipe's advance forward propagation, 1F1B with K more
/// warm-up forwards (K = 0 is 1F1B, K >= M GPipe's order).
enum class ScheduleKind { GPipe, OneFOneB, AdvanceForward };

/// "gpipe" / "1f1b" / "afp", the names the command lines use.
std::optional<ScheduleKind> parseScheduleKind(std::string_view name);
const char *stringifyScheduleKind(ScheduleKind kind);

enum class InstrKind {
  Forward,
  /// A full backward (input and weight gradients).
  Backward,
  /// Zero-bubble halves: B (input gradients) and W (weight gradients).
  BackwardInput,
  BackwardWeight,
  Send,
  Recv,
  Update,
  /// A collective among `group` (pipe.allreduce, pipe.average,
  /// pipe.clip_grad_norm): every device of the group waits until all of
  /// them have reached their collective of the same tag, the n-th of each
  /// matched with the n-th of the others.
  Collective,
  /// Anything else a program does (feed, zero_grad, report_loss, ...):
  /// takes no time and never blocks.
  Other,
};

/// Tags of the generator's transfers: activations go to stage s+1, their
/// gradients come back to stage s.
inline constexpr const char *kActivationTag = "act";
inline constexpr const char *kGradientTag = "grad";

/// The micro-batch of an instruction that has none (micro-batch indices of
/// a no-flush step program may be negative).
inline constexpr int64_t kNoMicroBatch = INT64_MIN;

struct Instr {
  InstrKind kind = InstrKind::Other;
  /// Forward / backward: the stage computed.
  int64_t stage = -1;
  /// Forward / backward / send / recv (and a no-flush update): the
  /// micro-batch.
  int64_t mb = kNoMicroBatch;
  /// Send / recv: the other device.
  int64_t peer = -1;
  /// Send / recv: matched together with peer and mb.
  std::string tag;
  /// Send / recv: what is transferred (e.g. a tensor type); a matched pair
  /// whose payloads differ is an error. Empty matches empty.
  std::string payload;
  /// Collective: the devices taking part (this one included).
  std::vector<int64_t> group;

  static Instr forward(int64_t stage, int64_t mb);
  static Instr backward(int64_t stage, int64_t mb);
  static Instr send(int64_t peer, int64_t mb, std::string tag,
                    std::string payload = {});
  static Instr recv(int64_t peer, int64_t mb, std::string tag,
                    std::string payload = {});
  static Instr update(int64_t stage, int64_t mb = kNoMicroBatch);
  static Instr collective(std::vector<int64_t> group, std::string tag);

  bool hasMb() const { return mb != kNoMicroBatch; }

  bool isCompute() const {
    return kind == InstrKind::Forward || kind == InstrKind::Backward ||
           kind == InstrKind::BackwardInput || kind == InstrKind::BackwardWeight;
  }
  bool isTransfer() const {
    return kind == InstrKind::Send || kind == InstrKind::Recv;
  }
  bool operator==(const Instr &other) const;
  bool operator!=(const Instr &other) const { return !(*this == other); }
};

/// "F3 of stage 1", "send of mb 1 tag \"act\" to device 2", "update".
std::string describe(const Instr &instr);

using Program = std::vector<Instr>;

struct Schedule {
  ScheduleKind kind = ScheduleKind::GPipe;
  int64_t stages = 0;
  int64_t microbatches = 0;
  /// devices[s]: the program of device s, which holds stage s.
  std::vector<Program> devices;
};

/// The order of forwards and backwards on stage `stage`: GPipe runs all
/// forwards, then all backwards; 1F1B runs min(p-s-1, M) warm-up forwards,
/// then alternates forward and backward, then drains the backwards;
/// advance forward propagation runs min(p-s-1+advance, M) warm-up forwards,
/// then does as 1F1B. `advance` applies to AdvanceForward only.
std::vector<Instr> computeOrder(ScheduleKind kind, int64_t stages,
                                int64_t microbatches, int64_t stage,
                                int64_t advance = 0);

/// The full schedule of one training step: the compute order of every stage,
/// the transfers of activations (tag kActivationTag, to s+1) and gradients
/// (kGradientTag, to s-1), and one update at the end of every device.
/// Requires stages >= 1 and microbatches >= 1.
Schedule generateSchedule(ScheduleKind kind, int64_t stages,
                          int64_t microbatches, int64_t advance = 0);

//===----------------------------------------------------------------------===//
// No-flush schedules (PipeDream, PipeDream-2BW)
//===----------------------------------------------------------------------===//

/// When a no-flush method updates a stage's weights.
enum class UpdateRule {
  /// After every backward (PipeDream): one update per micro-batch.
  PerMicroBatch,
  /// After the backward of each step's last micro-batch (2BW): one per step.
  PerStep,
};

/// One step of 1F1B without a flush, per device: what device s does in
/// step t of a long run, micro-batch indices relative to the step's first
/// micro-batch t*M. Device s runs the forwards of the step's micro-batches
/// 0..M-1 and the backwards of micro-batches 0-w..M-1-w (w = p-1-s: the
/// negative ones are earlier steps' micro-batches still in flight), in the
/// generator's steady-state order. A gradient the next stage sends in one
/// step for a backward of the next step is received at once, so no transfer
/// crosses a step boundary. Update instructions carry the micro-batch of
/// the backward they follow (`mb`). Running the step program for t = 0, 1,
/// ... and skipping every instruction whose global micro-batch t*M + mb is
/// outside [0, steps*M) (expandSteps) gives a deadlock-free run: each step's
/// transfers follow one global order on every device.
/// Requires stages >= 1 and microbatches >= 1.
Schedule generateNoFlushStep(int64_t stages, int64_t microbatches,
                             UpdateRule rule);

/// How many steps without data a no-flush step program needs after the last
/// step to finish every micro-batch in flight: ceil(-min mb / M), 0 for a
/// program without negative micro-batches.
int64_t drainSteps(const Program &step, int64_t microbatches);

/// A run of `steps` steps of a no-flush step program and its drain, with
/// global micro-batch indices; instructions of micro-batches outside
/// [0, steps*M) are left out (instructions without a micro-batch are kept
/// once per step).
Program expandSteps(const Program &step, int64_t microbatches, int64_t steps);

//===----------------------------------------------------------------------===//
// Simulation
//===----------------------------------------------------------------------===//

/// The CPU runtime's pipert_send returns at once for a message of at most
/// this many bytes (buffered, or sent eagerly by MPI) and waits for its
/// receiver above it (runtime/cpu/comm/mpi_comm.cpp, at the default
/// PIPERT_SEND_BUFFER): what the step-time predictions simulate.
inline constexpr int64_t kRuntimeBufferedSendBytes = int64_t(4) << 20;

struct SimulationOptions {
  /// False: a send blocks until the peer runs the matching recv
  /// (rendezvous, what a blocking MPI_Send of a large tensor does). True: a
  /// send returns at once and the message waits for its recv.
  bool bufferedSends = false;
  /// Where set, decides per send whether it is buffered (in place of
  /// bufferedSends): the runtime's buffered sends cover a range of message
  /// sizes (runtime/cpu/comm/mpi_comm.cpp), the others are rendezvous.
  std::function<bool(int64_t device, const Instr &)> bufferedSend;
  /// Buffered sends: the receiver copies the message when it receives it
  /// (single-copy shared memory: the receiver reads the sender's staging
  /// buffer), taking the send's duration on the receiving device from the
  /// moment both the message is there and the receiver is; false: the
  /// message travels on its own and arrives that long after it was sent.
  bool receiverCopies = false;
  /// With receiverCopies, where set: the part of a buffered send's duration
  /// the receiver pays (the copy, at most the duration); the rest is in
  /// flight (latency: the message is there that long after the send, the
  /// receiver free meanwhile). Unset: the receiver pays all of it.
  std::function<int64_t(int64_t device, const Instr &)> receiverCopy;
  /// Durations, in slots, of the compute instructions; transfers take none.
  int64_t forwardCost = 1;
  int64_t backwardCost = 1;
  int64_t backwardInputCost = 1;
  int64_t backwardWeightCost = 1;
  /// Where set, the duration of every instruction of device `device` (in
  /// any integer unit, e.g. nanoseconds), replacing the slot costs: compute
  /// and updates occupy their device; a send's duration is the transfer's
  /// (both ends wait for it in rendezvous mode; with buffered sends the
  /// message arrives that long after it was sent); a recv's is ignored.
  std::function<int64_t(int64_t device, const Instr &)> duration;
};

/// An instruction of a device's program; `index == program size` stands for
/// the end of the program (a device that finished).
struct InstrRef {
  int64_t device = -1;
  int64_t index = -1;
  bool operator==(const InstrRef &o) const {
    return device == o.device && index == o.index;
  }
};

struct SimulationFailure {
  enum Kind {
    /// No device can go on: `first` waits for `second`'s device, which
    /// waits elsewhere (or finished: second.index is its program's size).
    Deadlock,
    /// `first` (a recv) matched `second` (a send) but their payloads differ.
    PayloadMismatch,
    /// Buffered sends: `first` was never received; `second` is the end of
    /// the peer's program.
    UnreceivedSend,
    /// `first` names a peer that is not another device of the simulation.
    BadPeer,
  };
  Kind kind;
  InstrRef first;
  std::optional<InstrRef> second;
  /// A one-line explanation naming both instructions.
  std::string message;
};

/// A compute instruction placed in time.
struct Slot {
  int64_t start = 0;
  int64_t end = 0;
  /// The instruction in its device's program.
  int64_t index = 0;
};

struct SimulationResult {
  std::optional<SimulationFailure> failure;
  /// Per device: its compute instructions in time, in program order.
  std::vector<std::vector<Slot>> timeline;
  /// Per device: its other instructions that took time (updates, and the
  /// transfers from when the device waited to when they completed).
  std::vector<std::vector<Slot>> otherTimeline;
  /// When the last device finishes.
  int64_t makespan = 0;
  /// Per device: the most micro-batches whose forward ran and whose backward
  /// (full, or weight part) had not yet, at any point of its program.
  std::vector<int64_t> peakInFlight;
  /// Idle slots of all devices over devices x makespan (0 for an empty run).
  double bubbleFraction = 0;

  bool ok() const { return !failure.has_value(); }
};

/// Runs the programs together; devices[d] is device d's program. A send of
/// device d to q is matched with the first recv of q from d with the same
/// (tag, mb) that q posts: in rendezvous mode only if it is the instruction q
/// runs next, with buffered sends the earliest pending message with that key.
SimulationResult simulate(const std::vector<Program> &devices,
                          const SimulationOptions &options = {});

/// GPipe's and 1F1B's bubble fraction with equal forward and backward
/// costs: (p-1)/(M+p-1).
double theoreticalBubbleFraction(int64_t stages, int64_t microbatches);
/// Peak in-flight micro-batches of stage s: M for GPipe, min(p-s, M) for
/// 1F1B, min(p-s+advance, M) for advance forward propagation.
int64_t theoreticalPeakInFlight(ScheduleKind kind, int64_t stages,
                                int64_t microbatches, int64_t stage,
                                int64_t advance = 0);

//===----------------------------------------------------------------------===//
// Order checks
//===----------------------------------------------------------------------===//

struct OrderProblem {
  InstrRef at;
  /// Another instruction the problem involves (the earlier run of a
  /// duplicate, the backward that comes too early, ...).
  std::optional<InstrRef> related;
  std::string message;
};

/// Checks one device's program: for every stage of `stages` and every
/// micro-batch in [0, microbatches), one forward and one backward (a full
/// one, or one input and one weight part), the forward first; the weight
/// part after the input part; no compute of other stages or micro-batches.
/// A micro-batch that never runs is reported at the program's end.
std::vector<OrderProblem> checkComputeOrder(const Program &program,
                                            int64_t device,
                                            const std::vector<int64_t> &stages,
                                            int64_t microbatches);

//===----------------------------------------------------------------------===//
// Time tables
//===----------------------------------------------------------------------===//

/// A human-readable table of a simulated run: a header of slot numbers, one
/// row per device ("device 1:" then one cell per slot: F<mb>, B<mb>, W<mb>,
/// or "." when idle), then the bubble and the peak in-flight micro-batches.
/// A compute op of cost c fills c cells. Needs a successful result. Rows
/// are named by `deviceIds` where given (one per program), else 0, 1, ...
std::string formatTimeTable(const std::vector<Program> &devices,
                            const SimulationResult &result,
                            const std::vector<int64_t> &deviceIds = {});

} // namespace mlir::pipec::schedule

#endif // PIPEC_ANALYSIS_SCHEDULE_H
