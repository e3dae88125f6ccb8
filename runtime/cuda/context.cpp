//===- context.cpp - the runtime context and memory on CUDA ----------------===//
//
// One device per rank: PIPERT_DEVICE, else the rank's local rank (from the
// launcher's environment) modulo the visible devices. All work of a rank runs
// on one stream; memory comes from the device's stream-ordered pool
// (cudaMallocAsync), kept cached (release threshold = all), so pipert_alloc /
// pipert_free in a training step do not reach the driver after the first step.
//
// The dtype helpers, pipert_fail and the abort hook are runtime/core/context.cpp,
// compiled into this library with PIPERT_CUDA_BACKEND.
//===----------------------------------------------------------------------===//
#include "../core/env_threads.h"
#include "cuda_util.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>

using namespace pipert::cuda;

namespace {

// The launcher's local rank, or -1. Read before MPI_Init (the context may be
// created first), so from the environment of Open MPI, MPICH/Hydra, Slurm or
// torchrun-style launchers.
int local_rank_from_env() {
  const char *vars[] = {"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "PMI_LOCAL_RANK",
                        "MV2_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID", "LOCAL_RANK"};
  for (const char *v : vars)
    if (const char *s = std::getenv(v)) {
      char *end = nullptr;
      long r = std::strtol(s, &end, 10);
      if (end != s && *end == '\0' && r >= 0)
        return int(r);
    }
  return -1;
}

int choose_device(int count) {
  if (const char *s = std::getenv("PIPERT_DEVICE")) {
    char *end = nullptr;
    long d = std::strtol(s, &end, 10);
    if (end == s || *end != '\0' || d < 0 || d >= count)
      pipert_fail("PIPERT_DEVICE='%s' is not a device index in 0..%d", s, count - 1);
    return int(d);
  }
  int local = local_rank_from_env();
  return local < 0 ? 0 : local % count;
}

} // namespace

namespace pipert::cuda {

const char *cublas_status_name(cublasStatus_t s) {
  switch (s) {
  case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
  case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
  case CUBLAS_STATUS_ALLOC_FAILED: return "CUBLAS_STATUS_ALLOC_FAILED";
  case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
  case CUBLAS_STATUS_ARCH_MISMATCH: return "CUBLAS_STATUS_ARCH_MISMATCH";
  case CUBLAS_STATUS_MAPPING_ERROR: return "CUBLAS_STATUS_MAPPING_ERROR";
  case CUBLAS_STATUS_EXECUTION_FAILED: return "CUBLAS_STATUS_EXECUTION_FAILED";
  case CUBLAS_STATUS_INTERNAL_ERROR: return "CUBLAS_STATUS_INTERNAL_ERROR";
  case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
  case CUBLAS_STATUS_LICENSE_ERROR: return "CUBLAS_STATUS_LICENSE_ERROR";
  }
  return "unknown cuBLAS status";
}

void check_device_errors(pipert_context *ctx) {
  Context *c = cx(ctx);
  PIPERT_CUDA_CHECK(cudaMemcpyAsync(c->err_host, c->err, sizeof(DeviceError),
                                    cudaMemcpyDeviceToHost, c->stream));
  PIPERT_CUDA_CHECK(cudaStreamSynchronize(c->stream));
  const DeviceError e = *c->err_host;
  switch (e.code) {
  case kErrNone: return;
  case kErrGatherIndex:
    pipert_fail("Gather: index %lld out of range for an axis of extent %lld", e.value, e.aux);
  case kErrGatherGradIndex:
    pipert_fail("GatherGrad: index %lld out of range", e.value);
  case kErrTupleIndex:
    pipert_fail("GatherND/ScatterND: index %lld out of range for an axis of extent %lld",
                e.value, e.aux);
  case kErrElementIndex:
    pipert_fail("GatherElements/ScatterElements: index %lld out of range for an axis of extent "
                "%lld",
                e.value, e.aux);
  case kErrLabel:
    pipert_fail("SoftmaxCrossEntropyLoss/NegativeLogLikelihoodLoss: label %lld out of range "
                "[0, %lld)",
                e.value, e.aux);
  case kErrIntDivZero:
    pipert_fail("Div: integer division by zero");
  }
  pipert_fail("a CUDA kernel raised unknown error %d", e.code);
}

} // namespace pipert::cuda

extern "C" {

pipert_context *pipert_context_create(int threads, uint64_t seed) {
  int count = 0;
  cudaError_t st = cudaGetDeviceCount(&count);
  if (st == cudaErrorNoDevice || st == cudaErrorInsufficientDriver || count == 0)
    pipert_fail("no CUDA device: the CUDA backend (libpipert_cuda) needs a GPU (%s); link "
                "libpipert_cpu to run on the CPU",
                st == cudaSuccess ? "cudaGetDeviceCount reports 0 devices"
                                  : cudaGetErrorString(st));
  PIPERT_CUDA_CHECK(st);
  auto *c = new Context();
  c->threads = pipert::threadsFromEnvironment(threads);
  c->rng = seed ? seed : 0x9E3779B97F4A7C15ull;
  c->device = choose_device(count);
  PIPERT_CUDA_CHECK(cudaSetDevice(c->device));
  PIPERT_CUDA_CHECK(cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking));
  PIPERT_CUDA_CHECK(cudaDeviceGetAttribute(&c->sm_count, cudaDevAttrMultiProcessorCount,
                                           c->device));
  // Keep freed pool memory cached instead of returning it at each sync.
  cudaMemPool_t pool;
  PIPERT_CUDA_CHECK(cudaDeviceGetDefaultMemPool(&pool, c->device));
  uint64_t threshold = UINT64_MAX;
  PIPERT_CUDA_CHECK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &threshold));
  PIPERT_CUBLAS_CHECK(cublasCreate(&c->blas));
  PIPERT_CUBLAS_CHECK(cublasSetStream(c->blas, c->stream));
  // Full fp32 GEMMs by default (results match the CPU backend); TF32 tensor
  // cores on request.
  const char *tf32 = std::getenv("PIPERT_TF32");
  PIPERT_CUBLAS_CHECK(cublasSetMathMode(
      c->blas, tf32 && std::strcmp(tf32, "1") == 0 ? CUBLAS_TF32_TENSOR_OP_MATH
                                                   : CUBLAS_DEFAULT_MATH));
  PIPERT_CUDA_CHECK(cudaMalloc(reinterpret_cast<void **>(&c->err), sizeof(DeviceError)));
  PIPERT_CUDA_CHECK(cudaMemsetAsync(c->err, 0, sizeof(DeviceError), c->stream));
  PIPERT_CUDA_CHECK(cudaMallocHost(reinterpret_cast<void **>(&c->err_host), sizeof(DeviceError)));
  std::memset(c->err_host, 0, sizeof(DeviceError));
  PIPERT_CUDA_CHECK(cudaStreamSynchronize(c->stream));
  return reinterpret_cast<pipert_context *>(c);
}

void pipert_context_destroy(pipert_context *ctx) {
  if (!ctx)
    return;
  Context *c = cx(ctx);
  PIPERT_CUDA_CHECK(cudaStreamSynchronize(c->stream));
  cublasDestroy(c->blas);
  cudaFree(c->err);
  cudaFreeHost(c->err_host);
  cudaStreamDestroy(c->stream);
  delete c;
}

pipert_backend pipert_context_backend(const pipert_context *ctx) { return cx(ctx)->backend; }
int pipert_context_threads(const pipert_context *ctx) { return cx(ctx)->threads; }

uint64_t pipert_context_next_random(pipert_context *ctx) {
  // splitmix64, as on the CPU: the same masks and shuffles on either backend.
  uint64_t z = (cx(ctx)->rng += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

uint64_t pipert_context_random_state(const pipert_context *ctx) { return cx(ctx)->rng; }
void pipert_context_set_random_state(pipert_context *ctx, uint64_t state) { cx(ctx)->rng = state; }

void *pipert_alloc(pipert_context *ctx, size_t bytes) {
  Context *c = cx(ctx);
  size_t rounded = (bytes + 63) / 64 * 64;
  void *p = nullptr;
  cudaError_t st = cudaMallocAsync(&p, rounded ? rounded : 64, c->stream);
  if (st != cudaSuccess || !p) {
    size_t free_b = 0, total_b = 0;
    cudaGetLastError();
    cudaMemGetInfo(&free_b, &total_b);
    pipert_fail("out of device memory allocating %zu bytes on CUDA device %d (%s; %zu of %zu "
                "bytes free)",
                bytes, c->device, cudaGetErrorString(st), free_b, total_b);
  }
  if (reinterpret_cast<uintptr_t>(p) % 64 != 0)
    pipert_fail("cudaMallocAsync returned %p, not 64-byte aligned", p);
  pipert_note_alloc(p, rounded ? rounded : 64);
  return p;
}

void pipert_free(pipert_context *ctx, void *ptr) {
  if (ptr) {
    pipert_note_free(ptr);
    PIPERT_CUDA_CHECK(cudaFreeAsync(ptr, cx(ctx)->stream));
  }
}

void pipert_copy_to_device(pipert_context *ctx, void *d, const void *s, size_t n) {
  if (!n)
    return;
  // Synchronous for the host side: the caller may reuse or free `s` at once,
  // as with memcpy on the CPU backend.
  Context *c = cx(ctx);
  PIPERT_CUDA_CHECK(cudaMemcpyAsync(d, s, n, cudaMemcpyHostToDevice, c->stream));
  PIPERT_CUDA_CHECK(cudaStreamSynchronize(c->stream));
}

void pipert_copy_to_host(pipert_context *ctx, void *d, const void *s, size_t n) {
  Context *c = cx(ctx);
  if (n)
    PIPERT_CUDA_CHECK(cudaMemcpyAsync(d, s, n, cudaMemcpyDeviceToHost, c->stream));
  // Results reach the host here: report errors the kernels found on the way.
  check_device_errors(ctx);
}

void pipert_copy_device(pipert_context *ctx, void *d, const void *s, size_t n) {
  if (!n || d == s)
    return;
  Context *c = cx(ctx);
  const char *dc = static_cast<const char *>(d), *sc = static_cast<const char *>(s);
  if (dc < sc + n && sc < dc + n) {
    // Overlapping ranges (memmove semantics, as on the CPU): through a copy.
    Scratch tmp(ctx, n);
    PIPERT_CUDA_CHECK(cudaMemcpyAsync(tmp.ptr, s, n, cudaMemcpyDeviceToDevice, c->stream));
    PIPERT_CUDA_CHECK(cudaMemcpyAsync(d, tmp.ptr, n, cudaMemcpyDeviceToDevice, c->stream));
    return;
  }
  PIPERT_CUDA_CHECK(cudaMemcpyAsync(d, s, n, cudaMemcpyDeviceToDevice, c->stream));
}

void pipert_memset_zero(pipert_context *ctx, void *d, size_t n) {
  if (n)
    PIPERT_CUDA_CHECK(cudaMemsetAsync(d, 0, n, cx(ctx)->stream));
}

void pipert_synchronize(pipert_context *ctx) { check_device_errors(ctx); }

} // extern "C"
