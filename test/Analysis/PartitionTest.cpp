//===- PartitionTest.cpp - the partitioners against brute force -----------===//
//
// Property tests over random layer profiles: the balanced partitioner's
// bottleneck and PipeDream's dynamic program equal the optimum of an
// exhaustive search over every contiguous split, and the balanced
// partition's cut bytes are the least among the optimal splits.
//
//===----------------------------------------------------------------------===//
#include "../../lib/Transforms/Partition/Partitioners.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <limits>
#include <random>

using namespace mlir::pipec;
using namespace mlir::pipec::partition;

namespace {

Problem randomProblem(std::mt19937 &rng, int64_t n) {
  Problem p;
  p.seq.assign(n, nullptr);
  std::uniform_real_distribution<double> cost(0.1, 10.0);
  std::uniform_int_distribution<int64_t> bytes(1, 1000);
  p.prefix.assign(n + 1, 0.0);
  for (int64_t i = 0; i < n; ++i)
    p.prefix[i + 1] = p.prefix[i] + cost(rng);
  p.crossBytes.assign(n + 1, 0);
  p.crossCount.assign(n + 1, 0);
  for (int64_t k = 1; k < n; ++k) {
    p.crossBytes[k] = bytes(rng);
    p.crossCount[k] = 1;
  }
  return p;
}

/// Every split of n ops into `stages` non-empty contiguous stages.
void forEachSplit(int64_t n, int64_t stages,
                  const std::function<void(const Cuts &)> &fn) {
  Cuts cuts;
  std::function<void(int64_t)> rec = [&](int64_t from) {
    if (int64_t(cuts.size()) == stages - 1) {
      fn(cuts);
      return;
    }
    int64_t left = stages - 1 - int64_t(cuts.size());
    for (int64_t c = from; c <= n - left; ++c) {
      cuts.push_back(c);
      rec(c + 1);
      cuts.pop_back();
    }
  };
  rec(1);
}

double bottleneck(const Problem &p, const Cuts &cuts) {
  double worst = 0;
  int64_t begin = 0;
  for (size_t i = 0; i <= cuts.size(); ++i) {
    int64_t end = i < cuts.size() ? cuts[i] : p.size();
    worst = std::max(worst, p.cost(begin, end));
    begin = end;
  }
  return worst;
}

int64_t cutBytes(const Problem &p, const Cuts &cuts) {
  int64_t sum = 0;
  for (int64_t c : cuts)
    sum += p.crossBytes[c];
  return sum;
}

bool valid(const Cuts &cuts, int64_t n, int64_t stages) {
  if (int64_t(cuts.size()) != stages - 1)
    return false;
  int64_t last = 0;
  for (int64_t c : cuts) {
    if (c <= last || c >= n)
      return false;
    last = c;
  }
  return true;
}

TEST(Partition, BalancedEqualsBruteForce) {
  std::mt19937 rng(1234);
  for (int trial = 0; trial < 300; ++trial) {
    int64_t n = 2 + rng() % 11;
    int64_t stages = 2 + rng() % std::min<int64_t>(4, n - 1);
    Problem p = randomProblem(rng, n);
    double best = std::numeric_limits<double>::infinity();
    forEachSplit(n, stages, [&](const Cuts &c) {
      best = std::min(best, bottleneck(p, c));
    });
    int64_t fewestBytes = std::numeric_limits<int64_t>::max();
    forEachSplit(n, stages, [&](const Cuts &c) {
      if (bottleneck(p, c) <= best * (1 + 1e-9))
        fewestBytes = std::min(fewestBytes, cutBytes(p, c));
    });
    // Tolerance 0, every cut point admitted: the exact optimum.
    Cuts cuts = partitionBalanced(p, stages, /*slack=*/1e18, /*tolerance=*/0);
    ASSERT_TRUE(valid(cuts, n, stages)) << "trial " << trial;
    EXPECT_NEAR(bottleneck(p, cuts), best, 1e-9 * best) << "trial " << trial;
    EXPECT_EQ(cutBytes(p, cuts), fewestBytes) << "trial " << trial;
    // The default narrow-cut search stays within its tolerance.
    Cuts narrow = partitionBalanced(p, stages, 2.0, 0.1);
    ASSERT_TRUE(valid(narrow, n, stages)) << "trial " << trial;
    EXPECT_LE(bottleneck(p, narrow), best * 1.1 + 1e-9) << "trial " << trial;
  }
}

TEST(Partition, PipeDreamEqualsBruteForce) {
  std::mt19937 rng(99);
  CostModelOptions options;
  options.linkBandwidth = 200.0; // bytes/s: transfers matter (0.005-5 s)
  CostModel model(options);
  for (int trial = 0; trial < 300; ++trial) {
    int64_t n = 2 + rng() % 10;
    int64_t stages = 2 + rng() % std::min<int64_t>(4, n - 1);
    Problem p = randomProblem(rng, n);
    // PipeDream's objective: the slowest of the stages and of the
    // transfers (2x: activations and gradients) at the cuts.
    auto objective = [&](const Cuts &c) {
      double worst = bottleneck(p, c);
      for (int64_t k : c)
        worst = std::max(worst, 2 * model.getTransferTime(p.crossBytes[k]));
      return worst;
    };
    double best = std::numeric_limits<double>::infinity();
    forEachSplit(n, stages, [&](const Cuts &c) { best = std::min(best, objective(c)); });
    Cuts cuts = partitionPipeDream(p, model, stages, /*slack=*/1e18,
                                   /*tolerance=*/0);
    ASSERT_TRUE(valid(cuts, n, stages)) << "trial " << trial;
    EXPECT_NEAR(objective(cuts), best, 1e-9 * best) << "trial " << trial;
  }
}

TEST(Partition, StagesFromCuts) {
  EXPECT_EQ(stagesFromCuts(5, {2, 4}), (llvm::SmallVector<int64_t>{0, 0, 1, 1, 2}));
  EXPECT_EQ(stagesFromCuts(3, {}), (llvm::SmallVector<int64_t>{0, 0, 0}));
}

} // namespace
