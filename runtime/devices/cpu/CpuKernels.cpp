//===- CpuKernels.cpp - Elementwise, norm, RoPE, routing and copy kernels -===//
//
// The light kernels of the CPU device: each splits rows (or elements) over
// the pool; per-row reductions run in double, so results do not depend on
// the split. Temporaries come from scratch arenas sized by the shapes
// (Scratch.h). Matmuls live in CpuMatmul.cpp, caches in CpuCache.cpp,
// attention and DSA in CpuAttention.cpp.
//
//===----------------------------------------------------------------------===//

#include "runtime/devices/cpu/CpuKernels.h"
#include "runtime/core/LaunchParams.h"
#include "runtime/numerics/Numerics.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <string>

namespace daybreak::cpu {

namespace {

/// Rows per job so that a job touches at least ~16K values.
int64_t rowGrain(int64_t dim) {
  return std::max<int64_t>(1, 16384 / std::max<int64_t>(dim, 1));
}

constexpr int64_t kElementGrain = 16384;

/// Sigmoid that never overflows exp, in double.
double sigmoid(double x) {
  if (x >= 0.0)
    return 1.0 / (1.0 + std::exp(-x));
  double e = std::exp(x);
  return e / (1.0 + e);
}

} // namespace

float WeightView::at(int64_t i) const {
  switch (type) {
  case WeightType::F32:
    return static_cast<const float *>(data)[i];
  case WeightType::BF16:
    return numerics::bf16ToFloat(static_cast<const uint16_t *>(data)[i]);
  case WeightType::F8E4M3:
    return numerics::e4m3ToFloat(static_cast<const uint8_t *>(data)[i]);
  }
  return 0.0f;
}

void WeightView::decodeRow(int64_t matrix, int64_t row, int64_t col,
                           int64_t count, float *out) const {
  int64_t first = (matrix * rows + row) * cols + col;
  switch (type) {
  case WeightType::F32:
    std::memcpy(out, static_cast<const float *>(data) + first,
                count * sizeof(float));
    return;
  case WeightType::BF16: {
    const uint16_t *bits = static_cast<const uint16_t *>(data) + first;
    for (int64_t i = 0; i < count; ++i)
      out[i] = numerics::bf16ToFloat(bits[i]);
    return;
  }
  case WeightType::F8E4M3: {
    const uint8_t *codes = static_cast<const uint8_t *>(data) + first;
    int64_t scaleRows = (rows + blockN - 1) / blockN;
    int64_t scaleCols = (cols + blockK - 1) / blockK;
    const float *rowScales =
        scales + (matrix * scaleRows + row / blockN) * scaleCols;
    for (int64_t i = 0; i < count; ++i)
      out[i] = numerics::e4m3ToFloat(codes[i]) * rowScales[(col + i) / blockK];
    return;
  }
  }
}

Status embedding(ThreadPool &pool, const float *table, int64_t vocab,
                 int64_t dim, const int32_t *ids, int64_t tokens, float *out) {
  return embedding(pool, WeightView::f32(table), vocab, dim, ids, tokens, out);
}

Status embedding(ThreadPool &pool, const WeightView &table, int64_t vocab,
                 int64_t dim, const int32_t *ids, int64_t tokens, float *out) {
  for (int64_t t = 0; t < tokens; ++t)
    if (ids[t] < 0 || ids[t] >= vocab)
      return Status::error("embedding: token id " + std::to_string(ids[t]) +
                           " at position " + std::to_string(t) +
                           " is outside the vocabulary [0, " +
                           std::to_string(vocab) + ")");
  WeightView rows = table;
  rows.rows = vocab;
  rows.cols = dim;
  pool.parallelFor(tokens, rowGrain(dim), [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t)
      rows.decodeRow(0, ids[t], 0, dim, out + t * dim);
  });
  return Status::success();
}

void rmsNorm(ThreadPool &pool, const float *x, const float *weight,
             int64_t rows, int64_t dim, double eps, float *out) {
  rmsNorm(pool, x, WeightView::f32(weight), rows, dim, eps, out);
}

void rmsNormRow(const float *in, const WeightView &weight, int64_t dim,
                double eps, float *out) {
  double sumSquares = 0.0;
  for (int64_t i = 0; i < dim; ++i)
    sumSquares += double(in[i]) * in[i];
  double inv = 1.0 / std::sqrt(sumSquares / double(dim) + eps);
  for (int64_t i = 0; i < dim; ++i)
    out[i] =
        static_cast<float>(in[i] * inv * (weight.data ? weight.at(i) : 1.0f));
}

void rmsNorm(ThreadPool &pool, const float *x, const WeightView &weight,
             int64_t rows, int64_t dim, double eps, float *out, int64_t xStride,
             int64_t outStride) {
  xStride = xStride ? xStride : dim;
  outStride = outStride ? outStride : dim;
  pool.parallelFor(rows, rowGrain(dim), [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r)
      rmsNormRow(x + r * xStride, weight, dim, eps, out + r * outStride);
  });
}

void addRmsNorm(ThreadPool &pool, const float *x, const float *residual,
                const WeightView &weight, int64_t rows, int64_t dim, double eps,
                float *sum, float *out) {
  pool.parallelFor(rows, rowGrain(dim), [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const float *a = x + r * dim, *b = residual + r * dim;
      float *s = sum + r * dim;
      for (int64_t i = 0; i < dim; ++i)
        s[i] = a[i] + b[i];
      rmsNormRow(s, weight, dim, eps, out + r * dim);
    }
  });
}

void layerNorm(ThreadPool &pool, const float *x, const float *weight,
               const float *bias, int64_t rows, int64_t dim, double eps,
               float *out) {
  layerNorm(pool, x, WeightView::f32(weight), WeightView::f32(bias), rows,
            dim, eps, out);
}

void layerNorm(ThreadPool &pool, const float *x, const WeightView &weight,
               const WeightView &bias, int64_t rows, int64_t dim, double eps,
               float *out, int64_t xStride, int64_t outStride) {
  xStride = xStride ? xStride : dim;
  outStride = outStride ? outStride : dim;
  pool.parallelFor(rows, rowGrain(dim), [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r)
      layerNormRow(x + r * xStride, weight, bias, dim, eps,
                   out + r * outStride);
  });
}

void layerNormRow(const float *in, const WeightView &weight,
                  const WeightView &bias, int64_t dim, double eps, float *out) {
  // Mean first, then the centred variance: no cancellation.
  double mean = 0.0;
  for (int64_t i = 0; i < dim; ++i)
    mean += in[i];
  mean /= double(dim);
  double variance = 0.0;
  for (int64_t i = 0; i < dim; ++i)
    variance += (in[i] - mean) * (in[i] - mean);
  double inv = 1.0 / std::sqrt(variance / double(dim) + eps);
  for (int64_t i = 0; i < dim; ++i)
    out[i] = static_cast<float>((in[i] - mean) * inv *
                                    (weight.data ? weight.at(i) : 1.0f) +
                                (bias.data ? bias.at(i) : 0.0f));
}

void ropeFrequencies(const RopeParams &p, double *freqs) {
  int64_t half = p.dim / 2;
  for (int64_t i = 0; i < half; ++i)
    freqs[i] = std::pow(p.theta, -2.0 * double(i) / double(p.dim));
  if (!p.yarn)
    return;
  double low, high;
  runtime::yarnRampEnds(p, low, high);
  for (int64_t i = 0; i < half; ++i) {
    // ramp 0 keeps the frequency, ramp 1 interpolates it by `factor`.
    double ramp = std::clamp((double(i) - low) / (high - low), 0.0, 1.0);
    freqs[i] = freqs[i] / p.factor * ramp + freqs[i] * (1.0 - ramp);
  }
}

void ropeAngles(double position, const double *freqs, const RopeParams &p,
                double *cosines, double *sines) {
  for (int64_t i = 0, half = p.dim / 2; i < half; ++i) {
    double angle = position * freqs[i];
    cosines[i] = std::cos(angle) * p.attentionFactor;
    sines[i] = std::sin(angle) * p.attentionFactor;
  }
}

void ropeRotate(const float *in, float *out, const double *cosines,
                const double *sines, const RopeParams &p) {
  const float *src = in + p.offset;
  float *row = out + p.offset;
  for (int64_t i = 0, half = p.dim / 2; i < half; ++i) {
    int64_t a = p.interleaved ? 2 * i : i;
    int64_t b = p.interleaved ? 2 * i + 1 : i + half;
    double xa = src[a], xb = src[b];
    row[a] = static_cast<float>(xa * cosines[i] - xb * sines[i]);
    row[b] = static_cast<float>(xb * cosines[i] + xa * sines[i]);
  }
}

void rope(ThreadPool &pool, float *x, const int32_t *positions, int64_t tokens,
          int64_t rowsPerToken, int64_t rowDim, const RopeParams &params) {
  runtime::RopeRows rows = runtime::RopeRows::dense(rowsPerToken, rowDim);
  rope(pool, x, rows, x, rows, positions, tokens, rowsPerToken, rowDim, params);
}

void rope(ThreadPool &pool, const float *x, runtime::RopeRows xRows, float *out,
          runtime::RopeRows outRows, const int32_t *positions, int64_t tokens,
          int64_t rowsPerToken, int64_t rowDim, const RopeParams &params) {
  int64_t half = params.dim / 2;
  ScratchFrame frame;
  double *freqs = frame.take<double>(half);
  ropeFrequencies(params, freqs);
  pool.parallelFor(
      tokens, rowGrain(rowsPerToken * params.dim),
      [&](int64_t begin, int64_t end) {
        ScratchFrame chunkFrame;
        double *cosines = chunkFrame.take<double>(half);
        double *sines = chunkFrame.take<double>(half);
        for (int64_t t = begin; t < end; ++t) {
          ropeAngles(double(positions[t]), freqs, params, cosines, sines);
          for (int64_t r = 0; r < rowsPerToken; ++r) {
            const float *in = x + t * xRows.token + r * xRows.row;
            float *o = out + t * outRows.token + r * outRows.row;
            if (o != in)
              std::memmove(o, in, rowDim * sizeof(float));
            ropeRotate(in, o, cosines, sines, params);
          }
        }
      });
}

void swiglu(ThreadPool &pool, const float *gate, const float *up, int64_t n,
            double alpha, bool hasLimit, double limit, double upOffset,
            float *out) {
  pool.parallelFor(n, kElementGrain, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      double g = gate[i], u = up[i];
      if (hasLimit) {
        // gpt-oss clamps the gate from above only, the linear half both ways.
        g = std::min(g, limit);
        u = std::clamp(u, -limit, limit);
      }
      out[i] = static_cast<float>(g * sigmoid(alpha * g) * (u + upOffset));
    }
  });
}

void add(ThreadPool &pool, const float *a, const float *b, int64_t n,
         float *out) {
  pool.parallelFor(n, kElementGrain, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i)
      out[i] = a[i] + b[i];
  });
}

namespace {

/// Orders candidates by descending score, ties (and NaN, which ranks below
/// every number) to the lower index: a total order, so top-k is unique.
struct ScoreOrder {
  const double *scores;
  double key(int64_t i) const {
    return std::isnan(scores[i]) ? -std::numeric_limits<double>::infinity()
                                 : scores[i];
  }
  bool operator()(int64_t a, int64_t b) const {
    double ka = key(a), kb = key(b);
    return ka != kb ? ka > kb : a < b;
  }
};

/// A token's shared-expert slots after its top_k: the experts stacked
/// after the `experts` routed ones, weight 1.
void writeSharedSlots(const RouteParams &p, int64_t experts, int32_t *indices,
                      float *weights) {
  for (int64_t s = 0; s < p.sharedExperts; ++s) {
    indices[p.topK + s] = static_cast<int32_t>(experts + s);
    weights[p.topK + s] = 1.0f;
  }
}

} // namespace

void moeRouteSigmoid(ThreadPool &pool, const float *logits, const float *bias,
                     int64_t tokens, int64_t experts, const RouteParams &p,
                     int32_t *indices, float *weights) {
  const int64_t stride = p.topK + p.sharedExperts;
  bool grouped = p.numGroups > 1 && p.topKGroups < p.numGroups;
  int64_t groupCount = grouped ? p.numGroups : 0;
  int64_t groupSize = grouped ? experts / p.numGroups : 0;
  pool.parallelFor(tokens, 4, [&](int64_t begin, int64_t end) {
    ScratchFrame frame;
    double *scores = frame.take<double>(experts);
    double *select = frame.take<double>(experts);
    int64_t *candidates = frame.take<int64_t>(experts);
    int64_t *groups = frame.take<int64_t>(groupCount);
    int64_t *members = frame.take<int64_t>(groupSize);
    double *groupScores = frame.take<double>(groupCount);
    for (int64_t t = begin; t < end; ++t) {
      const float *row = logits + t * experts;
      for (int64_t e = 0; e < experts; ++e) {
        scores[e] = sigmoid(row[e]);
        select[e] = scores[e] + (bias ? bias[e] : 0.0f);
      }
      ScoreOrder bySelect{select};
      int64_t eligible = 0;
      if (!grouped) {
        std::iota(candidates, candidates + experts, 0);
        eligible = experts;
      } else {
        // Group score: the sum of the group's two best selection scores.
        std::fill(groupScores, groupScores + groupCount, 0.0);
        for (int64_t g = 0; g < groupCount; ++g) {
          std::iota(members, members + groupSize, g * groupSize);
          int64_t best = std::min<int64_t>(2, groupSize);
          std::partial_sort(members, members + best, members + groupSize,
                            bySelect);
          for (int64_t i = 0; i < best; ++i)
            groupScores[g] += select[members[i]];
        }
        std::iota(groups, groups + groupCount, 0);
        int64_t keep = std::clamp<int64_t>(p.topKGroups, 0, groupCount);
        std::partial_sort(groups, groups + keep, groups + groupCount,
                          ScoreOrder{groupScores});
        for (int64_t i = 0; i < keep; ++i)
          for (int64_t e = groups[i] * groupSize;
               e < (groups[i] + 1) * groupSize; ++e)
            candidates[eligible++] = e;
      }
      int64_t picked = std::clamp<int64_t>(p.topK, 0, eligible);
      std::partial_sort(candidates, candidates + picked, candidates + eligible,
                        bySelect);
      double sum = 0.0;
      for (int64_t i = 0; i < picked; ++i)
        sum += scores[candidates[i]];
      for (int64_t i = 0; i < p.topK; ++i) {
        if (i >= picked) { // fewer eligible experts than topK
          indices[t * stride + i] = -1;
          weights[t * stride + i] = 0.0f;
          continue;
        }
        // As HF: + 1e-20 keeps an all-zero row finite.
        double weight = scores[candidates[i]];
        if (p.renormalize)
          weight /= sum + 1e-20;
        indices[t * stride + i] = static_cast<int32_t>(candidates[i]);
        weights[t * stride + i] = static_cast<float>(weight * p.scalingFactor);
      }
      writeSharedSlots(p, experts, indices + t * stride, weights + t * stride);
    }
  });
}

void moeRouteSoftmaxTopK(ThreadPool &pool, const float *logits,
                         const float *bias, int64_t tokens, int64_t experts,
                         const RouteParams &p, int32_t *indices,
                         float *weights) {
  const int64_t stride = p.topK + p.sharedExperts;
  pool.parallelFor(tokens, 4, [&](int64_t begin, int64_t end) {
    ScratchFrame frame;
    double *select = frame.take<double>(experts);
    int64_t *candidates = frame.take<int64_t>(experts);
    for (int64_t t = begin; t < end; ++t) {
      const float *row = logits + t * experts;
      for (int64_t e = 0; e < experts; ++e)
        select[e] = double(row[e]) + (bias ? bias[e] : 0.0f);
      std::iota(candidates, candidates + experts, 0);
      int64_t picked = std::clamp<int64_t>(p.topK, 0, experts);
      std::partial_sort(candidates, candidates + picked, candidates + experts,
                        ScoreOrder{select});
      // The softmax is over the picked experts' unbiased logits; its maximum
      // skips NaN as the reference's std::max does (NaN weights follow).
      double best = -std::numeric_limits<double>::infinity();
      for (int64_t i = 0; i < picked; ++i)
        best = std::max(best, double(row[candidates[i]]));
      double sum = 0.0;
      for (int64_t i = 0; i < picked; ++i)
        sum += std::exp(double(row[candidates[i]]) - best);
      for (int64_t i = 0; i < p.topK; ++i) {
        bool used = i < picked; // fewer experts than topK: -1 slots
        indices[t * stride + i] =
            used ? static_cast<int32_t>(candidates[i]) : -1;
        weights[t * stride + i] =
            used ? static_cast<float>(
                       std::exp(double(row[candidates[i]]) - best) / sum *
                       p.scalingFactor)
                 : 0.0f;
      }
      writeSharedSlots(p, experts, indices + t * stride, weights + t * stride);
    }
  });
}

void copyColumns(ThreadPool &pool, const float *src, int64_t srcStride,
                 int64_t srcOffset, float *dst, int64_t dstStride,
                 int64_t dstOffset, int64_t rows, int64_t cols) {
  pool.parallelFor(rows, rowGrain(cols), [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r)
      std::memmove(dst + r * dstStride + dstOffset,
                   src + r * srcStride + srcOffset, cols * sizeof(float));
  });
}

void causalBounds(const int32_t *positions, int64_t tokens, int32_t *bounds) {
  for (int64_t t = 0; t < tokens; ++t)
    bounds[t] = positions[t] + 1;
}

void localExperts(const int32_t *ids, int64_t n, int64_t first, int64_t count,
                  int32_t *out) {
  for (int64_t i = 0; i < n; ++i)
    out[i] = ids[i] >= first && ids[i] < first + count ? int32_t(ids[i] - first)
                                                       : -1;
}

} // namespace daybreak::cpu
