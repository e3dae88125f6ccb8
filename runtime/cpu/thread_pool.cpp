//===- thread_pool.cpp - the kernels' threads, kept between calls (CPU) ---===//
//
// parallel_for (kernel_util.h) started a std::thread per part on every
// call: a thread's start and join (~20 us here) per parallel kernel, and the
// vector holding them allocated each time. The pool keeps its threads
// blocked on a condition variable between calls (no spinning: the peer rank
// may need the core), grows to the largest part count asked for, and hands
// out the same parts as before (part p is [p * chunk, (p + 1) * chunk) of
// [0, n)), so the results do not depend on which thread ran a part. The
// caller runs part 0 and takes parts left over. One job at a time: a call
// from a pool thread (a kernel inside a kernel's part) or from a second
// thread while a job runs runs its parts on its own thread. Measured (2
// kernel threads, alternating the two libraries under one program): the
// GPT's step 136 / 142 / 146 -> 128 / 115 / 131 ms; and a ResNet-18 step
// allocated 60 times (the threads and their vector), now none.
//===----------------------------------------------------------------------===//
#include "kernel_util.h"

#include <condition_variable>
#include <mutex>

#include <pthread.h>

namespace pipert::cpu {
namespace {

thread_local bool in_pool_thread = false;

struct Pool {
  std::mutex m;
  std::condition_variable work, done;
  std::vector<std::thread> threads;
  uint64_t generation = 0;
  int parts = 0, next = 0, pending = 0;
  int64_t n = 0, chunk = 0;
  void *obj = nullptr;
  void (*call)(void *, int64_t, int64_t) = nullptr;

  void run_part(int p) const {
    const int64_t b = p * chunk, e = std::min(n, b + chunk);
    if (b < e)
      call(obj, b, e);
  }
  // Runs parts until none is left; the lock held on entry and on return.
  void drain(std::unique_lock<std::mutex> &lock) {
    while (next < parts) {
      const int p = next++;
      lock.unlock();
      run_part(p);
      lock.lock();
      if (--pending == 0)
        done.notify_all();
    }
  }
  void serve() {
    in_pool_thread = true;
    std::unique_lock<std::mutex> lock(m);
    uint64_t seen = generation;
    for (;;) {
      work.wait(lock, [&] { return generation != seen; });
      seen = generation;
      drain(lock);
    }
  }
};

// Never destroyed: its threads stay blocked until the process exits. A
// child of fork() has none of its parent's pool threads (a death test,
// a launcher): it starts a pool of its own.
Pool *the_pool = nullptr;
std::mutex *the_job_lock = nullptr;

void fresh_pool() {
  the_pool = new Pool;
  the_job_lock = new std::mutex;
}

Pool &pool() {
  static const bool once = [] {
    fresh_pool();
    pthread_atfork(nullptr, nullptr, fresh_pool);
    return true;
  }();
  (void)once;
  return *the_pool;
}

std::mutex &job_lock() {
  pool();
  return *the_job_lock;
}

} // namespace

void run_parts(int parts, int64_t n, int64_t chunk, void *obj,
               void (*call)(void *, int64_t, int64_t)) {
  std::unique_lock<std::mutex> job(job_lock(), std::try_to_lock);
  if (in_pool_thread || !job.owns_lock()) {
    for (int p = 0; p < parts; ++p) {
      const int64_t b = p * chunk, e = std::min(n, b + chunk);
      if (b < e)
        call(obj, b, e);
    }
    return;
  }
  Pool &pl = pool();
  std::unique_lock<std::mutex> lock(pl.m);
  while (int(pl.threads.size()) < parts - 1)
    pl.threads.emplace_back([&pl] { pl.serve(); });
  pl.parts = parts;
  pl.n = n;
  pl.chunk = chunk;
  pl.obj = obj;
  pl.call = call;
  pl.next = 1;
  pl.pending = parts - 1;
  ++pl.generation;
  pl.work.notify_all();
  lock.unlock();
  pl.run_part(0);
  lock.lock();
  pl.drain(lock);
  pl.done.wait(lock, [&] { return pl.pending == 0; });
}

} // namespace pipert::cpu
