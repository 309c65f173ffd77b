//===- FuseCacheWrite.cpp - Norms and RoPE into the writes they feed ------===//
//
// A key row is computed, then stored: DeepSeek's latent row normalises c_kv
// and rotates k_pe before lm.cache_write; its indexer key is layer-normed
// and rotated; Kimi Linear's and GLM-5.3's latent rows are normalised. Each
// of those ops is a launch of its own over a few hundred values a token.
// Where they feed only the write, they become the write's prologue: one
// launch computes the row and stores it (lm.cache_write's norm and rope).
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"

#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/IR/Builders.h"

namespace daybreak {
#define GEN_PASS_DEF_LMFUSECACHEWRITE
#include "passes/Passes.h.inc"
} // namespace daybreak

using namespace mlir;
using namespace daybreak;

namespace {

/// The norm a prologue takes over, with its operands.
struct Norm {
  Operation *op = nullptr;
  lm::NormKind kind = lm::NormKind::Rms;
  Value input, weight, bias;
  FloatAttr eps;
};

/// `value`'s defining rms_norm or layer_norm when the value has no other
/// reader.
std::optional<Norm> soleNorm(Value value) {
  if (!value || !value.hasOneUse())
    return std::nullopt;
  Norm norm;
  if (auto rms = value.getDefiningOp<lm::RmsNormOp>()) {
    norm.op = rms;
    norm.input = rms.getInput();
    norm.weight = rms.getWeight();
    norm.eps = rms.getEpsAttr();
    return norm;
  }
  if (auto layer = value.getDefiningOp<lm::LayerNormOp>()) {
    norm.op = layer;
    norm.kind = lm::NormKind::Layer;
    norm.input = layer.getInput();
    norm.weight = layer.getWeight();
    norm.bias = layer.getBias();
    norm.eps = layer.getEpsAttr();
    return norm;
  }
  return std::nullopt;
}

/// `value`'s defining rope when the value has no other reader.
lm::RopeOp soleRope(Value value) {
  if (!value || !value.hasOneUse())
    return nullptr;
  return value.getDefiningOp<lm::RopeOp>();
}

/// RoPE of each head of rows [T, W]: collapse(rope(expand(x))) with x
/// [T, W] seen as [T, H, D] (GQA keys), each op read only by the next.
struct HeadRope {
  lm::RopeOp rope;
  tensor::ExpandShapeOp expand;
  int64_t headDim;
};

std::optional<HeadRope> soleHeadRope(Value value) {
  auto collapse = value.getDefiningOp<tensor::CollapseShapeOp>();
  if (!collapse || !value.hasOneUse())
    return std::nullopt;
  lm::RopeOp rope = soleRope(collapse.getSrc());
  auto expand =
      rope ? rope.getInput().getDefiningOp<tensor::ExpandShapeOp>() : nullptr;
  if (!expand || !rope.getInput().hasOneUse() ||
      expand.getSrc().getType() != value.getType())
    return std::nullopt;
  // [T, W] <-> [T, H, D], both ways.
  auto rows = cast<RankedTensorType>(rope.getType());
  SmallVector<ReassociationIndices> split = {{0}, {1, 2}};
  if (rows.getRank() != 3 || rows.isDynamicDim(2) ||
      collapse.getReassociationIndices() != split ||
      expand.getReassociationIndices() != split)
    return std::nullopt;
  return HeadRope{rope, expand, rows.getDimSize(2)};
}

/// A rows [T, W] value's static width, or -1.
int64_t rowWidth(Value value) {
  auto type = dyn_cast<RankedTensorType>(value.getType());
  if (!type || type.getRank() != 2 || type.isDynamicDim(1))
    return -1;
  return type.getDimSize(1);
}

/// Columns of every row of a rows [T, N] tensor (all rows, unit strides).
struct Columns {
  Value source;
  int64_t offset = 0, count = 0;
};

/// `slice` as columns of every row of its source, or nothing.
std::optional<Columns> columnsOf(tensor::ExtractSliceOp slice) {
  if (!slice || rowWidth(slice.getSource()) < 0 || !slice.hasUnitStride())
    return std::nullopt;
  SmallVector<OpFoldResult> offsets = slice.getMixedOffsets();
  SmallVector<OpFoldResult> sizes = slice.getMixedSizes();
  std::optional<int64_t> rowOffset = getConstantIntValue(offsets[0]);
  std::optional<int64_t> colOffset = getConstantIntValue(offsets[1]);
  std::optional<int64_t> colSize = getConstantIntValue(sizes[1]);
  if (rowOffset != 0 || !colOffset || !colSize)
    return std::nullopt;
  // Every row: the source's static row count, or its tensor.dim.
  int64_t rows = slice.getSourceType().getDimSize(0);
  if (std::optional<int64_t> size = getConstantIntValue(sizes[0])) {
    if (*size != rows)
      return std::nullopt;
  } else {
    auto dim = cast<Value>(sizes[0]).getDefiningOp<tensor::DimOp>();
    if (!dim || dim.getSource() != slice.getSource() ||
        getConstantIntValue(dim.getIndex()) != 0)
      return std::nullopt;
  }
  return Columns{slice.getSource(), *colOffset, *colSize};
}

/// What a write's prologue computes and from which row.
struct Prologue {
  Value source;
  std::optional<Norm> norm;
  int64_t normDim = 0;
  lm::RopeOp rope;
  /// The prologue's RoPE offset is the rope's plus this: a rope of the
  /// row's tail starts at the prefix; a rope of S, at -o.
  int64_t ropeShift = 0;
  /// Columns of a head, each rotated alike (0: the row is one head).
  int64_t ropeHeadDim = 0;
  /// The concatenated form's row: columns [o, o + W) of S (source unset).
  Columns head;
  /// The ops the prologue replaces, erased once unused.
  SmallVector<Operation *> replaced;
};

/// Matches the write's values against the forms that end in a key row
/// (x: columns [o, o + W) of some rows S, where the row's projection is
/// fused with others, or all of S):
///   rope(norm(x)), rope(x), norm(x)        (the norm over the whole row;
///                                           RoPE of the row or of each of
///                                           its heads, [T, H, D]);
///   concat(norm(x[:, :a]), x[:, a:])       (a norm of a column prefix);
///   concat(norm(x[:, :a]), rope(S)[:, o + a : o + W])
///                                          (and RoPE inside [a, W)),
///   concat(norm(x[:, :a]), rope(x[:, a:])) (the same, narrowed).
std::optional<Prologue> matchPrologue(lm::CacheWriteOp write) {
  Value values = write.getValues();
  int64_t width = rowWidth(values);
  if (width <= 0)
    return std::nullopt;
  Prologue p;
  if (lm::RopeOp rope = soleRope(values);
      rope && rope.getInput().getType() == values.getType()) {
    p.rope = rope;
    p.replaced.push_back(rope);
    values = rope.getInput();
  } else if (std::optional<HeadRope> heads = soleHeadRope(values)) {
    p.rope = heads->rope;
    p.ropeHeadDim = heads->headDim;
    p.replaced = {values.getDefiningOp(), heads->rope, heads->expand};
    values = heads->expand.getSrc();
  }
  if (std::optional<Norm> norm = soleNorm(values);
      norm && norm->input.getType() == values.getType()) {
    p.norm = norm;
    p.normDim = width;
    p.replaced.push_back(norm->op);
    p.source = norm->input;
    return p;
  }
  auto concat = values.getDefiningOp<tensor::ConcatOp>();
  if (p.rope || !concat || !values.hasOneUse() || concat.getDim() != 1 ||
      concat.getInputs().size() != 2) {
    if (!p.rope)
      return std::nullopt;
    p.source = values;
    return p;
  }
  // The normalised prefix: columns [o, o + a) of some rows S.
  std::optional<Norm> norm = soleNorm(concat.getInputs()[0]);
  int64_t prefix = norm ? rowWidth(norm->input) : -1;
  if (prefix <= 0 || prefix >= width)
    return std::nullopt;
  auto headSlice = norm->input.getDefiningOp<tensor::ExtractSliceOp>();
  std::optional<Columns> head = columnsOf(headSlice);
  if (!head || head->offset + width > rowWidth(head->source))
    return std::nullopt;
  // The rest, columns [o + a, o + W) of S: as they are, rotated inside
  // them (S rotated, then sliced), or their slice rotated (lm-narrow-rope's
  // form of the same).
  Value rest = concat.getInputs()[1];
  int64_t ropeShift = 0;
  if (lm::RopeOp rope = soleRope(rest)) {
    p.rope = rope;
    ropeShift = prefix;
    rest = rope.getInput();
  }
  auto tailSlice = rest.getDefiningOp<tensor::ExtractSliceOp>();
  std::optional<Columns> tail = columnsOf(tailSlice);
  if (!tail || tail->offset != head->offset + prefix ||
      tail->count != width - prefix)
    return std::nullopt;
  if (tail->source != head->source) {
    lm::RopeOp rope = soleRope(tail->source);
    if (p.rope || !rope || rope.getInput() != head->source ||
        !tailSlice->hasOneUse() ||
        int64_t(rope.getOffset()) < head->offset + prefix ||
        int64_t(rope.getOffset() + rope.getDim()) > head->offset + width)
      return std::nullopt;
    p.rope = rope;
    ropeShift = -head->offset;
  }
  p.head = *head;
  p.ropeShift = ropeShift;
  p.norm = norm;
  p.normDim = prefix;
  // In use order, so each is unused when its turn comes.
  p.replaced = {concat};
  if (p.rope && p.rope.getResult() == concat.getInputs()[1])
    p.replaced.push_back(p.rope);
  p.replaced.append({tailSlice, norm->op});
  if (p.rope && p.rope.getResult() != concat.getInputs()[1])
    p.replaced.push_back(p.rope);
  p.replaced.push_back(headSlice);
  return p;
}

/// The row [T, W] the write stores: the source itself when the row is all
/// of it, else a slice of its columns (a column view after lowering).
Value rowValue(OpBuilder &b, Location loc, const Prologue &p, int64_t width) {
  if (p.source)
    return p.source;
  Value source = p.head.source;
  if (p.head.offset == 0 && rowWidth(source) == width)
    return source;
  OpFoldResult rows;
  auto type = cast<RankedTensorType>(source.getType());
  if (type.isDynamicDim(0))
    rows = tensor::DimOp::create(b, loc, source, 0).getResult();
  else
    rows = b.getIndexAttr(type.getDimSize(0));
  SmallVector<OpFoldResult> offsets = {b.getIndexAttr(0),
                                       b.getIndexAttr(p.head.offset)};
  SmallVector<OpFoldResult> sizes = {rows, b.getIndexAttr(width)};
  SmallVector<OpFoldResult> strides(2, b.getIndexAttr(1));
  return tensor::ExtractSliceOp::create(b, loc, source, offsets, sizes, strides)
      .getResult();
}

struct FuseCacheWritePass
    : public daybreak::impl::LmFuseCacheWriteBase<FuseCacheWritePass> {
  using LmFuseCacheWriteBase::LmFuseCacheWriteBase;

  void runOnOperation() override {
    SmallVector<lm::CacheWriteOp> writes;
    getOperation().walk([&](lm::CacheWriteOp write) {
      if (!write.hasPrologue())
        writes.push_back(write);
    });
    OpBuilder b(&getContext());
    for (lm::CacheWriteOp write : writes) {
      std::optional<Prologue> p = matchPrologue(write);
      if (!p)
        continue;
      b.setInsertionPoint(write);
      Value weight, bias, positions;
      lm::NormKindAttr normKind;
      IntegerAttr normDim, ropeOffset, ropeDim, ropeHeadDim;
      FloatAttr eps, theta;
      lm::RopeStyleAttr ropeStyle;
      lm::YarnAttr yarn;
      if (p->norm) {
        weight = p->norm->weight;
        bias = p->norm->bias;
        normKind = lm::NormKindAttr::get(b.getContext(), p->norm->kind);
        normDim = b.getI64IntegerAttr(p->normDim);
        eps = p->norm->eps;
      }
      if (lm::RopeOp rope = p->rope) {
        positions = rope.getPositions();
        ropeStyle = rope.getStyleAttr();
        ropeOffset = b.getI64IntegerAttr(rope.getOffset() + p->ropeShift);
        ropeDim = rope.getDimAttr();
        theta = rope.getThetaAttr();
        yarn = rope.getYarnAttr();
        if (p->ropeHeadDim)
          ropeHeadDim = b.getI64IntegerAttr(p->ropeHeadDim);
      }
      Value row = rowValue(b, write.getLoc(), *p, rowWidth(write.getValues()));
      auto fused = lm::CacheWriteOp::create(
          b, write.getLoc(), write.getType(), write.getCache(), row,
          write.getSlots(), write.getSequences(), weight, bias, positions,
          write.getLayoutAttr(), normKind, normDim, eps, ropeStyle, ropeOffset,
          ropeDim, theta, yarn, ropeHeadDim);
      write.getResult().replaceAllUsesWith(fused.getResult());
      write.erase();
      for (Operation *op : p->replaced) {
        if (!op || !op->use_empty())
          continue;
        // A slice's row count (tensor.dim of its source) goes with it.
        SmallVector<Operation *> sizes;
        for (Value operand : op->getOperands())
          if (auto dim = operand.getDefiningOp<tensor::DimOp>())
            sizes.push_back(dim);
        op->erase();
        for (Operation *size : sizes)
          if (size->use_empty())
            size->erase();
      }
      ++numFused;
    }
  }
};

} // namespace
