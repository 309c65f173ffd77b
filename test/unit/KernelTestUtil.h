//===- KernelTestUtil.h - Helpers the CPU kernel tests share ----*- C++ -*-===//
//
// Seeded random inputs and the relative comparison the CPU kernel tests
// (CpuKernelsTest, CpuKdaTest) hold kernels to against the reference; the
// column-view helpers CudaKernelsTest shares.
//
//===----------------------------------------------------------------------===//

#ifndef DAYBREAK_TEST_UNIT_KERNELTESTUTIL_H
#define DAYBREAK_TEST_UNIT_KERNELTESTUTIL_H

#include "gtest/gtest.h"

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

namespace daybreak::test {

/// n values uniform in [lo, hi).
inline std::vector<float> randomFloats(std::mt19937 &rng, int64_t n,
                                       float lo = -1.0f, float hi = 1.0f) {
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float &x : v)
    x = dist(rng);
  return v;
}

/// Columns [column, column + cols) of each row of `wide` (rows of
/// `stride` values), densely: what a column view holds.
inline std::vector<float> columnsOf(const std::vector<float> &wide,
                                    int64_t stride, int64_t column,
                                    int64_t cols) {
  std::vector<float> dense;
  for (size_t r = 0; r < wide.size() / stride; ++r)
    dense.insert(dense.end(), wide.begin() + r * stride + column,
                 wide.begin() + r * stride + column + cols);
  return dense;
}

/// Whether `wide` (rows of `stride`) still holds `sentinel` outside columns
/// [column, column + cols) of every row: a kernel writing a column view
/// wrote nothing else.
inline bool untouchedOutside(const std::vector<float> &wide, int64_t stride,
                             int64_t column, int64_t cols, float sentinel) {
  for (size_t i = 0; i < wide.size(); ++i) {
    int64_t c = int64_t(i % stride);
    if ((c < column || c >= column + cols) && wide[i] != sentinel)
      return false;
  }
  return true;
}

/// max |actual - expected| <= tolerance * max(max |expected|, 1e-30); a NaN
/// fails.
inline ::testing::AssertionResult relClose(const std::vector<float> &actual,
                                           const std::vector<float> &expected,
                                           double tolerance) {
  if (actual.size() != expected.size())
    return ::testing::AssertionFailure()
           << actual.size() << " values vs " << expected.size();
  double scale = 1e-30, worst = 0.0;
  size_t at = 0;
  for (float e : expected)
    scale = std::max(scale, std::fabs(double(e)));
  for (size_t i = 0; i < actual.size(); ++i) {
    double diff = std::fabs(double(actual[i]) - expected[i]);
    if (!(diff <= worst) || std::isnan(diff)) {
      worst = std::isnan(diff) ? INFINITY : diff;
      at = i;
    }
  }
  if (worst <= tolerance * scale)
    return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << "element " << at << ": " << actual[at] << " vs " << expected[at]
         << ", relative error " << worst / scale << " > " << tolerance;
}

} // namespace daybreak::test

#endif // DAYBREAK_TEST_UNIT_KERNELTESTUTIL_H
