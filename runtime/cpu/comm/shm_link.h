//===- shm_link.h - point-to-point rings between ranks of one machine -*- C++ -*-===//
//
// The MPI transport's own path for point-to-point messages between two ranks
// of one machine (mpi_comm.cpp; docs/design-notes.md, "Shared-memory
// rings"). Every ordered pair of local ranks (sender -> receiver) has a
// single-producer single-consumer byte ring in memory both map: it lives in
// the receiver's block, which holds one channel per sender.
//
//   channel = [ tail (written by the sender) | head (written by the
//               receiver), each on a cache line of its own | ring of R bytes ]
//
// A message is one frame: a 64-byte header (communicator id, tag, bytes)
// then the payload, padded to 64 bytes; tail and head count bytes from the
// start (they never wrap), a frame starts on a 64-byte boundary of the ring,
// so its header never wraps, and its payload is copied in two parts where it
// does. The sender writes the frame, then publishes tail (release); the
// receiver reads tail (acquire), copies the frame out, then publishes head
// (release), which frees the space.
//
// A send is written into the ring when it fits behind the sends already
// waiting on that channel (it is then complete: the sender's buffer may be
// reused), else it waits in the channel's queue and is written by a later
// progress(). A receive is matched as MPI matches: the earliest message
// from that peer with its communicator and tag, in the order sent. progress()
// drains every inbound ring completely: a frame with a receive posted for it
// is copied into that receive's buffer, any other into an unexpected-message
// queue that later receives look in first. So a ring never fills with
// messages nobody asked for yet, and two ranks sending to each other at once
// never wait for each other (every wait calls progress()).
//
// Messages over maxMessage() (a quarter of the ring) are not sent this way;
// the transport sends them with MPI (the size of a message decides its path
// on both sides, so a receive and its message always meet on one path).
//
// Not thread-safe: one thread per rank drives the transport (as with
// MPI_THREAD_FUNNELED). Independent of MPI: runtime tests drive two
// endpoints from two threads over ordinary memory.
//
//===----------------------------------------------------------------------===//
#ifndef PIPERT_CPU_COMM_SHM_LINK_H
#define PIPERT_CPU_COMM_SHM_LINK_H

#include <cstddef>
#include <cstdint>
#include <vector>

namespace pipert::shm {

// A send or receive on the rings: what a transport request carries.
struct Op {
  bool send = false;
  int peer = -1;    // local index of the peer
  int comm = 0;     // communicator id (the same on every member)
  int tag = 0;
  int64_t bytes = 0;
  // Send: `src`, or the gather list (gbufs, gbytes)[0..gn) when gn > 0; they
  // must stay valid until the op is done. Recv: `dst`.
  const void *src = nullptr;
  const void *const *gbufs = nullptr;
  const int64_t *gbytes = nullptr;
  int gn = 0;
  // Recv: `dst`, or the scatter list (sbufs, sbytes)[0..sn) when sn > 0 (the
  // message's bytes in order; they must stay valid until the op is done).
  void *dst = nullptr;
  void *const *sbufs = nullptr;
  const int64_t *sbytes = nullptr;
  int sn = 0;
  bool done = false;
  // Recv: the matched message's size where it differs from `bytes` (the
  // receive is then done and its buffer untouched), else -1.
  int64_t mismatch = -1;

  // An op with its peer, communicator, tag and size set; its buffers are
  // the caller's to set.
  static Op make(bool send, int peer, int comm, int tag, int64_t bytes) {
    Op op;
    op.send = send;
    op.peer = peer;
    op.comm = comm;
    op.tag = tag;
    op.bytes = bytes;
    return op;
  }
};

class Endpoint {
public:
  static constexpr int64_t kAlign = 64;
  static constexpr int64_t kControlBytes = 256;
  static constexpr int64_t kMinRing = int64_t(64) << 10;
  static constexpr int64_t kMaxRing = int64_t(1) << 30;

  // The bytes of each rank's block: `ranks` channels of `ring` bytes.
  static int64_t blockBytes(int ranks, int64_t ring) { return ranks * (kControlBytes + ring); }
  // Zeroes a block, its counters among it (its owner does, before any rank
  // uses it; this also allocates its pages).
  static void initBlock(void *block, int ranks, int64_t ring);

  // self: this rank's local index; blocks[j]: local rank j's block, mapped
  // here; ring: a power of two in [kMinRing, kMaxRing].
  Endpoint(int self, std::vector<char *> blocks, int64_t ring);

  // Maps in this process the pages of the rings it sends through, so that
  // no message pays a page fault (once the blocks' owners have zeroed them).
  void prefault();

  int self() const { return self_; }
  int ranks() const { return static_cast<int>(blocks_.size()); }
  int64_t ringBytes() const { return ring_; }
  // The largest message sent through the rings.
  int64_t maxMessage() const { return ring_ / 4; }

  // Starts a send: written now if it fits behind the channel's waiting
  // sends (op.done), else queued for progress().
  void postSend(Op *op);
  // Writes a send now if it fits behind no waiting send; else leaves it
  // (not queued) and returns false.
  bool trySend(Op *op);
  // Starts a receive: matched now against the unexpected messages and the
  // ring (op.done), else left for progress() to match.
  void postRecv(Op *op);
  // Writes the waiting sends that fit and drains every inbound ring.
  void progress();
  // Takes a not-yet-done op out of the queues (a request freed unfinished).
  void cancel(Op *op);
  // Sends still queued (not written).
  bool sendsPending() const;

private:
  struct Unexpected {
    int comm, tag;
    std::vector<char> data;
  };
  // The channel sender -> receiver lives in the receiver's block.
  char *channel(int receiver, int sender) const {
    return blocks_[static_cast<size_t>(receiver)] + sender * (kControlBytes + ring_);
  }
  bool tryWrite(Op *op);
  void drain(int peer);
  void deliver(Op *op, const char *ring, uint64_t pos, int64_t bytes);

  int self_;
  std::vector<char *> blocks_;
  int64_t ring_;
  // Per peer: sends waiting for room, receives waiting for a message,
  // messages that came before their receive, and the head this side last
  // read (the sender's free-space estimate, refreshed when short). Vectors
  // (a few entries each) and recycled message buffers (spare_): once they
  // have grown, the steady state allocates nothing.
  std::vector<std::vector<Op *>> pending_, posted_;
  std::vector<std::vector<Unexpected>> unexpected_;
  std::vector<std::vector<char>> spare_;
  std::vector<uint64_t> knownHead_;
};

} // namespace pipert::shm

#endif // PIPERT_CPU_COMM_SHM_LINK_H
