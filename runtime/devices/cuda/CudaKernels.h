//===- CudaKernels.h - Host launchers for the CUDA library kernels -*- C++
//-*-===//
//
// The CUDA counterparts of cpu::CpuKernels.h: one launcher per kernel, with
// the CPU kernel's parameters but device pointers and a stream. Each computes
// the grid, block and shared memory and enqueues the kernel (asynchronous:
// a Status reports launch errors only, never kernel results). The kernels
// live in CudaKernels.cu, compiled to PTX at build time and embedded here
// (cudaKernelsPtx()). No CUDA runtime: launches go through cuda::Driver.
//
// Data-dependent checks the CPU kernels make (ids, experts, slots,
// sequences, indices out of range) cannot fail on the GPU: the kernels skip
// or zero such rows (see each kernel's comment in CudaKernels.cu); the host
// validates inputs before a step. Arrays need only natural alignment.
//
// A CudaKernels holds the CUfunctions of one loaded module (it does not own
// the module); immutable after load, so thread-safe.
//
// Launchers taking `specialized` run that function instead of the generic
// kernel when it is not null: an instantiation of the kernel's template for
// this launch's shapes (the `_t` kernels of CudaKernels.cu, same parameters),
// compiled by NVRTC into the artifact's library module at compile time.
//
//===----------------------------------------------------------------------===//

#ifndef DAYBREAK_RUNTIME_DEVICES_CUDA_CUDAKERNELS_H
#define DAYBREAK_RUNTIME_DEVICES_CUDA_CUDAKERNELS_H

#include "Manifest.pb.h"
#include "runtime/abi/KernelAbi.h"
#include "runtime/core/KernelParams.h"
#include "runtime/devices/cuda/CudaDriver.h"
#include "runtime/devices/cuda/GemmTiles.h"
#include "runtime/support/Status.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace daybreak::cuda {

/// The PTX (sm_90a) of every kernel, NUL-terminated, for cuModuleLoadDataEx.
const char *cudaKernelsPtx();
/// The fingerprint of the kernel library's sources and of the launchers
/// written for them (SourceFingerprint.cmake: CudaKernels.cu, its .cuh
/// files, CudaKernels.cpp/.h): what an artifact's "library" code image
/// records (CodeImage.library_fingerprint), so that a runtime loads only
/// library code built from the sources its launchers match.
uint64_t cudaKernelsFingerprint();
/// An error naming both fingerprints unless `image` (a "library" code
/// image) records `expected`.
Status checkLibraryFingerprint(const artifact::CodeImage &image,
                               uint64_t expected);

/// cpu::CacheView with device memory: `base` holds the pages, `pageTable`
/// (0: identity) the int32 [batch * pagesPerSeq] page map. Rows follow the
/// CPU layout byte for byte (cpu::cacheBytesPerRow), so caches can be copied
/// between devices as is.
/// A weight in device memory as stored (the kernels' `Weight` argument in
/// CudaKernels.cu: same members, same layout): fp32, bf16, or e4m3 codes
/// scaled per blockN x blockK block by fp32 `scales`; stacked rows x cols
/// matrices (experts) follow each other. data 0: no weight.
struct DeviceWeight {
  CUdeviceptr data = 0;
  CUdeviceptr scales = 0;
  int64_t rows = 0, cols = 0, blockN = 0, blockK = 0;
  int32_t type = 0; ///< 0 F32, 1 BF16, 2 E4M3 (cpu::WeightType); 3 E2M1
                    ///< (scales: E8M0 bytes), mxfp4ExpertMatmul's alone
  int32_t pad = 0;

  static DeviceWeight f32(CUdeviceptr data) {
    DeviceWeight w;
    w.data = data;
    return w;
  }
};

/// cacheWrite's prologue: the parameters, the norm's weight and bias (a
/// layer norm's may be absent) and RoPE's positions [T].
struct CacheWritePrologueArgs {
  runtime::CacheWritePrologue params;
  DeviceWeight weight, bias;
  CUdeviceptr positions = 0;
};
static_assert(sizeof(DeviceWeight) == 56, "must match CudaKernels.cu's Weight");

/// dsaIndexerScores' query prologue: the rotation and its positions [T].
struct QueryRopeArgs {
  runtime::RopeParams params;
  CUdeviceptr positions = 0;
};

/// How a tensor-core decode GEMV (CudaKernels::tensorGemv) runs; 0 leaves a
/// choice to the launcher. Tests and the benchmark force the others.
struct TensorGemvChoice {
  int tiles = 0;   ///< 16-row tiles per warp: 1 or 2
  int cluster = 0; ///< blocks of a cluster splitting K: 1 to 16
};

/// How a matmul on a weight stored below fp32 (bf16, e4m3) takes its fp32
/// input (`daybreak-run --precision`). Exact by default: the products are
/// fp32 products (three 16-bit parts of x on the tensor cores). With bf16,
/// x is first rounded to bf16 (nearest even): the tensor-core GEMMs take
/// one part (a third of the mma), and the other paths read a rounded copy
/// made in `scratch` (at least the input's floats). An fp32 weight (the
/// routers the importer keeps in fp32) stays exact either way.
struct InputRounding {
  bool bf16 = false;
  CUdeviceptr scratch = 0;
  int64_t scratchFloats = 0;
  /// `--precision=fp8` (with bf16): inputs of e4m3 weights that
  /// runtime::fp8InputsApply names are quantized to FP8 instead (the FP8
  /// GEMMs where they apply, else a dequantized copy in the scratch).
  bool fp8 = false;
};

/// Which kernel CudaKernels::attention runs. Auto leaves the choice to the
/// launcher (the exact CUDA-core kernels); PreferTensorCores takes the
/// tensor cores wherever they apply and the launch does not split over
/// keys (prefill, on bf16 and fp8 caches: not the exact mode's precision,
/// see CudaAttention.cuh); tests and the benchmark force the others.
enum class AttentionPath {
  Auto,
  PreferTensorCores,
  CudaCores,   ///< daybreak_attention_prefill64 or daybreak_attention
               ///< (decode: daybreak_attention_decode or _split)
  TensorCores, ///< daybreak_attention_tc64 / _tc128 (an error where they
               ///< do not apply, see CudaKernels::tensorAttentionApplies)
};

/// Which tensor-core kernel CudaKernels::sparseAttention runs on the
/// tensor-core path. Auto takes the warpgroup kernel wherever it applies
/// (sparseMlaWgApplies) and the mma.sync kernel elsewhere; tests and the
/// benchmark force either (Warpgroups is an error where it does not apply).
enum class SparseMlaKernel {
  Auto,
  MmaSync,    ///< daybreak_sparse_mla_tc / _split
  Warpgroups, ///< daybreak_sparse_mla_wg / _split
};

struct DeviceCacheView {
  CUdeviceptr base = 0;
  runtime::CacheFormat format = runtime::CacheFormat::F32;
  int64_t width = 0;
  int64_t tailDim = 0;
  int64_t scaleBlock = 0;
  int64_t bytesPerRow = 0;
  int64_t batch = 0;
  int64_t maxSeqLen = 0;
  int64_t pageSize = 0;
  CUdeviceptr pageTable = 0;
  int64_t ringRows = 0; ///< a sliding-window ring's rows per slot, or 0
};

/// One layer's per-slot state on the device (see cpu::StateView).
struct DeviceState {
  CUdeviceptr base = 0;
  bool bf16 = false;
  int64_t slotBytes = 0;
  int64_t slots = 0;
};

/// The KDA scans' operands: q, k, g [T, H, Dk], v [T, H, Dv], beta [T, H].
struct DeviceKdaInputs {
  CUdeviceptr q = 0, k = 0, v = 0, g = 0, beta = 0;
};

/// Key dims the KDA kernels take (kKdaMaxKeyDim in CudaKda.cuh) and
/// short_conv's widths (kShortConvMaxWidth), as the ABI states them.
/// The largest k-pool daybreak_dsa_kpool tracks (kKpoolMaxPool in
/// CudaKpool.cuh).
inline constexpr int64_t kKpoolMaxPool = 64;
inline constexpr int64_t kKdaMaxKeyDim = abi::kCudaKdaMaxKeyDim,
                         kShortConvMaxWidth = abi::kCudaShortConvMaxWidth;

/// Residual streams the mHC kernels take (kMhcMaxStreams in CudaKernels.cu,
/// as cpu::kMhcMaxStreams): a thread keeps a column of every stream.
/// mhc_post_pre's fused kernel takes up to kMhcFusedStreams (wider
/// launches run mhc_post, then mhc_pre).
inline constexpr int64_t kMhcMaxStreams = 8, kMhcFusedStreams = 4;
/// mhc_pre's kernels (CudaKernels.cu): tokens a block and columns of the
/// flattened streams a chunk of daybreak_mhc_logits, which splits the
/// columns into a power of two of runs, up to kMhcMaxSplits, to reach the
/// target blocks (two per SM of an H200); input columns a daybreak_mhc_pre
/// block writes.
inline constexpr int64_t kMhcTileTokens = 8, kMhcChunkColumns = 256,
                         kMhcMaxSplits = 32, kMhcTargetBlocks = 264,
                         kMhcSliceColumns = 1024;
/// Scratch bytes that serve every mhc_pre and mhc_post_pre launch of up to
/// `tokens` tokens: (2 + n) n + 1 partial sums a token and split, where
/// splits are at most kMhcMaxSplits and the chunks, and splits x tiles
/// stays under the target blocks (or is one split a tile), so splits x
/// tokens <= kMhcTileTokens x kMhcTargetBlocks + tokens.
constexpr uint64_t mhcPreScratchBytes(int64_t tokens, int64_t n,
                                      int64_t width) {
  int64_t chunks = (n * width + kMhcChunkColumns - 1) / kMhcChunkColumns;
  chunks = chunks < 1 ? 1 : chunks < kMhcMaxSplits ? chunks : kMhcMaxSplits;
  int64_t cap = kMhcTileTokens * kMhcTargetBlocks + tokens;
  int64_t splitTokens = chunks * tokens < cap ? chunks * tokens : cap;
  return uint64_t(splitTokens) * uint64_t((2 + n) * n + 1) * sizeof(float);
}

/// Blocks a sparse attention launch aims for when it splits over the
/// selected rows: two per SM of an H200 (132 SMs).
inline constexpr int64_t kSparseAttentionTargetBlocks = 264;
/// Splits over the keys or selected rows an attention launch takes at most:
/// what daybreak_sparse_attention_combine holds (kSparseCombineMaxSplits in
/// CudaKernels.cu).
inline constexpr int64_t kAttentionMaxSplits = 64;
/// A sparse attention split's partial for one (token, head): its running
/// max, denominator and row count and a float of padding, then the valueDim
/// unnormalised accumulators, which so start 16 bytes into the partial: a
/// value dim that is a multiple of 4 keeps them 16-byte aligned, for the
/// tensor-core kernels' paired stores (kSparseHeaderFloats in
/// CudaKernels.cu).
inline constexpr int64_t kSparsePartialHeaderFloats = 4;
/// Scratch floats that serve every split a sparseAttention launch chooses:
/// splits x tokens x head groups stays under twice the target blocks, and a
/// head group holds at most 16 heads of a partial each.
constexpr int64_t sparseAttentionScratchFloats(int64_t valueDim) {
  return 2 * kSparseAttentionTargetBlocks * 16 *
         (valueDim + kSparsePartialHeaderFloats);
}

/// Query heads of one KV head that a dense attention block takes at most:
/// its threads keep 256 x 16 output values (heads x valueDim) in registers.
constexpr int64_t attentionHeadGroup(int64_t queryHeadsPerKv,
                                     int64_t valueDim) {
  int64_t fit = valueDim > 0 ? 256 * 16 / valueDim : 1;
  return queryHeadsPerKv < fit ? queryHeadsPerKv : fit;
}
/// Scratch floats that serve every split an attention launch chooses:
/// blocks x splits stays under twice the target blocks (as for sparse
/// attention), each block holding at most attentionHeadGroup heads of a
/// partial each (valueDim + kSparsePartialHeaderFloats floats).
constexpr int64_t attentionScratchFloats(int64_t queryHeadsPerKv,
                                         int64_t valueDim) {
  return 2 * kSparseAttentionTargetBlocks *
         attentionHeadGroup(queryHeadsPerKv, valueDim) *
         (valueDim + kSparsePartialHeaderFloats);
}

/// daybreak_attention_wide (CudaAttention.cuh): query heads a block, head
/// and value dims it takes at most, the query heads a KV head needs for it
/// to be chosen, and its shared memory (Q, a 32-key chunk of K at a stride
/// of 4 floats past a multiple of 32, and V's chunk unless V's rows are
/// K's).
inline constexpr int64_t kWideAttentionHeads = 32,
                         kWideAttentionMaxHeadDim = 576,
                         kWideAttentionMaxValueDim = 512,
                         kWideAttentionMinGroup = 16;
constexpr int64_t wideAttentionSharedBytes(int64_t headDim, int64_t valueDim,
                                           bool shareRows) {
  int64_t keyStride = headDim + (36 - headDim % 32) % 32;
  return 4 * (kWideAttentionHeads * headDim + 32 * keyStride +
              (shareRows ? 0 : 32 * valueDim));
}

/// Query heads of one KV head that a decode attention block takes at most
/// (kDecodeHeads in CudaAttention.cuh).
inline constexpr int64_t kDecodeAttentionHeads = 8;
/// Warps of a decode attention block (kDecodeWarps in CudaAttention.cuh).
inline constexpr int64_t kDecodeAttentionWarps = 4;
/// Scratch floats of a decode attention launch of `tokens` tokens that is
/// not split over keys: its per-head partials for the combining kernel.
/// (Splits it takes only as far as attentionScratchFloats allows.)
constexpr int64_t decodeAttentionScratchFloats(int64_t tokens, int64_t heads,
                                               int64_t valueDim) {
  return tokens * heads * (valueDim + kSparsePartialHeaderFloats);
}

/// RoPE: rows of one token a block rotates, and the rotated pairs
/// (dim / 2) it takes at most (kRopeRows, kRopeMaxPairs in CudaKernels.cu).
inline constexpr int64_t kRopeRows = 16, kRopeMaxPairs = 256;
/// Rows (tokens, or expert rows) of one tensor-core GEMM tile
/// (kGemmRows in CudaKernels.cu).
inline constexpr int64_t kTensorGemmRows = 64;
/// The fewest rows CudaKernels::warpgroupGemm takes under --precision=bf16
/// on an e4m3 weight (below, a 128-row tile is mostly empty and
/// tensorGemm's 64-row ones fill the GPU better). A bf16 weight takes it
/// past the GEMVs' 8 rows: streamed by the copy engine it reads at the
/// weight's bandwidth where tensorGemm does not (the LM head at a decode
/// batch of 64: bench/NOTES.md, session 23).
inline constexpr int64_t kWarpgroupGemmMinRows = 128;
inline constexpr int64_t kWarpgroupGemmMinRowsBf16 = 9;
/// The same in the exact default (x in three parts), for both weights:
/// past the GEMVs' 8 rows the three-part mma.sync GEMM is the slower even
/// on a mostly empty tile (e4m3 DeepSeek o_proj, 64 rows: 358 us against
/// 615; 16 rows: 361 against 535; bench/NOTES.md, session 45).
inline constexpr int64_t kWarpgroupGemmMinRowsExact = 9;
/// Experts a grouped tensor-core GEMM takes at most (the grouping kernel's
/// shared counters).
inline constexpr int64_t kTensorGemmMaxExperts = 4096;
/// Device scratch bytes a grouped expert matmul on the tensor cores needs
/// (CudaKernels::tensorExpertMatmul): the tile count, at most one partial
/// tile an expert beyond the full ones (int4 each), the rows ordered by
/// expert (int32), and with routing weights each row's result before the
/// weighted sum over slots ([tokens x slots, n] floats). It also serves
/// the decode expert GEMV of as many tokens (expertGemvScratchBytes is
/// never larger), so one buffer sized for a step's most tokens serves both.
constexpr int64_t expertGemmScratchBytes(int64_t tokens, int64_t slots,
                                         int64_t experts, int64_t n,
                                         bool routed) {
  int64_t rows = tokens * slots;
  int64_t tiles = (rows + kTensorGemmRows - 1) / kTensorGemmRows +
                  (experts < rows ? experts : rows);
  int64_t orderBytes = (rows * 4 + 15) / 16 * 16;
  return 16 + tiles * 16 + orderBytes + (routed ? rows * n * 4 : 0);
}

/// The most tokens the per-head GEMV takes (daybreak_head_gemv_bf16_*; more
/// take the per-head tensor-core GEMM).
inline constexpr int64_t kHeadGemvMaxTokens = 4;
/// Which kernel CudaKernels::headMatmul takes for a bf16 [H, N, K] weight
/// where the per-head GEMV applies (headGemvApplies): Auto, the GEMV for
/// exact x and the tensor-core GEMM for x rounded to bf16 (its one part of
/// x streams faster than the GEMV: bench/NOTES.md, session 40); or either
/// forced (the benchmark's and the tests' comparison).
enum class HeadMatmulKernel { Auto, Gemv, Gemm };
/// The decode expert GEMV on the tensor cores (CudaKernels::
/// tensorExpertGemv; daybreak_expert_gemv_tc_* in CudaKernels.cu): the
/// (token, slot) pairs a launch takes at most (each block groups them by
/// expert in shared memory), the weight rows of one task (kEgRows), and
/// the shared memory staging x's parts (kEgStageBytes).
inline constexpr int64_t kExpertGemvMaxPairs = 256, kExpertGemvRows = 64,
                         kExpertGemvStageBytes = 28 * 1024;
/// One ring slot of a warp (kEgRingSlotBytes in CudaKernels.cu): 32 lanes'
/// four 16-byte chunks and block scales.
inline constexpr int64_t kExpertGemvRingSlotBytes = 4 * 32 * 16 + 32 * 4;
/// A ring form's two buffers of a task's partial sums when a cluster
/// splits K (kEgPartialFloats in CudaKernels.cu: 64 rows x 8 pairs).
inline constexpr int64_t kExpertGemvPartialBytes = 2 * 64 * 8 * 4;
/// The dynamic shared memory of a decode expert GEMV block.
constexpr int64_t expertGemvSharedBytes(ExpertGemvStreaming streaming) {
  int64_t slots = streaming == ExpertGemvStreaming::Ring4   ? 4
                  : streaming == ExpertGemvStreaming::Ring8 ? 8
                                                            : 0;
  return kExpertGemvStageBytes + 4 * slots * kExpertGemvRingSlotBytes +
         (slots ? kExpertGemvPartialBytes : 0);
}
/// Which kernel CudaKernels::mxfp4ExpertMatmul takes: Auto, the grouped
/// warpgroup GEMM from kMxfp4WarpgroupMinPairs (token, slot) pairs where
/// it applies (mxfp4WarpgroupApplies, given its scratch), below that the
/// tensor-core GEMV where it applies (mxfp4ExpertGemvApplies: a decode
/// step's at most 256 pairs, K a multiple of 64) and mxfp4TensorPays, and
/// the CUDA cores elsewhere; or one forced (the benchmark's and the tests'
/// comparison; an error where it does not apply).
enum class Mxfp4Kernel { Auto, CudaCores, TensorCores, WarpgroupGemm };
/// The fewest (token, slot) pairs Mxfp4Kernel::Auto gives the warpgroup
/// GEMM (daybreak_expert_gemm_wg_e2m1*): past the tensor-core GEMV's
/// kExpertGemvMaxPairs, where only the CUDA cores remain.
inline constexpr int64_t kMxfp4WarpgroupMinPairs = 257;
/// The fewest pairs `kernel` gives the warpgroup GEMM: Auto's
/// kMxfp4WarpgroupMinPairs, any for the GEMM forced, none for another
/// kernel forced (CudaKernels::mxfp4ExpertMatmul's choice, and the scratch
/// CudaDevice::prepare plans for it).
inline int64_t mxfp4WarpgroupMinPairs(Mxfp4Kernel kernel) {
  return kernel == Mxfp4Kernel::WarpgroupGemm ? 1
         : kernel == Mxfp4Kernel::Auto        ? kMxfp4WarpgroupMinPairs
                                       : std::numeric_limits<int64_t>::max();
}
/// The time of the tensor-core MXFP4 GEMV for a distinct expert over that
/// of the CUDA-core kernel for a (token, slot) pair. The CUDA cores' cost
/// grows with the pairs (their FMAs: 5.6 us a pair at gpt-oss-120b's
/// gate/up, 2.9 at its down, on an H100), the tensor cores' with the
/// distinct experts however many pairs pick each (6.9 and 3.7 us): the two
/// measured even at 1.26 pairs a distinct expert (uniform routing, T = 16;
/// `DaybreakKernelBench 20 mxfp4`, bench/NOTES.md session 45).
inline constexpr double kMxfp4TensorCostPerPair = 1.25;
/// Mxfp4Kernel::Auto's rule: the tensor cores where the pairs a distinct
/// expert are expected to reach kMxfp4TensorCostPerPair. A step's routing
/// is known only on the device, so the distinct experts are those expected
/// of tokens routed uniformly, E (1 - (1 - slots / E)^tokens); a router
/// that concentrates its picks (as trained ones do) only makes the tensor
/// cores pay more. gpt-oss-120b (128 experts, top-4): from 16 tokens on;
/// gpt-oss-20b (32 experts): from 5.
inline bool mxfp4TensorPays(int64_t experts, int64_t tokens, int64_t slots) {
  if (experts <= 0 || tokens <= 0 || slots <= 0)
    return false;
  double share = std::min(1.0, double(slots) / double(experts));
  double distinct =
      double(experts) * (1.0 - std::pow(1.0 - share, double(tokens)));
  return double(tokens * slots) >= kMxfp4TensorCostPerPair * distinct;
}
/// daybreak_mxfp4_expert_matmul_staged's stages at most (kMxfp4MaxStages in
/// CudaKernels.cu bounds them), and the dynamic shared memory it opts into
/// (three blocks of the most an SM; gpt-oss's 52 KB blocks fit four, as the
/// kernel's 128 registers do).
inline constexpr int64_t kMxfp4Stages = 4, kMxfp4StagedSharedBytes = 72 * 1024;
/// The stages the staged CUDA-core MXFP4 kernel takes for experts of
/// [n, k] beside `sumsBytes` of a launch's partial sums and pair lists, or
/// 0 where it does not apply: each distinct expert's 8 rows of a block
/// (values, then scales) are one stage, contiguous and in 16-byte
/// multiples (n a multiple of 8, k of 64, values and scales 16-byte
/// `aligned`), and at least two stages must fit.
inline int64_t mxfp4StagedStages(int64_t n, int64_t k, int64_t sumsBytes,
                                 bool aligned) {
  constexpr int64_t kRows = 8; // kMxfp4Rows in CudaKernels.cu
  if (!aligned || n <= 0 || n % kRows != 0 || k <= 0 || k % 64 != 0)
    return 0;
  const int64_t stageBytes = kRows * (k / 2 + k / 32);
  const int64_t stages = std::min(
      kMxfp4Stages, (kMxfp4StagedSharedBytes - sumsBytes) / stageBytes);
  return stages >= 2 ? stages : 0;
}
/// The dynamic shared memory of a tensor-core MXFP4 GEMV block: the stage,
/// then each warp's transposition buffers (4 chunk sets of 144 words).
inline constexpr int64_t kExpertGemvE2m1SharedBytes =
    kExpertGemvStageBytes + 4 * 4 * 144 * 4;
/// Device scratch bytes the decode expert GEMV needs: with routing
/// weights each pair's result before daybreak_expert_combine adds a
/// token's slots ([tokens x slots, n] floats), else none.
constexpr int64_t expertGemvScratchBytes(int64_t tokens, int64_t slots,
                                         int64_t n, bool routed) {
  return routed ? tokens * slots * n * 4 : 0;
}

#define DAYBREAK_CUDA_KERNELS(X)                                               \
  X(embedding, "daybreak_embedding")                                           \
  X(rmsNorm, "daybreak_rms_norm")                                              \
  X(addRmsNorm, "daybreak_add_rms_norm")                                       \
  X(layerNorm, "daybreak_layer_norm")                                          \
  X(matmulTiled, "daybreak_matmul_tiled")                                      \
  X(matmulSmallM, "daybreak_matmul_small_m")                                   \
  X(matmulStoredTiled, "daybreak_matmul_stored_tiled")                         \
  X(gemvStored, "daybreak_gemv_stored")                                        \
  X(gemvE4m3, "daybreak_gemv_e4m3")                                            \
  X(gemvBf16, "daybreak_gemv_bf16")                                            \
  X(gemvE4m3M1, "daybreak_gemv_e4m3_m1")                                       \
  X(gemvBf16M1, "daybreak_gemv_bf16_m1")                                       \
  X(gemvE4m3M1Narrow, "daybreak_gemv_e4m3_m1_narrow")                          \
  X(gemvBf16M1Narrow, "daybreak_gemv_bf16_m1_narrow")                          \
  X(gemvTcE4m3M1T1, "daybreak_gemv_tc_e4m3_m1_t1")                             \
  X(gemvTcE4m3M1T2, "daybreak_gemv_tc_e4m3_m1_t2")                             \
  X(gemvTcE4m3M8T1, "daybreak_gemv_tc_e4m3_m8_t1")                             \
  X(gemvTcE4m3M8T2, "daybreak_gemv_tc_e4m3_m8_t2")                             \
  X(gemvTcBf16M1T1, "daybreak_gemv_tc_bf16_m1_t1")                             \
  X(gemvTcBf16M1T2, "daybreak_gemv_tc_bf16_m1_t2")                             \
  X(gemvTcBf16M8T1, "daybreak_gemv_tc_bf16_m8_t1")                             \
  X(gemvTcBf16M8T2, "daybreak_gemv_tc_bf16_m8_t2")                             \
  X(gemmTcBf16, "daybreak_gemm_tc_bf16")                                       \
  X(gemmTcE4m3, "daybreak_gemm_tc_e4m3")                                       \
  X(gemmTcE4m3K32, "daybreak_gemm_tc_e4m3_k32")                                \
  X(expertGemmTcBf16, "daybreak_expert_gemm_tc_bf16")                          \
  X(expertGemmTcE4m3, "daybreak_expert_gemm_tc_e4m3")                          \
  X(expertGemmTcE4m3K32, "daybreak_expert_gemm_tc_e4m3_k32")                   \
  X(gemmTcBf16X1, "daybreak_gemm_tc_bf16_x1")                                  \
  X(gemmTcE4m3X1, "daybreak_gemm_tc_e4m3_x1")                                  \
  X(gemmTcE4m3K32X1, "daybreak_gemm_tc_e4m3_k32_x1")                           \
  X(expertGemmTcBf16X1, "daybreak_expert_gemm_tc_bf16_x1")                     \
  X(expertGemmTcE4m3X1, "daybreak_expert_gemm_tc_e4m3_x1")                     \
  X(expertGemmTcE4m3K32X1, "daybreak_expert_gemm_tc_e4m3_k32_x1")              \
  X(roundBf16, "daybreak_round_bf16")                                          \
  X(gemmWgBf16, "daybreak_gemm_wg_bf16")                                       \
  X(gemmWgE4m3, "daybreak_gemm_wg_e4m3")                                       \
  X(gemmWgBf16X3, "daybreak_gemm_wg_bf16_x3")                                  \
  X(gemmWgE4m3X3, "daybreak_gemm_wg_e4m3_x3")                                  \
  X(gemmWgBf16X3Narrow, "daybreak_gemm_wg_bf16_x3_narrow")                     \
  X(splitBf16X3, "daybreak_split_bf16x3")                                      \
  X(toBf16, "daybreak_to_bf16")                                                \
  X(expertGemmWgBf16, "daybreak_expert_gemm_wg_bf16")                          \
  X(expertGemmWgE4m3, "daybreak_expert_gemm_wg_e4m3")                          \
  X(expertGemmWgE2m1, "daybreak_expert_gemm_wg_e2m1")                          \
  X(expertGemmWgE2m1X3, "daybreak_expert_gemm_wg_e2m1_x3")                     \
  X(gatherBf16, "daybreak_gather_bf16")                                        \
  X(gemmWgFp8, "daybreak_gemm_wg_fp8")                                         \
  X(gemmWgFp8Rows64, "daybreak_gemm_wg_fp8_rows64")                            \
  X(splitKSum, "daybreak_split_k_sum")                                         \
  X(quantFp8, "daybreak_quant_fp8")                                            \
  X(expertGemmWgFp8, "daybreak_expert_gemm_wg_fp8")                            \
  X(dsaIndexerTcE4m3, "daybreak_dsa_indexer_tc_e4m3")                          \
  X(dsaIndexerTcBf16, "daybreak_dsa_indexer_tc_bf16")                          \
  X(dsaIndexerTokensE4m3_64, "daybreak_dsa_indexer_tc_tokens_e4m3_64")         \
  X(dsaIndexerTokensE4m3_128, "daybreak_dsa_indexer_tc_tokens_e4m3_128")       \
  X(dsaIndexerTokensBf16_64, "daybreak_dsa_indexer_tc_tokens_bf16_64")         \
  X(dsaIndexerTokensBf16_128, "daybreak_dsa_indexer_tc_tokens_bf16_128")       \
  X(expertGemvTcE4m3, "daybreak_expert_gemv_tc_e4m3")                          \
  X(expertGemvTcBf16, "daybreak_expert_gemv_tc_bf16")                          \
  X(expertGemvTcE4m3Ring4, "daybreak_expert_gemv_tc_e4m3_ring4")               \
  X(expertGemvTcBf16Ring4, "daybreak_expert_gemv_tc_bf16_ring4")               \
  X(expertGemvTcE4m3Ring8, "daybreak_expert_gemv_tc_e4m3_ring8")               \
  X(expertGemvTcBf16Ring8, "daybreak_expert_gemv_tc_bf16_ring8")               \
  X(expertGroup, "daybreak_expert_group")                                      \
  X(expertCombine, "daybreak_expert_combine")                                  \
  X(headMatmul, "daybreak_head_matmul")                                        \
  X(headGemmTcBf16, "daybreak_head_gemm_tc_bf16")                              \
  X(headGemmTcBf16X1, "daybreak_head_gemm_tc_bf16_x1")                         \
  X(headGemvBf16C8, "daybreak_head_gemv_bf16_c8")                              \
  X(headGemvBf16C16, "daybreak_head_gemv_bf16_c16")                            \
  X(headGemvBf16C32, "daybreak_head_gemv_bf16_c32")                            \
  X(headGemvBf16C64, "daybreak_head_gemv_bf16_c64")                            \
  X(headGemvBf16C128, "daybreak_head_gemv_bf16_c128")                          \
  X(rope, "daybreak_rope")                                                     \
  X(swiglu, "daybreak_swiglu")                                                 \
  X(add, "daybreak_add")                                                       \
  X(moeRouteSigmoid, "daybreak_moe_route_sigmoid")                             \
  X(moeRouteSoftmaxTopK, "daybreak_moe_route_softmax_topk")                    \
  X(expertMatmul, "daybreak_expert_matmul")                                    \
  X(mxfp4ExpertMatmul, "daybreak_mxfp4_expert_matmul")                         \
  X(mxfp4ExpertMatmulStaged, "daybreak_mxfp4_expert_matmul_staged")            \
  X(expertGemvTcE2m1, "daybreak_expert_gemv_tc_e2m1")                          \
  X(mxfp4ToFp8Experts, "daybreak_mxfp4_to_fp8_experts")                        \
  X(cacheWrite, "daybreak_cache_write")                                        \
  X(cacheWriteRows, "daybreak_cache_write_rows")                               \
  X(dsaIndexerScores, "daybreak_dsa_indexer_scores")                           \
  X(dsaIndexSelect, "daybreak_dsa_index_select")                               \
  X(sparseAttention, "daybreak_sparse_attention")                              \
  X(sparseAttentionSplit, "daybreak_sparse_attention_split")                   \
  X(sparseAttentionCombine, "daybreak_sparse_attention_combine")               \
  X(sparseMlaTc, "daybreak_sparse_mla_tc")                                     \
  X(sparseMlaTcSplit, "daybreak_sparse_mla_tc_split")                          \
  X(sparseMlaWg, "daybreak_sparse_mla_wg")                                     \
  X(sparseMlaWgSplit, "daybreak_sparse_mla_wg_split")                          \
  X(attention, "daybreak_attention")                                           \
  X(attentionSplit, "daybreak_attention_split")                                \
  X(attentionDecode, "daybreak_attention_decode")                              \
  X(attentionPrefill64, "daybreak_attention_prefill64")                        \
  X(attentionTc64, "daybreak_attention_tc64")                                  \
  X(attentionTc128, "daybreak_attention_tc128")                                \
  X(attentionWide, "daybreak_attention_wide")                                  \
  X(shortConv, "daybreak_short_conv")                                          \
  X(shortConvState, "daybreak_short_conv_state")                               \
  X(kdaGate, "daybreak_kda_gate")                                              \
  X(kdaCount, "daybreak_kda_count")                                            \
  X(kdaOrder, "daybreak_kda_order")                                            \
  X(kdaIntra, "daybreak_kda_intra")                                            \
  X(kdaInter, "daybreak_kda_inter")                                            \
  X(kdaStep, "daybreak_kda_step")                                              \
  X(gatedRmsNorm, "daybreak_gated_rms_norm")                                   \
  X(mhcLogits, "daybreak_mhc_logits")                                          \
  X(mhcLogitsWide, "daybreak_mhc_logits_wide")                                 \
  X(mhcPre, "daybreak_mhc_pre")                                                \
  X(mhcPreNorm, "daybreak_mhc_pre_norm")                                       \
  X(mhcPostLogits, "daybreak_mhc_post_logits")                                 \
  X(mhcPost, "daybreak_mhc_post")                                              \
  X(dsaKpool, "daybreak_dsa_kpool")                                            \
  X(dsaKpoolTail, "daybreak_dsa_kpool_tail")                                   \
  X(dsaKpoolExpand, "daybreak_dsa_kpool_expand")                               \
  X(divScalarI32, "daybreak_div_scalar_i32")                                   \
  X(copyColumns, "daybreak_copy_columns")                                      \
  X(causalBounds, "daybreak_causal_bounds")                                    \
  X(localExperts, "daybreak_local_experts")

class CudaKernels {
public:
  /// Resolves every kernel of `module` (loaded from cudaKernelsPtx()); the
  /// driver and module must outlive the result.
  static StatusOr<CudaKernels> load(const Driver &driver, CUmodule module);

  Status embedding(CUdeviceptr table, int64_t vocab, int64_t dim,
                   CUdeviceptr ids, int64_t tokens, CUdeviceptr out,
                   CUstream stream) const;
  Status embedding(const DeviceWeight &table, int64_t vocab, int64_t dim,
                   CUdeviceptr ids, int64_t tokens, CUdeviceptr out,
                   CUstream stream) const;
  /// `specialized`: daybreak_rms_norm_t<dim>.
  Status rmsNorm(CUdeviceptr x, CUdeviceptr weight, int64_t rows, int64_t dim,
                 double eps, CUdeviceptr out, CUstream stream,
                 CUfunction specialized = nullptr) const;
  /// Rows of x and out xStride and outStride floats apart (0: dim; column
  /// views).
  Status rmsNorm(CUdeviceptr x, const DeviceWeight &weight, int64_t rows,
                 int64_t dim, double eps, CUdeviceptr out, CUstream stream,
                 CUfunction specialized = nullptr, int64_t xStride = 0,
                 int64_t outStride = 0) const;
  /// sum = x + residual and out = rms_norm(sum) with `weight` (may be
  /// null), rows of dim floats (lm.add_rms_norm); `specialized`:
  /// daybreak_add_rms_norm_t<dim>.
  Status addRmsNorm(CUdeviceptr x, CUdeviceptr residual,
                    const DeviceWeight &weight, int64_t rows, int64_t dim,
                    double eps, CUdeviceptr sum, CUdeviceptr out,
                    CUstream stream, CUfunction specialized = nullptr) const;
  Status layerNorm(CUdeviceptr x, CUdeviceptr weight, CUdeviceptr bias,
                   int64_t rows, int64_t dim, double eps, CUdeviceptr out,
                   CUstream stream) const;
  /// Rows of x and out xStride and outStride floats apart (0: dim; column
  /// views).
  Status layerNorm(CUdeviceptr x, const DeviceWeight &weight,
                   const DeviceWeight &bias, int64_t rows, int64_t dim,
                   double eps, CUdeviceptr out, CUstream stream,
                   int64_t xStride = 0, int64_t outStride = 0) const;
  /// m <= 8 takes the decode path (a warp per output column), else 64x64
  /// tiles. The tiling hint of the CPU kernel has no GPU meaning.
  /// `specialized` (daybreak_matmul_small_m_t<k>) serves the decode path.
  Status matmul(CUdeviceptr x, CUdeviceptr w, CUdeviceptr bias, int64_t m,
                int64_t n, int64_t k, CUdeviceptr out, CUstream stream,
                CUfunction specialized = nullptr) const;
  /// The same on a stored weight [N, K] and bias. An fp32 weight and bias
  /// take the fp32 kernels above (and `specialized`); otherwise m <= 8 takes
  /// tensorGemv where it applies (e4m3; bf16 for m > 1, and for m = 1 when
  /// N is too small for the CUDA-core kernel to fill the GPU), then
  /// daybreak_gemv_e4m3 / _bf16 (16-byte loads, widened in registers) where
  /// the shapes allow, else daybreak_gemv_stored; larger m warpgroupGemm
  /// with `rounding.bf16` where it applies, else tensorGemm where it
  /// applies, else the stored 64x64 tiles (CUDA cores). With
  /// `rounding.fp8` on a weight fp8InputsApply names: fp8Gemm past
  /// kFp8GemvMaxRows rows (on `tile`, with `specialized` its compiled
  /// instantiation where `tile` is given), else x quantized
  /// (fp8Dequantized) and the one-part tensorGemm past 8 rows or the paths
  /// above. `constantWeight`: see tensorGemv.
  Status matmul(CUdeviceptr x, const DeviceWeight &w, const DeviceWeight &bias,
                int64_t m, int64_t n, int64_t k, CUdeviceptr out,
                CUstream stream, CUfunction specialized = nullptr,
                bool constantWeight = false, const InputRounding &rounding = {},
                const Fp8GemmTile *tile = nullptr) const;
  /// out[i] = bf16(x[i]) (nearest even) for i < n: the rounded copy of
  /// InputRounding.
  Status roundBf16(CUdeviceptr x, int64_t n, CUdeviceptr out,
                   CUstream stream) const;
  /// `x` itself, or, where `rounding` asks for bf16 on a weight of `type`
  /// (not fp32), its rounded copy in the rounding's scratch (an error when
  /// `n` floats do not fit).
  StatusOr<CUdeviceptr> roundedInput(CUdeviceptr x, int64_t n, int32_t type,
                                     const InputRounding &rounding,
                                     CUstream stream) const;
  /// Whether tensorGemv runs this weight and shape: m in 1..8; e4m3 with k
  /// a multiple of 128, blockK of 128 and blockN of 16, or bf16 with k a
  /// multiple of 64.
  static bool tensorGemvApplies(const DeviceWeight &w, int64_t m, int64_t k);
  /// The decode matmul on the tensor cores (daybreak_gemv_tc_*, see
  /// CudaKernels.cu), exact products and fp32 sums; an error where
  /// tensorGemvApplies is false or `choice` cannot run. `constantWeight`:
  /// no kernel writes `w` or its scales (a weight uploaded at load), so,
  /// with programmatic launches on, the GEMV is launched as a programmatic
  /// dependent of the kernel before it on the stream: it streams its first
  /// weights while that kernel finishes, and reads x and the bias and
  /// writes `out` only after it has completed (stream capture records a
  /// programmatic graph edge, CUDA 12.3 and later).
  Status tensorGemv(CUdeviceptr x, const DeviceWeight &w,
                    const DeviceWeight &bias, int64_t m, int64_t n, int64_t k,
                    CUdeviceptr out, CUstream stream,
                    TensorGemvChoice choice = {},
                    bool constantWeight = false) const;
  /// Whether tensorGemm runs this weight: K a multiple of 16, the weight
  /// 16-byte aligned, and bf16 or e4m3 with blockK 32 or a multiple of 64.
  static bool tensorGemmApplies(const DeviceWeight &w, int64_t k);
  /// The many-row matmul on the tensor cores (daybreak_gemm_tc_*, see
  /// CudaKernels.cu): exact products and fp32 sums, as tensorGemv, any m;
  /// with `bf16Input`, the products of bf16(x) (the _x1 kernels).
  /// An error where tensorGemmApplies is false or x is not 16-byte aligned.
  Status tensorGemm(CUdeviceptr x, const DeviceWeight &w,
                    const DeviceWeight &bias, int64_t m, int64_t n, int64_t k,
                    CUdeviceptr out, CUstream stream,
                    bool bf16Input = false) const;
  /// Whether matmul takes warpgroupGemm for this many-row matmul (exact:
  /// given the scratch of warpgroupGemmScratchFloats): a bf16 weight with K
  /// a multiple of 8, or e4m3 with K a multiple of 16, blockN of 128 and
  /// blockK of 64 (DeepSeek's 128 x 128 blocks) (16-byte rows for the copy
  /// engine), the weight 16-byte aligned, and at least
  /// kWarpgroupGemmMinRows rows (kWarpgroupGemmMinRowsBf16 for a bf16
  /// weight; kWarpgroupGemmMinRowsExact for either without `bf16`: x in
  /// three parts).
  static bool warpgroupGemmApplies(const DeviceWeight &w, int64_t m, int64_t k,
                                   bool bf16 = true);
  /// The floats of scratch warpgroupGemm takes for x [m, k]: its bf16
  /// codes (`bf16`: `--precision=bf16`), or its three bf16 parts (exact).
  static int64_t warpgroupGemmScratchFloats(int64_t m, int64_t k, bool bf16) {
    return bf16 ? (m * k + 1) / 2 : (3 * m * k + 1) / 2;
  }
  /// The floats of InputRounding scratch matmul() takes for this launch in
  /// the exact default (no rounding): x's three bf16 parts where the exact
  /// warpgroupGemm applies (x 16-byte aligned: `xAligned`), else none.
  /// matmul() takes that path only given at least this much.
  static int64_t exactMatmulScratchFloats(const DeviceWeight &w, int64_t m,
                                          int64_t k, bool xAligned) {
    return xAligned && warpgroupGemmApplies(w, m, k, /*bf16=*/false)
               ? warpgroupGemmScratchFloats(m, k, /*bf16=*/false)
               : 0;
  }
  /// The floats of InputRounding scratch that matmul() with `rounding.bf16`
  /// uses for this launch (`xAligned`: x 16-byte aligned): x rounded to
  /// bf16 codes for warpgroupGemm, x rounded as fp32 for the paths without
  /// rounding of their own, none for tensorGemm; with `fp8`, what fp8Gemm
  /// takes with `tile` (fp8GemmTile's where null), or the copy of x.
  int64_t matmulRoundingFloats(const DeviceWeight &w, int64_t m, int64_t n,
                               int64_t k, bool xAligned, bool fp8 = false,
                               const Fp8GemmTile *tile = nullptr) const;
  /// out = bf16(x) . w^T (+ bias) on the warpgroup MMA (daybreak_gemm_wg_*,
  /// CudaGemm.cuh): x rounded to bf16 codes in `rounding.scratch`, read with
  /// the weight by the tensor copy engine; without `rounding.bf16`, out =
  /// x . w^T with fp32 products, x split exactly into three bf16 parts
  /// there (daybreak_gemm_wg_*_x3). An error where warpgroupGemmApplies is
  /// false (but for the row minimum), x is not 16-byte aligned, or the
  /// scratch is short of warpgroupGemmScratchFloats.
  Status warpgroupGemm(CUdeviceptr x, const DeviceWeight &w,
                       const DeviceWeight &bias, int64_t m, int64_t n,
                       int64_t k, CUdeviceptr out, CUstream stream,
                       const InputRounding &rounding) const;
  /// Whether `--precision=bf16` takes warpgroupExpertMatmul for a grouped
  /// expert matmul of more than 8 tokens (expertMatmul, given the scratch
  /// of expertGemmScratchBytes): the weight as warpgroupGemmApplies, at
  /// least kWarpgroupGemmMinRows (token, slot) rows, at most
  /// kTensorGemmMaxExperts experts, and experts x n rows that the copy
  /// engine's 32-bit coordinates reach.
  static bool warpgroupExpertGemmApplies(const DeviceWeight &w, int64_t experts,
                                         int64_t n, int64_t k, int64_t tokens,
                                         int64_t slots);
  /// The floats of InputRounding scratch expertMatmul with `rounding.bf16`
  /// uses for this launch (`xAligned`: x 16-byte aligned), given the
  /// expertGemmScratchBytes scratch: the gathered x in bf16 codes for
  /// warpgroupExpertMatmul, none for tensorExpertMatmul, else x rounded as
  /// fp32.
  static int64_t expertRoundingFloats(const DeviceWeight &w, int64_t experts,
                                      int64_t n, int64_t k, int64_t tokens,
                                      int64_t slots, bool perSlotInput,
                                      bool xAligned, bool fp8 = false);
  /// Whether `--precision=fp8` quantizes the input of a matmul on this
  /// weight to FP8: e4m3 where runtime::fp8InputsApply holds.
  static bool fp8InputsApply(const DeviceWeight &w);
  /// x [rows, k] quantized to FP8 and written back as fp32 values (code x
  /// scale, exact) into `rounding.scratch`: the input of the paths that
  /// take fp32, under `--precision=fp8`. An error where k is not a
  /// multiple of 16, x is not 16-byte aligned or rows k floats do not fit.
  StatusOr<CUdeviceptr> fp8Dequantized(CUdeviceptr x, int64_t rows, int64_t k,
                                       const InputRounding &rounding,
                                       CUstream stream) const;
  /// The grouped expert matmul with FP8 inputs (`--precision=fp8`, more
  /// than 8 tokens, at least 128 rows): as warpgroupExpertMatmul, but the
  /// gathered rows are quantized to FP8 (daybreak_quant_fp8 with the
  /// order) into `rounding.scratch` (fp8GemmScratchFloats of the rows) and
  /// daybreak_expert_gemm_wg_fp8 multiplies them on the fp8 MMA. An error
  /// where fp8GemmApplies is false, experts x n rows exceed the copy
  /// engine's coordinates, x is not 16-byte aligned or a scratch is short.
  Status fp8ExpertMatmul(CUdeviceptr x, bool perSlotInput,
                         const DeviceWeight &w, int64_t experts, int64_t n,
                         int64_t k, CUdeviceptr indices, int64_t tokens,
                         int64_t slots, CUdeviceptr routingWeights,
                         CUdeviceptr out, CUstream stream,
                         const DeviceWeight &bias, CUdeviceptr scratch,
                         int64_t scratchBytes,
                         const InputRounding &rounding) const;
  /// The grouped expert matmul on the warpgroup MMA (`--precision=bf16`):
  /// daybreak_expert_group orders the (token, slot) rows by expert into
  /// tiles of at most 128 in `scratch` (expertGemmScratchBytes),
  /// daybreak_gather_bf16 writes their x rows in that order as bf16 codes
  /// into `rounding.scratch`, daybreak_expert_gemm_wg_* multiplies each
  /// tile by its expert's rows (read by the copy engine from all experts'
  /// weights as one matrix) and writes each row once, and with routing
  /// weights daybreak_expert_combine adds each token's slots in slot
  /// order. An error where warpgroupExpertGemmApplies is false (but for the
  /// row minimum), x is not 16-byte aligned or a scratch is short.
  Status warpgroupExpertMatmul(CUdeviceptr x, bool perSlotInput,
                               const DeviceWeight &w, int64_t experts,
                               int64_t n, int64_t k, CUdeviceptr indices,
                               int64_t tokens, int64_t slots,
                               CUdeviceptr routingWeights, CUdeviceptr out,
                               CUstream stream, const DeviceWeight &bias,
                               CUdeviceptr scratch, int64_t scratchBytes,
                               const InputRounding &rounding) const;
  /// Whether fp8Gemm runs this weight: e4m3 of blockK 128 and blockN a
  /// multiple of 128 (DeepSeek's 128 x 128 blocks), K a multiple of 16,
  /// the weight 16-byte aligned.
  static bool fp8GemmApplies(const DeviceWeight &w, int64_t k);
  /// The floats of scratch fp8Gemm takes for x [m, k]: its e4m3 codes (m k
  /// bytes, to a multiple of 16) then its scales (m ceil(k / 128) floats,
  /// to a multiple of 4), then with `splits` > 1 the partial sums
  /// [splits, m, n].
  static int64_t fp8GemmScratchFloats(int64_t m, int64_t k, int64_t n = 0,
                                      int64_t splits = 1);
  /// The FP8 GEMM's tile for x [m, k] and w [n, k] on this GPU when the
  /// launch carries none (chooseFp8GemmTile at its SMs).
  Fp8GemmTile fp8GemmTile(int64_t m, int64_t n, int64_t k) const {
    return chooseFp8GemmTile(m, n, k, multiprocessors);
  }
  /// out = x . w^T (+ bias) with both operands in FP8, DeepGEMM's block
  /// scaling: daybreak_quant_fp8 writes x as e4m3 codes with a power-of-two
  /// scale a row and 128 columns into `scratch` (fp8GemmScratchFloats), and
  /// daybreak_gemm_wg_fp8 multiplies them with the weight's codes on the
  /// fp8 warpgroup MMA, each 128 columns' sums folded into fp32 with both
  /// scales (CudaGemm.cuh); with K split, daybreak_split_k_sum adds the
  /// partials. `tile` is the configuration (fp8GemmTile's where null);
  /// `specialized` the compiler's instantiation of the kernel for it, else
  /// the library's entry of its rows, which takes only the library's
  /// stages. An error where fp8GemmApplies is false, x is not 16-byte
  /// aligned, the tile is not one the kernel takes, or the scratch is
  /// short.
  Status fp8Gemm(CUdeviceptr x, const DeviceWeight &w, const DeviceWeight &bias,
                 int64_t m, int64_t n, int64_t k, CUdeviceptr out,
                 CUstream stream, const InputRounding &scratch,
                 const Fp8GemmTile *tile = nullptr,
                 CUfunction specialized = nullptr) const;
  /// The tiles and cluster size tensorGemv picks for this shape (tiles 0:
  /// none fits), for the benchmark's report.
  TensorGemvChoice tensorGemvChoice(const DeviceWeight &w, int64_t m, int64_t n,
                                    int64_t k) const;
  /// Launches `function` as a programmatic dependent of the kernel before
  /// it on the stream (when programmatic launches are on; else as an
  /// ordinary kernel): for kernels that wait for their predecessor before
  /// touching a buffer (beginDependent() in CudaKernels.cu, the generated
  /// kernels' first instructions), so that their launch overlaps the tail
  /// of the kernel before.
  Status launchDependent(CUfunction function, const char *name, int64_t gridX,
                         int64_t gridY, int64_t gridZ, unsigned block,
                         unsigned sharedBytes, CUstream stream,
                         void **params) const;
  /// A copy with programmatic launches on or off (the benchmark times
  /// both); load() turns them on unless DAYBREAK_CUDA_PDL=0.
  CudaKernels withProgrammaticLaunch(bool on) const {
    CudaKernels copy = *this;
    copy.programmatic = on;
    return copy;
  }
  /// The same kernels with the decode expert GEMV streaming its weights
  /// as `streaming` says (the benchmark's and the tests' comparison;
  /// Auto, the default, chooses per launch).
  CudaKernels withExpertGemvStreaming(ExpertGemvStreaming streaming) const {
    CudaKernels copy = *this;
    copy.expertGemvStreaming = streaming;
    return copy;
  }
  /// The same kernels with headMatmul taking `kernel` where the per-head
  /// GEMV applies (Auto, the default: HeadMatmulKernel's rule).
  CudaKernels withHeadMatmulKernel(HeadMatmulKernel kernel) const {
    CudaKernels copy = *this;
    copy.headMatmulKernel = kernel;
    return copy;
  }
  /// The same kernels with mxfp4ExpertMatmul taking `kernel` (Auto, the
  /// default: Mxfp4Kernel's rule).
  CudaKernels withMxfp4Kernel(Mxfp4Kernel kernel) const {
    CudaKernels copy = *this;
    copy.mxfp4Kernel = kernel;
    return copy;
  }
  /// The same kernels with the CUDA-core MXFP4 kernel taking its staged
  /// form (the copy engine bringing each expert's rows into shared memory)
  /// wherever it applies (true), or never (false, the default: on an H100
  /// it equals the unstaged form bit for bit, and at gpt-oss-120b's shapes
  /// is 6-22 % slower at 1 to 8 tokens and level at 64, bench/NOTES.md
  /// session 51; the tests and the benchmark force both).
  CudaKernels withMxfp4Staging(bool staged) const {
    CudaKernels copy = *this;
    copy.mxfp4Staged = staged;
    return copy;
  }
  /// The same kernels with the ring forms of the decode expert GEMV split
  /// over clusters of `cluster` blocks where that size fits the GPU and K
  /// (1: never split; 0, the default: chooseExpertGemvCluster decides).
  CudaKernels withExpertGemvCluster(int cluster) const {
    CudaKernels copy = *this;
    copy.expertGemvCluster = cluster;
    return copy;
  }
  Status headMatmul(CUdeviceptr x, CUdeviceptr w, bool transposeWeight,
                    int64_t tokens, int64_t heads, int64_t k, int64_t n,
                    CUdeviceptr out, CUstream stream) const;
  /// Per-head matmul (lm.head_matmul): x [T, H, K] times head h's matrix
  /// of w ([H, K, N], or [H, N, K] with transposeWeight) into out [T, H, N].
  /// A bf16 [H, N, K] weight (headGemmApplies) takes the per-head GEMV
  /// where it applies (headGemvApplies; fp32 FMAs on the widened weights)
  /// and headMatmulKernel picks it, else the tensor-core GEMM, x split
  /// exactly in three parts; both round x to bf16 in the kernel under
  /// rounding.bf16. Unless !tensorCores (tests), and for other weights: the
  /// CUDA-core kernel, on x rounded into the scratch as `rounding` says
  /// (headMatmulRoundingFloats).
  /// Each (token, head) row of x and out xStride and outStride floats
  /// apart (0: k and n; column views).
  Status headMatmul(CUdeviceptr x, const DeviceWeight &w, bool transposeWeight,
                    int64_t tokens, int64_t heads, int64_t k, int64_t n,
                    CUdeviceptr out, CUstream stream,
                    const InputRounding &rounding = {}, bool tensorCores = true,
                    int64_t xStride = 0, int64_t outStride = 0) const;
  /// Whether rows of x `xStride` floats apart from `x` are 16-byte aligned
  /// (the tensor-core GEMM's loads).
  static bool headRowsAligned(CUdeviceptr x, int64_t xStride);
  /// Whether headMatmul takes the tensor cores: a bf16 [H, N, K] weight,
  /// K a multiple of 16, x and the weight 16-byte aligned.
  static bool headGemmApplies(const DeviceWeight &w, bool transposeWeight,
                              int64_t k, bool xAligned);
  /// Whether the per-head GEMV can take it instead: 1 to
  /// kHeadGemvMaxTokens tokens and K of 8 x 2^i, 64 to 1024.
  static bool headGemvApplies(const DeviceWeight &w, bool transposeWeight,
                              int64_t tokens, int64_t k, bool xAligned);
  /// The rounding scratch (floats) headMatmul needs under --precision=bf16.
  static int64_t headMatmulRoundingFloats(const DeviceWeight &w,
                                          bool transposeWeight, int64_t tokens,
                                          int64_t heads, int64_t k,
                                          bool xAligned, int64_t xStride = 0);
  /// In place.
  Status rope(CUdeviceptr x, CUdeviceptr positions, int64_t tokens,
              int64_t rowsPerToken, int64_t rowDim,
              const runtime::RopeParams &params, CUstream stream) const;
  /// From x into out (x may be out), rows where xRows and outRows place
  /// them (column views; rows of heads); the columns outside the rotated
  /// slice copied.
  Status rope(CUdeviceptr x, runtime::RopeRows xRows, CUdeviceptr out,
              runtime::RopeRows outRows, CUdeviceptr positions, int64_t tokens,
              int64_t rowsPerToken, int64_t rowDim,
              const runtime::RopeParams &params, CUstream stream) const;
  Status swiglu(CUdeviceptr gate, CUdeviceptr up, int64_t n, double alpha,
                bool hasLimit, double limit, double upOffset, CUdeviceptr out,
                CUstream stream) const;
  Status add(CUdeviceptr a, CUdeviceptr b, int64_t n, CUdeviceptr out,
             CUstream stream) const;
  /// Errors (before launching) when numGroups > 64.
  Status moeRouteSigmoid(CUdeviceptr logits, CUdeviceptr bias, int64_t tokens,
                         int64_t experts, const runtime::RouteParams &p,
                         CUdeviceptr indices, CUdeviceptr weights,
                         CUstream stream) const;
  /// cpu::moeRouteSoftmaxTopK on the device; errors (before launching)
  /// past 1024 experts.
  Status moeRouteSoftmaxTopK(CUdeviceptr logits, CUdeviceptr bias,
                             int64_t tokens, int64_t experts,
                             const runtime::RouteParams &p,
                             CUdeviceptr indices, CUdeviceptr weights,
                             CUstream stream) const;
  Status expertMatmul(CUdeviceptr x, bool perSlotInput, CUdeviceptr w,
                      int64_t experts, int64_t n, int64_t k,
                      CUdeviceptr indices, int64_t tokens, int64_t slots,
                      CUdeviceptr routingWeights, CUdeviceptr out,
                      CUstream stream) const;
  /// With stored weights (e4m3 in any block size) and an optional `bias`
  /// [E, N] (data 0: none). 1 to 8 tokens take tensorExpertGemv where it
  /// applies (and, with routing weights, `scratch` holds
  /// expertGemvScratchBytes); more than 8 take, where `scratch` holds
  /// expertGemmScratchBytes (device memory, `scratchBytes` long, no other
  /// use during the launch), warpgroupExpertMatmul with `rounding.bf16`
  /// where warpgroupExpertGemmApplies, else tensorExpertMatmul where it
  /// applies; the rest cudaCoreExpertMatmul. With `rounding.fp8` on a
  /// weight fp8InputsApply names: fp8ExpertMatmul past 8 tokens and from
  /// 128 rows, else x quantized (fp8Dequantized) and the paths above.
  Status expertMatmul(CUdeviceptr x, bool perSlotInput, const DeviceWeight &w,
                      int64_t experts, int64_t n, int64_t k,
                      CUdeviceptr indices, int64_t tokens, int64_t slots,
                      CUdeviceptr routingWeights, CUdeviceptr out,
                      CUstream stream,
                      const DeviceWeight &bias = DeviceWeight(),
                      CUdeviceptr scratch = 0, int64_t scratchBytes = 0,
                      const InputRounding &rounding = {}) const;
  /// daybreak_expert_matmul, any weight and shape: a warp per output
  /// column and token on the CUDA cores, each (token, slot) reading its
  /// expert's rows (an expert two tokens pick is read twice). The fallback,
  /// and the benchmark's baseline.
  Status cudaCoreExpertMatmul(CUdeviceptr x, bool perSlotInput,
                              const DeviceWeight &w, int64_t experts, int64_t n,
                              int64_t k, CUdeviceptr indices, int64_t tokens,
                              int64_t slots, CUdeviceptr routingWeights,
                              CUdeviceptr out, CUstream stream,
                              const DeviceWeight &bias) const;
  /// Whether tensorExpertGemv runs this weight and step: 1 to 8 tokens of
  /// at most kExpertGemvMaxPairs (token, slot) pairs, the weight 16-byte
  /// aligned and as tensorGemvApplies (e4m3 with k a multiple of 128,
  /// blockK of 128 and blockN of 16, or bf16 with k a multiple of 64), N
  /// under 2^24 and the scale index under 2^31.
  static bool tensorExpertGemvApplies(const DeviceWeight &w, int64_t experts,
                                      int64_t n, int64_t k, int64_t tokens,
                                      int64_t slots);
  /// The decode expert matmul on the tensor cores (daybreak_expert_gemv_tc_*,
  /// see CudaKernels.cu): every block groups the (token, slot) pairs by
  /// expert, each picked expert's rows are read once for all its pairs,
  /// exact products and fp32 sums as tensorGemv; each pair's result is
  /// written once (deterministic), and with routing weights into `scratch`
  /// (expertGemvScratchBytes), then daybreak_expert_combine adds each
  /// token's slots in slot order. An error where tensorExpertGemvApplies
  /// is false, x is not 16-byte aligned, experts < 1 or the scratch is too
  /// small.
  Status tensorExpertGemv(CUdeviceptr x, bool perSlotInput,
                          const DeviceWeight &w, int64_t experts, int64_t n,
                          int64_t k, CUdeviceptr indices, int64_t tokens,
                          int64_t slots, CUdeviceptr routingWeights,
                          CUdeviceptr out, CUstream stream,
                          const DeviceWeight &bias, CUdeviceptr scratch,
                          int64_t scratchBytes) const;
  /// The grouped expert matmul on the tensor cores: daybreak_expert_group
  /// orders the (token, slot) rows by expert into tiles of at most 64 in
  /// `scratch`, the tensor-core GEMM multiplies each tile by its expert
  /// (rows written once each: deterministic), and with routing weights
  /// daybreak_expert_combine adds each token's slots in slot order. An
  /// error where tensorGemmApplies is false, x is not 16-byte aligned,
  /// experts exceed kTensorGemmMaxExperts or the scratch is too small.
  Status tensorExpertMatmul(CUdeviceptr x, bool perSlotInput,
                            const DeviceWeight &w, int64_t experts, int64_t n,
                            int64_t k, CUdeviceptr indices, int64_t tokens,
                            int64_t slots, CUdeviceptr routingWeights,
                            CUdeviceptr out, CUstream stream,
                            const DeviceWeight &bias, CUdeviceptr scratch,
                            int64_t scratchBytes, bool bf16Input = false) const;
  /// cpu::mxfp4ExpertMatmul on the device: `values` the packed E2M1
  /// values [E, N, K] (two a byte, low nibble first), `scales` the E8M0
  /// bytes [E, N, K / 32], `bias` [E, N] or absent (data 0). Decoded in
  /// registers; errors (before launching) when K is not a multiple of 32.
  /// A decode step may take the tensor-core GEMV (Mxfp4Kernel), which with
  /// routing weights needs `scratch` (expertGemvScratchBytes); without it
  /// the CUDA cores take the step. A step of many pairs takes the grouped
  /// warpgroup GEMM given `scratch` of expertGemmScratchBytes and
  /// `rounding.scratchFloats` of mxfp4RoundingFloats (x gathered in bf16:
  /// three parts, or one with `rounding.bf16`). `rounding.bf16` rounds x
  /// to bf16 first on every path.
  Status mxfp4ExpertMatmul(CUdeviceptr x, bool perSlotInput, CUdeviceptr values,
                           CUdeviceptr scales, const DeviceWeight &bias,
                           int64_t experts, int64_t n, int64_t k,
                           CUdeviceptr indices, int64_t tokens, int64_t slots,
                           CUdeviceptr routingWeights, CUdeviceptr out,
                           CUstream stream, CUdeviceptr scratch = 0,
                           int64_t scratchBytes = 0,
                           const InputRounding &rounding = {}) const;
  /// Whether the grouped MXFP4 warpgroup GEMM takes a launch's shape: K a
  /// multiple of 32 (16-byte rows of packed values for the copy engine), x
  /// and the values 16-byte aligned, at most kTensorGemmMaxExperts experts,
  /// the copy engine's row coordinates within 32 bits.
  static bool mxfp4WarpgroupApplies(int64_t experts, int64_t n, int64_t k,
                                    CUdeviceptr x, CUdeviceptr values);
  /// The floats of InputRounding scratch mxfp4ExpertMatmul takes for a
  /// launch (`xAligned`: x 16-byte aligned; `perSlotInput`: x [T, slots,
  /// K]): where the warpgroup GEMM takes it (from `minPairs` pairs: Auto's
  /// kMxfp4WarpgroupMinPairs, 1 when forced), x gathered a (token, slot)
  /// pair a row in bf16 (three parts, or one with `bf16`); else with
  /// `bf16`, x rounded as fp32; else none.
  static int64_t
  mxfp4RoundingFloats(int64_t experts, int64_t n, int64_t k, int64_t tokens,
                      int64_t slots, bool perSlotInput, bool bf16,
                      bool xAligned,
                      int64_t minPairs = kMxfp4WarpgroupMinPairs);
  /// Whether the tensor-core MXFP4 GEMV (daybreak_expert_gemv_tc_e2m1)
  /// takes a launch: at most kExpertGemvMaxPairs pairs, K a multiple of 64
  /// (an even count of scale bytes a row: the kernel reads them in pairs),
  /// N below 2^24, x and the values 16-byte aligned and the scales 2-byte,
  /// the scale index within 32 bits.
  static bool mxfp4ExpertGemvApplies(int64_t experts, int64_t n, int64_t k,
                                     int64_t tokens, int64_t slots,
                                     CUdeviceptr x, CUdeviceptr values,
                                     CUdeviceptr scales);
  /// cpu::mxfp4ToFp8Experts on the device (the MXFP4 online route), into
  /// a workspace of `workspaceSlots` experts, by `mode` (as the CPU's). An
  /// expert id outside [0, E) counts as an empty slot; errors (before
  /// launching) when K is not a multiple of 32, E exceeds 2048 (the
  /// kernel's shared bitmap) or, converting every expert, the workspace
  /// has fewer than E slots.
  Status mxfp4ToFp8Experts(CUdeviceptr values, CUdeviceptr scales,
                           const DeviceWeight &bias, int64_t experts, int64_t n,
                           int64_t k, CUdeviceptr indices, int64_t tokens,
                           int64_t slots, int64_t workspaceSlots,
                           CUdeviceptr codes, CUdeviceptr blockScales,
                           CUdeviceptr slotBias, CUdeviceptr remapped,
                           CUstream stream,
                           runtime::Mxfp4ConvertMode mode =
                               runtime::Mxfp4ConvertMode::Selected) const;
  /// With a prologue (`prologue` non-null and any()), each row is first
  /// normalised and rotated in shared memory (daybreak_cache_write_rows);
  /// errors when a row does not fit the 48 KiB a block has by default.
  /// Token t's values start valuesStride floats after token t - 1's (0:
  /// the cache's width; a column view's row stride).
  Status cacheWrite(const DeviceCacheView &cache, CUdeviceptr values,
                    CUdeviceptr slots, CUdeviceptr sequences, int64_t tokens,
                    CUstream stream,
                    const CacheWritePrologueArgs *prologue = nullptr,
                    int64_t valuesStride = 0) const;
  /// Lets `fn`, a compiled instantiation (daybreak_dsa_indexer_scores_t,
  /// daybreak_gemm_wg_fp8_t), take all the shared memory a block may opt
  /// into (past the 48 KiB default); once, before it is passed as
  /// `specialized`.
  Status allowSharedMemory(CUfunction fn) const;
  /// The tensor-core indexer's kernels: one block a token and chunk of
  /// keys (daybreak_dsa_indexer_tc_*), or a block a group of 2-4 tokens,
  /// each key load serving the group (daybreak_dsa_indexer_tc_tokens_*).
  /// Auto: the groups from kIndexerGroupMinTokens tokens.
  enum class IndexerTiles { Auto, PerToken, TokenGroups };
  static constexpr int64_t kIndexerGroupMinTokens = 32;
  /// `specialized`: daybreak_dsa_indexer_scores_t<keys.width>.
  /// With `bounds` (0: none), keys at or past bounds[t] score 0, unread.
  /// `tensorCores`: the tensor-core kernels (`tiles` picks which) where
  /// runtime::indexerTensorCoresApply holds and q is 16-byte aligned (q
  /// rounded to bf16), else the exact kernel. `rope` (may be null): each
  /// query head rotated first, as rope rotates it (then rounded); its
  /// columns inside the head and at most kQueryRopeMaxPairs pairs.
  static constexpr int64_t kQueryRopeMaxPairs = 64;
  Status dsaIndexerScores(CUdeviceptr q, CUdeviceptr weights,
                          const DeviceCacheView &keys, CUdeviceptr sequences,
                          CUdeviceptr bounds, int64_t tokens, int64_t heads,
                          double scale, CUdeviceptr scores, CUstream stream,
                          CUfunction specialized = nullptr,
                          bool tensorCores = false,
                          IndexerTiles tiles = IndexerTiles::Auto,
                          const QueryRopeArgs *rope = nullptr) const;
  /// cpu::dsaIndexSelect on the device (daybreak_dsa_index_select): the
  /// set in ascending key order, bit for bit.
  Status dsaIndexSelect(CUdeviceptr scores, CUdeviceptr bounds, int64_t tokens,
                        int64_t keys, int64_t topK, CUdeviceptr indices,
                        CUstream stream) const;
  /// Errors (before launching) when valueDim > 4096 or a row of the cache
  /// is too wide for shared memory (width > ~5500). `specialized`:
  /// daybreak_sparse_attention_t<kv.width, valueDim>. With `partials` (a
  /// device buffer of `partialFloats` floats), a grid of fewer blocks than
  /// two per SM of an H200 (decode: tokens x head groups) is split over the
  /// selected rows as well, and daybreak_sparse_attention_combine merges
  /// the splits (flash decoding); sparseAttentionScratchFloats(valueDim)
  /// floats allow every split the launch would choose. Split launches use
  /// the generic split kernel, not `specialized` (on the H200 it is the
  /// faster of the two: 0.72 vs 0.93 ms for one token at top-2048).
  /// `path`: TensorCores runs daybreak_sparse_mla_wg or _tc (`kernel`; split
  /// over the rows in the same way while the grid is under one block per SM;
  /// not the exact mode's precision, see CudaSparseMla.cuh), an error where
  /// sparseMlaTcApplies does not; PreferTensorCores runs it where it
  /// applies; Auto and CudaCores take the CUDA cores.
  Status sparseAttention(CUdeviceptr q, const DeviceCacheView &kv,
                         CUdeviceptr indices, int64_t topK,
                         CUdeviceptr sequences, int64_t tokens, int64_t heads,
                         double scale, int64_t valueDim, CUdeviceptr sinks,
                         CUdeviceptr out, CUstream stream,
                         CUfunction specialized = nullptr,
                         CUdeviceptr partials = 0, int64_t partialFloats = 0,
                         AttentionPath path = AttentionPath::Auto,
                         SparseMlaKernel kernel = SparseMlaKernel::Auto) const;
  /// Whether daybreak_sparse_mla_wg takes this cache and value dim:
  /// DeepSeek's FP8 latent rows (576 values: 512 e4m3 codes in 128-column
  /// scale blocks, 64 bf16 rope values; 656 bytes, 16-byte aligned) and a
  /// value dim of 512.
  static bool sparseMlaWgApplies(const DeviceCacheView &kv, int64_t valueDim);
  /// daybreak_sparse_mla_wg's dynamic shared memory: 1024 bytes to align,
  /// Q and two 64-row tiles of 576 bf16, P (64 x 64 bf16), the exchanged
  /// maxima and sums (2 x 2 x 64 floats), the tiles' masks (16 bytes), four
  /// mbarriers and three counters (the kernel has no static shared memory).
  static constexpr int64_t sparseMlaWgSharedBytes() {
    return 1024 + 3 * 64 * 576 * 2 + 64 * 64 * 2 + 4 * 64 * 4 + 16 + 4 * 8 +
           3 * 4;
  }
  /// Whether daybreak_sparse_mla_tc takes this cache and value dim: bf16 or
  /// fp8 (Fp8Scaled) rows of a width that is a multiple of 16 up to 576,
  /// loadable in 8-column chunks (as tensorAttentionApplies), and a value
  /// dim that is a multiple of 16 up to 512 and the width.
  static bool sparseMlaTcApplies(const DeviceCacheView &kv, int64_t valueDim);
  /// daybreak_sparse_mla_tc's dynamic shared memory for rows of `width`:
  /// Q (64 rows) and two 32-row tiles in bf16 at a stride of width + 8, P
  /// (64 x 40 bf16) and the pairs' exchange (2 x 64 floats).
  static constexpr int64_t sparseMlaTcSharedBytes(int64_t width) {
    return (64 + 2 * 32) * (width + 8) * 2 + 64 * 40 * 2 + 2 * 64 * 4;
  }
  /// cpu::attention on the device (CudaAttention.cuh). Errors (before
  /// launching) on heads that do not split into kvHeads, valueDim > 4096, a
  /// ring cache too short for the window and the step (as the CPU kernel),
  /// or rows too wide for shared memory. A sequence or position out of
  /// range gives zeros (the CPU kernel's error). The paths:
  /// - wide heads in large groups (absorbed MLA; wideAttentionApplies):
  ///   daybreak_attention_wide, a block a token and 32 query heads, split
  ///   over the keys while the grid is small and the scratch allows, then
  ///   daybreak_sparse_attention_combine;
  /// - decode on the CUDA cores: with `partials` (`partialFloats` floats),
  ///   a step of at most one token per cache slot (tokens <= batch) whose
  ///   caches decodeAttentionApplies to runs daybreak_attention_decode (a
  ///   block a token, KV head and split of its keys), split over the keys
  ///   as far as the grid is small and the scratch allows
  ///   (attentionScratchFloats, and decodeAttentionScratchFloats for the
  ///   step unsplit), and daybreak_sparse_attention_combine merges the
  ///   splits with the sinks;
  /// - the CUDA cores otherwise: daybreak_attention_prefill64 (64 query
  ///   rows a block, register-tiled) for head and value dims up to 64 and
  ///   groups that divide 64 when the launch is not split, else
  ///   daybreak_attention (a block a tile of tokens and the query heads of
  ///   one KV head), split over keys in the same way while the grid is
  ///   small; fp32 scores and online softmax in both;
  /// - the tensor cores (daybreak_attention_tc64 / _tc128; not exact, see
  ///   CudaAttention.cuh) where `path` asks for them: TensorCores always
  ///   (never split), PreferTensorCores where tensorAttentionApplies and
  ///   neither CUDA-core path would split.
  /// Auto and CudaCores take the CUDA cores.
  Status attention(CUdeviceptr q, const DeviceCacheView &k,
                   const DeviceCacheView &v, CUdeviceptr positions,
                   CUdeviceptr sequences, CUdeviceptr sinks, int64_t tokens,
                   int64_t heads, int64_t kvHeads, double scale, int64_t window,
                   CUdeviceptr out, CUstream stream, CUdeviceptr partials = 0,
                   int64_t partialFloats = 0,
                   AttentionPath path = AttentionPath::Auto) const;
  /// Whether the tensor-core attention takes these caches: bf16 or fp8
  /// (Fp8Scaled) K and V, head and value dims multiples of 16 up to 128,
  /// 16-byte aligned bf16 rows, and fp8 rows 4-byte aligned with scale
  /// blocks and a quantized part of whole 8-column chunks. f32 caches, and
  /// wider or odd heads, take the CUDA-core kernel.
  static bool tensorAttentionApplies(const DeviceCacheView &k,
                                     const DeviceCacheView &v, int64_t kvHeads);
  /// Whether daybreak_attention_wide takes these caches and heads: head
  /// dims a multiple of 8 up to kWideAttentionMaxHeadDim, value dims up to
  /// kWideAttentionMaxValueDim. Auto and CudaCores choose it for groups of
  /// kWideAttentionMinGroup heads or more whose heads are too wide for
  /// daybreak_attention_decode and daybreak_attention_prefill64 (absorbed
  /// MLA: 576 / 512).
  static bool wideAttentionApplies(const DeviceCacheView &k,
                                   const DeviceCacheView &v, int64_t kvHeads);
  /// Whether V's rows are K's rows (a column prefix of one KV head's cache,
  /// as absorbed MLA reads its values), so daybreak_attention_wide decodes
  /// each row once.
  static bool attentionSharesRows(const DeviceCacheView &k,
                                  const DeviceCacheView &v, int64_t kvHeads);
  /// Whether daybreak_attention_decode takes these caches: K and V in one
  /// format, head dims a multiple of 16 up to 256, value dims of 32, 64 or
  /// 128, 16-byte aligned rows, and fp8 rows without a bf16 tail and with
  /// scale blocks of a multiple of 16 columns.
  static bool decodeAttentionApplies(const DeviceCacheView &k,
                                     const DeviceCacheView &v, int64_t kvHeads);
  /// The KDA kernels (Kernels.def; CudaKda.cuh). shortConv: x [T, C],
  /// weight [C, W] as stored (W <= kShortConvMaxWidth); outputs first, then
  /// the windows. kda: the chunked form (prefill) or the step (decode),
  /// Dk <= kKdaMaxKeyDim. Tokens naming a slot outside [0, state.slots) are
  /// skipped (their outputs zero in shortConv, untouched in kda). The
  /// chunked form works in `scratch`, at least kdaChunkScratchBytes for its
  /// tokens and state.slots (an error otherwise); the step takes none.
  Status shortConv(CUdeviceptr x, const DeviceWeight &weight, int64_t channels,
                   int64_t width, const DeviceState &state,
                   CUdeviceptr sequences, int64_t tokens, int64_t activation,
                   CUdeviceptr out, CUstream stream) const;
  Status kdaGate(CUdeviceptr raw, CUdeviceptr aLog, CUdeviceptr dtBias,
                 int64_t tokens, int64_t heads, int64_t dim,
                 const double *lowerBound, CUdeviceptr out,
                 CUstream stream) const;
  Status kda(bool chunked, const DeviceKdaInputs &in, const DeviceState &state,
             CUdeviceptr sequences, int64_t tokens, int64_t heads,
             int64_t keyDim, int64_t valueDim, double scale, bool qkL2Norm,
             CUdeviceptr scratch, uint64_t scratchBytes, CUdeviceptr out,
             CUstream stream) const;
  static uint64_t kdaChunkScratchBytes(int64_t tokens, int64_t slots,
                                       int64_t heads, int64_t keyDim,
                                       int64_t valueDim);
  Status gatedRmsNorm(CUdeviceptr x, CUdeviceptr gate,
                      const DeviceWeight &weight, int64_t rows, int64_t dim,
                      double eps, int64_t activation, CUdeviceptr out,
                      CUstream stream) const;
  /// mHC (Kernels.def; CudaKernels.cu), n streams of `width` values a
  /// token. mhcPre: streams [T, n, D], fn [(2+n)n, nD], base [(2+n)n],
  /// scale [3] -> input [T, D], post [T, n], comb [T, n, n] (cpu::mhcPre's
  /// math), in two launches passing partial sums through `scratch`, at
  /// least mhcPreScratchBytes(tokens, n, width) (an error otherwise); with
  /// `norm` (data 0: none; fp32 or bf16 [D]) the input RMS-normalised with
  /// it and `inputEps` in the second launch. mhcPost: X'_k = post_k y +
  /// sum_j comb[j, k] X_j. mhcPostPre: mhcPost into `out`, then mhcPre on
  /// it (next post and comb), in two launches for n <= kMhcFusedStreams
  /// and kMhcTileTokens nD < 2^31 (the new streams are not read back for
  /// the logits), else as the two kernels; the same scratch as mhcPre. As
  /// on the CPU, n outside [1, kMhcMaxStreams] and sinkhornIters < 1 are
  /// errors.
  Status mhcPre(CUdeviceptr streams, CUdeviceptr fn, CUdeviceptr base,
                CUdeviceptr scale, int64_t tokens, int64_t n, int64_t width,
                int64_t sinkhornIters, double eps, double normEps,
                const DeviceWeight &norm, double inputEps, CUdeviceptr scratch,
                uint64_t scratchBytes, CUdeviceptr input, CUdeviceptr post,
                CUdeviceptr comb, CUstream stream) const;
  Status mhcPost(CUdeviceptr streams, CUdeviceptr y, CUdeviceptr post,
                 CUdeviceptr comb, int64_t tokens, int64_t n, int64_t width,
                 CUdeviceptr out, CUstream stream) const;
  Status mhcPostPre(CUdeviceptr streams, CUdeviceptr y, CUdeviceptr post,
                    CUdeviceptr comb, CUdeviceptr fn, CUdeviceptr base,
                    CUdeviceptr scale, int64_t tokens, int64_t n, int64_t width,
                    int64_t sinkhornIters, double eps, double normEps,
                    const DeviceWeight &norm, double inputEps,
                    CUdeviceptr scratch, uint64_t scratchBytes, CUdeviceptr out,
                    CUdeviceptr input, CUdeviceptr nextPost,
                    CUdeviceptr nextComb, CUstream stream) const;
  /// GLM's k-pool (Kernels.def; CudaKpool.cuh). dsaKpool: keys, gate [T,
  /// width], ape [pool, width] as stored, state slots of [max(pool - 1, 1),
  /// 2 width] -> out [T, width]; the pooled keys, then (a second launch,
  /// once they have read it) the tail state. pool in [1, kKpoolMaxPool].
  /// dsaKpoolExpand: pools [T, k] -> out [T, k pool + pool - 1].
  Status dsaKpool(CUdeviceptr keys, CUdeviceptr gate, const DeviceWeight &ape,
                  int64_t pool, int64_t width, const DeviceState &state,
                  CUdeviceptr positions, CUdeviceptr sequences, int64_t tokens,
                  CUdeviceptr out, CUstream stream) const;
  Status dsaKpoolExpand(CUdeviceptr pools, CUdeviceptr positions,
                        int64_t tokens, int64_t k, int64_t pool,
                        CUdeviceptr out, CUstream stream) const;
  /// out = input / divisor, divisor > 0.
  Status divScalarI32(CUdeviceptr input, int64_t n, int64_t divisor,
                      CUdeviceptr out, CUstream stream) const;
  /// src and dst must not overlap.
  Status copyColumns(CUdeviceptr src, int64_t srcStride, int64_t srcOffset,
                     CUdeviceptr dst, int64_t dstStride, int64_t dstOffset,
                     int64_t rows, int64_t cols, CUstream stream) const;
  Status causalBounds(CUdeviceptr positions, int64_t tokens, CUdeviceptr bounds,
                      CUstream stream) const;
  /// out[i] = ids[i] - first for ids in [first, first + count), else -1.
  Status localExperts(CUdeviceptr ids, int64_t n, int64_t first, int64_t count,
                      CUdeviceptr out, CUstream stream) const;

private:
  CudaKernels(const Driver &driver) : driver(&driver) {}
  Status launch(CUfunction function, const char *name, int64_t gridX,
                int64_t gridY, int64_t gridZ, unsigned block,
                unsigned sharedBytes, CUstream stream, void **params) const;
  /// Launches `clusters` clusters of `clusterSize` blocks (a 1-D grid; no
  /// cluster attribute for size 1), as a programmatic dependent of the
  /// kernel before it when `early` (the kernel waits before touching what
  /// that kernel writes).
  Status launchClusters(CUfunction function, const char *name, int64_t clusters,
                        unsigned clusterSize, unsigned block,
                        unsigned sharedBytes, bool early, CUstream stream,
                        void **params) const;
  /// A decode expert GEMV form (`fn`, a daybreak_expert_gemv_tc_* kernel)
  /// over `blocks` blocks in clusters of `cluster`, then with routing
  /// weights daybreak_expert_combine over the pairs' results it leaves in
  /// `scratch` (expertGemvScratchBytes; `name` heads the error without).
  Status launchExpertGemv(CUfunction fn, const char *name, int64_t blocks,
                          int64_t cluster, int64_t sharedBytes, CUdeviceptr x,
                          bool perSlotInput, const DeviceWeight &weight,
                          const DeviceWeight &bias, int64_t experts, int64_t n,
                          int64_t k, CUdeviceptr indices, int64_t tokens,
                          int64_t slots, CUdeviceptr routingWeights,
                          CUdeviceptr out, CUstream stream, CUdeviceptr scratch,
                          int64_t scratchBytes) const;
  /// mxfp4ExpertMatmul on the grouped warpgroup GEMM (mxfp4WarpgroupApplies
  /// holds): the pairs grouped by expert in tiles of 128 rows, x gathered
  /// in their order as bf16 (daybreak_gather_bf16: three parts, or one
  /// with `rounding.bf16`), daybreak_expert_gemm_wg_e2m1(_x3), then
  /// daybreak_expert_combine with routing weights.
  Status mxfp4WarpgroupMatmul(CUdeviceptr x, bool perSlotInput,
                              CUdeviceptr values, CUdeviceptr scales,
                              const DeviceWeight &bias, int64_t experts,
                              int64_t n, int64_t k, CUdeviceptr indices,
                              int64_t tokens, int64_t slots,
                              CUdeviceptr routingWeights, CUdeviceptr out,
                              CUstream stream, CUdeviceptr scratch,
                              int64_t scratchBytes,
                              const InputRounding &rounding) const;
  /// mxfp4ExpertMatmul on the tensor cores (mxfp4ExpertGemvApplies holds),
  /// then daybreak_expert_combine with routing weights.
  Status mxfp4ExpertGemv(CUdeviceptr x, bool perSlotInput, CUdeviceptr values,
                         CUdeviceptr scales, const DeviceWeight &bias,
                         int64_t experts, int64_t n, int64_t k,
                         CUdeviceptr indices, int64_t tokens, int64_t slots,
                         CUdeviceptr routingWeights, CUdeviceptr out,
                         CUstream stream, CUdeviceptr scratch,
                         int64_t scratchBytes) const;

  /// mhc_pre's second launch, daybreak_mhc_pre (or _norm with a norm) on
  /// the logits' `splits` partial sums in `partials`.
  Status mhcFinish(CUdeviceptr streams, CUdeviceptr base, CUdeviceptr scale,
                   int64_t tokens, int64_t n, int64_t width, int64_t splits,
                   int64_t sinkhornIters, double eps, double normEps,
                   const DeviceWeight &norm, double inputEps,
                   CUdeviceptr partials, CUdeviceptr input, CUdeviceptr post,
                   CUdeviceptr comb, CUstream stream) const;

  /// A grouped expert matmul's scratch (expertGemmScratchBytes' layout)
  /// once daybreak_expert_group has filled it: the tile count (then the
  /// rows grouped), the tiles (expert, first row in `order`, rows), the
  /// (token, slot) rows ordered by expert, and with routing weights each
  /// row's result before the combine; `maxTiles` bounds the tiles (the
  /// GEMM's grid) and `y` is where the GEMM writes (the results, or `out`
  /// without routing weights).
  struct ExpertGroups {
    CUdeviceptr tileCount = 0, tiles = 0, order = 0, results = 0, y = 0;
    int64_t maxTiles = 0;
  };
  /// Checks `scratch` against expertGemmScratchBytes (errors named after
  /// `caller`) and launches daybreak_expert_group into it with tiles of at
  /// most `tileRows` rows (without routing weights it also zeroes the rows
  /// of `out` of empty slots).
  StatusOr<ExpertGroups> groupExperts(const char *caller, CUdeviceptr indices,
                                      int64_t tokens, int64_t slots,
                                      int64_t experts, int64_t n, bool routed,
                                      CUdeviceptr out, CUdeviceptr scratch,
                                      int64_t scratchBytes, int32_t tileRows,
                                      CUstream stream) const;
  /// With routing weights, daybreak_expert_combine: each token's slots of
  /// `groups.results` summed into `out` in slot order; else nothing.
  Status combineExperts(const ExpertGroups &groups, CUdeviceptr indices,
                        CUdeviceptr routingWeights, int64_t experts,
                        int64_t tokens, int64_t slots, int64_t n,
                        CUdeviceptr out, CUstream stream) const;

  /// What a copy-engine map reads: bf16 values in boxes of 64 columns,
  /// 128-byte swizzled (a box row is the swizzle's span, as the MMA reads
  /// it); e4m3 codes in boxes of 64 columns as stored (to be widened); or
  /// e4m3 codes in boxes of 128 columns, 128-byte swizzled (the fp8 MMA's).
  /// Codes: bytes, boxes of 64 columns; CodesSwizzled: 128, swizzled;
  /// Packed: 32 (a stage's MXFP4 values, two a byte).
  enum class TileMap { Bf16, Codes, CodesSwizzled, Packed };
  /// A copy-engine map of the row-major [rows, k] matrix at `base` in
  /// boxes of `boxRows` rows.
  Status encodeTileMap(CUtensorMap &map, CUdeviceptr base, int64_t rows,
                       int64_t k, int64_t boxRows, TileMap kind) const;

  /// Launches `fn`, a stored-weight GEMV that loops over its `columns`
  /// warp tasks, on as many 4-warp blocks as give every warp the same number
  /// of tasks without exceeding what the GPU holds at once (`residentWarps`).
  Status launchGemv(CUfunction fn, int64_t residentWarps, int64_t columns,
                    CUstream stream, void **params) const;

  /// The tensor-core GEMM for a weight where tensorGemmApplies holds: bf16,
  /// e4m3 with blockK 32, or e4m3 with blockK a multiple of 64; dense or
  /// `grouped` by expert.
  CUfunction tensorGemmFn(const DeviceWeight &w, bool grouped,
                          bool bf16Input) const;

  /// A tensor-core GEMV kernel, how many of its blocks fit an SM by
  /// registers, and how many clusters of C = 1..16 blocks the GPU holds at
  /// once when shared memory allows b blocks an SM (activeClusters[C][b],
  /// b up to blocksPerSm; GPC boundaries make it less than SMs x b / C).
  struct TensorGemvKernel {
    static constexpr int kMaxBlocks = 16;
    CUfunction fn = nullptr;
    int64_t blocksPerSm = 0;
    static constexpr int kMaxCluster = 16; // past 8: non-portable sizes
    int32_t activeClusters[kMaxCluster + 1][kMaxBlocks + 1] = {};
  };
  /// [e4m3][m > 1][tiles - 1]
  TensorGemvKernel tensorGemvKernels[2][2][2];
  /// A tensor-core GEMV launch: tiles a warp, cluster size (0: none fits),
  /// clusters, threads and shared memory of a block.
  struct TensorGemvPlan {
    int64_t tiles = 0, cluster = 0, clusters = 0, threads = 0, sharedBytes = 0;
  };
  /// The cheapest launch `choice` allows (see CudaKernels.cpp).
  TensorGemvPlan planTensorGemv(const DeviceWeight &w, int64_t m, int64_t n,
                                int64_t k, TensorGemvChoice choice) const;
  int64_t multiprocessors = 0, sharedPerSm = 0, sharedPerBlock = 0,
          sharedReserved = 0;

  const Driver *driver;
  bool programmatic = true; ///< see withProgrammaticLaunch
  /// Warps of each fast GEMV the GPU holds at once (SMs x occupancy).
  int64_t gemvE4m3Warps = 0, gemvBf16Warps = 0, gemvE4m3M1Warps = 0,
          gemvBf16M1Warps = 0, gemvE4m3M1NarrowWarps = 0,
          gemvBf16M1NarrowWarps = 0;
  /// Which kernel headMatmul takes where the per-head GEMV applies (see
  /// withHeadMatmulKernel).
  HeadMatmulKernel headMatmulKernel = HeadMatmulKernel::Auto;
  /// How the decode expert GEMV streams its weights, and the blocks of
  /// each form the GPU holds at once: [e4m3][Registers, Ring4, Ring8].
  ExpertGemvStreaming expertGemvStreaming = ExpertGemvStreaming::Auto;
  int64_t expertGemvBlocks[2][3] = {};
  /// The ring forms' split (see withExpertGemvCluster), and the clusters
  /// of each size they fit at once: [e4m3][Ring4, Ring8][size] (size 1:
  /// the blocks).
  int expertGemvCluster = 0;
  int64_t expertGemvClusters[2][2][kExpertGemvMaxCluster + 1] = {};
  /// mxfp4ExpertMatmul's choice (see withMxfp4Kernel), and the blocks of
  /// the tensor-core MXFP4 GEMV the GPU holds at once.
  Mxfp4Kernel mxfp4Kernel = Mxfp4Kernel::Auto;
  int64_t expertGemvE2m1Blocks = 0;
  /// Whether the CUDA-core MXFP4 kernel may take its staged form (see
  /// withMxfp4Staging).
  bool mxfp4Staged = false;
#define DAYBREAK_DECLARE_KERNEL(member, symbol) CUfunction member##Fn = nullptr;
  DAYBREAK_CUDA_KERNELS(DAYBREAK_DECLARE_KERNEL)
#undef DAYBREAK_DECLARE_KERNEL
};

} // namespace daybreak::cuda

#endif // DAYBREAK_RUNTIME_DEVICES_CUDA_CUDAKERNELS_H
