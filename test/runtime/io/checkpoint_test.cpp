//===- checkpoint_test.cpp - checkpoint round trip, atomicity, ONNX export -===//
#include "io_test_util.h"
#include "pipert/pipert_checkpoint.h"

#include <dirent.h>
#include <sys/resource.h>

#include <csignal>
#include <cstring>
#include <vector>

using pipert_test::fixture;
using pipert_test::runPython;
using pipert_test::tempDir;

namespace {

// A rank's training state: parameters of several dtypes and shapes, optimizer
// moments, a 0-d counter and an empty tensor.
struct State {
  std::vector<float> w = std::vector<float>(3 * 5);
  std::vector<float> m = std::vector<float>(3 * 5);
  std::vector<double> d = std::vector<double>(4);
  std::vector<int64_t> count = std::vector<int64_t>(1);
  std::vector<uint8_t> mask = std::vector<uint8_t>(7);
  std::vector<float> none;
  const int64_t wShape[2] = {3, 5}, dShape[1] = {4}, maskShape[1] = {7}, noneShape[2] = {0, 4};

  void fill(uint32_t seed) {
    uint32_t x = seed * 2654435761u + 1;
    auto next = [&] { return x = x * 1664525u + 1013904223u; };
    for (auto &v : w) {
      uint32_t bits = next();
      std::memcpy(&v, &bits, 4); // any bit pattern, NaN payloads included
    }
    for (auto &v : m)
      v = static_cast<float>(next() % 1000) / 7.0f;
    for (auto &v : d)
      v = static_cast<double>(next()) / 3.0;
    count[0] = -static_cast<int64_t>(next()) * 1000003;
    for (auto &v : mask)
      v = static_cast<uint8_t>(next() & 1);
  }
  std::vector<pipert_named_tensor> tensors() {
    return {{"stage1.fc.weight", PIPERT_F32, 2, wShape, w.data()},
            {"adam.m.stage1.fc.weight", PIPERT_F32, 2, wShape, m.data()},
            {"d", PIPERT_F64, 1, dShape, d.data()},
            {"count", PIPERT_I64, 0, nullptr, count.data()},
            {"mask", PIPERT_BOOL, 1, maskShape, mask.data()},
            {"none", PIPERT_F32, 2, noneShape, nullptr}};
  }
  bool operator==(const State &o) const {
    return std::memcmp(w.data(), o.w.data(), w.size() * 4) == 0 && m == o.m && d == o.d &&
           count == o.count && mask == o.mask;
  }
};

class Checkpoint : public ::testing::Test {
protected:
  pipert_context *ctx = pipert_context_create(1, 1);
  std::string dir = tempDir() + "/ckpt/nested";
  ~Checkpoint() override { pipert_context_destroy(ctx); }

  std::vector<std::string> files() {
    std::vector<std::string> out;
    if (DIR *d = opendir(dir.c_str())) {
      while (dirent *e = readdir(d))
        if (e->d_name[0] != '.')
          out.push_back(e->d_name);
      closedir(d);
    }
    return out;
  }
};

TEST_F(Checkpoint, RoundTripIsBitwise) {
  State a, b;
  a.fill(1);
  b.fill(2);
  ASSERT_FALSE(a == b);
  auto ta = a.tensors();
  pipert_checkpoint_save(ctx, dir.c_str(), 3, 1234, 0xDEADBEEFCAFEF00Dull, ta.data(),
                         static_cast<int>(ta.size()));
  EXPECT_EQ(files(), std::vector<std::string>{"rank-3.ckpt"});
  int64_t step = 0;
  uint64_t rng = 0;
  auto tb = b.tensors();
  ASSERT_EQ(pipert_checkpoint_load(ctx, dir.c_str(), 3, &step, &rng, tb.data(),
                                   static_cast<int>(tb.size())),
            0);
  EXPECT_TRUE(a == b);
  EXPECT_EQ(step, 1234);
  EXPECT_EQ(rng, 0xDEADBEEFCAFEF00Dull);

  // A subset, in another order, may be asked for.
  State c;
  auto tc = c.tensors();
  std::vector<pipert_named_tensor> subset = {tc[2], tc[0]};
  ASSERT_EQ(pipert_checkpoint_load(ctx, dir.c_str(), 3, nullptr, nullptr, subset.data(), 2), 0);
  EXPECT_EQ(c.d, a.d);
  EXPECT_EQ(std::memcmp(c.w.data(), a.w.data(), a.w.size() * 4), 0);
}

TEST_F(Checkpoint, NoCheckpointMeansStartFresh) {
  State a;
  auto t = a.tensors();
  int64_t step = 77;
  EXPECT_EQ(pipert_checkpoint_load(ctx, dir.c_str(), 0, &step, nullptr, t.data(), 1), 1);
  EXPECT_EQ(step, 77);
  char buf[256];
  EXPECT_STREQ(pipert_checkpoint_path("/x/y", 12, buf, sizeof buf), "/x/y/rank-12.ckpt");
}

TEST_F(Checkpoint, OverwriteReplacesTheOldOne) {
  State a, b, out;
  a.fill(1);
  b.fill(2);
  auto ta = a.tensors(), tb = b.tensors(), to = out.tensors();
  pipert_checkpoint_save(ctx, dir.c_str(), 0, 1, 1, ta.data(), 6);
  pipert_checkpoint_save(ctx, dir.c_str(), 0, 2, 2, tb.data(), 6);
  int64_t step = 0;
  ASSERT_EQ(pipert_checkpoint_load(ctx, dir.c_str(), 0, &step, nullptr, to.data(), 6), 0);
  EXPECT_EQ(step, 2);
  EXPECT_TRUE(out == b);
  EXPECT_EQ(files(), std::vector<std::string>{"rank-0.ckpt"});
}

// A job's checkpoint: every rank saves into the step's directory, LATEST
// names it once all have, the older step directories go. A rank that saved
// a newer step that was never committed does not change what loads.
TEST_F(Checkpoint, CommittedStepDirectories) {
  State a, b, out;
  a.fill(1);
  b.fill(2);
  auto ta = a.tensors(), tb = b.tensors(), to = out.tensors();
  char stage[512], from[512];
  for (int rank : {0, 1})
    pipert_checkpoint_save(ctx, pipert_checkpoint_stage_dir(dir.c_str(), 3, stage, sizeof stage),
                           rank, 3, 7, ta.data(), 6);
  EXPECT_STREQ(pipert_checkpoint_resolve(dir.c_str(), from, sizeof from), dir.c_str());
  pipert_checkpoint_commit(dir.c_str(), 3);
  EXPECT_EQ(std::string(pipert_checkpoint_resolve(dir.c_str(), from, sizeof from)),
            dir + "/step-3");
  // Step 5: rank 0 saves, rank 1 dies before it does; nothing is committed.
  pipert_checkpoint_save(ctx, pipert_checkpoint_stage_dir(dir.c_str(), 5, stage, sizeof stage), 0,
                         5, 8, tb.data(), 6);
  for (int rank : {0, 1}) {
    int64_t step = 0;
    ASSERT_EQ(pipert_checkpoint_load(ctx, pipert_checkpoint_resolve(dir.c_str(), from, sizeof from),
                                     rank, &step, nullptr, to.data(), 6),
              0);
    EXPECT_EQ(step, 3);
    EXPECT_TRUE(out == a);
  }
  // The next complete save is committed and the old directories pruned.
  for (int rank : {0, 1})
    pipert_checkpoint_save(ctx, pipert_checkpoint_stage_dir(dir.c_str(), 6, stage, sizeof stage),
                           rank, 6, 9, tb.data(), 6);
  pipert_checkpoint_commit(dir.c_str(), 6);
  for (int rank : {0, 1})
    pipert_checkpoint_prune(dir.c_str(), rank);
  std::vector<std::string> left = files();
  std::sort(left.begin(), left.end());
  EXPECT_EQ(left, (std::vector<std::string>{"LATEST", "step-6"}));
}

// A write that fails (file size limit: EFBIG) leaves the old checkpoint.
TEST_F(Checkpoint, FailedWriteKeepsTheOldCheckpoint) {
  State a, b, out;
  a.fill(1);
  b.fill(2);
  auto ta = a.tensors(), tb = b.tensors(), to = out.tensors();
  pipert_checkpoint_save(ctx, dir.c_str(), 0, 10, 5, ta.data(), 6);
  auto saveWithLimit = [&] {
    std::signal(SIGXFSZ, SIG_IGN);
    rlimit lim;
    lim.rlim_cur = lim.rlim_max = 250; // below the checkpoint, above the error line (stderr is a file in death tests)
    setrlimit(RLIMIT_FSIZE, &lim);
    pipert_checkpoint_save(ctx, dir.c_str(), 0, 20, 6, tb.data(), 6);
  };
  EXPECT_EXIT(saveWithLimit(),
      ::testing::ExitedWithCode(1),
      "checkpoint save: cannot write '.*/rank-0.ckpt': File too large \\(the previous file, if "
      "any, is kept\\)");
  EXPECT_EQ(files(), std::vector<std::string>{"rank-0.ckpt"}); // temp file removed
  int64_t step = 0;
  ASSERT_EQ(pipert_checkpoint_load(ctx, dir.c_str(), 0, &step, nullptr, to.data(), 6), 0);
  EXPECT_EQ(step, 10);
  EXPECT_TRUE(out == a);
}

// A rank killed in the middle of writing leaves the old checkpoint too.
TEST_F(Checkpoint, CrashDuringWriteKeepsTheOldCheckpoint) {
  State a, b, out;
  a.fill(1);
  b.fill(2);
  auto ta = a.tensors(), tb = b.tensors(), to = out.tensors();
  pipert_checkpoint_save(ctx, dir.c_str(), 0, 10, 5, ta.data(), 6);
  auto crashWhileSaving = [&] {
    std::signal(SIGXFSZ, SIG_DFL);
    rlimit lim;
    lim.rlim_cur = lim.rlim_max = 150;
    setrlimit(RLIMIT_FSIZE, &lim);
    pipert_checkpoint_save(ctx, dir.c_str(), 0, 20, 6, tb.data(), 6);
  };
  EXPECT_EXIT(crashWhileSaving(), ::testing::KilledBySignal(SIGXFSZ), "");
  int64_t step = 0;
  ASSERT_EQ(pipert_checkpoint_load(ctx, dir.c_str(), 0, &step, nullptr, to.data(), 6), 0);
  EXPECT_EQ(step, 10);
  EXPECT_TRUE(out == a);
  // The next save succeeds despite the leftover temp file.
  pipert_checkpoint_save(ctx, dir.c_str(), 0, 30, 7, tb.data(), 6);
  ASSERT_EQ(pipert_checkpoint_load(ctx, dir.c_str(), 0, &step, nullptr, to.data(), 6), 0);
  EXPECT_EQ(step, 30);
  EXPECT_TRUE(out == b);
}

TEST_F(Checkpoint, BadCheckpointsAreFatal) {
  State a;
  a.fill(1);
  auto ta = a.tensors();
  pipert_checkpoint_save(ctx, dir.c_str(), 0, 10, 5, ta.data(), 6);
  const std::string path = dir + "/rank-0.ckpt";

  State wrong;
  auto tw = wrong.tensors();
  const int64_t otherShape[2] = {5, 3};
  std::vector<pipert_named_tensor> req = {tw[0]};
  req[0].shape = otherShape;
  EXPECT_EXIT(pipert_checkpoint_load(ctx, dir.c_str(), 0, nullptr, nullptr, req.data(), 1),
              ::testing::ExitedWithCode(1),
              "tensor 'stage1.fc.weight' has shape \\[3,5\\], expected \\[5,3\\]");
  req = {tw[2]};
  req[0].dtype = PIPERT_I64;
  EXPECT_EXIT(pipert_checkpoint_load(ctx, dir.c_str(), 0, nullptr, nullptr, req.data(), 1),
              ::testing::ExitedWithCode(1), "tensor 'd' is float64, expected int64");
  req = {tw[2]};
  req[0].name = "missing.param";
  EXPECT_EXIT(pipert_checkpoint_load(ctx, dir.c_str(), 0, nullptr, nullptr, req.data(), 1),
              ::testing::ExitedWithCode(1), "has no tensor 'missing.param'");

  // One flipped bit anywhere, or a truncation, is caught.
  std::string bytes = pipert_test::readText(path);
  std::string flipped = bytes;
  flipped[bytes.size() / 2] ^= 0x10;
  { std::ofstream(path, std::ios::binary) << flipped; }
  EXPECT_EXIT(pipert_checkpoint_load(ctx, dir.c_str(), 0, nullptr, nullptr, tw.data(), 6),
              ::testing::ExitedWithCode(1), "rank-0.ckpt' is corrupt or truncated");
  { std::ofstream(path, std::ios::binary) << bytes.substr(0, bytes.size() - 9); }
  EXPECT_EXIT(pipert_checkpoint_load(ctx, dir.c_str(), 0, nullptr, nullptr, tw.data(), 6),
              ::testing::ExitedWithCode(1), "rank-0.ckpt' is corrupt or truncated");
  { std::ofstream(path, std::ios::binary) << "garbage"; }
  EXPECT_EXIT(pipert_checkpoint_load(ctx, dir.c_str(), 0, nullptr, nullptr, tw.data(), 6),
              ::testing::ExitedWithCode(1), "is not a pipert checkpoint");
}

//===--------------------------------------------------------------------===//
// ONNX export
//===--------------------------------------------------------------------===//

class OnnxExport : public ::testing::TestWithParam<const char *> {};

TEST_P(OnnxExport, TrainedValuesReplaceInitializers) {
  pipert_context *ctx = pipert_context_create(1, 1);
  std::vector<float> w(12), b(4);
  for (int i = 0; i < 12; ++i)
    w[i] = i * 0.5f - 3.0f;
  for (int i = 0; i < 4; ++i)
    b[i] = static_cast<float>(i + 1);
  const int64_t wShape[] = {3, 4}, bShape[] = {4};
  pipert_named_tensor t[] = {{"W", PIPERT_F32, 2, wShape, w.data()},
                             {"b", PIPERT_F32, 1, bShape, b.data()}};
  const std::string out = tempDir() + "/trained.onnx";
  pipert_export_onnx(ctx, fixture(GetParam()).c_str(), out.c_str(), t, 2);
  // check_onnx.py: checker passes, W/b hold the values above, the others are
  // unchanged, nothing refers to external data.
  EXPECT_EQ(runPython("check_onnx.py", out), 0);
  // And onnxruntime runs it and matches a NumPy forward pass.
  if (pipert_test::runPython("check_onnx_ort.py", "--available", PIPERT_TEST_PYTHON_TOOLS) != 0) {
    pipert_context_destroy(ctx);
    GTEST_SKIP() << "onnxruntime is not installed in " << PIPERT_TEST_PYTHON_TOOLS
                 << " (scripts/setup installs it)";
  }
  EXPECT_EQ(pipert_test::runPython("check_onnx_ort.py", out, PIPERT_TEST_PYTHON_TOOLS), 0);
  pipert_context_destroy(ctx);
}

INSTANTIATE_TEST_SUITE_P(Models, OnnxExport,
                         ::testing::Values("model.onnx", "external/model.onnx"));

TEST(OnnxExportDeathTest, MismatchesAreFatal) {
  pipert_context *ctx = pipert_context_create(1, 1);
  std::vector<float> w(12);
  const int64_t wShape[] = {4, 3}, okShape[] = {3, 4};
  const std::string out = tempDir() + "/trained.onnx";
  const std::string in = fixture("model.onnx");
  pipert_named_tensor shape[] = {{"W", PIPERT_F32, 2, wShape, w.data()}};
  EXPECT_EXIT(pipert_export_onnx(ctx, in.c_str(), out.c_str(), shape, 1),
              ::testing::ExitedWithCode(1), "initializer 'W' has shape \\[3,4\\], the tensor has \\[4,3\\]");
  pipert_named_tensor type[] = {{"W", PIPERT_F64, 2, okShape, w.data()}};
  EXPECT_EXIT(pipert_export_onnx(ctx, in.c_str(), out.c_str(), type, 1),
              ::testing::ExitedWithCode(1), "initializer 'W' has ONNX data type 1, the tensor is float64");
  pipert_named_tensor name[] = {{"V", PIPERT_F32, 2, okShape, w.data()}};
  EXPECT_EXIT(pipert_export_onnx(ctx, in.c_str(), out.c_str(), name, 1),
              ::testing::ExitedWithCode(1), "has no initializer named 'V'");
  EXPECT_EXIT(pipert_export_onnx(ctx, "/nonexistent.onnx", out.c_str(), name, 1),
              ::testing::ExitedWithCode(1), "ONNX export: cannot open '/nonexistent.onnx'");
  const std::string notOnnx = fixture("notzip.npz");
  EXPECT_EXIT(pipert_export_onnx(ctx, notOnnx.c_str(), out.c_str(), name, 1),
              ::testing::ExitedWithCode(1), "is not a valid ONNX model");
  pipert_context_destroy(ctx);
}

} // namespace
