//===- Dsa.cpp - Reference DSA lightning-indexer scores and top-k ---------===//

#include "compiler/reference/Kernels.h"
#include "compiler/reference/kernels/KernelUtils.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

namespace daybreak::ref {

using namespace detail;

Tensor dsaIndexerScores(const Tensor &q, const Tensor &k, const Tensor &weights,
                        double scale) {
  return llvm::cantFail(dsaIndexerScores(q, k, weights, Tensor(), scale));
}

llvm::Expected<Tensor> dsaIndexerScores(const Tensor &q, const Tensor &k,
                                        const Tensor &weights,
                                        const Tensor &sequences, double scale,
                                        const Tensor &bounds) {
  int64_t tokens = q.dim(0), heads = q.dim(1), dim = q.dim(2);
  int64_t keys = k.dim(-2);
  bool batched = !sequences.empty();
  if (batched)
    if (llvm::Error err =
            checkSequences(sequences, k.dim(0), "dsaIndexerScores"))
      return std::move(err);
  Tensor scores = Tensor::zeros(ElementType::F32, {tokens, keys});
  for (int64_t t = 0; t < tokens; ++t) {
    int64_t visible =
        bounds.empty() ? keys : std::clamp<int64_t>(intAt(bounds, t), 0, keys);
    for (int64_t s = 0; s < visible; ++s) {
      int64_t seq = batched ? intAt(sequences, t) : 0;
      const float *key = k.floats().data() + (seq * keys + s) * dim;
      double sum = 0.0;
      for (int64_t h = 0; h < heads; ++h) {
        const float *query = q.floats().data() + (t * heads + h) * dim;
        double logit = 0.0;
        for (int64_t d = 0; d < dim; ++d)
          logit += static_cast<double>(query[d]) * key[d];
        sum += weights.floats()[t * heads + h] * std::max(logit, 0.0);
      }
      scores.floats()[t * keys + s] = static_cast<float>(scale * sum);
    }
  }
  return scores;
}

Tensor dsaIndexSelect(const Tensor &scores, const Tensor &bounds,
                      int64_t topK) {
  int64_t tokens = scores.dim(0), keys = scores.dim(1);
  Tensor indices = Tensor::zeros(ElementType::I32, {tokens, topK});
  std::vector<double> row(keys);
  for (int64_t t = 0; t < tokens; ++t) {
    for (int64_t s = 0; s < keys; ++s)
      row[s] = scores.floats()[t * keys + s];
    int64_t bound = std::clamp<int64_t>(intAt(bounds, t), 0, keys);
    std::vector<int64_t> candidates(bound);
    std::iota(candidates.begin(), candidates.end(), 0);
    std::vector<int64_t> chosen = selectTopK(row, candidates, topK);
    std::sort(chosen.begin(), chosen.end()); // the set, in key order
    for (int64_t i = 0; i < topK; ++i)
      indices.ints()[t * topK + i] =
          i < static_cast<int64_t>(chosen.size()) ? chosen[i] : -1;
  }
  return indices;
}

llvm::Expected<KpoolResult> dsaKpool(const Tensor &keys, const Tensor &gate,
                                     const Tensor &ape, const Tensor &state,
                                     const Tensor &positions,
                                     const Tensor &sequences) {
  auto fail = [](const llvm::Twine &message) {
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "dsa_kpool: " + message);
  };
  int64_t tokens = keys.dim(0), width = keys.dim(1), pool = ape.dim(0);
  int64_t slots = state.dim(0), tailRows = state.dim(1);
  if (llvm::Error err = checkSequences(sequences, slots, "dsa_kpool"))
    return std::move(err);
  KpoolResult result;
  result.output = Tensor::zeros(ElementType::F32, {tokens, width});
  result.state = state.castTo(ElementType::F32);
  std::vector<std::vector<int64_t>> bySlot(slots);
  for (int64_t t = 0; t < tokens; ++t)
    bySlot[intAt(sequences, t)].push_back(t);
  for (int64_t b = 0; b < slots; ++b) {
    const std::vector<int64_t> &mine = bySlot[b];
    if (mine.empty())
      continue;
    int64_t first = intAt(positions, mine.front());
    int64_t last = first + static_cast<int64_t>(mine.size()) - 1;
    for (size_t i = 0; i < mine.size(); ++i)
      if (intAt(positions, mine[i]) != first + static_cast<int64_t>(i))
        return fail("the tokens of sequence " + llvm::Twine(b) +
                    " do not have consecutive positions (token " +
                    llvm::Twine(mine[i]) + " is at " +
                    llvm::Twine(intAt(positions, mine[i])) + ")");
    if (first < 0)
      return fail("negative position " + llvm::Twine(first));
    // [key | gate] of every position from the start of `first`'s pool.
    int64_t base = first / pool * pool;
    std::vector<std::vector<double>> rows(last - base + 1,
                                          std::vector<double>(2 * width));
    const float *tail = state.floats().data() + b * tailRows * 2 * width;
    for (int64_t m = base; m < first; ++m)
      for (int64_t c = 0; c < 2 * width; ++c)
        rows[m - base][c] = tail[(m % pool) * 2 * width + c];
    for (int64_t m = first; m <= last; ++m) {
      int64_t t = mine[m - first];
      for (int64_t c = 0; c < width; ++c) {
        rows[m - base][c] = keys.floats()[t * width + c];
        rows[m - base][width + c] = gate.floats()[t * width + c];
      }
    }
    // Each token's pool over the members known at the end of the step.
    for (int64_t t : mine) {
      int64_t start = intAt(positions, t) / pool * pool;
      int64_t end = std::min(start + pool - 1, last);
      for (int64_t c = 0; c < width; ++c) {
        double top = -std::numeric_limits<double>::infinity();
        for (int64_t m = start; m <= end; ++m)
          top = std::max(top, rows[m - base][width + c] +
                                  ape.floats()[(m - start) * width + c]);
        double num = 0.0, den = 0.0;
        for (int64_t m = start; m <= end; ++m) {
          double e = std::exp(rows[m - base][width + c] +
                              ape.floats()[(m - start) * width + c] - top);
          num += e * rows[m - base][c];
          den += e;
        }
        result.output.floats()[t * width + c] = static_cast<float>(num / den);
      }
    }
    // The incomplete pool after the step.
    float *newTail = result.state.floats().data() + b * tailRows * 2 * width;
    for (int64_t m = (last + 1) / pool * pool; m <= last; ++m)
      for (int64_t c = 0; c < 2 * width; ++c)
        newTail[(m % pool) * 2 * width + c] =
            static_cast<float>(rows[m - base][c]);
  }
  return result;
}

Tensor dsaKpoolExpand(const Tensor &pools, const Tensor &positions,
                      int64_t poolSize) {
  int64_t tokens = pools.dim(0), k = pools.dim(1);
  int64_t width = k * poolSize + poolSize - 1;
  Tensor out = Tensor::zeros(ElementType::I32, {tokens, width});
  for (int64_t t = 0; t < tokens; ++t) {
    int64_t *row = out.ints().data() + t * width;
    int64_t n = 0;
    for (int64_t i = 0; i < k; ++i) {
      int64_t j = intAt(pools, t * k + i);
      if (j >= 0)
        for (int64_t m = 0; m < poolSize; ++m)
          row[n++] = j * poolSize + m;
    }
    int64_t p = intAt(positions, t);
    for (int64_t m = (p + 1) / poolSize * poolSize; m <= p; ++m)
      row[n++] = m;
    while (n < width)
      row[n++] = -1;
  }
  return out;
}

} // namespace daybreak::ref
