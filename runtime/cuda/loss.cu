//===- loss.cu - losses (CUDA) -----------------------------------------------===//
//
// SoftmaxCrossEntropyLoss and NegativeLogLikelihoodLoss, reductions in
// double like runtime/cpu/loss.cpp.
//
//===----------------------------------------------------------------------===//
#include "nn_util.cuh"

using namespace pipert::cuda;
using namespace pipert::cuda::nn;

namespace {

//===------------------------------ losses --------------------------------===//

// Batch, classes, spatial (prod of d...).
using LossGeom = NCS;

// Weight of entry i (0 when ignored), raising out-of-range labels.
__device__ __forceinline__ float entry_weight(const LossGeom &g, const int64_t *labels,
                                              const float *weights, int has_ii, int64_t ii,
                                              int64_t i, DeviceError *err) {
  const int64_t l = labels[i];
  bool bad;
  const float w = formula::label_weight(l, g.c, weights, has_ii, ii, bad);
  if (bad)
    raise_error(err, kErrLabel, (long long)l, (long long)g.c);
  return w;
}

// One block: total = sum_i -w_i logp[label_i] (when logp) and wsum = sum_i w_i;
// writes the reduced loss (when loss) and wsum (when wsum_out).
__global__ void loss_sums_kernel(LossGeom g, const int64_t *__restrict__ labels,
                                 const float *__restrict__ weights, int has_ii, int64_t ii,
                                 const float *__restrict__ logp, int reduction, DeviceError *err,
                                 float *loss, double *wsum_out) {
  __shared__ double dsh[32];
  double total = 0, wsum = 0;
  for (int64_t i = threadIdx.x; i < g.n * g.spatial; i += blockDim.x) {
    const float w = entry_weight(g, labels, weights, has_ii, ii, i, err);
    if (logp && w != 0.f) {
      const int64_t n = i / g.spatial, s = i % g.spatial;
      total += -w * logp[(n * g.c + labels[i]) * g.spatial + s];
    }
    wsum += w;
  }
  total = block_sum(total, dsh);
  wsum = block_sum(wsum, dsh);
  if (threadIdx.x == 0) {
    if (loss)
      *loss = formula::reduced_loss(reduction, total, wsum);
    if (wsum_out)
      *wsum_out = wsum;
  }
}

void nll_forward(pipert_context *ctx, const char *op, const float *logp, const LossGeom &g,
                 const int64_t *labels, const float *weights, int has_ii, int64_t ii,
                 pipert_reduction reduction, float *loss) {
  formula::check_reduction(op, reduction);
  DeviceError *err = cx(ctx)->err;
  if (reduction == PIPERT_REDUCTION_NONE) {
    const LossGeom gg = g;
    launch_map(ctx, op, g.n * g.spatial, [=] __device__(int64_t i) {
      const float w = entry_weight(gg, labels, weights, has_ii, ii, i, err);
      const int64_t n = i / gg.spatial, s = i % gg.spatial;
      loss[i] = w == 0.f ? 0.f : -w * logp[(n * gg.c + labels[i]) * gg.spatial + s];
    });
    return;
  }
  loss_sums_kernel<<<1, kBlock, 0, stream_of(ctx)>>>(g, labels, weights, has_ii, ii, logp,
                                                   int(reduction), err, loss, nullptr);
  PIPERT_LAUNCH_CHECK(op);
}

// The device scalar sum of weights for mean reductions (nullptr otherwise).
double *loss_weight_sum(pipert_context *ctx, const char *op, Scratch &tmp, const LossGeom &g,
                        const int64_t *labels, const float *weights, int has_ii, int64_t ii,
                        pipert_reduction reduction) {
  if (reduction != PIPERT_REDUCTION_MEAN)
    return nullptr;
  loss_sums_kernel<<<1, kBlock, 0, stream_of(ctx)>>>(g, labels, weights, has_ii, ii, nullptr,
                                                   int(reduction), cx(ctx)->err, nullptr,
                                                   tmp.as<double>());
  PIPERT_LAUNCH_CHECK(op);
  return tmp.as<double>();
}


} // namespace

extern "C" {

//===------------------------------ losses --------------------------------===//

void pipert_softmax_cross_entropy_loss_f32(pipert_context *ctx, const float *scores, int64_t rank,
                                           const int64_t *shape, const int64_t *labels,
                                           const float *weights, int has_ignore_index,
                                           int64_t ignore_index, pipert_reduction reduction,
                                           float *loss, float *log_prob) {
  const char *op = "SoftmaxCrossEntropyLoss";
  const LossGeom g = nc_split(op, rank, shape);
  formula::check_reduction(op, reduction);
  Scratch own(ctx, log_prob ? 0 : size_t(numel(rank, shape)) * sizeof(float));
  float *lp = log_prob ? log_prob : own.as<float>();
  pipert_log_softmax_f32(ctx, scores, rank, shape, 1, lp);
  nll_forward(ctx, op, lp, g, labels, weights, has_ignore_index, ignore_index, reduction, loss);
}

void pipert_softmax_cross_entropy_loss_grad_f32(
    pipert_context *ctx, const float *dloss, const float *log_prob, int64_t rank,
    const int64_t *shape, const int64_t *labels, const float *weights, int has_ignore_index,
    int64_t ignore_index, pipert_reduction reduction, float *dscores) {
  const char *op = "SoftmaxCrossEntropyLossGrad";
  const LossGeom g = nc_split(op, rank, shape);
  formula::check_reduction(op, reduction);
  Scratch tmp(ctx, sizeof(double));
  const double *wsum = loss_weight_sum(ctx, op, tmp, g, labels, weights, has_ignore_index,
                                       ignore_index, reduction);
  DeviceError *err = cx(ctx)->err;
  const int red = int(reduction);
  const int has_ii = has_ignore_index;
  const int64_t ii = ignore_index;
  // d loss_i / d scores[n, c, s] = w_i * scale_i * (softmax_c - [c == label_i]).
  launch_map(ctx, op, g.n * g.c * g.spatial, [=] __device__(int64_t t) {
    const int64_t s = t % g.spatial, c = (t / g.spatial) % g.c, n = t / (g.spatial * g.c);
    const int64_t e = n * g.spatial + s;
    const float w = entry_weight(g, labels, weights, has_ii, ii, e, err);
    const float sc = formula::reduction_scale(red, dloss, e, wsum);
    dscores[t] = formula::softmax_xent_grad(w, sc, log_prob[t], labels[e] == c);
  });
}

void pipert_nll_loss_f32(pipert_context *ctx, const float *input, int64_t rank,
                         const int64_t *shape, const int64_t *labels, const float *weights,
                         int has_ignore_index, int64_t ignore_index, pipert_reduction reduction,
                         float *loss) {
  const char *op = "NegativeLogLikelihoodLoss";
  const LossGeom g = nc_split(op, rank, shape);
  nll_forward(ctx, op, input, g, labels, weights, has_ignore_index, ignore_index, reduction, loss);
}

void pipert_nll_loss_grad_f32(pipert_context *ctx, const float *dloss, int64_t rank,
                              const int64_t *shape, const int64_t *labels, const float *weights,
                              int has_ignore_index, int64_t ignore_index,
                              pipert_reduction reduction, float *dinput) {
  const char *op = "NegativeLogLikelihoodLossGrad";
  const LossGeom g = nc_split(op, rank, shape);
  formula::check_reduction(op, reduction);
  Scratch tmp(ctx, sizeof(double));
  const double *wsum = loss_weight_sum(ctx, op, tmp, g, labels, weights, has_ignore_index,
                                       ignore_index, reduction);
  pipert_memset_zero(ctx, dinput, size_t(numel(rank, shape)) * sizeof(float));
  DeviceError *err = cx(ctx)->err;
  const int red = int(reduction);
  const int has_ii = has_ignore_index;
  const int64_t ii = ignore_index;
  launch_map(ctx, op, g.n * g.spatial, [=] __device__(int64_t e) {
    const float w = entry_weight(g, labels, weights, has_ii, ii, e, err);
    if (w == 0.f)
      return;
    const int64_t n = e / g.spatial, s = e % g.spatial;
    dinput[(n * g.c + labels[e]) * g.spatial + s] =
        -w * formula::reduction_scale(red, dloss, e, wsum);
  });
}


} // extern "C"
