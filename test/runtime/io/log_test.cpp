//===- log_test.cpp - JSON Lines step log and progress line ----------------===//
#include "io_test_util.h"
#include "pipert/pipert_log.h"

#include <chrono>
#include <cmath>
#include <limits>
#include <thread>

using pipert_test::readText;
using pipert_test::runPython;
using pipert_test::tempDir;

namespace {

void logSteps(pipert_log *log, int first, int last) {
  const char *names[] = {"lr", "grad \"norm\""};
  for (int s = first; s <= last; ++s) {
    const double values[] = {0.1 * s, 2.5};
    const double loss = s == 3 ? std::numeric_limits<double>::quiet_NaN() : 1.0 / (s + 1);
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    pipert_log_step(log, s, loss, 2, names, values);
  }
}

int countOf(const std::string &text, const std::string &what) {
  int n = 0;
  for (size_t p = text.find(what); p != std::string::npos; p = text.find(what, p + 1))
    ++n;
  return n;
}

TEST(Log, JsonLinesPerStepValidJson) {
  const std::string path = tempDir() + "/steps.jsonl";
  pipert_log *log = pipert_log_open(path.c_str(), 10, 32, PIPERT_LOG_TRUNCATE);
  pipert_log_set_progress(log, PIPERT_PROGRESS_OFF, 0);
  logSteps(log, 0, 5);
  // Flushed per step: readable before close.
  EXPECT_EQ(countOf(readText(path), "\n"), 6);
  pipert_log_close(log);
  const std::string text = readText(path);
  EXPECT_EQ(text.rfind("{\"step\":0,\"loss\":1,\"samples_per_s\":", 0), 0u) << text;
  EXPECT_NE(text.find("\"loss\":null"), std::string::npos);
  EXPECT_EQ(runPython("check_log.py", path + " 0 5"), 0) << text;
}

TEST(Log, AppendModeResumes) {
  const std::string path = tempDir() + "/steps.jsonl";
  pipert_log *log = pipert_log_open(path.c_str(), 10, 32, PIPERT_LOG_TRUNCATE);
  pipert_log_set_progress(log, PIPERT_PROGRESS_OFF, 0);
  logSteps(log, 0, 4);
  pipert_log_close(log);
  log = pipert_log_open(path.c_str(), 10, 32, PIPERT_LOG_APPEND);
  pipert_log_set_progress(log, PIPERT_PROGRESS_OFF, 0);
  logSteps(log, 5, 9);
  pipert_log_close(log);
  EXPECT_EQ(runPython("check_log.py", path + " 0 9 5"), 0);
  // Truncate starts over.
  log = pipert_log_open(path.c_str(), 10, 32, PIPERT_LOG_TRUNCATE);
  pipert_log_set_progress(log, PIPERT_PROGRESS_OFF, 0);
  logSteps(log, 0, 1);
  pipert_log_close(log);
  EXPECT_EQ(runPython("check_log.py", path + " 0 1"), 0);
}

TEST(Log, PlainProgressIsRateLimitedAndShowsFirstAndLast) {
  pipert_log *log = pipert_log_open(nullptr, 10, 64, 0);
  pipert_log_set_progress(log, PIPERT_PROGRESS_PLAIN, 60.0);
  ::testing::internal::CaptureStderr();
  logSteps(log, 0, 9);
  pipert_log_close(log);
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(countOf(err, "\n"), 2) << err;
  EXPECT_EQ(err.rfind("step 0/10 loss 1.0000 ", 0), 0u) << err;
  EXPECT_NE(err.find("\nstep 9/10 loss 0.1000 "), std::string::npos) << err;
  EXPECT_NE(err.find(" samples/s ETA 0:00:00\n"), std::string::npos) << err;
  EXPECT_EQ(err.find('\r'), std::string::npos) << err;
}

TEST(Log, PlainProgressEveryIntervalWhenSlow) {
  pipert_log *log = pipert_log_open(nullptr, 4, 8, 0);
  pipert_log_set_progress(log, PIPERT_PROGRESS_PLAIN, 0.001);
  ::testing::internal::CaptureStderr();
  for (int s = 0; s < 4; ++s) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    pipert_log_step(log, s, 0.5, 0, nullptr, nullptr);
  }
  pipert_log_close(log);
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(countOf(err, "\n"), 4) << err;
  // 8 samples per ~5 ms step: well under 8000 samples/s, well over 100.
  const size_t p = err.find("step 2/4 loss 0.5000 ");
  ASSERT_NE(p, std::string::npos) << err;
  const double rate = std::atof(err.c_str() + p + std::strlen("step 2/4 loss 0.5000 "));
  EXPECT_GT(rate, 100.0) << err;
  EXPECT_LT(rate, 1700.0) << err;
}

TEST(Log, TerminalProgressRewritesOneLine) {
  pipert_log *log = pipert_log_open(nullptr, 3, 16, 0);
  pipert_log_set_progress(log, PIPERT_PROGRESS_TTY, 0.001);
  ::testing::internal::CaptureStderr();
  for (int s = 0; s < 3; ++s) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    pipert_log_step(log, s, 0.25, 0, nullptr, nullptr);
  }
  pipert_log_close(log);
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(countOf(err, "\r\033[K"), 3) << err;
  EXPECT_EQ(countOf(err, "\n"), 1) << err; // only after the last step
  EXPECT_NE(err.find("\r\033[Kstep 2/3  loss 0.2500  "), std::string::npos) << err;
  EXPECT_EQ(err.back(), '\n');
}

TEST(Log, TerminalLineEndedOnEarlyClose) {
  pipert_log *log = pipert_log_open(nullptr, 100, 16, 0);
  pipert_log_set_progress(log, PIPERT_PROGRESS_TTY, 0);
  ::testing::internal::CaptureStderr();
  pipert_log_step(log, 0, 0.25, 0, nullptr, nullptr);
  pipert_log_close(log);
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(countOf(err, "\n"), 1) << err;
}

TEST(LogDeathTest, UnwritablePath) {
  EXPECT_EXIT(pipert_log_open("/nonexistent/dir/steps.jsonl", 1, 1, 0),
              ::testing::ExitedWithCode(1),
              "pipert: error: cannot open log file '/nonexistent/dir/steps.jsonl'");
}

} // namespace
