//===- comm_fault.cpp - a job in which one rank misbehaves -----------------===//
//
//   comm_fault MODE      (under mpirun, >= 2 ranks)
//
// Rank 1 misbehaves; rank 0 must end the whole job with a clear error
// instead of waiting for ever. expect_failure.sh checks the exit status, the
// message and the time taken.
//   stall-recv       rank 1 sleeps instead of sending; rank 0's recv times out
//   stall-send       rank 1 sleeps instead of receiving a large message; rank
//                    0's send (buffered) times out when finalize completes it
//   head-to-head     ranks 0 and 1 send each other 1 MiB before receiving:
//                    fine with buffered sends, a deadlock (caught by the
//                    timeout) with PIPERT_SEND_BUFFER=0
//   bad-env          nothing: run with a malformed PIPERT_SEND_BUFFER
//   stall-allreduce  rank 1 skips an allreduce
//   kill             rank 1 is killed (SIGKILL) while rank 0 waits
//   fail             rank 1 fails with pipert_fail while rank 0 waits
//   size-mismatch    rank 0 sends 8 bytes where rank 1 expects 16
//   size-straddle    rank 0 sends 300000 bytes where rank 1 expects 200000
//   tag-range        rank 0 uses a negative tag
#include "pipert/pipert_comm.h"

#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

int main(int argc, char **argv) {
  pipert_context *ctx = pipert_context_create(1, 1);
  pipert_comm_init(ctx, &argc, &argv);
  if (argc < 2) {
    std::fprintf(stderr, "usage: comm_fault MODE\n");
    return 2;
  }
  const std::string mode = argv[1];
  pipert_comm *world = pipert_comm_world(ctx);
  const int rank = pipert_comm_rank(world);
  // Ranks other than 0 and 1 wait for the end; the abort must reach them too.
  pipert_barrier(ctx, world);
  std::vector<float> buf(1024, 1.0f);

  if (mode == "stall-recv") {
    if (rank == 0)
      pipert_recv(ctx, world, buf.data(), 1024, PIPERT_F32, 1, 7);
    else
      sleep(60);
  } else if (mode == "stall-send") {
    std::vector<float> big(1 << 20, 2.0f); // 4 MiB: rendezvous, needs the receiver
    if (rank == 0)
      pipert_send(ctx, world, big.data(), big.size(), PIPERT_F32, 1, 3);
    else
      sleep(60);
  } else if (mode == "head-to-head") {
    std::vector<float> out(1 << 18, 1.0f), in(1 << 18);
    if (rank < 2) {
      pipert_send(ctx, world, out.data(), out.size(), PIPERT_F32, 1 - rank, 9);
      pipert_recv(ctx, world, in.data(), in.size(), PIPERT_F32, 1 - rank, 9);
    }
  } else if (mode == "bad-env") {
  } else if (mode == "stall-allreduce") {
    if (rank != 1)
      pipert_allreduce_f32(ctx, world, buf.data(), 1024, PIPERT_COLLECTIVE_SUM);
    else
      sleep(60);
  } else if (mode == "kill") {
    if (rank == 1) {
      usleep(200 * 1000);
      std::raise(SIGKILL);
    }
    if (rank == 0)
      pipert_recv(ctx, world, buf.data(), 1024, PIPERT_F32, 1, 7);
    else
      sleep(60);
  } else if (mode == "fail") {
    if (rank == 1) {
      usleep(200 * 1000);
      pipert_fail("rank 1 gives up on purpose");
    }
    if (rank == 0)
      pipert_recv(ctx, world, buf.data(), 1024, PIPERT_F32, 1, 7);
    else
      sleep(60);
  } else if (mode == "size-mismatch") {
    if (rank == 0)
      pipert_send(ctx, world, buf.data(), 2, PIPERT_F32, 1, 5);
    else if (rank == 1)
      pipert_recv(ctx, world, buf.data(), 4, PIPERT_F32, 0, 5);
    else
      sleep(60);
  } else if (mode == "size-straddle") {
    // 300000 bytes (MPI) where rank 1 expects 200000 (the shared-memory
    // rings): they never meet; the timeout says why that may be.
    // (Rank 0 posts its send and never waits for it, so that only rank 1's
    // receive can time out.)
    std::vector<char> big(300000);
    if (rank == 0)
      pipert_isend(ctx, world, big.data(), 300000, PIPERT_U8, 1, 6);
    if (rank == 1)
      pipert_recv(ctx, world, big.data(), 200000, PIPERT_U8, 0, 6);
    else
      sleep(60);
  } else if (mode == "tag-range") {
    if (rank == 0)
      pipert_send(ctx, world, buf.data(), 1, PIPERT_F32, 1, -1);
    else
      sleep(60);
  } else {
    std::fprintf(stderr, "comm_fault: unknown mode %s\n", mode.c_str());
    return 2;
  }
  // Reaching this point means the fault went unnoticed.
  std::printf("rank %d: no failure detected\n", rank);
  pipert_comm_finalize(ctx);
  return 0;
}
