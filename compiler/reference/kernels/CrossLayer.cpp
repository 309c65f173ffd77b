//===- CrossLayer.cpp - Reference Block AttnRes and mHC mixing ------------===//

#include "compiler/reference/Kernels.h"
#include "compiler/reference/kernels/KernelUtils.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace daybreak::ref {

using namespace detail;

Tensor blockAttnRes(const std::vector<Tensor> &sources,
                    const Tensor &normWeight, const Tensor &proj, double eps) {
  if (sources.empty())
    return Tensor();
  int64_t tokens = sources[0].dim(0), width = sources[0].dim(1);
  int64_t count = static_cast<int64_t>(sources.size());
  Tensor out = Tensor::zeros(ElementType::F32, {tokens, width});
  std::vector<double> logits(count);
  for (int64_t t = 0; t < tokens; ++t) {
    // Keys are RMS-normalised sources, values the sources themselves.
    for (int64_t i = 0; i < count; ++i) {
      const float *v = sources[i].floats().data() + t * width;
      double sumSquares = 0.0, logit = 0.0;
      for (int64_t d = 0; d < width; ++d) {
        sumSquares += static_cast<double>(v[d]) * v[d];
        logit += static_cast<double>(v[d]) * normWeight.floats()[d] *
                 proj.floats()[d];
      }
      logits[i] = logit / std::sqrt(sumSquares / width + eps);
    }
    double maxLogit = *std::max_element(logits.begin(), logits.end());
    double denominator = 0.0;
    for (double &logit : logits)
      denominator += logit = std::exp(logit - maxLogit);
    for (int64_t d = 0; d < width; ++d) {
      double sum = 0.0;
      for (int64_t i = 0; i < count; ++i)
        sum += logits[i] * sources[i].floats()[t * width + d];
      out.floats()[t * width + d] = static_cast<float>(sum / denominator);
    }
  }
  return out;
}

MhcPre mhcPre(const Tensor &streams, const Tensor &fn, const Tensor &base,
              const Tensor &scale, int64_t sinkhornIters, double eps,
              double normEps) {
  int64_t tokens = streams.dim(0), n = streams.dim(1), width = streams.dim(2);
  int64_t flat = n * width, mixes = (2 + n) * n;
  MhcPre result;
  result.input = Tensor::zeros(ElementType::F32, {tokens, width});
  result.post = Tensor::zeros(ElementType::F32, {tokens, n});
  result.comb = Tensor::zeros(ElementType::F32, {tokens, n, n});
  const std::vector<float> &scales = scale.floats();
  const std::vector<float> &bases = base.floats();

  std::vector<double> f(mixes), pre(n), comb(n * n);
  for (int64_t t = 0; t < tokens; ++t) {
    const float *x = streams.floats().data() + t * flat;
    // f = rmsNorm(flatten(X)) @ fn^T, the norm without a weight.
    double sumSquares = 0.0;
    for (int64_t i = 0; i < flat; ++i)
      sumSquares += static_cast<double>(x[i]) * x[i];
    double inv = 1.0 / std::sqrt(sumSquares / flat + normEps);
    for (int64_t m = 0; m < mixes; ++m) {
      double sum = 0.0;
      for (int64_t i = 0; i < flat; ++i)
        sum += x[i] * inv * fn.floats()[m * flat + i];
      f[m] = sum;
    }

    for (int64_t j = 0; j < n; ++j) {
      pre[j] = sigmoidOf(f[j] * scales[0] + bases[j]) + eps;
      result.post.floats()[t * n + j] = static_cast<float>(
          2.0 * sigmoidOf(f[n + j] * scales[1] + bases[n + j]));
    }

    // comb[i, j]: softmax along j, + eps, then Sinkhorn. The first column
    // normalisation and the eps placement follow transformers'
    // DeepseekV4HyperConnection exactly.
    auto at = [&](int64_t i, int64_t j) -> double & { return comb[i * n + j]; };
    for (int64_t i = 0; i < n; ++i) {
      double maxLogit = -std::numeric_limits<double>::infinity();
      for (int64_t j = 0; j < n; ++j) {
        int64_t m = 2 * n + i * n + j;
        at(i, j) = f[m] * scales[2] + bases[m];
        maxLogit = std::max(maxLogit, at(i, j));
      }
      double sum = 0.0;
      for (int64_t j = 0; j < n; ++j)
        sum += at(i, j) = std::exp(at(i, j) - maxLogit);
      for (int64_t j = 0; j < n; ++j)
        at(i, j) = at(i, j) / sum + eps;
    }
    auto normaliseColumns = [&] {
      for (int64_t j = 0; j < n; ++j) {
        double sum = 0.0;
        for (int64_t i = 0; i < n; ++i)
          sum += at(i, j);
        for (int64_t i = 0; i < n; ++i)
          at(i, j) /= sum + eps;
      }
    };
    auto normaliseRows = [&] {
      for (int64_t i = 0; i < n; ++i) {
        double sum = 0.0;
        for (int64_t j = 0; j < n; ++j)
          sum += at(i, j);
        for (int64_t j = 0; j < n; ++j)
          at(i, j) /= sum + eps;
      }
    };
    normaliseColumns();
    for (int64_t iter = 1; iter < sinkhornIters; ++iter) {
      normaliseRows();
      normaliseColumns();
    }
    for (int64_t i = 0; i < n * n; ++i)
      result.comb.floats()[t * n * n + i] = static_cast<float>(comb[i]);

    for (int64_t d = 0; d < width; ++d) {
      double sum = 0.0;
      for (int64_t j = 0; j < n; ++j)
        sum += pre[j] * x[j * width + d];
      result.input.floats()[t * width + d] = static_cast<float>(sum);
    }
  }
  return result;
}

Tensor mhcPost(const Tensor &streams, const Tensor &y, const Tensor &post,
               const Tensor &comb) {
  int64_t tokens = streams.dim(0), n = streams.dim(1), width = streams.dim(2);
  Tensor out = Tensor::zeros(ElementType::F32, {tokens, n, width});
  for (int64_t t = 0; t < tokens; ++t) {
    const float *x = streams.floats().data() + t * n * width;
    const float *c = comb.floats().data() + t * n * n;
    for (int64_t k = 0; k < n; ++k) {
      for (int64_t d = 0; d < width; ++d) {
        // comb is read transposed: stream j feeds output k through C[j, k].
        double sum = static_cast<double>(post.floats()[t * n + k]) *
                     y.floats()[t * width + d];
        for (int64_t j = 0; j < n; ++j)
          sum += static_cast<double>(c[j * n + k]) * x[j * width + d];
        out.floats()[(t * n + k) * width + d] = static_cast<float>(sum);
      }
    }
  }
  return out;
}

} // namespace daybreak::ref
