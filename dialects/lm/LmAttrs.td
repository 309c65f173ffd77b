//===- LmAttrs.td - Enums and attributes of the lm dialect -*- tablegen -*-===//

#ifndef DAYBREAK_LM_ATTRS_TD
#define DAYBREAK_LM_ATTRS_TD

include "dialects/lm/LmBase.td"
include "mlir/IR/EnumAttr.td"
include "mlir/IR/BuiltinAttributeInterfaces.td"

//===----------------------------------------------------------------------===//
// Enums
//===----------------------------------------------------------------------===//

def Lm_RopeStyle : I32EnumAttr<"RopeStyle", "which dims a RoPE rotation pairs", [
    I32EnumAttrCase<"Interleaved", 0, "interleaved">,
    I32EnumAttrCase<"HalfSplit", 1, "half_split">]> {
  let cppNamespace = "::daybreak::lm";
  let genSpecializedAttr = 0;
}
def Lm_RopeStyleAttr : EnumAttr<Lm_Dialect, Lm_RopeStyle, "rope_style">;

def Lm_NormKind : I32EnumAttr<"NormKind", "which normalisation a fused prologue applies", [
    I32EnumAttrCase<"Rms", 0, "rms">,
    I32EnumAttrCase<"Layer", 1, "layer">]> {
  let cppNamespace = "::daybreak::lm";
  let genSpecializedAttr = 0;
}
def Lm_NormKindAttr : EnumAttr<Lm_Dialect, Lm_NormKind, "norm_kind">;

def Lm_MaskKind : I32EnumAttr<"MaskKind", "which keys a query may see", [
    I32EnumAttrCase<"Causal", 0, "causal">,
    I32EnumAttrCase<"SlidingWindow", 1, "sliding_window">,
    I32EnumAttrCase<"Bidirectional", 2, "bidirectional">]> {
  let cppNamespace = "::daybreak::lm";
  let genSpecializedAttr = 0;
}
def Lm_MaskKindAttr : EnumAttr<Lm_Dialect, Lm_MaskKind, "mask">;

def Lm_RoutingScore : I32EnumAttr<"RoutingScore", "how router logits become expert weights", [
    I32EnumAttrCase<"Sigmoid", 0, "sigmoid">,
    I32EnumAttrCase<"Softmax", 1, "softmax">,
    I32EnumAttrCase<"SoftmaxTopK", 2, "softmax_topk">]> {
  let cppNamespace = "::daybreak::lm";
  let genSpecializedAttr = 0;
}
def Lm_RoutingScoreAttr : EnumAttr<Lm_Dialect, Lm_RoutingScore, "routing">;

def Lm_Activation : I32EnumAttr<"Activation", "a pointwise activation", [
    I32EnumAttrCase<"None", 0, "none">,
    I32EnumAttrCase<"Sigmoid", 1, "sigmoid">,
    I32EnumAttrCase<"Silu", 2, "silu">]> {
  let cppNamespace = "::daybreak::lm";
  let genSpecializedAttr = 0;
}
def Lm_ActivationAttr : EnumAttr<Lm_Dialect, Lm_Activation, "activation">;

def Lm_CacheKind : I32EnumAttr<"CacheKind", "what a cache holds per token", [
    I32EnumAttrCase<"KeyValue", 0, "key_value">,
    I32EnumAttrCase<"MlaLatent", 1, "mla_latent">,
    I32EnumAttrCase<"IndexerKey", 2, "indexer_key">]> {
  let cppNamespace = "::daybreak::lm";
  let genSpecializedAttr = 0;
}
def Lm_CacheKindAttr : EnumAttr<Lm_Dialect, Lm_CacheKind, "cache_kind">;

//===----------------------------------------------------------------------===//
// Attributes
//===----------------------------------------------------------------------===//

class Lm_Attr<string name, string attrMnemonic, list<Trait> traits = []>
    : AttrDef<Lm_Dialect, name, traits> {
  let mnemonic = attrMnemonic;
}

def Lm_YarnAttr : Lm_Attr<"Yarn", "yarn"> {
  let summary = "YaRN (NTK-by-parts) RoPE frequency correction";
  let description = [{
    The frequency ramp of YaRN as DeepSeek-V3 and gpt-oss use it: frequencies
    whose wavelength fits `original_max_positions` more than `beta_fast`
    times are kept, those fitting fewer than `beta_slow` times are divided by
    `factor`, with a linear ramp between. `attention_factor` multiplies cos
    and sin; `truncate` floors/ceils the ramp bounds (false for gpt-oss).

    ```mlir
    #lm.yarn<factor = 40.0, original_max_positions = 4096, beta_fast = 32.0,
             beta_slow = 1.0, attention_factor = 1.0, truncate = true>
    ```
  }];
  let parameters = (ins "::mlir::FloatAttr":$factor,
                        "int64_t":$originalMaxPositions,
                        "::mlir::FloatAttr":$betaFast,
                        "::mlir::FloatAttr":$betaSlow,
                        "::mlir::FloatAttr":$attentionFactor,
                        "::mlir::BoolAttr":$truncate);
  let assemblyFormat = [{
    `<` `factor` `=` $factor `,` `original_max_positions` `=`
    $originalMaxPositions `,` `beta_fast` `=` $betaFast `,` `beta_slow` `=`
    $betaSlow `,` `attention_factor` `=` $attentionFactor `,` `truncate` `=`
    $truncate `>`
  }];
  let genVerifyDecl = 1;
}

def Lm_KVLayoutAttr : Lm_Attr<"KVLayout", "kv_layout"> {
  let summary = "storage layout of a per-token cache";
  let description = [{
    How a cache stores each token's row of `feature_dim` logical values:
    the first `feature_dim - tail_dim` values in `storage_type`, with one
    `f32` scale per `scale_block` of them when `scale_block` is non-zero,
    followed by `tail_dim` values in `tail_type` (DeepSeek keeps the RoPE key
    in bf16 beside the FP8 latent). Tokens are grouped in pages of
    `page_size`, taken from a pool as sequences grow. With `window = W`
    (sliding-window attention reads only the last `W` keys) the cache is a
    ring of rows per sequence instead of pages. DeepSeek-V3.2's sparse-MLA
    cache (656 bytes per token):

    ```mlir
    #lm.kv_layout<mla_latent, page_size = 64, feature_dim = 576,
                  storage = f8E4M3FN, scale_block = 128, tail_dim = 64,
                  tail = bf16>
    ```
  }];
  let parameters = (ins "CacheKind":$kind,
                        "int64_t":$pageSize,
                        "int64_t":$featureDim,
                        "::mlir::Type":$storageType,
                        "int64_t":$scaleBlock,
                        "int64_t":$tailDim,
                        "::mlir::Type":$tailType,
                        DefaultValuedParameter<"int64_t", "0">:$window);
  let assemblyFormat = [{
    `<` $kind `,` `page_size` `=` $pageSize `,` `feature_dim` `=` $featureDim
    `,` `storage` `=` $storageType `,` `scale_block` `=` $scaleBlock `,`
    `tail_dim` `=` $tailDim `,` `tail` `=` $tailType
    (`,` `window` `=` $window^)? `>`
  }];
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    /// Bytes one token occupies, scales included.
    int64_t getBytesPerToken() const;
  }];
}

def Lm_StateLayoutAttr : Lm_Attr<"StateLayout", "state_layout"> {
  let summary = "storage layout of a recurrent state slot";
  let description = [{
    The element type a persistent recurrent state is stored in and whether
    each head's `[Dk, Dv]` matrix is kept key-major (`[Dk, Dv]`, as vLLM's
    Kimi Linear path) or value-major (`[Dv, Dk]`). On a function argument
    (`lm.state`), it marks per-sequence state `[max_batch, ...]` that lives
    across steps in a slot of its own, zeroed when the slot is reused.

    ```mlir
    #lm.state_layout<storage = f32, key_major = true>
    ```
  }];
  let parameters = (ins "::mlir::Type":$storageType,
                        "::mlir::BoolAttr":$keyMajor);
  let assemblyFormat = [{
    `<` `storage` `=` $storageType `,` `key_major` `=` $keyMajor `>`
  }];
  let genVerifyDecl = 1;
}

def Lm_ShardAttr : Lm_Attr<"Shard", "shard"> {
  let summary = "the part of each checkpoint source a rank holds";
  let description = [{
    Indices `[offset, offset + size)` of dim `dim` of each source tensor of
    an `lm.weight`, as the checkpoint stores it: under tensor parallelism a
    column-parallel projection keeps rows (`dim = 0`) of its weight, a
    row-parallel one columns (`dim = 1`); under expert parallelism a stack of
    experts published as one tensor keeps experts (`dim = 0`). With several
    sources, each is cut the same way before they are stacked, so a GLU's gate
    and up shards stack into one weight. Rank 1 of 2 of a `[256, 64]`
    projection:

    ```mlir
    #lm.shard<dim = 0, offset = 128, size = 128>
    ```
  }];
  let parameters = (ins "int64_t":$dim, "int64_t":$offset, "int64_t":$size);
  let assemblyFormat = [{
    `<` `dim` `=` $dim `,` `offset` `=` $offset `,` `size` `=` $size `>`
  }];
  let genVerifyDecl = 1;
}

#endif // DAYBREAK_LM_ATTRS_TD
