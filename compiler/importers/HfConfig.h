//===- HfConfig.h - Hugging Face config.json for supported models -*- C++
//-*-===//
//
// Parses and validates a checkpoint's `config.json` into a plain struct, so
// the importer never reads JSON again and every inconsistent value is
// reported once, naming the field and the file: `deepseek_v32`,
// `gpt_oss` and `kimi_linear`. All functions are pure and thread-safe.
//
//===----------------------------------------------------------------------===//

#ifndef DAYBREAK_COMPILER_IMPORTERS_HFCONFIG_H
#define DAYBREAK_COMPILER_IMPORTERS_HFCONFIG_H

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace daybreak::importers {

/// YaRN RoPE scaling, HF field names in the comments.
struct YarnConfig {
  double factor;                // factor
  double mscale;                // mscale (default 1)
  double mscaleAllDim;          // mscale_all_dim (default 0)
  double betaFast;              // beta_fast (default 32)
  double betaSlow;              // beta_slow (default 1)
  int64_t originalMaxPositions; // original_max_position_embeddings
  /// truncate (default true): floor/ceil the ramp bounds; gpt-oss false.
  bool truncate = true;
  /// attention_factor, when given: multiplies cos and sin instead of the
  /// factor derived from mscale (transformers' _compute_yarn_parameters).
  std::optional<double> attentionFactor;
};

/// The fields of a `deepseek_v32` config.json the compiler uses.
struct DeepseekV32Config {
  int64_t vocabSize, hiddenSize, intermediateSize, moeIntermediateSize,
      numLayers, firstKDenseReplace, numHeads, qLoraRank, kvLoraRank,
      qkNopeHeadDim, qkRopeHeadDim, vHeadDim, numRoutedExperts,
      numSharedExperts, numExpertsPerTok, numGroups, topkGroup, indexNumHeads,
      indexHeadDim, indexTopk, maxPositionEmbeddings;
  double rmsNormEps, ropeTheta, routedScalingFactor;
  bool normTopkProb, tieWordEmbeddings;
  /// The tokens that end generation, as eos_token_id lists them (an id or
  /// a list; empty: none given).
  std::vector<int64_t> eosTokenIds;
  /// rope_scaling / rope_parameters with type|rope_type "yarn".
  std::optional<YarnConfig> yarn;
  /// quantization_config {quant_method "fp8", weight_block_size}.
  std::optional<std::array<int64_t, 2>> fp8BlockSize;

  /// MLA softmax scale: (nope+rope)^-0.5 * mscale^2 where
  /// mscale = 0.1*mscale_all_dim*ln(factor)+1 when yarn and
  /// mscale_all_dim != 0 (HF yarn_apply_mscale).
  double softmaxScale() const;
};

/// Parses `jsonText`; `path` only names the file in error messages.
llvm::Expected<DeepseekV32Config>
parseDeepseekV32Config(llvm::StringRef jsonText, llvm::StringRef path);

/// The fields of a `gpt_oss` config.json the compiler uses (transformers'
/// GptOssConfig; its defaults where transformers has one).
struct GptOssConfig {
  int64_t vocabSize, hiddenSize, intermediateSize, numLayers, numHeads,
      numKeyValueHeads, headDim, numLocalExperts, numExpertsPerTok,
      maxPositionEmbeddings;
  /// sliding_window: keys a sliding layer's query sees, itself included
  /// (0 when no layer slides).
  int64_t slidingWindow = 0;
  double rmsNormEps, ropeTheta;
  /// swiglu_limit (7) and swiglu_alpha (1.702) of the clamped SwiGLU.
  double swigluLimit = 7.0, swigluAlpha = 1.702;
  /// attention_bias: q/k/v/o projections carry biases (default true).
  bool attentionBias = true;
  bool tieWordEmbeddings = false;
  /// layer_types: true for "sliding_attention", false for "full_attention"
  /// (transformers' default when absent: even layers slide).
  std::vector<bool> slidingLayers;
  std::vector<int64_t> eosTokenIds;
  std::optional<YarnConfig> yarn;
  /// quantization_config {quant_method "mxfp4"}: routed experts stored as
  /// `*_blocks` / `*_scales`; else dequantised bf16 `gate_up_proj` [E, H,
  /// 2I] and `down_proj` [E, I, H].
  bool mxfp4Experts = false;
  /// quantization_config.modules_to_not_convert, as listed.
  std::vector<std::string> modulesToNotConvert;
};

llvm::Expected<GptOssConfig> parseGptOssConfig(llvm::StringRef jsonText,
                                               llvm::StringRef path);

/// The fields of a `kimi_linear` config.json the compiler uses
/// (transformers' KimiLinearConfig and vLLM's loader; models.md section 2).
/// HF's aliases are accepted where the hub spells a field both ways.
struct KimiLinearConfig {
  int64_t vocabSize, hiddenSize, numLayers, maxPositionEmbeddings;
  /// The dense MLP of the first first_k_dense_replace layers.
  int64_t intermediateSize, firstKDenseReplace;
  /// MLA (the full-attention layers): q_lora_rank 0 when null (a plain
  /// q_proj); always NoPE (mla_use_nope), the rope-width part of q and k
  /// still scored.
  int64_t numHeads, qLoraRank, kvLoraRank, qkNopeHeadDim, qkRopeHeadDim,
      vHeadDim;
  /// MoE: num_experts (num_local_experts), num_experts_per_token
  /// (num_experts_per_tok), num_shared_experts (n_shared_experts),
  /// moe_intermediate_size; sigmoid routing with e_score_correction_bias,
  /// num_expert_group (n_group) groups of which topk_group are kept.
  int64_t numExperts, numExpertsPerToken, numSharedExperts, moeIntermediateSize,
      numExpertGroups, topkGroup;
  double routedScalingFactor;
  /// moe_renormalize (norm_topk_prob).
  bool moeRenormalize;
  /// linear_attn_config: KDA heads of kdaHeadDim keys and values, the
  /// short convolution's width.
  int64_t kdaHeads, kdaHeadDim, shortConvKernel;
  /// Per layer (0-based): true for a KDA layer, false for MLA
  /// (linear_attn_config.kda_layers / full_attn_layers are 1-based; absent,
  /// layer i is MLA iff (i + 1) % 4 == 0, as transformers).
  std::vector<bool> kdaLayers;
  double rmsNormEps;
  bool tieWordEmbeddings = false;
  std::vector<int64_t> eosTokenIds;

  /// MLA softmax scale: (qk_nope + qk_rope)^-0.5 (no YaRN).
  double softmaxScale() const;
};

llvm::Expected<KimiLinearConfig> parseKimiLinearConfig(llvm::StringRef jsonText,
                                                       llvm::StringRef path);

/// GLM-5.3 (`model_type: glm5_next`): the text model of a nested config
/// (`text_config`) or a flat text-only one, with the fields transformers
/// 5.24 reads (../shared/reference/glm5_next.md section 1; the ones it does
/// not read, such as first_k_dense_replace and linear_attn_config's layer
/// lists, are not read here either).
struct Glm5NextConfig {
  int64_t vocabSize, hiddenSize, numLayers, maxPositionEmbeddings;
  /// Per layer: true for KDA (`linear_attention`), false for NoPE MLA with
  /// a DSA indexer (`deepseek_sparse_attention`, `full_attention` or
  /// `indexed_attention`); absent, the DSA layers are those with
  /// i % 4 == 3.
  std::vector<bool> kdaLayers;
  /// Per layer: true for a dense MLP, false for MoE (`mlp_layer_types`;
  /// absent, the first min(3, layers) are dense).
  std::vector<bool> denseMlp;
  /// Per layer: true where a DSA layer reuses the selection of the full
  /// DSA layer just before it (`indexer_types` "shared", or an
  /// `index_topk_pattern` "S"); transformers hands a selection on only to
  /// the immediately following layer, so that is all that is accepted.
  std::vector<bool> sharedIndexer;
  /// KDA (linear_attn_config): heads of kdaHeadDim keys and values, the
  /// short convolution's width, and the forget gate's lower bound
  /// (gate_lower_bound; unset: the unbounded softplus gate).
  int64_t kdaHeads, kdaHeadDim, shortConvKernel;
  std::optional<double> gateLowerBound;
  /// MLA: num_attention_heads (= num_key_value_heads), the q LoRA rank
  /// (mandatory), kv_lora_rank, qk_nope_head_dim, v_head_dim; no rope
  /// (qk_rope_head_dim must be 0).
  int64_t numHeads, qLoraRank, kvLoraRank, qkNopeHeadDim, vHeadDim;
  /// DSA indexer: index_n_heads of index_head_dim, a budget of index_topk
  /// tokens taken as index_topk / index_kpool pools of index_kpool tokens,
  /// plus the incomplete tail pool (index_kpool_always_select_tail must be
  /// true: with false transformers attends to future tokens).
  int64_t indexHeads, indexHeadDim, indexTopk, indexKpool;
  /// mHC: hc_mult residual streams, hc_eps, hc_sinkhorn_iters.
  int64_t hcMult, hcSinkhornIters;
  double hcEps;
  /// MoE: n_routed_experts, num_experts_per_tok, n_shared_experts, the
  /// expert width moe_intermediate_size (the shared expert's is times
  /// n_shared_experts); sigmoid routing with a correction bias, n_group
  /// groups of which topk_group are kept; the dense MLP's
  /// intermediate_size.
  int64_t numExperts, numExpertsPerToken, numSharedExperts, moeIntermediateSize,
      numExpertGroups, topkGroup, intermediateSize;
  double routedScalingFactor;
  bool moeRenormalize;
  /// swiglu_limit: the clamp of every text SwiGLU (unset: none).
  std::optional<double> swigluLimit;
  double rmsNormEps;
  bool tieWordEmbeddings = false;
  std::vector<int64_t> eosTokenIds;
  /// quantization_config's FP8 weight_block_size (at the top level of the
  /// hub config), when the checkpoint is FP8.
  std::optional<std::array<int64_t, 2>> fp8BlockSize;

  /// MLA softmax scale: qk_nope_head_dim^-0.5.
  double softmaxScale() const;
};

llvm::Expected<Glm5NextConfig> parseGlm5NextConfig(llvm::StringRef jsonText,
                                                   llvm::StringRef path);

/// Reads <dir>/config.json, dispatches on model_type; anything but
/// "deepseek_v32" is an error "unsupported model_type 'X' in <path>
/// (supported: deepseek_v32)".
llvm::Expected<DeepseekV32Config> loadConfig(llvm::StringRef dir);

} // namespace daybreak::importers

#endif // DAYBREAK_COMPILER_IMPORTERS_HFCONFIG_H
