//===- ModelBuilder.cpp - The toolkit model builders share ----------------===//

#include "compiler/models/ModelBuilder.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "llvm/Support/FormatVariadic.h"

#include <cmath>

using namespace mlir;
using namespace daybreak;
using namespace daybreak::models;
using safetensors::DType;

static constexpr int64_t kDyn = ShapedType::kDynamic;

static int64_t ceilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

static llvm::Error errorf(const llvm::Twine &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
}

/// The scale blocks of `block` values that rows or columns [offset,
/// offset + size) of an FP8 weight read, such that local index i reads
/// block i / block of them: the range starts a block, or lies inside one.
static llvm::Expected<std::pair<int64_t, int64_t>>
scaleBlocks(int64_t offset, int64_t size, int64_t block, const Twine &name,
            StringRef what) {
  int64_t first = offset / block, last = (offset + size - 1) / block;
  if (offset % block != 0 && first != last)
    return errorf("FP8 weight '" + name + "': this rank's " + what + " [" +
                  Twine(offset) + ", " + Twine(offset + size) +
                  ") split its scale blocks of " + Twine(block));
  return std::make_pair(first, last - first + 1);
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

Value ModelBuilder::declaredWeight(StringRef symbol, RankedTensorType type,
                                   ArrayRef<std::string> sources,
                                   lm::ShardAttr shard) {
  lm::WeightOp decl = declared.lookup(symbol);
  if (!decl) {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPoint(module.getBody(), module.getBody()->begin());
    SmallVector<StringRef> refs(sources.begin(), sources.end());
    decl = lm::WeightOp::create(b, loc, symbol, type, b.getStrArrayAttr(refs),
                                ElementsAttr(), shard);
    declared[symbol] = decl;
  }
  return lm::WeightRefOp::create(b, loc, decl.getType(), decl.getSymName())
      .getResult();
}

llvm::Expected<Value> ModelBuilder::weight(StringRef name,
                                           ArrayRef<int64_t> shape,
                                           ArrayRef<DType> dtypes) {
  if (lm::WeightOp decl = declared.lookup(name))
    return declaredWeight(name, cast<RankedTensorType>(decl.getType()), {});
  auto view = checkpoint.get(name, shape, dtypes);
  if (!view)
    return view.takeError();
  Type elem = mlirType(b.getContext(), (*view)->dtype);
  return declaredWeight(name, tensor(shape, elem), {name.str()});
}

llvm::Expected<Value> ModelBuilder::weightShard(StringRef name,
                                                ArrayRef<int64_t> shape,
                                                ArrayRef<DType> dtypes,
                                                int64_t dim, int64_t offset,
                                                int64_t size) {
  std::string symbol = llvm::formatv("{0}.shard{1}", name, dim).str();
  if (lm::WeightOp decl = declared.lookup(symbol))
    return declaredWeight(symbol, cast<RankedTensorType>(decl.getType()), {});
  auto view = checkpoint.get(name, shape, dtypes);
  if (!view)
    return view.takeError();
  SmallVector<int64_t> part(shape);
  part[dim] = size;
  return declaredWeight(
      symbol, tensor(part, mlirType(b.getContext(), (*view)->dtype)),
      {name.str()}, lm::ShardAttr::get(b.getContext(), dim, offset, size));
}

llvm::Expected<std::pair<int64_t, int64_t>>
ModelBuilder::rankRange(int64_t total, const Twine &what) {
  if (total % tpRanks != 0)
    return errorf(what + " (" + Twine(total) + ") does not split evenly over " +
                  Twine(tpRanks) + " tensor-parallel ranks");
  int64_t size = total / tpRanks;
  return std::make_pair(tpRank * size, size);
}

llvm::Expected<std::pair<int64_t, int64_t>>
ModelBuilder::expertRange(int64_t experts, const Twine &what) {
  if (epRanks == 1)
    return std::make_pair(int64_t(0), experts);
  if (experts % epRanks != 0)
    return errorf(what + " (" + Twine(experts) +
                  " experts) does not split evenly over " + Twine(epRanks) +
                  " expert-parallel ranks");
  int64_t count = experts / epRanks;
  return std::make_pair(rank * count, count);
}

Value ModelBuilder::allReduce(Value x, int64_t group) {
  if (group == 1)
    return x;
  return lm::AllReduceOp::create(b, loc, x.getType(), x,
                                 b.getI64IntegerAttr(group))
      .getResult();
}

llvm::Error models::checkParallel(const BuildOptions &options) {
  int64_t tp = options.tensorParallel, ep = options.expertParallel;
  if (tp < 1 || ep < 1)
    return errorf("tensor- and expert-parallel rank counts must be positive, "
                  "got " +
                  Twine(tp) + " and " + Twine(ep));
  if (tp > 1 && ep > 1 && ep % tp != 0)
    return errorf(Twine(tp) + " tensor-parallel by " + Twine(ep) +
                  " expert-parallel ranks: the tensor-parallel ranks must "
                  "divide the expert-parallel ones (attention split over "
                  "groups of " +
                  Twine(tp) +
                  " of the ranks the experts are partitioned over; more "
                  "tensor- than expert-parallel ranks is not built yet)");
  if (options.rank < 0 || options.rank >= options.ranks())
    return errorf("rank " + Twine(options.rank) + " of " +
                  Twine(options.ranks()) + " ranks does not exist");
  return llvm::Error::success();
}

Value ModelBuilder::allGather(Value x) {
  if (tpRanks == 1)
    return x;
  auto type = cast<RankedTensorType>(x.getType());
  SmallVector<int64_t> shape(type.getShape());
  shape.back() *= tpRanks;
  return lm::AllGatherOp::create(b, loc, tensor(shape, type.getElementType()),
                                 x, b.getI64IntegerAttr(tpRanks))
      .getResult();
}

llvm::Expected<Value> ModelBuilder::stackedExperts(StringRef prefix,
                                                   StringRef suffix,
                                                   int64_t experts,
                                                   ArrayRef<int64_t> shape) {
  return stackedExperts(prefix, suffix, experts, shape,
                        {DType::BF16, DType::F16, DType::F32, DType::F8E4M3});
}

llvm::Expected<Value>
ModelBuilder::stackedExperts(StringRef prefix, StringRef suffix,
                             int64_t experts, ArrayRef<int64_t> shape,
                             ArrayRef<DType> dtypes, std::optional<Cut> shard,
                             int64_t firstExpert, StringRef after) {
  std::string symbol = (prefix + "*." + suffix).str();
  if (!after.empty())
    symbol += "+shared";
  if (shard)
    symbol += ".shard" + std::to_string(shard->dim);
  if (lm::WeightOp decl = declared.lookup(symbol))
    return declaredWeight(symbol, cast<RankedTensorType>(decl.getType()), {});
  std::vector<std::string> names;
  std::optional<DType> dtype;
  for (int64_t e = firstExpert; e < firstExpert + experts + !after.empty();
       ++e) {
    names.push_back(e < firstExpert + experts
                        ? llvm::formatv("{0}{1}.{2}", prefix, e, suffix).str()
                        : after.str());
    auto view = checkpoint.get(names.back(), shape, dtypes);
    if (!view)
      return view.takeError();
    if (dtype && *dtype != (*view)->dtype)
      return errorf("expert tensors of '" + prefix + "*." + suffix +
                    "' mix dtypes");
    dtype = (*view)->dtype;
  }
  SmallVector<int64_t> stacked = {experts + !after.empty()};
  stacked.append(shape.begin(), shape.end());
  lm::ShardAttr cut;
  if (shard) {
    stacked[1 + shard->dim] = shard->size;
    cut = lm::ShardAttr::get(b.getContext(), shard->dim, shard->offset,
                             shard->size);
  }
  return declaredWeight(
      symbol, tensor(stacked, mlirType(b.getContext(), *dtype)), names, cut);
}

llvm::Expected<ModelBuilder::ExpertWeights>
ModelBuilder::perExpertWeights(StringRef prefix, StringRef suffix,
                               int64_t experts, int64_t out, int64_t in,
                               Split split, StringRef after) {
  // Under expert parallelism this rank's experts, whole.
  auto mine = expertRange(experts, "'" + prefix + "*." + suffix + "'");
  if (!mine)
    return mine.takeError();
  if (tpRanks == 1 || epRanks > 1)
    split = Split::None;
  // This rank's rows or columns of every expert.
  std::optional<Cut> cut;
  int64_t dim = split == Split::Output ? 0 : 1;
  if (split != Split::None) {
    auto range =
        rankRange(dim == 0 ? out : in, "'" + prefix + "*." + suffix + "' " +
                                           (dim == 0 ? "rows" : "columns"));
    if (!range)
      return range.takeError();
    cut = Cut{dim, range->first, range->second};
  }
  auto values =
      stackedExperts(prefix, suffix, mine->second, {out, in},
                     {DType::BF16, DType::F16, DType::F32, DType::F8E4M3}, cut,
                     mine->first, after);
  if (!values)
    return values.takeError();
  ExpertWeights weights;
  weights.values = *values;
  if (!isa<Float8E4M3FNType>(
          cast<RankedTensorType>(values->getType()).getElementType()))
    return weights;
  if (!fp8BlockSize)
    return errorf("expert tensors '" + prefix + "*." + suffix +
                  "' are FP8 (e4m3), but the config gives no "
                  "quantization_config.weight_block_size for their scales");
  weights.format = ExpertFormat::Fp8;
  weights.fp8Block = *fp8BlockSize;
  std::optional<Cut> scaleCut;
  if (cut) {
    auto blocks =
        scaleBlocks(cut->offset, cut->size, weights.fp8Block[dim],
                    prefix + "*." + suffix, dim == 0 ? "rows" : "columns");
    if (!blocks)
      return blocks.takeError();
    scaleCut = Cut{dim, blocks->first, blocks->second};
  }
  auto scales = stackedExperts(
      prefix, (suffix + "_scale_inv").str(), mine->second,
      {ceilDiv(out, weights.fp8Block[0]), ceilDiv(in, weights.fp8Block[1])},
      {DType::F32}, scaleCut, mine->first,
      after.empty() ? std::string() : (after + "_scale_inv").str());
  if (!scales)
    return scales.takeError();
  weights.scales = *scales;
  return weights;
}

llvm::Expected<ModelBuilder::ExpertWeights>
ModelBuilder::mxfp4Experts(StringRef name, int64_t experts, int64_t out,
                           int64_t in, Split split) {
  if (tpRanks == 1 || epRanks > 1)
    split = Split::None;
  std::string blocks = (name + "_blocks").str();
  std::string scales = (name + "_scales").str();
  if (in % 32 != 0)
    return errorf("MXFP4 experts '" + blocks + "': " + Twine(in) +
                  " input features are not whole blocks of 32");
  int64_t groups = in / 32;
  // The bytes as stored, checked; declared as the values they hold.
  auto blockView =
      checkpoint.get(blocks, {experts, out, groups, 16}, {DType::U8});
  if (!blockView)
    return blockView.takeError();
  auto scaleView = checkpoint.get(scales, {experts, out, groups}, {DType::U8});
  if (!scaleView)
    return scaleView.takeError();
  // This rank's rows (dim 1 of both tensors as stored) or blocks of 32
  // columns (dim 2).
  lm::ShardAttr shard;
  std::string suffix;
  int64_t localOut = out, localGroups = groups, localExperts = experts;
  if (epRanks > 1) {
    // This rank's experts, whole (dim 0 of both tensors).
    auto mine = expertRange(experts, "MXFP4 experts '" + blocks + "'");
    if (!mine)
      return mine.takeError();
    localExperts = mine->second;
    shard = lm::ShardAttr::get(b.getContext(), 0, mine->first, localExperts);
    suffix = ".shard0";
  } else if (split != Split::None) {
    bool rows = split == Split::Output;
    auto range = rankRange(rows ? out : in,
                           "'" + blocks + "' " + (rows ? "rows" : "columns"));
    if (!range)
      return range.takeError();
    if (rows) {
      localOut = range->second;
      shard = lm::ShardAttr::get(b.getContext(), 1, range->first, localOut);
    } else {
      if (range->second % 32 != 0)
        return errorf("MXFP4 experts '" + blocks + "': this rank's " +
                      Twine(range->second) +
                      " input features are not whole blocks of 32");
      localGroups = range->second / 32;
      shard =
          lm::ShardAttr::get(b.getContext(), 2, range->first / 32, localGroups);
    }
    suffix = ".shard" + std::to_string(shard.getDim());
  }
  ExpertWeights weights;
  weights.format = ExpertFormat::Mxfp4;
  weights.values =
      declaredWeight(blocks + suffix,
                     tensor({localExperts, localOut, 32 * localGroups},
                            b.getType<Float4E2M1FNType>()),
                     {blocks}, shard);
  weights.scales = declaredWeight(scales + suffix,
                                  tensor({localExperts, localOut, localGroups},
                                         b.getType<Float8E8M0FNUType>()),
                                  {scales}, shard);
  return weights;
}

Value ModelBuilder::expertMatmul(Value x, const ExpertWeights &weights,
                                 Value indices, Value routingWeights,
                                 Value bias) {
  auto weightType = cast<RankedTensorType>(weights.values.getType());
  // [T, k, out] per slot, or [T, out] summed over the slots.
  SmallVector<int64_t> shape = {
      cast<RankedTensorType>(x.getType()).getDimSize(0)};
  if (!routingWeights)
    shape.push_back(cast<RankedTensorType>(indices.getType()).getDimSize(1));
  shape.push_back(weightType.getDimSize(1));
  Type result = f32Tensor(shape);
  switch (weights.format) {
  case ExpertFormat::Mxfp4:
    return lm::Mxfp4ExpertMatmulOp::create(b, loc, result, x, weights.values,
                                           weights.scales, indices,
                                           routingWeights, bias)
        .getResult();
  case ExpertFormat::Fp8: {
    // lm-fold-weights leaves a dequantisation read only by expert matmuls
    // unfolded: the kernel reads the codes and scales as stored.
    Value dense = lm::Fp8DequantOp::create(
                      b, loc, f32Tensor(weightType.getShape()), weights.values,
                      weights.scales, b.getDenseI64ArrayAttr(weights.fp8Block))
                      .getResult();
    return lm::ExpertMatmulOp::create(b, loc, result, x, dense, indices,
                                      routingWeights, bias)
        .getResult();
  }
  case ExpertFormat::Plain:
    break;
  }
  return lm::ExpertMatmulOp::create(b, loc, result, x, weights.values, indices,
                                    routingWeights, bias)
      .getResult();
}

static SmallVector<int64_t> withLast(Value x, int64_t last) {
  auto type = cast<RankedTensorType>(x.getType());
  SmallVector<int64_t> shape(type.getShape());
  shape.back() = last;
  return shape;
}

llvm::Expected<ModelBuilder::Fp8Weight>
ModelBuilder::fp8Weight(StringRef name, int64_t out, int64_t in, Split split) {
  std::array<int64_t, 2> block = *fp8BlockSize;
  std::string scaleName = (name + "_scale_inv").str();
  SmallVector<int64_t> scaleShape = {ceilDiv(out, block[0]),
                                     ceilDiv(in, block[1])};
  if (split == Split::None) {
    auto w = weight(name, {out, in}, {DType::F8E4M3});
    if (!w)
      return w.takeError();
    auto s = weight(scaleName, scaleShape, {DType::F32});
    if (!s)
      return s.takeError();
    return Fp8Weight{*w, *s};
  }
  int64_t dim = split == Split::Output ? 0 : 1;
  auto range = rankRange(dim == 0 ? out : in,
                         "'" + name + "' " + (dim == 0 ? "rows" : "columns"));
  if (!range)
    return range.takeError();
  auto blocks = scaleBlocks(range->first, range->second, block[dim], name,
                            dim == 0 ? "rows" : "columns");
  if (!blocks)
    return blocks.takeError();
  auto w = weightShard(name, {out, in}, {DType::F8E4M3}, dim, range->first,
                       range->second);
  if (!w)
    return w.takeError();
  auto s = weightShard(scaleName, scaleShape, {DType::F32}, dim, blocks->first,
                       blocks->second);
  if (!s)
    return s.takeError();
  return Fp8Weight{*w, *s};
}

llvm::Expected<Value> ModelBuilder::linear(Value x, StringRef name, int64_t out,
                                           int64_t in, StringRef bias,
                                           Split split, bool reduce) {
  if (tpRanks == 1)
    split = Split::None;
  // Split by input features, the ranks' products are summed: rank 0
  // alone adds the bias.
  if (split == Split::Input && tpRank != 0)
    bias = {};
  // This rank's part of the output features, and the products it computes.
  int64_t localOut = out;
  if (split == Split::Output) {
    auto range = rankRange(out, "'" + name + "' rows");
    if (!range)
      return range.takeError();
    localOut = range->second;
  }
  Type result = f32Tensor(withLast(x, localOut));
  Value product;
  if (isFp8(name)) {
    if (!bias.empty())
      return errorf("FP8 weight '" + name + "' with bias '" + bias +
                    "': biases on FP8 projections are not supported");
    auto w = fp8Weight(name, out, in, split);
    if (!w)
      return w.takeError();
    product = lm::Fp8MatmulOp::create(b, loc, result, x, w->values, w->scaleInv,
                                      b.getDenseI64ArrayAttr(*fp8BlockSize))
                  .getResult();
  } else {
    std::array<DType, 3> floats = {DType::BF16, DType::F16, DType::F32};
    llvm::Expected<Value> w = Value();
    if (split == Split::None) {
      w = floatWeight(name, {out, in});
    } else {
      int64_t dim = split == Split::Output ? 0 : 1;
      auto range =
          rankRange(dim == 0 ? out : in,
                    "'" + name + "' " + (dim == 0 ? "rows" : "columns"));
      if (!range)
        return range.takeError();
      w = weightShard(name, {out, in}, floats, dim, range->first,
                      range->second);
    }
    if (!w)
      return w.takeError();
    Value biasValue;
    if (!bias.empty()) {
      auto bv =
          split == Split::Output
              ? weightShard(bias, {out}, floats, 0, tpRank * localOut, localOut)
              : floatWeight(bias, {out});
      if (!bv)
        return bv.takeError();
      biasValue = *bv;
    }
    product =
        lm::MatmulOp::create(b, loc, result, x, *w, biasValue).getResult();
  }
  return split == Split::Input && reduce ? allReduce(product, tpRanks)
                                         : product;
}

Value ModelBuilder::swiglu(Value gate, Value up, const GluParams &act) {
  FloatAttr limit = act.limit ? b.getF64FloatAttr(*act.limit) : FloatAttr();
  return lm::SwigluOp::create(b, loc, gate.getType(), gate, up,
                              b.getF64FloatAttr(act.alpha), limit,
                              b.getF64FloatAttr(act.upOffset))
      .getResult();
}

llvm::Expected<Value> ModelBuilder::gatedMlp(Value x, StringRef prefix,
                                             int64_t hidden, int64_t inter,
                                             const GluParams &act,
                                             bool reduce) {
  auto gate = linear(x, (prefix + "gate_proj.weight").str(), inter, hidden, {},
                     Split::Output);
  auto up = linear(x, (prefix + "up_proj.weight").str(), inter, hidden, {},
                   Split::Output);
  if (!gate || !up)
    return gate ? up.takeError() : gate.takeError();
  return linear(swiglu(*gate, *up, act), (prefix + "down_proj.weight").str(),
                hidden, inter, {}, Split::Input, reduce);
}

llvm::Expected<Value> ModelBuilder::moe(Value x, const MoeConfig &c) {
  int64_t tokens = cast<RankedTensorType>(x.getType()).getDimSize(0);
  auto routerWeight = floatWeight(c.routerWeight, {c.experts, c.hidden});
  if (!routerWeight)
    return routerWeight.takeError();
  Value routerBias, selectionBias;
  if (!c.routerBias.empty()) {
    auto bias = floatWeight(c.routerBias, {c.experts});
    if (!bias)
      return bias.takeError();
    routerBias = *bias;
  }
  if (!c.selectionBias.empty()) {
    // lm.moe_route reads its selection bias in f32, as DeepSeek stores it.
    auto bias = weight(c.selectionBias, {c.experts}, {DType::F32});
    if (!bias)
      return bias.takeError();
    selectionBias = *bias;
  }
  Value logits = lm::MatmulOp::create(b, loc, f32Tensor({tokens, c.experts}),
                                      x, *routerWeight, routerBias)
                     .getResult();
  // One shared expert as wide as a routed one (DeepSeek-V3.2, Kimi
  // Linear, GLM-5.3) joins them when they are stored alike: stacked after
  // the routed experts, it takes a slot of weight 1 in every token's
  // routing, so the routed experts' launches compute it (no MLP of its
  // own). Not under expert parallelism, where experts are split by rank.
  const bool stackable = !c.sharedPrefix.empty() && c.sharedInter == c.inter &&
                         epRanks == 1 && c.routing == lm::RoutingScore::Sigmoid;
  auto experts = c.loadExperts(stackable ? StringRef(c.sharedPrefix) : "");
  if (!experts)
    return experts.takeError();
  const int64_t slots = c.topK + experts->sharedExperts;
  auto route = lm::MoeRouteOp::create(
      b, loc, tensor({tokens, slots}, b.getI32Type()),
      f32Tensor({tokens, slots}), logits, selectionBias,
      lm::RoutingScoreAttr::get(b.getContext(), c.routing),
      b.getI64IntegerAttr(c.topK), b.getI64IntegerAttr(c.numGroups),
      b.getI64IntegerAttr(c.topKGroups), b.getBoolAttr(c.renormalize),
      b.getF64FloatAttr(c.scalingFactor),
      b.getI64IntegerAttr(experts->sharedExperts));
  Value idx = route.getIndices(), weights = route.getWeights();
  // Expert parallelism: this rank's slots are those routed to its experts.
  bool partitioned =
      experts->localExperts > 0 && experts->localExperts < c.experts;
  if (partitioned)
    idx = lm::LocalExpertsOp::create(b, loc, idx.getType(), idx,
                                     b.getI64IntegerAttr(experts->firstExpert),
                                     b.getI64IntegerAttr(experts->localExperts))
              .getResult();
  Value g, u;
  if (experts->interleavedGateUp) {
    // One matmul over the interleaved rows, then the even and odd columns:
    // [T, k, 2I] seen as [T, k, I, 2] (a view) and sliced on its last dim.
    Value both = expertMatmul(x, experts->gate, idx, {}, experts->gateBias);
    // This rank's units, when each expert's are split over the ranks.
    int64_t units = cast<RankedTensorType>(both.getType()).getDimSize(2) / 2;
    Value pairs = reshape(both, {tokens, slots, units, 2});
    g = collapseLast(sliceLast(pairs, 0, 1));
    u = collapseLast(sliceLast(pairs, 1, 1));
  } else {
    g = expertMatmul(x, experts->gate, idx, {}, experts->gateBias);
    u = expertMatmul(x, experts->up, idx, {}, experts->upBias);
  }
  // Split over the ranks, the down projections' products are summed: rank
  // 0 alone adds their bias.
  Value downBias =
      experts->splitByRank && tpRank != 0 ? Value() : experts->downBias;
  Value routed =
      expertMatmul(swiglu(g, u, c.act), experts->down, idx, weights, downBias);
  if (ranks > 1 && !experts->splitByRank && !partitioned)
    return errorf("routed experts of '" + c.routerWeight +
                  "' are neither split nor partitioned over the ranks");
  // Over several ranks the routed and shared outputs are this rank's
  // partial sums (each expert's intermediate features split, or some of
  // the experts): one all-reduce of both.
  if (c.sharedPrefix.empty() || experts->sharedExperts)
    return allReduce(routed, ranks);
  if (ranks > 1 && tpRanks == 1) {
    // Expert parallelism alone: rank 0 adds the shared experts, whole.
    if (rank != 0)
      return allReduce(routed, ranks);
    auto shared = gatedMlp(x, c.sharedPrefix, c.hidden, c.sharedInter, c.act);
    if (!shared)
      return shared.takeError();
    return allReduce(arith::AddFOp::create(b, loc, routed, *shared).getResult(),
                     ranks);
  }
  // The shared experts' features split over the tensor-parallel group: the
  // first group's ranks add their parts (every rank's when the group is
  // all of them), the others only their routed outputs.
  if (rank / tpRanks != 0)
    return allReduce(routed, ranks);
  auto shared = gatedMlp(x, c.sharedPrefix, c.hidden, c.sharedInter, c.act,
                         /*reduce=*/false);
  if (!shared)
    return shared.takeError();
  return allReduce(arith::AddFOp::create(b, loc, routed, *shared).getResult(),
                   ranks);
}

llvm::Expected<Value> ModelBuilder::denseWeight(StringRef name, int64_t out,
                                                int64_t in, Split split) {
  if (tpRanks == 1)
    split = Split::None;
  if (!isFp8(name)) {
    if (split == Split::None)
      return floatWeight(name, {out, in});
    int64_t dim = split == Split::Output ? 0 : 1;
    auto range = rankRange(dim == 0 ? out : in,
                           "'" + name + "' " + (dim == 0 ? "rows" : "columns"));
    if (!range)
      return range.takeError();
    return weightShard(name, {out, in}, {DType::BF16, DType::F16, DType::F32},
                       dim, range->first, range->second);
  }
  auto w = fp8Weight(name, out, in, split);
  if (!w)
    return w.takeError();
  if (split == Split::Output)
    out /= tpRanks;
  else if (split == Split::Input)
    in /= tpRanks;
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
    // transformers' attention factor: the config's when given, else the
    // ratio of the two mscales when both are given, else 0.1 ln(factor) + 1.
    auto mscale = [&](double m) {
      return y->factor <= 1.0 ? 1.0 : 0.1 * m * std::log(y->factor) + 1.0;
    };
    double attentionFactor =
        y->attentionFactor ? *y->attentionFactor
        : (y->mscale != 0.0 && y->mscaleAllDim != 0.0)
            ? mscale(y->mscale) / mscale(y->mscaleAllDim)
            : mscale(1.0);
    yarn = lm::YarnAttr::get(
        b.getContext(), b.getF64FloatAttr(y->factor), y->originalMaxPositions,
        b.getF64FloatAttr(y->betaFast), b.getF64FloatAttr(y->betaSlow),
        b.getF64FloatAttr(attentionFactor), b.getBoolAttr(y->truncate));
  }
  return lm::RopeOp::create(b, loc, x.getType(), x, positions,
                            lm::RopeStyleAttr::get(b.getContext(), style),
                            b.getI64IntegerAttr(offset),
                            b.getI64IntegerAttr(dim),
                            b.getF64FloatAttr(ropeTheta), yarn,
                            /*head_dim=*/IntegerAttr())
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

llvm::Expected<ModelBuilder::AbsorbedMla>
ModelBuilder::absorbMla(StringRef kvB, Value qNope, Value qRope, int64_t heads,
                        int64_t nope, int64_t rot, int64_t vdim, int64_t lora) {
  auto kvb =
      denseWeight(kvB, tpRanks * heads * (nope + vdim), lora, Split::Output);
  if (!kvb)
    return kvb.takeError();
  Value kvb3 = reshape(*kvb, {heads, nope + vdim, lora}, /*splitDim=*/0);
  auto headSlice = [&](int64_t offset, int64_t size) {
    SmallVector<OpFoldResult> offsets = {
        b.getIndexAttr(0), b.getIndexAttr(offset), b.getIndexAttr(0)};
    SmallVector<OpFoldResult> sizes = {
        b.getIndexAttr(heads), b.getIndexAttr(size), b.getIndexAttr(lora)};
    SmallVector<OpFoldResult> strides(3, b.getIndexAttr(1));
    return tensor::ExtractSliceOp::create(b, loc, kvb3, offsets, sizes, strides)
        .getResult();
  };
  AbsorbedMla mla;
  // Both as [H, N, K] (K contiguous), the layout the devices' tensor-core
  // kernels read: W_UK[h] transposed to [lora, nope], at compile time.
  Value uk = headSlice(0, nope);
  mla.wUK = lm::TransposeOp::create(
                b, loc,
                RankedTensorType::get(
                    {heads, lora, nope},
                    cast<RankedTensorType>(uk.getType()).getElementType()),
                uk, b.getDenseI64ArrayAttr({0, 2, 1}))
                .getResult();
  mla.wUV = headSlice(nope, vdim);
  int64_t tokens = cast<RankedTensorType>(qNope.getType()).getDimSize(0);
  Value qLatent = lm::HeadMatmulOp::create(
                      b, loc, f32Tensor({tokens, heads, lora}), qNope, mla.wUK,
                      /*transpose_weight=*/true)
                      .getResult();
  // Without a rope part (NoPE MLA with qk_rope_head_dim 0) the query is
  // the latent one.
  mla.query = rot == 0 ? qLatent
                       : tensor::ConcatOp::create(
                             b, loc, f32Tensor({tokens, heads, lora + rot}),
                             /*dim=*/2, ValueRange{qLatent, qRope})
                             .getResult();
  return mla;
}

Value ModelBuilder::mlaValueUp(const AbsorbedMla &mla, Value latentOut,
                               int64_t heads, int64_t vdim) {
  int64_t tokens = cast<RankedTensorType>(latentOut.getType()).getDimSize(0);
  return lm::HeadMatmulOp::create(b, loc, f32Tensor({tokens, heads, vdim}),
                                  latentOut, mla.wUV,
                                  /*transpose_weight=*/true)
      .getResult();
}

llvm::Expected<Value> ModelBuilder::shortConv(Value x, StringRef name,
                                              int64_t width, Value &window,
                                              Value sequences, int64_t total) {
  int64_t channels = cast<RankedTensorType>(x.getType()).getDimSize(1);
  if (total == 0)
    total = channels;
  auto w = total == channels
               ? floatWeight(name, {channels, 1, width})
               : weightShard(name, {total, 1, width},
                             {DType::BF16, DType::F16, DType::F32}, 0,
                             tpRank * channels, channels);
  if (!w)
    return w.takeError();
  Value taps = tensor::CollapseShapeOp::create(
                   b, loc, *w, ArrayRef<ReassociationIndices>{{0, 1}, {2}})
                   .getResult();
  auto conv = lm::ShortConvOp::create(
      b, loc, x.getType(), window.getType(), x, taps, window, sequences,
      lm::ActivationAttr::get(b.getContext(), lm::Activation::Silu));
  window = conv.getNewState();
  return conv.getOutput();
}

llvm::Expected<Value> ModelBuilder::kdaMixer(const KdaSpec &spec, Value x,
                                             bool decode, const KdaState &state,
                                             Value sequences) {
  // This rank's heads (all of them for one rank): `width` features of the
  // checkpoint's `total`, from `first`.
  auto localHeads = kdaHeads(spec);
  if (!localHeads)
    return localHeads.takeError();
  int64_t heads = *localHeads, dim = spec.dim, width = heads * dim;
  int64_t total = spec.heads * dim, firstHead = tpRank * heads;
  auto name = [&](StringRef rest) { return (spec.prefix + rest).str(); };
  // q, k, v: projection, then the convolution over each sequence's window.
  Value qkv[3];
  Value *windows[3] = {state.convQ, state.convK, state.convV};
  const char *projections[3] = {"q", "k", "v"};
  for (int i = 0; i < 3; ++i) {
    std::string p = projections[i];
    auto lin = linear(x, name(p + "_proj.weight"), total, spec.hidden, {},
                      Split::Output);
    if (!lin)
      return lin.takeError();
    auto conv = shortConv(*lin, name(p + "_conv1d.weight"), spec.convWidth,
                          *windows[i], sequences, total);
    if (!conv)
      return conv.takeError();
    qkv[i] = reshape(*conv, {kDyn, heads, dim});
  }

  // beta = sigmoid(b_proj x) per head; the log decay from the low-rank
  // forget gate.
  auto betaLin = linear(x, name("b_proj.weight"), spec.heads, spec.hidden, {},
                        Split::Output);
  if (!betaLin)
    return betaLin.takeError();
  Value beta =
      lm::SigmoidOp::create(b, loc, betaLin->getType(), *betaLin).getResult();
  auto fa = linear(x, name("f_a_proj.weight"), dim, spec.hidden);
  if (!fa)
    return fa.takeError();
  auto fb = linear(*fa, name("f_b_proj.weight"), total, dim, {}, Split::Output);
  if (!fb)
    return fb.takeError();
  // A_log holds one value a head in its one dim of `spec.heads` values.
  llvm::Expected<Value> aLog = Value(), dtBias = Value();
  if (tpRanks == 1) {
    aLog = weight(name("A_log"), spec.aLogShape, {safetensors::DType::F32});
    dtBias = weight(name("dt_bias"), {width}, {safetensors::DType::F32});
  } else {
    const int64_t *headDim = llvm::find(spec.aLogShape, spec.heads);
    if (headDim == spec.aLogShape.end())
      return errorf("'" + name("A_log") + "' has no dim of the " +
                    Twine(spec.heads) + " KDA heads to split");
    aLog = weightShard(name("A_log"), spec.aLogShape, {safetensors::DType::F32},
                       headDim - spec.aLogShape.begin(), firstHead, heads);
    dtBias = weightShard(name("dt_bias"), {total}, {safetensors::DType::F32}, 0,
                         firstHead * dim, width);
  }
  if (!aLog)
    return aLog.takeError();
  if (!dtBias)
    return dtBias.takeError();
  // A_log as [heads], whatever unit dims it is stored with.
  Value aLogHeads = *aLog;
  if (cast<RankedTensorType>(aLogHeads.getType()).getRank() > 1) {
    ReassociationIndices all;
    for (int64_t d = 0; d < int64_t(spec.aLogShape.size()); ++d)
      all.push_back(d);
    aLogHeads = tensor::CollapseShapeOp::create(
                    b, loc, *aLog, ArrayRef<ReassociationIndices>{all})
                    .getResult();
  }
  FloatAttr lowerBound;
  if (spec.lowerBound)
    lowerBound = b.getF64FloatAttr(*spec.lowerBound);
  Value decay = lm::KdaGateOp::create(
                    b, loc, f32Tensor({kDyn, heads, dim}),
                    reshape(*fb, {kDyn, heads, dim}), aLogHeads,
                    reshape(*dtBias, {heads, dim}, /*splitDim=*/0), lowerBound)
                    .getResult();

  // The gated delta rule from each sequence's recurrent state: chunked over
  // a prompt, one step a token in decode.
  Type outType = f32Tensor({kDyn, heads, dim});
  Type stateType = state.recurrent->getType();
  FloatAttr scale = b.getF64FloatAttr(1.0 / std::sqrt(double(dim)));
  Value out;
  if (decode) {
    auto step =
        lm::KdaStepOp::create(b, loc, outType, stateType, qkv[0], qkv[1],
                              qkv[2], decay, beta, *state.recurrent, sequences,
                              scale, b.getUnitAttr(), lm::StateLayoutAttr());
    out = step.getOutput();
    *state.recurrent = step.getNewState();
  } else {
    auto chunk = lm::KdaChunkOp::create(
        b, loc, outType, stateType, qkv[0], qkv[1], qkv[2], decay, beta,
        *state.recurrent, sequences, scale, b.getUnitAttr(),
        lm::StateLayoutAttr(), b.getI64IntegerAttr(64));
    out = chunk.getOutput();
    *state.recurrent = chunk.getNewState();
  }

  // Per-head RMSNorm times sigmoid of the output gate, then o_proj.
  auto ga = linear(x, name("g_a_proj.weight"), dim, spec.hidden);
  if (!ga)
    return ga.takeError();
  auto gb = linear(*ga, name("g_b_proj.weight"), total, dim, {}, Split::Output);
  if (!gb)
    return gb.takeError();
  auto onorm = floatWeight(name("o_norm.weight"), {dim});
  if (!onorm)
    return onorm.takeError();
  Value gated =
      lm::GatedRmsNormOp::create(
          b, loc, outType, out, reshape(*gb, {kDyn, heads, dim}), *onorm,
          lm::ActivationAttr::get(b.getContext(), lm::Activation::Sigmoid),
          b.getF64FloatAttr(spec.normEps))
          .getResult();
  return linear(collapseLast(gated), name("o_proj.weight"), spec.hidden, total,
                {}, Split::Input);
}

llvm::Expected<ModelBuilder::RoutedExperts>
ModelBuilder::perExpertGatedMlp(StringRef prefix, StringRef gate, StringRef up,
                                StringRef down, int64_t experts, int64_t hidden,
                                int64_t inter, StringRef stackShared) {
  RoutedExperts routed;
  auto mine = expertRange(experts, "'" + prefix + "*'");
  if (!mine)
    return mine.takeError();
  routed.splitByRank = tpRanks > 1 && epRanks == 1;
  std::tie(routed.firstExpert, routed.localExperts) = *mine;
  // The shared experts' gate, up and down stacked after the routed ones'
  // when stored alike (dtype, shape, FP8 scales) as routed expert 0's.
  const std::string shared[3] = {(stackShared + "gate_proj.weight").str(),
                                 (stackShared + "up_proj.weight").str(),
                                 (stackShared + "down_proj.weight").str()};
  const std::string first[3] = {(prefix + "0." + gate).str(),
                                (prefix + "0." + up).str(),
                                (prefix + "0." + down).str()};
  bool stack = !stackShared.empty();
  for (int i = 0; i < 3 && stack; ++i) {
    auto a = checkpoint.find(first[i]), s = checkpoint.find(shared[i]);
    stack = a && s && (*a)->dtype == (*s)->dtype &&
            (*a)->shape == (*s)->shape &&
            checkpoint.has(first[i] + "_scale_inv") ==
                checkpoint.has(shared[i] + "_scale_inv");
    if (!a)
      llvm::consumeError(a.takeError());
    if (!s)
      llvm::consumeError(s.takeError());
  }
  routed.sharedExperts = stack ? 1 : 0;
  int i = 0;
  for (auto [weights, suffix, out, in, split] :
       {std::tuple{&routed.gate, gate, inter, hidden, Split::Output},
        {&routed.up, up, inter, hidden, Split::Output},
        {&routed.down, down, hidden, inter, Split::Input}}) {
    auto w = perExpertWeights(prefix, suffix, experts, out, in, split,
                              stack ? StringRef(shared[i]) : StringRef());
    ++i;
    if (!w)
      return w.takeError();
    *weights = *w;
  }
  return routed;
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

