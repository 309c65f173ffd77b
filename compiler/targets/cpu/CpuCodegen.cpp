//===- CpuCodegen.cpp - Generated CPU kernels through LLVM ----------------===//

#include "compiler/targets/cpu/CpuCodegen.h"

#include "mlir/Conversion/Passes.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Target/LLVMIR/Dialect/Builtin/BuiltinToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/LLVMIR/LLVMToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Export.h"
#include "llvm/IR/LegacyPassManager.h"
#include "llvm/IR/Module.h"
#include "llvm/MC/TargetRegistry.h"
#include "llvm/Passes/PassBuilder.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Target/TargetMachine.h"
#include "llvm/Target/TargetOptions.h"
#include "llvm/TargetParser/Triple.h"

using namespace mlir;
using namespace daybreak;

static llvm::Error errorf(const llvm::Twine &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
}

/// Removes a temporary file when it goes out of scope.
namespace {
struct TempFile {
  llvm::SmallString<128> path;
  ~TempFile() {
    if (!path.empty())
      llvm::sys::fs::remove(path);
  }
};
} // namespace

llvm::Expected<std::vector<uint8_t>>
targets::cpu::compileToSharedObject(ModuleOp cpuCode, llvm::raw_ostream *llvmIR) {
  LLVMInitializeX86TargetInfo();
  LLVMInitializeX86Target();
  LLVMInitializeX86TargetMC();
  LLVMInitializeX86AsmPrinter();

  // Lower a copy to the LLVM dialect.
  OwningOpRef<ModuleOp> copy = cast<ModuleOp>(cpuCode->clone());
  (*copy).setSymNameAttr(nullptr);
  MLIRContext *ctx = cpuCode.getContext();
  DialectRegistry registry;
  registerBuiltinDialectTranslation(registry);
  registerLLVMDialectTranslation(registry);
  ctx->appendDialectRegistry(registry);
  // Loops to branches, then every dialect to LLVM.
  PassManager pm(ctx);
  pm.addPass(createSCFToControlFlowPass());
  pm.addPass(createConvertMathToLLVMPass());
  pm.addPass(createArithToLLVMConversionPass());
  pm.addPass(createConvertIndexToLLVMPass());
  pm.addPass(createConvertControlFlowToLLVMPass());
  pm.addPass(createConvertFuncToLLVMPass());
  pm.addPass(createReconcileUnrealizedCastsPass());
  if (failed(pm.run(*copy)))
    return errorf("lowering the generated CPU kernels to LLVM failed");

  llvm::LLVMContext llvmContext;
  std::unique_ptr<llvm::Module> llvmModule =
      translateModuleToLLVMIR(*copy, llvmContext, "daybreak_cpu_kernels");
  if (!llvmModule)
    return errorf("translating the generated CPU kernels to LLVM IR failed");

  // x86-64-v2 (SSE4.2): runs on any x86-64 server of the last decade.
  llvm::Triple triple("x86_64-unknown-linux-gnu");
  std::string error;
  const llvm::Target *target =
      llvm::TargetRegistry::lookupTarget(triple, error);
  if (!target)
    return errorf("no x86-64 target in this LLVM: " + error);
  std::unique_ptr<llvm::TargetMachine> machine(target->createTargetMachine(
      triple, "x86-64-v2", "", llvm::TargetOptions(), llvm::Reloc::PIC_,
      std::nullopt, llvm::CodeGenOptLevel::Aggressive));
  llvmModule->setTargetTriple(triple);
  llvmModule->setDataLayout(machine->createDataLayout());

  {
    llvm::LoopAnalysisManager lam;
    llvm::FunctionAnalysisManager fam;
    llvm::CGSCCAnalysisManager cgam;
    llvm::ModuleAnalysisManager mam;
    llvm::PassBuilder builder(machine.get());
    builder.registerModuleAnalyses(mam);
    builder.registerCGSCCAnalyses(cgam);
    builder.registerFunctionAnalyses(fam);
    builder.registerLoopAnalyses(lam);
    builder.crossRegisterProxies(lam, fam, cgam, mam);
    llvm::ModulePassManager mpm =
        builder.buildPerModuleDefaultPipeline(llvm::OptimizationLevel::O3);
    mpm.run(*llvmModule, mam);
  }
  if (llvmIR)
    llvmModule->print(*llvmIR, nullptr);

  llvm::SmallVector<char, 0> object;
  {
    llvm::raw_svector_ostream os(object);
    llvm::legacy::PassManager codegen;
    if (machine->addPassesToEmitFile(codegen, os, nullptr,
                                     llvm::CodeGenFileType::ObjectFile))
      return errorf("the x86-64 backend cannot emit an object file");
    codegen.run(*llvmModule);
  }

  // Link a shared object with the system compiler driver.
  TempFile objectFile, sharedFile;
  if (llvm::sys::fs::createTemporaryFile("daybreak-kernels", "o",
                                         objectFile.path) ||
      llvm::sys::fs::createTemporaryFile("daybreak-kernels", "so",
                                         sharedFile.path))
    return errorf("cannot create temporary files for linking");
  {
    std::error_code ec;
    llvm::raw_fd_ostream out(objectFile.path, ec);
    if (ec)
      return errorf("cannot write " + objectFile.path + ": " + ec.message());
    out.write(object.data(), object.size());
  }
  llvm::ErrorOr<std::string> cc = llvm::sys::findProgramByName("cc");
  if (!cc)
    return errorf("linking the CPU kernels needs a C compiler driver 'cc' on "
                  "PATH (Debian: build-essential)");
  llvm::SmallVector<llvm::StringRef> args = {
      *cc, "-shared", "-o", sharedFile.path, objectFile.path, "-lm"};
  std::string linkError;
  int rc = llvm::sys::ExecuteAndWait(*cc, args, std::nullopt, {}, 0, 0,
                                     &linkError);
  if (rc != 0)
    return errorf("linking the CPU kernels failed (" + *cc + " exited " +
                  llvm::Twine(rc) + ") " + linkError);
  auto shared = llvm::MemoryBuffer::getFile(sharedFile.path);
  if (!shared)
    return errorf("cannot read the linked CPU kernels");
  llvm::StringRef bytes = (*shared)->getBuffer();
  return std::vector<uint8_t>(bytes.begin(), bytes.end());
}
