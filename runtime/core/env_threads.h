//===- env_threads.h - PIPERT_THREADS, read alike by every backend --------===//
#ifndef PIPERT_CORE_ENV_THREADS_H
#define PIPERT_CORE_ENV_THREADS_H

#include "pipert/pipert.h"

#include <cstdlib>

namespace pipert {

/// The kernel thread count: $PIPERT_THREADS where set (an integer >= 1,
/// else the run fails naming it), else `threads` (at least 1).
inline int threadsFromEnvironment(int threads) {
  if (const char *env = std::getenv("PIPERT_THREADS")) {
    char *end = nullptr;
    const long v = std::strtol(env, &end, 10);
    if (end == env || *end != '\0' || v < 1 || v > 4096)
      pipert_fail("PIPERT_THREADS='%s' is not a thread count >= 1", env);
    return int(v);
  }
  return threads > 0 ? threads : 1;
}

} // namespace pipert

#endif
