//===- MpiFlags.cpp - how the tools launch ranks under mpirun -------------===//
#include "MpiFlags.h"

#include <sys/prctl.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

namespace pipectools {

namespace {

// Two MPI ranks are siblings (children of mpirun), and Open MPI lets any
// process trace a rank (prctl PR_SET_PTRACER_ANY, for Yama's ptrace_scope
// 1), so the probe is the same: a target child holds a known value and
// allows any tracer, a sibling child reads it with process_vm_readv and
// exits 0 on success. ptrace_scope 2 or 3, or a container without the
// ptrace capability, make the read fail.
bool probe() {
  static volatile unsigned long marker = 0;
  marker = 0x70697065636d61UL; // "pipecma"
  int ready[2], done[2];
  if (pipe(ready) != 0)
    return false;
  if (pipe(done) != 0) {
    close(ready[0]);
    close(ready[1]);
    return false;
  }
  pid_t target = fork();
  if (target == 0) {
    close(ready[0]);
    close(done[1]);
#if defined(PR_SET_PTRACER) && defined(PR_SET_PTRACER_ANY)
    prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0, 0, 0);
#endif
    char c = 1;
    (void)!write(ready[1], &c, 1);
    (void)!read(done[0], &c, 1); // until the reader has read
    _exit(0);
  }
  close(ready[1]);
  close(done[0]);
  bool ok = false;
  char c = 0;
  if (target > 0 && read(ready[0], &c, 1) == 1) {
    pid_t reader = fork();
    if (reader == 0) {
      unsigned long value = 0;
      struct iovec local = {&value, sizeof value};
      struct iovec remote = {const_cast<unsigned long *>(&marker), sizeof value};
      bool read = process_vm_readv(target, &local, 1, &remote, 1, 0) == ssize_t(sizeof value) &&
                  value == marker;
      _exit(read ? 0 : 1);
    }
    int status = 0;
    ok = reader > 0 && waitpid(reader, &status, 0) == reader && WIFEXITED(status) &&
         WEXITSTATUS(status) == 0;
  }
  c = 1;
  (void)!write(done[1], &c, 1);
  close(ready[0]);
  close(done[1]);
  if (target > 0) {
    int status = 0;
    waitpid(target, &status, 0);
  }
  return ok;
}

} // namespace

bool crossMemoryAttachWorks() {
  static const bool works = probe();
  return works;
}

std::string singleCopyMechanism() {
  if (const char *env = std::getenv("PIPEC_SINGLE_COPY");
      env && (!std::strcmp(env, "cma") || !std::strcmp(env, "none")))
    return env;
  return crossMemoryAttachWorks() ? "cma" : "none";
}

int64_t runtimeBufferedSendBytes(int ranks) {
  // As MpiTransport::init reads them (malformed values fail there).
  int64_t limit = 0;
  int64_t staging = int64_t(64) << 20; // PIPERT_SEND_BUFFER's default
  bool staged = singleCopyMechanism() != "none";
  if (const char *env = std::getenv("PIPERT_SEND_BUFFER")) {
    staging = std::strtoll(env, nullptr, 10);
    staged = staging > 0;
  }
  if (staged)
    limit = staging / 16;
  const char *shm = std::getenv("PIPERT_SHM");
  if (!shm || std::strcmp(shm, "0")) {
    int64_t ring = int64_t(1) << 20;
    if (const char *env = std::getenv("PIPERT_SHM_RING")) {
      ring = std::strtoll(env, nullptr, 10);
    } else {
      // As MpiTransport::initShm sizes them: the n x n rings within 16
      // MiB, none below 64 KiB each.
      const int64_t n = std::max(ranks, 2), budget = int64_t(16) << 20;
      while (ring > (int64_t(64) << 10) && n * n * ring > budget)
        ring /= 2;
      if (n * n * ring > budget)
        ring = 0;
    }
    limit = std::max<int64_t>(limit, ring / 4);
  }
  return limit;
}

bool runtimeBuffersSends(int ranks) { return runtimeBufferedSendBytes(ranks) > 0; }

std::vector<std::string> sharedMemoryMpiFlags() {
  std::vector<std::string> flags = {"--oversubscribe", "--mca", "btl", "self,vader",
                                    "--mca", "btl_vader_single_copy_mechanism",
                                    singleCopyMechanism()};
  // Messages up to one vader fragment (32 KB) go eagerly into the peer's
  // shared-memory queue: the send completes without the receiver, and the
  // receiver copies it out without a rendezvous (4 KB by default: an
  // activation of 4096 bytes took the rendezvous and CMA path, a syscall per
  // message; the example transformer, 2 ranks, M = 8: 0.375 -> 0.338 ms a
  // step; M = 4: 0.376 -> 0.364). A user's own setting is kept.
  if (!std::getenv("OMPI_MCA_btl_vader_eager_limit")) {
    flags.push_back("--mca");
    flags.push_back("btl_vader_eager_limit");
    flags.push_back("32768");
  }
  if (geteuid() == 0)
    flags.push_back("--allow-run-as-root");
  return flags;
}

} // namespace pipectools
