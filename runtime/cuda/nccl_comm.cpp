//===- nccl_comm.cpp - the NCCL transport of the CUDA backend --------------===//
//
// pipert_comm.h on device buffers. MPI (the CPU backend's transport, compiled
// in under pipert_mpi_* names, see mpi_rename.h) starts the job, forms the
// groups, runs barriers and broadcasts each group's ncclUniqueId; NCCL moves
// the data, on one stream per communicator ordered after the compute stream.
//
// - Non-blocking sends and receives are queued when posted and launched
//   together in one ncclGroupStart/End at the next wait, test, blocking call
//   or collective, so that a pair of ranks exchanging isend+irecv never
//   deadlocks on NCCL's in-order point-to-point matching.
// - NCCL has no tags and no sizes: each send also posts its byte count over
//   MPI with the same tag, and the receiver checks it, so that a recv that
//   does not match its send fails with both sizes named instead of hanging or
//   corrupting memory.
// - Communicators are non-blocking (ncclConfig_t.blocking = 0) and every wait
//   polls, so a peer that stops answering ends the job after the timeout
//   (PIPERT_TIMEOUT_S) with the transfer named, as on the CPU backend.
//===----------------------------------------------------------------------===//
#include "cuda_util.h"
#include "pipert/pipert_trace.h"
#include "../core/transport_util.h"

#include <nccl.h>

// The MPI transport under its renamed names, then the public ABI.
#include "mpi_rename.h"
#include "pipert/pipert_comm.h"
#include "mpi_unrename.h"
#include "pipert/pipert_comm.h"

#include <algorithm>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

using namespace pipert::cuda;

struct pipert_comm {
  pipert_mpi_comm *mpi = nullptr;
  ncclComm_t nccl = nullptr;
  cudaStream_t stream = nullptr;
  bool is_world = false;
};

namespace {

using pipert::transport::Kind;
using pipert::transport::byteCount;
using pipert::transport::formatSeconds;

} // namespace

struct pipert_request {
  Kind kind = Kind::Send;
  pipert_comm *comm = nullptr;
  void *buf = nullptr;
  int64_t bytes = 0;
  int peer = -1; // rank in comm (send/recv) or root (broadcast)
  int peerWorld = -1;
  int tag = -1;
  int commSize = 1;
  bool launched = false;
  bool done = false;
  cudaEvent_t event = nullptr;
  // Size check over MPI (send/recv): the sender's byte count.
  int64_t header = 0;
  pipert_mpi_request *headerReq = nullptr;
  bool headerChecked = false;
  double postUs = 0;
};

namespace {

bool g_initialized = false;
pipert_comm g_world;
Context *g_ctx = nullptr;
std::vector<pipert_request *> g_pending; // posted send/recv not launched yet

#define PIPERT_NCCL_CHECK(call, what)                                                            \
  do {                                                                                           \
    ncclResult_t pipert_nccl_status_ = (call);                                                   \
    if (pipert_nccl_status_ != ncclSuccess && pipert_nccl_status_ != ncclInProgress)             \
      pipert_fail("%s: %s failed: %s (%s)", what, #call, ncclGetErrorString(pipert_nccl_status_), \
                  ncclGetLastError(nullptr));                                                    \
  } while (0)

void requireInit(const char *what) {
  if (!g_initialized)
    pipert_fail("%s called before pipert_comm_init", what);
}

std::string describe(const pipert_request *r) {
  return pipert::transport::describe(r->kind, r->bytes, r->peerWorld, r->tag, r->commSize);
}

void checkPeer(const pipert_comm *c, int peer, const char *what) {
  const int size = pipert_mpi_comm_size(c->mpi);
  if (peer < 0 || peer >= size)
    pipert_fail("%s: peer rank %d out of range (communicator of %d ranks)", what, peer, size);
}

// Waits (with the transport's timeout) until the communicator has finished
// the non-blocking NCCL call just made; fails on an NCCL error.
void settle(pipert_comm *c, const char *what) {
  using clock = std::chrono::steady_clock;
  const auto start = clock::now();
  for (;;) {
    ncclResult_t st = ncclSuccess;
    ncclResult_t rc = ncclCommGetAsyncError(c->nccl, &st);
    if (rc != ncclSuccess)
      pipert_fail("%s: ncclCommGetAsyncError failed: %s", what, ncclGetErrorString(rc));
    if (st == ncclSuccess)
      return;
    if (st != ncclInProgress)
      pipert_fail("%s: NCCL error: %s (%s)", what, ncclGetErrorString(st),
                  ncclGetLastError(c->nccl));
    const double waited = std::chrono::duration<double>(clock::now() - start).count();
    if (waited >= pipert_mpi_comm_timeout())
      pipert_fail("%s: NCCL did not complete within %s", what,
                  formatSeconds(pipert_mpi_comm_timeout()).c_str());
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

// A CUDA event recorded on the compute stream, for a comm stream to wait on:
// transfers start after the kernels queued before them.
void orderAfterCompute(const std::vector<pipert_comm *> &comms) {
  cudaEvent_t ready;
  PIPERT_CUDA_CHECK(cudaEventCreateWithFlags(&ready, cudaEventDisableTiming));
  PIPERT_CUDA_CHECK(cudaEventRecord(ready, g_ctx->stream));
  for (pipert_comm *c : comms)
    PIPERT_CUDA_CHECK(cudaStreamWaitEvent(c->stream, ready, 0));
  PIPERT_CUDA_CHECK(cudaEventDestroy(ready));
}

void recordDone(pipert_request *r) {
  PIPERT_CUDA_CHECK(cudaEventCreateWithFlags(&r->event, cudaEventDisableTiming));
  PIPERT_CUDA_CHECK(cudaEventRecord(r->event, r->comm->stream));
  r->launched = true;
}

// Launches every queued send/recv in one NCCL group.
void launchPending() {
  if (g_pending.empty())
    return;
  std::vector<pipert_comm *> comms;
  for (pipert_request *r : g_pending)
    if (std::find(comms.begin(), comms.end(), r->comm) == comms.end())
      comms.push_back(r->comm);
  orderAfterCompute(comms);
  const std::string what = describe(g_pending.front());
  PIPERT_NCCL_CHECK(ncclGroupStart(), what.c_str());
  for (pipert_request *r : g_pending) {
    if (r->bytes == 0)
      continue;
    if (r->kind == Kind::Send)
      PIPERT_NCCL_CHECK(ncclSend(r->buf, size_t(r->bytes), ncclUint8, r->peer, r->comm->nccl,
                                 r->comm->stream),
                        describe(r).c_str());
    else
      PIPERT_NCCL_CHECK(ncclRecv(r->buf, size_t(r->bytes), ncclUint8, r->peer, r->comm->nccl,
                                 r->comm->stream),
                        describe(r).c_str());
  }
  PIPERT_NCCL_CHECK(ncclGroupEnd(), what.c_str());
  for (pipert_comm *c : comms)
    settle(c, what.c_str());
  for (pipert_request *r : g_pending)
    recordDone(r);
  g_pending.clear();
}

// Checks the sender's byte count of a completed header against the recv.
bool testHeader(pipert_context *ctx, pipert_request *r) {
  if (!r->headerReq || r->headerChecked)
    return true;
  if (!pipert_mpi_test(ctx, r->headerReq))
    return false;
  pipert_mpi_wait(ctx, r->headerReq);
  r->headerReq = nullptr;
  r->headerChecked = true;
  if (r->kind == Kind::Recv && r->header != r->bytes)
    pipert_fail("%s: the message has %lld bytes", describe(r).c_str(),
                static_cast<long long>(r->header));
  return true;
}

bool testRequest(pipert_context *ctx, pipert_request *r) {
  if (r->done)
    return true;
  if (!testHeader(ctx, r))
    return false;
  if (!r->launched)
    return false;
  cudaError_t st = cudaEventQuery(r->event);
  if (st == cudaErrorNotReady) {
    // A failed peer shows as an asynchronous NCCL error while we wait.
    ncclResult_t async = ncclSuccess;
    ncclCommGetAsyncError(r->comm->nccl, &async);
    if (async != ncclSuccess && async != ncclInProgress)
      pipert_fail("%s: NCCL error: %s (%s)", describe(r).c_str(), ncclGetErrorString(async),
                  ncclGetLastError(r->comm->nccl));
    return false;
  }
  if (st != cudaSuccess)
    pipert_fail("%s: %s", describe(r).c_str(), cudaGetErrorString(st));
  r->done = true;
  return true;
}

void freeRequest(pipert_request *r) {
  if (r->event)
    cudaEventDestroy(r->event);
  delete r;
}

// Polls until every request completes or the timeout passes, then frees them.
void waitRequests(pipert_context *ctx, pipert_request **reqs, int n) {
  launchPending();
  pipert::transport::waitAndRelease(
      ctx, reqs, n, pipert_mpi_comm_timeout(),
      [ctx](pipert_request *r) { return testRequest(ctx, r); }, describe, freeRequest);
}

pipert_request *postP2P(pipert_context *ctx, pipert_comm *comm, void *buf, int64_t count,
                        pipert_dtype dtype, int peer, int tag, Kind kind) {
  const char *what = kind == Kind::Send ? "send" : "recv";
  requireInit(what);
  if (!comm)
    pipert_fail("%s: null communicator", what);
  checkPeer(comm, peer, what);
  auto *r = new pipert_request();
  r->kind = kind;
  r->comm = comm;
  r->buf = buf;
  r->bytes = byteCount(count, dtype, what);
  r->peer = peer;
  r->peerWorld = pipert_mpi_comm_world_rank_of(comm->mpi, peer);
  r->tag = tag;
  r->commSize = pipert_mpi_comm_size(comm->mpi);
  r->postUs = pipert_trace_begin(ctx);
  if (r->bytes > 0 && !buf)
    pipert_fail("%s: null buffer for %lld bytes", describe(r).c_str(),
                static_cast<long long>(r->bytes));
  // The MPI transport checks the tag's range when posting the header.
  if (kind == Kind::Send) {
    r->header = r->bytes;
    r->headerReq = pipert_mpi_isend(ctx, comm->mpi, &r->header, 1, PIPERT_I64, peer, tag);
  } else {
    r->headerReq = pipert_mpi_irecv(ctx, comm->mpi, &r->header, 1, PIPERT_I64, peer, tag);
  }
  g_pending.push_back(r);
  return r;
}

// An NCCL communicator (non-blocking) over the ranks of an MPI one.
pipert_comm *wrap(pipert_context *ctx, pipert_mpi_comm *mpi, bool is_world) {
  pipert_comm *c = is_world ? &g_world : new pipert_comm();
  c->mpi = mpi;
  c->is_world = is_world;
  const int rank = pipert_mpi_comm_rank(mpi), size = pipert_mpi_comm_size(mpi);
  ncclUniqueId id;
  if (rank == 0)
    PIPERT_NCCL_CHECK(ncclGetUniqueId(&id), "NCCL start-up");
  pipert_mpi_broadcast(ctx, mpi, &id, int64_t(sizeof id), PIPERT_U8, 0);
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  PIPERT_NCCL_CHECK(ncclCommInitRankConfig(&c->nccl, size, id, rank, &config), "NCCL start-up");
  settle(c, "NCCL start-up (ncclCommInitRankConfig)");
  PIPERT_CUDA_CHECK(cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking));
  return c;
}

void unwrap(pipert_comm *c) {
  if (c->nccl) {
    PIPERT_NCCL_CHECK(ncclCommFinalize(c->nccl), "pipert_comm_destroy");
    settle(c, "pipert_comm_destroy (ncclCommFinalize)");
    ncclCommDestroy(c->nccl);
    c->nccl = nullptr;
  }
  if (c->stream) {
    cudaStreamSynchronize(c->stream);
    cudaStreamDestroy(c->stream);
    c->stream = nullptr;
  }
}

// Starts a collective on comm's stream after the compute stream's work.
pipert_request *newCollective(pipert_context *ctx, pipert_comm *comm, Kind kind, void *buf,
                              int64_t bytes) {
  launchPending(); // keep posting order: queued point-to-point first
  auto *r = new pipert_request();
  r->kind = kind;
  r->comm = comm;
  r->buf = buf;
  r->bytes = bytes;
  r->commSize = pipert_mpi_comm_size(comm->mpi);
  r->postUs = pipert_trace_begin(ctx);
  r->headerChecked = true;
  orderAfterCompute({comm});
  return r;
}

ncclDataType_t ncclType(pipert_dtype t) {
  switch (t) {
  case PIPERT_F32: return ncclFloat32;
  case PIPERT_F64: return ncclFloat64;
  case PIPERT_I32: return ncclInt32;
  case PIPERT_I64: return ncclInt64;
  case PIPERT_F16: return ncclFloat16;
  case PIPERT_I8: return ncclInt8;
  default: return ncclUint8;
  }
}

} // namespace

extern "C" {

void pipert_comm_init(pipert_context *ctx, int *argc, char ***argv) {
  if (g_initialized)
    pipert_fail("pipert_comm_init called twice");
  if (!ctx)
    pipert_fail("pipert_comm_init: the CUDA transport needs the context (its device and stream)");
  g_ctx = cx(ctx);
  PIPERT_CUDA_CHECK(cudaSetDevice(g_ctx->device));
  pipert_mpi_comm_init(ctx, argc, argv);
  wrap(ctx, pipert_mpi_comm_world(ctx), true);
  g_initialized = true;
}

void pipert_comm_finalize(pipert_context *ctx) {
  if (!g_initialized)
    return;
  launchPending();
  unwrap(&g_world);
  g_initialized = false;
  pipert_mpi_comm_finalize(ctx);
}

int pipert_comm_initialized(void) { return g_initialized ? 1 : 0; }

pipert_comm *pipert_comm_world(pipert_context *) {
  requireInit("pipert_comm_world");
  return &g_world;
}

int pipert_comm_rank(const pipert_comm *comm) { return pipert_mpi_comm_rank(comm->mpi); }
int pipert_comm_size(const pipert_comm *comm) { return pipert_mpi_comm_size(comm->mpi); }
int pipert_world_rank(void) { return pipert_mpi_world_rank(); }
int pipert_comm_max_tag(const pipert_comm *comm) { return pipert_mpi_comm_max_tag(comm->mpi); }
int pipert_comm_world_rank_of(const pipert_comm *comm, int rank) {
  return pipert_mpi_comm_world_rank_of(comm->mpi, rank);
}

void pipert_comm_set_timeout(double seconds) { pipert_mpi_comm_set_timeout(seconds); }
double pipert_comm_timeout(void) { return pipert_mpi_comm_timeout(); }

// isend, irecv, send, recv, wait, wait_all, allreduce_f32.
#include "../core/transport_entry_points.inc"

int pipert_test(pipert_context *ctx, pipert_request *req) {
  if (!req)
    return 1;
  launchPending();
  return testRequest(ctx, req) ? 1 : 0;
}

pipert_request *pipert_iallreduce_f32(pipert_context *ctx, pipert_comm *comm, float *buf,
                                      int64_t count, pipert_collective_op op) {
  requireInit("allreduce");
  if (op != PIPERT_COLLECTIVE_SUM && op != PIPERT_COLLECTIVE_MEAN)
    pipert_fail("allreduce: unknown reduction %d", static_cast<int>(op));
  pipert_request *r =
      newCollective(ctx, comm, Kind::Allreduce, buf, byteCount(count, PIPERT_F32, "allreduce"));
  if (count > 0) {
    PIPERT_NCCL_CHECK(ncclAllReduce(buf, buf, size_t(count), ncclFloat32,
                                    op == PIPERT_COLLECTIVE_MEAN ? ncclAvg : ncclSum, comm->nccl,
                                    comm->stream),
                      describe(r).c_str());
    settle(comm, describe(r).c_str());
  }
  recordDone(r);
  return r;
}

void pipert_broadcast(pipert_context *ctx, pipert_comm *comm, void *buf, int64_t count,
                      pipert_dtype dtype, int root) {
  requireInit("broadcast");
  checkPeer(comm, root, "broadcast");
  pipert_request *r =
      newCollective(ctx, comm, Kind::Broadcast, buf, byteCount(count, dtype, "broadcast"));
  r->peer = root;
  r->peerWorld = pipert_mpi_comm_world_rank_of(comm->mpi, root);
  if (count > 0) {
    PIPERT_NCCL_CHECK(ncclBroadcast(buf, buf, size_t(count), ncclType(dtype), root, comm->nccl,
                                    comm->stream),
                      describe(r).c_str());
    settle(comm, describe(r).c_str());
  }
  recordDone(r);
  waitRequests(ctx, &r, 1);
}

void pipert_barrier(pipert_context *ctx, pipert_comm *comm) {
  requireInit("barrier");
  launchPending();
  pipert_mpi_barrier(ctx, comm->mpi);
}

pipert_comm *pipert_comm_split(pipert_context *ctx, pipert_comm *comm, int color, int key) {
  requireInit("pipert_comm_split");
  return wrap(ctx, pipert_mpi_comm_split(ctx, comm->mpi, color, key), false);
}

pipert_comm *pipert_comm_stage_group(pipert_context *ctx, int pipelines, int stages) {
  requireInit("pipert_comm_stage_group");
  return wrap(ctx, pipert_mpi_comm_stage_group(ctx, pipelines, stages), false);
}

pipert_comm *pipert_comm_pipeline_group(pipert_context *ctx, int pipelines, int stages) {
  requireInit("pipert_comm_pipeline_group");
  return wrap(ctx, pipert_mpi_comm_pipeline_group(ctx, pipelines, stages), false);
}

void pipert_comm_destroy(pipert_context *ctx, pipert_comm *comm) {
  if (!comm || comm == &g_world || comm->is_world)
    return;
  launchPending();
  unwrap(comm);
  pipert_mpi_comm_destroy(ctx, comm->mpi);
  delete comm;
}

} // extern "C"
