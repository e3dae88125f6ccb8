/*===- pipert.h - the pipec runtime C ABI: context, types, errors ---------===*
 *
 * Generated per-device programs call this C ABI for every kernel, transfer and
 * piece of I/O. Everything takes plain pointers, int64 shapes and a context.
 * The same generated program links against the CPU backend (libpipert_cpu) or
 * the CUDA backend (libpipert_cuda); pointers handed to kernels are device
 * pointers of that backend (host memory on CPU), allocated with pipert_alloc.
 *
 * Errors: a call that cannot proceed (bad shape, peer timeout, missing data)
 * does not return. It prints one line "pipert: error: <what>" naming the
 * operation, ends this rank with a non-zero status and, under MPI, aborts
 * every rank, so that nothing hangs. Functions that can fail in a way a
 * caller may want to handle return an int status (0 = success) instead and
 * say so.
 *===----------------------------------------------------------------------===*/
#ifndef PIPERT_PIPERT_H
#define PIPERT_PIPERT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define PIPERT_NORETURN __attribute__((noreturn))
#define PIPERT_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define PIPERT_NORETURN
#define PIPERT_PRINTF(a, b)
#endif

/* Element types; values are ONNX's TensorProto.DataType codes. */
typedef enum pipert_dtype {
  PIPERT_F32 = 1,
  PIPERT_U8 = 2,
  PIPERT_I8 = 3,
  PIPERT_I32 = 6,
  PIPERT_I64 = 7,
  PIPERT_BOOL = 9,
  PIPERT_F16 = 10,
  PIPERT_F64 = 11,
} pipert_dtype;

/* Size in bytes of one element, or 0 for an unknown type. */
size_t pipert_dtype_size(pipert_dtype t);
/* "float32", "int64", ... */
const char *pipert_dtype_name(pipert_dtype t);

typedef enum pipert_backend { PIPERT_BACKEND_CPU = 0, PIPERT_BACKEND_CUDA = 1 } pipert_backend;

/* Per-rank state: backend, thread count, random generator, stream/handles on
 * CUDA, the trace recorder. Opaque; one per process. */
typedef struct pipert_context pipert_context;

/* Creates the context of this process. `threads` <= 0 means 1 (each pipeline
 * rank owns a core); PIPERT_THREADS in the environment overrides it. */
pipert_context *pipert_context_create(int threads, uint64_t seed);
void pipert_context_destroy(pipert_context *ctx);
pipert_backend pipert_context_backend(const pipert_context *ctx);
int pipert_context_threads(const pipert_context *ctx);
/* Deterministic per-context random stream (Dropout masks, shuffles). */
uint64_t pipert_context_next_random(pipert_context *ctx);
/* The random stream's state, for checkpoints: restoring it resumes the same
 * sequence of masks and shuffles. */
uint64_t pipert_context_random_state(const pipert_context *ctx);
void pipert_context_set_random_state(pipert_context *ctx, uint64_t state);

/* Device memory of the context's backend, 64-byte aligned; never NULL (an
 * allocation failure is fatal). pipert_free(NULL) is a no-op. */
void *pipert_alloc(pipert_context *ctx, size_t bytes);
void pipert_free(pipert_context *ctx, void *ptr);
/* Copies between host and the backend's memory (plain memcpy on CPU). */
void pipert_copy_to_device(pipert_context *ctx, void *dst, const void *src, size_t bytes);
void pipert_copy_to_host(pipert_context *ctx, void *dst, const void *src, size_t bytes);
void pipert_copy_device(pipert_context *ctx, void *dst, const void *src, size_t bytes);
void pipert_memset_zero(pipert_context *ctx, void *dst, size_t bytes);
/* Waits until queued device work is done (no-op on CPU). */
void pipert_synchronize(pipert_context *ctx);

/* Prints "pipert: error: <message>" and ends the rank (MPI_Abort under MPI).
 * Never returns. */
PIPERT_NORETURN void pipert_fail(const char *fmt, ...) PIPERT_PRINTF(1, 2);

/* Hook the transport installs so that pipert_fail takes every rank down. */
typedef void (*pipert_abort_hook)(int code);
void pipert_set_abort_hook(pipert_abort_hook hook);
/* Under several ranks: pipert_fail's message names this rank
 * ("pipert: error: rank 1: ..."). -1 (the default): no rank. */
void pipert_set_error_rank(int rank);

/* The most bytes this process has had allocated with pipert_alloc at once
 * (both backends keep the count through pipert_note_alloc/_free). */
size_t pipert_peak_memory_bytes(void);
void pipert_note_alloc(void *ptr, size_t bytes);
void pipert_note_free(void *ptr);

#ifdef __cplusplus
}
#endif

#endif /* PIPERT_PIPERT_H */
