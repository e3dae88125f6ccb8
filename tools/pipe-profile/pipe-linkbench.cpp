//===- pipe-linkbench.cpp - ping-pong between two ranks: pipert vs MPI ----===//
//
//   mpirun -np 2 pipe-linkbench [--json out.json] [--max-bytes N] [--iters K]
//                                [--exchange BYTES [--compute-us U] [--touch BYTES]]
//
// Round trips of messages from 4 bytes to --max-bytes (default 64 MiB)
// between ranks 0 and 1, through the runtime's transport (pipert_send /
// pipert_recv, what pipelines use) and, side by side in the same run,
// through MPI_Send / MPI_Recv directly. Rank 0 prints the one-way time of
// each size for both and their ratio, and the link model pipe-profile
// stores: latency (one-way time of 4 bytes) and bandwidth (of the largest
// size). Times are medians over K round trips (fewer for large messages).
//
// --exchange BYTES instead measures what a 1F1B micro-batch costs each rank
// in the transport's calls, the latency aside: both ranks repeat U us of
// compute (default 8; touching --touch bytes of memory, default 0, to put
// the transport's state out of cache as a stage's kernels do), then post the
// receive of the next message (pipert_irecv_packed of two halves), send one
// (pipert_send_packed) and wait for the receive (pipert_wait). The peer's
// message is there by then, so the times are the calls' own: each rank
// prints the mean time in each call over K exchanges (default 2000).
//
//===----------------------------------------------------------------------===//
#include "pipert/pipert.h"
#include "pipert/pipert_comm.h"

#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

double now() {
  return std::chrono::duration<double>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

int usage(const char *message) {
  std::fprintf(stderr, "pipe-linkbench: error: %s\n", message);
  return 2;
}

} // namespace

// --exchange: see the header.
int exchange(pipert_context *ctx, pipert_comm *world, int rank, int64_t bytes,
             double computeUs, int64_t touchBytes, int iters) {
  const int peer = 1 - rank;
  const int64_t half[2] = {bytes / 2, bytes - bytes / 2};
  std::vector<char> in(size_t(bytes) + 1), out(size_t(bytes) + 1, 1);
  // Not back to back: the receive scatters, as a stage's two inputs do.
  std::vector<char> in2(size_t(half[1]) + 1);
  std::vector<char> touch(size_t(std::max<int64_t>(touchBytes, 64)), 1);
  volatile char sink = 0;
  double post = 0, send = 0, wait = 0;
  const int warm = 50;
  for (int i = 0; i < warm + iters; ++i) {
    const double start = now();
    size_t at = 0;
    while (now() - start < computeUs * 1e-6) {
      for (int r = 0; r < 64; ++r, at += 64) {
        if (at >= touch.size())
          at = 0;
        touch[at] = char(touch[at] + 1);
      }
    }
    sink = touch[0];
    void *rb[2] = {in.data(), in2.data()};
    const void *sb[2] = {out.data(), out.data() + half[0]};
    const double t0 = now();
    pipert_request *r = pipert_irecv_packed(ctx, world, rb, half, 2, peer, 3);
    const double t1 = now();
    pipert_send_packed(ctx, world, sb, half, 2, peer, 3);
    const double t2 = now();
    pipert_wait(ctx, r);
    const double t3 = now();
    if (i >= warm) {
      post += t1 - t0;
      send += t2 - t1;
      wait += t3 - t2;
    }
  }
  (void)sink;
  std::printf("rank %d: exchange of %lld bytes (2 parts), %.1f us of compute touching %lld "
              "bytes between: irecv_packed %.3f us, send_packed %.3f us, wait %.3f us a call "
              "(mean of %d)\n",
              rank, (long long)bytes, computeUs, (long long)touchBytes, post / iters * 1e6,
              send / iters * 1e6, wait / iters * 1e6, iters);
  return 0;
}

int main(int argc, char **argv) {
  std::string jsonPath;
  int64_t maxBytes = int64_t(64) << 20;
  int iters = 200;
  bool itersGiven = false;
  int64_t exchangeBytes = 0, touchBytes = 0;
  double computeUs = 8;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--json" && i + 1 < argc)
      jsonPath = argv[++i];
    else if (a == "--max-bytes" && i + 1 < argc)
      maxBytes = std::atoll(argv[++i]);
    else if (a == "--iters" && i + 1 < argc) {
      iters = std::atoi(argv[++i]);
      itersGiven = true;
    }
    else if (a == "--exchange" && i + 1 < argc)
      exchangeBytes = std::atoll(argv[++i]);
    else if (a == "--compute-us" && i + 1 < argc)
      computeUs = std::atof(argv[++i]);
    else if (a == "--touch" && i + 1 < argc)
      touchBytes = std::atoll(argv[++i]);
    else if (a == "--help" || a == "-h") {
      std::printf("usage: mpirun -np 2 pipe-linkbench [--json out.json] "
                  "[--max-bytes N] [--iters K]\n"
                  "       mpirun -np 2 pipe-linkbench --exchange BYTES [--compute-us U] "
                  "[--touch BYTES] [--iters K]\n");
      return 0;
    } else
      return usage(("unknown argument '" + a + "' (see --help)").c_str());
  }
  if (maxBytes < 4 || iters < 1)
    return usage("--max-bytes must be >= 4 and --iters >= 1");
  if (exchangeBytes < 0 || touchBytes < 0 || !(computeUs >= 0))
    return usage("--exchange, --touch and --compute-us must be >= 0");
  pipert_context *ctx = pipert_context_create(1, 1);
  pipert_comm_init(ctx, &argc, &argv);
  pipert_comm *world = pipert_comm_world(ctx);
  int rank = pipert_comm_rank(world), size = pipert_comm_size(world);
  if (size != 2) {
    if (rank == 0)
      usage("run it on exactly 2 ranks: mpirun -np 2 pipe-linkbench");
    pipert_comm_finalize(ctx);
    return 2;
  }
  if (exchangeBytes > 0) {
    int rc = exchange(ctx, world, rank, exchangeBytes, computeUs, touchBytes,
                      itersGiven ? iters : 2000);
    pipert_comm_finalize(ctx);
    pipert_context_destroy(ctx);
    return rc;
  }
  int peer = 1 - rank;
  std::vector<char> buf(size_t(maxBytes), 1);
  struct Row {
    int64_t bytes;
    double pipert, mpi;
  };
  std::vector<Row> rows;
  for (int64_t bytes = 4; bytes <= maxBytes; bytes *= 4) {
    int k = int(std::max<int64_t>(5, std::min<int64_t>(iters, (int64_t(256) << 20) / bytes)));
    auto run = [&](bool viaPipert) {
      std::vector<double> times;
      for (int i = 0; i < k + 2; ++i) {
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = now();
        if (rank == 0) {
          if (viaPipert) {
            pipert_send(ctx, world, buf.data(), bytes, PIPERT_U8, peer, 1);
            pipert_recv(ctx, world, buf.data(), bytes, PIPERT_U8, peer, 2);
          } else {
            MPI_Send(buf.data(), int(bytes), MPI_BYTE, peer, 1, MPI_COMM_WORLD);
            MPI_Recv(buf.data(), int(bytes), MPI_BYTE, peer, 2, MPI_COMM_WORLD,
                     MPI_STATUS_IGNORE);
          }
        } else {
          if (viaPipert) {
            pipert_recv(ctx, world, buf.data(), bytes, PIPERT_U8, peer, 1);
            pipert_send(ctx, world, buf.data(), bytes, PIPERT_U8, peer, 2);
          } else {
            MPI_Recv(buf.data(), int(bytes), MPI_BYTE, peer, 1, MPI_COMM_WORLD,
                     MPI_STATUS_IGNORE);
            MPI_Send(buf.data(), int(bytes), MPI_BYTE, peer, 2, MPI_COMM_WORLD);
          }
        }
        if (i >= 2)
          times.push_back((now() - t0) / 2);
      }
      return median(times);
    };
    // Alternate, so that both see the same machine.
    double p = run(true), m = run(false);
    rows.push_back({bytes, p, m});
  }
  if (rank == 0) {
    std::printf("%12s %14s %14s %8s %12s\n", "bytes", "pipert (us)",
                "MPI (us)", "ratio", "pipert GB/s");
    for (const Row &r : rows)
      std::printf("%12lld %14.2f %14.2f %8.2f %12.3f\n", (long long)r.bytes,
                  r.pipert * 1e6, r.mpi * 1e6, r.mpi > 0 ? r.pipert / r.mpi : 0.0,
                  r.pipert > 0 ? double(r.bytes) / r.pipert / 1e9 : 0.0);
    double latency = rows.front().pipert;
    const Row &big = rows.back();
    double bandwidth =
        big.pipert > latency ? double(big.bytes) / (big.pipert - latency) : 0;
    std::printf("link: latency %.2f us, bandwidth %.3f GB/s (pipert/MPI at 4 "
                "bytes: %.2fx)\n",
                latency * 1e6, bandwidth / 1e9, rows.front().pipert / rows.front().mpi);
    if (!jsonPath.empty()) {
      FILE *f = std::fopen(jsonPath.c_str(), "w");
      if (!f) {
        std::fprintf(stderr, "pipe-linkbench: error: cannot write %s\n",
                     jsonPath.c_str());
      } else {
        std::fprintf(f, "{\"latency_s\": %.9g, \"bandwidth_bytes_per_s\": %.9g, \"rows\": [",
                     latency, bandwidth);
        for (size_t i = 0; i < rows.size(); ++i)
          std::fprintf(f, "%s{\"bytes\": %lld, \"pipert_s\": %.9g, \"mpi_s\": %.9g}",
                       i ? ", " : "", (long long)rows[i].bytes, rows[i].pipert,
                       rows[i].mpi);
        std::fprintf(f, "]}\n");
        std::fclose(f);
      }
    }
  }
  pipert_comm_finalize(ctx);
  pipert_context_destroy(ctx);
  return 0;
}
