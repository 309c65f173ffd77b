//===- Activations.cpp - Reference sigmoid, SiLU, SwiGLU and SiTU ---------===//

#include "compiler/reference/Kernels.h"
#include "compiler/reference/kernels/KernelUtils.h"

#include <algorithm>
#include <cmath>

namespace daybreak::ref {

using namespace detail;

namespace {

template <typename Fn> Tensor unary(const Tensor &x, Fn fn) {
  Tensor y = Tensor::zeros(ElementType::F32, x.shape());
  for (int64_t i = 0, n = x.numel(); i < n; ++i)
    y.floats()[i] = static_cast<float>(fn(static_cast<double>(x.floats()[i])));
  return y;
}

template <typename Fn> Tensor binary(const Tensor &a, const Tensor &b, Fn fn) {
  Tensor y = Tensor::zeros(ElementType::F32, a.shape());
  for (int64_t i = 0, n = a.numel(); i < n; ++i)
    y.floats()[i] = static_cast<float>(fn(static_cast<double>(a.floats()[i]),
                                          static_cast<double>(b.floats()[i])));
  return y;
}

} // namespace

Tensor sigmoid(const Tensor &x) { return unary(x, sigmoidOf); }

Tensor silu(const Tensor &x) { return unary(x, siluOf); }

Tensor swiglu(const Tensor &gate, const Tensor &up, double alpha,
              std::optional<double> limit, double upOffset) {
  return binary(gate, up, [&](double g, double u) {
    if (limit) {
      // gpt-oss clamps the gate from above only, the linear half both ways.
      g = std::min(g, *limit);
      u = std::clamp(u, -*limit, *limit);
    }
    return g * sigmoidOf(alpha * g) * (u + upOffset);
  });
}

Tensor situ(const Tensor &gate, const Tensor &up, double beta,
            double linearBeta) {
  return binary(gate, up, [&](double g, double u) {
    return beta * std::tanh(g / beta) * sigmoidOf(g) * linearBeta *
           std::tanh(u / linearBeta);
  });
}

} // namespace daybreak::ref
