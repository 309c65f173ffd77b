//===- LmAttrs.cpp - Enums and attributes of the lm dialect ---------------===//

#include "dialects/lm/LmAttrs.h"
#include "dialects/lm/LmDialect.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"
#include "llvm/ADT/TypeSwitch.h"

#include <cmath>

using namespace mlir;
using namespace daybreak::lm;

#include "dialects/lm/LmEnums.cpp.inc"

#define GET_ATTRDEF_CLASSES
#include "dialects/lm/LmAttrs.cpp.inc"

void LmDialect::registerAttributes() {
  addAttributes<
#define GET_ATTRDEF_LIST
#include "dialects/lm/LmAttrs.cpp.inc"
      >();
}

LogicalResult
YarnAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                 FloatAttr factor, int64_t originalMaxPositions,
                 FloatAttr betaFast, FloatAttr betaSlow,
                 FloatAttr attentionFactor, BoolAttr truncate) {
  if (!(factor.getValueAsDouble() >= 1.0) ||
      !std::isfinite(factor.getValueAsDouble()))
    return emitError() << "expects a YaRN factor >= 1, got "
                       << factor.getValueAsDouble();
  if (originalMaxPositions <= 0)
    return emitError() << "expects original_max_positions > 0, got "
                       << originalMaxPositions;
  if (!(betaFast.getValueAsDouble() > betaSlow.getValueAsDouble()) ||
      betaSlow.getValueAsDouble() <= 0.0)
    return emitError() << "expects beta_fast > beta_slow > 0, got "
                       << betaFast.getValueAsDouble() << " and "
                       << betaSlow.getValueAsDouble();
  if (!(attentionFactor.getValueAsDouble() > 0.0) ||
      !std::isfinite(attentionFactor.getValueAsDouble()))
    return emitError() << "expects attention_factor > 0, got "
                       << attentionFactor.getValueAsDouble();
  return success();
}

/// Storage width in bytes of the element types a cache may use.
static std::optional<int64_t> storageBytes(Type type) {
  if (!type.isIntOrFloat() || type.getIntOrFloatBitWidth() % 8 != 0)
    return std::nullopt;
  return type.getIntOrFloatBitWidth() / 8;
}

LogicalResult KVLayoutAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                   CacheKind kind, int64_t pageSize,
                                   int64_t featureDim, Type storageType,
                                   int64_t scaleBlock, int64_t tailDim,
                                   Type tailType, int64_t window) {
  if (window < 0)
    return emitError() << "expects window >= 0 (0: the whole sequence), got "
                       << window;
  if (pageSize <= 0)
    return emitError() << "expects page_size > 0, got " << pageSize;
  if (featureDim <= 0)
    return emitError() << "expects feature_dim > 0, got " << featureDim;
  if (tailDim < 0 || tailDim >= featureDim)
    return emitError() << "expects 0 <= tail_dim < feature_dim (" << featureDim
                       << "), got " << tailDim;
  if (!storageBytes(storageType) || !storageBytes(tailType))
    return emitError() << "expects whole-byte storage and tail types, got "
                       << storageType << " and " << tailType;
  int64_t quantized = featureDim - tailDim;
  if (scaleBlock < 0 || (scaleBlock > 0 && quantized % scaleBlock != 0))
    return emitError() << "expects scale_block to be 0 or to divide the "
                       << quantized << " stored values, got " << scaleBlock;
  return success();
}

int64_t KVLayoutAttr::getBytesPerToken() const {
  int64_t quantized = getFeatureDim() - getTailDim();
  int64_t bytes = quantized * *storageBytes(getStorageType()) +
                  getTailDim() * *storageBytes(getTailType());
  if (getScaleBlock() > 0)
    bytes += quantized / getScaleBlock() * 4; // one f32 scale per block
  return bytes;
}

LogicalResult
StateLayoutAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                        Type storageType, BoolAttr keyMajor) {
  if (!isa<Float32Type, BFloat16Type, Float16Type>(storageType))
    return emitError() << "expects an f32, bf16 or f16 state, got "
                       << storageType;
  return success();
}

LogicalResult ShardAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                int64_t dim, int64_t offset, int64_t size) {
  if (dim < 0 || offset < 0 || size < 1)
    return emitError() << "expects a dim and offset >= 0 and a size >= 1, got "
                          "dim = "
                       << dim << ", offset = " << offset << ", size = " << size;
  return success();
}
