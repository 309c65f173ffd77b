//===- Scratch.h - Grow-only scratch memory for the CPU kernels -*- C++ -*-===//
//
// The CPU kernels take their temporaries (decoded cache rows, packed GEMM
// panels, routing candidates, expert groups) from scratch arenas instead of
// per-call vectors, so that once each shape has run, a step allocates
// nothing: an arena keeps its block across calls and only grows.
//
// Inside a ThreadPool loop the current arena is the one the pool keeps for
// the participant running the chunk; after every loop the pool grows all its
// arenas to the largest need any of them met, so which participant runs
// which chunk (not deterministic) cannot make a later step allocate.
// Elsewhere (a kernel's own temporaries, on the calling thread) the current
// arena is the calling thread's.
//
//===----------------------------------------------------------------------===//

#ifndef DAYBREAK_RUNTIME_DEVICES_CPU_SCRATCH_H
#define DAYBREAK_RUNTIME_DEVICES_CPU_SCRATCH_H

#include <cstddef>
#include <cstdint>
#include <memory>
#include <type_traits>
#include <vector>

namespace daybreak::cpu {

/// Memory handed out in stack order through ScratchFrames: one block that
/// only grows. A take that does not fit gets memory of its own (freed when
/// its frame ends) and raises highWater(); the block grows to the high
/// water when the outermost frame ends, so the same takes fit next time.
/// Not thread-safe: one thread uses an arena at a time.
class alignas(64) ScratchArena {
public:
  ScratchArena() = default;
  ScratchArena(const ScratchArena &) = delete;
  ScratchArena &operator=(const ScratchArena &) = delete;

  /// The most bytes that frames held at once, so far.
  size_t highWater() const { return peak; }
  size_t capacity() const { return blockSize; }
  /// Grows the block to at least `bytes` (allocating only if it grows).
  /// Only with no frame open: takes never move.
  void reserve(size_t bytes);

private:
  friend class ScratchFrame;
  /// `bytes` rounded up to 64, 64-byte aligned, uninitialised.
  std::byte *take(size_t bytes);

  std::unique_ptr<std::byte[]> storage;
  std::byte *block = nullptr; // storage, 64-byte aligned
  size_t blockSize = 0;
  size_t used = 0; // bytes of the block held by open frames
  size_t held = 0; // bytes held by open frames, in the block or not
  size_t peak = 0;
  int depth = 0;
  std::vector<std::unique_ptr<std::byte[]>> spills;
};

/// The arena of the code running now: inside a ThreadPool chunk, the
/// participant's; elsewhere, the calling thread's own.
ScratchArena &currentScratch();

/// Makes `arena` the current one of this thread until it goes out of scope
/// (ThreadPool binds each participant's arena around the chunks it runs).
class ScratchBinding {
public:
  explicit ScratchBinding(ScratchArena &arena);
  ~ScratchBinding();
  ScratchBinding(const ScratchBinding &) = delete;
  ScratchBinding &operator=(const ScratchBinding &) = delete;

private:
  ScratchArena *previous;
};

/// Takes scratch from an arena; everything taken is released when the frame
/// goes out of scope. Frames nest (a kernel's frame, then the GEMM's inside
/// it) and never alias: a nested frame takes above its parent's takes.
class ScratchFrame {
public:
  explicit ScratchFrame(ScratchArena &arena = currentScratch());
  ~ScratchFrame();
  ScratchFrame(const ScratchFrame &) = delete;
  ScratchFrame &operator=(const ScratchFrame &) = delete;

  /// Room for `count` values of T, 64-byte aligned and uninitialised:
  /// callers write what they later read. Size it from the shapes, not the
  /// data, so that a step of a shape already run allocates nothing.
  template <typename T> T *take(int64_t count) {
    static_assert(std::is_trivially_copyable_v<T> &&
                      std::is_trivially_destructible_v<T>,
                  "scratch holds plain values");
    static_assert(alignof(T) <= 64, "scratch is 64-byte aligned");
    size_t n = count > 0 ? static_cast<size_t>(count) : 0;
    return reinterpret_cast<T *>(arena.take(n * sizeof(T)));
  }

private:
  ScratchArena &arena;
  size_t used, held, spills;
};

} // namespace daybreak::cpu

#endif // DAYBREAK_RUNTIME_DEVICES_CPU_SCRATCH_H
