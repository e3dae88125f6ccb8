//===- mpi_comm.cpp - the MPI transport of the CPU backend -----------------===//
//
// Every wait polls MPI_Test with a short spin, then sleeps with an exponential
// backoff capped at 0.5 ms (ranks may share cores: spinning would slow the
// peer being waited for), so that a peer that never answers is reported after
// the timeout instead of blocking in MPI for ever. Collectives use the MPI-3
// non-blocking forms for the same reason.
//
// Messages over 1 GiB are split into several MPI messages with the same tag:
// MPI matches messages between one pair with one tag in order, and MPI counts
// are ints.
//===----------------------------------------------------------------------===//
#include "pipert/pipert_comm.h"
#include "pipert/pipert_trace.h"
#include "../../core/transport_util.h"

#include <mpi.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

struct pipert_comm {
  MPI_Comm comm = MPI_COMM_NULL;
  int rank = 0;
  int size = 1;
  bool owned = true;
  int maxTag = 32767;
  std::vector<int> worldRanks; // world rank of each rank of comm
};

namespace {

using pipert::transport::Kind;
using pipert::transport::byteCount;

} // namespace

struct pipert_request {
  Kind kind = Kind::Send;
  std::vector<MPI_Request> mpi;
  int64_t bytes = 0;
  int peer = -1;      // rank in comm (send/recv) or root (broadcast)
  int peerWorld = -1; // world rank of the peer
  int tag = -1;
  int commSize = 1;
  // Allreduce mean: divide after completion.
  float *meanBuf = nullptr;
  int64_t meanCount = 0;
  // Recv: the buffer chunks' expected byte sizes, to check the message sizes.
  std::vector<int> expectChunkBytes;
  double postUs = 0;
  bool done = false;
};

namespace {

constexpr int64_t kChunkBytes = int64_t(1) << 30;

bool g_initialized = false;
bool g_weInitializedMpi = false;
double g_timeoutS = 300.0;
pipert_comm g_world;
int g_worldRank = 0;

void abortHook(int code) {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized)
    MPI_Abort(MPI_COMM_WORLD, code ? code : 1);
}

void check(int rc, const char *what) {
  if (rc == MPI_SUCCESS)
    return;
  char msg[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, msg, &len);
  pipert_fail("%s failed: %.*s", what, len, msg);
}

void requireInit(const char *what) {
  if (!g_initialized)
    pipert_fail("%s called before pipert_comm_init", what);
}

void checkPeer(const pipert_comm *c, int peer, const char *what) {
  if (peer < 0 || peer >= c->size)
    pipert_fail("%s: peer rank %d out of range (communicator of %d ranks)", what, peer,
                c->size);
}

void checkTag(const pipert_comm *c, int tag, const char *what) {
  if (tag < 0 || tag > c->maxTag)
    pipert_fail("%s: tag %d out of range 0..%d", what, tag, c->maxTag);
}

// Fills the cached properties of a communicator.
void describeComm(pipert_comm *c) {
  MPI_Comm_rank(c->comm, &c->rank);
  MPI_Comm_size(c->comm, &c->size);
  void *value = nullptr;
  int flag = 0;
  MPI_Comm_get_attr(c->comm, MPI_TAG_UB, &value, &flag);
  c->maxTag = flag ? *static_cast<int *>(value) : 32767;
  MPI_Group g, world;
  MPI_Comm_group(c->comm, &g);
  MPI_Comm_group(MPI_COMM_WORLD, &world);
  std::vector<int> ranks(static_cast<size_t>(c->size));
  for (int i = 0; i < c->size; ++i)
    ranks[i] = i;
  c->worldRanks.assign(static_cast<size_t>(c->size), MPI_UNDEFINED);
  MPI_Group_translate_ranks(g, c->size, ranks.data(), world, c->worldRanks.data());
  MPI_Group_free(&g);
  MPI_Group_free(&world);
}

MPI_Datatype mpiType(pipert_dtype t) {
  switch (t) {
  case PIPERT_F32: return MPI_FLOAT;
  case PIPERT_F64: return MPI_DOUBLE;
  case PIPERT_I32: return MPI_INT32_T;
  case PIPERT_I64: return MPI_INT64_T;
  default: return MPI_BYTE;
  }
}

int worldRankOf(const pipert_comm *c, int rank) { return c->worldRanks[static_cast<size_t>(rank)]; }

std::string describe(const pipert_request *r) {
  return pipert::transport::describe(r->kind, r->bytes, r->peerWorld, r->tag, r->commSize);
}

// Tests the request's MPI requests; returns true when all have completed and
// checks the completed receives' sizes.
bool testRequest(pipert_request *r) {
  if (r->done)
    return true;
  int flag = 0;
  std::vector<MPI_Status> st(r->mpi.size());
  int rc = MPI_Testall(static_cast<int>(r->mpi.size()), r->mpi.data(), &flag, st.data());
  if (rc == MPI_ERR_IN_STATUS) {
    for (const MPI_Status &s : st) {
      if (s.MPI_ERROR == MPI_ERR_TRUNCATE)
        pipert_fail("%s: the message is larger than that", describe(r).c_str());
      if (s.MPI_ERROR != MPI_SUCCESS && s.MPI_ERROR != MPI_ERR_PENDING)
        check(s.MPI_ERROR, describe(r).c_str());
    }
  }
  check(rc, describe(r).c_str());
  if (!flag)
    return false;
  r->done = true;
  if (r->kind == Kind::Recv) {
    for (size_t i = 0; i < st.size(); ++i) {
      int got = 0;
      MPI_Get_count(&st[i], MPI_BYTE, &got);
      if (got != r->expectChunkBytes[i])
        pipert_fail("%s: the message has %lld bytes", describe(r).c_str(),
                    static_cast<long long>(got) + static_cast<long long>(i) * kChunkBytes);
    }
  }
  if (r->meanBuf && r->commSize > 1) {
    const float inv = 1.0f / static_cast<float>(r->commSize);
    for (int64_t i = 0; i < r->meanCount; ++i)
      r->meanBuf[i] *= inv;
  }
  return true;
}

// Polls until every request completes or the timeout passes, then frees them.
void waitRequests(pipert_context *ctx, pipert_request **reqs, int n) {
  pipert::transport::waitAndRelease(ctx, reqs, n, g_timeoutS, testRequest, describe,
                                    [](pipert_request *r) { delete r; });
}

pipert_request *postP2P(pipert_context *ctx, pipert_comm *comm, void *buf, int64_t count,
                        pipert_dtype dtype, int peer, int tag, Kind kind) {
  const char *what = kind == Kind::Send ? "send" : "recv";
  requireInit(what);
  if (!comm)
    pipert_fail("%s: null communicator", what);
  checkPeer(comm, peer, what);
  checkTag(comm, tag, what);
  auto *r = new pipert_request();
  r->kind = kind;
  r->bytes = byteCount(count, dtype, what);
  r->peer = peer;
  r->peerWorld = worldRankOf(comm, peer);
  r->tag = tag;
  r->commSize = comm->size;
  r->postUs = pipert_trace_begin(ctx);
  if (r->bytes > 0 && !buf)
    pipert_fail("%s: null buffer for %lld bytes", describe(r).c_str(),
                static_cast<long long>(r->bytes));
  char *p = static_cast<char *>(buf);
  int64_t off = 0;
  do {
    const int chunk = static_cast<int>(std::min(kChunkBytes, r->bytes - off));
    MPI_Request mr;
    if (kind == Kind::Send)
      check(MPI_Isend(p + off, chunk, MPI_BYTE, peer, tag, comm->comm, &mr),
            describe(r).c_str());
    else
      check(MPI_Irecv(p + off, chunk, MPI_BYTE, peer, tag, comm->comm, &mr),
            describe(r).c_str());
    r->mpi.push_back(mr);
    r->expectChunkBytes.push_back(chunk);
    off += chunk;
  } while (off < r->bytes);
  return r;
}

pipert_comm *wrap(MPI_Comm c) {
  if (c == MPI_COMM_NULL)
    pipert_fail("communicator split produced no group for rank %d", g_worldRank);
  MPI_Comm_set_errhandler(c, MPI_ERRORS_RETURN);
  auto *pc = new pipert_comm();
  pc->comm = c;
  describeComm(pc);
  return pc;
}

void checkLayout(int pipelines, int stages, const char *what) {
  if (pipelines <= 0 || stages <= 0 || pipelines * stages != g_world.size)
    pipert_fail("%s: layout of %d pipelines x %d stages does not match %d ranks", what,
                pipelines, stages, g_world.size);
}

} // namespace

extern "C" {

void pipert_comm_init(pipert_context *, int *argc, char ***argv) {
  if (g_initialized)
    pipert_fail("pipert_comm_init called twice");
  int already = 0;
  MPI_Initialized(&already);
  if (!already) {
    int provided = 0;
    check(MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided), "MPI_Init_thread");
    g_weInitializedMpi = true;
  }
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  g_world.comm = MPI_COMM_WORLD;
  g_world.owned = false;
  describeComm(&g_world);
  g_worldRank = g_world.rank;
  if (const char *env = std::getenv("PIPERT_TIMEOUT_S")) {
    char *end = nullptr;
    double v = std::strtod(env, &end);
    if (end == env || *end != '\0' || !(v > 0))
      pipert_fail("PIPERT_TIMEOUT_S='%s' is not a positive number of seconds", env);
    g_timeoutS = v;
  }
  pipert_set_abort_hook(abortHook);
  g_initialized = true;
}

void pipert_comm_finalize(pipert_context *) {
  if (!g_initialized)
    return;
  pipert_set_abort_hook(nullptr);
  g_initialized = false;
  if (g_weInitializedMpi) {
    MPI_Finalize();
    g_weInitializedMpi = false;
  }
}

int pipert_comm_initialized(void) { return g_initialized ? 1 : 0; }

pipert_comm *pipert_comm_world(pipert_context *) {
  requireInit("pipert_comm_world");
  return &g_world;
}

int pipert_comm_rank(const pipert_comm *comm) { return comm->rank; }
int pipert_comm_size(const pipert_comm *comm) { return comm->size; }
int pipert_world_rank(void) { return g_worldRank; }
int pipert_comm_max_tag(const pipert_comm *comm) { return comm->maxTag; }
int pipert_comm_world_rank_of(const pipert_comm *comm, int rank) {
  checkPeer(comm, rank, "pipert_comm_world_rank_of");
  return worldRankOf(comm, rank);
}

void pipert_comm_set_timeout(double seconds) {
  if (!(seconds > 0))
    pipert_fail("pipert_comm_set_timeout: timeout must be positive, got %g", seconds);
  g_timeoutS = seconds;
}
double pipert_comm_timeout(void) { return g_timeoutS; }

// isend, irecv, send, recv, wait, wait_all, allreduce_f32.
#include "../../core/transport_entry_points.inc"

int pipert_test(pipert_context *, pipert_request *req) {
  return req ? (testRequest(req) ? 1 : 0) : 1;
}

pipert_request *pipert_iallreduce_f32(pipert_context *ctx, pipert_comm *comm, float *buf,
                                      int64_t count, pipert_collective_op op) {
  requireInit("allreduce");
  if (op != PIPERT_COLLECTIVE_SUM && op != PIPERT_COLLECTIVE_MEAN)
    pipert_fail("allreduce: unknown reduction %d", static_cast<int>(op));
  auto *r = new pipert_request();
  r->kind = Kind::Allreduce;
  r->bytes = byteCount(count, PIPERT_F32, "allreduce");
  r->commSize = comm->size;
  r->postUs = pipert_trace_begin(ctx);
  if (op == PIPERT_COLLECTIVE_MEAN) {
    r->meanBuf = buf;
    r->meanCount = count;
  }
  const int64_t chunkElems = kChunkBytes / 4;
  int64_t off = 0;
  do {
    const int n = static_cast<int>(std::min(chunkElems, count - off));
    MPI_Request mr;
    check(MPI_Iallreduce(MPI_IN_PLACE, buf + off, n, MPI_FLOAT, MPI_SUM, comm->comm, &mr),
          describe(r).c_str());
    r->mpi.push_back(mr);
    off += n;
  } while (off < count);
  return r;
}

void pipert_broadcast(pipert_context *ctx, pipert_comm *comm, void *buf, int64_t count,
                      pipert_dtype dtype, int root) {
  requireInit("broadcast");
  checkPeer(comm, root, "broadcast");
  auto *r = new pipert_request();
  r->kind = Kind::Broadcast;
  r->bytes = byteCount(count, dtype, "broadcast");
  r->peer = root;
  r->peerWorld = worldRankOf(comm, root);
  r->commSize = comm->size;
  r->postUs = pipert_trace_begin(ctx);
  char *p = static_cast<char *>(buf);
  int64_t off = 0;
  do {
    const int chunk = static_cast<int>(std::min(kChunkBytes, r->bytes - off));
    MPI_Request mr;
    check(MPI_Ibcast(p + off, chunk, MPI_BYTE, root, comm->comm, &mr), describe(r).c_str());
    r->mpi.push_back(mr);
    off += chunk;
  } while (off < r->bytes);
  waitRequests(ctx, &r, 1);
}

void pipert_barrier(pipert_context *ctx, pipert_comm *comm) {
  requireInit("barrier");
  auto *r = new pipert_request();
  r->kind = Kind::Barrier;
  r->commSize = comm->size;
  r->postUs = pipert_trace_begin(ctx);
  MPI_Request mr;
  check(MPI_Ibarrier(comm->comm, &mr), describe(r).c_str());
  r->mpi.push_back(mr);
  waitRequests(ctx, &r, 1);
}

pipert_comm *pipert_comm_split(pipert_context *, pipert_comm *comm, int color, int key) {
  requireInit("pipert_comm_split");
  if (color < 0)
    pipert_fail("pipert_comm_split: color must be >= 0, got %d", color);
  MPI_Comm out = MPI_COMM_NULL;
  check(MPI_Comm_split(comm->comm, color, key, &out), "MPI_Comm_split");
  return wrap(out);
}

pipert_comm *pipert_comm_stage_group(pipert_context *ctx, int pipelines, int stages) {
  requireInit("pipert_comm_stage_group");
  checkLayout(pipelines, stages, "pipert_comm_stage_group");
  const int stage = g_world.rank % stages, pipeline = g_world.rank / stages;
  return pipert_comm_split(ctx, &g_world, stage, pipeline);
}

pipert_comm *pipert_comm_pipeline_group(pipert_context *ctx, int pipelines, int stages) {
  requireInit("pipert_comm_pipeline_group");
  checkLayout(pipelines, stages, "pipert_comm_pipeline_group");
  const int stage = g_world.rank % stages, pipeline = g_world.rank / stages;
  return pipert_comm_split(ctx, &g_world, pipeline, stage);
}

void pipert_comm_destroy(pipert_context *, pipert_comm *comm) {
  if (!comm || !comm->owned || comm == &g_world)
    return;
  MPI_Comm_free(&comm->comm);
  delete comm;
}

} // extern "C"
