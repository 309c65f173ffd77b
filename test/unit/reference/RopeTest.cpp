//===- RopeTest.cpp - Tests of the reference RoPE and YaRN ----------------===//

#include "compiler/reference/Kernels.h"
#include "test/unit/reference/TestUtils.h"

#include <cmath>

using namespace daybreak::ref;
using namespace daybreak::ref::test;

namespace {

constexpr double kPi = 3.14159265358979323846;

RopeParams smallParams(RopeStyle style) {
  RopeParams params;
  params.style = style;
  params.dim = 4;
  params.theta = 100.0; // f_0 = 1, f_1 = 100^(-2/4) = 0.1
  return params;
}

TEST(Rope, PositionZeroIsIdentity) {
  std::mt19937 rng(3);
  Tensor x = randomTensor(rng, {3, 2, 10});
  Tensor positions = ints({3}, {0, 0, 0});
  for (RopeStyle style : {RopeStyle::Interleaved, RopeStyle::HalfSplit}) {
    RopeParams params;
    params.style = style;
    params.offset = 2;
    params.dim = 8;
    params.yarn = YarnParams{40.0, 4096, 32.0, 1.0, 1.0, true};
    EXPECT_TRUE(allClose(rope(x, positions, params), x, 0.0));
  }
}

TEST(Rope, InterleavedVsHalfSplitByHand) {
  // x = [1, 2, 3, 4] at position 1: angles 1 (pair 0) and 0.1 (pair 1).
  Tensor x = floats({1, 4}, {1, 2, 3, 4});
  Tensor positions = ints({1}, {1});
  double c0 = std::cos(1.0), s0 = std::sin(1.0);
  double c1 = std::cos(0.1), s1 = std::sin(0.1);
  // Interleaved pairs (0, 1) and (2, 3).
  EXPECT_TRUE(allClose(
      rope(x, positions, smallParams(RopeStyle::Interleaved)),
      {1 * c0 - 2 * s0, 2 * c0 + 1 * s0, 3 * c1 - 4 * s1, 4 * c1 + 3 * s1},
      1e-6));
  // Half-split pairs (0, 2) and (1, 3).
  EXPECT_TRUE(allClose(
      rope(x, positions, smallParams(RopeStyle::HalfSplit)),
      {1 * c0 - 3 * s0, 2 * c1 - 4 * s1, 3 * c0 + 1 * s0, 4 * c1 + 2 * s1},
      1e-6));
}

TEST(Rope, OffsetHeadsAndPositionsPerToken) {
  // [T=2, H=2, 6]: dims 0..1 pass through, 2..5 rotate by the token's
  // position; both heads of a token rotate alike.
  std::mt19937 rng(4);
  Tensor x = randomTensor(rng, {2, 2, 6});
  Tensor positions = ints({2}, {3, 7});
  RopeParams params = smallParams(RopeStyle::HalfSplit);
  params.offset = 2;
  Tensor y = rope(x, positions, params);
  for (int64_t t = 0; t < 2; ++t) {
    double p = t ? 7 : 3;
    for (int64_t h = 0; h < 2; ++h) {
      const float *in = x.floats().data() + (t * 2 + h) * 6;
      const float *out = y.floats().data() + (t * 2 + h) * 6;
      EXPECT_EQ(out[0], in[0]);
      EXPECT_EQ(out[1], in[1]);
      for (int i = 0; i < 2; ++i) {
        double angle = p * (i ? 0.1 : 1.0);
        double a = in[2 + i], b = in[4 + i];
        EXPECT_NEAR(out[2 + i], a * std::cos(angle) - b * std::sin(angle),
                    1e-6);
        EXPECT_NEAR(out[4 + i], b * std::cos(angle) + a * std::sin(angle),
                    1e-6);
      }
    }
  }
}

TEST(Rope, AttentionFactorScalesCosAndSin) {
  Tensor x = floats({1, 4}, {1, 2, 3, 4});
  RopeParams params = smallParams(RopeStyle::Interleaved);
  params.yarn = YarnParams{1.0, 4096, 32.0, 1.0, 2.0, true};
  EXPECT_TRUE(allClose(rope(x, ints({1}, {0}), params), {2, 4, 6, 8}, 0.0));
}

double deepSeekCorrection(double rotations) {
  // corr(n) = d ln(4096 / (2 pi n)) / (2 ln base), models.md §1.4.
  return 64 * std::log(4096 / (2 * kPi * rotations)) / (2 * std::log(1e4));
}

TEST(Rope, YarnDeepSeekRamp) {
  // low = floor(corr(32)) = floor(10.47) = 10, high = ceil(corr(1)) =
  // ceil(22.51) = 23.
  EXPECT_EQ(std::floor(deepSeekCorrection(32)), 10);
  EXPECT_EQ(std::ceil(deepSeekCorrection(1)), 23);

  RopeParams params;
  params.style = RopeStyle::Interleaved;
  params.dim = 64;
  params.theta = 1e4;
  params.yarn = YarnParams{40.0, 4096, 32.0, 1.0, 1.0, true};
  std::vector<double> freqs = ropeFrequencies(params);
  ASSERT_EQ(freqs.size(), 32u);
  for (int i = 0; i < 32; ++i) {
    double base = std::pow(1e4, -i / 32.0);
    // ramp_i = clamp((i - 10) / 13, 0, 1) blends f and f / 40.
    double ramp = std::min(std::max((i - 10) / 13.0, 0.0), 1.0);
    double expected = base * (1 - ramp) + base / 40 * ramp;
    EXPECT_NEAR(freqs[i], expected, 1e-12 * base) << i;
  }
  EXPECT_EQ(freqs[0], 1.0);
  EXPECT_NEAR(freqs[10], std::pow(1e4, -10 / 32.0), 1e-15);
  EXPECT_NEAR(freqs[23], std::pow(1e4, -23 / 32.0) / 40, 1e-15);
  EXPECT_NEAR(freqs[31], std::pow(1e4, -31 / 32.0) / 40, 1e-15);
}

TEST(Rope, YarnWithoutTruncation) {
  // gpt-oss style: the ramp runs over [10.47, 22.51] unrounded.
  RopeParams params;
  params.dim = 64;
  params.theta = 1e4;
  params.yarn = YarnParams{40.0, 4096, 32.0, 1.0, 1.0, false};
  std::vector<double> freqs = ropeFrequencies(params);
  double low = deepSeekCorrection(32), high = deepSeekCorrection(1);
  for (int i : {10, 11, 16, 22, 23}) {
    double base = std::pow(1e4, -i / 32.0);
    double ramp = std::min(std::max((i - low) / (high - low), 0.0), 1.0);
    EXPECT_NEAR(freqs[i], base * (1 - ramp) + base / 40 * ramp, 1e-12) << i;
  }
  // Pair 11 now sits further from the start of the ramp than with
  // truncation, so it is less interpolated.
  params.yarn->truncate = true;
  EXPECT_GT(freqs[11], ropeFrequencies(params)[11]);
}

} // namespace
