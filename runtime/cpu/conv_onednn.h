//===- conv_onednn.h - convolutions through oneDNN's primitives (CPU) -----===//
#ifndef PIPERT_CPU_CONV_ONEDNN_H
#define PIPERT_CPU_CONV_ONEDNN_H

#include "kernel_util.h"

namespace pipert::cpu {

// Whether conv.cpp hands this convolution to oneDNN's primitive
// (PIPERT_CONV, default auto).
bool use_onednn_conv(const ConvGeom &g);
// Each returns false, having computed nothing, where oneDNN refuses the
// geometry (the caller takes im2col).
// y = conv(x, w) + b (b may be null); NCHW / OIHW as the ABI's.
bool onednn_conv_forward(pipert_context *ctx, const ConvGeom &g, const float *x, const float *w,
                         const float *b, float *y);
// dx = the input gradient of dy (overwritten).
bool onednn_conv_backward_data(pipert_context *ctx, const ConvGeom &g, const float *dy,
                               const float *w, float *dx);
// dw = the weight gradient (overwritten).
bool onednn_conv_backward_weights(pipert_context *ctx, const ConvGeom &g, const float *x,
                                  const float *dy, float *dw);

} // namespace pipert::cpu

#endif
