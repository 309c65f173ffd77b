//===- CudaKernels.cpp - Host launchers for the CUDA library kernels ------===//
//
// Grid, block and shared-memory choices for each kernel of CudaKernels.cu,
// and the embedded PTX. Kernel arguments are passed as cuLaunchKernel
// expects: one pointer per parameter, each to a value of the parameter's
// exact type (int64_t sizes, int32_t flags, double scalars, CUdeviceptr).
//
//===----------------------------------------------------------------------===//

#include "runtime/devices/cuda/CudaKernels.h"
#include "runtime/core/CacheState.h"
#include "runtime/core/LaunchParams.h"
#include "runtime/devices/cuda/CudaKernelsFingerprint.h"
#include "runtime/devices/cuda/CudaKernelsPtx.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>

namespace daybreak::cuda {

const char *cudaKernelsPtx() {
  // The generated header splits the PTX into literals below compilers'
  // length limits; joined once.
  static const std::string ptx = [] {
    std::string text;
    for (const char *chunk : kCudaKernelsPtxChunks)
      text += chunk;
    return text;
  }();
  return ptx.c_str();
}

uint64_t cudaKernelsFingerprint() { return kCudaKernelsSourceFingerprint; }

Status checkLibraryFingerprint(const artifact::CodeImage &image,
                               uint64_t expected) {
  if (image.library_fingerprint() == expected)
    return Status::success();
  auto hex = [](uint64_t v) {
    char text[17];
    std::snprintf(text, sizeof(text), "%016llx", (unsigned long long)v);
    return std::string(text);
  };
  std::string theirs =
      image.library_fingerprint()
          ? "fingerprint " + hex(image.library_fingerprint())
          : "no fingerprint (a compiler older than the check)";
  return Status::error(
      "the artifact's CUDA library kernels (" + theirs +
      ") come from other sources than this runtime's (" +
      hex(expected) +
      "): their launch contracts may differ; recompile the artifact with "
      "this version's daybreak-compile");
}

namespace {

/// Clusters of `size` blocks of `threads` threads and `sharedBytes` of
/// dynamic shared memory that the GPU holds of `fn` at once: 0 for a size
/// it cannot hold (the driver's answer, or its error), never chosen.
int64_t maxActiveClusters(const Driver &driver, CUfunction fn, unsigned size,
                          unsigned threads, unsigned sharedBytes) {
  CUlaunchAttribute attribute{};
  attribute.id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
  attribute.value.clusterDim.x = size;
  attribute.value.clusterDim.y = 1;
  attribute.value.clusterDim.z = 1;
  CUlaunchConfig config{};
  config.gridDimX = size * 1024;
  config.gridDimY = config.gridDimZ = 1;
  config.blockDimX = threads;
  config.blockDimY = config.blockDimZ = 1;
  config.sharedMemBytes = sharedBytes;
  config.attrs = &attribute;
  config.numAttrs = 1;
  int active = 0;
  if (driver.cuOccupancyMaxActiveClusters(&active, fn, &config) != CUDA_SUCCESS)
    return 0;
  return active;
}

/// The kernels' `Cache` argument (CudaKernels.cu): same members and layout.
struct KernelCache {
  CUdeviceptr base;
  CUdeviceptr pageTable;
  int64_t width, tailDim, scaleBlock, bytesPerRow;
  int64_t batch, maxSeqLen, pageSize;
  int32_t format;
  int32_t ringRows;
};
static_assert(sizeof(KernelCache) == 80, "must match CudaKernels.cu's Cache");

/// The indexer kernels' `QueryRope` argument (CudaKernels.cu): same members
/// and layout; dim 0 without a prologue.
struct KernelQueryRope {
  CUdeviceptr positions;
  int64_t offset, dim;
  double theta, factor, low, high, attentionFactor;
  int32_t interleaved, yarn;
};
static_assert(sizeof(KernelQueryRope) == 72,
              "must match CudaKernels.cu's QueryRope");

KernelQueryRope toKernel(const QueryRopeArgs *rope) {
  KernelQueryRope k{};
  if (!rope)
    return k;
  const runtime::RopeParams &r = rope->params;
  k.positions = rope->positions;
  k.offset = r.offset;
  k.dim = r.dim;
  k.theta = r.theta;
  k.factor = r.factor;
  runtime::yarnRampEnds(r, k.low, k.high);
  k.attentionFactor = r.attentionFactor;
  k.interleaved = r.interleaved;
  k.yarn = r.yarn;
  return k;
}

/// The indexer kernels' angles of a query prologue (queryRopeBytes in
/// CudaKernels.cu), at the start of their dynamic shared memory, for
/// `tokens` tokens a block.
int64_t queryRopeBytes(const KernelQueryRope &rope, int64_t tokens) {
  return rope.dim / 2 * tokens * 16;
}

KernelCache toKernel(const DeviceCacheView &view) {
  int32_t format = view.format == runtime::CacheFormat::F32    ? 0
                   : view.format == runtime::CacheFormat::BF16 ? 1
                                                           : 2;
  return {view.base,       view.pageTable,   view.width, view.tailDim,
          view.scaleBlock, view.bytesPerRow, view.batch, view.maxSeqLen,
          view.pageSize,   format,           int32_t(view.ringRows)};
}

int64_t ceilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

// The default dynamic shared memory limit (no cuFuncSetAttribute opt-in).
constexpr int64_t kSharedFloats = 48 * 1024 / 4;

// The tensor-core attention (CudaAttention.cuh): query rows a block (64
// tokens x heads at most), threads, and daybreak_attention_tc128's dynamic
// shared memory (Q's three bf16 parts: 3 x 64 rows x (128 + 8) values).
constexpr int64_t kTcAttentionRows = 64, kTcAttentionThreads = 128;
constexpr int64_t kTcAttention128Bytes = 3 * kTcAttentionRows * (128 + 8) * 2;
/// The KDA chunk passes' padded widths (kdaKeyPad and kdaValuePad in
/// CudaKda.cuh) and their dynamic shared memory for key dim `dk`: the
/// layouts daybreak_kda_intra and daybreak_kda_inter carve at their start.
constexpr int64_t kKdaChunk = 64, kKdaColumns = 32;
constexpr int64_t kdaKeyPad(int64_t dk) { return (dk + 7) / 8 * 8; }
constexpr int64_t kdaValuePad(int64_t dv) { return (dv + 31) / 32 * 32; }
constexpr int64_t kdaIntraSharedBytes(int64_t dk) {
  // q, k and G rows; the operand stage (80 rows, the V tiles' 132 columns
  // at least); Aqk and L; beta, G_last, the chunk's tokens.
  int64_t pitch = kdaKeyPad(dk) + 4;
  return 4 * (3 * kKdaChunk * pitch + 80 * std::max<int64_t>(pitch, 132) +
              2 * kKdaChunk * (kKdaChunk + 4) + 2 * kKdaChunk + kdaKeyPad(dk));
}
constexpr int64_t kdaInterSharedBytes(int64_t dk) {
  // w, q e^G and k e^(G_last - G) rows; u's and U's 32 columns; Aqk; the
  // state slice; e^(G_last); the chunk's tokens.
  return 4 * (3 * kKdaChunk * (kdaKeyPad(dk) + 4) +
              2 * kKdaChunk * kKdaColumns + kKdaChunk * (kKdaChunk + 4) +
              kdaKeyPad(dk) * kKdaColumns + kdaKeyPad(dk) + kKdaChunk);
}

/// daybreak_kda_*'s scratch (KdaScratch in CudaKda.cuh: same members, same
/// order), carved from one buffer by kdaScratchLayout.
struct DeviceKdaScratch {
  CUdeviceptr counts, firstChunk, chunkCount, order, chunks;
  CUdeviceptr qg, kg, w, u, aqk, decay;
  int64_t maxChunks;
};
static_assert(sizeof(DeviceKdaScratch) == 96, "must match KdaScratch");

/// The scratch regions (256-byte aligned) from `base`, and their bytes in
/// all.
std::pair<DeviceKdaScratch, uint64_t>
kdaScratchLayout(CUdeviceptr base, int64_t tokens, int64_t slots, int64_t heads,
                 int64_t dk, int64_t dv) {
  DeviceKdaScratch s;
  s.maxChunks = (tokens + kKdaChunk - 1) / kKdaChunk + slots;
  uint64_t at = 0;
  auto take = [&](int64_t bytes) {
    CUdeviceptr p = base + at;
    at += (uint64_t(bytes) + 255) / 256 * 256;
    return p;
  };
  int64_t rows = heads * tokens;
  s.counts = take(4 * slots);
  s.firstChunk = take(4 * slots);
  s.chunkCount = take(4);
  s.order = take(4 * tokens);
  s.chunks = take(16 * s.maxChunks);
  s.qg = take(4 * rows * kdaKeyPad(dk));
  s.kg = take(4 * rows * kdaKeyPad(dk));
  s.w = take(4 * rows * kdaKeyPad(dk));
  s.u = take(4 * rows * kdaValuePad(dv));
  s.aqk = take(4 * rows * kKdaChunk);
  s.decay = take(4 * heads * s.maxChunks * kdaKeyPad(dk));
  return {s, at};
}

/// A tensor-core GEMM block's shared memory (GemmSmem in CudaKernels.cu):
/// two stages of x (64 rows of 68 floats) and of the weight (128 rows of
/// 64 values), x's three parts (64 rows of 72 halves each), two stages of
/// 2 x 128 scales, 64 inverse x scales, and 64 source and destination rows.
constexpr int64_t tensorGemmSharedBytes(int32_t type) {
  return 2 * 64 * 68 * 4 + 2 * 128 * 64 * (type == 2 ? 1 : 2) +
         3 * 64 * 72 * 2 + 2 * 2 * 128 * 4 + 3 * 64 * 4;
}

/// A warpgroup GEMM block's shared memory (WgGemmShared in CudaGemm.cuh):
/// 1024 bytes of alignment slack; stages of `parts` tiles of 128 rows of x
/// (128 bytes a row) and the weight's rows (bf16: 4 stages of 256 rows of
/// 128 bytes, or 3 of 128 rows with three parts; e4m3: 6 stages of 128 rows
/// of 64 bytes, 3 with three parts, and three 128 x 128-byte buffers
/// widened; e2m1 as e4m3 with rows of 32 bytes); two barriers a stage and
/// a widened buffer. `narrow` (bf16, three parts): tiles of 64 rows of x,
/// five stages.
constexpr int64_t warpgroupGemmSharedBytes(int32_t type, int parts = 1,
                                           bool narrow = false) {
  if (narrow)
    return 1024 + 5 * (parts * 64 * 128 + 128 * 128) + 16 * 5;
  const int64_t x = parts * 128 * 128;
  if (type == 2 || type == 3) {
    const int64_t stages = parts > 1 ? 3 : 6, row = type == 2 ? 64 : 32;
    return 1024 + stages * (x + 128 * row) + 3 * 128 * 128 + 16 * (stages + 3);
  }
  const int64_t stages = parts > 1 ? 3 : 4, rows = parts > 1 ? 128 : 256;
  return 1024 + stages * (x + rows * 128) + 16 * stages;
}
/// The FP8 GEMM block's at the library's 128 rows (Fp8GemmShared in
/// CudaGemm.cuh), which the grouped expert GEMM also takes.
constexpr int64_t fp8GemmLibraryBytes =
    fp8GemmSharedBytes({128, 128, fp8GemmLibraryStages(128), 1});
/// Output columns of a warpgroup GEMM block: bf16 256, e4m3 128 (its
/// scale folds keep a second set of accumulators); 128 for both with x in
/// three parts (their tiles take the shared memory).
constexpr int64_t warpgroupGemmColumns(int32_t type, int parts = 1) {
  return type == 2 || parts > 1 ? 128 : 256;
}

/// daybreak_dsa_indexer_tc's shared memory (as indexerTc in CudaKernels.cu
/// lays it out): q rows of 16 m heads and two 64-key tiles, 136 halves
/// a row; 128 row scales, 16 m head factors and m x 64 partial sums.
constexpr int64_t indexerTcSharedBytes(int64_t heads) {
  int64_t m = (heads + 15) / 16;
  return 2 * (16 * m + 128) * 136 + 4 * (128 + 16 * m + 64 * m);
}

/// daybreak_dsa_indexer_tc_tokens_*'s dynamic shared memory: 32 (token,
/// head tile) pairs of q fragments (8 bytes a lane and k-step) and 256 head
/// factors.
constexpr int64_t indexerTokensSharedBytes(int64_t width) {
  return 32 * (width / 16) * 32 * 8 + 256 * 4;
}

/// The most a query prologue's angles take a token (queryRopeBytes).
constexpr int64_t kIndexerRopeBytes = CudaKernels::kQueryRopeMaxPairs * 16;

/// An error for n outside [1, kMhcMaxStreams], the CPU kernels' limit too,
/// or sinkhornIters < 1 (when given).
Status checkMhcStreams(const char *kernel, int64_t n,
                       int64_t sinkhornIters = 1) {
  if (n < 1 || n > kMhcMaxStreams)
    return Status::error(std::string(kernel) + ": " + std::to_string(n) +
                         " streams (the CUDA kernels take 1 to " +
                         std::to_string(kMhcMaxStreams) + ")");
  if (sinkhornIters < 1)
    return Status::error(std::string(kernel) + ": sinkhorn_iters " +
                         std::to_string(sinkhornIters) + " (at least 1)");
  return Status::success();
}

/// The mHC logits kernels' column splits for `tokens` tokens of n x
/// `width` streams: the largest power of two of runs of kMhcChunkColumns
/// chunks that keeps tiles x splits within the target blocks (a run past
/// the last chunk writes zeros); an error naming `kernel` if their partial
/// sums exceed `scratchBytes`.
Status mhcSplits(const char *kernel, int64_t tokens, int64_t n, int64_t width,
                 uint64_t scratchBytes, int64_t &splits) {
  int64_t tiles = ceilDiv(tokens, kMhcTileTokens);
  int64_t chunks = std::max<int64_t>(1, ceilDiv(n * width, kMhcChunkColumns));
  int64_t most =
      std::min({chunks, kMhcMaxSplits, ceilDiv(kMhcTargetBlocks, tiles)});
  splits = 1;
  while (2 * splits <= most)
    splits *= 2;
  uint64_t bytes =
      uint64_t(splits * tokens * ((2 + n) * n + 1)) * sizeof(float);
  if (bytes > scratchBytes)
    return Status::error(std::string(kernel) + ": " + std::to_string(tokens) +
                         " tokens of " + std::to_string(n) + " x " +
                         std::to_string(width) + " need " +
                         std::to_string(bytes) + " bytes of scratch, " +
                         std::to_string(scratchBytes) + " given");
  return Status::success();
}

} // namespace

StatusOr<CudaKernels> CudaKernels::load(const Driver &driver, CUmodule module) {
  CudaKernels kernels(driver);
  // Programmatic launches stay switchable for comparison and diagnosis.
  if (const char *env = std::getenv("DAYBREAK_CUDA_PDL"))
    kernels.programmatic = std::string(env) != "0";
  // Weight streams evicted first from L2 (streamPolicy in CudaKernels.cu),
  // switchable the same way.
  if (const char *env = std::getenv("DAYBREAK_CUDA_L2_EVICT_FIRST");
      env && std::string(env) == "0") {
    CUdeviceptr flag = 0;
    size_t bytes = 0;
    int32_t off = 0;
    Status status =
        driver.check(driver.cuModuleGetGlobal(&flag, &bytes, module,
                                              "daybreak_l2_evict_first"),
                     "cuModuleGetGlobal(daybreak_l2_evict_first)");
    if (status.ok())
      status = driver.check(driver.cuMemcpyHtoD(flag, &off, sizeof(off)),
                            "cuMemcpyHtoD(daybreak_l2_evict_first)");
    if (!status.ok())
      return status.withContext("loading the CUDA kernels");
  }
#define DAYBREAK_RESOLVE_KERNEL(member, symbol)                                \
  if (Status status = driver.check(                                            \
          driver.cuModuleGetFunction(&kernels.member##Fn, module, symbol),     \
          "cuModuleGetFunction(" symbol ")");                                  \
      !status.ok())                                                            \
    return status.withContext("loading the CUDA kernels");
  DAYBREAK_CUDA_KERNELS(DAYBREAK_RESOLVE_KERNEL)
#undef DAYBREAK_RESOLVE_KERNEL
  // How many warps of each fast GEMV the current GPU holds at once.
  CUdevice device = 0;
  int sms = 0;
  Status status = driver.check(driver.cuCtxGetDevice(&device), "cuCtxGetDevice");
  if (status.ok())
    status = driver.check(
        driver.cuDeviceGetAttribute(
            &sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, device),
        "cuDeviceGetAttribute");
  for (auto [fn, warps] :
       {std::pair{kernels.gemvE4m3Fn, &kernels.gemvE4m3Warps},
        {kernels.gemvBf16Fn, &kernels.gemvBf16Warps},
        {kernels.gemvE4m3M1Fn, &kernels.gemvE4m3M1Warps},
        {kernels.gemvBf16M1Fn, &kernels.gemvBf16M1Warps},
        {kernels.gemvE4m3M1NarrowFn, &kernels.gemvE4m3M1NarrowWarps},
        {kernels.gemvBf16M1NarrowFn, &kernels.gemvBf16M1NarrowWarps}}) {
    int blocks = 0;
    if (status.ok())
      status = driver.check(driver.cuOccupancyMaxActiveBlocksPerMultiprocessor(
                                &blocks, fn, 128, 0),
                            "cuOccupancyMaxActiveBlocksPerMultiprocessor");
    *warps = int64_t(std::max(sms, 1)) * std::max(blocks, 1) * 4;
  }
  // The tensor-core GEMMs: their shared memory past the default 48 KiB, and
  // the largest carveout so that two blocks fit an SM.
  for (auto [fn, type] : {std::pair{kernels.gemmTcBf16Fn, 1},
                          {kernels.gemmTcE4m3Fn, 2},
                          {kernels.gemmTcE4m3K32Fn, 2},
                          {kernels.expertGemmTcBf16Fn, 1},
                          {kernels.expertGemmTcE4m3Fn, 2},
                          {kernels.expertGemmTcE4m3K32Fn, 2},
                          {kernels.gemmTcBf16X1Fn, 1},
                          {kernels.gemmTcE4m3X1Fn, 2},
                          {kernels.gemmTcE4m3K32X1Fn, 2},
                          {kernels.expertGemmTcBf16X1Fn, 1},
                          {kernels.expertGemmTcE4m3X1Fn, 2},
                          {kernels.expertGemmTcE4m3K32X1Fn, 2},
                          {kernels.headGemmTcBf16Fn, 1},
                          {kernels.headGemmTcBf16X1Fn, 1}}) {
    if (status.ok())
      status =
          driver.check(driver.cuFuncSetAttribute(
                           fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                           int(tensorGemmSharedBytes(type))),
                       "cuFuncSetAttribute");
    if (status.ok())
      status = driver.check(
          driver.cuFuncSetAttribute(
              fn, CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT, 100),
          "cuFuncSetAttribute");
  }
  // The warpgroup GEMMs: one block an SM, shared memory past 48 KiB.
  for (auto [fn, bytes] :
       {std::pair{kernels.gemmWgBf16Fn, warpgroupGemmSharedBytes(1)},
        {kernels.gemmWgE4m3Fn, warpgroupGemmSharedBytes(2)},
        {kernels.gemmWgBf16X3Fn, warpgroupGemmSharedBytes(1, 3)},
        {kernels.gemmWgE4m3X3Fn, warpgroupGemmSharedBytes(2, 3)},
        {kernels.gemmWgBf16X3NarrowFn, warpgroupGemmSharedBytes(1, 3, true)},
        {kernels.expertGemmWgBf16Fn, warpgroupGemmSharedBytes(1)},
        {kernels.expertGemmWgE4m3Fn, warpgroupGemmSharedBytes(2)},
        {kernels.expertGemmWgE2m1Fn, warpgroupGemmSharedBytes(3)},
        {kernels.expertGemmWgE2m1X3Fn, warpgroupGemmSharedBytes(3, 3)},
        {kernels.gemmWgFp8Fn, fp8GemmLibraryBytes},
        {kernels.gemmWgFp8Rows64Fn,
         fp8GemmSharedBytes({64, 128, fp8GemmLibraryStages(64), 1})},
        {kernels.expertGemmWgFp8Fn, fp8GemmLibraryBytes}})
    if (status.ok())
      status = driver.check(
          driver.cuFuncSetAttribute(
              fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, int(bytes)),
          "cuFuncSetAttribute");
  // The staged CUDA-core MXFP4 kernel: shared memory past 48 KiB, and the
  // largest carveout, for several blocks an SM.
  if (status.ok())
    status = driver.check(driver.cuFuncSetAttribute(
                              kernels.mxfp4ExpertMatmulStagedFn,
                              CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                              int(kMxfp4StagedSharedBytes)),
                          "cuFuncSetAttribute");
  if (status.ok())
    status = driver.check(
        driver.cuFuncSetAttribute(
            kernels.mxfp4ExpertMatmulStagedFn,
            CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT, 100),
        "cuFuncSetAttribute");
  // The decode expert GEMVs: the largest carveout, so that the blocks
  // their registers or rings allow also fit by shared memory, and how many
  // the GPU holds at once (their grid is never larger: no second wave):
  // each form's shared memory allowed (the carveout at its largest), then
  // the driver's occupancy at 128 threads.
  auto expertGemvResident = [&](CUfunction fn, int bytes) -> int64_t {
    int blocks = 0;
    if (status.ok())
      status = driver.check(
          driver.cuFuncSetAttribute(
              fn, CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT, 100),
          "cuFuncSetAttribute");
    if (status.ok())
      status = driver.check(
          driver.cuFuncSetAttribute(
              fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, bytes),
          "cuFuncSetAttribute");
    if (status.ok())
      status = driver.check(driver.cuOccupancyMaxActiveBlocksPerMultiprocessor(
                                &blocks, fn, 128, bytes),
                            "cuOccupancyMaxActiveBlocksPerMultiprocessor");
    return int64_t(std::max(sms, 1)) * std::max(blocks, 1);
  };
  const ExpertGemvStreaming forms[3] = {ExpertGemvStreaming::Registers,
                                        ExpertGemvStreaming::Ring4,
                                        ExpertGemvStreaming::Ring8};
  const CUfunction expertGemvFns[2][3] = {
      {kernels.expertGemvTcBf16Fn, kernels.expertGemvTcBf16Ring4Fn,
       kernels.expertGemvTcBf16Ring8Fn},
      {kernels.expertGemvTcE4m3Fn, kernels.expertGemvTcE4m3Ring4Fn,
       kernels.expertGemvTcE4m3Ring8Fn}};
  for (int e4m3 = 0; e4m3 < 2; ++e4m3)
    for (int form = 0; form < 3; ++form) {
      CUfunction fn = expertGemvFns[e4m3][form];
      int bytes = int(expertGemvSharedBytes(forms[form]));
      kernels.expertGemvBlocks[e4m3][form] = expertGemvResident(fn, bytes);
      if (form == 0)
        continue;
      // The ring forms' clusters (0 for a size the GPU cannot hold: the
      // driver's answer, or its error, never chosen).
      int64_t(&active)[kExpertGemvMaxCluster + 1] =
          kernels.expertGemvClusters[e4m3][form - 1];
      active[1] = kernels.expertGemvBlocks[e4m3][form];
      for (unsigned c = 2; c <= unsigned(kExpertGemvMaxCluster); ++c)
        active[c] = maxActiveClusters(driver, fn, c, 128, unsigned(bytes));
    }
  // The MXFP4 tensor-core GEMV: the register form's shared memory and its
  // transposition buffers.
  kernels.expertGemvE2m1Blocks = expertGemvResident(
      kernels.expertGemvTcE2m1Fn, int(kExpertGemvE2m1SharedBytes));
  // The tensor-core GEMVs: shared memory up to the opt-in limit, and how
  // many blocks of each fit an SM by registers.
  int shared[3] = {};
  const CUdevice_attribute sharedAttributes[3] = {
      CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR,
      CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN,
      CU_DEVICE_ATTRIBUTE_RESERVED_SHARED_MEMORY_PER_BLOCK};
  for (int i = 0; i < 3 && status.ok(); ++i)
    status = driver.check(
        driver.cuDeviceGetAttribute(&shared[i], sharedAttributes[i], device),
        "cuDeviceGetAttribute");
  kernels.multiprocessors = std::max(sms, 1);
  kernels.sharedPerSm = shared[0];
  kernels.sharedPerBlock = shared[1];
  kernels.sharedReserved = shared[2];
  const CUfunction tensorFns[2][2][2] = {
      {{kernels.gemvTcBf16M1T1Fn, kernels.gemvTcBf16M1T2Fn},
       {kernels.gemvTcBf16M8T1Fn, kernels.gemvTcBf16M8T2Fn}},
      {{kernels.gemvTcE4m3M1T1Fn, kernels.gemvTcE4m3M1T2Fn},
       {kernels.gemvTcE4m3M8T1Fn, kernels.gemvTcE4m3M8T2Fn}}};
  for (int e4m3 = 0; e4m3 < 2; ++e4m3)
    for (int many = 0; many < 2; ++many)
      for (int tiles = 0; tiles < 2; ++tiles) {
        TensorGemvKernel &kernel = kernels.tensorGemvKernels[e4m3][many][tiles];
        kernel.fn = tensorFns[e4m3][many][tiles];
        int blocks = 0;
        if (status.ok())
          status = driver.check(
              driver.cuFuncSetAttribute(
                  kernel.fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                  shared[1]),
              "cuFuncSetAttribute");
        unsigned threads = many ? 256 : 128;
        if (status.ok())
          status =
              driver.check(driver.cuOccupancyMaxActiveBlocksPerMultiprocessor(
                               &blocks, kernel.fn, int(threads), 0),
                           "cuOccupancyMaxActiveBlocksPerMultiprocessor");
        // Clusters of up to 16 blocks (H100/H200; the driver reports 0
        // active clusters of a size a GPU cannot hold, never chosen).
        driver.cuFuncSetAttribute(
            kernel.fn, CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED, 1);
        kernel.blocksPerSm =
            std::clamp<int64_t>(blocks, 1, TensorGemvKernel::kMaxBlocks);
        // Clusters resident at once for b blocks an SM: shared memory sized
        // so that exactly b fit.
        for (int b = 1; b <= kernel.blocksPerSm; ++b) {
          unsigned bytes = unsigned(std::min<int64_t>(
              kernels.sharedPerSm / b - kernels.sharedReserved,
              kernels.sharedPerBlock));
          kernel.activeClusters[1][b] = kernels.multiprocessors * b;
          for (unsigned c = 2; c <= TensorGemvKernel::kMaxCluster; ++c)
            kernel.activeClusters[c][b] =
                maxActiveClusters(driver, kernel.fn, c, threads, bytes);
        }
      }
  // Beyond the 48 KiB default: tc128's Q parts (its tiles are static),
  // the tensor-core sparse MLA's Q and tiles, kda_chunk's intra- and
  // inter-chunk passes, and the indexer's q and keys.
  for (auto [fn, bytes] :
       {std::pair{kernels.attentionTc128Fn, kTcAttention128Bytes},
        {kernels.sparseMlaTcFn, sparseMlaTcSharedBytes(576)},
        {kernels.sparseMlaTcSplitFn, sparseMlaTcSharedBytes(576)},
        {kernels.sparseMlaWgFn, sparseMlaWgSharedBytes()},
        {kernels.sparseMlaWgSplitFn, sparseMlaWgSharedBytes()},
        {kernels.dsaIndexerScoresFn, kernels.sharedPerBlock},
        {kernels.dsaIndexerTcE4m3Fn,
         kIndexerRopeBytes + indexerTcSharedBytes(128)},
        {kernels.dsaIndexerTcBf16Fn,
         kIndexerRopeBytes + indexerTcSharedBytes(128)},
        {kernels.dsaIndexerTokensE4m3_64Fn,
         4 * kIndexerRopeBytes + indexerTokensSharedBytes(128)},
        {kernels.dsaIndexerTokensE4m3_128Fn,
         4 * kIndexerRopeBytes + indexerTokensSharedBytes(128)},
        {kernels.dsaIndexerTokensBf16_64Fn,
         4 * kIndexerRopeBytes + indexerTokensSharedBytes(128)},
        {kernels.dsaIndexerTokensBf16_128Fn,
         4 * kIndexerRopeBytes + indexerTokensSharedBytes(128)},
        {kernels.attentionWideFn,
         wideAttentionSharedBytes(kWideAttentionMaxHeadDim,
                                  kWideAttentionMaxValueDim, false)},
        {kernels.kdaIntraFn, kdaIntraSharedBytes(kKdaMaxKeyDim)},
        {kernels.kdaInterFn, kdaInterSharedBytes(kKdaMaxKeyDim)}})
    if (status.ok())
      status = driver.check(
          driver.cuFuncSetAttribute(
              fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, int(bytes)),
          "cuFuncSetAttribute");
  if (!status.ok())
    return status.withContext("loading the CUDA kernels");
  return kernels;
}

/// The grid check of every launch: an empty grid is nothing to do.
static std::optional<Status> checkGrid(const char *name, int64_t gridX,
                                       int64_t gridY, int64_t gridZ) {
  if (gridX <= 0 || gridY <= 0 || gridZ <= 0)
    return Status::success();
  if (gridX > 0x7FFFFFFF || gridY > 65535 || gridZ > 65535)
    return Status::error(std::string(name) + ": grid " + std::to_string(gridX) +
                         " x " + std::to_string(gridY) + " x " +
                         std::to_string(gridZ) +
                         " exceeds the limits (2^31-1, 65535, 65535)");
  return std::nullopt;
}

Status CudaKernels::launch(CUfunction function, const char *name, int64_t gridX,
                           int64_t gridY, int64_t gridZ, unsigned block,
                           unsigned sharedBytes, CUstream stream,
                           void **params) const {
  if (std::optional<Status> done = checkGrid(name, gridX, gridY, gridZ))
    return *done;
  return driver->check(driver->cuLaunchKernel(function, unsigned(gridX),
                                              unsigned(gridY), unsigned(gridZ),
                                              block, 1, 1, sharedBytes, stream,
                                              params, nullptr),
                       name);
}

Status CudaKernels::launchDependent(CUfunction function, const char *name,
                                    int64_t gridX, int64_t gridY, int64_t gridZ,
                                    unsigned block, unsigned sharedBytes,
                                    CUstream stream, void **params) const {
  if (!programmatic)
    return launch(function, name, gridX, gridY, gridZ, block, sharedBytes,
                  stream, params);
  if (std::optional<Status> done = checkGrid(name, gridX, gridY, gridZ))
    return *done;
  CUlaunchAttribute early = {};
  early.id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
  early.value.programmaticStreamSerializationAllowed = 1;
  CUlaunchConfig config{};
  config.gridDimX = unsigned(gridX);
  config.gridDimY = unsigned(gridY);
  config.gridDimZ = unsigned(gridZ);
  config.blockDimX = block;
  config.blockDimY = 1;
  config.blockDimZ = 1;
  config.sharedMemBytes = sharedBytes;
  config.hStream = stream;
  config.attrs = &early;
  config.numAttrs = 1;
  return driver->check(
      driver->cuLaunchKernelEx(&config, function, params, nullptr), name);
}

Status CudaKernels::launchClusters(CUfunction function, const char *name,
                                   int64_t clusters, unsigned clusterSize,
                                   unsigned block, unsigned sharedBytes,
                                   bool early, CUstream stream,
                                   void **params) const {
  const int64_t blocks = clusters * clusterSize;
  if (std::optional<Status> done = checkGrid(name, blocks, 1, 1))
    return *done;
  CUlaunchAttribute attributes[2] = {};
  unsigned count = 0;
  if (clusterSize > 1) {
    CUlaunchAttribute &cluster = attributes[count++];
    cluster.id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
    cluster.value.clusterDim.x = clusterSize;
    cluster.value.clusterDim.y = 1;
    cluster.value.clusterDim.z = 1;
  }
  if (early) {
    CUlaunchAttribute &programmaticLaunch = attributes[count++];
    programmaticLaunch.id =
        CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
    programmaticLaunch.value.programmaticStreamSerializationAllowed = 1;
  }
  CUlaunchConfig config{};
  config.gridDimX = unsigned(blocks);
  config.gridDimY = 1;
  config.gridDimZ = 1;
  config.blockDimX = block;
  config.blockDimY = 1;
  config.blockDimZ = 1;
  config.sharedMemBytes = sharedBytes;
  config.hStream = stream;
  config.attrs = attributes;
  config.numAttrs = count;
  return driver->check(
      driver->cuLaunchKernelEx(&config, function, params, nullptr), name);
}

Status CudaKernels::embedding(CUdeviceptr table, int64_t vocab, int64_t dim,
                              CUdeviceptr ids, int64_t tokens, CUdeviceptr out,
                              CUstream stream) const {
  return embedding(DeviceWeight::f32(table), vocab, dim, ids, tokens, out,
                   stream);
}

Status CudaKernels::embedding(const DeviceWeight &table, int64_t vocab,
                              int64_t dim, CUdeviceptr ids, int64_t tokens,
                              CUdeviceptr out, CUstream stream) const {
  DeviceWeight t = table;
  void *params[] = {&t, &vocab, &dim, &ids, &tokens, &out};
  return launchDependent(embeddingFn, "embedding", tokens, 1, 1, 256, 0, stream,
                         params);
}

Status CudaKernels::rmsNorm(CUdeviceptr x, CUdeviceptr weight, int64_t rows,
                            int64_t dim, double eps, CUdeviceptr out,
                            CUstream stream, CUfunction specialized) const {
  return rmsNorm(x, DeviceWeight::f32(weight), rows, dim, eps, out, stream,
                 specialized);
}

Status CudaKernels::rmsNorm(CUdeviceptr x, const DeviceWeight &weight,
                            int64_t rows, int64_t dim, double eps,
                            CUdeviceptr out, CUstream stream,
                            CUfunction specialized, int64_t xStride,
                            int64_t outStride) const {
  DeviceWeight w = weight;
  xStride = xStride ? xStride : dim;
  outStride = outStride ? outStride : dim;
  void *params[] = {&x, &w, &rows, &dim, &eps, &out, &xStride, &outStride};
  // 256 threads: daybreak_rms_norm_t<dim> keeps a thread's dim / 256
  // values in registers (kRmsNormThreads in CudaKernels.cu).
  return launchDependent(specialized ? specialized : rmsNormFn, "rmsNorm", rows,
                         1, 1, 256, 0, stream, params);
}

Status CudaKernels::addRmsNorm(CUdeviceptr x, CUdeviceptr residual,
                               const DeviceWeight &weight, int64_t rows,
                               int64_t dim, double eps, CUdeviceptr sum,
                               CUdeviceptr out, CUstream stream,
                               CUfunction specialized) const {
  DeviceWeight w = weight;
  void *params[] = {&x, &residual, &w, &rows, &dim, &eps, &sum, &out};
  // 256 threads, as rmsNorm (kRmsNormThreads in CudaKernels.cu).
  return launchDependent(specialized ? specialized : addRmsNormFn, "addRmsNorm",
                         rows, 1, 1, 256, 0, stream, params);
}

Status CudaKernels::shortConv(CUdeviceptr x, const DeviceWeight &weight,
                              int64_t channels, int64_t width,
                              const DeviceState &state, CUdeviceptr sequences,
                              int64_t tokens, int64_t activation,
                              CUdeviceptr out, CUstream stream) const {
  if (width < 2 || width > kShortConvMaxWidth ||
      (width - 1) * channels * (state.bf16 ? 2 : 4) != state.slotBytes)
    return Status::error("short_conv: a width-" + std::to_string(width) +
                         " convolution over " + std::to_string(channels) +
                         " channels with state slots of " +
                         std::to_string(state.slotBytes) +
                         " bytes (the CUDA kernel takes widths 2 to " +
                         std::to_string(kShortConvMaxWidth) + ")");
  DeviceWeight w = weight;
  CUdeviceptr base = state.base;
  int64_t slotBytes = state.slotBytes, slots = state.slots;
  int32_t bf16 = state.bf16, act = int32_t(activation);
  int64_t count = tokens * channels;
  void *params[] = {&x,      &w,        &base,  &slotBytes, &bf16, &sequences,
                    &tokens, &channels, &width, &slots,     &act,  &out};
  DAYBREAK_RETURN_IF_ERROR(launch(shortConvFn, "shortConv", ceilDiv(count, 256),
                                  1, 1, 256, 0, stream, params));
  void *update[] = {&x,         &base,   &slotBytes, &bf16,
                    &sequences, &tokens, &channels,  &width};
  return launch(shortConvStateFn, "shortConvState", slots,
                ceilDiv(channels, 128), 1, 128, 0, stream, update);
}

Status CudaKernels::kdaGate(CUdeviceptr raw, CUdeviceptr aLog,
                            CUdeviceptr dtBias, int64_t tokens, int64_t heads,
                            int64_t dim, const double *lowerBound,
                            CUdeviceptr out, CUstream stream) const {
  int64_t count = tokens * heads * dim;
  int32_t bounded = lowerBound != nullptr;
  double bound = lowerBound ? *lowerBound : 0.0;
  void *params[] = {&raw, &aLog,    &dtBias, &count, &heads,
                    &dim, &bounded, &bound,  &out};
  return launch(kdaGateFn, "kdaGate", ceilDiv(count, 256), 1, 1, 256, 0, stream,
                params);
}

uint64_t CudaKernels::kdaChunkScratchBytes(int64_t tokens, int64_t slots,
                                           int64_t heads, int64_t keyDim,
                                           int64_t valueDim) {
  return kdaScratchLayout(0, tokens, slots, heads, keyDim, valueDim).second;
}

Status CudaKernels::kda(bool chunked, const DeviceKdaInputs &in,
                        const DeviceState &state, CUdeviceptr sequences,
                        int64_t tokens, int64_t heads, int64_t keyDim,
                        int64_t valueDim, double scale, bool qkL2Norm,
                        CUdeviceptr scratch, uint64_t scratchBytes,
                        CUdeviceptr out, CUstream stream) const {
  const char *name = chunked ? "kda_chunk" : "kda_step";
  if (keyDim <= 0 || keyDim > kKdaMaxKeyDim || valueDim <= 0)
    return Status::error(
        std::string(name) + ": key dim " + std::to_string(keyDim) +
        " (the CUDA kernels take 1 to " + std::to_string(kKdaMaxKeyDim) + ")");
  if (heads * keyDim * valueDim * (state.bf16 ? 2 : 4) != state.slotBytes)
    return Status::error(std::string(name) + ": a state slot of " +
                         std::to_string(state.slotBytes) +
                         " bytes does not hold " + std::to_string(heads) +
                         " heads of " + std::to_string(keyDim) + " x " +
                         std::to_string(valueDim));
  DeviceKdaInputs i = in;
  CUdeviceptr base = state.base;
  int64_t slotBytes = state.slotBytes, slots = state.slots;
  int32_t bf16 = state.bf16, l2norm = qkL2Norm;
  if (!chunked) {
    // daybreak_kda_step indexes its operands and a slot's state in 32 bits.
    constexpr int64_t kMax = 0x7FFFFFFF;
    if (tokens * heads * std::max(keyDim, valueDim) > kMax ||
        heads * keyDim * valueDim > kMax)
      return Status::error(
          "kda_step: " + std::to_string(tokens) + " tokens of " +
          std::to_string(heads) + " heads (" + std::to_string(keyDim) + " x " +
          std::to_string(valueDim) + ") exceed 2^31 - 1 elements an operand");
    void *params[] = {&i.q,    &i.k,       &i.v,    &i.g,       &i.beta,
                      &base,   &slotBytes, &bf16,   &sequences, &tokens,
                      &heads,  &slots,     &keyDim, &valueDim,  &scale,
                      &l2norm, &out};
    return launch(kdaStepFn, name, tokens * heads * ceilDiv(valueDim, 64), 1, 1,
                  256, 0, stream, params);
  }
  if (tokens == 0 || slots == 0)
    return Status::success();
  auto [s, bytes] =
      kdaScratchLayout(scratch, tokens, slots, heads, keyDim, valueDim);
  if (bytes > scratchBytes)
    return Status::error(
        "kda_chunk: " + std::to_string(tokens) + " tokens over " +
        std::to_string(slots) + " slots need " + std::to_string(bytes) +
        " bytes of scratch, " + std::to_string(scratchBytes) + " given");
  void *order[] = {&sequences, &tokens, &s};
  DAYBREAK_RETURN_IF_ERROR(
      launch(kdaCountFn, "kda_count", slots, 1, 1, 256, 0, stream, order));
  DAYBREAK_RETURN_IF_ERROR(
      launch(kdaOrderFn, "kda_order", slots, 1, 1, 256, 0, stream, order));
  void *intra[] = {&i.q,   &i.k,    &i.v,      &i.g,   &i.beta, &tokens,
                   &heads, &keyDim, &valueDim, &scale, &l2norm, &s};
  DAYBREAK_RETURN_IF_ERROR(launch(kdaIntraFn, "kda_intra", s.maxChunks, heads,
                                  1, 512, unsigned(kdaIntraSharedBytes(keyDim)),
                                  stream, intra));
  void *inter[] = {&base,   &slotBytes, &bf16, &tokens, &heads,
                   &keyDim, &valueDim,  &s,    &out};
  return launch(kdaInterFn, "kda_inter", slots, heads,
                kdaValuePad(valueDim) / kKdaColumns, 512,
                unsigned(kdaInterSharedBytes(keyDim)), stream, inter);
}

Status CudaKernels::gatedRmsNorm(CUdeviceptr x, CUdeviceptr gate,
                                 const DeviceWeight &weight, int64_t rows,
                                 int64_t dim, double eps, int64_t activation,
                                 CUdeviceptr out, CUstream stream) const {
  DeviceWeight w = weight;
  int32_t act = int32_t(activation);
  void *params[] = {&x, &gate, &w, &dim, &eps, &act, &out};
  return launch(gatedRmsNormFn, "gatedRmsNorm", rows, 1, 1, 128, 0, stream,
                params);
}

Status CudaKernels::mhcPre(CUdeviceptr streams, CUdeviceptr fn,
                           CUdeviceptr base, CUdeviceptr scale, int64_t tokens,
                           int64_t n, int64_t width, int64_t sinkhornIters,
                           double eps, double normEps, const DeviceWeight &norm,
                           double inputEps, CUdeviceptr scratch,
                           uint64_t scratchBytes, CUdeviceptr input,
                           CUdeviceptr post, CUdeviceptr comb,
                           CUstream stream) const {
  DAYBREAK_RETURN_IF_ERROR(checkMhcStreams("mhc_pre", n, sinkhornIters));
  if (tokens <= 0)
    return Status::success();
  int64_t splits = 0;
  DAYBREAK_RETURN_IF_ERROR(
      mhcSplits("mhc_pre", tokens, n, width, scratchBytes, splits));
  int64_t flat = n * width, mixes = (2 + n) * n;
  int64_t chunks = std::max<int64_t>(1, ceilDiv(flat, kMhcChunkColumns));
  int64_t perSplit = ceilDiv(chunks, splits);
  void *logits[] = {&streams, &fn, &tokens, &flat, &mixes, &perSplit, &scratch};
  DAYBREAK_RETURN_IF_ERROR(launch(n <= 4 ? mhcLogitsFn : mhcLogitsWideFn,
                                  "mhc_logits", ceilDiv(tokens, kMhcTileTokens),
                                  splits, 1, kMhcChunkColumns, 0, stream,
                                  logits));
  return mhcFinish(streams, base, scale, tokens, n, width, splits,
                   sinkhornIters, eps, normEps, norm, inputEps, scratch, input,
                   post, comb, stream);
}

Status CudaKernels::mhcFinish(CUdeviceptr streams, CUdeviceptr base,
                              CUdeviceptr scale, int64_t tokens, int64_t n,
                              int64_t width, int64_t splits,
                              int64_t sinkhornIters, double eps, double normEps,
                              const DeviceWeight &norm, double inputEps,
                              CUdeviceptr partials, CUdeviceptr input,
                              CUdeviceptr post, CUdeviceptr comb,
                              CUstream stream) const {
  DeviceWeight w = norm;
  void *finish[] = {&streams,  &partials, &base,          &scale, &tokens,  &n,
                    &width,    &splits,   &sinkhornIters, &eps,   &normEps, &w,
                    &inputEps, &input,    &post,          &comb};
  // With the norm a block writes all D inputs of its tokens (one column
  // slice), to scale them by their norm factor: a block a tile, walking its
  // tokens' slices one after another, each a round trip to memory. That
  // pays where the tiles fill the GPU, or where a block has few slices to
  // walk; otherwise the tiles' slices run side by side and the norm is its
  // own launch over the inputs in place. Measured on the H200 at n = 4, D =
  // 4096 (4 slices): 1 token, 26.6 us fused against 30.3 us with the
  // launch; 64 tokens (8 blocks of 32 slices), 70.2 us against 46.9 us.
  int64_t tiles = ceilDiv(tokens, kMhcTileTokens),
          slices = std::max<int64_t>(1, ceilDiv(width, kMhcSliceColumns));
  if (norm.data && (tiles >= multiprocessors ||
                    std::min<int64_t>(tokens, kMhcTileTokens) * slices <= 8))
    return launch(mhcPreNormFn, "mhc_pre_norm", tiles, 1, 1,
                  32 * kMhcTileTokens, 0, stream, finish);
  w = DeviceWeight(); // the plain finish; the norm follows
  DAYBREAK_RETURN_IF_ERROR(launch(mhcPreFn, "mhc_pre", tiles, slices, 1,
                                  32 * kMhcTileTokens, 0, stream, finish));
  if (!norm.data)
    return Status::success();
  return rmsNorm(input, norm, tokens, width, inputEps, input, stream);
}

Status CudaKernels::mhcPost(CUdeviceptr streams, CUdeviceptr y,
                            CUdeviceptr post, CUdeviceptr comb, int64_t tokens,
                            int64_t n, int64_t width, CUdeviceptr out,
                            CUstream stream) const {
  DAYBREAK_RETURN_IF_ERROR(checkMhcStreams("mhc_post", n));
  void *params[] = {&streams, &y, &post, &comb, &n, &width, &out};
  return launch(mhcPostFn, "mhc_post", tokens, ceilDiv(width, 256), 1, 256, 0,
                stream, params);
}

Status CudaKernels::mhcPostPre(
    CUdeviceptr streams, CUdeviceptr y, CUdeviceptr post, CUdeviceptr comb,
    CUdeviceptr fn, CUdeviceptr base, CUdeviceptr scale, int64_t tokens,
    int64_t n, int64_t width, int64_t sinkhornIters, double eps, double normEps,
    const DeviceWeight &norm, double inputEps, CUdeviceptr scratch,
    uint64_t scratchBytes, CUdeviceptr out, CUdeviceptr input,
    CUdeviceptr nextPost, CUdeviceptr nextComb, CUstream stream) const {
  DAYBREAK_RETURN_IF_ERROR(checkMhcStreams("mhc_post_pre", n, sinkhornIters));
  if (tokens <= 0)
    return Status::success();
  int64_t flat = n * width;
  // daybreak_mhc_post_logits keeps the columns of kMhcFusedStreams streams
  // and indexes a tile in 32 bits; past either, the two kernels (the new
  // streams read back by the logits).
  if (n > kMhcFusedStreams || kMhcTileTokens * flat > 0x7FFFFFFF) {
    DAYBREAK_RETURN_IF_ERROR(
        mhcPost(streams, y, post, comb, tokens, n, width, out, stream)
            .withContext("mhc_post_pre"));
    return mhcPre(out, fn, base, scale, tokens, n, width, sinkhornIters, eps,
                  normEps, norm, inputEps, scratch, scratchBytes, input,
                  nextPost, nextComb, stream)
        .withContext("mhc_post_pre");
  }
  // mhcPre's splits (so its scratch serves), here over units of one
  // stream's chunk of kMhcChunkColumns: n ceil(D / kMhcChunkColumns) of
  // them, at least the ceil(nD / kMhcChunkColumns) chunks.
  int64_t splits = 0;
  DAYBREAK_RETURN_IF_ERROR(
      mhcSplits("mhc_post_pre", tokens, n, width, scratchBytes, splits));
  int64_t units = n * ceilDiv(width, kMhcChunkColumns);
  int64_t perSplit = ceilDiv(units, splits);
  void *logits[] = {&streams, &y,     &post,     &comb, &fn,     &tokens,
                    &n,       &width, &perSplit, &out,  &scratch};
  DAYBREAK_RETURN_IF_ERROR(launch(mhcPostLogitsFn, "mhc_post_logits",
                                  ceilDiv(tokens, kMhcTileTokens), splits, 1,
                                  kMhcChunkColumns, 0, stream, logits));
  return mhcFinish(out, base, scale, tokens, n, width, splits, sinkhornIters,
                   eps, normEps, norm, inputEps, scratch, input, nextPost,
                   nextComb, stream);
}

Status CudaKernels::layerNorm(CUdeviceptr x, CUdeviceptr weight,
                              CUdeviceptr bias, int64_t rows, int64_t dim,
                              double eps, CUdeviceptr out,
                              CUstream stream) const {
  return layerNorm(x, DeviceWeight::f32(weight), DeviceWeight::f32(bias), rows,
                   dim, eps, out, stream);
}

Status CudaKernels::layerNorm(CUdeviceptr x, const DeviceWeight &weight,
                              const DeviceWeight &bias, int64_t rows,
                              int64_t dim, double eps, CUdeviceptr out,
                              CUstream stream, int64_t xStride,
                              int64_t outStride) const {
  DeviceWeight w = weight, b = bias;
  xStride = xStride ? xStride : dim;
  outStride = outStride ? outStride : dim;
  void *params[] = {&x, &w, &b, &rows, &dim, &eps, &out, &xStride, &outStride};
  return launchDependent(layerNormFn, "layerNorm", rows, 1, 1, 256, 0, stream,
                         params);
}

Status CudaKernels::matmul(CUdeviceptr x, CUdeviceptr w, CUdeviceptr bias,
                           int64_t m, int64_t n, int64_t k, CUdeviceptr out,
                           CUstream stream, CUfunction specialized) const {
  void *params[] = {&x, &w, &bias, &m, &n, &k, &out};
  if (m <= 8) // kSmallM in CudaKernels.cu: 8 warps, one column each
    return launch(specialized ? specialized : matmulSmallMFn, "matmul",
                  ceilDiv(n, 8), 1, 1, 256, 0, stream, params);
  return launch(matmulTiledFn, "matmul", ceilDiv(n, 64), ceilDiv(m, 64), 1, 256,
                0, stream, params);
}

Status CudaKernels::roundBf16(CUdeviceptr x, int64_t n, CUdeviceptr out,
                              CUstream stream) const {
  if (n <= 0)
    return Status::success();
  void *params[] = {&x, &n, &out};
  return launch(roundBf16Fn, "round to bf16",
                unsigned(std::min<int64_t>(ceilDiv(n, 256), 4096)), 1, 1, 256,
                0, stream, params);
}

StatusOr<CUdeviceptr> CudaKernels::roundedInput(CUdeviceptr x, int64_t n,
                                                int32_t type,
                                                const InputRounding &rounding,
                                                CUstream stream) const {
  if (!rounding.bf16 || type == 0)
    return x;
  if (n > rounding.scratchFloats)
    return Status::error("rounding a matmul input of " + std::to_string(n) +
                         " floats to bf16 needs as much scratch; the device "
                         "planned " +
                         std::to_string(rounding.scratchFloats));
  DAYBREAK_RETURN_IF_ERROR(roundBf16(x, n, rounding.scratch, stream));
  return rounding.scratch;
}

Status CudaKernels::matmul(CUdeviceptr x, const DeviceWeight &w,
                           const DeviceWeight &bias, int64_t m, int64_t n,
                           int64_t k, CUdeviceptr out, CUstream stream,
                           CUfunction specialized, bool constantWeight,
                           const InputRounding &rounding,
                           const Fp8GemmTile *tile) const {
  if (w.type == 0 && (bias.data == 0 || bias.type == 0))
    return matmul(x, w.data, bias.data, m, n, k, out, stream, specialized);
  if (rounding.fp8 && fp8InputsApply(w)) {
    // FP8 x: the FP8 GEMM past the GEMVs' rows (its tile the compiler's,
    // `specialized` its instantiation), else the paths that take fp32 on
    // x quantized and written back (the same exact products): past 8 rows
    // the one-part tensor-core GEMM (the values are bf16's), else the
    // GEMVs.
    if (m > kFp8GemvMaxRows && fp8GemmApplies(w, k) && x % 16 == 0)
      return fp8Gemm(x, w, bias, m, n, k, out, stream, rounding, tile,
                     tile ? specialized : nullptr);
    StatusOr<CUdeviceptr> quantized = fp8Dequantized(x, m, k, rounding, stream);
    if (!quantized.ok())
      return quantized.error();
    if (m > 8 && tensorGemmApplies(w, k))
      return tensorGemm(*quantized, w, bias, m, n, k, out, stream,
                        /*bf16Input=*/true);
    return matmul(*quantized, w, bias, m, n, k, out, stream, specialized,
                  constantWeight, InputRounding());
  }
  // The warpgroup MMA: on x rounded to bf16, or exactly on x's three bf16
  // parts where the device planned their scratch (without it, the exact
  // mma.sync GEMM below: the same products, summed in another order).
  if (rounding.bf16 && warpgroupGemmApplies(w, m, k) && x % 16 == 0)
    return warpgroupGemm(x, w, bias, m, n, k, out, stream, rounding);
  if (!rounding.bf16 && rounding.scratch % 16 == 0) {
    int64_t parts = exactMatmulScratchFloats(w, m, k, x % 16 == 0);
    if (parts > 0 && parts <= rounding.scratchFloats)
      return warpgroupGemm(x, w, bias, m, n, k, out, stream, rounding);
  }
  if (m > 8 && tensorGemmApplies(w, k) && x % 16 == 0)
    return tensorGemm(x, w, bias, m, n, k, out, stream,
                      rounding.bf16 && w.type != 0);
  StatusOr<CUdeviceptr> input =
      roundedInput(x, m * k, w.type, rounding, stream);
  if (!input.ok())
    return input.error();
  x = *input;
  DeviceWeight weight = w, b = bias;
  weight.rows = n;
  weight.cols = k;
  void *params[] = {&x, &weight, &b, &m, &n, &k, &out};
  if (m > 8)
    return launch(matmulStoredTiledFn, "matmul", ceilDiv(n, 64), ceilDiv(m, 64),
                  1, 256, 0, stream, params);
  // 16-byte pieces: 16 e4m3 codes within one scale block, or 8 bf16 values;
  // a warp task is eight e4m3 or four bf16 columns for one input row (two
  // where that would leave most warps idle), else two.
  bool e4m3 = w.type == 2 && k % 16 == 0 && w.blockK % 16 == 0;
  bool bf16 = w.type == 1 && k % 8 == 0;
  // The tensor cores where they apply, but for bf16 at m = 1 with enough
  // columns to fill the GPU with the CUDA-core kernel below, which then
  // reads at the copy bandwidth (lm_head: 107 % against 96-102 %); with
  // fewer, its narrow form is the slower (router gate 14.5 us against 6.3).
  bool wideBf16 = bf16 && m == 1 && ceilDiv(n, 4) >= gemvBf16M1Warps / 2;
  if (tensorGemvApplies(w, m, k) && !wideBf16)
    return tensorGemv(x, w, bias, m, n, k, out, stream, {}, constantWeight);
  if ((e4m3 || bf16) && m == 1) {
    int64_t wide = e4m3 ? gemvE4m3M1Warps : gemvBf16M1Warps;
    int64_t tasks = ceilDiv(n, e4m3 ? 8 : 4);
    if (tasks >= wide / 2)
      return launchGemv(e4m3 ? gemvE4m3M1Fn : gemvBf16M1Fn, wide, tasks,
                        stream, params);
    return launchGemv(e4m3 ? gemvE4m3M1NarrowFn : gemvBf16M1NarrowFn,
                      e4m3 ? gemvE4m3M1NarrowWarps : gemvBf16M1NarrowWarps,
                      ceilDiv(n, 2), stream, params);
  }
  if (e4m3 || bf16)
    return launchGemv(e4m3 ? gemvE4m3Fn : gemvBf16Fn,
                      e4m3 ? gemvE4m3Warps : gemvBf16Warps, ceilDiv(n, 2),
                      stream, params);
  return launch(gemvStoredFn, "matmul", ceilDiv(n, 8), 1, 1, 256, 0, stream,
                params);
}

bool CudaKernels::tensorGemvApplies(const DeviceWeight &w, int64_t m,
                                    int64_t k) {
  if (m < 1 || m > 8 || k <= 0)
    return false;
  if (w.type == 2)
    return k % 128 == 0 && w.blockK > 0 && w.blockK % 128 == 0 &&
           w.blockN > 0 && w.blockN % 16 == 0;
  return w.type == 1 && k % 64 == 0;
}

bool CudaKernels::tensorGemmApplies(const DeviceWeight &w, int64_t k) {
  if (k <= 0 || k % 16 != 0 || w.data % 16 != 0)
    return false;
  // e4m3: DeepSeek's 128 x 128 blocks (any blockK a multiple of the
  // 64-column stage) or [1, 32] (the MXFP4 routes' FP8 experts).
  if (w.type == 2)
    return w.blockN > 0 &&
           (w.blockK == 32 || (w.blockK > 0 && w.blockK % 64 == 0));
  return w.type == 1;
}

CUfunction CudaKernels::tensorGemmFn(const DeviceWeight &w, bool grouped,
                                     bool bf16Input) const {
  if (bf16Input) {
    if (w.type == 1)
      return grouped ? expertGemmTcBf16X1Fn : gemmTcBf16X1Fn;
    if (w.blockK == 32)
      return grouped ? expertGemmTcE4m3K32X1Fn : gemmTcE4m3K32X1Fn;
    return grouped ? expertGemmTcE4m3X1Fn : gemmTcE4m3X1Fn;
  }
  if (w.type == 1)
    return grouped ? expertGemmTcBf16Fn : gemmTcBf16Fn;
  if (w.blockK == 32)
    return grouped ? expertGemmTcE4m3K32Fn : gemmTcE4m3K32Fn;
  return grouped ? expertGemmTcE4m3Fn : gemmTcE4m3Fn;
}

Status CudaKernels::tensorGemm(CUdeviceptr x, const DeviceWeight &w,
                               const DeviceWeight &bias, int64_t m, int64_t n,
                               int64_t k, CUdeviceptr out, CUstream stream,
                               bool bf16Input) const {
  if (!tensorGemmApplies(w, k) || x % 16 != 0)
    return Status::error("tensorGemm: no tensor-core GEMM for weight type " +
                         std::to_string(w.type) + ", blockK " +
                         std::to_string(w.blockK) + ", k " + std::to_string(k) +
                         " (or x or the weight not 16-byte aligned)");
  DeviceWeight weight = w, b = bias;
  weight.rows = n;
  weight.cols = k;
  void *params[] = {&x, &weight, &b, &m, &n, &k, &out};
  return launch(tensorGemmFn(w, false, bf16Input), "matmul (tensor-core GEMM)",
                ceilDiv(n, 128), ceilDiv(m, kTensorGemmRows), 1, 128,
                unsigned(tensorGemmSharedBytes(w.type)), stream, params);
}

namespace {
/// warpgroupGemmApplies but for the row minimum.
bool warpgroupGemmRuns(const DeviceWeight &w, int64_t k) {
  if (k <= 0 || w.data % 16 != 0)
    return false;
  if (w.type == 1)
    return k % 8 == 0;
  return w.type == 2 && k % 16 == 0 && w.blockN > 0 && w.blockN % 128 == 0 &&
         w.blockK > 0 && w.blockK % 64 == 0;
}
} // namespace

bool CudaKernels::warpgroupGemmApplies(const DeviceWeight &w, int64_t m,
                                       int64_t k, bool bf16) {
  int64_t least = !bf16         ? kWarpgroupGemmMinRowsExact
                  : w.type == 1 ? kWarpgroupGemmMinRowsBf16
                                : kWarpgroupGemmMinRows;
  return m >= least && warpgroupGemmRuns(w, k);
}

int64_t CudaKernels::matmulRoundingFloats(const DeviceWeight &w, int64_t m,
                                          int64_t n, int64_t k, bool xAligned,
                                          bool fp8,
                                          const Fp8GemmTile *tile) const {
  if (w.type == 0)
    return 0;
  if (fp8 && fp8InputsApply(w)) {
    if (m <= kFp8GemvMaxRows || !fp8GemmApplies(w, k) || !xAligned)
      return m * k;
    return fp8GemmScratchFloats(m, k, n,
                                (tile ? *tile : fp8GemmTile(m, n, k)).splits);
  }
  if (xAligned && warpgroupGemmApplies(w, m, k))
    return warpgroupGemmScratchFloats(m, k, true);
  if (m > 8 && xAligned && tensorGemmApplies(w, k))
    return 0;
  return m * k;
}

Status CudaKernels::encodeTileMap(CUtensorMap &map, CUdeviceptr base,
                                  int64_t rows, int64_t k, int64_t boxRows,
                                  TileMap kind) const {
  const bool codes = kind != TileMap::Bf16;
  // Row-major: dimension 0 is k.
  cuuint64_t dims[2] = {cuuint64_t(k), cuuint64_t(rows)};
  cuuint64_t strides[1] = {cuuint64_t(k * (codes ? 1 : 2))};
  cuuint32_t box[2] = {kind == TileMap::CodesSwizzled ? 128u
                       : kind == TileMap::Packed      ? 32u
                                                      : 64u,
                       cuuint32_t(boxRows)};
  cuuint32_t unit[2] = {1, 1};
  return driver->check(driver->cuTensorMapEncodeTiled(
                           &map,
                           codes ? CU_TENSOR_MAP_DATA_TYPE_UINT8
                                 : CU_TENSOR_MAP_DATA_TYPE_BFLOAT16,
                           2, reinterpret_cast<void *>(base), dims, strides,
                           box, unit, CU_TENSOR_MAP_INTERLEAVE_NONE,
                           kind == TileMap::Codes || kind == TileMap::Packed
                               ? CU_TENSOR_MAP_SWIZZLE_NONE
                               : CU_TENSOR_MAP_SWIZZLE_128B,
                           CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                           CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE),
                       "cuTensorMapEncodeTiled");
}

Status CudaKernels::warpgroupGemm(CUdeviceptr x, const DeviceWeight &w,
                                  const DeviceWeight &bias, int64_t m,
                                  int64_t n, int64_t k, CUdeviceptr out,
                                  CUstream stream,
                                  const InputRounding &rounding) const {
  if (!warpgroupGemmRuns(w, k) || x % 16 != 0)
    return Status::error("warpgroupGemm: no warpgroup GEMM for weight type " +
                         std::to_string(w.type) + ", blocks " +
                         std::to_string(w.blockN) + " x " +
                         std::to_string(w.blockK) + ", k " + std::to_string(k) +
                         " (or x or the weight not 16-byte aligned)");
  if (m <= 0 || n <= 0)
    return Status::success();
  const int parts = rounding.bf16 ? 1 : 3;
  int64_t need = warpgroupGemmScratchFloats(m, k, rounding.bf16);
  if (need > rounding.scratchFloats || rounding.scratch % 16 != 0)
    return Status::error("warpgroupGemm: x [" + std::to_string(m) + ", " +
                         std::to_string(k) + "] in " + std::to_string(parts) +
                         " bf16 part(s) needs " + std::to_string(need) +
                         " floats of 16-byte aligned scratch; the device "
                         "planned " +
                         std::to_string(rounding.scratchFloats));
  int64_t count = m * k;
  CUdeviceptr xb = rounding.scratch;
  void *toBf16Params[] = {&x, &count, &xb};
  DAYBREAK_RETURN_IF_ERROR(
      launch(parts == 1 ? toBf16Fn : splitBf16X3Fn,
             parts == 1 ? "round to bf16 (warpgroup GEMM)"
                        : "split into three bf16 parts (warpgroup GEMM)",
             std::min<int64_t>(ceilDiv(count / 8, 256), 4096), 1, 1, 256, 0,
             stream, toBf16Params));
  const bool e4m3 = w.type == 2;
  const int64_t columns = warpgroupGemmColumns(w.type, parts);
  // Up to 64 rows of exact bf16: the narrow form's 64-row blocks.
  const bool narrow = parts == 3 && !e4m3 && m <= 64;
  const int64_t blockRows = narrow ? 64 : 128;
  CUtensorMap xMap, wMap;
  DAYBREAK_RETURN_IF_ERROR(
      encodeTileMap(xMap, xb, parts * m, k, blockRows, TileMap::Bf16));
  DAYBREAK_RETURN_IF_ERROR(encodeTileMap(
      wMap, w.data, n, k, columns, e4m3 ? TileMap::Codes : TileMap::Bf16));
  DeviceWeight weight = w, b = bias;
  weight.rows = n;
  weight.cols = k;
  void *params[] = {&xMap, &wMap, &weight, &b, &m, &n, &k, &out};
  CUfunction fn = parts == 1 ? (e4m3 ? gemmWgE4m3Fn : gemmWgBf16Fn)
                  : narrow   ? gemmWgBf16X3NarrowFn
                             : (e4m3 ? gemmWgE4m3X3Fn : gemmWgBf16X3Fn);
  return launch(fn, "matmul (warpgroup GEMM)", ceilDiv(n, columns),
                ceilDiv(m, blockRows), 1, 384,
                unsigned(warpgroupGemmSharedBytes(w.type, parts, narrow)),
                stream, params);
}

bool CudaKernels::fp8GemmApplies(const DeviceWeight &w, int64_t k) {
  return w.type == 2 && w.data % 16 == 0 &&
         fp8GemmWeightApplies(w.blockN, w.blockK, k);
}

int64_t CudaKernels::fp8GemmScratchFloats(int64_t m, int64_t k, int64_t n,
                                          int64_t splits) {
  int64_t floats = ceilDiv(m * k, 16) * 4 + ceilDiv(m * ceilDiv(k, 128), 4) * 4;
  return splits > 1 ? floats + splits * m * n : floats;
}

Status CudaKernels::fp8Gemm(CUdeviceptr x, const DeviceWeight &w,
                            const DeviceWeight &bias, int64_t m, int64_t n,
                            int64_t k, CUdeviceptr out, CUstream stream,
                            const InputRounding &scratch,
                            const Fp8GemmTile *tile,
                            CUfunction specialized) const {
  if (!fp8GemmApplies(w, k) || x % 16 != 0)
    return Status::error("fp8Gemm: no FP8 GEMM for weight type " +
                         std::to_string(w.type) + ", blocks " +
                         std::to_string(w.blockN) + " x " +
                         std::to_string(w.blockK) + ", k " + std::to_string(k) +
                         " (or x or the weight not 16-byte aligned)");
  if (m <= 0 || n <= 0)
    return Status::success();
  const Fp8GemmTile chosen = tile ? *tile : fp8GemmTile(m, n, k);
  auto describe = [&] {
    return std::to_string(chosen.rows) + " x " +
           std::to_string(chosen.columns) + ", " +
           std::to_string(chosen.stages) + " stages, K split " +
           std::to_string(chosen.splits) + " ways";
  };
  if (!fp8GemmTileValid(chosen))
    return Status::error("fp8Gemm: no FP8 GEMM takes the tile " + describe());
  CUfunction gemm = specialized;
  if (!gemm) {
    if (chosen.stages != fp8GemmLibraryStages(chosen.rows))
      return Status::error("fp8Gemm: the tile " + describe() +
                           " needs the compiler's instantiation; the "
                           "library's has " +
                           std::to_string(fp8GemmLibraryStages(chosen.rows)) +
                           " stages");
    gemm = chosen.rows == 64 ? gemmWgFp8Rows64Fn : gemmWgFp8Fn;
  }
  int64_t need = fp8GemmScratchFloats(m, k, n, chosen.splits);
  if (need > scratch.scratchFloats || scratch.scratch % 16 != 0)
    return Status::error("fp8Gemm: x [" + std::to_string(m) + ", " +
                         std::to_string(k) + "] in FP8 (tile " + describe() +
                         ") needs " + std::to_string(need) +
                         " floats of 16-byte aligned scratch; given " +
                         std::to_string(scratch.scratchFloats));
  CUdeviceptr codes = scratch.scratch, scales = codes + ceilDiv(m * k, 16) * 16,
              partials = scales + ceilDiv(m * ceilDiv(k, 128), 4) * 16,
              none = 0;
  int32_t perSlot = 0;
  int64_t slots = 1;
  void *quant[] = {&x,    &m,    &k,       &codes, &scales,
                   &none, &none, &perSlot, &slots, &none};
  int64_t tasks = m * ceilDiv(k, 128);
  DAYBREAK_RETURN_IF_ERROR(launch(quantFp8Fn, "matmul (FP8 x)",
                                  std::min<int64_t>(ceilDiv(tasks, 8), 8192), 1,
                                  1, 256, 0, stream, quant));
  CUtensorMap xMap, wMap;
  DAYBREAK_RETURN_IF_ERROR(
      encodeTileMap(xMap, codes, m, k, chosen.rows, TileMap::CodesSwizzled));
  DAYBREAK_RETURN_IF_ERROR(
      encodeTileMap(wMap, w.data, n, k, 128, TileMap::CodesSwizzled));
  DeviceWeight weight = w, b = bias;
  weight.rows = n;
  weight.cols = k;
  CUdeviceptr target = chosen.splits > 1 ? partials : out;
  void *params[] = {&xMap, &wMap, &scales, &weight, &b, &m, &n, &k, &target};
  DAYBREAK_RETURN_IF_ERROR(launch(
      gemm, "matmul (FP8 GEMM)", ceilDiv(n, 128), ceilDiv(m, chosen.rows),
      chosen.splits, unsigned(128 * (1 + chosen.rows / 64)),
      unsigned(fp8GemmSharedBytes(chosen)), stream, params));
  if (chosen.splits == 1)
    return Status::success();
  int32_t splits = chosen.splits;
  void *sum[] = {&partials, &splits, &m, &n, &b, &out};
  return launch(splitKSumFn, "matmul (FP8 GEMM split-K sum)",
                std::min<int64_t>(ceilDiv(m * n, 4 * 256), 4 * multiprocessors),
                1, 1, 256, 0, stream, sum);
}

bool CudaKernels::fp8InputsApply(const DeviceWeight &w) {
  return w.type == 2 && runtime::fp8InputsApply(w.blockN, w.blockK);
}

StatusOr<CUdeviceptr> CudaKernels::fp8Dequantized(CUdeviceptr x, int64_t rows,
                                                  int64_t k,
                                                  const InputRounding &rounding,
                                                  CUstream stream) const {
  if (k % 16 != 0 || x % 16 != 0)
    return Status::error("quantizing a matmul input to FP8: K " +
                         std::to_string(k) +
                         " is not a multiple of 16 or x is not 16-byte "
                         "aligned");
  if (rows * k > rounding.scratchFloats || rounding.scratch % 16 != 0)
    return Status::error("quantizing a matmul input of " +
                         std::to_string(rows * k) +
                         " floats to FP8 needs as much 16-byte aligned "
                         "scratch; the device planned " +
                         std::to_string(rounding.scratchFloats));
  CUdeviceptr none = 0, out = rounding.scratch;
  int32_t perSlot = 0;
  int64_t slots = 1;
  void *params[] = {&x,    &rows, &k,       &none,  &none,
                    &none, &none, &perSlot, &slots, &out};
  int64_t tasks = rows * ceilDiv(k, 128);
  DAYBREAK_RETURN_IF_ERROR(launch(quantFp8Fn, "FP8 x (dequantized)",
                                  std::min<int64_t>(ceilDiv(tasks, 8), 8192), 1,
                                  1, 256, 0, stream, params));
  return out;
}

Status CudaKernels::fp8ExpertMatmul(CUdeviceptr x, bool perSlotInput,
                                    const DeviceWeight &w, int64_t experts,
                                    int64_t n, int64_t k, CUdeviceptr indices,
                                    int64_t tokens, int64_t slots,
                                    CUdeviceptr routingWeights, CUdeviceptr out,
                                    CUstream stream, const DeviceWeight &bias,
                                    CUdeviceptr scratch, int64_t scratchBytes,
                                    const InputRounding &rounding) const {
  bool routed = routingWeights != 0;
  if (!fp8GemmApplies(w, k) ||
      !warpgroupExpertGemmApplies(w, experts, n, k, kWarpgroupGemmMinRows, 1) ||
      x % 16 != 0)
    return Status::error(
        "fp8ExpertMatmul: no FP8 GEMM for weight type " +
        std::to_string(w.type) + ", blocks " + std::to_string(w.blockN) +
        " x " + std::to_string(w.blockK) + ", " + std::to_string(experts) +
        " experts of [" + std::to_string(n) + ", " + std::to_string(k) +
        "] (or x or the weight not 16-byte aligned)");
  int64_t rows = tokens * slots;
  int64_t need = fp8GemmScratchFloats(rows, k);
  if (need > rounding.scratchFloats || rounding.scratch % 16 != 0)
    return Status::error("fp8ExpertMatmul: x gathered as [" +
                         std::to_string(rows) + ", " + std::to_string(k) +
                         "] in FP8 needs " + std::to_string(need) +
                         " floats of 16-byte aligned scratch; the device "
                         "planned " +
                         std::to_string(rounding.scratchFloats));
  StatusOr<ExpertGroups> grouped =
      groupExperts("fp8ExpertMatmul", indices, tokens, slots, experts, n,
                   routed, out, scratch, scratchBytes, 128, stream);
  if (!grouped.ok())
    return grouped.error();
  if (tokens <= 0 || n <= 0)
    return Status::success();
  ExpertGroups g = *grouped;
  CUdeviceptr codes = rounding.scratch,
              scales = codes + ceilDiv(rows * k, 16) * 16, none = 0;
  int32_t perSlot = perSlotInput;
  void *quant[] = {&x,       &rows,        &k,       &codes, &scales,
                   &g.order, &g.tileCount, &perSlot, &slots, &none};
  DAYBREAK_RETURN_IF_ERROR(
      launch(quantFp8Fn, "expertMatmul (FP8 x)",
             std::min<int64_t>(ceilDiv(rows * ceilDiv(k, 128), 8), 8192), 1, 1,
             256, 0, stream, quant));
  CUtensorMap xMap, wMap;
  DAYBREAK_RETURN_IF_ERROR(
      encodeTileMap(xMap, codes, rows, k, 128, TileMap::CodesSwizzled));
  DAYBREAK_RETURN_IF_ERROR(
      encodeTileMap(wMap, w.data, experts * n, k, 128, TileMap::CodesSwizzled));
  DeviceWeight weight = w, b = bias;
  weight.rows = n;
  weight.cols = k;
  void *gemm[] = {&xMap, &wMap,    &scales,  &weight,      &b,  &n,
                  &k,    &g.order, &g.tiles, &g.tileCount, &g.y};
  DAYBREAK_RETURN_IF_ERROR(launch(expertGemmWgFp8Fn, "expertMatmul (FP8 GEMM)",
                                  ceilDiv(n, 128), g.maxTiles, 1, 384,
                                  unsigned(fp8GemmLibraryBytes), stream, gemm));
  return combineExperts(g, indices, routingWeights, experts, tokens, slots, n,
                        out, stream);
}

bool CudaKernels::warpgroupExpertGemmApplies(const DeviceWeight &w,
                                             int64_t experts, int64_t n,
                                             int64_t k, int64_t tokens,
                                             int64_t slots) {
  // The copy engine's row coordinate of the last expert's last tile.
  return tokens * slots >= kWarpgroupGemmMinRows && warpgroupGemmRuns(w, k) &&
         experts >= 1 && experts <= kTensorGemmMaxExperts && n >= 1 &&
         experts * n + warpgroupGemmColumns(w.type) < (int64_t(1) << 31);
}

int64_t CudaKernels::expertRoundingFloats(const DeviceWeight &w,
                                          int64_t experts, int64_t n, int64_t k,
                                          int64_t tokens, int64_t slots,
                                          bool perSlotInput, bool xAligned,
                                          bool fp8) {
  if (w.type == 0)
    return 0;
  if (fp8 && fp8InputsApply(w)) {
    if (tokens > 8 && xAligned && fp8GemmApplies(w, k) &&
        warpgroupExpertGemmApplies(w, experts, n, k, tokens, slots))
      return fp8GemmScratchFloats(tokens * slots, k);
    return tokens * (perSlotInput ? slots : 1) * k;
  }
  // expertMatmul's choice, given its grouping scratch.
  if (tokens > 8 && xAligned) {
    if (warpgroupExpertGemmApplies(w, experts, n, k, tokens, slots))
      return (tokens * slots * k + 1) / 2; // bf16 codes
    if (tensorGemmApplies(w, k) && experts <= kTensorGemmMaxExperts)
      return 0;
  }
  return tokens * (perSlotInput ? slots : 1) * k;
}

Status CudaKernels::warpgroupExpertMatmul(
    CUdeviceptr x, bool perSlotInput, const DeviceWeight &w, int64_t experts,
    int64_t n, int64_t k, CUdeviceptr indices, int64_t tokens, int64_t slots,
    CUdeviceptr routingWeights, CUdeviceptr out, CUstream stream,
    const DeviceWeight &bias, CUdeviceptr scratch, int64_t scratchBytes,
    const InputRounding &rounding) const {
  bool routed = routingWeights != 0;
  if (!warpgroupExpertGemmApplies(w, experts, n, k, kWarpgroupGemmMinRows, 1) ||
      x % 16 != 0)
    return Status::error(
        "warpgroupExpertMatmul: no warpgroup GEMM for weight type " +
        std::to_string(w.type) + ", blocks " + std::to_string(w.blockN) +
        " x " + std::to_string(w.blockK) + ", " + std::to_string(experts) +
        " experts of [" + std::to_string(n) + ", " + std::to_string(k) +
        "] (or x or the weight not 16-byte aligned)");
  int64_t rows = tokens * slots;
  int64_t codes = (rows * k + 1) / 2;
  if (codes > rounding.scratchFloats || rounding.scratch % 16 != 0)
    return Status::error("warpgroupExpertMatmul: x gathered as [" +
                         std::to_string(rows) + ", " + std::to_string(k) +
                         "] in bf16 needs " + std::to_string(codes) +
                         " floats of 16-byte aligned scratch; the device "
                         "planned " +
                         std::to_string(rounding.scratchFloats));
  StatusOr<ExpertGroups> grouped =
      groupExperts("warpgroupExpertMatmul", indices, tokens, slots, experts, n,
                   routed, out, scratch, scratchBytes, 128, stream);
  if (!grouped.ok())
    return grouped.error();
  if (tokens <= 0 || n <= 0)
    return Status::success();
  ExpertGroups g = *grouped;
  CUdeviceptr xb = rounding.scratch;
  int32_t perSlot = perSlotInput, parts = 1;
  void *gather[] = {&x, &perSlot, &slots, &g.order, &g.tileCount,
                    &k, &parts,   &rows,  &xb};
  DAYBREAK_RETURN_IF_ERROR(
      launch(gatherBf16Fn, "expertMatmul (gather)", ceilDiv(k / 8, 128),
             std::min<int64_t>(rows, 4096), 1, 128, 0, stream, gather));
  const bool e4m3 = w.type == 2;
  const int64_t columns = warpgroupGemmColumns(w.type);
  CUtensorMap xMap, wMap;
  DAYBREAK_RETURN_IF_ERROR(
      encodeTileMap(xMap, xb, rows, k, 128, TileMap::Bf16));
  DAYBREAK_RETURN_IF_ERROR(
      encodeTileMap(wMap, w.data, experts * n, k, columns,
                    e4m3 ? TileMap::Codes : TileMap::Bf16));
  DeviceWeight weight = w, b = bias;
  weight.rows = n;
  weight.cols = k;
  void *gemm[] = {&xMap, &wMap,    &weight,  &b,           &n,
                  &k,    &g.order, &g.tiles, &g.tileCount, &g.y};
  DAYBREAK_RETURN_IF_ERROR(
      launch(e4m3 ? expertGemmWgE4m3Fn : expertGemmWgBf16Fn,
             "expertMatmul (warpgroup GEMM)", ceilDiv(n, columns), g.maxTiles,
             1, 384, unsigned(warpgroupGemmSharedBytes(w.type)), stream, gemm));
  return combineExperts(g, indices, routingWeights, experts, tokens, slots, n,
                        out, stream);
}

StatusOr<CudaKernels::ExpertGroups>
CudaKernels::groupExperts(const char *caller, CUdeviceptr indices,
                          int64_t tokens, int64_t slots, int64_t experts,
                          int64_t n, bool routed, CUdeviceptr out,
                          CUdeviceptr scratch, int64_t scratchBytes,
                          int32_t tileRows, CUstream stream) const {
  int64_t needed = expertGemmScratchBytes(tokens, slots, experts, n, routed);
  if (!scratch || scratchBytes < needed)
    return Status::error(std::string(caller) + ": " + std::to_string(tokens) +
                         " tokens x " + std::to_string(slots) + " slots need " +
                         std::to_string(needed) + " bytes of scratch; given " +
                         std::to_string(scratchBytes));
  int64_t rows = tokens * slots;
  // expertGemmScratchBytes' layout: its tile bound, for kTensorGemmRows,
  // holds the tiles of any more rows.
  ExpertGroups g;
  g.tileCount = scratch;
  g.tiles = scratch + 16;
  g.order =
      g.tiles + (ceilDiv(rows, kTensorGemmRows) + std::min(experts, rows)) * 16;
  g.results = g.order + (rows * 4 + 15) / 16 * 16;
  g.y = routed ? g.results : out;
  g.maxTiles = ceilDiv(rows, tileRows) + std::min(experts, rows);
  if (tokens <= 0 || n <= 0)
    return g;
  CUdeviceptr zeroOut = routed ? 0 : out;
  void *group[] = {&indices,     &rows,    &experts, &g.order, &g.tiles,
                   &g.tileCount, &zeroOut, &n,       &tileRows};
  DAYBREAK_RETURN_IF_ERROR(launch(expertGroupFn, "expertMatmul (grouping)", 1,
                                  1, 1, 1024, unsigned(2 * experts * 4), stream,
                                  group));
  return g;
}

Status CudaKernels::combineExperts(const ExpertGroups &groups,
                                   CUdeviceptr indices,
                                   CUdeviceptr routingWeights, int64_t experts,
                                   int64_t tokens, int64_t slots, int64_t n,
                                   CUdeviceptr out, CUstream stream) const {
  if (!routingWeights)
    return Status::success();
  CUdeviceptr results = groups.results;
  void *combine[] = {
      &results, &indices, &routingWeights, &experts, &tokens, &slots, &n, &out};
  return launchDependent(expertCombineFn, "expertMatmul (combine)",
                         ceilDiv(n, 256), tokens, 1, 256, 0, stream, combine);
}

CudaKernels::TensorGemvPlan
CudaKernels::planTensorGemv(const DeviceWeight &w, int64_t m, int64_t n,
                            int64_t k, TensorGemvChoice choice) const {
  bool e4m3 = w.type == 2, many = m > 1;
  int64_t threads = many ? 256 : 128;
  int64_t tokens = many ? 8 : 1;
  int64_t groupK = e4m3 ? 128 : 64;
  int64_t groups = k / groupK;
  // CudaKernels.cu's layout: B entries (8 bytes) per k-step and group, the
  // inverse x scales, and the two partial-sum buffers of a split.
  auto sharedBytes = [&](int64_t rows, int64_t cluster) {
    int64_t per = ceilDiv(groups, cluster);
    return per * (groupK / 16) * (many ? 96 : 12) * 8 +
           (e4m3 ? per * tokens * 4 : 0) +
           (cluster > 1 ? 2 * rows * tokens * 4 : 0);
  };
  // Each cluster walks row tiles; the busiest one's work (its tiles times
  // rows times groups, a group's worth more per tile for the reduction)
  // over every (tiles, cluster) that fits: the clusters resident at once
  // (registers, shared memory, GPC boundaries) against the K range each
  // block streams.
  int64_t bestTiles = 0, bestCluster = 0, bestClusters = 0;
  double bestCost = 0.0;
  for (int64_t tiles = 1; tiles <= 2; ++tiles) {
    if (choice.tiles && choice.tiles != tiles)
      continue;
    const TensorGemvKernel &kernel = tensorGemvKernels[e4m3][many][tiles - 1];
    int64_t rows = threads / 32 * 16 * tiles, rowTiles = ceilDiv(n, rows);
    for (int64_t c = 1;
         c <= std::min<int64_t>(TensorGemvKernel::kMaxCluster, groups); ++c) {
      if (choice.cluster && choice.cluster != c)
        continue;
      int64_t bytes = sharedBytes(rows, c);
      if (bytes > sharedPerBlock)
        continue;
      int64_t blocks =
          std::min(kernel.blocksPerSm, sharedPerSm / (bytes + sharedReserved));
      int64_t active = blocks > 0 ? kernel.activeClusters[c][blocks] : 0;
      if (active <= 0)
        continue;
      int64_t clusters = std::min(rowTiles, active);
      double cost = double(ceilDiv(rowTiles, clusters) * rows *
                           (ceilDiv(groups, c) + (c > 1 ? 1 : 0)));
      // Under 16 warps an SM, too few loads are in flight to stream at the
      // full bandwidth: the same work takes proportionally longer.
      double warps =
          double(clusters * c * (threads / 32)) / double(multiprocessors);
      if (warps < 16.0)
        cost *= 16.0 / warps;
      if (bestCluster == 0 || cost < bestCost) {
        bestTiles = tiles;
        bestCluster = c;
        bestCost = cost;
        bestClusters = clusters;
      }
    }
  }
  TensorGemvPlan plan;
  if (bestCluster == 0)
    return plan;
  plan.tiles = bestTiles;
  plan.cluster = bestCluster;
  plan.clusters = bestClusters;
  plan.threads = threads;
  plan.sharedBytes = sharedBytes(threads / 32 * 16 * bestTiles, bestCluster);
  return plan;
}

TensorGemvChoice CudaKernels::tensorGemvChoice(const DeviceWeight &w, int64_t m,
                                               int64_t n, int64_t k) const {
  TensorGemvPlan plan = planTensorGemv(w, m, n, k, {});
  return TensorGemvChoice{int(plan.tiles), int(plan.cluster)};
}

Status CudaKernels::tensorGemv(CUdeviceptr x, const DeviceWeight &w,
                               const DeviceWeight &bias, int64_t m, int64_t n,
                               int64_t k, CUdeviceptr out, CUstream stream,
                               TensorGemvChoice choice,
                               bool constantWeight) const {
  if (!tensorGemvApplies(w, m, k))
    return Status::error("tensorGemv: no tensor-core GEMV for weight type " +
                         std::to_string(w.type) + ", m " + std::to_string(m) +
                         ", k " + std::to_string(k));
  if (n <= 0)
    return Status::success();
  TensorGemvPlan plan = planTensorGemv(w, m, n, k, choice);
  if (plan.cluster == 0)
    return Status::error("tensorGemv: no tiles and cluster for k " +
                         std::to_string(k) + " fit the GPU (tiles " +
                         std::to_string(choice.tiles) + ", cluster " +
                         std::to_string(choice.cluster) + ")");
  const TensorGemvKernel &kernel =
      tensorGemvKernels[w.type == 2][m > 1][plan.tiles - 1];
  DeviceWeight weight = w, b = bias;
  weight.rows = n;
  weight.cols = k;
  void *params[] = {&x, &weight, &b, &m, &n, &k, &out};
  // The kernel reads only the weight before griddepcontrol.wait, so with a
  // weight no kernel writes it may start before the previous kernel ends.
  return launchClusters(kernel.fn, "matmul (tensor-core GEMV)", plan.clusters,
                        unsigned(plan.cluster), unsigned(plan.threads),
                        unsigned(plan.sharedBytes),
                        constantWeight && programmatic, stream, params);
}

Status CudaKernels::launchGemv(CUfunction fn, int64_t residentWarps,
                               int64_t tasks, CUstream stream,
                               void **params) const {
  // Equal rounds for every warp: a partial last round of a long-running
  // task would leave most of the GPU idle while a few warps finish.
  int64_t rounds = ceilDiv(tasks, std::max<int64_t>(residentWarps, 1));
  int64_t warps = ceilDiv(tasks, rounds);
  return launch(fn, "matmul", ceilDiv(warps, 4), 1, 1, 128, 0, stream, params);
}

Status CudaKernels::headMatmul(CUdeviceptr x, CUdeviceptr w,
                               bool transposeWeight, int64_t tokens,
                               int64_t heads, int64_t k, int64_t n,
                               CUdeviceptr out, CUstream stream) const {
  return headMatmul(x, DeviceWeight::f32(w), transposeWeight, tokens, heads, k,
                    n, out, stream);
}

bool CudaKernels::headGemmApplies(const DeviceWeight &w, bool transposeWeight,
                                  int64_t k, bool xAligned) {
  return w.type == 1 && transposeWeight && xAligned && k > 0 && k % 16 == 0 &&
         w.data % 16 == 0;
}

bool CudaKernels::headGemvApplies(const DeviceWeight &w, bool transposeWeight,
                                  int64_t tokens, int64_t k, bool xAligned) {
  const int64_t chunks = k / 8;
  return headGemmApplies(w, transposeWeight, k, xAligned) && tokens >= 1 &&
         tokens <= kHeadGemvMaxTokens && chunks >= 8 && chunks <= 128 &&
         (chunks & (chunks - 1)) == 0;
}

bool CudaKernels::headRowsAligned(CUdeviceptr x, int64_t xStride) {
  return x % 16 == 0 && xStride % 4 == 0;
}

int64_t CudaKernels::headMatmulRoundingFloats(const DeviceWeight &w,
                                              bool transposeWeight,
                                              int64_t tokens, int64_t heads,
                                              int64_t k, bool xAligned,
                                              int64_t xStride) {
  if (w.type == 0 || headGemmApplies(w, transposeWeight, k, xAligned))
    return 0;
  return tokens * heads * (xStride ? xStride : k);
}

Status CudaKernels::headMatmul(CUdeviceptr x, const DeviceWeight &weight,
                               bool transposeWeight, int64_t tokens,
                               int64_t heads, int64_t k, int64_t n,
                               CUdeviceptr out, CUstream stream,
                               const InputRounding &rounding, bool tensorCores,
                               int64_t xStride, int64_t outStride) const {
  DeviceWeight w = weight;
  xStride = xStride ? xStride : k;
  outStride = outStride ? outStride : n;
  // Decode's few tokens: the per-head GEMV, one 4 KB round trip a warp
  // (K = 8 x 2^i chunks, 64 to 1024), for exact x unless forced.
  const int chunks = int(k / 8);
  const bool gemv = headMatmulKernel == HeadMatmulKernel::Auto
                        ? !rounding.bf16
                        : headMatmulKernel == HeadMatmulKernel::Gemv;
  if (tensorCores && gemv &&
      headGemvApplies(w, transposeWeight, tokens, k,
                      headRowsAligned(x, xStride))) {
    const CUfunction fns[5] = {headGemvBf16C8Fn, headGemvBf16C16Fn,
                               headGemvBf16C32Fn, headGemvBf16C64Fn,
                               headGemvBf16C128Fn};
    const int which = chunks == 8    ? 0
                      : chunks == 16 ? 1
                      : chunks == 32 ? 2
                      : chunks == 64 ? 3
                                     : 4;
    // kHeadGemvLoads x 32 chunks a warp, 8 warps a block.
    const int64_t warps = ceilDiv(heads * n * chunks, 8 * 32);
    int32_t roundX = rounding.bf16;
    void *params[] = {&x, &w,   &tokens,  &heads,     &n,
                      &k, &out, &xStride, &outStride, &roundX};
    return launchDependent(fns[which], "headMatmul (GEMV)", ceilDiv(warps, 8),
                           1, 1, 256, 0, stream, params);
  }
  if (tensorCores &&
      headGemmApplies(w, transposeWeight, k, headRowsAligned(x, xStride))) {
    void *params[] = {&x, &w,   &tokens,  &heads,    &n,
                      &k, &out, &xStride, &outStride};
    return launchDependent(
        rounding.bf16 ? headGemmTcBf16X1Fn : headGemmTcBf16Fn,
        "headMatmul (tensor-core GEMM)", ceilDiv(n, 128),
        ceilDiv(tokens, kTensorGemmRows), heads, 128,
        unsigned(tensorGemmSharedBytes(w.type)), stream, params);
  }
  // The rows x spans (a column view's, strides kept) are rounded.
  int64_t span = tokens * heads > 0 ? (tokens * heads - 1) * xStride + k : 0;
  StatusOr<CUdeviceptr> input = roundedInput(x, span, w.type, rounding, stream);
  if (!input.ok())
    return input.error();
  x = *input;
  int32_t transpose = transposeWeight;
  void *params[] = {&x, &w, &transpose, &tokens,  &heads,
                    &k, &n, &out,       &xStride, &outStride};
  return launchDependent(headMatmulFn, "headMatmul", ceilDiv(n, 64),
                         ceilDiv(tokens, 64), heads, 256, 0, stream, params);
}

Status CudaKernels::rope(CUdeviceptr x, CUdeviceptr positions, int64_t tokens,
                         int64_t rowsPerToken, int64_t rowDim,
                         const runtime::RopeParams &p, CUstream stream) const {
  runtime::RopeRows rows = runtime::RopeRows::dense(rowsPerToken, rowDim);
  return rope(x, rows, x, rows, positions, tokens, rowsPerToken, rowDim, p,
              stream);
}

Status CudaKernels::rope(CUdeviceptr x, runtime::RopeRows xRows,
                         CUdeviceptr out, runtime::RopeRows outRows,
                         CUdeviceptr positions, int64_t tokens,
                         int64_t rowsPerToken, int64_t rowDim,
                         const runtime::RopeParams &p, CUstream stream) const {
  double low, high;
  runtime::yarnRampEnds(p, low, high);
  int32_t interleaved = p.interleaved, yarn = p.yarn;
  int64_t offset = p.offset, dim = p.dim;
  double theta = p.theta, factor = p.factor, attention = p.attentionFactor;
  void *params[] = {
      &x,           &xRows.token, &xRows.row, &out,          &outRows.token,
      &outRows.row, &positions,   &tokens,    &rowsPerToken, &rowDim,
      &interleaved, &offset,      &dim,       &theta,        &yarn,
      &factor,      &low,         &high,      &attention};
  if (dim / 2 > kRopeMaxPairs)
    return Status::error("rope: " + std::to_string(dim) +
                         " rotated dims exceed the kernel's " +
                         std::to_string(2 * kRopeMaxPairs));
  if (tokens <= 0 || rowsPerToken <= 0 || dim < 2)
    return Status::success();
  return launchDependent(ropeFn, "rope", tokens,
                         ceilDiv(rowsPerToken, kRopeRows), 1, 256, 0, stream,
                         params);
}

Status CudaKernels::swiglu(CUdeviceptr gate, CUdeviceptr up, int64_t n,
                           double alpha, bool hasLimit, double limit,
                           double upOffset, CUdeviceptr out,
                           CUstream stream) const {
  int32_t limited = hasLimit;
  void *params[] = {&gate, &up, &n, &alpha, &limited, &limit, &upOffset, &out};
  return launchDependent(swigluFn, "swiglu", ceilDiv(n, 256), 1, 1, 256, 0,
                         stream, params);
}

Status CudaKernels::add(CUdeviceptr a, CUdeviceptr b, int64_t n,
                        CUdeviceptr out, CUstream stream) const {
  void *params[] = {&a, &b, &n, &out};
  return launchDependent(addFn, "add", ceilDiv(n, 256), 1, 1, 256, 0, stream,
                         params);
}

Status CudaKernels::moeRouteSigmoid(CUdeviceptr logits, CUdeviceptr bias,
                                    int64_t tokens, int64_t experts,
                                    const runtime::RouteParams &p,
                                    CUdeviceptr indices, CUdeviceptr weights,
                                    CUstream stream) const {
  if (p.numGroups > 64)
    return Status::error("moeRouteSigmoid: " + std::to_string(p.numGroups) +
                         " expert groups, the CUDA kernel supports 64");
  if (experts > 1024) // kMaxRouteExperts in CudaKernels.cu
    return Status::error("moeRouteSigmoid: " + std::to_string(experts) +
                         " experts, the CUDA kernel supports 1024");
  int64_t topK = p.topK, groups = p.numGroups, keepGroups = p.topKGroups;
  int32_t renormalize = p.renormalize;
  double scaling = p.scalingFactor;
  int64_t shared = p.sharedExperts;
  void *params[] = {&logits,  &bias,   &tokens,     &experts,
                    &topK,    &groups, &keepGroups, &renormalize,
                    &scaling, &shared, &indices,    &weights};
  return launchDependent(moeRouteSigmoidFn, "moeRouteSigmoid", tokens, 1, 1,
                         256, 0, stream, params);
}

Status CudaKernels::moeRouteSoftmaxTopK(CUdeviceptr logits, CUdeviceptr bias,
                                        int64_t tokens, int64_t experts,
                                        const runtime::RouteParams &p,
                                        CUdeviceptr indices,
                                        CUdeviceptr weights,
                                        CUstream stream) const {
  if (experts > 1024) // kMaxRouteExperts in CudaKernels.cu
    return Status::error("moeRouteSoftmaxTopK: " + std::to_string(experts) +
                         " experts, the CUDA kernel supports 1024");
  if (p.sharedExperts != 0)
    return Status::error("moeRouteSoftmaxTopK: shared experts in the routing "
                         "(no family routes them so; the CPU device does)");
  int64_t topK = p.topK;
  double scaling = p.scalingFactor;
  void *params[] = {&logits, &bias,    &tokens,  &experts,
                    &topK,   &scaling, &indices, &weights};
  return launchDependent(moeRouteSoftmaxTopKFn, "moeRouteSoftmaxTopK", tokens,
                         1, 1, 256, 0, stream, params);
}

Status CudaKernels::expertMatmul(CUdeviceptr x, bool perSlotInput,
                                 CUdeviceptr w, int64_t experts, int64_t n,
                                 int64_t k, CUdeviceptr indices, int64_t tokens,
                                 int64_t slots, CUdeviceptr routingWeights,
                                 CUdeviceptr out, CUstream stream) const {
  return expertMatmul(x, perSlotInput, DeviceWeight::f32(w), experts, n, k,
                      indices, tokens, slots, routingWeights, out, stream);
}

Status CudaKernels::expertMatmul(CUdeviceptr x, bool perSlotInput,
                                 const DeviceWeight &weight, int64_t experts,
                                 int64_t n, int64_t k, CUdeviceptr indices,
                                 int64_t tokens, int64_t slots,
                                 CUdeviceptr routingWeights, CUdeviceptr out,
                                 CUstream stream, const DeviceWeight &bias,
                                 CUdeviceptr scratch, int64_t scratchBytes,
                                 const InputRounding &rounding) const {
  bool routed = routingWeights != 0;
  if (rounding.fp8 && fp8InputsApply(weight)) {
    // FP8 x: the grouped FP8 GEMM for many rows, else the exact paths on x
    // quantized and written back as fp32 (the same products).
    if (tokens > 8 && x % 16 == 0 && fp8GemmApplies(weight, k) &&
        warpgroupExpertGemmApplies(weight, experts, n, k, tokens, slots) &&
        scratch &&
        scratchBytes >=
            expertGemmScratchBytes(tokens, slots, experts, n, routed))
      return fp8ExpertMatmul(x, perSlotInput, weight, experts, n, k, indices,
                             tokens, slots, routingWeights, out, stream, bias,
                             scratch, scratchBytes, rounding);
    StatusOr<CUdeviceptr> quantized = fp8Dequantized(
        x, tokens * (perSlotInput ? slots : 1), k, rounding, stream);
    if (!quantized.ok())
      return quantized.error();
    // Past 8 tokens the one-part grouped GEMM (the values are bf16's).
    if (tokens > 8 && tensorGemmApplies(weight, k) &&
        experts <= kTensorGemmMaxExperts && scratch &&
        scratchBytes >=
            expertGemmScratchBytes(tokens, slots, experts, n, routed))
      return tensorExpertMatmul(*quantized, perSlotInput, weight, experts, n, k,
                                indices, tokens, slots, routingWeights, out,
                                stream, bias, scratch, scratchBytes,
                                /*bf16Input=*/true);
    return expertMatmul(*quantized, perSlotInput, weight, experts, n, k,
                        indices, tokens, slots, routingWeights, out, stream,
                        bias, scratch, scratchBytes, InputRounding());
  }
  // Past decode sizes the weight rows are shared by several rows each:
  // grouped by expert, the tensor cores read each once per 128 rows
  // (warpgroup MMA, bf16 x) or 64.
  if (rounding.bf16 && tokens > 8 && x % 16 == 0 &&
      warpgroupExpertGemmApplies(weight, experts, n, k, tokens, slots) &&
      scratch &&
      scratchBytes >= expertGemmScratchBytes(tokens, slots, experts, n, routed))
    return warpgroupExpertMatmul(x, perSlotInput, weight, experts, n, k,
                                 indices, tokens, slots, routingWeights, out,
                                 stream, bias, scratch, scratchBytes, rounding);
  if (tokens > 8 && tensorGemmApplies(weight, k) && x % 16 == 0 &&
      experts <= kTensorGemmMaxExperts && scratch &&
      scratchBytes >= expertGemmScratchBytes(tokens, slots, experts, n, routed))
    return tensorExpertMatmul(x, perSlotInput, weight, experts, n, k, indices,
                              tokens, slots, routingWeights, out, stream, bias,
                              scratch, scratchBytes,
                              rounding.bf16 && weight.type != 0);
  StatusOr<CUdeviceptr> input =
      roundedInput(x, tokens * (perSlotInput ? slots : 1) * k, weight.type,
                   rounding, stream);
  if (!input.ok())
    return input.error();
  x = *input;
  // Decode sizes: each picked expert's rows streamed once on the tensor
  // cores, however many tokens picked it.
  if (tokens <= 8 && experts >= 1 && x % 16 == 0 &&
      tensorExpertGemvApplies(weight, experts, n, k, tokens, slots) &&
      (!routed || (scratch && scratchBytes >= expertGemvScratchBytes(
                                                  tokens, slots, n, true))))
    return tensorExpertGemv(x, perSlotInput, weight, experts, n, k, indices,
                            tokens, slots, routingWeights, out, stream, bias,
                            scratch, scratchBytes);
  return cudaCoreExpertMatmul(x, perSlotInput, weight, experts, n, k, indices,
                              tokens, slots, routingWeights, out, stream, bias);
}

Status CudaKernels::cudaCoreExpertMatmul(
    CUdeviceptr x, bool perSlotInput, const DeviceWeight &weight,
    int64_t experts, int64_t n, int64_t k, CUdeviceptr indices, int64_t tokens,
    int64_t slots, CUdeviceptr routingWeights, CUdeviceptr out, CUstream stream,
    const DeviceWeight &bias) const {
  int32_t perSlot = perSlotInput;
  DeviceWeight w = weight, b = bias;
  w.rows = n;
  w.cols = k;
  void *params[] = {&x,       &perSlot, &w,     &experts,        &n, &k,
                    &indices, &tokens,  &slots, &routingWeights, &b, &out};
  return launch(expertMatmulFn, "expertMatmul", ceilDiv(n, 8), tokens, 1, 256,
                0, stream, params);
}

bool CudaKernels::tensorExpertGemvApplies(const DeviceWeight &w,
                                          int64_t experts, int64_t n, int64_t k,
                                          int64_t tokens, int64_t slots) {
  if (tokens < 1 || tokens > 8 || slots < 1 ||
      tokens * slots > kExpertGemvMaxPairs || n >= (int64_t(1) << 24) ||
      w.data % 16 != 0 || !tensorGemvApplies(w, tokens, k))
    return false;
  // The kernel indexes a tile's scales in 32 bits.
  return w.type != 2 || experts * ceilDiv(n, w.blockN) * ceilDiv(k, w.blockK) <
                            (int64_t(1) << 31);
}

Status CudaKernels::tensorExpertGemv(
    CUdeviceptr x, bool perSlotInput, const DeviceWeight &weight,
    int64_t experts, int64_t n, int64_t k, CUdeviceptr indices, int64_t tokens,
    int64_t slots, CUdeviceptr routingWeights, CUdeviceptr out, CUstream stream,
    const DeviceWeight &bias, CUdeviceptr scratch, int64_t scratchBytes) const {
  if (!tensorExpertGemvApplies(weight, experts, n, k, tokens, slots) ||
      x % 16 != 0)
    return Status::error(
        "tensorExpertGemv: no tensor-core expert GEMV for weight type " +
        std::to_string(weight.type) + ", blockN " +
        std::to_string(weight.blockN) + ", blockK " +
        std::to_string(weight.blockK) + ", n " + std::to_string(n) + ", k " +
        std::to_string(k) + ", " + std::to_string(tokens) + " tokens x " +
        std::to_string(slots) +
        " slots (or x or the weight not 16-byte aligned)");
  if (experts < 1)
    return Status::error("tensorExpertGemv: " + std::to_string(experts) +
                         " experts");
  // Groups of at most 8 pairs of one expert: no more than the pairs, nor
  // than one an expert plus one per 8 pairs; a block per (group, 64-row
  // tile) task at most, and no more than are resident at once.
  int64_t pairs = tokens * slots;
  int64_t groups = std::min(pairs, experts + ceilDiv(pairs, 8));
  const int64_t tasks = groups * ceilDiv(n, kExpertGemvRows);
  const int e4m3 = weight.type == 2;
  // The cluster a ring form splits K over (1: none): the forced size, or
  // chooseExpertGemvCluster's, where it fits the GPU and K.
  const int64_t groupsK = k / (e4m3 ? 128 : 64);
  auto ringCluster = [&](ExpertGemvStreaming ring) -> int64_t {
    const int64_t(&active)[kExpertGemvMaxCluster + 1] =
        expertGemvClusters[e4m3][int(ring) - 1];
    int64_t cluster = expertGemvCluster == 0
                          ? chooseExpertGemvCluster(tasks, groupsK, active)
                          : expertGemvCluster;
    if (cluster < 1 || cluster > kExpertGemvMaxCluster || cluster > groupsK ||
        active[cluster] <= 0)
      return 1;
    return cluster;
  };
  const ExpertGemvStreaming streaming =
      expertGemvStreaming == ExpertGemvStreaming::Auto
          ? chooseExpertGemvStreaming(
                tasks, expertGemvBlocks[e4m3][int(ExpertGemvStreaming::Ring4)],
                int(ringCluster(ExpertGemvStreaming::Ring4)))
          : expertGemvStreaming;
  const int form = int(streaming);
  // As many clusters (of one block unsplit) as hold at once, no more than
  // the tasks.
  const int64_t cluster = form > 0 ? ringCluster(streaming) : 1;
  const int64_t clusters =
      std::min(form > 0 ? expertGemvClusters[e4m3][form - 1][cluster]
                        : expertGemvBlocks[e4m3][form],
               tasks);
  const CUfunction fns[2][3] = {
      {expertGemvTcBf16Fn, expertGemvTcBf16Ring4Fn, expertGemvTcBf16Ring8Fn},
      {expertGemvTcE4m3Fn, expertGemvTcE4m3Ring4Fn, expertGemvTcE4m3Ring8Fn}};
  return launchExpertGemv(fns[e4m3][form], "tensorExpertGemv", clusters,
                          cluster, expertGemvSharedBytes(streaming), x,
                          perSlotInput, weight, bias, experts, n, k, indices,
                          tokens, slots, routingWeights, out, stream, scratch,
                          scratchBytes);
}

Status CudaKernels::launchExpertGemv(
    CUfunction fn, const char *name, int64_t blocks, int64_t cluster,
    int64_t sharedBytes, CUdeviceptr x, bool perSlotInput,
    const DeviceWeight &weight, const DeviceWeight &bias, int64_t experts,
    int64_t n, int64_t k, CUdeviceptr indices, int64_t tokens, int64_t slots,
    CUdeviceptr routingWeights, CUdeviceptr out, CUstream stream,
    CUdeviceptr scratch, int64_t scratchBytes) const {
  bool routed = routingWeights != 0;
  int64_t needed = expertGemvScratchBytes(tokens, slots, n, routed);
  if (routed && (!scratch || scratchBytes < needed))
    return Status::error(std::string(name) + ": " + std::to_string(tokens) +
                         " tokens x " + std::to_string(slots) +
                         " slots with routing weights need " +
                         std::to_string(needed) + " bytes of scratch; given " +
                         std::to_string(scratchBytes));
  if (n <= 0)
    return Status::success();
  DeviceWeight w = weight, b = bias;
  w.rows = n;
  w.cols = k;
  int64_t pairs = tokens * slots;
  int32_t perSlot = perSlotInput, zeroEmpty = !routed;
  CUdeviceptr y = routed ? scratch : out;
  void *params[] = {&x, &perSlot, &w,     &b,     &experts,   &n,
                    &k, &indices, &pairs, &slots, &zeroEmpty, &y};
  DAYBREAK_RETURN_IF_ERROR(
      launchClusters(fn, "expertMatmul (tensor-core GEMV)",
                     std::max<int64_t>(blocks, 1), unsigned(cluster), 128,
                     unsigned(sharedBytes), programmatic, stream, params));
  if (!routed)
    return Status::success();
  void *combine[] = {&y, &indices, &routingWeights, &experts, &tokens, &slots,
                     &n, &out};
  return launchDependent(expertCombineFn, "expertMatmul (combine)",
                         ceilDiv(n, 256), tokens, 1, 256, 0, stream, combine);
}

Status CudaKernels::tensorExpertMatmul(
    CUdeviceptr x, bool perSlotInput, const DeviceWeight &weight,
    int64_t experts, int64_t n, int64_t k, CUdeviceptr indices, int64_t tokens,
    int64_t slots, CUdeviceptr routingWeights, CUdeviceptr out, CUstream stream,
    const DeviceWeight &bias, CUdeviceptr scratch, int64_t scratchBytes,
    bool bf16Input) const {
  bool routed = routingWeights != 0;
  if (!tensorGemmApplies(weight, k) || x % 16 != 0)
    return Status::error("tensorExpertMatmul: no tensor-core GEMM for weight "
                         "type " +
                         std::to_string(weight.type) + ", blockK " +
                         std::to_string(weight.blockK) + ", k " +
                         std::to_string(k) +
                         " (or x or the weight not 16-byte aligned)");
  if (experts < 1 || experts > kTensorGemmMaxExperts)
    return Status::error("tensorExpertMatmul: " + std::to_string(experts) +
                         " experts outside [1, " +
                         std::to_string(kTensorGemmMaxExperts) + "]");
  StatusOr<ExpertGroups> grouped = groupExperts(
      "tensorExpertMatmul", indices, tokens, slots, experts, n, routed, out,
      scratch, scratchBytes, int32_t(kTensorGemmRows), stream);
  if (!grouped.ok())
    return grouped.error();
  if (tokens <= 0 || n <= 0)
    return Status::success();
  ExpertGroups g = *grouped;
  DeviceWeight w = weight, b = bias;
  w.rows = n;
  w.cols = k;
  int32_t perSlot = perSlotInput;
  void *gemm[] = {&x,       &perSlot,     &w,     &n, &k,  &g.order,
                  &g.tiles, &g.tileCount, &slots, &b, &g.y};
  DAYBREAK_RETURN_IF_ERROR(
      launch(tensorGemmFn(weight, true, bf16Input),
             "expertMatmul (tensor-core GEMM)", ceilDiv(n, 128), g.maxTiles, 1,
             128, unsigned(tensorGemmSharedBytes(weight.type)), stream, gemm));
  return combineExperts(g, indices, routingWeights, experts, tokens, slots, n,
                        out, stream);
}

bool CudaKernels::mxfp4ExpertGemvApplies(int64_t experts, int64_t n, int64_t k,
                                         int64_t tokens, int64_t slots,
                                         CUdeviceptr x, CUdeviceptr values,
                                         CUdeviceptr scales) {
  return tokens >= 1 && slots >= 1 && tokens * slots <= kExpertGemvMaxPairs &&
         experts >= 1 && n >= 1 && n < (int64_t(1) << 24) && k > 0 &&
         k % 64 == 0 && x % 16 == 0 && values % 16 == 0 && scales % 2 == 0 &&
         experts * n * (k / 32) < (int64_t(1) << 31);
}

Status CudaKernels::mxfp4ExpertGemv(CUdeviceptr x, bool perSlotInput,
                                    CUdeviceptr values, CUdeviceptr scales,
                                    const DeviceWeight &bias, int64_t experts,
                                    int64_t n, int64_t k, CUdeviceptr indices,
                                    int64_t tokens, int64_t slots,
                                    CUdeviceptr routingWeights, CUdeviceptr out,
                                    CUstream stream, CUdeviceptr scratch,
                                    int64_t scratchBytes) const {
  // As tensorExpertGemv's register form: groups of at most 8 pairs of one
  // expert, a block per (group, 64-row tile) task at most, no more blocks
  // than are resident at once.
  int64_t pairs = tokens * slots;
  int64_t groups = std::min(pairs, experts + ceilDiv(pairs, 8));
  int64_t tasks = groups * ceilDiv(n, kExpertGemvRows);
  DeviceWeight w;
  w.data = values;
  w.scales = scales;
  w.type = 3;
  return launchExpertGemv(expertGemvTcE2m1Fn, "mxfp4ExpertMatmul",
                          std::min(expertGemvE2m1Blocks, tasks), 1,
                          kExpertGemvE2m1SharedBytes, x, perSlotInput, w, bias,
                          experts, n, k, indices, tokens, slots, routingWeights,
                          out, stream, scratch, scratchBytes);
}

Status CudaKernels::mxfp4ExpertMatmul(CUdeviceptr x, bool perSlotInput,
                                      CUdeviceptr values, CUdeviceptr scales,
                                      const DeviceWeight &bias, int64_t experts,
                                      int64_t n, int64_t k, CUdeviceptr indices,
                                      int64_t tokens, int64_t slots,
                                      CUdeviceptr routingWeights,
                                      CUdeviceptr out, CUstream stream,
                                      CUdeviceptr scratch, int64_t scratchBytes,
                                      const InputRounding &rounding) const {
  if (k % 32 != 0)
    return Status::error("mxfp4ExpertMatmul: K " + std::to_string(k) +
                         " is not a multiple of the MXFP4 block of 32");
  // Many pairs: the grouped warpgroup GEMM, given its scratch.
  const int64_t pairs = tokens * slots;
  const int64_t gathered = warpgroupGemmScratchFloats(pairs, k, rounding.bf16);
  const bool gemm =
      mxfp4WarpgroupApplies(experts, n, k, x, values) && scratch &&
      scratchBytes >= expertGemmScratchBytes(tokens, slots, experts, n,
                                             routingWeights != 0) &&
      rounding.scratch % 16 == 0 && rounding.scratchFloats >= gathered;
  if (mxfp4Kernel == Mxfp4Kernel::WarpgroupGemm && !gemm)
    return Status::error(
        "mxfp4ExpertMatmul: the warpgroup GEMM was asked for but does not "
        "take " +
        std::to_string(experts) + " experts of [" + std::to_string(n) + ", " +
        std::to_string(k) + "] at " + std::to_string(pairs) +
        " pairs (K a multiple of 32, aligned x and values, " +
        std::to_string(expertGemmScratchBytes(tokens, slots, experts, n,
                                              routingWeights != 0)) +
        " bytes of grouping scratch and " + std::to_string(gathered) +
        " floats of rounding scratch; given " + std::to_string(scratchBytes) +
        " and " + std::to_string(rounding.scratchFloats) + ")");
  if (gemm && pairs >= mxfp4WarpgroupMinPairs(mxfp4Kernel))
    return mxfp4WarpgroupMatmul(x, perSlotInput, values, scales, bias, experts,
                                n, k, indices, tokens, slots, routingWeights,
                                out, stream, scratch, scratchBytes, rounding);
  // The other paths read x rounded (--precision=bf16) as fp32.
  StatusOr<CUdeviceptr> input = roundedInput(
      x, tokens * (perSlotInput ? slots : 1) * k, /*type=*/1, rounding, stream);
  if (!input.ok())
    return input.error();
  x = *input;
  const bool applies =
      mxfp4ExpertGemvApplies(experts, n, k, tokens, slots, x, values, scales) &&
      (!routingWeights ||
       (scratch &&
        scratchBytes >= expertGemvScratchBytes(tokens, slots, n, true)));
  if (mxfp4Kernel == Mxfp4Kernel::TensorCores && !applies)
    return Status::error(
        "mxfp4ExpertMatmul: the tensor-core GEMV was asked for but does not "
        "take " +
        std::to_string(tokens) + " tokens x " + std::to_string(slots) +
        " slots, K " + std::to_string(k) + ", N " + std::to_string(n) +
        " (at most " + std::to_string(kExpertGemvMaxPairs) +
        " pairs, K a multiple of 64, aligned inputs, scratch for the routed "
        "sum)");
  if (applies && (mxfp4Kernel == Mxfp4Kernel::TensorCores ||
                  (mxfp4Kernel == Mxfp4Kernel::Auto &&
                   mxfp4TensorPays(experts, tokens, slots))))
    return mxfp4ExpertGemv(x, perSlotInput, values, scales, bias, experts, n, k,
                           indices, tokens, slots, routingWeights, out, stream,
                           scratch, scratchBytes);
  // kMxfp4ExpertWords words of 32 experts in CudaKernels.cu.
  constexpr int64_t kMaxExperts = 64 * 32;
  if (experts > kMaxExperts)
    return Status::error("mxfp4ExpertMatmul: " + std::to_string(experts) +
                         " experts exceed the kernel's " +
                         std::to_string(kMaxExperts));
  // Output rows of a block (kMxfp4Rows in CudaKernels.cu). A block keeps
  // every (token, slot) pair's partial sums and the pairs' experts in
  // shared memory, so a step of more pairs than fit (prefill) runs in
  // launches of whole tokens, each streaming its own distinct experts.
  // K is split into parts so that a lane of a task has one block of 32
  // values a row (every task's loads issued at once), as long as the parts'
  // partial sums (parts x pairs x kRows floats) stay within half the
  // default shared memory (the kernel's 168 registers allow 3 blocks an
  // SM, 228 KB of shared memory holds 3 of 48 KB); the pairs' experts and
  // the distinct list follow them.
  constexpr int64_t kRows = 8;
  // The limit less the kernel's own bitmap and count (272 bytes).
  const int64_t available = kSharedFloats * int64_t(sizeof(float)) - 272;
  const int64_t budget = kSharedFloats * int64_t(sizeof(float)) / 2;
  // One part's sums, an expert id and a distinct-list entry per pair.
  const int64_t bytesPerPair = (kRows + 2) * int64_t(sizeof(float));
  int64_t chunkTokens =
      slots > 0 ? std::max<int64_t>(1, available / bytesPerPair / slots)
                : tokens;
  int64_t blocks = k / 32;
  int32_t perSlot = perSlotInput;
  DeviceWeight b = bias;
  for (int64_t t0 = 0; t0 < tokens; t0 += chunkTokens) {
    int64_t chunk = std::min(chunkTokens, tokens - t0);
    int64_t pairs = chunk * slots;
    int64_t lists =
        (pairs + std::min(experts, pairs)) * int64_t(sizeof(int32_t));
    int64_t perPart = pairs * kRows * int64_t(sizeof(float));
    int64_t parts = std::max<int64_t>(
        1,
        std::min(ceilDiv(blocks, 32), budget / std::max<int64_t>(perPart, 1)));
    int64_t sharedBytes = parts * perPart + lists;
    if (sharedBytes > available)
      return Status::error(
          "mxfp4ExpertMatmul: " + std::to_string(chunk) + " tokens x " +
          std::to_string(slots) + " slots need " + std::to_string(sharedBytes) +
          " bytes of shared memory; a block has " + std::to_string(available));
    // The chunk's rows of x, indices, routing weights and out.
    CUdeviceptr cx = x + (perSlotInput ? t0 * slots : t0) * k * sizeof(float);
    CUdeviceptr cIndices = indices + t0 * slots * sizeof(int32_t);
    CUdeviceptr cWeights =
        routingWeights ? routingWeights + t0 * slots * sizeof(float) : 0;
    CUdeviceptr cOut =
        out + (routingWeights ? t0 : t0 * slots) * n * sizeof(float);
    // The staged form where it applies (mxfp4StagedStages), each stage
    // an expert's kRows rows of values and scales.
    const int64_t stages =
        mxfp4Staged ? mxfp4StagedStages(n, k, sharedBytes,
                                        values % 16 == 0 && scales % 16 == 0)
                    : 0;
    if (stages > 0) {
      const int64_t stageBytes = kRows * (k / 2 + blocks);
      int32_t stageCount = int32_t(stages);
      void *params[] = {&cx,      &perSlot,  &values, &scales,     &b,
                        &experts, &n,        &k,      &cIndices,   &chunk,
                        &slots,   &cWeights, &parts,  &stageCount, &cOut};
      DAYBREAK_RETURN_IF_ERROR(launch(
          mxfp4ExpertMatmulStagedFn, "mxfp4ExpertMatmul", n / kRows, 1, 1, 128,
          unsigned(sharedBytes + stages * stageBytes), stream, params));
      continue;
    }
    void *params[] = {&cx,       &perSlot, &values, &scales,   &b,
                      &experts,  &n,       &k,      &cIndices, &chunk,
                      &slots,    &cWeights, &parts, &cOut};
    DAYBREAK_RETURN_IF_ERROR(launch(mxfp4ExpertMatmulFn, "mxfp4ExpertMatmul",
                                    ceilDiv(n, kRows), 1, 1, 128,
                                    unsigned(sharedBytes), stream, params));
  }
  return Status::success();
}

bool CudaKernels::mxfp4WarpgroupApplies(int64_t experts, int64_t n, int64_t k,
                                        CUdeviceptr x, CUdeviceptr values) {
  // The copy engine's row coordinate of the last expert's last tile.
  return k > 0 && k % 32 == 0 && x % 16 == 0 && values % 16 == 0 &&
         experts >= 1 && experts <= kTensorGemmMaxExperts && n >= 1 &&
         experts * n + 128 < (int64_t(1) << 31);
}

int64_t CudaKernels::mxfp4RoundingFloats(int64_t experts, int64_t n, int64_t k,
                                         int64_t tokens, int64_t slots,
                                         bool perSlotInput, bool bf16,
                                         bool xAligned, int64_t minPairs) {
  const int64_t pairs = tokens * slots;
  // Weights start 256-byte aligned (the device's arena).
  if (pairs >= minPairs &&
      mxfp4WarpgroupApplies(experts, n, k, xAligned ? 0 : 1, 0))
    return warpgroupGemmScratchFloats(pairs, k, bf16);
  return bf16 ? tokens * (perSlotInput ? slots : 1) * k : 0;
}

Status CudaKernels::mxfp4WarpgroupMatmul(
    CUdeviceptr x, bool perSlotInput, CUdeviceptr values, CUdeviceptr scales,
    const DeviceWeight &bias, int64_t experts, int64_t n, int64_t k,
    CUdeviceptr indices, int64_t tokens, int64_t slots,
    CUdeviceptr routingWeights, CUdeviceptr out, CUstream stream,
    CUdeviceptr scratch, int64_t scratchBytes,
    const InputRounding &rounding) const {
  StatusOr<ExpertGroups> grouped = groupExperts(
      "mxfp4ExpertMatmul (warpgroup GEMM)", indices, tokens, slots, experts, n,
      routingWeights != 0, out, scratch, scratchBytes, 128, stream);
  if (!grouped.ok())
    return grouped.error();
  if (tokens <= 0 || n <= 0)
    return Status::success();
  ExpertGroups g = *grouped;
  int64_t rows = tokens * slots;
  int32_t perSlot = perSlotInput, parts = rounding.bf16 ? 1 : 3;
  CUdeviceptr xb = rounding.scratch;
  void *gather[] = {&x, &perSlot, &slots, &g.order, &g.tileCount,
                    &k, &parts,   &rows,  &xb};
  DAYBREAK_RETURN_IF_ERROR(
      launch(gatherBf16Fn, "mxfp4ExpertMatmul (gather)", ceilDiv(k / 8, 128),
             std::min<int64_t>(rows, 4096), 1, 128, 0, stream, gather));
  CUtensorMap xMap, wMap;
  DAYBREAK_RETURN_IF_ERROR(
      encodeTileMap(xMap, xb, parts * rows, k, 16, TileMap::Bf16));
  DAYBREAK_RETURN_IF_ERROR(
      encodeTileMap(wMap, values, experts * n, k / 2, 128, TileMap::Packed));
  DeviceWeight w, b = bias;
  w.data = values;
  w.scales = scales;
  w.type = 3;
  w.rows = n;
  w.cols = k;
  void *gemm[] = {&xMap, &wMap,    &w,       &b,           &rows, &n,
                  &k,    &g.order, &g.tiles, &g.tileCount, &g.y};
  DAYBREAK_RETURN_IF_ERROR(launch(
      parts == 3 ? expertGemmWgE2m1X3Fn : expertGemmWgE2m1Fn,
      "mxfp4ExpertMatmul (warpgroup GEMM)", ceilDiv(n, 128), g.maxTiles, 1, 384,
      unsigned(warpgroupGemmSharedBytes(3, parts)), stream, gemm));
  return combineExperts(g, indices, routingWeights, experts, tokens, slots, n,
                        out, stream);
}

Status CudaKernels::mxfp4ToFp8Experts(
    CUdeviceptr values, CUdeviceptr scales, const DeviceWeight &bias,
    int64_t experts, int64_t n, int64_t k, CUdeviceptr indices, int64_t tokens,
    int64_t slots, int64_t workspaceSlots, CUdeviceptr codes,
    CUdeviceptr blockScales, CUdeviceptr slotBias, CUdeviceptr remapped,
    CUstream stream, runtime::Mxfp4ConvertMode mode) const {
  if (k % 32 != 0)
    return Status::error("mxfp4ToFp8Experts: K " + std::to_string(k) +
                         " is not a multiple of the MXFP4 block of 32");
  if (mode == runtime::Mxfp4ConvertMode::All && workspaceSlots < experts)
    return Status::error("mxfp4ToFp8Experts: converting all " +
                         std::to_string(experts) +
                         " experts needs as many "
                         "workspace slots, got " +
                         std::to_string(workspaceSlots));
  // kMxfp4ExpertWords words of 32 experts in CudaKernels.cu.
  constexpr int64_t kMaxExperts = 64 * 32;
  if (experts > kMaxExperts)
    return Status::error("mxfp4ToFp8Experts: " + std::to_string(experts) +
                         " experts exceed the kernel's " +
                         std::to_string(kMaxExperts));
  // Every block scans the indices once, so a block converts at least as
  // many blocks of 32 values as there are indices to scan (8 a thread at
  // decode sizes).
  constexpr int64_t kThreads = 256;
  int64_t rows = mode == runtime::Mxfp4ConvertMode::All ? 0 : tokens * slots;
  int64_t items = n * (k / 32);
  int64_t perThread = std::max<int64_t>(8, ceilDiv(rows, kThreads));
  int64_t chunks = std::max<int64_t>(1, ceilDiv(items, kThreads * perThread));
  int64_t gridSlots = workspaceSlots;
  if (mode == runtime::Mxfp4ConvertMode::All)
    gridSlots = experts;
  if (mode == runtime::Mxfp4ConvertMode::SlotsOnly)
    chunks = gridSlots = 1;
  DeviceWeight b = bias;
  int32_t kernelMode = int32_t(mode);
  void *params[] = {&values,      &scales,   &b,        &experts,   &n,
                    &k,           &indices,  &rows,     &perThread, &codes,
                    &blockScales, &slotBias, &remapped, &kernelMode};
  return launch(mxfp4ToFp8ExpertsFn, "mxfp4ToFp8Experts", chunks, gridSlots, 1,
                unsigned(kThreads), 0, stream, params);
}

Status CudaKernels::cacheWrite(const DeviceCacheView &cache, CUdeviceptr values,
                               CUdeviceptr slots, CUdeviceptr sequences,
                               int64_t tokens, CUstream stream,
                               const CacheWritePrologueArgs *prologue,
                               int64_t valuesStride) const {
  KernelCache c = toKernel(cache);
  if (valuesStride == 0)
    valuesStride = cache.width;
  if (!prologue || !prologue->params.any()) {
    void *params[] = {&c, &values, &valuesStride, &slots, &sequences, &tokens};
    return launchDependent(cacheWriteFn, "cacheWrite", tokens, 1, 1, 128, 0,
                           stream, params);
  }
  const runtime::CacheWritePrologue &p = prologue->params;
  constexpr int64_t kRowBytes = 40 * 1024; // and the kernel's static 1 KiB
  if (cache.width * int64_t(sizeof(float)) > kRowBytes)
    return Status::error("cacheWrite: a row of " + std::to_string(cache.width) +
                         " values does not fit a block's shared memory (" +
                         std::to_string(kRowBytes / 4) +
                         "); its norm and RoPE need a kernel of their own");
  int32_t norm = p.norm == runtime::CacheWritePrologue::Norm::Rms     ? 1
                 : p.norm == runtime::CacheWritePrologue::Norm::Layer ? 2
                                                                      : 0;
  DeviceWeight weight = prologue->weight, bias = prologue->bias;
  int64_t normDim = p.normDim;
  double eps = p.eps;
  CUdeviceptr positions = prologue->positions;
  const runtime::RopeParams &r = p.ropeParams;
  int32_t interleaved = r.interleaved, yarn = p.rope && r.yarn;
  int64_t ropeOffset = r.offset, ropeDim = p.rope ? r.dim : 0;
  int64_t ropeHeadDim = p.ropeHeadDim > 0 ? p.ropeHeadDim : cache.width;
  double theta = r.theta, factor = r.factor, attention = r.attentionFactor;
  double low, high;
  runtime::yarnRampEnds(r, low, high);
  void *params[] = {&c,           &values,     &valuesStride, &slots,
                    &sequences,   &tokens,     &norm,         &weight,
                    &bias,        &normDim,    &eps,          &positions,
                    &interleaved, &ropeOffset, &ropeDim,      &ropeHeadDim,
                    &theta,       &yarn,       &factor,       &low,
                    &high,        &attention};
  return launchDependent(cacheWriteRowsFn, "cacheWriteRows", tokens, 1, 1, 256,
                         unsigned(cache.width * sizeof(float)), stream, params);
}

Status CudaKernels::allowSharedMemory(CUfunction fn) const {
  // The kernel has no static shared memory: all of the opt-in limit.
  return driver->check(driver->cuFuncSetAttribute(
                           fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                           int(sharedPerBlock)),
                       "cuFuncSetAttribute");
}

Status CudaKernels::dsaIndexerScores(CUdeviceptr q, CUdeviceptr weights,
                                     const DeviceCacheView &keys,
                                     CUdeviceptr sequences, CUdeviceptr bounds,
                                     int64_t tokens, int64_t heads,
                                     double scale, CUdeviceptr scores,
                                     CUstream stream, CUfunction specialized,
                                     bool tensorCores, IndexerTiles tiles,
                                     const QueryRopeArgs *queryRope) const {
  if (queryRope) {
    const runtime::RopeParams &r = queryRope->params;
    if (r.dim <= 0 || r.dim % 2 != 0 || r.offset < 0 ||
        r.dim > keys.width - r.offset || r.dim / 2 > kQueryRopeMaxPairs)
      return Status::error(
          "dsaIndexerScores: a query RoPE of columns [" +
          std::to_string(r.offset) + ", +" + std::to_string(r.dim) +
          ") in heads of " + std::to_string(keys.width) + " (at most " +
          std::to_string(kQueryRopeMaxPairs) + " pairs inside the head)");
  }
  KernelQueryRope rope = toKernel(queryRope);
  const bool tensorRows =
      tensorCores && q % 16 == 0 &&
      runtime::indexerTensorCoresApply(keys.format, keys.width, keys.tailDim,
                                       keys.scaleBlock, heads);
  // Blocks a token (or group) of the tensor-core kernels: enough to bring
  // the grid to about `perSm` blocks an SM, at most one a tile of the
  // longest row. A block takes every such tile of the row (x, x + blocks,
  // ...), so a row shorter than the cache's longest still spreads over the
  // grid: a decode step's grid is fixed when its graph is captured, for
  // the longest context.
  auto blocksFor = [&](int64_t tileKeys, int64_t perSm, int64_t rows) {
    return std::clamp<int64_t>(ceilDiv(perSm * multiprocessors, rows), 1,
                               ceilDiv(keys.maxSeqLen, tileKeys));
  };
  if (tensorRows &&
      (tiles == IndexerTiles::TokenGroups ||
       (tiles == IndexerTiles::Auto && tokens >= kIndexerGroupMinTokens))) {
    // Groups of 4 tokens (2 past 64 heads) over 128-key tiles, about 4
    // blocks an SM.
    const bool wide = heads > 64;
    const bool bf16 = keys.format == runtime::CacheFormat::BF16;
    int64_t group = wide ? 2 : 4, groups = ceilDiv(tokens, group);
    KernelCache c = toKernel(keys);
    float fscale = float(scale);
    void *params[] = {&q,      &weights, &c,      &sequences, &bounds,
                      &tokens, &heads,   &fscale, &rope,      &scores};
    CUfunction fn =
        bf16 ? (wide ? dsaIndexerTokensBf16_128Fn : dsaIndexerTokensBf16_64Fn)
             : (wide ? dsaIndexerTokensE4m3_128Fn : dsaIndexerTokensE4m3_64Fn);
    return launchDependent(fn, "dsaIndexerScores (tensor cores, token groups)",
                           blocksFor(128, 4, groups), groups, 1, 256,
                           unsigned(queryRopeBytes(rope, group) +
                                    indexerTokensSharedBytes(keys.width)),
                           stream, params);
  }
  if (tensorRows) {
    // A token's 64-key tiles over about 8 blocks an SM.
    KernelCache c = toKernel(keys);
    float fscale = float(scale);
    void *params[] = {&q,     &weights, &c,    &sequences, &bounds,
                      &heads, &fscale,  &rope, &scores};
    return launchDependent(
        keys.format == runtime::CacheFormat::BF16 ? dsaIndexerTcBf16Fn
                                                  : dsaIndexerTcE4m3Fn,
        "dsaIndexerScores (tensor cores)", blocksFor(64, 8, tokens), tokens, 1,
        unsigned(32 * std::max<int64_t>(4, ceilDiv(heads, 16))),
        unsigned(queryRopeBytes(rope, 1) + indexerTcSharedBytes(heads)), stream,
        params);
  }
  // Warps of 8 keys each; the token's q rows and the block's keys decoded
  // into shared memory rows of the kernel's indexerStride(width) floats (a
  // multiple of 4 whose quarter is odd). Up to 8 warps, as many as fit.
  int64_t padded = (keys.width + 3) / 4 * 4;
  int64_t stride = (padded / 4) % 2 == 1 ? padded : padded + 4;
  constexpr int64_t kWarpKeys = 8;
  const int64_t angles = queryRopeBytes(rope, 1);
  int64_t rows = (sharedPerBlock - angles) / int64_t(sizeof(float)) / stride;
  int64_t warps = std::min<int64_t>(8, (rows - heads) / kWarpKeys);
  if (warps < 1)
    return Status::error(
        "dsaIndexerScores: " + std::to_string(heads) + " heads of width " +
        std::to_string(keys.width) + " and 8 keys do not fit in " +
        std::to_string(sharedPerBlock) + " bytes of shared memory");
  int64_t keysPerBlock = warps * kWarpKeys;
  KernelCache c = toKernel(keys);
  void *params[] = {&q,      &weights, &c,     &sequences, &bounds,
                    &tokens, &heads,   &scale, &rope,      &scores};
  return launchDependent(
      specialized ? specialized : dsaIndexerScoresFn, "dsaIndexerScores",
      ceilDiv(keys.maxSeqLen, keysPerBlock), tokens, 1, unsigned(32 * warps),
      unsigned(angles + (heads + keysPerBlock) * stride * 4), stream, params);
}

Status CudaKernels::dsaIndexSelect(CUdeviceptr scores, CUdeviceptr bounds,
                                   int64_t tokens, int64_t keys, int64_t topK,
                                   CUdeviceptr indices, CUstream stream) const {
  void *params[] = {&scores, &bounds, &tokens, &keys, &topK, &indices};
  return launchDependent(dsaIndexSelectFn, "dsaIndexSelect", tokens, 1, 1, 1024,
                         0, stream, params);
}

Status CudaKernels::sparseAttention(
    CUdeviceptr q, const DeviceCacheView &kv, CUdeviceptr indices, int64_t topK,
    CUdeviceptr sequences, int64_t tokens, int64_t heads, double scale,
    int64_t valueDim, CUdeviceptr sinks, CUdeviceptr out, CUstream stream,
    CUfunction specialized, CUdeviceptr partials, int64_t partialFloats,
    AttentionPath path, SparseMlaKernel kernel) const {
  bool tensor = sparseMlaTcApplies(kv, valueDim);
  const bool warpgroups = sparseMlaWgApplies(kv, valueDim);
  if (kernel == SparseMlaKernel::Warpgroups && !warpgroups)
    return Status::error(
        "sparseAttention: the warpgroup kernel does not take rows of " +
        std::to_string(kv.width) + " values with a value dim of " +
        std::to_string(valueDim) + " in this cache (see sparseMlaWgApplies)");
  if (path == AttentionPath::TensorCores && !tensor)
    return Status::error(
        "sparseAttention: the tensor-core path does not take rows of " +
        std::to_string(kv.width) + " values with a value dim of " +
        std::to_string(valueDim) + " in this cache (see sparseMlaTcApplies)");
  // Auto keeps the exact CUDA-core kernel: the tensor-core one rounds Q and
  // P to bf16 (CudaSparseMla.cuh).
  if (path == AttentionPath::TensorCores ||
      (path == AttentionPath::PreferTensorCores && tensor)) {
    // 64 heads a block; split over the rows (at least 4 tiles of 32 each,
    // 16 splits at most: the partials are valueDim + 4 floats a head and
    // split) while the grid is under a block per SM, as the scratch allows.
    int64_t groups = ceilDiv(heads, 64);
    int64_t splits = 1;
    if (partials && tokens * groups < multiprocessors)
      splits = std::min({ceilDiv(multiprocessors, tokens * groups),
                         ceilDiv(topK, 128), int64_t(16)});
    while (splits > 1 &&
           tokens * heads * splits * (valueDim + kSparsePartialHeaderFloats) >
               partialFloats)
      --splits;
    KernelCache c = toKernel(kv);
    float fscale = float(scale);
    int32_t value = int32_t(valueDim);
    int32_t splitCount = int32_t(splits);
    Status status = Status::success();
    if (warpgroups && kernel != SparseMlaKernel::MmaSync) {
      // daybreak_sparse_mla_wg (CudaSparseMla.cuh): DeepSeek's shapes fixed.
      unsigned bytes = unsigned(sparseMlaWgSharedBytes());
      if (splits == 1) {
        void *params[] = {&q,     &c,      &indices, &topK, &sequences,
                          &heads, &fscale, &sinks,   &out};
        return launchDependent(sparseMlaWgFn, "sparseMlaWg", tokens, groups, 1,
                               384, bytes, stream, params);
      }
      void *params[] = {&q,     &c,      &indices,  &topK,      &sequences,
                        &heads, &fscale, &partials, &splitCount};
      status = launchDependent(sparseMlaWgSplitFn, "sparseMlaWgSplit", tokens,
                               groups, splits, 384, bytes, stream, params);
    } else {
      unsigned bytes = unsigned(sparseMlaTcSharedBytes(kv.width));
      if (splits == 1) {
        void *params[] = {&q,     &c,      &indices, &topK,  &sequences,
                          &heads, &fscale, &value,   &sinks, &out};
        return launchDependent(sparseMlaTcFn, "sparseMlaTc", tokens, groups, 1,
                               256, bytes, stream, params);
      }
      void *params[] = {&q,     &c,      &indices, &topK,     &sequences,
                        &heads, &fscale, &value,   &partials, &splitCount};
      status = launchDependent(sparseMlaTcSplitFn, "sparseMlaTcSplit", tokens,
                               groups, splits, 256, bytes, stream, params);
    }
    if (!status.ok())
      return status;
    void *combine[] = {&partials, &heads, &splitCount, &valueDim, &sinks, &out};
    return launchDependent(sparseAttentionCombineFn, "sparseAttentionCombine",
                           tokens, heads, 1, 128, 0, stream, combine);
  }
  // Each of the 256 threads keeps 16 accumulators of [headGroup, valueDim].
  constexpr int64_t kAccumulators = 256 * 16;
  if (valueDim <= 0 || valueDim > kAccumulators)
    return Status::error("sparseAttention: value dim " +
                         std::to_string(valueDim) + " outside [1, " +
                         std::to_string(kAccumulators) + "]");
  int64_t width = kv.width;
  int64_t headGroup = std::min<int64_t>({heads, kAccumulators / valueDim, 16});
  int64_t chunk = 8;
  auto floats = [&] {
    return (headGroup + chunk) * width + headGroup * chunk + headGroup;
  };
  while (floats() > kSharedFloats && chunk > 1)
    --chunk;
  while (floats() > kSharedFloats && headGroup > 1)
    --headGroup;
  if (headGroup < 1 || floats() > kSharedFloats)
    return Status::error("sparseAttention: cache width " +
                         std::to_string(width) +
                         " does not fit in shared memory");
  KernelCache c = toKernel(kv);
  int32_t group = int32_t(headGroup), rows = int32_t(chunk);
  // Split over the rows while the grid is small (decode), at least one
  // chunk of rows per split, as far as the scratch holds the partials.
  int64_t groups = ceilDiv(heads, headGroup);
  int64_t splits = 1;
  if (partials && tokens * groups < kSparseAttentionTargetBlocks)
    splits = std::min({ceilDiv(kSparseAttentionTargetBlocks, tokens * groups),
                       ceilDiv(topK, chunk), kAttentionMaxSplits});
  while (splits > 1 &&
         tokens * heads * splits * (valueDim + kSparsePartialHeaderFloats) >
             partialFloats)
    --splits;
  if (splits == 1) {
    void *params[] = {&q,      &c,     &indices, &topK,     &sequences,
                      &tokens, &heads, &scale,   &valueDim, &sinks,
                      &out,    &group, &rows};
    return launchDependent(specialized ? specialized : sparseAttentionFn,
                           "sparseAttention", tokens, groups, 1, 256,
                           unsigned(floats() * 4), stream, params);
  }
  int32_t splitCount = int32_t(splits);
  void *params[] = {&q,        &c,     &indices, &topK,
                    &sequences, &tokens, &heads, &scale,
                    &valueDim, &partials, &group, &rows,
                    &splitCount};
  Status status = launchDependent(
      sparseAttentionSplitFn, "sparseAttentionSplit", tokens, groups, splits,
      256, unsigned(floats() * 4), stream, params);
  if (!status.ok())
    return status;
  void *combine[] = {&partials, &heads, &splitCount, &valueDim, &sinks, &out};
  return launchDependent(sparseAttentionCombineFn, "sparseAttentionCombine",
                         tokens, heads, 1, 128, 0, stream, combine);
}

Status CudaKernels::attention(CUdeviceptr q, const DeviceCacheView &k,
                              const DeviceCacheView &v, CUdeviceptr positions,
                              CUdeviceptr sequences, CUdeviceptr sinks,
                              int64_t tokens, int64_t heads, int64_t kvHeads,
                              double scale, int64_t window, CUdeviceptr out,
                              CUstream stream, CUdeviceptr partials,
                              int64_t partialFloats, AttentionPath path) const {
  if (kvHeads <= 0 || heads % kvHeads != 0 || k.width % kvHeads != 0 ||
      v.width % kvHeads != 0)
    return Status::error("attention: " + std::to_string(heads) +
                         " query heads, K and V rows of " +
                         std::to_string(k.width) + " and " +
                         std::to_string(v.width) +
                         " values do not split into " +
                         std::to_string(kvHeads) + " KV heads");
  int64_t group = heads / kvHeads, headDim = k.width / kvHeads,
          valueDim = v.width / kvHeads;
  constexpr int64_t kAccumulators = 256 * 16; // CudaAttention.cuh
  if (valueDim <= 0 || valueDim > kAccumulators)
    return Status::error("attention: value dim " + std::to_string(valueDim) +
                         " outside [1, " + std::to_string(kAccumulators) +
                         "]");
  for (const DeviceCacheView *c : {&k, &v})
    DAYBREAK_RETURN_IF_ERROR(runtime::checkAttentionRing(*c, window, tokens));
  int64_t keys = std::min(k.maxSeqLen, v.maxSeqLen);
  if (window > 0)
    keys = std::min(keys, window);
  // Wide heads in large groups (absorbed MLA): daybreak_attention_wide,
  // split over the keys while the grid is under the target blocks (one
  // block an SM fits its shared memory), as far as the scratch allows.
  if (path != AttentionPath::TensorCores && group >= kWideAttentionMinGroup &&
      (headDim > 256 || valueDim > 128) &&
      wideAttentionApplies(k, v, kvHeads)) {
    int64_t blocks = tokens * kvHeads * ceilDiv(group, kWideAttentionHeads);
    int64_t splits = 1;
    if (partials && blocks < kSparseAttentionTargetBlocks)
      splits = std::min({ceilDiv(kSparseAttentionTargetBlocks, blocks),
                         ceilDiv(keys, 32), kAttentionMaxSplits});
    while (splits > 1 &&
           tokens * heads * splits * (valueDim + kSparsePartialHeaderFloats) >
               partialFloats)
      --splits;
    KernelCache kc = toKernel(k), vc = toKernel(v);
    int32_t share = attentionSharesRows(k, v, kvHeads),
            splitCount = int32_t(splits);
    void *params[] = {&q,     &kc,         &vc,       &positions, &sequences,
                      &sinks, &heads,      &kvHeads,  &scale,     &window,
                      &share, &splitCount, &partials, &out};
    Status status =
        launch(attentionWideFn, "attentionWide", tokens,
               kvHeads * ceilDiv(group, kWideAttentionHeads), splits, 256,
               unsigned(wideAttentionSharedBytes(headDim, valueDim, share)),
               stream, params);
    if (!status.ok() || splits == 1)
      return status;
    void *combine[] = {&partials, &heads, &splitCount, &valueDim, &sinks, &out};
    return launchDependent(sparseAttentionCombineFn, "attentionCombine", tokens,
                           heads, 1, 128, 0, stream, combine);
  }
  // Decode: at most one token a cache slot, so no keys shared between
  // tokens. Split each token's keys until the grid holds twice the target
  // blocks (each split a tile of 32 keys a warp at least), as far as the
  // scratch allows.
  if (path != AttentionPath::TensorCores && partials &&
      tokens <= std::min(k.batch, v.batch) &&
      decodeAttentionApplies(k, v, kvHeads) &&
      decodeAttentionScratchFloats(tokens, heads, valueDim) <= partialFloats) {
    int64_t decodeGroup = std::min(group, kDecodeAttentionHeads);
    int64_t blocks = tokens * kvHeads * ceilDiv(group, decodeGroup);
    int64_t splits = 1;
    if (blocks < 2 * kSparseAttentionTargetBlocks)
      splits = std::min({ceilDiv(2 * kSparseAttentionTargetBlocks, blocks),
                         ceilDiv(keys, 32 * kDecodeAttentionWarps),
                         kAttentionMaxSplits});
    while (splits > 1 &&
           decodeAttentionScratchFloats(tokens, heads, valueDim) * splits >
               partialFloats)
      --splits;
    KernelCache kc = toKernel(k), vc = toKernel(v);
    int32_t group32 = int32_t(decodeGroup), splitCount = int32_t(splits);
    void *params[] = {&q,      &kc,       &vc,      &positions,
                      &sequences, &heads, &kvHeads, &scale,
                      &window, &partials, &group32, &splitCount};
    Status status = launch(attentionDecodeFn, "attentionDecode", tokens,
                           blocks / tokens, splits, 32 * kDecodeAttentionWarps,
                           0, stream, params);
    if (!status.ok())
      return status;
    void *combine[] = {&partials, &heads, &splitCount, &valueDim, &sinks, &out};
    return launchDependent(sparseAttentionCombineFn, "attentionCombine", tokens,
                           heads, 1, 128, 0, stream, combine);
  }
  int64_t headGroup = attentionHeadGroup(group, valueDim);
  // Split each token's keys while the grid is small (decode), as far as
  // the keys (a chunk of 32 each) and the scratch allow.
  int64_t blocks = tokens * kvHeads * ceilDiv(group, headGroup);
  int64_t splits = 1;
  if (partials && blocks > 0 && blocks < kSparseAttentionTargetBlocks)
    splits = std::min({ceilDiv(kSparseAttentionTargetBlocks, blocks),
                       ceilDiv(keys, 32), kAttentionMaxSplits});
  while (splits > 1 &&
         tokens * heads * splits * (valueDim + kSparsePartialHeaderFloats) >
             partialFloats)
    --splits;
  bool tensor = tensorAttentionApplies(k, v, kvHeads);
  if (path == AttentionPath::TensorCores && !tensor)
    return Status::error(
        "attention: the tensor-core path does not take K and V heads of " +
        std::to_string(headDim) + " and " + std::to_string(valueDim) +
        " values in these caches (see tensorAttentionApplies)");
  // Auto keeps the exact CUDA-core kernels: the tensor cores' mma.sync
  // does not sum as fp32 does (up to 3.7e-5 of the CPU on the H200, see
  // CudaAttention.cuh), so they run where asked for, or preferred by the
  // device's option (`daybreak-run --attention=tensor-cores`).
  if (path == AttentionPath::TensorCores ||
      (path == AttentionPath::PreferTensorCores && tensor && splits == 1)) {
    // hn = min(group, 64) heads a block, 64 / hn tokens; tc128 also for
    // dims past 64.
    int64_t hn = std::min(group, kTcAttentionRows);
    bool wide = std::max(headDim, valueDim) > 64;
    KernelCache kc = toKernel(k), vc = toKernel(v);
    void *params[] = {&q,      &kc,    &vc,      &positions, &sequences, &sinks,
                      &tokens, &heads, &kvHeads, &scale,     &window,    &out};
    return launch(wide ? attentionTc128Fn : attentionTc64Fn, "attentionTc",
                  ceilDiv(tokens, kTcAttentionRows / hn),
                  kvHeads * ceilDiv(group, hn), 1, kTcAttentionThreads,
                  wide ? unsigned(kTcAttention128Bytes) : 0, stream, params);
  }
  // Query rows (tokens x heads) per block and keys per chunk, shrunk until
  // the block's shared memory fits the default 48 KiB.
  int64_t tileTokens =
      splits > 1 ? 1
                 : std::clamp<int64_t>(kAccumulators / (headGroup * valueDim),
                                       1, 64);
  int64_t chunk = 32;
  auto bytes = [&] {
    int64_t rows = tileTokens * headGroup;
    int64_t floats = rows * headDim + chunk * (headDim + 1) +
                     chunk * valueDim + rows * chunk + 3 * rows;
    floats += floats & 1; // the int64 bounds that follow are 8-aligned
    return 4 * floats + 16 * tileTokens + 16 * chunk;
  };
  while (bytes() > 4 * kSharedFloats) {
    if (chunk > 8)
      chunk /= 2;
    else if (tileTokens > 1)
      tileTokens /= 2;
    else if (headGroup > 1)
      --headGroup;
    else
      return Status::error("attention: K and V heads of " +
                           std::to_string(headDim) + " and " +
                           std::to_string(valueDim) +
                           " values do not fit in shared memory");
  }
  KernelCache kc = toKernel(k), vc = toKernel(v);
  int32_t tile = int32_t(tileTokens), group32 = int32_t(headGroup),
          rows = int32_t(chunk);
  int64_t gridY = kvHeads * ceilDiv(group, headGroup);
  // Register-tiled prefill: 64 query rows a block (whole GQA groups).
  if (splits == 1 && headDim <= 64 && valueDim <= 64 && group <= 64 &&
      64 % group == 0) {
    void *params[] = {&q,     &kc,    &vc,      &positions, &sequences,
                      &sinks, &tokens, &heads, &kvHeads,   &scale,
                      &window, &out};
    return launch(attentionPrefill64Fn, "attentionPrefill64",
                  ceilDiv(tokens, 64 / group), kvHeads, 1, 256, 0, stream,
                  params);
  }
  if (splits == 1) {
    void *params[] = {&q,      &kc,    &vc,      &positions, &sequences,
                      &sinks,  &tokens, &heads,  &kvHeads,   &scale,
                      &window, &out,   &tile,    &group32,   &rows};
    return launch(attentionFn, "attention", ceilDiv(tokens, tileTokens), gridY,
                  1, 256, unsigned(bytes()), stream, params);
  }
  int32_t splitCount = int32_t(splits);
  void *params[] = {&q,       &kc,      &vc,      &positions, &sequences,
                    &tokens,  &heads,   &kvHeads, &scale,     &window,
                    &partials, &group32, &rows,   &splitCount};
  Status status = launch(attentionSplitFn, "attentionSplit", tokens, gridY,
                         splits, 256, unsigned(bytes()), stream, params);
  if (!status.ok())
    return status;
  void *combine[] = {&partials, &heads, &splitCount, &valueDim, &sinks, &out};
  return launchDependent(sparseAttentionCombineFn, "attentionCombine", tokens,
                         heads, 1, 128, 0, stream, combine);
}

/// Whether a cache's rows load in the tensor-core kernels' 8-column chunks
/// (CudaAttention.cuh's tcChunk): 16 bytes of bf16, or 8 e4m3 codes of one
/// scale block and their scale, or 16 bytes of the bf16 tail, in 4-byte
/// pieces.
static bool tensorChunksLoad(const DeviceCacheView &c) {
  if (c.format == runtime::CacheFormat::BF16)
    return c.base % 16 == 0 && c.bytesPerRow % 16 == 0;
  if (c.format != runtime::CacheFormat::Fp8Scaled)
    return false;
  int64_t quantized = c.width - c.tailDim;
  return quantized % 8 == 0 &&
         (quantized == 0 || (c.scaleBlock > 0 && c.scaleBlock % 8 == 0)) &&
         c.base % 4 == 0 && c.bytesPerRow % 4 == 0;
}

bool CudaKernels::tensorAttentionApplies(const DeviceCacheView &k,
                                         const DeviceCacheView &v,
                                         int64_t kvHeads) {
  if (kvHeads <= 0 || k.width % kvHeads != 0 || v.width % kvHeads != 0)
    return false;
  // Each thread moves 8-column chunks of its KV head's columns.
  auto fits = [&](const DeviceCacheView &c) {
    int64_t dim = c.width / kvHeads;
    return dim > 0 && dim % 16 == 0 && dim <= 128 && tensorChunksLoad(c);
  };
  return fits(k) && fits(v);
}

bool CudaKernels::sparseMlaTcApplies(const DeviceCacheView &kv,
                                     int64_t valueDim) {
  return runtime::sparseMlaTensorCoresApply(kv.format, kv.width, kv.tailDim,
                                            kv.scaleBlock, valueDim) &&
         tensorChunksLoad(kv);
}

bool CudaKernels::sparseMlaWgApplies(const DeviceCacheView &kv,
                                     int64_t valueDim) {
  return kv.format == runtime::CacheFormat::Fp8Scaled && kv.width == 576 &&
         kv.tailDim == 64 && kv.scaleBlock == 128 && kv.bytesPerRow == 656 &&
         valueDim == 512 && kv.base % 16 == 0;
}

bool CudaKernels::wideAttentionApplies(const DeviceCacheView &k,
                                       const DeviceCacheView &v,
                                       int64_t kvHeads) {
  if (kvHeads <= 0 || k.width % kvHeads != 0 || v.width % kvHeads != 0)
    return false;
  int64_t headDim = k.width / kvHeads, valueDim = v.width / kvHeads;
  return headDim > 0 && headDim % 8 == 0 &&
         headDim <= kWideAttentionMaxHeadDim && valueDim > 0 &&
         valueDim <= kWideAttentionMaxValueDim;
}

bool CudaKernels::attentionSharesRows(const DeviceCacheView &k,
                                      const DeviceCacheView &v,
                                      int64_t kvHeads) {
  bool same = kvHeads == 1 && k.base == v.base && k.pageTable == v.pageTable &&
              k.format == v.format && k.bytesPerRow == v.bytesPerRow &&
              k.batch == v.batch && k.maxSeqLen == v.maxSeqLen &&
              k.pageSize == v.pageSize && k.ringRows == v.ringRows &&
              v.width <= k.width;
  if (!same || k.format != runtime::CacheFormat::Fp8Scaled)
    return same;
  // fp8: the same quantized part and scales, so that V's columns decode as
  // K's do.
  return k.scaleBlock == v.scaleBlock &&
         k.width - k.tailDim == v.width - v.tailDim;
}

bool CudaKernels::decodeAttentionApplies(const DeviceCacheView &k,
                                         const DeviceCacheView &v,
                                         int64_t kvHeads) {
  if (kvHeads <= 0 || k.width % kvHeads != 0 || v.width % kvHeads != 0 ||
      k.format != v.format)
    return false;
  int64_t headDim = k.width / kvHeads, valueDim = v.width / kvHeads;
  if (headDim <= 0 || headDim % 16 != 0 || headDim > 256 ||
      (valueDim != 32 && valueDim != 64 && valueDim != 128))
    return false;
  // K rows are read 16 values, V rows 4 values at a time, by aligned vector
  // loads; an fp8 vector shares one scale.
  auto fits = [](const DeviceCacheView &c) {
    if (c.base % 16 != 0 || c.bytesPerRow % 16 != 0)
      return false;
    return c.format != runtime::CacheFormat::Fp8Scaled ||
           (c.tailDim == 0 && c.scaleBlock > 0 && c.scaleBlock % 16 == 0);
  };
  return fits(k) && fits(v);
}

Status CudaKernels::copyColumns(CUdeviceptr src, int64_t srcStride,
                                int64_t srcOffset, CUdeviceptr dst,
                                int64_t dstStride, int64_t dstOffset,
                                int64_t rows, int64_t cols,
                                CUstream stream) const {
  void *params[] = {&src,       &srcStride, &srcOffset, &dst,
                    &dstStride, &dstOffset, &rows,      &cols};
  if (rows <= 0 || cols <= 0)
    return Status::success();
  return launch(copyColumnsFn, "copyColumns", ceilDiv(rows * cols, 256), 1, 1,
                256, 0, stream, params);
}

Status CudaKernels::dsaKpool(CUdeviceptr keys, CUdeviceptr gate,
                             const DeviceWeight &ape, int64_t pool,
                             int64_t width, const DeviceState &state,
                             CUdeviceptr positions, CUdeviceptr sequences,
                             int64_t tokens, CUdeviceptr out,
                             CUstream stream) const {
  int64_t tailRows = pool > 1 ? pool - 1 : 1;
  if (pool < 1 || pool > kKpoolMaxPool ||
      tailRows * 2 * width * (state.bf16 ? 2 : 4) != state.slotBytes)
    return Status::error(
        "dsa_kpool: pools of " + std::to_string(pool) +
        " tokens over keys of " + std::to_string(width) +
        " with state slots of " + std::to_string(state.slotBytes) +
        " bytes (the CUDA kernel takes pools of 1 to " +
        std::to_string(kKpoolMaxPool) + " tokens and a [max(pool - 1, 1), 2 " +
        "x width] tail)");
  if (tokens == 0)
    return Status::success();
  DeviceWeight w = ape;
  CUdeviceptr base = state.base;
  int64_t slotBytes = state.slotBytes, slots = state.slots;
  int32_t bf16 = state.bf16;
  void *params[] = {&keys, &gate,      &w,         &base,   &slotBytes,
                    &bf16, &positions, &sequences, &tokens, &slots,
                    &pool, &width,     &out};
  DAYBREAK_RETURN_IF_ERROR(
      launch(dsaKpoolFn, "dsaKpool", tokens, 1, 1, 128, 0, stream, params));
  void *tail[] = {&keys,      &gate,   &base,  &slotBytes, &bf16, &positions,
                  &sequences, &tokens, &slots, &pool,      &width};
  return launch(dsaKpoolTailFn, "dsaKpoolTail", tokens, 1, 1, 128, 0, stream,
                tail);
}

Status CudaKernels::dsaKpoolExpand(CUdeviceptr pools, CUdeviceptr positions,
                                   int64_t tokens, int64_t k, int64_t pool,
                                   CUdeviceptr out, CUstream stream) const {
  if (pool < 1 || k < 0 || k * pool + pool - 1 > INT32_MAX)
    return Status::error("dsa_kpool_expand: " + std::to_string(k) +
                         " pools of " + std::to_string(pool) + " tokens");
  if (tokens == 0)
    return Status::success();
  void *params[] = {&pools, &positions, &k, &pool, &out};
  return launch(dsaKpoolExpandFn, "dsaKpoolExpand", tokens, 1, 1, 256, 0,
                stream, params);
}

Status CudaKernels::divScalarI32(CUdeviceptr input, int64_t n, int64_t divisor,
                                 CUdeviceptr out, CUstream stream) const {
  if (divisor <= 0 || divisor > INT32_MAX)
    return Status::error("div_scalar_i32: divisor " + std::to_string(divisor) +
                         " is not a positive 32-bit integer");
  if (n == 0)
    return Status::success();
  int32_t d = int32_t(divisor);
  void *params[] = {&input, &n, &d, &out};
  return launch(divScalarI32Fn, "divScalarI32", ceilDiv(n, 256), 1, 1, 256, 0,
                stream, params);
}

Status CudaKernels::causalBounds(CUdeviceptr positions, int64_t tokens,
                                 CUdeviceptr bounds, CUstream stream) const {
  void *params[] = {&positions, &tokens, &bounds};
  return launchDependent(causalBoundsFn, "causalBounds", ceilDiv(tokens, 256),
                         1, 1, 256, 0, stream, params);
}

Status CudaKernels::localExperts(CUdeviceptr ids, int64_t n, int64_t first,
                                 int64_t count, CUdeviceptr out,
                                 CUstream stream) const {
  if (n == 0)
    return Status::success();
  void *params[] = {&ids, &n, &first, &count, &out};
  return launchDependent(localExpertsFn, "localExperts", ceilDiv(n, 256), 1, 1,
                         256, 0, stream, params);
}

} // namespace daybreak::cuda
