//===- ColumnSlice.h - Last-dim slices that keep every row ------*- C++ -*-===//
//
// A column slice takes columns [offset, offset + size) of every row of a
// tensor: a static, unit-stride slice of the last dim only, of a source
// whose last dim is static. lm-narrow-rope reads through them and
// lm-lower-to-plan makes them views instead of copies.
//
//===----------------------------------------------------------------------===//

#ifndef DAYBREAK_PASSES_COLUMNSLICE_H
#define DAYBREAK_PASSES_COLUMNSLICE_H

#include "mlir/Dialect/Tensor/IR/Tensor.h"

namespace mlir {
class OpBuilder;
} // namespace mlir

namespace daybreak {

/// Whether `slice` is a column slice: every row (leading sizes the source's,
/// a dynamic one its tensor.dim), static columns, unit strides.
bool isColumnSlice(mlir::tensor::ExtractSliceOp slice);

/// The first column and the number of columns of a column slice.
inline std::pair<int64_t, int64_t>
sliceColumns(mlir::tensor::ExtractSliceOp slice) {
  return {slice.getStaticOffsets().back(), slice.getStaticSizes().back()};
}

/// Columns [offset, offset + columns) of every row of `source` (static last
/// dim) as a column slice; through column slices, a slice of the first
/// source that is not one, so that slices never stack.
mlir::Value sliceColumnsOf(mlir::OpBuilder &b, mlir::Location loc,
                           mlir::Value source, int64_t offset, int64_t columns);

} // namespace daybreak

#endif // DAYBREAK_PASSES_COLUMNSLICE_H
