//===- transport.cpp - pipert_comm.h over the library's active transport ---===//
//
// Every C entry point of pipert_comm.h (but the wait-time counters, in
// context.cpp), defined once for both backends: the argument checks common to
// all transports (see transport.h), then a call of pipert::activeTransport().
//
//===----------------------------------------------------------------------===//
#include "transport.h"

#include <unordered_map>
#include <utility>
#include <vector>

using pipert::Transport;
using pipert::transport::Kind;

namespace {

Transport &active() { return pipert::activeTransport(); }

// The active transport, failing when pipert_comm_init has not run.
Transport &started(const char *what) {
  Transport &t = active();
  if (!t.initialized())
    pipert_fail("%s called before pipert_comm_init", what);
  return t;
}

void checkPeer(const Transport &t, const pipert_comm *comm, int peer, const char *what) {
  const int size = t.size(comm);
  if (peer < 0 || peer >= size)
    pipert_fail("%s: peer rank %d out of range (communicator of %d ranks)", what, peer, size);
}

pipert_request *postP2P(pipert_context *ctx, pipert_comm *comm, void *buf, int64_t count,
                        pipert_dtype dtype, int peer, int tag, Kind kind) {
  const char *what = kind == Kind::Send ? "send" : "recv";
  Transport &t = started(what);
  if (!comm)
    pipert_fail("%s: null communicator", what);
  checkPeer(t, comm, peer, what);
  return t.post(ctx, comm, buf, count, dtype, peer, tag, kind);
}

// Packed receives in flight: where each one's message goes when it is
// waited for (pipert_irecv_packed). A request pointer is unique while the
// request lives, and a packed one is erased here when it is waited for.
struct Scatter {
  char *staging;
  std::vector<std::pair<void *, int64_t>> parts;
};
std::unordered_map<const pipert_request *, Scatter> g_scatters;

void waitRequests(pipert_context *ctx, pipert_request **reqs, int n) {
  if (g_scatters.empty()) {
    active().wait(ctx, reqs, n);
    return;
  }
  // The packed ones among them, taken out before the wait frees them.
  std::vector<Scatter> scatters;
  for (int i = 0; i < n; ++i)
    if (reqs[i])
      if (auto it = g_scatters.find(reqs[i]); it != g_scatters.end()) {
        scatters.push_back(std::move(it->second));
        g_scatters.erase(it);
      }
  active().wait(ctx, reqs, n);
  for (Scatter &s : scatters) {
    int64_t offset = 0;
    for (auto [buf, bytes] : s.parts) {
      pipert_copy_device(ctx, buf, s.staging + offset, size_t(bytes));
      offset += bytes;
    }
    pipert_free(ctx, s.staging);
  }
}

int64_t packedBytes(const int64_t *bytes, int n, const char *what) {
  if (n <= 0 || !bytes)
    pipert_fail("%s: %d buffers, want at least one", what, n);
  int64_t total = 0;
  for (int i = 0; i < n; ++i) {
    if (bytes[i] < 0)
      pipert_fail("%s: buffer %d has %lld bytes", what, i, (long long)bytes[i]);
    total += bytes[i];
  }
  return total;
}

// The stage or pipeline group of the P x S layout: a split of the world.
pipert_comm *layoutGroup(pipert_context *ctx, int pipelines, int stages, bool byStage,
                         const char *what) {
  Transport &t = started(what);
  pipert_comm *world = t.world();
  const int worldSize = t.size(world);
  if (pipelines <= 0 || stages <= 0 || pipelines * stages != worldSize)
    pipert_fail("%s: layout of %d pipelines x %d stages does not match %d ranks", what,
                pipelines, stages, worldSize);
  const int rank = t.rank(world);
  const int stage = rank % stages, pipeline = rank / stages;
  return byStage ? pipert_comm_split(ctx, world, stage, pipeline)
                 : pipert_comm_split(ctx, world, pipeline, stage);
}

} // namespace

void pipert::Transport::sendGather(pipert_context *ctx, pipert_comm *comm,
                                   const void *const *bufs, const int64_t *bytes, int n,
                                   int64_t total, int peer, int tag) {
  // Gathered into device memory (the CUDA backend's copies and its
  // allocator are ordered on the context's stream), then sent whole.
  char *staging = static_cast<char *>(pipert_alloc(ctx, size_t(total)));
  int64_t offset = 0;
  for (int i = 0; i < n; ++i) {
    pipert_copy_device(ctx, staging + offset, bufs[i], size_t(bytes[i]));
    offset += bytes[i];
  }
  send(ctx, comm, staging, total, PIPERT_U8, peer, tag);
  pipert_free(ctx, staging);
}

extern "C" {

void pipert_comm_init(pipert_context *ctx, int *argc, char ***argv) {
  active().init(ctx, argc, argv);
}

void pipert_comm_finalize(pipert_context *ctx) { active().finalize(ctx); }

int pipert_comm_initialized(void) { return active().initialized() ? 1 : 0; }

pipert_comm *pipert_comm_world(pipert_context *) {
  return started("pipert_comm_world").world();
}

int pipert_comm_rank(const pipert_comm *comm) { return active().rank(comm); }
int pipert_comm_size(const pipert_comm *comm) { return active().size(comm); }
int pipert_world_rank(void) { return active().worldRank(); }
int pipert_comm_max_tag(const pipert_comm *comm) { return active().maxTag(comm); }
int pipert_comm_world_rank_of(const pipert_comm *comm, int rank) {
  Transport &t = active();
  checkPeer(t, comm, rank, "pipert_comm_world_rank_of");
  return t.worldRankOf(comm, rank);
}

void pipert_comm_set_timeout(double seconds) {
  if (!(seconds > 0))
    pipert_fail("pipert_comm_set_timeout: timeout must be positive, got %g", seconds);
  active().setTimeout(seconds);
}
double pipert_comm_timeout(void) { return active().timeout(); }

int64_t pipert_comm_ring_bytes(void) {
  return active().initialized() ? active().ringBytes() : 0;
}

pipert_request *pipert_isend(pipert_context *ctx, pipert_comm *comm, const void *buf,
                             int64_t count, pipert_dtype dtype, int peer, int tag) {
  return postP2P(ctx, comm, const_cast<void *>(buf), count, dtype, peer, tag, Kind::Send);
}

pipert_request *pipert_irecv(pipert_context *ctx, pipert_comm *comm, void *buf, int64_t count,
                             pipert_dtype dtype, int peer, int tag) {
  return postP2P(ctx, comm, buf, count, dtype, peer, tag, Kind::Recv);
}

void pipert_send(pipert_context *ctx, pipert_comm *comm, const void *buf, int64_t count,
                 pipert_dtype dtype, int peer, int tag) {
  Transport &t = started("send");
  if (!comm)
    pipert_fail("send: null communicator");
  checkPeer(t, comm, peer, "send");
  t.send(ctx, comm, buf, count, dtype, peer, tag);
}

void pipert_recv(pipert_context *ctx, pipert_comm *comm, void *buf, int64_t count,
                 pipert_dtype dtype, int peer, int tag) {
  pipert_request *r = pipert_irecv(ctx, comm, buf, count, dtype, peer, tag);
  waitRequests(ctx, &r, 1);
}

void pipert_send_packed(pipert_context *ctx, pipert_comm *comm, const void *const *bufs,
                        const int64_t *bytes, int n, int peer, int tag) {
  const int64_t total = packedBytes(bytes, n, "send");
  Transport &t = started("send");
  if (!comm)
    pipert_fail("send: null communicator");
  checkPeer(t, comm, peer, "send");
  t.sendGather(ctx, comm, bufs, bytes, n, total, peer, tag);
}

pipert_request *pipert_irecv_packed(pipert_context *ctx, pipert_comm *comm, void *const *bufs,
                                    const int64_t *bytes, int n, int peer, int tag) {
  const int64_t total = packedBytes(bytes, n, "recv");
  // Buffers back to back (the lowering's step buffers often are): received
  // in place.
  bool contiguous = true;
  for (int i = 1; i < n && contiguous; ++i)
    contiguous = static_cast<char *>(bufs[i]) == static_cast<char *>(bufs[i - 1]) + bytes[i - 1];
  if (contiguous)
    return pipert_irecv(ctx, comm, bufs[0], total, PIPERT_U8, peer, tag);
  {
    Transport &t = started("recv");
    if (!comm)
      pipert_fail("recv: null communicator");
    checkPeer(t, comm, peer, "recv");
    // Scattered by the transport itself where it can (the CPU transport's
    // shared-memory rings: straight from the ring into the parts).
    if (pipert_request *r = t.postScatter(ctx, comm, bufs, bytes, n, total, peer, tag))
      return r;
  }
  char *staging = static_cast<char *>(pipert_alloc(ctx, size_t(total)));
  pipert_request *r = pipert_irecv(ctx, comm, staging, total, PIPERT_U8, peer, tag);
  Scatter s{staging, {}};
  for (int i = 0; i < n; ++i)
    s.parts.emplace_back(bufs[i], bytes[i]);
  g_scatters[r] = std::move(s);
  return r;
}

void pipert_wait(pipert_context *ctx, pipert_request *req) {
  if (!req)
    return;
  waitRequests(ctx, &req, 1);
}

void pipert_wait_all(pipert_context *ctx, pipert_request **reqs, int n) {
  if (n <= 0)
    return;
  waitRequests(ctx, reqs, n);
}

int pipert_test(pipert_context *ctx, pipert_request *req) {
  if (!req)
    return 1;
  return active().test(ctx, req) ? 1 : 0;
}

pipert_request *pipert_iallreduce_f32(pipert_context *ctx, pipert_comm *comm, float *buf,
                                      int64_t count, pipert_collective_op op) {
  Transport &t = started("allreduce");
  if (op != PIPERT_COLLECTIVE_SUM && op != PIPERT_COLLECTIVE_MEAN)
    pipert_fail("allreduce: unknown reduction %d", static_cast<int>(op));
  return t.iallreduce(ctx, comm, buf, count, op);
}

void pipert_allreduce_f32(pipert_context *ctx, pipert_comm *comm, float *buf, int64_t count,
                          pipert_collective_op op) {
  pipert_request *r = pipert_iallreduce_f32(ctx, comm, buf, count, op);
  waitRequests(ctx, &r, 1);
}

void pipert_broadcast(pipert_context *ctx, pipert_comm *comm, void *buf, int64_t count,
                      pipert_dtype dtype, int root) {
  Transport &t = started("broadcast");
  checkPeer(t, comm, root, "broadcast");
  t.broadcast(ctx, comm, buf, count, dtype, root);
}

void pipert_barrier(pipert_context *ctx, pipert_comm *comm) {
  started("barrier").barrier(ctx, comm);
}

pipert_comm *pipert_comm_split(pipert_context *ctx, pipert_comm *comm, int color, int key) {
  Transport &t = started("pipert_comm_split");
  if (color < 0)
    pipert_fail("pipert_comm_split: color must be >= 0, got %d", color);
  return t.split(ctx, comm, color, key);
}

pipert_comm *pipert_comm_stage_group(pipert_context *ctx, int pipelines, int stages) {
  return layoutGroup(ctx, pipelines, stages, true, "pipert_comm_stage_group");
}

pipert_comm *pipert_comm_pipeline_group(pipert_context *ctx, int pipelines, int stages) {
  return layoutGroup(ctx, pipelines, stages, false, "pipert_comm_pipeline_group");
}

void pipert_comm_destroy(pipert_context *ctx, pipert_comm *comm) {
  if (!comm)
    return;
  active().destroy(ctx, comm);
}

} // extern "C"
