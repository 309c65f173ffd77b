//===- LmMemoryOps.td - Embedding lookups and cache writes -*- tablegen -*-===//

#ifndef DAYBREAK_LM_MEMORY_OPS_TD
#define DAYBREAK_LM_MEMORY_OPS_TD

include "dialects/lm/LmAttrs.td"
include "mlir/Interfaces/SideEffectInterfaces.td"
include "mlir/IR/SymbolInterfaces.td"

def Lm_EmbeddingOp : Lm_Op<"embedding", [Pure]> {
  let summary = "token embedding lookup";
  let description = [{
    `result[t] = table[ids[t]]`: `table [V, D]`, `ids [T]`. An id outside
    `[0, V)` is an error at run time.

    ```mlir
    %h = lm.embedding %table, %ids
        : (tensor<512x256xbf16>, tensor<?xi32>) -> tensor<?x256xbf16>
    ```
  }];
  let arguments = (ins Lm_WeightTensor:$table, Lm_PositionTensor:$ids);
  let results = (outs Lm_FloatTensor:$result);
  let assemblyFormat = [{
    $table `,` $ids attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Lm_GatherRowsOp : Lm_Op<"gather_rows", [Pure]> {
  let summary = "rows of an activation, by index";
  let description = [{
    `result[r] = input[rows[r]]`: `input [T, D]`, `rows [R]`. An index
    outside `[0, T)` is an error at run time (the runtime checks the indices
    it writes). `lm-select-logit-rows` puts one before the LM head of
    `@prefill`, which then computes only the rows the runtime asks for.

    ```mlir
    %x = lm.gather_rows %h, %rows
        : (tensor<?x256xf32>, tensor<16xi32>) -> tensor<16x256xf32>
    ```
  }];
  let arguments = (ins Lm_F32Tensor:$input, Lm_IndexTensor:$rows);
  let results = (outs Lm_F32Tensor:$result);
  let assemblyFormat = [{
    $input `,` $rows attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Lm_WeightOp : Lm_Op<"weight", [Symbol]> {
  let summary = "a model weight, by name";
  let description = [{
    Declares a weight of the model: its type as the checkpoint stores it and,
    in `sources`, the checkpoint tensors it is made of, their bytes one after
    another: several for experts stacked along a new leading dim, or for
    projections of one input stacked along their rows (lm-fuse-gate-up,
    lm-fuse-projections). Functions read it with
    `lm.weight_ref`; the weight storage planner decides how it is stored in
    the artifact. A weight computed at compile time from others (an
    absorbed MLA matrix, dequantised experts) has no sources and carries its
    `value` instead. With `shard`, the weight is one rank's part of each
    source (tensor and expert parallelism); its type is the part's.

    ```mlir
    lm.weight @layers.1.experts.gate : tensor<8x64x256xbf16>
        {sources = ["model.layers.1.mlp.experts.0.gate_proj.weight",
                    "model.layers.1.mlp.experts.1.gate_proj.weight"]}
    ```
  }];
  let arguments = (ins SymbolNameAttr:$sym_name,
                       TypeAttrOf<AnyRankedTensor>:$type,
                       StrArrayAttr:$sources,
                       OptionalAttr<ElementsAttr>:$value,
                       OptionalAttr<Lm_ShardAttr>:$shard);
  let assemblyFormat = "$sym_name `:` $type attr-dict";
  let hasVerifier = 1;
}

def Lm_WeightRefOp : Lm_Op<"weight_ref", [Pure,
    DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "the value of a declared weight";
  let description = [{
    ```mlir
    %w = lm.weight_ref @layers.0.q_a_proj : tensor<128x256xbf16>
    ```
  }];
  let arguments = (ins FlatSymbolRefAttr:$weight);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "$weight attr-dict `:` type($result)";
}

def Lm_CacheWriteOp : Lm_Op<"cache_write", [Pure, AttrSizedOperandSegments]> {
  let summary = "write per-token rows into a cache";
  let description = [{
    Returns `cache` with row `slots[t]` replaced by `values[t]` for every
    token `t` (`-1` skips the token): `cache [S, ...]`, `values [T, ...]`
    with the same trailing dims, `slots [T]`. Value semantics: the result
    is the updated cache, so the IR threads each cache from function
    argument to function result. `layout` records how the cache is stored
    (assigned by the KV layout pass). With `sequences [T]` the cache holds a
    batch of sequences, `[B, S, ...]`, and token `t` writes row `slots[t]`
    of sequence `sequences[t]`.

    An optional prologue transforms each row `values[t] [W]` before it is
    stored (`lm-fuse-cache-write` forms it from the norm and RoPE ops that
    only feed the write, so the row is computed and stored in one launch):
    first `norm` (`rms`, or `layer` with an optional `bias`) over columns
    `[0, norm_dim)` with `weight [norm_dim]` and `eps`, exactly as
    `lm.rms_norm` / `lm.layer_norm` compute it; then RoPE at `positions`
    over columns `[rope_offset, rope_offset + rope_dim)` as `lm.rope` with
    `rope_style`, `theta` and `yarn` (with `rope_head_dim`, of each head of
    that many columns: GQA keys `[T, H * D]`). Other columns are stored as
    given.

    ```mlir
    %c1 = lm.cache_write %c0, %kv, %slots
        {layout = #lm.kv_layout<mla_latent, page_size = 64, feature_dim = 576,
                                storage = f8E4M3FN, scale_block = 128,
                                tail_dim = 64, tail = bf16>}
        : (tensor<?x576xbf16>, tensor<?x576xbf16>, tensor<?xi32>)
        -> tensor<?x576xbf16>
    // DeepSeek's latent row: c_kv normalised, k_pe rotated, then stored.
    %c2 = lm.cache_write %c0, %kv, %pos norm %w rope %pos
        {norm = #lm<norm_kind rms>, norm_dim = 512 : i64, eps = 1.0e-6 : f64,
         rope_style = #lm<rope_style interleaved>, rope_offset = 512 : i64,
         rope_dim = 64 : i64, theta = 10000.0 : f64}
        : (tensor<64x576xf32>, tensor<?x576xf32>, tensor<?xi32>,
           tensor<512xbf16>, tensor<?xi32>) -> tensor<64x576xf32>
    ```
  }];
  let arguments = (ins Lm_FloatTensor:$cache, Lm_FloatTensor:$values,
                       Lm_IndexTensor:$slots,
                       Optional<Lm_IndexTensor>:$sequences,
                       Optional<Lm_WeightTensor>:$norm_weight,
                       Optional<Lm_WeightTensor>:$norm_bias,
                       Optional<Lm_PositionTensor>:$positions,
                       OptionalAttr<Lm_KVLayoutAttr>:$layout,
                       OptionalAttr<Lm_NormKindAttr>:$norm,
                       OptionalAttr<I64Attr>:$norm_dim,
                       OptionalAttr<F64Attr>:$eps,
                       OptionalAttr<Lm_RopeStyleAttr>:$rope_style,
                       OptionalAttr<I64Attr>:$rope_offset,
                       OptionalAttr<I64Attr>:$rope_dim,
                       OptionalAttr<F64Attr>:$theta,
                       OptionalAttr<Lm_YarnAttr>:$yarn,
                       OptionalAttr<I64Attr>:$rope_head_dim);
  let results = (outs Lm_FloatTensor:$result);
  let builders = [
    // A plain write (no prologue).
    OpBuilder<(ins "::mlir::Type":$result, "::mlir::Value":$cache, "::mlir::Value":$values,
                   "::mlir::Value":$slots, "::mlir::Value":$sequences,
                   "KVLayoutAttr":$layout), [{
      build($_builder, $_state, result, cache, values, slots, sequences,
            /*norm_weight=*/::mlir::Value(), /*norm_bias=*/::mlir::Value(),
            /*positions=*/::mlir::Value(), layout, /*norm=*/nullptr,
            /*norm_dim=*/nullptr, /*eps=*/nullptr, /*rope_style=*/nullptr,
            /*rope_offset=*/nullptr, /*rope_dim=*/nullptr, /*theta=*/nullptr,
            /*yarn=*/nullptr, /*rope_head_dim=*/nullptr);
    }]>
  ];
  let extraClassDeclaration = [{
    /// Whether the write normalises or rotates its rows first.
    bool hasPrologue() { return getNorm() || getPositions(); }
  }];
  let assemblyFormat = [{
    $cache `,` $values `,` $slots (`sequences` $sequences^)?
    (`norm` $norm_weight^)? (`bias` $norm_bias^)? (`rope` $positions^)?
    attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

#endif // DAYBREAK_LM_MEMORY_OPS_TD
