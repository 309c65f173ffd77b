//===- KernelParams.h - Parameter structs every device shares ---*- C++ -*-===//
//
// The parameters of kernels whose semantics both devices implement (cache
// formats, RoPE, routing), device-neutral so that neither device includes
// the other's headers. Plain structs; thread-safe to share.
//
//===----------------------------------------------------------------------===//

#ifndef DAYBREAK_RUNTIME_CORE_KERNELPARAMS_H
#define DAYBREAK_RUNTIME_CORE_KERNELPARAMS_H

#include <cstdint>

namespace daybreak::runtime {

/// How a cache stores each token's row of `width` logical values.
enum class CacheFormat {
  F32,
  BF16,
  /// DeepSeek's FP8 latent row: the first width - tailDim values as e4m3 in
  /// tiles of scaleBlock with one fp32 power-of-two scale per tile
  /// (s = 2^ceil(log2(max(amax, 1e-4) / 448))), then tailDim values as bf16.
  /// bytesPerRow = (width - tailDim) + 4 * (width - tailDim) / scaleBlock +
  /// 2 * tailDim.
  Fp8Scaled,
};

/// `--precision=fp8`: whether a matmul on an e4m3 weight of these scale
/// blocks takes its input quantized to FP8 as DeepSeek's and DeepGEMM's
/// GEMMs do: x per row and 128 columns to e4m3 with a power-of-two scale
/// (the caches' rule above, from max(amax, 1e-4) / 448), RNE, saturating.
/// Weights of 128-column blocks and a multiple of 128 rows, which the FP8
/// GEMMs fold a block at a time (DeepSeek's 128 x 128).
inline bool fp8InputsApply(int64_t blockN, int64_t blockK) {
  return blockK == 128 && blockN > 0 && blockN % 128 == 0;
}

/// Whether the DSA indexer's tensor-core kernel scores keys of this cache
/// for `heads` heads (`daybreak-run --attention=tensor-cores`): bf16 rows,
/// or FP8 rows with one scale a row and no tail, of 16 to 128 values (a
/// multiple of 16); 1 to 128 heads. It rounds q to bf16 (the keys widen
/// exactly), so the CPU device, its oracle, rounds q wherever this holds.
inline bool indexerTensorCoresApply(CacheFormat format, int64_t width,
                                    int64_t tailDim, int64_t scaleBlock,
                                    int64_t heads) {
  bool rows =
      format == CacheFormat::BF16 ||
      (format == CacheFormat::Fp8Scaled && tailDim == 0 && scaleBlock == width);
  return rows && width >= 16 && width <= 128 && width % 16 == 0 && heads >= 1 &&
         heads <= 128;
}

/// Whether sparse MLA runs on the tensor cores over this cache
/// (`--attention=tensor-cores`; the CUDA device adds its alignment rules):
/// bf16 rows, or FP8 rows whose quantized part and scale blocks are
/// multiples of 8 values, of at most 576 values and a value dim of at most
/// 512, both multiples of 16. Those kernels round q and the probabilities
/// to bf16 (the rows widen exactly), so the CPU device, their oracle, rounds
/// them wherever this holds; an f32 cache stays on the exact kernels.
inline bool sparseMlaTensorCoresApply(CacheFormat format, int64_t width,
                                      int64_t tailDim, int64_t scaleBlock,
                                      int64_t valueDim) {
  int64_t quantized = width - tailDim;
  bool rows = format == CacheFormat::BF16 ||
              (format == CacheFormat::Fp8Scaled && quantized % 8 == 0 &&
               (quantized == 0 || (scaleBlock > 0 && scaleBlock % 8 == 0)));
  return rows && width > 0 && width % 16 == 0 && width <= 576 && valueDim > 0 &&
         valueDim % 16 == 0 && valueDim <= 512 && valueDim <= width;
}

/// RoPE: the rotated slice of each row and the frequencies (YaRN as
/// DeepSeek-V3 / transformers define it).
struct RopeParams {
  bool interleaved = false; ///< pairs (2i, 2i+1), else (i, i + dim/2)
  int64_t offset = 0;       ///< rotated slice [offset, offset + dim) of a row
  int64_t dim = 0;
  double theta = 10000.0;
  bool yarn = false;
  double factor = 1.0;
  int64_t originalMaxPositions = 4096;
  double betaFast = 32.0, betaSlow = 1.0;
  double attentionFactor = 1.0; ///< multiplies cos and sin
  bool truncate = true;
};

/// Where a rope kernel's rows lie: row r of token t starts `token * t +
/// row * r` elements in. Dense rows and column views of [T, ..., D] rows
/// are `dense(rowsPerToken, stride)`; a token's row of heads (lm.rope's
/// head_dim over a column view [T, H * D]) is {the view's row stride, D}.
struct RopeRows {
  int64_t token = 0, row = 0;

  static RopeRows dense(int64_t rowsPerToken, int64_t stride) {
    return {rowsPerToken * stride, stride};
  }
};

/// A `cache_write` launch's prologue (lm.cache_write's norm and rope):
/// each token's row is normalised over [0, normDim), then rotated over
/// rope's [offset, offset + dim), then stored.
struct CacheWritePrologue {
  enum class Norm { None, Rms, Layer };
  Norm norm = Norm::None;
  int64_t normDim = 0;
  double eps = 0.0;
  bool rope = false;
  RopeParams ropeParams;
  /// Columns of a head: RoPE rotates its slice of each (0: the row is one).
  int64_t ropeHeadDim = 0;

  bool any() const { return norm != Norm::None || rope; }
};

/// How lm.moe_route scores experts (the ones the devices run).
enum class RouteScore {
  /// DeepSeek noaux_tc: sigmoid scores, biased selection, group limit.
  Sigmoid,
  /// gpt-oss: top-k of the (biased) logits, softmax over the k picked.
  SoftmaxTopK,
};

/// lm.moe_route's parameters (numGroups, topKGroups and renormalize serve
/// `sigmoid` only; softmax_topk's weights always sum to scalingFactor).
struct RouteParams {
  RouteScore score = RouteScore::Sigmoid;
  int64_t topK = 1, numGroups = 1, topKGroups = 1;
  bool renormalize = true;
  double scalingFactor = 1.0;
  /// Slots after each token's top_k for the shared experts stacked after
  /// the E routed ones: ids E, E + 1, ..., weight 1.
  int64_t sharedExperts = 0;
};

/// What the MXFP4 online route's conversion (mxfp4_to_fp8_experts,
/// mxfp4_to_fp8_all_experts) does in a launch.
enum class Mxfp4ConvertMode {
  /// The distinct experts the indices select, in increasing id order, into
  /// slots 0, 1, ..., and each index's slot.
  Selected = 0,
  /// Every expert e into slot e; no indices.
  All = 1,
  /// Only each index's slot, the index itself (every expert already in its
  /// own slot); ids outside [0, E) as -1.
  SlotsOnly = 2,
};

/// The mode of a step of `tokens` tokens for a conversion that takes every
/// expert from `allFromTokens` tokens (0: never).
inline Mxfp4ConvertMode mxfp4SelectionMode(int64_t tokens,
                                           int64_t allFromTokens) {
  return allFromTokens > 0 && tokens >= allFromTokens
             ? Mxfp4ConvertMode::SlotsOnly
             : Mxfp4ConvertMode::Selected;
}

} // namespace daybreak::runtime

#endif // DAYBREAK_RUNTIME_CORE_KERNELPARAMS_H
