//===- Numerics.h - Codecs for the narrow floating-point formats -*- C++ -*-===//
//
// Bit-exact encode/decode for the element formats Daybreak reads from
// checkpoints and stores in artifacts: bfloat16, IEEE half, OCP FP8 E4M3FN,
// OCP FP4 E2M1 (MXFP4 elements) and E8M0 (MX block scales). Shared by the
// compiler (reference evaluator, weight repacking) and the runtime, so it
// depends on nothing but the C++ standard library. All functions are pure and
// thread-safe.
//
//===----------------------------------------------------------------------===//

#ifndef DAYBREAK_RUNTIME_NUMERICS_NUMERICS_H
#define DAYBREAK_RUNTIME_NUMERICS_NUMERICS_H

#include <cstdint>

namespace daybreak::numerics {

/// bfloat16: the upper 16 bits of an IEEE single.
float bf16ToFloat(uint16_t bits);
/// Round-to-nearest-even; NaN stays a (quiet) NaN.
uint16_t floatToBf16(float value);

/// IEEE 754 binary16.
float f16ToFloat(uint16_t bits);
/// Round-to-nearest-even; overflow gives infinity.
uint16_t floatToF16(float value);

/// OCP FP8 E4M3FN: bias 7, no infinities, S.1111.111 is NaN, max 448.
float e4m3ToFloat(uint8_t bits);
/// Round-to-nearest-even. With `saturate`, magnitudes above 448 clamp to
/// +-448; without it the cast follows PyTorch: values that round to 448
/// (up to 464) give 448 and anything beyond is NaN.
uint8_t floatToE4m3(float value, bool saturate = true);

/// OCP FP4 E2M1: a 4-bit code (low nibble), values 0, 0.5, 1, 1.5, 2, 3, 4, 6
/// and their negatives.
float e2m1ToFloat(uint8_t code);
/// Round-to-nearest-even onto the E2M1 grid, saturating at +-6.
uint8_t floatToE2m1(float value);

/// E8M0 (unsigned power-of-two scale): 2^(bits - 127); 255 is NaN.
float e8m0ToFloat(uint8_t bits);

/// Rounds `value` to the nearest representable value of the format and
/// returns it as a float (what a tensor of that type would hold).
inline float roundToBf16(float value) { return bf16ToFloat(floatToBf16(value)); }
inline float roundToF16(float value) { return f16ToFloat(floatToF16(value)); }
/// The E4M3 code of E2M1 code `code` (low 4 bits): the same value, exactly
/// (E2M1's 0, 0.5 .. 6 are E4M3's 0, 2^-1 .. 1.5 x 2^2; the sign bit moves
/// from bit 3 to bit 7). The MXFP4 offline and online routes re-encode with
/// it; docs/mxfp4.md.
inline uint8_t e2m1ToE4m3(uint8_t code) {
  // Magnitudes 0, 0.5, 1, 1.5, 2, 3, 4, 6.
  static constexpr uint8_t kMagnitude[8] = {0x00, 0x30, 0x38, 0x3C,
                                            0x40, 0x44, 0x48, 0x4C};
  return uint8_t(((code & 8) << 4) | kMagnitude[code & 7]);
}
/// How a precision mode rounds an operand: not at all (the exact mode), to
/// nearest even (what the GPU's conversions do), or by the probabilistic
/// model of that rounding which the derived tolerances sample
/// (docs/bf16-tolerance.md), independent for each value of each call (a
/// counter-based hash of seed, stream and index, so a run is reproducible
/// whatever the thread count). To bf16: the value times 1 + d, d uniform in
/// [-2^-8, 2^-8] (bf16's unit roundoff). To e4m3 (FP8 activations, scaled
/// to at most 448 first): times 1 + d, d uniform in [-2^-4, 2^-4], at
/// normal magnitudes (2^-6 and up), plus d 2^-10 with d uniform in [-1, 1]
/// below them (half the subnormals' spacing).
class OperandRounding {
public:
  /// Unit roundoff of bf16 (8 significant bits, round to nearest).
  static constexpr double kUnitRoundoff = 1.0 / 256;

  OperandRounding() = default;
  static OperandRounding nearestEven() {
    return OperandRounding(Mode::Nearest, 0, 0);
  }
  /// Seed non-zero; `stream` names the call (distinct per call and site).
  static OperandRounding noise(uint64_t seed, uint64_t stream) {
    return OperandRounding(Mode::Noise, seed, stream);
  }
  /// Whether values change at all (false in the exact mode).
  explicit operator bool() const { return mode != Mode::Exact; }
  /// A second site of the same call: another, independent stream.
  OperandRounding site(uint64_t k) const {
    OperandRounding r = *this;
    r.stream = stream * 0x9E3779B97F4A7C15ull + k + 1;
    return r;
  }
  /// Value `index` of the call, rounded to bf16.
  float operator()(float value, uint64_t index) const {
    if (mode == Mode::Nearest)
      return roundToBf16(value);
    if (mode == Mode::Noise)
      return float(double(value) * (1 + kUnitRoundoff * uniform(index)));
    return value;
  }
  /// Value `index` of the call (already scaled into e4m3's range), rounded
  /// to e4m3 (saturating).
  float e4m3(float value, uint64_t index) const;

private:
  enum class Mode { Exact, Nearest, Noise };
  OperandRounding(Mode mode, uint64_t seed, uint64_t stream)
      : mode(mode), seed(seed), stream(stream) {}
  /// The draw of value `index`: uniform in [-1, 1).
  double uniform(uint64_t index) const;

  Mode mode = Mode::Exact;
  uint64_t seed = 0, stream = 0;
};

inline float roundToE4m3(float value) { return e4m3ToFloat(floatToE4m3(value)); }
inline float roundToE2m1(float value) { return e2m1ToFloat(floatToE2m1(value)); }

} // namespace daybreak::numerics

#endif // DAYBREAK_RUNTIME_NUMERICS_NUMERICS_H
