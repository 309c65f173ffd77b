//===- CpuAttention.cpp - Dense GQA, DSA indexer, top-k, sparse MLA -------===//
//
// The kernels that read caches: each job decodes the cache rows it needs into
// fp32 scratch and runs the GEMM core on them (queries x keys, then
// probabilities x values). Jobs are fixed tiles of tokens x keys or tokens x
// heads, so results do not depend on the thread count. Scratch is sized by
// the shapes (Scratch.h), never by the data (bounds, selected rows).
//
//===----------------------------------------------------------------------===//

#include "runtime/devices/cpu/CpuGemm.h"
#include "runtime/devices/cpu/CpuKernels.h"
#include "runtime/numerics/Numerics.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <string>

namespace daybreak::cpu {

namespace {

Status checkSequences(const int32_t *sequences, int64_t tokens, int64_t batch,
                      const char *kernel) {
  if (!sequences)
    return batch >= 1 ? Status::success()
                      : Status::error(std::string(kernel) + ": empty batch");
  for (int64_t t = 0; t < tokens; ++t)
    if (sequences[t] < 0 || sequences[t] >= batch)
      return Status::error(std::string(kernel) + ": sequence " +
                           std::to_string(sequences[t]) + " of token " +
                           std::to_string(t) + " is outside the batch [0, " +
                           std::to_string(batch) + ")");
  return Status::success();
}

// Tokens and keys per indexer job.
constexpr int64_t kIndexerTokens = 8, kIndexerKeys = 128;

// Dense attention: query rows (tokens x the query heads of one KV head) per
// job, and keys decoded per chunk of its online softmax.
constexpr int64_t kAttentionRows = 64, kAttentionKeys = 64;

} // namespace

Status dsaIndexerScores(ThreadPool &pool, const float *q, const float *weights,
                        const CacheView &keys, const int32_t *sequences,
                        const int32_t *bounds, int64_t tokens, int64_t heads,
                        double scale, float *scores,
                        numerics::OperandRounding roundQ,
                        const QueryRope *queryRope) {
  if (Status status =
          checkSequences(sequences, tokens, keys.batch, "dsaIndexerScores");
      !status.ok())
    return status;
  int64_t dim = keys.width, keyCount = keys.maxSeqLen;
  // The queries as scored: rotated by the prologue, then rounded as the
  // tensor cores take them (in scratch: a step allocates nothing).
  const bool rounds = roundQ && runtime::indexerTensorCoresApply(
                                    keys.format, keys.width, keys.tailDim,
                                    keys.scaleBlock, heads);
  ScratchFrame stagedFrame;
  const int64_t values = tokens * heads * dim;
  float *staged =
      queryRope || rounds ? stagedFrame.take<float>(values) : nullptr;
  if (queryRope) {
    std::copy_n(q, values, staged);
    rope(pool, staged, queryRope->positions, tokens, heads, dim,
         queryRope->params);
    q = staged;
  }
  if (rounds) {
    for (int64_t i = 0; i < values; ++i)
      staged[i] = roundQ(q[i], uint64_t(i));
    q = staged;
  }
  int64_t tokenJobs = (tokens + kIndexerTokens - 1) / kIndexerTokens;
  int64_t keyJobs = (keyCount + kIndexerKeys - 1) / kIndexerKeys;
  pool.parallelFor(tokenJobs * keyJobs, 1, [&](int64_t begin, int64_t end) {
    ScratchFrame frame;
    float *decoded = frame.take<float>(kIndexerKeys * dim);
    float *logits = frame.take<float>(kIndexerTokens * heads * kIndexerKeys);
    for (int64_t job = begin; job < end; ++job) {
      int64_t t0 = (job / keyJobs) * kIndexerTokens;
      int64_t t1 = std::min(tokens, t0 + kIndexerTokens);
      int64_t s0 = (job % keyJobs) * kIndexerKeys;
      int64_t count = std::min(kIndexerKeys, keyCount - s0);
      // Keys of this block token t sees: all, or those below its bound.
      auto visible = [&](int64_t t) {
        return bounds ? std::clamp<int64_t>(bounds[t] - s0, 0, count) : count;
      };
      int64_t decodedSeq = -1, decodedRows = 0;
      // Runs of tokens of one sequence share the decoded keys and one GEMM,
      // over the keys the run's furthest token sees.
      for (int64_t ta = t0; ta < t1;) {
        int64_t seq = sequences ? sequences[ta] : 0;
        int64_t tb = ta + 1, rows = visible(ta);
        while (tb < t1 && (sequences ? sequences[tb] : 0) == seq)
          rows = std::max(rows, visible(tb++));
        if (seq != decodedSeq) {
          decodedSeq = seq;
          decodedRows = 0;
        }
        for (; decodedRows < rows; ++decodedRows)
          keys.read(seq, s0 + decodedRows, decoded + decodedRows * dim);
        // logits[(t, h), s] = q[t, h] . key[s]
        if (rows > 0)
          detail::gemm(q + ta * heads * dim, dim, decoded, dim, false, nullptr,
                       logits, count, (tb - ta) * heads, 0, rows, dim);
        for (int64_t t = ta; t < tb; ++t) {
          const float *w = weights + t * heads;
          float *out = scores + t * keyCount + s0;
          int64_t seen = visible(t);
          std::fill(out + seen, out + count, 0.0f);
          for (int64_t s = 0; s < seen; ++s) {
            double sum = 0.0;
            for (int64_t h = 0; h < heads; ++h)
              sum += double(w[h]) *
                     std::max(logits[((t - ta) * heads + h) * count + s], 0.0f);
            out[s] = static_cast<float>(scale * sum);
          }
        }
        ta = tb;
      }
    }
  });
  return Status::success();
}

void dsaIndexSelect(ThreadPool &pool, const float *scores,
                    const int32_t *bounds, int64_t tokens, int64_t keys,
                    int64_t topK, int32_t *indices) {
  pool.parallelFor(tokens, 1, [&](int64_t begin, int64_t end) {
    ScratchFrame frame;
    int32_t *candidates = frame.take<int32_t>(keys); // bound <= keys
    for (int64_t t = begin; t < end; ++t) {
      const float *row = scores + t * keys;
      int64_t bound = std::clamp<int64_t>(bounds[t], 0, keys);
      int64_t picked = std::min(topK, bound);
      std::iota(candidates, candidates + bound, 0);
      // Descending score, ties (and NaN, below every number) to the lower
      // index: a total order, so the selection is unique.
      auto key = [&](int32_t i) {
        return std::isnan(row[i]) ? -std::numeric_limits<float>::infinity()
                                  : row[i];
      };
      auto better = [&](int32_t a, int32_t b) {
        float ka = key(a), kb = key(b);
        return ka != kb ? ka > kb : a < b;
      };
      if (picked < bound)
        std::nth_element(candidates, candidates + picked, candidates + bound,
                         better);
      // The set, in ascending key order.
      std::sort(candidates, candidates + picked);
      int32_t *out = indices + t * topK;
      std::copy(candidates, candidates + picked, out);
      std::fill(out + picked, out + topK, -1);
    }
  });
}

Status sparseAttention(ThreadPool &pool, const float *q, const CacheView &kv,
                       const int32_t *indices, int64_t topK,
                       const int32_t *sequences, int64_t tokens, int64_t heads,
                       double scale, int64_t valueDim, const float *sinks,
                       float *out, numerics::OperandRounding rounding) {
  if (Status status =
          checkSequences(sequences, tokens, kv.batch, "sparseAttention");
      !status.ok())
    return status;
  for (int64_t i = 0; i < tokens * topK; ++i)
    if (indices[i] < -1 || indices[i] >= kv.maxSeqLen)
      return Status::error("sparseAttention: index " +
                           std::to_string(indices[i]) + " at query " +
                           std::to_string(i / topK) + ", slot " +
                           std::to_string(i % topK) + " is outside [-1, " +
                           std::to_string(kv.maxSeqLen) + ")");
  int64_t width = kv.width;
  // With few tokens (decode), split heads too so every thread has work; the
  // cost is decoding the token's rows once per head block. The split depends
  // on the shape only, never on the thread count (determinism).
  int64_t headBlock = tokens >= 16 ? heads : std::min<int64_t>(heads, 16);
  if (headBlock <= 0)
    return Status::success();
  int64_t headBlocks = (heads + headBlock - 1) / headBlock;
  numerics::OperandRounding probabilityRounding = rounding.site(1);
  pool.parallelFor(tokens * headBlocks, 1, [&](int64_t begin, int64_t end) {
    // n <= topK selected rows; hn <= headBlock heads.
    ScratchFrame frame;
    float *rows = frame.take<float>(topK * width);
    float *probs = frame.take<float>(headBlock * topK);
    float *rounded = rounding ? frame.take<float>(headBlock * width) : nullptr;
    double *inverse = frame.take<double>(headBlock);
    for (int64_t job = begin; job < end; ++job) {
      int64_t t = job / headBlocks;
      int64_t h0 = (job % headBlocks) * headBlock;
      int64_t hn = std::min(headBlock, heads - h0);
      int64_t seq = sequences ? sequences[t] : 0;
      const int32_t *chosen = indices + t * topK;
      int64_t n = 0;
      for (int64_t i = 0; i < topK; ++i)
        if (chosen[i] >= 0)
          kv.read(seq, chosen[i], rows + n++ * width);
      float *o = out + (t * heads + h0) * valueDim;
      if (n == 0) {
        std::fill(o, o + hn * valueDim, 0.0f);
        continue;
      }
      // logits[h, i] = q[t, h] . row[i]
      const float *qt = q + (t * heads + h0) * width;
      if (rounding) {
        uint64_t first = uint64_t(t * heads + h0) * width;
        for (int64_t i = 0; i < hn * width; ++i)
          rounded[i] = rounding(qt[i], first + i);
        qt = rounded;
      }
      detail::gemm(qt, width, rows, width, false, nullptr, probs, n, hn, 0, n,
                   width);
      for (int64_t h = 0; h < hn; ++h) {
        float *p = probs + h * n;
        double maxLogit = sinks ? double(sinks[h0 + h])
                                : -std::numeric_limits<double>::infinity();
        for (int64_t i = 0; i < n; ++i)
          maxLogit = std::max(maxLogit, scale * p[i]);
        double denominator = sinks ? std::exp(sinks[h0 + h] - maxLogit) : 0.0;
        for (int64_t i = 0; i < n; ++i) {
          double e = std::exp(scale * p[i] - maxLogit);
          if (rounding)
            e = probabilityRounding(float(e),
                                    uint64_t((t * heads + h0 + h) * topK + i));
          denominator += e;
          p[i] = static_cast<float>(e);
        }
        inverse[h] = 1.0 / denominator;
      }
      // out[h, :] = probs[h, :] x V, V the first valueDim columns of rows.
      detail::gemm(probs, n, rows, width, /*wIsKN=*/true, nullptr, o, valueDim,
                   hn, 0, valueDim, n);
      for (int64_t h = 0; h < hn; ++h)
        for (int64_t d = 0; d < valueDim; ++d)
          o[h * valueDim + d] =
              static_cast<float>(o[h * valueDim + d] * inverse[h]);
    }
  });
  return Status::success();
}

Status attention(ThreadPool &pool, const float *q, const CacheView &k,
                 const CacheView &v, const int32_t *positions,
                 const int32_t *sequences, const float *sinks, int64_t tokens,
                 int64_t heads, int64_t kvHeads, double scale, int64_t window,
                 float *out) {
  if (kvHeads <= 0 || heads % kvHeads != 0 || k.width % kvHeads != 0 ||
      v.width % kvHeads != 0)
    return Status::error("attention: " + std::to_string(heads) +
                         " query heads, K and V rows of " +
                         std::to_string(k.width) + " and " +
                         std::to_string(v.width) +
                         " values do not split into " +
                         std::to_string(kvHeads) + " KV heads");
  if (Status status = checkSequences(sequences, tokens,
                                     std::min(k.batch, v.batch), "attention");
      !status.ok())
    return status;
  int64_t maxSeqLen = std::min(k.maxSeqLen, v.maxSeqLen);
  for (int64_t t = 0; t < tokens; ++t)
    if (positions[t] < 0 || positions[t] >= maxSeqLen)
      return Status::error("attention: position " +
                           std::to_string(positions[t]) + " of token " +
                           std::to_string(t) + " is outside [0, " +
                           std::to_string(maxSeqLen) + ")");
  for (const CacheView *c : {&k, &v})
    DAYBREAK_RETURN_IF_ERROR(runtime::checkAttentionRing(*c, window, tokens));
  int64_t group = heads / kvHeads, headDim = k.width / kvHeads,
          valueDim = v.width / kvHeads;
  // Jobs are fixed tiles of tokens x one KV head (its group of query heads
  // shares the decoded keys and values), cut by the shapes only.
  int64_t blockTokens = std::max<int64_t>(1, kAttentionRows / group);
  int64_t blockRows = blockTokens * group;
  int64_t tokenBlocks = (tokens + blockTokens - 1) / blockTokens;
  pool.parallelFor(tokenBlocks * kvHeads, 1, [&](int64_t begin, int64_t end) {
    ScratchFrame frame;
    float *qs = frame.take<float>(blockRows * headDim);
    float *keys = frame.take<float>(kAttentionKeys * headDim);
    float *values = frame.take<float>(kAttentionKeys * valueDim);
    float *probs = frame.take<float>(blockRows * kAttentionKeys);
    float *part = frame.take<float>(blockRows * valueDim);
    float *acc = frame.take<float>(blockRows * valueDim);
    double *runMax = frame.take<double>(blockRows);
    double *runSum = frame.take<double>(blockRows);
    int64_t *first = frame.take<int64_t>(blockTokens);
    for (int64_t job = begin; job < end; ++job) {
      int64_t g = job % kvHeads;
      int64_t t0 = (job / kvHeads) * blockTokens;
      int64_t t1 = std::min(tokens, t0 + blockTokens);
      // Runs of tokens of one sequence share each decoded chunk of keys.
      for (int64_t ta = t0; ta < t1;) {
        int64_t seq = sequences ? sequences[ta] : 0;
        int64_t tb = ta + 1;
        while (tb < t1 && (sequences ? sequences[tb] : 0) == seq)
          ++tb;
        int64_t rows = (tb - ta) * group;
        int64_t lo = std::numeric_limits<int64_t>::max(), hi = -1;
        for (int64_t t = ta; t < tb; ++t) {
          int64_t p = positions[t];
          first[t - ta] = window > 0 ? std::max<int64_t>(0, p - window + 1) : 0;
          lo = std::min(lo, first[t - ta]);
          hi = std::max(hi, p);
          std::copy_n(q + (t * heads + g * group) * headDim, group * headDim,
                      qs + (t - ta) * group * headDim);
        }
        std::fill(runMax, runMax + rows,
                  -std::numeric_limits<double>::infinity());
        std::fill(runSum, runSum + rows, 0.0);
        std::fill(acc, acc + rows * valueDim, 0.0f);
        for (int64_t c0 = lo; c0 <= hi; c0 += kAttentionKeys) {
          int64_t n = std::min(kAttentionKeys, hi + 1 - c0);
          for (int64_t i = 0; i < n; ++i) {
            k.readColumns(seq, c0 + i, g * headDim, headDim,
                          keys + i * headDim);
            v.readColumns(seq, c0 + i, g * valueDim, valueDim,
                          values + i * valueDim);
          }
          // probs[r, i] = q[r] . key[i], then the online softmax's update.
          detail::gemm(qs, headDim, keys, headDim, false, nullptr, probs, n,
                       rows, 0, n, headDim);
          for (int64_t r = 0; r < rows; ++r) {
            int64_t u = r / group;
            int64_t i0 = std::max<int64_t>(first[u] - c0, 0);
            int64_t i1 = std::min<int64_t>(positions[ta + u] + 1 - c0, n);
            float *p = probs + r * n;
            double m = runMax[r];
            for (int64_t i = i0; i < i1; ++i)
              m = std::max(m, scale * p[i]);
            double correction = m == runMax[r] ? 1.0 : std::exp(runMax[r] - m);
            double sum = runSum[r] * correction;
            for (int64_t i = 0; i < n; ++i) {
              double e = i >= i0 && i < i1 ? std::exp(scale * p[i] - m) : 0.0;
              sum += e;
              p[i] = static_cast<float>(e);
            }
            runMax[r] = m;
            runSum[r] = sum;
            if (correction != 1.0)
              for (int64_t d = 0; d < valueDim; ++d)
                acc[r * valueDim + d] = static_cast<float>(
                    acc[r * valueDim + d] * correction);
          }
          // acc += probs x V
          detail::gemm(probs, n, values, valueDim, /*wIsKN=*/true, nullptr,
                       part, valueDim, rows, 0, valueDim, n);
          for (int64_t e = 0; e < rows * valueDim; ++e)
            acc[e] += part[e];
        }
        for (int64_t r = 0; r < rows; ++r) {
          int64_t t = ta + r / group, h = g * group + r % group;
          float *o = out + (t * heads + h) * valueDim;
          if (runSum[r] == 0.0) { // no visible key
            std::fill(o, o + valueDim, 0.0f);
            continue;
          }
          // The sink joins the maximum and the denominator, not the values.
          double m = sinks ? std::max(runMax[r], double(sinks[h])) : runMax[r];
          double keep = std::exp(runMax[r] - m);
          double denominator =
              runSum[r] * keep + (sinks ? std::exp(sinks[h] - m) : 0.0);
          double factor = keep / denominator;
          for (int64_t d = 0; d < valueDim; ++d)
            o[d] = static_cast<float>(acc[r * valueDim + d] * factor);
        }
        ta = tb;
      }
    }
  });
  return Status::success();
}

} // namespace daybreak::cpu
