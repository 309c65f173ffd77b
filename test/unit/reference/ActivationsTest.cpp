//===- ActivationsTest.cpp - Tests of the reference activations -----------===//

#include "compiler/reference/Kernels.h"
#include "test/unit/reference/TestUtils.h"

#include <cmath>

using namespace daybreak::ref;
using namespace daybreak::ref::test;

namespace {

const double kLn3 = std::log(3.0);

TEST(Sigmoid, HandValuesAndExtremes) {
  // sigmoid(ln 3) = 3 / (3 + 1); sigmoid(-ln 3) = 1 / 4.
  Tensor x = floats({5}, {0, float(kLn3), float(-kLn3), 1000, -1000});
  EXPECT_TRUE(allClose(sigmoid(x), {0.5, 0.75, 0.25, 1, 0}, 1e-7));
}

TEST(Silu, HandValues) {
  Tensor x = floats({3}, {0, float(kLn3), float(-kLn3)});
  EXPECT_TRUE(allClose(silu(x), {0, 0.75 * kLn3, -0.25 * kLn3}, 1e-7));
}

TEST(Swiglu, DeepSeekIsSiluTimesUp) {
  // silu(ln 3) * 2 = 1.5 ln 3; silu(0) * 5 = 0.
  Tensor g = floats({2}, {float(kLn3), 0});
  Tensor u = floats({2}, {2, 5});
  EXPECT_TRUE(
      allClose(swiglu(g, u, 1.0, std::nullopt, 0.0), {1.5 * kLn3, 0}, 1e-6));
}

TEST(Swiglu, GptOssClampsAndOffsets) {
  // gate 10 -> 7, up -9 -> -7, + 1 -> -6: 7 * sigmoid(1.702 * 7) * -6.
  // gate -10 is not clamped from below: -10 * sigmoid(-17.02) * (3 + 1).
  // gate 1, up 10 -> 7 (+1 = 8): 1 * sigmoid(1.702) * 8.
  Tensor g = floats({3}, {10, -10, 1});
  Tensor u = floats({3}, {-9, 3, 10});
  auto sig = [](double x) { return 1.0 / (1.0 + std::exp(-x)); };
  std::vector<double> expected = {7 * sig(1.702 * 7) * -6,
                                  -10 * sig(-17.02) * 4, sig(1.702) * 8};
  EXPECT_TRUE(allClose(swiglu(g, u, 1.702, 7.0, 1.0), expected, 1e-5));
  // Anything beyond the limit gives exactly the value at the limit.
  Tensor gClamped = floats({3}, {7, -10, 1});
  Tensor uClamped = floats({3}, {-7, 3, 7});
  EXPECT_TRUE(allClose(swiglu(g, u, 1.702, 7.0, 1.0),
                       swiglu(gClamped, uClamped, 1.702, 7.0, 1.0), 0.0));
}

TEST(Situ, HandValue) {
  // g = 2 ln 3 = 4 atanh(1/2): 4 tanh(g/4) = 2, sigmoid(g) = 9/10 -> 1.8.
  // u = 25 ln 2 = 25 atanh(3/5): 25 tanh(u/25) = 15. Product 27.
  Tensor g = floats({2}, {float(2 * kLn3), 0});
  Tensor u = floats({2}, {float(25 * std::log(2.0)), 3});
  EXPECT_TRUE(allClose(situ(g, u, 4.0, 25.0), {27, 0}, 1e-4));
}

TEST(Situ, LargeBetaTendsToSwiglu) {
  std::mt19937 rng(7);
  Tensor g = randomTensor(rng, {64}, -6, 6);
  Tensor u = randomTensor(rng, {64}, -6, 6);
  // beta tanh(x / beta) = x - x^3 / (3 beta^2) + ...: ~1e-10 off at 1e6.
  Tensor expected = Tensor::zeros(ElementType::F32, {64});
  for (int i = 0; i < 64; ++i) {
    double x = g.floats()[i];
    expected.floats()[i] = float(x / (1.0 + std::exp(-x)) * u.floats()[i]);
  }
  EXPECT_TRUE(allClose(situ(g, u, 1e6, 1e6), expected, 1e-5));
  // With the real bounds large inputs are soft-clipped: |y| <= 4 * 25.
  Tensor big = floats({1}, {1000});
  EXPECT_LE(maxAbs(situ(big, big, 4.0, 25.0).floats()), 100.0);
}

} // namespace
