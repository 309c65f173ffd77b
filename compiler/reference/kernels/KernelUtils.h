//===- KernelUtils.h - Private helpers of the reference kernels -*- C++ -*-===//
//
// Scalar activations in double, row bookkeeping over the last dim, integer
// operand access and the deterministic top-k shared by routing and DSA.
//
//===----------------------------------------------------------------------===//

#ifndef DAYBREAK_COMPILER_REFERENCE_KERNELS_KERNELUTILS_H
#define DAYBREAK_COMPILER_REFERENCE_KERNELS_KERNELUTILS_H

#include "compiler/reference/Tensor.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

namespace daybreak::ref::detail {

/// Written so that exp never overflows for either sign.
inline double sigmoidOf(double x) {
  if (x >= 0.0)
    return 1.0 / (1.0 + std::exp(-x));
  double e = std::exp(x);
  return e / (1.0 + e);
}

inline double siluOf(double x) { return x * sigmoidOf(x); }

/// log(1 + e^x) without overflow for large x.
inline double softplusOf(double x) {
  return x > 0.0 ? x + std::log1p(std::exp(-x)) : std::log1p(std::exp(x));
}

/// Number of rows when the last dim is the reduced/feature dim.
inline int64_t rowsOf(const Tensor &x) {
  int64_t last = x.rank() ? x.dim(-1) : 1;
  return last ? x.numel() / last : 0;
}

inline std::vector<int64_t> withLastDim(std::vector<int64_t> shape,
                                        int64_t last) {
  shape.back() = last;
  return shape;
}

/// Integer operands (ids, positions, slots) may arrive as integer or float
/// tensors; both read as int64_t.
inline int64_t intAt(const Tensor &t, int64_t i) {
  return t.isFloat() ? static_cast<int64_t>(t.floats()[i]) : t.ints()[i];
}

/// The `k` best of `candidates` by descending score, ties to the lower index,
/// best first. NaN ranks below every number so the order stays total.
inline std::vector<int64_t> selectTopK(const std::vector<double> &scores,
                                       std::vector<int64_t> candidates,
                                       int64_t k) {
  auto key = [&](int64_t i) {
    double s = scores[i];
    return std::isnan(s) ? -std::numeric_limits<double>::infinity() : s;
  };
  auto better = [&](int64_t a, int64_t b) {
    double sa = key(a), sb = key(b);
    if (sa != sb)
      return sa > sb;
    // Equal scores (including NaN vs -inf) fall back to the index.
    return a < b;
  };
  k = std::clamp<int64_t>(k, 0, candidates.size());
  std::partial_sort(candidates.begin(), candidates.begin() + k,
                    candidates.end(), better);
  candidates.resize(k);
  return candidates;
}

} // namespace daybreak::ref::detail

#endif // DAYBREAK_COMPILER_REFERENCE_KERNELS_KERNELUTILS_H
