//===- Passes.td - Daybreak's passes on lm and plan IR -----*- tablegen -*-===//

#ifndef DAYBREAK_PASSES_TD
#define DAYBREAK_PASSES_TD

include "mlir/Pass/PassBase.td"

def LmFoldWeights : Pass<"lm-fold-weights", "mlir::ModuleOp"> {
  let summary = "compute weight-only subgraphs at compile time";
  let description = [{
    Values computed from weights alone — MLA's absorbed `W_UK`/`W_UV`
    slices of `kv_b_proj`, FP8 weights dequantised for absorption or for
    stacked experts — are evaluated once with the reference evaluator and
    replaced by new `lm.weight`s carrying their value, so no step ever
    recomputes them. Weights no function reads any more are removed.
    `lm.transpose` folds too (weights stored in the layout a kernel reads).
    A value read only as `lm.head_matmul` weights that computes to f32 but
    whose every value is a bf16 value (e4m3 codes times power-of-two block
    scales) is stored as bf16: the same values in half the bytes.
  }];
  let options = [
    Option<"checkpoint", "checkpoint", "std::string", /*default=*/"\"\"",
           "checkpoint folder the weights' sources are read from">,
  ];
  let statistics = [
    Statistic<"numFolded", "folded", "weight values computed at compile time">,
  ];
}

def LmMxfp4Route : Pass<"lm-mxfp4-route", "mlir::ModuleOp"> {
  let summary = "choose how MXFP4 experts are stored and read";
  let description = [{
    Rewrites every `lm.mxfp4_expert_matmul` for one of three routes
    (`docs/mxfp4.md`), and records the choice as the module's
    `lm.mxfp4_route` attribute, which the memory plan prints:
    - `direct`: left as it is; the kernel reads E2M1 + E8M0 as stored and
      decodes in registers.
    - `offline`: the experts are converted at compile time, `arith.extf` to
      E4M3 codes and f32 block scales (exact: every E2M1 value is an E4M3
      value, every E8M0 scale an f32), which `lm-fold-weights` folds into
      the artifact; an `lm.expert_matmul` over `lm.fp8_dequant {block_size
      = [1, 32]}` reads them (1.125 bytes a value instead of 0.53).
    - `online`: the experts stay packed; before each expert matmul an
      `lm.mxfp4_to_fp8_experts` converts the experts the step selected into
      a workspace of `min(E, max-tokens x k)` slots and remaps the indices,
      and the FP8 expert matmul reads the workspace. The lowering gives
      every layer's workspace one buffer. The `@decode` step is left
      direct unless `convert-in-decode` is set: converting moves the
      selected experts' packed bytes, then writes and reads them again as
      E4M3 (about 5x what reading them packed moves, `docs/mxfp4.md`), and
      a decode step's few tokens per expert give the FP8 GEMM nothing to
      gain it back with. The other steps convert unless
      `convert-in-prefill` is false (the CUDA target's default: its
      grouped warpgroup GEMM reads the packed experts faster than the
      conversion and the FP8 GEMM take, at every step size measured), and
      then the online route only keeps the experts packed.

    With `overlap` (the online route), where a step of `max-tokens` tokens
    can select nearly every expert, the conversion takes every expert into
    a workspace of E slots from the token count `T0` where uniformly routed
    tokens would select 90 % of them (`all_from_tokens = T0`, the least T
    with `(1 - k / E)^T <= 0.1`): converting all of them then costs at most
    about a ninth more than the selection and needs no routing, so
    `plan-overlap-conversions` can run it beside the layer before. Steps
    below `T0` tokens convert their selection as before. The `@decode`
    step (with `convert-in-decode`) always converts its selection.

    ```mlir
    // route=online
    %c, %s, %b, %slots = lm.mxfp4_to_fp8_experts %w, %sc, %idx bias %bias
    %d = lm.fp8_dequant %c, %s {block_size = array<i64: 1, 32>}
    %y = lm.expert_matmul %x, %d, %slots weights %rw bias %b
    ```
  }];
  let options = [
    Option<"route", "route", "std::string", "\"direct\"",
           "how MXFP4 experts are read: online, offline or direct">,
    Option<"maxTokens", "max-tokens", "int64_t", "4096",
           "the most tokens one step processes (sizes the online workspace)">,
    Option<"convertInDecode", "convert-in-decode", "bool", "false",
           "online route: convert in the @decode step too (by default it "
           "reads the packed experts directly)">,
    Option<"convertInPrefill", "convert-in-prefill", "bool", "true",
           "online route: convert in the steps other than @decode (false: "
           "every step reads the packed experts directly)">,
    Option<"overlap", "overlap", "bool", "false",
           "online route: convert every expert (all_from_tokens) from the "
           "token count where a step selects nearly all of them, so that the "
           "conversion can run ahead of the routing">,
  ];
  let dependentDialects = ["::mlir::arith::ArithDialect"];
  let statistics = [
    Statistic<"numRewritten", "rewritten",
              "MXFP4 expert matmuls rewritten for the route">,
  ];
}

def LmFuseElementwise : Pass<"lm-fuse-elementwise", "mlir::func::FuncOp"> {
  let summary = "fuse pointwise op chains into lm.elementwise kernels";
  let description = [{
    Rewrites every pointwise op on float tensors (`arith.addf/subf/mulf/
    divf`, `lm.swiglu`, `lm.silu`, `lm.sigmoid`, `lm.situ`) as an
    `lm.elementwise` whose scalar body says what it computes, then merges
    each such op into its consumer when the consumer is its only user, so a
    chain reads its inputs once and writes once. The CPU target compiles
    each `lm.elementwise` into a generated kernel.
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::math::MathDialect"];
  let statistics = [
    Statistic<"numFused", "fused", "ops merged into a consumer">,
  ];
}

def LmFuseGateUp : Pass<"lm-fuse-gate-up", "mlir::ModuleOp"> {
  let summary = "one projection for a gated linear unit's gate and up";
  let description = [{
    Where an `lm.swiglu` or `lm.situ` reads the results of two projections
    of one input of the same kind (`lm.matmul` without bias,
    `lm.fp8_matmul` whose scale blocks do not straddle the two halves,
    `lm.expert_matmul` of plain or FP8 experts without routing weights or
    bias), each read by it alone, over weights read from the checkpoint:
    one projection over a weight declared with both weights' sources (per
    expert, interleaved: `[E, 2N, K]`), and the GLU reads its two halves as
    last-dim slices. The artifact holds the same bytes; the rewrite is
    exact. The separate declarations are removed where nothing else reads
    them.
  }];
  let dependentDialects = ["mlir::arith::ArithDialect",
                           "mlir::tensor::TensorDialect"];
  let statistics = [
    Statistic<"numFused", "fused", "gate and up projections made one">,
  ];
}

def LmFuseProjections : Pass<"lm-fuse-projections", "mlir::ModuleOp"> {
  let summary = "one projection for the matmuls of one input";
  let description = [{
    Projections of one value in one block (`lm.matmul`, all with a bias or
    none, or `lm.fp8_matmul` of one block size) over checkpoint weights of
    one element type and K become one projection over a weight declared
    with all their sources, stacked along N; each former result is a
    last-dim slice of the whole. A projection joins only if every reader of
    its result takes a column view (a `VIEW` slot of `Kernels.def`,
    directly or through column slices), so lm-lower-to-plan passes the
    slices in place and nothing is copied. FP8 scale blocks must not
    straddle two projections: those with whole blocks of rows go first,
    and at most one other, last. The artifact holds the same bytes; the
    rewrite is exact.

    ```mlir
    %q = lm.fp8_matmul %x, %wq, %sq {block_size = array<i64: 128, 128>}
        : (tensor<?x256xf32>, tensor<128x256xf8E4M3FN>, tensor<1x2xf32>)
        -> tensor<?x128xf32>
    %kv = lm.fp8_matmul %x, %wkv, %skv {block_size = array<i64: 128, 128>}
        : (tensor<?x256xf32>, tensor<80x256xf8E4M3FN>, tensor<1x2xf32>)
        -> tensor<?x80xf32>
    // becomes, over @wq+wkv [208, 256] and @sq+skv [2, 2]
    %all = lm.fp8_matmul %x, %w, %s {block_size = array<i64: 128, 128>}
        : (...) -> tensor<?x208xf32>
    %q = tensor.extract_slice %all[0, 0] [%t, 128] [1, 1]
    %kv = tensor.extract_slice %all[0, 128] [%t, 80] [1, 1]
    ```
  }];
  let dependentDialects = ["mlir::tensor::TensorDialect"];
  let statistics = [
    Statistic<"numFused", "fused", "projections made part of another">,
  ];
}

def LmNarrowRope : Pass<"lm-narrow-rope", "mlir::func::FuncOp"> {
  let summary = "rotate only the columns that are read rotated";
  let description = [{
    `lm.rope` rotates columns `[offset, offset + dim)` of each row and passes
    the others through. Where its result is read as last-dim column slices
    (MLA's `[nope | rope]` query and `[latent | rope]` key), each slice is
    rewritten to read what it needs directly:
    - a slice outside the rotated columns reads the rope's input;
    - the slice of exactly the rotated columns becomes an `lm.rope` of
      offset 0 over that slice of the input.
    Only a rope all of whose readers are such slices (or ask its shape) is
    rewritten, and erased: one read otherwise would make it run twice. Every value is the same (the rotation of
    a pair depends on its index in the rotated slice, not on the columns
    around it); lm-lower-to-plan then hands the slices to the kernels as
    column views, and the rope writes only its rotated columns, so neither
    the slices nor the pass-through columns are copied.

    ```mlir
    %r = lm.rope %q, %pos interleaved {offset = 32 : i64, dim = 16 : i64, ...}
        : (tensor<?x4x48xf32>, tensor<?xi32>) -> tensor<?x4x48xf32>
    %pe = tensor.extract_slice %r[0, 0, 32] [%t, 4, 16] [1, 1, 1]
    // becomes
    %s = tensor.extract_slice %q[0, 0, 32] [%t, 4, 16] [1, 1, 1]
    %pe = lm.rope %s, %pos interleaved {offset = 0 : i64, dim = 16 : i64, ...}
    ```
  }];
  let dependentDialects = ["mlir::tensor::TensorDialect"];
  let statistics = [
    Statistic<"numNarrowed", "narrowed", "slices of a rope rewritten">,
  ];
}

def LmSelectLogitRows : Pass<"lm-select-logit-rows", "mlir::ModuleOp"> {
  let summary = "compute a prefill step's logits for the rows asked for";
  let description = [{
    A prefill step needs the logits of few of its tokens: the last prompt
    token of each sequence it finishes, for sampling. Computing them for
    every token costs the LM head's whole GEMM (on DeepSeek-V3.2, 123 ms of a
    32K-token step) and a `max-tokens x vocab` fp32 buffer (15.8 GiB at
    32K tokens and 129280 ids).

    In the function `function`, the result of role `logits` gets a new input
    of role `logit_rows`, `tensor<max-rows x i32>`: an `lm.gather_rows`
    picks those token rows before the LM head, hoisted above the row-wise
    ops that lead to it alone (`lm.matmul`, `lm.fp8_matmul`,
    `lm.rms_norm`, `lm.layer_norm`), so the head runs on `max-rows` rows and
    the logits are `[max-rows, vocab]`. The runtime writes the rows it
    wants (padded with any valid row) and reads back as many. Every value is
    the same as before for the rows chosen: the ops moved are row-wise. A
    function without the `logits` result is an error; a missing function is
    left alone.

    ```mlir
    // max-rows=16
    %r = lm.gather_rows %h, %rows
        : (tensor<?x256xf32>, tensor<16xi32>) -> tensor<16x256xf32>
    %n = lm.rms_norm %r, %w {eps = 1.0e-06 : f64}
        : (tensor<16x256xf32>, tensor<256xbf16>) -> tensor<16x256xf32>
    %logits = lm.matmul %n, %head
        : (tensor<16x256xf32>, tensor<512x256xbf16>) -> tensor<16x512xf32>
    ```
  }];
  let options = [
    Option<"function", "function", "std::string", "\"prefill\"",
           "the step function whose logits are selected">,
    Option<"maxRows", "max-rows", "int64_t", "0",
           "rows of logits the step computes (positive)">,
  ];
  let statistics = [
    Statistic<"numHoisted", "hoisted",
              "row-wise ops moved below the gather">,
  ];
}

def LmFuseMhc : Pass<"lm-fuse-mhc", "mlir::func::FuncOp"> {
  let summary = "fuse mHC collapses and write-backs with their neighbours";
  let description = [{
    Removes passes over the n residual streams of mHC (glm5_next.md):
    - an `lm.mhc_pre` whose input feeds only an `lm.rms_norm` takes the
      norm's weight and eps (`norm`, `input_eps`): the collapse writes the
      normed input, and the norm's read and write of `[T, D]` are gone;
    - an `lm.mhc_post` whose new streams feed the next `lm.mhc_pre` becomes
      one `lm.mhc_post_pre`: the new streams are mixed as they are written,
      not read back for the mixing logits.
    Both are exact rewrites: the fused kernels round every intermediate to
    the type the separate ops would store.
  }];
  let statistics = [
    Statistic<"numNorms", "norms", "RMS norms folded into a collapse">,
    Statistic<"numWriteBacks", "write-backs",
              "write-backs fused with the next collapse">,
  ];
}

def LmFuseAddNorm : Pass<"lm-fuse-add-norm", "mlir::func::FuncOp"> {
  let summary = "fuse residual adds with the RMS norms that read them";
  let description = [{
    A block's residual update `h = x + sublayer(x)` (an `arith.addf`) and
    the next sublayer's `lm.rms_norm(h)` become one `lm.add_rms_norm`,
    whose `sum` replaces h: one launch where there were two, and h written
    once and not read back. The rewrite is exact (the fused kernel adds and
    normalises as the two ops do). Only where `target` implements the
    `add_rms_norm` kernel (`runtime/abi/Kernels.def`), and only where every
    other reader of h comes after the norm.

    ```mlir
    %h = arith.addf %x, %o : tensor<?x256xf32>
    %y = lm.rms_norm %h, %w {eps = 1.0e-06 : f64}
        : (tensor<?x256xf32>, tensor<256xf32>) -> tensor<?x256xf32>
    // becomes
    %h, %y = lm.add_rms_norm %x, %o, %w {eps = 1.0e-06 : f64} : ...
    ```
  }];
  let options = [
    Option<"target", "target", "std::string", "\"cpu\"",
           "the target the module is compiled for: cpu or cuda">,
  ];
  let statistics = [
    Statistic<"numFused", "fused", "residual adds fused with their norm">,
  ];
}

def LmFuseCacheWrite : Pass<"lm-fuse-cache-write", "mlir::func::FuncOp"> {
  let summary = "fuse the norms and RoPE that compute a cache row into its write";
  let description = [{
    The ops that only compute a row for `lm.cache_write` become the write's
    prologue, so one launch computes and stores the row:
    - `rope(norm(x))`, `rope(x)` or `norm(x)` of the whole row
      (`lm.rms_norm` or `lm.layer_norm`): the indexer key of DSA;
    - `concat(norm(x[:, :a]), x[:, a:])`, with the rest of the row rotated
      inside `[a, W)` or not: the MLA latent row `[c_kv | k_pe]`.
    The rewrite is exact: the prologue normalises and rotates as the ops it
    replaces (norm first, then RoPE), and the cache kernels of both targets
    implement it. A norm or rope with another reader stays as it is.

    ```mlir
    %n = lm.rms_norm %kv_head, %w {eps = 1.0e-06 : f64} : ...
    %r = lm.rope %kv, %pos interleaved {offset = 512 : i64, dim = 64 : i64, ...}
    %row = tensor.concat dim(1) %n, %r_tail : ...
    %c1 = lm.cache_write %c0, %row, %pos sequences %seq : ...
    // becomes
    %c1 = lm.cache_write %c0, %kv, %pos sequences %seq norm %w rope %pos
        {norm = #lm<norm_kind rms>, norm_dim = 512 : i64, eps = 1.0e-06 : f64,
         rope_style = #lm<rope_style interleaved>, rope_offset = 512 : i64,
         rope_dim = 64 : i64, theta = 10000.0 : f64} : ...
    ```
  }];
  let statistics = [
    Statistic<"numFused", "fused", "cache writes given a norm or RoPE prologue">,
  ];
}

def LmFuseQueryRope : Pass<"lm-fuse-query-rope", "mlir::func::FuncOp"> {
  let summary = "fuse a query's RoPE into the DSA indexer that scores it";
  let description = [{
    The `lm.rope` whose only reader is `lm.dsa_indexer_scores`' query
    becomes the indexer's prologue: the kernel rotates each query head as it
    stages it, and the rope's launch goes. The rewrite is exact: the
    prologue rotates as `lm.rope` does, and the indexer kernels of both
    targets implement it. A rope with another reader stays as it is.

    ```mlir
    %r = lm.rope %iq, %pos half_split {offset = 0 : i64, dim = 64 : i64, ...}
    %s = lm.dsa_indexer_scores %r, %ik, %iw bounds %b {scale = 0.0884 : f64} : ...
    // becomes
    %s = lm.dsa_indexer_scores %iq, %ik, %iw bounds %b rope %pos
        {scale = 0.0884 : f64, rope_style = #lm<rope_style half_split>,
         rope_offset = 0 : i64, rope_dim = 64 : i64, theta = 10000.0 : f64} : ...
    ```
  }];
  let statistics = [
    Statistic<"numFused", "fused", "indexer queries given a RoPE prologue">,
  ];
}

def LmRopeRows : Pass<"lm-rope-rows", "mlir::func::FuncOp"> {
  let summary = "rotate a projection's rows rather than a reshape of them";
  let description = [{
    An `lm.rope` of heads `[T, H, D]` reshaped from rows `[T, H * D]`
    (`tensor.expand_shape` of the last dim only) becomes an `lm.rope` of the
    rows with `head_dim = D`, whose result is reshaped instead. Every value
    is the same; the rope now reads the rows in its kernel's column-view
    slot, so the projection that computes them can join the other
    projections of its input (`lm-fuse-projections`: gpt-oss's q beside its
    k and v).

    ```mlir
    %h = tensor.expand_shape %q [[0], [1, 2]] output_shape [%t, 64, 64]
        : tensor<?x4096xf32> into tensor<?x64x64xf32>
    %r = lm.rope %h, %pos half_split {offset = 0 : i64, dim = 64 : i64, ...}
    // becomes
    %r0 = lm.rope %q, %pos half_split {offset = 0 : i64, dim = 64 : i64,
        head_dim = 64 : i64, ...} : (tensor<?x4096xf32>, ...) -> ...
    %r = tensor.expand_shape %r0 [[0], [1, 2]] output_shape [%t, 64, 64] ...
    ```
  }];
  let statistics = [
    Statistic<"numRewritten", "rewritten", "ropes over a projection's rows">,
  ];
}

def LmAssignKVLayout : Pass<"lm-assign-kv-layout", "mlir::ModuleOp"> {
  let summary = "choose how each cache is stored";
  let description = [{
    Attaches a `#lm.kv_layout` to every `lm.cache_write`: the MLA latent
    cache as DeepSeek deploys it (`fp8`: e4m3 latent in tiles with an fp32
    scale each, bf16 RoPE key — 656 bytes per token at the real dims), or
    plain `bf16`/`f32` rows; the indexer key cache likewise. Cache readers
    take the layout of the writer of their cache. A cache read only by
    sliding-window attention gets the window (a ring, not pages).

    Function arguments that KDA ops or short convolutions carry as their
    state become per-sequence state: they get an `lm.state` argument
    attribute, a `#lm.state_layout` of `state-dtype`, and the KDA ops the
    same layout.
  }];
  let options = [
    Option<"kvCacheDtype", "kv-cache-dtype", "std::string", "\"fp8\"",
           "storage of the caches: fp8, bf16 or f32">,
    Option<"pageSize", "page-size", "int64_t", "64",
           "tokens per cache page">,
    Option<"stateDtype", "state-dtype", "std::string", "\"f32\"",
           "storage of per-sequence recurrent state: f32 or bf16">,
  ];
}

def LmTile : Pass<"lm-tile", "mlir::ModuleOp"> {
  let summary = "choose the work split of each matmul per phase";
  let description = [{
    For `target=cpu`, records on every `lm.matmul` and `lm.fp8_matmul` a
    `tile = [rows, cols]`: how many output rows and columns one job of the
    thread pool computes. `@prefill` is compute-bound, so its tiles are
    large enough to reuse weights across many rows from cache; `@decode`
    multiplies a few rows by every weight, is bound by the weight stream,
    and gets narrow column tiles so that every core streams its own slice
    of each matrix.

    For `target=cuda`, records on every `lm.fp8_matmul` the FP8 GEMM runs
    (128 x 128 weight blocks, more rows than the decode GEMVs take) a
    `cuda_tile = [rows, columns, stages, splits]`: the block's rows of x
    (64 or 128), its output columns, the blocks of K in flight and the
    split of K, which the cost model of
    `runtime/devices/cuda/GemmTiles.h` chooses for the phase's most rows
    (`max-batch` for `@decode`, `max-tokens` for `@prefill`, times the
    input's static leading dimensions) on `sms` multiprocessors.
    `plan-specialize-library-kernels` has NVRTC instantiate the kernel for
    it and the device launches that instantiation with the tile's grid.
    Matmuls on bf16 weights and the GEMVs of at most 8 rows keep the
    launcher's configuration.

    ```mlir
    %y = lm.fp8_matmul %x, %w, %s {block_size = array<i64: 128, 128>,
                                  cuda_tile = array<i64: 64, 128, 9, 2>}
        : (tensor<?x16384xf32>, tensor<7168x16384xf8E4M3FN>, tensor<56x128xf32>)
        -> tensor<?x7168xf32>
    ```
  }];
  let options = [
    Option<"target", "target", "std::string", "\"cpu\"", "device: cpu or cuda">,
    Option<"decodeColumns", "decode-columns", "int64_t", "64",
           "output columns per job in @decode (cpu)">,
    Option<"maxBatch", "max-batch", "int64_t", "64",
           "the most tokens a @decode step takes, one a sequence (cuda)">,
    Option<"maxTokens", "max-tokens", "int64_t", "4096",
           "the most tokens a @prefill step takes (cuda)">,
    Option<"sms", "sms", "int64_t", "132",
           "multiprocessors of the GPU the cost model plans for (cuda)">,
  ];
}

def LmCheckTarget : Pass<"lm-check-target", "mlir::ModuleOp"> {
  let summary = "reject ops the target cannot run";
  let description = [{
    Checks that every op of every function lowers either to no launch (a
    constant, a size, a weight reference, a reshape) or to a launch of a
    runtime kernel that `target` implements: the kernel of the op's name
    must be declared in `runtime/abi/Kernels.def` and name the target in its
    targets column. Each op that fails is reported at its location, naming
    the kernel and the target, so a model the target cannot serve is
    rejected at compile time rather than when its artifact loads. The
    pipeline runs it last before `lm-lower-to-plan`, on the ops the lowering
    will see; the IR is left unchanged.

    ```mlir
    // error: 'lm.kda_step' op has no runtime kernel: no declaration of
    // 'kda_step' in runtime/abi/Kernels.def, so target 'cpu' cannot run it
    %o, %s1 = lm.kda_step %q, %k, %v, %g, %beta, %s0 : ...
    ```
  }];
  let options = [
    Option<"target", "target", "std::string", "\"cpu\"",
           "the target the module is compiled for: cpu or cuda">,
  ];
  let statistics = [
    Statistic<"numLaunching", "launching-ops",
              "ops checked that lower to a runtime kernel launch">,
  ];
}

def LmLowerToPlan : Pass<"lm-lower-to-plan", "mlir::ModuleOp"> {
  let summary = "lower lm functions to plan steps of kernel launches";
  let description = [{
    Turns each function into a `plan.step` whose size argument is the token
    count: every tensor becomes a `plan.buffer` (reshapes alias their
    source), every lm op a `plan.launch` of the device's library kernel with
    the op's attributes, weights become `plan.weight`s laid out in one
    section, caches `plan.cache_pool`s; each kernel is declared once as a
    `plan.kernel` of `target`. Offsets are left for `plan-assign-workspace`.
    A step is planned for `max-tokens` tokens, but `@decode`, which runs one
    token per sequence, for `min(max-tokens, max-batch)` when `max-batch`
    is given: its arena then holds a batch of rows, not a prefill chunk's.
  }];
  let options = [
    Option<"maxTokens", "max-tokens", "int64_t", "4096",
           "the most tokens one step processes">,
    Option<"maxBatch", "max-batch", "int64_t", "0",
           "sequences served at once: @decode's most tokens (0: max-tokens)">,
    Option<"kvCacheTokens", "kv-cache-tokens", "int64_t", "0",
           "token rows each paged cache pool holds for all sequences "
           "together, rounded up to pages (0: max_batch x max_seq_len)">,
    Option<"target", "target", "std::string", "\"cpu\"",
           "the device the declared kernels run on: cpu or cuda">,
  ];
  let dependentDialects = ["::daybreak::plan::PlanDialect",
                           "::mlir::memref::MemRefDialect",
                           "::mlir::LLVM::LLVMDialect",
                           "::mlir::scf::SCFDialect"];
}

def PlanOverlapConversions
    : Pass<"plan-overlap-conversions", "mlir::ModuleOp"> {
  let summary = "run the MXFP4 all-expert conversions on the side queue, early";
  let description = [{
    Moves each `mxfp4_to_fp8_all_experts` launch (the online route's
    conversion of every expert, `lm-mxfp4-route{overlap}`) as early in its
    step as its data allow: past every launch that neither writes what it
    reads (weights, which nothing writes) nor touches what it writes (its
    workspace, which `lm-lower-to-plan` alternates between two, so the
    conversion for layer l + 1 follows the expert matmul of layer l - 1
    that reads the same workspace). It then runs on the side queue
    (`queue = 1`) beside the main launches in between (the previous layer's
    expert GEMMs, the attention and routing of its own), and the first
    later launch that touches its workspace waits for it: `join_queue = n`,
    its place among the step's side launches plus one (the side queue runs
    in program order, so that covers the ones before it, and none after).
    Buffer definitions it needs move with it; it does not pass another side
    launch. A conversion that cannot move stays on the main queue.
    `plan-assign-workspace` keeps what a side launch touches live until its
    join.

    ```mlir
    plan.launch @expert_matmul.7 ...             // layer l - 1, workspace 0
    plan.launch @mxfp4_to_fp8_all_experts.9 ... {queue = 1 : i64}   // l + 1
    ...                                           // layer l
    plan.launch @mxfp4_to_fp8_experts.8 ... {join_queue = 3 : i64}  // l + 1
    ```
  }];
  let statistics = [
    Statistic<"numOverlapped", "num-overlapped",
              "conversions moved to the side queue">,
  ];
}

def PlanAssignWorkspace : Pass<"plan-assign-workspace", "mlir::ModuleOp"> {
  let summary = "place each step's buffers in one arena by liveness";
  let description = [{
    Computes each buffer's live range over the step's launches and gives it
    a 256-byte-aligned offset so that buffers live at the same time never
    overlap, first fit by decreasing size. Buffers of one name are one
    allocation, sized for the largest and live over all of their uses:
    reshapes (aliases of their source) and the MXFP4 online route's
    workspace (`mxfp4_workspace.*`), which every MoE layer reuses. What a
    side-queue launch (`queue = 1`) touches stays live until the launch
    that joins it (`join_queue = 1`; the step's end without one), since it
    runs beside the launches in between. Sets the step's arena size to the
    peak.
  }];
  let statistics = [
    Statistic<"peakBytes", "peak-bytes", "largest arena over the steps">,
  ];
}

def PlanSpecializeLibraryKernels
    : Pass<"plan-specialize-library-kernels", "mlir::ModuleOp"> {
  let summary = "compile the CUDA library kernels for the plan's shapes";
  let description = [{
    The CUDA target's last pass on plan. Compiles the library kernels'
    source (runtime/devices/cuda/CudaKernels.cu, embedded in the compiler)
    with NVRTC for `chip`: the shape-generic kernels plus one instantiation
    of a kernel template per distinct shape the plan launches it with (the
    hidden size of each rms_norm, the reduction dim of each fp32 decode
    matmul, the widths of the DSA indexer and of sparse attention). Each
    launch an instantiation serves gets a `specialized` attribute naming the
    instantiation's entry point, and the compiled PTX is recorded as
    `plan.code_image @library` (replacing one already there), which the
    target's serialisation writes into the artifact and assembles with
    ptxas. Fails when this build has no NVRTC.

    ```mlir
    plan.code_image @library format "ptx" arch "sm_90a"
        instantiations {"daybreak_rms_norm_t<128>" = "_Z19daybreak_rms_norm_tILi128EE"}
        code "..."
    plan.launch @rms_norm.3 [%tokens] ... {eps = 1.0e-06 : f64, num_results = 1 : i64,
        specialized = "_Z19daybreak_rms_norm_tILi128EE"}
    ```
  }];
  let options = [
    Option<"chip", "chip", "std::string", "\"sm_90a\"",
           "the GPU architecture NVRTC compiles for">,
  ];
  let dependentDialects = ["::daybreak::plan::PlanDialect"];
  let statistics = [
    Statistic<"numInstantiations", "instantiations",
              "template instantiations compiled">,
    Statistic<"numSpecialized", "specialized-launches",
              "launches an instantiation serves">,
  ];
}

#endif // DAYBREAK_PASSES_TD
