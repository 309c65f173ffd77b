//===- Norms.cpp - Reference RMSNorm, LayerNorm and gated RMSNorm ---------===//

#include "compiler/reference/Kernels.h"
#include "compiler/reference/kernels/KernelUtils.h"

#include <cmath>

namespace daybreak::ref {

using namespace detail;

namespace {

/// 1 / sqrt(mean(x^2) + eps) of one row.
double inverseRms(const float *row, int64_t width, double eps) {
  double sumSquares = 0.0;
  for (int64_t i = 0; i < width; ++i)
    sumSquares += static_cast<double>(row[i]) * row[i];
  return 1.0 / std::sqrt(sumSquares / static_cast<double>(width) + eps);
}

} // namespace

Tensor rmsNorm(const Tensor &x, const Tensor &weight, double eps) {
  Tensor y = Tensor::zeros(ElementType::F32, x.shape());
  int64_t width = x.dim(-1);
  for (int64_t r = 0, rows = rowsOf(x); r < rows; ++r) {
    const float *in = x.floats().data() + r * width;
    float *out = y.floats().data() + r * width;
    double inv = inverseRms(in, width, eps);
    for (int64_t i = 0; i < width; ++i) {
      double w = weight.empty() ? 1.0 : weight.floats()[i];
      out[i] = static_cast<float>(in[i] * inv * w);
    }
  }
  return y;
}

Tensor layerNorm(const Tensor &x, const Tensor &weight, const Tensor &bias,
                 double eps) {
  Tensor y = Tensor::zeros(ElementType::F32, x.shape());
  int64_t width = x.dim(-1);
  for (int64_t r = 0, rows = rowsOf(x); r < rows; ++r) {
    const float *in = x.floats().data() + r * width;
    float *out = y.floats().data() + r * width;
    // Two passes: the mean first, so the variance does not cancel.
    double mean = 0.0;
    for (int64_t i = 0; i < width; ++i)
      mean += in[i];
    mean /= static_cast<double>(width);
    double variance = 0.0;
    for (int64_t i = 0; i < width; ++i)
      variance += (in[i] - mean) * (in[i] - mean);
    variance /= static_cast<double>(width);
    double inv = 1.0 / std::sqrt(variance + eps);
    for (int64_t i = 0; i < width; ++i) {
      double b = bias.empty() ? 0.0 : bias.floats()[i];
      out[i] =
          static_cast<float>((in[i] - mean) * inv * weight.floats()[i] + b);
    }
  }
  return y;
}

Tensor gatedRmsNorm(const Tensor &x, const Tensor &gate, const Tensor &weight,
                    double eps, GateActivation activation) {
  Tensor y = Tensor::zeros(ElementType::F32, x.shape());
  int64_t width = x.dim(-1);
  for (int64_t r = 0, rows = rowsOf(x); r < rows; ++r) {
    const float *in = x.floats().data() + r * width;
    const float *g = gate.floats().data() + r * width;
    float *out = y.floats().data() + r * width;
    double inv = inverseRms(in, width, eps);
    for (int64_t i = 0; i < width; ++i) {
      double act = activation == GateActivation::Sigmoid ? sigmoidOf(g[i])
                                                         : siluOf(g[i]);
      double w = weight.empty() ? 1.0 : weight.floats()[i];
      out[i] = static_cast<float>(in[i] * inv * w * act);
    }
  }
  return y;
}

} // namespace daybreak::ref
