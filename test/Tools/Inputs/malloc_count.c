/* LD_PRELOAD shim for the steady-state allocation test
 * (pipeline-steady-alloc.test): counts the calls of the C allocation
 * functions a process makes and, at its exit, appends
 * "<executable's name> <count> <library count>" to the file
 * $PIPEC_MALLOC_COUNT_FILE. Calls made while oneDNN runs (its dnnl_sgemm
 * allocates its packing buffers on every call, a library behaviour the
 * runtime avoids only where its own small-product kernel takes the GEMM;
 * its primitives' execution builds a map of the arguments) are the
 * library count, apart: the shim wraps the oneDNN functions the runtime
 * calls per kernel call, since some of oneDNN's allocations go through
 * libstdc++'s operator new, whose caller is not oneDNN's library. Only the main thread's calls count (MPI's
 * progress threads allocate as time passes, not per step). Processes of another name than
 * $PIPEC_MALLOC_COUNT_MATCH (a substring; default "device") are counted
 * but not reported. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

static unsigned long count, lib_count;
static __thread int in_library;

/* Whether the allocation's caller lies in oneDNN's library, or the thread
 * is inside dnnl_sgemm. */
static int from_library(void *caller) {
  Dl_info info;
  return in_library ||
         (dladdr(caller, &info) && info.dli_fname && strstr(info.dli_fname, "libdnnl"));
}
static void note(void *caller) {
  /* The main thread's only: MPI's progress threads allocate as time goes,
   * not per step. */
  if (syscall(SYS_gettid) != getpid())
    return;
  if (from_library(caller))
    __atomic_add_fetch(&lib_count, 1, __ATOMIC_RELAXED);
  else
    __atomic_add_fetch(&count, 1, __ATOMIC_RELAXED);
}

#define COUNTED(ret, name, params, args)                                       \
  ret name params {                                                            \
    static ret(*real) params;                                                  \
    if (!real)                                                                 \
      *(void **)(&real) = dlsym(RTLD_NEXT, #name);                             \
    note(__builtin_return_address(0));                                         \
    return real args;                                                          \
  }

COUNTED(void *, malloc, (size_t n), (n))
COUNTED(void *, realloc, (void *p, size_t n), (p, n))
COUNTED(void *, aligned_alloc, (size_t a, size_t n), (a, n))
COUNTED(int, posix_memalign, (void **p, size_t a, size_t n), (p, a, n))

/* oneDNN's entry points the runtime calls per kernel call (dnnl.h's
 * signatures: dnnl_dim_t is int64_t, the status an enum, the handles
 * pointers), their allocations counted as the library's: the sgemm, and
 * the primitives' execution (convolutions) with their operands' pointers. */
#define LIBRARY(name, params, args)                                            \
  int name params {                                                            \
    static int(*real) params;                                                  \
    if (!real)                                                                 \
      *(void **)(&real) = dlsym(RTLD_NEXT, #name);                             \
    ++in_library;                                                              \
    int st = real args;                                                        \
    --in_library;                                                              \
    return st;                                                                 \
  }

LIBRARY(dnnl_sgemm,
        (char ta, char tb, long long m, long long n, long long k, float alpha, const float *a,
         long long lda, const float *b, long long ldb, float beta, float *c, long long ldc),
        (ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc))
LIBRARY(dnnl_primitive_execute, (const void *prim, void *stream, int nargs, const void *args),
        (prim, stream, nargs, args))
LIBRARY(dnnl_memory_set_data_handle, (void *memory, void *handle), (memory, handle))
LIBRARY(dnnl_stream_wait, (void *stream), (stream))

/* calloc: dlsym itself may call calloc before `real` is known; those few
 * come from a static arena. */
static char arena[4096];
static size_t arena_used;
void *calloc(size_t n, size_t size) {
  static void *(*real)(size_t, size_t);
  static int resolving;
  if (!real) {
    if (resolving) {
      size_t bytes = (n * size + 15) & ~(size_t)15;
      if (arena_used + bytes > sizeof arena)
        return NULL;
      void *p = arena + arena_used;
      arena_used += bytes;
      return p; /* static storage is zeroed */
    }
    resolving = 1;
    *(void **)(&real) = dlsym(RTLD_NEXT, "calloc");
    resolving = 0;
  }
  note(__builtin_return_address(0));
  return real(n, size);
}
void free(void *p) {
  static void (*real)(void *);
  if ((char *)p >= arena && (char *)p < arena + sizeof arena)
    return;
  if (!real)
    *(void **)(&real) = dlsym(RTLD_NEXT, "free");
  real(p);
}

__attribute__((destructor)) static void report(void) {
  const char *path = getenv("PIPEC_MALLOC_COUNT_FILE");
  const char *match = getenv("PIPEC_MALLOC_COUNT_MATCH");
  char exe[512] = {0};
  if (!path || readlink("/proc/self/exe", exe, sizeof exe - 1) < 0)
    return;
  const char *name = strrchr(exe, '/') ? strrchr(exe, '/') + 1 : exe;
  if (!strstr(name, match ? match : "device"))
    return;
  FILE *f = fopen(path, "a");
  if (!f)
    return;
  fprintf(f, "%s %lu %lu\n", name, count, lib_count);
  fclose(f);
}
