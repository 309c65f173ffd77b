//===- TestUtils.h - Shared helpers of the reference kernel tests -*- C++
//-*-===//
//
// Seeded random tensors and max-abs-diff comparisons. Everything is
// deterministic: each test owns its std::mt19937 with a fixed seed.
//
//===----------------------------------------------------------------------===//

#ifndef DAYBREAK_TEST_UNIT_REFERENCE_TESTUTILS_H
#define DAYBREAK_TEST_UNIT_REFERENCE_TESTUTILS_H

#include "compiler/reference/Tensor.h"

#include "llvm/Support/Error.h"

#include "gtest/gtest.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

namespace daybreak::ref::test {

/// An F32 tensor of uniform values in [lo, hi).
inline Tensor randomTensor(std::mt19937 &rng, std::vector<int64_t> shape,
                           float lo = -1.0f, float hi = 1.0f) {
  Tensor t = Tensor::zeros(ElementType::F32, std::move(shape));
  std::uniform_real_distribution<float> dist(lo, hi);
  for (float &value : t.floats())
    value = dist(rng);
  return t;
}

inline double maxAbsDiff(const std::vector<float> &a,
                         const std::vector<float> &b) {
  double worst = 0.0;
  for (size_t i = 0; i < a.size(); ++i)
    worst = std::max(worst, std::fabs(static_cast<double>(a[i]) - b[i]));
  return worst;
}

inline double maxAbs(const std::vector<float> &a) {
  double worst = 0.0;
  for (float value : a)
    worst = std::max(worst, std::fabs(static_cast<double>(value)));
  return worst;
}

/// Same shape and every |actual - expected| <= tolerance.
inline ::testing::AssertionResult
allClose(const Tensor &actual, const Tensor &expected, double tolerance) {
  if (actual.shape() != expected.shape())
    return ::testing::AssertionFailure()
           << "shape " << actual.describe() << " vs " << expected.describe();
  for (size_t i = 0; i < actual.floats().size(); ++i) {
    double diff = std::fabs(static_cast<double>(actual.floats()[i]) -
                            expected.floats()[i]);
    // The negated compare also catches NaN.
    if (!(diff <= tolerance))
      return ::testing::AssertionFailure()
             << "element " << i << ": " << actual.floats()[i] << " vs "
             << expected.floats()[i] << " (tolerance " << tolerance << ")";
  }
  return ::testing::AssertionSuccess();
}

/// Element-wise compare against a plain list of expected values.
inline ::testing::AssertionResult allClose(const Tensor &actual,
                                           const std::vector<double> &expected,
                                           double tolerance) {
  if (actual.floats().size() != expected.size())
    return ::testing::AssertionFailure()
           << actual.describe() << " has " << actual.floats().size()
           << " values, expected " << expected.size();
  for (size_t i = 0; i < expected.size(); ++i) {
    double diff = std::fabs(actual.floats()[i] - expected[i]);
    if (!(diff <= tolerance))
      return ::testing::AssertionFailure()
             << "element " << i << ": " << actual.floats()[i] << " vs "
             << expected[i] << " (tolerance " << tolerance << ")";
  }
  return ::testing::AssertionSuccess();
}

/// The value of an Expected that must succeed; a failure is reported and an
/// empty tensor returned.
inline Tensor takeValue(llvm::Expected<Tensor> result) {
  if (!result) {
    ADD_FAILURE() << "unexpected error: " << llvm::toString(result.takeError());
    return Tensor();
  }
  return std::move(*result);
}

/// The message of an Expected that must fail ("" if it succeeded).
inline std::string errorMessage(llvm::Expected<Tensor> result) {
  if (result) {
    ADD_FAILURE() << "expected an error";
    return "";
  }
  return llvm::toString(result.takeError());
}

inline Tensor floats(std::vector<int64_t> shape, std::vector<float> values) {
  return Tensor::fromFloats(std::move(shape), std::move(values));
}

inline Tensor ints(std::vector<int64_t> shape, std::vector<int64_t> values) {
  return Tensor::fromInts(std::move(shape), std::move(values));
}

} // namespace daybreak::ref::test

#endif // DAYBREAK_TEST_UNIT_REFERENCE_TESTUTILS_H
