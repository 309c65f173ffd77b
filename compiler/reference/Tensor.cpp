//===- Tensor.cpp - Host tensors for the reference evaluator --------------===//
//
// Element-type helpers and the Tensor container. Rounding to the narrow
// formats goes through runtime/numerics so that the evaluator, the weight
// repacker and the runtime agree bit for bit.
//
//===----------------------------------------------------------------------===//

#include "compiler/reference/Tensor.h"

#include "runtime/numerics/Numerics.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <limits>

namespace daybreak::ref {

bool isFloatType(ElementType type) {
  switch (type) {
  case ElementType::F64:
  case ElementType::F32:
  case ElementType::F16:
  case ElementType::BF16:
  case ElementType::F8E4M3FN:
  case ElementType::F8E8M0FNU:
  case ElementType::F4E2M1FN:
    return true;
  case ElementType::I1:
  case ElementType::I8:
  case ElementType::UI8:
  case ElementType::I32:
  case ElementType::I64:
    return false;
  }
  return false;
}

const char *elementTypeName(ElementType type) {
  // MLIR's spelling of each type, so messages read like the IR.
  switch (type) {
  case ElementType::F64:
    return "f64";
  case ElementType::F32:
    return "f32";
  case ElementType::F16:
    return "f16";
  case ElementType::BF16:
    return "bf16";
  case ElementType::F8E4M3FN:
    return "f8E4M3FN";
  case ElementType::F8E8M0FNU:
    return "f8E8M0FNU";
  case ElementType::F4E2M1FN:
    return "f4E2M1FN";
  case ElementType::I1:
    return "i1";
  case ElementType::I8:
    return "i8";
  case ElementType::UI8:
    return "ui8";
  case ElementType::I32:
    return "i32";
  case ElementType::I64:
    return "i64";
  }
  return "?";
}

namespace {

/// E8M0 holds positive powers of two 2^-127 .. 2^127 only. Rounds to the
/// nearest one in linear distance, a tie (1.5 * 2^e) going up; zero, negative
/// values and NaN have no encoding and become NaN.
float roundToE8m0(float value) {
  if (!(value > 0.0f))
    return std::numeric_limits<float>::quiet_NaN();
  int exp;
  float fraction = std::frexp(value, &exp); // value = fraction * 2^exp
  int result = fraction >= 0.75f ? exp : exp - 1;
  result = std::min(std::max(result, -127), 127);
  return std::ldexp(1.0f, result);
}

} // namespace

float roundTo(ElementType type, float value) {
  switch (type) {
  case ElementType::F16:
    return numerics::roundToF16(value);
  case ElementType::BF16:
    return numerics::roundToBf16(value);
  case ElementType::F8E4M3FN:
    return numerics::roundToE4m3(value);
  case ElementType::F4E2M1FN:
    return numerics::roundToE2m1(value);
  case ElementType::F8E8M0FNU:
    return roundToE8m0(value);
  default:
    // F64 and F32 values are held as float already; integer types do not
    // round through this function.
    return value;
  }
}

namespace {

int64_t product(const std::vector<int64_t> &shape) {
  int64_t count = 1;
  for (int64_t extent : shape)
    count *= extent;
  return count;
}

} // namespace

Tensor Tensor::zeros(ElementType type, std::vector<int64_t> shape) {
  Tensor result;
  result.valid = true;
  result.elemType = type;
  result.dims = std::move(shape);
  if (isFloatType(type))
    result.floatData.assign(product(result.dims), 0.0f);
  else
    result.intData.assign(product(result.dims), 0);
  return result;
}

Tensor Tensor::fromFloats(std::vector<int64_t> shape, std::vector<float> values,
                          ElementType type) {
  assert(isFloatType(type) && "fromFloats needs a floating-point type");
  assert(product(shape) == static_cast<int64_t>(values.size()) &&
         "value count does not match the shape");
  Tensor result;
  result.valid = true;
  result.elemType = type;
  result.dims = std::move(shape);
  for (float &value : values)
    value = roundTo(type, value);
  result.floatData = std::move(values);
  return result;
}

Tensor Tensor::fromInts(std::vector<int64_t> shape, std::vector<int64_t> values,
                        ElementType type) {
  assert(!isFloatType(type) && "fromInts needs an integer type");
  assert(product(shape) == static_cast<int64_t>(values.size()) &&
         "value count does not match the shape");
  Tensor result;
  result.valid = true;
  result.elemType = type;
  result.dims = std::move(shape);
  result.intData = std::move(values);
  return result;
}

int64_t Tensor::numel() const { return valid ? product(dims) : 0; }

int64_t Tensor::offset(const std::vector<int64_t> &index) const {
  assert(index.size() == dims.size() && "index rank mismatch");
  int64_t linear = 0;
  for (size_t i = 0; i < dims.size(); ++i)
    linear = linear * dims[i] + index[i];
  return linear;
}

Tensor Tensor::reshaped(std::vector<int64_t> shape) const {
  assert(product(shape) == numel() && "reshape changes the element count");
  Tensor result = *this;
  result.dims = std::move(shape);
  return result;
}

Tensor Tensor::castTo(ElementType type) const {
  Tensor result = Tensor::zeros(type, dims);
  int64_t count = numel();
  for (int64_t i = 0; i < count; ++i) {
    if (result.isFloat())
      result.floatData[i] = roundTo(
          type, isFloat() ? floatData[i] : static_cast<float>(intData[i]));
    else if (isFloat())
      // Like MLIR's fptosi: truncate toward zero.
      result.intData[i] = static_cast<int64_t>(floatData[i]);
    else
      result.intData[i] = intData[i];
  }
  return result;
}

std::string Tensor::describe() const {
  if (!valid)
    return "<none>";
  std::string text = elementTypeName(elemType);
  text += "[";
  for (size_t i = 0; i < dims.size(); ++i) {
    if (i)
      text += "x";
    text += std::to_string(dims[i]);
  }
  text += "]";
  return text;
}

} // namespace daybreak::ref
