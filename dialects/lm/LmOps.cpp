//===- LmOps.cpp - Verifiers of the lm ops --------------------------------===//
//
// ODS constraints check element types; the verifiers here check what ODS
// cannot: ranks, dims that must agree across operands (dynamic dims agree
// with anything), and attribute values.
//
//===----------------------------------------------------------------------===//

#include "dialects/lm/LmOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/OpImplementation.h"
#include "llvm/Support/CheckedArithmetic.h"

#include <algorithm>
#include <cmath>
#include <limits>

using namespace mlir;
using namespace daybreak::lm;

//===----------------------------------------------------------------------===//
// Helpers
//===----------------------------------------------------------------------===//

namespace {
/// Checks shapes of one op and reports the first mismatch with the names of
/// the operands involved.
class ShapeChecker {
public:
  explicit ShapeChecker(Operation *op) : op(op) {}

  /// `name` must have rank `rank`.
  LogicalResult rank(StringRef name, Value value, int64_t rank) {
    auto type = cast<RankedTensorType>(value.getType());
    if (type.getRank() == rank)
      return success();
    return op->emitOpError("expects ")
           << name << " of rank " << rank << ", got " << type;
  }

  /// `name` must have rank >= `rank`.
  LogicalResult minRank(StringRef name, Value value, int64_t rank) {
    auto type = cast<RankedTensorType>(value.getType());
    if (type.getRank() >= rank)
      return success();
    return op->emitOpError("expects ")
           << name << " of rank >= " << rank << ", got " << type;
  }

  /// Dim `aDim` of `a` must equal dim `bDim` of `b` (negative dims count
  /// from the back). Dynamic dims match anything.
  LogicalResult same(StringRef aName, Value a, int64_t aDim, StringRef bName,
                     Value b, int64_t bDim) {
    int64_t x = dimOf(a, aDim), y = dimOf(b, bDim);
    if (ShapedType::isDynamic(x) || ShapedType::isDynamic(y) || x == y)
      return success();
    return op->emitOpError("expects ")
           << aName << " dim " << aDim << " (" << x << ") to equal " << bName
           << " dim " << bDim << " (" << y << ")";
  }

  /// Dim `aDim` of `a` must equal `expected` (when both are static).
  LogicalResult equals(StringRef aName, Value a, int64_t aDim,
                       int64_t expected, StringRef why) {
    int64_t x = dimOf(a, aDim);
    if (ShapedType::isDynamic(x) || ShapedType::isDynamic(expected) ||
        x == expected)
      return success();
    return op->emitOpError("expects ")
           << aName << " dim " << aDim << " to be " << expected << " (" << why
           << "), got " << x;
  }

  /// `a` and `b` must have compatible shapes (same rank, dims agree).
  LogicalResult sameShape(StringRef aName, Value a, StringRef bName, Value b) {
    auto at = cast<RankedTensorType>(a.getType());
    auto bt = cast<RankedTensorType>(b.getType());
    if (at.getRank() != bt.getRank())
      return op->emitOpError("expects ")
             << aName << " and " << bName << " of the same shape, got " << at
             << " and " << bt;
    for (int64_t i = 0; i < at.getRank(); ++i)
      if (failed(same(aName, a, i, bName, b, i)))
        return failure();
    return success();
  }

  /// Size of dim `dim` (negative counts from the back); dynamic when the
  /// dim does not exist, so callers may ask before the rank is checked.
  static int64_t dimOf(Value v, int64_t dim) {
    auto type = cast<RankedTensorType>(v.getType());
    int64_t index = dim < 0 ? dim + type.getRank() : dim;
    if (index < 0 || index >= type.getRank())
      return ShapedType::kDynamic;
    return type.getDimSize(index);
  }

  /// The first static size among dims that must agree (value, dim), so a
  /// size fixed by any operand is checked even when others are dynamic.
  static int64_t firstStatic(
      std::initializer_list<std::pair<Value, int64_t>> dims) {
    for (auto [value, dim] : dims)
      if (value && !ShapedType::isDynamic(dimOf(value, dim)))
        return dimOf(value, dim);
    return ShapedType::kDynamic;
  }

private:
  Operation *op;
};
} // namespace

/// Chains checks, stopping at the first failure.
#define CHECK(expr)                                                            \
  do {                                                                         \
    if (failed(expr))                                                          \
      return failure();                                                        \
  } while (false)

static LogicalResult expectPositive(Operation *op, StringRef name,
                                    double value) {
  if (!(value > 0.0))
    return op->emitOpError("expects ") << name << " > 0, got " << value;
  if (!std::isfinite(value))
    return op->emitOpError("expects a finite ") << name << ", got " << value;
  return success();
}

static LogicalResult expectPositive(Operation *op, StringRef name,
                                    int64_t value) {
  if (value > 0)
    return success();
  return op->emitOpError("expects ") << name << " > 0, got " << value;
}

/// A prologue's RoPE (lm.cache_write's, lm.dsa_indexer_scores'): the
/// positions and rope_style, rope_offset, rope_dim and theta together or not
/// at all, yarn only with them; the rotated columns [rope_offset, rope_offset
/// + rope_dim) inside each `unit` (a row or a head) of `head` columns, one
/// position per row of `rows` (named `rowsName`).
template <typename OpT>
static LogicalResult verifyRopePrologue(OpT op, StringRef rowsName, Value rows,
                                        int64_t head, StringRef unit) {
  bool rope = bool(op.getPositions());
  if (rope != op.getRopeStyle().has_value() ||
      rope != op.getRopeOffset().has_value() ||
      rope != op.getRopeDim().has_value() || rope != op.getTheta().has_value())
    return op.emitOpError(
        "expects rope_style, rope_offset, rope_dim, theta and "
        "the positions together or not at all");
  if (!rope)
    return success();
  ShapeChecker c(op);
  CHECK(c.rank("positions", op.getPositions(), 1));
  CHECK(c.same("positions", op.getPositions(), 0, rowsName, rows, 0));
  int64_t offset = *op.getRopeOffset(), dim = *op.getRopeDim();
  if (dim <= 0 || dim % 2 != 0)
    return op.emitOpError("expects a positive even rope_dim, got ") << dim;
  if (offset < 0)
    return op.emitOpError("expects rope_offset >= 0, got ") << offset;
  if (!ShapedType::isDynamic(head) && dim > head - offset)
    return op.emitOpError("expects the rotated columns [")
           << offset << ", " << uint64_t(offset) + uint64_t(dim)
           << ") inside the " << unit << " of " << head;
  return expectPositive(op, "theta", op.getTheta()->convertToDouble());
}

//===----------------------------------------------------------------------===//
// Norms and activations
//===----------------------------------------------------------------------===//

/// Shared by the norms: `weight [D]` matches the input's last dim and the
/// result has the input's shape.
static LogicalResult verifyNorm(Operation *op, Value input, Value weight,
                                Value result, double eps) {
  ShapeChecker c(op);
  CHECK(c.minRank("input", input, 1));
  CHECK(c.rank("weight", weight, 1));
  CHECK(c.same("weight", weight, 0, "input", input, -1));
  CHECK(c.sameShape("result", result, "input", input));
  return expectPositive(op, "eps", eps);
}

LogicalResult RmsNormOp::verify() {
  return verifyNorm(*this, getInput(), getWeight(), getResult(),
                    getEps().convertToDouble());
}

LogicalResult AddRmsNormOp::verify() {
  if (getResidual().getType() != getInput().getType() ||
      getSum().getType() != getInput().getType())
    return emitOpError("expects input, residual and sum of one type, got ")
           << getInput().getType() << ", " << getResidual().getType() << " and "
           << getSum().getType();
  return verifyNorm(*this, getInput(), getWeight(), getResult(),
                    getEps().convertToDouble());
}

LogicalResult LayerNormOp::verify() {
  if (Value bias = getBias()) {
    ShapeChecker c(*this);
    CHECK(c.rank("bias", bias, 1));
    CHECK(c.same("bias", bias, 0, "weight", getWeight(), 0));
  }
  return verifyNorm(*this, getInput(), getWeight(), getResult(),
                    getEps().convertToDouble());
}

LogicalResult GatedRmsNormOp::verify() {
  ShapeChecker c(*this);
  CHECK(c.sameShape("gate", getGate(), "input", getInput()));
  if (getActivation() == Activation::None)
    return emitOpError("expects a sigmoid or silu gate activation");
  return verifyNorm(*this, getInput(), getWeight(), getResult(),
                    getEps().convertToDouble());
}

/// Shared by the gated linear units: gate, up and result agree in shape.
static LogicalResult verifyGlu(Operation *op, Value gate, Value up,
                               Value result) {
  ShapeChecker c(op);
  CHECK(c.sameShape("up", up, "gate", gate));
  return c.sameShape("result", result, "gate", gate);
}

LogicalResult SwigluOp::verify() {
  CHECK(verifyGlu(*this, getGate(), getUp(), getResult()));
  CHECK(expectPositive(*this, "alpha", getAlpha().convertToDouble()));
  if (std::optional<APFloat> limit = getLimit())
    CHECK(expectPositive(*this, "limit", limit->convertToDouble()));
  return success();
}

LogicalResult SituOp::verify() {
  CHECK(verifyGlu(*this, getGate(), getUp(), getResult()));
  CHECK(expectPositive(*this, "beta", getBeta().convertToDouble()));
  return expectPositive(*this, "linear_beta",
                        getLinearBeta().convertToDouble());
}

LogicalResult RopeOp::verify() {
  ShapeChecker c(*this);
  CHECK(c.minRank("input", getInput(), 2));
  CHECK(c.rank("positions", getPositions(), 1));
  CHECK(c.same("positions", getPositions(), 0, "input", getInput(), 0));
  CHECK(c.sameShape("result", getResult(), "input", getInput()));
  int64_t offset = getOffset(), dim = getDim();
  if (dim <= 0 || dim % 2 != 0)
    return emitOpError("expects a positive even rotary dim, got ") << dim;
  if (offset < 0)
    return emitOpError("expects offset >= 0, got ") << offset;
  int64_t headDim = ShapeChecker::dimOf(getInput(), -1);
  if (std::optional<int64_t> heads = getHeadDim()) {
    if (*heads <= 0)
      return emitOpError("expects a positive head_dim, got ") << *heads;
    if (cast<ShapedType>(getInput().getType()).getRank() != 2 ||
        ShapedType::isDynamic(headDim) || headDim % *heads != 0)
      return emitOpError("expects rows [T, W] of whole heads of ")
             << *heads << " columns with head_dim";
    headDim = *heads;
  }
  if (!ShapedType::isDynamic(headDim) && dim > headDim - offset)
    return emitOpError("expects the rotated slice [")
           << offset << ", " << uint64_t(offset) + uint64_t(dim) << ") inside "
           << (getHeadDim() ? "each head" : "the last dim") << " of size "
           << headDim;
  return expectPositive(*this, "theta", getTheta().convertToDouble());
}

LogicalResult ElementwiseOp::verify() {
  auto resultType = cast<RankedTensorType>(getResult().getType());
  Block &body = getBody().front();
  if (body.getNumArguments() != getInputs().size())
    return emitOpError("expects one body argument per input, got ")
           << body.getNumArguments() << " for " << getInputs().size();
  ShapeChecker c(*this);
  for (auto [i, input] : llvm::enumerate(getInputs())) {
    auto type = cast<RankedTensorType>(input.getType());
    if (failed(c.sameShape(("input " + Twine(i)).str(), input, "result",
                           getResult())))
      return failure();
    if (body.getArgument(i).getType() != type.getElementType())
      return emitOpError("expects body argument ")
             << i << " of type " << type.getElementType() << ", got "
             << body.getArgument(i).getType();
  }
  auto yield = dyn_cast_or_null<YieldOp>(
      body.empty() ? nullptr : &body.back());
  if (!yield)
    return emitOpError("expects the body to end in lm.yield");
  if (yield.getValue().getType() != resultType.getElementType())
    return emitOpError("expects the body to yield ")
           << resultType.getElementType() << ", got "
           << yield.getValue().getType();
  return success();
}

//===----------------------------------------------------------------------===//
// Matmuls and routing
//===----------------------------------------------------------------------===//

/// `result[..., N]` from `input[..., K]` and a `[N, K]` weight: the leading
/// dims of input and result agree, and the last dims match N and K.
static LogicalResult verifyLinear(ShapeChecker &c, Value input, Value weight,
                                  Value result) {
  CHECK(c.minRank("input", input, 1));
  CHECK(c.rank("weight", weight, 2));
  CHECK(c.same("weight", weight, 1, "input", input, -1));
  auto in = cast<RankedTensorType>(input.getType());
  CHECK(c.rank("result", result, in.getRank()));
  for (int64_t i = 0; i + 1 < in.getRank(); ++i)
    CHECK(c.same("result", result, i, "input", input, i));
  return c.same("result", result, -1, "weight", weight, 0);
}

LogicalResult MatmulOp::verify() {
  ShapeChecker c(*this);
  CHECK(verifyLinear(c, getInput(), getWeight(), getResult()));
  if (Value bias = getBias()) {
    CHECK(c.rank("bias", bias, 1));
    CHECK(c.same("bias", bias, 0, "weight", getWeight(), 0));
  }
  return success();
}

LogicalResult Fp8MatmulOp::verify() {
  ShapeChecker c(*this);
  CHECK(verifyLinear(c, getInput(), getWeight(), getResult()));
  ArrayRef<int64_t> block = getBlockSize();
  if (block.size() != 2 || block[0] <= 0 || block[1] <= 0)
    return emitOpError("expects block_size of two positive sizes [bn, bk]");
  CHECK(c.rank("scale_inv", getScaleInv(), 2));
  for (int64_t i = 0; i < 2; ++i) {
    int64_t n = i == 0 ? ShapeChecker::firstStatic(
                             {{getWeight(), 0}, {getResult(), -1}})
                       : ShapeChecker::firstStatic(
                             {{getWeight(), 1}, {getInput(), -1}});
    if (ShapedType::isDynamic(n))
      continue;
    CHECK(c.equals("scale_inv", getScaleInv(), i,
                   llvm::divideCeil(n, block[i]),
                   "weight dim divided by the block size, rounded up"));
  }
  return success();
}

LogicalResult Mxfp4ExpertMatmulOp::verify() {
  ShapeChecker c(*this);
  Value input = getInput(), weight = getWeight(), scales = getScales();
  Value indices = getIndices();
  CHECK(c.rank("weight", weight, 3));
  CHECK(c.rank("scales", scales, 3));
  CHECK(c.rank("indices", indices, 2));
  int64_t k = ShapeChecker::firstStatic({{weight, 2}, {input, -1}});
  if (!ShapedType::isDynamic(k) && k % 32 != 0)
    return emitOpError("expects the reduction dim K to be a multiple of the "
                       "MXFP4 block of 32, got ")
           << k;
  CHECK(c.same("scales", scales, 0, "weight", weight, 0));
  CHECK(c.same("scales", scales, 1, "weight", weight, 1));
  CHECK(c.equals("scales", scales, 2,
                 ShapedType::isDynamic(k) ? k : k / 32,
                 "one scale per 32 weights along K"));
  auto inType = cast<RankedTensorType>(input.getType());
  if (inType.getRank() != 2 && inType.getRank() != 3)
    return emitOpError("expects input of rank 2 [T, K] or 3 [T, k, K], got ")
           << inType;
  CHECK(c.same("input", input, 0, "indices", indices, 0));
  if (inType.getRank() == 3)
    CHECK(c.same("input", input, 1, "indices", indices, 1));
  CHECK(c.same("input", input, -1, "weight", weight, 2));
  if (Value bias = getBias()) {
    CHECK(c.rank("bias", bias, 2));
    CHECK(c.same("bias", bias, 0, "weight", weight, 0));
    CHECK(c.same("bias", bias, 1, "weight", weight, 1));
  }
  Value result = getResult();
  if (Value routing = getRoutingWeights()) {
    CHECK(c.sameShape("weights", routing, "indices", indices));
    CHECK(c.rank("result", result, 2));
  } else {
    CHECK(c.rank("result", result, 3));
    CHECK(c.same("result", result, 1, "indices", indices, 1));
  }
  CHECK(c.same("result", result, 0, "indices", indices, 0));
  return c.same("result", result, -1, "weight", weight, 1);
}

LogicalResult Mxfp4ToFp8ExpertsOp::verify() {
  ShapeChecker c(*this);
  Value weight = getWeight(), scales = getScales(), indices = getIndices();
  Value codes = getCodes(), blockScales = getBlockScales();
  CHECK(c.rank("weight", weight, 3));
  CHECK(c.rank("scales", scales, 3));
  CHECK(c.rank("indices", indices, 2));
  CHECK(c.rank("codes", codes, 3));
  CHECK(c.rank("block_scales", blockScales, 3));
  CHECK(c.rank("slot_bias", getSlotBias(), 2));
  int64_t k = ShapeChecker::dimOf(weight, 2);
  if (!ShapedType::isDynamic(k) && k % 32 != 0)
    return emitOpError("expects the reduction dim K to be a multiple of the "
                       "MXFP4 block of 32, got ")
           << k;
  CHECK(c.same("scales", scales, 0, "weight", weight, 0));
  CHECK(c.same("scales", scales, 1, "weight", weight, 1));
  CHECK(c.equals("scales", scales, 2, ShapedType::isDynamic(k) ? k : k / 32,
                 "one scale per 32 weights along K"));
  if (Value bias = getBias()) {
    CHECK(c.rank("bias", bias, 2));
    CHECK(c.same("bias", bias, 0, "weight", weight, 0));
    CHECK(c.same("bias", bias, 1, "weight", weight, 1));
  }
  // The workspace: S slots of the weight's [N, K] and its scales' shape.
  CHECK(c.same("codes", codes, 1, "weight", weight, 1));
  CHECK(c.same("codes", codes, 2, "weight", weight, 2));
  CHECK(c.same("block_scales", blockScales, 0, "codes", codes, 0));
  CHECK(c.same("block_scales", blockScales, 1, "scales", scales, 1));
  CHECK(c.same("block_scales", blockScales, 2, "scales", scales, 2));
  CHECK(c.same("slot_bias", getSlotBias(), 0, "codes", codes, 0));
  CHECK(c.same("slot_bias", getSlotBias(), 1, "weight", weight, 1));
  int64_t slots = ShapeChecker::dimOf(codes, 0);
  int64_t experts = ShapeChecker::dimOf(weight, 0);
  if (ShapedType::isDynamic(slots) || slots < 1 ||
      (!ShapedType::isDynamic(experts) && slots > experts))
    return emitOpError("expects a static workspace of 1 to E = ")
           << experts << " expert slots, got " << slots;
  if (std::optional<int64_t> from = getAllFromTokens()) {
    if (*from < 1)
      return emitOpError("expects all_from_tokens to be positive, got ")
             << *from;
    if (slots != experts)
      return emitOpError("with all_from_tokens expects a workspace of every "
                         "expert (E = ")
             << experts << " slots), got " << slots;
  }
  return c.sameShape("slots", getSlots(), "indices", indices);
}

LogicalResult HeadMatmulOp::verify() {
  ShapeChecker c(*this);
  Value input = getInput(), weight = getWeight(), result = getResult();
  CHECK(c.rank("input", input, 3));
  CHECK(c.rank("weight", weight, 3));
  CHECK(c.same("weight", weight, 0, "input", input, 1));
  int64_t kDim = getTransposeWeight() ? 2 : 1, nDim = getTransposeWeight() ? 1 : 2;
  CHECK(c.same("weight", weight, kDim, "input", input, 2));
  CHECK(c.rank("result", result, 3));
  CHECK(c.same("result", result, 0, "input", input, 0));
  CHECK(c.same("result", result, 1, "input", input, 1));
  return c.same("result", result, 2, "weight", weight, nDim);
}

LogicalResult TransposeOp::verify() {
  auto input = cast<RankedTensorType>(getInput().getType());
  auto result = cast<RankedTensorType>(getResult().getType());
  ArrayRef<int64_t> perm = getPermutation();
  if (int64_t(perm.size()) != input.getRank())
    return emitOpError("expects a permutation of ")
           << input.getRank() << " dimensions, got " << perm.size();
  SmallVector<bool> seen(perm.size(), false);
  for (int64_t d : perm) {
    if (d < 0 || d >= int64_t(perm.size()) || seen[d])
      return emitOpError("expects a permutation of [0, ")
             << perm.size() << "), got [" << perm << "]";
    seen[d] = true;
  }
  if (result.getElementType() != input.getElementType())
    return emitOpError("expects the input's element type ")
           << input.getElementType() << ", got " << result.getElementType();
  SmallVector<int64_t> shape;
  for (int64_t d : perm)
    shape.push_back(input.getDimSize(d));
  if (result.getShape() != ArrayRef<int64_t>(shape))
    return emitOpError("expects result type ")
           << RankedTensorType::get(shape, input.getElementType()) << ", got "
           << result;
  return success();
}

LogicalResult Fp8DequantOp::verify() {
  ShapeChecker c(*this);
  Value weight = getWeight(), scale = getScaleInv();
  auto type = cast<RankedTensorType>(weight.getType());
  if (type.getRank() != 2 && type.getRank() != 3)
    return emitOpError("expects a weight of rank 2 [N, K] or 3 [E, N, K], got ")
           << type;
  ArrayRef<int64_t> block = getBlockSize();
  if (block.size() != 2 || block[0] <= 0 || block[1] <= 0)
    return emitOpError("expects block_size of two positive sizes [bn, bk]");
  CHECK(c.rank("scale_inv", scale, type.getRank()));
  int64_t lead = type.getRank() - 2;
  if (lead)
    CHECK(c.same("scale_inv", scale, 0, "weight", weight, 0));
  for (int64_t i = 0; i < 2; ++i) {
    int64_t n = ShapeChecker::dimOf(weight, lead + i);
    if (!ShapedType::isDynamic(n))
      CHECK(c.equals("scale_inv", scale, lead + i, llvm::divideCeil(n, block[i]),
                     "weight dim divided by the block size, rounded up"));
  }
  return c.sameShape("result", getResult(), "weight", weight);
}

LogicalResult ExpertMatmulOp::verify() {
  ShapeChecker c(*this);
  Value input = getInput(), weight = getWeight(), indices = getIndices();
  CHECK(c.rank("weight", weight, 3));
  CHECK(c.rank("indices", indices, 2));
  auto inType = cast<RankedTensorType>(input.getType());
  if (inType.getRank() != 2 && inType.getRank() != 3)
    return emitOpError("expects input of rank 2 [T, K] or 3 [T, k, K], got ")
           << inType;
  CHECK(c.same("input", input, 0, "indices", indices, 0));
  if (inType.getRank() == 3)
    CHECK(c.same("input", input, 1, "indices", indices, 1));
  CHECK(c.same("input", input, -1, "weight", weight, 2));
  if (Value bias = getBias()) {
    CHECK(c.rank("bias", bias, 2));
    CHECK(c.same("bias", bias, 0, "weight", weight, 0));
    CHECK(c.same("bias", bias, 1, "weight", weight, 1));
  }
  Value result = getResult();
  if (Value routing = getRoutingWeights()) {
    CHECK(c.sameShape("weights", routing, "indices", indices));
    CHECK(c.rank("result", result, 2));
  } else {
    CHECK(c.rank("result", result, 3));
    CHECK(c.same("result", result, 1, "indices", indices, 1));
  }
  CHECK(c.same("result", result, 0, "indices", indices, 0));
  return c.same("result", result, -1, "weight", weight, 1);
}

LogicalResult MoeRouteOp::verify() {
  ShapeChecker c(*this);
  Value logits = getLogits();
  CHECK(c.rank("logits", logits, 2));
  if (Value bias = getBias()) {
    CHECK(c.rank("bias", bias, 1));
    CHECK(c.same("bias", bias, 0, "logits", logits, 1));
  }
  int64_t topK = getTopK(), groups = getNumGroups(),
          keptGroups = getTopKGroups();
  CHECK(expectPositive(*this, "top_k", topK));
  CHECK(expectPositive(*this, "num_groups", groups));
  if (keptGroups <= 0 || keptGroups > groups)
    return emitOpError("expects 0 < top_k_groups <= num_groups (")
           << groups << "), got " << keptGroups;
  if (groups > 1 && getRouting() != RoutingScore::Sigmoid)
    return emitOpError("expects group-limited routing only with sigmoid "
                       "scores");
  int64_t experts =
      ShapeChecker::firstStatic({{logits, 1}, {getBias(), 0}});
  if (!ShapedType::isDynamic(experts)) {
    if (experts % groups != 0)
      return emitOpError("expects ")
             << experts << " experts to split into " << groups
             << " equal groups";
    if (groups > 1 && experts / groups < 2)
      return emitOpError("expects at least 2 experts per group (a group "
                         "scores by its top 2), got ")
             << experts / groups;
    int64_t selectable = experts / groups * keptGroups;
    if (topK > selectable)
      return emitOpError("expects top_k (")
             << topK << ") <= the " << selectable
             << " experts in the kept groups";
  }
  CHECK(expectPositive(*this, "scaling_factor",
                       getScalingFactor().convertToDouble()));
  int64_t shared = getSharedExperts();
  if (shared < 0)
    return emitOpError("expects shared_experts >= 0, got ") << shared;
  for (auto [name, result] :
       {std::pair<StringRef, Value>{"indices", getIndices()},
        {"weights", getWeights()}}) {
    CHECK(c.rank(name, result, 2));
    CHECK(c.same(name, result, 0, "logits", logits, 0));
    CHECK(c.equals(name, result, 1, topK + shared,
                   shared ? "top_k + shared_experts" : "top_k"));
  }
  return success();
}

//===----------------------------------------------------------------------===//
// Attention
//===----------------------------------------------------------------------===//

/// Checks the optional `sequences [T]` operand of the batched cache readers
/// and writers and returns the number of leading batch dims of the cache
/// (1 with sequences, else 0).
static FailureOr<int64_t> verifySequences(ShapeChecker &c, Value sequences,
                                          StringRef tokensName, Value tokens) {
  if (!sequences)
    return 0;
  if (failed(c.rank("sequences", sequences, 1)) ||
      failed(c.same("sequences", sequences, 0, tokensName, tokens, 0)))
    return failure();
  return 1;
}

LogicalResult AttentionOp::verify() {
  ShapeChecker c(*this);
  Value q = getQ(), k = getK(), v = getV();
  CHECK(c.rank("q", q, 3));
  // Rank 4: [B, S, Hkv, D] per-sequence caches, one leading batch dim.
  bool cached = cast<ShapedType>(k.getType()).getRank() == 4;
  int64_t batch = cached ? 1 : 0;
  CHECK(c.rank("k", k, 3 + batch));
  CHECK(c.rank("v", v, 3 + batch));
  CHECK(c.same("k", k, 2 + batch, "q", q, 2));
  for (int64_t d = 0; d < 2 + batch; ++d)
    CHECK(c.same("v", v, d, "k", k, d));
  int64_t hq = ShapeChecker::dimOf(q, 1);
  int64_t hkv =
      ShapeChecker::firstStatic({{k, 1 + batch}, {v, 1 + batch}});
  if (!ShapedType::isDynamic(hq) && !ShapedType::isDynamic(hkv) &&
      (hkv == 0 || hq % hkv != 0))
    return emitOpError("expects the query heads (")
           << hq << ") to be a multiple of the key/value heads (" << hkv
           << ")";
  if (Value sinks = getSinks()) {
    CHECK(c.rank("sinks", sinks, 1));
    CHECK(c.same("sinks", sinks, 0, "q", q, 1));
  }
  if (cached) {
    // Keys sit at their row's positions and belong to their batch row.
    if (!getQPositions() || !getQSegments())
      return emitOpError("expects q_positions and q_segments (each query's "
                         "batch row) with [B, S, Hkv, D] caches");
    if (getKPositions() || getKSegments())
      return emitOpError("expects no k_positions or k_segments with "
                         "[B, S, Hkv, D] caches (keys sit at their row's "
                         "positions)");
  } else if (!getQPositions() != !getKPositions()) {
    return emitOpError("expects q_positions and k_positions together");
  } else if (!getQSegments() != !getKSegments()) {
    return emitOpError("expects q_segments and k_segments together");
  }
  for (auto [name, value, of] :
       {std::tuple<StringRef, Value, Value>{"q_positions", getQPositions(), q},
        {"k_positions", getKPositions(), k},
        {"q_segments", getQSegments(), q},
        {"k_segments", getKSegments(), k}}) {
    if (!value)
      continue;
    CHECK(c.rank(name, value, 1));
    CHECK(c.same(name, value, 0, of == q ? "q" : "k", of, 0));
  }
  bool sliding = getMask() == MaskKind::SlidingWindow;
  if (sliding != getWindow().has_value())
    return emitOpError("expects a window exactly when the mask is "
                       "sliding_window");
  if (sliding)
    CHECK(expectPositive(*this, "window", static_cast<int64_t>(*getWindow())));
  CHECK(expectPositive(*this, "scale", getScale().convertToDouble()));
  Value result = getResult();
  CHECK(c.rank("result", result, 3));
  CHECK(c.same("result", result, 0, "q", q, 0));
  CHECK(c.same("result", result, 1, "q", q, 1));
  return c.same("result", result, 2, "v", v, 2 + batch);
}

LogicalResult SparseAttentionOp::verify() {
  ShapeChecker c(*this);
  Value q = getQ(), kv = getKv(), indices = getIndices();
  CHECK(c.rank("q", q, 3));
  FailureOr<int64_t> batch = verifySequences(c, getSequences(), "q", q);
  if (failed(batch))
    return failure();
  CHECK(c.rank("kv", kv, 2 + *batch));
  CHECK(c.rank("indices", indices, 2));
  CHECK(c.same("kv", kv, -1, "q", q, 2));
  CHECK(c.same("indices", indices, 0, "q", q, 0));
  int64_t valueDim = getValueDim();
  int64_t qkDim = ShapeChecker::firstStatic({{q, 2}, {kv, -1}});
  if (valueDim <= 0 || (!ShapedType::isDynamic(qkDim) && valueDim > qkDim))
    return emitOpError("expects 0 < value_dim <= the query/key dim (")
           << qkDim << "), got " << valueDim;
  if (Value sinks = getSinks()) {
    CHECK(c.rank("sinks", sinks, 1));
    CHECK(c.same("sinks", sinks, 0, "q", q, 1));
  }
  CHECK(expectPositive(*this, "scale", getScale().convertToDouble()));
  Value result = getResult();
  CHECK(c.rank("result", result, 3));
  CHECK(c.same("result", result, 0, "q", q, 0));
  CHECK(c.same("result", result, 1, "q", q, 1));
  return c.equals("result", result, 2, valueDim, "value_dim");
}

LogicalResult DsaIndexerScoresOp::verify() {
  ShapeChecker c(*this);
  Value q = getQ(), k = getK(), w = getWeights();
  CHECK(c.rank("q", q, 3));
  FailureOr<int64_t> batch = verifySequences(c, getSequences(), "q", q);
  if (failed(batch))
    return failure();
  CHECK(c.rank("k", k, 2 + *batch));
  CHECK(c.rank("weights", w, 2));
  CHECK(c.same("k", k, -1, "q", q, 2));
  CHECK(c.same("weights", w, 0, "q", q, 0));
  CHECK(c.same("weights", w, 1, "q", q, 1));
  CHECK(expectPositive(*this, "scale", getScale().convertToDouble()));
  if (Value bounds = getBounds()) {
    CHECK(c.rank("bounds", bounds, 1));
    CHECK(c.same("bounds", bounds, 0, "q", q, 0));
  }
  Value result = getResult();
  CHECK(c.rank("result", result, 2));
  CHECK(c.same("result", result, 0, "q", q, 0));
  CHECK(c.same("result", result, 1, "k", k, *batch));
  if (getYarn() && !getPositions())
    return emitOpError("expects yarn only with rope");
  return verifyRopePrologue(*this, "q", q, ShapeChecker::dimOf(q, 2), "head");
}

LogicalResult DsaIndexSelectOp::verify() {
  ShapeChecker c(*this);
  Value scores = getScores(), bounds = getBounds();
  CHECK(c.rank("scores", scores, 2));
  CHECK(c.rank("bounds", bounds, 1));
  CHECK(c.same("bounds", bounds, 0, "scores", scores, 0));
  CHECK(expectPositive(*this, "top_k", static_cast<int64_t>(getTopK())));
  Value result = getResult();
  CHECK(c.rank("result", result, 2));
  CHECK(c.same("result", result, 0, "scores", scores, 0));
  return c.equals("result", result, 1, getTopK(), "top_k");
}

LogicalResult DsaKpoolOp::verify() {
  ShapeChecker c(*this);
  Value keys = getKeys(), gate = getGate(), ape = getApe(), state = getState();
  CHECK(c.rank("keys", keys, 2));
  CHECK(c.sameShape("gate", gate, "keys", keys));
  CHECK(c.rank("ape", ape, 2));
  CHECK(c.same("ape", ape, 1, "keys", keys, 1));
  CHECK(c.rank("positions", getPositions(), 1));
  CHECK(c.same("positions", getPositions(), 0, "keys", keys, 0));
  CHECK(c.rank("sequences", getSequences(), 1));
  CHECK(c.same("sequences", getSequences(), 0, "keys", keys, 0));
  CHECK(c.rank("state", state, 3));
  int64_t pool = ShapeChecker::dimOf(ape, 0);
  if (!ShapedType::isDynamic(pool)) {
    CHECK(expectPositive(*this, "pool size (ape dim 0)", pool));
    CHECK(c.equals("state", state, 1, std::max<int64_t>(pool - 1, 1),
                   "max(pool size - 1, 1)"));
  }
  int64_t width = ShapeChecker::dimOf(keys, 1);
  if (!ShapedType::isDynamic(width))
    CHECK(c.equals("state", state, 2, 2 * width, "2 x key width"));
  CHECK(c.sameShape("output", getOutput(), "keys", keys));
  return c.sameShape("new_state", getNewState(), "state", state);
}

LogicalResult DsaKpoolExpandOp::verify() {
  ShapeChecker c(*this);
  Value pools = getPools();
  CHECK(c.rank("pools", pools, 2));
  CHECK(c.rank("positions", getPositions(), 1));
  CHECK(c.same("positions", getPositions(), 0, "pools", pools, 0));
  int64_t pool = static_cast<int64_t>(getPoolSize());
  CHECK(expectPositive(*this, "pool_size", pool));
  Value result = getResult();
  CHECK(c.rank("result", result, 2));
  CHECK(c.same("result", result, 0, "pools", pools, 0));
  int64_t k = ShapeChecker::dimOf(pools, 1);
  if (ShapedType::isDynamic(k))
    return success();
  if (k > (std::numeric_limits<int32_t>::max() - pool) / pool)
    return emitOpError("expects pools dim 1 x pool_size to fit in 32 bits, "
                       "got ")
           << k << " x " << pool;
  return c.equals("result", result, 1, k * pool + pool - 1,
                  "pools dim 1 x pool_size + pool_size - 1");
}

//===----------------------------------------------------------------------===//
// KDA state
//===----------------------------------------------------------------------===//

LogicalResult ShortConvOp::verify() {
  ShapeChecker c(*this);
  Value input = getInput(), weight = getWeight(), state = getState();
  CHECK(c.rank("input", input, 2));
  CHECK(c.rank("weight", weight, 2));
  // With sequences, the state has a leading slot dim.
  FailureOr<int64_t> slots = verifySequences(c, getSequences(), "input", input);
  if (failed(slots))
    return failure();
  CHECK(c.rank("state", state, 2 + *slots));
  CHECK(c.same("weight", weight, 0, "input", input, 1));
  CHECK(c.same("state", state, 1 + *slots, "input", input, 1));
  int64_t width = ShapeChecker::dimOf(weight, 1);
  if (!ShapedType::isDynamic(width)) {
    CHECK(expectPositive(*this, "kernel width", width));
    CHECK(c.equals("state", state, *slots, width - 1, "kernel width - 1"));
  }
  if (getActivation() == Activation::Sigmoid)
    return emitOpError("expects activation none or silu");
  CHECK(c.sameShape("output", getOutput(), "input", input));
  return c.sameShape("new_state", getNewState(), "state", state);
}

LogicalResult KdaGateOp::verify() {
  ShapeChecker c(*this);
  Value raw = getRaw();
  CHECK(c.rank("raw", raw, 3));
  CHECK(c.rank("a_log", getALog(), 1));
  CHECK(c.rank("dt_bias", getDtBias(), 2));
  CHECK(c.same("a_log", getALog(), 0, "raw", raw, 1));
  CHECK(c.same("dt_bias", getDtBias(), 0, "raw", raw, 1));
  CHECK(c.same("dt_bias", getDtBias(), 1, "raw", raw, 2));
  if (std::optional<APFloat> bound = getLowerBound())
    if (!(bound->convertToDouble() < 0.0))
      return emitOpError("expects lower_bound < 0, got ")
             << bound->convertToDouble();
  return c.sameShape("result", getResult(), "raw", raw);
}

/// Shared by kda_chunk and kda_step: one leading dim ([T] or [B]) on q, k,
/// v, g, beta; the state adds `stateLead` leading dims before [H, Dk, Dv]
/// (kda_step's batch, tied to q's), or with sequences one slot dim of its
/// own.
template <typename OpT>
static LogicalResult verifyKda(OpT op, int64_t stateLead) {
  ShapeChecker c(op);
  FailureOr<int64_t> slots =
      verifySequences(c, op.getSequences(), "q", op.getQ());
  if (failed(slots))
    return failure();
  bool tiedBatch = stateLead && !*slots;
  stateLead = std::max(stateLead, *slots);
  Value q = op.getQ(), k = op.getK(), v = op.getV(), g = op.getG();
  Value beta = op.getBeta(), state = op.getState();
  CHECK(c.rank("q", q, 3));
  CHECK(c.sameShape("k", k, "q", q));
  CHECK(c.sameShape("g", g, "q", q));
  CHECK(c.rank("v", v, 3));
  CHECK(c.same("v", v, 0, "q", q, 0));
  CHECK(c.same("v", v, 1, "q", q, 1));
  CHECK(c.rank("beta", beta, 2));
  CHECK(c.same("beta", beta, 0, "q", q, 0));
  CHECK(c.same("beta", beta, 1, "q", q, 1));
  CHECK(c.rank("state", state, 3 + stateLead));
  if (tiedBatch)
    CHECK(c.same("state", state, 0, "q", q, 0));
  CHECK(c.same("state", state, stateLead, "q", q, 1));
  CHECK(c.same("state", state, stateLead + 1, "q", q, 2));
  CHECK(c.same("state", state, stateLead + 2, "v", v, 2));
  CHECK(expectPositive(op, "scale", op.getScale().convertToDouble()));
  CHECK(c.sameShape("output", op.getOutput(), "v", v));
  return c.sameShape("new_state", op.getNewState(), "state", state);
}

LogicalResult KdaChunkOp::verify() {
  CHECK(expectPositive(*this, "chunk_size",
                       static_cast<int64_t>(getChunkSize())));
  return verifyKda(*this, /*stateLead=*/0);
}

LogicalResult KdaStepOp::verify() { return verifyKda(*this, /*stateLead=*/1); }

//===----------------------------------------------------------------------===//
// Cross-layer residuals
//===----------------------------------------------------------------------===//

LogicalResult BlockAttnResOp::verify() {
  ShapeChecker c(*this);
  if (getSources().empty())
    return emitOpError("expects at least one source");
  Value first = getSources().front();
  CHECK(c.rank("source 0", first, 2));
  for (auto [i, source] : llvm::enumerate(getSources().drop_front()))
    CHECK(c.sameShape(("source " + Twine(i + 1)).str(), source, "source 0",
                      first));
  CHECK(c.rank("norm", getNormWeight(), 1));
  CHECK(c.rank("proj", getProj(), 1));
  CHECK(c.same("norm", getNormWeight(), 0, "source 0", first, 1));
  CHECK(c.same("proj", getProj(), 0, "source 0", first, 1));
  CHECK(expectPositive(*this, "eps", getEps().convertToDouble()));
  return c.sameShape("result", getResult(), "source 0", first);
}

/// The checks lm.mhc_pre and lm.mhc_post_pre share: the mixing weights
/// against `streams` [T, n, D], the parameters, the optional norm and the
/// collapse's results.
template <typename OpTy>
static LogicalResult verifyMhcCollapse(OpTy op, Value streams, Value input,
                                       Value post, Value comb) {
  ShapeChecker c(op);
  CHECK(c.rank("streams", streams, 3));
  CHECK(c.rank("fn", op.getFn(), 2));
  CHECK(c.rank("base", op.getBase(), 1));
  CHECK(c.rank("scale", op.getScale(), 1));
  CHECK(c.equals("scale", op.getScale(), 0, 3, "pre, post and comb scales"));
  int64_t n = ShapeChecker::dimOf(streams, 1),
          d = ShapeChecker::dimOf(streams, 2);
  if (!ShapedType::isDynamic(n)) {
    std::optional<int64_t> logits = llvm::checkedMul<int64_t>(n + 2, n);
    if (!logits)
      return op.emitOpError("expects (2 + n) * n mix logits to fit in 64 "
                            "bits, got n = ")
             << n;
    CHECK(c.equals("fn", op.getFn(), 0, *logits, "(2 + n) * n mix logits"));
    CHECK(c.equals("base", op.getBase(), 0, *logits, "(2 + n) * n mix logits"));
    if (!ShapedType::isDynamic(d)) {
      std::optional<int64_t> flat = llvm::checkedMul<int64_t>(n, d);
      if (!flat)
        return op.emitOpError("expects n * D flattened streams to fit in 64 "
                              "bits, got n = ")
               << n << ", D = " << d;
      CHECK(c.equals("fn", op.getFn(), 1, *flat, "n * D flattened streams"));
    }
  }
  CHECK(expectPositive(op, "sinkhorn_iters",
                       static_cast<int64_t>(op.getSinkhornIters())));
  CHECK(expectPositive(op, "eps", op.getEps().convertToDouble()));
  CHECK(expectPositive(op, "norm_eps", op.getNormEps().convertToDouble()));
  if (Value norm = op.getNorm()) {
    CHECK(c.rank("norm", norm, 1));
    CHECK(c.same("norm", norm, 0, "streams", streams, 2));
    if (!op.getInputEps())
      return op.emitOpError("expects input_eps with a norm");
    CHECK(expectPositive(op, "input_eps", op.getInputEps()->convertToDouble()));
  } else if (op.getInputEps()) {
    return op.emitOpError("expects input_eps only with a norm");
  }
  CHECK(c.rank("input", input, 2));
  CHECK(c.same("input", input, 0, "streams", streams, 0));
  CHECK(c.same("input", input, 1, "streams", streams, 2));
  CHECK(c.rank("post", post, 2));
  CHECK(c.same("post", post, 0, "streams", streams, 0));
  CHECK(c.same("post", post, 1, "streams", streams, 1));
  CHECK(c.rank("comb", comb, 3));
  CHECK(c.same("comb", comb, 0, "streams", streams, 0));
  CHECK(c.same("comb", comb, 1, "streams", streams, 1));
  return c.same("comb", comb, 2, "streams", streams, 1);
}

/// lm.mhc_post's and lm.mhc_post_pre's write-back operands against
/// `streams`.
static LogicalResult verifyMhcWriteBack(Operation *op, Value streams, Value y,
                                        Value post, Value comb) {
  ShapeChecker c(op);
  CHECK(c.rank("streams", streams, 3));
  CHECK(c.rank("y", y, 2));
  CHECK(c.same("y", y, 0, "streams", streams, 0));
  CHECK(c.same("y", y, 1, "streams", streams, 2));
  CHECK(c.rank("post", post, 2));
  CHECK(c.same("post", post, 0, "streams", streams, 0));
  CHECK(c.same("post", post, 1, "streams", streams, 1));
  CHECK(c.rank("comb", comb, 3));
  CHECK(c.same("comb", comb, 0, "streams", streams, 0));
  CHECK(c.same("comb", comb, 1, "streams", streams, 1));
  return c.same("comb", comb, 2, "streams", streams, 1);
}

LogicalResult MhcPreOp::verify() {
  return verifyMhcCollapse(*this, getStreams(), getInput(), getPost(),
                           getComb());
}

LogicalResult MhcPostOp::verify() {
  CHECK(verifyMhcWriteBack(*this, getStreams(), getY(), getPost(), getComb()));
  return ShapeChecker(*this).sameShape("result", getResult(), "streams",
                                       getStreams());
}

LogicalResult MhcPostPreOp::verify() {
  CHECK(verifyMhcWriteBack(*this, getStreams(), getY(), getPost(), getComb()));
  CHECK(ShapeChecker(*this).sameShape("result", getResult(), "streams",
                                      getStreams()));
  return verifyMhcCollapse(*this, getResult(), getInput(), getNextPost(),
                           getNextComb());
}

//===----------------------------------------------------------------------===//
// Memory
//===----------------------------------------------------------------------===//

/// A gather of rows: `table [N, D]` and `indices [R]` give `result [R, D]`.
static LogicalResult verifyRowGather(Operation *op, StringRef tableName,
                                     Value table, StringRef indicesName,
                                     Value indices, Value result) {
  ShapeChecker c(op);
  CHECK(c.rank(tableName, table, 2));
  CHECK(c.rank(indicesName, indices, 1));
  CHECK(c.rank("result", result, 2));
  CHECK(c.same("result", result, 0, indicesName, indices, 0));
  return c.same("result", result, 1, tableName, table, 1);
}

LogicalResult EmbeddingOp::verify() {
  return verifyRowGather(*this, "table", getTable(), "ids", getIds(),
                         getResult());
}

LogicalResult GatherRowsOp::verify() {
  return verifyRowGather(*this, "input", getInput(), "rows", getRows(),
                         getResult());
}

LogicalResult WeightOp::verify() {
  auto type = cast<RankedTensorType>(getType());
  if (std::optional<ElementsAttr> value = getValue()) {
    if (!getSources().empty())
      return emitOpError("expects either sources or a value, not both");
    if (value->getType() != type)
      return emitOpError("expects a value of the weight's type ")
             << type << ", got " << value->getType();
    if (getShardAttr())
      return emitOpError("expects a shard only of checkpoint sources");
    return success();
  }
  if (getSources().empty())
    return emitOpError("expects at least one source tensor name");
  if (!type.hasStaticShape())
    return emitOpError("expects a static weight shape, got ") << type;
  // Stacked sources hold whole rows of the weight, in order: their bytes,
  // one after another, are the weight's (experts [E, N, K]; a GLU's gate and
  // up rows, interleaved per expert; projections of one input, [sum N, K],
  // and their biases).
  // The checkpoint's shapes are checked against it when the weights load.
  int64_t sources = getSources().size();
  if (sources > 1 &&
      (type.getRank() < 1 ||
       type.getNumElements() /
               (type.getRank() > 1 ? type.getShape().back() : 1) <
           sources))
    return emitOpError("expects whole rows for each of its ")
           << sources << " stacked sources, got " << type;
  // A shard cuts a dim of each source; stacked sources of one shape gain a
  // leading dim, so the cut dim is at most the weight's last.
  if (ShardAttr shard = getShardAttr();
      shard && shard.getDim() >= type.getRank())
    return emitOpError("expects a shard dim below the weight's rank ")
           << type.getRank() << ", got " << shard.getDim();
  return success();
}

LogicalResult
WeightRefOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  auto weight =
      symbolTable.lookupNearestSymbolFrom<WeightOp>(*this, getWeightAttr());
  if (!weight)
    return emitOpError("expects '") << getWeight() << "' to name an lm.weight";
  if (weight.getType() != getResult().getType())
    return emitOpError("expects the type of '")
           << getWeight() << "', " << weight.getType() << ", got "
           << getResult().getType();
  return success();
}

/// The optional prologue of lm.cache_write: a norm over a column prefix
/// and RoPE over a column range of each [W] row, all attributes or none.
static LogicalResult verifyCacheWritePrologue(CacheWriteOp op) {
  ShapeChecker c(op);
  bool norm = op.getNorm().has_value();
  if (norm != bool(op.getNormWeight()) || norm != op.getNormDim().has_value() ||
      norm != op.getEps().has_value())
    return op.emitOpError("expects norm, norm_dim, eps and the norm weight "
                          "together or not at all");
  if (op.getNormBias() && op.getNorm() != NormKind::Layer)
    return op.emitOpError("expects a norm bias only with a layer norm");
  bool rope = bool(op.getPositions());
  if ((op.getYarn() || op.getRopeHeadDim()) && !rope)
    return op.emitOpError("expects yarn and rope_head_dim only with rope");
  if (!norm && !rope)
    return verifyRopePrologue(op, "values", op.getValues(),
                              ShapedType::kDynamic, "row");
  // A prologue works on each token's row [W].
  Value values = op.getValues();
  CHECK(c.rank("values", values, 2));
  int64_t width = ShapeChecker::dimOf(values, 1);
  if (norm) {
    int64_t normDim = *op.getNormDim();
    if (normDim <= 0 || (!ShapedType::isDynamic(width) && normDim > width))
      return op.emitOpError("expects norm_dim in [1, ")
             << width << "], got " << normDim;
    CHECK(c.rank("norm weight", op.getNormWeight(), 1));
    int64_t weightDim = ShapeChecker::dimOf(op.getNormWeight(), 0);
    if (!ShapedType::isDynamic(weightDim) && weightDim != normDim)
      return op.emitOpError("expects a norm weight of norm_dim (")
             << normDim << ") values, got " << weightDim;
    if (Value bias = op.getNormBias()) {
      CHECK(c.rank("norm bias", bias, 1));
      CHECK(c.same("norm bias", bias, 0, "norm weight", op.getNormWeight(), 0));
    }
    if (op.getEps()->convertToDouble() < 0.0)
      return op.emitOpError("expects eps >= 0, got ")
             << op.getEps()->convertToDouble();
  }
  int64_t head = op.getRopeHeadDim().value_or(width);
  if (op.getRopeHeadDim() &&
      (head <= 0 || (!ShapedType::isDynamic(width) && width % head != 0)))
    return op.emitOpError("expects a rope_head_dim that divides the row of ")
           << width << ", got " << head;
  return verifyRopePrologue(op, "values", values, head,
                            op.getRopeHeadDim() ? "head" : "row");
}

LogicalResult CacheWriteOp::verify() {
  ShapeChecker c(*this);
  Value cache = getCache(), values = getValues();
  FailureOr<int64_t> batch =
      verifySequences(c, getSequences(), "values", values);
  if (failed(batch))
    return failure();
  CHECK(c.minRank("cache", cache, 2 + *batch));
  auto cacheType = cast<RankedTensorType>(cache.getType());
  CHECK(c.rank("values", values, cacheType.getRank() - *batch));
  for (int64_t i = 1; i + *batch < cacheType.getRank(); ++i)
    CHECK(c.same("values", values, i, "cache", cache, i + *batch));
  CHECK(c.rank("slots", getSlots(), 1));
  CHECK(c.same("slots", getSlots(), 0, "values", values, 0));
  if (getResult().getType() != cacheType)
    return emitOpError("expects the result type to equal the cache type ")
           << cacheType << ", got " << getResult().getType();
  if (std::optional<KVLayoutAttr> layout = getLayout()) {
    // The row width is known only when every trailing dim is static.
    bool staticRow = true;
    int64_t features = 1;
    for (int64_t i = 1 + *batch; i < cacheType.getRank(); ++i) {
      staticRow &= !cacheType.isDynamicDim(i);
      if (!staticRow)
        break;
      std::optional<int64_t> product =
          llvm::checkedMul<int64_t>(features, cacheType.getDimSize(i));
      if (!product)
        return emitOpError("expects the values per cache row to fit in 64 "
                           "bits");
      features = *product;
    }
    if (staticRow && features != layout->getFeatureDim())
      return emitOpError("expects the layout's feature_dim (")
             << layout->getFeatureDim() << ") to equal the " << features
             << " values per cache row";
  }
  return verifyCacheWritePrologue(*this);
}

//===----------------------------------------------------------------------===//
// Collectives
//===----------------------------------------------------------------------===//

LogicalResult AllReduceOp::verify() {
  if (getRanksAttr().getInt() < 1)
    return emitOpError("expects ranks >= 1, got ") << getRanksAttr().getInt();
  return success();
}

LogicalResult LocalExpertsOp::verify() {
  if (getFirstAttr().getInt() < 0 || getCountAttr().getInt() < 1)
    return emitOpError("expects first >= 0 and count >= 1, got first ")
           << getFirstAttr().getInt() << ", count " << getCountAttr().getInt();
  return success();
}

LogicalResult AllGatherOp::verify() {
  int64_t ranks = getRanksAttr().getInt();
  if (ranks < 1)
    return emitOpError("expects ranks >= 1, got ") << ranks;
  auto in = cast<RankedTensorType>(getInput().getType());
  auto out = cast<RankedTensorType>(getResult().getType());
  if (in.getRank() < 1 || in.getRank() != out.getRank() ||
      in.getElementType() != out.getElementType())
    return emitOpError("expects a result of the input's rank (>= 1) and "
                       "element type, got ")
           << in << " -> " << out;
  for (int64_t d = 0; d + 1 < in.getRank(); ++d)
    if (!ShapedType::isDynamic(in.getDimSize(d)) &&
        !ShapedType::isDynamic(out.getDimSize(d)) &&
        in.getDimSize(d) != out.getDimSize(d))
      return emitOpError("expects dim ")
             << d << " of the result to equal the input's, got " << in << " -> "
             << out;
  int64_t part = in.getShape().back(), whole = out.getShape().back();
  if (ShapedType::isDynamic(part) || ShapedType::isDynamic(whole) ||
      whole != part * ranks)
    return emitOpError("expects a static last dim of ")
           << ranks << " x the input's, got " << in << " -> " << out;
  return success();
}

#define GET_OP_CLASSES
#include "dialects/lm/LmOps.cpp.inc"
