//===- context.cpp - the runtime context, memory and errors (CPU) ----------===//
#include "env_threads.h"
#include "pipert/pipert.h"
#include "pipert/pipert_comm.h"

#include <algorithm>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <unordered_map>
#include <vector>

struct pipert_context {
  pipert_backend backend = PIPERT_BACKEND_CPU;
  int threads = 1;
  uint64_t rng = 0;
};

static pipert_abort_hook g_abort_hook = nullptr;
static int g_error_rank = -1;

extern "C" {

size_t pipert_dtype_size(pipert_dtype t) {
  switch (t) {
  case PIPERT_F32: case PIPERT_I32: return 4;
  case PIPERT_F64: case PIPERT_I64: return 8;
  case PIPERT_U8: case PIPERT_I8: case PIPERT_BOOL: return 1;
  case PIPERT_F16: return 2;
  }
  return 0;
}

const char *pipert_dtype_name(pipert_dtype t) {
  switch (t) {
  case PIPERT_F32: return "float32";
  case PIPERT_F64: return "float64";
  case PIPERT_I64: return "int64";
  case PIPERT_I32: return "int32";
  case PIPERT_U8: return "uint8";
  case PIPERT_I8: return "int8";
  case PIPERT_BOOL: return "bool";
  case PIPERT_F16: return "float16";
  }
  return "unknown";
}

void pipert_set_abort_hook(pipert_abort_hook hook) { g_abort_hook = hook; }

void pipert_set_error_rank(int rank) { g_error_rank = rank; }

// Device memory in use and its high-water mark, kept by both backends'
// pipert_alloc/pipert_free (the run's final report).
static std::mutex g_memory_mutex;
static std::unordered_map<void *, size_t> g_allocations;
static size_t g_memory_in_use = 0, g_memory_peak = 0;

void pipert_note_alloc(void *ptr, size_t bytes) {
  std::lock_guard<std::mutex> lock(g_memory_mutex);
  g_allocations[ptr] = bytes;
  g_memory_in_use += bytes;
  g_memory_peak = std::max(g_memory_peak, g_memory_in_use);
}

// Forgets `ptr`'s allocation; its size, or 0 if it was not noted.
static size_t take_allocation(void *ptr) {
  std::lock_guard<std::mutex> lock(g_memory_mutex);
  auto it = g_allocations.find(ptr);
  if (it == g_allocations.end())
    return 0;
  size_t bytes = it->second;
  g_memory_in_use -= bytes;
  g_allocations.erase(it);
  return bytes;
}

void pipert_note_free(void *ptr) { take_allocation(ptr); }

#if !defined(PIPERT_CUDA_BACKEND)
namespace {
size_t cpu_peak_bytes();
}
#endif

size_t pipert_peak_memory_bytes(void) {
  size_t peak;
  {
    std::lock_guard<std::mutex> lock(g_memory_mutex);
    peak = g_memory_peak;
  }
#if !defined(PIPERT_CUDA_BACKEND)
  peak = std::max(peak, cpu_peak_bytes());
#endif
  return peak;
}

static double g_transport_wait = 0.0;
void pipert_add_transport_wait(double seconds) { g_transport_wait += seconds; }
double pipert_transport_wait_seconds(void) { return g_transport_wait; }

void pipert_fail(const char *fmt, ...) {
  std::fflush(stdout);
  // One write of the whole line: under mpirun a rank's stderr is forwarded
  // in the chunks it was written in, and Open MPI's abort message could
  // land between the pieces of a line written piecemeal.
  char line[4096];
  int n = std::snprintf(line, sizeof line, "pipert: error: ");
  if (g_error_rank >= 0)
    n += std::snprintf(line + n, sizeof line - size_t(n), "rank %d: ", g_error_rank);
  va_list args;
  va_start(args, fmt);
  int m = std::vsnprintf(line + n, sizeof line - size_t(n), fmt, args);
  va_end(args);
  n = std::min<int>(n + std::max(m, 0), int(sizeof line) - 2);
  line[n++] = '\n';
  line[n] = '\0';
  std::fputs(line, stderr);
  std::fflush(stderr);
  if (g_abort_hook)
    g_abort_hook(1);
  std::exit(1);
}

} // extern "C"

#if !defined(PIPERT_CUDA_BACKEND)
extern "C" {

pipert_context *pipert_context_create(int threads, uint64_t seed) {
  auto *ctx = new pipert_context();
  ctx->threads = pipert::threadsFromEnvironment(threads);
  ctx->rng = seed ? seed : 0x9E3779B97F4A7C15ull;
  return ctx;
}

void pipert_context_destroy(pipert_context *ctx) { delete ctx; }
pipert_backend pipert_context_backend(const pipert_context *ctx) { return ctx->backend; }
int pipert_context_threads(const pipert_context *ctx) { return ctx->threads; }

uint64_t pipert_context_next_random(pipert_context *ctx) {
  // splitmix64: small, fast, and the same on every platform.
  uint64_t z = (ctx->rng += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

uint64_t pipert_context_random_state(const pipert_context *ctx) { return ctx->rng; }
void pipert_context_set_random_state(pipert_context *ctx, uint64_t state) { ctx->rng = state; }

// Freed blocks are kept for the next allocation of the same rounded size:
// a step allocates and frees the same blocks in the same order every time
// (each micro-batch's stage call too), so after the first step nothing goes
// to malloc, and large blocks are not returned to the kernel and faulted in
// again. Not under AddressSanitizer, which must see every free.
//
// Every block carries its size in a 64-byte header in front of it, so that
// pipert_free needs no map from pointers to sizes: a micro-batch of a small
// model allocates a few hundred blocks, and a hash-map node per block (its
// own malloc and free, under a lock) cost more than many of the kernels
// (12% of a 2-sample transformer step, measured with perf).
#if defined(__SANITIZE_ADDRESS__)
#define PIPERT_CACHE_BLOCKS 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define PIPERT_CACHE_BLOCKS 0
#endif
#endif
#ifndef PIPERT_CACHE_BLOCKS
#define PIPERT_CACHE_BLOCKS 1
#endif

namespace {

constexpr size_t kHeader = 64;
constexpr uint64_t kBlockMagic = 0x706970657274626cull; // "pipertbl"

struct BlockHeader {
  size_t bytes;   // the rounded size the caller may use
  uint64_t magic; // kBlockMagic while allocated, 0 once freed
};

// Free lists by rounded size: sizes up to kSmallClasses * 64 bytes index an
// array, larger ones a map.
constexpr size_t kSmallClasses = 1024;
std::mutex g_cache_mutex;
std::vector<void *> g_small_free[kSmallClasses + 1];
std::unordered_map<size_t, std::vector<void *>> g_large_free;
size_t g_cpu_in_use = 0, g_cpu_peak = 0;

std::vector<void *> &free_list(size_t rounded) {
  size_t cls = rounded / 64;
  return cls <= kSmallClasses ? g_small_free[cls] : g_large_free[rounded];
}

size_t cpu_peak_bytes() {
  std::lock_guard<std::mutex> lock(g_cache_mutex);
  return g_cpu_peak;
}

} // namespace

void *pipert_alloc(pipert_context *, size_t bytes) {
  size_t rounded = bytes ? (bytes + 63) / 64 * 64 : 64;
  void *base = nullptr;
  {
    std::lock_guard<std::mutex> lock(g_cache_mutex);
    if (PIPERT_CACHE_BLOCKS) {
      std::vector<void *> &list = free_list(rounded);
      if (!list.empty()) {
        base = list.back();
        list.pop_back();
      }
    }
    g_cpu_in_use += rounded;
    g_cpu_peak = std::max(g_cpu_peak, g_cpu_in_use);
  }
  if (!base)
    base = std::aligned_alloc(64, rounded + kHeader);
  if (!base)
    pipert_fail("out of memory allocating %zu bytes", bytes);
  auto *h = static_cast<BlockHeader *>(base);
  h->bytes = rounded;
  h->magic = kBlockMagic;
  return static_cast<char *>(base) + kHeader;
}

void pipert_free(pipert_context *, void *ptr) {
  if (!ptr)
    return;
  void *base = static_cast<char *>(ptr) - kHeader;
  auto *h = static_cast<BlockHeader *>(base);
  if (h->magic != kBlockMagic)
    pipert_fail("pipert_free: %p was not allocated by pipert_alloc, or was freed twice", ptr);
  h->magic = 0;
  size_t rounded = h->bytes;
  std::lock_guard<std::mutex> lock(g_cache_mutex);
  g_cpu_in_use -= rounded;
  if (PIPERT_CACHE_BLOCKS) {
    free_list(rounded).push_back(base);
    return;
  }
  std::free(base);
}

void pipert_copy_to_device(pipert_context *, void *d, const void *s, size_t n) { if (n) std::memcpy(d, s, n); }
void pipert_copy_to_host(pipert_context *, void *d, const void *s, size_t n) { if (n) std::memcpy(d, s, n); }
void pipert_copy_device(pipert_context *, void *d, const void *s, size_t n) { if (n) std::memmove(d, s, n); }
void pipert_memset_zero(pipert_context *, void *d, size_t n) { if (n) std::memset(d, 0, n); }
void pipert_synchronize(pipert_context *) {}

} // extern "C"
#endif
