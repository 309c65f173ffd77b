//===- daybreak-compile.cpp - Compile a checkpoint into an artifact -------===//
//
// daybreak-compile <checkpoint-dir> -o model.daybreak [--target=cpu]
//   [--compile-to=lm|plan|llvm|ptx|artifact] [--max-seq-len N] [--max-batch B]
//   [--max-tokens T] [--max-logit-rows R] [--kv-cache-dtype=fp8|bf16|f32]
//   [--mxfp4-route=online|offline|direct] [--mxfp4-overlap[=false]]
//   [--mxfp4-convert-in-prefill[=false]]
//
//===----------------------------------------------------------------------===//

#include "compiler/pipeline/Pipeline.h"
#include "passes/Passes.h"
#include "runtime/support/OutOfMemory.h"

#include "mlir/Pass/PassManager.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/InitLLVM.h"

using namespace daybreak;
namespace cl = llvm::cl;

static cl::OptionCategory compileOptions("daybreak-compile options");

static cl::opt<std::string> checkpoint(cl::Positional, cl::Required,
                                       cl::desc("<checkpoint-dir>"),
                                       cl::cat(compileOptions));
static cl::opt<std::string> output("o", cl::desc("output artifact"),
                                   cl::value_desc("file"),
                                   cl::cat(compileOptions));
static cl::opt<std::string> target("target", cl::desc("cpu or cuda"),
                                   cl::init("cpu"), cl::cat(compileOptions));
static cl::opt<std::string>
    compileTo("compile-to",
              cl::desc("stop after a phase: lm, plan, llvm, ptx, artifact"),
              cl::init("artifact"), cl::cat(compileOptions));
// Limits left out are chosen from the model (pipeline::compile reports
// them); their values are read by pipeline::parseLimit.
static cl::opt<std::string>
    maxSeqLen("max-seq-len",
              cl::desc("longest sequence served (default: the model's "
                       "max_position_embeddings, at most 4096)"),
              cl::value_desc("N"), cl::cat(compileOptions));
static cl::opt<std::string>
    maxBatch("max-batch", cl::desc("sequences served at once (default: 8)"),
             cl::value_desc("N"), cl::cat(compileOptions));
static cl::opt<std::string>
    maxTokens("max-tokens",
              cl::desc("most tokens in one step (default: --max-seq-len)"),
              cl::value_desc("N"), cl::cat(compileOptions));
static cl::opt<std::string> maxLogitRows(
    "max-logit-rows",
    cl::desc("rows of logits a prefill step computes: the last prompt row "
             "of each sequence it finishes, or, for scoring, every row of "
             "steps this long (default: --max-batch, at least 256, at most "
             "--max-tokens)"),
    cl::value_desc("N"), cl::cat(compileOptions));
static cl::opt<std::string>
    kvCacheDtype("kv-cache-dtype", cl::desc("cache storage: fp8, bf16, f32"),
                 cl::init("fp8"), cl::cat(compileOptions));
static cl::opt<std::string> kvCacheTokens(
    "kv-cache-tokens",
    cl::desc("token rows the paged caches hold for all sequences together, "
             "rounded up to pages (default: --max-batch x --max-seq-len); "
             "fewer serve more sequences than fit at full length"),
    cl::value_desc("N"), cl::cat(compileOptions));
static cl::opt<std::string> tensorParallel(
    "tensor-parallel",
    cl::desc("split the model over N tensor-parallel ranks: one artifact a "
             "rank, -o's name with .rank{r}-of-{N} (default: 1)"),
    cl::value_desc("N"), cl::cat(compileOptions));
static cl::opt<std::string> expertParallel(
    "expert-parallel",
    cl::desc("partition the routed experts, whole, over N ranks: alone, or "
             "over the --tensor-parallel ranks (then N equals theirs); one "
             "artifact a rank (default: 1)"),
    cl::value_desc("N"), cl::cat(compileOptions));
static cl::opt<std::string>
    stateDtype("state-dtype",
               cl::desc("per-sequence recurrent state storage: f32, bf16"),
               cl::init("f32"), cl::cat(compileOptions));

static cl::opt<std::string> mxfp4Route(
    "mxfp4-route",
    cl::desc("how MXFP4 experts are stored and read: online (packed, the "
             "step's experts converted to FP8 into a shared workspace), "
             "offline (converted to FP8 at compile time), direct (packed, "
             "decoded in the matmul); default: online on cuda, direct on "
             "cpu"),
    cl::init(""), cl::cat(compileOptions));

static cl::opt<bool> mxfp4ConvertInDecode(
    "mxfp4-convert-in-decode",
    cl::desc("online MXFP4 route: convert the selected experts in the decode "
             "step too (by default decode reads them packed, docs/mxfp4.md)"),
    cl::init(false), cl::cat(compileOptions));

static cl::opt<bool> mxfp4ConvertInPrefill(
    "mxfp4-convert-in-prefill",
    cl::desc("online MXFP4 route: convert the selected experts in the steps "
             "other than decode (default: on cpu; off on cuda, whose "
             "warpgroup GEMM reads them packed faster, docs/mxfp4.md)"),
    cl::init(true), cl::cat(compileOptions));

static cl::opt<bool> mxfp4Overlap(
    "mxfp4-overlap",
    cl::desc("online MXFP4 route: in steps of enough tokens to select nearly "
             "every expert, convert all of them on a side queue beside the "
             "layer before (two workspaces instead of one; docs/mxfp4.md: "
             "not yet faster on the H100, so off by default)"),
    cl::init(false), cl::cat(compileOptions));

static cl::opt<std::string> weights(
    "weights",
    cl::desc("embed: copy checkpoint tensors into the artifact; reference: "
             "keep them in the checkpoint's files, recorded by path, size "
             "and hash (compiled weights are embedded either way)"),
    cl::init("embed"), cl::cat(compileOptions));

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  // After InitLLVM, whose handler aborts.
  exitOnOutOfMemory("daybreak-compile: ");
  // --mlir-print-ir-after-all and the other pass-manager options replay the
  // pipeline's steps as daybreak-opt would.
  mlir::registerPassManagerCLOptions();
  // --help lists these and the pass manager's, not every LLVM backend's
  // (--help-hidden still does).
  for (auto &entry : cl::getRegisteredOptions())
    if (entry.first.starts_with("mlir-"))
      entry.second->addCategory(compileOptions);
  cl::HideUnrelatedOptions(compileOptions);
  cl::ParseCommandLineOptions(argc, argv, "Daybreak ahead-of-time compiler\n");
  pipeline::Options options;
  options.checkpoint = checkpoint;
  options.output = output;
  options.target = target;
  std::optional<pipeline::Phase> phase = pipeline::parsePhase(compileTo);
  if (!phase) {
    llvm::errs() << "daybreak-compile: unknown --compile-to=" << compileTo
                 << " (expected lm, plan, llvm, ptx or artifact)\n";
    return 1;
  }
  options.compileTo = *phase;
  // Left out, a limit stays 0 and the pipeline chooses it.
  for (auto [option, limit] :
       {std::pair{&maxSeqLen, &options.maxSeqLen},
        std::pair{&maxBatch, &options.maxBatch},
        std::pair{&maxTokens, &options.maxTokens},
        std::pair{&kvCacheTokens, &options.kvCacheTokens},
        std::pair{&maxLogitRows, &options.maxLogitRows},
        std::pair{&tensorParallel, &options.tensorParallel},
        std::pair{&expertParallel, &options.expertParallel}}) {
    if (!option->getNumOccurrences())
      continue;
    if (llvm::Error error =
            pipeline::parseLimit(option->ArgStr, *option, *limit)) {
      llvm::errs() << "daybreak-compile: " << llvm::toString(std::move(error))
                   << "\n";
      return 1;
    }
  }
  options.kvCacheDtype = kvCacheDtype;
  options.stateDtype = stateDtype;
  if (weights != "embed" && weights != "reference") {
    llvm::errs() << "daybreak-compile: unknown --weights=" << weights
                 << " (expected embed or reference)\n";
    return 1;
  }
  options.weightsByReference = weights == "reference";
  if (mxfp4Route.getNumOccurrences() && mxfp4Route != "online" &&
      mxfp4Route != "offline" && mxfp4Route != "direct") {
    llvm::errs() << "daybreak-compile: unknown --mxfp4-route=" << mxfp4Route
                 << " (expected online, offline or direct)\n";
    return 1;
  }
  options.mxfp4Route = mxfp4Route;
  options.mxfp4ConvertInDecode = mxfp4ConvertInDecode;
  if (mxfp4ConvertInPrefill.getNumOccurrences())
    options.mxfp4ConvertInPrefill = mxfp4ConvertInPrefill;
  if (mxfp4Overlap.getNumOccurrences())
    options.mxfp4Overlap = mxfp4Overlap;
  options.configurePassManager = [](mlir::PassManager &pm) {
    return mlir::applyPassManagerCLOptions(pm);
  };
  if (llvm::Error err = pipeline::compile(options, llvm::outs(), llvm::errs())) {
    llvm::errs() << "daybreak-compile: " << llvm::toString(std::move(err))
                 << "\n";
    return 1;
  }
  return 0;
}
