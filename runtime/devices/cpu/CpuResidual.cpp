//===- CpuResidual.cpp - mHC residual-stream kernels for the CPU ----------===//
//
// mhc_pre, mhc_post and mhc_post_pre (Kernels.def): n residual streams per
// token mixed around a sublayer. A work item is a range of tokens; everything
// of a token (its mixing logits, the Sinkhorn iterations on the n x n comb
// matrix) lives in fixed-size arrays, so nothing is allocated per launch.
// Sums in double, as the reference evaluator takes them (ref::mhcPre), so
// the two agree to fp32 rounding. The fused forms store and read every
// intermediate in fp32 where the separate kernels would (the new streams,
// the collapsed input before its norm), so they give the same bits.
//
//===----------------------------------------------------------------------===//

#include "runtime/devices/cpu/CpuKernels.h"
#include "runtime/devices/cpu/ThreadPool.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

namespace daybreak::cpu {

namespace {

double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }

Status checkStreams(const char *kernel, int64_t n) {
  if (n < 1 || n > kMhcMaxStreams)
    return Status::error(std::string(kernel) + ": " + std::to_string(n) +
                         " streams (the CPU kernel takes 1 to " +
                         std::to_string(kMhcMaxStreams) + ")");
  return Status::success();
}

Status checkPre(const char *kernel, int64_t n, const MhcMix &mix) {
  DAYBREAK_RETURN_IF_ERROR(checkStreams(kernel, n));
  if (mix.sinkhornIters < 1)
    return Status::error(std::string(kernel) + ": sinkhorn_iters " +
                         std::to_string(mix.sinkhornIters) + " (at least 1)");
  return Status::success();
}

/// X'_k = post_k y + sum_j comb[j, k] X_j for one token.
void postToken(const float *x, const float *y, const float *post,
               const float *comb, int64_t n, int64_t width, float *out) {
  for (int64_t k = 0; k < n; ++k)
    for (int64_t d = 0; d < width; ++d) {
      // Stream j feeds stream k through comb[j, k].
      double sum = double(post[k]) * y[d];
      for (int64_t j = 0; j < n; ++j)
        sum += double(comb[j * n + k]) * x[j * width + d];
      out[k * width + d] = float(sum);
    }
}

/// mhc_pre for one token's streams x [n, D]: input [D], post [n], comb
/// [n, n].
void preToken(const float *x, int64_t n, int64_t width, const MhcMix &mix,
              float *input, float *post, float *comb) {
  constexpr int64_t kMaxMixes = (2 + kMhcMaxStreams) * kMhcMaxStreams;
  double f[kMaxMixes], pre[kMhcMaxStreams];
  double c[kMhcMaxStreams * kMhcMaxStreams];
  const int64_t flat = n * width, mixes = (2 + n) * n;
  const float *scale = mix.scale, *base = mix.base;
  const double eps = mix.eps;
  // f = rmsNorm(flatten(X)) fn^T, the norm without a weight.
  double sumSquares = 0.0;
  for (int64_t i = 0; i < flat; ++i)
    sumSquares += double(x[i]) * x[i];
  double inv = 1.0 / std::sqrt(sumSquares / double(flat) + mix.normEps);
  for (int64_t m = 0; m < mixes; ++m) {
    const float *row = mix.fn + m * flat;
    double sum = 0.0;
    for (int64_t i = 0; i < flat; ++i)
      sum += double(x[i]) * row[i];
    f[m] = sum * inv;
  }
  for (int64_t j = 0; j < n; ++j) {
    pre[j] = sigmoid(f[j] * scale[0] + base[j]) + eps;
    post[j] = float(2.0 * sigmoid(f[n + j] * scale[1] + base[n + j]));
  }
  // comb: a softmax along each row, + eps, a column normalisation, then
  // sinkhornIters - 1 rounds of rows and columns (transformers'
  // DeepseekV4HyperConnection's order and eps placement).
  for (int64_t i = 0; i < n; ++i) {
    double *r = c + i * n;
    double top = -std::numeric_limits<double>::infinity();
    for (int64_t j = 0; j < n; ++j) {
      int64_t m = 2 * n + i * n + j;
      r[j] = f[m] * scale[2] + base[m];
      top = std::max(top, r[j]);
    }
    double sum = 0.0;
    for (int64_t j = 0; j < n; ++j)
      sum += r[j] = std::exp(r[j] - top);
    for (int64_t j = 0; j < n; ++j)
      r[j] = r[j] / sum + eps;
  }
  // Each of the n lines (rows: a stride of n between lines, 1 within;
  // columns: 1 and n) divided by its sum + eps.
  auto normalise = [&](int64_t between, int64_t within) {
    for (int64_t a = 0; a < n; ++a) {
      double *line = c + a * between;
      double sum = 0.0;
      for (int64_t b = 0; b < n; ++b)
        sum += line[b * within];
      for (int64_t b = 0; b < n; ++b)
        line[b * within] /= sum + eps;
    }
  };
  normalise(1, n); // columns
  for (int64_t iter = 1; iter < mix.sinkhornIters; ++iter) {
    normalise(n, 1); // rows
    normalise(1, n);
  }
  for (int64_t i = 0; i < n * n; ++i)
    comb[i] = float(c[i]);
  // The sublayer input: sum_j pre_j X_j, rounded to fp32 as a separate
  // kernel would store it, then the fused norm as cpu::rmsNorm takes it.
  double inputSquares = 0.0;
  for (int64_t d = 0; d < width; ++d) {
    double sum = 0.0;
    for (int64_t j = 0; j < n; ++j)
      sum += pre[j] * x[j * width + d];
    input[d] = float(sum);
    inputSquares += double(input[d]) * input[d];
  }
  if (!mix.norm.data)
    return;
  double norm = 1.0 / std::sqrt(inputSquares / double(width) + mix.inputEps);
  for (int64_t d = 0; d < width; ++d)
    input[d] = static_cast<float>(input[d] * norm * mix.norm.at(d));
}

} // namespace

Status mhcPre(ThreadPool &pool, const float *streams, int64_t tokens, int64_t n,
              int64_t width, const MhcMix &mix, float *input, float *post,
              float *comb) {
  DAYBREAK_RETURN_IF_ERROR(checkPre("mhc_pre", n, mix));
  const int64_t flat = n * width, mixes = (2 + n) * n;
  pool.parallelFor(tokens, std::max<int64_t>(1, 65536 / (mixes * flat + 1)),
                   [&](int64_t begin, int64_t end) {
                     for (int64_t t = begin; t < end; ++t)
                       preToken(streams + t * flat, n, width, mix,
                                input + t * width, post + t * n,
                                comb + t * n * n);
                   });
  return Status::success();
}

Status mhcPost(ThreadPool &pool, const float *streams, const float *y,
               const float *post, const float *comb, int64_t tokens, int64_t n,
               int64_t width, float *out) {
  DAYBREAK_RETURN_IF_ERROR(checkStreams("mhc_post", n));
  const int64_t flat = n * width;
  pool.parallelFor(tokens, std::max<int64_t>(1, 16384 / (flat + 1)),
                   [&](int64_t begin, int64_t end) {
                     for (int64_t t = begin; t < end; ++t)
                       postToken(streams + t * flat, y + t * width,
                                 post + t * n, comb + t * n * n, n, width,
                                 out + t * flat);
                   });
  return Status::success();
}

Status mhcPostPre(ThreadPool &pool, const float *streams, const float *y,
                  const float *post, const float *comb, int64_t tokens,
                  int64_t n, int64_t width, const MhcMix &mix, float *out,
                  float *input, float *nextPost, float *nextComb) {
  DAYBREAK_RETURN_IF_ERROR(checkPre("mhc_post_pre", n, mix));
  const int64_t flat = n * width, mixes = (2 + n) * n;
  pool.parallelFor(tokens, std::max<int64_t>(1, 65536 / (mixes * flat + 1)),
                   [&](int64_t begin, int64_t end) {
                     for (int64_t t = begin; t < end; ++t) {
                       float *x = out + t * flat;
                       postToken(streams + t * flat, y + t * width,
                                 post + t * n, comb + t * n * n, n, width, x);
                       preToken(x, n, width, mix, input + t * width,
                                nextPost + t * n, nextComb + t * n * n);
                     }
                   });
  return Status::success();
}

} // namespace daybreak::cpu
