//===- pipe-npz-fuzzer.cpp - libFuzzer target for the runtime's .npz reader ===//
//
// Feeds arbitrary bytes to pipert_npz_load (zip container, stored and
// deflated members, .npy headers) and reads every array it accepts back
// through the accessors. A file pipert rejects must be rejected through
// pipert_fail with a message (here turned into an exception by the abort
// hook instead of an exit), never a crash, hang or sanitizer report.
//
//===----------------------------------------------------------------------===//
#include "pipert/pipert.h"
#include "pipert/pipert_data.h"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <unistd.h>

namespace {
struct Rejected {};
void reject(int) { throw Rejected(); }

// The one scratch file of this process, removed when the fuzzer exits.
struct Scratch {
  std::string path;
  Scratch() {
    const char *dir = std::getenv("TMPDIR");
    path = std::string(dir ? dir : "/tmp") + "/pipe-npz-fuzzer." +
           std::to_string(getpid()) + ".npz";
  }
  ~Scratch() { std::remove(path.c_str()); }
};

const std::string &scratchPath() {
  static Scratch scratch;
  return scratch.path;
}
} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  pipert_set_abort_hook(reject);
  const std::string &path = scratchPath();
  if (std::FILE *f = std::fopen(path.c_str(), "wb")) {
    if (size)
      std::fwrite(data, 1, size, f);
    std::fclose(f);
  } else {
    std::abort();
  }
  pipert_npz *npz = nullptr;
  try {
    npz = pipert_npz_load(path.c_str());
    for (int i = 0; i < pipert_npz_count(npz); ++i) {
      const char *name = pipert_npz_name(npz, i);
      if (pipert_npz_find(npz, name) < 0)
        std::abort();
      pipert_dtype dtype = pipert_npz_dtype(npz, name);
      int ndim = pipert_npz_ndim(npz, name);
      const int64_t *shape = pipert_npz_shape(npz, name);
      const void *bytes = pipert_npz_data(npz, name, dtype, ndim, shape);
      // Touch every element: the reader promised this many.
      int64_t count = 1;
      for (int d = 0; d < ndim; ++d)
        count *= shape[d];
      const size_t total = size_t(count) * pipert_dtype_size(dtype);
      volatile unsigned char sink = 0;
      for (size_t k = 0; k < total; ++k)
        sink ^= static_cast<const unsigned char *>(bytes)[k];
      (void)sink;
    }
  } catch (const Rejected &) {
  }
  if (npz)
    pipert_npz_free(npz);
  return 0;
}
