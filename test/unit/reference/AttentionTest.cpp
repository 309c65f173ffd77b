//===- AttentionTest.cpp - Tests of dense and index-sparse attention ------===//

#include "compiler/reference/Kernels.h"
#include "test/unit/reference/TestUtils.h"

#include <cmath>
#include <numeric>
#include <set>

using namespace daybreak::ref;
using namespace daybreak::ref::test;

namespace {

const float kLn3 = static_cast<float>(std::log(3.0));

Tensor denseAttention(const Tensor &q, const Tensor &k, const Tensor &v,
                      const AttentionParams &params,
                      const Tensor &sinks = Tensor()) {
  return attention(q, k, v, params, sinks, Tensor(), Tensor(), Tensor(),
                   Tensor());
}

TEST(Attention, HandValueWithAndWithoutSink) {
  // One query, two keys: logits [0, ln 3] -> p = [1/4, 3/4];
  // values [4, 8] -> 1 + 6 = 7. A sink logit ln 4 joins the denominator:
  // (4 * 1 + 8 * 3) / (1 + 3 + 4) = 3.5.
  Tensor q = floats({1, 1, 1}, {1});
  Tensor k = floats({2, 1, 1}, {0, kLn3});
  Tensor v = floats({2, 1, 1}, {4, 8});
  AttentionParams params;
  EXPECT_TRUE(allClose(denseAttention(q, k, v, params), {7}, 1e-6));
  Tensor sinks = floats({1}, {float(std::log(4.0))});
  EXPECT_TRUE(allClose(denseAttention(q, k, v, params, sinks), {3.5}, 1e-6));
}

TEST(Attention, CausalSlidingAndBidirectionalMasks) {
  // Three tokens attending to themselves (default positions 0, 1, 2), all
  // logits 0 so the output is the mean of the visible values [1, 2, 4].
  Tensor q = floats({3, 1, 1}, {0, 0, 0});
  Tensor k = floats({3, 1, 1}, {0, 0, 0});
  Tensor v = floats({3, 1, 1}, {1, 2, 4});
  AttentionParams params;
  EXPECT_TRUE(
      allClose(denseAttention(q, k, v, params), {1, 1.5, 7.0 / 3}, 1e-6));
  params.mask = MaskKind::SlidingWindow;
  params.window = 2; // qpos - 2 < kpos <= qpos
  EXPECT_TRUE(allClose(denseAttention(q, k, v, params), {1, 1.5, 3}, 1e-6));
  params.mask = MaskKind::Bidirectional;
  EXPECT_TRUE(allClose(denseAttention(q, k, v, params),
                       {7.0 / 3, 7.0 / 3, 7.0 / 3}, 1e-6));
}

TEST(Attention, DefaultQueriesAreTheLastKeys) {
  // T = 1 query over S = 3 keys sits at position 2 and sees all of them.
  Tensor q = floats({1, 1, 1}, {0});
  Tensor k = floats({3, 1, 1}, {0, 0, 0});
  Tensor v = floats({3, 1, 1}, {1, 2, 4});
  EXPECT_TRUE(
      allClose(denseAttention(q, k, v, AttentionParams()), {7.0 / 3}, 1e-6));
}

TEST(Attention, SegmentsAndQueriesWithoutKeys) {
  // Segments [0, 0, 1] bidirectional: tokens 0 and 1 average [1, 2], token
  // 2 only sees itself. Query positions put token 0 before every key under
  // the causal mask, so it gets zeros.
  Tensor q = floats({3, 1, 1}, {0, 0, 0});
  Tensor k = floats({3, 1, 1}, {0, 0, 0});
  Tensor v = floats({3, 1, 1}, {1, 2, 4});
  Tensor segments = ints({3}, {0, 0, 1});
  AttentionParams params;
  params.mask = MaskKind::Bidirectional;
  EXPECT_TRUE(allClose(attention(q, k, v, params, Tensor(), Tensor(), Tensor(),
                                 segments, segments),
                       {1.5, 1.5, 4}, 1e-6));
  params.mask = MaskKind::Causal;
  Tensor qPos = ints({3}, {-1, 0, 5});
  Tensor sinks = floats({1}, {3});
  EXPECT_TRUE(allClose(
      attention(q, k, v, params, sinks, qPos, Tensor(), Tensor(), Tensor()),
      {0, 1 / (1 + std::exp(3.0)), 7 / (3 + std::exp(3.0))}, 1e-6));
}

TEST(Attention, GroupedQueryHeadsShareKvHeads) {
  // Hq = 4 over Hkv = 2 equals MHA with each KV head repeated twice.
  std::mt19937 rng(21);
  Tensor q = randomTensor(rng, {3, 4, 8});
  Tensor k = randomTensor(rng, {5, 2, 8});
  Tensor v = randomTensor(rng, {5, 2, 6});
  Tensor kRep = Tensor::zeros(ElementType::F32, {5, 4, 8});
  Tensor vRep = Tensor::zeros(ElementType::F32, {5, 4, 6});
  for (int64_t s = 0; s < 5; ++s) {
    for (int64_t h = 0; h < 4; ++h) {
      for (int64_t d = 0; d < 8; ++d)
        kRep.floats()[(s * 4 + h) * 8 + d] =
            k.floats()[(s * 2 + h / 2) * 8 + d];
      for (int64_t d = 0; d < 6; ++d)
        vRep.floats()[(s * 4 + h) * 6 + d] =
            v.floats()[(s * 2 + h / 2) * 6 + d];
    }
  }
  AttentionParams params;
  params.scale = 0.35;
  EXPECT_TRUE(allClose(denseAttention(q, k, v, params),
                       denseAttention(q, kRep, vRep, params), 1e-6));
}

/// Random index sets over S keys with -1 padding: query 0 has an empty set,
/// the others a random number of distinct keys in random order.
Tensor randomIndexSets(std::mt19937 &rng, int64_t tokens, int64_t keys,
                       int64_t topK) {
  Tensor indices = Tensor::zeros(ElementType::I32, {tokens, topK});
  std::vector<int64_t> order(keys);
  for (int64_t t = 0; t < tokens; ++t) {
    std::iota(order.begin(), order.end(), 0);
    std::shuffle(order.begin(), order.end(), rng);
    int64_t count = t == 0 ? 0 : 1 + int64_t(rng() % topK);
    for (int64_t i = 0; i < topK; ++i)
      indices.ints()[t * topK + i] = i < count ? order[i] : -1;
    // Padding need not be at the end.
    std::shuffle(indices.ints().begin() + t * topK,
                 indices.ints().begin() + (t + 1) * topK, rng);
  }
  return indices;
}

TEST(SparseAttention, EqualsDenseAttentionMaskedToTheSet) {
  std::mt19937 rng(22);
  const int64_t tokens = 6, heads = 3, keys = 9, qkDim = 10, valueDim = 7;
  const int64_t topK = 5;
  const double scale = 0.3;
  Tensor q = randomTensor(rng, {tokens, heads, qkDim}, -2, 2);
  Tensor kv = randomTensor(rng, {keys, qkDim}, -2, 2);
  Tensor indices = randomIndexSets(rng, tokens, keys, topK);
  Tensor sinks = randomTensor(rng, {heads});

  // MQA view of the latent cache for the dense kernel.
  Tensor k = kv.reshaped({keys, 1, qkDim});
  Tensor v = Tensor::zeros(ElementType::F32, {keys, 1, valueDim});
  for (int64_t s = 0; s < keys; ++s)
    for (int64_t d = 0; d < valueDim; ++d)
      v.floats()[s * valueDim + d] = kv.floats()[s * qkDim + d];

  for (bool withSinks : {false, true}) {
    Tensor sink = withSinks ? sinks : Tensor();
    Tensor sparse =
        takeValue(sparseAttention(q, kv, indices, scale, valueDim, sink));
    ASSERT_EQ(sparse.shape(), (std::vector<int64_t>{tokens, heads, valueDim}));

    // Way 1: `attention`, one query at a time, with segments encoding the
    // set (key in set -> segment 1, the query in segment 1).
    AttentionParams params;
    params.scale = scale;
    params.mask = MaskKind::Bidirectional;
    for (int64_t t = 0; t < tokens; ++t) {
      Tensor qt = Tensor::zeros(ElementType::F32, {1, heads, qkDim});
      std::copy_n(q.floats().begin() + t * heads * qkDim, heads * qkDim,
                  qt.floats().begin());
      Tensor kSeg = Tensor::zeros(ElementType::I32, {keys});
      for (int64_t i = 0; i < topK; ++i)
        if (int64_t s = indices.ints()[t * topK + i]; s >= 0)
          kSeg.ints()[s] = 1;
      Tensor dense = attention(qt, k, v, params, sink, Tensor(), Tensor(),
                               ints({1}, {1}), kSeg);
      Tensor sparseRow = Tensor::zeros(ElementType::F32, {1, heads, valueDim});
      std::copy_n(sparse.floats().begin() + t * heads * valueDim,
                  heads * valueDim, sparseRow.floats().begin());
      EXPECT_TRUE(allClose(sparseRow, dense, 1e-6)) << "query " << t;
    }

    // Way 2: an independent masked softmax loop.
    for (int64_t t = 0; t < tokens; ++t) {
      std::set<int64_t> set;
      for (int64_t i = 0; i < topK; ++i)
        if (indices.ints()[t * topK + i] >= 0)
          set.insert(indices.ints()[t * topK + i]);
      for (int64_t h = 0; h < heads; ++h) {
        std::vector<double> expected(valueDim, 0.0);
        double denominator = withSinks ? std::exp(sinks.floats()[h]) : 0.0;
        for (int64_t s : set) {
          double logit = 0;
          for (int64_t d = 0; d < qkDim; ++d)
            logit += q.floats()[(t * heads + h) * qkDim + d] *
                     double(kv.floats()[s * qkDim + d]);
          double p = std::exp(scale * logit);
          denominator += p;
          for (int64_t d = 0; d < valueDim; ++d)
            expected[d] += p * kv.floats()[s * qkDim + d];
        }
        for (int64_t d = 0; d < valueDim; ++d) {
          double want = set.empty() ? 0.0 : expected[d] / denominator;
          EXPECT_NEAR(sparse.floats()[(t * heads + h) * valueDim + d], want,
                      1e-6);
        }
      }
    }
  }
}

TEST(SparseAttention, IndexOutOfRangeIsAnError) {
  Tensor q = floats({2, 1, 2}, {1, 0, 0, 1});
  Tensor kv = floats({3, 2}, {1, 1, 2, 2, 3, 3});
  std::string message = errorMessage(
      sparseAttention(q, kv, ints({2, 2}, {0, -1, 2, 3}), 1.0, 1, Tensor()));
  EXPECT_NE(message.find("index 3"), std::string::npos) << message;
  EXPECT_NE(message.find("[-1, 3)"), std::string::npos) << message;
  message = errorMessage(
      sparseAttention(q, kv, ints({2, 1}, {-5, 0}), 1.0, 1, Tensor()));
  EXPECT_NE(message.find("index -5"), std::string::npos) << message;
}

TEST(SparseAttention, HandValue) {
  // Keys kv = [[0, 4], [ln 3, 8], [9, 100]] with Dv = 1 (V = column 0).
  // The query picks keys 1 and 0 with q = [1, 0]: logits [ln 3, 0] ->
  // (3 * ln 3 + 1 * 0) / 4. Key 2 is not in the set.
  Tensor q = floats({1, 1, 2}, {1, 0});
  Tensor kv = floats({3, 2}, {0, 4, kLn3, 8, 9, 100});
  Tensor out = takeValue(
      sparseAttention(q, kv, ints({1, 3}, {1, -1, 0}), 1.0, 1, Tensor()));
  EXPECT_TRUE(allClose(out, {0.75 * std::log(3.0)}, 1e-6));
}

} // namespace
