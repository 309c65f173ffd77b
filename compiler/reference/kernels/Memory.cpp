//===- Memory.cpp - Reference embedding, row gathers, cache scatter -------===//

#include "compiler/reference/Kernels.h"
#include "compiler/reference/kernels/KernelUtils.h"
#include "runtime/numerics/Numerics.h"

#include <cmath>

#include <algorithm>

namespace daybreak::ref {

using namespace detail;

/// result[i] = table[indices[i]]: the rows of `table` [N, D] that
/// `indices` names; an index outside [0, N) is an error worded by `what`
/// (a printf format of the index, its position and N).
static llvm::Expected<Tensor> takeRows(const Tensor &table,
                                       const Tensor &indices,
                                       const char *what) {
  int64_t rows = table.dim(0), width = table.dim(1);
  int64_t count = indices.numel();
  Tensor out = Tensor::zeros(ElementType::F32, {count, width});
  for (int64_t i = 0; i < count; ++i) {
    int64_t row = intAt(indices, i);
    if (row < 0 || row >= rows)
      return llvm::createStringError(llvm::inconvertibleErrorCode(), what,
                                     static_cast<long long>(row),
                                     static_cast<long long>(i),
                                     static_cast<long long>(rows));
    std::copy_n(table.floats().begin() + row * width, width,
                out.floats().begin() + i * width);
  }
  return out;
}

llvm::Expected<Tensor> embedding(const Tensor &table, const Tensor &ids) {
  return takeRows(table, ids,
                  "embedding: token id %lld at position %lld is outside the "
                  "vocabulary [0, %lld)");
}

llvm::Expected<Tensor> gatherRows(const Tensor &input, const Tensor &rows) {
  return takeRows(input, rows,
                  "gather_rows: row %lld at index %lld is outside the "
                  "input's [0, %lld)");
}

/// Rounds one cache row as `storage` stores it (see CacheStorage).
static void roundRow(float *row, int64_t width, const CacheStorage &storage) {
  if (storage.storage == ElementType::BF16) {
    for (int64_t i = 0; i < width; ++i)
      row[i] = numerics::roundToBf16(row[i]);
    return;
  }
  if (storage.storage != ElementType::F8E4M3FN)
    return;
  int64_t quantized = width - storage.tailDim;
  int64_t block = storage.scaleBlock > 0 ? storage.scaleBlock : quantized;
  for (int64_t start = 0; start < quantized; start += block) {
    int64_t end = std::min(quantized, start + block);
    double amax = 1e-4;
    for (int64_t i = start; i < end; ++i)
      amax = std::max(amax, std::fabs(double(row[i])));
    double scale = std::exp2(std::ceil(std::log2(amax / 448.0)));
    for (int64_t i = start; i < end; ++i)
      row[i] = static_cast<float>(
          numerics::roundToE4m3(static_cast<float>(row[i] / scale)) * scale);
  }
  for (int64_t i = quantized; i < width; ++i)
    row[i] = numerics::roundToBf16(row[i]);
}

llvm::Expected<Tensor> cacheWrite(const Tensor &cache, const Tensor &values,
                                  const Tensor &slots,
                                  const Tensor &sequences,
                                  const CacheStorage &storage) {
  bool batched = !sequences.empty();
  int64_t batches = batched ? cache.dim(0) : 1;
  int64_t cacheRows = cache.dim(batched ? 1 : 0);
  int64_t rows = slots.numel();
  int64_t rowSize =
      cacheRows > 0 && batches > 0 ? cache.numel() / (cacheRows * batches) : 0;
  if (batched)
    if (llvm::Error err = checkSequences(sequences, batches, "cacheWrite"))
      return std::move(err);
  // Check every slot first so a bad one leaves no partial result.
  for (int64_t t = 0; t < rows; ++t) {
    int64_t slot = intAt(slots, t);
    if (slot < -1 || slot >= cacheRows)
      return llvm::createStringError(
          llvm::inconvertibleErrorCode(),
          "cacheWrite: slot %lld at row %lld is outside the cache [-1, %lld)",
          static_cast<long long>(slot), static_cast<long long>(t),
          static_cast<long long>(cacheRows));
  }
  // The result keeps the cache's element type: written values are rounded to
  // it, as a store into a bf16 or fp8 cache would.
  Tensor out = cache;
  for (int64_t t = 0; t < rows; ++t) {
    int64_t slot = intAt(slots, t);
    if (slot < 0)
      continue;
    int64_t base = batched ? intAt(sequences, t) * cacheRows : 0;
    if (out.isFloat() && storage.storage != ElementType::F32) {
      std::vector<float> row(rowSize);
      for (int64_t i = 0; i < rowSize; ++i)
        row[i] = values.isFloat() ? values.floats()[t * rowSize + i]
                                  : static_cast<float>(intAt(values, t * rowSize + i));
      roundRow(row.data(), rowSize, storage);
      for (int64_t i = 0; i < rowSize; ++i)
        out.floats()[(base + slot) * rowSize + i] = roundTo(out.type(), row[i]);
      continue;
    }
    for (int64_t i = 0; i < rowSize; ++i) {
      int64_t src = t * rowSize + i, dst = (base + slot) * rowSize + i;
      if (out.isFloat())
        out.floats()[dst] =
            roundTo(out.type(), values.isFloat()
                                    ? values.floats()[src]
                                    : static_cast<float>(values.ints()[src]));
      else
        out.ints()[dst] = intAt(values, src);
    }
  }
  return out;
}

} // namespace daybreak::ref
