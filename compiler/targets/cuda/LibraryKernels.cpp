//===- LibraryKernels.cpp - Library kernels specialised with NVRTC --------===//

#include "compiler/targets/cuda/LibraryKernels.h"
#include "compiler/targets/cuda/CompileCache.h"

#include "dialects/plan/PlanOps.h"
#include "runtime/devices/cuda/GemmTiles.h"

#include "mlir/IR/BuiltinTypes.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/raw_ostream.h"

#ifdef DAYBREAK_HAVE_NVRTC
#include "CudaAttentionSource.h"
#include "CudaGemmSource.h"
#include "CudaKdaSource.h"
#include "CudaKernelsSource.h"
#include "CudaKpoolSource.h"
#include "CudaSparseMlaSource.h"
#include <nvrtc.h>
#endif

#include <iterator>
#include <map>
#include <vector>

using namespace mlir;
using namespace daybreak;

static llvm::Error errorf(const llvm::Twine &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
}

/// The static size of dimension `index` of `value`'s memref type (negative
/// indices count from the back), or 0 when dynamic, absent or out of the
/// range template arguments take here.
static int64_t staticDim(Value value, int64_t index) {
  auto type = dyn_cast<MemRefType>(value.getType());
  if (!type)
    return 0;
  int64_t rank = type.getRank();
  if (index < 0)
    index += rank;
  if (index < 0 || index >= rank)
    return 0;
  int64_t d = type.getDimSize(index);
  return ShapedType::isDynamic(d) || d <= 0 || d > (1 << 20) ? 0 : d;
}

/// The instantiation (a name expression) serving `launch` of kernel `entry`,
/// or "" for a launch the generic kernel serves.
static std::string instantiationFor(plan::LaunchOp launch,
                                    llvm::StringRef entry) {
  auto args = launch.getArgs();
  if ((entry == "rms_norm" || entry == "add_rms_norm") && !args.empty()) {
    if (int64_t dim = staticDim(args[0], -1))
      return llvm::formatv("daybreak_{0}_t<{1}>", entry, dim).str();
  } else if (entry == "matmul" && args.size() > 1) {
    // The weight [N, K]: the decode path's loop runs over K. Only fp32
    // weights take the template; bf16 and e4m3 ones the stored-weight GEMVs.
    auto weight = dyn_cast<MemRefType>(args[1].getType());
    if (weight && weight.getRank() == 2 && weight.getElementType().isF32())
      if (int64_t k = staticDim(args[1], 1))
        return llvm::formatv("daybreak_matmul_small_m_t<{0}>", k).str();
  } else if (entry == "fp8_matmul") {
    // The FP8 GEMM for the tile lm-tile chose: [rows, columns, stages,
    // splits] (the splits are the grid's).
    if (auto attr = launch->getAttrOfType<DenseI64ArrayAttr>("cuda_tile"))
      if (std::optional<daybreak::cuda::Fp8GemmTile> tile =
              daybreak::cuda::fp8GemmTileFrom(attr.asArrayRef().data(),
                                              attr.size()))
        return llvm::formatv("daybreak_gemm_wg_fp8_t<{0}, {1}>", tile->rows,
                             tile->stages)
            .str();
  } else if (entry == "dsa_indexer_scores" && !args.empty()) {
    // q [T, H, D]: D is the key cache's width.
    if (int64_t dim = staticDim(args[0], 2))
      return llvm::formatv("daybreak_dsa_indexer_scores_t<{0}>", dim).str();
  } else if (entry == "sparse_attention" && !args.empty()) {
    // q [T, H, W]: W is the latent cache's width.
    auto valueDim = launch->getAttrOfType<IntegerAttr>("value_dim");
    int64_t width = staticDim(args[0], 2);
    if (valueDim && width && valueDim.getInt() > 0 &&
        valueDim.getInt() <= 256 * 16)
      return llvm::formatv("daybreak_sparse_attention_t<{0}, {1}>", width,
                           valueDim.getInt())
          .str();
  }
  return "";
}

#ifdef DAYBREAK_HAVE_NVRTC
namespace {

/// A cache entry (CompileCache.h): after its first line, a line
/// "expression<TAB>name" per instantiation, a line "ptx", and the PTX.
constexpr llvm::StringLiteral kCacheFormat = "daybreak-nvrtc-cache 1";

/// The PTX and lowered names cached under `path` for exactly the
/// expressions in `lowered` (filled in), or false (a miss: absent, another
/// format, or other expressions).
bool readCached(llvm::StringRef path,
                std::map<std::string, std::string> &lowered, std::string &ptx) {
  std::optional<std::string> entry =
      targets::cuda::readCompileCache(path, kCacheFormat);
  if (!entry)
    return false;
  llvm::StringRef rest = *entry;
  std::map<std::string, std::string> names;
  while (true) {
    auto [line, after] = rest.split('\n');
    rest = after;
    if (line == "ptx")
      break;
    auto [expression, name] = line.split('\t');
    if (line.empty() || name.empty() || !lowered.count(expression.str()))
      return false;
    names[expression.str()] = name.str();
  }
  if (names.size() != lowered.size() || rest.empty())
    return false;
  lowered = std::move(names);
  ptx = rest.str();
  return true;
}

void writeCached(llvm::StringRef path,
                 const std::map<std::string, std::string> &lowered,
                 llvm::StringRef ptx) {
  std::string payload;
  for (const auto &[expression, name] : lowered)
    payload += expression + "\t" + name + "\n";
  payload += "ptx\n";
  payload += ptx;
  targets::cuda::writeCompileCache(path, kCacheFormat, payload);
}

} // namespace
#endif // DAYBREAK_HAVE_NVRTC

bool targets::cuda::haveNvrtc() {
#ifdef DAYBREAK_HAVE_NVRTC
  return true;
#else
  return false;
#endif
}

llvm::Expected<std::optional<targets::cuda::SpecializedLibrary>>
targets::cuda::specializeLibraryKernels(ModuleOp module, llvm::StringRef chip) {
#ifndef DAYBREAK_HAVE_NVRTC
  (void)module;
  (void)chip;
  return std::nullopt;
#else
  // Which instantiation each library launch takes.
  llvm::StringMap<std::string> kernelEntry;
  for (auto kernel : module.getOps<plan::KernelOp>())
    kernelEntry[kernel.getSymName()] = kernel.getEntry().str();
  std::vector<std::pair<Operation *, std::string>> chosen;
  std::map<std::string, std::string> lowered; // expression -> name
  module.walk([&](plan::LaunchOp launch) {
    auto entry = kernelEntry.find(launch.getKernel());
    if (entry == kernelEntry.end())
      return;
    std::string expression = instantiationFor(launch, entry->second);
    if (expression.empty())
      return;
    chosen.push_back({launch, expression});
    lowered.emplace(expression, "");
  });

  auto join = [](const auto &chunks) {
    std::string text;
    for (const char *chunk : chunks)
      text += chunk;
    return text;
  };
  std::string source = join(kCudaKernelsSourceChunks);
  // The files CudaKernels.cu includes, by the names it includes them as.
  const std::string included[] = {
      join(kCudaAttentionSourceChunks), join(kCudaSparseMlaSourceChunks),
      join(kCudaGemmSourceChunks), join(kCudaKdaSourceChunks),
      join(kCudaKpoolSourceChunks)};
  const char *headerNames[] = {"CudaAttention.cuh", "CudaSparseMla.cuh",
                               "CudaGemm.cuh", "CudaKda.cuh", "CudaKpool.cuh"};
  constexpr int kHeaders = std::size(headerNames);
  static_assert(std::size(included) == kHeaders);
  const char *headers[kHeaders];
  for (int i = 0; i < kHeaders; ++i)
    headers[i] = included[i].c_str();
  // As CMake's nvcc -ptx -O3 build of the same file: fmad, IEEE division
  // and square root, no flush to zero.
  std::string arch = ("--gpu-architecture=" + chip).str();
  const char *options[] = {arch.c_str(), "--std=c++17", "-DNDEBUG"};

  // NVRTC's output is a function of its version, the options, the sources
  // and the name expressions (up to its virtual registers' numbering, which
  // changes from run to run): a compile of the same shapes (every variant
  // of one model, a test suite's fixtures) takes it from the cache
  // (CompileCache.h, kind "nvrtc") instead of spending most of a compile
  // in NVRTC.
  SpecializedLibrary library;
  std::optional<std::string> cached;
  bool hit = false;
  if (std::optional<std::string> dir = compileCacheDirectory("nvrtc")) {
    int major = 0, minor = 0;
    nvrtcVersion(&major, &minor);
    std::string version = std::to_string(major) + "." + std::to_string(minor);
    std::vector<llvm::StringRef> parts = {version};
    parts.insert(parts.end(), std::begin(options), std::end(options));
    parts.push_back(source);
    for (int i = 0; i < kHeaders; ++i) {
      parts.push_back(headerNames[i]);
      parts.push_back(included[i]);
    }
    for (const auto &entry : lowered)
      parts.push_back(entry.first);
    cached = compileCacheEntry(*dir, parts, "ptx");
    hit = readCached(*cached, lowered, library.ptx);
  }

  if (!hit) {
    nvrtcProgram program;
    auto check = [](nvrtcResult result, llvm::StringRef what) -> llvm::Error {
      if (result == NVRTC_SUCCESS)
        return llvm::Error::success();
      return errorf("NVRTC: " + what + ": " + nvrtcGetErrorString(result));
    };
    if (llvm::Error e =
            check(nvrtcCreateProgram(&program, source.c_str(), "CudaKernels.cu",
                                     kHeaders, headers, headerNames),
                  "nvrtcCreateProgram"))
      return std::move(e);
    struct Destroy {
      nvrtcProgram *program;
      ~Destroy() { nvrtcDestroyProgram(program); }
    } destroy{&program};
    for (auto &[expression, name] : lowered)
      if (llvm::Error e =
              check(nvrtcAddNameExpression(program, expression.c_str()),
                    "nvrtcAddNameExpression(" + expression + ")"))
        return std::move(e);
    nvrtcResult compiled = nvrtcCompileProgram(
        program, static_cast<int>(std::size(options)), options);
    if (compiled != NVRTC_SUCCESS) {
      size_t logSize = 0;
      nvrtcGetProgramLogSize(program, &logSize);
      std::string log(logSize, '\0');
      if (logSize)
        nvrtcGetProgramLog(program, log.data());
      return errorf(
          llvm::Twine("NVRTC could not compile the library kernels (") +
          nvrtcGetErrorString(compiled) + "):\n" + log);
    }
    for (auto &[expression, name] : lowered) {
      const char *mangled = nullptr;
      if (llvm::Error e =
              check(nvrtcGetLoweredName(program, expression.c_str(), &mangled),
                    "nvrtcGetLoweredName(" + expression + ")"))
        return std::move(e);
      name = mangled;
    }
    size_t ptxSize = 0;
    if (llvm::Error e =
            check(nvrtcGetPTXSize(program, &ptxSize), "nvrtcGetPTXSize"))
      return std::move(e);
    library.ptx.resize(ptxSize);
    if (llvm::Error e =
            check(nvrtcGetPTX(program, library.ptx.data()), "nvrtcGetPTX"))
      return std::move(e);
    // The size counts the terminating NUL; the artifact stores the text.
    while (!library.ptx.empty() && library.ptx.back() == '\0')
      library.ptx.pop_back();
    if (cached)
      writeCached(*cached, lowered, library.ptx);
  }

  MLIRContext *context = module.getContext();
  for (auto &[launch, expression] : chosen)
    launch->setAttr(plan::kSpecializedAttr,
                    StringAttr::get(context, lowered[expression]));
  library.instantiations.assign(lowered.begin(), lowered.end());
  library.launches = chosen.size();
  return library;
#endif
}
