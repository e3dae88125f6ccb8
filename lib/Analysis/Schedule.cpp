//===- Schedule.cpp - pipeline schedules and their simulator --------------===//
#include "pipec/Analysis/Schedule.h"

#include <algorithm>
#include <cassert>
#include <cstdio>
#include <map>
#include <set>
#include <sstream>
#include <tuple>
#include <utility>

using namespace mlir::pipec::schedule;

std::optional<ScheduleKind>
mlir::pipec::schedule::parseScheduleKind(std::string_view name) {
  if (name == "gpipe")
    return ScheduleKind::GPipe;
  if (name == "1f1b")
    return ScheduleKind::OneFOneB;
  if (name == "afp")
    return ScheduleKind::AdvanceForward;
  return std::nullopt;
}

const char *mlir::pipec::schedule::stringifyScheduleKind(ScheduleKind kind) {
  switch (kind) {
  case ScheduleKind::GPipe:
    return "gpipe";
  case ScheduleKind::OneFOneB:
    return "1f1b";
  case ScheduleKind::AdvanceForward:
    return "afp";
  }
  return "?";
}

Instr Instr::forward(int64_t stage, int64_t mb) {
  Instr i;
  i.kind = InstrKind::Forward;
  i.stage = stage;
  i.mb = mb;
  return i;
}

Instr Instr::backward(int64_t stage, int64_t mb) {
  Instr i;
  i.kind = InstrKind::Backward;
  i.stage = stage;
  i.mb = mb;
  return i;
}

Instr Instr::send(int64_t peer, int64_t mb, std::string tag,
                  std::string payload) {
  Instr i;
  i.kind = InstrKind::Send;
  i.peer = peer;
  i.mb = mb;
  i.tag = std::move(tag);
  i.payload = std::move(payload);
  return i;
}

Instr Instr::recv(int64_t peer, int64_t mb, std::string tag,
                  std::string payload) {
  Instr i = send(peer, mb, std::move(tag), std::move(payload));
  i.kind = InstrKind::Recv;
  return i;
}

Instr Instr::update(int64_t stage, int64_t mb) {
  Instr i;
  i.kind = InstrKind::Update;
  i.stage = stage;
  i.mb = mb;
  return i;
}

Instr Instr::collective(std::vector<int64_t> group, std::string tag) {
  Instr i;
  i.kind = InstrKind::Collective;
  i.group = std::move(group);
  i.tag = std::move(tag);
  return i;
}

bool Instr::operator==(const Instr &o) const {
  return std::tie(kind, stage, mb, peer, tag, payload, group) ==
         std::tie(o.kind, o.stage, o.mb, o.peer, o.tag, o.payload, o.group);
}

/// The label of a compute instruction in a time table.
static std::string cellLabel(const Instr &instr) {
  switch (instr.kind) {
  case InstrKind::Forward:
    return "F" + std::to_string(instr.mb);
  case InstrKind::Backward:
  case InstrKind::BackwardInput:
    return "B" + std::to_string(instr.mb);
  case InstrKind::BackwardWeight:
    return "W" + std::to_string(instr.mb);
  default:
    return "?";
  }
}

std::string mlir::pipec::schedule::describe(const Instr &instr) {
  std::ostringstream os;
  switch (instr.kind) {
  case InstrKind::Forward:
  case InstrKind::Backward:
  case InstrKind::BackwardInput:
  case InstrKind::BackwardWeight:
    os << cellLabel(instr);
    if (instr.kind == InstrKind::BackwardInput)
      os << " (input)";
    if (instr.kind == InstrKind::BackwardWeight)
      os << " (weight)";
    os << " of stage " << instr.stage;
    break;
  case InstrKind::Send:
    os << "send of mb " << instr.mb << " tag \"" << instr.tag
       << "\" to device " << instr.peer;
    break;
  case InstrKind::Recv:
    os << "recv of mb " << instr.mb << " tag \"" << instr.tag
       << "\" from device " << instr.peer;
    break;
  case InstrKind::Update:
    os << "update";
    break;
  case InstrKind::Collective: {
    os << instr.tag << " among [";
    for (size_t i = 0; i < instr.group.size(); ++i)
      os << (i ? ", " : "") << instr.group[i];
    os << "]";
    break;
  }
  case InstrKind::Other:
    os << "instruction";
    break;
  }
  return os.str();
}

//===----------------------------------------------------------------------===//
// Generation
//===----------------------------------------------------------------------===//

std::vector<Instr> mlir::pipec::schedule::computeOrder(ScheduleKind kind,
                                                       int64_t stages,
                                                       int64_t microbatches,
                                                       int64_t stage,
                                                       int64_t advance) {
  std::vector<Instr> order;
  if (kind == ScheduleKind::GPipe) {
    for (int64_t mb = 0; mb < microbatches; ++mb)
      order.push_back(Instr::forward(stage, mb));
    for (int64_t mb = 0; mb < microbatches; ++mb)
      order.push_back(Instr::backward(stage, mb));
    return order;
  }
  int64_t extra = kind == ScheduleKind::AdvanceForward ? std::max<int64_t>(advance, 0) : 0;
  int64_t warmup = std::min(stages - stage - 1 + extra, microbatches);
  for (int64_t mb = 0; mb < warmup; ++mb)
    order.push_back(Instr::forward(stage, mb));
  for (int64_t i = 0; i < microbatches - warmup; ++i) {
    order.push_back(Instr::forward(stage, warmup + i));
    order.push_back(Instr::backward(stage, i));
  }
  for (int64_t mb = microbatches - warmup; mb < microbatches; ++mb)
    order.push_back(Instr::backward(stage, mb));
  return order;
}

namespace {
/// An instruction of a device being generated, with the key that orders it.
/// Transfers are keyed by the start time of the compute that consumes them,
/// the same key on both ends, and ordered before a compute starting at the
/// same time; equal keys are broken by the transfer's identity, again the
/// same on both ends. So every device runs its transfers in one global
/// order, which is what makes the schedule rendezvous-safe.
struct Keyed {
  int64_t time;
  int kind; // 0: transfer, 1: compute
  int direction; // 0: activation, 1: gradient
  int64_t lowerStage;
  int64_t mb;
  Instr instr;

  bool operator<(const Keyed &o) const {
    return std::tie(time, kind, direction, lowerStage, mb) <
           std::tie(o.time, o.kind, o.direction, o.lowerStage, o.mb);
  }
};
} // namespace

Schedule mlir::pipec::schedule::generateSchedule(ScheduleKind kind,
                                                 int64_t stages,
                                                 int64_t microbatches,
                                                 int64_t advance) {
  assert(stages >= 1 && microbatches >= 1 && "empty pipeline");
  Schedule schedule;
  schedule.kind = kind;
  schedule.stages = stages;
  schedule.microbatches = microbatches;

  std::vector<std::vector<Instr>> orders;
  for (int64_t s = 0; s < stages; ++s)
    orders.push_back(computeOrder(kind, stages, microbatches, s, advance));

  // As-soon-as-possible start times with unit costs, in each stage's order.
  const int64_t unknown = -1;
  std::vector<std::vector<int64_t>> fStart(
      stages, std::vector<int64_t>(microbatches, unknown));
  std::vector<std::vector<int64_t>> bStart = fStart;
  std::vector<size_t> next(stages, 0);
  std::vector<int64_t> clock(stages, 0);
  for (bool progress = true; progress;) {
    progress = false;
    for (int64_t s = 0; s < stages; ++s) {
      while (next[s] < orders[s].size()) {
        const Instr &instr = orders[s][next[s]];
        int64_t ready = 0;
        if (instr.kind == InstrKind::Forward) {
          if (s > 0) {
            if (fStart[s - 1][instr.mb] == unknown)
              break;
            ready = fStart[s - 1][instr.mb] + 1;
          }
        } else if (s + 1 < stages) {
          if (bStart[s + 1][instr.mb] == unknown)
            break;
          ready = bStart[s + 1][instr.mb] + 1;
        }
        int64_t start = std::max(clock[s], ready);
        (instr.kind == InstrKind::Forward ? fStart : bStart)[s][instr.mb] =
            start;
        clock[s] = start + 1;
        ++next[s];
        progress = true;
      }
    }
  }
  for (int64_t s = 0; s < stages; ++s)
    assert(next[s] == orders[s].size() && "compute orders cannot all run");

  for (int64_t s = 0; s < stages; ++s) {
    std::vector<Keyed> items;
    for (const Instr &instr : orders[s]) {
      int64_t mb = instr.mb;
      if (instr.kind == InstrKind::Forward) {
        int64_t t = fStart[s][mb];
        if (s > 0)
          items.push_back({t, 0, 0, s - 1, mb,
                           Instr::recv(s - 1, mb, kActivationTag)});
        items.push_back({t, 1, 0, 0, 0, instr});
        if (s + 1 < stages)
          items.push_back({fStart[s + 1][mb], 0, 0, s, mb,
                           Instr::send(s + 1, mb, kActivationTag)});
      } else {
        int64_t t = bStart[s][mb];
        if (s + 1 < stages)
          items.push_back({t, 0, 1, s, mb,
                           Instr::recv(s + 1, mb, kGradientTag)});
        items.push_back({t, 1, 0, 0, 0, instr});
        if (s > 0)
          items.push_back({bStart[s - 1][mb], 0, 1, s - 1, mb,
                           Instr::send(s - 1, mb, kGradientTag)});
      }
    }
    std::stable_sort(items.begin(), items.end());
    Program program;
    for (Keyed &item : items)
      program.push_back(std::move(item.instr));
    program.push_back(Instr::update(s));
    schedule.devices.push_back(std::move(program));
  }
  return schedule;
}

//===----------------------------------------------------------------------===//
// No-flush schedules
//===----------------------------------------------------------------------===//

namespace {
int64_t floorDiv(int64_t a, int64_t b) {
  int64_t q = a / b;
  return (a % b != 0 && (a < 0) != (b < 0)) ? q - 1 : q;
}
} // namespace

Schedule mlir::pipec::schedule::generateNoFlushStep(int64_t stages,
                                                    int64_t microbatches,
                                                    UpdateRule rule) {
  assert(stages >= 1 && microbatches >= 1 && "empty pipeline");
  const int64_t p = stages, m = microbatches;
  // A long 1F1B run has the no-flush compute order (a warm-up, then one
  // forward and one backward, the drain only at its end) and a transfer
  // order every device agrees on. Its steps in the middle are the steady
  // state: take one of them.
  const int64_t lag = (p - 1 + m - 1) / m; // steps of warm-up
  const int64_t pick = lag + 2;
  const int64_t steps = pick + lag + 3;
  Schedule run = generateSchedule(ScheduleKind::OneFOneB, p, steps * m);

  Schedule step;
  step.kind = ScheduleKind::OneFOneB;
  step.stages = p;
  step.microbatches = m;
  for (int64_t s = 0; s < p; ++s) {
    const int64_t w = p - 1 - s;
    // The step an instruction of the long run belongs to: a forward's, the
    // step of its micro-batch; a backward's, the step of the forward it
    // follows in 1F1B order (micro-batch + w). A transfer belongs to the
    // step of the compute that consumes it, on both ends: activations to
    // their forward's, a gradient to the previous stage's backward
    // (micro-batch + w + 1 on the sender). The generator defers a send
    // until its receiver needs it, so this keeps every device's order as
    // it is (a gradient computed at the end of one step may be sent early in
    // the next, kept in between) and no transfer crosses a step.
    auto stepOf = [&](const Instr &instr) -> int64_t {
      switch (instr.kind) {
      case InstrKind::Forward:
        return floorDiv(instr.mb, m);
      case InstrKind::Backward:
        return floorDiv(instr.mb + w, m);
      case InstrKind::Send:
      case InstrKind::Recv:
        if (instr.tag == kActivationTag)
          return floorDiv(instr.mb, m);
        if (instr.kind == InstrKind::Send)
          return floorDiv(instr.mb + w + 1, m);
        return floorDiv(instr.mb + w, m);
      default:
        return kNoMicroBatch;
      }
    };
    std::vector<std::vector<Instr>> bySteps(steps + lag + 2);
    for (const Instr &instr : run.devices[s]) {
      int64_t t = stepOf(instr);
      if (t == kNoMicroBatch)
        continue; // the run's final update
      bySteps[t].push_back(instr);
      if (instr.kind == InstrKind::Backward &&
          (rule == UpdateRule::PerMicroBatch || (instr.mb + 1) % m == 0))
        bySteps[t].push_back(Instr::update(s, instr.mb));
    }
    auto relative = [&](std::vector<Instr> list, int64_t t) {
      for (Instr &instr : list)
        instr.mb -= t * m;
      return list;
    };
    Program body = relative(bySteps[pick], pick);
    // The steady state repeats: the next step is this one shifted by M.
    assert(body == relative(bySteps[pick + 1], pick + 1) &&
           "1F1B's steady state does not repeat step by step");
    step.devices.push_back(std::move(body));
  }
  return step;
}

int64_t mlir::pipec::schedule::drainSteps(const Program &step,
                                          int64_t microbatches) {
  int64_t lowest = 0;
  for (const Instr &instr : step)
    if (instr.hasMb())
      lowest = std::min(lowest, instr.mb);
  return (-lowest + microbatches - 1) / microbatches;
}

Program mlir::pipec::schedule::expandSteps(const Program &step,
                                           int64_t microbatches,
                                           int64_t steps) {
  Program run;
  int64_t total = steps * microbatches;
  int64_t calls = steps + drainSteps(step, microbatches);
  for (int64_t t = 0; t < calls; ++t)
    for (const Instr &instr : step) {
      if (!instr.hasMb()) {
        if (t < steps)
          run.push_back(instr);
        continue;
      }
      int64_t g = t * microbatches + instr.mb;
      if (g < 0 || g >= total)
        continue;
      Instr global = instr;
      global.mb = g;
      run.push_back(std::move(global));
    }
  return run;
}

//===----------------------------------------------------------------------===//
// Simulation
//===----------------------------------------------------------------------===//

double mlir::pipec::schedule::theoreticalBubbleFraction(int64_t stages,
                                                        int64_t microbatches) {
  return double(stages - 1) / double(microbatches + stages - 1);
}

int64_t mlir::pipec::schedule::theoreticalPeakInFlight(ScheduleKind kind,
                                                       int64_t stages,
                                                       int64_t microbatches,
                                                       int64_t stage,
                                                       int64_t advance) {
  if (kind == ScheduleKind::GPipe)
    return microbatches;
  int64_t extra = kind == ScheduleKind::AdvanceForward ? std::max<int64_t>(advance, 0) : 0;
  return std::min(stages - stage + extra, microbatches);
}

namespace {
struct Message {
  std::string tag;
  int64_t mb;
  std::string payload;
  InstrRef send;
  int64_t time;
  /// What receiving it costs the receiver (receiverCopies).
  int64_t copy = 0;
};

class Simulator {
public:
  Simulator(const std::vector<Program> &devices,
            const SimulationOptions &options)
      : devices(devices), options(options), n(int64_t(devices.size())),
        pc(n, 0), clock(n, 0), inFlight(n), queues(n * n) {
    result.timeline.resize(n);
    result.otherTimeline.resize(n);
    result.peakInFlight.assign(n, 0);
  }

  SimulationResult run();

private:
  const Instr *current(int64_t d) const {
    return pc[d] < devices[d].size() ? &devices[d][pc[d]] : nullptr;
  }
  InstrRef ref(int64_t d) const { return {d, int64_t(pc[d])}; }
  int64_t cost(int64_t d, const Instr &instr) const;
  /// Runs the instructions of `d` that never block; true if any ran.
  bool runLocal(int64_t d);
  /// Tries the transfer `d` is at; true if it completed.
  bool tryTransfer(int64_t d);
  /// `d`'s recv `instr` takes the queued message `it` (buffered send).
  bool takeQueued(int64_t d, const Instr &instr, std::vector<Message> &queue,
                  std::vector<Message>::iterator it);
  /// `d`'s transfer `instr` meets `q`'s matching `other` (rendezvous).
  bool rendezvous(int64_t d, const Instr &instr, int64_t q, const Instr &other);
  void fail(SimulationFailure::Kind kind, InstrRef first,
            std::optional<InstrRef> second, std::string message) {
    result.failure = SimulationFailure{kind, first, second, std::move(message)};
  }
  std::string where(InstrRef r) const;
  bool tryCollective(int64_t d);
  void reportDeadlock();

  const std::vector<Program> &devices;
  SimulationOptions options;
  int64_t n;
  std::vector<size_t> pc;
  std::vector<int64_t> clock;
  std::vector<std::set<std::pair<int64_t, int64_t>>> inFlight;
  /// Buffered messages from device a to b in queues[a * n + b], in order.
  std::vector<std::vector<Message>> queues;
  SimulationResult result;
};
} // namespace

int64_t Simulator::cost(int64_t d, const Instr &instr) const {
  if (options.duration)
    return instr.kind == InstrKind::Recv ? 0 : options.duration(d, instr);
  switch (instr.kind) {
  case InstrKind::Forward:
    return options.forwardCost;
  case InstrKind::Backward:
    return options.backwardCost;
  case InstrKind::BackwardInput:
    return options.backwardInputCost;
  case InstrKind::BackwardWeight:
    return options.backwardWeightCost;
  default:
    return 0;
  }
}

bool Simulator::runLocal(int64_t d) {
  bool ran = false;
  while (const Instr *instr = current(d)) {
    if (instr->isTransfer() || instr->kind == InstrKind::Collective)
      break;
    if (!instr->isCompute() && options.duration) {
      int64_t start = clock[d];
      clock[d] += cost(d, *instr);
      if (clock[d] > start)
        result.otherTimeline[d].push_back({start, clock[d], int64_t(pc[d])});
    }
    if (instr->isCompute()) {
      int64_t start = clock[d];
      clock[d] += cost(d, *instr);
      result.timeline[d].push_back({start, clock[d], int64_t(pc[d])});
      auto key = std::make_pair(instr->stage, instr->mb);
      if (instr->kind == InstrKind::Forward) {
        inFlight[d].insert(key);
        result.peakInFlight[d] =
            std::max(result.peakInFlight[d], int64_t(inFlight[d].size()));
      } else if (instr->kind == InstrKind::Backward ||
                 instr->kind == InstrKind::BackwardWeight) {
        inFlight[d].erase(key);
      }
    }
    ++pc[d];
    ran = true;
  }
  return ran;
}

std::string Simulator::where(InstrRef r) const {
  const Program &program = devices[r.device];
  if (r.index >= int64_t(program.size()))
    return "the end of device " + std::to_string(r.device) + "'s program";
  return "device " + std::to_string(r.device) + "'s " +
         describe(program[r.index]) + " (instruction " +
         std::to_string(r.index) + ")";
}

bool Simulator::tryTransfer(int64_t d) {
  const Instr &instr = *current(d);
  int64_t q = instr.peer;
  if (q < 0 || q >= n || q == d) {
    fail(SimulationFailure::BadPeer, ref(d), std::nullopt,
         where(ref(d)) + " names no other device of the " +
             std::to_string(n) + " simulated");
    return false;
  }
  // Mixed (options.bufferedSend): a buffered send queues its message, a
  // recv takes a queued message if there is one, else meets a rendezvous
  // send as below.
  const bool mixed = bool(options.bufferedSend);
  auto buffered = [&](int64_t device, const Instr &send) {
    return mixed ? options.bufferedSend(device, send) : options.bufferedSends;
  };
  if (instr.kind == InstrKind::Send && buffered(d, instr)) {
    // With receiverCopies the message is there at once and its duration is
    // charged when it is received (takeQueued).
    const int64_t total = cost(d, instr);
    const int64_t copy =
        !options.receiverCopies
            ? 0
            : options.receiverCopy ? std::clamp<int64_t>(options.receiverCopy(d, instr), 0, total)
                                   : total;
    queues[d * n + q].push_back(
        {instr.tag, instr.mb, instr.payload, ref(d), clock[d] + (total - copy), copy});
    ++pc[d];
    return true;
  }
  if (instr.kind == InstrKind::Recv && (options.bufferedSends || mixed)) {
    std::vector<Message> &queue = queues[q * n + d];
    auto it = std::find_if(queue.begin(), queue.end(), [&](const Message &m) {
      return m.tag == instr.tag && m.mb == instr.mb;
    });
    if (it == queue.end() && !mixed)
      return false;
    if (it != queue.end())
      return takeQueued(d, instr, queue, it);
  }

  const Instr *other = current(q);
  if (!other || other->peer != d || other->tag != instr.tag ||
      other->mb != instr.mb ||
      other->kind != (instr.kind == InstrKind::Send ? InstrKind::Recv
                                                    : InstrKind::Send) ||
      (other->kind == InstrKind::Send && buffered(q, *other)))
    return false;
  return rendezvous(d, instr, q, *other);
}

bool Simulator::takeQueued(int64_t d, const Instr &instr, std::vector<Message> &queue,
                           std::vector<Message>::iterator it) {
  if (it->payload != instr.payload) {
    fail(SimulationFailure::PayloadMismatch, ref(d), it->send,
         where(ref(d)) + " expects " + instr.payload + " but " +
             where(it->send) + " sends " + it->payload);
    return false;
  }
  const int64_t done = std::max(clock[d], it->time) + it->copy;
  if (done > clock[d])
    result.otherTimeline[d].push_back({clock[d], done, int64_t(pc[d])});
  clock[d] = done;
  queue.erase(it);
  ++pc[d];
  return true;
}

bool Simulator::rendezvous(int64_t d, const Instr &instr, int64_t q, const Instr &other) {
  if (other.payload != instr.payload) {
    InstrRef recv = instr.kind == InstrKind::Recv ? ref(d) : ref(q);
    InstrRef send = instr.kind == InstrKind::Recv ? ref(q) : ref(d);
    fail(SimulationFailure::PayloadMismatch, recv, send,
         where(recv) + " expects " +
             devices[recv.device][recv.index].payload + " but " +
             where(send) + " sends " + devices[send.device][send.index].payload);
    return false;
  }
  int64_t sender = instr.kind == InstrKind::Send ? d : q;
  int64_t time = std::max(clock[d], clock[q]) +
                 cost(sender, devices[sender][pc[sender]]);
  for (int64_t e : {d, q})
    if (time > clock[e])
      result.otherTimeline[e].push_back({clock[e], time, int64_t(pc[e])});
  clock[d] = clock[q] = time;
  ++pc[d];
  ++pc[q];
  return true;
}

bool Simulator::tryCollective(int64_t d) {
  const Instr &instr = *current(d);
  if (std::find(instr.group.begin(), instr.group.end(), d) == instr.group.end()) {
    fail(SimulationFailure::BadPeer, ref(d), std::nullopt,
         where(ref(d)) + " does not include its own device");
    return false;
  }
  int64_t time = clock[d];
  for (int64_t q : instr.group) {
    if (q < 0 || q >= n) {
      fail(SimulationFailure::BadPeer, ref(d), std::nullopt,
           where(ref(d)) + " names no other device of the " + std::to_string(n) +
               " simulated");
      return false;
    }
    // A member elsewhere (another collective included) is not there yet.
    const Instr *other = current(q);
    if (!other || other->kind != InstrKind::Collective || other->tag != instr.tag ||
        other->group != instr.group)
      return false;
    if (other->payload != instr.payload) {
      fail(SimulationFailure::PayloadMismatch, ref(d), ref(q),
           where(ref(d)) + " (" + instr.payload + ") does not match " + where(ref(q)) +
               " (" + other->payload + ")");
      return false;
    }
    time = std::max(time, clock[q]);
  }
  for (int64_t q : instr.group) {
    if (time > clock[q])
      result.otherTimeline[q].push_back({clock[q], time, int64_t(pc[q])});
    clock[q] = time;
    ++pc[q];
  }
  return true;
}

void Simulator::reportDeadlock() {
  // A device in a collective waits for the first member that is elsewhere.
  for (int64_t d = 0; d < n; ++d) {
    const Instr *instr = current(d);
    if (!instr || instr->kind != InstrKind::Collective)
      continue;
    for (int64_t q : instr->group) {
      const Instr *other = current(q);
      if (other && other->kind == InstrKind::Collective && other->tag == instr->tag &&
          other->group == instr->group)
        continue;
      std::string message = "deadlock: " + where(ref(d)) + " waits for device " +
                            std::to_string(q) + ", " +
                            (other ? "which waits in its " + describe(*other)
                                   : std::string("which has finished its program"));
      fail(SimulationFailure::Deadlock, ref(d), ref(q), message);
      return;
    }
  }
  // Prefer two devices that wait on each other, and put the recv first:
  // its position is what a reader of a broken program checks first.
  std::optional<std::pair<int64_t, int64_t>> pair;
  for (int64_t d = 0; d < n && !pair; ++d) {
    const Instr *instr = current(d);
    if (!instr)
      continue;
    const Instr *other = current(instr->peer);
    if (!other || !other->isTransfer() || other->peer != d)
      continue;
    bool otherFirst =
        instr->kind == InstrKind::Send && other->kind == InstrKind::Recv;
    pair = otherFirst ? std::make_pair(instr->peer, d)
                      : std::make_pair(d, instr->peer);
  }
  // Otherwise the first waiting device and whatever its peer is doing.
  for (int64_t d = 0; d < n && !pair; ++d)
    if (current(d))
      pair = std::make_pair(d, current(d)->peer);
  auto [d, q] = *pair;
  InstrRef first = ref(d), second = ref(q);
  std::string message = "deadlock: " + where(first) + " waits for device " +
                        std::to_string(q) + ", ";
  if (!current(q))
    message += "which has finished its program";
  else
    message += "which waits in its " + describe(*current(q));
  if (!options.bufferedSends && !options.bufferedSend &&
      (current(d)->kind == InstrKind::Send ||
       (current(q) && current(q)->kind == InstrKind::Send)))
    message += " (a send blocks until its peer receives it)";
  fail(SimulationFailure::Deadlock, first, second, message);
}

SimulationResult Simulator::run() {
  while (!result.failure) {
    bool progress = false;
    bool done = true;
    for (int64_t d = 0; d < n && !result.failure; ++d) {
      progress |= runLocal(d);
      if (!current(d))
        continue;
      done = false;
      progress |= current(d)->kind == InstrKind::Collective ? tryCollective(d)
                                                             : tryTransfer(d);
    }
    if (result.failure)
      break;
    if (done)
      break;
    if (!progress) {
      reportDeadlock();
      break;
    }
  }
  if (!result.failure && (options.bufferedSends || options.bufferedSend)) {
    for (int64_t a = 0; a < n && !result.failure; ++a)
      for (int64_t b = 0; b < n && !result.failure; ++b)
        if (!queues[a * n + b].empty()) {
          const Message &m = queues[a * n + b].front();
          fail(SimulationFailure::UnreceivedSend, m.send,
               InstrRef{b, int64_t(devices[b].size())},
               where(m.send) + " is never received: device " +
                   std::to_string(b) + " finishes its program without it");
        }
  }
  for (int64_t d = 0; d < n; ++d)
    result.makespan = std::max(result.makespan, clock[d]);
  if (result.makespan > 0) {
    int64_t busy = 0;
    for (const auto &slots : result.timeline)
      for (const Slot &slot : slots)
        busy += slot.end - slot.start;
    result.bubbleFraction =
        1.0 - double(busy) / double(result.makespan * std::max<int64_t>(n, 1));
  }
  return std::move(result);
}

SimulationResult
mlir::pipec::schedule::simulate(const std::vector<Program> &devices,
                                const SimulationOptions &options) {
  return Simulator(devices, options).run();
}

//===----------------------------------------------------------------------===//
// Order checks
//===----------------------------------------------------------------------===//

std::vector<OrderProblem> mlir::pipec::schedule::checkComputeOrder(
    const Program &program, int64_t device, const std::vector<int64_t> &stages,
    int64_t microbatches) {
  std::vector<OrderProblem> problems;
  // First index of each (kind, stage, mb).
  std::map<std::tuple<InstrKind, int64_t, int64_t>, int64_t> seen;
  auto at = [&](int64_t index) { return InstrRef{device, index}; };
  auto firstOf = [&](InstrKind kind, int64_t stage,
                     int64_t mb) -> std::optional<int64_t> {
    auto it = seen.find({kind, stage, mb});
    if (it == seen.end())
      return std::nullopt;
    return it->second;
  };
  auto name = [](InstrKind kind) -> std::string {
    switch (kind) {
    case InstrKind::Forward:
      return "forward";
    case InstrKind::Backward:
      return "backward";
    case InstrKind::BackwardInput:
      return "input backward";
    default:
      return "weight backward";
    }
  };
  auto of = [](int64_t stage, int64_t mb) {
    return " of micro-batch " + std::to_string(mb) + " on stage " +
           std::to_string(stage);
  };

  for (int64_t i = 0; i < int64_t(program.size()); ++i) {
    const Instr &instr = program[i];
    if (!instr.isCompute())
      continue;
    int64_t stage = instr.stage, mb = instr.mb;
    if (std::find(stages.begin(), stages.end(), stage) == stages.end()) {
      problems.push_back({at(i), std::nullopt,
                          "computes stage " + std::to_string(stage) +
                              ", which device " + std::to_string(device) +
                              " does not hold"});
      continue;
    }
    if (mb < 0 || mb >= microbatches) {
      problems.push_back({at(i), std::nullopt,
                          "micro-batch " + std::to_string(mb) +
                              " is not in [0, " + std::to_string(microbatches) +
                              ")"});
      continue;
    }
    if (auto earlier = firstOf(instr.kind, stage, mb)) {
      problems.push_back({at(i), at(*earlier),
                          "the " + name(instr.kind) + of(stage, mb) +
                              " runs a second time"});
      continue;
    }
    seen[{instr.kind, stage, mb}] = i;
    if (instr.kind == InstrKind::Forward)
      continue;
    if (!firstOf(InstrKind::Forward, stage, mb)) {
      std::optional<InstrRef> later;
      for (int64_t j = i + 1; j < int64_t(program.size()) && !later; ++j)
        if (program[j].kind == InstrKind::Forward &&
            program[j].stage == stage && program[j].mb == mb)
          later = at(j);
      problems.push_back({at(i), later,
                          "the " + name(instr.kind) + of(stage, mb) +
                              " runs before its forward"});
    }
    if (instr.kind == InstrKind::BackwardWeight &&
        !firstOf(InstrKind::BackwardInput, stage, mb))
      problems.push_back({at(i), std::nullopt,
                          "the weight backward" + of(stage, mb) +
                              " runs before its input backward"});
    bool full = instr.kind == InstrKind::Backward;
    if (full ? (firstOf(InstrKind::BackwardInput, stage, mb) ||
                firstOf(InstrKind::BackwardWeight, stage, mb))
             : firstOf(InstrKind::Backward, stage, mb).has_value())
      problems.push_back({at(i), std::nullopt,
                          "micro-batch " + std::to_string(mb) + " on stage " +
                              std::to_string(stage) +
                              " has both a full and a split backward"});
  }

  InstrRef end = at(int64_t(program.size()));
  for (int64_t stage : stages)
    for (int64_t mb = 0; mb < microbatches; ++mb) {
      if (!firstOf(InstrKind::Forward, stage, mb))
        problems.push_back({end, std::nullopt,
                            "the forward" + of(stage, mb) + " never runs"});
      bool full = firstOf(InstrKind::Backward, stage, mb).has_value();
      bool input = firstOf(InstrKind::BackwardInput, stage, mb).has_value();
      bool weight = firstOf(InstrKind::BackwardWeight, stage, mb).has_value();
      if (!full && !input && !weight)
        problems.push_back({end, std::nullopt,
                            "the backward" + of(stage, mb) + " never runs"});
      else if (!full && input != weight)
        problems.push_back({end, std::nullopt,
                            std::string(input ? "the weight" : "the input") +
                                " backward" + of(stage, mb) + " never runs"});
    }
  return problems;
}

//===----------------------------------------------------------------------===//
// Time tables
//===----------------------------------------------------------------------===//

std::string
mlir::pipec::schedule::formatTimeTable(const std::vector<Program> &devices,
                                       const SimulationResult &result,
                                       const std::vector<int64_t> &deviceIds) {
  int64_t n = int64_t(devices.size());
  int64_t slots = result.makespan;
  std::vector<std::vector<std::string>> cells(
      n, std::vector<std::string>(slots, "."));
  size_t width = std::to_string(std::max<int64_t>(slots - 1, 0)).size();
  for (int64_t d = 0; d < n; ++d)
    for (const Slot &slot : result.timeline[d]) {
      std::string label = cellLabel(devices[d][slot.index]);
      width = std::max(width, label.size());
      for (int64_t t = slot.start; t < slot.end; ++t)
        cells[d][t] = label;
    }
  auto deviceLabel = [&](int64_t d) {
    return "device " + std::to_string(d < int64_t(deviceIds.size())
                                          ? deviceIds[d]
                                          : d);
  };
  size_t labelWidth = 0;
  for (int64_t d = 0; d < n; ++d)
    labelWidth = std::max(labelWidth, deviceLabel(d).size());

  std::ostringstream os;
  auto row = [&](std::string head, const std::vector<std::string> &row) {
    head.resize(labelWidth, ' ');
    std::string line = head + " |";
    for (const std::string &cell : row) {
      std::string padded = cell;
      padded.resize(width, ' ');
      line += " " + padded;
    }
    while (!line.empty() && line.back() == ' ')
      line.pop_back();
    os << line << "\n";
  };
  std::vector<std::string> header;
  for (int64_t t = 0; t < slots; ++t)
    header.push_back(std::to_string(t));
  row("slot", header);
  for (int64_t d = 0; d < n; ++d)
    row(deviceLabel(d), cells[d]);

  int64_t idle = 0;
  for (int64_t d = 0; d < n; ++d)
    for (const std::string &cell : cells[d])
      idle += cell == ".";
  char fraction[32];
  std::snprintf(fraction, sizeof(fraction), "%.3f", result.bubbleFraction);
  os << "bubble: " << idle << " of " << n * slots << " slots idle ("
     << fraction << ")\n";
  os << "peak in-flight micro-batches per device:";
  for (int64_t peak : result.peakInFlight)
    os << " " << peak;
  os << "\n";
  return os.str();
}
