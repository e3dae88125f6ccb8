/*===- pipert_log.h - per-step training logs and progress ----------------===*
 *
 * One JSON object per step, one per line (JSON Lines), appended to a log file:
 *   {"step":0,"loss":2.302585,"samples_per_s":1234.5,"time_s":0.052,"lr":0.1}
 *  - step: the step number as given;
 *  - loss: the step's loss (the mean over its mini-batch), JSON null if NaN/inf;
 *  - samples_per_s: samples of this step / the time since the previous step
 *    (or since the log was opened, for the first one);
 *  - time_s: seconds since the log was opened;
 *  - then the extra metrics, in the order given.
 * Each line is flushed as it is written, so a crash keeps the steps before it.
 *
 * Progress on stderr: when stderr is a terminal, one line rewritten in place
 * ("step 120/1000  loss 0.4312  2345.6 samples/s  ETA 0:01:23"), at most every
 * 0.2 s; otherwise plain lines ("step 120/1000 loss 0.4312 2345.6 samples/s
 * ETA 0:01:23"), at most every 10 s. The first and the last step are always
 * shown. PIPERT_PROGRESS=off|plain|tty overrides the choice.
 *===----------------------------------------------------------------------===*/
#ifndef PIPERT_PIPERT_LOG_H
#define PIPERT_PIPERT_LOG_H

#include "pipert/pipert.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct pipert_log pipert_log;

typedef enum pipert_progress_mode {
  PIPERT_PROGRESS_AUTO = 0,  /* tty when stderr is a terminal, else plain */
  PIPERT_PROGRESS_OFF = 1,
  PIPERT_PROGRESS_PLAIN = 2,
  PIPERT_PROGRESS_TTY = 3,
} pipert_progress_mode;

enum {
  PIPERT_LOG_TRUNCATE = 0, /* start a new log file */
  PIPERT_LOG_APPEND = 1,   /* append to an existing one (resuming) */
};

/* Opens a log. `path` NULL or "" means no file (progress only). total_steps
 * (> 0) and samples_per_step give the ETA and the throughput. A file that
 * cannot be opened is fatal. */
pipert_log *pipert_log_open(const char *path, int64_t total_steps, int64_t samples_per_step,
                            int flags);
/* Resuming at `step`: drops the lines of the log at `path` for that step
 * and later (an earlier run's, past its last checkpoint), so that the log
 * appended to holds each step once. A missing file is left missing. */
void pipert_log_drop_from(const char *path, int64_t step);
/* Progress mode and minimum interval between progress lines (seconds; <= 0
 * keeps the mode's default). */
void pipert_log_set_progress(pipert_log *log, pipert_progress_mode mode, double interval_s);
/* Records one step; names/values are n_extra extra metrics (names are JSON
 * keys; may be NULL when n_extra is 0). */
void pipert_log_step(pipert_log *log, int64_t step, double loss, int n_extra,
                     const char *const *names, const double *values);
/* Records an evaluation pass after step `step` (its loss over `samples`
 * samples): the line {"step", "eval_loss", "eval_samples", "time_s"}, with
 * "final": true for the one after a run's last step (a run resumed from a
 * checkpoint at that step drops it: pipert_log_drop_eval), and a line on
 * stderr. Where the program counts a top-1 accuracy (`labels` >= 0 labels
 * counted, `correct` of them predicted right), the line also has
 * "eval_accuracy" (correct / labels; null when no label was counted) and
 * "eval_labels". */
void pipert_log_eval(pipert_log *log, int64_t step, double loss, int64_t samples,
                     int final, int64_t labels, int64_t correct);
/* Drops the evaluation lines of step `step` from the log at `path` (only
 * those marked final where `final_only`). */
void pipert_log_drop_eval(const char *path, int64_t step, int final_only);
/* Ends the progress line and closes the file. NULL is a no-op. */
void pipert_log_close(pipert_log *log);

#ifdef __cplusplus
}
#endif

#endif /* PIPERT_PIPERT_LOG_H */
