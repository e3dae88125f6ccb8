/*===- pipert_trace.h - Chrome trace events per rank ----------------------===*
 *
 * A per-process recorder of timed events (kernels, sends, receives, idle
 * waits), kept in memory (a few words per event, names interned) and written
 * at the end as Chrome trace JSON ("Trace Event Format", opens in Perfetto and
 * chrome://tracing). One process = one rank = one trace "pid"; tids are
 * tracks inside it (PIPERT_TRACE_TID_*).
 *
 * Timestamps are microseconds from the moment tracing was enabled; the file
 * records that moment as Unix time (otherData.origin_unix_us), and
 * pipert_trace_merge shifts every rank's events onto the earliest origin, so
 * the merged file shows all devices on one time axis (one process track per
 * device, named "device <rank>").
 *
 * Recording is a no-op while tracing is disabled. The transport records its
 * own events: "send"/"recv" from post to completion on the transfer track,
 * and "idle" for the time the compute track spends blocked in a wait.
 *===----------------------------------------------------------------------===*/
#ifndef PIPERT_PIPERT_TRACE_H
#define PIPERT_PIPERT_TRACE_H

#include "pipert/pipert.h"

#ifdef __cplusplus
extern "C" {
#endif

enum {
  PIPERT_TRACE_TID_COMPUTE = 0,  /* kernels, and idle waits */
  PIPERT_TRACE_TID_TRANSFER = 1, /* sends and receives in flight */
};

/* Starts recording for this process; `rank` becomes the trace pid. Events
 * recorded before are dropped. */
void pipert_trace_enable(pipert_context *ctx, int rank);
void pipert_trace_disable(pipert_context *ctx);
int pipert_trace_enabled(const pipert_context *ctx);
/* Stops recording while `paused` is 1 and goes on, keeping what was
 * recorded, at 0 (the driver's evaluation passes are not in the trace). */
void pipert_trace_pause(pipert_context *ctx, int paused);
/* Microseconds since tracing was enabled (monotonic). */
double pipert_trace_now_us(const pipert_context *ctx);

/* A complete event ("ph":"X"): `name` and `category` are copied (interned),
 * ts/dur in microseconds from pipert_trace_now_us. Categories used by the
 * runtime: "kernel", "send", "recv", "idle"; others are allowed. */
void pipert_trace_event(pipert_context *ctx, const char *name, const char *category,
                        double ts_us, double dur_us, int tid);
/* An event whose name is made only when the trace is written, by `namer`
 * from the five integers given (copied): for events recorded many times a
 * step (transfers, waits, stages), where formatting and interning a name
 * each time cost ~0.5 us. The namer writes a NUL-terminated name into buf
 * (size bytes). Records [begin, now) like pipert_trace_end. */
typedef void (*pipert_trace_namer)(const int64_t args[5], char *buf, size_t size);
void pipert_trace_end_named(pipert_context *ctx, pipert_trace_namer namer, const int64_t args[5],
                            const char *category, double begin_us, int tid);
/* Convenience: the begin time for pipert_trace_end (0 when disabled). */
double pipert_trace_begin(pipert_context *ctx);
/* Records [begin, now) as an event. */
void pipert_trace_end(pipert_context *ctx, const char *name, const char *category,
                      double begin_us, int tid);
/* Stage computations, as generated code records them (category "stage"):
 * the begin time in nanoseconds (0 when tracing is off), then the event
 * "F<mb> s<stage>", "B<mb> s<stage>", "W<mb> s<stage>" or "update s<stage>"
 * for kind 0, 1, 2 or 3. pipe-simulate --measured reads them as a profile.
 * On CUDA they time the host side of the launches. */
int64_t pipert_trace_stage_begin(pipert_context *ctx);
void pipert_trace_stage_end(pipert_context *ctx, int32_t kind, int64_t stage, int64_t mb,
                            int64_t begin_ns);
/* One op of a step compiled with per-op timing (pipe-profile): the event
 * "<phase> op<id>" (phase 0 forward, 1 backward, 2 update; category "op"),
 * from pipert_trace_stage_begin's time to now. The op table (id -> ONNX node)
 * is the plan's "op_profile". On CUDA it synchronizes the device first, so
 * that the event covers the kernels. */
void pipert_trace_op_end(pipert_context *ctx, int64_t op, int32_t phase, int64_t begin_ns);
/* Seconds x 1e6 an op event adds to the op it times: the median duration of
 * events around no op (0 when tracing is off). pipert_trace_write records it
 * as otherData's "op_event_overhead_us" in a trace that has op events;
 * pipe-profile takes it off every op's time. */
double pipert_trace_op_overhead_us(pipert_context *ctx);
/* Number of events recorded so far. */
int64_t pipert_trace_event_count(const pipert_context *ctx);

/* Writes the recorded events as one JSON object {"traceEvents":[...], ...}
 * with process/thread name metadata. Returns 0, or -1 when the file cannot be
 * written (errno says why). Keeps the events. */
int pipert_trace_write(pipert_context *ctx, const char *path);

/* Merges per-rank trace files (as written above, or any Chrome trace JSON
 * object/array) into one file, aligning their time origins. Returns 0; on a
 * missing or malformed input returns -1 and writes a message into err
 * (if err_len > 0). */
int pipert_trace_merge(const char *const *inputs, int n_inputs, const char *output, char *err,
                       size_t err_len);

#ifdef __cplusplus
}
#endif

#endif /* PIPERT_PIPERT_TRACE_H */
