//===- thread_pool.cpp - the kernels' parallel parts on OpenMP's team (CPU) ===//
//
// parallel_for (kernel_util.h) hands run_parts a fixed split: part p is
// [p * chunk, (p + 1) * chunk) of [0, n), so the results do not depend on
// which thread runs a part. The parts run on the OpenMP team that oneDNN's
// GEMMs and convolutions already run on (Debian's oneDNN is built with GNU
// OpenMP), as PyTorch's kernels do.
//
// History, measured here (2 cores, 2 kernel threads, the two versions
// alternating under one compiled program):
// - A std::thread per part on every call: a thread's start and join (~20
//   us) per parallel kernel, and the vector holding them allocated.
// - A pool of our own threads, blocked on a condition variable between
//   calls (the thirty-first session): the GPT's step 136 / 142 / 146 ->
//   128 / 115 / 131 ms. But oneDNN's OpenMP threads wait for their next
//   region spinning, so right after a GEMM or convolution the pool's thread
//   found its core taken: at 2 threads the GPT's attention took 12.6 / 9.8
//   ms a step, its GELU 8.4 / 7.2; ResNet-18's optimizer update 8.0 ms,
//   its BatchNormalization 7.2.
// - OpenMP's team: the spinning thread takes the part at once. GPT
//   attention 5.3 / 6.4 ms, GELU 3.6 / 4.2, the whole step 132 / 141 ->
//   104 / 118 ms; ResNet-18's update 5.7 ms, BatchNormalization 6.2.
//
// A part that calls a parallel kernel itself (inside a parallel region),
// runs its parts on its own thread. So does a child of fork(): GNU OpenMP's
// team does not survive a fork (its threads are not in the child, which
// would wait for them), so after fork the kernels run serially; a launcher
// execs its ranks, and a death test's child needs no speed.
//===----------------------------------------------------------------------===//
#include "kernel_util.h"

#include <omp.h>
#include <pthread.h>

namespace pipert::cpu {
namespace {

bool forked_child = false;
[[maybe_unused]] const bool atfork_registered = [] {
  pthread_atfork(nullptr, nullptr, [] { forked_child = true; });
  return true;
}();

} // namespace

void run_parts(int parts, int64_t n, int64_t chunk, void *obj,
               void (*call)(void *, int64_t, int64_t)) {
  auto part = [&](int p) {
    const int64_t b = p * chunk, e = std::min(n, b + chunk);
    if (b < e)
      call(obj, b, e);
  };
  if (parts <= 1 || forked_child || omp_in_parallel()) {
    for (int p = 0; p < parts; ++p)
      part(p);
    return;
  }
  // The team may be smaller than asked (OMP_THREAD_LIMIT): its threads
  // take the parts round-robin.
#pragma omp parallel num_threads(parts)
  {
    const int threads = omp_get_num_threads();
    for (int p = omp_get_thread_num(); p < parts; p += threads)
      part(p);
  }
}

} // namespace pipert::cpu
