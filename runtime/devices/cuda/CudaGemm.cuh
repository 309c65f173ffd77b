//===- CudaGemm.cuh - Warpgroup GEMMs on the copy engine -------*- CUDA -*-===//
//
// Included by CudaKernels.cu. The many-row matmuls of `--precision=bf16`
// and `fp8`, and of the exact default precision, on Hopper's warpgroup MMA
// (wgmma, sm_90a):
//
//   out[m, n] = x[m, k] . w[n, k]^T (+ bias[n])
//
// with x the input rounded to bf16 codes (daybreak_to_bf16), or for the
// exact forms (_x3) split into three bf16 parts that sum to it
// (daybreak_split_bf16x3), each part's products summed into the same
// accumulators (fp32 products of x and w, as the exact mma.sync GEMM of
// CudaKernels.cu makes them, on the faster MMA; up to 64 rows, bf16's
// _x3_narrow takes 64-row blocks, each MMA warpgroup half the columns, so
// that three parts of few rows stay bound by the weight's stream rather
// than by MMAs of absent rows), and w a bf16
// weight, or an e4m3 one that the kernel widens exactly to bf16 in shared
// memory, its 128 x 128 block scales applied in the accumulators. Both
// K-major. Products and sums are the tensor cores' fp32. The same blocks
// serve grouped experts (WgGroups: a tile of rows of one expert, gathered
// in expert order, its expert's rows of all experts' weights as one
// matrix). The FP8 GEMM (further down) takes x quantized to e4m3 with
// DeepSeek's 1 x 128 scales and the weight's codes as stored, on the fp8
// MMA, with no widening.
//
// A block computes a 128 x kN tile of out with three warpgroups. In the
// first, one thread issues the copies (cp.async.bulk.tensor of a 128 x 64
// tile of x and a kN x 64 tile of w a stage, completing on the stage's
// `full` mbarrier); the other two each multiply 64 of the rows (m64nNk16,
// four a stage) and release the stage on its `empty` mbarrier once their
// products of it have completed. bf16 (kN = 256): both tiles land 128-byte
// swizzled, as the MMA reads them. e4m3 (kN = 128): the codes land as
// stored; warps 1-3 of the first warpgroup widen each stage's into one of
// three swizzled buffers (`wideFull` / `wideEmpty`), up to two stages
// ahead of the MMA; each 128 columns of K (a scale block) sum apart and
// fold into the accumulators with their scale. The copy engine zero-fills
// rows and columns past the tensors' ends, so any m, n and k (k a multiple
// of 8 for bf16, 16 for e4m3: 16-byte row pitch) take the same path; the
// epilogue writes the rows and columns that exist.
//
// Roofline (H200, 132 SMs): 2 m n k FLOP on the dense bf16 rate (990
// TFLOP/s by the datasheet; cuBLAS reaches about 800 at these shapes
// here). Both MMA warpgroups read their A (64 rows) and B (kN rows) tiles
// from shared memory: about 80 bytes a clock an SM at kN = 256 beside the
// copies' 48, near the 128 shared memory gives, the next limit after the
// MMA. e4m3 (kN = 128) reads more a FLOP, adds the widening's loads and
// stores (8 + 16 KB a stage, about 80 instructions a widening thread a
// stage), and waits for each scale block's products before its fold.
// (Widening on the MMA warpgroups instead, between their waits, measured
// 245 TFLOP/s; a widening pass to a bf16 copy in device memory 357, at
// 8192 x 7168 x 7168: bench/NOTES.md.)
//
//===----------------------------------------------------------------------===//

/// A CUtensorMap, opaque to the kernels (cuTensorMapEncodeTiled fills it on
/// the host); passed by value as a __grid_constant__ parameter.
struct alignas(64) TensorMap {
  uint64_t opaque[16];
};

namespace {

constexpr int kWgRows = 128;    // rows of x a block: two warpgroups of 64
constexpr int kWgK = 64;        // columns of K a stage: one 128-byte row
constexpr int kWgThreads = 384; // the copy warpgroup and two for the MMA
constexpr int kWgTileBytes = kWgK * 2; // a tile row: 64 bf16

/// The box of `map` at (column c0, row c1) into shared memory at `dst`,
/// counted on `bar`'s transactions. Out-of-range elements read as zero.
__device__ __forceinline__ void copyTile(void *dst, const TensorMap &map,
                                         uint64_t *bar, int32_t c0,
                                         int32_t c1) {
  asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::"
               "complete_tx::bytes [%0], [%1, {%2, %3}], [%4];" ::"r"(
                   sharedAddress(dst)),
               "l"(reinterpret_cast<uint64_t>(&map)), "r"(c0), "r"(c1),
               "r"(sharedAddress(bar))
               : "memory");
}

/// The wgmma descriptor of a K-major bf16 tile in shared memory whose rows
/// are 128 bytes (64 values), 128-byte swizzled as the copy engine writes
/// it, groups of 8 rows 1024 bytes apart; `tile` 1024-byte aligned (plus a
/// multiple of 32 bytes to start at a later k16 step of the row).
__device__ __forceinline__ uint64_t tileDescriptor(const void *tile) {
  uint64_t d = (sharedAddress(tile) & 0x3FFFF) >> 4;
  d |= uint64_t(1) << 16;         // leading byte offset: unused, swizzled
  d |= uint64_t(1024 >> 4) << 32; // stride byte offset: 8 rows
  d |= uint64_t(1) << 62;         // 128-byte swizzle
  return d;
}

__device__ __forceinline__ void wgmmaFence() {
  asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
}
__device__ __forceinline__ void wgmmaCommit() {
  asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
}
template <int kPending> __device__ __forceinline__ void wgmmaWait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(kPending) : "memory");
}
/// Keeps the compiler from moving accesses to the accumulators across the
/// asynchronous MMA (their registers are the MMA's until wgmmaWait).
template <int kN>
__device__ __forceinline__ void fenceAccumulators(float (&d)[kN]) {
#pragma unroll
  for (int i = 0; i < kN; ++i)
    asm volatile("" : "+f"(d[i])::"memory");
}

/// d (+)= a b for one m64n128k16 wgmma: bf16 operands from shared memory
/// (descriptors), fp32 accumulators; `accumulate` 0 overwrites d.
__device__ __forceinline__ void wgmma128(float (&d)[64], uint64_t a, uint64_t b,
                                         uint32_t accumulate) {
  asm volatile(
      "{\n\t.reg .pred p;\n\tsetp.ne.b32 p, %66, 0;\n\t"
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {"
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, "
      "%30, %31, "
      "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, "
      "%46, %47, "
      "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, "
      "%62, %63"
      "}, %64, %65, p, 1, 1, 0, 0;\n\t}"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]),
        "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]),
        "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
        "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]),
        "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]),
        "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]),
        "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]),
        "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]),
        "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]),
        "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]),
        "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
        "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]),
        "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
      : "l"(a), "l"(b), "r"(accumulate));
}

/// d (+)= a b for one m64n64k16 wgmma: bf16 operands from shared memory
/// (descriptors), fp32 accumulators; `accumulate` 0 overwrites d.
__device__ __forceinline__ void wgmma64(float (&d)[32], uint64_t a, uint64_t b,
                                        uint32_t accumulate) {
  asm volatile(
      "{\n\t.reg .pred p;\n\tsetp.ne.b32 p, %34, 0;\n\t"
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {"
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, "
      "%30, %31"
      "}, %32, %33, p, 1, 1, 0, 0;\n\t}"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]),
        "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]),
        "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
        "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]),
        "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]),
        "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]),
        "+f"(d[31])
      : "l"(a), "l"(b), "r"(accumulate));
}

/// d (+)= a b for one m64n256k16 wgmma: bf16 operands from shared memory
/// (descriptors), fp32 accumulators; `accumulate` 0 overwrites d.
__device__ __forceinline__ void wgmma256(float (&d)[128], uint64_t a,
                                         uint64_t b, uint32_t accumulate) {
  asm volatile(
      "{\n\t.reg .pred p;\n\tsetp.ne.b32 p, %130, 0;\n\t"
      "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 {"
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, "
      "%30, %31, "
      "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, "
      "%46, %47, "
      "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, "
      "%62, %63, "
      "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, "
      "%78, %79, "
      "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, "
      "%94, %95, "
      "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, "
      "%108, %109, %110, %111, "
      "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, "
      "%124, %125, %126, %127"
      "}, %128, %129, p, 1, 1, 0, 0;\n\t}"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]),
        "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]),
        "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
        "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]),
        "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]),
        "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]),
        "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]),
        "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]),
        "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]),
        "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]),
        "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
        "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]),
        "+f"(d[61]), "+f"(d[62]), "+f"(d[63]), "+f"(d[64]), "+f"(d[65]),
        "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]),
        "+f"(d[71]), "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]),
        "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), "+f"(d[80]),
        "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]),
        "+f"(d[86]), "+f"(d[87]), "+f"(d[88]), "+f"(d[89]), "+f"(d[90]),
        "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]),
        "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]),
        "+f"(d[101]), "+f"(d[102]), "+f"(d[103]), "+f"(d[104]), "+f"(d[105]),
        "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]),
        "+f"(d[111]), "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]),
        "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]), "+f"(d[120]),
        "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]),
        "+f"(d[126]), "+f"(d[127])
      : "l"(a), "l"(b), "r"(accumulate));
}

/// d (+)= a b for one m64n128k32 wgmma: e4m3 operands from shared memory
/// (descriptors; K-major, the one layout fp8 wgmma takes), fp32
/// accumulators (the tensor core sums fp8 products with fewer bits than
/// fp32: DeepSeek-V3's report measures about 14); `accumulate` 0
/// overwrites d.
__device__ __forceinline__ void wgmmaE4m3x128(float (&d)[64], uint64_t a,
                                              uint64_t b, uint32_t accumulate) {
  asm volatile(
      "{\n\t.reg .pred p;\n\tsetp.ne.b32 p, %66, 0;\n\t"
      "wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3 {"
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, "
      "%30, %31, "
      "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, "
      "%46, %47, "
      "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, "
      "%62, %63"
      "}, %64, %65, p, 1, 1;\n\t}"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]),
        "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]),
        "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
        "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]),
        "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]),
        "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]),
        "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]),
        "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]),
        "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]),
        "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]),
        "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
        "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]),
        "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
      : "l"(a), "l"(b), "r"(accumulate));
}

/// One k64 stage of a warpgroup's 64 x kN products: four k16 steps, the
/// descriptors advanced 32 bytes (two units) along the swizzled rows.
template <int kN>
__device__ __forceinline__ void wgmmaStage(float (&d)[kN / 2], uint64_t a,
                                           uint64_t b, bool overwrite) {
#pragma unroll
  for (int kk = 0; kk < 4; ++kk) {
    uint32_t accumulate = overwrite && kk == 0 ? 0u : 1u;
    if constexpr (kN == 256)
      wgmma256(d, a + 2 * kk, b + 2 * kk, accumulate);
    else if constexpr (kN == 128)
      wgmma128(d, a + 2 * kk, b + 2 * kk, accumulate);
    else
      wgmma64(d, a + 2 * kk, b + 2 * kk, accumulate);
  }
}

/// The shared memory of a block: stages of x (kParts tiles of 128 rows of
/// 128 bytes) then w (kN rows: bf16, 128 bytes a row; e4m3, the codes as
/// stored, 64 bytes a row; e2m1, the packed values as stored, 32 bytes a
/// row), each stage 1024-byte aligned; for e4m3 and e2m1 kWide buffers of
/// a stage's w widened to bf16 (kN rows of 128 bytes, swizzled as the copy
/// engine would); the barriers (`full` and `empty` a stage, `wideFull` and
/// `wideEmpty` a widened buffer); 1024 bytes of slack to align the start.
/// Three parts (48 KB of x a stage) leave room for three stages at kN =
/// 128; kNarrow's tiles of 64 rows of x (24 KB a stage) for five.
template <int kN, int kWeight, int kParts = 1, bool kNarrow = false>
struct WgGemmShared {
  static constexpr bool kWidened = kWeight != kWeightBF16;
  static constexpr int kStages = kNarrow      ? 5
                                 : kParts > 1 ? 3
                                 : kWidened   ? 6
                                              : 4;
  static constexpr int kWide = kWidened ? 3 : 0;
  static constexpr int kWideRing =
      kWidened ? kWide : 1; // a modulus for bf16 too
  static constexpr int kRows = kNarrow ? 64 : kWgRows;
  static constexpr int kXTileBytes = kRows * kWgTileBytes;
  static constexpr int kXBytes = kParts * kXTileBytes;
  static constexpr int kWRowBytes = kWeight == kWeightBF16   ? kWgTileBytes
                                    : kWeight == kWeightE4M3 ? kWgK
                                                             : kWgK / 2;
  static constexpr int kWBytes = kN * kWRowBytes;
  static constexpr int kStageBytes = kXBytes + kWBytes;
  static constexpr int kWideBytes = kN * kWgTileBytes;
  static constexpr int kBytes = 1024 + kStages * kStageBytes +
                                kWide * kWideBytes + 16 * (kStages + kWide);
  static_assert(kStageBytes % 1024 == 0 && kWideBytes % 1024 == 0,
                "the swizzled tiles need 1024-byte alignment");
  static_assert(kBytes <= 227 * 1024, "past an SM's shared memory");
};

extern __shared__ __align__(1024) uint8_t wgGemmShared[];

/// Unit `unit` (0..255) of widening a stage's kN = 128 rows of 64 e4m3
/// codes (`codes`, 64 bytes a row) to bf16 in `wide` (128 bytes a row, the
/// copy engine's 128-byte swizzle: 16-byte chunk c of row r at chunk
/// c ^ r % 8): row unit / 2, codes [32 (unit % 2), + 32). Exact (e4m3 to
/// f16 to bf16), unscaled.
__device__ __forceinline__ void widenUnit(const uint8_t *codes, uint8_t *wide,
                                          int unit) {
  const int r = unit >> 1, h = unit & 1;
  const uint4 *src = reinterpret_cast<const uint4 *>(codes + r * 64 + h * 32);
  const uint4 raw[2] = {src[0], src[1]};
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    // Codes 8 j .. 8 j + 7 of the unit: two words of raw[j / 2].
    const uint4 &v = raw[j >> 1];
    const uint32_t words[2] = {j & 1 ? v.z : v.x, j & 1 ? v.w : v.y};
    uint32_t pairs[4];
#pragma unroll
    for (int q = 0; q < 2; ++q) {
      uint32_t lo, hi;
      e4m3x4ToHalf2(words[q], lo, hi);
      float f[4];
      unpackHalf2(lo, f[0], f[1]);
      unpackHalf2(hi, f[2], f[3]);
      // Exact in bf16: the top half of each float.
      pairs[2 * q] =
          (__float_as_uint(f[0]) >> 16) | (__float_as_uint(f[1]) & 0xFFFF0000u);
      pairs[2 * q + 1] =
          (__float_as_uint(f[2]) >> 16) | (__float_as_uint(f[3]) & 0xFFFF0000u);
    }
    const int chunk = (4 * h + j) ^ (r & 7);
    *reinterpret_cast<uint4 *>(wide + r * kWgTileBytes + chunk * 16) =
        make_uint4(pairs[0], pairs[1], pairs[2], pairs[3]);
  }
}

/// The bf16 bits of an E8M0 scale byte, 2^(s - 127), in both halves: an
/// exponent field of s for s = 1 .. 254 (bf16 has f32's exponents), the
/// subnormal 2^-127 for s = 0, NaN for 255.
__device__ __forceinline__ uint32_t e8m0ToBf16x2(uint32_t s) {
  const uint32_t bits = s == 0 ? 0x0040u : s == 255 ? 0x7FC0u : s << 7;
  return bits | bits << 16;
}

/// Eight E2M1 values (a word of the packed weight: value i in bits [4 i, 4
/// i + 4), sign bit 3, two exponent bits, one significand bit) as four
/// bf16 pairs (value 2 j low, 2 j + 1 high) times `scale` (e8m0ToBf16x2).
/// The magnitudes 0, 0.5, 1, 1.5, 2, 3, 4, 6 are a byte table lookup
/// (prmt: low bytes, then high bytes, of codes 0 .. 7); the sign is the
/// code's bit 3; the product is exact (two significand bits times a power
/// of two, subnormals included) unless it passes bf16's (f32's) largest
/// finite value.
__device__ __forceinline__ void e2m1x8ToBf16(uint32_t word, uint32_t scale,
                                             uint32_t (&pairs)[4]) {
  const uint32_t magnitudes = word & 0x77777777u;
  uint32_t lo[2], hi[2];
#pragma unroll
  for (int q = 0; q < 2; ++q) {
    const uint32_t select = magnitudes >> (16 * q);
    asm("prmt.b32 %0, %1, %2, %3;"
        : "=r"(lo[q])
        : "r"(0xC0800000u), "r"(0xC0804000u), "r"(select));
    asm("prmt.b32 %0, %1, %2, %3;"
        : "=r"(hi[q])
        : "r"(0x3F3F3F00u), "r"(0x40404040u), "r"(select));
  }
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    uint32_t pair;
    asm("prmt.b32 %0, %1, %2, %3;"
        : "=r"(pair)
        : "r"(lo[j / 2]), "r"(hi[j / 2]), "r"(j % 2 ? 0x7362u : 0x5140u));
    const uint32_t codes = word >> (8 * j); // values 2 j and 2 j + 1
    pair |= ((codes << 12) & 0x8000u) | ((codes << 24) & 0x80000000u);
    asm("mul.rn.bf16x2 %0, %1, %2;" : "=r"(pairs[j]) : "r"(pair), "r"(scale));
  }
}

/// Unit `unit` (0..255) of widening a stage's 128 rows of 64 E2M1 values
/// (`packed`, 32 bytes a row) to bf16 in `wide`, as widenUnit: row unit /
/// 2, values [32 (unit % 2), + 32), one MXFP4 block, times its scale
/// `scale` (e8m0ToBf16x2).
__device__ __forceinline__ void
widenE2m1Unit(const uint8_t *packed, uint8_t *wide, int unit, uint32_t scale) {
  const int r = unit >> 1, h = unit & 1;
  const uint4 v = *reinterpret_cast<const uint4 *>(packed + r * 32 + h * 16);
  const uint32_t words[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    uint32_t pairs[4];
    e2m1x8ToBf16(words[j], scale, pairs);
    const int chunk = (4 * h + j) ^ (r & 7);
    *reinterpret_cast<uint4 *>(wide + r * kWgTileBytes + chunk * 16) =
        make_uint4(pairs[0], pairs[1], pairs[2], pairs[3]);
  }
}

/// The rows of a grouped expert GEMM (daybreak_expert_group's tiles of at
/// most 128 rows of one expert): tile y multiplies rows [begin, begin +
/// rows) of the gathered x by its expert's matrix (rows [e n, e n + n) of
/// w), and its row r goes to out row order[begin + r]. Null for a dense
/// GEMM.
struct WgGroups {
  const int32_t *order;
  const int4 *tiles;
  const int32_t *tileCount;
};

/// The block at (blockIdx.x, blockIdx.y): out columns [kN x, kN x + kN) of
/// rows [128 y, 128 y + 128), or with `groups` those of tile y. kWeight
/// kWeightE4M3: wMap reads w's e4m3 codes, which warps 1-3 of the copy
/// warpgroup widen to bf16 ahead of the products, and `w`'s scales
/// ([experts, ceil(n / blockN), ceil(k / blockK)], blockN a multiple of
/// kN, blockK of 64) multiply each blockK columns' sums. kWeightE2M1
/// (MXFP4, k a multiple of 32): wMap reads the packed values ([experts x
/// n, k / 2] bytes, 32 a stage's row), and `w.scales` holds the E8M0
/// bytes [experts x n, k / 32]; the same warps widen each 32 values times
/// their scale (exact: widenE2m1Unit), so the products need no fold. kParts 3
/// (dense, and the grouped E2M1 GEMM): xMap reads [3 m, k], the exact split
/// of fp32 x into three bf16 parts (daybreak_split_bf16x3, or
/// daybreak_gather_bf16 with 3 parts: part p's rows from p m), and each stage
/// multiplies every part's tile by the one w tile into the same sums: fp32
/// products of x and w. (A tile's rows past m read the next part's rows,
/// or zeros past the last; they are rows the epilogue does not write.)
/// kNarrow (dense, for m up to 64): the block takes 64 rows, and each MMA
/// warpgroup half of the kN columns, so no MMA multiplies rows that are
/// not there (xMap's box is 64 rows).
template <int kN, int kWeight, int kParts = 1, bool kNarrow = false>
__device__ __forceinline__ void
warpgroupGemm(const TensorMap &xMap, const TensorMap &wMap, const Weight &w,
              const Weight &bias, int64_t m, int64_t n, int64_t k, float *out,
              const WgGroups &groups = {nullptr, nullptr, nullptr}) {
  constexpr bool kE4m3 = kWeight == kWeightE4M3;
  using S = WgGemmShared<kN, kWeight, kParts, kNarrow>;
  constexpr bool kWidened = S::kWidened;
  static_assert(!kWidened || kN == 128, "the widening covers 128 rows");
  // A warpgroup's columns of the block's kN.
  constexpr int kCols = kNarrow ? kN / 2 : kN;
  // The block's first rows of x and w, its rows that exist, and its
  // expert (0 for a dense GEMM).
  int64_t xRow = int64_t(blockIdx.y) * S::kRows, expert = 0;
  int64_t rows = m - xRow < S::kRows ? m - xRow : S::kRows;
  const int32_t *dest = nullptr;
  if (groups.tiles) {
    if (int64_t(blockIdx.y) >= int64_t(*groups.tileCount))
      return;
    const int4 tile = groups.tiles[blockIdx.y];
    expert = tile.x;
    xRow = tile.y;
    rows = tile.z;
    dest = groups.order + tile.y;
  }
  uint8_t *base =
      wgGemmShared + ((1024 - (sharedAddress(wgGemmShared) & 1023)) & 1023);
  uint8_t *wide = base + S::kStages * S::kStageBytes;
  uint64_t *full =
      reinterpret_cast<uint64_t *>(wide + S::kWide * S::kWideBytes);
  uint64_t *empty = full + S::kStages;
  uint64_t *wideFull = empty + S::kStages;
  uint64_t *wideEmpty = wideFull + S::kWide;
  const int warpgroup = threadIdx.x / 128;
  const int lane = threadIdx.x & 31;
  const int64_t n0 = int64_t(blockIdx.x) * kN;
  const int stages = int((k + kWgK - 1) / kWgK);
  if (threadIdx.x == 0) {
    for (int s = 0; s < S::kStages; ++s) {
      barrierInit(&full[s], 1);
      // Lane 0 of each MMA warp, and of each widening warp.
      barrierInit(&empty[s], kWidened ? 11 : 8);
    }
    for (int b = 0; b < S::kWide; ++b) {
      barrierInit(&wideFull[b], 3);
      barrierInit(&wideEmpty[b], 8);
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();

  if (warpgroup == 0) {
    // The block holds 384 x 168 registers; what this warpgroup gives up
    // the MMA warpgroups take (setmaxnreg.inc waits until the pool has
    // them: asking more than was given deadlocks). E2M1's widening keeps
    // its units' scale bytes too, 64 registers (13,312 given up), and its
    // MMA warpgroups, with no second set of accumulators, take 216.
    if constexpr (kWeight == kWeightE2M1)
      asm volatile("setmaxnreg.dec.sync.aligned.u32 64;");
    else if constexpr (kWidened)
      asm volatile("setmaxnreg.dec.sync.aligned.u32 56;");
    else
      asm volatile("setmaxnreg.dec.sync.aligned.u32 40;");
    if (threadIdx.x == 0) {
      // The copies: one thread waits for a free stage and starts both tiles.
      // E2M1 (grouped experts, often a few rows a tile): xMap's box is
      // kXBox rows and only the boxes holding the tile's rows are copied,
      // so x's traffic follows its rows, not the tile's 128 (the MMA reads
      // the rest of the tile as whatever an earlier stage left there:
      // products of rows the epilogue does not write).
      constexpr int kXBox = kWeight == kWeightE2M1 ? 16 : S::kRows;
      const int boxes =
          int(((rows < S::kRows ? rows : S::kRows) + kXBox - 1) / kXBox);
      const uint32_t bytes =
          uint32_t(kParts * boxes * kXBox * kWgTileBytes + S::kWBytes);
      for (int s = 0; s < stages; ++s) {
        const int slot = s % S::kStages;
        barrierWait(&empty[slot], ((s / S::kStages) & 1) ^ 1);
        uint8_t *stage = base + slot * S::kStageBytes;
        barrierExpectBytes(&full[slot], bytes);
        for (int part = 0; part < kParts; ++part)
          for (int box = 0; box < boxes; ++box)
            copyTile(stage + part * S::kXTileBytes +
                         box * kXBox * kWgTileBytes,
                     xMap, &full[slot], s * kWgK,
                     int32_t(part * m + xRow + box * kXBox));
        // wMap's columns are bf16 values or e4m3 codes, or bytes of two
        // E2M1 values.
        copyTile(stage + S::kXBytes, wMap, &full[slot],
                 s * (kWeight == kWeightE2M1 ? kWgK / 2 : kWgK),
                 int32_t(expert * n + n0));
      }
    } else if (kWidened && threadIdx.x >= 32) {
      // The widening: warps 1-3 turn each stage's codes into a free wide
      // buffer, then hand the buffer to the MMA and the codes back.
      // E2M1: a thread's units (at most 3) keep their rows across stages;
      // each unit's scale byte for the next stage loads while this one
      // widens. Rows past n (the next expert's, or zeros) take scale 1:
      // their columns are not written, and a NaN scale there would be
      // harmless too, but a row past the last expert's is past `scales`.
      constexpr int kUnits = (2 * kN + 95) / 96;
      const uint8_t *scaleBytes = reinterpret_cast<const uint8_t *>(w.scales);
      const int64_t blocks = k / 32;
      auto scaleOf = [&](int unit, int s) -> uint32_t {
        const int r = unit >> 1;
        const int64_t column = 2 * int64_t(s) + (unit & 1);
        if (unit >= 2 * kN || n0 + r >= n || column >= blocks)
          return 127;
        return scaleBytes[(expert * n + n0 + r) * blocks + column];
      };
      uint32_t next[kUnits] = {};
      if constexpr (kWeight == kWeightE2M1)
#pragma unroll
        for (int i = 0; i < kUnits; ++i)
          next[i] = scaleOf(threadIdx.x - 32 + 96 * i, 0);
      for (int s = 0; s < stages; ++s) {
        const int slot = s % S::kStages, buf = s % S::kWideRing;
        uint32_t current[kUnits];
#pragma unroll
        for (int i = 0; i < kUnits; ++i)
          current[i] = next[i];
        if constexpr (kWeight == kWeightE2M1)
#pragma unroll
          for (int i = 0; i < kUnits; ++i)
            next[i] = s + 1 < stages ? scaleOf(threadIdx.x - 32 + 96 * i, s + 1)
                                     : 127;
        barrierWait(&full[slot], (s / S::kStages) & 1);
        barrierWait(&wideEmpty[buf], ((s / S::kWideRing) & 1) ^ 1);
        const uint8_t *codes = base + slot * S::kStageBytes + S::kXBytes;
#pragma unroll
        for (int i = 0; i < kUnits; ++i) {
          const int unit = threadIdx.x - 32 + 96 * i;
          if (unit >= 2 * kN)
            break;
          if constexpr (kWeight == kWeightE2M1)
            widenE2m1Unit(codes, wide + buf * S::kWideBytes, unit,
                          e8m0ToBf16x2(current[i]));
          else
            widenUnit(codes, wide + buf * S::kWideBytes, unit);
        }
        // The tensor cores read what these stores wrote.
        asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
        __syncwarp();
        if (lane == 0) {
          barrierArrive(&wideFull[buf]);
          barrierArrive(&empty[slot]);
        }
      }
    }
  } else {
    if constexpr (kWeight == kWeightE2M1)
      asm volatile("setmaxnreg.inc.sync.aligned.u32 216;");
    else
      asm volatile("setmaxnreg.inc.sync.aligned.u32 224;");
    const int wg = warpgroup - 1;
    // acc[4 j + 2 h + c]: row 16 warp + g + 8 h of the warpgroup's 64,
    // column 8 j + 2 t + c (g = lane / 4, t = lane % 4), wgmma's order.
    // e4m3 sums each scale block in part, then folds it into acc scaled.
    float acc[kCols / 2], part[kCols / 2];
#pragma unroll
    for (int i = 0; i < kCols / 2; ++i)
      acc[i] = 0.0f;
    const float *scales = nullptr;
    if (kE4m3) {
      const int64_t blocksK = (k + w.blockK - 1) / w.blockK;
      scales =
          w.scales +
          (expert * ((n + w.blockN - 1) / w.blockN) + n0 / w.blockN) * blocksK;
    }
    int released = 0;
    float scale = 0.0f;
    // A tile of at most 64 rows (a grouped expert's few rows, a dense
    // GEMM's last) leaves the second warpgroup no rows: it multiplies
    // nothing, so the first has the tensor cores to itself.
    const bool idle = !kNarrow && wg * 64 >= rows;
    for (int s = 0; s < stages; ++s) {
      const int slot = s % S::kStages;
      barrierWait(&full[slot], (s / S::kStages) & 1);
      uint8_t *stage = base + slot * S::kStageBytes;
      const uint8_t *wTile = stage + S::kXBytes;
      if constexpr (kWidened) {
        barrierWait(&wideFull[s % S::kWideRing], (s / S::kWideRing) & 1);
        wTile = wide + (s % S::kWideRing) * S::kWideBytes;
      }
      if (idle) {
        // The stage goes back once here (the barriers' phases are then
        // this stage's).
        if (lane == 0) {
          barrierArrive(&empty[slot]);
          if (kWidened)
            barrierArrive(&wideEmpty[s % S::kWideRing]);
        }
        continue;
      }
      const uint64_t b =
          tileDescriptor(wTile + (kNarrow ? wg * kCols * kWgTileBytes : 0));
      float(&d)[kCols / 2] = kE4m3 ? part : acc;
      const bool blockStart = kE4m3 && (int64_t(s) * kWgK) % w.blockK == 0;
      // The block's scale, loaded while its products run (after them its
      // latency would stall the fold).
      if (blockStart)
        scale = scales[(int64_t(s) * kWgK) / w.blockK];
      fenceAccumulators(d);
      wgmmaFence();
#pragma unroll
      for (int part = 0; part < kParts; ++part)
        wgmmaStage<kCols>(
            d,
            tileDescriptor(stage + part * S::kXTileBytes +
                           (kNarrow ? 0 : wg * 64) * kWgTileBytes),
            b, blockStart && part == 0);
      wgmmaCommit();
      fenceAccumulators(d);
      int done = s; // stages whose products have completed
      if (kE4m3 &&
          (s + 1 == stages || (int64_t(s + 1) * kWgK) % w.blockK == 0)) {
        wgmmaWait<0>();
        fenceAccumulators(d);
        done = s + 1;
#pragma unroll
        for (int i = 0; i < kCols / 2; ++i)
          acc[i] = fmaf(part[i], scale, acc[i]);
      } else {
        wgmmaWait<1>();
        fenceAccumulators(d);
      }
      // The stages whose products completed go back to the copies (and
      // their widened buffers to the widening).
      for (; released < done; ++released)
        if (lane == 0) {
          barrierArrive(&empty[released % S::kStages]);
          if (kWidened)
            barrierArrive(&wideEmpty[released % S::kWideRing]);
        }
    }
    wgmmaWait<0>();
    fenceAccumulators(acc);

    const int warp = (threadIdx.x / 32) & 3, g = lane >> 2, t = lane & 3;
    const bool pairs = n % 2 == 0;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int r = (kNarrow ? 0 : wg * 64) + warp * 16 + g + 8 * h;
      if (r >= rows)
        continue;
      float *o = out + (dest ? int64_t(dest[r]) : xRow + r) * n;
#pragma unroll
      for (int j = 0; j < kCols / 8; ++j) {
        const int64_t col = n0 + (kNarrow ? wg * kCols : 0) + j * 8 + 2 * t;
        float v0 = acc[4 * j + 2 * h], v1 = acc[4 * j + 2 * h + 1];
        if (bias.data) {
          if (col < n)
            v0 += weightAt(bias, expert * n + col);
          if (col + 1 < n)
            v1 += weightAt(bias, expert * n + col + 1);
        }
        if (pairs && col + 1 < n) {
          *reinterpret_cast<float2 *>(o + col) = make_float2(v0, v1);
        } else {
          if (col < n)
            o[col] = v0;
          if (col + 1 < n)
            o[col + 1] = v1;
        }
      }
    }
  }
}

/// The FP8 GEMM's block (daybreak_gemm_wg_fp8 and its kinds): out rows
/// [kRows y, kRows y + kRows), columns [128 x, 128 x + 128) of
///
///   out[r, c] = sum over 128-column blocks b of
///               xScale[r, b] wScale[c / blockN, b] (xq[r, b] . wq[c, b])
///
/// with xq the e4m3 codes of x (daybreak_quant_fp8: one power-of-two scale
/// a row and 128 columns) and wq those of an e4m3 weight of 128 x 128 (or
/// blockN a multiple of 128 by 128) blocks: DeepSeek's and DeepGEMM's
/// block scaling. A stage is one 128-column block: a kRows x 128-byte tile
/// of xq and a 128 x 128-byte one of wq, 128-byte swizzled, straight from
/// the copy engine into the fp8 wgmma (m64n128k32, four a stage; no
/// widening). Each block's products sum apart in the tensor core and fold
/// into fp32 accumulators with the row's and the block's scales (the
/// promotion DeepSeek-V3 describes, which bounds the tensor core's short
/// sums to 128 products).
///
/// kGroups MMA warpgroups take 64 rows each (kRows = 64 kGroups): 2 for
/// many rows, 1 for a decode batch of at most 64 (half the tile of x,
/// room for more stages in flight). With gridDim.z = splits > 1, block z
/// sums the 128-column blocks [z B / splits, (z + 1) B / splits) of the B
/// and writes its partial sums, without bias, to out + z m n, which
/// daybreak_split_k_sum adds up: split-K, for grids too small to keep the
/// weight stream busy (a decode batch against a narrow weight).
template <int kGroups, int kStageCount> struct Fp8GemmShared {
  static constexpr int kStages = kStageCount;
  static constexpr int kRows = 64 * kGroups;
  static constexpr int kXBytes = kRows * 128;
  static constexpr int kTileBytes = 128 * 128;
  static constexpr int kStageBytes = kXBytes + kTileBytes;
  static constexpr int kBytes = 1024 + kStages * kStageBytes + 16 * kStages;
  static_assert(kStageBytes % 1024 == 0, "swizzled tiles: 1024-byte aligned");
  static_assert(kBytes <= 227 * 1024, "past the shared memory of a block");
};

template <int kGroups, int kStages>
__device__ __forceinline__ void
warpgroupFp8Gemm(const TensorMap &xMap, const TensorMap &wMap,
                 const float *xScales, const Weight &w, Weight bias, int64_t m,
                 int64_t n, int64_t k, float *out,
                 const WgGroups &groups = {nullptr, nullptr, nullptr}) {
  using S = Fp8GemmShared<kGroups, kStages>;
  // The block's first rows of x and w, its rows that exist, and its
  // expert (0 for a dense GEMM), as warpgroupGemm.
  int64_t xRow = int64_t(blockIdx.y) * S::kRows, expert = 0;
  int64_t rows = m - xRow < S::kRows ? m - xRow : S::kRows;
  const int32_t *dest = nullptr;
  if (groups.tiles) {
    if (int64_t(blockIdx.y) >= int64_t(*groups.tileCount))
      return;
    const int4 tile = groups.tiles[blockIdx.y];
    expert = tile.x;
    xRow = tile.y;
    rows = tile.z;
    dest = groups.order + tile.y;
  }
  uint8_t *base =
      wgGemmShared + ((1024 - (sharedAddress(wgGemmShared) & 1023)) & 1023);
  uint64_t *full =
      reinterpret_cast<uint64_t *>(base + S::kStages * S::kStageBytes);
  uint64_t *empty = full + S::kStages;
  const int warpgroup = threadIdx.x / 128;
  const int lane = threadIdx.x & 31;
  const int64_t n0 = int64_t(blockIdx.x) * 128;
  // This block's share of the 128-column blocks of K (split-K), and where
  // its sums go: a split's partials carry no bias.
  const int kBlocks = int((k + 127) / 128);
  const int first = int(int64_t(kBlocks) * blockIdx.z / gridDim.z);
  const int blocks =
      int(int64_t(kBlocks) * (blockIdx.z + 1) / gridDim.z) - first;
  if (gridDim.z > 1) {
    out += int64_t(blockIdx.z) * m * n;
    bias.data = nullptr;
  }
  // The MMA warpgroups with rows to compute; the others leave at once.
  const int active =
      int(rows + 63) / 64 < kGroups ? int(rows + 63) / 64 : kGroups;
  if (threadIdx.x == 0) {
    for (int s = 0; s < S::kStages; ++s) {
      barrierInit(&full[s], 1);
      barrierInit(&empty[s], 4 * active); // lane 0 of each MMA warp
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();
  if (warpgroup > active)
    return;

  if (warpgroup == 0) {
    asm volatile("setmaxnreg.dec.sync.aligned.u32 40;");
    if (threadIdx.x == 0)
      for (int s = 0; s < blocks; ++s) {
        const int slot = s % S::kStages;
        barrierWait(&empty[slot], ((s / S::kStages) & 1) ^ 1);
        uint8_t *stage = base + slot * S::kStageBytes;
        barrierExpectBytes(&full[slot], S::kStageBytes);
        copyTile(stage, xMap, &full[slot], (first + s) * 128, int32_t(xRow));
        copyTile(stage + S::kXBytes, wMap, &full[slot], (first + s) * 128,
                 int32_t(expert * n + n0));
      }
    return;
  }
  asm volatile("setmaxnreg.inc.sync.aligned.u32 232;");
  const int wg = warpgroup - 1;
  const int warp = (threadIdx.x / 32) & 3, g = lane >> 2, t = lane & 3;
  // This thread's two rows of the tile (wgmma's order: acc[4 j + 2 h + c]
  // is row 16 warp + g + 8 h of the warpgroup's 64, column 8 j + 2 t + c).
  const int r0 = wg * 64 + warp * 16 + g, r1 = r0 + 8;
  // Scales from this split's first block on.
  const float *scale0 =
      r0 < rows ? xScales + (xRow + r0) * kBlocks + first : nullptr;
  const float *scale1 =
      r1 < rows ? xScales + (xRow + r1) * kBlocks + first : nullptr;
  const float *wScales =
      w.scales +
      (expert * ((n + w.blockN - 1) / w.blockN) + n0 / w.blockN) * kBlocks +
      first;
  float acc[64], part[64];
#pragma unroll
  for (int i = 0; i < 64; ++i)
    acc[i] = 0.0f;
  for (int s = 0; s < blocks; ++s) {
    const int slot = s % S::kStages;
    // The block's scales, loaded while its products run.
    const float sw = wScales[s];
    const float s0 = scale0 ? scale0[s] : 0.0f, s1 = scale1 ? scale1[s] : 0.0f;
    barrierWait(&full[slot], (s / S::kStages) & 1);
    uint8_t *stage = base + slot * S::kStageBytes;
    const uint64_t a = tileDescriptor(stage + wg * 64 * 128);
    const uint64_t b = tileDescriptor(stage + S::kXBytes);
    fenceAccumulators(part);
    wgmmaFence();
#pragma unroll
    for (int kk = 0; kk < 4; ++kk)
      wgmmaE4m3x128(part, a + 2 * kk, b + 2 * kk, kk == 0 ? 0u : 1u);
    wgmmaCommit();
    wgmmaWait<0>();
    fenceAccumulators(part);
    if (lane == 0)
      barrierArrive(&empty[slot]);
    const float f0 = s0 * sw, f1 = s1 * sw;
#pragma unroll
    for (int j = 0; j < 16; ++j) {
      acc[4 * j] = fmaf(part[4 * j], f0, acc[4 * j]);
      acc[4 * j + 1] = fmaf(part[4 * j + 1], f0, acc[4 * j + 1]);
      acc[4 * j + 2] = fmaf(part[4 * j + 2], f1, acc[4 * j + 2]);
      acc[4 * j + 3] = fmaf(part[4 * j + 3], f1, acc[4 * j + 3]);
    }
  }

  const bool pairs = n % 2 == 0;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int r = h ? r1 : r0;
    if (r >= rows)
      continue;
    float *o = out + (dest ? int64_t(dest[r]) : xRow + r) * n;
#pragma unroll
    for (int j = 0; j < 16; ++j) {
      const int64_t col = n0 + j * 8 + 2 * t;
      float v0 = acc[4 * j + 2 * h], v1 = acc[4 * j + 2 * h + 1];
      if (bias.data) {
        if (col < n)
          v0 += weightAt(bias, expert * n + col);
        if (col + 1 < n)
          v1 += weightAt(bias, expert * n + col + 1);
      }
      if (pairs && col + 1 < n) {
        *reinterpret_cast<float2 *>(o + col) = make_float2(v0, v1);
      } else {
        if (col < n)
          o[col] = v0;
        if (col + 1 < n)
          o[col + 1] = v1;
      }
    }
  }
}

} // namespace

/// The FP8 GEMM (CudaKernels::fp8Gemm): grid (ceil(n / 128), ceil(m /
/// kRows), splits), 128 (1 + kRows / 64) threads, Fp8GemmShared's bytes of
/// dynamic shared memory. xMap: the codes of x [m, k], box 128 x kRows,
/// 128-byte swizzled; xScales [m, ceil(k / 128)]; wMap: w's codes [n, k],
/// box 128 x 128. With splits > 1, out is the partials [splits, m, n]
/// (daybreak_split_k_sum). The compiler instantiates the template for the
/// tile lm-tile chose (plan-specialize-library-kernels); the two entries
/// below are the library's own, for launches that carry none.
template <int kRows, int kStages>
__global__ void __launch_bounds__(128 * (1 + kRows / 64), 1)
    daybreak_gemm_wg_fp8_t(const __grid_constant__ TensorMap xMap,
                           const __grid_constant__ TensorMap wMap,
                           const float *xScales, Weight w, Weight bias,
                           int64_t m, int64_t n, int64_t k, float *out) {
  static_assert(kRows == 64 || kRows == 128, "one or two MMA warpgroups");
  warpgroupFp8Gemm<kRows / 64, kStages>(xMap, wMap, xScales, w, bias, m, n, k,
                                        out);
}

extern "C" __global__ void __launch_bounds__(kWgThreads, 1)
    daybreak_gemm_wg_fp8(const __grid_constant__ TensorMap xMap,
                         const __grid_constant__ TensorMap wMap,
                         const float *xScales, Weight w, Weight bias, int64_t m,
                         int64_t n, int64_t k, float *out) {
  warpgroupFp8Gemm<2, 6>(xMap, wMap, xScales, w, bias, m, n, k, out);
}

extern "C" __global__ void __launch_bounds__(256, 1)
    daybreak_gemm_wg_fp8_rows64(const __grid_constant__ TensorMap xMap,
                                const __grid_constant__ TensorMap wMap,
                                const float *xScales, Weight w, Weight bias,
                                int64_t m, int64_t n, int64_t k, float *out) {
  warpgroupFp8Gemm<1, 9>(xMap, wMap, xScales, w, bias, m, n, k, out);
}

/// out[r, c] = sum over z < splits of partials[z, r, c] in order (+
/// bias[c]): the FP8 GEMM's split-K sums. Grid-stride, four values a
/// thread a step where n is a multiple of 4.
extern "C" __global__ void daybreak_split_k_sum(const float *partials,
                                                int32_t splits, int64_t m,
                                                int64_t n, Weight bias,
                                                float *out) {
  const int64_t total = m * n, stride = int64_t(gridDim.x) * blockDim.x;
  const int64_t first = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (n % 4 == 0) {
    for (int64_t i = first; i < total / 4; i += stride) {
      float4 v = reinterpret_cast<const float4 *>(partials)[i];
      for (int z = 1; z < splits; ++z) {
        const float4 p =
            reinterpret_cast<const float4 *>(partials + z * total)[i];
        v.x += p.x;
        v.y += p.y;
        v.z += p.z;
        v.w += p.w;
      }
      if (bias.data) {
        const int64_t c = (4 * i) % n;
        v.x += weightAt(bias, c);
        v.y += weightAt(bias, c + 1);
        v.z += weightAt(bias, c + 2);
        v.w += weightAt(bias, c + 3);
      }
      reinterpret_cast<float4 *>(out)[i] = v;
    }
    return;
  }
  for (int64_t i = first; i < total; i += stride) {
    float v = partials[i];
    for (int z = 1; z < splits; ++z)
      v += partials[z * total + i];
    out[i] = bias.data ? v + weightAt(bias, i % n) : v;
  }
}

/// The grouped expert FP8 GEMM (CudaKernels::fp8ExpertMatmul): grid
/// (ceil(n / 128), an upper bound on daybreak_expert_group's 128-row
/// tiles), as daybreak_expert_gemm_wg_*. xMap: the gathered rows' codes
/// (daybreak_quant_fp8 with `order`), xScales theirs; wMap: all experts'
/// codes as one [experts x n, k] matrix.
extern "C" __global__ void __launch_bounds__(kWgThreads, 1)
    daybreak_expert_gemm_wg_fp8(const __grid_constant__ TensorMap xMap,
                                const __grid_constant__ TensorMap wMap,
                                const float *xScales, Weight w, Weight bias,
                                int64_t n, int64_t k, const int32_t *order,
                                const int4 *tiles, const int32_t *tileCount,
                                float *out) {
  warpgroupFp8Gemm<2, 6>(xMap, wMap, xScales, w, bias, 0, n, k, out,
                         WgGroups{order, tiles, tileCount});
}

/// x [m, k] to e4m3 codes with one power-of-two scale a row and 128
/// columns (the FP8 GEMMs' x): scale 2^ceil(log2(max(amax, 1e-4) / 448)),
/// as the FP8 caches choose theirs, codes RNE of x / scale, saturating
/// (numerics::floatToE4m3). k a multiple of 16; codes [m, k], scales [m,
/// ceil(k / 128)]. With `order` (daybreak_expert_group's), output row i
/// quantizes the x row of pair order[i] (x per slot: that row, else pair /
/// slots) for the counts[1] rows grouped. With `dequantized`, each value
/// is written there as the float code x scale instead ([m, k]; codes and
/// scales unused): x as the FP8 GEMM sees it, for kernels that take fp32.
/// A warp a (row, block) task, four values a lane.
extern "C" __global__ void
daybreak_quant_fp8(const float *x, int64_t m, int64_t k, uint8_t *codes,
                   float *scales, const int32_t *order, const int32_t *counts,
                   int32_t perSlotInput, int64_t slots, float *dequantized) {
  const int lane = threadIdx.x & 31;
  const int64_t blocks = (k + 127) / 128;
  const int64_t warps = int64_t(gridDim.x) * (blockDim.x / 32);
  if (order)
    m = counts[1];
  for (int64_t task =
           int64_t(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32;
       task < m * blocks; task += warps) {
    const int64_t row = task / blocks, col = (task % blocks) * 128 + 4 * lane;
    int64_t source = row;
    if (order) {
      const int64_t pair = order[row];
      source = perSlotInput ? pair : pair / slots;
    }
    float4 v = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    if (col < k)
      v = *reinterpret_cast<const float4 *>(x + source * k + col);
    float amax = warpMax(
        fmaxf(fmaxf(fabsf(v.x), fabsf(v.y)), fmaxf(fabsf(v.z), fabsf(v.w))));
    const int exponent = fp8ScaleExponent(amax);
    const float scale = ldexpf(1.0f, exponent),
                inverse = ldexpf(1.0f, -exponent);
    if (lane == 0 && !dequantized)
      scales[task] = scale;
    if (col < k) {
      uint16_t lo, hi;
      asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;"
          : "=h"(lo)
          : "f"(v.y * inverse), "f"(v.x * inverse));
      asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;"
          : "=h"(hi)
          : "f"(v.w * inverse), "f"(v.z * inverse));
      if (dequantized) {
        float a, b, c, d;
        e4m3x2ToFloat(lo, a, b);
        e4m3x2ToFloat(hi, c, d);
        *reinterpret_cast<float4 *>(dequantized + row * k + col) =
            make_float4(a * scale, b * scale, c * scale, d * scale);
      } else {
        *reinterpret_cast<uint32_t *>(codes + row * k + col) =
            uint32_t(lo) | (uint32_t(hi) << 16);
      }
    }
  }
}

/// The warpgroup GEMMs (CudaKernels::warpgroupGemm): grid (ceil(n / kN),
/// ceil(m / 128)), 384 threads, WgGemmShared's bytes of dynamic shared
/// memory. xMap: x [m, k] bf16, box 64 x 128, 128-byte swizzled. wMap:
/// bf16 w [n, k], box 64 x 256, 128-byte swizzled; e4m3 codes [n, k], box
/// 64 x 128, unswizzled.
extern "C" __global__ void __launch_bounds__(kWgThreads, 1)
    daybreak_gemm_wg_bf16(const __grid_constant__ TensorMap xMap,
                          const __grid_constant__ TensorMap wMap, Weight w,
                          Weight bias, int64_t m, int64_t n, int64_t k,
                          float *out) {
  warpgroupGemm<256, kWeightBF16>(xMap, wMap, w, bias, m, n, k, out);
}

extern "C" __global__ void __launch_bounds__(kWgThreads, 1)
    daybreak_gemm_wg_e4m3(const __grid_constant__ TensorMap xMap,
                          const __grid_constant__ TensorMap wMap, Weight w,
                          Weight bias, int64_t m, int64_t n, int64_t k,
                          float *out) {
  warpgroupGemm<128, kWeightE4M3>(xMap, wMap, w, bias, m, n, k, out);
}

/// The exact forms (the default precision): as above, but xMap reads x's
/// three bf16 parts [3 m, k] (daybreak_split_bf16x3), box 64 x 128, and
/// the bf16 weight's box is 64 x 128 too (kN = 128: three stages of 48 KB
/// of x and 16 of w fit where kN = 256 would leave two).
extern "C" __global__ void __launch_bounds__(kWgThreads, 1)
    daybreak_gemm_wg_bf16_x3(const __grid_constant__ TensorMap xMap,
                             const __grid_constant__ TensorMap wMap, Weight w,
                             Weight bias, int64_t m, int64_t n, int64_t k,
                             float *out) {
  warpgroupGemm<128, kWeightBF16, 3>(xMap, wMap, w, bias, m, n, k, out);
}

/// The exact bf16 form for m up to 64 (grid (ceil(n / 128), 1)): xMap's
/// box is 64 x 64, and each MMA warpgroup multiplies the 64 rows by half
/// of the block's 128 columns (m64n64k16).
extern "C" __global__ void __launch_bounds__(kWgThreads, 1)
    daybreak_gemm_wg_bf16_x3_narrow(const __grid_constant__ TensorMap xMap,
                                    const __grid_constant__ TensorMap wMap,
                                    Weight w, Weight bias, int64_t m, int64_t n,
                                    int64_t k, float *out) {
  warpgroupGemm<128, kWeightBF16, 3, true>(xMap, wMap, w, bias, m, n, k, out);
}

extern "C" __global__ void __launch_bounds__(kWgThreads, 1)
    daybreak_gemm_wg_e4m3_x3(const __grid_constant__ TensorMap xMap,
                             const __grid_constant__ TensorMap wMap, Weight w,
                             Weight bias, int64_t m, int64_t n, int64_t k,
                             float *out) {
  warpgroupGemm<128, kWeightE4M3, 3>(xMap, wMap, w, bias, m, n, k, out);
}

/// The grouped expert GEMMs (CudaKernels::warpgroupExpertMatmul): grid
/// (ceil(n / kN), an upper bound on the tiles; a block past the tile count
/// returns), as the dense ones. xMap: the gathered x [rows, k] bf16
/// (daybreak_gather_bf16); wMap: all experts' w as one [experts x n, k]
/// matrix; out: [rows of the pairs, n], row order[i] for gathered row i.
extern "C" __global__ void __launch_bounds__(kWgThreads, 1)
    daybreak_expert_gemm_wg_bf16(const __grid_constant__ TensorMap xMap,
                                 const __grid_constant__ TensorMap wMap,
                                 Weight w, Weight bias, int64_t n, int64_t k,
                                 const int32_t *order, const int4 *tiles,
                                 const int32_t *tileCount, float *out) {
  warpgroupGemm<256, kWeightBF16>(xMap, wMap, w, bias, 0, n, k, out,
                                  WgGroups{order, tiles, tileCount});
}

extern "C" __global__ void __launch_bounds__(kWgThreads, 1)
    daybreak_expert_gemm_wg_e4m3(const __grid_constant__ TensorMap xMap,
                                 const __grid_constant__ TensorMap wMap,
                                 Weight w, Weight bias, int64_t n, int64_t k,
                                 const int32_t *order, const int4 *tiles,
                                 const int32_t *tileCount, float *out) {
  warpgroupGemm<128, kWeightE4M3>(xMap, wMap, w, bias, 0, n, k, out,
                                  WgGroups{order, tiles, tileCount});
}

/// The grouped MXFP4 expert GEMMs (CudaKernels::mxfp4WarpgroupMatmul): as
/// daybreak_expert_gemm_wg_e4m3, but wMap reads the packed E2M1 values of
/// all experts as one [experts x n, k / 2] byte matrix (box 32 x 128,
/// unswizzled) and `w.scales` points at their E8M0 bytes [experts x n, k /
/// 32]; each 32 values are widened times their scale to bf16 in shared
/// memory (exact). xMap's box is 16 rows (a tile copies the boxes of its
/// rows). _x3: xMap reads the gathered x's three bf16 parts [3 rows, k]
/// (daybreak_gather_bf16 with parts 3; part p from row p rows),
/// every product fp32 x times the weight: the exact default's.
extern "C" __global__ void __launch_bounds__(kWgThreads, 1)
    daybreak_expert_gemm_wg_e2m1(const __grid_constant__ TensorMap xMap,
                                 const __grid_constant__ TensorMap wMap,
                                 Weight w, Weight bias, int64_t rows, int64_t n,
                                 int64_t k, const int32_t *order,
                                 const int4 *tiles, const int32_t *tileCount,
                                 float *out) {
  warpgroupGemm<128, kWeightE2M1>(xMap, wMap, w, bias, rows, n, k, out,
                                  WgGroups{order, tiles, tileCount});
}

extern "C" __global__ void __launch_bounds__(kWgThreads, 1)
    daybreak_expert_gemm_wg_e2m1_x3(const __grid_constant__ TensorMap xMap,
                                    const __grid_constant__ TensorMap wMap,
                                    Weight w, Weight bias, int64_t rows,
                                    int64_t n, int64_t k, const int32_t *order,
                                    const int4 *tiles, const int32_t *tileCount,
                                    float *out) {
  warpgroupGemm<128, kWeightE2M1, 3>(xMap, wMap, w, bias, rows, n, k, out,
                                     WgGroups{order, tiles, tileCount});
}

/// The x of the grouped expert GEMMs, for the counts[1] rows
/// daybreak_expert_group ordered: out row i = bf16(x row of order[i])
/// (nearest even) as bf16 codes (parts 1), or its three bf16 parts
/// (parts 3: splitX, as daybreak_split_bf16x3) at rows i, partRows + i and
/// 2 partRows + i. A pair p reads x row p (x per slot) or p / slots. k a
/// multiple of 8, x and out 16-byte aligned. Grid (any, any), block 128:
/// rows stride gridDim.y, eight values a thread a step.
extern "C" __global__ void
daybreak_gather_bf16(const float *x, int32_t perSlotInput, int64_t slots,
                     const int32_t *order, const int32_t *counts, int64_t k,
                     int32_t parts, int64_t partRows, uint16_t *out) {
  const int64_t rows = counts[1], units = k / 8;
  for (int64_t r = blockIdx.y; r < rows; r += gridDim.y) {
    const int64_t pair = order[r];
    const float4 *src = reinterpret_cast<const float4 *>(
        x + (perSlotInput ? pair : pair / slots) * k);
    uint4 *dst = reinterpret_cast<uint4 *>(out + r * k);
    for (int64_t u = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; u < units;
         u += int64_t(gridDim.x) * blockDim.x) {
      float4 a = src[2 * u], b = src[2 * u + 1];
      if (parts == 1) {
        dst[u] = make_uint4(
            roundX<kWeightBF16>(a.x, a.y), roundX<kWeightBF16>(a.z, a.w),
            roundX<kWeightBF16>(b.x, b.y), roundX<kWeightBF16>(b.z, b.w));
        continue;
      }
      uint32_t p[4][3];
      splitX<kWeightBF16>(a.x, a.y, p[0]);
      splitX<kWeightBF16>(a.z, a.w, p[1]);
      splitX<kWeightBF16>(b.x, b.y, p[2]);
      splitX<kWeightBF16>(b.z, b.w, p[3]);
#pragma unroll
      for (int part = 0; part < 3; ++part)
        dst[part * partRows * units + u] =
            make_uint4(p[0][part], p[1][part], p[2][part], p[3][part]);
    }
  }
}

/// out[i] = bf16(x[i]) (nearest even) as bf16 codes, the x of the warpgroup
/// GEMMs; n a multiple of 8, x and out 16-byte aligned. Grid-stride, eight
/// values a thread a step.
extern "C" __global__ void daybreak_to_bf16(const float *x, int64_t n,
                                            uint16_t *out) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n / 8;
       i += stride) {
    float4 a = reinterpret_cast<const float4 *>(x)[2 * i];
    float4 b = reinterpret_cast<const float4 *>(x)[2 * i + 1];
    reinterpret_cast<uint4 *>(out)[i] = make_uint4(
        roundX<kWeightBF16>(a.x, a.y), roundX<kWeightBF16>(a.z, a.w),
        roundX<kWeightBF16>(b.x, b.y), roundX<kWeightBF16>(b.z, b.w));
  }
}

/// out[p n + i] = part p of x[i] (splitX: the top 8 significand bits, then
/// the next 8 of what is left, then the rest, each a bf16 by truncation, so
/// the three sum to x exactly), the x of the exact warpgroup GEMMs; n a
/// multiple of 8, x and out 16-byte aligned. Grid-stride, eight values a
/// thread a step.
extern "C" __global__ void daybreak_split_bf16x3(const float *x, int64_t n,
                                                 uint16_t *out) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n / 8;
       i += stride) {
    float4 a = reinterpret_cast<const float4 *>(x)[2 * i];
    float4 b = reinterpret_cast<const float4 *>(x)[2 * i + 1];
    uint32_t p[4][3];
    splitX<kWeightBF16>(a.x, a.y, p[0]);
    splitX<kWeightBF16>(a.z, a.w, p[1]);
    splitX<kWeightBF16>(b.x, b.y, p[2]);
    splitX<kWeightBF16>(b.z, b.w, p[3]);
#pragma unroll
    for (int part = 0; part < 3; ++part)
      reinterpret_cast<uint4 *>(out + part * n)[i] =
          make_uint4(p[0][part], p[1][part], p[2][part], p[3][part]);
  }
}
