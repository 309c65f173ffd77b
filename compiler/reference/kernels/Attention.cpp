//===- Attention.cpp - Reference dense and index-sparse attention ---------===//

#include "compiler/reference/Kernels.h"
#include "compiler/reference/kernels/KernelUtils.h"

#include <algorithm>
#include <cmath>
#include <optional>

namespace daybreak::ref {

using namespace detail;

namespace {

double dot(const float *a, const float *b, int64_t n) {
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i)
    sum += static_cast<double>(a[i]) * b[i];
  return sum;
}

/// out = sum_i softmax(logits)_i * values[i], where an optional sink logit
/// joins the denominator only. No keys give zeros.
void attendRow(const std::vector<double> &logits,
               const std::vector<const float *> &values, int64_t valueDim,
               std::optional<double> sink, float *out) {
  if (logits.empty()) {
    std::fill(out, out + valueDim, 0.0f);
    return;
  }
  double maxLogit = sink ? *sink : logits[0];
  for (double logit : logits)
    maxLogit = std::max(maxLogit, logit);
  double denominator = sink ? std::exp(*sink - maxLogit) : 0.0;
  std::vector<double> acc(valueDim, 0.0);
  for (size_t i = 0; i < logits.size(); ++i) {
    double p = std::exp(logits[i] - maxLogit);
    denominator += p;
    for (int64_t d = 0; d < valueDim; ++d)
      acc[d] += p * values[i][d];
  }
  for (int64_t d = 0; d < valueDim; ++d)
    out[d] = static_cast<float>(acc[d] / denominator);
}

bool maskAllows(const AttentionParams &params, int64_t qPos, int64_t kPos) {
  switch (params.mask) {
  case MaskKind::Causal:
    return kPos <= qPos;
  case MaskKind::SlidingWindow:
    return qPos - params.window < kPos && kPos <= qPos;
  case MaskKind::Bidirectional:
    return true;
  }
  return false;
}

} // namespace

Tensor attention(const Tensor &q, const Tensor &k, const Tensor &v,
                 const AttentionParams &params, const Tensor &sinks,
                 const Tensor &qPositions, const Tensor &kPositions,
                 const Tensor &qSegments, const Tensor &kSegments) {
  int64_t tokens = q.dim(0), qHeads = q.dim(1), qkDim = q.dim(2);
  int64_t keys = k.dim(0), kvHeads = k.dim(1), valueDim = v.dim(2);
  int64_t group = qHeads / kvHeads;
  bool segmented = !qSegments.empty() && !kSegments.empty();
  Tensor out = Tensor::zeros(ElementType::F32, {tokens, qHeads, valueDim});

  std::vector<double> logits;
  std::vector<const float *> values;
  for (int64_t t = 0; t < tokens; ++t) {
    int64_t qPos =
        qPositions.empty() ? keys - tokens + t : intAt(qPositions, t);
    for (int64_t h = 0; h < qHeads; ++h) {
      int64_t kvHead = h / group;
      const float *query = q.floats().data() + (t * qHeads + h) * qkDim;
      logits.clear();
      values.clear();
      for (int64_t s = 0; s < keys; ++s) {
        int64_t kPos = kPositions.empty() ? s : intAt(kPositions, s);
        if (!maskAllows(params, qPos, kPos))
          continue;
        if (segmented && intAt(qSegments, t) != intAt(kSegments, s))
          continue;
        const float *key = k.floats().data() + (s * kvHeads + kvHead) * qkDim;
        logits.push_back(params.scale * dot(query, key, qkDim));
        values.push_back(v.floats().data() + (s * kvHeads + kvHead) * valueDim);
      }
      std::optional<double> sink;
      if (!sinks.empty())
        sink = sinks.floats()[h];
      attendRow(logits, values, valueDim, sink,
                out.floats().data() + (t * qHeads + h) * valueDim);
    }
  }
  return out;
}

llvm::Expected<Tensor> cachedAttention(const Tensor &q, const Tensor &k,
                                       const Tensor &v,
                                       const AttentionParams &params,
                                       const Tensor &sinks,
                                       const Tensor &qPositions,
                                       const Tensor &qSequences) {
  int64_t tokens = q.dim(0), qHeads = q.dim(1), qkDim = q.dim(2);
  int64_t batches = k.dim(0), keys = k.dim(1), kvHeads = k.dim(2);
  int64_t valueDim = v.dim(3);
  int64_t group = qHeads / kvHeads;
  if (llvm::Error err =
          detail::checkSequences(qSequences, batches, "cachedAttention"))
    return std::move(err);
  Tensor out = Tensor::zeros(ElementType::F32, {tokens, qHeads, valueDim});

  std::vector<double> logits;
  std::vector<const float *> values;
  for (int64_t t = 0; t < tokens; ++t) {
    int64_t qPos = intAt(qPositions, t), row = intAt(qSequences, t);
    for (int64_t h = 0; h < qHeads; ++h) {
      int64_t kvHead = h / group;
      const float *query = q.floats().data() + (t * qHeads + h) * qkDim;
      logits.clear();
      values.clear();
      for (int64_t s = 0; s < keys; ++s) {
        if (!maskAllows(params, qPos, s))
          continue;
        int64_t at = (row * keys + s) * kvHeads + kvHead;
        logits.push_back(params.scale *
                         dot(query, k.floats().data() + at * qkDim, qkDim));
        values.push_back(v.floats().data() + at * valueDim);
      }
      std::optional<double> sink;
      if (!sinks.empty())
        sink = sinks.floats()[h];
      attendRow(logits, values, valueDim, sink,
                out.floats().data() + (t * qHeads + h) * valueDim);
    }
  }
  return out;
}

llvm::Expected<Tensor> sparseAttention(const Tensor &q, const Tensor &kv,
                                       const Tensor &indices, double scale,
                                       int64_t valueDim, const Tensor &sinks,
                                       const Tensor &sequences) {
  int64_t tokens = q.dim(0), heads = q.dim(1), qkDim = q.dim(2);
  int64_t keys = kv.dim(-2), kvWidth = kv.dim(-1);
  int64_t topK = indices.dim(1);
  if (llvm::Error err = detail::checkSlotIndices(
          indices, keys, "sparseAttention: index", "query"))
    return std::move(err);
  bool batched = !sequences.empty();
  if (batched)
    if (llvm::Error err =
            detail::checkSequences(sequences, kv.dim(0), "sparseAttention"))
      return std::move(err);

  Tensor out = Tensor::zeros(ElementType::F32, {tokens, heads, valueDim});
  std::vector<double> logits;
  std::vector<const float *> values;
  for (int64_t t = 0; t < tokens; ++t) {
    for (int64_t h = 0; h < heads; ++h) {
      const float *query = q.floats().data() + (t * heads + h) * qkDim;
      logits.clear();
      values.clear();
      // A repeated index counts once per occurrence, as a gather kernel
      // would; top-k never produces one.
      for (int64_t i = 0; i < topK; ++i) {
        int64_t index = intAt(indices, t * topK + i);
        if (index < 0)
          continue;
        int64_t seq = batched ? intAt(sequences, t) : 0;
        const float *row = kv.floats().data() + (seq * keys + index) * kvWidth;
        logits.push_back(scale * dot(query, row, qkDim));
        values.push_back(row); // V is the leading valueDim columns of kv
      }
      std::optional<double> sink;
      if (!sinks.empty())
        sink = sinks.floats()[h];
      attendRow(logits, values, valueDim, sink,
                out.floats().data() + (t * heads + h) * valueDim);
    }
  }
  return out;
}

} // namespace daybreak::ref
