//===- ProfileFitTest.cpp - fitStepCost: a profile's fixed cost per step ---===//
//
// Synthetic profiles with a known fixed cost per step and a known scale of
// the measured ops: the fit recovers them, keeps to its bounds, and falls
// back where the sizes cannot separate the two.
//
//===----------------------------------------------------------------------===//
#include "pipec/Analysis/Profile.h"

#include <gtest/gtest.h>

using namespace mlir::pipec;

namespace {

std::vector<double> steps(const std::vector<double> &ops, double fixed,
                          double scale, double update) {
  std::vector<double> out;
  for (double o : ops)
    out.push_back(fixed + scale * o + update);
  return out;
}

} // namespace

TEST(PlannerStepFit, RecoversFixedCostAndScale) {
  std::vector<double> ops{10e-6, 20e-6, 80e-6};
  StepFit fit = fitStepCost(ops, steps(ops, 30e-6, 1.2, 2e-6), 2e-6);
  EXPECT_NEAR(fit.fixed, 30e-6, 1e-9);
  EXPECT_NEAR(fit.scale, 1.2, 1e-6);
}

TEST(PlannerStepFit, NoFixedCost) {
  std::vector<double> ops{1e-3, 2e-3, 8e-3};
  StepFit fit = fitStepCost(ops, steps(ops, 0, 0.9, 0), 0);
  EXPECT_NEAR(fit.fixed, 0, 1e-9);
  EXPECT_NEAR(fit.scale, 0.9, 1e-6);
}

TEST(PlannerStepFit, FromAProfile) {
  OpProfile profile;
  profile.rows = {4, 8, 32};
  profile.ops["a"] = OpTimes{{1e-6, 2e-6, 8e-6}, {2e-6, 4e-6, 16e-6}};
  profile.ops["b"] = OpTimes{{1e-6, 1e-6, 1e-6}, {0, 0, 0}};
  profile.updateSeconds = 5e-6;
  for (size_t i = 0; i < profile.rows.size(); ++i)
    profile.stepSeconds.push_back(40e-6 + profile.opsAt(i) + 5e-6);
  EXPECT_NEAR(profile.opsAt(2), 25e-6, 1e-12);
  StepFit fit = fitStep(profile);
  EXPECT_NEAR(fit.fixed, 40e-6, 1e-9);
  EXPECT_NEAR(fit.scale, 1.0, 1e-6);
}

TEST(PlannerStepFit, NegativeInterceptFitsThroughTheOrigin) {
  // Steps below a line through the origin at small sizes: no fixed cost,
  // the proportional scale.
  std::vector<double> ops{10e-6, 20e-6, 80e-6};
  std::vector<double> s{8e-6, 19e-6, 80e-6};
  StepFit fit = fitStepCost(ops, s, 0);
  EXPECT_EQ(fit.fixed, 0);
  EXPECT_GT(fit.scale, 0.8);
  EXPECT_LT(fit.scale, 1.01);
}

TEST(PlannerStepFit, ScaleWithinBounds) {
  std::vector<double> ops{10e-6, 20e-6, 80e-6};
  StepFit fit = fitStepCost(ops, steps(ops, 5e-6, 3.0, 0), 0);
  EXPECT_EQ(fit.scale, 2.0);
  EXPECT_GT(fit.fixed, 5e-6);
  fit = fitStepCost(ops, steps(ops, 1e-6, 0.2, 0), 0);
  EXPECT_EQ(fit.scale, 0.5);
  EXPECT_EQ(fit.fixed, 0);
}

TEST(PlannerStepFit, OneSize) {
  // What the ops do not explain is fixed; ops above the step scale down.
  StepFit fit = fitStepCost({50e-6}, {80e-6}, 0);
  EXPECT_NEAR(fit.fixed, 30e-6, 1e-12);
  EXPECT_EQ(fit.scale, 1.0);
  fit = fitStepCost({50e-6}, {40e-6}, 0);
  EXPECT_EQ(fit.fixed, 0);
  EXPECT_NEAR(fit.scale, 0.8, 1e-9);
}

TEST(PlannerStepFit, NothingMeasured) {
  StepFit fit = fitStepCost({1e-3, 2e-3}, {0, 0}, 0);
  EXPECT_EQ(fit.fixed, 0);
  EXPECT_EQ(fit.scale, 1.0);
  fit = fitStepCost({}, {}, 0);
  EXPECT_EQ(fit.fixed, 0);
  EXPECT_EQ(fit.scale, 1.0);
}

TEST(PlannerLink, MeasuredSizesInterpolated) {
  OpProfile profile;
  profile.linkLatency = 1e-6;
  profile.linkBandwidth = 1e9;
  // Without measured sizes: the line.
  EXPECT_NEAR(profile.linkSeconds(1000), 2e-6, 1e-15);
  // A protocol change between 1 KiB and 4 KiB that the line misses.
  profile.linkTimes = {{4, 1e-6}, {1024, 1.2e-6}, {4096, 4e-6}, {1 << 20, 1e-3}};
  EXPECT_NEAR(profile.linkSeconds(1), 1e-6, 1e-15);
  EXPECT_NEAR(profile.linkSeconds(1024), 1.2e-6, 1e-15);
  EXPECT_NEAR(profile.linkSeconds(2560), 2.6e-6, 1e-12);
  EXPECT_NEAR(profile.linkSeconds(4096), 4e-6, 1e-15);
  // Beyond the largest size: its time plus the extra bytes at the bandwidth.
  EXPECT_NEAR(profile.linkSeconds(double(1 << 20) + 1e6), 1e-3 + 1e-3, 1e-12);
}

TEST(PlannerLink, WrittenAndReadBack) {
  OpProfile profile;
  profile.modelHash = "0123456789abcdef";
  profile.machine = "m x1";
  profile.target = "cpu";
  profile.rows = {4, 8};
  profile.ops["a"] = OpTimes{{1e-6, 2e-6}, {2e-6, 4e-6}};
  profile.stepSeconds = {5e-6, 8e-6};
  profile.updateSeconds = 1e-7;
  profile.opEventSeconds = 3e-8;
  profile.linkLatency = 6e-7;
  profile.linkBandwidth = 1e10;
  profile.linkTimes = {{4, 6e-7}, {4096, 1.5e-6}};
  std::string path = ::testing::TempDir() + "/profile_fit_test.json";
  std::string error;
  ASSERT_TRUE(writeProfile(path, profile, error)) << error;
  std::optional<OpProfile> read = readProfile(path, error);
  ASSERT_TRUE(read) << error;
  EXPECT_EQ(read->linkTimes, profile.linkTimes);
  EXPECT_DOUBLE_EQ(read->updateSeconds, 1e-7);
  EXPECT_DOUBLE_EQ(read->opEventSeconds, 3e-8);
  EXPECT_EQ(read->stepSeconds, profile.stepSeconds);
}
