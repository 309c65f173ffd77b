//===- Pipeline.cpp - The compile pipeline and its phases -----------------===//

#include "compiler/pipeline/Pipeline.h"

#include "compiler/artifact/ArtifactEmitter.h"
#include "runtime/artifact/ArtifactFile.h"
#include "compiler/importers/HfConfig.h"
#include "compiler/importers/WeightLoader.h"
#include "compiler/models/ModelRegistry.h"
#include "compiler/targets/cpu/CpuCodegen.h"
#include "compiler/targets/cuda/CudaCodegen.h"
#include "compiler/targets/cuda/LibraryKernels.h"
#ifdef DAYBREAK_HAVE_CUDA
#include "runtime/devices/cuda/CudaKernels.h"
#endif
#include "passes/Passes.h"

#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/MemoryBuffer.h"
#include <map>

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

void pipeline::buildLmPipeline(OpPassManager &pm, const Options &options,
                               ref::WeightProvider weights) {
  // Absorbed MLA matrices and dequantised experts are computed once here,
  // not per step.
  pm.addPass(createLmFoldWeightsPass(std::move(weights)));
  // The runtime allocates caches from the layouts chosen here.
  LmAssignKVLayoutOptions layout;
  layout.kvCacheDtype = options.kvCacheDtype;
  layout.pageSize = options.pageSize;
  layout.stateDtype = options.stateDtype;
  pm.addPass(createLmAssignKVLayout(layout));
  // Pointwise chains become one generated kernel each.
  pm.addNestedPass<func::FuncOp>(createLmFuseElementwise());
  // Prefill and decode split their matmuls differently.
  LmTileOptions tile;
  tile.target = options.target;
  pm.addPass(createLmTile(tile));
}

void pipeline::buildLowerToPlanPipeline(OpPassManager &pm,
                                        const Options &options) {
  // One launch per op, buffers sized for the largest step.
  LmLowerToPlanOptions lower;
  lower.maxTokens = options.maxTokens;
  lower.kvCacheTokens = options.kvCacheTokens;
  pm.addPass(createLmLowerToPlan(lower));
  // Buffers share the arena by liveness.
  pm.addPass(createPlanAssignWorkspace());
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

static llvm::Error compileWith(const Options &options, const Options &given,
                               const models::ModelDefinition &model,
                               const importers::Checkpoint &checkpoint,
                               llvm::raw_ostream &out, llvm::raw_ostream &log);

llvm::Error pipeline::compile(const Options &options, llvm::raw_ostream &out,
                              llvm::raw_ostream &log) {
  if (options.target != "cpu" && options.target != "cuda")
    return errorf("unsupported --target=" + options.target +
                  " (this build compiles for: cpu, cuda)");
#ifndef DAYBREAK_HAVE_CUDA
  if (options.target == "cuda" && options.compileTo == Phase::Artifact)
    return errorf("--target=cuda artifacts need the CUDA kernel library, "
                  "which this build lacks (nvcc was not found when it was "
                  "built)");
#endif
  if (options.target == "cuda" && options.compileTo == Phase::Llvm)
    return errorf("--compile-to=llvm is the CPU target's phase; use ptx");
  if (options.target == "cpu" && options.compileTo == Phase::Ptx)
    return errorf("--compile-to=ptx needs --target=cuda");
  if (options.maxTokens < 0 || options.maxBatch < 0 || options.maxSeqLen < 0)
    return errorf("--max-seq-len, --max-batch and --max-tokens must be "
                  "positive");
  if (options.kvCacheTokens < 0)
    return errorf("--kv-cache-tokens must be positive");
  // The family the config's model_type names parses it (model registry).
  auto model = models::loadModel(options.checkpoint);
  if (!model)
    return model.takeError();
  const models::ModelDefinition *config = model->get();
  auto checkpoint = importers::Checkpoint::open(options.checkpoint);
  if (!checkpoint)
    return checkpoint.takeError();
  if (options.maxSeqLen > config->maxPositions())
    return errorf("--max-seq-len " + Twine(options.maxSeqLen) +
                  " exceeds the model's max_position_embeddings " +
                  Twine(config->maxPositions()));
  // Limits left at 0 are chosen here: the model's context up to the cap, and
  // a step that holds one full sequence.
  Options clamped = options;
  if (!clamped.maxSeqLen)
    clamped.maxSeqLen =
        std::min(config->maxPositions(), kDefaultMaxSeqLenCap);
  if (!clamped.maxBatch)
    clamped.maxBatch = kDefaultMaxBatch;
  if (!clamped.maxTokens)
    clamped.maxTokens = clamped.maxSeqLen;
  // The caches hold max_batch x max_seq_len tokens; a step cannot hold more.
  int64_t cacheRows;
  if (__builtin_mul_overflow(clamped.maxBatch, clamped.maxSeqLen, &cacheRows) ||
      cacheRows > (int64_t(1) << 40))
    return errorf("--max-batch " + Twine(clamped.maxBatch) +
                  " x --max-seq-len " + Twine(clamped.maxSeqLen) +
                  " cache rows exceed the supported 2^40");
  // A step never holds more tokens than the caches do.
  if (clamped.maxTokens > cacheRows) {
    log << "note: --max-tokens " << options.maxTokens << " lowered to "
        << cacheRows << ", the tokens the caches hold\n";
    clamped.maxTokens = cacheRows;
  }
  return compileWith(clamped, options, *config, *checkpoint, out, log);
}

/// `options` holds the limits chosen; `given` those the caller asked for.
static llvm::Error compileWith(const Options &options, const Options &given,
                               const models::ModelDefinition &configValue,
                               const importers::Checkpoint &checkpointValue,
                               llvm::raw_ostream &out, llvm::raw_ostream &log) {
  const models::ModelDefinition *config = &configValue;
  const importers::Checkpoint *checkpoint = &checkpointValue;

  MLIRContext context;
  context.loadDialect<plan::PlanDialect, memref::MemRefDialect>();
  models::BuildOptions build;
  build.maxSeqLen = options.maxSeqLen;
  build.maxBatch = options.maxBatch;
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
  buildLmPipeline(pm, options,
                  [&](llvm::StringRef, Type, llvm::ArrayRef<std::string> s) {
                    return importers::loadWeight(*checkpoint, s);
                  });
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

  if (options.compileTo == Phase::Ptx) {
    ModuleOp kernels = plan::findGeneratedKernels(**module);
    if (!kernels)
      return llvm::Error::success();
    auto ptx = targets::cuda::compileToPtx(kernels);
    if (!ptx)
      return ptx.takeError();
    out << *ptx;
    return llvm::Error::success();
  }

  // Generated kernels: PTX for the GPU, or through LLVM into one x86-64
  // shared object for the CPU.
  std::vector<uint8_t> cpuCode;
  std::string generatedPtx;
  if (options.target == "cuda") {
    if (ModuleOp kernels = plan::findGeneratedKernels(**module)) {
      auto ptx = targets::cuda::compileToPtx(kernels);
      if (!ptx)
        return ptx.takeError();
      generatedPtx = std::move(*ptx);
    }
  } else if (ModuleOp kernels = plan::findGeneratedKernels(**module)) {
    auto shared = targets::cpu::compileToSharedObject(
        kernels, options.compileTo == Phase::Llvm ? &out : nullptr);
    if (!shared)
      return shared.takeError();
    cpuCode = std::move(*shared);
  }
  if (options.compileTo == Phase::Llvm)
    return llvm::Error::success();

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
  info.cpuCode = std::move(cpuCode);
  info.target = options.target;
  info.weightsByReference = options.weightsByReference;
  if (options.target == "cuda") {
    // The library kernels and the generated ones, as PTX the driver
    // compiles for any GPU at load, and as sm_90a cubins when ptxas is
    // installed here (with the registers and shared memory it reports).
    // The library is the kernels specialised for this model's shapes by
    // NVRTC where the compiler has it (each served launch names its entry
    // point in `specialized`), else the prebuilt shape-generic PTX.
    std::vector<std::pair<std::string, std::string>> sources;
#ifdef DAYBREAK_HAVE_CUDA
    auto specialized = targets::cuda::specializeLibraryKernels(**module);
    if (!specialized)
      return specialized.takeError();
    if (*specialized) {
      log << "library kernels: " << (*specialized)->instantiations
          << " specialised for the model's shapes (NVRTC), serving "
          << (*specialized)->launches << " launches\n";
      sources.push_back({"library", std::move((*specialized)->ptx)});
    } else {
      sources.push_back({"library", daybreak::cuda::cudaKernelsPtx()});
    }
#endif
    if (!generatedPtx.empty())
      sources.push_back({"generated", generatedPtx});
    for (auto &[name, ptx] : sources) {
      artifact::EmitInfo::GpuModule module;
      module.name = name;
      module.arch = "sm_90a";
      module.ptx = ptx;
      auto cubin = targets::cuda::assembleWithPtxas(ptx, module.arch);
      if (!cubin)
        return cubin.takeError();
      if (*cubin) {
        module.cubin = std::move((*cubin)->bytes);
        for (const targets::cuda::KernelResources &k : (*cubin)->kernels)
          module.kernels.push_back({k.name, k.registers, k.sharedBytes,
                                    name == "generated" ? 256 : 0});
      }
      info.gpuModules.push_back(std::move(module));
    }
  }
  auto manifest =
      artifact::emitArtifact(**module, *checkpoint, info, options.output);
  if (!manifest)
    return manifest.takeError();

  // Where each limit came from: the caller, or the model and the defaults.
  auto origin = [](int64_t asked, const llvm::Twine &chosen) {
    return asked ? std::string("given") : ("default: " + chosen).str();
  };
  const artifact::MemoryPlan &m = manifest->memory();
  log << "memory plan (" << options.output << ")\n"
      << "  limits:           --max-seq-len " << options.maxSeqLen << " ("
      << origin(given.maxSeqLen, "the model's max_position_embeddings " +
                                     Twine(config->maxPositions()) +
                                     ", at most " + Twine(kDefaultMaxSeqLenCap))
      << "), --max-batch " << options.maxBatch << " ("
      << origin(given.maxBatch, Twine(kDefaultMaxBatch)) << "), --max-tokens "
      << options.maxTokens << " ("
      << origin(given.maxTokens, "one full sequence per step") << ")\n"
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
  log << "  arena:            " << formatBytes(m.arena_bytes()) << " (at "
      << options.maxTokens << " tokens per step)\n"
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
      if (c.kind() == artifact::CACHE_PAGED)
        pagesPerSeq = (options.maxSeqLen + c.page_size() - 1) / c.page_size();
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
