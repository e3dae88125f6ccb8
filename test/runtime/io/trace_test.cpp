//===- trace_test.cpp - Chrome trace recording, writing and merging --------===//
#include "io_test_util.h"
#include "pipert/pipert_trace.h"

#include <chrono>
#include <cstdio>
#include <thread>

using pipert_test::readText;
using pipert_test::runPython;
using pipert_test::tempDir;

namespace {

class Trace : public ::testing::Test {
protected:
  pipert_context *ctx = pipert_context_create(1, 1);
  std::string dir = tempDir();
  ~Trace() override {
    pipert_trace_disable(ctx);
    pipert_context_destroy(ctx);
  }

  // Writes a trace of `rank` with a few kernels and a transfer.
  std::string record(int rank) {
    pipert_trace_enable(ctx, rank);
    for (int i = 0; i < 3; ++i) {
      const double t0 = pipert_trace_begin(ctx);
      std::this_thread::sleep_for(std::chrono::microseconds(200));
      pipert_trace_end(ctx, "MatMul fc1 \"fwd\"\n", "kernel", t0, PIPERT_TRACE_TID_COMPUTE);
    }
    pipert_trace_event(ctx, "send to 1 tag 7", "send", pipert_trace_now_us(ctx), 12.5,
                       PIPERT_TRACE_TID_TRANSFER);
    pipert_trace_event(ctx, "wait", "idle", pipert_trace_now_us(ctx), 3, 0);
    const std::string path = dir + "/trace-" + std::to_string(rank) + ".json";
    EXPECT_EQ(pipert_trace_write(ctx, path.c_str()), 0);
    return path;
  }
};

TEST_F(Trace, DisabledRecordsNothing) {
  pipert_trace_disable(ctx);
  EXPECT_EQ(pipert_trace_begin(ctx), 0.0);
  pipert_trace_event(ctx, "k", "kernel", 0, 1, 0);
  pipert_trace_enable(ctx, 0);
  EXPECT_EQ(pipert_trace_event_count(ctx), 0);
  pipert_trace_disable(ctx);
  pipert_trace_event(ctx, "k", "kernel", 0, 1, 0);
  EXPECT_EQ(pipert_trace_event_count(ctx), 0);
}

TEST_F(Trace, EventsAreTimedAndWrittenAsValidJson) {
  const std::string path = record(0);
  EXPECT_EQ(pipert_trace_event_count(ctx), 5);
  EXPECT_EQ(runPython("check_trace.py", path + " --pids 1 --min-events 5 --cats kernel,send,idle"),
            0);
  const std::string text = readText(path);
  EXPECT_NE(text.find("\"name\":\"MatMul fc1 \\\"fwd\\\"\\n\""), std::string::npos) << text;
  EXPECT_NE(text.find("\"dur\":12.500"), std::string::npos) << text;
  // Kernel durations are the measured ones (>= 200 us sleeps).
  const size_t p = text.find("\"cat\":\"kernel\"");
  ASSERT_NE(p, std::string::npos);
  const size_t d = text.find("\"dur\":", p);
  EXPECT_GE(std::atof(text.c_str() + d + 6), 200.0) << text;
}

TEST_F(Trace, OpEventOverheadIsMeasuredAndNotRecorded) {
  // A trace with op events records what an event around no op lasts (for
  // pipe-profile to take off each op); its own sample events are not kept.
  EXPECT_EQ(pipert_trace_op_overhead_us(ctx), 0.0); // tracing off
  pipert_trace_enable(ctx, 0);
  const int64_t begin = pipert_trace_stage_begin(ctx);
  std::this_thread::sleep_for(std::chrono::microseconds(200));
  pipert_trace_op_end(ctx, 3, 1, begin);
  const double overhead = pipert_trace_op_overhead_us(ctx);
  EXPECT_GE(overhead, 0.0);
  EXPECT_EQ(pipert_trace_event_count(ctx), 1);
  const std::string path = dir + "/ops.json";
  ASSERT_EQ(pipert_trace_write(ctx, path.c_str()), 0);
  EXPECT_EQ(pipert_trace_event_count(ctx), 1);
  const std::string text = readText(path);
  EXPECT_NE(text.find("\"op_event_overhead_us\":"), std::string::npos) << text;
  EXPECT_NE(text.find("\"name\":\"bwd op3\""), std::string::npos) << text;
  EXPECT_EQ(text.find("op-1"), std::string::npos) << text;
  // Traces without op events do not carry it.
  const std::string plain = readText(record(0));
  EXPECT_EQ(plain.find("op_event_overhead_us"), std::string::npos) << plain;
}

TEST_F(Trace, DeferredNamesAreMadeWhenWritten) {
  // Stage events and pipert_trace_end_named events store integers; their
  // names appear (escaped) in the written trace as if given as strings.
  pipert_trace_enable(ctx, 0);
  pipert_trace_stage_end(ctx, 1, 2, 7, pipert_trace_stage_begin(ctx));
  pipert_trace_stage_end(ctx, 3, 1, 0, pipert_trace_stage_begin(ctx));
  for (int tag = 0; tag < 3; ++tag) {
    const int64_t args[5] = {tag, 40 + tag, -1, 0, 0};
    pipert_trace_end_named(
        ctx,
        [](const int64_t a[5], char *buf, size_t size) {
          std::snprintf(buf, size, "recv \"%lld\" of %lld", (long long)a[0], (long long)a[1]);
        },
        args, "recv", pipert_trace_begin(ctx), PIPERT_TRACE_TID_TRANSFER);
  }
  EXPECT_EQ(pipert_trace_event_count(ctx), 5);
  const std::string path = dir + "/named.json";
  ASSERT_EQ(pipert_trace_write(ctx, path.c_str()), 0);
  EXPECT_EQ(runPython("check_trace.py", path + " --pids 1 --min-events 5 --cats stage,recv"), 0);
  const std::string text = readText(path);
  for (const char *name : {"\"name\":\"B7 s2\"", "\"name\":\"update s1\"",
                           "\"name\":\"recv \\\"0\\\" of 40\"",
                           "\"name\":\"recv \\\"2\\\" of 42\""})
    EXPECT_NE(text.find(name), std::string::npos) << name << "\n" << text;
}

TEST_F(Trace, RecordingIsCheap) {
  pipert_trace_enable(ctx, 0);
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < 200000; ++i)
    pipert_trace_event(ctx, (i & 1) ? "Relu" : "MatMul", "kernel", i, 1, 0);
  const double ns =
      std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count() /
      200000;
  EXPECT_EQ(pipert_trace_event_count(ctx), 200000);
  EXPECT_LT(ns, 2000.0); // typically ~50 ns; generous for a loaded 2-core machine
}

TEST_F(Trace, MergeGivesOneTrackPerDeviceOnOneTimeAxis) {
  const std::string r0 = record(0);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  const std::string r1 = record(1);
  const std::string merged = dir + "/merged.json";
  const char *inputs[] = {r0.c_str(), r1.c_str()};
  char err[256] = "";
  ASSERT_EQ(pipert_trace_merge(inputs, 2, merged.c_str(), err, sizeof err), 0) << err;
  EXPECT_EQ(runPython("check_trace.py", merged + " --pids 2 --min-events 10"), 0);
  // Rank 1 started tracing >= 20 ms after rank 0: its events are shifted.
  const std::string text = readText(merged);
  const size_t p = text.find("\"pid\":1,\"tid\":0,\"ts\":");
  ASSERT_NE(p, std::string::npos) << text;
  EXPECT_GE(std::atof(text.c_str() + p + std::strlen("\"pid\":1,\"tid\":0,\"ts\":")), 20000.0);

  // The command-line tool does the same.
  const std::string viaTool = dir + "/tool.json";
  const std::string cmd = std::string(PIPERT_TRACE_MERGE_TOOL) + " " + viaTool + " " + r0 + " " + r1;
  EXPECT_EQ(std::system(cmd.c_str()), 0);
  EXPECT_EQ(readText(viaTool), text);
}

TEST_F(Trace, MergeReportsBadInputs) {
  const std::string good = record(0);
  const std::string bad = dir + "/bad.json";
  { std::ofstream(bad) << "{\"traceEvents\":[{\"ph\":\"X\",}"; }
  const std::string noEvents = dir + "/none.json";
  { std::ofstream(noEvents) << "{\"foo\":1}"; }
  char err[512];
  const char *in1[] = {good.c_str(), bad.c_str()};
  EXPECT_EQ(pipert_trace_merge(in1, 2, (dir + "/m.json").c_str(), err, sizeof err), -1);
  EXPECT_NE(std::string(err).find("bad.json' is not valid JSON: expected a string at offset"),
            std::string::npos)
      << err;
  const char *in2[] = {noEvents.c_str()};
  EXPECT_EQ(pipert_trace_merge(in2, 1, (dir + "/m.json").c_str(), err, sizeof err), -1);
  EXPECT_NE(std::string(err).find("has no traceEvents array"), std::string::npos) << err;
  const char *in3[] = {"/nonexistent/trace.json"};
  EXPECT_EQ(pipert_trace_merge(in3, 1, (dir + "/m.json").c_str(), err, sizeof err), -1);
  EXPECT_NE(std::string(err).find("cannot open trace file '/nonexistent/trace.json'"),
            std::string::npos)
      << err;
  // A plain JSON array of events (another tool's output) merges too.
  const std::string array = dir + "/array.json";
  { std::ofstream(array) << "[{\"ph\":\"X\",\"name\":\"x\",\"cat\":\"c\",\"pid\":5,\"tid\":0,\"ts\":1.5,\"dur\":2}]"; }
  const char *in4[] = {good.c_str(), array.c_str()};
  EXPECT_EQ(pipert_trace_merge(in4, 2, (dir + "/m.json").c_str(), err, sizeof err), 0) << err;
  EXPECT_NE(readText(dir + "/m.json").find("\"pid\":5,\"tid\":0,\"ts\":1.5,\"dur\":2"),
            std::string::npos);
}

} // namespace
