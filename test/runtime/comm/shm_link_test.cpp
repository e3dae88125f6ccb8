//===- shm_link_test.cpp - the shared-memory rings without MPI -------------===//
//
// pipert::shm::Endpoint (runtime/cpu/comm/shm_link.h) over ordinary memory:
// two or three endpoints in one process, driven from one thread (the
// deterministic cases) or one thread each (the memory ordering).
#include "../../../runtime/cpu/comm/shm_link.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <thread>
#include <vector>

using pipert::shm::Endpoint;
using pipert::shm::Op;

namespace {

// The blocks of `ranks` local ranks and an endpoint for each.
struct Machine {
  std::vector<char *> blocks;
  std::vector<std::unique_ptr<Endpoint>> ep;
  Machine(int ranks, int64_t ring) {
    // aligned_alloc wants a multiple of the alignment.
    const int64_t bytes = (Endpoint::blockBytes(ranks, ring) + 4095) / 4096 * 4096;
    for (int r = 0; r < ranks; ++r) {
      char *b = static_cast<char *>(std::aligned_alloc(4096, static_cast<size_t>(bytes)));
      std::memset(b, 0xCD, static_cast<size_t>(bytes)); // not zero: initBlock must do it
      Endpoint::initBlock(b, ranks, ring);
      EXPECT_EQ(std::count(b, b + Endpoint::blockBytes(ranks, ring), 0),
                Endpoint::blockBytes(ranks, ring))
          << "initBlock zeroes its block";
      blocks.push_back(b);
    }
    for (int r = 0; r < ranks; ++r) {
      ep.push_back(std::make_unique<Endpoint>(r, blocks, ring));
      ep.back()->prefault(); // leaves the bytes as they are
    }
  }
  ~Machine() {
    for (char *b : blocks)
      std::free(b);
  }
};

std::vector<char> pattern(int seed, int64_t bytes) {
  std::vector<char> v(static_cast<size_t>(bytes));
  for (int64_t i = 0; i < bytes; ++i)
    v[static_cast<size_t>(i)] = static_cast<char>((seed * 131 + i * 7 + (i >> 9)) & 0xFF);
  return v;
}

Op sendOp(int peer, int comm, int tag, const std::vector<char> &data) {
  Op op = Op::make(true, peer, comm, tag, static_cast<int64_t>(data.size()));
  op.src = data.data();
  return op;
}

Op recvOp(int peer, int comm, int tag, std::vector<char> &buf) {
  Op op = Op::make(false, peer, comm, tag, static_cast<int64_t>(buf.size()));
  op.dst = buf.data();
  return op;
}

// A receive scattered into parts (bufs, bytes)[0..n) of communicator 0.
Op scatterOp(int peer, int tag, void *const *bufs, const int64_t *bytes, int n) {
  int64_t total = 0;
  for (int i = 0; i < n; ++i)
    total += bytes[i];
  Op op = Op::make(false, peer, 0, tag, total);
  op.sbufs = bufs;
  op.sbytes = bytes;
  op.sn = n;
  return op;
}

constexpr int64_t kRing = Endpoint::kMinRing; // 64 KiB: messages of at most 16 KiB

TEST(ShmLink, MessagesCrossTheRingEndIntact) {
  Machine m(2, kRing);
  EXPECT_EQ(m.ep[0]->maxMessage(), kRing / 4);
  // Sizes that are not multiples of the 64-byte frame alignment, so frames
  // start at every offset class and payloads wrap at the ring's end.
  const int64_t sizes[] = {0, 1, 63, 64, 65, 4096, 5000, 16383, 16384, 777};
  int seed = 0;
  for (int round = 0; round < 40; ++round)
    for (int64_t bytes : sizes) {
      ++seed;
      auto out = pattern(seed, bytes);
      // One guard byte past the receive's buffer.
      std::vector<char> in(static_cast<size_t>(bytes) + 1, 'x');
      Op s = sendOp(1, 0, 3, out);
      m.ep[0]->postSend(&s);
      ASSERT_TRUE(s.done) << "an empty channel takes a message of at most maxMessage()";
      Op r = recvOp(0, 0, 3, in);
      r.bytes = bytes;
      m.ep[1]->postRecv(&r);
      ASSERT_TRUE(r.done);
      EXPECT_EQ(r.mismatch, -1);
      EXPECT_EQ(in.back(), 'x') << "wrote past the buffer";
      in.pop_back();
      EXPECT_EQ(in, out) << "message " << seed << " of " << bytes << " bytes";
    }
}

TEST(ShmLink, MatchesByCommunicatorAndTagInOrderSent) {
  Machine m(2, kRing);
  auto a = pattern(1, 100), b = pattern(2, 200), c = pattern(3, 100), d = pattern(4, 100);
  Op s1 = sendOp(1, 0, 1, a), s2 = sendOp(1, 0, 2, b), s3 = sendOp(1, 0, 1, c),
     s4 = sendOp(1, 5, 1, d); // same tag, another communicator
  for (Op *s : {&s1, &s2, &s3, &s4}) {
    m.ep[0]->postSend(s);
    ASSERT_TRUE(s->done);
  }
  // Received in another order than sent: tag 2 first, then the other
  // communicator's tag 1, then communicator 0's two tag-1 messages in the
  // order they were sent.
  std::vector<char> r2(200), rd(100), r1a(100), r1b(100);
  Op q2 = recvOp(0, 0, 2, r2), qd = recvOp(0, 5, 1, rd), q1a = recvOp(0, 0, 1, r1a),
     q1b = recvOp(0, 0, 1, r1b);
  for (Op *q : {&q2, &qd, &q1a, &q1b}) {
    m.ep[1]->postRecv(q);
    ASSERT_TRUE(q->done);
  }
  EXPECT_EQ(r2, b);
  EXPECT_EQ(rd, d);
  EXPECT_EQ(r1a, a);
  EXPECT_EQ(r1b, c);
}

TEST(ShmLink, PostedReceivesMatchInPostOrder) {
  Machine m(2, kRing);
  std::vector<char> x(64), y(64);
  Op qx = recvOp(0, 0, 9, x), qy = recvOp(0, 0, 9, y);
  m.ep[1]->postRecv(&qx);
  m.ep[1]->postRecv(&qy);
  EXPECT_FALSE(qx.done);
  auto first = pattern(10, 64), second = pattern(11, 64);
  Op s1 = sendOp(1, 0, 9, first), s2 = sendOp(1, 0, 9, second);
  m.ep[0]->postSend(&s1);
  m.ep[0]->postSend(&s2);
  m.ep[1]->progress();
  ASSERT_TRUE(qx.done && qy.done);
  EXPECT_EQ(x, first);
  EXPECT_EQ(y, second);
}

TEST(ShmLink, AFullRingQueuesSendsUntilTheReceiverDrainsIt) {
  Machine m(2, kRing);
  // 16 KiB frames (plus their header): three fit in 64 KiB, the fourth waits.
  std::vector<std::vector<char>> data;
  for (int i = 0; i < 10; ++i)
    data.push_back(pattern(100 + i, kRing / 4));
  std::vector<Op> sends;
  sends.reserve(10);
  for (int i = 0; i < 10; ++i)
    sends.push_back(sendOp(1, 0, i, data[static_cast<size_t>(i)]));
  for (Op &s : sends)
    m.ep[0]->postSend(&s);
  EXPECT_TRUE(sends[2].done);
  EXPECT_FALSE(sends[3].done);
  EXPECT_TRUE(m.ep[0]->sendsPending());
  // The receiver asks for none of them yet: progress moves what arrived
  // out of the ring, so the sender goes on without it.
  int rounds = 0;
  while (m.ep[0]->sendsPending()) {
    m.ep[1]->progress();
    m.ep[0]->progress();
    ASSERT_LT(++rounds, 20);
  }
  // Received last message first.
  for (int i = 9; i >= 0; --i) {
    std::vector<char> in(static_cast<size_t>(kRing / 4));
    Op q = recvOp(0, 0, i, in);
    m.ep[1]->postRecv(&q);
    ASSERT_TRUE(q.done);
    EXPECT_EQ(in, data[static_cast<size_t>(i)]) << "message " << i;
  }
}

TEST(ShmLink, GatheredSendArrivesWhole) {
  Machine m(3, kRing);
  auto p0 = pattern(20, 10), p1 = pattern(21, 0), p2 = pattern(22, 3000);
  const void *bufs[] = {p0.data(), p1.data(), p2.data()};
  const int64_t bytes[] = {10, 0, 3000};
  Op s = Op::make(true, 2, 0, 4, 3010);
  s.gbufs = bufs;
  s.gbytes = bytes;
  s.gn = 3;
  m.ep[1]->postSend(&s);
  ASSERT_TRUE(s.done);
  std::vector<char> in(3010);
  Op q = recvOp(1, 0, 4, in);
  m.ep[2]->postRecv(&q);
  ASSERT_TRUE(q.done);
  std::vector<char> want(p0);
  want.insert(want.end(), p2.begin(), p2.end());
  EXPECT_EQ(in, want);
}

// A scattered receive: matched in the ring (parts crossing the ring's end)
// and from the unexpected queue.
TEST(ShmLink, ScatteredReceiveFillsItsPartsInOrder) {
  Machine m(2, kRing);
  for (int round = 0; round < 30; ++round) {
    auto msg = pattern(50 + round, 6000);
    const bool early = round % 2 == 0; // receive posted before the message arrives
    std::vector<char> p0(100), p1(0), p2(5900);
    void *bufs[] = {p0.data(), p1.data(), p2.data()};
    const int64_t bytes[] = {100, 0, 5900};
    Op q = scatterOp(0, 8, bufs, bytes, 3);
    if (early)
      m.ep[1]->postRecv(&q);
    Op s = sendOp(1, 0, 8, msg);
    m.ep[0]->postSend(&s);
    ASSERT_TRUE(s.done);
    if (early) {
      m.ep[1]->progress();
    } else {
      m.ep[1]->progress(); // into the unexpected queue
      m.ep[1]->postRecv(&q);
    }
    ASSERT_TRUE(q.done);
    EXPECT_EQ(q.mismatch, -1);
    std::vector<char> got(p0);
    got.insert(got.end(), p2.begin(), p2.end());
    EXPECT_EQ(got, msg) << "round " << round;
  }
}

// A receive of another size than its message: done, the message's size
// reported, its buffers untouched; matched in the ring or from the
// unexpected queue, plain or scattered.
TEST(ShmLink, SizeMismatchIsReportedNotCopied) {
  for (bool queued : {false, true}) {
    Machine m(2, kRing);
    auto a = pattern(31, 8), b = pattern(32, 24);
    Op s1 = sendOp(1, 0, 5, a), s2 = sendOp(1, 0, 6, b);
    m.ep[0]->postSend(&s1);
    m.ep[0]->postSend(&s2);
    if (queued)
      m.ep[1]->progress(); // both into the unexpected queue
    std::vector<char> in(16, 'k');
    Op q = recvOp(0, 0, 5, in);
    m.ep[1]->postRecv(&q);
    ASSERT_TRUE(q.done);
    EXPECT_EQ(q.mismatch, 8);
    EXPECT_EQ(in, std::vector<char>(16, 'k'));
    std::vector<char> p0(10, 'k'), p1(10, 'k');
    void *bufs[] = {p0.data(), p1.data()};
    const int64_t bytes[] = {10, 10};
    Op r = scatterOp(0, 6, bufs, bytes, 2);
    m.ep[1]->postRecv(&r);
    ASSERT_TRUE(r.done);
    EXPECT_EQ(r.mismatch, 24) << (queued ? "queued" : "in the ring");
    EXPECT_EQ(p0, std::vector<char>(10, 'k'));
  }
}

TEST(ShmLink, CancelledReceiveMatchesNothing) {
  Machine m(2, kRing);
  std::vector<char> gone(32), kept(32);
  Op q1 = recvOp(0, 0, 6, gone), q2 = recvOp(0, 0, 6, kept);
  m.ep[1]->postRecv(&q1);
  m.ep[1]->postRecv(&q2);
  m.ep[1]->cancel(&q1);
  auto msg = pattern(40, 32);
  Op s = sendOp(1, 0, 6, msg);
  m.ep[0]->postSend(&s);
  m.ep[1]->progress();
  EXPECT_FALSE(q1.done);
  ASSERT_TRUE(q2.done);
  EXPECT_EQ(kept, msg);
}

// Two threads exchanging many messages of random sizes both ways at once,
// receives posted late and early: every byte arrives as sent.
TEST(ShmLink, TwoThreadsExchangeBothWays) {
  Machine m(2, kRing);
  constexpr int kMessages = 3000;
  auto run = [&](int self) {
    const int peer = 1 - self;
    Endpoint &ep = *m.ep[static_cast<size_t>(self)];
    std::mt19937 rng(static_cast<unsigned>(7 + self));
    std::uniform_int_distribution<int64_t> size(0, kRing / 4);
    std::vector<std::vector<char>> outs(kMessages);
    std::vector<Op> sends(kMessages);
    std::vector<std::vector<char>> ins(kMessages);
    std::vector<Op> recvs(kMessages);
    // The peer draws the same sizes from its own generator seeded alike.
    std::mt19937 peerRng(static_cast<unsigned>(7 + peer));
    int failures = 0;
    for (int i = 0; i < kMessages; ++i) {
      outs[static_cast<size_t>(i)] = pattern(self * kMessages + i, size(rng));
      sends[static_cast<size_t>(i)] = sendOp(peer, 0, i % 7, outs[static_cast<size_t>(i)]);
      ep.postSend(&sends[static_cast<size_t>(i)]);
      ins[static_cast<size_t>(i)].resize(static_cast<size_t>(size(peerRng)));
      recvs[static_cast<size_t>(i)] = recvOp(peer, 0, i % 7, ins[static_cast<size_t>(i)]);
      ep.postRecv(&recvs[static_cast<size_t>(i)]);
      // Now and then wait for everything so far.
      if (i % 50 == 49)
        for (int j = 0; j <= i; ++j)
          while (!recvs[static_cast<size_t>(j)].done || !sends[static_cast<size_t>(j)].done)
            ep.progress();
    }
    for (int j = 0; j < kMessages; ++j)
      while (!recvs[static_cast<size_t>(j)].done || !sends[static_cast<size_t>(j)].done)
        ep.progress();
    for (int i = 0; i < kMessages; ++i) {
      if (recvs[static_cast<size_t>(i)].mismatch != -1 ||
          ins[static_cast<size_t>(i)] !=
              pattern(peer * kMessages + i, static_cast<int64_t>(ins[static_cast<size_t>(i)].size())))
        ++failures;
    }
    return failures;
  };
  int f0 = -1, f1 = -1;
  std::thread t([&] { f1 = run(1); });
  f0 = run(0);
  t.join();
  EXPECT_EQ(f0, 0);
  EXPECT_EQ(f1, 0);
}

} // namespace
