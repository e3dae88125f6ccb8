//===- log.cpp - JSON Lines step log and progress line ----------------------===//
#include "pipert/pipert_log.h"

#include <unistd.h>

#include <chrono>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace {

using Clock = std::chrono::steady_clock;


void appendNumber(std::string &out, double v) {
  if (!std::isfinite(v)) {
    out += "null";
    return;
  }
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.10g", v);
  out += buf;
}

void appendKey(std::string &out, const char *key) {
  out += '"';
  for (const char *p = key; *p; ++p) {
    unsigned char c = static_cast<unsigned char>(*p);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  out += "\":";
}

std::string formatDuration(double s) {
  if (!std::isfinite(s) || s < 0)
    return "?";
  long long t = static_cast<long long>(s + 0.5);
  char buf[32];
  std::snprintf(buf, sizeof buf, "%lld:%02lld:%02lld", t / 3600, (t / 60) % 60, t % 60);
  return buf;
}

} // namespace

struct pipert_log {
  std::FILE *file = nullptr;
  std::string path;
  int64_t totalSteps = 0;
  int64_t samplesPerStep = 0;
  Clock::time_point opened;
  Clock::time_point lastStep;
  int64_t stepsLogged = 0;
  pipert_progress_mode mode = PIPERT_PROGRESS_AUTO;
  double interval = 0;
  bool printedAny = false;
  Clock::time_point lastPrint;
  int64_t stepsAtLastPrint = 0;
  bool lineOpen = false; // a tty progress line without its newline yet
  std::string line;      // the step's JSON line, its capacity kept (no
                         // allocation a step once it has grown)
};

namespace {

/// Rewrites the log at `path` without the lines `drop` selects (each with
/// its newline); a missing file or nothing to drop leaves it as it is.
template <typename Drop> void dropLines(const char *path, Drop drop) {
  if (!path || !*path)
    return;
  std::FILE *in = std::fopen(path, "r");
  if (!in)
    return;
  std::string kept, line;
  bool dropped = false;
  for (int c; (c = std::fgetc(in)) != EOF;) {
    line.push_back(static_cast<char>(c));
    if (c != '\n')
      continue;
    if (drop(line))
      dropped = true;
    else
      kept += line;
    line.clear();
  }
  kept += line; // a last line without its newline
  std::fclose(in);
  if (!dropped)
    return;
  std::FILE *out = std::fopen(path, "w");
  if (!out)
    pipert_fail("cannot rewrite log file '%s': %s", path, std::strerror(errno));
  std::fwrite(kept.data(), 1, kept.size(), out);
  std::fclose(out);
}

} // namespace

extern "C" {

pipert_log *pipert_log_open(const char *path, int64_t total_steps, int64_t samples_per_step,
                            int flags) {
  auto *log = new pipert_log();
  if (path && *path) {
    log->file = std::fopen(path, (flags & PIPERT_LOG_APPEND) ? "a" : "w");
    if (!log->file)
      pipert_fail("cannot open log file '%s': %s", path, std::strerror(errno));
    log->path = path;
  }
  log->totalSteps = total_steps;
  log->samplesPerStep = samples_per_step;
  log->opened = log->lastStep = Clock::now();
  pipert_progress_mode mode = PIPERT_PROGRESS_AUTO;
  if (const char *env = std::getenv("PIPERT_PROGRESS")) {
    if (!std::strcmp(env, "off"))
      mode = PIPERT_PROGRESS_OFF;
    else if (!std::strcmp(env, "plain"))
      mode = PIPERT_PROGRESS_PLAIN;
    else if (!std::strcmp(env, "tty"))
      mode = PIPERT_PROGRESS_TTY;
  }
  pipert_log_set_progress(log, mode, 0);
  return log;
}

void pipert_log_drop_from(const char *path, int64_t step) {
  dropLines(path, [&](const std::string &line) {
    const char *at = std::strstr(line.c_str(), "\"step\":");
    return at && std::strtoll(at + 7, nullptr, 10) >= step;
  });
}

void pipert_log_drop_eval(const char *path, int64_t step, int final_only) {
  const std::string at = "{\"step\":" + std::to_string(step) + ",\"eval_loss\":";
  dropLines(path, [&](const std::string &line) {
    return line.compare(0, at.size(), at) == 0 &&
           (!final_only || line.find("\"final\":true") != std::string::npos);
  });
}

void pipert_log_set_progress(pipert_log *log, pipert_progress_mode mode, double interval_s) {
  if (mode == PIPERT_PROGRESS_AUTO)
    mode = isatty(STDERR_FILENO) ? PIPERT_PROGRESS_TTY : PIPERT_PROGRESS_PLAIN;
  log->mode = mode;
  log->interval = interval_s > 0 ? interval_s : (mode == PIPERT_PROGRESS_TTY ? 0.2 : 10.0);
}

void pipert_log_step(pipert_log *log, int64_t step, double loss, int n_extra,
                     const char *const *names, const double *values) {
  const auto now = Clock::now();
  const double stepTime = std::chrono::duration<double>(now - log->lastStep).count();
  const double elapsed = std::chrono::duration<double>(now - log->opened).count();
  log->lastStep = now;
  ++log->stepsLogged;
  const double samplesPerS =
      stepTime > 0 ? static_cast<double>(log->samplesPerStep) / stepTime : 0.0;

  if (log->file) {
    std::string &line = log->line;
    line.assign("{\"step\":");
    line += std::to_string(step);
    line += ",\"loss\":";
    appendNumber(line, loss);
    line += ",\"samples_per_s\":";
    appendNumber(line, samplesPerS);
    line += ",\"time_s\":";
    appendNumber(line, elapsed);
    for (int i = 0; i < n_extra; ++i) {
      line += ',';
      appendKey(line, names[i]);
      appendNumber(line, values[i]);
    }
    line += "}\n";
    if (std::fwrite(line.data(), 1, line.size(), log->file) != line.size() ||
        std::fflush(log->file) != 0)
      pipert_fail("cannot write log file '%s': %s", log->path.c_str(), std::strerror(errno));
  }

  if (log->mode == PIPERT_PROGRESS_OFF)
    return;
  const bool last = log->totalSteps > 0 && step + 1 >= log->totalSteps;
  const double sincePrint = std::chrono::duration<double>(now - log->lastPrint).count();
  if (log->printedAny && !last && sincePrint < log->interval)
    return;
  // Throughput over the steps since the last line; ETA from the mean step time.
  const int64_t steps = log->stepsLogged - log->stepsAtLastPrint;
  const double window = log->printedAny ? sincePrint : elapsed;
  const double rate = window > 0 ? static_cast<double>(steps * log->samplesPerStep) / window : 0;
  const double remaining =
      log->totalSteps > 0 ? static_cast<double>(log->totalSteps - step - 1) : 0.0;
  const double eta = remaining * (elapsed / static_cast<double>(log->stepsLogged));
  char total[32] = "";
  if (log->totalSteps > 0)
    std::snprintf(total, sizeof total, "/%lld", static_cast<long long>(log->totalSteps));
  char text[256];
  if (log->mode == PIPERT_PROGRESS_TTY)
    std::snprintf(text, sizeof text, "\r\033[Kstep %lld%s  loss %.4f  %.1f samples/s  ETA %s%s",
                  static_cast<long long>(step), total, loss, rate,
                  formatDuration(eta).c_str(), last ? "\n" : "");
  else
    std::snprintf(text, sizeof text, "step %lld%s loss %.4f %.1f samples/s ETA %s\n",
                  static_cast<long long>(step), total, loss, rate, formatDuration(eta).c_str());
  std::fputs(text, stderr);
  std::fflush(stderr);
  log->lineOpen = log->mode == PIPERT_PROGRESS_TTY && !last;
  log->printedAny = true;
  log->lastPrint = now;
  log->stepsAtLastPrint = log->stepsLogged;
}

void pipert_log_eval(pipert_log *log, int64_t step, double loss, int64_t samples,
                     int final, int64_t labels, int64_t correct) {
  const double elapsed =
      std::chrono::duration<double>(Clock::now() - log->opened).count();
  const bool accuracy = labels > 0;
  const double fraction =
      accuracy ? static_cast<double>(correct) / static_cast<double>(labels) : 0.0;
  if (log->file) {
    std::string line = "{\"step\":" + std::to_string(step) + ",\"eval_loss\":";
    appendNumber(line, loss);
    line += ",\"eval_samples\":" + std::to_string(samples);
    if (labels >= 0) {
      line += ",\"eval_accuracy\":";
      if (accuracy)
        appendNumber(line, fraction);
      else
        line += "null";
      line += ",\"eval_labels\":" + std::to_string(labels);
    }
    line += ",\"time_s\":";
    appendNumber(line, elapsed);
    if (final)
      line += ",\"final\":true";
    line += "}\n";
    if (std::fwrite(line.data(), 1, line.size(), log->file) != line.size() ||
        std::fflush(log->file) != 0)
      pipert_fail("cannot write log file '%s': %s", log->path.c_str(), std::strerror(errno));
  }
  // Its own line, also under --quiet (the run was asked for it).
  char text[320], value[32], acc[48] = "";
  if (std::isnan(loss))
    std::snprintf(value, sizeof value, "nan");
  else
    std::snprintf(value, sizeof value, "%.4f", loss);
  if (accuracy)
    std::snprintf(acc, sizeof acc, ", accuracy %.4f", fraction);
  std::snprintf(text, sizeof text, "%sstep %lld: eval loss %s%s over %lld samples\n",
                log->lineOpen ? "\n" : "", static_cast<long long>(step), value, acc,
                static_cast<long long>(samples));
  std::fputs(text, stderr);
  std::fflush(stderr);
  log->lineOpen = false;
  // The next step's time and throughput do not count the evaluation.
  log->lastStep = Clock::now();
}

void pipert_log_close(pipert_log *log) {
  if (!log)
    return;
  if (log->lineOpen) {
    std::fputc('\n', stderr);
    std::fflush(stderr);
  }
  if (log->file)
    std::fclose(log->file);
  delete log;
}

} // extern "C"
