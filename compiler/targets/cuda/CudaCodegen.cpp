//===- CudaCodegen.cpp - Generated kernels for NVIDIA GPUs ----------------===//

#include "compiler/targets/cuda/CudaCodegen.h"
#include "compiler/targets/cuda/CompileCache.h"

#include "mlir/Conversion/Passes.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/GPU/Transforms/Passes.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/Builders.h"
#include "mlir/InitAllExtensions.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Target/LLVM/NVVM/Target.h"
#include "mlir/Target/LLVMIR/Dialect/Builtin/BuiltinToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/GPU/GPUToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/LLVMIR/LLVMToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/NVVM/NVVMToLLVMIRTranslation.h"
#include "llvm/ADT/ScopeExit.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Program.h"

using namespace mlir;
using namespace daybreak;

static llvm::Error errorf(const llvm::Twine &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
}

/// The CUDA toolkit's libdevice: $CUDA_HOME, $CUDA_ROOT, /usr/local/cuda.
static std::optional<std::string> findLibdevice() {
  for (const char *var : {"CUDA_HOME", "CUDA_ROOT", "CUDA_PATH"})
    if (const char *root = getenv(var)) {
      std::string path = std::string(root) + "/nvvm/libdevice/libdevice.10.bc";
      if (llvm::sys::fs::exists(path))
        return path;
    }
  std::string fallback = "/usr/local/cuda/nvvm/libdevice/libdevice.10.bc";
  if (llvm::sys::fs::exists(fallback))
    return fallback;
  return std::nullopt;
}

llvm::Expected<std::string> targets::cuda::compileToPtx(ModuleOp cpuCode,
                                                        llvm::StringRef chip) {
  MLIRContext *ctx = cpuCode.getContext();
  DialectRegistry registry;
  registry.insert<gpu::GPUDialect, NVVM::NVVMDialect, scf::SCFDialect,
                  arith::ArithDialect>();
  NVVM::registerNVVMTargetInterfaceExternalModels(registry);
  // convert-gpu-to-nvvm takes the arith/cf/math/... patterns from the
  // dialects' ConvertToLLVM interfaces, registered as extensions.
  registerAllExtensions(registry);
  registerBuiltinDialectTranslation(registry);
  registerLLVMDialectTranslation(registry);
  registerNVVMDialectTranslation(registry);
  registerGPUDialectTranslation(registry);
  ctx->appendDialectRegistry(registry);
  ctx->loadAllAvailableDialects();

  OpBuilder b(ctx);
  Location loc = cpuCode.getLoc();
  OwningOpRef<ModuleOp> host = ModuleOp::create(loc);
  (*host)->setAttr(gpu::GPUDialect::getContainerModuleAttrName(),
                   b.getUnitAttr());
  b.setInsertionPointToEnd(host->getBody());
  // libdevice supplies math functions (expf, tanhf); it is linked
  // explicitly so the result does not depend on the environment.
  std::optional<std::string> libdevice = findLibdevice();
  if (!libdevice)
    return errorf("cannot find libdevice.10.bc (set CUDA_HOME to the CUDA "
                  "toolkit, default /usr/local/cuda)");
  auto target = NVVM::NVVMTargetAttr::get(
      ctx, /*optLevel=*/3, "nvptx64-nvidia-cuda", chip, "+ptx80",
      /*targetFlags=*/nullptr, b.getStrArrayAttr({*libdevice}));
  auto kernels = gpu::GPUModuleOp::create(b, loc, "daybreak_kernels",
                                          b.getArrayAttr({target}));
  b.setInsertionPointToStart(kernels.getBody());

  for (auto func : cpuCode.getOps<func::FuncOp>()) {
    auto kernel = gpu::GPUFuncOp::create(b, loc, func.getSymName(),
                                         func.getFunctionType());
    kernel->setAttr(gpu::GPUDialect::getKernelFuncAttrName(), b.getUnitAttr());
    Block &entry = kernel.getBody().front();
    IRMapping mapping;
    for (auto [from, to] : llvm::zip(func.getArguments(), entry.getArguments()))
      mapping.map(from, to);
    OpBuilder body = OpBuilder::atBlockEnd(&entry);
    // A programmatic dependent (the runtime launches these so): wait for
    // the kernel before, whose results the body reads and whose inputs it
    // may overwrite, then let the next kernel launch (CudaKernels.cu's
    // beginDependent).
    NVVM::GriddepcontrolOp::create(body, loc, NVVM::GridDepActionKind::wait);
    NVVM::GriddepcontrolOp::create(body, loc,
                                   NVVM::GridDepActionKind::launch_dependents);
    for (Operation &op : func.getBody().front()) {
      if (isa<func::ReturnOp>(op)) {
        gpu::ReturnOp::create(body, loc);
        continue;
      }
      Operation *clone = body.clone(op, mapping);
      // The element loop over [begin, end) becomes a grid-stride loop over
      // the threads.
      if (auto loop = dyn_cast<scf::ForOp>(clone)) {
        OpBuilder ids(loop);
        Value block = gpu::BlockIdOp::create(ids, loc, gpu::Dimension::x);
        Value size = gpu::BlockDimOp::create(ids, loc, gpu::Dimension::x);
        Value thread = gpu::ThreadIdOp::create(ids, loc, gpu::Dimension::x);
        Value grid = gpu::GridDimOp::create(ids, loc, gpu::Dimension::x);
        Value first = arith::AddIOp::create(
            ids, loc, arith::MulIOp::create(ids, loc, block, size), thread);
        Value stride = arith::MulIOp::create(ids, loc, grid, size);
        loop.setLowerBound(
            arith::AddIOp::create(ids, loc, loop.getLowerBound(), first));
        loop.setStep(stride);
      }
    }
  }

  PassManager pm(ctx);
  OpPassManager &device = pm.nest<gpu::GPUModuleOp>();
  device.addPass(createSCFToControlFlowPass());
  device.addPass(createConvertGpuOpsToNVVMOps());
  device.addPass(createReconcileUnrealizedCastsPass());
  GpuModuleToBinaryPassOptions binary;
  binary.compilationTarget = "isa"; // PTX, in process: no CUDA needed here
  pm.addPass(createGpuModuleToBinaryPass(binary));
  if (failed(pm.run(*host)))
    return errorf("lowering the generated kernels to PTX for " + chip +
                  " failed");
  std::string ptx;
  host->walk([&](gpu::BinaryOp binaryOp) {
    for (Attribute object : binaryOp.getObjects())
      ptx += cast<gpu::ObjectAttr>(object).getObject().getValue().str();
  });
  if (ptx.empty())
    return errorf("the NVPTX backend produced no PTX");
  return ptx;
}

/// A ptxas cache entry's first line (CompileCache.h).
static constexpr llvm::StringLiteral kPtxasCacheFormat =
    "daybreak-ptxas-cache 1";

/// What `ptxas --version` prints (a cache key's first part: the toolkit's
/// release and build), or "" when it cannot be run.
static std::string ptxasVersion(llvm::StringRef ptxas) {
  llvm::SmallString<128> log;
  if (llvm::sys::fs::createTemporaryFile("daybreak", "version", log))
    return "";
  llvm::scope_exit cleanup([&] { llvm::sys::fs::remove(log); });
  llvm::StringRef args[] = {ptxas, "--version"};
  std::optional<llvm::StringRef> redirects[] = {std::nullopt, log, log};
  if (llvm::sys::ExecuteAndWait(ptxas, args, std::nullopt, redirects) != 0)
    return "";
  auto text = llvm::MemoryBuffer::getFile(log);
  return text ? (*text)->getBuffer().str() : "";
}

llvm::Expected<std::optional<targets::cuda::Cubin>>
targets::cuda::assembleWithPtxas(llvm::StringRef ptx, llvm::StringRef chip) {
  std::optional<std::string> ptxas;
  for (const char *var : {"CUDA_HOME", "CUDA_ROOT", "CUDA_PATH"})
    if (const char *root = getenv(var))
      if (llvm::sys::fs::can_execute(std::string(root) + "/bin/ptxas"))
        ptxas = std::string(root) + "/bin/ptxas";
  if (!ptxas) {
    if (llvm::ErrorOr<std::string> found = llvm::sys::findProgramByName(
            "ptxas", {"/usr/local/cuda/bin"}))
      ptxas = *found;
    else if (llvm::ErrorOr<std::string> onPath =
                 llvm::sys::findProgramByName("ptxas"))
      ptxas = *onPath;
  }
  if (!ptxas)
    return std::nullopt;

  // -split-compile=0: a thread per CPU over the module's functions. The
  // code is the same (the library module's sections compared byte for
  // byte, session 37); 25 -> 14 s for the library on 2 cores.
  std::string arch = ("-arch=" + chip).str();
  const llvm::StringRef options[] = {arch, "-v", "-split-compile=0"};

  // ptxas's output is a function of its version, the options and the PTX:
  // the same library PTX (the prebuilt one, or NVRTC's from its cache) is
  // assembled once (CompileCache.h, kind "ptxas": the log's size in bytes
  // on a line, the log, then the cubin).
  std::optional<std::string> entry;
  if (std::optional<std::string> dir = compileCacheDirectory("ptxas")) {
    std::string version = ptxasVersion(*ptxas);
    if (!version.empty()) {
      llvm::SmallVector<llvm::StringRef> parts = {version};
      parts.append(std::begin(options), std::end(options));
      parts.push_back(ptx);
      entry = compileCacheEntry(*dir, parts, "cubin");
    }
  }
  std::string text, bytes;
  std::optional<std::string> cached =
      entry ? readCompileCache(*entry, kPtxasCacheFormat) : std::nullopt;
  auto [size, rest] = cached ? llvm::StringRef(*cached).split('\n')
                             : std::pair<llvm::StringRef, llvm::StringRef>();
  size_t logSize = 0;
  if (cached && !size.getAsInteger(10, logSize) && logSize < rest.size()) {
    text = rest.substr(0, logSize).str();
    bytes = rest.substr(logSize).str();
  } else {
    llvm::SmallString<128> input, output, log;
    if (llvm::sys::fs::createTemporaryFile("daybreak", "ptx", input) ||
        llvm::sys::fs::createTemporaryFile("daybreak", "cubin", output) ||
        llvm::sys::fs::createTemporaryFile("daybreak", "log", log))
      return errorf("cannot create temporary files for ptxas");
    llvm::scope_exit cleanup([&] {
      llvm::sys::fs::remove(input);
      llvm::sys::fs::remove(output);
      llvm::sys::fs::remove(log);
    });
    {
      std::error_code ec;
      llvm::raw_fd_ostream os(input, ec);
      if (ec)
        return errorf("cannot write " + input + ": " + ec.message());
      os << ptx;
    }
    llvm::SmallVector<llvm::StringRef> args = {*ptxas};
    args.append(std::begin(options), std::end(options));
    args.append({"-o", output, input});
    std::optional<llvm::StringRef> redirects[] = {std::nullopt, log, log};
    std::string error;
    int rc = llvm::sys::ExecuteAndWait(*ptxas, args, std::nullopt, redirects, 0,
                                       0, &error);
    auto report = llvm::MemoryBuffer::getFile(log);
    text = report ? (*report)->getBuffer().str() : "";
    if (rc != 0)
      return errorf("ptxas rejected the PTX for " + chip + ": " + text + error);
    auto cubin = llvm::MemoryBuffer::getFile(output, /*IsText=*/false,
                                             /*RequiresNullTerminator=*/false);
    if (!cubin)
      return errorf("cannot read the cubin ptxas wrote");
    bytes = (*cubin)->getBuffer().str();
    if (entry)
      writeCompileCache(*entry, kPtxasCacheFormat,
                        std::to_string(text.size()) + "\n" + text + bytes);
  }
  Cubin result;
  result.bytes.assign(bytes.begin(), bytes.end());
  // "Compiling entry function 'K' for 'sm_90a'" ... "Used N registers, ...
  // M bytes smem": one block of lines per kernel.
  llvm::SmallVector<llvm::StringRef> lines;
  llvm::StringRef(text).split(lines, '\n');
  for (llvm::StringRef line : lines) {
    size_t at = line.find("Compiling entry function '");
    if (at != llvm::StringRef::npos) {
      llvm::StringRef rest = line.substr(at + 26);
      result.kernels.push_back({rest.substr(0, rest.find('\'')).str(), 0, 0});
      continue;
    }
    if (result.kernels.empty() || !line.contains("Used "))
      continue;
    llvm::StringRef used = line.substr(line.find("Used ") + 5);
    used.consumeInteger(10, result.kernels.back().registers);
    size_t smem = line.find(" bytes smem");
    if (smem != llvm::StringRef::npos) {
      llvm::StringRef before = line.substr(0, smem);
      llvm::StringRef number = before.substr(before.rfind(' ') + 1);
      number.getAsInteger(10, result.kernels.back().sharedBytes);
    }
  }
  return std::optional<Cubin>(std::move(result));
}
