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
#include "runtime/core/CacheState.h"
#include "runtime/core/Communicator.h"
#include "runtime/core/PreparedLaunch.h"
#include "runtime/support/Status.h"

#include <cstdint>
#include <iosfwd>
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
  /// Debugging: after each launch runLaunches reads back the launch's
  /// floating-point arena results and reports, on `log`, those holding NaN
  /// or infinities (the first launch to produce one is usually the faulty
  /// kernel). Slow: every launch synchronises; a device that replays
  /// recorded graphs runs launch by launch instead. Null turns it off.
  void checkFiniteResults(std::ostream *log) { finiteLog_ = log; }
  bool checksFiniteResults() const { return finiteLog_ != nullptr; }
  /// The ranks a tensor-parallel plan's collectives meet (not owned; null,
  /// the default, for a plan of one rank).
  void setCommunicator(Communicator *ranks) { communicator_ = ranks; }
  Communicator *communicator() const { return communicator_; }
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
  /// the order of the device's other work. Both ranges must have pages
  /// (Model::reserve) and must not overlap.
  Status copyCacheRows(int cache, int64_t srcSeq, int64_t srcPos,
                       int64_t dstSeq, int64_t dstPos, int64_t rows);
  /// Reads `rows` rows (bytes_per_row bytes each) of cache `cache` at
  /// positions [pos, pos + rows) of slot `seq` into `out`.
  Status readCacheRows(int cache, int64_t seq, int64_t pos, int64_t rows,
                       void *out);
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

  //===--------------------------------------------------------------------===//
  // Caches and per-slot state (CacheState.h).
  //===--------------------------------------------------------------------===//

  /// The caches as this device allocated them (valid after prepare).
  const CachePlan &cachePlan() const { return caches_; }
  /// Sets page-table entries [first, first + count) to `entries`, in the
  /// order of the device's other work (a step staged after this call sees
  /// them). The session's PageAllocator owns the mapping.
  Status writePageTable(int64_t first, const int32_t *entries, int64_t count);
  /// Zeroes slot `seq` of every slot-state cache (a slot given to a new
  /// sequence).
  Status zeroSlotState(int64_t seq);
  /// Copies slot `seq` of slot-state cache `cache` (slot_bytes bytes) out
  /// of, or into, the device: a sequence's state saved and restored.
  Status readSlotState(int cache, int64_t seq, void *out);
  Status writeSlotState(int cache, int64_t seq, const void *in);

protected:
  /// Builds cachePlan() from `m` and the page table's host copy, every
  /// entry at the zero page; devices call it first in prepare().
  Status planCaches(const artifact::Manifest &m);
  /// The page table as the host last wrote it ([batch, pagesPerSeq]); the
  /// CPU device's kernels read it in place.
  const int32_t *hostPageTable() const { return pageTable_.data(); }
  /// Copies entries [first, first + count) of hostPageTable() to where
  /// the device's kernels read them.
  virtual Status uploadPageTable(int64_t first, int64_t count) = 0;
  /// Raw bytes of cache `cache`, at byte offsets of its allocation.
  virtual Status copyCacheBytes(int cache, uint64_t dst, uint64_t src,
                                uint64_t bytes) = 0;
  virtual Status readCacheBytes(int cache, uint64_t src, void *out,
                                uint64_t bytes) = 0;
  virtual Status writeCacheBytes(int cache, uint64_t dst, const void *in,
                                 uint64_t bytes) = 0;
  virtual Status zeroCacheBytes(int cache, uint64_t offset,
                                uint64_t bytes) = 0;

private:
  /// Calls `fn(offset, rows)` for runs of rows [pos, pos + rows) of slot
  /// `seq` that are contiguous in cache `cache`, after checking that the
  /// slot and rows exist and have pages.
  /// Byte offset of slot `seq` of slot-state cache `cache`, checked.
  StatusOr<uint64_t> slotOffset(int cache, int64_t seq) const;
  template <typename Fn>
  Status forEachRun(int cache, int64_t seq, int64_t pos, int64_t rows,
                    Fn &&fn) const;

  /// Reads the Buffer results of `l` (after it ran for `tokens` tokens)
  /// and reports non-finite values on finiteLog_.
  Status reportNonFinite(const PreparedLaunch &l, int64_t tokens);

  CachePlan caches_;
  std::vector<int32_t> pageTable_;
  std::ostream *finiteLog_ = nullptr;
  Communicator *communicator_ = nullptr;
};

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
