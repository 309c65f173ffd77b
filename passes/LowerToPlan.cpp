//===- LowerToPlan.cpp - Lower lm functions to plan steps -----------------===//
//
// Every function becomes a plan.step with one size, the token count. Each
// tensor value gets a plan.buffer (reshapes reuse their source's buffer
// name: an alias), each op a plan.launch of the CPU device's library kernel
// with the op's attributes; slices and concatenations along the last dim
// become column copies. Weights become plan.weights packed into section 0
// (64-byte aligned, their lm sources or folded value kept as attributes for
// the artifact writer); the caches of each layout share a plan.cache_pool.
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"

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

class Lowering {
public:
  Lowering(ModuleOp module, int64_t maxTokens)
      : module(module), b(module.getContext()), maxTokens(maxTokens) {}

  LogicalResult run();

private:
  LogicalResult lowerWeights();
  LogicalResult lowerFunction(func::FuncOp func);
  LogicalResult lowerOp(Operation *op);

  /// The memref of a lowered tensor value.
  Value lookup(Value v) { return mapping.lookup(v); }
  /// A fresh buffer for `value` (an alias of `aliasOf`'s buffer if given).
  Value buffer(Value value, Value aliasOf = {});
  /// Declares (once) the kernel `name` taking `numArgs` memrefs.
  FlatSymbolRefAttr kernel(StringRef name, int64_t numArgs);
  /// Emits a launch of `name` on operands then results, with `attrs`.
  void launch(Location loc, StringRef name, ValueRange operands,
              ValueRange results, ArrayRef<NamedAttribute> attrs);
  /// The op's own attributes, to hand to its kernel.
  SmallVector<NamedAttribute> kernelAttrs(Operation *op);
  /// Outlines an lm.elementwise body into a generated kernel function of the
  /// nested `cpu_code` module; equal bodies share one function.
  StringAttr outlineElementwise(lm::ElementwiseOp op);

  ModuleOp cpuCode;
  llvm::StringMap<StringAttr> outlined;

  ModuleOp module;
  OpBuilder b;
  int64_t maxTokens;
  Value tokens; // the step's size argument
  IRMapping mapping;
  llvm::StringMap<plan::KernelOp> kernels;
  /// Cache pools by layout, with the next layer to hand out per function.
  llvm::MapVector<Attribute, plan::CachePoolOp> pools;
  llvm::DenseMap<Attribute, int64_t> poolLayers;
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
        plan::KernelTargetAttr::get(b.getContext(), plan::KernelTarget::Cpu),
        b.getStringAttr(name), b.getI64IntegerAttr(numArgs));
  }
  return FlatSymbolRefAttr::get(b.getContext(), symbol);
}

Value Lowering::buffer(Value value, Value aliasOf) {
  auto type = cast<RankedTensorType>(value.getType());
  auto memref = MemRefType::get(type.getShape(), type.getElementType());
  std::string name;
  if (aliasOf)
    name = cast<plan::BufferOp>(aliasOf.getDefiningOp()).getName().str();
  else
    name = "v" + std::to_string(bufferCount++);
  SmallVector<Value> sizes;
  for (int64_t d : type.getShape())
    if (ShapedType::isDynamic(d))
      sizes.push_back(tokens);
  int64_t rows = 1;
  for (int64_t d : type.getShape())
    rows *= ShapedType::isDynamic(d) ? maxTokens : d;
  provisionalArena +=
      alignTo((rows * type.getElementTypeBitWidth() + 7) / 8, 256);
  Value result = plan::BufferOp::create(b, value.getLoc(), memref, name,
                                        /*offset=*/0, sizes)
                     .getResult();
  mapping.map(value, result);
  return result;
}

SmallVector<NamedAttribute> Lowering::kernelAttrs(Operation *op) {
  SmallVector<NamedAttribute> attrs;
  for (NamedAttribute attr : op->getAttrs())
    if (attr.getName() == "operandSegmentSizes")
      // Which optional operands are present, for the kernel to tell apart.
      attrs.push_back(b.getNamedAttr("segments", attr.getValue()));
    else if (attr.getName() != "layout")
      attrs.push_back(attr);
  return attrs;
}

void Lowering::launch(Location loc, StringRef name, ValueRange operands,
                      ValueRange results, ArrayRef<NamedAttribute> attrs) {
  SmallVector<Value> args(operands.begin(), operands.end());
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
  op->setAttr("num_results", b.getI64IntegerAttr(results.size()));
}

StringAttr Lowering::outlineElementwise(lm::ElementwiseOp op) {
  // The body's structure identifies the kernel: each op's name, attributes
  // and result types, with operands as positions (argument i or op j).
  std::string key;
  llvm::raw_string_ostream os(key);
  Block &block = op.getBody().front();
  llvm::DenseMap<Value, std::string> position;
  for (BlockArgument arg : block.getArguments()) {
    position[arg] = "a" + std::to_string(arg.getArgNumber());
    os << arg.getType() << ";";
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
  if (!cpuCode) {
    b.setInsertionPointToEnd(module.getBody());
    cpuCode = ModuleOp::create(b, module.getLoc(), StringRef("cpu_code"));
  }
  // void kernel(int64_t n, const T **inputs, T *out): out[i] = body(in[k][i])
  std::string name = "daybreak_elementwise_" + std::to_string(outlined.size());
  auto ptr = LLVM::LLVMPointerType::get(ctx);
  Location loc = op.getLoc();
  b.setInsertionPointToEnd(cpuCode.getBody());
  auto func = func::FuncOp::create(
      b, loc, name, b.getFunctionType({b.getI64Type(), ptr, ptr}, {}));
  Block *entry = func.addEntryBlock();
  b.setInsertionPointToStart(entry);
  Value n = entry->getArgument(0), ins = entry->getArgument(1),
        out = entry->getArgument(2);
  Block &body = block;
  SmallVector<Value> inputPtrs;
  for (unsigned k = 0; k < body.getNumArguments(); ++k) {
    Value slot = LLVM::GEPOp::create(b, loc, ptr, ptr, ins,
                                     ArrayRef<LLVM::GEPArg>{int32_t(k)});
    inputPtrs.push_back(LLVM::LoadOp::create(b, loc, ptr, slot));
  }
  Value lower = arith::ConstantIndexOp::create(b, loc, 0);
  Value step = arith::ConstantIndexOp::create(b, loc, 1);
  Value upper = arith::IndexCastOp::create(b, loc, b.getIndexType(), n);
  auto loop = scf::ForOp::create(b, loc, lower, upper, step);
  b.setInsertionPointToStart(loop.getBody());
  Value i = arith::IndexCastOp::create(b, loc, b.getI64Type(),
                                       loop.getInductionVar());
  IRMapping mapping;
  for (auto [k, arg] : llvm::enumerate(body.getArguments())) {
    Value addr = LLVM::GEPOp::create(b, loc, ptr, arg.getType(), inputPtrs[k],
                                     ArrayRef<LLVM::GEPArg>{i});
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
      .Case<tensor::ExpandShapeOp, tensor::CollapseShapeOp>([&](auto reshape) {
        buffer(reshape.getResult(), lookup(reshape.getSrc()));
        return success();
      })
      .Case([&](tensor::ExtractSliceOp slice) -> LogicalResult {
        auto src = cast<RankedTensorType>(slice.getSourceType());
        int64_t last = src.getRank() - 1;
        ArrayRef<int64_t> offsets = slice.getStaticOffsets();
        ArrayRef<int64_t> strides = slice.getStaticStrides();
        for (int64_t d = 0; d < last; ++d)
          if (offsets[d] != 0)
            return slice.emitError("only slices of the last dim lower to plan");
        if (llvm::any_of(strides, [](int64_t s) { return s != 1; }) ||
            ShapedType::isDynamic(offsets[last]) ||
            ShapedType::isDynamic(slice.getStaticSizes()[last]))
          return slice.emitError("only static unit-stride last-dim slices "
                                 "lower to plan");
        Value out = buffer(slice.getResult());
        launch(loc, "copy_columns", {lookup(slice.getSource())}, {out},
               {b.getNamedAttr("src_offset", b.getI64IntegerAttr(offsets[last])),
                b.getNamedAttr("dst_offset", b.getI64IntegerAttr(0))});
        return success();
      })
      .Case([&](tensor::ConcatOp concat) -> LogicalResult {
        auto type = cast<RankedTensorType>(concat.getType());
        if (static_cast<int64_t>(concat.getDim()) != type.getRank() - 1)
          return concat.emitError("only last-dim concatenations lower to plan");
        Value out = buffer(concat.getResult());
        int64_t offset = 0;
        for (Value input : concat.getInputs()) {
          launch(loc, "copy_columns", {lookup(input)}, {out},
                 {b.getNamedAttr("src_offset", b.getI64IntegerAttr(0)),
                  b.getNamedAttr("dst_offset", b.getI64IntegerAttr(offset))});
          offset += cast<RankedTensorType>(input.getType()).getShape().back();
        }
        return success();
      })
      .Case([&](arith::AddFOp add) {
        Value out = buffer(add.getResult());
        launch(loc, "add", args(add->getOperands()), {out}, {});
        return success();
      })
      .Case([&](arith::AddIOp add) -> LogicalResult {
        std::optional<int64_t> c = splatConstant(add.getRhs());
        if (!c)
          return add.emitError("only adding a constant splat lowers to plan");
        Value out = buffer(add.getResult());
        launch(loc, "add_scalar_i32", {lookup(add.getLhs())}, {out},
               {b.getNamedAttr("value", b.getI64IntegerAttr(*c))});
        return success();
      })
      .Case([&](lm::ElementwiseOp fused) {
        StringAttr symbol = outlineElementwise(fused);
        Value out = buffer(fused.getResult());
        launch(loc, "elementwise", args(fused.getInputs()), {out},
               {b.getNamedAttr("symbol", symbol)});
        return success();
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
      .Case([&](lm::ExpertMatmulOp matmul) {
        // Operands: input, weight, indices, [routing weights], [bias], and
        // for an FP8 weight its block scales last, with `weight_scale` set
        // and the blocks in `block_size`: the devices dequantise the weight
        // at load, as for fp8_matmul.
        SmallVector<NamedAttribute> attrs = kernelAttrs(matmul);
        auto dequant = matmul.getWeight().getDefiningOp<lm::Fp8DequantOp>();
        Value weight = lookup(dequant ? dequant.getWeight() : matmul.getWeight());
        SmallVector<Value> operands = {lookup(matmul.getInput()), weight,
                                       lookup(matmul.getIndices())};
        if (matmul.getRoutingWeights())
          operands.push_back(lookup(matmul.getRoutingWeights()));
        if (matmul.getBias())
          operands.push_back(lookup(matmul.getBias()));
        if (dequant) {
          operands.push_back(lookup(dequant.getScaleInv()));
          attrs.push_back(b.getNamedAttr("weight_scale", b.getBoolAttr(true)));
          attrs.push_back(
              b.getNamedAttr("block_size", dequant.getBlockSizeAttr()));
        }
        Value out = buffer(matmul.getResult());
        launch(loc, "expert_matmul", operands, {out}, attrs);
        return success();
      })
      .Case([&](lm::CacheWriteOp write) {
        // Caches are updated in place: the result is the cache itself.
        Value cache = lookup(write.getCache());
        SmallVector<Value> operands = {cache, lookup(write.getValues()),
                                       lookup(write.getSlots())};
        if (write.getSequences())
          operands.push_back(lookup(write.getSequences()));
        launch(loc, "cache_write", operands, {}, kernelAttrs(write));
        mapping.map(write.getResult(), cache);
        return success();
      })
      .Default([&](Operation *op) -> LogicalResult {
        if (!isa<lm::LmDialect>(op->getDialect()))
          return op->emitError("no lowering to plan for this op");
        // Generic lm op: operands (absent optionals skipped), results.
        SmallVector<Value> operands;
        for (Value v : op->getOperands())
          operands.push_back(lookup(v));
        SmallVector<Value> results;
        for (Value r : op->getResults())
          results.push_back(buffer(r));
        StringRef name = op->getName().stripDialect();
        launch(loc, name, operands, results, kernelAttrs(op));
        return success();
      });
}

LogicalResult Lowering::lowerFunction(func::FuncOp func) {
  mapping.clear();
  bufferCount = 0;
  provisionalArena = 0;
  poolLayers.clear();
  b.setInsertionPointToEnd(module.getBody());
  auto step = plan::StepOp::create(
      b, func.getLoc(), func.getSymName(), /*arena_size=*/0,
      b.getStrArrayAttr({"tokens"}), b.getDenseI64ArrayAttr({maxTokens}));
  Block *body = new Block();
  step.getBody().push_back(body);
  tokens = body->addArgument(b.getIndexType(), func.getLoc());
  b.setInsertionPointToStart(body);

  // Which arguments are caches, and their layouts (from their writers).
  for (BlockArgument arg : func.getArguments()) {
    lm::CacheWriteOp writer;
    for (Operation *user : arg.getUsers())
      if (auto w = dyn_cast<lm::CacheWriteOp>(user); w && w.getCache() == arg)
        writer = w;
    if (!writer) {
      Value input = buffer(arg);
      input.getDefiningOp()->setAttr("io", b.getStringAttr("input"));
      continue;
    }
    std::optional<lm::KVLayoutAttr> layout = writer.getLayout();
    if (!layout)
      return writer.emitError("caches need a layout (run lm-assign-kv-layout)");
    auto type = cast<RankedTensorType>(arg.getType());
    if (type.getRank() != 3 || !type.hasStaticShape())
      return writer.emitError("expects a static [batch, max_seq_len, width] "
                              "cache, got ")
             << type;
    int64_t page = layout->getPageSize();
    int64_t rows = type.getDimSize(0) * alignTo(type.getDimSize(1), page);
    plan::CachePoolOp &pool = pools[*layout];
    int64_t layer = poolLayers[*layout]++;
    if (!pool) {
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPoint(step);
      // Pools are named after their kind; a second layout of one kind (another
      // width, storage or page size) gets a numbered name.
      std::string name = lm::stringifyCacheKind(layout->getKind()).str();
      for (int suffix = 1; module.lookupSymbol(name); ++suffix)
        name = lm::stringifyCacheKind(layout->getKind()).str() + "_" +
               std::to_string(suffix);
      pool = plan::CachePoolOp::create(b, func.getLoc(), name, *layout,
                                       /*layers=*/1, rows);
      pool->setAttr("batch", b.getI64IntegerAttr(type.getDimSize(0)));
      pool->setAttr("max_seq_len", b.getI64IntegerAttr(type.getDimSize(1)));
    } else if (layer >= static_cast<int64_t>(pool.getLayers())) {
      pool.setLayers(layer + 1);
    }
    auto memref = MemRefType::get({rows, layout->getBytesPerToken()},
                                  b.getI8Type());
    mapping.map(arg, plan::CacheRefOp::create(b, func.getLoc(), memref,
                                              pool.getSymName(), layer)
                         .getResult());
  }

  for (Operation &op : func.getBody().front()) {
    if (auto ret = dyn_cast<func::ReturnOp>(op)) {
      for (auto [i, v] : llvm::enumerate(ret.getOperands())) {
        Value lowered = lookup(v);
        if (auto buf = lowered.getDefiningOp<plan::BufferOp>())
          buf->setAttr("io", b.getStringAttr("output"));
        else if (!lowered.getDefiningOp<plan::CacheRefOp>())
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
    Lowering lowering(getOperation(), maxTokens);
    if (failed(lowering.run()))
      signalPassFailure();
  }
};
} // namespace
