//===- LowerToPlan.cpp - Lower lm functions to plan steps -----------------===//
//
// Every function becomes a plan.step with one size, the token count. Each
// tensor value gets a plan.buffer (reshapes reuse their source's buffer
// name: an alias), each op a plan.launch of the runtime kernel of its name
// (runtime/abi/Kernels.def), checked against that declaration: operands by
// declared slot (absent optional ones listed in `absent`) and the op's
// attributes, defaults included, as typed parameters; slices and concatenations
// along the last dim become column copies, except where the kernels on either
// side take the columns in place: slices that only fused elementwise bodies
// read (a column view in the generated kernel), slices that only kernel slots
// declared VIEW read, and concatenation parts that a kernel writes through a
// VIEW result slot and nothing else reads (plan.column_view of the
// concatenation's buffer). Weights become plan.weights packed into
// section 0 (64-byte aligned, their lm sources or folded value kept as
// attributes for the artifact writer); the caches of each layout share a
// plan.cache_pool.
//
//===----------------------------------------------------------------------===//

#include "passes/ColumnSlice.h"
#include "passes/KernelSelection.h"
#include "passes/Passes.h"
#include "runtime/abi/KernelAbi.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/TypeSwitch.h"

namespace daybreak {
#define GEN_PASS_DEF_LMLOWERTOPLAN
#include "passes/Passes.h.inc"
} // namespace daybreak

using namespace mlir;
using namespace daybreak;

namespace {

constexpr int64_t kWeightAlignment = 64;

int64_t alignTo(int64_t value, int64_t alignment) {
  return (value + alignment - 1) / alignment * alignment;
}

/// Bytes of a static tensor or memref type (sub-byte types packed).
int64_t byteSize(ShapedType type) {
  return (type.getNumElements() * type.getElementTypeBitWidth() + 7) / 8;
}

/// Columns [offset, offset + columns) of each row of a buffer whose rows
/// hold `sourceColumns`: how a generated elementwise kernel reads a last-dim
/// slice in place instead of a copy of it.
struct ColumnView {
  int64_t columns;
  int64_t sourceColumns;
  int64_t offset;
};

/// The slice `value` is a column view of, looking through reshapes (which
/// keep a tensor's element order), or null.
static tensor::ExtractSliceOp columnSlice(Value value) {
  while (Operation *def = value.getDefiningOp()) {
    if (isa<tensor::ExpandShapeOp, tensor::CollapseShapeOp>(def)) {
      value = def->getOperand(0);
      continue;
    }
    auto slice = dyn_cast<tensor::ExtractSliceOp>(def);
    return slice && isColumnSlice(slice) ? slice : tensor::ExtractSliceOp();
  }
  return {};
}

/// Whether every read of the column slice `slice` is as a part of a last-dim
/// concatenation (or asks its shape): the concatenation copies the columns
/// from the slice's source, so the slice needs no buffer and no copy of its
/// own.
static bool readOnlyByConcats(tensor::ExtractSliceOp slice) {
  Value value = slice.getResult();
  return !value.use_empty() &&
         llvm::all_of(value.getUses(), [](OpOperand &use) {
           if (isa<tensor::DimOp>(use.getOwner()))
             return true;
           auto concat = dyn_cast<tensor::ConcatOp>(use.getOwner());
           return concat && static_cast<int64_t>(concat.getDim()) ==
                                concat.getType().getRank() - 1;
         });
}

/// Whether every read of `value`, through reshapes, is an input of an
/// lm.elementwise: a column slice read so needs no copy of its own.
static bool readOnlyByElementwise(Value value) {
  return !value.use_empty() &&
         llvm::all_of(value.getUses(), [](OpOperand &use) {
           Operation *user = use.getOwner();
           if (isa<tensor::ExpandShapeOp, tensor::CollapseShapeOp>(user))
             return readOnlyByElementwise(user->getResult(0));
           return isa<lm::ElementwiseOp>(user);
         });
}

class Lowering {
public:
  Lowering(ModuleOp module, int64_t maxTokens, int64_t maxBatch,
           int64_t kvCacheTokens, plan::KernelTarget target)
      : module(module), b(module.getContext()), maxTokens(maxTokens),
        maxBatch(maxBatch), kvCacheTokens(kvCacheTokens), target(target) {}

  LogicalResult run();

private:
  LogicalResult lowerWeights();
  LogicalResult lowerFunction(func::FuncOp func);
  LogicalResult lowerOp(Operation *op);
  /// The cache_ref of a function argument that is a cache (written by an
  /// lm.cache_write) or per-sequence state (`lm.state`), or null.
  FailureOr<Value> lowerCacheArg(func::FuncOp func, BlockArgument arg);
  /// A pool named after `kind`, numbered when the name is taken.
  std::string poolName(StringRef kind);

  /// The memref of a lowered tensor value.
  Value lookup(Value v) { return mapping.lookup(v); }
  /// A fresh buffer for `value` (an alias of `aliasOf`'s buffer if given).
  Value buffer(Value value, Value aliasOf = {});
  /// Declares (once) the kernel `name` taking `numArgs` memrefs.
  FlatSymbolRefAttr kernel(StringRef name, int64_t numArgs);
  /// Emits a launch of the declared kernel `name`: `operands` holds one
  /// value per declared operand slot (null for an absent optional one; the
  /// values of a variadic last slot follow), then `results`. Fails, at
  /// `loc`, when the launch does not match the declaration.
  LogicalResult launch(Location loc, StringRef name, ArrayRef<Value> operands,
                       ValueRange results, ArrayRef<NamedAttribute> attrs);
  /// The lowered operands of `op` by the declared slots of kernel `name`
  /// (null for an absent optional operand).
  FailureOr<SmallVector<Value>> declaredOperands(Operation *op,
                                                 StringRef name);
  /// The op's attributes, defaults included, as kernel parameters (enums as
  /// strings, YaRN as its yarn_* fields, unit flags as booleans).
  SmallVector<NamedAttribute> kernelAttrs(Operation *op);
  /// Outlines an lm.elementwise body into a generated kernel function of the
  /// nested `generated_kernels` module, input k read through `views[k]`
  /// where set; equal bodies and views share one function.
  StringAttr outlineElementwise(lm::ElementwiseOp op,
                                ArrayRef<std::optional<ColumnView>> views);

  ModuleOp generatedKernels;
  llvm::StringMap<StringAttr> outlined;

  ModuleOp module;
  OpBuilder b;
  int64_t maxTokens;
  int64_t maxBatch;
  /// The tokens the step being lowered is planned for.
  int64_t stepTokens = 0;
  /// The MXFP4 conversions (all_from_tokens ones) lowered so far in the
  /// step: they alternate between two workspaces.
  int64_t overlappedConversions = 0;
  int64_t kvCacheTokens;
  /// The device whose kernels the plan.kernel declarations name.
  plan::KernelTarget target;
  Value tokens; // the step's size argument
  IRMapping mapping;
  llvm::StringMap<plan::KernelOp> kernels;
  /// Cache pools by layout, with the next layer to hand out per function.
  llvm::MapVector<Attribute, plan::CachePoolOp> pools;
  llvm::DenseMap<Attribute, int64_t> poolLayers;
  /// State pools by (layout, slot shape), likewise.
  llvm::MapVector<Attribute, plan::StatePoolOp> statePools;
  /// Views of a cache's column prefix (lm values mapped to the cache) and
  /// their columns.
  llvm::DenseMap<Value, int64_t> cacheColumns;
  /// Parts of a last-dim concatenation their kernel writes in place: the
  /// concatenation and the part's first column.
  llvm::DenseMap<Value, std::pair<tensor::ConcatOp, int64_t>> concatParts;
  /// Finds the concatenation parts whose kernels can write them in place:
  /// read by the concatenation alone, computed by a kernel whose result
  /// slot takes a column view.
  void findConcatParts(Block &body);
  /// The column view `columns` columns wide at `column` of `source`'s
  /// buffer.
  Value columnView(Value source, int64_t column, int64_t columns);
  /// The buffer of `concat`'s result: made by the first part written in
  /// place, or now.
  Value concatBuffer(tensor::ConcatOp concat);
  int64_t bufferCount = 0;
  int64_t provisionalArena = 0;
};

} // namespace

LogicalResult Lowering::lowerWeights() {
  int64_t offset = 0;
  for (auto weight : llvm::make_early_inc_range(module.getOps<lm::WeightOp>())) {
    auto type = cast<RankedTensorType>(weight.getType());
    b.setInsertionPoint(weight);
    auto planWeight = plan::WeightOp::create(b, weight.getLoc(),
                                             weight.getSymName(), type,
                                             /*section=*/0, offset);
    // What the artifact writer stores: checkpoint tensors or a value.
    planWeight->setAttr("lm.sources", weight.getSourcesAttr());
    if (std::optional<ElementsAttr> value = weight.getValue())
      planWeight->setAttr("lm.value", *value);
    if (lm::ShardAttr shard = weight.getShardAttr())
      planWeight->setAttr("lm.shard", shard);
    offset = alignTo(offset + byteSize(type), kWeightAlignment);
    weight.erase();
  }
  return success();
}

FlatSymbolRefAttr Lowering::kernel(StringRef name, int64_t numArgs) {
  std::string symbol = (name + "." + Twine(numArgs)).str();
  if (!kernels.count(symbol)) {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToEnd(module.getBody());
    kernels[symbol] = plan::KernelOp::create(
        b, module.getLoc(), b.getStringAttr(symbol),
        plan::KernelTargetAttr::get(b.getContext(), target),
        b.getStringAttr(name), b.getI64IntegerAttr(numArgs));
  }
  return FlatSymbolRefAttr::get(b.getContext(), symbol);
}

/// Whether `value` holds the n residual streams of mHC: a write-back's
/// result or the streams a collapse reads (the first ones, from the
/// embedding).
static bool isMhcStreams(Value value) {
  if (isa_and_present<lm::MhcPostOp, lm::MhcPostPreOp>(value.getDefiningOp()) &&
      value == value.getDefiningOp()->getResult(0))
    return true;
  return llvm::any_of(value.getUses(), [](OpOperand &use) {
    return isa<lm::MhcPreOp, lm::MhcPostOp, lm::MhcPostPreOp>(use.getOwner()) &&
           use.getOperandNumber() == 0;
  });
}

Value Lowering::buffer(Value value, Value aliasOf) {
  auto type = cast<RankedTensorType>(value.getType());
  auto memref = MemRefType::get(type.getShape(), type.getElementType());
  std::string name;
  if (aliasOf)
    name = cast<plan::BufferOp>(aliasOf.getDefiningOp()).getName().str();
  else if (isMhcStreams(value))
    name = "mhc_streams." + std::to_string(bufferCount++);
  else
    name = "v" + std::to_string(bufferCount++);
  SmallVector<Value> sizes;
  for (int64_t d : type.getShape())
    if (ShapedType::isDynamic(d))
      sizes.push_back(tokens);
  int64_t rows = 1;
  for (int64_t d : type.getShape())
    rows *= ShapedType::isDynamic(d) ? stepTokens : d;
  provisionalArena +=
      alignTo((rows * type.getElementTypeBitWidth() + 7) / 8, 256);
  Value result = plan::BufferOp::create(b, value.getLoc(), memref, name,
                                        /*offset=*/0, sizes)
                     .getResult();
  mapping.map(value, result);
  return result;
}

SmallVector<NamedAttribute> Lowering::kernelAttrs(Operation *op) {
  NamedAttrList all(op->getAttrDictionary());
  if (std::optional<RegisteredOperationName> name = op->getRegisteredInfo())
    name->populateDefaultAttrs(all);
  SmallVector<NamedAttribute> attrs;
  auto add = [&](StringRef name, Attribute value) {
    attrs.push_back(b.getNamedAttr(name, value));
  };
  for (NamedAttribute attr : all) {
    StringRef name = attr.getName();
    // Operand presence travels as `absent`; the cache layout as the cache.
    if (name == "operandSegmentSizes" || name == "layout")
      continue;
    llvm::TypeSwitch<Attribute>(attr.getValue())
        .Case([&](lm::YarnAttr y) {
          add("yarn_factor", y.getFactor());
          add("yarn_original_max_positions",
              b.getI64IntegerAttr(y.getOriginalMaxPositions()));
          add("yarn_beta_fast", y.getBetaFast());
          add("yarn_beta_slow", y.getBetaSlow());
          add("yarn_attention_factor", y.getAttentionFactor());
          add("yarn_truncate", y.getTruncate());
        })
        .Case([&](lm::RopeStyleAttr e) {
          add(name, b.getStringAttr(lm::stringifyRopeStyle(e.getValue())));
        })
        .Case([&](lm::RoutingScoreAttr e) {
          add(name, b.getStringAttr(lm::stringifyRoutingScore(e.getValue())));
        })
        .Case([&](lm::ActivationAttr e) {
          add(name, b.getStringAttr(lm::stringifyActivation(e.getValue())));
        })
        .Case([&](lm::MaskKindAttr e) {
          add(name, b.getStringAttr(lm::stringifyMaskKind(e.getValue())));
        })
        .Case([&](lm::NormKindAttr e) {
          add(name, b.getStringAttr(lm::stringifyNormKind(e.getValue())));
        })
        .Case([&](UnitAttr) { add(name, b.getBoolAttr(true)); })
        .Default([&](Attribute value) { add(name, value); });
  }
  return attrs;
}

FailureOr<SmallVector<Value>> Lowering::declaredOperands(Operation *op,
                                                         StringRef name) {
  const abi::KernelDecl *decl = abi::findKernel(name);
  if (!decl)
    return op->emitError("no runtime kernel '")
           << name << "' (runtime/abi/Kernels.def) runs this op";
  // The op's operand groups, one per declared slot: from its segment sizes
  // when it has several optional groups; else each slot holds one operand,
  // but for a variadic last slot, or one optional slot the op leaves out.
  unsigned slots = decl->numOperands();
  SmallVector<int32_t> groups;
  if (auto segments =
          op->getAttrOfType<DenseI32ArrayAttr>("operandSegmentSizes")) {
    groups.assign(segments.asArrayRef().begin(), segments.asArrayRef().end());
    // Optional slots the kernel declares past the op's own operands (an
    // expert matmul's weight_scale) start absent.
    while (groups.size() < slots &&
           decl->operands[groups.size()].kind == abi::ArgKind::Optional)
      groups.push_back(0);
  } else if (decl->isVariadic()) {
    groups.assign(slots - 1, 1);
    groups.push_back(op->getNumOperands() - (slots - 1));
  } else {
    groups.assign(slots, 1);
    unsigned optionals = 0, optional = 0;
    for (unsigned i = 0; i < slots; ++i)
      if (decl->operands[i].kind == abi::ArgKind::Optional) {
        ++optionals;
        optional = i;
      }
    if (op->getNumOperands() + 1 == slots && optionals == 1)
      groups[optional] = 0;
  }
  int64_t total = 0;
  for (int32_t g : groups)
    total += g;
  if (groups.size() != slots || total != op->getNumOperands())
    return op->emitError("has ")
           << op->getNumOperands() << " operands in " << groups.size()
           << " groups; kernel '" << name << "' declares " << slots
           << " operand slots";
  SmallVector<Value> operands;
  unsigned next = 0;
  for (int32_t g : groups) {
    if (g == 0)
      operands.push_back(Value());
    for (int32_t i = 0; i < g; ++i, ++next) {
      Value operand = op->getOperand(next);
      // An FP8 dequantisation left for the device has no buffer: its user's
      // pattern passes the codes and scales instead.
      if (!lookup(operand) && !operand.getDefiningOp<lm::Fp8DequantOp>())
        return op->emitError("operand ") << next << " was not lowered";
      operands.push_back(lookup(operand));
    }
  }
  return operands;
}

LogicalResult Lowering::launch(Location loc, StringRef name,
                               ArrayRef<Value> operands, ValueRange results,
                               ArrayRef<NamedAttribute> attrs) {
  SmallVector<Value> args;
  SmallVector<int64_t> absent;
  for (auto [slot, v] : llvm::enumerate(operands)) {
    if (v)
      args.push_back(v);
    else
      absent.push_back(slot);
  }
  args.append(results.begin(), results.end());
  auto grid = AffineMap::get(0, 1,
                             {b.getAffineSymbolExpr(0),
                              b.getAffineConstantExpr(1),
                              b.getAffineConstantExpr(1)},
                             b.getContext());
  auto op = plan::LaunchOp::create(b, loc, kernel(name, args.size()),
                                   ValueRange{tokens}, AffineMapAttr::get(grid),
                                   b.getDenseI64ArrayAttr({1, 1, 1}),
                                   b.getI64IntegerAttr(0), args);
  for (NamedAttribute attr : attrs)
    op->setAttr(attr.getName(), attr.getValue());
  op->setAttr(plan::kNumResultsAttr, b.getI64IntegerAttr(results.size()));
  if (!absent.empty())
    op->setAttr(plan::kAbsentAttr, b.getDenseI64ArrayAttr(absent));
  return plan::verifyKernelAbi(op, name);
}

StringAttr
Lowering::outlineElementwise(lm::ElementwiseOp op,
                             ArrayRef<std::optional<ColumnView>> views) {
  // The body's structure identifies the kernel: each op's name, attributes
  // and result types, with operands as positions (argument i or op j), and
  // the inputs' column views.
  std::string key;
  llvm::raw_string_ostream os(key);
  Block &block = op.getBody().front();
  llvm::DenseMap<Value, std::string> position;
  for (BlockArgument arg : block.getArguments()) {
    position[arg] = "a" + std::to_string(arg.getArgNumber());
    os << arg.getType();
    if (const std::optional<ColumnView> &view = views[arg.getArgNumber()])
      os << "[" << view->columns << "/" << view->sourceColumns << "+"
         << view->offset << "]";
    os << ";";
  }
  unsigned index = 0;
  for (Operation &inner : block) {
    os << inner.getName() << inner.getAttrDictionary() << "(";
    for (Value operand : inner.getOperands())
      os << position.lookup(operand) << ",";
    os << ")";
    for (Value result : inner.getResults()) {
      os << result.getType();
      position[result] = "o" + std::to_string(index);
    }
    os << ";";
    ++index;
  }
  if (StringAttr known = outlined.lookup(key))
    return known;

  MLIRContext *ctx = b.getContext();
  OpBuilder::InsertionGuard guard(b);
  if (!generatedKernels) {
    b.setInsertionPointToEnd(module.getBody());
    generatedKernels = ModuleOp::create(b, module.getLoc(),
                               StringRef(plan::kGeneratedKernelsModule));
  }
  // void kernel(int64_t begin, int64_t end, const T **inputs, T *out):
  // out[i] = body(in[k][i]) for i in [begin, end), where input k with a
  // column view reads element (i / columns) * sourceColumns + offset +
  // i % columns of its buffer.
  std::string name = "daybreak_elementwise_" + std::to_string(outlined.size());
  auto ptr = LLVM::LLVMPointerType::get(ctx);
  Location loc = op.getLoc();
  b.setInsertionPointToEnd(generatedKernels.getBody());
  auto func = func::FuncOp::create(
      b, loc, name,
      b.getFunctionType({b.getI64Type(), b.getI64Type(), ptr, ptr}, {}));
  Block *entry = func.addEntryBlock();
  b.setInsertionPointToStart(entry);
  Value begin = entry->getArgument(0), end = entry->getArgument(1),
        ins = entry->getArgument(2), out = entry->getArgument(3);
  Block &body = block;
  SmallVector<Value> inputPtrs;
  for (unsigned k = 0; k < body.getNumArguments(); ++k) {
    Value slot = LLVM::GEPOp::create(b, loc, ptr, ptr, ins,
                                     ArrayRef<LLVM::GEPArg>{int32_t(k)});
    inputPtrs.push_back(LLVM::LoadOp::create(b, loc, ptr, slot));
  }
  Value lower = arith::IndexCastOp::create(b, loc, b.getIndexType(), begin);
  Value step = arith::ConstantIndexOp::create(b, loc, 1);
  Value upper = arith::IndexCastOp::create(b, loc, b.getIndexType(), end);
  auto loop = scf::ForOp::create(b, loc, lower, upper, step);
  b.setInsertionPointToStart(loop.getBody());
  Value i = arith::IndexCastOp::create(b, loc, b.getI64Type(),
                                       loop.getInductionVar());
  auto i64 = [&](int64_t v) {
    return arith::ConstantIntOp::create(b, loc, b.getI64Type(), v).getResult();
  };
  IRMapping mapping;
  for (auto [k, arg] : llvm::enumerate(body.getArguments())) {
    Value index = i;
    if (const std::optional<ColumnView> &view = views[k]) {
      Value row = arith::DivUIOp::create(b, loc, i, i64(view->columns));
      Value column = arith::SubIOp::create(
          b, loc, i, arith::MulIOp::create(b, loc, row, i64(view->columns)));
      index = arith::AddIOp::create(
          b, loc, arith::MulIOp::create(b, loc, row, i64(view->sourceColumns)),
          arith::AddIOp::create(b, loc, column, i64(view->offset)));
    }
    Value addr = LLVM::GEPOp::create(b, loc, ptr, arg.getType(), inputPtrs[k],
                                     ArrayRef<LLVM::GEPArg>{index});
    mapping.map(arg, LLVM::LoadOp::create(b, loc, arg.getType(), addr));
  }
  for (Operation &inner : body.without_terminator())
    b.clone(inner, mapping);
  Value result = mapping.lookup(cast<lm::YieldOp>(body.back()).getValue());
  Value addr = LLVM::GEPOp::create(b, loc, ptr, result.getType(), out,
                                   ArrayRef<LLVM::GEPArg>{i});
  LLVM::StoreOp::create(b, loc, result, addr);
  b.setInsertionPointAfter(loop);
  func::ReturnOp::create(b, loc);
  StringAttr symbol = b.getStringAttr(name);
  outlined[key] = symbol;
  return symbol;
}

/// The constant a splat of a constant holds, if it is one.
static std::optional<int64_t> splatConstant(Value v) {
  auto splat = v.getDefiningOp<tensor::SplatOp>();
  if (!splat)
    return std::nullopt;
  auto constant = splat.getInput().getDefiningOp<arith::ConstantOp>();
  if (!constant)
    return std::nullopt;
  if (auto attr = dyn_cast<IntegerAttr>(constant.getValue()))
    return attr.getInt();
  return std::nullopt;
}

void Lowering::findConcatParts(Block &body) {
  concatParts.clear();
  for (auto concat : body.getOps<tensor::ConcatOp>()) {
    auto type = cast<RankedTensorType>(concat.getType());
    if (static_cast<int64_t>(concat.getDim()) != type.getRank() - 1 ||
        type.isDynamicDim(type.getRank() - 1))
      continue;
    int64_t column = 0;
    for (Value part : concat.getInputs()) {
      if (part.hasOneUse() && writesColumnView(part) &&
          part.getParentBlock() == &body)
        concatParts[part] = {concat, column};
      column += cast<RankedTensorType>(part.getType()).getShape().back();
    }
  }
}

Value Lowering::columnView(Value source, int64_t column, int64_t columns) {
  auto type = cast<MemRefType>(source.getType());
  return plan::ColumnViewOp::create(
      b, source.getLoc(), plan::ColumnViewOp::viewType(type, column, columns),
      source, b.getI64IntegerAttr(column));
}

Value Lowering::concatBuffer(tensor::ConcatOp concat) {
  if (Value made = lookup(concat.getResult()))
    return made;
  return buffer(concat.getResult());
}

// The kernel each case launches is also what loweredKernelName
// (KernelSelection.cpp) answers for lm-check-target: keep the two in step.
LogicalResult Lowering::lowerOp(Operation *op) {
  Location loc = op->getLoc();
  auto args = [&](ValueRange values) {
    SmallVector<Value> out;
    for (Value v : values)
      out.push_back(lookup(v));
    return out;
  };
  return llvm::TypeSwitch<Operation *, LogicalResult>(op)
      // Values the patterns below consume; they need no buffer.
      .Case<arith::ConstantOp, tensor::DimOp, tensor::SplatOp>(
          [&](Operation *) { return success(); })
      .Case([&](lm::WeightRefOp ref) {
        auto planWeight =
            module.lookupSymbol<plan::WeightOp>(ref.getWeightAttr());
        auto type = cast<RankedTensorType>(ref.getType());
        mapping.map(ref.getResult(),
                    plan::WeightRefOp::create(
                        b, loc,
                        MemRefType::get(type.getShape(), type.getElementType()),
                        planWeight.getSymName())
                        .getResult());
        return success();
      })
      .Case<tensor::ExpandShapeOp, tensor::CollapseShapeOp>(
          [&](auto reshape) -> LogicalResult {
            // A view of a cache (attention's [B, S, Hkv, D]) is the cache.
            Value src = lookup(reshape.getSrc());
            // A reshaped column slice that elementwise kernels read in place.
            if (!src && columnSlice(reshape.getResult()))
              return success();
            if (src && src.getDefiningOp<plan::ColumnViewOp>())
              return reshape.emitError("reshapes a column view");
            if (src && src.getDefiningOp<plan::CacheRefOp>()) {
              mapping.map(reshape.getResult(), src);
              if (auto it = cacheColumns.find(reshape.getSrc());
                  it != cacheColumns.end())
                cacheColumns[reshape.getResult()] = it->second;
            } else {
              buffer(reshape.getResult(), src);
            }
            return success();
          })
      .Case([&](tensor::ExtractSliceOp slice) -> LogicalResult {
        auto src = cast<RankedTensorType>(slice.getSourceType());
        int64_t last = src.getRank() - 1;
        ArrayRef<int64_t> offsets = slice.getStaticOffsets();
        ArrayRef<int64_t> strides = slice.getStaticStrides();
        // A column prefix of a cache is a view of it (absorbed MLA's values,
        // the c_kv prefix of its latent rows): attention reads it with
        // value_columns.
        if (Value cache = lookup(slice.getSource());
            cache && cache.getDefiningOp<plan::CacheRefOp>()) {
          ArrayRef<int64_t> sizes = slice.getStaticSizes();
          for (int64_t d = 0; d <= last; ++d)
            if (offsets[d] != 0 || strides[d] != 1 ||
                (d < last && sizes[d] != src.getDimSize(d)))
              return slice.emitError("only a column prefix of a cache (all "
                                     "rows, the first columns) lowers to "
                                     "plan");
          mapping.map(slice.getResult(), cache);
          cacheColumns[slice.getResult()] = sizes[last];
          return success();
        }
        // Read in place by the elementwise kernels that use it (their
        // column views), so never copied.
        if (columnSlice(slice.getResult()) == slice &&
            readOnlyByElementwise(slice.getResult()))
          return success();
        // Read in place by kernels that take column views (or only asked
        // its shape).
        Value source = lookup(slice.getSource());
        if (isColumnSlice(slice) && source &&
            source.getDefiningOp<plan::BufferOp>() &&
            !slice.getResult().use_empty() &&
            llvm::all_of(slice.getResult().getUses(), [](OpOperand &use) {
              return isa<tensor::DimOp>(use.getOwner()) || takesColumnView(use);
            })) {
          auto [column, columns] = sliceColumns(slice);
          mapping.map(slice.getResult(), columnView(source, column, columns));
          return success();
        }
        // Parts of concatenations only: each concatenation copies the
        // columns from the source (one copy, not two).
        if (isColumnSlice(slice) && source &&
            source.getDefiningOp<plan::BufferOp>() && readOnlyByConcats(slice))
          return success();
        for (int64_t d = 0; d < last; ++d)
          if (offsets[d] != 0)
            return slice.emitError("only slices of the last dim lower to plan");
        if (llvm::any_of(strides, [](int64_t s) { return s != 1; }) ||
            ShapedType::isDynamic(offsets[last]) ||
            ShapedType::isDynamic(slice.getStaticSizes()[last]))
          return slice.emitError("only static unit-stride last-dim slices "
                                 "lower to plan");
        Value out = buffer(slice.getResult());
        return launch(
            loc, "copy_columns", {lookup(slice.getSource())}, {out},
            {b.getNamedAttr("src_offset", b.getI64IntegerAttr(offsets[last])),
             b.getNamedAttr("dst_offset", b.getI64IntegerAttr(0))});
      })
      .Case([&](tensor::ConcatOp concat) -> LogicalResult {
        auto type = cast<RankedTensorType>(concat.getType());
        if (static_cast<int64_t>(concat.getDim()) != type.getRank() - 1)
          return concat.emitError("only last-dim concatenations lower to plan");
        Value out = concatBuffer(concat);
        int64_t offset = 0;
        for (Value input : concat.getInputs()) {
          auto written = concatParts.find(input);
          if (written != concatParts.end() && written->second.first == concat) {
            offset += cast<RankedTensorType>(input.getType()).getShape().back();
            continue;
          }
          // A column slice left without a buffer is copied from its source.
          Value from = lookup(input);
          int64_t column = 0;
          if (auto slice = input.getDefiningOp<tensor::ExtractSliceOp>();
              !from && slice && isColumnSlice(slice)) {
            from = lookup(slice.getSource());
            column = sliceColumns(slice).first;
          }
          if (failed(launch(
                  loc, "copy_columns", {from}, {out},
                  {b.getNamedAttr("src_offset", b.getI64IntegerAttr(column)),
                   b.getNamedAttr("dst_offset", b.getI64IntegerAttr(offset))})))
            return failure();
          offset += cast<RankedTensorType>(input.getType()).getShape().back();
        }
        return success();
      })
      .Case([&](arith::AddFOp add) {
        Value out = buffer(add.getResult());
        return launch(loc, "add", args(add->getOperands()), {out}, {});
      })
      .Case([&](arith::AddIOp add) -> LogicalResult {
        std::optional<int64_t> c = splatConstant(add.getRhs());
        if (!c)
          return add.emitError("only adding a constant splat lowers to plan");
        Value out = buffer(add.getResult());
        return launch(loc, "add_scalar_i32", {lookup(add.getLhs())}, {out},
                      {b.getNamedAttr("value", b.getI64IntegerAttr(*c))});
      })
      .Case([&](arith::DivSIOp div) -> LogicalResult {
        std::optional<int64_t> c = splatConstant(div.getRhs());
        if (!c || *c <= 0)
          return div.emitError("only dividing by a positive constant splat "
                               "lowers to plan");
        Value out = buffer(div.getResult());
        return launch(loc, "div_scalar_i32", {lookup(div.getLhs())}, {out},
                      {b.getNamedAttr("value", b.getI64IntegerAttr(*c))});
      })
      .Case([&](lm::ElementwiseOp fused) -> LogicalResult {
        // An input left without a buffer is a column slice read in place.
        SmallVector<Value> inputs;
        SmallVector<std::optional<ColumnView>> views;
        for (Value input : fused.getInputs()) {
          if (Value lowered = lookup(input)) {
            inputs.push_back(lowered);
            views.push_back(std::nullopt);
            continue;
          }
          tensor::ExtractSliceOp slice = columnSlice(input);
          if (!slice || !lookup(slice.getSource()))
            return fused.emitError("an elementwise input has no buffer");
          RankedTensorType source = slice.getSourceType();
          inputs.push_back(lookup(slice.getSource()));
          views.push_back(ColumnView{slice.getStaticSizes().back(),
                                     source.getShape().back(),
                                     slice.getStaticOffsets().back()});
        }
        StringAttr symbol = outlineElementwise(fused, views);
        Value out = buffer(fused.getResult());
        return launch(loc, "elementwise", inputs, {out},
                      {b.getNamedAttr("symbol", symbol)});
      })
      .Case([&](lm::Fp8DequantOp dequant) -> LogicalResult {
        // Left by lm-fold-weights only for expert weights kept FP8: the
        // expert matmul below reads the codes and scales themselves.
        for (Operation *user : dequant->getUsers())
          if (!isa<lm::ExpertMatmulOp>(user))
            return dequant.emitError("only FP8 expert weights reach the "
                                     "lowering undequantised (run "
                                     "lm-fold-weights)");
        return success();
      })
      .Case([&](lm::ExpertMatmulOp matmul) -> LogicalResult {
        // For an FP8 weight the codes take the weight slot and the block
        // scales the weight_scale slot, with `block_size`: the devices
        // dequantise the weight at load, as for fp8_matmul.
        FailureOr<SmallVector<Value>> operands =
            declaredOperands(matmul, "expert_matmul");
        if (failed(operands))
          return failure();
        SmallVector<NamedAttribute> attrs = kernelAttrs(matmul);
        if (auto dequant =
                matmul.getWeight().getDefiningOp<lm::Fp8DequantOp>()) {
          (*operands)[abi::ExpertMatmul::In::weight] =
              lookup(dequant.getWeight());
          (*operands)[abi::ExpertMatmul::In::weight_scale] =
              lookup(dequant.getScaleInv());
          attrs.push_back(
              b.getNamedAttr("block_size", dequant.getBlockSizeAttr()));
        }
        Value out = buffer(matmul.getResult());
        return launch(loc, "expert_matmul", *operands, {out}, attrs);
      })
      .Case([&](lm::AttentionOp attention) -> LogicalResult {
        // The cache form only (lm-check-target rejects the others): K and
        // V are views of caches; the query's batch row is its sequence.
        auto kType = cast<RankedTensorType>(attention.getK().getType());
        Value k = lookup(attention.getK()), v = lookup(attention.getV());
        if (kType.getRank() != 4 || !k || !v ||
            !k.getDefiningOp<plan::CacheRefOp>() ||
            !v.getDefiningOp<plan::CacheRefOp>())
          return attention.emitError("only attention over K and V caches "
                                     "([B, S, Hkv, D] views of cache "
                                     "arguments) lowers to plan");
        if (attention.getMask() == lm::MaskKind::Bidirectional)
          return attention.emitError("bidirectional attention over caches "
                                     "has no runtime kernel");
        SmallVector<NamedAttribute> attrs = {
            b.getNamedAttr("scale", attention.getScaleAttr()),
            b.getNamedAttr("kv_heads",
                           b.getI64IntegerAttr(kType.getDimSize(2)))};
        if (auto window = attention.getWindow())
          attrs.push_back(
              b.getNamedAttr("window", b.getI64IntegerAttr(*window)));
        if (auto it = cacheColumns.find(attention.getV());
            it != cacheColumns.end())
          attrs.push_back(
              b.getNamedAttr("value_columns", b.getI64IntegerAttr(it->second)));
        Value out = buffer(attention.getResult());
        return launch(loc, "attention",
                      {lookup(attention.getQ()), k, v,
                       lookup(attention.getQPositions()),
                       lookup(attention.getQSegments()),
                       attention.getSinks() ? lookup(attention.getSinks())
                                            : Value()},
                      {out}, attrs);
      })
      .Case([&](lm::Mxfp4ToFp8ExpertsOp convert) -> LogicalResult {
        // Every MoE layer converts into the same workspace: buffers of one
        // name are one allocation to plan-assign-workspace, sized for the
        // largest layer and live from the first conversion to the last
        // expert matmul, so the layers share it rather than each taking
        // its own. The remapped indices are per layer.
        FailureOr<SmallVector<Value>> operands =
            declaredOperands(convert, "mxfp4_to_fp8_experts");
        if (failed(operands))
          return failure();
        SmallVector<Value> results;
        for (Value r : convert->getResults())
          results.push_back(buffer(r));
        std::optional<int64_t> allFrom = convert.getAllFromTokens();
        // An overlapped conversion runs while the one before it is still
        // read (plan-overlap-conversions), so consecutive ones take two
        // workspaces in turn: "mxfp4_workspace.<0 or 1>.codes" and so on.
        std::string set =
            allFrom ? std::to_string(overlappedConversions++ % 2) + "." : "";
        StringRef shared[] = {plan::kMxfp4WorkspaceCodes,
                              plan::kMxfp4WorkspaceScales,
                              plan::kMxfp4WorkspaceBias};
        for (auto [name, result] : llvm::zip_first(shared, results)) {
          auto [prefix, role] = name.split('.');
          cast<plan::BufferOp>(result.getDefiningOp())
              .setName((prefix + "." + set + role).str());
        }
        if (!allFrom)
          return launch(loc, "mxfp4_to_fp8_experts", *operands, results, {});
        // Every expert, from all_from_tokens tokens on (reads only weights),
        // then the selection below that count or the indices as slots.
        using In = abi::Mxfp4ToFp8Experts::In;
        NamedAttribute from[] = {
            b.getNamedAttr("from_tokens", b.getI64IntegerAttr(*allFrom))};
        if (failed(launch(loc, "mxfp4_to_fp8_all_experts",
                          {(*operands)[In::weight], (*operands)[In::scales],
                           (*operands)[In::bias]},
                          ValueRange(results).take_front(3), from)))
          return failure();
        NamedAttribute selectBelow[] = {
            b.getNamedAttr("all_from_tokens", b.getI64IntegerAttr(*allFrom))};
        return launch(loc, "mxfp4_to_fp8_experts", *operands, results,
                      selectBelow);
      })
      .Case<lm::ShortConvOp, lm::KdaChunkOp, lm::KdaStepOp, lm::DsaKpoolOp>(
          [&](auto scan) -> LogicalResult {
            // Per-sequence state is updated in place: the new state is the
            // state slot itself, and the kernel has one result.
            Value state = lookup(scan.getState());
            if (!state || !state.template getDefiningOp<plan::CacheRefOp>())
              return scan.emitError("only state that is a per-sequence "
                                    "state argument (lm.state) lowers to "
                                    "plan");
            if (!scan.getSequences())
              return scan.emitError("needs `sequences` (the state slot of "
                                    "each token) to lower to plan");
            StringRef name = scan->getName().stripDialect();
            FailureOr<SmallVector<Value>> operands =
                declaredOperands(scan, name);
            if (failed(operands))
              return failure();
            mapping.map(scan.getNewState(), state);
            Value out = buffer(scan.getOutput());
            return launch(loc, name, *operands, {out}, kernelAttrs(scan));
          })
      .Case([&](lm::CacheWriteOp write) -> LogicalResult {
        // Caches are updated in place: the result is the cache itself.
        FailureOr<SmallVector<Value>> operands =
            declaredOperands(write, "cache_write");
        if (failed(operands))
          return failure();
        mapping.map(write.getResult(), lookup(write.getCache()));
        return launch(loc, "cache_write", *operands, {}, kernelAttrs(write));
      })
      .Default([&](Operation *op) -> LogicalResult {
        // Generic lm op: the kernel of its name, operands by declared slot.
        std::optional<StringRef> name = loweredKernelName(op);
        if (!name || name->empty())
          return op->emitError("no lowering to plan for this op");
        FailureOr<SmallVector<Value>> operands = declaredOperands(op, *name);
        if (failed(operands))
          return failure();
        SmallVector<Value> results;
        for (Value r : op->getResults()) {
          auto part = concatParts.find(r);
          if (part == concatParts.end()) {
            results.push_back(buffer(r));
            continue;
          }
          // A concatenation's part, written in place.
          Value view =
              columnView(concatBuffer(part->second.first), part->second.second,
                         cast<RankedTensorType>(r.getType()).getShape().back());
          mapping.map(r, view);
          results.push_back(view);
        }
        return launch(loc, *name, *operands, results, kernelAttrs(op));
      });
}

std::string Lowering::poolName(StringRef kind) {
  std::string name = kind.str();
  for (int suffix = 1; module.lookupSymbol(name); ++suffix)
    name = (kind + "_" + Twine(suffix)).str();
  return name;
}

FailureOr<Value> Lowering::lowerCacheArg(func::FuncOp func,
                                         BlockArgument arg) {
  auto type = dyn_cast<RankedTensorType>(arg.getType());
  // Pools go before the step; the cache_ref at the builder's point in it.
  Operation *step = b.getInsertionBlock()->getParentOp();

  // Per-sequence state: [max_batch, slot shape...], one slot per sequence.
  Attribute stateAttr = func.getArgAttr(arg.getArgNumber(), "lm.state");
  if (stateAttr && !isa<lm::StateLayoutAttr>(stateAttr))
    return func.emitError("state argument ")
           << arg.getArgNumber()
           << " has no #lm.state_layout (run lm-assign-kv-layout)";
  if (auto layout = dyn_cast_or_null<lm::StateLayoutAttr>(stateAttr)) {
    if (!type || !type.hasStaticShape() || type.getRank() < 2)
      return func.emitError("state argument ")
             << arg.getArgNumber()
             << " must be a static [max_batch, ...] tensor, got "
             << arg.getType();
    ArrayRef<int64_t> slot = type.getShape().drop_front();
    // Pools are named, and kept apart, by what the state is: its scan.
    StringRef kind = "state";
    for (Operation *user : arg.getUsers()) {
      if (isa<lm::ShortConvOp>(user))
        kind = "conv_state";
      else if (isa<lm::KdaChunkOp, lm::KdaStepOp>(user))
        kind = "kda_state";
      else if (isa<lm::DsaKpoolOp>(user))
        kind = "kpool_tail";
    }
    Attribute key = b.getArrayAttr(
        {layout, b.getDenseI64ArrayAttr(slot), b.getStringAttr(kind)});
    plan::StatePoolOp &pool = statePools[key];
    int64_t layer = poolLayers[key]++;
    if (!pool) {
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPoint(step);
      pool = plan::StatePoolOp::create(b, func.getLoc(), poolName(kind), layout,
                                       /*layers=*/1,
                                       /*batch=*/type.getDimSize(0), slot);
    } else if (layer >= static_cast<int64_t>(pool.getLayers())) {
      pool.setLayers(layer + 1);
    } else if (pool.getBatch() != uint64_t(type.getDimSize(0))) {
      return func.emitError("state argument ")
             << arg.getArgNumber() << " has " << type.getDimSize(0)
             << " slots; the other state of its kind has " << pool.getBatch();
    }
    auto memref = MemRefType::get({type.getDimSize(0), pool.getSlotBytes()},
                                  b.getI8Type());
    return plan::CacheRefOp::create(b, func.getLoc(), memref,
                                    pool.getSymName(), layer)
        .getResult();
  }

  lm::CacheWriteOp writer;
  for (Operation *user : arg.getUsers())
    if (auto w = dyn_cast<lm::CacheWriteOp>(user); w && w.getCache() == arg)
      writer = w;
  if (!writer)
    return Value();
  std::optional<lm::KVLayoutAttr> layout = writer.getLayout();
  if (!layout)
    return writer.emitError("caches need a layout (run lm-assign-kv-layout)");
  if (!type || type.getRank() != 3 || !type.hasStaticShape())
    return writer.emitError("expects a static [batch, max_seq_len, width] "
                            "cache, got ")
           << arg.getType();
  int64_t page = layout->getPageSize();
  int64_t batch = type.getDimSize(0), maxSeq = type.getDimSize(1);
  // Tokens a row holds (a k-pool cache: a row per pool); its pages hold
  // `page` rows, `page * rowTokens` tokens.
  int64_t rowTokens = 1;
  if (auto attr = func.getArgAttrOfType<IntegerAttr>(arg.getArgNumber(),
                                                     "lm.row_tokens"))
    rowTokens = attr.getInt();
  int64_t rows;
  if (int64_t window = layout->getWindow()) {
    // A ring per sequence: the window plus a chunk's rows, so a chunk never
    // overwrites rows its own queries still read; whole pages.
    rows = batch * alignTo(std::min(window - 1 + maxTokens, maxSeq), page);
  } else {
    // Pages shared by all sequences: every row they may fill, or fewer.
    rows = batch * alignTo(maxSeq, page);
    if (kvCacheTokens > 0)
      rows = std::min<int64_t>(
          rows, alignTo((kvCacheTokens + rowTokens - 1) / rowTokens, page));
  }
  plan::CachePoolOp &pool = pools[*layout];
  int64_t layer = poolLayers[*layout]++;
  if (!pool) {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPoint(step);
    // Pools are named after their kind; a second layout of one kind (another
    // width, storage or page size) gets a numbered name.
    pool = plan::CachePoolOp::create(
        b, func.getLoc(),
        poolName(lm::stringifyCacheKind(layout->getKind())), *layout,
        /*layers=*/1, rows);
    pool->setAttr("batch", b.getI64IntegerAttr(batch));
    pool->setAttr("max_seq_len", b.getI64IntegerAttr(maxSeq * rowTokens));
    if (rowTokens > 1)
      pool->setAttr("row_tokens", b.getI64IntegerAttr(rowTokens));
  } else if (layer >= static_cast<int64_t>(pool.getLayers())) {
    pool.setLayers(layer + 1);
  }
  auto memref =
      MemRefType::get({rows, layout->getBytesPerToken()}, b.getI8Type());
  return plan::CacheRefOp::create(b, func.getLoc(), memref,
                                  pool.getSymName(), layer)
      .getResult();
}

LogicalResult Lowering::lowerFunction(func::FuncOp func) {
  mapping.clear();
  cacheColumns.clear();
  bufferCount = 0;
  provisionalArena = 0;
  poolLayers.clear();
  // Decode runs one token per sequence.
  overlappedConversions = 0;
  stepTokens = func.getSymName() == "decode" && maxBatch > 0
                   ? std::min(maxTokens, maxBatch)
                   : maxTokens;
  b.setInsertionPointToEnd(module.getBody());
  auto step = plan::StepOp::create(
      b, func.getLoc(), func.getSymName(), /*arena_size=*/0,
      b.getStrArrayAttr({"tokens"}), b.getDenseI64ArrayAttr({stepTokens}));
  Block *body = new Block();
  step.getBody().push_back(body);
  tokens = body->addArgument(b.getIndexType(), func.getLoc());
  b.setInsertionPointToStart(body);

  // Which arguments are caches or state; the others are step inputs.
  for (BlockArgument arg : func.getArguments()) {
    FailureOr<Value> ref = lowerCacheArg(func, arg);
    if (failed(ref))
      return failure();
    if (*ref) {
      mapping.map(arg, *ref);
      continue;
    }
    Value input = buffer(arg);
    input.getDefiningOp()->setAttr("io", b.getStringAttr("input"));
    // The runtime finds step inputs by role (token_ids, positions, ...).
    if (auto role =
            func.getArgAttrOfType<StringAttr>(arg.getArgNumber(), "lm.role"))
      input.getDefiningOp()->setAttr("role", role);
  }

  findConcatParts(func.getBody().front());
  for (Operation &op : func.getBody().front()) {
    if (auto ret = dyn_cast<func::ReturnOp>(op)) {
      for (auto [i, v] : llvm::enumerate(ret.getOperands())) {
        Value lowered = lookup(v);
        if (auto buf = lowered.getDefiningOp<plan::BufferOp>()) {
          buf->setAttr("io", b.getStringAttr("output"));
          if (auto role = func.getResultAttrOfType<StringAttr>(i, "lm.role"))
            buf->setAttr("role", role);
        } else if (!lowered.getDefiningOp<plan::CacheRefOp>())
          return ret.emitError("result ") << i << " is neither a buffer nor a cache";
      }
      continue;
    }
    if (failed(lowerOp(&op)))
      return failure();
  }
  step.setArenaSize(provisionalArena);
  return success();
}

LogicalResult Lowering::run() {
  if (failed(lowerWeights()))
    return failure();
  SmallVector<func::FuncOp> funcs(module.getOps<func::FuncOp>());
  for (func::FuncOp func : funcs)
    if (func != nullptr && failed(lowerFunction(func)))
      return failure();
  for (func::FuncOp func : funcs)
    func.erase();
  return success();
}

namespace {
struct LowerToPlanPass
    : public daybreak::impl::LmLowerToPlanBase<LowerToPlanPass> {
  using LmLowerToPlanBase::LmLowerToPlanBase;
  void runOnOperation() override {
    if (maxTokens <= 0) {
      getOperation().emitError("max-tokens must be positive");
      return signalPassFailure();
    }
    if (maxBatch < 0) {
      getOperation().emitError("max-batch must not be negative");
      return signalPassFailure();
    }
    if (kvCacheTokens < 0) {
      getOperation().emitError("kv-cache-tokens must not be negative");
      return signalPassFailure();
    }
    std::optional<plan::KernelTarget> kernelTarget =
        plan::symbolizeKernelTarget(target);
    if (!kernelTarget) {
      getOperation().emitError("lm-lower-to-plan: unknown target '")
          << target << "' (expected "
          << abi::targetNames(abi::CpuAndCuda, " or ") << ")";
      return signalPassFailure();
    }
    Lowering lowering(getOperation(), maxTokens, maxBatch, kvCacheTokens,
                      *kernelTarget);
    if (failed(lowering.run()))
      signalPassFailure();
  }
};
} // namespace
