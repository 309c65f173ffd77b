//===- PlanOps.td - Ops of the plan dialect ----------------*- tablegen -*-===//

#ifndef DAYBREAK_PLAN_OPS_TD
#define DAYBREAK_PLAN_OPS_TD

include "dialects/plan/PlanBase.td"
include "dialects/lm/LmAttrs.td"
include "mlir/IR/SymbolInterfaces.td"
include "mlir/Interfaces/SideEffectInterfaces.td"
include "mlir/IR/CommonAttrConstraints.td"
include "mlir/IR/CommonTypeConstraints.td"
include "mlir/IR/RegionKindInterface.td"

//===----------------------------------------------------------------------===//
// Module-level declarations
//===----------------------------------------------------------------------===//

def Plan_WeightOp : Plan_Op<"weight", [Symbol]> {
  let summary = "a weight stored in a section of the artifact";
  let description = [{
    Declares a weight tensor stored at byte `offset` of weight section
    `section`, in its stored element type (4-bit types packed two per byte,
    low nibble first). Offsets are 64-byte aligned so every weight can be
    read with vector loads straight from the mapped file.

    ```mlir
    plan.weight @layers.0.q_a_proj : tensor<1536x7168xf8E4M3FN>
        {section = 0 : i64, offset = 4096 : i64}
    ```
  }];
  let arguments = (ins SymbolNameAttr:$sym_name, TypeAttrOf<AnyRankedTensor>:$type,
                       I64Attr:$section, I64Attr:$offset);
  let assemblyFormat = "$sym_name `:` $type attr-dict";
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// Bytes the weight occupies in its section.
    int64_t getByteSize();
  }];
}

def Plan_CachePoolOp : Plan_Op<"cache_pool", [Symbol]> {
  let summary = "a pool of cache pages shared by the layers of one kind";
  let description = [{
    A pool of `max_tokens` token rows per layer for `layers` layers, stored
    as `layout` says (page size, element types, scales). The runtime
    allocates it once, at load, and hands its pages to sequences as they
    grow (`max_tokens` may be less than `batch x max_seq_len`: sequences
    then share fewer pages than they could fill). With a `window` in the
    layout it is a ring of `max_tokens / batch` rows per sequence instead
    (sliding-window attention; `window - 1 + max-tokens` rows, so that a
    prefill chunk never overwrites rows its own queries read).

    ```mlir
    plan.cache_pool @mla_latent {layers = 61 : i64, max_tokens = 131072 : i64,
        layout = #lm.kv_layout<mla_latent, page_size = 64, feature_dim = 576,
                               storage = f8E4M3FN, scale_block = 128,
                               tail_dim = 64, tail = bf16>}
    ```
  }];
  let arguments = (ins SymbolNameAttr:$sym_name, Lm_KVLayoutAttr:$layout,
                       I64Attr:$layers, I64Attr:$max_tokens);
  let assemblyFormat = "$sym_name attr-dict";
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// Bytes of the whole pool.
    int64_t getByteSize();
  }];
}

def Plan_StatePoolOp : Plan_Op<"state_pool", [Symbol]> {
  let summary = "per-sequence state of the layers of one kind, one slot each";
  let description = [{
    Fixed-size state that a sequence carries across steps (a KDA layer's
    recurrent state, a short convolution's last inputs): `layers` layers of
    `batch` slots of `slot_shape` values stored as `layout` says. Its size
    does not depend on the context length. The runtime zeroes a slot when a
    new sequence takes it. `plan.cache_ref` names it like a cache pool.

    ```mlir
    plan.state_pool @kda_state {layers = 3 : i64, batch = 8 : i64,
        slot_shape = array<i64: 32, 128, 128>,
        layout = #lm.state_layout<storage = f32, key_major = true>}
    ```
  }];
  let arguments = (ins SymbolNameAttr:$sym_name, Lm_StateLayoutAttr:$layout,
                       I64Attr:$layers, I64Attr:$batch,
                       DenseI64ArrayAttr:$slot_shape);
  let assemblyFormat = "$sym_name attr-dict";
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// Bytes of one sequence's state in one layer.
    int64_t getSlotBytes();
    /// Bytes of the whole pool.
    int64_t getByteSize();
  }];
}

def Plan_KernelOp : Plan_Op<"kernel", [Symbol]> {
  let summary = "a compiled kernel the steps launch";
  let description = [{
    Declares a kernel: the `entry` symbol in the artifact's code section for
    `target`, and the number of arguments a launch passes.

    ```mlir
    plan.kernel @rms_norm_256 {target = #plan<target cuda>,
                               entry = "rms_norm_256_bf16", num_args = 3 : i64}
    ```
  }];
  let arguments = (ins SymbolNameAttr:$sym_name, Plan_KernelTargetAttr:$target,
                       StrAttr:$entry, I64Attr:$num_args);
  let assemblyFormat = "$sym_name attr-dict";
  let hasVerifier = 1;
}

def Plan_CodeImageOp : Plan_Op<"code_image", [Symbol]> {
  let summary = "code a target compiled for this plan, for the artifact";
  let description = [{
    Code the artifact carries as it is: the `code` text in `format` for
    `arch` (PTX: NVIDIA GPUs of that architecture or newer), stored as the
    code module named by the symbol. A pass that compiles code for the plan's shapes records it here,
    so the IR after that pass says what the artifact will hold and the
    target's serialisation writes it without compiling again.
    `plan-specialize-library-kernels` records the CUDA library kernels
    compiled by NVRTC as `@library`; `instantiations` maps each template
    instantiation it compiled (a C++ name expression) to its entry point,
    the name a launch's `specialized` attribute gives.

    ```mlir
    plan.code_image @library format "ptx" arch "sm_90a"
        instantiations {"daybreak_rms_norm_t<128>" = "_Z19daybreak_rms_norm_tILi128EE"}
        code "//\0A// Generated by NVIDIA NVVM Compiler\0A..."
    ```
  }];
  let arguments = (ins SymbolNameAttr:$sym_name, StrAttr:$format,
                       StrAttr:$arch, DictionaryAttr:$instantiations,
                       StrAttr:$code);
  let assemblyFormat = [{
    $sym_name `format` $format `arch` $arch `instantiations` $instantiations
    `code` $code attr-dict
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Steps
//===----------------------------------------------------------------------===//

def Plan_StepOp : Plan_Op<"step", [Symbol, IsolatedFromAbove, SingleBlock,
                                   NoTerminator]> {
  let summary = "the launches and host steps of one model step";
  let description = [{
    One entry point of the compiled model (`@prefill`, `@decode`). The
    block arguments are the step's runtime sizes (`index`), named by
    `size_names`; the body places buffers in an arena of `arena_size`
    bytes and launches kernels in program order. `max_sizes`, when given,
    bounds each size: the arena was planned for them.

    ```mlir
    plan.step @decode arena(1048576) sizes ["tokens", "batch"] {
    ^bb0(%tokens: index, %batch: index):
      %h = plan.buffer "hidden" offset(0) (%tokens) : memref<?x256xbf16>
      plan.launch @rms_norm_256 [%tokens, %batch]
          grid affine_map<()[s0, s1] -> (s0, 1, 1)> block [256, 1, 1] smem 0
          (%h, %h) : memref<?x256xbf16>, memref<?x256xbf16>
    }
    ```
  }];
  let arguments = (ins SymbolNameAttr:$sym_name, I64Attr:$arena_size,
                       StrArrayAttr:$size_names,
                       OptionalAttr<DenseI64ArrayAttr>:$max_sizes);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = [{
    $sym_name `arena` `(` $arena_size `)` `sizes` $size_names
    attr-dict-with-keyword $body
  }];
  let hasVerifier = 1;
}

def Plan_BufferOp : Plan_Op<"buffer", [Pure]> {
  let summary = "a named buffer at an offset in the step's arena";
  let description = [{
    The buffer `name` lives at byte `offset` of the arena; its dynamic dims
    are given by `sizes`, one per `?` of the result type. Offsets are
    256-byte aligned. Buffers with disjoint lifetimes may share bytes; the
    workspace planner decides.

    ```mlir
    %h = plan.buffer "hidden" offset(0) (%tokens) : memref<?x256xbf16>
    ```
  }];
  let arguments = (ins StrAttr:$name, I64Attr:$offset,
                       Variadic<Index>:$sizes);
  let results = (outs AnyMemRef:$result);
  let assemblyFormat = [{
    $name `offset` `(` $offset `)` (`(` $sizes^ `)`)? attr-dict `:`
    type($result)
  }];
  let hasVerifier = 1;
}

def Plan_ColumnViewOp : Plan_Op<"column_view", [Pure]> {
  let summary = "columns of every row of a buffer, in place";
  let description = [{
    Columns `[column, column + n)` of every row of `source`, a `plan.buffer`,
    where `n` is the result's last dim: the same bytes, rows as far apart
    as the source's. The result's strided layout says so (the source's
    row-major strides, offset `column`). A kernel reads or writes a view
    only in a slot its declaration marks `VIEW` (runtime/abi/Kernels.def):
    column slices and the parts of a concatenation, uncopied. The artifact
    records a view as a buffer of the source's name with a `row_stride`.

    ```mlir
    %kv = plan.buffer "v7" offset(0) (%tokens) : memref<?x576xf32>
    %pe = plan.column_view %kv[512] : memref<?x576xf32>
        to memref<?x64xf32, strided<[576, 1], offset: 512>>
    ```
  }];
  let arguments = (ins AnyMemRef:$source, I64Attr:$column);
  let results = (outs AnyMemRef:$result);
  let assemblyFormat = [{
    $source `[` $column `]` attr-dict `:` type($source) `to` type($result)
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// Elements between the starts of consecutive rows: the source's last
    /// dim.
    int64_t getRowStride() {
      return ::llvm::cast<::mlir::MemRefType>(getSource().getType())
          .getShape()
          .back();
    }
    /// The layout a view of `columns` columns of `source` at `column` has.
    static mlir::MemRefType viewType(mlir::MemRefType source, int64_t column,
                                     int64_t columns);
  }];
}

def Plan_WeightRefOp : Plan_Op<"weight_ref", [Pure,
    DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "a view of a declared weight";
  let description = [{
    ```mlir
    %w = plan.weight_ref @layers.0.q_a_proj : memref<1536x7168xf8E4M3FN>
    ```
  }];
  let arguments = (ins FlatSymbolRefAttr:$weight);
  let results = (outs AnyStaticShapeMemRef:$result);
  let assemblyFormat = "$weight attr-dict `:` type($result)";
}

def Plan_CacheRefOp : Plan_Op<"cache_ref", [Pure,
    DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "the bytes of one layer's share of a cache or state pool";
  let description = [{
    Layer `layer`'s `[max_tokens, bytes_per_token]` region of a cache pool,
    or `[batch, slot bytes]` region of a state pool, as raw bytes in the
    pool's layout.

    ```mlir
    %c = plan.cache_ref @mla_latent layer(0) : memref<131072x656xi8>
    ```
  }];
  let arguments = (ins FlatSymbolRefAttr:$pool, I64Attr:$layer);
  let results = (outs MemRefRankOf<[I8], [2]>:$result);
  let assemblyFormat = "$pool `layer` `(` $layer `)` attr-dict `:` type($result)";
}

def Plan_LaunchOp : Plan_Op<"launch", [AttrSizedOperandSegments,
    DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "launch a kernel over a grid computed from runtime sizes";
  let description = [{
    Launches `kernel` with the given arguments. `grid` is an affine map with
    no dims and one symbol per `sizes` operand, giving the three grid
    extents; `block` is the static thread-block shape and `smem` the
    dynamic shared memory in bytes. CPU kernels ignore `block` and run the
    grid on the thread pool.

    ```mlir
    plan.launch @rms_norm_256 [%tokens, %batch]
        grid affine_map<()[s0, s1] -> (s0 ceildiv 4, 1, 1)> block [256, 1, 1]
        smem 0 (%h, %w) : memref<?x256xbf16>, memref<256xbf16>
    ```
  }];
  let arguments = (ins FlatSymbolRefAttr:$kernel, Variadic<Index>:$sizes,
                       AffineMapAttr:$grid, DenseI64ArrayAttr:$block,
                       I64Attr:$smem, Variadic<AnyMemRef>:$args);
  let assemblyFormat = [{
    $kernel `[` $sizes `]` `grid` $grid `block` $block `smem` $smem
    `(` $args `)` attr-dict (`:` type($args)^)?
  }];
  let hasVerifier = 1;
}

def Plan_HostOp : Plan_Op<"host", []> {
  let summary = "work the host does between launches";
  let description = [{
    `read_back` copies a buffer to the host (the step's outputs), `sample`
    draws the next tokens from logits, `copy` copies between buffers.

    ```mlir
    plan.host read_back (%logits) : memref<?x512xf32>
    ```
  }];
  let arguments = (ins Plan_HostStepKindAttr:$kind, Variadic<AnyMemRef>:$args);
  let assemblyFormat = "$kind `(` $args `)` attr-dict `:` type($args)";
  let hasVerifier = 1;
}

#endif // DAYBREAK_PLAN_OPS_TD
