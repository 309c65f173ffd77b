//===- Mxfp4TestData.h - MXFP4 experts and their rounding bound -*- C++ -*-===//
//
// What the MXFP4 expert matmul tests share (CpuKernelsTest, CudaKernelsTest,
// Mxfp4CompiledTest): random experts in the stored layout (every E2M1 code,
// chosen E8M0 bytes), their exact values, and the exact result of the
// grouped matmul with the bound on its distance to any fp32 computation of
// it that follows from fp32 rounding alone (no tuned tolerance).
//
// The bound. An fp32 operation rounds with a relative error of at most
// u = 2^-24, or, below the normal range, an absolute error of at most 2^-150
// (half the smallest subnormal). Each term x_i * v_i of a slot's result goes
// through its product, at most 31 additions inside its block of 32 (in any
// order), the block's scale, at most G additions across the G blocks and the
// bias: 32 + G + 2 roundings; a weighted result adds the routing weight's
// product and at most `slots` additions, and the reference evaluator one
// final rounding of its double sum. With n such roundings, |fl(y) - y| <=
// gamma_n * sum |terms|, gamma_n = n u / (1 - n u), for any summation order
// (Higham, Accuracy and Stability of Numerical Algorithms, 2nd ed., lemma
// 3.1 and section 3.1). Underflow adds at most 2^-150 per operation, times
// whatever multiplies its result later (a block scale, a routing weight).
// Plain C++: the runtime tests link no LLVM.
//
//===----------------------------------------------------------------------===//

#ifndef DAYBREAK_TEST_UNIT_MXFP4TESTDATA_H
#define DAYBREAK_TEST_UNIT_MXFP4TESTDATA_H

#include "runtime/numerics/Numerics.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

namespace daybreak::testutil {

/// MXFP4 experts as the checkpoint and the artifact store them.
struct Mxfp4TestExperts {
  int64_t experts = 0, n = 0, k = 0;
  std::vector<uint8_t> values; ///< [E, N, K / 2]: two a byte, low first
  std::vector<uint8_t> scales; ///< [E, N, K / 32]: E8M0 bytes

  uint8_t code(int64_t e, int64_t j, int64_t i) const {
    uint8_t byte = values[((e * n + j) * k + i) / 2];
    return i % 2 ? byte >> 4 : byte & 0xF;
  }
  /// 2^(byte - 127) of the block holding value i (NaN for 255).
  float scale(int64_t e, int64_t j, int64_t i) const {
    return numerics::e8m0ToFloat(scales[(e * n + j) * (k / 32) + i / 32]);
  }
  /// Value (e, j, i) exactly (E2M1 times a power of two is exact in double).
  double at(int64_t e, int64_t j, int64_t i) const {
    return double(numerics::e2m1ToFloat(code(e, j, i))) *
           double(scale(e, j, i));
  }
  /// The unpacked E2M1 values [E, N, K] and scales [E, N, K / 32] as
  /// floats, as the reference evaluator's tensors hold them.
  std::vector<float> codeValues() const {
    std::vector<float> out(experts * n * k);
    for (int64_t e = 0; e < experts; ++e)
      for (int64_t j = 0; j < n; ++j)
        for (int64_t i = 0; i < k; ++i)
          out[(e * n + j) * k + i] = numerics::e2m1ToFloat(code(e, j, i));
    return out;
  }
  std::vector<float> scaleValues() const {
    std::vector<float> out(scales.size());
    for (size_t i = 0; i < scales.size(); ++i)
      out[i] = numerics::e8m0ToFloat(scales[i]);
    return out;
  }
};

/// Random experts: every code equally likely, scale bytes drawn from
/// `exponents` (by default 127 - 8 .. 127 + 8).
inline Mxfp4TestExperts
randomMxfp4Experts(std::mt19937 &rng, int64_t experts, int64_t n, int64_t k,
                   std::vector<uint8_t> exponents = {}) {
  if (exponents.empty())
    for (int b = 127 - 8; b <= 127 + 8; ++b)
      exponents.push_back(uint8_t(b));
  Mxfp4TestExperts w;
  w.experts = experts;
  w.n = n;
  w.k = k;
  std::uniform_int_distribution<int> byte(0, 255);
  std::uniform_int_distribution<size_t> pick(0, exponents.size() - 1);
  w.values.resize(experts * n * k / 2);
  for (uint8_t &b : w.values)
    b = uint8_t(byte(rng));
  w.scales.resize(experts * n * (k / 32));
  for (uint8_t &s : w.scales)
    s = exponents[pick(rng)];
  return w;
}

/// The exact result of the grouped MXFP4 matmul (lm.mxfp4_expert_matmul)
/// and the bound above on each element's distance to an fp32 result.
/// `x` is [T, K] or [T, slots, K] (perSlot), `bias` [E, N] or empty,
/// `routing` [T, slots] or empty (then the result is per slot).
struct Mxfp4Expected {
  std::vector<double> exact, bound;
};

/// `dotRounds` is the roundings of a term inside a slot's dot product: by
/// default 32 + K / 32 (the direct route's block sums, then the blocks);
/// K + 1 for a kernel that widens each weight exactly and sums all K
/// products (the FP8 routes: the product, at most K - 1 additions and the
/// bias).
inline Mxfp4Expected mxfp4Expected(const Mxfp4TestExperts &w,
                                   const std::vector<float> &x, bool perSlot,
                                   const std::vector<float> &bias,
                                   const std::vector<int32_t> &indices,
                                   int64_t tokens, int64_t slots,
                                   const std::vector<float> &routing,
                                   int64_t dotRounds = 0) {
  const double u = std::ldexp(1.0, -24), tiny = std::ldexp(1.0, -150);
  int64_t n = w.n, k = w.k, blocks = k / 32;
  bool weighted = !routing.empty();
  // Roundings along a term's path (see the file comment), and the
  // operations whose underflow can add 2^-150 each.
  double rounds = (dotRounds ? dotRounds : 32 + blocks) + 2 +
                  (weighted ? 1 + slots : 0) + 1;
  double gamma = rounds * u / (1 - rounds * u);
  double ops = double(slots) * (2 * k + 2 * blocks + 4);
  double largestScale = 1.0;
  for (uint8_t s : w.scales)
    if (s != 0xFF)
      largestScale = std::max(largestScale, double(numerics::e8m0ToFloat(s)));
  double largestWeight = 1.0;
  for (float r : routing)
    largestWeight = std::max(largestWeight, double(std::fabs(r)));
  double absolute = ops * tiny * largestScale * largestWeight;

  Mxfp4Expected out;
  int64_t rows = weighted ? tokens : tokens * slots;
  out.exact.assign(rows * n, 0.0);
  out.bound.assign(rows * n, 0.0);
  for (int64_t t = 0; t < tokens; ++t)
    for (int64_t s = 0; s < slots; ++s) {
      int64_t e = indices[t * slots + s];
      int64_t slot = t * slots + s;
      double weight = weighted ? routing[slot] : 1.0;
      int64_t row = weighted ? t : slot;
      if (e < 0)
        continue; // an empty slot adds nothing (per slot: exactly zero)
      const float *in = x.data() + (perSlot ? slot : t) * k;
      for (int64_t j = 0; j < n; ++j) {
        double sum = bias.empty() ? 0.0 : bias[e * n + j];
        double magnitude = std::fabs(sum);
        for (int64_t i = 0; i < k; ++i) {
          double term = double(in[i]) * w.at(e, j, i);
          sum += term;
          magnitude += std::fabs(term);
        }
        out.exact[row * n + j] += weight * sum;
        out.bound[row * n + j] += std::fabs(weight) * magnitude;
      }
    }
  for (double &b : out.bound)
    b = gamma * b + absolute;
  return out;
}

/// The first element where |actual - exact| exceeds `factor` times its
/// bound or NaN-ness differs, or -1.
inline int64_t firstOutOfBound(const std::vector<float> &actual,
                               const Mxfp4Expected &expected,
                               double factor = 1.0) {
  for (size_t i = 0; i < actual.size(); ++i) {
    double e = expected.exact[i];
    if (std::isnan(e) || std::isnan(actual[i])) {
      if (std::isnan(e) != std::isnan(actual[i]))
        return int64_t(i);
      continue;
    }
    if (!(std::fabs(double(actual[i]) - e) <= factor * expected.bound[i]))
      return int64_t(i);
  }
  return -1;
}

} // namespace daybreak::testutil

#endif // DAYBREAK_TEST_UNIT_MXFP4TESTDATA_H
