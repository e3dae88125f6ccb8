//===- transport.h - the interface every pipert transport implements -*- C++ -*-===//
//
// pipert_comm.h's C entry points are defined once, in runtime/core/transport.cpp,
// and dispatch to the library's active transport: an object of a class derived
// from pipert::Transport, returned by pipert::activeTransport(). Each backend
// library defines that function once:
//   libpipert_cpu   an MpiTransport (runtime/cpu/comm/mpi_transport.h);
//   libpipert_cuda  an NcclTransport (runtime/cuda/nccl_comm.cpp), which owns an
//                   MpiTransport of its own for start-up, groups, barriers,
//                   timeouts and the ncclUniqueId broadcast (composition).
//
// The handles of the C ABI are the bases of each transport's own types: a
// transport's communicators derive from pipert_comm and its requests from
// pipert_request, and a transport only ever receives the handles it made
// itself (it static_casts them back).
//
// What the entry points check before calling a transport, so that the
// messages are the same on every backend and transports may assume it:
//  - the calls that need it (world, post, collectives, split, groups) fail
//    with "<what> called before pipert_comm_init" before init;
//  - post: a non-null communicator and the peer within it; broadcast: the
//    root within the communicator; world_rank_of: the rank within it;
//  - iallreduce: a known reduction; split: color >= 0; set_timeout: > 0;
//  - the stage and pipeline groups' layout (P*S ranks), which they build
//    with split() over the world.
// Tags, sizes, dtypes and buffers are the transport's to check.
//
//===----------------------------------------------------------------------===//
#ifndef PIPERT_CORE_TRANSPORT_H
#define PIPERT_CORE_TRANSPORT_H

#include "pipert/pipert_comm.h"
#include "transport_util.h"

#include <cstdint>

// A communicator of one transport; each transport derives its own.
struct pipert_comm {
  virtual ~pipert_comm() = default;
};

// A transfer or collective in flight: what the errors, traces and the wait
// loop (transport::waitAndRelease) read; each transport derives its own.
struct pipert_request {
  pipert::transport::Kind kind = pipert::transport::Kind::Send;
  int64_t bytes = 0;
  int peer = -1;      // rank in the communicator (send/recv) or root (broadcast)
  int peerWorld = -1; // world rank of the peer
  int tag = -1;
  int commSize = 1;
  double postUs = 0; // pipert_trace_begin when posted
  bool done = false;
  virtual ~pipert_request() = default;
};

namespace pipert {

class Transport {
public:
  virtual ~Transport() = default;

  // Start-up and shut-down (pipert_comm_init/finalize/initialized): init
  // installs the abort hook that ends every rank, finalize removes it.
  virtual void init(pipert_context *ctx, int *argc, char ***argv) = 0;
  virtual void finalize(pipert_context *ctx) = 0;
  virtual bool initialized() const = 0;

  // Communicators. world() is owned by the transport; split() (collective
  // over comm) makes one that destroy() frees; destroy() ignores the world.
  virtual pipert_comm *world() = 0;
  virtual pipert_comm *split(pipert_context *ctx, pipert_comm *comm, int color, int key) = 0;
  virtual void destroy(pipert_context *ctx, pipert_comm *comm) = 0;
  virtual int rank(const pipert_comm *comm) const = 0;
  virtual int size(const pipert_comm *comm) const = 0;
  // This process's rank in the world (0 before init).
  virtual int worldRank() const = 0;
  virtual int worldRankOf(const pipert_comm *comm, int rank) const = 0;
  virtual int maxTag(const pipert_comm *comm) const = 0;

  // The timeout of every wait, in seconds (PIPERT_TIMEOUT_S, read by init).
  virtual void setTimeout(double seconds) = 0;
  virtual double timeout() const = 0;

  // Posts a point-to-point send or recv (kind) of count elements of dtype.
  virtual pipert_request *post(pipert_context *ctx, pipert_comm *comm, void *buf, int64_t count,
                               pipert_dtype dtype, int peer, int tag, transport::Kind kind) = 0;
  // pipert_send: returns once buf may be reused. By default a posted send
  // waited for (rendezvous or eager, as the transport's post is); the MPI
  // transport copies it into a staging buffer and returns at once (buffered
  // sends, docs/design-notes.md "Buffered sends").
  virtual void send(pipert_context *ctx, pipert_comm *comm, const void *buf, int64_t count,
                    pipert_dtype dtype, int peer, int tag) {
    pipert_request *r =
        post(ctx, comm, const_cast<void *>(buf), count, dtype, peer, tag, transport::Kind::Send);
    wait(ctx, &r, 1);
  }
  // pipert_send_packed: bufs[0..n) of bytes[i] each, `total` in all, sent
  // as one message of bytes, as send() sends (returns once the buffers may
  // be reused). By default gathered into a buffer of the backend's memory
  // and sent; the MPI transport gathers straight into its staging buffer.
  virtual void sendGather(pipert_context *ctx, pipert_comm *comm, const void *const *bufs,
                          const int64_t *bytes, int n, int64_t total, int peer, int tag);
  // pipert_irecv_packed: a receive of `total` bytes whose parts go to
  // bufs[0..n) (bytes[i] each, valid until it is waited for), scattered
  // straight from the transport's own memory; nullptr where this transport
  // does not for this message (the caller then receives into a staging
  // buffer and scatters after the wait).
  virtual pipert_request *postScatter(pipert_context *, pipert_comm *, void *const *,
                                      const int64_t *, int, int64_t, int, int) {
    return nullptr;
  }
  // Whether req has completed; never blocks (the request stays to be waited for).
  virtual bool test(pipert_context *ctx, pipert_request *req) = 0;
  // Waits (with the timeout) for the non-null requests of reqs[0..n), then
  // frees them and clears their slots.
  virtual void wait(pipert_context *ctx, pipert_request **reqs, int n) = 0;
  virtual pipert_request *iallreduce(pipert_context *ctx, pipert_comm *comm, float *buf,
                                     int64_t count, pipert_collective_op op) = 0;
  // Blocking, with the timeout.
  virtual void broadcast(pipert_context *ctx, pipert_comm *comm, void *buf, int64_t count,
                         pipert_dtype dtype, int root) = 0;
  virtual void barrier(pipert_context *ctx, pipert_comm *comm) = 0;
  // The bytes of each shared-memory ring between ranks of this machine
  // (pipert_comm_ring_bytes), 0 where messages do not go through rings.
  virtual int64_t ringBytes() const { return 0; }
};

// The transport behind pipert_comm.h; defined once by each backend library.
Transport &activeTransport();

} // namespace pipert

#endif // PIPERT_CORE_TRANSPORT_H
