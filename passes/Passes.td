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
  }];
  let options = [
    Option<"checkpoint", "checkpoint", "std::string", /*default=*/"\"\"",
           "checkpoint folder the weights' sources are read from">,
  ];
  let statistics = [
    Statistic<"numFolded", "folded", "weight values computed at compile time">,
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
    Records on every `lm.matmul` and `lm.fp8_matmul` a `tile = [rows,
    cols]`: how many output rows and columns one job of the device computes.
    `@prefill` is compute-bound, so its tiles are large enough to reuse
    weights across many rows from cache; `@decode` multiplies a few rows by
    every weight, is bound by the weight stream, and gets narrow column tiles
    so that every core streams its own slice of each matrix.

    Only the CPU kernels read tiles (the thread pool's jobs). For
    `target=cuda` the pass records none and says so in a remark: the CUDA
    library matmuls size their own grids from the shapes and the GPU's
    occupancy (CudaKernels::matmul), so a tile here would be read by nothing.
  }];
  let options = [
    Option<"target", "target", "std::string", "\"cpu\"", "device: cpu or cuda">,
    Option<"decodeColumns", "decode-columns", "int64_t", "64",
           "output columns per job in @decode">,
  ];
}

def LmLowerToPlan : Pass<"lm-lower-to-plan", "mlir::ModuleOp"> {
  let summary = "lower lm functions to plan steps of kernel launches";
  let description = [{
    Turns each function into a `plan.step` whose size argument is the token
    count: every tensor becomes a `plan.buffer` (reshapes alias their
    source), every lm op a `plan.launch` of the device's library kernel with
    the op's attributes, weights become `plan.weight`s laid out in one
    section, caches `plan.cache_pool`s. Offsets are left for
    `plan-assign-workspace`.
  }];
  let options = [
    Option<"maxTokens", "max-tokens", "int64_t", "4096",
           "the most tokens one step processes">,
    Option<"kvCacheTokens", "kv-cache-tokens", "int64_t", "0",
           "token rows each paged cache pool holds for all sequences "
           "together, rounded up to pages (0: max_batch x max_seq_len)">,
  ];
  let dependentDialects = ["::daybreak::plan::PlanDialect",
                           "::mlir::memref::MemRefDialect",
                           "::mlir::LLVM::LLVMDialect",
                           "::mlir::scf::SCFDialect"];
}

def PlanAssignWorkspace : Pass<"plan-assign-workspace", "mlir::ModuleOp"> {
  let summary = "place each step's buffers in one arena by liveness";
  let description = [{
    Computes each buffer's live range over the step's launches (aliases
    share one range) and gives it a 256-byte-aligned offset so that buffers
    live at the same time never overlap, first fit by decreasing size. Sets
    the step's arena size to the peak.
  }];
  let statistics = [
    Statistic<"peakBytes", "peak-bytes", "largest arena over the steps">,
  ];
}

#endif // DAYBREAK_PASSES_TD
