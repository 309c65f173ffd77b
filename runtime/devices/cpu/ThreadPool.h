//===- ThreadPool.h - A fixed pool for parallel loops -----------*- C++ -*-===//
//
// A pool of worker threads created once at load; `parallelFor` splits an
// index range into contiguous chunks, runs them on the workers and the
// calling thread, and returns when all are done. Not reentrant: one
// parallelFor at a time per pool.
//
//===----------------------------------------------------------------------===//

#ifndef DAYBREAK_RUNTIME_DEVICES_CPU_THREADPOOL_H
#define DAYBREAK_RUNTIME_DEVICES_CPU_THREADPOOL_H

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace daybreak::cpu {

class ThreadPool {
public:
  /// `threads` workers including the caller (0: hardware concurrency).
  explicit ThreadPool(unsigned threads = 0);
  ~ThreadPool();
  ThreadPool(const ThreadPool &) = delete;
  ThreadPool &operator=(const ThreadPool &) = delete;

  unsigned size() const { return static_cast<unsigned>(workers.size()) + 1; }

  /// Calls fn(begin, end) on disjoint chunks covering [0, n); chunks are at
  /// least `grain` long.
  void parallelFor(int64_t n, int64_t grain,
                   const std::function<void(int64_t, int64_t)> &fn);

private:
  void workerLoop(unsigned index);

  std::vector<std::thread> workers;
  std::mutex mutex;
  std::condition_variable wake, done;
  const std::function<void(int64_t, int64_t)> *task = nullptr;
  int64_t taskSize = 0, chunk = 0, nextChunk = 0, chunksLeft = 0;
  uint64_t generation = 0;
  bool stopping = false;
};

} // namespace daybreak::cpu

#endif // DAYBREAK_RUNTIME_DEVICES_CPU_THREADPOOL_H
