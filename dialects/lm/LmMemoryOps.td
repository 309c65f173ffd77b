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

def Lm_CacheWriteOp : Lm_Op<"cache_write", [Pure]> {
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

    ```mlir
    %c1 = lm.cache_write %c0, %kv, %slots
        {layout = #lm.kv_layout<mla_latent, page_size = 64, feature_dim = 576,
                                storage = f8E4M3FN, scale_block = 128,
                                tail_dim = 64, tail = bf16>}
        : (tensor<?x576xbf16>, tensor<?x576xbf16>, tensor<?xi32>)
        -> tensor<?x576xbf16>
    ```
  }];
  let arguments = (ins Lm_FloatTensor:$cache, Lm_FloatTensor:$values,
                       Lm_IndexTensor:$slots,
                       Optional<Lm_IndexTensor>:$sequences,
                       OptionalAttr<Lm_KVLayoutAttr>:$layout);
  let results = (outs Lm_FloatTensor:$result);
  let assemblyFormat = [{
    $cache `,` $values `,` $slots (`sequences` $sequences^)? attr-dict `:`
    functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

#endif // DAYBREAK_LM_MEMORY_OPS_TD
