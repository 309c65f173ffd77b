//===- Pipeline.h - The compile pipeline and its phases ---------*- C++ -*-===//
//
// checkpoint --import--> lm --lm passes--> lm (folded, laid out, checked
//            for the target) --lower--> plan --workspace, target passes-->
//            plan --target serialises its code, emit--> artifact
// `compileTo` stops after a phase and prints its IR. Each phase boundary is
// checked by the MLIR verifier.
//
//===----------------------------------------------------------------------===//

#ifndef DAYBREAK_COMPILER_PIPELINE_PIPELINE_H
#define DAYBREAK_COMPILER_PIPELINE_PIPELINE_H

#include "compiler/pipeline/Limits.h"
#include "compiler/reference/Evaluator.h"

#include "mlir/Pass/PassManager.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/raw_ostream.h"

#include <functional>
#include <optional>
#include <string>

namespace daybreak::pipeline {

enum class Phase {
  Lm,       ///< the importer's lm IR
  Plan,     ///< after lowering, workspace planning and the target's passes
  Llvm,     ///< the generated kernels as optimised LLVM IR (--target=cpu)
  Ptx,      ///< the generated kernels as PTX (--target=cuda)
  Artifact, ///< the .daybreak file
};

/// Parses "lm", "plan", "llvm", "ptx", "artifact".
std::optional<Phase> parsePhase(llvm::StringRef name);
/// The name parsePhase reads.
llvm::StringRef phaseName(Phase phase);

struct Options {
  std::string checkpoint;
  std::string output;
  /// A target's name (compiler/targets/Target.h: getTarget).
  std::string target = "cpu";
  Phase compileTo = Phase::Artifact;
  /// Serving limits; 0 leaves the choice to `compile`, which derives it from
  /// the model (see `kDefaultMaxSeqLenCap`) and reports it.
  int64_t maxSeqLen = 0;
  int64_t maxBatch = 0;
  int64_t maxTokens = 0;
  std::string kvCacheDtype = "fp8";
  int64_t pageSize = 64;
  /// Token rows the paged caches hold for all sequences together (0:
  /// maxBatch x maxSeqLen, every sequence at full length).
  int64_t kvCacheTokens = 0;
  /// Rows of logits a prefill step computes (lm-select-logit-rows; at
  /// max_tokens, every row, and the pass does not run).
  int64_t maxLogitRows = 0;
  /// Per-sequence recurrent state storage: "f32" or "bf16".
  std::string stateDtype = "f32";
  /// How MXFP4 experts are stored and read: "online", "offline" or
  /// "direct" (lm-mxfp4-route); empty: the target's default.
  std::string mxfp4Route;
  /// The online route converts in the decode step too (by default decode
  /// reads the packed experts).
  bool mxfp4ConvertInDecode = false;
  /// The online route converts in the steps other than decode
  /// (lm-mxfp4-route's convert-in-prefill); unset: the target's choice
  /// (the CPU converts, CUDA reads the packed experts in every step).
  std::optional<bool> mxfp4ConvertInPrefill;
  /// The online route converts every expert, on the side queue beside the
  /// layer before, in steps that select nearly all of them
  /// (lm-mxfp4-route's overlap, plan-overlap-conversions); unset: the
  /// target's choice (off on both).
  std::optional<bool> mxfp4Overlap;
  /// Keep checkpoint tensors in the checkpoint's files (--weights=reference).
  bool weightsByReference = false;
  /// Tensor- and expert-parallel ranks (--tensor-parallel,
  /// --expert-parallel; each 1 or ranks()): `compile` builds one plan a
  /// rank, each over its shards of the weights, and writes each to
  /// artifact::rankArtifactPath(output, r, n) (docs/parallel.md).
  int64_t tensorParallel = 1, expertParallel = 1;
  int64_t ranks() const {
    return tensorParallel > expertParallel ? tensorParallel : expertParallel;
  }
  /// The rank being compiled (set by `compile` for each).
  int64_t rank = 0;
  /// Called on the pass manager before it runs: the tool applies MLIR's
  /// pass-manager command-line options there (--mlir-print-ir-after-all,
  /// --mlir-timing, ...), so pipeline code reads no global option.
  std::function<mlir::LogicalResult(mlir::PassManager &)> configurePassManager;
};

/// lm (imported) to lm ready for lowering: weight folding, KV layouts,
/// fusion, then the passes of options.target (tiling, the legality check).
/// An unknown target fails when the pipeline runs, naming it.
void buildLmPipeline(mlir::OpPassManager &pm, const Options &options,
                     ref::WeightProvider weights);
/// lm to plan: lowering, workspace planning, then the target's passes on
/// plan (CUDA: library kernels specialised for the shapes). Needs
/// options.maxTokens chosen (`compile` chooses the limits left at 0 before
/// building it).
void buildLowerToPlanPipeline(mlir::OpPassManager &pm, const Options &options);

/// Runs the whole pipeline; IR phases print to `out`, the artifact goes to
/// options.output (one a rank under tensor parallelism), and the memory
/// plan is reported on `log`.
llvm::Error compile(const Options &options, llvm::raw_ostream &out,
                    llvm::raw_ostream &log);

} // namespace daybreak::pipeline

#endif // DAYBREAK_COMPILER_PIPELINE_PIPELINE_H
