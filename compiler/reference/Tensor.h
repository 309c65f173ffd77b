//===- Tensor.h - Host tensors for the reference evaluator ------*- C++ -*-===//
//
// A dense, row-major host tensor that owns its storage. Floating-point
// element types keep their values as `float` (each value exactly
// representable in the element type); integer element types keep `int64_t`.
// That makes every kernel of the reference evaluator a plain loop over
// floats or integers regardless of the checkpoint's storage format. Not
// thread-safe for concurrent mutation; const access is safe.
//
//===----------------------------------------------------------------------===//

#ifndef DAYBREAK_COMPILER_REFERENCE_TENSOR_H
#define DAYBREAK_COMPILER_REFERENCE_TENSOR_H

#include <cstdint>
#include <string>
#include <vector>

namespace daybreak::ref {

enum class ElementType {
  F64,
  F32,
  F16,
  BF16,
  F8E4M3FN,
  F8E8M0FNU,
  F4E2M1FN,
  I1,
  I8,
  UI8,
  I32,
  I64,
};

bool isFloatType(ElementType type);
const char *elementTypeName(ElementType type);
/// Rounds `value` to the nearest value of a floating-point element type.
float roundTo(ElementType type, float value);

class Tensor {
public:
  Tensor() = default;

  /// A zero-filled tensor.
  static Tensor zeros(ElementType type, std::vector<int64_t> shape);
  /// Float tensor from values; the values are rounded to `type`.
  static Tensor fromFloats(std::vector<int64_t> shape, std::vector<float> values,
                           ElementType type = ElementType::F32);
  /// Integer tensor from values.
  static Tensor fromInts(std::vector<int64_t> shape,
                         std::vector<int64_t> values,
                         ElementType type = ElementType::I32);

  ElementType type() const { return elemType; }
  bool isFloat() const { return isFloatType(elemType); }
  /// An empty tensor (default constructed) stands for an absent optional
  /// operand.
  bool empty() const { return !valid; }

  const std::vector<int64_t> &shape() const { return dims; }
  int64_t rank() const { return static_cast<int64_t>(dims.size()); }
  int64_t dim(int64_t i) const { return dims[i < 0 ? i + rank() : i]; }
  int64_t numel() const;

  std::vector<float> &floats() { return floatData; }
  const std::vector<float> &floats() const { return floatData; }
  std::vector<int64_t> &ints() { return intData; }
  const std::vector<int64_t> &ints() const { return intData; }

  /// Row-major linear offset of a full index.
  int64_t offset(const std::vector<int64_t> &index) const;

  /// Reinterprets the data with a new shape of the same element count.
  Tensor reshaped(std::vector<int64_t> shape) const;
  /// Rounds every value to `type` (float types only) and retags the tensor.
  Tensor castTo(ElementType type) const;

  /// "f32[2x3]" style description for messages.
  std::string describe() const;

private:
  bool valid = false;
  ElementType elemType = ElementType::F32;
  std::vector<int64_t> dims;
  std::vector<float> floatData;
  std::vector<int64_t> intData;
};

} // namespace daybreak::ref

#endif // DAYBREAK_COMPILER_REFERENCE_TENSOR_H
