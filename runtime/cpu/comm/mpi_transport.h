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

#include <memory>

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
  bool test(pipert_context *ctx, pipert_request *req) override;
  void wait(pipert_context *ctx, pipert_request **reqs, int n) override;
  pipert_request *iallreduce(pipert_context *ctx, pipert_comm *comm, float *buf, int64_t count,
                             pipert_collective_op op) override;
  void broadcast(pipert_context *ctx, pipert_comm *comm, void *buf, int64_t count,
                 pipert_dtype dtype, int root) override;
  void barrier(pipert_context *ctx, pipert_comm *comm) override;

private:
  bool initialized_ = false;
  bool weInitializedMpi_ = false;
  double timeoutS_ = 300.0;
  std::unique_ptr<MpiComm> world_;
  int worldRank_ = 0;
};

} // namespace pipert

#endif // PIPERT_CPU_COMM_MPI_TRANSPORT_H
