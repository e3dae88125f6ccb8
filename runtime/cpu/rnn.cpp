//===- rnn.cpp - ONNX LSTM and GRU and their gradients (CPU) -------------===//
//
// The time loop is runtime/core/rnn_driver.h (shared with CUDA), the cell
// math runtime/core/formulas.h; here the host `Exec`: plain loops and heap
// scratch. The GEMMs are pipert_sgemm (OpenBLAS).
//
//===----------------------------------------------------------------------===//
#include "kernel_util.h"

#include "../core/rnn_driver.h"

namespace pipert::cpu {

struct RnnExec {
  pipert_context *ctx;
  template <typename F> void map(int64_t n, F f) {
    for (int64_t i = 0; i < n; ++i)
      f(i);
  }
  float *alloc(int64_t n) {
    return static_cast<float *>(pipert_alloc(ctx, size_t(n > 0 ? n : 1) * sizeof(float)));
  }
  void release(float *p) { pipert_free(ctx, p); }
};

} // namespace pipert::cpu

using namespace pipert;

extern "C" {

void pipert_lstm_f32(pipert_context *ctx, const float *x, const float *w, const float *r,
                     const float *b, const float *initial_h, const float *initial_c,
                     int64_t seq_length, int64_t batch, int64_t input_size, int64_t hidden_size,
                     int32_t direction, float *y, float *y_h, float *y_c) {
  cpu::RnnExec ex{ctx};
  rnn::Dims dm = rnn::make_dims("LSTM", rnn::kLstm, seq_length, batch, input_size, hidden_size,
                                direction);
  rnn::forward(ex, ctx, dm, x, w, r, b, initial_h, initial_c, y, y_h, y_c);
}

void pipert_lstm_grad_f32(pipert_context *ctx, const float *x, const float *w, const float *r,
                          const float *b, const float *initial_h, const float *initial_c,
                          const float *dy, const float *dy_h, const float *dy_c,
                          int64_t seq_length, int64_t batch, int64_t input_size,
                          int64_t hidden_size, int32_t direction, float *dx, float *dw, float *dr,
                          float *db, float *dinitial_h, float *dinitial_c) {
  cpu::RnnExec ex{ctx};
  rnn::Dims dm = rnn::make_dims("LSTMGrad", rnn::kLstm, seq_length, batch, input_size,
                                hidden_size, direction);
  rnn::backward(ex, ctx, dm, x, w, r, b, initial_h, initial_c, dy, dy_h, dy_c, dx, dw, dr, db,
                dinitial_h, dinitial_c);
}

void pipert_gru_f32(pipert_context *ctx, const float *x, const float *w, const float *r,
                    const float *b, const float *initial_h, int64_t seq_length, int64_t batch,
                    int64_t input_size, int64_t hidden_size, int32_t direction,
                    int32_t linear_before_reset, float *y, float *y_h) {
  cpu::RnnExec ex{ctx};
  rnn::Dims dm = rnn::make_dims("GRU", rnn::kGru, seq_length, batch, input_size, hidden_size,
                                direction, linear_before_reset);
  rnn::forward(ex, ctx, dm, x, w, r, b, initial_h, nullptr, y, y_h, nullptr);
}

void pipert_gru_grad_f32(pipert_context *ctx, const float *x, const float *w, const float *r,
                         const float *b, const float *initial_h, const float *dy,
                         const float *dy_h, int64_t seq_length, int64_t batch, int64_t input_size,
                         int64_t hidden_size, int32_t direction, int32_t linear_before_reset,
                         float *dx, float *dw, float *dr, float *db, float *dinitial_h) {
  cpu::RnnExec ex{ctx};
  rnn::Dims dm = rnn::make_dims("GRUGrad", rnn::kGru, seq_length, batch, input_size, hidden_size,
                                direction, linear_before_reset);
  rnn::backward(ex, ctx, dm, x, w, r, b, initial_h, nullptr, dy, dy_h, nullptr, dx, dw, dr, db,
                dinitial_h, nullptr);
}

} // extern "C"
