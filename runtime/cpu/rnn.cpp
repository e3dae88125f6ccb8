//===- rnn.cpp - ONNX LSTM and GRU and their gradients (CPU) -------------===//
//
// The time loop is runtime/core/rnn_driver.h (shared with CUDA), the cell
// math runtime/core/formulas.h (on the host its branch-free sigmoid and
// tanh); here the host `Exec`: plain loops, which vectorise, and heap
// scratch. The GEMMs are pipert_sgemm (OpenBLAS).
//
//===----------------------------------------------------------------------===//
#include "kernel_util.h"

#include "../core/rnn_driver.h"

#include <vector>

namespace pipert::cpu {

struct RnnExec {
  pipert_context *ctx;
  // The calls of a map are independent (rnn_driver.h): ivdep lets GCC
  // vectorise the loops without proving that the outputs do not overlap
  // the inputs.
  template <typename F> void map(int64_t n, F f) {
#pragma GCC ivdep
    for (int64_t i = 0; i < n; ++i)
      f(i);
  }
  template <typename F> void map_rows(int64_t rows, int64_t cols, F f) {
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t base = r * cols;
#pragma GCC ivdep
      for (int64_t c = 0; c < cols; ++c)
        f(r, c, base + c);
    }
  }
  // Row by row (each row read once, in order; the loop over the columns
  // vectorises), each column's sum in double in the order of the rows: the
  // bits of a loop down each column, which walked src with a stride of a
  // row and took 9% of a 2-layer LSTM's step.
  void column_sums(int64_t rows, int64_t cols, const float *src, float *dst) {
    std::vector<double> acc(size_t(cols), 0.0);
    double *a = acc.data();
    for (int64_t r = 0; r < rows; ++r) {
      const float *row = src + r * cols;
#pragma GCC ivdep
      for (int64_t c = 0; c < cols; ++c)
        a[c] += double(row[c]);
    }
    for (int64_t c = 0; c < cols; ++c)
      dst[c] = float(a[c]);
  }
  float *alloc(int64_t n) {
    return static_cast<float *>(pipert_alloc(ctx, size_t(n > 0 ? n : 1) * sizeof(float)));
  }
  void release(float *p) { pipert_free(ctx, p); }
};

} // namespace pipert::cpu

namespace pipert {
using RnnBackendExec = cpu::RnnExec;
} // namespace pipert

#include "../core/rnn_entry_points.inc"


