//===- PlanOps.cpp - Verifiers of the plan ops ----------------------------===//

#include "dialects/plan/PlanOps.h"
#include "runtime/abi/KernelAbi.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/OpImplementation.h"

using namespace mlir;
using namespace daybreak::plan;

/// Alignment of weights inside their section (vector loads).
static constexpr int64_t kWeightAlignment = 64;
/// Alignment of buffers inside the arena (coalesced GPU access).
static constexpr int64_t kBufferAlignment = 256;

/// Stored bytes of `count` elements of `type`: sub-byte types are packed.
static int64_t storedBytes(Type type, int64_t count) {
  int64_t bits = type.isIntOrFloat() ? type.getIntOrFloatBitWidth() : 8;
  return llvm::divideCeil(count * bits, 8);
}

int64_t WeightOp::getByteSize() {
  auto type = cast<RankedTensorType>(getType());
  return storedBytes(type.getElementType(), type.getNumElements());
}

LogicalResult WeightOp::verify() {
  auto type = cast<RankedTensorType>(getType());
  if (!type.hasStaticShape())
    return emitOpError("expects a static weight shape, got ") << type;
  if (getSectionAttr().getInt() < 0)
    return emitOpError("expects section >= 0, got ") << getSectionAttr().getInt();
  if (getOffsetAttr().getInt() < 0 || getOffsetAttr().getInt() % kWeightAlignment != 0)
    return emitOpError("expects a non-negative offset aligned to ")
           << kWeightAlignment << " bytes, got " << getOffsetAttr().getInt();
  return success();
}

int64_t CachePoolOp::getByteSize() {
  return getLayersAttr().getInt() * getMaxTokensAttr().getInt() * getLayout().getBytesPerToken();
}

LogicalResult CachePoolOp::verify() {
  if (getLayersAttr().getInt() <= 0)
    return emitOpError("expects layers > 0, got ") << getLayersAttr().getInt();
  int64_t page = getLayout().getPageSize();
  if (getMaxTokensAttr().getInt() <= 0 || getMaxTokensAttr().getInt() % page != 0)
    return emitOpError("expects max_tokens to be a positive multiple of the "
                       "page size ")
           << page << ", got " << getMaxTokensAttr().getInt();
  return success();
}

int64_t StatePoolOp::getSlotBytes() {
  int64_t values = 1;
  for (int64_t d : getSlotShape())
    values *= d;
  return values * getLayout().getStorageType().getIntOrFloatBitWidth() / 8;
}

int64_t StatePoolOp::getByteSize() {
  return getLayersAttr().getInt() * getBatchAttr().getInt() * getSlotBytes();
}

LogicalResult StatePoolOp::verify() {
  if (getLayersAttr().getInt() <= 0)
    return emitOpError("expects layers > 0, got ") << getLayersAttr().getInt();
  if (getBatchAttr().getInt() <= 0)
    return emitOpError("expects batch > 0, got ") << getBatchAttr().getInt();
  if (getSlotShape().empty() ||
      llvm::any_of(getSlotShape(), [](int64_t d) { return d <= 0; }))
    return emitOpError("expects a non-empty slot shape of positive sizes");
  if (getSlotBytes() % 4 != 0)
    return emitOpError("expects a slot of whole 4-byte words, got ")
           << getSlotBytes() << " bytes";
  return success();
}

LogicalResult KernelOp::verify() {
  if (getEntry().empty())
    return emitOpError("expects a non-empty entry symbol");
  if (getNumArgsAttr().getInt() < 0)
    return emitOpError("expects num_args >= 0, got ") << getNumArgsAttr().getInt();
  return success();
}

LogicalResult CodeImageOp::verify() {
  // The artifact stores PTX text; cubins are assembled from it when written.
  if (getFormat() != "ptx")
    return emitOpError("expects format \"ptx\", got \"") << getFormat() << "\"";
  if (getArch().empty())
    return emitOpError("expects a non-empty arch");
  if (getCode().empty())
    return emitOpError("expects non-empty code");
  for (NamedAttribute entry : getInstantiations())
    if (!isa<StringAttr>(entry.getValue()) ||
        cast<StringAttr>(entry.getValue()).empty())
      return emitOpError("expects each instantiation to name its entry "
                         "point, got ")
             << entry.getValue() << " for '" << entry.getName().getValue()
             << "'";
  return success();
}

LogicalResult StepOp::verify() {
  if (getArenaSizeAttr().getInt() < 0)
    return emitOpError("expects arena_size >= 0, got ") << getArenaSizeAttr().getInt();
  Block &body = getBody().front();
  if (body.getNumArguments() != getSizeNames().size())
    return emitOpError("expects one name per size argument: ")
           << body.getNumArguments() << " arguments, "
           << getSizeNames().size() << " names";
  if (std::optional<ArrayRef<int64_t>> maxSizes = getMaxSizes()) {
    if (maxSizes->size() != getSizeNames().size())
      return emitOpError("expects one max size per size name, got ")
             << maxSizes->size();
    if (llvm::any_of(*maxSizes, [](int64_t s) { return s <= 0; }))
      return emitOpError("expects positive max sizes");
  }
  for (BlockArgument arg : body.getArguments())
    if (!arg.getType().isIndex())
      return emitOpError("expects index size arguments, got ")
             << arg.getType();
  return success();
}

LogicalResult BufferOp::verify() {
  auto type = cast<MemRefType>(getType());
  if (getSizes().size() != static_cast<size_t>(type.getNumDynamicDims()))
    return emitOpError("expects one size per dynamic dim of ")
           << type << ", got " << getSizes().size();
  if (getOffsetAttr().getInt() < 0 || getOffsetAttr().getInt() % kBufferAlignment != 0)
    return emitOpError("expects a non-negative offset aligned to ")
           << kBufferAlignment << " bytes, got " << getOffsetAttr().getInt();
  if (!type.getElementType().isIntOrFloat())
    return emitOpError("expects integer or float elements, got ")
           << type.getElementType();
  auto step = (*this)->getParentOfType<StepOp>();
  if (!step)
    return emitOpError("expects to be inside a plan.step");
  if (type.hasStaticShape()) {
    int64_t bytes = storedBytes(type.getElementType(), type.getNumElements());
    int64_t offset = getOffsetAttr().getInt();
    int64_t arena = step.getArenaSizeAttr().getInt();
    // offset >= 0 here, so arena - offset cannot overflow.
    if (bytes > arena - offset)
      return emitOpError("expects the buffer of ")
             << bytes << " bytes at offset " << offset
             << " inside the arena of " << arena << " bytes";
  }
  return success();
}

LogicalResult
WeightRefOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  auto weight =
      symbolTable.lookupNearestSymbolFrom<WeightOp>(*this, getWeightAttr());
  if (!weight)
    return emitOpError("expects '")
           << getWeight() << "' to name a plan.weight";
  auto declared = cast<RankedTensorType>(weight.getType());
  auto type = cast<MemRefType>(getType());
  if (declared.getShape() != type.getShape() ||
      declared.getElementType() != type.getElementType())
    return emitOpError("expects the view type to match the weight ")
           << declared << ", got " << type;
  return success();
}

LogicalResult CacheRefOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  auto type = cast<MemRefType>(getType());
  if (auto state = symbolTable.lookupNearestSymbolFrom<StatePoolOp>(
          *this, getPoolAttr())) {
    if (getLayerAttr().getInt() < 0 ||
        getLayerAttr().getInt() >= state.getLayersAttr().getInt())
      return emitOpError("expects a layer in [0, ")
             << state.getLayersAttr().getInt() << "), got "
             << getLayerAttr().getInt();
    int64_t batch = state.getBatchAttr().getInt();
    if (type.getDimSize(0) != batch ||
        type.getDimSize(1) != state.getSlotBytes())
      return emitOpError("expects memref<")
             << batch << "x" << state.getSlotBytes()
             << "xi8> for the state pool's layer, got " << type;
    return success();
  }
  auto pool =
      symbolTable.lookupNearestSymbolFrom<CachePoolOp>(*this, getPoolAttr());
  if (!pool)
    return emitOpError("expects '")
           << getPool() << "' to name a plan.cache_pool or plan.state_pool";
  if (getLayerAttr().getInt() < 0 || getLayerAttr().getInt() >= pool.getLayersAttr().getInt())
    return emitOpError("expects a layer in [0, ")
           << pool.getLayersAttr().getInt() << "), got " << getLayerAttr().getInt();
  int64_t rows = pool.getMaxTokensAttr().getInt();
  int64_t rowBytes = pool.getLayout().getBytesPerToken();
  if (type.getDimSize(0) != rows || type.getDimSize(1) != rowBytes)
    return emitOpError("expects memref<")
           << rows << "x" << rowBytes << "xi8> for the pool's layer, got "
           << type;
  return success();
}

LogicalResult LaunchOp::verify() {
  AffineMap grid = getGrid();
  if (grid.getNumDims() != 0 || grid.getNumResults() != 3)
    return emitOpError("expects a grid map with no dims and three results, "
                       "got ")
           << getGridAttr();
  if (grid.getNumSymbols() != static_cast<unsigned>(getSizes().size()))
    return emitOpError("expects one grid symbol per size operand: ")
           << grid.getNumSymbols() << " symbols, " << getSizes().size()
           << " sizes";
  ArrayRef<int64_t> block = getBlock();
  if (block.size() != 3 ||
      llvm::any_of(block, [](int64_t b) { return b <= 0 || b > 1024; }))
    return emitOpError("expects a block of three extents in [1, 1024]");
  int64_t threads = block[0] * block[1] * block[2];
  if (threads > 1024)
    return emitOpError("expects at most 1024 threads per block, got ")
           << threads;
  if (getSmemAttr().getInt() < 0)
    return emitOpError("expects smem >= 0, got ") << getSmemAttr().getInt();
  return success();
}

MemRefType ColumnViewOp::viewType(MemRefType source, int64_t column,
                                  int64_t columns) {
  SmallVector<int64_t> shape(source.getShape());
  shape.back() = columns;
  // Row-major strides of the source: static while only the leading dim is
  // dynamic.
  SmallVector<int64_t> strides(shape.size(), 1);
  for (int64_t d = int64_t(shape.size()) - 2; d >= 0; --d) {
    int64_t inner = source.getDimSize(d + 1);
    strides[d] =
        ShapedType::isDynamic(inner) || ShapedType::isDynamic(strides[d + 1])
            ? ShapedType::kDynamic
            : strides[d + 1] * inner;
  }
  return MemRefType::get(
      shape, source.getElementType(),
      StridedLayoutAttr::get(source.getContext(), column, strides));
}

LogicalResult ColumnViewOp::verify() {
  auto source = cast<MemRefType>(getSource().getType());
  auto result = cast<MemRefType>(getType());
  if (!getSource().getDefiningOp<BufferOp>() ||
      !source.getLayout().isIdentity())
    return emitOpError("expects a plan.buffer's dense rows as its source");
  if (source.getRank() < 1 || source.isDynamicDim(source.getRank() - 1))
    return emitOpError("expects a source with a static last dim, got ")
           << source;
  int64_t column = getColumn();
  int64_t columns = result.getRank() == source.getRank()
                        ? result.getShape().back()
                        : ShapedType::kDynamic;
  if (column < 0 || ShapedType::isDynamic(columns) || columns <= 0 ||
      column + columns > source.getShape().back())
    return emitOpError("expects columns [")
           << column << ", " << column + columns
           << ") inside the source's rows of " << source.getShape().back();
  MemRefType expected = viewType(source, column, columns);
  if (result != expected)
    return emitOpError("expects the view type ")
           << expected << ", got " << result;
  return success();
}

/// Whether `attr` has the kernel ABI's parameter type `type`.
static bool hasParamType(Attribute attr, daybreak::abi::ParamType type) {
  using daybreak::abi::ParamType;
  switch (type) {
  case ParamType::Int:
    return isa<IntegerAttr>(attr) && !isa<BoolAttr>(attr);
  case ParamType::Float:
    return isa<FloatAttr>(attr);
  case ParamType::Bool:
    return isa<BoolAttr, UnitAttr>(attr);
  case ParamType::String:
  case ParamType::Enum:
    return isa<StringAttr>(attr);
  case ParamType::Ints:
    return isa<DenseI64ArrayAttr, DenseI32ArrayAttr>(attr);
  }
  return false;
}

LogicalResult daybreak::plan::verifyKernelAbi(LaunchOp launch,
                                              StringRef entry) {
  namespace abi = daybreak::abi;
  const abi::KernelDecl *decl = abi::findKernel(entry);
  if (!decl)
    return launch.emitOpError("launches '")
           << entry << "', which no kernel declaration names "
           << "(runtime/abi/Kernels.def)";
  auto numResults = launch->getAttrOfType<IntegerAttr>(kNumResultsAttr);
  if (!numResults || numResults.getInt() != decl->numResults())
    return launch.emitOpError("expects '")
           << kNumResultsAttr << "' = " << decl->numResults() << " for '"
           << entry << "'";
  // Absent optional operands, by declared position.
  unsigned numOperands = decl->numOperands();
  ArrayRef<int64_t> absent;
  if (auto attr = launch->getAttrOfType<DenseI64ArrayAttr>(kAbsentAttr))
    absent = attr.asArrayRef();
  for (auto [i, slot] : llvm::enumerate(absent))
    if (slot < 0 || slot >= numOperands ||
        decl->operands[slot].kind != abi::ArgKind::Optional ||
        (i > 0 && slot <= absent[i - 1]))
      return launch.emitOpError("expects '")
             << kAbsentAttr << "' to list optional operands of '" << entry
             << "' in order; " << slot << " is not one";
  int64_t present = numOperands - absent.size();
  int64_t args = launch.getArgs().size() - decl->numResults();
  if (decl->isVariadic() ? args < present - 1 : args != present)
    return launch.emitOpError("expects ")
           << (decl->isVariadic() ? "at least " : "")
           << (decl->isVariadic() ? present - 1 : present) << " operands for '"
           << entry << "', got " << args;
  // Every parameter declared and of its type, every required one present.
  for (NamedAttribute attr : launch->getDiscardableAttrs()) {
    StringRef name = attr.getName();
    if (isLaunchLevelAttr(name))
      continue;
    int index = decl->paramIndex(name);
    if (index < 0)
      return launch.emitOpError("passes '")
             << name << "', which is not a parameter of '" << entry << "'";
    const abi::ParamDecl &param = decl->params[index];
    if (!hasParamType(attr.getValue(), param.type))
      return launch.emitOpError("expects parameter '")
             << name << "' of '" << entry << "' to be "
             << abi::paramTypeName(param.type) << ", got " << attr.getValue();
    if (param.type == abi::ParamType::Enum &&
        decl->enumIndex(index, cast<StringAttr>(attr.getValue()).getValue()) <
            0)
      return launch.emitOpError("expects parameter '")
             << name << "' of '" << entry << "' to be one of "
             << param.choices << ", got " << attr.getValue();
  }
  for (unsigned i = 0, e = decl->numParams(); i < e; ++i)
    if (decl->params[i].presence == abi::Presence::Required &&
        !launch->hasAttr(decl->params[i].name))
      return launch.emitOpError("lacks parameter '")
             << decl->params[i].name << "' of '" << entry << "'";
  // Column views only in the slots that take them.
  unsigned slot = 0;
  for (auto [i, arg] : llvm::enumerate(launch.getArgs())) {
    const abi::ArgDecl *declared;
    if (int64_t(i) < args) {
      while (llvm::is_contained(absent, int64_t(slot)))
        ++slot;
      declared = &decl->operands[std::min(slot++, numOperands - 1)];
    } else {
      declared = &decl->results[i - args];
    }
    if (arg.getDefiningOp<ColumnViewOp>() && !declared->columnView)
      return launch.emitOpError("passes a column view as '")
             << declared->role << "' of '" << entry
             << "', which takes dense rows only";
  }
  return success();
}

mlir::ModuleOp daybreak::plan::findGeneratedKernels(mlir::ModuleOp module) {
  for (auto nested : module.getOps<ModuleOp>())
    if (nested.getSymName() == kGeneratedKernelsModule)
      return nested;
  return {};
}

LogicalResult LaunchOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  auto kernel =
      symbolTable.lookupNearestSymbolFrom<KernelOp>(*this, getKernelAttr());
  if (!kernel)
    return emitOpError("expects '") << getKernel() << "' to name a plan.kernel";
  if (kernel.getNumArgsAttr().getInt() != static_cast<int64_t>(getArgs().size()))
    return emitOpError("expects ")
           << kernel.getNumArgsAttr().getInt() << " arguments for '" << getKernel()
           << "', got " << getArgs().size();
  return verifyKernelAbi(*this, kernel.getEntry());
}

LogicalResult HostOp::verify() {
  size_t expected = getKind() == HostStepKind::Copy ? 2 : 1;
  if (getArgs().size() != expected)
    return emitOpError("expects ")
           << expected << " buffer operand(s) for "
           << stringifyHostStepKind(getKind()) << ", got " << getArgs().size();
  if (getKind() == HostStepKind::Copy &&
      getArgs()[0].getType() != getArgs()[1].getType())
    return emitOpError("expects a copy between buffers of one type, got ")
           << getArgs()[0].getType() << " and " << getArgs()[1].getType();
  return success();
}

#define GET_OP_CLASSES
#include "dialects/plan/PlanOps.cpp.inc"
