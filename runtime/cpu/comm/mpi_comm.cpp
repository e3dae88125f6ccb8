//===- mpi_comm.cpp - the MPI transport (pipert::MpiTransport) ------------===//
//
// The CPU backend's transport, and the NCCL transport's bootstrap and control
// (mpi_transport.h).
//
// Every wait polls MPI_Test with a short spin, then sleeps with an exponential
// backoff capped at 0.5 ms (ranks may share cores: spinning would slow the
// peer being waited for), so that a peer that never answers is reported after
// the timeout instead of blocking in MPI for ever. Collectives use the MPI-3
// non-blocking forms for the same reason.
//
// pipert_send is buffered where Open MPI's shared memory uses single copy
// (a receiver then pulls a message without its sender; with
// btl_vader_single_copy_mechanism none, sends wait for their receiver as
// before unless PIPERT_SEND_BUFFER says otherwise): the message is copied into a staging buffer (kept
// for reuse) and sent with MPI_Isend; the call returns at once, and the send
// completes inside the rank's later transport calls (every MPI_Test of a
// wait progresses it). So a rank never idles until its peer posts the
// receive (Open MPI's shared-memory transport sends a message over 4 KB by
// rendezvous). At most PIPERT_SEND_BUFFER bytes (default 64 MiB) are staged:
// a send that would pass it first waits for the oldest ones, and a message
// over 1/16 of it (4 MiB), or any with PIPERT_SEND_BUFFER=0, waits for its
// own completion as before; so does one of at most 256 bytes, which MPI sends
// inline. A wait polls without sleeping for as long as
// its own and the buffered bytes could take (transport_util.h): a message
// past Open MPI's eager size moves only while its sender is inside MPI.
// Finalize completes them all. Why the verified schedules stay
// deadlock-free: docs/design-notes.md, "Buffered sends".
//
// Point-to-point messages of at most PIPERT_SHM_RING/4 bytes (256 KiB) between
// ranks of one machine bypass MPI: they go through the shared-memory rings of
// shm_link.h, mapped at init as an MPI-3 shared window (initShm). A send is
// complete once copied into the peer's ring; every test and wait progresses
// the rings (writes the queued sends that now fit, drains the inbound ones).
// Both sides choose the path by the message's size, so a receive and its
// message meet; PIPERT_SHM=0 keeps everything on MPI.
//
// Messages over 1 GiB are split into several MPI messages with the same tag:
// MPI matches messages between one pair with one tag in order, and MPI counts
// are ints.
//===----------------------------------------------------------------------===//
#include "mpi_transport.h"

#include <mpi.h>
#include <sys/statvfs.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace pipert {

struct MpiComm : pipert_comm {
  MPI_Comm comm = MPI_COMM_NULL;
  int rank = 0;
  int size = 1;
  bool owned = true;
  int maxTag = 32767;
  // Names the communicator on the shared-memory rings: 0 for the world, and
  // the same on every member of a split (MpiTransport::split).
  int id = 0;
  std::vector<int> worldRanks; // world rank of each rank of comm
};

namespace {

using transport::Kind;
using transport::byteCount;

struct MpiRequest : pipert_request {
  std::vector<MPI_Request> mpi;
  // Allreduce mean: divide after completion.
  float *meanBuf = nullptr;
  int64_t meanCount = 0;
  // Recv: the buffer chunks' expected byte sizes, to check the message sizes.
  std::vector<int> expectChunkBytes;
  // Counted in MpiTransport::liveMpi_ (an MPI transfer that may need this
  // rank's progress while it waits for something else).
  bool counted = false;
  // A transfer on the shared-memory rings (shm_link.h) instead of MPI.
  bool onShm = false;
  shm::Op op;
  // A scattered receive's parts (op.sbufs/op.sbytes point here).
  std::vector<void *> scatterBufs;
  std::vector<int64_t> scatterBytes;

  // Back to a new request's state, the vectors keeping their capacity.
  void reset() {
    kind = Kind::Send;
    bytes = 0;
    peer = peerWorld = tag = -1;
    commSize = 1;
    postUs = 0;
    done = false;
    mpi.clear();
    meanBuf = nullptr;
    meanCount = 0;
    expectChunkBytes.clear();
    counted = onShm = false;
    op = shm::Op{};
    scatterBufs.clear();
    scatterBytes.clear();
  }
};

// Requests are recycled: a 1F1B step posts and frees a few every
// micro-batch (a receive's new and delete, its vectors' allocations).
std::vector<MpiRequest *> &requestPool() {
  static std::vector<MpiRequest *> pool;
  return pool;
}

MpiRequest *acquireRequest() {
  std::vector<MpiRequest *> &pool = requestPool();
  if (pool.empty())
    return new MpiRequest();
  MpiRequest *r = pool.back();
  pool.pop_back();
  return r;
}

void recycleRequest(MpiRequest *r) {
  std::vector<MpiRequest *> &pool = requestPool();
  if (pool.size() >= 64) {
    delete r;
    return;
  }
  r->reset();
  pool.push_back(r);
}

void freeRequestPool() {
  for (MpiRequest *r : requestPool())
    delete r;
  requestPool().clear();
}

MpiComm *mpiComm(pipert_comm *c) { return static_cast<MpiComm *>(c); }
const MpiComm *mpiComm(const pipert_comm *c) { return static_cast<const MpiComm *>(c); }
MpiRequest *mpiRequest(pipert_request *r) { return static_cast<MpiRequest *>(r); }

constexpr int64_t kChunkBytes = int64_t(1) << 30;
// Messages up to this size are not staged: Open MPI's shared-memory
// transport sends them inline (btl_vader_max_inline_send, 256 bytes), so
// the send completes at once without the receiver, and staging made a
// 4-byte ping-pong 20% slower. Larger eager messages (up to the eager limit
// pipe-run sets, 32 KB) go out in a fragment whose send completes only when
// the receiver's progress returns it: a 2 KB activation's send waited 1.75
// us on average (the example transformer at M = 16, traced); staged, the
// step took 0.335 ms against 0.342 (best of 8 alternating runs).
constexpr int64_t kEagerBytes = 256;

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

// check() for a request: its description (a formatted string) is made only
// when the call failed, not on every post and poll.
void checkRequest(int rc, const pipert_request *r);

void checkTag(const MpiComm *c, int tag, const char *what) {
  if (tag < 0 || tag > c->maxTag)
    pipert_fail("%s: tag %d out of range 0..%d", what, tag, c->maxTag);
}

// Fills the cached properties of a communicator.
void describeComm(MpiComm *c) {
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

int worldRankOf(const MpiComm *c, int rank) { return c->worldRanks[static_cast<size_t>(rank)]; }

std::string describe(const pipert_request *r) {
  return transport::describe(r->kind, r->bytes, r->peerWorld, r->tag, r->commSize);
}

void checkRequest(int rc, const pipert_request *r) {
  if (rc != MPI_SUCCESS)
    check(rc, describe(r).c_str());
}

// Tests the request's MPI requests; returns true when all have completed and
// checks the completed receives' sizes.
bool testMpi(pipert_request *req) {
  MpiRequest *r = mpiRequest(req);
  if (r->done)
    return true;
  int flag = 0;
  // Statuses on the stack for the usual one-chunk message: this runs on
  // every poll of a wait.
  const size_t n = r->mpi.size();
  MPI_Status inlineSt[4];
  std::vector<MPI_Status> heapSt;
  if (n > 4)
    heapSt.resize(n);
  MPI_Status *st = n > 4 ? heapSt.data() : inlineSt;
  int rc = MPI_Testall(static_cast<int>(n), r->mpi.data(), &flag, st);
  if (rc == MPI_ERR_IN_STATUS) {
    for (size_t i = 0; i < n; ++i) {
      const MPI_Status &s = st[i];
      if (s.MPI_ERROR == MPI_ERR_TRUNCATE)
        pipert_fail("%s: the message is larger than that", describe(r).c_str());
      if (s.MPI_ERROR != MPI_SUCCESS && s.MPI_ERROR != MPI_ERR_PENDING)
        checkRequest(s.MPI_ERROR, r);
    }
  }
  checkRequest(rc, r);
  if (!flag)
    return false;
  r->done = true;
  if (r->kind == Kind::Recv) {
    for (size_t i = 0; i < n; ++i) {
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

// A point-to-point request of `bytes` with comm's rank `peer`, posted now.
MpiRequest *newP2P(pipert_context *ctx, const MpiComm *c, Kind kind, int64_t bytes, int peer,
                   int tag) {
  MpiRequest *r = acquireRequest();
  r->kind = kind;
  r->bytes = bytes;
  r->peer = peer;
  r->peerWorld = worldRankOf(c, peer);
  r->tag = tag;
  r->commSize = c->size;
  r->postUs = pipert_trace_begin(ctx);
  return r;
}

// Makes r a transfer on the rings with local rank `local` (its buffers set
// by the caller).
void onRings(MpiRequest *r, int local, int commId) {
  r->onShm = true;
  r->op = shm::Op::make(r->kind == Kind::Send, local, commId, r->tag, r->bytes);
}

// The parts of a packed transfer: none null unless empty.
template <typename Ptr>
void checkParts(const pipert_request *r, const Ptr *bufs, const int64_t *bytes, int n) {
  for (int i = 0; i < n; ++i)
    if (bytes[i] > 0 && !bufs[i])
      pipert_fail("%s: null buffer %d of %lld bytes", describe(r).c_str(), i,
                  static_cast<long long>(bytes[i]));
}

MpiComm *wrap(MPI_Comm c, int worldRank) {
  if (c == MPI_COMM_NULL)
    pipert_fail("communicator split produced no group for rank %d", worldRank);
  MPI_Comm_set_errhandler(c, MPI_ERRORS_RETURN);
  auto *pc = new MpiComm();
  pc->comm = c;
  describeComm(pc);
  return pc;
}

} // namespace

MpiTransport::MpiTransport() : world_(new MpiComm()) {}
MpiTransport::~MpiTransport() = default;

void MpiTransport::init(pipert_context *, int *argc, char ***argv) {
  if (initialized_)
    pipert_fail("pipert_comm_init called twice");
  int already = 0;
  MPI_Initialized(&already);
  if (!already) {
    int provided = 0;
    check(MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided), "MPI_Init_thread");
    weInitializedMpi_ = true;
  }
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  world_->comm = MPI_COMM_WORLD;
  world_->owned = false;
  describeComm(world_.get());
  worldRank_ = world_->rank;
  if (const char *env = std::getenv("PIPERT_TIMEOUT_S")) {
    char *end = nullptr;
    double v = std::strtod(env, &end);
    if (end == env || *end != '\0' || !(v > 0))
      pipert_fail("PIPERT_TIMEOUT_S='%s' is not a positive number of seconds", env);
    timeoutS_ = v;
  }
  if (const char *env = std::getenv("PIPERT_SEND_BUFFER")) {
    char *end = nullptr;
    long long v = std::strtoll(env, &end, 10);
    if (end == env || *end != '\0' || v < 0)
      pipert_fail("PIPERT_SEND_BUFFER='%s' is not a byte count >= 0 (0: sends wait for "
                  "the receiver)",
                  env);
    sendBufferLimit_ = v;
  } else if (const char *copy = std::getenv("OMPI_MCA_btl_vader_single_copy_mechanism");
             copy && std::strcmp(copy, "none") == 0) {
    // Without single copy a message over 4 KB moves only while its sender
    // is inside MPI: a buffered send would leave its receiver waiting until
    // the sender's next transport call (the transformer at M = 4: 26k
    // samples/s buffered, 41k with sends that wait).
    sendBufferLimit_ = 0;
  }
  pipert_set_abort_hook(abortHook);
  initShm();
  initialized_ = true;
}

struct MpiTransport::ShmMapping {
  MPI_Comm node = MPI_COMM_NULL;
  MPI_Win win = MPI_WIN_NULL;
};

void MpiTransport::initShm() {
  // Every rank decides alike: the rings are on only where every rank of the
  // world wants them (PIPERT_SHM unset or 1) with the same ring size.
  int64_t ring = int64_t(1) << 20;
  bool ringGiven = false;
  int want = 1;
  if (const char *env = std::getenv("PIPERT_SHM")) {
    if (std::strcmp(env, "0") && std::strcmp(env, "1"))
      pipert_fail("PIPERT_SHM='%s' is not 0 or 1 (1, the default: messages of at most "
                  "PIPERT_SHM_RING/4 bytes between ranks of one machine go through "
                  "shared-memory rings; 0: all through MPI)",
                  env);
    want = env[0] == '1';
  }
  if (const char *env = std::getenv("PIPERT_SHM_RING")) {
    char *end = nullptr;
    long long v = std::strtoll(env, &end, 10);
    if (end == env || *end != '\0' || v < shm::Endpoint::kMinRing ||
        v > shm::Endpoint::kMaxRing || (v & (v - 1)))
      pipert_fail("PIPERT_SHM_RING='%s' is not a power of two of bytes in [%lld, %lld] (the "
                  "size of each shared-memory ring between two ranks)",
                  env, static_cast<long long>(shm::Endpoint::kMinRing),
                  static_cast<long long>(shm::Endpoint::kMaxRing));
    ring = v;
    ringGiven = true;
  }
  if (world_->size < 2)
    return;
  long long mine[3] = {want, ring, -ring}, all[3] = {0, 0, 0};
  check(MPI_Allreduce(mine, all, 3, MPI_LONG_LONG, MPI_MIN, MPI_COMM_WORLD), "MPI_Allreduce");
  if (!all[0])
    return;
  if (all[1] != -all[2])
    pipert_fail("PIPERT_SHM_RING differs between ranks (%lld and %lld bytes): set it alike "
                "on every rank",
                all[1], -all[2]);
  auto m = std::make_unique<ShmMapping>();
  check(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, worldRank_, MPI_INFO_NULL,
                            &m->node),
        "MPI_Comm_split_type");
  MPI_Comm_set_errhandler(m->node, MPI_ERRORS_RETURN);
  int local = 0, nlocal = 1;
  MPI_Comm_rank(m->node, &local);
  MPI_Comm_size(m->node, &nlocal);
  if (nlocal < 2) {
    MPI_Comm_free(&m->node);
    // Still collective with the ranks that share a machine: they agree
    // among themselves below; a rank alone on its machine has no rings.
    return;
  }
  // Many ranks on one machine: smaller rings by default, so that the n x n
  // of them stay within 16 MiB (a container's /dev/shm may be 64 MiB, which
  // Open MPI's own segments share; a page past its end is a SIGBUS, not an
  // error): 4 ranks 1 MiB each, 8 ranks 256 KiB, 16 ranks 64 KiB.
  const int64_t kShmBudget = int64_t(16) << 20;
  if (!ringGiven)
    while (ring > shm::Endpoint::kMinRing && int64_t(nlocal) * nlocal * ring > kShmBudget)
      ring /= 2;
  // The ranks of one machine must use one ring size (each computes the
  // others' channels from it): the shrink above applies only where
  // PIPERT_SHM_RING is unset, so agree on the result. More ranks than the
  // budget holds at the smallest ring: no rings (unless sized explicitly).
  {
    long long mineRing[2] = {ring, -ring}, agreed[2] = {0, 0};
    check(MPI_Allreduce(mineRing, agreed, 2, MPI_LONG_LONG, MPI_MIN, m->node), "MPI_Allreduce");
    if (agreed[0] != -agreed[1])
      pipert_fail("the shared-memory rings' sizes differ between the ranks of one machine "
                  "(%lld and %lld bytes: PIPERT_SHM_RING set on some ranks only?): set it "
                  "alike on every rank, or nowhere",
                  agreed[0], -agreed[1]);
    int anyGiven = ringGiven, given = 0;
    check(MPI_Allreduce(&anyGiven, &given, 1, MPI_INT, MPI_MAX, m->node), "MPI_Allreduce");
    // And room for them in /dev/shm (where Open MPI maps the window), twice
    // over: its pages are all written at init.
    int room = 1, allRoom = 0;
    struct statvfs fs;
    if (statvfs("/dev/shm", &fs) == 0 &&
        static_cast<double>(fs.f_bavail) * static_cast<double>(fs.f_frsize) <
            2.0 * static_cast<double>(nlocal) * nlocal * (ring + shm::Endpoint::kControlBytes))
      room = 0;
    check(MPI_Allreduce(&room, &allRoom, 1, MPI_INT, MPI_MIN, m->node), "MPI_Allreduce");
    if ((!given && int64_t(nlocal) * nlocal * ring > kShmBudget) || !allRoom) {
      MPI_Comm_free(&m->node);
      return; // Through MPI: too many ranks, or too little shared memory.
    }
  }
  std::vector<int> worldOfLocal(static_cast<size_t>(nlocal));
  check(MPI_Allgather(&worldRank_, 1, MPI_INT, worldOfLocal.data(), 1, MPI_INT, m->node),
        "MPI_Allgather");
  // Each rank maps its own block (its inbound channels); alloc_shared_noncontig
  // lets each block sit in memory near its owner.
  MPI_Info info;
  MPI_Info_create(&info);
  MPI_Info_set(info, "alloc_shared_noncontig", "true");
  char *base = nullptr;
  // 64 bytes more, to start each block on a cache line: the window's blocks
  // start 8 bytes past one here (Open MPI 4.1's osc/sm), the same in every
  // process (mappings keep the offset within the page).
  const int64_t block = shm::Endpoint::blockBytes(nlocal, ring) + 64;
  int rc = MPI_Win_allocate_shared(static_cast<MPI_Aint>(block), 1, info, m->node, &base,
                                   &m->win);
  MPI_Info_free(&info);
  int ok = rc == MPI_SUCCESS, allOk = 0;
  std::vector<char *> blocks(static_cast<size_t>(nlocal));
  for (int j = 0; j < nlocal && ok; ++j) {
    MPI_Aint size = 0;
    int disp = 0;
    void *ptr = nullptr;
    ok = MPI_Win_shared_query(m->win, j, &size, &disp, &ptr) == MPI_SUCCESS && ptr &&
         size >= static_cast<MPI_Aint>(block) &&
         // The counters are 8-byte atomics.
         reinterpret_cast<uintptr_t>(ptr) % 8 == 0;
    const uintptr_t at = (reinterpret_cast<uintptr_t>(ptr) + 63) & ~uintptr_t(63);
    blocks[static_cast<size_t>(j)] = reinterpret_cast<char *>(at);
  }
  check(MPI_Allreduce(&ok, &allOk, 1, MPI_INT, MPI_MIN, m->node), "MPI_Allreduce");
  if (!allOk) {
    if (rc == MPI_SUCCESS)
      MPI_Win_free(&m->win);
    MPI_Comm_free(&m->node);
    return; // Through MPI, as without the rings.
  }
  (void)base;
  shm::Endpoint::initBlock(blocks[static_cast<size_t>(local)], nlocal, ring);
  // Every block's counters are zero before any rank writes a message.
  check(MPI_Barrier(m->node), "MPI_Barrier");
  localOf_.assign(static_cast<size_t>(world_->size), -1);
  for (int j = 0; j < nlocal; ++j)
    localOf_[static_cast<size_t>(worldOfLocal[static_cast<size_t>(j)])] = j;
  shm_ = std::make_unique<shm::Endpoint>(local, std::move(blocks), ring);
  shm_->prefault();
  mapping_ = std::move(m);
}

void MpiTransport::finalizeShm(pipert_context *ctx) {
  if (!shm_)
    return;
  // A send still queued here is an isend never waited for (an error of the
  // program, as in MPI): its buffer may be gone, so it is dropped.
  (void)ctx;
  // Collective: no rank unmaps the rings while another still reads them.
  MPI_Win_free(&mapping_->win);
  MPI_Comm_free(&mapping_->node);
  mapping_.reset();
  shm_.reset();
  localOf_.clear();
}

int MpiTransport::shmPeer(const MpiComm *c, int peer, int64_t bytes) const {
  if (!shm_ || bytes > shm_->maxMessage())
    return -1;
  const int w = pipert::worldRankOf(c, peer);
  // A rank's messages to itself stay with MPI (nothing drains a ring to
  // oneself while the rank waits).
  if (w < 0 || w >= static_cast<int>(localOf_.size()) || w == worldRank_)
    return -1;
  return localOf_[static_cast<size_t>(w)];
}

void MpiTransport::finalize(pipert_context *ctx) {
  if (!initialized_)
    return;
  drainStaged(ctx, -1);
  finalizeShm(ctx);
  freeRequestPool();
  for (auto &[capacity, buf] : spare_)
    delete[] buf;
  spare_.clear();
  spareBytes_ = 0;
  pipert_set_abort_hook(nullptr);
  initialized_ = false;
  if (weInitializedMpi_) {
    MPI_Finalize();
    weInitializedMpi_ = false;
  }
}

pipert_comm *MpiTransport::world() { return world_.get(); }

int MpiTransport::rank(const pipert_comm *comm) const { return mpiComm(comm)->rank; }
int MpiTransport::size(const pipert_comm *comm) const { return mpiComm(comm)->size; }
int MpiTransport::maxTag(const pipert_comm *comm) const { return mpiComm(comm)->maxTag; }
int MpiTransport::worldRankOf(const pipert_comm *comm, int rank) const {
  return pipert::worldRankOf(mpiComm(comm), rank);
}

bool MpiTransport::testRequest(pipert_request *req) {
  MpiRequest *r = mpiRequest(req);
  if (!r->onShm) {
    // Every wait advances the rings, whatever it waits for: a rank in a
    // barrier or a large MPI receive still drains its inbound rings and
    // writes its queued ring sends, as MPI progresses its own buffered
    // sends there (else a peer blocked on a full ring waits for ever).
    if (shm_)
      shm_->progress();
    return testMpi(req);
  }
  if (r->done)
    return true;
  if (!r->op.done)
    shm_->progress();
  if (!r->op.done) {
    // MPI's transfers move only inside MPI calls (a rendezvous needs both
    // sides; a buffered send completes in later calls): while this rank
    // waits on a ring, MPI must progress too, else a peer waiting on this
    // rank's MPI send never gets it.
    if (liveMpi_ > 0 || !staged_.empty()) {
      int flag = 0;
      MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, MPI_STATUS_IGNORE);
    }
    return false;
  }
  r->done = true;
  if (r->op.mismatch >= 0)
    pipert_fail("%s: the message has %lld bytes", describe(r).c_str(),
                static_cast<long long>(r->op.mismatch));
  return true;
}

void MpiTransport::release(pipert_request *req) {
  MpiRequest *r = mpiRequest(req);
  if (r->onShm)
    shm_->cancel(&r->op);
  if (r->counted)
    --liveMpi_;
  recycleRequest(r);
}

std::string MpiTransport::timeoutHint(const pipert_request *r) const {
  // A send and its receive of sizes on either side of the rings' limit take
  // different paths and never meet: say so where a receive times out.
  if (shm_ && r->kind == Kind::Recv && r->peerWorld >= 0 && r->peerWorld != worldRank_ &&
      r->peerWorld < static_cast<int>(localOf_.size()) &&
      localOf_[static_cast<size_t>(r->peerWorld)] >= 0)
    return " (or its sender sent another size, one of the two over " +
           std::to_string(shm_->maxMessage()) +
           " bytes: then they took different paths, shared-memory rings and MPI)";
  return {};
}

// Polls until every request completes or the timeout passes, then frees them.
void MpiTransport::wait(pipert_context *ctx, pipert_request **reqs, int n) {
  reapStaged(ctx);
  transport::waitAndRelease(
      ctx, reqs, n, timeoutS_, [this](pipert_request *r) { return testRequest(r); }, describe,
      [this](pipert_request *r) { release(r); }, stagedBytes_,
      [this](const pipert_request *r) { return timeoutHint(r); });
}

bool MpiTransport::sendNow(pipert_context *ctx, const MpiComm *c, int local, int peer, int tag,
                           int64_t bytes, const void *buf, const void *const *bufs,
                           const int64_t *parts, int n) {
  checkTag(c, tag, "send");
  const double postUs = pipert_trace_begin(ctx);
  shm::Op op = shm::Op::make(true, local, c->id, tag, bytes);
  op.src = buf;
  op.gbufs = bufs;
  op.gbytes = parts;
  op.gn = n;
  if (!shm_->trySend(&op))
    return false;
  transport::traceCompletion(ctx, Kind::Send, pipert::worldRankOf(c, peer), tag, postUs);
  return true;
}

void MpiTransport::progressRings() {
  if (shm_)
    shm_->progress();
}

bool MpiTransport::test(pipert_context *ctx, pipert_request *req) {
  reapStaged(ctx);
  return testRequest(req);
}

char *MpiTransport::takeStaging(int64_t bytes, int64_t &capacity) {
  // The smallest spare buffer that holds it (a step sends the same few
  // sizes over and over), else a new one.
  size_t best = spare_.size();
  for (size_t i = 0; i < spare_.size(); ++i)
    if (spare_[i].first >= bytes && (best == spare_.size() || spare_[i].first < spare_[best].first))
      best = i;
  if (best < spare_.size()) {
    auto [cap, buf] = spare_[best];
    spare_[best] = spare_.back();
    spare_.pop_back();
    spareBytes_ -= cap;
    capacity = cap;
    return buf;
  }
  capacity = std::max<int64_t>(bytes, 64);
  return new char[static_cast<size_t>(capacity)];
}

void MpiTransport::returnStaging(char *buf, int64_t capacity) {
  // Spare buffers hold at most the staging limit.
  if (spareBytes_ + capacity > sendBufferLimit_) {
    delete[] buf;
    return;
  }
  spare_.push_back({capacity, buf});
  spareBytes_ += capacity;
}

void MpiTransport::reapStaged(pipert_context *ctx) {
  if (staged_.empty())
    return;
  for (auto it = staged_.begin(); it != staged_.end();) {
    if (!testRequest(it->req)) {
      ++it;
      continue;
    }
    transport::traceCompletion(ctx, it->req->kind, it->req->peerWorld, it->req->tag,
                               it->req->postUs);
    stagedBytes_ -= it->req->bytes;
    release(it->req);
    returnStaging(it->buf, it->capacity);
    it = staged_.erase(it);
  }
}

void MpiTransport::drainStaged(pipert_context *ctx, int64_t bytes) {
  reapStaged(ctx);
  while (!staged_.empty() && (bytes < 0 || stagedBytes_ + bytes > sendBufferLimit_)) {
    Staged s = staged_.front();
    staged_.pop_front();
    stagedBytes_ -= s.req->bytes;
    pipert_request *r = s.req;
    transport::waitAndRelease(
        ctx, &r, 1, timeoutS_, [this](pipert_request *q) { return testRequest(q); }, describe,
        [this](pipert_request *q) { release(q); }, stagedBytes_,
        [this](const pipert_request *q) { return timeoutHint(q); });
    returnStaging(s.buf, s.capacity);
  }
}

void MpiTransport::send(pipert_context *ctx, pipert_comm *comm, const void *buf, int64_t count,
                        pipert_dtype dtype, int peer, int tag) {
  const int64_t bytes = byteCount(count, dtype, "send");
  if (const int local = shmPeer(mpiComm(comm), peer, bytes); local >= 0) {
    // Into the peer's ring: complete once written; at once where it fits,
    // without a request (the usual case).
    if (bytes > 0 && !buf)
      pipert_fail("%s: null buffer for %lld bytes",
                  transport::describe(Kind::Send, bytes, worldRankOf(comm, peer), tag, size(comm))
                      .c_str(),
                  static_cast<long long>(bytes));
    if (sendNow(ctx, mpiComm(comm), local, peer, tag, bytes, buf, nullptr, nullptr, 0))
      return;
    pipert_request *r = post(ctx, comm, const_cast<void *>(buf), count, dtype, peer, tag, Kind::Send);
    wait(ctx, &r, 1);
    return;
  }
  // A small message is not copied either: MPI sends it inline (into the
  // peer's shared-memory queue), so its send completes without the peer,
  // and staging it made a 4-byte ping-pong 20% slower. A large message is
  // not copied: out of cache the copy costs about what the transfer does
  // (16 MiB took 2.1x MPI's time buffered).
  if (bytes <= kEagerBytes || bytes > sendBufferLimit_ / 16) {
    drainStaged(ctx, -1); // keeps the sends' completion order
    pipert_request *r = post(ctx, comm, const_cast<void *>(buf), count, dtype, peer, tag, Kind::Send);
    wait(ctx, &r, 1);
    return;
  }
  if (bytes > 0 && !buf)
    pipert_fail("%s: null buffer for %lld bytes",
                transport::describe(Kind::Send, bytes, worldRankOf(comm, peer), tag,
                                    size(comm))
                    .c_str(),
                static_cast<long long>(bytes));
  drainStaged(ctx, bytes);
  int64_t capacity = 0;
  char *copy = takeStaging(bytes, capacity);
  if (bytes)
    std::memcpy(copy, buf, static_cast<size_t>(bytes));
  pipert_request *r = post(ctx, comm, copy, count, dtype, peer, tag, Kind::Send);
  staged_.push_back({r, copy, capacity});
  stagedBytes_ += bytes;
}

void MpiTransport::sendGather(pipert_context *ctx, pipert_comm *comm, const void *const *bufs,
                              const int64_t *bytes, int n, int64_t total, int peer, int tag) {
  MpiComm *c = mpiComm(comm);
  if (const int local = shmPeer(c, peer, total); local >= 0) {
    // Gathered straight into the peer's ring: at once where it fits,
    // without a request (the usual case).
    checkTag(c, tag, "send");
    for (int i = 0; i < n; ++i)
      if (bytes[i] > 0 && !bufs[i])
        pipert_fail("%s: null buffer %d of %lld bytes",
                    transport::describe(Kind::Send, total, pipert::worldRankOf(c, peer), tag,
                                        c->size)
                        .c_str(),
                    i, static_cast<long long>(bytes[i]));
    if (sendNow(ctx, c, local, peer, tag, total, nullptr, bufs, bytes, n))
      return;
    MpiRequest *r = newP2P(ctx, c, Kind::Send, total, peer, tag);
    onRings(r, local, c->id);
    r->op.gbufs = bufs;
    r->op.gbytes = bytes;
    r->op.gn = n;
    shm_->postSend(&r->op);
    pipert_request *req = r;
    wait(ctx, &req, 1);
    return;
  }
  if (total <= kEagerBytes || total > sendBufferLimit_ / 16) {
    Transport::sendGather(ctx, comm, bufs, bytes, n, total, peer, tag);
    return;
  }
  // Gathered straight into the staging buffer send() would copy it to.
  drainStaged(ctx, total);
  int64_t capacity = 0;
  char *copy = takeStaging(total, capacity);
  int64_t offset = 0;
  for (int i = 0; i < n; ++i) {
    if (bytes[i] > 0 && !bufs[i])
      pipert_fail("%s: null buffer %d of %lld bytes",
                  transport::describe(Kind::Send, total, worldRankOf(comm, peer), tag,
                                      size(comm))
                      .c_str(),
                  i, static_cast<long long>(bytes[i]));
    if (bytes[i])
      std::memcpy(copy + offset, bufs[i], static_cast<size_t>(bytes[i]));
    offset += bytes[i];
  }
  pipert_request *r = post(ctx, comm, copy, total, PIPERT_U8, peer, tag, Kind::Send);
  staged_.push_back({r, copy, capacity});
  stagedBytes_ += total;
}

pipert_request *MpiTransport::post(pipert_context *ctx, pipert_comm *comm, void *buf,
                                   int64_t count, pipert_dtype dtype, int peer, int tag,
                                   Kind kind) {
  const char *what = kind == Kind::Send ? "send" : "recv";
  MpiComm *c = mpiComm(comm);
  checkTag(c, tag, what);
  MpiRequest *r = newP2P(ctx, c, kind, byteCount(count, dtype, what), peer, tag);
  if (r->bytes > 0 && !buf)
    pipert_fail("%s: null buffer for %lld bytes", describe(r).c_str(),
                static_cast<long long>(r->bytes));
  if (const int local = shmPeer(c, peer, r->bytes); local >= 0) {
    onRings(r, local, c->id);
    if (kind == Kind::Send) {
      r->op.src = buf;
      shm_->postSend(&r->op);
    } else {
      r->op.dst = buf;
      shm_->postRecv(&r->op);
    }
    return r;
  }
  char *p = static_cast<char *>(buf);
  int64_t off = 0;
  do {
    const int chunk = static_cast<int>(std::min(kChunkBytes, r->bytes - off));
    MPI_Request mr;
    if (kind == Kind::Send)
      checkRequest(MPI_Isend(p + off, chunk, MPI_BYTE, peer, tag, c->comm, &mr), r);
    else
      checkRequest(MPI_Irecv(p + off, chunk, MPI_BYTE, peer, tag, c->comm, &mr), r);
    r->mpi.push_back(mr);
    r->expectChunkBytes.push_back(chunk);
    off += chunk;
  } while (off < r->bytes);
  r->counted = true;
  ++liveMpi_;
  return r;
}

pipert_request *MpiTransport::postScatter(pipert_context *ctx, pipert_comm *comm,
                                          void *const *bufs, const int64_t *bytes, int n,
                                          int64_t total, int peer, int tag) {
  MpiComm *c = mpiComm(comm);
  const int local = shmPeer(c, peer, total);
  if (local < 0)
    return nullptr;
  checkTag(c, tag, "recv");
  MpiRequest *r = newP2P(ctx, c, Kind::Recv, total, peer, tag);
  checkParts(r, bufs, bytes, n);
  r->scatterBufs.assign(bufs, bufs + n);
  r->scatterBytes.assign(bytes, bytes + n);
  onRings(r, local, c->id);
  r->op.sbufs = r->scatterBufs.data();
  r->op.sbytes = r->scatterBytes.data();
  r->op.sn = n;
  shm_->postRecv(&r->op);
  return r;
}

pipert_request *MpiTransport::iallreduce(pipert_context *ctx, pipert_comm *comm, float *buf,
                                         int64_t count, pipert_collective_op op) {
  MpiComm *c = mpiComm(comm);
  MpiRequest *r = acquireRequest();
  r->kind = Kind::Allreduce;
  r->bytes = byteCount(count, PIPERT_F32, "allreduce");
  r->commSize = c->size;
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
    check(MPI_Iallreduce(MPI_IN_PLACE, buf + off, n, MPI_FLOAT, MPI_SUM, c->comm, &mr),
          describe(r).c_str());
    r->mpi.push_back(mr);
    off += n;
  } while (off < count);
  r->counted = true;
  ++liveMpi_;
  return r;
}

void MpiTransport::broadcast(pipert_context *ctx, pipert_comm *comm, void *buf, int64_t count,
                             pipert_dtype dtype, int root) {
  MpiComm *c = mpiComm(comm);
  MpiRequest *r = acquireRequest();
  r->kind = Kind::Broadcast;
  r->bytes = byteCount(count, dtype, "broadcast");
  r->peer = root;
  r->peerWorld = pipert::worldRankOf(c, root);
  r->commSize = c->size;
  r->postUs = pipert_trace_begin(ctx);
  char *p = static_cast<char *>(buf);
  int64_t off = 0;
  do {
    const int chunk = static_cast<int>(std::min(kChunkBytes, r->bytes - off));
    MPI_Request mr;
    checkRequest(MPI_Ibcast(p + off, chunk, MPI_BYTE, root, c->comm, &mr), r);
    r->mpi.push_back(mr);
    off += chunk;
  } while (off < r->bytes);
  pipert_request *req = r;
  wait(ctx, &req, 1);
}

void MpiTransport::barrier(pipert_context *ctx, pipert_comm *comm) {
  MpiRequest *r = acquireRequest();
  r->kind = Kind::Barrier;
  r->commSize = mpiComm(comm)->size;
  r->postUs = pipert_trace_begin(ctx);
  MPI_Request mr;
  checkRequest(MPI_Ibarrier(mpiComm(comm)->comm, &mr), r);
  r->mpi.push_back(mr);
  pipert_request *req = r;
  wait(ctx, &req, 1);
}

pipert_comm *MpiTransport::split(pipert_context *, pipert_comm *comm, int color, int key) {
  MPI_Comm out = MPI_COMM_NULL;
  check(MPI_Comm_split(mpiComm(comm)->comm, color, key, &out), "MPI_Comm_split");
  MpiComm *c = wrap(out, worldRank_);
  // An id every member agrees on and that no other communicator of any
  // member has: the largest next id among the members.
  int id = 0;
  check(MPI_Allreduce(&nextCommId_, &id, 1, MPI_INT, MPI_MAX, c->comm), "MPI_Allreduce");
  c->id = id;
  nextCommId_ = id + 1;
  return c;
}

void MpiTransport::destroy(pipert_context *, pipert_comm *comm) {
  MpiComm *c = mpiComm(comm);
  if (!c || !c->owned || c == world_.get())
    return;
  MPI_Comm_free(&c->comm);
  delete c;
}

} // namespace pipert
