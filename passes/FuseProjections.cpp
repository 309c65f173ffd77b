//===- FuseProjections.cpp - One projection for the matmuls of one input --===//
//
// An attention block projects its normalised input several times over:
// DeepSeek's MLA reads it with q_a, kv_a and the indexer's wk, each its own
// matmul over its own weight. For decode's GEMVs the small ones are bound by
// their fixed cost, not their bytes (wk is 0.9 MB at DeepSeek-V3.2's
// dimensions, kv_a 4.1 MB). Stacking their weights along N makes them one
// matmul: one launch, one read of the input, one weight stream; each
// projection is then a column slice of its result.
//
// A projection joins only if every reader of its result takes a column view
// (a VIEW slot of Kernels.def, directly or through column slices):
// lm-lower-to-plan then hands the slices over in place, and the rewrite
// copies nothing. One whose reader would need its own copy stays alone.
//
// Projections fuse when they read the same value, in the same block, with
// weights read from the checkpoint of one element type and K:
// - lm.matmul, all with a bias of one element type or none (biases stack
//   alike);
// - lm.fp8_matmul of one block size, where no scale block straddles two
//   projections: every projection but the last has a multiple of the block's
//   rows (the pass puts those first, and leaves out all but one of the
//   others).
// The rewrite is exact: every output element is the same dot product.
//
//===----------------------------------------------------------------------===//

#include "passes/ColumnSlice.h"
#include "passes/KernelSelection.h"
#include "passes/Passes.h"
#include "passes/WeightStacking.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/SetVector.h"

#include <map>
#include <tuple>

namespace daybreak {
#define GEN_PASS_DEF_LMFUSEPROJECTIONS
#include "passes/Passes.h.inc"
} // namespace daybreak

using namespace mlir;
using namespace daybreak;

namespace {

/// Whether every read of `value` takes it as a column view: a kernel's VIEW
/// slot, a column slice read so, or its shape.
bool readAsView(Value value) {
  return !value.use_empty() &&
         llvm::all_of(value.getUses(), [](OpOperand &use) {
           Operation *user = use.getOwner();
           if (isa<tensor::DimOp>(user))
             return true;
           if (auto slice = dyn_cast<tensor::ExtractSliceOp>(user))
             return isColumnSlice(slice) && readAsView(slice.getResult());
           return takesColumnView(use);
         });
}

/// One projection of a group: the op and its checkpoint weights.
struct Projection {
  Operation *op;
  lm::WeightOp weight, scales, bias;
  int64_t rows;
};

/// What projections must share to stack: block, op, input, weight element
/// type and K (as a 1-D type), the FP8 block, the bias's element type, and
/// how tensor parallelism cuts the weight and the bias (a stacked weight is
/// of whole shards cut alike: gpt-oss's q, of more heads a rank than its k
/// and v, stays apart from them).
using GroupKey =
    std::tuple<Block *, const void *, const void *, const void *, const void *,
               const void *, const void *, const void *>;

class ProjectionFusion {
public:
  ProjectionFusion(ModuleOp module) : module(module), b(module.getContext()) {}

  /// The projection `op` is, with the key of the group it may join; nullopt
  /// if it cannot join one.
  std::optional<std::pair<GroupKey, Projection>> classify(Operation *op);
  /// Stacks `group` (at least two, in program order) into one projection.
  /// Returns how many it stacked (0 or at least 2).
  size_t fuse(ArrayRef<Projection> group);

  /// Declarations that may no longer be read (erased if so).
  llvm::SetVector<lm::WeightOp> replaced;

private:
  Value ref(Location loc, lm::WeightOp weight) {
    return lm::WeightRefOp::create(b, loc, weight.getType(),
                                   weight.getSymName())
        .getResult();
  }

  ModuleOp module;
  OpBuilder b;
};

std::optional<std::pair<GroupKey, Projection>>
ProjectionFusion::classify(Operation *op) {
  if (!isa<lm::MatmulOp, lm::Fp8MatmulOp>(op) ||
      // The new projection carries the ops' own attributes only: one that
      // another pass recorded would be lost.
      !op->getDiscardableAttrDictionary().empty() ||
      !readAsView(op->getResult(0)))
    return std::nullopt;
  Projection projection{
      op, sourcedWeight(module, op->getOperand(1)), {}, {}, 0};
  if (!projection.weight)
    return std::nullopt;
  auto weightType = cast<RankedTensorType>(projection.weight.getType());
  if (weightType.getRank() != 2 || weightType.isDynamicDim(0))
    return std::nullopt;
  projection.rows = weightType.getDimSize(0);
  Type kType = RankedTensorType::get({weightType.getDimSize(1)},
                                     weightType.getElementType());
  Type biasType;
  Attribute block;
  if (auto matmul = dyn_cast<lm::MatmulOp>(op)) {
    if (Value bias = matmul.getBias()) {
      projection.bias = sourcedWeight(module, bias);
      if (!projection.bias)
        return std::nullopt;
      biasType = projection.bias.getType().getElementType();
    }
  } else {
    auto fp8 = cast<lm::Fp8MatmulOp>(op);
    ArrayRef<int64_t> sizes = fp8.getBlockSize();
    projection.scales = sourcedWeight(module, fp8.getScaleInv());
    if (!projection.scales || sizes.size() != 2 || sizes[0] <= 0)
      return std::nullopt;
    block = fp8.getBlockSizeAttr();
  }
  Attribute biasShard =
      projection.bias ? projection.bias.getShardAttr() : Attribute();
  GroupKey key(op->getBlock(), op->getName().getAsOpaquePointer(),
               op->getOperand(0).getAsOpaquePointer(),
               kType.getAsOpaquePointer(), biasType.getAsOpaquePointer(),
               block.getAsOpaquePointer(),
               Attribute(projection.weight.getShardAttr()).getAsOpaquePointer(),
               biasShard.getAsOpaquePointer());
  return std::make_pair(key, projection);
}

size_t ProjectionFusion::fuse(ArrayRef<Projection> group) {
  SmallVector<Projection> parts(group);
  if (auto fp8 = dyn_cast<lm::Fp8MatmulOp>(parts.front().op)) {
    // Whole scale blocks first; of the others, the first alone, last.
    int64_t blockRows = fp8.getBlockSize()[0];
    auto whole = [&](const Projection &p) { return p.rows % blockRows == 0; };
    auto partial = std::stable_partition(parts.begin(), parts.end(), whole);
    if (partial != parts.end())
      parts.erase(std::next(partial), parts.end());
    if (parts.size() < 2)
      return 0;
  }
  auto collect = [&](lm::WeightOp Projection::*member) {
    SmallVector<lm::WeightOp> weights;
    for (const Projection &p : parts)
      weights.push_back(p.*member);
    return weights;
  };
  bool fp8 = isa<lm::Fp8MatmulOp>(parts.front().op);
  bool biased = parts.front().bias != nullptr;
  lm::WeightOp weight = stackedWeight(module, collect(&Projection::weight));
  lm::WeightOp scales =
      fp8 ? stackedWeight(module, collect(&Projection::scales)) : nullptr;
  lm::WeightOp bias =
      biased ? stackedWeight(module, collect(&Projection::bias)) : nullptr;
  if (!weight || (fp8 && !scales) || (biased && !bias)) {
    for (lm::WeightOp declared : {weight, scales, bias})
      if (declared && SymbolTable::symbolKnownUseEmpty(declared, module))
        declared.erase();
    return 0;
  }

  // The first projection in the block is where the input is defined and no
  // reader of any projection has run yet.
  Operation *first = parts.front().op;
  for (const Projection &p : parts)
    if (p.op->isBeforeInBlock(first))
      first = p.op;
  Location loc = b.getFusedLoc(llvm::to_vector(llvm::map_range(
      parts, [](const Projection &p) { return p.op->getLoc(); })));
  b.setInsertionPoint(first);
  auto resultType = cast<RankedTensorType>(first->getResult(0).getType());
  SmallVector<int64_t> shape(resultType.getShape());
  shape.back() = cast<RankedTensorType>(weight.getType()).getDimSize(0);
  auto type = RankedTensorType::get(shape, resultType.getElementType());
  Value input = first->getOperand(0);
  Value weightRef = ref(loc, weight);
  Value all;
  if (fp8) {
    Value scalesRef = ref(loc, scales);
    all =
        lm::Fp8MatmulOp::create(b, loc, type, input, weightRef, scalesRef,
                                cast<lm::Fp8MatmulOp>(first).getBlockSizeAttr())
            .getResult();
  } else {
    Value biasRef = biased ? ref(loc, bias) : Value();
    all = lm::MatmulOp::create(b, loc, type, input, weightRef, biasRef)
              .getResult();
  }

  int64_t offset = 0;
  for (const Projection &p : parts) {
    Value result = p.op->getResult(0);
    // Slices of the projection become slices of the whole, so that none
    // stacks on another.
    for (Operation *user : llvm::make_early_inc_range(result.getUsers())) {
      auto slice = dyn_cast<tensor::ExtractSliceOp>(user);
      if (!slice || !isColumnSlice(slice))
        continue;
      b.setInsertionPoint(slice);
      auto [column, columns] = sliceColumns(slice);
      slice.getResult().replaceAllUsesWith(
          sliceColumnsOf(b, slice.getLoc(), all, offset + column, columns));
      slice.erase();
    }
    if (!result.use_empty()) {
      b.setInsertionPointAfterValue(all);
      result.replaceAllUsesWith(
          sliceColumnsOf(b, p.op->getLoc(), all, offset, p.rows));
    }
    offset += p.rows;
    SmallVector<Value> operands(p.op->getOperands());
    p.op->erase();
    for (Value operand : operands)
      if (Operation *def = operand.getDefiningOp<lm::WeightRefOp>();
          def && def->use_empty())
        def->erase();
    for (lm::WeightOp declared : {p.weight, p.scales, p.bias})
      if (declared)
        replaced.insert(declared);
  }
  return parts.size();
}

struct FuseProjectionsPass
    : public daybreak::impl::LmFuseProjectionsBase<FuseProjectionsPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    ProjectionFusion fusion(module);
    for (auto func : module.getOps<func::FuncOp>()) {
      // Groups in program order, each its projections in program order.
      std::map<GroupKey, SmallVector<Projection>> byKey;
      SmallVector<GroupKey> order;
      func.walk([&](Operation *op) {
        std::optional<std::pair<GroupKey, Projection>> classified =
            fusion.classify(op);
        if (!classified)
          return;
        const GroupKey &key = classified->first;
        auto [it, inserted] = byKey.try_emplace(key);
        if (inserted)
          order.push_back(key);
        it->second.push_back(classified->second);
      });
      for (const auto &key : order) {
        ArrayRef<Projection> group = byKey[key];
        if (group.size() >= 2)
          numFused += fusion.fuse(group);
      }
    }
    for (lm::WeightOp weight : fusion.replaced)
      if (SymbolTable::symbolKnownUseEmpty(weight, module))
        weight.erase();
  }
};

} // namespace
