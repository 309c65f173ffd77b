//===- NumericsTest.cpp - Bit-exact tests of the narrow-format codecs -----===//

#include "runtime/numerics/Numerics.h"

#include "gtest/gtest.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

using namespace daybreak::numerics;

namespace {

uint32_t bitsOf(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  return bits;
}

float fromBits(uint32_t bits) {
  float value;
  std::memcpy(&value, &bits, sizeof(value));
  return value;
}

/// models.md §3.1, written out independently of the codec.
const float kE2m1Table[16] = {0.0f,  0.5f,  1.0f,  1.5f,  2.0f,  3.0f,
                              4.0f,  6.0f,  -0.0f, -0.5f, -1.0f, -1.5f,
                              -2.0f, -3.0f, -4.0f, -6.0f};

//===----------------------------------------------------------------------===//
// bfloat16
//===----------------------------------------------------------------------===//

TEST(Bf16, HandPickedTiesRoundToEven) {
  EXPECT_EQ(floatToBf16(1.0f), 0x3F80);
  // 1 + 2^-8 is halfway between 0x3F80 (even) and 0x3F81.
  EXPECT_EQ(floatToBf16(fromBits(0x3F808000)), 0x3F80);
  // 1 + 3 * 2^-8 is halfway between 0x3F81 and 0x3F82 (even).
  EXPECT_EQ(floatToBf16(fromBits(0x3F818000)), 0x3F82);
  // Just above a tie rounds up.
  EXPECT_EQ(floatToBf16(fromBits(0x3F808001)), 0x3F81);
  EXPECT_EQ(floatToBf16(-2.0f), 0xC000);
  // The largest float rounds up to infinity.
  EXPECT_EQ(floatToBf16(fromBits(0x7F7FFFFF)), 0x7F80);
  EXPECT_TRUE(std::isnan(bf16ToFloat(floatToBf16(NAN))));
  EXPECT_EQ(bf16ToFloat(0x4049), 3.140625f);
}

TEST(Bf16, EveryPatternRoundTrips) {
  for (uint32_t bits = 0; bits < 0x10000; ++bits) {
    float value = bf16ToFloat(static_cast<uint16_t>(bits));
    EXPECT_EQ(bitsOf(value), bits << 16);
    if (!std::isnan(value)) {
      EXPECT_EQ(floatToBf16(value), bits) << std::hex << bits;
    }
  }
}

//===----------------------------------------------------------------------===//
// IEEE half
//===----------------------------------------------------------------------===//

TEST(F16, HandPickedValuesAndTies) {
  EXPECT_EQ(floatToF16(1.0f), 0x3C00);
  EXPECT_EQ(floatToF16(65504.0f), 0x7BFF);
  // 65520 is halfway between 65504 (odd mantissa) and 65536 (= overflow).
  EXPECT_EQ(floatToF16(65519.0f), 0x7BFF);
  EXPECT_EQ(floatToF16(65520.0f), 0x7C00);
  EXPECT_EQ(floatToF16(-INFINITY), 0xFC00);
  // 1 + 2^-11 ties to 0x3C00; 1 + 3 * 2^-11 ties to 0x3C02.
  EXPECT_EQ(floatToF16(1.0f + std::ldexp(1.0f, -11)), 0x3C00);
  EXPECT_EQ(floatToF16(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3C02);
  // Subnormals: 2^-24 is the smallest; 2^-25 ties to 0, 1.5 * 2^-24 to 2.
  EXPECT_EQ(floatToF16(std::ldexp(1.0f, -24)), 0x0001);
  EXPECT_EQ(floatToF16(std::ldexp(1.0f, -25)), 0x0000);
  EXPECT_EQ(floatToF16(-std::ldexp(1.0f, -25)), 0x8000);
  EXPECT_EQ(floatToF16(1.5f * std::ldexp(1.0f, -24)), 0x0002);
  EXPECT_EQ(floatToF16(std::ldexp(1.0f, -14)), 0x0400);
  EXPECT_EQ(f16ToFloat(0x3555), 0.333251953125f);
  EXPECT_TRUE(std::isnan(f16ToFloat(floatToF16(NAN))));
}

TEST(F16, EveryPatternRoundTrips) {
  for (uint32_t bits = 0; bits < 0x10000; ++bits) {
    float value = f16ToFloat(static_cast<uint16_t>(bits));
    bool nan = (bits & 0x7C00) == 0x7C00 && (bits & 0x3FF);
    EXPECT_EQ(std::isnan(value), nan) << std::hex << bits;
    if (!nan) {
      EXPECT_EQ(floatToF16(value), bits) << std::hex << bits;
    }
  }
}

//===----------------------------------------------------------------------===//
// FP8 E4M3FN
//===----------------------------------------------------------------------===//

TEST(E4m3, DecodesEveryByte) {
  for (int byte = 0; byte < 256; ++byte) {
    int exp = (byte >> 3) & 0xF, mant = byte & 7;
    float value = e4m3ToFloat(static_cast<uint8_t>(byte));
    if (exp == 15 && mant == 7) {
      EXPECT_TRUE(std::isnan(value)) << byte;
      continue;
    }
    // Bias 7; exponent field 0 holds subnormals mant * 2^-9.
    double magnitude =
        exp == 0 ? std::ldexp(mant, -9) : std::ldexp(8 + mant, exp - 7 - 3);
    double expected = byte & 0x80 ? -magnitude : magnitude;
    EXPECT_EQ(value, expected) << byte;
  }
  EXPECT_EQ(e4m3ToFloat(0x7E), 448.0f);
  EXPECT_EQ(e4m3ToFloat(0x38), 1.0f);
  EXPECT_EQ(e4m3ToFloat(0x01), std::ldexp(1.0f, -9));
  EXPECT_EQ(e4m3ToFloat(0x08), std::ldexp(1.0f, -6));
}

TEST(E4m3, EveryByteRoundTrips) {
  for (int byte = 0; byte < 256; ++byte) {
    if ((byte & 0x7F) == 0x7F)
      continue;
    float value = e4m3ToFloat(static_cast<uint8_t>(byte));
    EXPECT_EQ(floatToE4m3(value), byte) << byte;
    EXPECT_EQ(floatToE4m3(value, /*saturate=*/false), byte) << byte;
  }
}

TEST(E4m3, TiesSaturationAndNan) {
  // 1 + 1/16 is halfway between 1.0 (0x38) and 1.125 (0x39).
  EXPECT_EQ(floatToE4m3(1.0625f), 0x38);
  // 1 + 3/16 is halfway between 1.125 and 1.25 (0x3A, even).
  EXPECT_EQ(floatToE4m3(1.1875f), 0x3A);
  // Subnormal ties: 2^-10 -> 0, 3 * 2^-10 -> 2 * 2^-9.
  EXPECT_EQ(floatToE4m3(std::ldexp(1.0f, -10)), 0x00);
  EXPECT_EQ(floatToE4m3(3 * std::ldexp(1.0f, -10)), 0x02);
  // 464 is halfway between 448 and 480 (the NaN pattern): stays 448.
  EXPECT_EQ(floatToE4m3(464.0f, false), 0x7E);
  EXPECT_EQ(floatToE4m3(500.0f), 0x7E);
  EXPECT_EQ(floatToE4m3(-1000.0f), 0xFE);
  EXPECT_EQ(floatToE4m3(INFINITY), 0x7E);
  EXPECT_EQ(floatToE4m3(500.0f, false), 0x7F);
  EXPECT_EQ(floatToE4m3(-500.0f, false), 0xFF);
  EXPECT_EQ(floatToE4m3(NAN) & 0x7F, 0x7F);
  EXPECT_EQ(roundToE4m3(0.3f), 0.3125f); // 0.3 = 1.2 * 2^-2 -> 1.25 * 2^-2
}

//===----------------------------------------------------------------------===//
// FP4 E2M1 and E8M0 scales
//===----------------------------------------------------------------------===//

TEST(E2m1, TableAndRoundTrip) {
  for (int code = 0; code < 16; ++code) {
    float value = e2m1ToFloat(static_cast<uint8_t>(code));
    EXPECT_EQ(value, kE2m1Table[code]) << code;
    EXPECT_EQ(std::signbit(value), code >= 8) << code;
    EXPECT_EQ(floatToE2m1(value), code) << code;
  }
  // Only the low nibble is read.
  EXPECT_EQ(e2m1ToFloat(0xF7), 6.0f);
}

TEST(E2m1, RoundsToNearestEvenAndSaturates) {
  EXPECT_EQ(roundToE2m1(0.25f), 0.0f); // 0 (even) vs 0.5
  EXPECT_EQ(roundToE2m1(0.75f), 1.0f); // 0.5 vs 1.0 (even)
  EXPECT_EQ(roundToE2m1(1.25f), 1.0f); // 1.0 (even) vs 1.5
  EXPECT_EQ(roundToE2m1(1.75f), 2.0f); // 1.5 vs 2.0 (even)
  EXPECT_EQ(roundToE2m1(2.5f), 2.0f);  // 2 (even) vs 3
  EXPECT_EQ(roundToE2m1(3.5f), 4.0f);  // 3 vs 4 (even)
  EXPECT_EQ(roundToE2m1(5.0f), 4.0f);  // 4 (even) vs 6
  EXPECT_EQ(roundToE2m1(5.1f), 6.0f);
  EXPECT_EQ(roundToE2m1(7.0f), 6.0f); // saturates
  EXPECT_EQ(roundToE2m1(1e30f), 6.0f);
  EXPECT_EQ(floatToE2m1(-5.0f), 14);   // -4
  EXPECT_EQ(floatToE2m1(-100.0f), 15); // -6
}

TEST(E8m0, PowersOfTwoAndNan) {
  EXPECT_EQ(e8m0ToFloat(127), 1.0f);
  EXPECT_EQ(e8m0ToFloat(128), 2.0f);
  EXPECT_EQ(e8m0ToFloat(0), std::ldexp(1.0f, -127));
  EXPECT_EQ(e8m0ToFloat(254), std::ldexp(1.0f, 127));
  EXPECT_TRUE(std::isnan(e8m0ToFloat(255)));
}

TEST(Mxfp4, EveryCodeTimesEveryScaleIsExact) {
  for (int scale = 0; scale < 255; ++scale) {
    for (int code = 0; code < 16; ++code) {
      double product = static_cast<double>(e2m1ToFloat(code)) *
                       e8m0ToFloat(static_cast<uint8_t>(scale));
      double expected =
          std::ldexp(static_cast<double>(kE2m1Table[code]), scale - 127);
      EXPECT_EQ(product, expected) << code << " x " << scale;
      // The fp32 product is exact too wherever it does not overflow
      // (2 * 2^127 and up); subnormal results down to 2^-128 included.
      float single = e2m1ToFloat(code) * e8m0ToFloat(uint8_t(scale));
      if (std::fabs(expected) <= std::numeric_limits<float>::max()) {
        EXPECT_EQ(single, expected) << code << " x " << scale;
      }
    }
  }
}

//===----------------------------------------------------------------------===//
// OperandRounding: the bf16 modes' rounding, and the test's model of it
//===----------------------------------------------------------------------===//

TEST(OperandRounding, ExactKeepsAndNearestEvenRounds) {
  OperandRounding exact, nearest = OperandRounding::nearestEven();
  EXPECT_FALSE(exact);
  EXPECT_TRUE(nearest);
  for (float v : {1.0f + 0x1p-9f, 3.14159265f, -2.5e-3f, 65504.0f}) {
    EXPECT_EQ(bitsOf(exact(v, 7)), bitsOf(v));
    EXPECT_EQ(bitsOf(nearest(v, 7)), bitsOf(roundToBf16(v)));
  }
}

/// The model: v (1 + d), d uniform in [-u, u], u = 2^-8, independent per
/// value, stream and site; reproducible. The sample moments of d over
/// 2^16 values: mean 0 within 5 standard errors (u / sqrt(3 n)), variance
/// u^2 / 3 within 5 of its standard errors (u^2 sqrt(4/45 / n)), extremes
/// within [-u, u] and reaching past 0.99 u.
TEST(OperandRounding, NoiseIsUniformWithinTheUnitRoundoff) {
  const double u = OperandRounding::kUnitRoundoff;
  ASSERT_EQ(u, 0x1p-8);
  OperandRounding noise = OperandRounding::noise(42, 3);
  EXPECT_TRUE(noise);
  const int64_t n = 1 << 16;
  double sum = 0, squares = 0, low = 1, high = -1;
  for (int64_t i = 0; i < n; ++i) {
    float v = 1.0f + float(i % 977) / 1024; // any values: d is relative
    double d = double(noise(v, i)) / v - 1;
    // float(v (1 + d)) adds at most 2^-24 relative.
    ASSERT_LE(std::fabs(d), u * (1 + 0x1p-23)) << i;
    sum += d;
    squares += d * d;
    low = std::min(low, d);
    high = std::max(high, d);
    EXPECT_EQ(bitsOf(noise(v, i)), bitsOf(OperandRounding::noise(42, 3)(v, i)));
  }
  double mean = sum / n, variance = squares / n;
  EXPECT_LT(std::fabs(mean), 5 * u / std::sqrt(3.0 * n));
  EXPECT_LT(std::fabs(variance - u * u / 3),
            5 * u * u * std::sqrt(4.0 / 45 / n));
  EXPECT_LT(low, -0.99 * u);
  EXPECT_GT(high, 0.99 * u);
}

TEST(OperandRounding, StreamsSitesAndSeedsAreIndependent) {
  // Draws of other streams, sites or seeds at the same index agree with
  // this one's no more often than chance (the correlation of d over 2^14
  // values within 5 / sqrt(n) of 0).
  const int64_t n = 1 << 14;
  const float v = 1.0f;
  OperandRounding base = OperandRounding::noise(1, 1);
  for (OperandRounding other :
       {OperandRounding::noise(1, 2), OperandRounding::noise(2, 1),
        base.site(1), base.site(2)}) {
    double cross = 0, a2 = 0, b2 = 0;
    for (int64_t i = 0; i < n; ++i) {
      double a = double(base(v, i)) - 1, b = double(other(v, i)) - 1;
      cross += a * b;
      a2 += a * a;
      b2 += b * b;
    }
    EXPECT_LT(std::fabs(cross / std::sqrt(a2 * b2)), 5 / std::sqrt(double(n)));
  }
}

TEST(OperandRounding, E4m3NearestAndItsModel) {
  OperandRounding nearest = OperandRounding::nearestEven();
  for (float v : {1.0f, 1.0625f, 3.3f, -447.0f, 0.013f, 1e-3f})
    EXPECT_EQ(bitsOf(nearest.e4m3(v, 0)), bitsOf(roundToE4m3(v)));
  // The model: relative within 2^-4 from 2^-6 up, absolute within 2^-10
  // below (half the subnormals' spacing of 2^-9); both reach their bounds.
  OperandRounding noise = OperandRounding::noise(7, 1);
  double worstRelative = 0, worstAbsolute = 0;
  for (int64_t i = 0; i < (1 << 14); ++i) {
    float normal = 0x1p-6f * float(1 + i % 1000), tiny = 0x1p-8f;
    double relative = std::fabs(double(noise.e4m3(normal, i)) / normal - 1);
    double absolute = std::fabs(double(noise.e4m3(tiny, i)) - tiny);
    ASSERT_LE(relative, 0x1p-4 * (1 + 0x1p-20));
    ASSERT_LE(absolute, 0x1p-10 * (1 + 0x1p-20));
    worstRelative = std::max(worstRelative, relative);
    worstAbsolute = std::max(worstAbsolute, absolute);
  }
  EXPECT_GT(worstRelative, 0.99 * 0x1p-4);
  EXPECT_GT(worstAbsolute, 0.99 * 0x1p-10);
}

} // namespace
