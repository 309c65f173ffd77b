//===- ColumnSlice.cpp - Last-dim slices that keep every row --------------===//

#include "passes/ColumnSlice.h"

#include "mlir/IR/Builders.h"

using namespace mlir;

bool daybreak::isColumnSlice(tensor::ExtractSliceOp slice) {
  RankedTensorType src = slice.getSourceType();
  int64_t last = src.getRank() - 1;
  ArrayRef<int64_t> offsets = slice.getStaticOffsets();
  ArrayRef<int64_t> sizes = slice.getStaticSizes();
  if (slice.getType().getRank() != src.getRank() ||
      !slice.getOffsets().empty() || !slice.getStrides().empty() ||
      src.isDynamicDim(last) || ShapedType::isDynamic(sizes[last]) ||
      llvm::any_of(slice.getStaticStrides(),
                   [](int64_t stride) { return stride != 1; }))
    return false;
  // Every row: leading sizes are the source's (a dynamic one its
  // tensor.dim).
  unsigned dynamic = 0;
  for (int64_t d = 0; d < last; ++d) {
    if (offsets[d] != 0)
      return false;
    if (!ShapedType::isDynamic(sizes[d])) {
      if (sizes[d] != src.getDimSize(d))
        return false;
      continue;
    }
    auto dim = slice.getSizes()[dynamic++].getDefiningOp<tensor::DimOp>();
    std::optional<int64_t> index = dim ? dim.getConstantIndex() : std::nullopt;
    if (!dim || dim.getSource() != slice.getSource() || index != d)
      return false;
  }
  return true;
}

Value daybreak::sliceColumnsOf(OpBuilder &b, Location loc, Value source,
                               int64_t offset, int64_t columns) {
  while (auto inner = source.getDefiningOp<tensor::ExtractSliceOp>()) {
    if (!isColumnSlice(inner))
      break;
    offset += sliceColumns(inner).first;
    source = inner.getSource();
  }
  auto type = cast<RankedTensorType>(source.getType());
  int64_t rank = type.getRank();
  SmallVector<OpFoldResult> offsets(rank, b.getIndexAttr(0));
  SmallVector<OpFoldResult> sizes, strides(rank, b.getIndexAttr(1));
  for (int64_t d = 0; d + 1 < rank; ++d)
    sizes.push_back(tensor::getMixedSize(b, loc, source, d));
  offsets.back() = b.getIndexAttr(offset);
  sizes.push_back(b.getIndexAttr(columns));
  return tensor::ExtractSliceOp::create(b, loc, source, offsets, sizes, strides)
      .getResult();
}
