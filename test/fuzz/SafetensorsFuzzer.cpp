//===- SafetensorsFuzzer.cpp - Any bytes as a .safetensors file -----------===//
//
// Feeds the safetensors reader (runtime/safetensors) arbitrary bytes: the
// header length, the JSON header, each entry's dtype, shape and
// data_offsets, overlapping ranges, __metadata__. A file it accepts must
// keep TensorView's promise: every view lies inside the data area with the
// byte size its shape and dtype need, and is found by its name.
//
//===----------------------------------------------------------------------===//

#include "runtime/safetensors/Safetensors.h"

#include <cstddef>
#include <cstdint>

using namespace daybreak::safetensors;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  File file;
  if (!File::openBytes("fuzz.safetensors", data, size, file).ok)
    return 0;
  const uint8_t *dataArea = file.fileData() + file.headerBytes();
  const uint8_t *end = file.fileData() + file.fileSize();
  for (const TensorView &view : file.tensors()) {
    uint64_t bytes = dtypeSize(view.dtype);
    for (int64_t dim : view.shape)
      if (dim < 0 || __builtin_mul_overflow(bytes, uint64_t(dim), &bytes))
        __builtin_trap();
    if (bytes != view.byteSize || view.data < dataArea ||
        view.byteSize > uint64_t(end - view.data) ||
        file.find(view.name) != &view)
      __builtin_trap();
    // Read every byte, so that a view past the buffer is an ASan report.
    uint8_t sum = 0;
    for (size_t i = 0; i < view.byteSize; ++i)
      sum ^= view.data[i];
    volatile uint8_t sink = sum;
    (void)sink;
  }
  return 0;
}
