//===- rnn_driver.h - ONNX LSTM / GRU over time, shared by both backends --===//
//
// The time loop of the recurrent kernels (pipert_lstm_f32, pipert_gru_f32
// and their gradients), written once for both backends. A backend supplies
// an `Exec` with
//   void map(int64_t n, F f)   // f(i) for i in [0, n), f a PIPERT_RNN_LAMBDA
//   void map_rows(int64_t rows, int64_t cols, F f)
//                              // f(r, c, r * cols + c) for every r < rows,
//                              // c < cols (the host: a loop over c the
//                              // compiler vectorises; no division per element)
//   void column_sums(int64_t rows, int64_t cols, const float *src, float *dst)
//                              // dst[c] = the sum over r of src[r * cols + c],
//                              // added in double in the order of r, rounded
//                              // once
//   float *alloc(int64_t n)    // n floats of the backend's memory
//   void release(float *p)
// and pipert_sgemm (OpenBLAS on the CPU, cuBLAS on CUDA) does the matrix
// products; the per-element cell math is in formulas.h.
//
// Layout (ONNX, layout = 0): X (T, B, I); W (D, G*H, I); R (D, G*H, H);
// B (D, 2*G*H) = [Wb, Rb]; initial_h / initial_c (D, B, H); Y (T, D, B, H);
// Y_h / Y_c (D, B, H); G = 4 (LSTM, gates i o f c) or 3 (GRU, z r h). Every
// optional pointer may be null (absent input: zeros; absent output: not
// written).
//
// Forward, per direction: one GEMM projects all steps, XW = X W^T
// (T*B x G*H); then per step RH = H_prev R^T (B x G*H) and one map applies
// the cell to B*H units.
//
// GRU with linear_before_reset = 0 splits the step: z and r, r . h_prev,
// then its GEMM with Rh before the cell (and likewise in the backward).
//
// Saved states. A training forward (the op with its extra result `saved`)
// keeps what its gradient reads, per direction d K planes of T*B*H floats at
// saved + d*K*T*B*H: LSTM h, c, i, o, f, g (K = 6); GRU h, z, r, n and rn
// (linear_before_reset = 1) or r . h_prev (= 0) (K = 5); plane k of step t
// at + k*T*B*H + t*B*H, row b at + b*H. As a tensor that is
// (D*K*T, B, H): the batch on axis 1, so a micro-batch's saved states are a
// slice of the whole batch's.
//
// Gradient (BPTT). Given the saved states, the backward reads them; without
// (a forward that saved nothing: null), it recomputes the forward (one more
// forward pass) keeping the same planes in scratch memory. Then per step,
// latest first: one map gives the pre-activation
// gradients dXW[t] (and, for GRU, dRH[t], which differs in the h gate), and
// two GEMMs give dH_prev += dRH[t] R and dR += dRH[t]^T H_prev. After the
// loop dW = dXW^T X and dX (+)= dXW W are one GEMM each, dB column sums.
//
// Each f(i) (or f(r, c, i)) of a map reads and writes only its own
// elements of the outputs, so the calls are independent: CUDA runs them in
// parallel, the host's loops tell the compiler so (GCC ivdep). The cell
// maps are branch-free in the element (the bias pre-summed, absent inputs
// read as zeros, the cell type and what is saved decided outside the map),
// so that the host's loop over a row's hidden units vectorises.
//
//===----------------------------------------------------------------------===//
#ifndef PIPERT_CORE_RNN_DRIVER_H
#define PIPERT_CORE_RNN_DRIVER_H

#include "formulas.h"
#include "pipert/pipert.h"
#include "pipert/pipert_kernels.h"

#include <cstdint>

#ifdef __CUDACC__
#define PIPERT_RNN_LAMBDA [=] __device__
#else
#define PIPERT_RNN_LAMBDA [=]
#endif

namespace pipert::rnn {

enum Cell { kLstm = 0, kGru = 1 };

struct Dims {
  const char *op;
  Cell cell;
  int64_t T, B, I, H, D;
  int32_t direction; // 0 forward, 1 reverse, 2 bidirectional
  bool lbr;          // GRU linear_before_reset (LSTM: unused)
  int64_t G() const { return cell == kLstm ? 4 : 3; }
  int64_t BH() const { return B * H; }
  int64_t GH() const { return G() * H; }
  bool reversed(int64_t d) const { return direction == 1 || (direction == 2 && d == 1); }
  // The time index of processing step s of direction d.
  int64_t time(int64_t d, int64_t s) const { return reversed(d) ? T - 1 - s : s; }
};

inline Dims make_dims(const char *op, Cell cell, int64_t T, int64_t B, int64_t I, int64_t H,
                      int32_t direction, int32_t linear_before_reset = 1) {
  if (linear_before_reset != 0 && linear_before_reset != 1)
    pipert_fail("%s: linear_before_reset must be 0 or 1, got %d", op, int(linear_before_reset));
  if (direction < 0 || direction > 2)
    pipert_fail("%s: direction code %d is not 0 (forward), 1 (reverse) or 2 (bidirectional)", op,
                int(direction));
  if (T < 1 || B < 0 || I < 1 || H < 1)
    pipert_fail("%s: invalid sizes seq_length %lld, batch %lld, input %lld, hidden %lld", op,
                (long long)T, (long long)B, (long long)I, (long long)H);
  return Dims{op,        cell, T, B, I, H, direction == 2 ? int64_t(2) : int64_t(1),
              direction, linear_before_reset != 0};
}

// Activations per unit and step (planes of the saved states): LSTM i, o, f,
// g; GRU z, r, n and rn (linear_before_reset = 1) or r . h_prev (= 0).
constexpr int64_t kSaved = 4;

// Planes of saved states per direction: h (and c), then the activations.
inline int64_t saved_planes(Cell cell) { return cell == kLstm ? 6 : 5; }

template <class Exec> void fill(Exec &ex, float *p, int64_t n, float v) {
  ex.map(n, PIPERT_RNN_LAMBDA(int64_t i) { p[i] = v; });
}

template <class Exec> void copy(Exec &ex, float *dst, const float *src, int64_t n) {
  ex.map(n, PIPERT_RNN_LAMBDA(int64_t i) { dst[i] = src[i]; });
}

// One LSTM step's cells: the gates' pre-activations from X W^T (xrow, B x
// 4H), H_prev R^T (rh) and the summed biases; c and h out, and with Save
// the activations i, o, f, g (act: this step's B x H in the first of four
// planes P floats apart).
template <bool Save, class Exec>
void lstm_step(Exec &ex, int64_t B, int64_t H, const float *xrow, const float *rh,
               const float *bsum, const float *cprev, float *cdst, float *hdst, float *act,
               int64_t P) {
  const int64_t GH = 4 * H;
  ex.map_rows(B, H, PIPERT_RNN_LAMBDA(int64_t bb, int64_t j, int64_t idx) {
    const float *xr = xrow + bb * GH, *rr = rh + bb * GH;
    float i, o, f, g, c, h;
    formula::lstm_cell(xr[j] + rr[j] + bsum[j], xr[H + j] + rr[H + j] + bsum[H + j],
                       xr[2 * H + j] + rr[2 * H + j] + bsum[2 * H + j],
                       xr[3 * H + j] + rr[3 * H + j] + bsum[3 * H + j], cprev[idx], i, o, f, g,
                       c, h);
    cdst[idx] = c;
    hdst[idx] = h;
    if (Save) { // not if constexpr: nvcc cannot first-capture act there
      act[idx] = i;
      act[P + idx] = o;
      act[2 * P + idx] = f;
      act[3 * P + idx] = g;
    }
  });
}

// One GRU step's cells (gates z, r, h): z and r from X W^T (xrow, B x 3H),
// H_prev R^T (rh) and the summed biases; the h gate from its parts xn, rn
// with their own biases; with Lbr = 0, rh's h-gate columns hold
// (r . h_prev) Rh^T and rdot (tmp) r . h_prev. h out, and with Save the
// activations z, r, n and rn (Lbr) or r . h_prev (planes as lstm_step's).
template <bool Lbr, bool Save, class Exec>
void gru_step(Exec &ex, int64_t B, int64_t H, const float *xrow, const float *rh,
              const float *bsum, const float *bxn, const float *brn, const float *hprev,
              const float *rdot, float *hdst, float *act, int64_t P) {
  const int64_t GH = 3 * H;
  ex.map_rows(B, H, PIPERT_RNN_LAMBDA(int64_t bb, int64_t j, int64_t idx) {
    const float *xr = xrow + bb * GH, *rr = rh + bb * GH;
    const float xn = xr[2 * H + j] + bxn[j], rn = rr[2 * H + j] + brn[j];
    float z, r, n, h;
    formula::gru_cell(xr[j] + rr[j] + bsum[j], xr[H + j] + rr[H + j] + bsum[H + j], xn, rn,
                      hprev[idx], Lbr, z, r, n, h);
    hdst[idx] = h;
    if (Save) { // not if constexpr: nvcc cannot first-capture act there
      act[idx] = z;
      act[P + idx] = r;
      act[2 * P + idx] = n;
      act[3 * P + idx] = Lbr ? rn : rdot[idx];
    }
  });
}

// One direction's forward over all steps. xw (T*B x G*H) already holds
// X W_d^T; rh is B x G*H scratch. h of time t goes to hout + t * hstride,
// c (LSTM) to cs + t * B*H, the activations (if act) to act + t * B*H in
// kSaved planes of T*B*H.
// h0d / c0d are this direction's initial states (zeros if absent). tmp is
// B*H scratch (GRU with linear_before_reset = 0: r . h_prev).
template <class Exec>
void forward_direction(Exec &ex, pipert_context *ctx, const Dims &dm, int64_t d, const float *xw,
                       float *rh, const float *r, const float *b, const float *h0d,
                       const float *c0d, float *hout, int64_t hstride, float *cs, float *act,
                       float *tmp) {
  const int64_t B = dm.B, H = dm.H, GH = dm.GH(), BH = dm.BH();
  const float *rd = r + d * GH * H;
  const float *wb = b ? b + d * 2 * GH : nullptr;
  const float *rb = b ? wb + GH : nullptr;
  const Cell cell = dm.cell;
  const bool lbr = dm.lbr;
  const int64_t P = dm.T * BH;
  // Both biases summed (zeros without them), read as one in the cells;
  // GRU's h gate reads its two apart (Wbh and Rbh, zeros without them).
  float *bsum = ex.alloc(GH);
  float *bxn = cell == kGru ? ex.alloc(H) : nullptr, *brn = cell == kGru ? ex.alloc(H) : nullptr;
  if (wb) {
    ex.map(GH, PIPERT_RNN_LAMBDA(int64_t k) { bsum[k] = wb[k] + rb[k]; });
    if (cell == kGru) {
      copy(ex, bxn, wb + 2 * H, H);
      copy(ex, brn, rb + 2 * H, H);
    }
  } else {
    fill(ex, bsum, GH, 0.f);
    if (cell == kGru) {
      fill(ex, bxn, H, 0.f);
      fill(ex, brn, H, 0.f);
    }
  }
  for (int64_t s = 0; s < dm.T; ++s) {
    const int64_t t = dm.time(d, s);
    const int64_t tp = s == 0 ? -1 : dm.time(d, s - 1);
    const float *hprev = s == 0 ? h0d : hout + tp * hstride;
    const float *cprev = s == 0 ? c0d : cs + tp * BH;
    const float *xrow0 = xw + t * B * GH;
    if (cell == kGru && !lbr) {
      // z and r first; then the h gate's recurrent term from r . h_prev.
      pipert_sgemm(ctx, 0, 1, B, 2 * H, H, 1.f, hprev, H, rd, H, 0.f, rh, GH);
      ex.map_rows(B, H, PIPERT_RNN_LAMBDA(int64_t bb, int64_t j, int64_t idx) {
        const float ar = xrow0[bb * GH + H + j] + rh[bb * GH + H + j] + bsum[H + j];
        tmp[idx] = formula::sigmoid(ar) * hprev[idx];
      });
      pipert_sgemm(ctx, 0, 1, B, H, H, 1.f, tmp, H, rd + 2 * H * H, H, 0.f, rh + 2 * H, GH);
    } else {
      pipert_sgemm(ctx, 0, 1, B, GH, H, 1.f, hprev, H, rd, H, 0.f, rh, GH);
    }
    float *hdst = hout + t * hstride;
    if (cell == kLstm) {
      float *cdst = cs + t * BH;
      if (act)
        lstm_step<true>(ex, B, H, xrow0, rh, bsum, cprev, cdst, hdst, act + t * BH, P);
      else
        lstm_step<false>(ex, B, H, xrow0, rh, bsum, cprev, cdst, hdst, nullptr, P);
      continue;
    }
    float *adst = act ? act + t * BH : nullptr;
    if (lbr)
      adst ? gru_step<true, true>(ex, B, H, xrow0, rh, bsum, bxn, brn, hprev, nullptr, hdst, adst,
                                  P)
           : gru_step<true, false>(ex, B, H, xrow0, rh, bsum, bxn, brn, hprev, nullptr, hdst,
                                   nullptr, P);
    else
      adst ? gru_step<false, true>(ex, B, H, xrow0, rh, bsum, bxn, brn, hprev, tmp, hdst, adst, P)
           : gru_step<false, false>(ex, B, H, xrow0, rh, bsum, bxn, brn, hprev, tmp, hdst,
                                    nullptr, P);
  }
  ex.release(bsum);
  ex.release(bxn);
  ex.release(brn);
}

// pipert_lstm_f32 / pipert_gru_f32; with `saved` (nullable) the states the
// gradient reads (see "Saved states").
template <class Exec>
void forward(Exec &ex, pipert_context *ctx, const Dims &dm, const float *x, const float *w,
             const float *r, const float *b, const float *h0, const float *c0, float *y,
             float *yh, float *yc, float *saved) {
  const int64_t T = dm.T, B = dm.B, I = dm.I, GH = dm.GH(), BH = dm.BH();
  const int64_t D = dm.D, P = T * BH, K = saved_planes(dm.cell);
  if (B == 0)
    return;
  float *xw = ex.alloc(T * B * GH), *rh = ex.alloc(B * GH);
  float *hs = y || saved ? nullptr : ex.alloc(T * BH);
  float *cs = dm.cell == kLstm && !saved ? ex.alloc(T * BH) : nullptr;
  float *tmp = dm.cell == kGru && !dm.lbr ? ex.alloc(BH) : nullptr;
  float *zeros = nullptr;
  if (!h0 || (dm.cell == kLstm && !c0)) {
    zeros = ex.alloc(BH);
    fill(ex, zeros, BH, 0.f);
  }
  for (int64_t d = 0; d < D; ++d) {
    pipert_sgemm(ctx, 0, 1, T * B, GH, I, 1.f, x, I, w + d * GH * I, I, 0.f, xw, GH);
    // Saving: h, c and the activations into this direction's planes, and
    // Y from the h plane after the loop.
    float *sv = saved ? saved + d * K * P : nullptr;
    float *hout = sv ? sv : y ? y + d * BH : hs;
    const int64_t hstride = y && !sv ? D * BH : BH;
    float *csd = sv && dm.cell == kLstm ? sv + P : cs;
    forward_direction(ex, ctx, dm, d, xw, rh, r, b, h0 ? h0 + d * BH : zeros,
                      c0 ? c0 + d * BH : zeros, hout, hstride, csd,
                      sv ? sv + (K - kSaved) * P : nullptr, tmp);
    if (sv && y) {
      float *yd = y + d * BH;
      ex.map_rows(T, BH, PIPERT_RNN_LAMBDA(int64_t t, int64_t k, int64_t idx) {
        yd[t * D * BH + k] = sv[idx];
      });
    }
    const int64_t last = dm.time(d, T - 1);
    if (yh)
      copy(ex, yh + d * BH, hout + last * hstride, BH);
    if (yc && csd)
      copy(ex, yc + d * BH, csd + last * BH, BH);
  }
  ex.release(zeros);
  ex.release(tmp);
  ex.release(cs);
  ex.release(hs);
  ex.release(rh);
  ex.release(xw);
}

// pipert_lstm_grad_f32 / pipert_gru_grad_f32. dy, dyh, dyc: the gradients of
// Y, Y_h, Y_c (null: zero); saved: the forward's saved states (null:
// recomputed); every result is optional.
template <class Exec>
void backward(Exec &ex, pipert_context *ctx, const Dims &dm, const float *x, const float *w,
              const float *r, const float *b, const float *h0, const float *c0, const float *dy,
              const float *dyh, const float *dyc, const float *saved, float *dx, float *dw,
              float *dr, float *db, float *dh0, float *dc0) {
  const int64_t T = dm.T, B = dm.B, I = dm.I, H = dm.H, GH = dm.GH(), BH = dm.BH();
  const int64_t D = dm.D, P = T * BH, K = saved_planes(dm.cell);
  const Cell cell = dm.cell;
  const bool lbr = dm.lbr;
  if (B == 0) {
    // Nothing flows; the weight gradients are zero.
    if (dw)
      fill(ex, dw, D * GH * I, 0.f);
    if (dr)
      fill(ex, dr, D * GH * H, 0.f);
    if (db)
      fill(ex, db, D * 2 * GH, 0.f);
    return;
  }
  // Without saved states, scratch for the recomputed ones (one direction's
  // planes at a time).
  float *xw = saved ? nullptr : ex.alloc(T * B * GH);
  float *rh = saved ? nullptr : ex.alloc(B * GH);
  float *scratch = saved ? nullptr : ex.alloc(K * P);
  float *dxw = ex.alloc(T * B * GH);
  float *drh = cell == kLstm ? dxw : ex.alloc(T * B * GH);
  float *dh = ex.alloc(BH), *dc = ex.alloc(BH), *tmp = ex.alloc(BH);
  float *zeros = ex.alloc(BH);
  fill(ex, zeros, BH, 0.f);
  for (int64_t d = 0; d < D; ++d) {
    const float *wd = w + d * GH * I, *rd = r + d * GH * H;
    const float *h0d = h0 ? h0 + d * BH : zeros;
    const float *c0d = c0 ? c0 + d * BH : zeros;
    const float *sv = saved ? saved + d * K * P : scratch;
    const float *hs = sv, *cs = cell == kLstm ? sv + P : nullptr;
    const float *act = sv + (K - kSaved) * P;
    if (!saved) {
      pipert_sgemm(ctx, 0, 1, T * B, GH, I, 1.f, x, I, wd, I, 0.f, xw, GH);
      forward_direction(ex, ctx, dm, d, xw, rh, r, b, h0d, c0d, scratch, BH,
                        cell == kLstm ? scratch + P : nullptr, scratch + (K - kSaved) * P, tmp);
    }
    if (dyh)
      copy(ex, dh, dyh + d * BH, BH);
    else
      fill(ex, dh, BH, 0.f);
    if (dyc && cell == kLstm)
      copy(ex, dc, dyc + d * BH, BH);
    else
      fill(ex, dc, BH, 0.f);
    float *drd = dr ? dr + d * GH * H : nullptr;
    if (drd)
      fill(ex, drd, GH * H, 0.f);
    for (int64_t s = T - 1; s >= 0; --s) {
      const int64_t t = dm.time(d, s);
      const int64_t tp = s == 0 ? -1 : dm.time(d, s - 1);
      const float *hprev = s == 0 ? h0d : hs + tp * BH;
      const float *cprev = s == 0 ? c0d : (cs ? cs + tp * BH : nullptr);
      const float *ct = cs ? cs + t * BH : nullptr;
      const float *at = act + t * BH;
      const float *dyt = dy ? dy + (t * D + d) * BH : nullptr;
      float *dxt = dxw + t * B * GH, *drt = drh + t * B * GH;
      float *dhp = dh, *dcp = dc;
      // dy of this step, or zeros.
      const float *dyz = dyt ? dyt : zeros;
      if (cell == kLstm) {
        ex.map_rows(B, H, PIPERT_RNN_LAMBDA(int64_t bb, int64_t j, int64_t idx) {
          float *gx = dxt + bb * GH;
          float dai, dao, daf, dac, dcprev;
          formula::lstm_cell_grad(at[idx], at[P + idx], at[2 * P + idx], at[3 * P + idx], ct[idx],
                                  cprev[idx], dhp[idx] + dyz[idx], dcp[idx], dai, dao, daf, dac,
                                  dcprev);
          gx[j] = dai;
          gx[H + j] = dao;
          gx[2 * H + j] = daf;
          gx[3 * H + j] = dac;
          dcp[idx] = dcprev;
          dhp[idx] = 0.f;
        });
      } else {
        ex.map_rows(B, H, PIPERT_RNN_LAMBDA(int64_t bb, int64_t j, int64_t idx) {
          float *gx = dxt + bb * GH, *gr = drt + bb * GH;
          float daz, dar, dxn, drn, dhprev;
          formula::gru_cell_grad(at[idx], at[P + idx], at[2 * P + idx], at[3 * P + idx], hprev[idx],
                                 dhp[idx] + dyz[idx], lbr, daz, dar, dxn, drn, dhprev);
          gx[j] = gr[j] = daz;
          gx[H + j] = gr[H + j] = dar;
          gx[2 * H + j] = dxn;
          gr[2 * H + j] = drn;
          dhp[idx] = dhprev;
        });
      }
      if (cell == kGru && !lbr) {
        // The h gate's recurrent term is (r . h_prev) Rh^T: its gradient
        // d(r . h_prev) = drn Rh gives dar and a part of dH_prev; then
        // dH_prev += dRH[t][:, z r] R_d[z r]; dR_d[z r] += dRH[t][:, z r]^T
        // H_prev; dR_d[h] += drn^T (r . h_prev).
        float *tp2 = tmp;
        pipert_sgemm(ctx, 0, 0, B, H, H, 1.f, drt + 2 * H, GH, rd + 2 * H * H, H, 0.f, tp2, H);
        ex.map_rows(B, H, PIPERT_RNN_LAMBDA(int64_t bb, int64_t j, int64_t idx) {
          float dar, dhr;
          formula::gru_reset_grad(at[P + idx], hprev[idx], tp2[idx], dar, dhr);
          dxt[bb * GH + H + j] = dar;
          drt[bb * GH + H + j] = dar;
          dhp[idx] += dhr;
        });
        pipert_sgemm(ctx, 0, 0, B, H, 2 * H, 1.f, drt, GH, rd, H, 1.f, dh, H);
        if (drd) {
          pipert_sgemm(ctx, 1, 0, 2 * H, H, B, 1.f, drt, GH, hprev, H, 1.f, drd, H);
          pipert_sgemm(ctx, 1, 0, H, H, B, 1.f, drt + 2 * H, GH, at + 3 * P, H, 1.f,
                       drd + 2 * H * H, H);
        }
        continue;
      }
      // dH_prev += dRH[t] R_d; dR_d += dRH[t]^T H_prev.
      pipert_sgemm(ctx, 0, 0, B, H, GH, 1.f, drt, GH, rd, H, 1.f, dh, H);
      if (drd)
        pipert_sgemm(ctx, 1, 0, GH, H, B, 1.f, drt, GH, hprev, H, 1.f, drd, H);
    }
    if (dh0)
      copy(ex, dh0 + d * BH, dh, BH);
    if (dc0 && cell == kLstm)
      copy(ex, dc0 + d * BH, dc, BH);
    if (dw)
      pipert_sgemm(ctx, 1, 0, GH, I, T * B, 1.f, dxw, GH, x, I, 0.f, dw + d * GH * I, I);
    if (dx)
      pipert_sgemm(ctx, 0, 0, T * B, I, GH, 1.f, dxw, GH, wd, I, d == 0 ? 0.f : 1.f, dx, I);
    if (db) {
      float *dbd = db + d * 2 * GH;
      const int64_t rows = T * B;
      const float *gxs = dxw, *grs = drh;
      ex.column_sums(rows, GH, gxs, dbd);
      ex.column_sums(rows, GH, grs, dbd + GH);
    }
  }
  ex.release(zeros);
  ex.release(tmp);
  ex.release(dc);
  ex.release(dh);
  if (drh != dxw)
    ex.release(drh);
  ex.release(dxw);
  ex.release(scratch);
  ex.release(rh);
  ex.release(xw);
}

} // namespace pipert::rnn

#endif // PIPERT_CORE_RNN_DRIVER_H
