//===- FoldWeights.cpp - Compute weight-only subgraphs at compile time ----===//
//
// A value is weight-derived when it is an lm.weight_ref or the result of a
// foldable op (FP8 dequantisation, transposes, reshapes, static slices,
// widening casts) whose tensor operands are all weight-derived. Each
// weight-derived value that a non-foldable op reads is evaluated with the
// reference evaluator (on a scratch function holding just its subgraph) and
// replaced by a new lm.weight carrying the value (as bf16 where only head
// matmuls read it and every value is a bf16 value). Equal subgraphs in
// @prefill and @decode fold to one weight.
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"

#include "compiler/importers/Checkpoint.h"
#include "compiler/reference/CheckpointWeights.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/SetVector.h"

#include <cmath>
#include <cstring>

namespace daybreak {
#define GEN_PASS_DEF_LMFOLDWEIGHTS
#include "passes/Passes.h.inc"
} // namespace daybreak

using namespace mlir;
using namespace daybreak;

/// Whether `value` is an FP8 weight dequantised from weight-derived codes
/// and scales (stored ones, or MXFP4 experts converted by the offline route)
/// for expert matmuls only. Those stay FP8 in the artifact (1 byte per
/// parameter instead of 4), the codes and scales folded on their own if
/// computed, and the devices read them as stored, as fp8_matmul weights:
/// folding the dequantisation would hold and write every routed expert in
/// fp32 (45 GB per DeepSeek-V3.2 layer).
static bool isStoredFp8ExpertWeight(Value value,
                                    const llvm::SetVector<Value> &derived) {
  // An operand computed from weights may already be folded into a weight.
  auto fromWeights = [&](Value v) {
    return derived.contains(v) || v.getDefiningOp<lm::WeightRefOp>();
  };
  auto dequant = value.getDefiningOp<lm::Fp8DequantOp>();
  if (!dequant || !fromWeights(dequant.getWeight()) ||
      !fromWeights(dequant.getScaleInv()))
    return false;
  return llvm::all_of(value.getUses(), [](OpOperand &use) {
    auto matmul = dyn_cast<lm::ExpertMatmulOp>(use.getOwner());
    return matmul && use.get() == matmul.getWeight() &&
           use.getOperandNumber() == 1;
  });
}

/// Whether every use of `value` is the weight of an lm.head_matmul, which
/// takes a weight of any float type: an f32 fold whose values are all
/// exact in bf16 (DeepSeek's e4m3 W_UK / W_UV times power-of-two scales)
/// is then stored as bf16, half the bytes and what the tensor-core kernels
/// read, with no value changed.
static bool readAsHeadWeightOnly(Value value) {
  return !value.use_empty() &&
         llvm::all_of(value.getUses(), [](OpOperand &use) {
           auto matmul = dyn_cast<lm::HeadMatmulOp>(use.getOwner());
           return matmul && use.get() == matmul.getWeight() &&
                  use.getOperandNumber() == 1;
         });
}

/// Whether every value is a bf16 value (a float whose low 16 bits are 0).
static bool exactInBf16(llvm::ArrayRef<float> values) {
  return llvm::all_of(values, [](float v) {
    uint32_t bits;
    std::memcpy(&bits, &v, 4);
    return (bits & 0xFFFF) == 0 && !std::isnan(v);
  });
}

/// Ops folded when all their tensor operands are weight-derived.
static bool isFoldable(Operation *op) {
  if (isa<lm::Fp8DequantOp, lm::TransposeOp, tensor::ExpandShapeOp,
          tensor::CollapseShapeOp>(op))
    return true;
  // A widened tensor weight: MXFP4 experts as E4M3 codes and f32 scales
  // (exact), bf16 attention sinks read in f32.
  if (auto ext = dyn_cast<arith::ExtFOp>(op))
    return isa<RankedTensorType>(ext.getType());
  if (auto slice = dyn_cast<tensor::ExtractSliceOp>(op))
    return slice.getOffsets().empty() && slice.getSizes().empty() &&
           slice.getStrides().empty();
  return false;
}

namespace {
struct FoldWeightsPass
    : public daybreak::impl::LmFoldWeightsBase<FoldWeightsPass> {
  using LmFoldWeightsBase::LmFoldWeightsBase;
  FoldWeightsPass(ref::WeightProvider provider) : provider(std::move(provider)) {}

  void runOnOperation() override;

  ref::WeightProvider provider;
};
} // namespace

/// Converts a host tensor to an elements attribute of `type`; the values
/// are already exact in its element type (the evaluator rounded them). The
/// attribute is built from raw bytes: folded weights reach billions of
/// values (stacked experts), and a per-value APFloat detour cost ~24 bytes
/// and a conversion per value.
static ElementsAttr toAttr(const ref::Tensor &tensor, RankedTensorType type) {
  auto elem = cast<FloatType>(type.getElementType());
  llvm::ArrayRef<float> floats = tensor.floats();
  if (elem.isF32())
    return DenseElementsAttr::getFromRawBuffer(
        type, llvm::ArrayRef<char>(reinterpret_cast<const char *>(floats.data()),
                                   floats.size() * sizeof(float)));
  unsigned width = elem.getWidth();
  if (width != 16 && width != 8) {
    SmallVector<APFloat> values;
    for (float v : floats) {
      APFloat f(v);
      bool lost;
      f.convert(elem.getFloatSemantics(), APFloat::rmNearestTiesToEven, &lost);
      values.push_back(f);
    }
    return DenseElementsAttr::get(type, values);
  }
  auto encodeSlow = [&](float v) {
    APFloat f(v);
    bool lost;
    f.convert(elem.getFloatSemantics(), APFloat::rmNearestTiesToEven, &lost);
    return f.bitcastToAPInt().getZExtValue();
  };
  std::vector<char> raw(floats.size() * width / 8);
  if (width == 8) {
    // APFloat per value is ~100 ns: 10 minutes for the offline route's E4M3
    // experts at 2 gpt-oss-120b layers (6.4e9 values). Every value is exact
    // in the type, and the 8-bit float types have at most 3 mantissa bits,
    // so an f32's top 12 bits (sign, exponent, 3 mantissa bits) name its
    // code once its low 20 are zero: a table of the 256 codes decoded once.
    // Anything else (NaNs, a wider mantissa) takes APFloat.
    std::vector<int16_t> codeOf(4096, -1);
    for (unsigned code = 256; code-- > 0;) {
      APFloat f(elem.getFloatSemantics(), APInt(8, code));
      bool lost;
      f.convert(APFloat::IEEEsingle(), APFloat::rmNearestTiesToEven, &lost);
      uint32_t bits = f.bitcastToAPInt().getZExtValue();
      if (!f.isNaN() && (bits & 0xFFFFF) == 0)
        codeOf[bits >> 20] = int16_t(code);
    }
    for (size_t i = 0; i < floats.size(); ++i) {
      uint32_t bits;
      std::memcpy(&bits, &floats[i], 4);
      int16_t code = (bits & 0xFFFFF) == 0 ? codeOf[bits >> 20] : -1;
      raw[i] = char(code >= 0 ? uint64_t(code) : encodeSlow(floats[i]));
    }
    return DenseElementsAttr::getFromRawBuffer(type, raw);
  }
  for (size_t i = 0; i < floats.size(); ++i) {
    uint32_t f32;
    std::memcpy(&f32, &floats[i], 4);
    // bf16 of an exact value: the f32's top half.
    uint64_t bits = elem.isBF16() && (f32 & 0xFFFF) == 0 && !std::isnan(floats[i])
                        ? f32 >> 16
                        : encodeSlow(floats[i]);
    std::memcpy(raw.data() + i * 2, &bits, 2);
  }
  return DenseElementsAttr::getFromRawBuffer(type, raw);
}

void FoldWeightsPass::runOnOperation() {
  ModuleOp module = getOperation();
  // The registered pass reads weights from the checkpoint option.
  std::optional<importers::Checkpoint> opened;
  if (!provider) {
    if (checkpoint.empty()) {
      module.emitError("lm-fold-weights needs checkpoint=<dir>");
      return signalPassFailure();
    }
    auto ckpt = importers::Checkpoint::open(checkpoint);
    if (!ckpt) {
      module.emitError(llvm::toString(ckpt.takeError()));
      return signalPassFailure();
    }
    opened.emplace(std::move(*ckpt));
    provider = ref::checkpointWeights(*opened);
  }

  // Weight-derived values, in program order per function.
  llvm::SetVector<Value> derived;
  module.walk([&](Operation *op) {
    if (isa<lm::WeightRefOp>(op)) {
      derived.insert(op->getResult(0));
      return;
    }
    if (!isFoldable(op))
      return;
    for (Value operand : op->getOperands())
      if (isa<RankedTensorType>(operand.getType()) && !derived.contains(operand))
        return;
    derived.insert(op->getResult(0));
  });

  OpBuilder b(module.getContext());
  std::map<std::string, lm::WeightOp> folded;
  int64_t counter = 0;
  for (Value value : derived) {
    Operation *def = value.getDefiningOp();
    if (isa<lm::WeightRefOp>(def))
      continue;
    bool readByKernel = llvm::any_of(value.getUsers(), [&](Operation *user) {
      return !isFoldable(user) || !derived.contains(user->getResult(0)) ||
             isStoredFp8ExpertWeight(user->getResult(0), derived);
    });
    if (!readByKernel || isStoredFp8ExpertWeight(value, derived))
      continue;

    // A scratch module with the subgraph of `value`.
    llvm::SetVector<Operation *> slice;
    SmallVector<Operation *> work = {def};
    while (!work.empty()) {
      Operation *op = work.pop_back_val();
      if (!slice.insert(op))
        continue;
      for (Value operand : op->getOperands())
        if (Operation *producer = operand.getDefiningOp())
          work.push_back(producer);
    }
    SmallVector<Operation *> ordered(slice.begin(), slice.end());
    llvm::sort(ordered, [](Operation *x, Operation *y) {
      return x->isBeforeInBlock(y);
    });
    OwningOpRef<ModuleOp> scratch = ModuleOp::create(def->getLoc());
    b.setInsertionPointToEnd(scratch->getBody());
    for (Operation *op : ordered)
      if (auto ref = dyn_cast<lm::WeightRefOp>(op))
        if (!scratch->lookupSymbol(ref.getWeight()))
          b.clone(*module.lookupSymbol(ref.getWeightAttr()));
    auto type = cast<RankedTensorType>(value.getType());
    auto func = func::FuncOp::create(b, def->getLoc(), "fold",
                                     b.getFunctionType({}, {type}));
    b.setInsertionPointToStart(func.addEntryBlock());
    IRMapping mapping;
    for (Operation *op : ordered)
      b.clone(*op, mapping);
    func::ReturnOp::create(b, def->getLoc(), mapping.lookup(value));

    // Equal subgraphs (the same in @prefill and @decode) share one weight.
    std::string key;
    llvm::raw_string_ostream os(key);
    func.print(os);
    const bool narrowable = readAsHeadWeightOnly(value);
    if (narrowable)
      os << "\n// read as head weights";
    lm::WeightOp weight = folded[key];
    if (!weight) {
      ref::Evaluator evaluator(*scratch, provider);
      auto result = evaluator.run("fold", {});
      if (!result) {
        def->emitError("cannot fold weight: ") << llvm::toString(result.takeError());
        return signalPassFailure();
      }
      if (!isa<FloatType>(type.getElementType())) {
        def->emitError("only float weights fold, got ") << type;
        return signalPassFailure();
      }
      RankedTensorType resultType = type;
      if (narrowable && type.getElementType().isF32() &&
          exactInBf16((*result)[0].floats()))
        resultType = type.clone(b.getBF16Type());
      std::string root = "folded";
      for (Operation *op : ordered)
        if (auto ref = dyn_cast<lm::WeightRefOp>(op)) {
          root = ref.getWeight().str();
          break;
        }
      b.setInsertionPointToStart(module.getBody());
      weight = lm::WeightOp::create(
          b, def->getLoc(), root + ".folded." + std::to_string(counter++),
          resultType, b.getStrArrayAttr({}), toAttr((*result)[0], resultType),
          lm::ShardAttr());
      folded[key] = weight;
      ++numFolded;
    }
    b.setInsertionPoint(def);
    Value replacement =
        lm::WeightRefOp::create(b, def->getLoc(), weight.getType(),
                                weight.getSymName())
            .getResult();
    value.replaceAllUsesWith(replacement);
  }

  // Drop the now unused subgraphs and weights.
  bool changed = true;
  while (changed) {
    changed = false;
    module.walk([&](Operation *op) {
      if ((isFoldable(op) || isa<lm::WeightRefOp>(op)) && op->use_empty()) {
        op->erase();
        changed = true;
      }
    });
  }
  SymbolTable symbols(module);
  for (auto weight : llvm::make_early_inc_range(module.getOps<lm::WeightOp>()))
    if (SymbolTable::symbolKnownUseEmpty(weight, module))
      weight.erase();
}

std::unique_ptr<Pass>
daybreak::createLmFoldWeightsPass(ref::WeightProvider weights) {
  return std::make_unique<FoldWeightsPass>(std::move(weights));
}
