//===- npz_test.cpp - .npz loading, errors, batch feeding -----------------===//
#include "io_test_util.h"
#include "pipert/pipert_data.h"

#include <cmath>
#include <cstring>
#include <set>
#include <vector>

using pipert_test::fixture;

namespace {

struct NpzDeleter {
  void operator()(pipert_npz *p) const { pipert_npz_free(p); }
};
using NpzPtr = std::unique_ptr<pipert_npz, NpzDeleter>;

class NpzFormats : public ::testing::TestWithParam<const char *> {};

TEST_P(NpzFormats, AllDtypesAndValues) {
  NpzPtr npz(pipert_npz_load(fixture(GetParam()).c_str()));
  ASSERT_EQ(pipert_npz_count(npz.get()), 11);
  EXPECT_STREQ(pipert_npz_name(npz.get(), 0), "f32");
  EXPECT_EQ(pipert_npz_find(npz.get(), "nothere"), -1);
  EXPECT_GE(pipert_npz_find(npz.get(), "big"), 0);

  const int64_t s34[] = {3, 4};
  auto *f32 = static_cast<const float *>(pipert_npz_data(npz.get(), "f32", PIPERT_F32, 2, s34));
  for (int i = 0; i < 12; ++i)
    EXPECT_EQ(f32[i], static_cast<float>(i) * 0.25f - 1.0f) << i;

  const int64_t s5[] = {5};
  auto *f64 = static_cast<const double *>(pipert_npz_data(npz.get(), "f64", PIPERT_F64, 1, s5));
  for (int i = 0; i < 5; ++i)
    EXPECT_EQ(f64[i], i / 3.0) << i;

  const int64_t s23[] = {2, 3};
  auto *i64 = static_cast<const int64_t *>(pipert_npz_data(npz.get(), "i64", PIPERT_I64, 2, s23));
  for (int i = 0; i < 6; ++i)
    EXPECT_EQ(i64[i], int64_t(i) * 10000000000LL - 5) << i;

  const int64_t s4[] = {4};
  auto *i32 = static_cast<const int32_t *>(pipert_npz_data(npz.get(), "i32", PIPERT_I32, 1, s4));
  EXPECT_EQ(i32[0], -2);
  EXPECT_EQ(i32[1], -1);
  EXPECT_EQ(i32[2], 0);
  EXPECT_EQ(i32[3], 2147483647);

  const int64_t s22[] = {2, 2};
  auto *u8 = static_cast<const uint8_t *>(pipert_npz_data(npz.get(), "u8", PIPERT_U8, 2, s22));
  EXPECT_EQ(std::vector<int>(u8, u8 + 4), (std::vector<int>{0, 255, 7, 128}));

  auto *b = static_cast<const uint8_t *>(pipert_npz_data(npz.get(), "b", PIPERT_BOOL, 1, s5));
  EXPECT_EQ(std::vector<int>(b, b + 5), (std::vector<int>{1, 0, 1, 1, 0}));

  const int64_t s3[] = {3};
  auto *i8 = static_cast<const int8_t *>(pipert_npz_data(npz.get(), "i8", PIPERT_I8, 1, s3));
  EXPECT_EQ(std::vector<int>(i8, i8 + 3), (std::vector<int>{-128, 0, 127}));

  const int64_t s2[] = {2};
  auto *f16 = static_cast<const uint16_t *>(pipert_npz_data(npz.get(), "f16", PIPERT_F16, 1, s2));
  EXPECT_EQ(f16[0], 0x3E00); // 1.5
  EXPECT_EQ(f16[1], 0xC000); // -2.0

  EXPECT_EQ(pipert_npz_ndim(npz.get(), "scalar"), 0);
  auto *sc = static_cast<const float *>(pipert_npz_data(npz.get(), "scalar", PIPERT_F32, 0, nullptr));
  EXPECT_EQ(*sc, 3.5f);

  EXPECT_EQ(pipert_npz_ndim(npz.get(), "empty"), 2);
  EXPECT_EQ(pipert_npz_shape(npz.get(), "empty")[0], 0);
  EXPECT_EQ(pipert_npz_shape(npz.get(), "empty")[1], 3);

  const int64_t any[] = {-1};
  auto *big = static_cast<const float *>(pipert_npz_data(npz.get(), "big", PIPERT_F32, 1, any));
  EXPECT_EQ(pipert_npz_shape(npz.get(), "big")[0], 100000);
  for (int i = 0; i < 100000; i += 997)
    EXPECT_NEAR(big[i], std::sin(static_cast<double>(i)), 1e-6) << i;
}

INSTANTIATE_TEST_SUITE_P(Savez, NpzFormats, ::testing::Values("plain.npz", "compressed.npz"));

TEST(Npz, CompressedEqualsStoredBitwise) {
  NpzPtr a(pipert_npz_load(fixture("plain.npz").c_str()));
  NpzPtr b(pipert_npz_load(fixture("compressed.npz").c_str()));
  for (int i = 0; i < pipert_npz_count(a.get()); ++i) {
    const char *name = pipert_npz_name(a.get(), i);
    const pipert_dtype t = pipert_npz_dtype(a.get(), name);
    ASSERT_EQ(t, pipert_npz_dtype(b.get(), name)) << name;
    const int nd = pipert_npz_ndim(a.get(), name);
    int64_t n = 1;
    for (int d = 0; d < nd; ++d)
      n *= pipert_npz_shape(a.get(), name)[d];
    const void *da = pipert_npz_data(a.get(), name, t, -1, nullptr);
    const void *db = pipert_npz_data(b.get(), name, t, -1, nullptr);
    if (n > 0) // memcmp of an empty array's null data is undefined
      EXPECT_EQ(std::memcmp(da, db, static_cast<size_t>(n) * pipert_dtype_size(t)), 0) << name;
  }
}

// Every bad input ends the rank with one clear line.
using NpzDeathTest = ::testing::Test;

TEST(NpzDeathTest, MissingFile) {
  EXPECT_EXIT(pipert_npz_load("/nonexistent/data.npz"), ::testing::ExitedWithCode(1),
              "pipert: error: cannot open data file '/nonexistent/data.npz': No such file");
}

TEST(NpzDeathTest, MissingArrayListsTheOthers) {
  NpzPtr npz(pipert_npz_load(fixture("feed.npz").c_str()));
  EXPECT_EXIT(pipert_npz_data(npz.get(), "label", PIPERT_I64, -1, nullptr),
              ::testing::ExitedWithCode(1),
              "feed.npz: no array named 'label' \\(arrays: x, y, y_short, img\\)");
}

TEST(NpzDeathTest, WrongDtype) {
  NpzPtr npz(pipert_npz_load(fixture("feed.npz").c_str()));
  EXPECT_EXIT(pipert_npz_data(npz.get(), "y", PIPERT_I32, -1, nullptr),
              ::testing::ExitedWithCode(1), "array 'y' has dtype int64, expected int32");
}

TEST(NpzDeathTest, ShapeMismatch) {
  NpzPtr npz(pipert_npz_load(fixture("feed.npz").c_str()));
  const int64_t shape[] = {10, 4};
  EXPECT_EXIT(pipert_npz_data(npz.get(), "x", PIPERT_F32, 2, shape), ::testing::ExitedWithCode(1),
              "array 'x' has shape \\(10, 3\\), expected \\(10, 4\\)");
  const int64_t rank1[] = {30};
  EXPECT_EXIT(pipert_npz_data(npz.get(), "x", PIPERT_F32, 1, rank1), ::testing::ExitedWithCode(1),
              "array 'x' has shape \\(10, 3\\), expected \\(30,\\)");
}

TEST(NpzDeathTest, FortranOrder) {
  EXPECT_EXIT(pipert_npz_load(fixture("fortran.npz").c_str()), ::testing::ExitedWithCode(1),
              "fortran.npz: array 'm': Fortran-order arrays are not supported");
}

// Only the arrays asked for are read: one beside them that the loader would
// refuse (Fortran order) is listed, and reading it is an error.
TEST(NpzDeathTest, LoadsOnlyTheArraysAskedFor) {
  const char *names[] = {"x", "absent"};
  NpzPtr npz(pipert_npz_load_arrays(fixture("mixed.npz").c_str(), names, 2));
  ASSERT_EQ(pipert_npz_count(npz.get()), 2);
  EXPECT_GE(pipert_npz_find(npz.get(), "m"), 0);
  const int64_t s6[] = {6};
  auto *x = static_cast<const float *>(pipert_npz_data(npz.get(), "x", PIPERT_F32, 1, s6));
  for (int i = 0; i < 6; ++i)
    EXPECT_EQ(x[i], float(i));
  EXPECT_EXIT(pipert_npz_data(npz.get(), "m", PIPERT_F32, -1, nullptr),
              ::testing::ExitedWithCode(1),
              "mixed.npz: array 'm' was not loaded \\(this program does not read it\\)");
  EXPECT_EXIT(pipert_npz_load(fixture("mixed.npz").c_str()), ::testing::ExitedWithCode(1),
              "Fortran-order arrays are not supported");
}

// numpy reads the last of two same-named members, a reader of the first
// would train on other data: refused.
TEST(NpzDeathTest, TwoArraysOfOneName) {
  EXPECT_EXIT(pipert_npz_load(fixture("twice.npz").c_str()), ::testing::ExitedWithCode(1),
              "twice.npz: holds two arrays named 'x'");
}

TEST(NpzDeathTest, BigEndianAndUnsupportedDtypes) {
  EXPECT_EXIT(pipert_npz_load(fixture("bigendian.npz").c_str()), ::testing::ExitedWithCode(1),
              "array 'm': big-endian dtype '>f4' is not supported");
  EXPECT_EXIT(pipert_npz_load(fixture("complex.npz").c_str()), ::testing::ExitedWithCode(1),
              "array 'm': unsupported dtype '<c8'");
}

TEST(NpzDeathTest, NotAZip) {
  EXPECT_EXIT(pipert_npz_load(fixture("notzip.npz").c_str()), ::testing::ExitedWithCode(1),
              "notzip.npz: not a valid .npz archive: no end of central directory");
}

TEST(NpzDeathTest, Truncated) {
  EXPECT_EXIT(pipert_npz_load(fixture("truncated.npz").c_str()), ::testing::ExitedWithCode(1),
              "truncated.npz: not a valid .npz archive");
}

TEST(NpzDeathTest, CorruptData) {
  EXPECT_EXIT(pipert_npz_load(fixture("badcrc.npz").c_str()), ::testing::ExitedWithCode(1),
              "badcrc.npz: array 'f32': CRC mismatch");
}

//===--------------------------------------------------------------------===//
// Batch feeding
//===--------------------------------------------------------------------===//

struct Feed {
  pipert_context *ctx = pipert_context_create(1, 1);
  NpzPtr npz;
  pipert_feeder *feeder = nullptr;
  Feed(const char *file, int64_t batch, int shuffle, uint64_t seed)
      : npz(pipert_npz_load(fixture(file).c_str())) {
    feeder = pipert_feeder_create(ctx, npz.get(), batch, shuffle, seed);
    const int64_t xs[] = {batch, 3}, ys[] = {batch};
    EXPECT_EQ(pipert_feeder_add_input(feeder, "x", PIPERT_F32, 2, xs), 0);
    EXPECT_EQ(pipert_feeder_add_input(feeder, "y", PIPERT_I64, 1, ys), 1);
  }
  ~Feed() {
    pipert_feeder_destroy(feeder);
    pipert_context_destroy(ctx);
  }
  std::vector<int64_t> rows(int64_t step, int64_t batch) {
    std::vector<int64_t> r(static_cast<size_t>(batch));
    pipert_feeder_step_rows(feeder, step, r.data());
    return r;
  }
};

TEST(Feeder, NoShuffleReadsConsecutiveRowsAndWraps) {
  for (const char *file : {"feed.npz", "feed_compressed.npz"}) {
    Feed f(file, 4, 0, 0);
    EXPECT_EQ(pipert_feeder_rows(f.feeder), 10);
    EXPECT_EQ(f.rows(0, 4), (std::vector<int64_t>{0, 1, 2, 3}));
    EXPECT_EQ(f.rows(1, 4), (std::vector<int64_t>{4, 5, 6, 7}));
    EXPECT_EQ(f.rows(2, 4), (std::vector<int64_t>{8, 9, 0, 1}));
    EXPECT_EQ(f.rows(3, 4), (std::vector<int64_t>{2, 3, 4, 5}));
    EXPECT_EQ(f.rows(1000, 4), (std::vector<int64_t>{0, 1, 2, 3})); // 4000 % 10 == 0

    float x[12];
    int64_t y[4];
    pipert_feeder_fill(f.feeder, 2, 0, x);
    pipert_feeder_fill(f.feeder, 2, 1, y);
    EXPECT_EQ(std::vector<float>(x, x + 12),
              (std::vector<float>{24, 25, 26, 27, 28, 29, 0, 1, 2, 3, 4, 5}));
    EXPECT_EQ(std::vector<int64_t>(y, y + 4), (std::vector<int64_t>{8, 9, 0, 1}));
  }
}

TEST(Feeder, BatchLargerThanTheData) {
  Feed f("feed.npz", 25, 0, 0);
  auto r = f.rows(1, 25);
  for (int i = 0; i < 25; ++i)
    EXPECT_EQ(r[i], (25 + i) % 10);
}

TEST(Feeder, ShuffleIsAPermutationPerEpochAndDeterministic) {
  Feed f("feed.npz", 4, 1, 42), g("feed.npz", 4, 1, 42), h("feed.npz", 4, 1, 43);
  // 10 steps of 4 = 4 epochs of 10 rows, some steps straddling two epochs.
  std::vector<int64_t> stream, streamG, streamH;
  for (int s = 0; s < 10; ++s) {
    auto r = f.rows(s, 4);
    stream.insert(stream.end(), r.begin(), r.end());
    auto q = g.rows(s, 4);
    streamG.insert(streamG.end(), q.begin(), q.end());
    auto p = h.rows(s, 4);
    streamH.insert(streamH.end(), p.begin(), p.end());
  }
  EXPECT_EQ(stream, streamG);
  EXPECT_NE(stream, streamH);
  std::vector<std::vector<int64_t>> epochs;
  for (int e = 0; e < 4; ++e) {
    std::vector<int64_t> ep(stream.begin() + e * 10, stream.begin() + e * 10 + 10);
    EXPECT_EQ(std::set<int64_t>(ep.begin(), ep.end()).size(), 10u) << "epoch " << e;
    for (int64_t v : ep)
      EXPECT_TRUE(v >= 0 && v < 10);
    epochs.push_back(ep);
  }
  std::vector<int64_t> identity{0, 1, 2, 3, 4, 5, 6, 7, 8, 9};
  EXPECT_NE(epochs[0], identity);
  EXPECT_NE(epochs[0], epochs[1]);
  // Random access gives the same rows as sequential access.
  Feed k("feed.npz", 4, 1, 42);
  EXPECT_EQ(k.rows(7, 4), std::vector<int64_t>(stream.begin() + 28, stream.begin() + 32));
  EXPECT_EQ(k.rows(2, 4), std::vector<int64_t>(stream.begin() + 8, stream.begin() + 12));

  // The inputs stay aligned: x's row and y's label come from the same sample.
  float x[12];
  int64_t y[4];
  pipert_feeder_fill(f.feeder, 2, 0, x);
  pipert_feeder_fill(f.feeder, 2, 1, y);
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(y[i], stream[8 + i]);
    EXPECT_EQ(x[3 * i], 3.0f * y[i]);
    EXPECT_EQ(x[3 * i + 2], 3.0f * y[i] + 2);
  }
}

TEST(Feeder, MicroBatches) {
  int64_t first = -1, count = -1;
  pipert_microbatch_rows(8, 4, 3, &first, &count);
  EXPECT_EQ(first, 6);
  EXPECT_EQ(count, 2);
  // 10 rows over 4 micro-batches: 3, 3, 2, 2.
  const int64_t wantFirst[] = {0, 3, 6, 8}, wantCount[] = {3, 3, 2, 2};
  for (int k = 0; k < 4; ++k) {
    pipert_microbatch_rows(10, 4, k, &first, &count);
    EXPECT_EQ(first, wantFirst[k]);
    EXPECT_EQ(count, wantCount[k]);
  }

  Feed f("feed.npz", 6, 1, 7);
  auto rows = f.rows(3, 6);
  for (int k = 0; k < 3; ++k) {
    int64_t y[2];
    float x[6];
    pipert_feeder_fill_microbatch(f.feeder, 3, 1, 3, k, y);
    pipert_feeder_fill_microbatch(f.feeder, 3, 0, 3, k, x);
    EXPECT_EQ(y[0], rows[2 * k]);
    EXPECT_EQ(y[1], rows[2 * k + 1]);
    EXPECT_EQ(x[3], 3.0f * rows[2 * k + 1]);
  }

  float batch[6 * 3], micro[2 * 3];
  pipert_feeder_fill(f.feeder, 3, 0, batch);
  pipert_microbatch_slice(f.ctx, micro, batch, 3 * sizeof(float), 6, 3, 2);
  EXPECT_EQ(std::memcmp(micro, batch + 4 * 3, sizeof micro), 0);
}

TEST(FeederDeathTest, BadInputs) {
  pipert_context *ctx = pipert_context_create(1, 1);
  NpzPtr npz(pipert_npz_load(fixture("feed.npz").c_str()));
  pipert_feeder *f = pipert_feeder_create(ctx, npz.get(), 4, 0, 0);
  const int64_t xs[] = {4, 3}, ys[] = {4}, wrong[] = {4, 5}, img[] = {4, 2, 2}, five[] = {5, 3};
  EXPECT_EXIT(pipert_feeder_add_input(f, "x", PIPERT_F32, 2, wrong), ::testing::ExitedWithCode(1),
              "array 'x' has shape \\(10, 3\\), which does not fit input 'x' of shape \\(4, 5\\)");
  EXPECT_EXIT(pipert_feeder_add_input(f, "x", PIPERT_F64, 2, xs), ::testing::ExitedWithCode(1),
              "array 'x' has dtype float32, but input 'x' is float64");
  EXPECT_EXIT(pipert_feeder_add_input(f, "label", PIPERT_I64, 1, ys), ::testing::ExitedWithCode(1),
              "no array named 'label'");
  EXPECT_EXIT(pipert_feeder_add_input(f, "x", PIPERT_F32, 2, five),
              ::testing::ExitedWithCode(1), "must have the batch size 4 as its first dim");
  pipert_feeder_add_input(f, "x", PIPERT_F32, 2, xs);
  EXPECT_EQ(pipert_feeder_add_input(f, "img", PIPERT_U8, 3, img), 1);
  EXPECT_EXIT(pipert_feeder_add_input(f, "y_short", PIPERT_I64, 1, ys),
              ::testing::ExitedWithCode(1), "array 'y_short' has 9 rows but 'x' has 10");
  EXPECT_EXIT(pipert_feeder_fill(f, 0, 5, nullptr), ::testing::ExitedWithCode(1),
              "input index 5 out of range");
  EXPECT_EXIT(pipert_feeder_fill_microbatch(f, 0, 0, 5, 0, nullptr), ::testing::ExitedWithCode(1),
              "micro-batch 0 of 5 over a batch of 4 rows is out of range");
  pipert_feeder_destroy(f);
  pipert_context_destroy(ctx);
}

} // namespace
