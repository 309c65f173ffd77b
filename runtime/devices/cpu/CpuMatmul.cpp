//===- CpuMatmul.cpp - Dense, per-head and grouped expert matmuls ---------===//
//
// Each kernel cuts its output into fixed tiles (independent of the thread
// count, so results are deterministic) and runs the serial GEMM core on each
// tile from the pool. Temporaries come from scratch arenas sized by the
// shapes (Scratch.h): nothing is allocated once a shape has run.
//
//===----------------------------------------------------------------------===//

#include "runtime/devices/cpu/CpuGemm.h"
#include "runtime/devices/cpu/CpuKernels.h"

#include <algorithm>
#include <string>

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
/// scratch.
void gemmStored(const float *x, int64_t lda, const WeightView &w,
                int64_t matrix, const WeightView &bias, float *out,
                int64_t ldc, int64_t m, int64_t n0, int64_t n1, int64_t k) {
  if (w.isF32() && (!bias.data || bias.isF32())) {
    detail::gemm(x, lda, static_cast<const float *>(w.data) + matrix * w.rows * k,
                 k, /*wIsKN=*/false, static_cast<const float *>(bias.data), out,
                 ldc, m, n0, n1, k);
    return;
  }
  ScratchFrame frame;
  int64_t cols = n1 - n0;
  float *rows = frame.take<float>(cols * k);
  for (int64_t j = 0; j < cols; ++j)
    w.decodeRow(matrix, n0 + j, 0, k, rows + j * k);
  float *biases = nullptr;
  if (bias.data) {
    biases = frame.take<float>(cols);
    for (int64_t j = 0; j < cols; ++j)
      biases[j] = bias.at(n0 + j);
  }
  detail::gemm(x, lda, rows, k, /*wIsKN=*/false, biases, out + n0, ldc, m, 0,
               cols, k);
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
  // A stored head matrix is widened per job into scratch (it is n x k
  // values); an fp32 one is read in place.
  WeightView w = stored;
  w.rows = heads;
  w.cols = n * k;
  auto headWeights = [&](int64_t h, float *head) -> const float * {
    if (w.isF32())
      return static_cast<const float *>(w.data) + h * n * k;
    w.decodeRow(0, h, 0, n * k, head);
    return head;
  };
  // Head h is the product of x[:, h, :] (row stride heads * k) with w[h].
  int64_t colBlock = columnBlock(tokens, n);
  int64_t rowJobs = (tokens + kRowBlock - 1) / kRowBlock;
  int64_t colJobs = (n + colBlock - 1) / colBlock;
  int64_t perHead = rowJobs * colJobs;
  pool.parallelFor(heads * perHead, 1, [&](int64_t begin, int64_t end) {
    ScratchFrame frame;
    float *head = w.isF32() ? nullptr : frame.take<float>(n * k);
    for (int64_t job = begin; job < end; ++job) {
      int64_t h = job / perHead, rest = job % perHead;
      int64_t r0 = (rest / colJobs) * kRowBlock;
      int64_t c0 = (rest % colJobs) * colBlock;
      detail::gemm(x + (r0 * heads + h) * k, heads * k, headWeights(h, head),
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
  // inputs so each expert runs one GEMM over contiguous rows. Scratch is
  // sized for every row active, whatever the routing chose.
  ScratchFrame frame;
  int64_t *start = frame.take<int64_t>(experts + 1);
  std::fill(start, start + experts + 1, 0);
  for (int64_t r = 0; r < rows; ++r)
    if (indices[r] >= 0)
      ++start[indices[r] + 1];
  for (int64_t e = 0; e < experts; ++e)
    start[e + 1] += start[e];
  int64_t active = start[experts];
  int64_t *order = frame.take<int64_t>(rows);
  int64_t *fill = frame.take<int64_t>(experts);
  std::copy(start, start + experts, fill);
  for (int64_t r = 0; r < rows; ++r)
    if (indices[r] >= 0)
      order[fill[indices[r]]++] = r;
  float *gathered = frame.take<float>(rows * k);
  float *results = frame.take<float>(rows * n);
  pool.parallelFor(active, 16, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      int64_t r = order[i];
      const float *in = x + (perSlotInput ? r : r / slots) * k;
      std::copy(in, in + k, gathered + i * k);
    }
  });

  // Expert e's jobs are [firstJob[e], firstJob[e + 1]): its rows in blocks
  // of kRowBlock, each block cut into column blocks.
  int64_t *firstJob = frame.take<int64_t>(experts + 1);
  firstJob[0] = 0;
  for (int64_t e = 0; e < experts; ++e) {
    int64_t count = start[e + 1] - start[e];
    int64_t colJobs = (n + columnBlock(count, n) - 1) / columnBlock(count, n);
    firstJob[e + 1] =
        firstJob[e] + (count + kRowBlock - 1) / kRowBlock * colJobs;
  }
  pool.parallelFor(firstJob[experts], 1, [&](int64_t begin, int64_t end) {
    for (int64_t j = begin; j < end; ++j) {
      // The expert whose jobs hold j (one without rows has none).
      int64_t e =
          std::upper_bound(firstJob, firstJob + experts + 1, j) - firstJob - 1;
      int64_t count = start[e + 1] - start[e];
      int64_t colBlock = columnBlock(count, n);
      int64_t colJobs = (n + colBlock - 1) / colBlock;
      int64_t r0 = (j - firstJob[e]) / colJobs * kRowBlock;
      int64_t c0 = (j - firstJob[e]) % colJobs * colBlock;
      int64_t row0 = start[e] + r0;
      gemmStored(gathered + row0 * k, k, w, e, WeightView(), results + row0 * n,
                 n, std::min(kRowBlock, count - r0), c0,
                 std::min(n, c0 + colBlock), k);
    }
  });

  // Where each row's result lives (-1: empty slot).
  int64_t *place = frame.take<int64_t>(rows);
  std::fill(place, place + rows, -1);
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
          const float *y = results + i * n;
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
          std::copy(results + i * n, results + (i + 1) * n, o);
      }
    }
  });
  return Status::success();
}

} // namespace daybreak::cpu
