//===- Scratch.cpp - Grow-only scratch memory for the CPU kernels ---------===//

#include "runtime/devices/cpu/Scratch.h"

#include <algorithm>

namespace daybreak::cpu {

namespace {

constexpr size_t kAlign = 64;

size_t roundUp(size_t bytes) { return (bytes + kAlign - 1) / kAlign * kAlign; }

/// A block of at least `bytes` at a 64-byte boundary inside `storage`.
/// Plain `new[]` plus alignment by hand: the allocation counters of the
/// step tests see it (they count the unaligned operator new).
std::byte *allocateAligned(std::unique_ptr<std::byte[]> &storage,
                           size_t bytes) {
  storage.reset(new std::byte[bytes + kAlign - 1]);
  uintptr_t address = reinterpret_cast<uintptr_t>(storage.get());
  return storage.get() + (kAlign - address % kAlign) % kAlign;
}

/// The arena bound by a ScratchBinding (a pool participant's), if any.
thread_local ScratchArena *bound = nullptr;

} // namespace

void ScratchArena::reserve(size_t bytes) {
  // With a frame open the block cannot move; the outermost frame's end
  // grows it to the high water instead.
  if (bytes <= blockSize || depth > 0)
    return;
  size_t size = roundUp(bytes);
  storage.reset();
  block = allocateAligned(storage, size);
  blockSize = size;
}

std::byte *ScratchArena::take(size_t bytes) {
  if (bytes == 0) {
    alignas(kAlign) static std::byte none[kAlign];
    return none;
  }
  size_t size = roundUp(bytes);
  held += size;
  peak = std::max(peak, held);
  // Frames release in stack order, so the block's part of the open takes
  // never exceeds all of them: once the block holds the high water, every
  // take of the same sequence fits.
  if (used + size <= blockSize) {
    std::byte *p = block + used;
    used += size;
    return p;
  }
  std::unique_ptr<std::byte[]> &spill = spills.emplace_back();
  return allocateAligned(spill, size);
}

ScratchArena &currentScratch() {
  if (bound)
    return *bound;
  thread_local ScratchArena own;
  return own;
}

ScratchBinding::ScratchBinding(ScratchArena &arena) : previous(bound) {
  bound = &arena;
}

ScratchBinding::~ScratchBinding() { bound = previous; }

ScratchFrame::ScratchFrame(ScratchArena &arena)
    : arena(arena), used(arena.used), held(arena.held),
      spills(arena.spills.size()) {
  ++arena.depth;
}

ScratchFrame::~ScratchFrame() {
  arena.used = used;
  arena.held = held;
  arena.spills.erase(arena.spills.begin() + spills, arena.spills.end());
  if (--arena.depth == 0 && arena.peak > arena.blockSize)
    arena.reserve(arena.peak);
}

} // namespace daybreak::cpu
