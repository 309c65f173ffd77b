//===- ThreadPool.h - A fixed pool for parallel loops -----------*- C++ -*-===//
//
// A pool of worker threads created once at load; `parallelFor` splits an
// index range into contiguous chunks, runs them on the workers and the
// calling thread, and returns when all are done. Not reentrant: one
// parallelFor at a time per pool. The pool takes the loop body by reference
// (not as a std::function, which may allocate) and owns one scratch arena
// per participant (Scratch.h), bound while it runs a chunk: a loop allocates
// only when a chunk needs more scratch than any chunk before it.
//
//===----------------------------------------------------------------------===//

#ifndef DAYBREAK_RUNTIME_DEVICES_CPU_THREADPOOL_H
#define DAYBREAK_RUNTIME_DEVICES_CPU_THREADPOOL_H

#include "runtime/devices/cpu/Scratch.h"

#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <thread>
#include <type_traits>
#include <vector>

namespace daybreak::cpu {

/// A non-owning reference to a loop body `void(int64_t begin, int64_t end)`:
/// unlike a std::function it never allocates for a large capture. The body
/// must outlive the call (a lambda written in the call's arguments does).
class ChunkFn {
public:
  template <typename F, typename = std::enable_if_t<
                            !std::is_same_v<std::decay_t<F>, ChunkFn>>>
  ChunkFn(F &&fn)
      : body(const_cast<void *>(static_cast<const void *>(std::addressof(fn)))),
        call([](void *object, int64_t begin, int64_t end) {
          (*static_cast<std::remove_reference_t<F> *>(object))(begin, end);
        }) {}
  void operator()(int64_t begin, int64_t end) const { call(body, begin, end); }

private:
  void *body;
  void (*call)(void *, int64_t, int64_t);
};

/// Owns its worker threads and their scratch arenas. parallelFor is called
/// from one thread at a time.
class ThreadPool {
public:
  /// `threads` workers including the caller (0: hardware concurrency).
  explicit ThreadPool(unsigned threads = 0);
  ~ThreadPool();
  ThreadPool(const ThreadPool &) = delete;
  ThreadPool &operator=(const ThreadPool &) = delete;

  unsigned size() const { return static_cast<unsigned>(workers.size()) + 1; }

  /// Calls fn(begin, end) on disjoint chunks covering [0, n); chunks are at
  /// least `grain` long. Each chunk runs with its participant's arena as
  /// currentScratch(); afterwards every arena grows to the largest need
  /// any met, so a loop already run at its shapes allocates nothing.
  void parallelFor(int64_t n, int64_t grain, ChunkFn fn);

private:
  void workerLoop(unsigned index);
  void growScratch();

  /// [0] for the calling thread's chunks, [i + 1] for worker i's.
  std::unique_ptr<ScratchArena[]> scratch;
  std::vector<std::thread> workers;
  std::mutex mutex;
  std::condition_variable wake, done;
  const ChunkFn *task = nullptr;
  int64_t taskSize = 0, chunk = 0, nextChunk = 0, chunksLeft = 0;
  uint64_t generation = 0;
  bool stopping = false;
};

} // namespace daybreak::cpu

#endif // DAYBREAK_RUNTIME_DEVICES_CPU_THREADPOOL_H
