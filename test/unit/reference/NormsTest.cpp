//===- NormsTest.cpp - Tests of the reference normalisations --------------===//

#include "compiler/reference/Kernels.h"
#include "test/unit/reference/TestUtils.h"

#include <cmath>

using namespace daybreak::ref;
using namespace daybreak::ref::test;

namespace {

TEST(RmsNorm, HandValues) {
  // Row 0: mean(x^2) = (9 + 16) / 4 = 6.25, rms 2.5 -> [1.2, 1.6, 0, 0].
  // Row 1: [2, -2, 2, -2] has rms 2 -> [1, -1, 1, -1]. Then * weight.
  Tensor x = floats({2, 4}, {3, 4, 0, 0, 2, -2, 2, -2});
  Tensor w = floats({4}, {1, 2, 3, 0.5});
  EXPECT_TRUE(
      allClose(rmsNorm(x, w, 0.0), {1.2, 3.2, 0, 0, 1, -2, 3, -0.5}, 1e-6));
}

TEST(RmsNorm, EpsIsAddedToTheMeanSquare) {
  // mean(x^2) = 1, + eps 3 = 4 -> divide by 2.
  Tensor x = floats({1, 2}, {1, -1});
  EXPECT_TRUE(allClose(rmsNorm(x, Tensor(), 3.0), {0.5, -0.5}, 1e-7));
}

TEST(RmsNorm, EmptyWeightEqualsOnesAndRank3Works) {
  std::mt19937 rng(1);
  Tensor x = randomTensor(rng, {2, 3, 8}, -3, 3);
  Tensor ones = floats({8}, std::vector<float>(8, 1.0f));
  Tensor y = rmsNorm(x, Tensor(), 1e-6);
  EXPECT_EQ(y.shape(), x.shape());
  EXPECT_TRUE(allClose(y, rmsNorm(x, ones, 1e-6), 0.0));
  // Every normalised row has mean square ~1 (eps is negligible here).
  for (int64_t r = 0; r < 6; ++r) {
    double sum = 0;
    for (int64_t i = 0; i < 8; ++i)
      sum += y.floats()[r * 8 + i] * y.floats()[r * 8 + i];
    EXPECT_NEAR(sum / 8, 1.0, 1e-5);
  }
}

TEST(LayerNorm, HandValues) {
  // [1, 3]: mean 2, biased variance 1 -> [-1, 1]; * w + b.
  // [0, 4]: mean 2, variance 4, + eps 0 -> [-1, 1] as well.
  Tensor x = floats({2, 2}, {1, 3, 0, 4});
  Tensor w = floats({2}, {2, 3});
  Tensor b = floats({2}, {0.5, -1});
  EXPECT_TRUE(allClose(layerNorm(x, w, b, 0.0), {-1.5, 2, -1.5, 2}, 1e-6));
  // No bias; eps 3 on variance 1 -> divide by 2.
  Tensor one = floats({1, 2}, {1, 3});
  EXPECT_TRUE(allClose(layerNorm(one, w, Tensor(), 3.0), {-1, 1.5}, 1e-6));
}

TEST(GatedRmsNorm, SigmoidAndSiluGates) {
  // rmsNorm([3, 4, 0, 0]) = [1.2, 1.6, 0, 0]; sigmoid(0) = 1/2,
  // sigmoid(ln 3) = 3/4; silu(g) = g * sigmoid(g).
  Tensor x = floats({1, 4}, {3, 4, 0, 0});
  double ln3 = std::log(3.0);
  Tensor gate = floats({1, 4}, {0, float(ln3), 5, 5});
  Tensor w = floats({4}, {1, 2, 1, 1});
  EXPECT_TRUE(allClose(gatedRmsNorm(x, gate, w, 0.0, GateActivation::Sigmoid),
                       {1.2 * 0.5, 3.2 * 0.75, 0, 0}, 1e-6));
  EXPECT_TRUE(allClose(gatedRmsNorm(x, gate, w, 0.0, GateActivation::Silu),
                       {0.0, 3.2 * 0.75 * ln3, 0, 0}, 1e-6));
}

} // namespace
