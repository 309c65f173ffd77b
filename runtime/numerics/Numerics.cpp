//===- Numerics.cpp - Codecs for the narrow floating-point formats --------===//
//
// bfloat16 uses the usual bit trick on the IEEE single. The other formats
// share one generic minifloat encoder: it rounds the magnitude in double (every
// float and every grid point is exact there) and then packs exponent and
// mantissa fields, so the rounding rule is written once.
//
//===----------------------------------------------------------------------===//

#include "runtime/numerics/Numerics.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

namespace daybreak::numerics {

namespace {

uint32_t floatBits(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  return bits;
}

float bitsToFloat(uint32_t bits) {
  float value;
  std::memcpy(&value, &bits, sizeof(value));
  return value;
}

/// A sign-magnitude binary format with an exponent bias and `mantBits`
/// explicit mantissa bits; exponent field 0 holds subnormals.
struct Minifloat {
  int mantBits;
  int bias;
  /// Largest finite magnitude.
  double maxValue;
  /// Position of the sign bit.
  int signBit;
};

constexpr Minifloat kF16 = {10, 15, 65504.0, 15};
constexpr Minifloat kE4m3 = {3, 7, 448.0, 7};
constexpr Minifloat kE2m1 = {1, 1, 6.0, 3};

/// Decodes a finite code (the caller filters NaN and infinity patterns).
double decodeFinite(const Minifloat &format, uint32_t bits) {
  uint32_t mantMask = (1u << format.mantBits) - 1;
  uint32_t mant = bits & mantMask;
  int exp = static_cast<int>((bits >> format.mantBits) &
                             ((1u << (format.signBit - format.mantBits)) - 1));
  double magnitude =
      exp == 0 ? std::ldexp(static_cast<double>(mant),
                            1 - format.bias - format.mantBits)
               : std::ldexp(static_cast<double>(mant | (mantMask + 1)),
                            exp - format.bias - format.mantBits);
  return (bits >> format.signBit) & 1 ? -magnitude : magnitude;
}

/// Rounds |value| to nearest-even on the format's grid, without any overflow
/// handling: the result may exceed maxValue.
double roundMagnitude(const Minifloat &format, double magnitude) {
  if (magnitude == 0.0)
    return 0.0;
  int exp;
  std::frexp(magnitude, &exp); // magnitude = m * 2^exp, m in [0.5, 1)
  int minNormalExp = 1 - format.bias;
  int unbiased = std::max(exp - 1, minNormalExp);
  // The grid spacing within the binade; below the normals it stays fixed.
  double quantum = std::ldexp(1.0, unbiased - format.mantBits);
  // nearbyint uses the default rounding mode, round-to-nearest-even.
  return std::nearbyint(magnitude / quantum) * quantum;
}

/// Packs a magnitude that is already on the format's grid and <= maxValue.
uint32_t encodeMagnitude(const Minifloat &format, double magnitude) {
  int minNormalExp = 1 - format.bias;
  if (magnitude < std::ldexp(1.0, minNormalExp))
    return static_cast<uint32_t>(
        std::ldexp(magnitude, format.mantBits - minNormalExp));
  int exp;
  double fraction = std::frexp(magnitude, &exp); // [0.5, 1)
  uint32_t mant =
      static_cast<uint32_t>(std::ldexp(fraction * 2.0 - 1.0, format.mantBits));
  uint32_t biased = static_cast<uint32_t>(exp - 1 + format.bias);
  return (biased << format.mantBits) | mant;
}

uint32_t signOf(const Minifloat &format, float value) {
  return std::signbit(value) ? 1u << format.signBit : 0u;
}

/// splitmix64's finalizer: a bijection of 64 bits that mixes well.
uint64_t mix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

} // namespace

float bf16ToFloat(uint16_t bits) {
  return bitsToFloat(static_cast<uint32_t>(bits) << 16);
}

uint16_t floatToBf16(float value) {
  uint32_t bits = floatBits(value);
  if (std::isnan(value))
    return static_cast<uint16_t>((bits >> 16) | 0x0040);
  // Adding 0x7FFF plus the lowest kept bit rounds to nearest, ties to even;
  // a carry out of the mantissa correctly bumps the exponent (up to inf).
  uint32_t lsb = (bits >> 16) & 1;
  return static_cast<uint16_t>((bits + 0x7FFF + lsb) >> 16);
}

double OperandRounding::uniform(uint64_t index) const {
  uint64_t bits = mix64(seed ^ mix64(stream ^ mix64(index)));
  return 2 * (double(bits >> 11) * 0x1.0p-53) - 1; // [0, 1) -> [-1, 1)
}

float OperandRounding::e4m3(float value, uint64_t index) const {
  if (mode == Mode::Nearest)
    return roundToE4m3(value);
  if (mode != Mode::Noise)
    return value;
  double d = uniform(index);
  if (std::fabs(value) >= 0x1p-6)
    return float(double(value) * (1 + 0x1p-4 * d));
  return float(double(value) + 0x1p-10 * d);
}

float f16ToFloat(uint16_t bits) {
  uint32_t sign = bits & 0x8000;
  if ((bits & 0x7C00) == 0x7C00) {
    if (bits & 0x03FF)
      return std::numeric_limits<float>::quiet_NaN();
    return sign ? -std::numeric_limits<float>::infinity()
                : std::numeric_limits<float>::infinity();
  }
  return static_cast<float>(decodeFinite(kF16, bits));
}

uint16_t floatToF16(float value) {
  uint32_t sign = signOf(kF16, value);
  if (std::isnan(value))
    return static_cast<uint16_t>(sign | 0x7E00);
  double rounded = roundMagnitude(kF16, std::fabs(value));
  if (rounded > kF16.maxValue)
    return static_cast<uint16_t>(sign | 0x7C00);
  return static_cast<uint16_t>(sign | encodeMagnitude(kF16, rounded));
}

float e4m3ToFloat(uint8_t bits) {
  if ((bits & 0x7F) == 0x7F)
    return std::numeric_limits<float>::quiet_NaN();
  return static_cast<float>(decodeFinite(kE4m3, bits));
}

uint8_t floatToE4m3(float value, bool saturate) {
  uint32_t sign = signOf(kE4m3, value);
  if (std::isnan(value))
    return static_cast<uint8_t>(sign | 0x7F);
  double rounded = roundMagnitude(kE4m3, std::fabs(value));
  // Like PyTorch, only magnitudes that round past 448 (those above 464) are
  // out of range; 448 < |value| <= 464 rounds down to 448.
  if (rounded > kE4m3.maxValue) {
    if (!saturate)
      return static_cast<uint8_t>(sign | 0x7F);
    rounded = kE4m3.maxValue;
  }
  return static_cast<uint8_t>(sign | encodeMagnitude(kE4m3, rounded));
}

float e2m1ToFloat(uint8_t code) {
  return static_cast<float>(decodeFinite(kE2m1, code & 0xF));
}

uint8_t floatToE2m1(float value) {
  // E2M1 has no NaN; a NaN input encodes as +0 rather than a made-up value.
  if (std::isnan(value))
    return 0;
  uint32_t sign = signOf(kE2m1, value);
  double rounded =
      std::min(roundMagnitude(kE2m1, std::fabs(value)), kE2m1.maxValue);
  return static_cast<uint8_t>(sign | encodeMagnitude(kE2m1, rounded));
}

float e8m0ToFloat(uint8_t bits) {
  if (bits == 0xFF)
    return std::numeric_limits<float>::quiet_NaN();
  return std::ldexp(1.0f, static_cast<int>(bits) - 127);
}

} // namespace daybreak::numerics
