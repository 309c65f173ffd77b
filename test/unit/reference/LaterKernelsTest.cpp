//===- LaterKernelsTest.cpp - Tests of the later reference kernels --------===//
//
// headMatmul, fp8Dequant, expertMatmul, the batched (`sequences`) forms of
// sparseAttention / dsaIndexerScores / cacheWrite, and cacheWrite with a
// rounding CacheStorage. Expected values are worked out by hand (in the
// comments) or by an independent formulation: the batched forms against the
// unbatched form run on each sequence separately, the storage rounding from
// the formula in Kernels.h written out here with numerics::roundTo*.
//
//===----------------------------------------------------------------------===//

#include "compiler/reference/Kernels.h"
#include "runtime/numerics/Numerics.h"
#include "test/unit/reference/TestUtils.h"

#include <cmath>
#include <random>

using namespace daybreak;
using namespace daybreak::ref;
using namespace daybreak::ref::test;

namespace {

//===----------------------------------------------------------------------===//
// headMatmul
//===----------------------------------------------------------------------===//

// x [T=2, H=2, K=2]:  t0: h0 [1, 2], h1 [3, -1];  t1: h0 [0, 1], h1 [2, 2].
// Per head W_h [K=2, N=3]:
//   W_0 = [[1, 0, 2], [0, 1, -1]]     W_1 = [[2, 1, 0], [1, -1, 3]]
// y[t, h] = x[t, h] @ W_h:
//   t0h0 = [1, 2, 0]   t0h1 = [5, 4, -3]   t1h0 = [0, 1, -1]   t1h1 = [6, 0, 6]
const std::vector<float> kHeadX = {1, 2, 3, -1, 0, 1, 2, 2};
const std::vector<double> kHeadY = {1, 2, 0, 5, 4, -3, 0, 1, -1, 6, 0, 6};

TEST(HeadMatmul, KnHandValues) {
  Tensor x = floats({2, 2, 2}, kHeadX);
  Tensor w = floats({2, 2, 3}, {1, 0, 2, 0, 1, -1, 2, 1, 0, 1, -1, 3});
  Tensor y = headMatmul(x, w, /*transposeWeight=*/false);
  EXPECT_EQ(y.shape(), (std::vector<int64_t>{2, 2, 3}));
  EXPECT_TRUE(allClose(y, kHeadY, 0.0));
}

TEST(HeadMatmul, TransposedNkHandValues) {
  // The same W_h stored as [H, N, K] (each head transposed).
  Tensor x = floats({2, 2, 2}, kHeadX);
  Tensor w = floats({2, 3, 2}, {1, 0, 0, 1, 2, -1, 2, 1, 1, -1, 0, 3});
  Tensor y = headMatmul(x, w, /*transposeWeight=*/true);
  EXPECT_EQ(y.shape(), (std::vector<int64_t>{2, 2, 3}));
  EXPECT_TRUE(allClose(y, kHeadY, 0.0));
}

TEST(HeadMatmul, EqualsMatmulPerHead) {
  // Independent formulation: head h is an ordinary matmul of x[:, h, :] with
  // the [N, K] weight w[h] (the transposed layout), or with the transpose of
  // the [K, N] weight (the plain layout).
  std::mt19937 rng(31);
  const int64_t tokens = 3, heads = 4, k = 5, n = 6;
  Tensor x = randomTensor(rng, {tokens, heads, k});
  Tensor wNk = randomTensor(rng, {heads, n, k});
  Tensor wKn = Tensor::zeros(ElementType::F32, {heads, k, n});
  for (int64_t h = 0; h < heads; ++h)
    for (int64_t j = 0; j < n; ++j)
      for (int64_t i = 0; i < k; ++i)
        wKn.floats()[(h * k + i) * n + j] = wNk.floats()[(h * n + j) * k + i];
  Tensor yT = headMatmul(x, wNk, /*transposeWeight=*/true);
  Tensor yP = headMatmul(x, wKn, /*transposeWeight=*/false);
  ASSERT_EQ(yT.shape(), (std::vector<int64_t>{tokens, heads, n}));
  ASSERT_EQ(yP.shape(), (std::vector<int64_t>{tokens, heads, n}));
  for (int64_t h = 0; h < heads; ++h) {
    Tensor xh = Tensor::zeros(ElementType::F32, {tokens, k});
    for (int64_t t = 0; t < tokens; ++t)
      for (int64_t i = 0; i < k; ++i)
        xh.floats()[t * k + i] = x.floats()[(t * heads + h) * k + i];
    Tensor wh = Tensor::zeros(ElementType::F32, {n, k});
    std::copy_n(wNk.floats().begin() + h * n * k, n * k, wh.floats().begin());
    Tensor expected = matmul(xh, wh, Tensor());
    for (int64_t t = 0; t < tokens; ++t)
      for (int64_t j = 0; j < n; ++j) {
        float want = expected.floats()[t * n + j];
        // Both are fp64 sums of the same products; 1e-6 allows a different
        // summation order.
        EXPECT_NEAR(yT.floats()[(t * heads + h) * n + j], want, 1e-6);
        EXPECT_NEAR(yP.floats()[(t * heads + h) * n + j], want, 1e-6);
      }
  }
}

//===----------------------------------------------------------------------===//
// fp8Dequant
//===----------------------------------------------------------------------===//

TEST(Fp8Dequant, Rank2WithPartialEdgeBlocks) {
  // w [3, 5] (e4m3-exact values), blocks [2, 2] -> scale grid [2, 3]: rows
  // {0, 1} | {2} and columns {0, 1} | {2, 3} | {4}; the last row block and
  // the last column block are partial.
  Tensor w = Tensor::fromFloats({3, 5},
                                {1, 2, -1, 0.5, 3,     //
                                 1.5, -2, 4, 1, 0.25,  //
                                 6, 1, -0.5, 2, 8},
                                ElementType::F8E4M3FN);
  Tensor s = floats({2, 3}, {2, 0.5, 4, 0.25, 3, 10});
  Tensor y = fp8Dequant(w, s, 2, 2);
  EXPECT_EQ(y.type(), ElementType::F32);
  EXPECT_EQ(y.shape(), (std::vector<int64_t>{3, 5}));
  EXPECT_TRUE(allClose(y,
                       {2, 4, -0.5, 0.25, 12,   // row 0: scales 2 | 0.5 | 4
                        3, -4, 2, 0.5, 1,       // row 1: scales 2 | 0.5 | 4
                        1.5, 0.25, -1.5, 6, 80}, // row 2: 0.25 | 3 | 10
                       0.0));
}

TEST(Fp8Dequant, Rank3IndexesScalesPerExpert) {
  // w [E=2, N=2, K=3], blocks [1, 2] -> scales [2, 2, 2]; each expert reads
  // its own scale grid.
  Tensor w = Tensor::fromFloats({2, 2, 3},
                                {1, 2, 3, 4, -1, 0.5,  // expert 0
                                 -2, 1, 1, 0.25, 6, -3}, // expert 1
                                ElementType::F8E4M3FN);
  Tensor s = floats({2, 2, 2}, {2, 3, 0.5, 8,       // expert 0
                                10, 0.125, 1, 16}); // expert 1
  Tensor y = fp8Dequant(w, s, 1, 2);
  EXPECT_EQ(y.shape(), (std::vector<int64_t>{2, 2, 3}));
  // e0 r0: [1*2, 2*2, 3*3];  e0 r1: [4*0.5, -1*0.5, 0.5*8]
  // e1 r0: [-2*10, 1*10, 1*0.125];  e1 r1: [0.25*1, 6*1, -3*16]
  EXPECT_TRUE(allClose(y, {2, 4, 9, 2, -0.5, 4, -20, 10, 0.125, 0.25, 6, -48},
                       0.0));
}

//===----------------------------------------------------------------------===//
// expertMatmul
//===----------------------------------------------------------------------===//

// w [E=3, N=2, K=2] in [out, in] layout:
//   e0 = [[1, 0], [0, 1]]   e1 = [[1, 1], [2, -1]]   e2 = [[0, 3], [-1, 0]]
Tensor handExperts() {
  return floats({3, 2, 2}, {1, 0, 0, 1, 1, 1, 2, -1, 0, 3, -1, 0});
}

TEST(ExpertMatmul, SlotsWithAnEmptySlot) {
  // x [2, 2] = [[1, 2], [3, -1]], indices [[1, -1], [2, 0]]:
  //   t0 s0 e1 [1, 2] -> [3, 0];  t0 s1 empty -> [0, 0]
  //   t1 s0 e2 [3, -1] -> [-3, -3];  t1 s1 e0 -> [3, -1]
  Tensor x = floats({2, 2}, {1, 2, 3, -1});
  Tensor idx = ints({2, 2}, {1, -1, 2, 0});
  Tensor y = takeValue(expertMatmul(x, handExperts(), idx, Tensor(), Tensor()));
  EXPECT_EQ(y.shape(), (std::vector<int64_t>{2, 2, 2}));
  EXPECT_TRUE(allClose(y, {3, 0, 0, 0, -3, -3, 3, -1}, 0.0));

  // bias [E, N] = [[10, 20], [30, 40], [50, 60]] is added per expert; the
  // empty slot stays zero.
  Tensor bias = floats({3, 2}, {10, 20, 30, 40, 50, 60});
  y = takeValue(expertMatmul(x, handExperts(), idx, Tensor(), bias));
  EXPECT_TRUE(allClose(y, {33, 40, 0, 0, 47, 57, 13, 19}, 0.0));
}

TEST(ExpertMatmul, PerSlotInput) {
  // x [T=2, k=2, K=2]: t0 [[1, 0], [5, 5]], t1 [[0, 1], [2, 2]];
  // indices [[0, 1], [1, -1]]:
  //   t0 s0 e0 [1, 0] -> [1, 0];  t0 s1 e1 [5, 5] -> [10, 5]
  //   t1 s0 e1 [0, 1] -> [1, -1];  t1 s1 empty -> [0, 0]
  Tensor x = floats({2, 2, 2}, {1, 0, 5, 5, 0, 1, 2, 2});
  Tensor y = takeValue(expertMatmul(x, handExperts(),
                                    ints({2, 2}, {0, 1, 1, -1}), Tensor(),
                                    Tensor()));
  EXPECT_EQ(y.shape(), (std::vector<int64_t>{2, 2, 2}));
  EXPECT_TRUE(allClose(y, {1, 0, 10, 5, 1, -1, 0, 0}, 0.0));
}

TEST(ExpertMatmul, WeightedSumOverSlots) {
  // The slots of SlotsWithAnEmptySlot weighted by [[0.5, 0.9], [0.25, 2]]:
  //   t0: 0.5 * [3, 0] (+ nothing for the empty slot) = [1.5, 0]
  //   t1: 0.25 * [-3, -3] + 2 * [3, -1] = [5.25, -2.75]
  Tensor x = floats({2, 2}, {1, 2, 3, -1});
  Tensor idx = ints({2, 2}, {1, -1, 2, 0});
  Tensor rw = floats({2, 2}, {0.5, 0.9, 0.25, 2});
  Tensor y = takeValue(expertMatmul(x, handExperts(), idx, rw, Tensor()));
  EXPECT_EQ(y.shape(), (std::vector<int64_t>{2, 2}));
  EXPECT_TRUE(allClose(y, {1.5, 0, 5.25, -2.75}, 0.0));

  // With the bias added before weighting:
  //   t0: 0.5 * [33, 40] = [16.5, 20]
  //   t1: 0.25 * [47, 57] + 2 * [13, 19] = [37.75, 52.25]
  Tensor bias = floats({3, 2}, {10, 20, 30, 40, 50, 60});
  y = takeValue(expertMatmul(x, handExperts(), idx, rw, bias));
  EXPECT_TRUE(allClose(y, {16.5, 20, 37.75, 52.25}, 0.0));
}

TEST(ExpertMatmul, ExpertIdOutOfRangeIsAnError) {
  Tensor x = floats({2, 2}, {1, 2, 3, -1});
  std::string message = errorMessage(expertMatmul(
      x, handExperts(), ints({2, 2}, {0, -1, 3, 1}), Tensor(), Tensor()));
  EXPECT_NE(message.find("expert id 3"), std::string::npos) << message;
  EXPECT_NE(message.find("[-1, 3)"), std::string::npos) << message;
  message = errorMessage(expertMatmul(x, handExperts(), ints({2, 1}, {0, -2}),
                                      Tensor(), Tensor()));
  EXPECT_NE(message.find("expert id -2"), std::string::npos) << message;
}

//===----------------------------------------------------------------------===//
// Batched (sequences) forms
//===----------------------------------------------------------------------===//

/// Rows `rows` of a tensor along dim 0.
Tensor takeRows(const Tensor &t, const std::vector<int64_t> &rows) {
  std::vector<int64_t> shape = t.shape();
  int64_t width = t.numel() / std::max<int64_t>(shape[0], 1);
  shape[0] = static_cast<int64_t>(rows.size());
  Tensor out = Tensor::zeros(t.type(), shape);
  for (size_t r = 0; r < rows.size(); ++r)
    for (int64_t i = 0; i < width; ++i) {
      if (t.isFloat())
        out.floats()[r * width + i] = t.floats()[rows[r] * width + i];
      else
        out.ints()[r * width + i] = t.ints()[rows[r] * width + i];
    }
  return out;
}

/// The tokens of sequence `b`.
std::vector<int64_t> tokensOf(const Tensor &sequences, int64_t b) {
  std::vector<int64_t> rows;
  for (int64_t t = 0; t < sequences.numel(); ++t)
    if (sequences.ints()[t] == b)
      rows.push_back(t);
  return rows;
}

Tensor randomInts(std::mt19937 &rng, std::vector<int64_t> shape, int64_t lo,
                  int64_t hi) {
  Tensor t = Tensor::zeros(ElementType::I32, std::move(shape));
  std::uniform_int_distribution<int64_t> dist(lo, hi);
  for (int64_t &value : t.ints())
    value = dist(rng);
  return t;
}

TEST(SparseAttentionBatched, HandValues) {
  // kv [B=2, S=2, 2], value_dim 1. Sequence 0: rows [0, *], [ln 3, *];
  // sequence 1: rows [5, *], [7, *]. q = [1, 0] (one head), scale 1.
  //   t0 (sequence 0) attends {1, 0}: logits [ln 3, 0] -> (3 ln 3 + 0) / 4
  //   t1 (sequence 1) attends {1}: one key -> its value 7
  //   t2 (sequence 1) attends {0, -1}: one key -> 5
  const float ln3 = static_cast<float>(std::log(3.0));
  Tensor q = floats({3, 1, 2}, {1, 0, 1, 0, 1, 0});
  Tensor kv = floats({2, 2, 2}, {0, 4, ln3, 8, 5, 100, 7, 100});
  Tensor idx = ints({3, 2}, {1, 0, 1, -1, 0, -1});
  Tensor out = takeValue(
      sparseAttention(q, kv, idx, 1.0, 1, Tensor(), ints({3}, {0, 1, 1})));
  EXPECT_EQ(out.shape(), (std::vector<int64_t>{3, 1, 1}));
  EXPECT_TRUE(allClose(out, {0.75 * std::log(3.0), 7, 5}, 1e-6));
}

TEST(SparseAttentionBatched, EqualsEachSequenceSeparately) {
  std::mt19937 rng(41);
  const int64_t batches = 3, keys = 5, qk = 6, dv = 4, heads = 2, tokens = 9,
                topK = 3;
  Tensor q = randomTensor(rng, {tokens, heads, qk});
  Tensor kv = randomTensor(rng, {batches, keys, qk});
  Tensor idx = randomInts(rng, {tokens, topK}, -1, keys - 1);
  Tensor seq = randomInts(rng, {tokens}, 0, batches - 1);
  Tensor sinks = randomTensor(rng, {heads});
  const double scale = 0.7;
  Tensor out = takeValue(sparseAttention(q, kv, idx, scale, dv, sinks, seq));
  ASSERT_EQ(out.shape(), (std::vector<int64_t>{tokens, heads, dv}));
  for (int64_t b = 0; b < batches; ++b) {
    std::vector<int64_t> rows = tokensOf(seq, b);
    if (rows.empty())
      continue;
    Tensor kvB = takeRows(kv.reshaped({batches, keys * qk}), {b})
                     .reshaped({keys, qk});
    Tensor expected = takeValue(sparseAttention(
        takeRows(q, rows), kvB, takeRows(idx, rows), scale, dv, sinks));
    // The same fp64 computation per token; 1e-6 leaves room for ordering.
    EXPECT_TRUE(allClose(takeRows(out, rows), expected, 1e-6)) << "sequence "
                                                               << b;
  }
}

TEST(SparseAttentionBatched, SequenceOutOfRangeIsAnError) {
  Tensor q = floats({2, 1, 2}, {1, 0, 0, 1});
  Tensor kv = Tensor::zeros(ElementType::F32, {2, 3, 2});
  Tensor idx = ints({2, 1}, {0, 1});
  EXPECT_EQ(errorMessage(sparseAttention(q, kv, idx, 1.0, 1, Tensor(),
                                         ints({2}, {0, 2}))),
            "sparseAttention: sequence 2 of token 1 is outside the batch "
            "[0, 2)");
  EXPECT_EQ(errorMessage(sparseAttention(q, kv, idx, 1.0, 1, Tensor(),
                                         ints({2}, {-1, 0}))),
            "sparseAttention: sequence -1 of token 0 is outside the batch "
            "[0, 2)");
}

TEST(DsaIndexerScoresBatched, HandValues) {
  // q heads [1, 0] and [0, 1] for both tokens, head weights [2, 3], scale
  // 1/2. Sequence 0 keys [1, 1], [-1, 2]; sequence 1 keys [2, 0], [0, -3].
  //   t0 (sequence 1): [2, 0] -> (2 * 2 + 3 * 0) / 2 = 2;
  //                    [0, -3] -> (2 * 0 + 3 * relu(-3)) / 2 = 0
  //   t1 (sequence 0): [1, 1] -> (2 + 3) / 2 = 2.5; [-1, 2] -> 3 * 2 / 2 = 3
  Tensor q = floats({2, 2, 2}, {1, 0, 0, 1, 1, 0, 0, 1});
  Tensor k = floats({2, 2, 2}, {1, 1, -1, 2, 2, 0, 0, -3});
  Tensor w = floats({2, 2}, {2, 3, 2, 3});
  Tensor out =
      takeValue(dsaIndexerScores(q, k, w, ints({2}, {1, 0}), 0.5));
  EXPECT_EQ(out.shape(), (std::vector<int64_t>{2, 2}));
  EXPECT_TRUE(allClose(out, {2, 0, 2.5, 3}, 1e-6));
}

TEST(DsaIndexerScoresBatched, EqualsEachSequenceSeparately) {
  std::mt19937 rng(42);
  const int64_t batches = 3, keys = 7, dim = 8, heads = 4, tokens = 10;
  Tensor q = randomTensor(rng, {tokens, heads, dim});
  Tensor k = randomTensor(rng, {batches, keys, dim});
  Tensor w = randomTensor(rng, {tokens, heads}, 0.0f, 1.0f);
  Tensor seq = randomInts(rng, {tokens}, 0, batches - 1);
  Tensor out = takeValue(dsaIndexerScores(q, k, w, seq, 0.125));
  ASSERT_EQ(out.shape(), (std::vector<int64_t>{tokens, keys}));
  for (int64_t b = 0; b < batches; ++b) {
    std::vector<int64_t> rows = tokensOf(seq, b);
    if (rows.empty())
      continue;
    Tensor kB =
        takeRows(k.reshaped({batches, keys * dim}), {b}).reshaped({keys, dim});
    Tensor expected = dsaIndexerScores(takeRows(q, rows), kB,
                                       takeRows(w, rows), 0.125);
    EXPECT_TRUE(allClose(takeRows(out, rows), expected, 1e-6)) << "sequence "
                                                               << b;
  }
}

TEST(DsaIndexerScoresBatched, SequenceOutOfRangeIsAnError) {
  Tensor q = floats({2, 1, 2}, {1, 0, 0, 1});
  Tensor k = Tensor::zeros(ElementType::F32, {2, 3, 2});
  Tensor w = floats({2, 1}, {1, 1});
  EXPECT_EQ(errorMessage(dsaIndexerScores(q, k, w, ints({2}, {1, 2}), 1.0)),
            "dsaIndexerScores: sequence 2 of token 1 is outside the batch "
            "[0, 2)");
}

TEST(CacheWriteBatched, HandValues) {
  // cache [B=2, S=3, 2]; tokens write (sequence 1, slot 2), (sequence 0,
  // slot 0) and skip (sequence 1, slot -1).
  Tensor cache = floats({2, 3, 2}, {1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6});
  Tensor values = floats({3, 2}, {10, 11, 20, 21, 30, 31});
  Tensor out = takeValue(cacheWrite(cache, values, ints({3}, {2, 0, -1}),
                                    ints({3}, {1, 0, 1})));
  EXPECT_EQ(out.shape(), (std::vector<int64_t>{2, 3, 2}));
  EXPECT_TRUE(
      allClose(out, {20, 21, 2, 2, 3, 3, 4, 4, 5, 5, 10, 11}, 0.0));
}

TEST(CacheWriteBatched, EqualsEachSequenceSeparately) {
  std::mt19937 rng(43);
  const int64_t batches = 3, rows = 6, width = 5, tokens = 8;
  Tensor cache = randomTensor(rng, {batches, rows, width});
  Tensor values = randomTensor(rng, {tokens, width});
  Tensor slots = randomInts(rng, {tokens}, -1, rows - 1);
  Tensor seq = randomInts(rng, {tokens}, 0, batches - 1);
  Tensor out = takeValue(cacheWrite(cache, values, slots, seq));
  ASSERT_EQ(out.shape(), cache.shape());
  Tensor flat = out.reshaped({batches, rows * width});
  for (int64_t b = 0; b < batches; ++b) {
    Tensor cacheB = takeRows(cache.reshaped({batches, rows * width}), {b})
                        .reshaped({rows, width});
    std::vector<int64_t> mine = tokensOf(seq, b);
    Tensor expected = cacheB;
    if (!mine.empty())
      expected = takeValue(cacheWrite(cacheB, takeRows(values, mine),
                                      takeRows(slots, mine)));
    EXPECT_TRUE(allClose(takeRows(flat, {b}).reshaped({rows, width}),
                         expected, 0.0))
        << "sequence " << b;
  }
}

TEST(CacheWriteBatched, SequenceOrSlotOutOfRangeIsAnError) {
  Tensor cache = Tensor::zeros(ElementType::F32, {2, 3, 2});
  Tensor values = Tensor::zeros(ElementType::F32, {2, 2});
  EXPECT_EQ(errorMessage(cacheWrite(cache, values, ints({2}, {0, 1}),
                                    ints({2}, {2, 0}))),
            "cacheWrite: sequence 2 of token 0 is outside the batch [0, 2)");
  // Slots are bounded by S (3), not by B * S.
  EXPECT_EQ(errorMessage(cacheWrite(cache, values, ints({2}, {0, 3}),
                                    ints({2}, {0, 0}))),
            "cacheWrite: slot 3 at row 1 is outside the cache [-1, 3)");
}

//===----------------------------------------------------------------------===//
// cacheWrite with a rounding CacheStorage
//===----------------------------------------------------------------------===//

TEST(CacheWriteStorage, Bf16RoundsEveryValue) {
  // An f32 cache stored as bf16: 1 + 2^-8 ties to 1 (even), 1 + 3 * 2^-8
  // ties up to 1 + 2^-6, and pi becomes its nearest bf16. The skipped row
  // and the untouched row keep their (non-bf16) values.
  Tensor cache = floats({3, 3}, {0.1f, 0.2f, 0.3f, 0.4f, 0.5f, 0.6f, 0.7f,
                                 0.8f, 0.9f});
  Tensor values =
      floats({2, 3}, {1.00390625f, 1.01171875f, 3.14159265f, 7, 8, 9});
  CacheStorage storage;
  storage.storage = ElementType::BF16;
  Tensor out = takeValue(
      cacheWrite(cache, values, ints({2}, {1, -1}), Tensor(), storage));
  EXPECT_EQ(out.type(), ElementType::F32);
  EXPECT_EQ(numerics::roundToBf16(3.14159265f), 3.140625f);
  EXPECT_TRUE(allClose(out,
                       {0.1f, 0.2f, 0.3f, 1.0, 1.015625,
                        numerics::roundToBf16(3.14159265f), 0.7f, 0.8f, 0.9f},
                       0.0));
}

/// The stated E4M3 tile rule: s = 2^ceil(log2(max(amax, 1e-4) / 448)),
/// v -> roundToE4m3(v / s) * s.
std::vector<double> e4m3Tile(const std::vector<float> &tile) {
  double amax = 1e-4;
  for (float v : tile)
    amax = std::max(amax, std::fabs(static_cast<double>(v)));
  int exponent = static_cast<int>(std::ceil(std::log2(amax / 448.0)));
  double scale = std::ldexp(1.0, exponent);
  std::vector<double> out;
  for (float v : tile)
    out.push_back(
        numerics::roundToE4m3(static_cast<float>(v / scale)) * scale);
  return out;
}

TEST(CacheWriteStorage, E4m3TilesAndBf16Tail) {
  // Rows of 14 values: three e4m3 tiles of 4 (scaleBlock) and a bf16 tail of
  // 2 (tailDim).
  //   tile A: amax 3 -> s = 2^ceil(log2(3 / 448)) = 2^ceil(-7.22) = 2^-7;
  //           v * 128 = [384, -166.4, 89.6, 1.28] -> e4m3 [384, -160, 88,
  //           1.25] -> [3, -1.25, 0.6875, 0.009765625]
  //   tile B: amax 7 = 448 * 2^-6 exactly -> s = 2^-6, 7 maps to 448 (max)
  //   tile C: amax below 1e-4 -> s = 2^ceil(log2(1e-4 / 448)) = 2^-22
  //   tail:   each value to bf16
  const std::vector<float> tileA = {3.0f, -1.3f, 0.7f, 0.01f};
  const std::vector<float> tileB = {7.0f, 0.1f, -3.3f, 5.5f};
  const std::vector<float> tileC = {5e-5f, -2e-5f, 0.0f, 1e-5f};
  const std::vector<float> tail = {1.00390625f, 3.14159265f};
  std::vector<float> row;
  for (const auto *part : {&tileA, &tileB, &tileC, &tail})
    row.insert(row.end(), part->begin(), part->end());
  ASSERT_EQ(row.size(), 14u);

  Tensor cache = Tensor::zeros(ElementType::F32, {3, 14});
  for (float &v : cache.floats())
    v = 0.3f;
  Tensor values = floats({1, 14}, row);
  CacheStorage storage;
  storage.storage = ElementType::F8E4M3FN;
  storage.scaleBlock = 4;
  storage.tailDim = 2;
  Tensor out = takeValue(
      cacheWrite(cache, values, ints({1}, {2}), Tensor(), storage));
  ASSERT_EQ(out.shape(), (std::vector<int64_t>{3, 14}));

  // The formula's scale for tile A is 2^-7 and tile C's 2^-22.
  EXPECT_EQ(std::ceil(std::log2(3.0 / 448.0)), -7.0);
  EXPECT_EQ(std::ceil(std::log2(1e-4 / 448.0)), -22.0);

  std::vector<double> expected;
  for (const auto *tile : {&tileA, &tileB, &tileC}) {
    std::vector<double> q = e4m3Tile(*tile);
    expected.insert(expected.end(), q.begin(), q.end());
  }
  for (float v : tail)
    expected.push_back(numerics::roundToBf16(v));
  // Hand values of tile A, B's maximum and the tail.
  EXPECT_EQ(expected[0], 3.0);
  EXPECT_EQ(expected[1], -1.25);
  EXPECT_EQ(expected[2], 0.6875);
  EXPECT_EQ(expected[3], 0.009765625);
  EXPECT_EQ(expected[4], 7.0);
  EXPECT_EQ(expected[12], 1.0);

  std::vector<float> written(out.floats().begin() + 2 * 14,
                             out.floats().end());
  Tensor writtenRow = floats({14}, written);
  EXPECT_TRUE(allClose(writtenRow, expected, 0.0));
  // Rows 0 and 1 are untouched.
  for (int64_t i = 0; i < 2 * 14; ++i)
    EXPECT_EQ(out.floats()[i], 0.3f) << i;
}

TEST(CacheWriteStorage, E4m3InABatchedCache) {
  // The storage rounding applies to the row of sequence 1, slot 0, of a
  // [2, 2, 4] cache with one tile of 4 (amax 3 -> scale 2^-7, as above).
  Tensor cache = Tensor::zeros(ElementType::F32, {2, 2, 4});
  Tensor values = floats({1, 4}, {3.0f, -1.3f, 0.7f, 0.01f});
  CacheStorage storage;
  storage.storage = ElementType::F8E4M3FN;
  storage.scaleBlock = 4;
  Tensor out = takeValue(cacheWrite(cache, values, ints({1}, {0}),
                                    ints({1}, {1}), storage));
  EXPECT_TRUE(allClose(out,
                       {0, 0, 0, 0, 0, 0, 0, 0,  // sequence 0
                        3, -1.25, 0.6875, 0.009765625, 0, 0, 0, 0},
                       0.0));
}

} // namespace
