//===- ScheduleTest.cpp - schedule generator and simulator ----------------===//
//
// Properties of the GPipe and 1F1B schedules over a grid of pipeline depths
// and micro-batch counts, checked against the instruction lists themselves
// and against the simulator; and programs broken on purpose, which the
// simulator and the order check must reject.
//
//===----------------------------------------------------------------------===//
#include "pipec/Analysis/Schedule.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <tuple>

using namespace mlir::pipec::schedule;

namespace {

const ScheduleKind kinds[] = {ScheduleKind::GPipe, ScheduleKind::OneFOneB};

std::string caseName(ScheduleKind kind, int64_t p, int64_t m) {
  return std::string(stringifyScheduleKind(kind)) + " p=" + std::to_string(p) +
         " M=" + std::to_string(m);
}

/// Index of the first instruction matching `pred` in `program`, or -1.
template <typename Pred>
int64_t find(const Program &program, Pred pred, int64_t from = 0) {
  for (int64_t i = from; i < int64_t(program.size()); ++i)
    if (pred(program[i]))
      return i;
  return -1;
}

int64_t findRecv(const Program &program, int64_t peer, int64_t mb,
                 const std::string &tag) {
  return find(program, [&](const Instr &i) {
    return i.kind == InstrKind::Recv && i.peer == peer && i.mb == mb &&
           i.tag == tag;
  });
}

TEST(ScheduleGrid, ComputeOrderTransfersAndSimulation) {
  for (ScheduleKind kind : kinds)
    for (int64_t p = 1; p <= 6; ++p)
      for (int64_t m = 1; m <= 9; ++m) {
        SCOPED_TRACE(caseName(kind, p, m));
        Schedule schedule = generateSchedule(kind, p, m);
        ASSERT_EQ(int64_t(schedule.devices.size()), p);

        // Every send has exactly one recv with the same key on the peer.
        std::map<std::tuple<int64_t, int64_t, std::string, int64_t>, int>
            balance;
        for (int64_t s = 0; s < p; ++s) {
          const Program &program = schedule.devices[s];
          // Each micro-batch's forward once, its backward once, in order.
          for (int64_t mb = 0; mb < m; ++mb) {
            auto isF = [&](const Instr &i) {
              return i.kind == InstrKind::Forward && i.mb == mb;
            };
            auto isB = [&](const Instr &i) {
              return i.kind == InstrKind::Backward && i.mb == mb;
            };
            EXPECT_EQ(std::count_if(program.begin(), program.end(), isF), 1);
            EXPECT_EQ(std::count_if(program.begin(), program.end(), isB), 1);
            int64_t f = find(program, isF), b = find(program, isB);
            EXPECT_LT(f, b) << "stage " << s << " mb " << mb;
            EXPECT_EQ(program[f].stage, s);
            // Its input arrives before the forward, its output leaves after.
            if (s > 0) {
              int64_t r = findRecv(program, s - 1, mb, kActivationTag);
              EXPECT_GE(r, 0);
              EXPECT_LT(r, f);
            }
            if (s + 1 < p) {
              int64_t r = findRecv(program, s + 1, mb, kGradientTag);
              EXPECT_GE(r, 0);
              EXPECT_LT(r, b);
            }
          }
          // The warm-up: forwards before the first backward.
          int64_t firstB = find(program, [](const Instr &i) {
            return i.kind == InstrKind::Backward;
          });
          int64_t warm = std::count_if(
              program.begin(), program.begin() + firstB,
              [](const Instr &i) { return i.kind == InstrKind::Forward; });
          EXPECT_EQ(warm, kind == ScheduleKind::GPipe ? m
                                                      : std::min(p - s, m))
              << "stage " << s;
          // One update, last.
          EXPECT_EQ(program.back().kind, InstrKind::Update);
          EXPECT_EQ(std::count_if(program.begin(), program.end(),
                                  [](const Instr &i) {
                                    return i.kind == InstrKind::Update;
                                  }),
                    1);
          for (const Instr &i : program) {
            if (i.kind == InstrKind::Send)
              ++balance[{s, i.peer, i.tag, i.mb}];
            if (i.kind == InstrKind::Recv)
              --balance[{i.peer, s, i.tag, i.mb}];
          }
          EXPECT_TRUE(checkComputeOrder(program, s, {s}, m).empty());
        }
        for (const auto &[key, count] : balance)
          EXPECT_EQ(count, 0) << "transfer " << std::get<0>(key) << " -> "
                              << std::get<1>(key) << " " << std::get<2>(key)
                              << " mb " << std::get<3>(key);

        // Deadlock-free with blocking and with buffered sends; memory and
        // bubble as the papers say.
        for (bool buffered : {false, true}) {
          SCOPED_TRACE(buffered ? "buffered" : "rendezvous");
          SimulationOptions options;
          options.bufferedSends = buffered;
          SimulationResult result = simulate(schedule.devices, options);
          ASSERT_TRUE(result.ok()) << result.failure->message;
          for (int64_t s = 0; s < p; ++s)
            EXPECT_EQ(result.peakInFlight[s],
                      theoreticalPeakInFlight(kind, p, m, s))
                << "stage " << s;
          EXPECT_NEAR(result.bubbleFraction, theoreticalBubbleFraction(p, m),
                      1e-12);
          EXPECT_EQ(result.makespan, 2 * (m + p - 1));
        }
      }
}

TEST(ScheduleGrid, TheoreticalPeaks) {
  EXPECT_EQ(theoreticalPeakInFlight(ScheduleKind::OneFOneB, 4, 8, 0), 4);
  EXPECT_EQ(theoreticalPeakInFlight(ScheduleKind::OneFOneB, 4, 8, 3), 1);
  EXPECT_EQ(theoreticalPeakInFlight(ScheduleKind::OneFOneB, 4, 2, 0), 2);
  EXPECT_EQ(theoreticalPeakInFlight(ScheduleKind::GPipe, 4, 8, 3), 8);
}

TEST(ScheduleGolden, OneFOneBTwoStagesTwoMicrobatches) {
  Schedule schedule = generateSchedule(ScheduleKind::OneFOneB, 2, 2);
  Program device0 = {Instr::forward(0, 0),
                     Instr::send(1, 0, kActivationTag),
                     Instr::forward(0, 1),
                     Instr::send(1, 1, kActivationTag),
                     Instr::recv(1, 0, kGradientTag),
                     Instr::backward(0, 0),
                     Instr::recv(1, 1, kGradientTag),
                     Instr::backward(0, 1),
                     Instr::update(0)};
  // Device 1 takes micro-batch 1 before it returns the gradient of 0:
  // device 0 is sending it then, and a blocking send would otherwise meet a
  // blocking send.
  Program device1 = {Instr::recv(0, 0, kActivationTag),
                     Instr::forward(1, 0),
                     Instr::backward(1, 0),
                     Instr::recv(0, 1, kActivationTag),
                     Instr::send(0, 0, kGradientTag),
                     Instr::forward(1, 1),
                     Instr::backward(1, 1),
                     Instr::send(0, 1, kGradientTag),
                     Instr::update(1)};
  ASSERT_EQ(schedule.devices.size(), 2u);
  EXPECT_EQ(schedule.devices[0], device0);
  EXPECT_EQ(schedule.devices[1], device1);

  SimulationResult result = simulate(schedule.devices);
  ASSERT_TRUE(result.ok());
  EXPECT_EQ(formatTimeTable(schedule.devices, result),
            "slot     | 0  1  2  3  4  5\n"
            "device 0 | F0 F1 .  B0 .  B1\n"
            "device 1 | .  F0 B0 F1 B1 .\n"
            "bubble: 4 of 12 slots idle (0.333)\n"
            "peak in-flight micro-batches per device: 2 1\n");
}

TEST(ScheduleGolden, GPipeComputeOrder) {
  std::vector<Instr> order = computeOrder(ScheduleKind::GPipe, 3, 2, 1);
  std::vector<Instr> expected = {Instr::forward(1, 0), Instr::forward(1, 1),
                                 Instr::backward(1, 0), Instr::backward(1, 1)};
  EXPECT_EQ(order, expected);
  order = computeOrder(ScheduleKind::OneFOneB, 4, 3, 0);
  expected = {Instr::forward(0, 0),  Instr::forward(0, 1),
              Instr::forward(0, 2),  Instr::backward(0, 0),
              Instr::backward(0, 1), Instr::backward(0, 2)};
  EXPECT_EQ(order, expected);
}

/// Swapping the recvs of micro-batches 0 and 1 on stage s deadlocks with
/// blocking sends (stage s-1 sends 0 first), and the failure names both
/// instructions; with buffered sends the messages are matched by key and
/// the swap is harmless.
TEST(ScheduleBroken, SwappedRecvsDeadlock) {
  for (ScheduleKind kind : kinds)
    for (int64_t p = 2; p <= 6; ++p)
      for (int64_t m = 2; m <= 9; ++m)
        for (int64_t s = 1; s < p; ++s) {
          SCOPED_TRACE(caseName(kind, p, m) + " stage " + std::to_string(s));
          Schedule schedule = generateSchedule(kind, p, m);
          Program &program = schedule.devices[s];
          int64_t r0 = findRecv(program, s - 1, 0, kActivationTag);
          int64_t r1 = findRecv(program, s - 1, 1, kActivationTag);
          ASSERT_GE(r0, 0);
          ASSERT_GE(r1, 0);
          std::swap(program[r0], program[r1]);

          SimulationResult result = simulate(schedule.devices);
          ASSERT_FALSE(result.ok());
          const SimulationFailure &failure = *result.failure;
          EXPECT_EQ(failure.kind, SimulationFailure::Deadlock);
          // The recv now first in line, and the send it blocks.
          EXPECT_EQ(failure.first, (InstrRef{s, r0}));
          ASSERT_TRUE(failure.second.has_value());
          const Program &sender = schedule.devices[s - 1];
          int64_t send0 = find(sender, [](const Instr &i) {
            return i.kind == InstrKind::Send && i.mb == 0 &&
                   i.tag == kActivationTag;
          });
          EXPECT_EQ(*failure.second, (InstrRef{s - 1, send0}));
          EXPECT_NE(failure.message.find("deadlock"), std::string::npos);
          EXPECT_NE(failure.message.find("recv of mb 1"), std::string::npos)
              << failure.message;

          SimulationOptions buffered;
          buffered.bufferedSends = true;
          EXPECT_TRUE(simulate(schedule.devices, buffered).ok());
        }
}

TEST(ScheduleBroken, MissingRecv) {
  // A recv missing altogether fails in both modes: drop the last gradient
  // recv of stage 0.
  Schedule schedule = generateSchedule(ScheduleKind::OneFOneB, 3, 4);
  Program &program = schedule.devices[0];
  int64_t r = findRecv(program, 1, 3, kGradientTag);
  ASSERT_GE(r, 0);
  program.erase(program.begin() + r);

  SimulationResult rendezvous = simulate(schedule.devices);
  ASSERT_FALSE(rendezvous.ok());
  EXPECT_EQ(rendezvous.failure->kind, SimulationFailure::Deadlock);
  EXPECT_EQ(rendezvous.failure->first.device, 1);
  // Device 0 finished: the other side is the end of its program.
  EXPECT_EQ(*rendezvous.failure->second,
            (InstrRef{0, int64_t(program.size())}));

  SimulationOptions options;
  options.bufferedSends = true;
  SimulationResult buffered = simulate(schedule.devices, options);
  ASSERT_FALSE(buffered.ok());
  EXPECT_EQ(buffered.failure->kind, SimulationFailure::UnreceivedSend);
  EXPECT_EQ(buffered.failure->first.device, 1);
}

TEST(ScheduleBroken, HeadToHeadSendsNeedBuffering) {
  // The order of the pipe dialect's documentation example: device 1 returns
  // the gradient of mb 0 before taking mb 1, while device 0 sends mb 1.
  Schedule schedule = generateSchedule(ScheduleKind::OneFOneB, 2, 2);
  Program &device1 = schedule.devices[1];
  std::swap(device1[3], device1[4]); // send grad 0 before recv act 1
  SimulationResult result = simulate(schedule.devices);
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.failure->kind, SimulationFailure::Deadlock);
  SimulationOptions options;
  options.bufferedSends = true;
  EXPECT_TRUE(simulate(schedule.devices, options).ok());
  // Per send: buffering either device's sends is enough here; buffering
  // none is the rendezvous deadlock again.
  SimulationOptions one;
  for (int64_t buffered : {0, 1}) {
    one.bufferedSend = [=](int64_t device, const Instr &) { return device == buffered; };
    EXPECT_TRUE(simulate(schedule.devices, one).ok()) << "device " << buffered;
  }
  one.bufferedSend = [](int64_t, const Instr &) { return false; };
  SimulationResult stuck = simulate(schedule.devices, one);
  ASSERT_FALSE(stuck.ok());
  EXPECT_EQ(stuck.failure->kind, SimulationFailure::Deadlock);
}

TEST(ScheduleBroken, PayloadMismatch) {
  Schedule schedule = generateSchedule(ScheduleKind::GPipe, 2, 1);
  for (Instr &i : schedule.devices[0])
    if (i.kind == InstrKind::Send)
      i.payload = "tensor<2x8xf32>";
  for (Instr &i : schedule.devices[1])
    if (i.kind == InstrKind::Recv)
      i.payload = "tensor<2x4xf32>";
  SimulationResult result = simulate(schedule.devices);
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.failure->kind, SimulationFailure::PayloadMismatch);
  EXPECT_EQ(result.failure->first.device, 1);
  EXPECT_EQ(result.failure->second->device, 0);
}

TEST(ScheduleBroken, ComputeOrderProblems) {
  Schedule schedule = generateSchedule(ScheduleKind::OneFOneB, 2, 3);
  Program program = schedule.devices[1];
  // Backward of mb 0 before its forward.
  int64_t f0 = find(program, [](const Instr &i) {
    return i.kind == InstrKind::Forward && i.mb == 0;
  });
  int64_t b0 = find(program, [](const Instr &i) {
    return i.kind == InstrKind::Backward && i.mb == 0;
  });
  std::swap(program[f0], program[b0]);
  std::vector<OrderProblem> problems = checkComputeOrder(program, 1, {1}, 3);
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_EQ(problems[0].at, (InstrRef{1, f0}));
  EXPECT_EQ(*problems[0].related, (InstrRef{1, b0}));
  EXPECT_NE(problems[0].message.find("before its forward"), std::string::npos);

  // A forward run twice, and then mb 2's forward missing.
  program = schedule.devices[1];
  int64_t f2 = find(program, [](const Instr &i) {
    return i.kind == InstrKind::Forward && i.mb == 2;
  });
  program[f2].mb = 1;
  problems = checkComputeOrder(program, 1, {1}, 3);
  ASSERT_GE(problems.size(), 2u);
  EXPECT_NE(problems[0].message.find("second time"), std::string::npos);
  bool missing = std::any_of(problems.begin(), problems.end(),
                             [](const OrderProblem &p) {
                               return p.message.find("never runs") !=
                                      std::string::npos;
                             });
  EXPECT_TRUE(missing);
}

} // namespace

//===----------------------------------------------------------------------===//
// No-flush steps (PipeDream, 2BW)
//===----------------------------------------------------------------------===//

namespace {
/// The compute order of device s over a run: 1F1B without a flush over
/// steps*M micro-batches.
std::vector<std::pair<InstrKind, int64_t>> computeOf(const Program &run) {
  std::vector<std::pair<InstrKind, int64_t>> order;
  for (const Instr &i : run)
    if (i.isCompute())
      order.push_back({i.kind, i.mb});
  return order;
}
} // namespace

TEST(NoFlushGrid, RunsAreOneFOneBWithoutFlushAndDeadlockFree) {
  for (UpdateRule rule : {UpdateRule::PerMicroBatch, UpdateRule::PerStep})
    for (int64_t p = 1; p <= 6; ++p)
      for (int64_t m = 1; m <= 8; ++m)
        for (int64_t steps : {int64_t(1), int64_t(2), int64_t(5)}) {
          std::string name = "p=" + std::to_string(p) + " M=" +
                             std::to_string(m) + " steps=" +
                             std::to_string(steps) +
                             (rule == UpdateRule::PerStep ? " 2bw" : " pipedream");
          Schedule step = generateNoFlushStep(p, m, rule);
          ASSERT_EQ(int64_t(step.devices.size()), p) << name;
          std::vector<Program> run;
          for (const Program &device : step.devices)
            run.push_back(expandSteps(device, m, steps));
          // Each device runs exactly the 1F1B order of one long run.
          Schedule flat = generateSchedule(ScheduleKind::OneFOneB, p, steps * m);
          for (int64_t s = 0; s < p; ++s) {
            EXPECT_EQ(computeOf(run[s]), computeOf(flat.devices[s]))
                << name << " device " << s;
            EXPECT_TRUE(checkComputeOrder(run[s], s, {s}, steps * m).empty())
                << name << " device " << s;
            // Updates: after every backward, or after each step's last one.
            int64_t updates = 0;
            for (size_t i = 0; i < run[s].size(); ++i) {
              if (run[s][i].kind != InstrKind::Update)
                continue;
              ++updates;
              ASSERT_GT(i, 0u);
              EXPECT_EQ(run[s][i - 1].kind, InstrKind::Backward) << name;
              EXPECT_EQ(run[s][i - 1].mb, run[s][i].mb) << name;
              if (rule == UpdateRule::PerStep)
                EXPECT_EQ((run[s][i].mb + 1) % m, 0) << name;
            }
            EXPECT_EQ(updates, rule == UpdateRule::PerStep ? steps : steps * m)
                << name << " device " << s;
          }
          // Rendezvous sends: no deadlock; the activations of 1F1B.
          SimulationResult result = simulate(run);
          ASSERT_TRUE(result.ok()) << name << ": " << result.failure->message;
          for (int64_t s = 0; s < p; ++s)
            EXPECT_EQ(result.peakInFlight[s], std::min(p - s, steps * m))
                << name << " device " << s;
        }
}

TEST(NoFlushGrid, NoTransferCrossesAStep) {
  // Every send and its recv run in the same step, so the state between two
  // steps holds no message in flight (what a checkpoint relies on).
  for (int64_t p = 2; p <= 5; ++p)
    for (int64_t m = 1; m <= 6; ++m) {
      Schedule step = generateNoFlushStep(p, m, UpdateRule::PerMicroBatch);
      std::map<std::tuple<int64_t, int64_t, std::string, int64_t>, int> balance;
      for (int64_t s = 0; s < p; ++s)
        for (const Instr &i : step.devices[s]) {
          if (i.kind == InstrKind::Send)
            ++balance[{s, i.peer, i.tag, i.mb}];
          if (i.kind == InstrKind::Recv)
            --balance[{i.peer, s, i.tag, i.mb}];
        }
      for (auto &[key, count] : balance)
        EXPECT_EQ(count, 0) << "p=" << p << " M=" << m << " tag "
                            << std::get<2>(key) << " mb " << std::get<3>(key);
      EXPECT_EQ(drainSteps(step.devices[0], m), (p - 1 + m - 1) / m);
      // The last stage sends the gradient of a step's last micro-batch in
      // the next step, when the stage before it consumes it.
      EXPECT_EQ(drainSteps(step.devices[p - 1], m), 1);
    }
}

//===----------------------------------------------------------------------===//
// Advance forward propagation
//===----------------------------------------------------------------------===//

TEST(AdvanceForwardGrid, BetweenOneFOneBAndGPipe) {
  for (int64_t p = 1; p <= 6; ++p)
    for (int64_t m = 1; m <= 8; ++m)
      for (int64_t k = 0; k <= m + 1; ++k) {
        std::string name = "p=" + std::to_string(p) + " M=" + std::to_string(m) +
                           " K=" + std::to_string(k);
        Schedule afp = generateSchedule(ScheduleKind::AdvanceForward, p, m, k);
        SimulationResult result = simulate(afp.devices);
        ASSERT_TRUE(result.ok()) << name << ": " << result.failure->message;
        for (int64_t s = 0; s < p; ++s) {
          EXPECT_TRUE(checkComputeOrder(afp.devices[s], s, {s}, m).empty()) << name;
          EXPECT_EQ(result.peakInFlight[s],
                    theoreticalPeakInFlight(ScheduleKind::AdvanceForward, p, m, s, k))
              << name << " stage " << s;
          EXPECT_EQ(result.peakInFlight[s], std::min(p - s + k, m)) << name;
        }
        // K = 0 is 1F1B, K >= M GPipe, instruction for instruction.
        if (k == 0)
          EXPECT_EQ(afp.devices, generateSchedule(ScheduleKind::OneFOneB, p, m).devices)
              << name;
        if (k >= m)
          EXPECT_EQ(afp.devices, generateSchedule(ScheduleKind::GPipe, p, m).devices)
              << name;
      }
}

// Durations (pipe-simulate's model): compute, updates and transfers take
// time; a rendezvous transfer holds both ends, a buffered send only delays
// its message.
TEST(ScheduleTimed, DurationsOfComputeUpdatesAndTransfers) {
  std::vector<Program> two = {
      {Instr::forward(0, 0), Instr::send(1, 0, kActivationTag),
       Instr::recv(1, 0, kGradientTag), Instr::backward(0, 0), Instr::update(0)},
      {Instr::recv(0, 0, kActivationTag), Instr::forward(1, 0),
       Instr::backward(1, 0), Instr::send(0, 0, kGradientTag), Instr::update(1)}};
  SimulationOptions options;
  options.duration = [](int64_t device, const Instr &i) -> int64_t {
    switch (i.kind) {
    case InstrKind::Forward:
      return 100;
    case InstrKind::Backward:
      return 200 + 10 * device; // stage 1's backward is slower
    case InstrKind::Send:
      return 7;
    case InstrKind::Update:
      return 3;
    default:
      return 0;
    }
  };
  SimulationResult r = simulate(two, options);
  ASSERT_TRUE(r.ok()) << r.failure->message;
  // F0 100, transfer 7, F1 100, B1 210, transfer 7, B0 200, update 3.
  EXPECT_EQ(r.makespan, 100 + 7 + 100 + 210 + 7 + 200 + 3);
  ASSERT_EQ(r.timeline[1].size(), 2u);
  EXPECT_EQ(r.timeline[1][0].start, 107);
  // Device 1 updates once its gradient has gone: 107 + 100 + 210 + 7.
  ASSERT_FALSE(r.otherTimeline[1].empty());
  EXPECT_EQ(r.otherTimeline[1].back().start, 424);
  EXPECT_EQ(r.otherTimeline[1].back().end, 427);
  // Buffered: device 1 does not wait for device 0 to take its gradient.
  options.bufferedSends = true;
  SimulationResult b = simulate(two, options);
  ASSERT_TRUE(b.ok()) << b.failure->message;
  EXPECT_EQ(b.makespan, 100 + 7 + 100 + 210 + 7 + 200 + 3);
  EXPECT_EQ(b.otherTimeline[1].back().start, 417); // no wait for the send
  // Mixed (bufferedSend per send): device 1's gradient is buffered, device
  // 0's activation a rendezvous; the result is the buffered one's, since
  // device 1 already waits at its recv when device 0 sends.
  options.bufferedSends = false;
  options.bufferedSend = [](int64_t device, const Instr &) { return device == 1; };
  SimulationResult m = simulate(two, options);
  ASSERT_TRUE(m.ok()) << m.failure->message;
  EXPECT_EQ(m.otherTimeline[1].back().start, 417);
  options.bufferedSend = nullptr;
  // The receiver copies (single copy): the 7 of each transfer is spent on
  // the receiving device once it is at the recv and the message is there;
  // the sender goes on at once.
  options.bufferedSends = true;
  options.receiverCopies = true;
  SimulationResult rc = simulate(two, options);
  ASSERT_TRUE(rc.ok()) << rc.failure->message;
  EXPECT_EQ(rc.makespan, 100 + 7 + 100 + 210 + 7 + 200 + 3);
  EXPECT_EQ(rc.timeline[1][0].start, 107);       // F1 after copying activation 0
  EXPECT_EQ(rc.otherTimeline[1].back().start, 417); // its update: no wait for the send
  options.bufferedSends = false;
  options.receiverCopies = false;
  // Without durations: unit slots, transfers free, as before.
  SimulationResult slots = simulate(two);
  ASSERT_TRUE(slots.ok());
  EXPECT_EQ(slots.makespan, 4);
}

// receiverCopy: of a buffered transfer's 7, the receiver pays the copy (2)
// once it is at the recv and the message is there; the other 5 pass in
// flight. Device 1 computes for 150 while device 0's message (sent at 100)
// travels: it arrives at 105, and device 1 copies it from 150 to 152 (the
// whole transfer charged to the receiver: 150 to 157).
TEST(ScheduleTimed, ReceiverPaysTheCopyOnly) {
  std::vector<Program> two = {
      {Instr::forward(0, 0), Instr::send(1, 0, kActivationTag)},
      {Instr::backward(1, 5), Instr::recv(0, 0, kActivationTag), Instr::forward(1, 0)}};
  SimulationOptions options;
  options.duration = [](int64_t, const Instr &i) -> int64_t {
    switch (i.kind) {
    case InstrKind::Forward:
      return 100;
    case InstrKind::Backward:
      return 150;
    case InstrKind::Send:
      return 7;
    default:
      return 0;
    }
  };
  options.bufferedSends = true;
  options.receiverCopies = true;
  SimulationResult whole = simulate(two, options);
  ASSERT_TRUE(whole.ok()) << whole.failure->message;
  EXPECT_EQ(whole.makespan, 157 + 100);
  options.receiverCopy = [](int64_t, const Instr &) { return int64_t(2); };
  SimulationResult copy = simulate(two, options);
  ASSERT_TRUE(copy.ok()) << copy.failure->message;
  EXPECT_EQ(copy.makespan, 152 + 100);
  // A receiver that waits: the message arrives at 105 and is copied by 107.
  std::vector<Program> waiting = {two[0], {Instr::recv(0, 0, kActivationTag), Instr::forward(1, 0)}};
  SimulationResult w = simulate(waiting, options);
  ASSERT_TRUE(w.ok()) << w.failure->message;
  EXPECT_EQ(w.makespan, 107 + 100);
  // A copy longer than the transfer is the whole transfer.
  options.receiverCopy = [](int64_t, const Instr &) { return int64_t(50); };
  SimulationResult capped = simulate(two, options);
  ASSERT_TRUE(capped.ok());
  EXPECT_EQ(capped.makespan, whole.makespan);
}
