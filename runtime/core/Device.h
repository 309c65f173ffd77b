//===- Device.h - What a Model needs of a device ----------------*- C++ -*-===//
//
// A Model walks an artifact's steps; a Device owns what it allocated at load
// (weights as the device computes with them, the caches, the step arena) and
// executes prepared launches (PreparedLaunch.h) through its launcher table
// (Dispatch.h). Devices are used by one thread at a time. Also the helpers
// devices share to load weights.
//
//===----------------------------------------------------------------------===//

#ifndef DAYBREAK_RUNTIME_EXECUTOR_DEVICE_H
#define DAYBREAK_RUNTIME_EXECUTOR_DEVICE_H

#include "runtime/artifact/ArtifactFile.h"
#include "runtime/core/PreparedLaunch.h"
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
  /// The hardware, e.g. "NVIDIA H200"; name() where nothing more is known.
  virtual std::string hardware() const { return name(); }
  /// Loads the weights and allocates the caches and the arena, once, for
  /// the launches of `steps` (which must outlive the device); fails naming
  /// the first launch whose kernel the device does not implement.
  virtual Status prepare(const artifact::ArtifactFile &file,
                         const std::vector<PreparedStep> &steps) = 0;
  /// Copies step inputs into, and outputs out of, the arena.
  virtual Status writeArena(uint64_t offset, const void *data,
                            size_t bytes) = 0;
  virtual Status readArena(uint64_t offset, void *data, size_t bytes) = 0;
  /// Executes one prepared launch for `tokens` tokens.
  virtual Status launch(const PreparedLaunch &launch, int64_t tokens) = 0;
  /// Executes every launch of `step` in order (a device may replay a
  /// recorded graph instead). Errors name the failing launch.
  virtual Status runLaunches(const PreparedStep &step, int64_t tokens);
  /// Bytes the device holds for the model.
  virtual uint64_t residentBytes() const = 0;
  /// The same, measured by the device's own accounting (cuMemGetInfo on a
  /// GPU); 0 where the device has none.
  virtual uint64_t measuredResidentBytes() const { return 0; }

  //===--------------------------------------------------------------------===//
  // Measurement (daybreak-run bench) and the tests of what it relies on.
  //===--------------------------------------------------------------------===//

  /// Copies `rows` rows of cache `cache` from positions [srcPos, srcPos +
  /// rows) of sequence slot `srcSeq` to [dstPos, ...) of slot `dstSeq`, in
  /// the order of the device's other work. The ranges must not overlap.
  virtual Status copyCacheRows(int cache, int64_t srcSeq, int64_t srcPos,
                               int64_t dstSeq, int64_t dstPos,
                               int64_t rows) = 0;
  /// Reads `rows` rows (bytes_per_row bytes each) of cache `cache` at
  /// positions [pos, pos + rows) of slot `seq` into `out`.
  virtual Status readCacheRows(int cache, int64_t seq, int64_t pos,
                               int64_t rows, void *out) = 0;
  /// Runs `step` as runLaunches does and returns how long its launches took
  /// on the device, in milliseconds. The default times the host call, which
  /// is the device time of a synchronous device.
  virtual StatusOr<double> timeLaunches(const PreparedStep &step,
                                        int64_t tokens);
  /// Runs each launch of `step` on its own (no recorded graph) and returns
  /// the milliseconds of each, in launch order.
  virtual StatusOr<std::vector<double>>
  profileLaunches(const PreparedStep &step, int64_t tokens);
  /// Memory copy bandwidth in bytes moved (read + written) per second,
  /// measured with copies of `bytes` bytes (fewer when memory is short).
  virtual StatusOr<double> copyBandwidth(uint64_t bytes) = 0;
  /// The dense matrix-multiply rate (FLOP/s) the device's vendor library
  /// reaches, and in `how` what was measured; an error saying why where
  /// the device has no such probe.
  virtual StatusOr<double> matmulRate(std::string &how);
};

/// Byte offset of row `pos` of slot `seq` in cache `cache` of `m` under the
/// identity page table both devices build (a slot's pages are consecutive),
/// after checking that `rows` rows from there lie inside the slot.
StatusOr<uint64_t> identityCacheRowOffset(const artifact::Manifest &m,
                                          int cache, int64_t seq, int64_t pos,
                                          int64_t rows);

/// Bytes per element of an artifact dtype.
int64_t elementBytes(artifact::DType dtype);
/// The shape of buffer `b` at `tokens` tokens.
std::vector<int64_t> bufferShape(const artifact::Buffer &b, int64_t tokens);
/// The weights that fp8_matmul launches, and expert_matmul launches with a
/// weight_scale operand, scale: for each weight index, the index of its
/// block-scale weight and the block sizes (-1 when none).
struct Fp8Scaling {
  int64_t scale = -1;
  int64_t blockN = 0, blockK = 0;
};
StatusOr<std::vector<Fp8Scaling>>
fp8Scalings(const artifact::Manifest &m,
            const std::vector<PreparedStep> &steps);
/// Checks that every e4m3 weight a launch scales has fp32 block scales
/// covering its blocks, so kernels can index them unchecked.
Status checkWeightScales(const artifact::Manifest &m,
                         const std::vector<PreparedStep> &steps);

} // namespace daybreak::runtime

#endif // DAYBREAK_RUNTIME_EXECUTOR_DEVICE_H
