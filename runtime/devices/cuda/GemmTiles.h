//===- GemmTiles.h - Configurations of the CUDA FP8 GEMM ---------*- C++
//-*-===//
//
// The configuration of one launch of the FP8 GEMM (daybreak_gemm_wg_fp8_t in
// CudaGemm.cuh) and the cost model that chooses it. The compiler's lm-tile
// pass evaluates the model for each fp8_matmul at its phase's design rows
// (the batch of @decode, the token budget of @prefill) and records the
// result on the op (`cuda_tile`); plan-specialize-library-kernels has NVRTC
// instantiate the template for it; the CUDA device launches what was
// recorded. A launch without a recorded tile (a direct call of
// CudaKernels::fp8Gemm) evaluates the same model at its own rows. Header
// only: the compiler and the runtime include it without linking either.
//
//===----------------------------------------------------------------------===//

#ifndef DAYBREAK_RUNTIME_DEVICES_CUDA_GEMMTILES_H
#define DAYBREAK_RUNTIME_DEVICES_CUDA_GEMMTILES_H

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>

namespace daybreak::cuda {

/// One FP8 GEMM configuration: `rows` of x a block (64: one MMA
/// warpgroup, 128: two), 128 output columns a block, `stages` 128-column
/// blocks of K in flight, and K split `splits` ways (partial sums that
/// daybreak_split_k_sum adds in order).
struct Fp8GemmTile {
  int32_t rows = 128;
  int32_t columns = 128;
  int32_t stages = 6;
  int32_t splits = 1;

  bool operator==(const Fp8GemmTile &o) const {
    return rows == o.rows && columns == o.columns && stages == o.stages &&
           splits == o.splits;
  }
};

/// The H200's streaming multiprocessors: the model's default machine.
inline constexpr int64_t kH200Sms = 132;
/// Rows a decode GEMV serves better than any GEMM (the bandwidth-bound
/// skinny path keeps them).
inline constexpr int64_t kFp8GemvMaxRows = 8;
/// Split-K never goes past this many ways, nor below this many 128-column
/// blocks of K a split (each split fills its pipeline before it streams).
inline constexpr int64_t kMaxSplits = 8;
inline constexpr int64_t kMinBlocksPerSplit = 4;

/// Dynamic shared memory of a block of `tile` (Fp8GemmShared): 1024 bytes
/// of alignment slack, the stages' x and w tiles, a barrier pair a stage.
constexpr int64_t fp8GemmSharedBytes(const Fp8GemmTile &tile) {
  return 1024 + int64_t(tile.stages) * (tile.rows * 128 + 128 * 128) +
         16 * int64_t(tile.stages);
}

/// The most stages a block of `rows` fits in the 227 KiB a block may take.
constexpr int32_t fp8GemmMaxStages(int32_t rows) {
  int32_t stages = 1;
  while (fp8GemmSharedBytes({rows, 128, stages + 1, 1}) <= 227 * 1024)
    ++stages;
  return stages;
}

/// Whether `tile` is one the kernel template takes.
constexpr bool fp8GemmTileValid(const Fp8GemmTile &tile) {
  return (tile.rows == 64 || tile.rows == 128) && tile.columns == 128 &&
         tile.stages >= 2 && tile.stages <= fp8GemmMaxStages(tile.rows) &&
         tile.splits >= 1 && tile.splits <= kMaxSplits;
}

/// `cuda_tile`'s values, [rows, columns, stages, splits], as a tile the
/// kernel takes, or nullopt: the one reading of the attribute that
/// plan-specialize-library-kernels' check, the NVRTC instantiation and the
/// CUDA device's load share.
inline std::optional<Fp8GemmTile> fp8GemmTileFrom(const int64_t *values,
                                                  size_t count) {
  if (count != 4)
    return std::nullopt;
  Fp8GemmTile tile{int32_t(values[0]), int32_t(values[1]), int32_t(values[2]),
                   int32_t(values[3])};
  for (size_t i = 0; i < 4; ++i)
    if (values[i] != int64_t(int32_t(values[i])))
      return std::nullopt;
  if (!fp8GemmTileValid(tile))
    return std::nullopt;
  return tile;
}

/// What fp8GemmTileFrom accepts, for error messages.
inline std::string fp8GemmTileRule() {
  return "[rows 64 or 128, columns 128, stages 2-" +
         std::to_string(fp8GemmMaxStages(64)) + " (" +
         std::to_string(fp8GemmMaxStages(128)) +
         " beside 128 rows), splits 1-" + std::to_string(kMaxSplits) + "]";
}

/// Whether the FP8 GEMM takes a weight of these scale blocks at this K,
/// before the device's own conditions (e4m3 codes, alignment) and the
/// rows (more than kFp8GemvMaxRows): DeepSeek's 128 x 128 blocks (128
/// columns, a multiple of 128 rows) and K a multiple of 16. lm-tile
/// records tiles by it and CudaKernels::fp8GemmApplies runs by it.
constexpr bool fp8GemmWeightApplies(int64_t blockN, int64_t blockK, int64_t k) {
  return blockK == 128 && blockN > 0 && blockN % 128 == 0 && k > 0 &&
         k % 16 == 0;
}

/// The time the model predicts for `tile` on x [m, k] and w [n, k], in
/// microseconds on an H200-class part of `sms` SMs. The weight's stream
/// bounds these shapes (x is small and stays in L2): each block streams its
/// share of w, 16 KiB a 128-column block of K, at most at the rate one SM's
/// pipeline sustains (its MMA and folds a block of K: one warpgroup 42 KB
/// a microsecond, two 31.5; waves of blocks one after another), and w
/// comes from HBM once at most at the rate the kernel reaches (3.0 TB/s;
/// the copy probe gives 4.2). Many rows make the pipeline term the
/// tensor cores' (about 1,000 TFLOP/s over the waves).
/// A launch pays a fixed 4 us (x's quantization, the pipeline's fill, the
/// epilogue), a split also the sum's launch and the partials' round trip.
/// Fitted to `DaybreakKernelBench 20 fp8tiles` on the H200 (bench/NOTES.md,
/// session 23): at DeepSeek-V3.2's projections for 16, 64 and 128 rows its
/// choice is the fastest tile measured or within 2 us of it.
inline double fp8GemmMicroseconds(const Fp8GemmTile &tile, int64_t m, int64_t n,
                                  int64_t k, int64_t sms = kH200Sms) {
  constexpr double kHbmBytesPerUs = 3.0e6;
  constexpr double kFixedUs = 4.0, kSumLaunchUs = 2.0;
  const double blockBytesPerUs = tile.rows == 64 ? 42.0e3 : 31.5e3;
  const int64_t kBlocks = (k + 127) / 128, columnTiles = (n + 127) / 128;
  const int64_t blocks =
      columnTiles * ((m + tile.rows - 1) / tile.rows) * tile.splits;
  const int64_t waves = (blocks + sms - 1) / sms;
  const double splitBytes =
      double((kBlocks + tile.splits - 1) / tile.splits) * 128.0 * 128.0;
  // w once from HBM (the row tiles' later reads of it hit L2).
  const double stream =
      double(columnTiles) * double(kBlocks) * 128.0 * 128.0 / kHbmBytesPerUs;
  const double pipeline = double(waves) * splitBytes / blockBytesPerUs;
  double us = std::max(stream, pipeline) + kFixedUs;
  if (tile.splits > 1)
    us += kSumLaunchUs + 2.0 * double(tile.splits) * double(m) * double(n) *
                             4.0 / kHbmBytesPerUs;
  return us;
}

/// The stages of the library's own instantiations (daybreak_gemm_wg_fp8
/// and _rows64; CudaGemm.cuh spells the same counts): as many as fit beside
/// 64 rows; at 128 rows the 6 the kernel was first measured with (7 fit;
/// the session 23 sweep found no difference between 4, 6 and 9 at 64).
constexpr int32_t fp8GemmLibraryStages(int32_t rows) {
  return rows == 64 ? fp8GemmMaxStages(64) : fp8GemmMaxStages(128) - 1;
}

/// The model's choice for x [m, k] and w [n, k]: one MMA warpgroup a block
/// for up to 64 rows, two beyond; the library's stages; the split of K the
/// model predicts fastest (within 3 %, the fewer splits).
inline Fp8GemmTile chooseFp8GemmTile(int64_t m, int64_t n, int64_t k,
                                     int64_t sms = kH200Sms) {
  Fp8GemmTile best;
  best.rows = m <= 64 ? 64 : 128;
  best.stages = fp8GemmLibraryStages(best.rows);
  const int64_t kBlocks = (k + 127) / 128;
  double bestUs = fp8GemmMicroseconds(best, m, n, k, sms);
  for (int32_t splits = 2; splits <= kMaxSplits; ++splits) {
    if (kBlocks < int64_t(splits) * kMinBlocksPerSplit)
      break;
    Fp8GemmTile tile = best;
    tile.splits = splits;
    double us = fp8GemmMicroseconds(tile, m, n, k, sms);
    if (us < bestUs * 0.97) {
      best = tile;
      bestUs = us;
    }
  }
  return best;
}

/// How the decode expert GEMV (daybreak_expert_gemv_tc_*) streams its
/// weights: each lane's next K groups in registers with more requested into
/// L2 (Registers), or copied by cp.async into a ring of 4 or 8
/// shared-memory slots a warp (Ring4, Ring8), deeper than registers allow.
/// Auto: chooseExpertGemvStreaming decides per launch. The first three
/// index the kernels' tables.
enum class ExpertGemvStreaming { Registers, Ring4, Ring8, Auto };

/// Auto's choice for a launch of `tasks` (pair group, 64-row tile) tasks
/// when `ringBlocks` blocks of the 4-slot ring fit the GPU at once (its
/// shared memory holds it to 3 an SM, against 6 for the registers form;
/// the grid is never larger than that, each block taking its tasks in
/// turn) and chooseExpertGemvCluster splits the ring's K over clusters of
/// `ringCluster` blocks. The ring streams better a block, so it wins where
/// every block has one task (the grid is the tasks), at least two (a
/// round of tasks that only part of the blocks take costs at most a third
/// of the launch), or where the split evens out the partial round. Only
/// between one and two rounds unsplit does the registers form, whose
/// twice as many blocks take every task at once, win. Measured on the
/// H200 unsplit (session 31) and on the H100 split (session 40): this
/// picks the faster form in each case of bench/NOTES.md.
constexpr ExpertGemvStreaming
chooseExpertGemvStreaming(int64_t tasks, int64_t ringBlocks, int ringCluster) {
  return tasks <= ringBlocks || tasks >= 2 * ringBlocks || ringCluster > 1
             ? ExpertGemvStreaming::Ring4
             : ExpertGemvStreaming::Registers;
}

/// The largest cluster a ring form of the decode expert GEMV splits K over.
inline constexpr int kExpertGemvMaxCluster = 8;

/// The cluster size a ring form splits K over for a launch of `tasks`
/// tasks of `groups` K groups each, when `active[c]` clusters of c blocks
/// fit the GPU at once (c = 1 .. kExpertGemvMaxCluster; 0: that size does
/// not fit). The launch takes as long as its busiest cluster, whose blocks
/// each stream ceil(tasks / clusters) x ceil(groups / c) K groups, plus a
/// group's worth a task for the reduction when c > 1; the least of that,
/// a larger cluster only where it takes 3 % less. DeepSeek-V3.2's gate/up
/// at one token (576 tasks of 56 groups with the shared expert's slot) on
/// the 8-slot ring's 264 blocks: 3 whole tasks on some blocks and 2 on
/// others unsplit (168 groups against a mean of 122), 9 quarter tasks of
/// 14 groups on clusters of 4 (135).
inline int
chooseExpertGemvCluster(int64_t tasks, int64_t groups,
                        const int64_t (&active)[kExpertGemvMaxCluster + 1]) {
  int best = 1;
  if (tasks <= 0)
    return best;
  double bestCost = 0.0;
  for (int c = 1; c <= kExpertGemvMaxCluster && c <= groups; ++c) {
    if (active[c] <= 0)
      continue;
    const int64_t clusters = std::min(tasks, active[c]);
    const double cost = double((tasks + clusters - 1) / clusters) *
                        double((groups + c - 1) / c + (c > 1 ? 1 : 0));
    if (bestCost == 0.0 || cost < bestCost * 0.97) {
      best = c;
      bestCost = cost;
    }
  }
  return best;
}

} // namespace daybreak::cuda

#endif // DAYBREAK_RUNTIME_DEVICES_CUDA_GEMMTILES_H
