//===- CpuMatmul.cpp - Dense, per-head and grouped expert matmuls ---------===//
//
// Each kernel cuts its output into fixed tiles (independent of the thread
// count, so results are deterministic) and runs the serial GEMM core on each
// tile from the pool; MXFP4 experts instead decode each tile's blocks of 32
// and scale each block's dot product by its power of two, and the MXFP4
// online route converts a step's selected experts to E4M3 for the FP8 expert
// matmul. Temporaries come from scratch arenas sized by the shapes
// (Scratch.h): nothing is allocated once a shape has run.
//
//===----------------------------------------------------------------------===//

#include "runtime/devices/cpu/CpuGemm.h"
#include "runtime/devices/cpu/CpuKernels.h"
#include "runtime/numerics/Numerics.h"

#include <algorithm>
#include <array>
#include <cmath>
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

void quantizeFp8Rows(ThreadPool &pool, const float *x, int64_t rows, int64_t k,
                     float *out, numerics::OperandRounding rounding) {
  pool.parallelFor(rows, 1, [&](int64_t first, int64_t last) {
    for (int64_t r = first; r < last; ++r)
      for (int64_t b = 0; b < k; b += 128) {
        const int64_t end = std::min(k, b + 128);
        double amax = 1e-4;
        for (int64_t c = b; c < end; ++c)
          amax = std::max(amax, double(std::fabs(x[r * k + c])));
        // The least power of two not below amax / 448, exactly.
        int exponent;
        double mantissa = std::frexp(amax / 448.0, &exponent);
        if (mantissa == 0.5)
          --exponent;
        for (int64_t c = b; c < end; ++c)
          out[r * k + c] =
              std::ldexp(rounding.e4m3(std::ldexp(x[r * k + c], -exponent),
                                       uint64_t(r * k + c)),
                         exponent);
      }
  });
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
                int64_t n, float *out, int64_t xStride, int64_t outStride) {
  if (tokens <= 0 || heads <= 0 || n <= 0)
    return;
  xStride = xStride ? xStride : k;
  outStride = outStride ? outStride : n;
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
  // Head h is the product of x[:, h, :] (row stride heads * xStride) with
  // w[h].
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
      detail::gemm(x + (r0 * heads + h) * xStride, heads * xStride,
                   headWeights(h, head), transposeWeight ? k : n,
                   /*wIsKN=*/!transposeWeight, nullptr,
                   out + (r0 * heads + h) * outStride, heads * outStride,
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

namespace {

/// The (token, slot) rows of a grouped expert matmul that name an expert,
/// ordered by expert (row order within one), with their inputs gathered, so
/// each expert runs over contiguous rows, and room for their results. In
/// the caller's scratch, sized for every row active whatever the routing
/// chose (so a step of a shape already run allocates nothing).
struct ExpertRows {
  int64_t *start = nullptr;     ///< [experts + 1]: expert e's rows
  int64_t *order = nullptr;     ///< the (token, slot) row of each active one
  float *gathered = nullptr;    ///< [active, k]
  float *results = nullptr;     ///< [active, n]
  int64_t rows = 0, active = 0; ///< tokens x slots, and those with experts
};

/// Rows [row0, row0 + rows) of `expert` times output columns [col0, col0 +
/// cols): a fixed cut of the work (independent of the thread count).
struct ExpertJob {
  int64_t expert, row0, rows, col0, cols;
};

/// Groups and gathers the rows of `indices` [tokens, slots]; an expert id
/// outside [-1, experts) is an error naming `kernel`.
Status groupExpertRows(ThreadPool &pool, const char *kernel, const float *x,
                       bool perSlotInput, int64_t experts, int64_t n, int64_t k,
                       const int32_t *indices, int64_t tokens, int64_t slots,
                       ScratchFrame &frame, ExpertRows &g) {
  int64_t rows = tokens * slots;
  for (int64_t r = 0; r < rows; ++r)
    if (indices[r] < -1 || indices[r] >= experts)
      return Status::error(
          std::string(kernel) + ": expert id " + std::to_string(indices[r]) +
          " at token " + std::to_string(r / std::max<int64_t>(slots, 1)) +
          ", slot " + std::to_string(r % std::max<int64_t>(slots, 1)) +
          " is outside [-1, " + std::to_string(experts) + ")");
  g.rows = rows;
  g.start = frame.take<int64_t>(experts + 1);
  std::fill(g.start, g.start + experts + 1, 0);
  for (int64_t r = 0; r < rows; ++r)
    if (indices[r] >= 0)
      ++g.start[indices[r] + 1];
  for (int64_t e = 0; e < experts; ++e)
    g.start[e + 1] += g.start[e];
  g.active = g.start[experts];
  g.order = frame.take<int64_t>(rows);
  int64_t *fill = frame.take<int64_t>(experts);
  std::copy(g.start, g.start + experts, fill);
  for (int64_t r = 0; r < rows; ++r)
    if (indices[r] >= 0)
      g.order[fill[indices[r]]++] = r;
  g.gathered = frame.take<float>(rows * k);
  g.results = frame.take<float>(rows * n);
  pool.parallelFor(g.active, 16, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      int64_t r = g.order[i];
      const float *in = x + (perSlotInput ? r : r / slots) * k;
      std::copy(in, in + k, g.gathered + i * k);
    }
  });
  return Status::success();
}

/// The jobs of a grouped expert matmul: each expert's rows in blocks of
/// kRowBlock, its columns in blocks sized for the row count (columnBlock),
/// in expert, row, column order. Expert e's jobs are [firstJob[e],
/// firstJob[e + 1]).
class ExpertJobs {
public:
  ExpertJobs(const ExpertRows &g, int64_t experts, int64_t n,
             ScratchFrame &frame)
      : g(g), experts(experts), n(n),
        firstJob(frame.take<int64_t>(experts + 1)) {
    firstJob[0] = 0;
    for (int64_t e = 0; e < experts; ++e) {
      int64_t count = g.start[e + 1] - g.start[e];
      int64_t colJobs = (n + columnBlock(count, n) - 1) / columnBlock(count, n);
      firstJob[e + 1] =
          firstJob[e] + (count + kRowBlock - 1) / kRowBlock * colJobs;
    }
  }
  int64_t size() const { return firstJob[experts]; }
  ExpertJob operator[](int64_t j) const {
    // The expert whose jobs hold j (one without rows has none).
    int64_t e =
        std::upper_bound(firstJob, firstJob + experts + 1, j) - firstJob - 1;
    int64_t count = g.start[e + 1] - g.start[e];
    int64_t colBlock = columnBlock(count, n);
    int64_t colJobs = (n + colBlock - 1) / colBlock;
    int64_t r0 = (j - firstJob[e]) / colJobs * kRowBlock;
    int64_t c0 = (j - firstJob[e]) % colJobs * colBlock;
    return {e, g.start[e] + r0, std::min(kRowBlock, count - r0), c0,
            std::min(colBlock, n - c0)};
  }

private:
  const ExpertRows &g;
  int64_t experts, n;
  int64_t *firstJob;
};

/// Row `e` of an [E, n] bias (f32 or bf16; null data stays null).
WeightView biasRow(const WeightView &bias, int64_t e, int64_t n) {
  WeightView row = bias;
  if (bias.data)
    row.data = static_cast<const char *>(bias.data) +
               e * n * (bias.type == WeightType::BF16 ? 2 : 4);
  return row;
}

/// Writes each row's result to `out`: [tokens, slots, n] (empty slots
/// zero), or with `routingWeights` their weighted sum [tokens, n], slots
/// added in order.
void scatterExpertResults(ThreadPool &pool, const ExpertRows &g, int64_t tokens,
                          int64_t slots, int64_t n, const float *routingWeights,
                          ScratchFrame &frame, float *out) {
  // Where each row's result lives (-1: empty slot).
  int64_t *place = frame.take<int64_t>(g.rows);
  std::fill(place, place + g.rows, -1);
  for (int64_t i = 0; i < g.active; ++i)
    place[g.order[i]] = i;
  const float *results = g.results;
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
}

} // namespace

Status expertMatmul(ThreadPool &pool, const float *x, bool perSlotInput,
                    const WeightView &stored, int64_t experts, int64_t n,
                    int64_t k, const int32_t *indices, int64_t tokens,
                    int64_t slots, const float *routingWeights, float *out,
                    const WeightView &bias) {
  WeightView w = stored;
  w.rows = n;
  w.cols = k;
  ScratchFrame frame;
  ExpertRows g;
  DAYBREAK_RETURN_IF_ERROR(groupExpertRows(pool, "expertMatmul", x,
                                           perSlotInput, experts, n, k, indices,
                                           tokens, slots, frame, g));
  ExpertJobs jobs(g, experts, n, frame);
  pool.parallelFor(jobs.size(), 1, [&](int64_t begin, int64_t end) {
    for (int64_t j = begin; j < end; ++j) {
      ExpertJob job = jobs[j];
      gemmStored(g.gathered + job.row0 * k, k, w, job.expert,
                 biasRow(bias, job.expert, n), g.results + job.row0 * n, n,
                 job.rows, job.col0, job.col0 + job.cols, k);
    }
  });
  scatterExpertResults(pool, g, tokens, slots, n, routingWeights, frame, out);
  return Status::success();
}

namespace {

/// Output columns an MXFP4 job decodes at once: their values (kMxfp4Tile x
/// k floats) stay in cache while each of the job's rows reads them.
constexpr int64_t kMxfp4Tile = 8;

/// The 16 E2M1 values by code (numerics::e2m1ToFloat).
const std::array<float, 16> &e2m1Values() {
  static const std::array<float, 16> values = [] {
    std::array<float, 16> v;
    for (int c = 0; c < 16; ++c)
      v[c] = numerics::e2m1ToFloat(uint8_t(c));
    return v;
  }();
  return values;
}

/// sum over blocks b of scales[b] * (x[32b : 32b + 32] . v[32b : 32b + 32]):
/// the block's dot product in fp32 (eight partial sums, which the compiler
/// vectorises without reassociating), then its power of two.
float mxfp4Dot(const float *x, const float *v, const float *scales,
               int64_t blocks) {
  float acc = 0.0f;
  for (int64_t b = 0; b < blocks; ++b) {
    const float *xb = x + 32 * b, *vb = v + 32 * b;
    float lanes[8] = {};
    for (int i = 0; i < 32; i += 8)
      for (int l = 0; l < 8; ++l)
        lanes[l] += xb[i + l] * vb[i + l];
    float block = ((lanes[0] + lanes[1]) + (lanes[2] + lanes[3])) +
                  ((lanes[4] + lanes[5]) + (lanes[6] + lanes[7]));
    acc += block * scales[b];
  }
  return acc;
}

/// One job of an MXFP4 expert matmul: kMxfp4Tile columns at a time, their
/// E2M1 values and block scales decoded once into the participant's
/// scratch, then every row of the job against them.
void mxfp4Job(const ExpertRows &g, const Mxfp4Weights &w,
              const WeightView &bias, int64_t n, int64_t k,
              const ExpertJob &job, float *results) {
  // This participant's scratch (the job runs inside a pool chunk).
  ScratchFrame frame;
  int64_t blocks = k / 32;
  float *values = frame.take<float>(kMxfp4Tile * k);
  float *scales = frame.take<float>(kMxfp4Tile * blocks);
  const std::array<float, 16> &e2m1 = e2m1Values();
  for (int64_t c0 = job.col0; c0 < job.col0 + job.cols; c0 += kMxfp4Tile) {
    int64_t tile = std::min(kMxfp4Tile, job.col0 + job.cols - c0);
    for (int64_t j = 0; j < tile; ++j) {
      int64_t row = job.expert * n + c0 + j;
      const uint8_t *codes = w.values + row * (k / 2);
      float *v = values + j * k;
      for (int64_t b = 0; b < k / 2; ++b) {
        v[2 * b] = e2m1[codes[b] & 0xF];
        v[2 * b + 1] = e2m1[codes[b] >> 4];
      }
      const uint8_t *exponents = w.scales + row * blocks;
      for (int64_t b = 0; b < blocks; ++b)
        scales[j * blocks + b] = numerics::e8m0ToFloat(exponents[b]);
    }
    for (int64_t r = 0; r < job.rows; ++r) {
      const float *xr = g.gathered + (job.row0 + r) * k;
      float *y = results + (job.row0 + r) * n;
      for (int64_t j = 0; j < tile; ++j) {
        float dot = mxfp4Dot(xr, values + j * k, scales + j * blocks, blocks);
        y[c0 + j] = bias.data ? dot + bias.at(job.expert * n + c0 + j) : dot;
      }
    }
  }
}

} // namespace

Status mxfp4ExpertMatmul(ThreadPool &pool, const float *x, bool perSlotInput,
                         const Mxfp4Weights &w, const WeightView &bias,
                         int64_t experts, int64_t n, int64_t k,
                         const int32_t *indices, int64_t tokens, int64_t slots,
                         const float *routingWeights, float *out) {
  if (k % 32 != 0)
    return Status::error("mxfp4ExpertMatmul: K " + std::to_string(k) +
                         " is not a multiple of the MXFP4 block of 32");
  ScratchFrame frame;
  ExpertRows g;
  DAYBREAK_RETURN_IF_ERROR(groupExpertRows(pool, "mxfp4ExpertMatmul", x,
                                           perSlotInput, experts, n, k, indices,
                                           tokens, slots, frame, g));
  ExpertJobs jobs(g, experts, n, frame);
  pool.parallelFor(jobs.size(), 1, [&](int64_t begin, int64_t end) {
    for (int64_t j = begin; j < end; ++j)
      mxfp4Job(g, w, bias, n, k, jobs[j], g.results);
  });
  scatterExpertResults(pool, g, tokens, slots, n, routingWeights, frame, out);
  return Status::success();
}

Status mxfp4ToFp8Experts(ThreadPool &pool, const Mxfp4Weights &w,
                         const WeightView &bias, int64_t experts, int64_t n,
                         int64_t k, const int32_t *indices, int64_t tokens,
                         int64_t slots, int64_t workspaceSlots, uint8_t *codes,
                         float *blockScales, float *slotBias, int32_t *remapped,
                         runtime::Mxfp4ConvertMode mode) {
  using Mode = runtime::Mxfp4ConvertMode;
  if (k % 32 != 0)
    return Status::error("mxfp4ToFp8Experts: K " + std::to_string(k) +
                         " is not a multiple of the MXFP4 block of 32");
  if (mode == Mode::All && workspaceSlots < experts)
    return Status::error("mxfp4ToFp8Experts: converting all " +
                         std::to_string(experts) +
                         " experts needs as many workspace slots, got " +
                         std::to_string(workspaceSlots));
  int64_t rows = mode == Mode::All ? 0 : tokens * slots;
  for (int64_t r = 0; r < rows; ++r)
    if (indices[r] < -1 || indices[r] >= experts)
      return Status::error("mxfp4ToFp8Experts: expert id " +
                           std::to_string(indices[r]) + " at token " +
                           std::to_string(r / slots) + ", slot " +
                           std::to_string(r % slots) + " is outside [-1, " +
                           std::to_string(experts) + ")");
  // Each selected expert's slot, in increasing id order, and the expert of
  // each slot.
  if (mode == Mode::SlotsOnly) {
    // Every expert is in its own slot already.
    std::copy_n(indices, rows, remapped);
    return Status::success();
  }
  ScratchFrame frame;
  int64_t *slotOf = frame.take<int64_t>(experts);
  std::fill(slotOf, slotOf + experts, mode == Mode::All ? 0 : -1);
  for (int64_t r = 0; r < rows; ++r)
    if (indices[r] >= 0)
      slotOf[indices[r]] = 0;
  int64_t *expertOf = frame.take<int64_t>(experts);
  int64_t used = 0;
  for (int64_t e = 0; e < experts; ++e)
    if (slotOf[e] == 0) {
      expertOf[used] = e;
      slotOf[e] = used++;
    }
  if (used > workspaceSlots)
    return Status::error("mxfp4ToFp8Experts: " + std::to_string(used) +
                         " distinct experts exceed the workspace's " +
                         std::to_string(workspaceSlots) + " slots");
  std::array<uint8_t, 16> e4m3;
  for (int c = 0; c < 16; ++c)
    e4m3[c] = numerics::e2m1ToE4m3(uint8_t(c));
  int64_t blocks = k / 32;
  pool.parallelFor(used * n, 16, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      int64_t e = expertOf[r / n], j = r % n;
      const uint8_t *packed = w.values + (e * n + j) * (k / 2);
      uint8_t *out = codes + r * k;
      for (int64_t b = 0; b < k / 2; ++b) {
        out[2 * b] = e4m3[packed[b] & 0xF];
        out[2 * b + 1] = e4m3[packed[b] >> 4];
      }
      const uint8_t *exponents = w.scales + (e * n + j) * blocks;
      for (int64_t b = 0; b < blocks; ++b)
        blockScales[r * blocks + b] = numerics::e8m0ToFloat(exponents[b]);
      slotBias[r] = bias.data ? bias.at(e * n + j) : 0.0f;
    }
  });
  for (int64_t r = 0; r < rows; ++r)
    remapped[r] = indices[r] < 0 ? -1 : int32_t(slotOf[indices[r]]);
  return Status::success();
}

} // namespace daybreak::cpu
