/*===- pipert_comm.h - transport: point-to-point, collectives, groups -----===*
 *
 * The transfers of a pipeline-parallel program: activations and gradients
 * between neighbouring stages (send/recv with tags), gradient or weight
 * averaging among the replicas of one stage (allreduce, broadcast).
 *
 * The CPU backend implements this over MPI; a CUDA backend implements the same
 * functions with NCCL, bootstrapped over MPI (rank 0's ncclUniqueId broadcast
 * on the MPI communicator). Hence the shape of the ABI:
 *  - buffers are backend (device) pointers with an element count and a dtype,
 *    as NCCL wants them, never MPI datatypes;
 *  - non-blocking calls return a request that must be passed to exactly one
 *    pipert_wait (which frees it); on CUDA the wait also orders the stream;
 *  - every call takes the context (the CUDA stream lives there).
 * NCCL has no tags: portable programs post the transfers between a pair of
 * ranks in the same order on both sides (the compiler's verified schedules
 * do), and use tags to label them. MPI additionally matches by tag, so the
 * CPU backend also tolerates out-of-order posting with distinct tags.
 *
 * Both libraries define these functions once, in runtime/core/transport.cpp,
 * over their transport object (pipert::Transport, runtime/core/transport.h).
 *
 * Ranks and layout: a run has P pipelines of S stages, P*S ranks in all.
 * Rank r is stage (r % S) of pipeline (r / S) (pipeline-major), so one
 * pipeline's ranks are consecutive.
 *
 * Timeouts: no call waits for ever. Waiting polls the transfer; when it has not
 * completed within the timeout (PIPERT_TIMEOUT_S in the environment, default
 * 300 s, or pipert_comm_set_timeout), the rank ends through pipert_fail with a
 * message naming the transfer, the peer and the tag, e.g.
 *   "pipert: error: recv of 4096 bytes from rank 1, tag 7, timed out after 5 s"
 * and pipert_fail aborts every rank (MPI_Abort), so a stalled or dead peer
 * never leaves a rank hanging. A rank that dies takes the job down through
 * mpirun.
 *
 * Errors (bad peer, tag out of range, a message of the wrong size) are fatal
 * through pipert_fail, like the rest of the runtime.
 *===----------------------------------------------------------------------===*/
#ifndef PIPERT_PIPERT_COMM_H
#define PIPERT_PIPERT_COMM_H

#include "pipert/pipert.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A group of ranks that communicate; ranks within it are numbered 0..size-1. */
typedef struct pipert_comm pipert_comm;
/* One non-blocking transfer or collective in flight. */
typedef struct pipert_request pipert_request;

typedef enum pipert_collective_op {
  PIPERT_COLLECTIVE_SUM = 0,
  PIPERT_COLLECTIVE_MEAN = 1, /* sum divided by the communicator size */
} pipert_collective_op;

/* Starts the transport (MPI_Init_thread, FUNNELED, unless MPI is already
 * initialised) and installs the abort hook so that pipert_fail ends every
 * rank. argc/argv may be NULL. Reads PIPERT_TIMEOUT_S. Call once per process,
 * before any other function here. */
void pipert_comm_init(pipert_context *ctx, int *argc, char ***argv);
/* Frees the communicators, removes the abort hook and finalises MPI when
 * pipert_comm_init initialised it. Collective: every rank calls it. */
void pipert_comm_finalize(pipert_context *ctx);
/* Whether pipert_comm_init has run (and finalize not yet). */
int pipert_comm_initialized(void);

/* All ranks of the job. Owned by the runtime; do not destroy. */
pipert_comm *pipert_comm_world(pipert_context *ctx);
int pipert_comm_rank(const pipert_comm *comm);
int pipert_comm_size(const pipert_comm *comm);
/* Rank of this process in the world communicator. */
int pipert_world_rank(void);

/* The bytes of each shared-memory ring between two ranks of this machine
 * (the CPU transport's path for messages of at most a quarter of it), or 0
 * where point-to-point messages all go through MPI (PIPERT_SHM=0, one rank
 * on the machine, a mapping that failed, or before pipert_comm_init). */
int64_t pipert_comm_ring_bytes(void);

/* Timeout of every wait, in seconds (> 0). */
void pipert_comm_set_timeout(double seconds);
double pipert_comm_timeout(void);

/* Point-to-point transfer of `count` elements of `dtype`. `peer` is a rank of
 * `comm`; `tag` is in 0..pipert_comm_max_tag(). A recv must match a send of
 * the same size: a different size is an error naming both. pipert_recv
 * returns with the data; pipert_send returns once `buf` may be reused. The
 * CPU (MPI) transport sends a message of at most PIPERT_SHM_RING/4 bytes
 * (256 KiB) to a rank of the same machine through a shared-memory ring: the
 * send returns once the message is copied in (PIPERT_SHM=0: through MPI as
 * below). Through MPI, it copies a message of more than 256 bytes into a staging
 * buffer and returns at once (buffered; up to PIPERT_SEND_BUFFER bytes in
 * flight per rank, default 64 MiB, or 0 when Open MPI's shared memory runs
 * without single copy; a message over 1/16 of it, or any with 0, is sent
 * directly, as is one of at most 256 bytes, which MPI sends inline);
 * the transfer then progresses inside the rank's later transport calls, and
 * pipert_comm_finalize completes every buffered send. Programs must not
 * rely on buffering: they are verified deadlock-free with sends that wait
 * for their receive. */
void pipert_send(pipert_context *ctx, pipert_comm *comm, const void *buf, int64_t count,
                 pipert_dtype dtype, int peer, int tag);
void pipert_recv(pipert_context *ctx, pipert_comm *comm, void *buf, int64_t count,
                 pipert_dtype dtype, int peer, int tag);
int pipert_comm_max_tag(const pipert_comm *comm);

/* Non-blocking variants: the buffer must stay valid and untouched until the
 * request is waited for. Transfers with the same peer and tag are matched in
 * the order they were posted; with different tags, in any order. */
pipert_request *pipert_isend(pipert_context *ctx, pipert_comm *comm, const void *buf,
                             int64_t count, pipert_dtype dtype, int peer, int tag);
pipert_request *pipert_irecv(pipert_context *ctx, pipert_comm *comm, void *buf, int64_t count,
                             pipert_dtype dtype, int peer, int tag);
/* Several buffers to or from one peer as one message: bufs[0..n) of
 * bytes[0..n) bytes each, back to back (the sizes must agree on both
 * sides). pipert_send_packed gathers them and sends the whole as
 * pipert_send does (returns once the buffers may be reused);
 * pipert_irecv_packed receives the whole and scatters it into bufs when its
 * request is waited for (pipert_wait/pipert_wait_all; pipert_test does not
 * scatter), or straight into them where they lie back to back. One message instead of n: the values a pipeline cut carries
 * for one micro-batch (a transformer's residual stream and the layer-norm
 * beside it) pay the per-message cost once. */
void pipert_send_packed(pipert_context *ctx, pipert_comm *comm, const void *const *bufs,
                        const int64_t *bytes, int n, int peer, int tag);
pipert_request *pipert_irecv_packed(pipert_context *ctx, pipert_comm *comm, void *const *bufs,
                                    const int64_t *bytes, int n, int peer, int tag);
/* Waits (with the timeout) for the request to complete and frees it.
 * pipert_wait(ctx, NULL) is a no-op. */
void pipert_wait(pipert_context *ctx, pipert_request *req);
/* Waits for all n requests (NULL entries are skipped) and frees them; the
 * timeout applies to the whole set and names the first one still pending. */
void pipert_wait_all(pipert_context *ctx, pipert_request **reqs, int n);
/* Returns 1 when the request has completed (it must still be waited for),
 * 0 otherwise. Never blocks. */
int pipert_test(pipert_context *ctx, pipert_request *req);

/* In-place allreduce of `count` float32 values over `comm`. */
void pipert_allreduce_f32(pipert_context *ctx, pipert_comm *comm, float *buf, int64_t count,
                          pipert_collective_op op);
/* Non-blocking allreduce; wait for it with pipert_wait. */
pipert_request *pipert_iallreduce_f32(pipert_context *ctx, pipert_comm *comm, float *buf,
                                      int64_t count, pipert_collective_op op);
/* In-place broadcast of `count` elements from rank `root` of `comm`. */
void pipert_broadcast(pipert_context *ctx, pipert_comm *comm, void *buf, int64_t count,
                      pipert_dtype dtype, int root);
/* Waits (with the timeout) until every rank of comm has arrived. */
void pipert_barrier(pipert_context *ctx, pipert_comm *comm);

/* Seconds this process has spent waiting for its transfers to complete (in
 * the transports' wait loops), for the run's busy fraction. */
double pipert_transport_wait_seconds(void);
void pipert_add_transport_wait(double seconds);

/* Groups from the P x S layout above; collective over the world (every rank
 * calls it with the same P and S, P*S == world size). Ranks within the group
 * are ordered by pipeline (stage group) or by stage (pipeline group).
 * - stage group: the P ranks that run this rank's stage, one per pipeline
 *   (gradient/weight averaging among replicas);
 * - pipeline group: the S ranks of this rank's pipeline. */
pipert_comm *pipert_comm_stage_group(pipert_context *ctx, int pipelines, int stages);
pipert_comm *pipert_comm_pipeline_group(pipert_context *ctx, int pipelines, int stages);
/* General split of `comm` (collective over it): ranks with the same color form
 * a group, ordered by key then by rank in comm. */
pipert_comm *pipert_comm_split(pipert_context *ctx, pipert_comm *comm, int color, int key);
/* Frees a communicator made by the functions above (not the world). */
void pipert_comm_destroy(pipert_context *ctx, pipert_comm *comm);
/* World rank of rank `rank` of comm. */
int pipert_comm_world_rank_of(const pipert_comm *comm, int rank);

#ifdef __cplusplus
}
#endif

#endif /* PIPERT_PIPERT_COMM_H */
