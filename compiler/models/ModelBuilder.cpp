//===- ModelBuilder.cpp - The toolkit model builders share ----------------===//

#include "compiler/models/ModelBuilder.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "llvm/Support/FormatVariadic.h"

#include <cmath>

using namespace mlir;
using namespace daybreak;
using namespace daybreak::models;
using safetensors::DType;

static int64_t ceilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

static llvm::Error errorf(const llvm::Twine &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
}

static Type mlirType(MLIRContext *ctx, DType dtype) {
  Builder b(ctx);
  switch (dtype) {
  case DType::BF16:
    return b.getBF16Type();
  case DType::F16:
    return b.getF16Type();
  case DType::F32:
    return b.getF32Type();
  case DType::F8E4M3:
    return b.getType<Float8E4M3FNType>();
  case DType::I32:
    return b.getI32Type();
  case DType::I64:
    return b.getI64Type();
  default:
    return {};
  }
}

llvm::Expected<Value> ModelBuilder::weight(StringRef name, ArrayRef<int64_t> shape,
                                      ArrayRef<DType> dtypes) {
  lm::WeightOp decl = declared.lookup(name);
  if (!decl) {
    auto view = checkpoint.get(name, shape, dtypes);
    if (!view)
      return view.takeError();
    Type elem = mlirType(b.getContext(), (*view)->dtype);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPoint(module.getBody(), module.getBody()->begin());
    decl = lm::WeightOp::create(b, loc, name, tensor(shape, elem),
                                b.getStrArrayAttr({name}), ElementsAttr());
    declared[name] = decl;
  }
  return lm::WeightRefOp::create(b, loc, decl.getType(), decl.getSymName())
      .getResult();
}

llvm::Expected<Value> ModelBuilder::stackedExperts(StringRef prefix,
                                                   StringRef suffix,
                                                   int64_t experts,
                                                   ArrayRef<int64_t> shape) {
  std::string symbol = (prefix + "*." + suffix).str();
  lm::WeightOp decl = declared.lookup(symbol);
  if (!decl) {
    SmallVector<StringRef> sources;
    std::vector<std::string> names;
    std::optional<DType> dtype;
    for (int64_t e = 0; e < experts; ++e) {
      names.push_back(llvm::formatv("{0}{1}.{2}", prefix, e, suffix).str());
      auto view = checkpoint.get(names.back(), shape,
                                 {DType::BF16, DType::F16, DType::F32,
                                  DType::F8E4M3});
      if (!view)
        return view.takeError();
      if (dtype && *dtype != (*view)->dtype)
        return errorf("expert tensors of '" + prefix + "*." + suffix +
                      "' mix dtypes");
      dtype = (*view)->dtype;
    }
    SmallVector<int64_t> stacked = {experts};
    stacked.append(shape.begin(), shape.end());
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPoint(module.getBody(), module.getBody()->begin());
    SmallVector<StringRef> refs(names.begin(), names.end());
    decl = lm::WeightOp::create(b, loc, symbol,
                                tensor(stacked, mlirType(b.getContext(),
                                                         *dtype)),
                                b.getStrArrayAttr(refs), ElementsAttr());
    declared[symbol] = decl;
  }
  return lm::WeightRefOp::create(b, loc, decl.getType(), decl.getSymName())
      .getResult();
}

static SmallVector<int64_t> withLast(Value x, int64_t last) {
  auto type = cast<RankedTensorType>(x.getType());
  SmallVector<int64_t> shape(type.getShape());
  shape.back() = last;
  return shape;
}

llvm::Expected<ModelBuilder::Fp8Weight> ModelBuilder::fp8Weight(StringRef name,
                                                      int64_t out,
                                                      int64_t in) {
  auto w = weight(name, {out, in}, {DType::F8E4M3});
  if (!w)
    return w.takeError();
  std::array<int64_t, 2> block = *fp8BlockSize;
  auto s = weight((name + "_scale_inv").str(),
                  {ceilDiv(out, block[0]), ceilDiv(in, block[1])},
                  {DType::F32});
  if (!s)
    return s.takeError();
  return Fp8Weight{*w, *s};
}

llvm::Expected<Value> ModelBuilder::linear(Value x, StringRef name, int64_t out,
                                      int64_t in) {
  Type result = f32Tensor(withLast(x, out));
  if (isFp8(name)) {
    auto w = fp8Weight(name, out, in);
    if (!w)
      return w.takeError();
    return lm::Fp8MatmulOp::create(
               b, loc, result, x, w->values, w->scaleInv,
               b.getDenseI64ArrayAttr(*fp8BlockSize))
        .getResult();
  }
  auto w = floatWeight(name, {out, in});
  if (!w)
    return w.takeError();
  return lm::MatmulOp::create(b, loc, result, x, *w, Value()).getResult();
}

llvm::Expected<Value> ModelBuilder::denseWeight(StringRef name, int64_t out,
                                           int64_t in) {
  if (!isFp8(name))
    return floatWeight(name, {out, in});
  auto w = fp8Weight(name, out, in);
  if (!w)
    return w.takeError();
  return lm::Fp8DequantOp::create(b, loc, f32Tensor({out, in}), w->values,
                                  w->scaleInv,
                                  b.getDenseI64ArrayAttr(*fp8BlockSize))
      .getResult();
}

llvm::Expected<Value> ModelBuilder::rmsNorm(Value x, StringRef name, int64_t dim,
                                       double eps) {
  auto w = floatWeight(name, {dim});
  if (!w)
    return w.takeError();
  return lm::RmsNormOp::create(b, loc, x.getType(), x, *w,
                               b.getF64FloatAttr(eps))
      .getResult();
}

Value ModelBuilder::rope(Value x, Value positions, lm::RopeStyle style,
                    int64_t offset, int64_t dim) {
  lm::YarnAttr yarn;
  if (const std::optional<importers::YarnConfig> &y = yarnScaling) {
    // transformers' attention factor: the ratio of the two mscales when
    // both are given, else 0.1 ln(factor) + 1.
    auto mscale = [&](double m) {
      return y->factor <= 1.0 ? 1.0 : 0.1 * m * std::log(y->factor) + 1.0;
    };
    double attentionFactor = (y->mscale != 0.0 && y->mscaleAllDim != 0.0)
                                 ? mscale(y->mscale) / mscale(y->mscaleAllDim)
                                 : mscale(1.0);
    yarn = lm::YarnAttr::get(
        b.getContext(), b.getF64FloatAttr(y->factor), y->originalMaxPositions,
        b.getF64FloatAttr(y->betaFast), b.getF64FloatAttr(y->betaSlow),
        b.getF64FloatAttr(attentionFactor), b.getBoolAttr(true));
  }
  return lm::RopeOp::create(b, loc, x.getType(), x, positions,
                            lm::RopeStyleAttr::get(b.getContext(), style),
                            b.getI64IntegerAttr(offset),
                            b.getI64IntegerAttr(dim),
                            b.getF64FloatAttr(ropeTheta), yarn)
      .getResult();
}

Value ModelBuilder::sliceLast(Value x, int64_t offset, int64_t size) {
  auto type = cast<RankedTensorType>(x.getType());
  SmallVector<OpFoldResult> offsets, sizes, strides;
  for (int64_t d = 0; d < type.getRank(); ++d) {
    bool last = d + 1 == type.getRank();
    offsets.push_back(b.getIndexAttr(last ? offset : 0));
    if (last)
      sizes.push_back(b.getIndexAttr(size));
    else if (type.isDynamicDim(d))
      sizes.push_back(dimOf(x, d));
    else
      sizes.push_back(b.getIndexAttr(type.getDimSize(d)));
    strides.push_back(b.getIndexAttr(1));
  }
  return tensor::ExtractSliceOp::create(b, loc, x, offsets, sizes, strides)
      .getResult();
}

Value ModelBuilder::reshape(Value x, ArrayRef<int64_t> shape, int64_t splitDim) {
  if (splitDim < 0)
    splitDim += cast<RankedTensorType>(x.getType()).getRank();
  // Dim `splitDim` of x becomes the extra dims of `shape`; the others map
  // one to one.
  auto type = cast<RankedTensorType>(x.getType());
  int64_t extra = static_cast<int64_t>(shape.size()) - type.getRank();
  SmallVector<ReassociationIndices> groups;
  int64_t next = 0;
  for (int64_t d = 0; d < type.getRank(); ++d) {
    ReassociationIndices group;
    for (int64_t i = 0, n = d == splitDim ? extra + 1 : 1; i < n; ++i)
      group.push_back(next++);
    groups.push_back(group);
  }
  SmallVector<OpFoldResult> outputShape;
  for (auto [d, size] : llvm::enumerate(shape))
    outputShape.push_back(ShapedType::isDynamic(size)
                              ? OpFoldResult(dimOf(x, d))
                              : OpFoldResult(b.getIndexAttr(size)));
  return tensor::ExpandShapeOp::create(
             b, loc, tensor(shape, type.getElementType()), x, groups,
             outputShape)
      .getResult();
}

Value ModelBuilder::collapseLast(Value x) {
  auto type = cast<RankedTensorType>(x.getType());
  int64_t rank = type.getRank();
  SmallVector<ReassociationIndices> groups;
  for (int64_t d = 0; d + 2 < rank; ++d)
    groups.push_back({d});
  groups.push_back({rank - 2, rank - 1});
  return tensor::CollapseShapeOp::create(b, loc, x, groups).getResult();
}

