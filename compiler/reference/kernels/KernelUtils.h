//===- KernelUtils.h - Private helpers of the reference kernels -*- C++ -*-===//
//
// Scalar activations in double, row bookkeeping over the last dim, integer
// operand access and the deterministic top-k shared by routing and DSA.
//
//===----------------------------------------------------------------------===//

#ifndef DAYBREAK_COMPILER_REFERENCE_KERNELS_KERNELUTILS_H
#define DAYBREAK_COMPILER_REFERENCE_KERNELS_KERNELUTILS_H

#include "compiler/reference/Tensor.h"

#include "llvm/Support/Error.h"

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

/// Checks that every entry of a [rows, slots] index tensor lies in
/// [-1, limit) (-1 marks an empty slot). The message reads
/// "<what> X at <row> T, slot S is outside [-1, limit)".
inline llvm::Error checkSlotIndices(const Tensor &indices, int64_t limit,
                                    const char *what, const char *row) {
  int64_t rows = indices.dim(0), slots = indices.dim(1);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t s = 0; s < slots; ++s) {
      int64_t index = intAt(indices, r * slots + s);
      if (index < -1 || index >= limit)
        return llvm::createStringError(
            llvm::inconvertibleErrorCode(),
            "%s %lld at %s %lld, slot %lld is outside [-1, %lld)", what,
            static_cast<long long>(index), row, static_cast<long long>(r),
            static_cast<long long>(s), static_cast<long long>(limit));
    }
  return llvm::Error::success();
}

/// Checks a `sequences [T]` operand against `batches` cache sequences.
inline llvm::Error checkSequences(const Tensor &sequences, int64_t batches,
                                  const char *what) {
  for (int64_t t = 0, n = sequences.numel(); t < n; ++t) {
    int64_t seq = intAt(sequences, t);
    if (seq < 0 || seq >= batches)
      return llvm::createStringError(
          llvm::inconvertibleErrorCode(),
          "%s: sequence %lld of token %lld is outside the batch [0, %lld)",
          what, static_cast<long long>(seq), static_cast<long long>(t),
          static_cast<long long>(batches));
  }
  return llvm::Error::success();
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
