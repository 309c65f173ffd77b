//===- SafetensorsWriter.h - safetensors files for tests --------*- C++ -*-===//
//
// Writes safetensors files from raw tensor bytes, in any dtype and order, so
// tests can build checkpoints (and malformed ones) the runtime's F32 writer
// does not make.
//
//===----------------------------------------------------------------------===//

#ifndef DAYBREAK_TEST_UNIT_SAFETENSORSWRITER_H
#define DAYBREAK_TEST_UNIT_SAFETENSORSWRITER_H

#include "llvm/Support/JSON.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdint>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

namespace daybreak::testutil {

/// One tensor of a safetensors file written by `writeSafetensors`.
struct RawTensor {
  std::string name;
  std::string dtype;
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;
};

/// Writes the 8-byte little-endian header length, the JSON header and the
/// concatenated tensor bytes.
inline void writeSafetensors(const std::string &path,
                             const std::vector<RawTensor> &tensors) {
  llvm::json::Object header;
  std::string data;
  for (const RawTensor &tensor : tensors) {
    size_t begin = data.size();
    data.append(tensor.bytes.begin(), tensor.bytes.end());
    header[tensor.name] = llvm::json::Object{
        {"dtype", tensor.dtype},
        {"shape", llvm::json::Array(tensor.shape)},
        {"data_offsets", llvm::json::Array{begin, data.size()}}};
  }
  std::string headerText;
  llvm::raw_string_ostream(headerText) << llvm::json::Value(std::move(header));
  std::ofstream stream(path, std::ios::binary | std::ios::trunc);
  uint64_t size = headerText.size();
  for (int i = 0; i < 8; ++i)
    stream.put(char((size >> (8 * i)) & 0xff));
  stream << headerText << data;
}

/// Little-endian bytes of `values`, each `sizeof(T)` wide.
template <typename T> std::vector<uint8_t> bytesOf(std::vector<T> values) {
  std::vector<uint8_t> bytes(values.size() * sizeof(T));
  std::memcpy(bytes.data(), values.data(), bytes.size());
  return bytes;
}

} // namespace daybreak::testutil

#endif // DAYBREAK_TEST_UNIT_SAFETENSORSWRITER_H
