//===- test_main.cpp - gtest main of the CUDA backend tests ---------------===//
//
// Without a CUDA device every test is skipped (GTEST_SKIP in the global
// environment) with "no CUDA device: CUDA backend tests skipped", and the
// process exits with 77, which CTest's SKIP_RETURN_CODE reports as skipped.
// Listing the tests (gtest_discover_tests at build time) needs no device.
//
//===----------------------------------------------------------------------===//
#include <cuda_runtime.h>
#include <gtest/gtest.h>

namespace {

bool g_no_device = false;

class CudaDeviceEnvironment : public ::testing::Environment {
public:
  void SetUp() override {
    int count = 0;
    const cudaError_t st = cudaGetDeviceCount(&count);
    if (st != cudaSuccess || count == 0) {
      g_no_device = true;
      GTEST_SKIP() << "no CUDA device: CUDA backend tests skipped ("
                   << (st == cudaSuccess ? "cudaGetDeviceCount reports 0 devices"
                                         : cudaGetErrorString(st))
                   << ")";
    }
  }
};

} // namespace

int main(int argc, char **argv) {
  ::testing::InitGoogleTest(&argc, argv);
  ::testing::AddGlobalTestEnvironment(new CudaDeviceEnvironment);
  const int rc = RUN_ALL_TESTS();
  return g_no_device ? 77 : rc;
}
