//===- CpuMatmul.cpp - Dense, per-head and grouped expert matmuls ---------===//
//
// Each kernel cuts its output into fixed tiles (independent of the thread
// count, so results are deterministic) and runs the serial GEMM core on each
// tile from the pool.
//
//===----------------------------------------------------------------------===//

#include "runtime/devices/cpu/CpuGemm.h"
#include "runtime/devices/cpu/CpuKernels.h"

#include <algorithm>
#include <string>
#include <vector>

namespace daybreak::cpu {

namespace {

// Row and column extents of one parallel job. Rows are cut in fixed blocks so
// the GEMM core sees the same m for every element whatever the thread count.
constexpr int64_t kRowBlock = 192, kColBlock = 256;

/// Columns per job for a few-row (decode) product: enough jobs to feed the
/// pool, each still streaming a good run of weight rows.
int64_t columnBlock(int64_t m, int64_t n) {
  return m <= 4 ? std::clamp<int64_t>(n / 64, 16, kColBlock) : kColBlock;
}

/// detail::gemm over columns [n0, n1) of matrix `matrix` of a stored weight
/// (its rows are the output columns) and an optional stored bias. An fp32
/// weight is read in place; any other is first widened, with the bias, into
/// thread-local scratch that grows to the largest job once and is reused.
void gemmStored(const float *x, int64_t lda, const WeightView &w,
                int64_t matrix, const WeightView &bias, float *out,
                int64_t ldc, int64_t m, int64_t n0, int64_t n1, int64_t k) {
  if (w.isF32() && (!bias.data || bias.isF32())) {
    detail::gemm(x, lda, static_cast<const float *>(w.data) + matrix * w.rows * k,
                 k, /*wIsKN=*/false, static_cast<const float *>(bias.data), out,
                 ldc, m, n0, n1, k);
    return;
  }
  thread_local std::vector<float> rows, biases;
  int64_t cols = n1 - n0;
  if (rows.size() < size_t(cols * k))
    rows.resize(cols * k);
  for (int64_t j = 0; j < cols; ++j)
    w.decodeRow(matrix, n0 + j, 0, k, rows.data() + j * k);
  if (bias.data) {
    if (biases.size() < size_t(cols))
      biases.resize(cols);
    for (int64_t j = 0; j < cols; ++j)
      biases[j] = bias.at(n0 + j);
  }
  detail::gemm(x, lda, rows.data(), k, /*wIsKN=*/false,
               bias.data ? biases.data() : nullptr, out + n0, ldc, m, 0, cols,
               k);
}

} // namespace

void matmul(ThreadPool &pool, const float *x, const float *w, const float *bias,
            int64_t m, int64_t n, int64_t k, float *out) {
  matmul(pool, x, w, bias, m, n, k, out, MatmulTiling());
}

void matmul(ThreadPool &pool, const float *x, const float *w, const float *bias,
            int64_t m, int64_t n, int64_t k, float *out,
            const MatmulTiling &tiling) {
  matmul(pool, x, WeightView::f32(w), WeightView::f32(bias), m, n, k, out,
         tiling);
}

void matmul(ThreadPool &pool, const float *x, const WeightView &stored,
            const WeightView &bias, int64_t m, int64_t n, int64_t k,
            float *out, const MatmulTiling &tiling) {
  WeightView w = stored;
  w.rows = n;
  w.cols = k;
  if (m <= 0 || n <= 0)
    return;
  int64_t rowBlock = tiling.rowBlock > 0 ? tiling.rowBlock : kRowBlock;
  int64_t colBlock = tiling.colBlock > 0 ? tiling.colBlock : columnBlock(m, n);
  int64_t rowJobs = (m + rowBlock - 1) / rowBlock;
  int64_t colJobs = (n + colBlock - 1) / colBlock;
  pool.parallelFor(rowJobs * colJobs, 1, [&](int64_t begin, int64_t end) {
    for (int64_t job = begin; job < end; ++job) {
      int64_t r0 = (job / colJobs) * rowBlock;
      int64_t c0 = (job % colJobs) * colBlock;
      gemmStored(x + r0 * k, k, w, 0, bias, out + r0 * n, n,
                 std::min(rowBlock, m - r0), c0, std::min(n, c0 + colBlock), k);
    }
  });
}

void headMatmul(ThreadPool &pool, const float *x, const float *w,
                bool transposeWeight, int64_t tokens, int64_t heads, int64_t k,
                int64_t n, float *out) {
  headMatmul(pool, x, WeightView::f32(w), transposeWeight, tokens, heads, k, n,
             out);
}

void headMatmul(ThreadPool &pool, const float *x, const WeightView &stored,
                bool transposeWeight, int64_t tokens, int64_t heads, int64_t k,
                int64_t n, float *out) {
  if (tokens <= 0 || heads <= 0 || n <= 0)
    return;
  // A stored head matrix is widened per job into thread-local scratch (it is
  // n x k values); an fp32 one is read in place.
  WeightView w = stored;
  w.rows = heads;
  w.cols = n * k;
  auto headWeights = [&](int64_t h) -> const float * {
    if (w.isF32())
      return static_cast<const float *>(w.data) + h * n * k;
    thread_local std::vector<float> head;
    if (head.size() < size_t(n * k))
      head.resize(n * k);
    w.decodeRow(0, h, 0, n * k, head.data());
    return head.data();
  };
  // Head h is the product of x[:, h, :] (row stride heads * k) with w[h].
  int64_t colBlock = columnBlock(tokens, n);
  int64_t rowJobs = (tokens + kRowBlock - 1) / kRowBlock;
  int64_t colJobs = (n + colBlock - 1) / colBlock;
  int64_t perHead = rowJobs * colJobs;
  pool.parallelFor(heads * perHead, 1, [&](int64_t begin, int64_t end) {
    for (int64_t job = begin; job < end; ++job) {
      int64_t h = job / perHead, rest = job % perHead;
      int64_t r0 = (rest / colJobs) * kRowBlock;
      int64_t c0 = (rest % colJobs) * colBlock;
      detail::gemm(x + (r0 * heads + h) * k, heads * k, headWeights(h),
                   transposeWeight ? k : n, /*wIsKN=*/!transposeWeight, nullptr,
                   out + (r0 * heads + h) * n, heads * n,
                   std::min(kRowBlock, tokens - r0), c0,
                   std::min(n, c0 + colBlock), k);
    }
  });
}

Status expertMatmul(ThreadPool &pool, const float *x, bool perSlotInput,
                    const float *w, int64_t experts, int64_t n, int64_t k,
                    const int32_t *indices, int64_t tokens, int64_t slots,
                    const float *routingWeights, float *out) {
  return expertMatmul(pool, x, perSlotInput, WeightView::f32(w), experts, n, k,
                      indices, tokens, slots, routingWeights, out);
}

Status expertMatmul(ThreadPool &pool, const float *x, bool perSlotInput,
                    const WeightView &stored, int64_t experts, int64_t n,
                    int64_t k, const int32_t *indices, int64_t tokens,
                    int64_t slots, const float *routingWeights, float *out) {
  WeightView w = stored;
  w.rows = n;
  w.cols = k;
  int64_t rows = tokens * slots;
  for (int64_t r = 0; r < rows; ++r)
    if (indices[r] < -1 || indices[r] >= experts)
      return Status::error(
          "expertMatmul: expert id " + std::to_string(indices[r]) +
          " at token " + std::to_string(r / std::max<int64_t>(slots, 1)) +
          ", slot " + std::to_string(r % std::max<int64_t>(slots, 1)) +
          " is outside [-1, " + std::to_string(experts) + ")");

  // Group the (token, slot) rows by expert, in row order, and gather their
  // inputs so each expert runs one GEMM over contiguous rows.
  std::vector<int64_t> start(experts + 1, 0);
  for (int64_t r = 0; r < rows; ++r)
    if (indices[r] >= 0)
      ++start[indices[r] + 1];
  for (int64_t e = 0; e < experts; ++e)
    start[e + 1] += start[e];
  int64_t active = start[experts];
  std::vector<int64_t> order(active), fill(start.begin(), start.end() - 1);
  for (int64_t r = 0; r < rows; ++r)
    if (indices[r] >= 0)
      order[fill[indices[r]]++] = r;
  std::vector<float> gathered(active * k), results(active * n);
  pool.parallelFor(active, 16, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      int64_t r = order[i];
      const float *in = x + (perSlotInput ? r : r / slots) * k;
      std::copy(in, in + k, gathered.begin() + i * k);
    }
  });

  struct Job {
    int64_t expert, row0, rows, col0, cols;
  };
  std::vector<Job> jobs;
  for (int64_t e = 0; e < experts; ++e) {
    int64_t count = start[e + 1] - start[e];
    if (!count)
      continue;
    int64_t colBlock = columnBlock(count, n);
    for (int64_t r0 = 0; r0 < count; r0 += kRowBlock)
      for (int64_t c0 = 0; c0 < n; c0 += colBlock)
        jobs.push_back({e, start[e] + r0, std::min(kRowBlock, count - r0), c0,
                        std::min(colBlock, n - c0)});
  }
  pool.parallelFor(static_cast<int64_t>(jobs.size()), 1,
                   [&](int64_t begin, int64_t end) {
                     for (int64_t j = begin; j < end; ++j) {
                       const Job &job = jobs[j];
                       gemmStored(gathered.data() + job.row0 * k, k, w,
                                  job.expert, WeightView(),
                                  results.data() + job.row0 * n, n, job.rows,
                                  job.col0, job.col0 + job.cols, k);
                     }
                   });

  // Where each row's result lives (-1: empty slot).
  std::vector<int64_t> place(rows, -1);
  for (int64_t i = 0; i < active; ++i)
    place[order[i]] = i;
  pool.parallelFor(tokens, 1, [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      if (routingWeights) {
        float *o = out + t * n;
        std::fill(o, o + n, 0.0f);
        for (int64_t s = 0; s < slots; ++s) {
          int64_t i = place[t * slots + s];
          if (i < 0)
            continue;
          float weight = routingWeights[t * slots + s];
          const float *y = results.data() + i * n;
          for (int64_t j = 0; j < n; ++j)
            o[j] += weight * y[j];
        }
        continue;
      }
      for (int64_t s = 0; s < slots; ++s) {
        float *o = out + (t * slots + s) * n;
        int64_t i = place[t * slots + s];
        if (i < 0)
          std::fill(o, o + n, 0.0f);
        else
          std::copy(results.data() + i * n, results.data() + (i + 1) * n, o);
      }
    }
  });
  return Status::success();
}

} // namespace daybreak::cpu
