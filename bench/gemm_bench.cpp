//===- gemm_bench.cpp - single-precision GEMM throughput of pipert --------===//
//
// Times pipert_gemm_f32 (oneDNN's or OpenBLAS's sgemm underneath) on square and
// DNN-like shapes and prints GFLOP/s. bench/gemm.py runs this and numpy on
// the same shapes, one thread each, and prints the ratio.
//
// usage: gemm_bench [--threads N] [--json] [--min-time SECONDS] [--cold] [--median]
//                   [MxNxK[:NT|TN|TT] ...]
//
// The rate is of the fastest call; --median takes the median call instead
// (on a noisy host the two differ by up to 40%: 512x1024x256 best 172,
// median 93-110 GFLOP/s on the Xeon of family 6 model 207).
// --cold evicts the operands from the caches before every timed call (it
// writes a 64 MiB buffer), as in a training step, where the ops between two
// products of a shape have moved other tensors through the caches.
//===----------------------------------------------------------------------===//
#include "pipert/pipert_kernels.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

extern "C" char *openblas_get_corename(void);
extern "C" char *openblas_get_config(void);

namespace {

struct Shape {
  int64_t m, n, k;
  int ta = 0, tb = 0; // MxNxK:TN etc.: op(A), op(B) transposed
};

double seconds_now() {
  using clock = std::chrono::steady_clock;
  return std::chrono::duration<double>(clock::now().time_since_epoch()).count();
}

std::vector<char> g_flush; // non-empty under --cold
bool g_median = false;

void evict_caches() {
  for (size_t i = 0; i < g_flush.size(); i += 64)
    g_flush[i] = char(g_flush[i] + 1);
}

// Best-of-repeats GFLOP/s: repeats until min_time has passed, at least 3 times.
double bench(pipert_context *ctx, const Shape &s, double min_time) {
  std::vector<float> a(size_t(s.m * s.k)), b(size_t(s.k * s.n)), c(size_t(s.m * s.n));
  const int64_t lda = s.ta ? s.m : s.k, ldb = s.tb ? s.k : s.n;
  for (size_t i = 0; i < a.size(); ++i)
    a[i] = float((i * 7) % 13) * 0.01f;
  for (size_t i = 0; i < b.size(); ++i)
    b[i] = float((i * 5) % 11) * 0.01f;
  pipert_sgemm(ctx, s.ta, s.tb, s.m, s.n, s.k, 1.f, a.data(), lda, b.data(), ldb, 0.f, c.data(),
               s.n); // warm-up
  std::vector<double> times;
  double best = 1e30, start = seconds_now();
  int reps = 0;
  while (reps < 3 || seconds_now() - start < min_time) {
    if (!g_flush.empty())
      evict_caches();
    double t0 = seconds_now();
    pipert_sgemm(ctx, s.ta, s.tb, s.m, s.n, s.k, 1.f, a.data(), lda, b.data(), ldb, 0.f,
                 c.data(), s.n);
    double dt = seconds_now() - t0;
    best = std::min(best, dt);
    times.push_back(dt);
    ++reps;
  }
  std::sort(times.begin(), times.end());
  if (g_median)
    best = times[times.size() / 2];
  return 2.0 * double(s.m) * double(s.n) * double(s.k) / best * 1e-9;
}

} // namespace

int main(int argc, char **argv) {
  int threads = 1;
  bool json = false;
  double min_time = 0.5;
  std::vector<Shape> shapes;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--threads") && i + 1 < argc) {
      threads = std::atoi(argv[++i]);
    } else if (!std::strcmp(argv[i], "--json")) {
      json = true;
    } else if (!std::strcmp(argv[i], "--median")) {
      g_median = true;
    } else if (!std::strcmp(argv[i], "--cold")) {
      g_flush.assign(size_t(64) << 20, 0);
    } else if (!std::strcmp(argv[i], "--min-time") && i + 1 < argc) {
      min_time = std::atof(argv[++i]);
    } else {
      Shape s{};
      char t[3] = {'N', 'N', 0};
      int got = std::sscanf(argv[i], "%ldx%ldx%ld:%2[NT]", &s.m, &s.n, &s.k, t);
      if ((got != 3 && got != 4) || t[1] == 0) {
        std::fprintf(stderr, "gemm_bench: bad argument '%s' (want MxNxK or MxNxK:NT, TN, TT)\n",
                     argv[i]);
        return 2;
      }
      s.ta = t[0] == 'T';
      s.tb = t[1] == 'T';
      shapes.push_back(s);
    }
  }
  if (shapes.empty())
    shapes = {{256, 256, 256}, {512, 512, 512}, {1024, 1024, 1024},
              {64, 4096, 1024}, {4096, 1024, 64}, {128, 3136, 576},
              // The GPT's (bench/train_step.py): QKV, MLP up and down, attention.
              {512, 768, 256}, {512, 1024, 256}, {512, 256, 1024}, {64, 64, 64},
              // Tiny: below the size pipert hands to oneDNN.
              {16, 16, 16}};
  pipert_context *ctx = pipert_context_create(threads, 1);
  const char *core = openblas_get_corename();
  if (json)
    std::printf("{\"threads\": %d, \"openblas_core\": \"%s\", \"results\": [", threads, core);
  else
    std::printf("pipert sgemm, %d thread(s), OpenBLAS core %s (%s)\n", threads, core,
                openblas_get_config());
  for (size_t i = 0; i < shapes.size(); ++i) {
    const Shape &s = shapes[i];
    double gf = bench(ctx, s, min_time);
    if (json)
      std::printf("%s{\"m\": %ld, \"n\": %ld, \"k\": %ld, \"trans\": \"%c%c\", "
                  "\"gflops\": %.3f}",
                  i ? ", " : "", s.m, s.n, s.k, s.ta ? 'T' : 'N', s.tb ? 'T' : 'N', gf);
    else
      std::printf("%5ldx%5ldx%5ld:%c%c  %8.2f GFLOP/s  %8.3f us\n", s.m, s.n, s.k,
                  s.ta ? 'T' : 'N', s.tb ? 'T' : 'N', gf,
                  2.0 * double(s.m * s.n * s.k) / gf * 1e-3);
  }
  if (json)
    std::printf("]}\n");
  pipert_context_destroy(ctx);
  return 0;
}
