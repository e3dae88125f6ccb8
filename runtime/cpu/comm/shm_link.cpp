//===- shm_link.cpp - point-to-point rings between ranks of one machine ----===//
//
// See shm_link.h.
//
//===----------------------------------------------------------------------===//
#include "shm_link.h"

#include <algorithm>
#include <cstring>

#include <sys/mman.h>
#include <unistd.h>

namespace pipert::shm {

namespace {

// The counters: tail on the channel's first cache line, head on its second.
uint64_t *tailOf(char *channel) { return reinterpret_cast<uint64_t *>(channel); }
uint64_t *headOf(char *channel) { return reinterpret_cast<uint64_t *>(channel + 128); }
char *ringOf(char *channel) { return channel + Endpoint::kControlBytes; }

uint64_t loadAcquire(const uint64_t *p) { return __atomic_load_n(p, __ATOMIC_ACQUIRE); }
void storeRelease(uint64_t *p, uint64_t v) { __atomic_store_n(p, v, __ATOMIC_RELEASE); }

struct Header {
  int32_t comm;
  int32_t tag;
  int64_t bytes;
};
static_assert(sizeof(Header) <= Endpoint::kAlign, "a frame header fits its 64 bytes");

int64_t frameBytes(int64_t bytes) {
  return Endpoint::kAlign + (bytes + Endpoint::kAlign - 1) / Endpoint::kAlign * Endpoint::kAlign;
}

// Copies n bytes into the ring at position pos (wrapping), or out of it.
void copyIn(char *ring, int64_t size, uint64_t pos, const void *src, int64_t n) {
  if (n <= 0)
    return;
  const int64_t at = static_cast<int64_t>(pos & static_cast<uint64_t>(size - 1));
  const int64_t first = std::min(n, size - at);
  std::memcpy(ring + at, src, static_cast<size_t>(first));
  if (first < n)
    std::memcpy(ring, static_cast<const char *>(src) + first, static_cast<size_t>(n - first));
}

void copyOut(const char *ring, int64_t size, uint64_t pos, void *dst, int64_t n) {
  if (n <= 0)
    return;
  const int64_t at = static_cast<int64_t>(pos & static_cast<uint64_t>(size - 1));
  const int64_t first = std::min(n, size - at);
  std::memcpy(dst, ring + at, static_cast<size_t>(first));
  if (first < n)
    std::memcpy(static_cast<char *>(dst) + first, ring, static_cast<size_t>(n - first));
}

} // namespace

void Endpoint::initBlock(void *block, int ranks, int64_t ring) {
  // All of it, not only the counters: the pages are then allocated before
  // the first message (a page faulted in by the first message through it
  // cost 4-5 us: a 4 KiB ping-pong took 5 us a message for its first 250).
  std::memset(block, 0, static_cast<size_t>(blockBytes(ranks, ring)));
}

void Endpoint::prefault() {
  // This process's page tables for the rings it writes (in the peers'
  // blocks), made present and writable without touching their bytes.
  const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  for (int p = 0; p < ranks(); ++p) {
    if (p == self_)
      continue;
    char *ring = ringOf(channel(p, self_));
    const uintptr_t begin = reinterpret_cast<uintptr_t>(ring) & ~(page - 1);
    const uintptr_t end = (reinterpret_cast<uintptr_t>(ring) + static_cast<uintptr_t>(ring_) +
                           page - 1) & ~(page - 1);
#ifdef MADV_POPULATE_WRITE
    if (madvise(reinterpret_cast<void *>(begin), end - begin, MADV_POPULATE_WRITE) == 0)
      continue;
#endif
    // Older kernels: write each page's first ring byte back (only this
    // rank writes this ring, and it has sent nothing yet).
    for (uintptr_t q = begin; q < end; q += page) {
      // The page's first byte of this ring (the first page may start
      // before it, in the counters, which this rank must not write).
      volatile char *v = reinterpret_cast<char *>(std::max(q, reinterpret_cast<uintptr_t>(ring)));
      *v = *v;
    }
  }
}

Endpoint::Endpoint(int self, std::vector<char *> blocks, int64_t ring)
    : self_(self), blocks_(std::move(blocks)), ring_(ring) {
  const size_t n = blocks_.size();
  pending_.resize(n);
  posted_.resize(n);
  unexpected_.resize(n);
  knownHead_.assign(n, 0);
}

bool Endpoint::tryWrite(Op *op) {
  char *ch = channel(op->peer, self_);
  uint64_t *tailp = tailOf(ch);
  // Only this rank writes tail: a plain read of its own last store.
  const uint64_t tail = __atomic_load_n(tailp, __ATOMIC_RELAXED);
  const int64_t need = frameBytes(op->bytes);
  uint64_t &head = knownHead_[static_cast<size_t>(op->peer)];
  if (static_cast<int64_t>(tail - head) + need > ring_) {
    head = loadAcquire(headOf(ch));
    if (static_cast<int64_t>(tail - head) + need > ring_)
      return false;
  }
  char *ring = ringOf(ch);
  Header h{op->comm, op->tag, op->bytes};
  std::memcpy(ring + (tail & static_cast<uint64_t>(ring_ - 1)), &h, sizeof h);
  uint64_t pos = tail + kAlign;
  if (op->gn > 0) {
    for (int i = 0; i < op->gn; ++i) {
      copyIn(ring, ring_, pos, op->gbufs[i], op->gbytes[i]);
      pos += static_cast<uint64_t>(op->gbytes[i]);
    }
  } else {
    copyIn(ring, ring_, pos, op->src, op->bytes);
  }
  storeRelease(tailp, tail + static_cast<uint64_t>(need));
  op->done = true;
  return true;
}

bool Endpoint::trySend(Op *op) {
  op->done = false;
  return pending_[static_cast<size_t>(op->peer)].empty() && tryWrite(op);
}

void Endpoint::postSend(Op *op) {
  op->done = false;
  auto &q = pending_[static_cast<size_t>(op->peer)];
  if (q.empty() && tryWrite(op))
    return;
  q.push_back(op);
}

void Endpoint::deliver(Op *op, const char *ring, uint64_t pos, int64_t bytes) {
  if (bytes != op->bytes) {
    op->mismatch = bytes;
  } else if (op->sn > 0) {
    for (int i = 0; i < op->sn; ++i) {
      copyOut(ring, ring_, pos, op->sbufs[i], op->sbytes[i]);
      pos += static_cast<uint64_t>(op->sbytes[i]);
    }
  } else {
    copyOut(ring, ring_, pos, op->dst, bytes);
  }
  op->done = true;
}

void Endpoint::postRecv(Op *op) {
  op->done = false;
  op->mismatch = -1;
  const size_t p = static_cast<size_t>(op->peer);
  // Earlier messages first: those already taken out of the ring ...
  auto &un = unexpected_[p];
  for (auto it = un.begin(); it != un.end(); ++it) {
    if (it->comm != op->comm || it->tag != op->tag)
      continue;
    const int64_t bytes = static_cast<int64_t>(it->data.size());
    if (bytes != op->bytes) {
      op->mismatch = bytes;
    } else if (op->sn > 0) {
      int64_t off = 0;
      for (int i = 0; i < op->sn; ++i) {
        if (op->sbytes[i])
          std::memcpy(op->sbufs[i], it->data.data() + off, static_cast<size_t>(op->sbytes[i]));
        off += op->sbytes[i];
      }
    } else if (bytes) {
      std::memcpy(op->dst, it->data.data(), static_cast<size_t>(bytes));
    }
    op->done = true;
    spare_.push_back(std::move(it->data));
    un.erase(it);
    return;
  }
  // ... then the ring.
  posted_[p].push_back(op);
  drain(op->peer);
}

void Endpoint::drain(int peer) {
  char *ch = channel(self_, peer);
  uint64_t *headp = headOf(ch);
  const uint64_t tail = loadAcquire(tailOf(ch));
  uint64_t head = __atomic_load_n(headp, __ATOMIC_RELAXED);
  if (head == tail)
    return;
  const char *ring = ringOf(ch);
  auto &posted = posted_[static_cast<size_t>(peer)];
  while (head != tail) {
    Header h;
    std::memcpy(&h, ring + (head & static_cast<uint64_t>(ring_ - 1)), sizeof h);
    const uint64_t payload = head + kAlign;
    auto it = std::find_if(posted.begin(), posted.end(),
                           [&](const Op *r) { return r->comm == h.comm && r->tag == h.tag; });
    if (it != posted.end()) {
      deliver(*it, ring, payload, h.bytes);
      posted.erase(it);
    } else {
      Unexpected u{h.comm, h.tag, {}};
      if (!spare_.empty()) {
        u.data = std::move(spare_.back());
        spare_.pop_back();
      }
      u.data.resize(static_cast<size_t>(h.bytes));
      copyOut(ring, ring_, payload, u.data.data(), h.bytes);
      unexpected_[static_cast<size_t>(peer)].push_back(std::move(u));
    }
    head += static_cast<uint64_t>(frameBytes(h.bytes));
  }
  storeRelease(headp, head);
}

void Endpoint::progress() {
  const int n = ranks();
  for (int p = 0; p < n; ++p) {
    auto &q = pending_[static_cast<size_t>(p)];
    size_t written = 0;
    while (written < q.size() && tryWrite(q[written]))
      ++written;
    q.erase(q.begin(), q.begin() + static_cast<std::ptrdiff_t>(written));
  }
  for (int p = 0; p < n; ++p)
    if (p != self_)
      drain(p);
}

void Endpoint::cancel(Op *op) {
  if (op->done || op->peer < 0)
    return;
  auto &q = (op->send ? pending_ : posted_)[static_cast<size_t>(op->peer)];
  q.erase(std::remove(q.begin(), q.end(), op), q.end());
}

bool Endpoint::sendsPending() const {
  for (const auto &q : pending_)
    if (!q.empty())
      return true;
  return false;
}

} // namespace pipert::shm
