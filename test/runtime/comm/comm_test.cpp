//===- comm_test.cpp - the transport under mpirun -np 2 / 4 ----------------===//
//
// Every rank runs every test; tests are collective, so they must run in the
// same order everywhere (no filtering per rank). A test that fails on one rank
// and leaves another waiting ends through the transport's timeout rather than
// hanging.
#include "pipert/pipert_comm.h"
#include "pipert/pipert_trace.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

pipert_context *g_ctx = nullptr;
pipert_comm *world() { return pipert_comm_world(g_ctx); }
int rank() { return pipert_comm_rank(world()); }
int size() { return pipert_comm_size(world()); }

// Deterministic content of a message: depends on sender, tag and position.
uint8_t pattern(int src, int tag, int64_t i) {
  return static_cast<uint8_t>((src * 131 + tag * 17 + i * 7 + (i >> 8)) & 0xFF);
}

std::vector<uint8_t> message(int src, int tag, int64_t bytes) {
  std::vector<uint8_t> v(static_cast<size_t>(bytes));
  for (int64_t i = 0; i < bytes; ++i)
    v[i] = pattern(src, tag, i);
  return v;
}

TEST(Comm, RankAndSize) {
  EXPECT_GE(size(), 2);
  EXPECT_GE(rank(), 0);
  EXPECT_LT(rank(), size());
  EXPECT_EQ(pipert_world_rank(), rank());
  EXPECT_GE(pipert_comm_max_tag(world()), 32767);
  EXPECT_EQ(pipert_comm_initialized(), 1);
}

struct Case {
  pipert_dtype dtype;
  int64_t count;
};

// Ring exchange over many dtypes and sizes, from empty to rendezvous-sized
// messages, blocking with an even/odd order and non-blocking.
TEST(Comm, SendRecvShapesAndDtypes) {
  const Case cases[] = {{PIPERT_F32, 0},      {PIPERT_F32, 1},     {PIPERT_F32, 4096},
                        {PIPERT_F64, 7},      {PIPERT_I64, 1000},  {PIPERT_I32, 33},
                        {PIPERT_U8, 3},       {PIPERT_I8, 255},    {PIPERT_BOOL, 17},
                        {PIPERT_F16, 99},     {PIPERT_F32, 300000}};
  const int next = (rank() + 1) % size(), prev = (rank() + size() - 1) % size();
  int tag = 0;
  for (const Case &c : cases) {
    const int64_t bytes = c.count * static_cast<int64_t>(pipert_dtype_size(c.dtype));
    ++tag;
    const auto out = message(rank(), tag, bytes);
    std::vector<uint8_t> in(static_cast<size_t>(bytes) + 1, 0xAB);
    if (rank() % 2 == 0) {
      pipert_send(g_ctx, world(), out.data(), c.count, c.dtype, next, tag);
      pipert_recv(g_ctx, world(), in.data(), c.count, c.dtype, prev, tag);
    } else {
      pipert_recv(g_ctx, world(), in.data(), c.count, c.dtype, prev, tag);
      pipert_send(g_ctx, world(), out.data(), c.count, c.dtype, next, tag);
    }
    if (bytes > 0) // an empty message's data() may be null: memcmp is undefined
      EXPECT_EQ(std::memcmp(in.data(), message(prev, tag, bytes).data(), bytes), 0)
          << pipert_dtype_name(c.dtype) << " x " << c.count;
    EXPECT_EQ(in[bytes], 0xAB) << "wrote past the buffer";

    // Non-blocking, all ranks at once.
    ++tag;
    const auto out2 = message(rank(), tag, bytes);
    std::vector<uint8_t> in2(static_cast<size_t>(bytes));
    pipert_request *r = pipert_irecv(g_ctx, world(), in2.data(), c.count, c.dtype, prev, tag);
    pipert_request *s = pipert_isend(g_ctx, world(), out2.data(), c.count, c.dtype, next, tag);
    pipert_request *both[] = {s, r};
    pipert_wait_all(g_ctx, both, 2);
    EXPECT_EQ(both[0], nullptr);
    if (bytes > 0)
      EXPECT_EQ(std::memcmp(in2.data(), message(prev, tag, bytes).data(), bytes), 0);
  }
}

// Receives posted in another order than the sends, with different tags and
// sizes; same-tag messages arrive in the order sent.
TEST(Comm, OutOfOrderTags) {
  if (rank() >= 2) {
    pipert_barrier(g_ctx, world());
    return;
  }
  const int peer = 1 - rank();
  const int64_t sizes[] = {10, 100000, 3};
  if (rank() == 0) {
    std::vector<std::vector<uint8_t>> msgs;
    std::vector<pipert_request *> reqs;
    for (int t = 0; t < 3; ++t)
      msgs.push_back(message(0, 100 + t, sizes[t]));
    msgs.push_back(message(0, 200, 8)); // two messages with tag 7
    msgs.push_back(message(0, 201, 8));
    for (int t = 0; t < 3; ++t)
      reqs.push_back(pipert_isend(g_ctx, world(), msgs[t].data(), sizes[t], PIPERT_U8, peer, 100 + t));
    reqs.push_back(pipert_isend(g_ctx, world(), msgs[3].data(), 8, PIPERT_U8, peer, 7));
    reqs.push_back(pipert_isend(g_ctx, world(), msgs[4].data(), 8, PIPERT_U8, peer, 7));
    // Waited for in reverse order.
    for (int i = static_cast<int>(reqs.size()) - 1; i >= 0; --i)
      pipert_wait(g_ctx, reqs[i]);
  } else {
    std::vector<uint8_t> bufs[3];
    pipert_request *reqs[3];
    for (int t : {2, 0, 1}) {
      bufs[t].resize(static_cast<size_t>(sizes[t]));
      reqs[t] = pipert_irecv(g_ctx, world(), bufs[t].data(), sizes[t], PIPERT_U8, peer, 100 + t);
    }
    // The first of the tag-7 pair matches the first receive posted.
    std::vector<uint8_t> a(8), b(8);
    pipert_recv(g_ctx, world(), a.data(), 8, PIPERT_U8, peer, 7);
    pipert_recv(g_ctx, world(), b.data(), 8, PIPERT_U8, peer, 7);
    EXPECT_EQ(a, message(0, 200, 8));
    EXPECT_EQ(b, message(0, 201, 8));
    // Poll one with pipert_test, then wait for all.
    while (!pipert_test(g_ctx, reqs[1])) {
    }
    pipert_request *all[] = {reqs[1], nullptr, reqs[0], reqs[2]};
    pipert_wait_all(g_ctx, all, 4);
    for (int t = 0; t < 3; ++t)
      EXPECT_EQ(bufs[t], message(0, 100 + t, sizes[t])) << "tag " << 100 + t;
  }
  pipert_barrier(g_ctx, world());
}

// pipert_send is buffered (PIPERT_SEND_BUFFER, default 64 MiB): pairs of
// ranks send each other a 1 MiB message (Open MPI's shared memory sends it
// by rendezvous) before either receives, which would deadlock if a send
// waited for its receiver; and each sender overwrites its buffer as soon
// as pipert_send returns, which the receiver must not see. Many sends in a
// row (past the staging buffers' reuse) keep their order. (Messages of at
// most 2 KB and over 4 MiB are not buffered: sizes in between.)
TEST(Comm, BufferedSendsHeadToHeadAndReuse) {
  const int peer = rank() ^ 1;
  if (peer >= size()) {
    pipert_barrier(g_ctx, world());
    return;
  }
  const int64_t bytes = int64_t(1) << 20;
  std::vector<uint8_t> out = message(rank(), 40, bytes), in(static_cast<size_t>(bytes));
  pipert_send(g_ctx, world(), out.data(), bytes, PIPERT_U8, peer, 40);
  std::fill(out.begin(), out.end(), uint8_t(0xEE));
  pipert_recv(g_ctx, world(), in.data(), bytes, PIPERT_U8, peer, 40);
  EXPECT_EQ(in, message(peer, 40, bytes));
  // 20 sends of alternating sizes to one tag before the peer receives any.
  for (int i = 0; i < 20; ++i) {
    std::vector<uint8_t> m = message(rank(), 50 + i, 3000 + (i % 2) * 70000);
    pipert_send(g_ctx, world(), m.data(), static_cast<int64_t>(m.size()), PIPERT_U8, peer, 41);
  }
  for (int i = 0; i < 20; ++i) {
    std::vector<uint8_t> m(static_cast<size_t>(3000 + (i % 2) * 70000));
    pipert_recv(g_ctx, world(), m.data(), static_cast<int64_t>(m.size()), PIPERT_U8, peer, 41);
    EXPECT_EQ(m, message(peer, 50 + i, static_cast<int64_t>(m.size()))) << "message " << i;
  }
  pipert_barrier(g_ctx, world());
}

// Whether the messages between these ranks (all on one machine) go through
// the shared-memory rings: PIPERT_TEST_EXPECT_RINGS says which run this is
// (the default one, or PIPERT_SHM=0), so that the two runs test two paths.
TEST(Comm, RingsOnWhereExpected) {
  const char *expect = std::getenv("PIPERT_TEST_EXPECT_RINGS");
  if (!expect)
    GTEST_SKIP() << "PIPERT_TEST_EXPECT_RINGS not set";
  if (std::string(expect) == "1")
    EXPECT_GE(pipert_comm_ring_bytes(), 65536);
  else
    EXPECT_EQ(pipert_comm_ring_bytes(), 0);
}

// More than a ring holds sent to a peer that is in a barrier, then a large
// (MPI) receive before the small ones: every wait, whatever it waits for,
// drains the rings (else the sender, blocked on a full ring, never reaches
// the barrier). Then a rank's messages to itself, on the world and on a
// group of one.
TEST(Comm, RingsProgressInEveryWait) {
  const int peer = rank() ^ 1;
  if (peer >= size()) {
    pipert_barrier(g_ctx, world());
    pipert_barrier(g_ctx, world());
  } else if (rank() % 2 == 0) {
    for (int i = 0; i < 24; ++i) {
      std::vector<uint8_t> m = message(rank(), 60 + i, 200000);
      pipert_send(g_ctx, world(), m.data(), 200000, PIPERT_U8, peer, 60 + i);
    }
    std::vector<uint8_t> big = message(rank(), 90, 2 << 20);
    pipert_send(g_ctx, world(), big.data(), 2 << 20, PIPERT_U8, peer, 90);
    pipert_barrier(g_ctx, world());
    pipert_barrier(g_ctx, world());
  } else {
    pipert_barrier(g_ctx, world());
    std::vector<uint8_t> big(size_t(2) << 20);
    pipert_recv(g_ctx, world(), big.data(), 2 << 20, PIPERT_U8, peer, 90);
    EXPECT_EQ(big, message(peer, 90, 2 << 20));
    for (int i = 23; i >= 0; --i) {
      std::vector<uint8_t> m(200000);
      pipert_recv(g_ctx, world(), m.data(), 200000, PIPERT_U8, peer, 60 + i);
      EXPECT_EQ(m, message(peer, 60 + i, 200000)) << "message " << i;
    }
    pipert_barrier(g_ctx, world());
  }
  // The other way round: a wait on a ring advances MPI. One rank's buffered
  // 1 MiB send (MPI) completes only while that rank is inside MPI (without
  // single copy, as here); it then waits on a small (ring) message that its
  // peer sends only after receiving the 1 MiB.
  if (peer < size()) {
    std::vector<uint8_t> big(size_t(1) << 20), small(64);
    if (rank() % 2 == 1) {
      std::vector<uint8_t> out = message(rank(), 96, 1 << 20);
      pipert_send(g_ctx, world(), out.data(), 1 << 20, PIPERT_U8, peer, 96);
      pipert_recv(g_ctx, world(), small.data(), 64, PIPERT_U8, peer, 97);
      EXPECT_EQ(small, message(peer, 97, 64));
    } else {
      pipert_recv(g_ctx, world(), big.data(), 1 << 20, PIPERT_U8, peer, 96);
      EXPECT_EQ(big, message(peer, 96, 1 << 20));
      std::vector<uint8_t> out = message(rank(), 97, 64);
      pipert_send(g_ctx, world(), out.data(), 64, PIPERT_U8, peer, 97);
    }
  }
  // To itself: receive posted first, then the send, then the wait.
  pipert_comm *alone = pipert_comm_split(g_ctx, world(), rank(), 0);
  for (pipert_comm *c : {world(), alone}) {
    const int self = pipert_comm_rank(c);
    std::vector<uint8_t> in(100), out = message(rank(), 95, 100);
    pipert_request *r = pipert_irecv(g_ctx, c, in.data(), 100, PIPERT_U8, self, 95);
    pipert_request *q = pipert_isend(g_ctx, c, out.data(), 100, PIPERT_U8, self, 95);
    pipert_request *both[2] = {r, q};
    pipert_wait_all(g_ctx, both, 2);
    EXPECT_EQ(in, out);
  }
  pipert_comm_destroy(g_ctx, alone);
}

// pipert_send_packed / pipert_irecv_packed: pairs of ranks exchange groups
// of buffers as one message each, of sizes below, at and above the inline
// and staging thresholds (an empty part too); two packed receives are in
// flight at once and waited for together, in reverse order of posting, and
// a packed message is received whole by a plain receive of its total.
TEST(Comm, PackedSendsScatterInOrder) {
  const int peer = rank() ^ 1;
  if (peer >= size()) {
    pipert_barrier(g_ctx, world());
    return;
  }
  const std::vector<std::vector<int64_t>> groups = {
      {8, 8}, {2048, 2048}, {100, 0, 3000}, {40000, 12, 70000}};
  for (size_t g = 0; g < groups.size(); ++g) {
    const std::vector<int64_t> &sizes = groups[g];
    const int tag = 60 + int(g);
    std::vector<std::vector<uint8_t>> out, in;
    std::vector<const void *> outPtr;
    std::vector<void *> inPtr;
    for (size_t i = 0; i < sizes.size(); ++i) {
      out.push_back(message(rank(), tag * 10 + int(i), sizes[i]));
      in.emplace_back(static_cast<size_t>(sizes[i]), uint8_t(0xAB));
    }
    for (size_t i = 0; i < sizes.size(); ++i) {
      outPtr.push_back(out[i].data());
      inPtr.push_back(in[i].data());
    }
    const int n = int(sizes.size());
    // Posted before the peer sends, so a send may not wait for it (both
    // ranks send first).
    pipert_request *r = pipert_irecv_packed(g_ctx, world(), inPtr.data(), sizes.data(), n,
                                            peer, tag);
    pipert_send_packed(g_ctx, world(), outPtr.data(), sizes.data(), n, peer, tag);
    for (auto &o : out) // reusable once the send returns
      std::fill(o.begin(), o.end(), uint8_t(0xEE));
    pipert_wait(g_ctx, r);
    for (size_t i = 0; i < sizes.size(); ++i)
      EXPECT_EQ(in[i], message(peer, tag * 10 + int(i), sizes[i]))
          << "group " << g << " part " << i;
  }
  // Two packed receives in flight, waited for together in reverse order.
  const int64_t a[] = {3000, 5}, b[] = {7, 9000};
  std::vector<uint8_t> a0 = message(rank(), 1, 3000), a1 = message(rank(), 2, 5),
                       b0 = message(rank(), 3, 7), b1 = message(rank(), 4, 9000);
  std::vector<uint8_t> ra0(3000), ra1(5), rb0(7), rb1(9000);
  void *ia[] = {ra0.data(), ra1.data()}, *ib[] = {rb0.data(), rb1.data()};
  pipert_request *reqs[] = {pipert_irecv_packed(g_ctx, world(), ia, a, 2, peer, 70),
                            pipert_irecv_packed(g_ctx, world(), ib, b, 2, peer, 71)};
  const void *oa[] = {a0.data(), a1.data()}, *ob[] = {b0.data(), b1.data()};
  pipert_send_packed(g_ctx, world(), ob, b, 2, peer, 71);
  pipert_send_packed(g_ctx, world(), oa, a, 2, peer, 70);
  pipert_request *rev[] = {reqs[1], reqs[0]};
  pipert_wait_all(g_ctx, rev, 2);
  EXPECT_EQ(ra0, message(peer, 1, 3000));
  EXPECT_EQ(ra1, message(peer, 2, 5));
  EXPECT_EQ(rb0, message(peer, 3, 7));
  EXPECT_EQ(rb1, message(peer, 4, 9000));
  // Destinations back to back are received in place (no staging).
  std::vector<uint8_t> c0 = message(rank(), 7, 3000), c1 = message(rank(), 8, 1000);
  std::vector<uint8_t> joint(4000, uint8_t(0xAB));
  const int64_t cs[] = {3000, 1000};
  void *ic[] = {joint.data(), joint.data() + 3000};
  const void *oc[] = {c0.data(), c1.data()};
  pipert_request *rc = pipert_irecv_packed(g_ctx, world(), ic, cs, 2, peer, 73);
  pipert_send_packed(g_ctx, world(), oc, cs, 2, peer, 73);
  pipert_wait(g_ctx, rc);
  EXPECT_EQ(std::vector<uint8_t>(joint.begin(), joint.begin() + 3000), message(peer, 7, 3000));
  EXPECT_EQ(std::vector<uint8_t>(joint.begin() + 3000, joint.end()), message(peer, 8, 1000));
  // One message: a plain receive of the total gets the parts back to back.
  const int64_t parts[] = {16, 4000};
  std::vector<uint8_t> p0 = message(rank(), 5, 16), p1 = message(rank(), 6, 4000);
  const void *op[] = {p0.data(), p1.data()};
  std::vector<uint8_t> whole(4016);
  pipert_request *rw = pipert_irecv(g_ctx, world(), whole.data(), 4016, PIPERT_U8, peer, 72);
  pipert_send_packed(g_ctx, world(), op, parts, 2, peer, 72);
  pipert_wait(g_ctx, rw);
  std::vector<uint8_t> want = message(peer, 5, 16), tail = message(peer, 6, 4000);
  want.insert(want.end(), tail.begin(), tail.end());
  EXPECT_EQ(whole, want);
  pipert_barrier(g_ctx, world());
}

TEST(Comm, AllreduceSumAndMean) {
  for (int64_t n : {int64_t(1), int64_t(1000), int64_t(1) << 20}) {
    std::vector<float> v(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i)
      v[i] = static_cast<float>((rank() + 1) * (i % 1000));
    pipert_allreduce_f32(g_ctx, world(), v.data(), n, PIPERT_COLLECTIVE_SUM);
    const float ranksum = size() * (size() + 1) / 2.0f;
    bool ok = true;
    for (int64_t i = 0; i < n && ok; ++i)
      ok = v[i] == ranksum * static_cast<float>(i % 1000);
    EXPECT_TRUE(ok) << "sum over " << n;
  }
  std::vector<float> m = {static_cast<float>(rank()), 2.0f, -1.0f * rank()};
  pipert_allreduce_f32(g_ctx, world(), m.data(), 3, PIPERT_COLLECTIVE_MEAN);
  EXPECT_FLOAT_EQ(m[0], (size() - 1) / 2.0f);
  EXPECT_FLOAT_EQ(m[1], 2.0f);
  EXPECT_FLOAT_EQ(m[2], -(size() - 1) / 2.0f);

  std::vector<float> nb(5, 1.0f);
  pipert_request *r = pipert_iallreduce_f32(g_ctx, world(), nb.data(), 5, PIPERT_COLLECTIVE_MEAN);
  pipert_wait(g_ctx, r);
  EXPECT_EQ(nb, std::vector<float>(5, 1.0f));
}

TEST(Comm, BroadcastFromEveryRoot) {
  for (int root = 0; root < size(); ++root) {
    std::vector<int64_t> v(1234, -1);
    if (rank() == root)
      for (int i = 0; i < 1234; ++i)
        v[i] = root * 100000 + i;
    pipert_broadcast(g_ctx, world(), v.data(), 1234, PIPERT_I64, root);
    for (int i = 0; i < 1234; i += 97)
      EXPECT_EQ(v[i], root * 100000 + i);
    std::vector<uint8_t> big = rank() == root ? message(root, 1, 1 << 20) : std::vector<uint8_t>(1 << 20);
    pipert_broadcast(g_ctx, world(), big.data(), 1 << 20, PIPERT_U8, root);
    EXPECT_EQ(big, message(root, 1, 1 << 20));
  }
}

// Every P x S layout of the world: stage groups hold one rank per pipeline,
// pipeline groups the S consecutive ranks of one pipeline.
TEST(Comm, LayoutGroups) {
  for (int stages = 1; stages <= size(); ++stages) {
    if (size() % stages)
      continue;
    const int pipelines = size() / stages;
    const int s = rank() % stages, p = rank() / stages;
    pipert_comm *stage = pipert_comm_stage_group(g_ctx, pipelines, stages);
    pipert_comm *pipe = pipert_comm_pipeline_group(g_ctx, pipelines, stages);
    SCOPED_TRACE("P=" + std::to_string(pipelines) + " S=" + std::to_string(stages));
    ASSERT_EQ(pipert_comm_size(stage), pipelines);
    ASSERT_EQ(pipert_comm_rank(stage), p);
    ASSERT_EQ(pipert_comm_size(pipe), stages);
    ASSERT_EQ(pipert_comm_rank(pipe), s);
    for (int i = 0; i < pipelines; ++i)
      EXPECT_EQ(pipert_comm_world_rank_of(stage, i), i * stages + s);
    for (int i = 0; i < stages; ++i)
      EXPECT_EQ(pipert_comm_world_rank_of(pipe, i), p * stages + i);

    // Averaging among a stage's replicas: the mean of their world ranks.
    float v = static_cast<float>(rank());
    pipert_allreduce_f32(g_ctx, stage, &v, 1, PIPERT_COLLECTIVE_MEAN);
    float expect = 0;
    for (int i = 0; i < pipelines; ++i)
      expect += static_cast<float>(i * stages + s);
    EXPECT_FLOAT_EQ(v, expect / pipelines);

    // Stage k sends to stage k+1 of its own pipeline, tagged with the pipeline.
    if (s + 1 < stages) {
      int64_t val = 1000 * p + s;
      pipert_send(g_ctx, pipe, &val, 1, PIPERT_I64, s + 1, p);
    }
    if (s > 0) {
      int64_t got = -1;
      pipert_recv(g_ctx, pipe, &got, 1, PIPERT_I64, s - 1, p);
      EXPECT_EQ(got, 1000 * p + s - 1);
    }
    // Broadcast from the first pipeline's replica to the others.
    int32_t w = p == 0 ? 4242 + s : 0;
    pipert_broadcast(g_ctx, stage, &w, 1, PIPERT_I32, 0);
    EXPECT_EQ(w, 4242 + s);
    pipert_comm_destroy(g_ctx, stage);
    pipert_comm_destroy(g_ctx, pipe);
  }
  // A general split: even and odd ranks.
  pipert_comm *parity = pipert_comm_split(g_ctx, world(), rank() % 2, -rank());
  EXPECT_EQ(pipert_comm_size(parity), (size() + 1 - rank() % 2) / 2);
  // Ordered by key = -rank: the highest world rank comes first.
  EXPECT_EQ(pipert_comm_rank(parity), (size() - 1 - rank()) / 2);
  pipert_comm_destroy(g_ctx, parity);
}

// The transport traces its transfers; each rank writes its file, rank 0
// merges them (checked by the runtime.comm.trace test).
TEST(Comm, TracesTransfersAndMerges) {
  const char *dir = std::getenv("PIPERT_TEST_TRACE_DIR");
  pipert_trace_enable(g_ctx, rank());
  const int next = (rank() + 1) % size(), prev = (rank() + size() - 1) % size();
  std::vector<float> out(1000, 1.0f), in(1000);
  const double t0 = pipert_trace_begin(g_ctx);
  pipert_trace_end(g_ctx, "forward mb0", "kernel", t0, PIPERT_TRACE_TID_COMPUTE);
  pipert_request *r = pipert_irecv(g_ctx, world(), in.data(), 1000, PIPERT_F32, prev, 9);
  pipert_send(g_ctx, world(), out.data(), 1000, PIPERT_F32, next, 9);
  pipert_wait(g_ctx, r);
  pipert_allreduce_f32(g_ctx, world(), out.data(), 1000, PIPERT_COLLECTIVE_SUM);
  EXPECT_GE(pipert_trace_event_count(g_ctx), 4); // kernel, send, recv, allreduce (+ idle)
  if (dir) {
    const std::string mine = std::string(dir) + "/trace-" + std::to_string(rank()) + ".json";
    EXPECT_EQ(pipert_trace_write(g_ctx, mine.c_str()), 0);
  }
  pipert_trace_disable(g_ctx);
  pipert_barrier(g_ctx, world());
  if (dir && rank() == 0) {
    std::vector<std::string> files;
    std::vector<const char *> ptrs;
    for (int i = 0; i < size(); ++i)
      files.push_back(std::string(dir) + "/trace-" + std::to_string(i) + ".json");
    for (auto &f : files)
      ptrs.push_back(f.c_str());
    char err[512] = "";
    const std::string merged = std::string(dir) + "/merged-" + std::to_string(size()) + ".json";
    EXPECT_EQ(pipert_trace_merge(ptrs.data(), size(), merged.c_str(), err, sizeof err), 0) << err;
  }
}

class FailurePrinter : public ::testing::EmptyTestEventListener {
  void OnTestPartResult(const ::testing::TestPartResult &r) override {
    if (r.failed())
      std::fprintf(stderr, "rank %d: %s:%d: Failure\n%s\n", pipert_world_rank(),
                   r.file_name() ? r.file_name() : "?", r.line_number(), r.message());
  }
};

} // namespace

int main(int argc, char **argv) {
  g_ctx = pipert_context_create(1, 1);
  pipert_comm_init(g_ctx, &argc, &argv);
  // A rank left waiting by a failed peer gives up well before CTest's timeout.
  pipert_comm_set_timeout(20);
  ::testing::InitGoogleTest(&argc, argv);
  // One rank prints the results; the others only their failures.
  if (pipert_world_rank() != 0) {
    auto &listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
    listeners.Append(new FailurePrinter());
  }
  const int rc = RUN_ALL_TESTS();
  // Any rank's failure fails the job.
  float failed = rc != 0 ? 1.0f : 0.0f;
  pipert_allreduce_f32(g_ctx, pipert_comm_world(g_ctx), &failed, 1, PIPERT_COLLECTIVE_SUM);
  pipert_comm_finalize(g_ctx);
  pipert_context_destroy(g_ctx);
  return failed > 0 ? 1 : 0;
}
