//===- Device.h - What a Model needs of a device ----------------*- C++ -*-===//
//
// A Model walks an artifact's steps; a Device owns what it allocated at load
// (weights as the device computes with them, the caches, the step arena) and
// executes launches by kernel name. Devices are used by one thread at a time.
// Also the helpers devices share to read launches: attributes, operand
// shapes, stored dtypes.
//
//===----------------------------------------------------------------------===//

#ifndef DAYBREAK_RUNTIME_EXECUTOR_DEVICE_H
#define DAYBREAK_RUNTIME_EXECUTOR_DEVICE_H

#include "runtime/artifact/ArtifactFile.h"
#include "runtime/support/Status.h"

#include <cstdint>
#include <string>
#include <vector>

namespace daybreak::runtime {

class Device {
public:
  virtual ~Device() = default;
  /// "cpu", "cuda:0".
  virtual std::string name() const = 0;
  /// Loads the weights and allocates the caches and the arena, once.
  virtual Status prepare(const artifact::ArtifactFile &file) = 0;
  /// Copies step inputs into, and outputs out of, the arena.
  virtual Status writeArena(uint64_t offset, const void *data,
                            size_t bytes) = 0;
  virtual Status readArena(uint64_t offset, void *data, size_t bytes) = 0;
  /// Executes one launch of `step` for `tokens` tokens.
  virtual Status launch(const artifact::Step &step,
                        const artifact::Launch &launch, int64_t tokens) = 0;
  /// Executes every launch of `step` in order (a device may replay a
  /// recorded graph instead). Errors name the failing kernel.
  virtual Status runLaunches(const artifact::Step &step, int64_t tokens);
  /// Bytes the device holds for the model.
  virtual uint64_t residentBytes() const = 0;
  /// The same, measured by the device's own accounting (cuMemGetInfo on a
  /// GPU); 0 where the device has none.
  virtual uint64_t measuredResidentBytes() const { return 0; }
};

/// Bytes per element of an artifact dtype.
int64_t elementBytes(artifact::DType dtype);
/// Decodes `count` stored values of `dtype` to fp32; false for an
/// unsupported dtype.
bool decodeToF32(artifact::DType dtype, const uint8_t *src, int64_t count,
                 float *out);
/// A launch attribute as an integer / float, or `fallback` when absent.
int64_t attrInt(const artifact::Launch &l, const std::string &name,
                int64_t fallback);
double attrFloat(const artifact::Launch &l, const std::string &name,
                 double fallback);
const artifact::Attr *findAttr(const artifact::Launch &l,
                               const std::string &name);
/// The shape of buffer `b` at `tokens` tokens.
std::vector<int64_t> bufferShape(const artifact::Buffer &b, int64_t tokens);
/// The weights that fp8_matmul launches scale: for each weight index, the
/// index of its block-scale weight and the block sizes (-1 when none).
struct Fp8Scaling {
  int64_t scale = -1;
  int64_t blockN = 0, blockK = 0;
};
StatusOr<std::vector<Fp8Scaling>> fp8Scalings(const artifact::Manifest &m);
/// Every weight decoded to fp32, FP8 matmul weights multiplied by their
/// block scales: what the fp32 kernels of both devices compute with.
StatusOr<std::vector<std::vector<float>>>
loadWeightsF32(const artifact::ArtifactFile &file);

} // namespace daybreak::runtime

#endif // DAYBREAK_RUNTIME_EXECUTOR_DEVICE_H
