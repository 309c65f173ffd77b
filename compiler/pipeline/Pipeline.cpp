//===- Pipeline.cpp - The compile pipeline and its phases -----------------===//

#include "compiler/pipeline/Pipeline.h"

#include "compiler/artifact/ArtifactEmitter.h"
#include "compiler/importers/HfConfig.h"
#include "compiler/models/ModelRegistry.h"
#include "compiler/reference/CheckpointWeights.h"
#include "compiler/targets/Target.h"
#include "passes/Passes.h"
#include "runtime/artifact/ArtifactFile.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Transforms/Passes.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

#include <map>
#include <set>

using namespace mlir;
using namespace daybreak;
using namespace daybreak::pipeline;

static llvm::Error errorf(const llvm::Twine &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
}

std::optional<Phase> pipeline::parsePhase(llvm::StringRef name) {
  return llvm::StringSwitch<std::optional<Phase>>(name)
      .Case("lm", Phase::Lm)
      .Case("plan", Phase::Plan)
      .Case("llvm", Phase::Llvm)
      .Case("ptx", Phase::Ptx)
      .Case("artifact", Phase::Artifact)
      .Default(std::nullopt);
}

llvm::StringRef pipeline::phaseName(Phase phase) {
  switch (phase) {
  case Phase::Lm:
    return "lm";
  case Phase::Plan:
    return "plan";
  case Phase::Llvm:
    return "llvm";
  case Phase::Ptx:
    return "ptx";
  case Phase::Artifact:
    return "artifact";
  }
  llvm_unreachable("unknown phase");
}

void pipeline::buildLmPipeline(OpPassManager &pm, const Options &options,
                               ref::WeightProvider weights) {
  // MXFP4 experts take their route first: the offline route's conversion is
  // a weight-only subgraph for lm-fold-weights to compute.
  const targets::Target *target = targets::getTarget(options.target);
  LmMxfp4RouteOptions route;
  route.route = !options.mxfp4Route.empty() ? options.mxfp4Route
                : target ? target->getDefaultMxfp4Route().str()
                         : std::string("direct");
  route.maxTokens = options.maxTokens;
  route.convertInDecode = options.mxfp4ConvertInDecode;
  route.convertInPrefill = options.mxfp4ConvertInPrefill.value_or(
      !target || target->getDefaultMxfp4ConvertInPrefill());
  route.overlap =
      options.mxfp4Overlap.value_or(target && target->getDefaultMxfp4Overlap());
  pm.addPass(createLmMxfp4Route(route));
  // Absorbed MLA matrices, dequantised experts and the offline route's
  // converted experts are computed once here, not per step.
  pm.addPass(createLmFoldWeightsPass(std::move(weights)));
  // The builders emit each layer's own copy of what layers share (the
  // indexer's key bounds, positions + 1; k-pool indices): one launch each.
  pm.addPass(createCSEPass());
  // A GLU's gate and up projections of one input: one launch over both
  // checkpoint tensors, stacked.
  pm.addPass(createLmFuseGateUp());
  // Other projections of one input (MLA's q_a, kv_a and the indexer's wk):
  // one launch, where each part is read in place.
  pm.addPass(createLmFuseProjections());
  // MLA's query and key rows are sliced apart after their rope: each slice
  // reads what it needs, so the lowering copies none of them.
  pm.addNestedPass<func::FuncOp>(createLmNarrowRope());
  // Prefill computes the LM head for the rows the runtime asks for, not for
  // every token.
  if (options.maxLogitRows > 0 && options.maxLogitRows < options.maxTokens) {
    LmSelectLogitRowsOptions rows;
    rows.maxRows = options.maxLogitRows;
    pm.addPass(createLmSelectLogitRows(rows));
  }
  // The runtime allocates caches from the layouts chosen here.
  LmAssignKVLayoutOptions layout;
  layout.kvCacheDtype = options.kvCacheDtype;
  layout.pageSize = options.pageSize;
  layout.stateDtype = options.stateDtype;
  pm.addPass(createLmAssignKVLayout(layout));
  // mHC's collapses take their sublayer's norm and the write-back before
  // them; pointwise chains become one generated kernel each.
  pm.addNestedPass<func::FuncOp>(createLmFuseMhc());
  // A residual add and the norm that reads it: one launch, where the target
  // implements it.
  if (target) {
    LmFuseAddNormOptions addNorm;
    addNorm.target = options.target;
    pm.addNestedPass<func::FuncOp>(createLmFuseAddNorm(addNorm));
  }
  // The norms and RoPE that compute a cache row: the write's prologue.
  pm.addNestedPass<func::FuncOp>(createLmFuseCacheWrite());
  // A query's RoPE: the indexer's prologue.
  pm.addNestedPass<func::FuncOp>(createLmFuseQueryRope());
  // The other ropes of a projection's heads rotate its rows, which a column
  // view can then hold (gpt-oss's q).
  pm.addNestedPass<func::FuncOp>(createLmRopeRows());
  // Projections that reach a column view only now that their norm or RoPE
  // became a cache write's prologue or rotates rows (gpt-oss's q, k and v):
  // one launch.
  pm.addPass(createLmFuseProjections());
  pm.addNestedPass<func::FuncOp>(createLmFuseElementwise());
  // The target's own passes (tiling for its kernels), then its legality
  // check on the ops the lowering will launch.
  if (target) {
    target->buildLmPipeline(pm, options.maxBatch, options.maxTokens);
  } else {
    // No such target: the check fails, naming it.
    LmCheckTargetOptions check;
    check.target = options.target;
    pm.addPass(createLmCheckTarget(check));
  }
}

void pipeline::buildLowerToPlanPipeline(OpPassManager &pm,
                                        const Options &options) {
  // One launch per op, buffers sized for the largest step.
  LmLowerToPlanOptions lower;
  lower.maxTokens = options.maxTokens;
  lower.maxBatch = options.maxBatch;
  lower.kvCacheTokens = options.kvCacheTokens;
  lower.target = options.target;
  pm.addPass(createLmLowerToPlan(lower));
  // The online MXFP4 route's all-expert conversions run ahead, beside the
  // layer before theirs (before the arena is planned: it moves launches).
  pm.addPass(createPlanOverlapConversions());
  // Buffers share the arena by liveness.
  pm.addPass(createPlanAssignWorkspace());
  // What the target does with the finished plan (CUDA: its library kernels
  // compiled for the plan's shapes).
  if (const targets::Target *target = targets::getTarget(options.target))
    target->buildPlanPipeline(pm);
}

static std::string formatBytes(uint64_t bytes) {
  if (bytes >= (1ull << 30))
    return llvm::formatv("{0:f2} GiB", bytes / double(1ull << 30)).str();
  if (bytes >= (1ull << 20))
    return llvm::formatv("{0:f2} MiB", bytes / double(1ull << 20)).str();
  if (bytes >= (1ull << 10))
    return llvm::formatv("{0:f2} KiB", bytes / double(1ull << 10)).str();
  return llvm::formatv("{0} B", bytes).str();
}

/// The memory plan's line on mHC's residual streams ("" for a model without
/// them): per step, how many stream buffers the arena holds, their size at
/// the step's maximum tokens, and at how many offsets the workspace planner
/// placed them (each lives from one write-back to the next).
static std::string mhcStreamsText(const artifact::Manifest &manifest) {
  std::string text;
  for (const artifact::Step &step : manifest.steps()) {
    std::map<std::string, uint64_t> streams;
    std::set<uint64_t> offsets;
    for (const artifact::Buffer &buffer : step.buffers()) {
      if (!llvm::StringRef(buffer.name()).starts_with("mhc_streams."))
        continue;
      uint64_t &bytes = streams[buffer.name()];
      bytes = std::max<uint64_t>(bytes, buffer.max_bytes());
      offsets.insert(buffer.offset());
    }
    if (streams.empty())
      continue;
    uint64_t largest = 0;
    for (const auto &entry : streams)
      largest = std::max(largest, entry.second);
    text += (text.empty() ? "" : ", ") + step.name() + " " +
            std::to_string(streams.size()) + " x " + formatBytes(largest) +
            " at " + std::to_string(offsets.size()) + " offsets";
  }
  if (text.empty())
    return text;
  return "  mhc streams:      " + text +
         " (in the arena, each from one write-back to the next)\n";
}

static llvm::Error compileWith(const Options &options, const Options &given,
                               const targets::Target &target,
                               const models::ModelDefinition &model,
                               const importers::Checkpoint &checkpoint,
                               llvm::raw_ostream &out, llvm::raw_ostream &log);

llvm::Error pipeline::compile(const Options &options, llvm::raw_ostream &out,
                              llvm::raw_ostream &log) {
  const targets::Target *target = targets::getTarget(options.target);
  if (!target)
    return errorf("unsupported --target=" + options.target +
                  " (this build compiles for: " +
                  llvm::join(targets::getTargetNames(), ", ") + ")");
  if (options.compileTo == Phase::Artifact) {
    std::string unavailable = target->getArtifactUnavailableReason();
    if (!unavailable.empty())
      return errorf(unavailable);
  }
  // Each target prints its generated code in its own form.
  if ((options.compileTo == Phase::Llvm || options.compileTo == Phase::Ptx) &&
      phaseName(options.compileTo) != target->getCodePhase())
    return errorf("--compile-to=" + phaseName(options.compileTo) +
                  " is not a phase of --target=" + target->getName() +
                  ", whose generated kernels print with --compile-to=" +
                  target->getCodePhase());
  if (options.maxTokens < 0 || options.maxBatch < 0 || options.maxSeqLen < 0)
    return errorf("--max-seq-len, --max-batch and --max-tokens must be "
                  "positive");
  // The artifact is written last, after minutes of compiling: its folder is
  // checked first.
  if (options.compileTo == Phase::Artifact) {
    llvm::SmallString<256> folder(options.output);
    llvm::sys::path::remove_filename(folder);
    if (folder.empty())
      folder = ".";
    if (!llvm::sys::fs::is_directory(folder))
      return errorf(options.output + ": the folder '" + folder.str().str() +
                    "' does not exist");
    if (llvm::sys::fs::access(folder, llvm::sys::fs::AccessMode::Write))
      return errorf(options.output + ": the folder '" + folder.str().str() +
                    "' is not writable");
  }
  if (options.kvCacheTokens < 0)
    return errorf("--kv-cache-tokens must be positive");
  if (options.maxLogitRows < 0)
    return errorf("--max-logit-rows must be positive");
  // The family the config's model_type names parses it (model registry).
  auto model = models::loadModel(options.checkpoint);
  if (!model)
    return model.takeError();
  const models::ModelDefinition *config = model->get();
  auto checkpoint = importers::Checkpoint::open(options.checkpoint);
  if (!checkpoint)
    return checkpoint.takeError();
  llvm::Expected<Limits> limits =
      chooseLimits({options.maxSeqLen, options.maxBatch, options.maxTokens,
                    options.kvCacheTokens, options.maxLogitRows},
                   config->maxPositions(), log);
  if (!limits)
    return limits.takeError();
  Options clamped = options;
  clamped.maxSeqLen = limits->maxSeqLen;
  clamped.maxBatch = limits->maxBatch;
  clamped.maxTokens = limits->maxTokens;
  clamped.kvCacheTokens = limits->kvCacheTokens;
  clamped.maxLogitRows = limits->maxLogitRows;
  if (options.tensorParallel < 1 || options.expertParallel < 1)
    return errorf("--tensor-parallel and --expert-parallel must be at least 1");
  // One plan a rank, each over its shards, in rank order.
  const int64_t ranks = options.ranks();
  for (int64_t r = 0; r < ranks; ++r) {
    Options rank = clamped;
    rank.rank = r;
    rank.output = artifact::rankArtifactPath(options.output, r, ranks);
    if (ranks > 1 && options.compileTo != Phase::Artifact)
      out << "// rank " << r << " of " << ranks << "\n";
    if (llvm::Error err =
            compileWith(rank, options, *target, *config, *checkpoint, out, log))
      return err;
  }
  return llvm::Error::success();
}

/// `options` holds the limits chosen; `given` those the caller asked for.
static llvm::Error compileWith(const Options &options, const Options &given,
                               const targets::Target &target,
                               const models::ModelDefinition &configValue,
                               const importers::Checkpoint &checkpointValue,
                               llvm::raw_ostream &out, llvm::raw_ostream &log) {
  const models::ModelDefinition *config = &configValue;
  const importers::Checkpoint *checkpoint = &checkpointValue;

  MLIRContext context;
  context.loadDialect<plan::PlanDialect, memref::MemRefDialect>();
  // Every diagnostic goes to `log`, as MLIR's default handler prints errors
  // (location, severity, message): remarks too, so that a target's pass
  // saying what it does not do reaches the user.
  ScopedDiagnosticHandler diagnostics(&context, [&](Diagnostic &diag) {
    if (!isa<UnknownLoc>(diag.getLocation()))
      log << diag.getLocation() << ": ";
    switch (diag.getSeverity()) {
    case DiagnosticSeverity::Error:
      log << "error: ";
      break;
    case DiagnosticSeverity::Warning:
      log << "warning: ";
      break;
    case DiagnosticSeverity::Remark:
      log << "remark: ";
      break;
    case DiagnosticSeverity::Note:
      log << "note: ";
      break;
    }
    log << diag << "\n";
    log.flush();
    return success();
  });
  models::BuildOptions build;
  build.maxSeqLen = options.maxSeqLen;
  build.maxBatch = options.maxBatch;
  build.tensorParallel = options.tensorParallel;
  build.expertParallel = options.expertParallel;
  build.rank = options.rank;
  auto module = config->build(context, *checkpoint, build);
  if (!module)
    return module.takeError();
  if (failed(verify(**module)))
    return errorf("the imported lm IR does not verify");
  if (options.compileTo == Phase::Lm) {
    (*module)->print(out, OpPrintingFlags().elideLargeElementsAttrs(16));
    return llvm::Error::success();
  }

  PassManager pm(&context);
  buildLmPipeline(pm, options, ref::checkpointWeights(*checkpoint));
  buildLowerToPlanPipeline(pm, options);
  if (options.configurePassManager &&
      failed(options.configurePassManager(pm)))
    return errorf("invalid pass manager options");
  if (failed(pm.run(**module)))
    return errorf("compilation failed (see the diagnostics above)");
  if (options.compileTo == Phase::Plan) {
    (*module)->print(out, OpPrintingFlags().elideLargeElementsAttrs(16));
    return llvm::Error::success();
  }

  if (options.compileTo == Phase::Llvm || options.compileTo == Phase::Ptx)
    return target.printCode(**module, out);

  if (options.output.empty())
    return errorf("no output file (-o)");
  auto configText =
      llvm::MemoryBuffer::getFile(options.checkpoint + "/config.json");
  artifact::EmitInfo info;
  info.modelType = config->modelType().str();
  if (configText)
    info.configJson = (*configText)->getBuffer().str();
  info.vocabSize = config->vocabSize();
  info.eosTokenIds.assign(config->eosTokenIds().begin(),
                          config->eosTokenIds().end());
  info.target = options.target;
  info.tensorParallel = options.tensorParallel;
  info.expertParallel = options.expertParallel;
  info.rank = options.rank;
  info.weightsByReference = options.weightsByReference;
  // The target's code images: generated kernels compiled now, and what its
  // passes recorded in the plan.
  if (llvm::Error err = target.serialize(**module, info, log))
    return err;
  auto manifest =
      artifact::emitArtifact(**module, *checkpoint, info, options.output);
  if (!manifest)
    return manifest.takeError();

  // Where each limit came from: the caller, or the model and the defaults.
  auto origin = [](int64_t asked, const llvm::Twine &chosen) {
    return asked ? std::string("given") : ("default: " + chosen).str();
  };
  const artifact::MemoryPlan &m = manifest->memory();
  log << "memory plan (" << options.output;
  if (options.ranks() > 1)
    log << ", rank " << options.rank << " of " << options.ranks() << " "
        << (options.tensorParallel == 1   ? "expert-parallel"
            : options.expertParallel == 1 ? "tensor-parallel"
                                          : "tensor- and expert-parallel")
        << " ranks: its shards";
  log << ")\n"
      << "  limits:           --max-seq-len " << options.maxSeqLen << " ("
      << origin(given.maxSeqLen, "the model's max_position_embeddings " +
                                     Twine(config->maxPositions()) +
                                     ", at most " + Twine(kDefaultMaxSeqLenCap))
      << "), --max-batch " << options.maxBatch << " ("
      << origin(given.maxBatch, Twine(kDefaultMaxBatch)) << "), --max-tokens "
      << options.maxTokens << " ("
      << origin(given.maxTokens, "one full sequence per step")
      << "), --max-logit-rows " << options.maxLogitRows << " ("
      << origin(given.maxLogitRows, "--max-batch, at least " +
                                        Twine(kDefaultMaxLogitRows) +
                                        ", at most --max-tokens")
      << (options.maxLogitRows < options.maxTokens
              ? "; prefill computes logits for the rows asked for"
              : "; every row")
      << ")\n"
      << "  weights:          " << formatBytes(m.stored_weight_bytes())
      << " stored, " << formatBytes(m.weight_bytes())
      << " on the device, as stored:\n";
  if (manifest->external_files_size()) {
    uint64_t referenced = 0;
    for (const artifact::ExternalFile &f : manifest->external_files())
      referenced += f.size();
    log << "    by reference: " << manifest->external_files_size()
        << " checkpoint files of " << formatBytes(referenced)
        << " (size and header checked at load; daybreak-run verify hashes "
           "them whole)\n";
  }
  for (const artifact::WeightPrecision &p : m.weight_precisions())
    log << "    " << artifact::DType_Name(p.dtype()) << ": "
        << formatBytes(p.bytes()) << " in " << p.tensors() << " tensors, "
        << artifact::weightOriginText(p) << "\n";
  if (!m.mxfp4_route().empty()) {
    int64_t saved = int64_t(m.mxfp4_offline_bytes()) -
                    int64_t(m.mxfp4_stored_bytes() + m.mxfp4_workspace_bytes());
    log << "  mxfp4 experts:    route " << artifact::mxfp4RouteText(*manifest)
        << ", " << formatBytes(m.mxfp4_stored_bytes()) << " stored, workspace "
        << formatBytes(m.mxfp4_workspace_bytes()) << " ("
        << artifact::mxfp4WorkspaceText(*manifest)
        << (m.mxfp4_workspace_bytes() ? ", in the arena" : "")
        << "); offline would store " << formatBytes(m.mxfp4_offline_bytes())
        << ": " << (saved >= 0 ? "saves " : "costs ")
        << formatBytes(uint64_t(saved >= 0 ? saved : -saved)) << "\n";
  }
  // Each step's own arena; they share the largest.
  std::string steps;
  for (const artifact::Step &step : manifest->steps())
    steps += (steps.empty() ? "" : ", ") + step.name() + " " +
             formatBytes(step.arena_size()) + " at " +
             std::to_string(step.max_sizes_size() ? step.max_sizes(0) : 0) +
             " tokens";
  log << "  arena:            " << formatBytes(m.arena_bytes()) << " (the "
      << "largest of the steps': " << steps << ")\n"
      << mhcStreamsText(*manifest)
      << "  KV bytes / token: " << m.cache_bytes_per_token()
      << " (all layers, kv-cache-dtype " << options.kvCacheDtype << ")\n"
      << "  caches:           " << formatBytes(m.cache_bytes()) << " ("
      << options.maxBatch << " sequences x " << options.maxSeqLen
      << " tokens)\n";
  // Each kind of cache and state, as the runtime allocates it.
  std::map<std::string, std::pair<int, uint64_t>> kinds;
  for (const artifact::Cache &c : manifest->caches()) {
    uint64_t bytes = 0;
    std::string what;
    if (c.kind() == artifact::CACHE_SLOT_STATE) {
      bytes = c.slot_bytes() * manifest->max_batch();
      what = "slot state, " + std::to_string(c.slot_bytes()) +
             " B per sequence (any context length)";
    } else if (c.kind() == artifact::CACHE_WINDOW) {
      bytes = c.window_rows() * c.bytes_per_row() * manifest->max_batch();
      what = "window of " + std::to_string(c.window()) + " tokens, a ring of " +
             std::to_string(c.window_rows()) + " rows per sequence";
    } else {
      bytes = (manifest->cache_pages() + 1) * c.page_size() * c.bytes_per_row();
      what = "paged, " + std::to_string(manifest->cache_pages()) +
             " pages of " + std::to_string(c.page_size()) +
             " tokens shared by all sequences";
      if (c.row_tokens() > 1)
        what = "paged, " + std::to_string(manifest->cache_pages()) +
               " pages of " + std::to_string(c.page_size()) + " rows (" +
               std::to_string(c.page_size() * c.row_tokens()) +
               " tokens, a row per " + std::to_string(c.row_tokens()) +
               ") shared by all sequences";
    }
    std::string name = c.name().substr(0, c.name().rfind('.'));
    auto &[layers, total] = kinds[name + ": " + what];
    ++layers;
    total += bytes;
  }
  for (const auto &[what, figures] : kinds)
    log << "    " << what << ": " << figures.first << " layers, "
        << formatBytes(figures.second) << "\n";
  if (manifest->cache_pages()) {
    int64_t pagesPerSeq = 0;
    for (const artifact::Cache &c : manifest->caches())
      if (c.kind() == artifact::CACHE_PAGED) {
        // Tokens per page: rows per page times tokens per row (k-pool).
        int64_t pageTokens =
            c.page_size() * std::max<int64_t>(c.row_tokens(), 1);
        pagesPerSeq = (options.maxSeqLen + pageTokens - 1) / pageTokens;
      }
    if (pagesPerSeq)
      log << "    pages hold " << manifest->cache_pages() / pagesPerSeq
          << " of the " << options.maxBatch
          << " sequences at full length (--kv-cache-tokens)\n";
  }
  if (m.state_bytes_per_sequence())
    log << "  state / sequence: " << formatBytes(m.state_bytes_per_sequence())
        << " (all layers, state-dtype " << options.stateDtype << ")\n";
  log
      << "  total:            " << formatBytes(m.total_bytes()) << "\n";
  return llvm::Error::success();
}
