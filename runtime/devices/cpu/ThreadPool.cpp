//===- ThreadPool.cpp - A fixed pool for parallel loops -------------------===//
//
// Chunks are handed out under one mutex; a generation counter tells workers
// that a new loop started, so a notify that arrives before a worker waits is
// never lost (the worker re-checks the counter under the lock).
//
//===----------------------------------------------------------------------===//

#include "runtime/devices/cpu/ThreadPool.h"

#include <algorithm>

namespace daybreak::cpu {

ThreadPool::ThreadPool(unsigned threads) {
  if (threads == 0)
    threads = std::max(1u, std::thread::hardware_concurrency());
  scratch = std::make_unique<ScratchArena[]>(threads);
  workers.reserve(threads - 1);
  for (unsigned i = 0; i + 1 < threads; ++i)
    workers.emplace_back([this, i] { workerLoop(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mutex);
    stopping = true;
  }
  wake.notify_all();
  for (std::thread &worker : workers)
    worker.join();
}

void ThreadPool::growScratch() {
  // Any participant may run any chunk of the next loop: all get room for
  // the largest need seen. Workers are idle and hold no frame here.
  size_t need = 0;
  for (unsigned i = 0; i < size(); ++i)
    need = std::max(need, scratch[i].highWater());
  for (unsigned i = 0; i < size(); ++i)
    scratch[i].reserve(need);
}

void ThreadPool::parallelFor(int64_t n, int64_t grain, ChunkFn fn) {
  if (n <= 0)
    return;
  grain = std::max<int64_t>(grain, 1);
  if (workers.empty() || n <= grain) {
    {
      ScratchBinding binding(scratch[0]);
      fn(0, n);
    }
    growScratch();
    return;
  }
  // A few chunks per thread balance uneven chunks without much locking.
  int64_t threads = static_cast<int64_t>(size());
  int64_t chunkSize = std::max(grain, (n + 4 * threads - 1) / (4 * threads));
  std::unique_lock<std::mutex> lock(mutex);
  task = &fn;
  taskSize = n;
  chunk = chunkSize;
  nextChunk = 0;
  chunksLeft = (n + chunkSize - 1) / chunkSize;
  ++generation;
  lock.unlock();
  wake.notify_all();

  lock.lock();
  {
    ScratchBinding binding(scratch[0]);
    while (nextChunk * chunk < taskSize) {
      int64_t begin = nextChunk++ * chunk;
      lock.unlock();
      fn(begin, std::min(begin + chunkSize, n));
      lock.lock();
      --chunksLeft;
    }
  }
  done.wait(lock, [this] { return chunksLeft == 0; });
  task = nullptr;
  taskSize = 0;
  lock.unlock();
  growScratch();
}

void ThreadPool::workerLoop(unsigned index) {
  ScratchBinding binding(scratch[index + 1]);
  uint64_t seen = 0;
  std::unique_lock<std::mutex> lock(mutex);
  while (true) {
    wake.wait(lock, [&] { return stopping || generation != seen; });
    if (stopping)
      return;
    seen = generation;
    // Only chunks of the current loop are handed out, so `task` stays valid
    // while this worker runs one (the caller waits for chunksLeft == 0).
    while (task && nextChunk * chunk < taskSize) {
      const ChunkFn *fn = task;
      int64_t begin = nextChunk++ * chunk;
      int64_t end = std::min(begin + chunk, taskSize);
      lock.unlock();
      (*fn)(begin, end);
      lock.lock();
      if (--chunksLeft == 0)
        done.notify_all();
    }
  }
}

} // namespace daybreak::cpu
