//===- Safetensors.h - Validating reader for .safetensors files -*- C++ -*-===//
//
// Maps a safetensors checkpoint into memory and checks every header entry
// (dtype, shape, byte range) before handing out views into the mapping, so the
// rest of the runtime can trust a TensorView's size and bounds. Depends only on
// the C++ standard library, POSIX mmap and nlohmann-json.
//
//===----------------------------------------------------------------------===//

#ifndef DAYBREAK_RUNTIME_SAFETENSORS_SAFETENSORS_H
#define DAYBREAK_RUNTIME_SAFETENSORS_SAFETENSORS_H

#include "runtime/support/MappedFile.h"

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace daybreak::safetensors {

/// Outcome of an operation: `ok`, or a message naming the file, the tensor
/// and the offending values.
struct Status {
  bool ok = true;
  std::string message;

  static Status success() { return {}; }
  static Status error(std::string message) {
    return {false, std::move(message)};
  }
};

/// The element types a safetensors header may name.
enum class DType { BF16, F16, F32, F64, F8E4M3, I8, U8, I16, I32, I64, Bool };

/// Bytes per element.
size_t dtypeSize(DType dtype);
/// The safetensors spelling ("BF16", "F8_E4M3", "BOOL", ...).
std::string_view dtypeName(DType dtype);
/// Parses a safetensors dtype spelling; std::nullopt if unknown.
std::optional<DType> parseDType(std::string_view name);

/// A tensor inside a mapped File. `data` points into the File's mapping and
/// lives as long as that File (moving the File keeps it valid).
struct TensorView {
  std::string name;
  DType dtype;
  std::vector<int64_t> shape;
  const uint8_t *data;
  size_t byteSize;
};

/// A read-only memory mapping of one safetensors file plus its validated
/// header. Owns the mapping (not the bytes given to openBytes); move-only.
/// Immutable after `open`, so concurrent reads from several threads are safe.
class File {
public:
  File() = default;
  // Moving keeps the mapping, so tensor views stay valid.
  File(File &&other) noexcept = default;
  File &operator=(File &&other) noexcept = default;
  File(const File &) = delete;
  File &operator=(const File &) = delete;

  /// Maps and validates `path`; on success replaces `out`. Never aborts on a
  /// malformed file: every problem comes back as a Status message.
  static Status open(const std::string &path, File &out);
  /// Validates the `size` bytes at `data` as open() validates a mapped
  /// file, `name` standing for its path in messages; on success replaces
  /// `out`, whose views then point into `data`, which the caller keeps
  /// alive and unchanged while `out` lives (fuzzing, bytes from elsewhere).
  static Status openBytes(const std::string &name, const uint8_t *data,
                          size_t size, File &out);

  /// The tensor called `name`, or nullptr.
  const TensorView *find(std::string_view name) const;
  /// All tensors, ordered by name.
  const std::vector<TensorView> &tensors() const { return tensorList; }
  /// The string pairs of `__metadata__` (empty if absent).
  const std::map<std::string, std::string> &metadata() const {
    return metadataMap;
  }
  /// The whole mapped file (header included), and its size.
  const uint8_t *fileData() const { return bytes; }
  uint64_t fileSize() const { return size; }
  /// Bytes before the tensor data: the 8-byte length and the JSON header.
  uint64_t headerBytes() const { return dataStart; }

private:
  /// Checks the header of `bytes` and fills the tensors and metadata.
  Status parse(const std::string &path);

  MappedFile mapping;
  /// The file's bytes: `mapping`'s, or those openBytes was given.
  const uint8_t *bytes = nullptr;
  uint64_t size = 0;
  uint64_t dataStart = 0;
  std::vector<TensorView> tensorList;
  std::map<std::string, size_t, std::less<>> indexByName;
  std::map<std::string, std::string> metadataMap;
};

/// A float32 tensor to write.
struct F32Tensor {
  std::string name;
  std::vector<int64_t> shape;
  std::vector<float> values;
};

/// Writes F32 tensors as a safetensors file (names sorted, as the format's
/// tools do); errors name the path.
Status writeF32File(const std::string &path,
                    const std::vector<F32Tensor> &tensors);

} // namespace daybreak::safetensors

#endif // DAYBREAK_RUNTIME_SAFETENSORS_SAFETENSORS_H
