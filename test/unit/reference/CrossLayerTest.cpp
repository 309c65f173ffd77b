//===- CrossLayerTest.cpp - Tests of Block AttnRes and mHC ----------------===//

#include "compiler/reference/Kernels.h"
#include "test/unit/reference/TestUtils.h"

#include <cmath>

using namespace daybreak::ref;
using namespace daybreak::ref::test;

namespace {

const float kLn3 = static_cast<float>(std::log(3.0));

TEST(BlockAttnRes, HandValue) {
  // v0 = [1, 1] (rms 1), v1 = [-2, 2] (rms 2, normalised [-1, 1]).
  // normWeight * proj = [ln 3, 0]: logits ln 3 and -ln 3 -> softmax
  // [9/10, 1/10]; out = 0.9 * [1, 1] + 0.1 * [-2, 2] = [0.7, 1.1].
  Tensor v0 = floats({1, 2}, {1, 1});
  Tensor v1 = floats({1, 2}, {-2, 2});
  Tensor normWeight = floats({2}, {1, 5});
  Tensor proj = floats({1, 2}, {kLn3, 0});
  EXPECT_TRUE(allClose(blockAttnRes({v0, v1}, normWeight, proj, 0.0),
                       {0.7, 1.1}, 1e-6));
}

TEST(BlockAttnRes, SingleSourceAndZeroQuery) {
  std::mt19937 rng(51);
  Tensor v0 = randomTensor(rng, {3, 8});
  Tensor v1 = randomTensor(rng, {3, 8});
  Tensor v2 = randomTensor(rng, {3, 8});
  Tensor w = randomTensor(rng, {8});
  // One source: the softmax weight is 1.
  EXPECT_TRUE(allClose(blockAttnRes({v0}, w, w, 1e-5), v0, 1e-7));
  // A zero pseudo-query (its init) averages the sources uniformly.
  Tensor zero = Tensor::zeros(ElementType::F32, {8});
  Tensor mean = Tensor::zeros(ElementType::F32, {3, 8});
  for (int i = 0; i < 24; ++i)
    mean.floats()[i] =
        (v0.floats()[i] + v1.floats()[i] + double(v2.floats()[i])) / 3;
  EXPECT_TRUE(allClose(blockAttnRes({v0, v1, v2}, w, zero, 1e-5), mean, 1e-6));
}

/// mHC parameters for n = 2 streams with fn = 0, so every mix is its base.
struct MhcParams {
  Tensor fn, base, scale;
};

MhcParams baseOnly(std::vector<float> base, int64_t width) {
  return {Tensor::zeros(ElementType::F32, {8, 2 * width}),
          floats({8}, std::move(base)), floats({3}, {1, 1, 1})};
}

TEST(MhcPre, BaseOnlyHandValues) {
  // pre = sigmoid([0, ln 3]) = [1/2, 3/4]; post = 2 sigmoid([0, -ln 3]) =
  // [1, 1/2]. comb logits rows [0, ln 3] and [0, 0] -> softmax rows
  // [1/4, 3/4], [1/2, 1/2]; with one Sinkhorn iteration only the column
  // normalisation runs: colsums [3/4, 5/4] -> [[1/3, 3/5], [2/3, 2/5]].
  // eps = 0 keeps the numbers exact.
  MhcParams p = baseOnly({0, kLn3, 0, -kLn3, 0, kLn3, 0, 0}, 1);
  Tensor streams = floats({1, 2, 1}, {4, 8});
  MhcPre r = mhcPre(streams, p.fn, p.base, p.scale, 1, 0.0, 1e-6);
  EXPECT_TRUE(allClose(r.input, {0.5 * 4 + 0.75 * 8}, 1e-5));
  EXPECT_TRUE(allClose(r.post, {1, 0.5}, 1e-6));
  EXPECT_TRUE(allClose(r.comb, {1.0 / 3, 0.6, 2.0 / 3, 0.4}, 1e-6));
}

TEST(MhcPre, EpsPlacementMatchesUpstream) {
  // Uniform comb logits: softmax gives 1/2 everywhere, + eps; the column
  // normalisation divides by (2 (1/2 + eps) + eps). Rows and columns are
  // then equal, so every further iteration divides by (2c + eps) again:
  // c_{k+1} = c_k / (2 c_k + eps). pre gains + eps, post does not.
  const double eps = 0.01;
  MhcParams p = baseOnly(std::vector<float>(8, 0.0f), 1);
  Tensor streams = floats({1, 2, 1}, {1, 3});
  MhcPre r = mhcPre(streams, p.fn, p.base, p.scale, 3, eps, 1e-6);
  double c = 0.5 + eps;
  c = c / (2 * c + eps); // first column pass
  for (int i = 0; i < 2; ++i) {
    c = c / (2 * c + eps); // rows
    c = c / (2 * c + eps); // columns
  }
  EXPECT_TRUE(allClose(r.comb, {c, c, c, c}, 1e-7));
  EXPECT_TRUE(allClose(r.post, {1, 1}, 1e-7));
  EXPECT_TRUE(allClose(r.input, {(0.5 + eps) * 4}, 1e-6));
}

TEST(MhcPre, ProjectionOfTheNormalisedStreams) {
  // n = 2, D = 1: X = [1, -1] has rms 1. fn row 0 (pre_0) = [ln 3, 0] and
  // scale[0] = 2: f = ln 3 -> sigmoid(2 ln 3) = 9/10. fn row 2 (post_0) =
  // [0, 1]: f = -1, scale[1] = ln 3 -> 2 sigmoid(-ln 3) = 1/2.
  Tensor fn = Tensor::zeros(ElementType::F32, {8, 2});
  fn.floats()[0] = kLn3;
  fn.floats()[2 * 2 + 1] = 1;
  Tensor base = Tensor::zeros(ElementType::F32, {8});
  Tensor scale = floats({3}, {2, kLn3, 1});
  Tensor streams = floats({1, 2, 1}, {1, -1});
  MhcPre r = mhcPre(streams, fn, base, scale, 1, 0.0, 0.0);
  EXPECT_TRUE(allClose(r.input, {0.9 * 1 + 0.5 * -1}, 1e-6));
  EXPECT_TRUE(allClose(r.post, {0.5, 1}, 1e-6));
  // The norm makes f invariant to the scale of X.
  Tensor scaled = floats({1, 2, 1}, {7, -7});
  EXPECT_TRUE(allClose(mhcPre(scaled, fn, base, scale, 1, 0.0, 0.0).post,
                       r.post, 1e-6));
}

TEST(MhcPre, SinkhornGivesADoublyStochasticComb) {
  std::mt19937 rng(52);
  const int64_t n = 4, width = 16;
  Tensor streams = randomTensor(rng, {5, n, width});
  Tensor fn = randomTensor(rng, {(2 + n) * n, n * width}, -0.5, 0.5);
  Tensor base = randomTensor(rng, {(2 + n) * n});
  Tensor scale = floats({3}, {1, 1, 1});
  // 20 iterations (DeepSeek-V4) leave rows within a few 1e-3 of 1; many
  // more converge. The last pass is over columns, so those are tight.
  for (int64_t iters : {20, 400}) {
    MhcPre r = mhcPre(streams, fn, base, scale, iters, 1e-6, 1e-6);
    for (int64_t t = 0; t < 5; ++t) {
      for (int64_t i = 0; i < n; ++i) {
        double row = 0, col = 0;
        for (int64_t j = 0; j < n; ++j) {
          row += r.comb.floats()[(t * n + i) * n + j];
          col += r.comb.floats()[(t * n + j) * n + i];
        }
        EXPECT_NEAR(row, 1.0, iters == 20 ? 1e-2 : 1e-5);
        EXPECT_NEAR(col, 1.0, 1e-5);
      }
    }
  }
}

TEST(MhcPost, CombIsReadTransposed) {
  // X = [1, 2], y = 10, post = [1/2, 1], C = [[0.2, 0.8], [0.6, 0.4]]:
  // X'_0 = 5 + 0.2 * 1 + 0.6 * 2 = 6.4; X'_1 = 10 + 0.8 * 1 + 0.4 * 2 = 11.6.
  Tensor streams = floats({1, 2, 1}, {1, 2});
  Tensor y = floats({1, 1}, {10});
  Tensor post = floats({1, 2}, {0.5, 1});
  Tensor comb = floats({1, 2, 2}, {0.2f, 0.8f, 0.6f, 0.4f});
  EXPECT_TRUE(allClose(mhcPost(streams, y, post, comb), {6.4, 11.6}, 1e-6));
}

} // namespace
