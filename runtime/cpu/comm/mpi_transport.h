//===- mpi_transport.h - the MPI transport (pipert::Transport) -*- C++ -*-===//
//
// libpipert_cpu's active transport (cpu_transport.cpp), and the bootstrap and
// control transport that libpipert_cuda's NCCL transport owns (start-up,
// groups, barriers, timeouts, the ncclUniqueId broadcast, the size headers of
// its transfers). Implemented in mpi_comm.cpp.
//
//===----------------------------------------------------------------------===//
#ifndef PIPERT_CPU_COMM_MPI_TRANSPORT_H
#define PIPERT_CPU_COMM_MPI_TRANSPORT_H

#include "../../core/transport.h"
#include "shm_link.h"

#include <deque>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace pipert {

struct MpiComm;

class MpiTransport final : public Transport {
public:
  MpiTransport();
  ~MpiTransport() override;

  void init(pipert_context *ctx, int *argc, char ***argv) override;
  void finalize(pipert_context *ctx) override;
  bool initialized() const override { return initialized_; }

  pipert_comm *world() override;
  pipert_comm *split(pipert_context *ctx, pipert_comm *comm, int color, int key) override;
  void destroy(pipert_context *ctx, pipert_comm *comm) override;
  int rank(const pipert_comm *comm) const override;
  int size(const pipert_comm *comm) const override;
  int worldRank() const override { return worldRank_; }
  int worldRankOf(const pipert_comm *comm, int rank) const override;
  int maxTag(const pipert_comm *comm) const override;

  void setTimeout(double seconds) override { timeoutS_ = seconds; }
  double timeout() const override { return timeoutS_; }

  pipert_request *post(pipert_context *ctx, pipert_comm *comm, void *buf, int64_t count,
                       pipert_dtype dtype, int peer, int tag, transport::Kind kind) override;
  void send(pipert_context *ctx, pipert_comm *comm, const void *buf, int64_t count,
            pipert_dtype dtype, int peer, int tag) override;
  void sendGather(pipert_context *ctx, pipert_comm *comm, const void *const *bufs,
                  const int64_t *bytes, int n, int64_t total, int peer, int tag) override;
  pipert_request *postScatter(pipert_context *ctx, pipert_comm *comm, void *const *bufs,
                              const int64_t *bytes, int n, int64_t total, int peer,
                              int tag) override;
  bool test(pipert_context *ctx, pipert_request *req) override;
  void wait(pipert_context *ctx, pipert_request **reqs, int n) override;
  pipert_request *iallreduce(pipert_context *ctx, pipert_comm *comm, float *buf, int64_t count,
                             pipert_collective_op op) override;
  void broadcast(pipert_context *ctx, pipert_comm *comm, void *buf, int64_t count,
                 pipert_dtype dtype, int root) override;
  void barrier(pipert_context *ctx, pipert_comm *comm) override;

  // The shared-memory rings' size per channel (0: messages go through MPI
  // only) and the largest message they carry.
  int64_t shmRingBytes() const { return shm_ ? shm_->ringBytes() : 0; }
  int64_t shmMaxMessage() const { return shm_ ? shm_->maxMessage() : 0; }
  int64_t ringBytes() const override { return shmRingBytes(); }
  // Advances the rings (writes queued sends, drains inbound ones): for a
  // transport that owns this one and polls requests of its own.
  void progressRings();

private:
  // Maps the rings between this machine's ranks (collective over the world;
  // PIPERT_SHM=0 or a failed mapping leaves them off on every rank).
  void initShm();
  void finalizeShm(pipert_context *ctx);
  // The local index of comm's rank `peer` when a message of `bytes` to or
  // from it goes through the rings, else -1.
  int shmPeer(const MpiComm *c, int peer, int64_t bytes) const;
  bool testRequest(pipert_request *req);
  // A send into local rank `local`'s ring, written now if it fits (buf, or
  // the parts (bufs, parts)[0..n)); false, and nothing sent, where not.
  bool sendNow(pipert_context *ctx, const MpiComm *c, int local, int peer, int tag,
               int64_t bytes, const void *buf, const void *const *bufs, const int64_t *parts,
               int n);
  // What a timed-out receive from this machine adds to its message.
  std::string timeoutHint(const pipert_request *r) const;
  void release(pipert_request *req);
  // A buffered send in flight: its request and the staging copy it sends.
  struct Staged {
    pipert_request *req;
    char *buf;
    int64_t capacity;
  };
  // Frees the buffered sends that have completed (any order).
  void reapStaged(pipert_context *ctx);
  // Waits (with the timeout) for the oldest buffered send(s) until `bytes`
  // more fit under the limit; every one when bytes < 0.
  void drainStaged(pipert_context *ctx, int64_t bytes);
  char *takeStaging(int64_t bytes, int64_t &capacity);
  void returnStaging(char *buf, int64_t capacity);

  bool initialized_ = false;
  bool weInitializedMpi_ = false;
  double timeoutS_ = 300.0;
  std::unique_ptr<MpiComm> world_;
  int worldRank_ = 0;
  std::deque<Staged> staged_;
  std::vector<std::pair<int64_t, char *>> spare_; // staging buffers to reuse
  int64_t stagedBytes_ = 0, spareBytes_ = 0;
  int64_t sendBufferLimit_ = int64_t(64) << 20; // PIPERT_SEND_BUFFER
  // The rings (shm_link.h): the endpoint, the window that maps them, the
  // communicator of this machine's ranks, each world rank's local index
  // (-1 on another machine), and the next communicator id (split()).
  struct ShmMapping; // the window and the machine's communicator (mpi_comm.cpp)
  std::unique_ptr<shm::Endpoint> shm_;
  std::unique_ptr<ShmMapping> mapping_;
  std::vector<int> localOf_;
  int nextCommId_ = 1;
  // Point-to-point MPI requests not yet released.
  int64_t liveMpi_ = 0;
};

} // namespace pipert

#endif // PIPERT_CPU_COMM_MPI_TRANSPORT_H
