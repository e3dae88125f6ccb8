//===- transport_util.h - host code shared by the pipert transports -*- C++ -*-===//
//
// What the MPI transport (runtime/cpu/comm/mpi_comm.cpp) and the NCCL one
// (runtime/cuda/nccl_comm.cpp) do alike around their own requests: the kinds
// of transfer and how errors and traces name them, byte counts, and the wait
// loop (poll, spin, back off, time out naming the transfer, trace the idle
// time). The interface they implement is transport.h.
//
//===----------------------------------------------------------------------===//
#ifndef PIPERT_CORE_TRANSPORT_UTIL_H
#define PIPERT_CORE_TRANSPORT_UTIL_H

#include "pipert/pipert.h"
#include "pipert/pipert_comm.h"
#include "pipert/pipert_trace.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>
#include <thread>
#include <type_traits>

namespace pipert::transport {

enum class Kind { Send, Recv, Allreduce, Broadcast, Barrier };

inline const char *kindName(Kind k) {
  switch (k) {
  case Kind::Send: return "send";
  case Kind::Recv: return "recv";
  case Kind::Allreduce: return "allreduce";
  case Kind::Broadcast: return "broadcast";
  case Kind::Barrier: return "barrier";
  }
  return "transfer";
}

// How errors name a transfer: "send of 64 bytes to rank 1, tag 3", ...
// peerWorld is the peer's (send/recv) or the root's (broadcast) world rank.
inline std::string describe(Kind kind, int64_t bytes, int peerWorld, int tag, int commSize) {
  char buf[256];
  switch (kind) {
  case Kind::Send:
    std::snprintf(buf, sizeof buf, "send of %lld bytes to rank %d, tag %d",
                  static_cast<long long>(bytes), peerWorld, tag);
    break;
  case Kind::Recv:
    std::snprintf(buf, sizeof buf, "recv of %lld bytes from rank %d, tag %d",
                  static_cast<long long>(bytes), peerWorld, tag);
    break;
  case Kind::Allreduce:
    std::snprintf(buf, sizeof buf, "allreduce of %lld bytes over %d ranks",
                  static_cast<long long>(bytes), commSize);
    break;
  case Kind::Broadcast:
    std::snprintf(buf, sizeof buf, "broadcast of %lld bytes from rank %d over %d ranks",
                  static_cast<long long>(bytes), peerWorld, commSize);
    break;
  case Kind::Barrier:
    std::snprintf(buf, sizeof buf, "barrier over %d ranks", commSize);
    break;
  }
  return buf;
}

// "300 s", "0.5 s".
inline std::string formatSeconds(double s) {
  char buf[64];
  if (s == static_cast<double>(static_cast<long long>(s)))
    std::snprintf(buf, sizeof buf, "%lld s", static_cast<long long>(s));
  else
    std::snprintf(buf, sizeof buf, "%g s", s);
  return buf;
}

// count elements of dtype in bytes, failing on an unknown dtype or a negative count.
inline int64_t byteCount(int64_t count, pipert_dtype dtype, const char *what) {
  size_t es = pipert_dtype_size(dtype);
  if (es == 0)
    pipert_fail("%s: unknown dtype %d", what, static_cast<int>(dtype));
  if (count < 0)
    pipert_fail("%s: negative element count %lld", what, static_cast<long long>(count));
  return count * static_cast<int64_t>(es);
}

// The trace event of a completed transfer, from its posting to now, on the
// transfer row: "send to 1 tag 3" (category send), "recv from 0 tag 3"
// (recv), "allreduce" (allreduce), ...
// The name is made when the trace is written (pipert_trace_end_named).
inline void traceCompletion(pipert_context *ctx, Kind kind, int peerWorld, int tag,
                            double postUs) {
  if (!pipert_trace_enabled(ctx))
    return;
  const int64_t args[5] = {static_cast<int64_t>(kind), peerWorld, tag, 0, 0};
  const char *cat = kind == Kind::Send ? "send" : kindName(kind);
  pipert_trace_end_named(
      ctx,
      [](const int64_t a[5], char *buf, size_t size) {
        switch (static_cast<Kind>(a[0])) {
        case Kind::Send:
          std::snprintf(buf, size, "send to %d tag %d", int(a[1]), int(a[2]));
          break;
        case Kind::Recv:
          std::snprintf(buf, size, "recv from %d tag %d", int(a[1]), int(a[2]));
          break;
        default: std::snprintf(buf, size, "%s", kindName(static_cast<Kind>(a[0]))); break;
        }
      },
      args, cat, postUs, PIPERT_TRACE_TID_TRANSFER);
}

// Polls until every non-null request of reqs[0..n) is done, or fails naming
// the first one still pending once `timeout` seconds have passed. test(r)
// advances request r and returns whether it is done (r->done after that);
// describe(r) names it. The first 64 polls spin, the next ones (for 5 ms at
// least) yield the core between polls, then each sleeps with an exponential
// backoff from 20 us capped at 0.2 ms (ranks may share cores: spinning
// would slow the peer being waited for). Time spent blocked is
// traced as "wait <first request>" (category idle) on the compute row.
// The yielding phase lasts as long as the bytes in flight could take at
// 0.5 GB/s, at least 5 ms: without single-copy shared memory a large message
// moves only while both ranks poll, and sleeps between polls made a 64 MiB
// transfer 10x slower. `otherBytes` are the caller's other transfers that
// progress only while it polls (buffered sends).
// What a timeout adds after "timed out after T": nothing by default.
struct NoTimeoutHint {
  template <typename Req> std::string operator()(const Req *) const { return {}; }
};

template <typename Req, typename Test, typename Describe, typename Hint = NoTimeoutHint>
void pollUntilDone(pipert_context *ctx, Req **reqs, int n, double timeout, Test &&test,
                   Describe &&describe, int64_t otherBytes = 0, Hint &&hint = Hint{}) {
  using clock = std::chrono::steady_clock;
  const auto start = clock::now();
  const double traceStart = pipert_trace_begin(ctx);
  bool blocked = false;
  int spins = 0;
  auto sleepFor = std::chrono::microseconds(20);
  int64_t bytes = otherBytes;
  for (int i = 0; i < n; ++i)
    if (reqs[i])
      bytes += reqs[i]->bytes;
  const double yieldFor = std::max(0.005, static_cast<double>(bytes) * 2e-9);
  for (;;) {
    bool all = true;
    for (int i = 0; i < n; ++i)
      if (reqs[i] && !test(reqs[i]))
        all = false;
    if (all)
      break;
    blocked = true;
    const double waited = std::chrono::duration<double>(clock::now() - start).count();
    if (waited >= timeout)
      for (int i = 0; i < n; ++i)
        if (reqs[i] && !reqs[i]->done)
          pipert_fail("%s, timed out after %s%s", describe(reqs[i]).c_str(),
                      formatSeconds(timeout).c_str(), hint(reqs[i]).c_str());
    // A transfer between two busy ranks completes in a few round trips,
    // each needing both sides inside the transport: sleeping between polls
    // adds the sleep to every round trip (a rendezvous send of 8 KB took
    // 2.5 ms with 20-500 us sleeps). So poll, yielding the core to any other
    // rank that shares it, for the first milliseconds; only a long wait (a
    // peer still computing) backs off to short sleeps.
    // The first polls only poll: a message between two ranks of one machine
    // arrives within microseconds, and a yield per poll (a system call, and
    // the core lent to whatever else runs) tripled a small message's
    // latency against MPI's own blocking calls.
    if (++spins < 64)
      continue;
    if (spins < 200 || waited < yieldFor) {
      std::this_thread::yield();
      continue;
    }
    std::this_thread::sleep_for(sleepFor);
    sleepFor = std::min(sleepFor * 2, std::chrono::microseconds(200));
  }
  if (blocked && pipert_trace_enabled(ctx)) {
    const Req *first = nullptr;
    for (int i = 0; i < n && !first; ++i)
      first = reqs[i];
    if constexpr (std::is_base_of_v<pipert_request, Req>) {
      // "wait " and the request as describe() names it, made when the
      // trace is written.
      const int64_t args[5] = {first ? static_cast<int64_t>(first->kind) : -1,
                               first ? first->bytes : 0, first ? first->peerWorld : 0,
                               first ? first->tag : 0, first ? first->commSize : 0};
      pipert_trace_end_named(
          ctx,
          [](const int64_t a[5], char *buf, size_t size) {
            if (a[0] < 0)
              std::snprintf(buf, size, "wait");
            else
              std::snprintf(buf, size, "wait %s",
                            ::pipert::transport::describe(static_cast<Kind>(a[0]), a[1],
                                                          int(a[2]), int(a[3]), int(a[4]))
                                .c_str());
          },
          args, "idle", traceStart, PIPERT_TRACE_TID_COMPUTE);
    } else {
      std::string name = first ? "wait " + describe(first) : std::string("wait");
      pipert_trace_end(ctx, name.c_str(), "idle", traceStart, PIPERT_TRACE_TID_COMPUTE);
    }
  }
}

// pollUntilDone, then each request's completion traced (traceCompletion from
// its kind, peerWorld, tag and postUs), release(r) called on it and its slot
// cleared.
template <typename Req, typename Test, typename Describe, typename Release,
          typename Hint = NoTimeoutHint>
void waitAndRelease(pipert_context *ctx, Req **reqs, int n, double timeout, Test &&test,
                    Describe &&describe, Release &&release, int64_t otherBytes = 0,
                    Hint &&hint = Hint{}) {
  const auto start = std::chrono::steady_clock::now();
  pollUntilDone(ctx, reqs, n, timeout, test, describe, otherBytes, hint);
  pipert_add_transport_wait(
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  for (int i = 0; i < n; ++i) {
    if (!reqs[i])
      continue;
    traceCompletion(ctx, reqs[i]->kind, reqs[i]->peerWorld, reqs[i]->tag, reqs[i]->postUs);
    release(reqs[i]);
    reqs[i] = nullptr;
  }
}

} // namespace pipert::transport

#endif // PIPERT_CORE_TRANSPORT_UTIL_H
