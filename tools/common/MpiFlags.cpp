//===- MpiFlags.cpp - how the tools launch ranks under mpirun -------------===//
#include "MpiFlags.h"

#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>

namespace pipectools {

namespace {

bool probe() {
  // A child (same address space layout after fork) holds a known value;
  // the parent reads it from the child's memory.
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
  pid_t child = fork();
  if (child < 0) {
    close(ready[0]);
    close(ready[1]);
    close(done[0]);
    close(done[1]);
    return false;
  }
  if (child == 0) {
    close(ready[0]);
    close(done[1]);
    char c = 1;
    (void)!write(ready[1], &c, 1);
    (void)!read(done[0], &c, 1); // until the parent has read
    _exit(0);
  }
  close(ready[1]);
  close(done[0]);
  char c = 0;
  bool ok = false;
  if (read(ready[0], &c, 1) == 1) {
    unsigned long value = 0;
    struct iovec local = {&value, sizeof value};
    struct iovec remote = {const_cast<unsigned long *>(&marker), sizeof value};
    ok = process_vm_readv(child, &local, 1, &remote, 1, 0) == ssize_t(sizeof value) &&
         value == marker;
  }
  c = 1;
  (void)!write(done[1], &c, 1);
  close(ready[0]);
  close(done[1]);
  int status = 0;
  waitpid(child, &status, 0);
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

bool runtimeBuffersSends() {
  if (const char *env = std::getenv("PIPERT_SEND_BUFFER"))
    return std::strtoll(env, nullptr, 10) > 0;
  return singleCopyMechanism() != "none";
}

std::vector<std::string> sharedMemoryMpiFlags() {
  std::vector<std::string> flags = {"--oversubscribe", "--mca", "btl", "self,vader",
                                    "--mca", "btl_vader_single_copy_mechanism",
                                    singleCopyMechanism()};
  if (geteuid() == 0)
    flags.push_back("--allow-run-as-root");
  return flags;
}

} // namespace pipectools
