//===- Rope.cpp - Reference rotary position embedding with YaRN -----------===//

#include "compiler/reference/Kernels.h"
#include "compiler/reference/kernels/KernelUtils.h"

#include <algorithm>
#include <cmath>

namespace daybreak::ref {

using namespace detail;

namespace {

constexpr double kPi = 3.14159265358979323846;

/// The (fractional) pair index whose wavelength makes `rotations` turns over
/// the original context (HF `find_correction_dim`, DeepSeek `find_correction
/// _dim`).
double correctionDim(double rotations, int64_t dim, double base,
                     int64_t originalMaxPositions) {
  return static_cast<double>(dim) *
         std::log(static_cast<double>(originalMaxPositions) /
                  (rotations * 2.0 * kPi)) /
         (2.0 * std::log(base));
}

} // namespace

std::vector<double> ropeFrequencies(const RopeParams &params) {
  int64_t half = params.dim / 2;
  std::vector<double> freqs(half);
  for (int64_t i = 0; i < half; ++i)
    freqs[i] = std::pow(params.theta, -2.0 * static_cast<double>(i) /
                                          static_cast<double>(params.dim));
  if (!params.yarn)
    return freqs;

  // NTK-by-parts: pairs that turn fewer than betaSlow times over the original
  // context are interpolated (divided by factor), pairs turning more than
  // betaFast times are kept, and a linear ramp blends the two.
  const YarnParams &yarn = *params.yarn;
  double low = correctionDim(yarn.betaFast, params.dim, params.theta,
                             yarn.originalMaxPositions);
  double high = correctionDim(yarn.betaSlow, params.dim, params.theta,
                              yarn.originalMaxPositions);
  if (yarn.truncate) {
    low = std::floor(low);
    high = std::ceil(high);
  }
  low = std::max(low, 0.0);
  high = std::min(high, static_cast<double>(params.dim - 1));
  if (low == high)
    high += 0.001; // avoids a division by zero, as upstream
  for (int64_t i = 0; i < half; ++i) {
    double ramp =
        std::clamp((static_cast<double>(i) - low) / (high - low), 0.0, 1.0);
    freqs[i] = freqs[i] / yarn.factor * ramp + freqs[i] * (1.0 - ramp);
  }
  return freqs;
}

Tensor rope(const Tensor &x, const Tensor &positions,
            const RopeParams &params) {
  Tensor y = x.castTo(ElementType::F32);
  std::vector<double> freqs = ropeFrequencies(params);
  double scale = params.yarn ? params.yarn->attentionFactor : 1.0;
  int64_t half = params.dim / 2;
  int64_t width = x.dim(-1);
  int64_t tokens = x.dim(0);
  int64_t rowsPerToken = tokens ? rowsOf(x) / tokens : 0;
  for (int64_t t = 0; t < tokens; ++t) {
    double position = static_cast<double>(intAt(positions, t));
    for (int64_t r = 0; r < rowsPerToken; ++r) {
      float *row =
          y.floats().data() + (t * rowsPerToken + r) * width + params.offset;
      for (int64_t i = 0; i < half; ++i) {
        double angle = position * freqs[i];
        double c = std::cos(angle) * scale, s = std::sin(angle) * scale;
        int64_t a = params.style == RopeStyle::Interleaved ? 2 * i : i;
        int64_t b =
            params.style == RopeStyle::Interleaved ? 2 * i + 1 : i + half;
        double xa = row[a], xb = row[b];
        row[a] = static_cast<float>(xa * c - xb * s);
        row[b] = static_cast<float>(xb * c + xa * s);
      }
    }
  }
  return y;
}

} // namespace daybreak::ref
