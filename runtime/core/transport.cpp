//===- transport.cpp - pipert_comm.h over the library's active transport ---===//
//
// Every C entry point of pipert_comm.h (but the wait-time counters, in
// context.cpp), defined once for both backends: the argument checks common to
// all transports (see transport.h), then a call of pipert::activeTransport().
//
//===----------------------------------------------------------------------===//
#include "transport.h"

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

void waitRequests(pipert_context *ctx, pipert_request **reqs, int n) {
  active().wait(ctx, reqs, n);
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
