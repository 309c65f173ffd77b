//===- Evaluator.cpp - Interpreter for lm IR on host tensors --------------===//

#include "compiler/reference/Evaluator.h"
#include "compiler/reference/Kernels.h"

#include "dialects/lm/LmOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/FormatVariadic.h"

#include <cmath>

using namespace mlir;
using namespace daybreak;
using namespace daybreak::ref;
using llvm::Expected;

//===----------------------------------------------------------------------===//
// Types and constants
//===----------------------------------------------------------------------===//

std::optional<ElementType> ref::toElementType(Type type) {
  if (type.isF64())
    return ElementType::F64;
  if (type.isF32())
    return ElementType::F32;
  if (type.isF16())
    return ElementType::F16;
  if (type.isBF16())
    return ElementType::BF16;
  if (isa<Float8E4M3FNType>(type))
    return ElementType::F8E4M3FN;
  if (isa<Float8E8M0FNUType>(type))
    return ElementType::F8E8M0FNU;
  if (isa<Float4E2M1FNType>(type))
    return ElementType::F4E2M1FN;
  if (type.isInteger(1))
    return ElementType::I1;
  if (type.isSignlessInteger(8) || type.isSignedInteger(8))
    return ElementType::I8;
  if (type.isUnsignedInteger(8))
    return ElementType::UI8;
  if (type.isInteger(32))
    return ElementType::I32;
  if (type.isInteger(64) || type.isIndex())
    return ElementType::I64;
  return std::nullopt;
}

static llvm::Error makeError(const llvm::Twine &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
}

static std::string describeType(Type type) {
  std::string s;
  llvm::raw_string_ostream os(s);
  os << type;
  return s;
}

Expected<Tensor> ref::tensorFromAttr(DenseElementsAttr attr) {
  auto type = cast<ShapedType>(attr.getType());
  std::optional<ElementType> elem = toElementType(type.getElementType());
  if (!elem)
    return makeError("unsupported constant element type " +
                     describeType(type.getElementType()));
  std::vector<int64_t> shape(type.getShape().begin(), type.getShape().end());
  if (isFloatType(*elem)) {
    std::vector<float> values;
    for (APFloat v : attr.getValues<APFloat>())
      values.push_back(static_cast<float>(v.convertToDouble()));
    return Tensor::fromFloats(shape, std::move(values), *elem);
  }
  std::vector<int64_t> values;
  for (APInt v : attr.getValues<APInt>())
    values.push_back(v.getSExtValue());
  return Tensor::fromInts(shape, std::move(values), *elem);
}

//===----------------------------------------------------------------------===//
// Small tensor helpers for the upstream ops
//===----------------------------------------------------------------------===//

/// Row-major strides of a shape.
static std::vector<int64_t> stridesOf(const std::vector<int64_t> &shape) {
  std::vector<int64_t> strides(shape.size(), 1);
  for (int64_t i = static_cast<int64_t>(shape.size()) - 2; i >= 0; --i)
    strides[i] = strides[i + 1] * shape[i + 1];
  return strides;
}

/// Copies element `from` of `src` to element `to` of `dst` (same kind).
static void copyElement(const Tensor &src, int64_t from, Tensor &dst,
                        int64_t to) {
  if (src.isFloat())
    dst.floats()[to] = src.floats()[from];
  else
    dst.ints()[to] = src.ints()[from];
}

static Tensor extractSlice(const Tensor &src, ArrayRef<int64_t> offsets,
                           ArrayRef<int64_t> sizes, ArrayRef<int64_t> steps,
                           std::vector<int64_t> resultShape) {
  std::vector<int64_t> full(sizes.begin(), sizes.end());
  Tensor dst = Tensor::zeros(src.type(), full);
  std::vector<int64_t> srcStrides = stridesOf(src.shape());
  std::vector<int64_t> index(full.size(), 0);
  for (int64_t linear = 0, n = dst.numel(); linear < n; ++linear) {
    int64_t from = 0;
    for (size_t d = 0; d < full.size(); ++d)
      from += (offsets[d] + index[d] * steps[d]) * srcStrides[d];
    copyElement(src, from, dst, linear);
    for (int64_t d = static_cast<int64_t>(full.size()) - 1; d >= 0; --d) {
      if (++index[d] < full[d])
        break;
      index[d] = 0;
    }
  }
  return dst.reshaped(std::move(resultShape));
}

static Tensor concat(ArrayRef<Tensor> inputs, int64_t dim) {
  std::vector<int64_t> shape = inputs.front().shape();
  shape[dim] = 0;
  for (const Tensor &t : inputs)
    shape[dim] += t.dim(dim);
  Tensor dst = Tensor::zeros(inputs.front().type(), shape);
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < dim; ++d)
    outer *= shape[d];
  for (size_t d = dim + 1; d < shape.size(); ++d)
    inner *= shape[d];
  int64_t written = 0;
  for (int64_t o = 0; o < outer; ++o)
    for (const Tensor &t : inputs) {
      int64_t chunk = t.dim(dim) * inner;
      for (int64_t i = 0; i < chunk; ++i)
        copyElement(t, o * chunk + i, dst, written++);
    }
  return dst;
}

//===----------------------------------------------------------------------===//
// Interpreter
//===----------------------------------------------------------------------===//

namespace {
/// Evaluates the ops of one function body.
class FrameEvaluator {
public:
  FrameEvaluator(Evaluator &parent, ModuleOp module, unsigned depth)
      : parent(parent), module(module), depth(depth) {}

  Expected<std::vector<Tensor>> run(func::FuncOp func,
                                    ArrayRef<Tensor> args);

private:
  /// The tensor bound to `value`, or an empty tensor for a null value (an
  /// absent optional operand).
  const Tensor &get(Value value) {
    static const Tensor absent;
    if (!value)
      return absent;
    return values.find(value)->second;
  }

  /// Binds `result` to `tensor` after rounding it to the result's element
  /// type and checking its shape against the declared one.
  llvm::Error bind(Value result, Tensor tensor);
  llvm::Error bind(Value result, Expected<Tensor> tensor) {
    if (!tensor)
      return tensor.takeError();
    return bind(result, std::move(*tensor));
  }

  /// Binds lm.mhc_pre's results, or lm.mhc_post_pre's collapse, of
  /// `streams`: the input (RMS-normed when the op carries a norm), post and
  /// comb.
  template <typename OpTy>
  llvm::Error bindMhcCollapse(OpTy op, const Tensor &streams, Value input,
                              Value post, Value comb);

  llvm::Error evaluate(Operation *op);
  /// Shows `observer` the operands and results of `op`, just evaluated.
  void notify(const OpObserver &observer, Operation *op);
  llvm::Error evaluateLm(Operation *op);
  Tensor cacheWritePrologue(lm::CacheWriteOp op, const Tensor &values);
  llvm::Error evaluateUpstream(Operation *op);

  Evaluator &parent;
  ModuleOp module;
  unsigned depth;
  llvm::DenseMap<Value, Tensor> values;
  std::vector<Tensor> results;
};
} // namespace

/// A collective over `count` ranks (each consecutive group of them) can
/// run with `ranks`.
static llvm::Error checkRanks(Collectives *ranks, int64_t count) {
  int64_t size = ranks ? ranks->size() : 1;
  if (count < 1 || count > size || size % count != 0)
    return makeError("a collective over " + llvm::Twine(count) +
                     " ranks, evaluated by " + llvm::Twine(size));
  return llvm::Error::success();
}

/// Checks `tensor` against `type`: element type and static dims.
static llvm::Error checkAgainstType(const Tensor &tensor, Type type,
                                    const llvm::Twine &what) {
  auto ranked = dyn_cast<RankedTensorType>(type);
  if (!ranked)
    return makeError(what + ": unsupported type " + describeType(type));
  std::optional<ElementType> elem = toElementType(ranked.getElementType());
  if (!elem || *elem != tensor.type())
    return makeError(what + ": expected element type " +
                     describeType(ranked.getElementType()) + ", got " +
                     tensor.describe());
  if (ranked.getRank() != tensor.rank())
    return makeError(what + ": expected " + describeType(type) + ", got " +
                     tensor.describe());
  for (int64_t i = 0; i < ranked.getRank(); ++i)
    if (!ranked.isDynamicDim(i) && ranked.getDimSize(i) != tensor.dim(i))
      return makeError(what + ": expected " + describeType(type) + ", got " +
                       tensor.describe());
  return llvm::Error::success();
}

llvm::Error FrameEvaluator::bind(Value result, Tensor tensor) {
  // Scalars (index sizes, splat values) are rank-0 tensors.
  if (!isa<RankedTensorType>(result.getType())) {
    values[result] = std::move(tensor);
    return llvm::Error::success();
  }
  auto type = cast<RankedTensorType>(result.getType());
  std::optional<ElementType> elem = toElementType(type.getElementType());
  if (!elem)
    return makeError("unsupported result element type " +
                     describeType(type.getElementType()));
  if (tensor.isFloat() && isFloatType(*elem) && tensor.type() != *elem)
    tensor = tensor.castTo(*elem);
  if (llvm::Error err = checkAgainstType(tensor, type, "result"))
    return err;
  values[result] = std::move(tensor);
  return llvm::Error::success();
}

Expected<std::vector<Tensor>> FrameEvaluator::run(func::FuncOp func,
                                                  ArrayRef<Tensor> args) {
  if (func.isExternal())
    return makeError("function @" + func.getSymName() + " has no body");
  FunctionType type = func.getFunctionType();
  if (args.size() != type.getNumInputs())
    return makeError(llvm::formatv("function @{0} takes {1} arguments, got {2}",
                                   func.getSymName(), type.getNumInputs(),
                                   args.size()));
  for (auto [i, arg] : llvm::enumerate(args)) {
    if (llvm::Error err = checkAgainstType(
            arg, type.getInput(i),
            llvm::formatv("@{0} argument {1}", func.getSymName(), i)))
      return std::move(err);
    values[func.getArgument(i)] = arg;
  }
  for (Operation &op : func.getBody().front()) {
    if (llvm::Error err = evaluate(&op)) {
      std::string location;
      llvm::raw_string_ostream os(location);
      os << op.getLoc();
      return makeError(llvm::formatv("in @{0}, {1} at {2}: {3}",
                                     func.getSymName(), op.getName(),
                                     location, llvm::toString(std::move(err))));
    }
    if (const OpObserver &observer = parent.getOpObserver())
      notify(observer, &op);
  }
  return std::move(results);
}

void FrameEvaluator::notify(const OpObserver &observer, Operation *op) {
  std::vector<const Tensor *> operands, results;
  for (Value v : op->getOperands())
    operands.push_back(&get(v));
  for (Value v : op->getResults()) {
    auto it = values.find(v);
    results.push_back(it == values.end() ? nullptr : &it->second);
  }
  observer(op, operands, results);
}

llvm::Error FrameEvaluator::evaluate(Operation *op) {
  if (isa<lm::LmDialect>(op->getDialect()))
    return evaluateLm(op);
  return evaluateUpstream(op);
}

static double f64(APFloat value) { return value.convertToDouble(); }

static YarnParams yarnParams(lm::YarnAttr yarn) {
  YarnParams y;
  y.factor = yarn.getFactor().getValueAsDouble();
  y.originalMaxPositions = yarn.getOriginalMaxPositions();
  y.betaFast = yarn.getBetaFast().getValueAsDouble();
  y.betaSlow = yarn.getBetaSlow().getValueAsDouble();
  y.attentionFactor = yarn.getAttentionFactor().getValueAsDouble();
  y.truncate = yarn.getTruncate().getValue();
  return y;
}

/// lm.rope's rotation, or a prologue's RoPE (lm.cache_write's,
/// lm.dsa_indexer_scores').
static RopeParams ropeParams(lm::RopeStyle style, int64_t offset, int64_t dim,
                             APFloat theta, std::optional<lm::YarnAttr> yarn) {
  RopeParams p;
  p.style = style == lm::RopeStyle::Interleaved ? RopeStyle::Interleaved
                                                : RopeStyle::HalfSplit;
  p.offset = offset;
  p.dim = dim;
  p.theta = f64(theta);
  if (yarn)
    p.yarn = yarnParams(*yarn);
  return p;
}

static RopeParams ropeParams(lm::RopeOp op) {
  return ropeParams(op.getStyle(), op.getOffset(), op.getDim(), op.getTheta(),
                    op.getYarn());
}

/// lm.cache_write's prologue over rows [T, W]: lm.rms_norm or
/// lm.layer_norm of the columns [0, norm_dim) put back in place, then
/// lm.rope over the row's rotated columns.
Tensor FrameEvaluator::cacheWritePrologue(lm::CacheWriteOp op,
                                          const Tensor &values) {
  Tensor rows = values;
  if (std::optional<lm::NormKind> norm = op.getNorm()) {
    int64_t tokens = values.dim(0), width = values.dim(1);
    int64_t normDim = *op.getNormDim();
    Tensor head = Tensor::zeros(ElementType::F32, {tokens, normDim});
    for (int64_t t = 0; t < tokens; ++t)
      std::copy_n(values.floats().data() + t * width, normDim,
                  head.floats().data() + t * normDim);
    double eps = op.getEps()->convertToDouble();
    Tensor normed = *norm == lm::NormKind::Rms
                        ? rmsNorm(head, get(op.getNormWeight()), eps)
                        : layerNorm(head, get(op.getNormWeight()),
                                    get(op.getNormBias()), eps);
    for (int64_t t = 0; t < tokens; ++t)
      std::copy_n(normed.floats().data() + t * normDim, normDim,
                  rows.floats().data() + t * width);
  }
  if (Value positions = op.getPositions()) {
    RopeParams p = ropeParams(*op.getRopeStyle(), *op.getRopeOffset(),
                              *op.getRopeDim(), *op.getTheta(), op.getYarn());
    // Each head of rope_head_dim columns, as lm.rope rotates [T, H, D].
    int64_t tokens = rows.dim(0), width = rows.dim(1);
    int64_t head = op.getRopeHeadDim().value_or(width);
    rows = rope(rows.reshaped({tokens, width / head, head}), get(positions), p)
               .reshaped({tokens, width});
  }
  return rows;
}

static GateActivation gateActivation(lm::Activation act) {
  return act == lm::Activation::Silu ? GateActivation::Silu
                                     : GateActivation::Sigmoid;
}

static KdaParams kdaParams(double scale, bool l2norm, int64_t chunk = 64) {
  KdaParams p;
  p.scale = scale;
  p.qkL2Norm = l2norm;
  p.chunkSize = chunk;
  return p;
}


/// Evaluates the scalar body of an lm.elementwise for one element: arith
/// and math ops on f32/f64 scalars, in fp64.
static Expected<double> evaluateScalarBody(Block &body,
                                           ArrayRef<double> args) {
  llvm::DenseMap<Value, double> scalars;
  for (auto [arg, v] : llvm::zip(body.getArguments(), args))
    scalars[arg] = v;
  for (Operation &op : body) {
    auto in = [&](unsigned i) { return scalars.lookup(op.getOperand(i)); };
    std::optional<double> result =
        llvm::TypeSwitch<Operation *, std::optional<double>>(&op)
            .Case([&](arith::ConstantOp c) -> std::optional<double> {
              if (auto f = dyn_cast<FloatAttr>(c.getValue()))
                return f.getValueAsDouble();
              return std::nullopt;
            })
            .Case([&](arith::AddFOp) { return in(0) + in(1); })
            .Case([&](arith::SubFOp) { return in(0) - in(1); })
            .Case([&](arith::MulFOp) { return in(0) * in(1); })
            .Case([&](arith::DivFOp) { return in(0) / in(1); })
            .Case([&](arith::NegFOp) { return -in(0); })
            .Case([&](arith::MaximumFOp) { return std::max(in(0), in(1)); })
            .Case([&](arith::MinimumFOp) { return std::min(in(0), in(1)); })
            .Case([&](math::ExpOp) { return std::exp(in(0)); })
            .Case([&](math::TanhOp) { return std::tanh(in(0)); })
            .Case([&](lm::YieldOp) { return in(0); })
            .Default([](Operation *) { return std::nullopt; });
    if (!result)
      return makeError("no scalar semantics for '" +
                       op.getName().getStringRef() + "' in lm.elementwise");
    if (isa<lm::YieldOp>(op))
      return *result;
    scalars[op.getResult(0)] = *result;
  }
  return makeError("lm.elementwise body without lm.yield");
}

template <typename OpTy>
llvm::Error FrameEvaluator::bindMhcCollapse(OpTy op, const Tensor &streams,
                                            Value input, Value post,
                                            Value comb) {
  ref::MhcPre r = ref::mhcPre(streams, get(op.getFn()), get(op.getBase()),
                              get(op.getScale()), op.getSinkhornIters(),
                              f64(op.getEps()), f64(op.getNormEps()));
  // The sum is rounded to the input's type before the norm, as the two
  // unfused ops would bind it.
  if (llvm::Error err = bind(input, std::move(r.input)))
    return err;
  if (Value norm = op.getNorm())
    if (llvm::Error err = bind(
            input, ref::rmsNorm(get(input), get(norm), f64(*op.getInputEps()))))
      return err;
  if (llvm::Error err = bind(post, std::move(r.post)))
    return err;
  return bind(comb, std::move(r.comb));
}

/// Applies a binary float function elementwise to equal-shaped tensors.
template <typename Fn>
static Expected<Tensor> elementwise(const Tensor &a, const Tensor &b, Fn fn) {
  if (a.shape() != b.shape())
    return makeError("operands of different shapes " + a.describe() + " and " +
                     b.describe());
  Tensor out = Tensor::zeros(ElementType::F32, a.shape());
  for (int64_t i = 0, n = a.numel(); i < n; ++i)
    out.floats()[i] = fn(a.floats()[i], b.floats()[i]);
  return out;
}

llvm::Error FrameEvaluator::evaluateLm(Operation *op) {
  using namespace lm;
  return llvm::TypeSwitch<Operation *, llvm::Error>(op)
      .Case([&](RmsNormOp o) {
        return bind(o.getResult(), rmsNorm(get(o.getInput()),
                                           get(o.getWeight()),
                                           f64(o.getEps())));
      })
      .Case([&](AddRmsNormOp o) -> llvm::Error {
        // As arith.addf, then lm.rms_norm over the sum as bound.
        if (llvm::Error err =
                bind(o.getSum(),
                     elementwise(get(o.getInput()), get(o.getResidual()),
                                 [](float x, float y) { return x + y; })))
          return err;
        return bind(o.getResult(), rmsNorm(get(o.getSum()), get(o.getWeight()),
                                           f64(o.getEps())));
      })
      .Case([&](LayerNormOp o) {
        return bind(o.getResult(),
                    layerNorm(get(o.getInput()), get(o.getWeight()),
                              get(o.getBias()), f64(o.getEps())));
      })
      .Case([&](GatedRmsNormOp o) {
        return bind(o.getResult(),
                    gatedRmsNorm(get(o.getInput()), get(o.getGate()),
                                 get(o.getWeight()), f64(o.getEps()),
                                 gateActivation(o.getActivation())));
      })
      .Case([&](ElementwiseOp o) -> llvm::Error {
        std::vector<const Tensor *> inputs;
        for (Value v : o.getInputs())
          inputs.push_back(&get(v));
        Tensor out = Tensor::zeros(ElementType::F32, inputs.front()->shape());
        std::vector<double> args(inputs.size());
        for (int64_t i = 0, n = out.numel(); i < n; ++i) {
          for (size_t k = 0; k < inputs.size(); ++k)
            args[k] = inputs[k]->floats()[i];
          Expected<double> v = evaluateScalarBody(o.getBody().front(), args);
          if (!v)
            return v.takeError();
          out.floats()[i] = static_cast<float>(*v);
        }
        return bind(o.getResult(), std::move(out));
      })
      .Case([&](SigmoidOp o) {
        return bind(o.getResult(), sigmoid(get(o.getInput())));
      })
      .Case([&](SiluOp o) {
        return bind(o.getResult(), silu(get(o.getInput())));
      })
      .Case([&](SwigluOp o) {
        std::optional<double> limit;
        if (std::optional<APFloat> l = o.getLimit())
          limit = f64(*l);
        return bind(o.getResult(),
                    swiglu(get(o.getGate()), get(o.getUp()),
                           f64(o.getAlpha()), limit, f64(o.getUpOffset())));
      })
      .Case([&](SituOp o) {
        return bind(o.getResult(),
                    situ(get(o.getGate()), get(o.getUp()), f64(o.getBeta()),
                         f64(o.getLinearBeta())));
      })
      .Case([&](RopeOp o) {
        const Tensor &input = get(o.getInput());
        std::optional<int64_t> head = o.getHeadDim();
        if (!head)
          return bind(o.getResult(),
                      rope(input, get(o.getPositions()), ropeParams(o)));
        // Rows [T, H * D] of heads: the [T, H, D] rope, reshaped.
        std::vector<int64_t> heads(input.shape()), rows(input.shape());
        heads.back() /= *head;
        heads.push_back(*head);
        return bind(o.getResult(), rope(input.reshaped(heads),
                                        get(o.getPositions()), ropeParams(o))
                                       .reshaped(rows));
      })
      .Case([&](MatmulOp o) {
        return bind(o.getResult(), matmul(get(o.getInput()),
                                          get(o.getWeight()), get(o.getBias())));
      })
      .Case([&](HeadMatmulOp o) {
        return bind(o.getResult(), headMatmul(get(o.getInput()),
                                              get(o.getWeight()),
                                              o.getTransposeWeight()));
      })
      .Case([&](TransposeOp o) {
        ArrayRef<int64_t> perm = o.getPermutation();
        return bind(o.getResult(),
                    transpose(get(o.getInput()),
                              std::vector<int64_t>(perm.begin(), perm.end())));
      })
      .Case([&](Fp8DequantOp o) {
        ArrayRef<int64_t> block = o.getBlockSize();
        return bind(o.getResult(), fp8Dequant(get(o.getWeight()),
                                              get(o.getScaleInv()), block[0],
                                              block[1]));
      })
      .Case([&](ExpertMatmulOp o) {
        return bind(o.getResult(),
                    expertMatmul(get(o.getInput()), get(o.getWeight()),
                                 get(o.getIndices()),
                                 get(o.getRoutingWeights()), get(o.getBias())));
      })
      .Case([&](WeightRefOp o) -> llvm::Error {
        Expected<const Tensor *> w = parent.weight(o.getWeight());
        if (!w)
          return w.takeError();
        return bind(o.getResult(), **w);
      })
      .Case([&](Fp8MatmulOp o) {
        ArrayRef<int64_t> block = o.getBlockSize();
        return bind(o.getResult(),
                    fp8BlockMatmul(get(o.getInput()), get(o.getWeight()),
                                   get(o.getScaleInv()), block[0], block[1]));
      })
      .Case([&](Mxfp4ExpertMatmulOp o) {
        return bind(o.getResult(),
                    mxfp4ExpertMatmul(get(o.getInput()), get(o.getWeight()),
                                      get(o.getScales()), get(o.getIndices()),
                                      get(o.getRoutingWeights()),
                                      get(o.getBias())));
      })
      .Case([&](Mxfp4ToFp8ExpertsOp o) -> llvm::Error {
        auto converted = mxfp4ToFp8Experts(
            get(o.getWeight()), get(o.getScales()), get(o.getIndices()),
            get(o.getBias()), o.getCodes().getType().getDimSize(0),
            o.getAllFromTokens());
        if (!converted)
          return converted.takeError();
        if (llvm::Error err = bind(o.getCodes(), std::move(converted->codes)))
          return err;
        if (llvm::Error err =
                bind(o.getBlockScales(), std::move(converted->blockScales)))
          return err;
        if (llvm::Error err =
                bind(o.getSlotBias(), std::move(converted->slotBias)))
          return err;
        return bind(o.getSlots(), std::move(converted->slots));
      })
      .Case([&](MoeRouteOp o) {
        RoutingParams p;
        switch (o.getRouting()) {
        case lm::RoutingScore::Sigmoid:
          p.score = ref::RoutingScore::Sigmoid;
          break;
        case lm::RoutingScore::Softmax:
          p.score = ref::RoutingScore::Softmax;
          break;
        case lm::RoutingScore::SoftmaxTopK:
          p.score = ref::RoutingScore::SoftmaxTopK;
          break;
        }
        p.topK = o.getTopK();
        p.numGroups = o.getNumGroups();
        p.topKGroups = o.getTopKGroups();
        p.renormalize = o.getRenormalize();
        p.scalingFactor = f64(o.getScalingFactor());
        p.sharedExperts = o.getSharedExperts();
        Routing r = moeRoute(get(o.getLogits()), get(o.getBias()), p);
        if (llvm::Error err = bind(o.getIndices(), std::move(r.indices)))
          return err;
        return bind(o.getWeights(), std::move(r.weights));
      })
      .Case([&](AttentionOp o) {
        AttentionParams p;
        p.scale = f64(o.getScale());
        switch (o.getMask()) {
        case lm::MaskKind::Causal:
          p.mask = ref::MaskKind::Causal;
          break;
        case lm::MaskKind::SlidingWindow:
          p.mask = ref::MaskKind::SlidingWindow;
          p.window = *o.getWindow();
          break;
        case lm::MaskKind::Bidirectional:
          p.mask = ref::MaskKind::Bidirectional;
          break;
        }
        if (cast<ShapedType>(o.getK().getType()).getRank() == 4)
          return bind(o.getResult(),
                      cachedAttention(get(o.getQ()), get(o.getK()),
                                      get(o.getV()), p, get(o.getSinks()),
                                      get(o.getQPositions()),
                                      get(o.getQSegments())));
        return bind(o.getResult(),
                    attention(get(o.getQ()), get(o.getK()), get(o.getV()), p,
                              get(o.getSinks()), get(o.getQPositions()),
                              get(o.getKPositions()), get(o.getQSegments()),
                              get(o.getKSegments())));
      })
      .Case([&](SparseAttentionOp o) {
        return bind(o.getResult(),
                    sparseAttention(get(o.getQ()), get(o.getKv()),
                                    get(o.getIndices()), f64(o.getScale()),
                                    o.getValueDim(), get(o.getSinks()),
                                    get(o.getSequences())));
      })
      .Case([&](DsaIndexerScoresOp o) {
        // The prologue's RoPE: lm.rope of the query heads [T, H, D].
        Tensor q = get(o.getQ());
        if (Value positions = o.getPositions())
          q = rope(q, get(positions),
                   ropeParams(*o.getRopeStyle(), *o.getRopeOffset(),
                              *o.getRopeDim(), *o.getTheta(), o.getYarn()));
        return bind(o.getResult(),
                    dsaIndexerScores(q, get(o.getK()), get(o.getWeights()),
                                     get(o.getSequences()), f64(o.getScale()),
                                     get(o.getBounds())));
      })
      .Case([&](DsaIndexSelectOp o) {
        return bind(o.getResult(), dsaIndexSelect(get(o.getScores()),
                                                  get(o.getBounds()),
                                                  o.getTopK()));
      })
      .Case([&](DsaKpoolOp o) -> llvm::Error {
        auto r = dsaKpool(get(o.getKeys()), get(o.getGate()), get(o.getApe()),
                          get(o.getState()), get(o.getPositions()),
                          get(o.getSequences()));
        if (!r)
          return r.takeError();
        if (llvm::Error err = bind(o.getOutput(), std::move(r->output)))
          return err;
        return bind(o.getNewState(), std::move(r->state));
      })
      .Case([&](DsaKpoolExpandOp o) {
        return bind(o.getResult(),
                    dsaKpoolExpand(get(o.getPools()), get(o.getPositions()),
                                   o.getPoolSize()));
      })
      .Case([&](ShortConvOp o) -> llvm::Error {
        ConvActivation act = o.getActivation() == Activation::Silu
                                 ? ConvActivation::Silu
                                 : ConvActivation::None;
        ConvResult r;
        if (o.getSequences()) {
          auto slots =
              causalConv1dSlots(get(o.getInput()), get(o.getWeight()),
                                get(o.getState()), get(o.getSequences()), act);
          if (!slots)
            return slots.takeError();
          r = std::move(*slots);
        } else {
          r = causalConv1d(get(o.getInput()), get(o.getWeight()),
                           get(o.getState()), act);
        }
        if (llvm::Error err = bind(o.getOutput(), std::move(r.output)))
          return err;
        return bind(o.getNewState(), std::move(r.state));
      })
      .Case([&](KdaGateOp o) {
        std::optional<double> bound;
        if (std::optional<APFloat> b = o.getLowerBound())
          bound = f64(*b);
        return bind(o.getResult(), kdaGate(get(o.getRaw()), get(o.getALog()),
                                           get(o.getDtBias()), bound));
      })
      .Case([&](KdaChunkOp o) -> llvm::Error {
        KdaParams params =
            kdaParams(f64(o.getScale()), o.getQkL2norm(), o.getChunkSize());
        KdaResult r;
        if (o.getSequences()) {
          auto slots =
              kdaSlots(get(o.getQ()), get(o.getK()), get(o.getV()),
                       get(o.getG()), get(o.getBeta()), get(o.getState()),
                       get(o.getSequences()), params, /*chunked=*/true);
          if (!slots)
            return slots.takeError();
          r = std::move(*slots);
        } else {
          r = kdaChunk(get(o.getQ()), get(o.getK()), get(o.getV()),
                       get(o.getG()), get(o.getBeta()), get(o.getState()),
                       params);
        }
        if (llvm::Error err = bind(o.getOutput(), std::move(r.output)))
          return err;
        return bind(o.getNewState(), std::move(r.state));
      })
      .Case([&](KdaStepOp o) -> llvm::Error {
        KdaParams params = kdaParams(f64(o.getScale()), o.getQkL2norm());
        KdaResult r;
        if (o.getSequences()) {
          auto slots =
              kdaSlots(get(o.getQ()), get(o.getK()), get(o.getV()),
                       get(o.getG()), get(o.getBeta()), get(o.getState()),
                       get(o.getSequences()), params, /*chunked=*/false);
          if (!slots)
            return slots.takeError();
          r = std::move(*slots);
        } else {
          r = kdaStep(get(o.getQ()), get(o.getK()), get(o.getV()),
                      get(o.getG()), get(o.getBeta()), get(o.getState()),
                      params);
        }
        if (llvm::Error err = bind(o.getOutput(), std::move(r.output)))
          return err;
        return bind(o.getNewState(), std::move(r.state));
      })
      .Case([&](BlockAttnResOp o) {
        std::vector<Tensor> sources;
        for (Value v : o.getSources())
          sources.push_back(get(v));
        return bind(o.getResult(),
                    blockAttnRes(sources, get(o.getNormWeight()),
                                 get(o.getProj()), f64(o.getEps())));
      })
      .Case([&](MhcPreOp o) {
        return bindMhcCollapse(o, get(o.getStreams()), o.getInput(),
                               o.getPost(), o.getComb());
      })
      .Case([&](MhcPostOp o) {
        return bind(o.getResult(), mhcPost(get(o.getStreams()), get(o.getY()),
                                           get(o.getPost()), get(o.getComb())));
      })
      .Case([&](MhcPostPreOp o) {
        // The new streams as bound (rounded to their type), then the
        // collapse of lm.mhc_pre on them.
        if (llvm::Error err = bind(o.getResult(),
                                   mhcPost(get(o.getStreams()), get(o.getY()),
                                           get(o.getPost()), get(o.getComb()))))
          return err;
        return bindMhcCollapse(o, get(o.getResult()), o.getInput(),
                               o.getNextPost(), o.getNextComb());
      })
      .Case([&](EmbeddingOp o) {
        return bind(o.getResult(), embedding(get(o.getTable()),
                                             get(o.getIds())));
      })
      .Case([&](AllReduceOp o) -> llvm::Error {
        Collectives *ranks = parent.getCollectives();
        if (llvm::Error err = checkRanks(ranks, o.getRanksAttr().getInt()))
          return err;
        if (o.getRanksAttr().getInt() == 1)
          return bind(o.getResult(), get(o.getInput()));
        return bind(
            o.getResult(),
            ranks->allReduceSum(get(o.getInput()), o.getRanksAttr().getInt()));
      })
      .Case([&](LocalExpertsOp o) {
        Tensor out = get(o.getIndices());
        int64_t first = o.getFirstAttr().getInt(),
                count = o.getCountAttr().getInt();
        for (int64_t &id : out.ints())
          id = id >= first && id < first + count ? id - first : -1;
        return bind(o.getResult(), std::move(out));
      })
      .Case([&](AllGatherOp o) -> llvm::Error {
        Collectives *ranks = parent.getCollectives();
        if (llvm::Error err = checkRanks(ranks, o.getRanksAttr().getInt()))
          return err;
        if (o.getRanksAttr().getInt() == 1)
          return bind(o.getResult(), get(o.getInput()));
        return bind(o.getResult(), ranks->allGather(get(o.getInput()),
                                                    o.getRanksAttr().getInt()));
      })
      .Case([&](GatherRowsOp o) {
        return bind(o.getResult(),
                    gatherRows(get(o.getInput()), get(o.getRows())));
      })
      .Case([&](CacheWriteOp o) {
        CacheStorage storage;
        if (std::optional<KVLayoutAttr> layout = o.getLayout()) {
          std::optional<ElementType> elem =
              toElementType(layout->getStorageType());
          storage.storage = elem ? *elem : ElementType::F32;
          storage.scaleBlock = layout->getScaleBlock();
          storage.tailDim = layout->getTailDim();
        }
        if (!o.hasPrologue())
          return bind(o.getResult(),
                      cacheWrite(get(o.getCache()), get(o.getValues()),
                                 get(o.getSlots()), get(o.getSequences()),
                                 storage));
        Tensor rows = cacheWritePrologue(o, get(o.getValues()));
        return bind(o.getResult(),
                    cacheWrite(get(o.getCache()), rows, get(o.getSlots()),
                               get(o.getSequences()), storage));
      })
      .Default([&](Operation *) {
        return makeError("the reference evaluator has no semantics for this "
                         "op");
      });
}

llvm::Error FrameEvaluator::evaluateUpstream(Operation *op) {
  return llvm::TypeSwitch<Operation *, llvm::Error>(op)
      .Case([&](func::ReturnOp o) {
        for (Value v : o.getOperands())
          results.push_back(get(v));
        return llvm::Error::success();
      })
      .Case([&](func::CallOp o) -> llvm::Error {
        std::vector<Tensor> args;
        for (Value v : o.getOperands())
          args.push_back(get(v));
        if (depth >= 64)
          return makeError("call depth exceeds 64 (recursion?)");
        auto callee = module.lookupSymbol<func::FuncOp>(o.getCallee());
        if (!callee)
          return makeError("unknown callee @" + o.getCallee());
        FrameEvaluator frame(parent, module, depth + 1);
        Expected<std::vector<Tensor>> out = frame.run(callee, args);
        if (!out)
          return out.takeError();
        for (auto [result, tensor] : llvm::zip(o.getResults(), *out))
          if (llvm::Error err = bind(result, std::move(tensor)))
            return err;
        return llvm::Error::success();
      })
      .Case([&](arith::ConstantOp o) -> llvm::Error {
        if (auto dense = dyn_cast<DenseElementsAttr>(o.getValue()))
          return bind(o.getResult(), tensorFromAttr(dense));
        if (auto integer = dyn_cast<IntegerAttr>(o.getValue()))
          return bind(o.getResult(),
                      Tensor::fromInts({}, {integer.getInt()},
                                       o.getType().isInteger(32)
                                           ? ElementType::I32
                                           : ElementType::I64));
        return makeError("unsupported constant");
      })
      .Case([&](tensor::DimOp o) -> llvm::Error {
        std::optional<int64_t> dim = o.getConstantIndex();
        if (!dim)
          return makeError("only constant dims are supported");
        return bind(o.getResult(),
                    Tensor::fromInts({}, {get(o.getSource()).dim(*dim)},
                                     ElementType::I64));
      })
      .Case([&](tensor::SplatOp o) -> llvm::Error {
        auto type = cast<RankedTensorType>(o.getType());
        std::vector<int64_t> shape;
        auto dynamic = o.getDynamicSizes().begin();
        for (int64_t d : type.getShape())
          shape.push_back(ShapedType::isDynamic(d) ? get(*dynamic++).ints()[0]
                                                   : d);
        const Tensor &scalar = get(o.getInput());
        std::optional<ElementType> elem = toElementType(type.getElementType());
        Tensor out = Tensor::zeros(*elem, shape);
        if (out.isFloat())
          std::fill(out.floats().begin(), out.floats().end(),
                    scalar.floats()[0]);
        else
          std::fill(out.ints().begin(), out.ints().end(), scalar.ints()[0]);
        return bind(o.getResult(), std::move(out));
      })
      .Case([&](arith::AddIOp o) -> llvm::Error {
        const Tensor &a = get(o.getLhs()), &b = get(o.getRhs());
        if (a.shape() != b.shape() || a.isFloat() || b.isFloat())
          return makeError("integer operands of different shapes " +
                           a.describe() + " and " + b.describe());
        Tensor out = a;
        for (int64_t i = 0, n = a.numel(); i < n; ++i)
          out.ints()[i] += b.ints()[i];
        return bind(o.getResult(), std::move(out));
      })
      .Case([&](arith::DivSIOp o) -> llvm::Error {
        const Tensor &a = get(o.getLhs()), &b = get(o.getRhs());
        if (a.shape() != b.shape() || a.isFloat() || b.isFloat())
          return makeError("integer operands of different shapes " +
                           a.describe() + " and " + b.describe());
        Tensor out = a;
        for (int64_t i = 0, n = a.numel(); i < n; ++i) {
          if (b.ints()[i] == 0)
            return makeError("integer division by zero");
          out.ints()[i] /= b.ints()[i];
        }
        return bind(o.getResult(), std::move(out));
      })
      .Case([&](arith::AddFOp o) {
        return bind(o.getResult(),
                    elementwise(get(o.getLhs()), get(o.getRhs()),
                                [](float x, float y) { return x + y; }));
      })
      .Case([&](arith::SubFOp o) {
        return bind(o.getResult(),
                    elementwise(get(o.getLhs()), get(o.getRhs()),
                                [](float x, float y) { return x - y; }));
      })
      .Case([&](arith::MulFOp o) {
        return bind(o.getResult(),
                    elementwise(get(o.getLhs()), get(o.getRhs()),
                                [](float x, float y) { return x * y; }));
      })
      .Case([&](arith::DivFOp o) {
        return bind(o.getResult(),
                    elementwise(get(o.getLhs()), get(o.getRhs()),
                                [](float x, float y) { return x / y; }));
      })
      .Case([&](arith::ExtFOp o) -> llvm::Error {
        // A wider float type holds every value (E2M1 in E4M3, E8M0 in f32,
        // the MXFP4 offline route): the values stay, the type changes.
        const Tensor &in = get(o.getIn());
        std::optional<ElementType> elem =
            toElementType(cast<ShapedType>(o.getType()).getElementType());
        if (!elem || !in.isFloat())
          return makeError("arith.extf only on float tensors");
        Tensor out = Tensor::zeros(*elem, in.shape());
        out.floats() = in.floats();
        return bind(o.getResult(), std::move(out));
      })
      .Case([&](arith::NegFOp o) {
        Tensor out = get(o.getOperand());
        for (float &v : out.floats())
          v = -v;
        return bind(o.getResult(), std::move(out));
      })
      .Case([&](tensor::ExtractSliceOp o) -> llvm::Error {
        // Dynamic offsets and sizes are index scalars (rank-0 tensors).
        auto resolve = [&](ArrayRef<OpFoldResult> mixed) {
          std::vector<int64_t> out;
          for (OpFoldResult r : mixed) {
            if (auto attr = dyn_cast<Attribute>(r))
              out.push_back(cast<IntegerAttr>(attr).getInt());
            else
              out.push_back(get(cast<Value>(r)).ints()[0]);
          }
          return out;
        };
        std::vector<int64_t> offsets = resolve(o.getMixedOffsets());
        std::vector<int64_t> sizes = resolve(o.getMixedSizes());
        std::vector<int64_t> strides = resolve(o.getMixedStrides());
        const Tensor &src = get(o.getSource());
        for (size_t d = 0; d < sizes.size(); ++d)
          if (sizes[d] > 0 &&
              (offsets[d] < 0 ||
               offsets[d] + (sizes[d] - 1) * strides[d] >= src.dim(d)))
            return makeError("slice outside the source " + src.describe());
        // Rank-reducing slices drop unit dims.
        llvm::SmallBitVector dropped = o.getDroppedDims();
        std::vector<int64_t> shape;
        for (size_t d = 0; d < sizes.size(); ++d)
          if (!dropped.test(d))
            shape.push_back(sizes[d]);
        return bind(o.getResult(),
                    extractSlice(src, offsets, sizes, strides, shape));
      })
      .Case([&](tensor::ExpandShapeOp o) -> llvm::Error {
        std::vector<int64_t> shape;
        for (OpFoldResult r : o.getMixedOutputShape()) {
          if (auto attr = dyn_cast<Attribute>(r))
            shape.push_back(cast<IntegerAttr>(attr).getInt());
          else
            shape.push_back(get(cast<Value>(r)).ints()[0]);
        }
        return bind(o.getResult(), get(o.getSrc()).reshaped(shape));
      })
      .Case([&](tensor::CollapseShapeOp o) -> llvm::Error {
        const Tensor &src = get(o.getSrc());
        std::vector<int64_t> shape;
        for (const ReassociationIndices &group :
             o.getReassociationIndices()) {
          int64_t size = 1;
          for (int64_t d : group)
            size *= src.dim(d);
          shape.push_back(size);
        }
        return bind(o.getResult(), src.reshaped(shape));
      })
      .Case([&](tensor::ConcatOp o) {
        std::vector<Tensor> inputs;
        for (Value v : o.getInputs())
          inputs.push_back(get(v));
        return bind(o.getResult(), concat(inputs, o.getDim()));
      })
      .Default([&](Operation *) {
        return makeError("the reference evaluator has no semantics for this "
                         "op");
      });
}

Expected<const Tensor *> Evaluator::weight(llvm::StringRef name) {
  auto it = loaded.find(name);
  if (it != loaded.end())
    return &it->second;
  auto decl = module.lookupSymbol<lm::WeightOp>(name);
  if (!decl)
    return makeError("no lm.weight @" + name);
  // A folded weight carries its value.
  if (std::optional<ElementsAttr> value = decl.getValue()) {
    auto dense = dyn_cast<DenseElementsAttr>(*value);
    if (!dense)
      return makeError("weight @" + name + " has a non-dense value");
    Expected<Tensor> tensor = tensorFromAttr(dense);
    if (!tensor)
      return tensor.takeError();
    return &loaded.emplace(name.str(), std::move(*tensor)).first->second;
  }
  if (!weights)
    return makeError("weight @" + name + " needed but no weights were given");
  Expected<Tensor> value = weights(decl);
  if (!value)
    return value.takeError();
  // Stacked sources come as [n, part...]; their bytes in order are the
  // weight's, whatever its shape (a GLU's gate and up rows, per expert).
  auto declType = cast<RankedTensorType>(decl.getType());
  std::vector<int64_t> declShape(declType.getShape().begin(),
                                 declType.getShape().end());
  if (decl.getSources().size() > 1 &&
      value->numel() == declType.getNumElements() &&
      value->shape() != declShape)
    *value = value->reshaped(std::move(declShape));
  if (llvm::Error err =
          checkAgainstType(*value, decl.getType(), "weight @" + name))
    return std::move(err);
  return &loaded.emplace(name.str(), std::move(*value)).first->second;
}

Expected<std::vector<Tensor>> Evaluator::run(llvm::StringRef name,
                                             llvm::ArrayRef<Tensor> args) {
  auto func = module.lookupSymbol<func::FuncOp>(name);
  if (!func)
    return makeError("no function @" + name + " in the module");
  FrameEvaluator frame(*this, module, depth);
  return frame.run(func, args);
}
