//===- Dsa.cpp - Reference DSA lightning-indexer scores and top-k ---------===//

#include "compiler/reference/Kernels.h"
#include "compiler/reference/kernels/KernelUtils.h"

#include <algorithm>
#include <numeric>

namespace daybreak::ref {

using namespace detail;

Tensor dsaIndexerScores(const Tensor &q, const Tensor &k, const Tensor &weights,
                        double scale) {
  return llvm::cantFail(dsaIndexerScores(q, k, weights, Tensor(), scale));
}

llvm::Expected<Tensor> dsaIndexerScores(const Tensor &q, const Tensor &k,
                                        const Tensor &weights,
                                        const Tensor &sequences, double scale) {
  int64_t tokens = q.dim(0), heads = q.dim(1), dim = q.dim(2);
  int64_t keys = k.dim(-2);
  bool batched = !sequences.empty();
  if (batched)
    if (llvm::Error err =
            checkSequences(sequences, k.dim(0), "dsaIndexerScores"))
      return std::move(err);
  Tensor scores = Tensor::zeros(ElementType::F32, {tokens, keys});
  for (int64_t t = 0; t < tokens; ++t) {
    for (int64_t s = 0; s < keys; ++s) {
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
    for (int64_t i = 0; i < topK; ++i)
      indices.ints()[t * topK + i] =
          i < static_cast<int64_t>(chosen.size()) ? chosen[i] : -1;
  }
  return indices;
}

} // namespace daybreak::ref
