//===- nccl_comm.cpp - the NCCL transport of the CUDA backend --------------===//
//
// pipert_comm.h on device buffers: libpipert_cuda's pipert::Transport. An
// MpiTransport of its own (the CPU backend's transport, runtime/cpu/comm)
// starts the job, forms the groups, runs barriers and broadcasts each group's
// ncclUniqueId; NCCL moves the data, on one stream per communicator ordered
// after the compute stream.
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
#include "../cpu/comm/mpi_transport.h"

#include <nccl.h>

#include <algorithm>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

using namespace pipert::cuda;

namespace pipert {
namespace {

using transport::Kind;
using transport::byteCount;
using transport::formatSeconds;

struct NcclComm : pipert_comm {
  pipert_comm *mpi = nullptr; // the MPI transport's communicator of the same ranks
  ncclComm_t nccl = nullptr;
  cudaStream_t stream = nullptr;
  bool is_world = false;
};

struct NcclRequest : pipert_request {
  NcclComm *comm = nullptr;
  void *buf = nullptr;
  bool launched = false;
  cudaEvent_t event = nullptr;
  // Size check over MPI (send/recv): the sender's byte count.
  int64_t header = 0;
  pipert_request *headerReq = nullptr;
  bool headerChecked = false;
};

NcclComm *ncclComm(pipert_comm *c) { return static_cast<NcclComm *>(c); }
const NcclComm *ncclComm(const pipert_comm *c) { return static_cast<const NcclComm *>(c); }
NcclRequest *ncclRequest(pipert_request *r) { return static_cast<NcclRequest *>(r); }

#define PIPERT_NCCL_CHECK(call, what)                                                            \
  do {                                                                                           \
    ncclResult_t pipert_nccl_status_ = (call);                                                   \
    if (pipert_nccl_status_ != ncclSuccess && pipert_nccl_status_ != ncclInProgress)             \
      pipert_fail("%s: %s failed: %s (%s)", what, #call, ncclGetErrorString(pipert_nccl_status_), \
                  ncclGetLastError(nullptr));                                                    \
  } while (0)

std::string describe(const pipert_request *r) {
  return transport::describe(r->kind, r->bytes, r->peerWorld, r->tag, r->commSize);
}

void recordDone(NcclRequest *r) {
  PIPERT_CUDA_CHECK(cudaEventCreateWithFlags(&r->event, cudaEventDisableTiming));
  PIPERT_CUDA_CHECK(cudaEventRecord(r->event, r->comm->stream));
  r->launched = true;
}

void freeRequest(pipert_request *req) {
  NcclRequest *r = ncclRequest(req);
  if (r->event)
    cudaEventDestroy(r->event);
  delete r;
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

class NcclTransport final : public Transport {
public:
  void init(pipert_context *ctx, int *argc, char ***argv) override;
  void finalize(pipert_context *ctx) override;
  bool initialized() const override { return initialized_; }

  pipert_comm *world() override { return &world_; }
  pipert_comm *split(pipert_context *ctx, pipert_comm *comm, int color, int key) override {
    return wrap(ctx, mpi_.split(ctx, ncclComm(comm)->mpi, color, key), false);
  }
  void destroy(pipert_context *ctx, pipert_comm *comm) override;
  int rank(const pipert_comm *comm) const override { return mpi_.rank(ncclComm(comm)->mpi); }
  int size(const pipert_comm *comm) const override { return mpi_.size(ncclComm(comm)->mpi); }
  int worldRank() const override { return mpi_.worldRank(); }
  int worldRankOf(const pipert_comm *comm, int rank) const override {
    return mpi_.worldRankOf(ncclComm(comm)->mpi, rank);
  }
  int maxTag(const pipert_comm *comm) const override { return mpi_.maxTag(ncclComm(comm)->mpi); }

  void setTimeout(double seconds) override { mpi_.setTimeout(seconds); }
  double timeout() const override { return mpi_.timeout(); }
  int64_t ringBytes() const override { return mpi_.ringBytes(); }

  pipert_request *post(pipert_context *ctx, pipert_comm *comm, void *buf, int64_t count,
                       pipert_dtype dtype, int peer, int tag, Kind kind) override;
  bool test(pipert_context *ctx, pipert_request *req) override {
    launchPending();
    return testRequest(ctx, ncclRequest(req));
  }
  void wait(pipert_context *ctx, pipert_request **reqs, int n) override;
  pipert_request *iallreduce(pipert_context *ctx, pipert_comm *comm, float *buf, int64_t count,
                             pipert_collective_op op) override;
  void broadcast(pipert_context *ctx, pipert_comm *comm, void *buf, int64_t count,
                 pipert_dtype dtype, int root) override;
  void barrier(pipert_context *ctx, pipert_comm *comm) override {
    launchPending();
    mpi_.barrier(ctx, ncclComm(comm)->mpi);
  }

private:
  void settle(NcclComm *c, const char *what);
  void orderAfterCompute(const std::vector<NcclComm *> &comms);
  void launchPending();
  bool testHeader(pipert_context *ctx, NcclRequest *r);
  bool testRequest(pipert_context *ctx, NcclRequest *r);
  NcclComm *wrap(pipert_context *ctx, pipert_comm *mpi, bool is_world);
  void unwrap(NcclComm *c);
  NcclRequest *newCollective(pipert_context *ctx, NcclComm *comm, Kind kind, void *buf,
                             int64_t bytes);

  MpiTransport mpi_;
  bool initialized_ = false;
  NcclComm world_;
  Context *ctx_ = nullptr;
  std::vector<NcclRequest *> pending_; // posted send/recv not launched yet
};

// Waits (with the transport's timeout) until the communicator has finished
// the non-blocking NCCL call just made; fails on an NCCL error.
void NcclTransport::settle(NcclComm *c, const char *what) {
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
    if (waited >= timeout())
      pipert_fail("%s: NCCL did not complete within %s", what, formatSeconds(timeout()).c_str());
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

// A CUDA event recorded on the compute stream, for a comm stream to wait on:
// transfers start after the kernels queued before them.
void NcclTransport::orderAfterCompute(const std::vector<NcclComm *> &comms) {
  cudaEvent_t ready;
  PIPERT_CUDA_CHECK(cudaEventCreateWithFlags(&ready, cudaEventDisableTiming));
  PIPERT_CUDA_CHECK(cudaEventRecord(ready, ctx_->stream));
  for (NcclComm *c : comms)
    PIPERT_CUDA_CHECK(cudaStreamWaitEvent(c->stream, ready, 0));
  PIPERT_CUDA_CHECK(cudaEventDestroy(ready));
}

// Launches every queued send/recv in one NCCL group.
void NcclTransport::launchPending() {
  if (pending_.empty())
    return;
  std::vector<NcclComm *> comms;
  for (NcclRequest *r : pending_)
    if (std::find(comms.begin(), comms.end(), r->comm) == comms.end())
      comms.push_back(r->comm);
  orderAfterCompute(comms);
  const std::string what = describe(pending_.front());
  PIPERT_NCCL_CHECK(ncclGroupStart(), what.c_str());
  for (NcclRequest *r : pending_) {
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
  for (NcclComm *c : comms)
    settle(c, what.c_str());
  for (NcclRequest *r : pending_)
    recordDone(r);
  pending_.clear();
}

// Checks the sender's byte count of a completed header against the recv.
bool NcclTransport::testHeader(pipert_context *ctx, NcclRequest *r) {
  if (!r->headerReq || r->headerChecked)
    return true;
  if (!mpi_.test(ctx, r->headerReq))
    return false;
  mpi_.wait(ctx, &r->headerReq, 1); // clears headerReq
  r->headerChecked = true;
  if (r->kind == Kind::Recv && r->header != r->bytes)
    pipert_fail("%s: the message has %lld bytes", describe(r).c_str(),
                static_cast<long long>(r->header));
  return true;
}

bool NcclTransport::testRequest(pipert_context *ctx, NcclRequest *r) {
  if (r->done)
    return true;
  // The size headers go through the MPI transport's shared-memory rings:
  // every poll advances them, as the MPI transport's own waits do.
  mpi_.progressRings();
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

// Polls until every request completes or the timeout passes, then frees them.
void NcclTransport::wait(pipert_context *ctx, pipert_request **reqs, int n) {
  launchPending();
  transport::waitAndRelease(
      ctx, reqs, n, timeout(),
      [this, ctx](pipert_request *r) { return testRequest(ctx, ncclRequest(r)); }, describe,
      freeRequest);
}

pipert_request *NcclTransport::post(pipert_context *ctx, pipert_comm *comm, void *buf,
                                    int64_t count, pipert_dtype dtype, int peer, int tag,
                                    Kind kind) {
  const char *what = kind == Kind::Send ? "send" : "recv";
  NcclComm *c = ncclComm(comm);
  auto *r = new NcclRequest();
  r->kind = kind;
  r->comm = c;
  r->buf = buf;
  r->bytes = byteCount(count, dtype, what);
  r->peer = peer;
  r->peerWorld = mpi_.worldRankOf(c->mpi, peer);
  r->tag = tag;
  r->commSize = mpi_.size(c->mpi);
  r->postUs = pipert_trace_begin(ctx);
  if (r->bytes > 0 && !buf)
    pipert_fail("%s: null buffer for %lld bytes", describe(r).c_str(),
                static_cast<long long>(r->bytes));
  // The MPI transport checks the tag's range when posting the header.
  if (kind == Kind::Send)
    r->header = r->bytes;
  r->headerReq = mpi_.post(ctx, c->mpi, &r->header, 1, PIPERT_I64, peer, tag, kind);
  pending_.push_back(r);
  return r;
}

// An NCCL communicator (non-blocking) over the ranks of an MPI one.
NcclComm *NcclTransport::wrap(pipert_context *ctx, pipert_comm *mpi, bool is_world) {
  NcclComm *c = is_world ? &world_ : new NcclComm();
  c->mpi = mpi;
  c->is_world = is_world;
  const int rank = mpi_.rank(mpi), size = mpi_.size(mpi);
  ncclUniqueId id;
  if (rank == 0)
    PIPERT_NCCL_CHECK(ncclGetUniqueId(&id), "NCCL start-up");
  mpi_.broadcast(ctx, mpi, &id, int64_t(sizeof id), PIPERT_U8, 0);
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  PIPERT_NCCL_CHECK(ncclCommInitRankConfig(&c->nccl, size, id, rank, &config), "NCCL start-up");
  settle(c, "NCCL start-up (ncclCommInitRankConfig)");
  PIPERT_CUDA_CHECK(cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking));
  return c;
}

void NcclTransport::unwrap(NcclComm *c) {
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
NcclRequest *NcclTransport::newCollective(pipert_context *ctx, NcclComm *comm, Kind kind,
                                          void *buf, int64_t bytes) {
  launchPending(); // keep posting order: queued point-to-point first
  auto *r = new NcclRequest();
  r->kind = kind;
  r->comm = comm;
  r->buf = buf;
  r->bytes = bytes;
  r->commSize = mpi_.size(comm->mpi);
  r->postUs = pipert_trace_begin(ctx);
  r->headerChecked = true;
  orderAfterCompute({comm});
  return r;
}

void NcclTransport::init(pipert_context *ctx, int *argc, char ***argv) {
  if (initialized_)
    pipert_fail("pipert_comm_init called twice");
  if (!ctx)
    pipert_fail("pipert_comm_init: the CUDA transport needs the context (its device and stream)");
  ctx_ = cx(ctx);
  PIPERT_CUDA_CHECK(cudaSetDevice(ctx_->device));
  mpi_.init(ctx, argc, argv);
  wrap(ctx, mpi_.world(), true);
  initialized_ = true;
}

void NcclTransport::finalize(pipert_context *ctx) {
  if (!initialized_)
    return;
  launchPending();
  unwrap(&world_);
  initialized_ = false;
  mpi_.finalize(ctx);
}

pipert_request *NcclTransport::iallreduce(pipert_context *ctx, pipert_comm *comm, float *buf,
                                          int64_t count, pipert_collective_op op) {
  NcclComm *c = ncclComm(comm);
  NcclRequest *r =
      newCollective(ctx, c, Kind::Allreduce, buf, byteCount(count, PIPERT_F32, "allreduce"));
  if (count > 0) {
    PIPERT_NCCL_CHECK(ncclAllReduce(buf, buf, size_t(count), ncclFloat32,
                                    op == PIPERT_COLLECTIVE_MEAN ? ncclAvg : ncclSum, c->nccl,
                                    c->stream),
                      describe(r).c_str());
    settle(c, describe(r).c_str());
  }
  recordDone(r);
  return r;
}

void NcclTransport::broadcast(pipert_context *ctx, pipert_comm *comm, void *buf, int64_t count,
                              pipert_dtype dtype, int root) {
  NcclComm *c = ncclComm(comm);
  NcclRequest *r =
      newCollective(ctx, c, Kind::Broadcast, buf, byteCount(count, dtype, "broadcast"));
  r->peer = root;
  r->peerWorld = mpi_.worldRankOf(c->mpi, root);
  if (count > 0) {
    PIPERT_NCCL_CHECK(ncclBroadcast(buf, buf, size_t(count), ncclType(dtype), root, c->nccl,
                                    c->stream),
                      describe(r).c_str());
    settle(c, describe(r).c_str());
  }
  recordDone(r);
  pipert_request *req = r;
  wait(ctx, &req, 1);
}

void NcclTransport::destroy(pipert_context *ctx, pipert_comm *comm) {
  NcclComm *c = ncclComm(comm);
  if (c == &world_ || c->is_world)
    return;
  launchPending();
  unwrap(c);
  mpi_.destroy(ctx, c->mpi);
  delete c;
}

} // namespace

Transport &activeTransport() {
  static NcclTransport transport;
  return transport;
}

} // namespace pipert
