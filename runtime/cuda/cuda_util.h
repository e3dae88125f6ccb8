//===- cuda_util.h - internals of the CUDA backend ----------------*- C++ -*-===//
//
// The context behind the opaque pipert_context, status checks that end the rank
// through pipert_fail naming the failed call, the device-side error flag that
// kernels raise for data-dependent errors (an index out of range), and shape
// helpers shared by runtime/cuda/*. Internal: not part of the C ABI.
//
//===----------------------------------------------------------------------===//
#ifndef PIPERT_CUDA_CUDA_UTIL_H
#define PIPERT_CUDA_CUDA_UTIL_H

#include "pipert/pipert.h"
#include "../core/shape_util.h"

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

namespace pipert::cuda {

using ::pipert::kMaxRank;


// Errors found on the device (which cannot call pipert_fail) are recorded in
// a flag the host checks at the next synchronisation point (pipert_synchronize,
// pipert_copy_to_host); the first error raised wins.
enum DeviceErrorCode : int {
  kErrNone = 0,
  kErrGatherIndex = 1,   // value: the index
  kErrLabel = 2,         // value: the label; aux: the class count
  kErrIntDivZero = 3,    //
  kErrGatherGradIndex = 4,
  kErrTupleIndex = 5,    // GatherND/ScatterND; value: the index, aux: the extent
  kErrElementIndex = 6,  // GatherElements/ScatterElements; as kErrTupleIndex
};
struct DeviceError {
  int code;
  int pad;
  long long value;
  long long aux;
};

struct Context {
  pipert_backend backend = PIPERT_BACKEND_CUDA;
  int threads = 1;
  uint64_t rng = 0;
  int device = 0;
  cudaStream_t stream = nullptr;
  cublasHandle_t blas = nullptr;
  DeviceError *err = nullptr;      // device flag
  DeviceError *err_host = nullptr; // pinned copy for the check
  int sm_count = 1;
};

inline Context *cx(pipert_context *ctx) { return reinterpret_cast<Context *>(ctx); }
inline const Context *cx(const pipert_context *ctx) {
  return reinterpret_cast<const Context *>(ctx);
}

// Checks the device error flag (synchronises the stream) and fails with the
// recorded error.
void check_device_errors(pipert_context *ctx);

const char *cublas_status_name(cublasStatus_t s);

// Temporary device memory for the duration of one kernel call: released in
// stream order, so it may be freed right after the launches that use it.
struct Scratch {
  pipert_context *ctx;
  void *ptr = nullptr;
  Scratch(pipert_context *c, size_t bytes) : ctx(c) { ptr = pipert_alloc(c, bytes); }
  ~Scratch() { pipert_free(ctx, ptr); }
  Scratch(const Scratch &) = delete;
  Scratch &operator=(const Scratch &) = delete;
  template <typename T> T *as() const { return static_cast<T *>(ptr); }
};

} // namespace pipert::cuda

#define PIPERT_CUDA_CHECK(call)                                                                  \
  do {                                                                                           \
    cudaError_t pipert_cuda_status_ = (call);                                                    \
    if (pipert_cuda_status_ != cudaSuccess)                                                      \
      pipert_fail("%s failed: %s (%s)", #call, cudaGetErrorString(pipert_cuda_status_),          \
                  cudaGetErrorName(pipert_cuda_status_));                                        \
  } while (0)

#define PIPERT_CUBLAS_CHECK(call)                                                                \
  do {                                                                                           \
    cublasStatus_t pipert_cublas_status_ = (call);                                               \
    if (pipert_cublas_status_ != CUBLAS_STATUS_SUCCESS)                                          \
      pipert_fail("%s failed: %s", #call,                                                        \
                  ::pipert::cuda::cublas_status_name(pipert_cublas_status_));                    \
  } while (0)

// After a kernel launch: a bad launch configuration is reported at once,
// naming the kernel's operation.
#define PIPERT_LAUNCH_CHECK(op)                                                                  \
  do {                                                                                           \
    cudaError_t pipert_launch_status_ = cudaGetLastError();                                      \
    if (pipert_launch_status_ != cudaSuccess)                                                    \
      pipert_fail("%s: kernel launch failed: %s", op, cudaGetErrorString(pipert_launch_status_)); \
  } while (0)

#endif // PIPERT_CUDA_CUDA_UTIL_H
