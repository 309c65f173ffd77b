//===- daybreak-eval.cpp - Run lm IR with the reference evaluator ---------===//
//
// Usage: daybreak-eval module.mlir [--function=NAME] [--input=SPEC]...
//                      [--random-seed=N]
// Inputs bind the function's arguments in order (specs as in TensorIO.h);
// with --random-seed the remaining arguments, which must have static shapes,
// get seeded uniform values. Prints every result.
//
//===----------------------------------------------------------------------===//

#include "compiler/reference/Evaluator.h"
#include "compiler/reference/TensorIO.h"
#include "dialects/lm/LmDialect.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/SourceMgr.h"

using namespace mlir;
using namespace daybreak;

static llvm::cl::opt<std::string> inputFile(llvm::cl::Positional,
                                            llvm::cl::desc("<module.mlir>"),
                                            llvm::cl::Required);
static llvm::cl::opt<std::string>
    functionName("function", llvm::cl::desc("function to run"),
                 llvm::cl::init("main"));
static llvm::cl::list<std::string>
    inputs("input", llvm::cl::desc("argument as SHAPExTYPE=VALUES"));
static llvm::cl::opt<int64_t>
    randomSeed("random-seed",
               llvm::cl::desc("fill remaining arguments from this seed"),
               llvm::cl::init(-1));

static int fail(const llvm::Twine &message) {
  llvm::errs() << "daybreak-eval: " << message << "\n";
  return 1;
}

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  llvm::cl::ParseCommandLineOptions(argc, argv,
                                    "Daybreak reference evaluator\n");
  DialectRegistry registry;
  registry.insert<lm::LmDialect, func::FuncDialect, arith::ArithDialect,
                  math::MathDialect,
                  tensor::TensorDialect>();
  MLIRContext context(registry);
  llvm::SourceMgr sourceMgr;
  OwningOpRef<ModuleOp> module =
      parseSourceFile<ModuleOp>(inputFile, sourceMgr, &context);
  if (!module)
    return fail("could not parse " + inputFile);

  auto func = module->lookupSymbol<func::FuncOp>(functionName);
  if (!func)
    return fail("no function @" + functionName + " in " + inputFile);
  FunctionType type = func.getFunctionType();
  if (inputs.size() > type.getNumInputs())
    return fail(llvm::Twine(inputs.size()) + " inputs for @" + functionName +
                ", which takes " + llvm::Twine(type.getNumInputs()));
  std::vector<ref::Tensor> args;
  for (const std::string &spec : inputs) {
    llvm::Expected<ref::Tensor> t = ref::parseTensorSpec(spec);
    if (!t)
      return fail(llvm::toString(t.takeError()));
    args.push_back(std::move(*t));
  }
  for (unsigned i = args.size(); i < type.getNumInputs(); ++i) {
    auto argType = dyn_cast<RankedTensorType>(type.getInput(i));
    std::optional<ref::ElementType> elem =
        argType ? ref::toElementType(argType.getElementType()) : std::nullopt;
    if (randomSeed < 0 || !argType || !argType.hasStaticShape() || !elem)
      return fail("argument " + llvm::Twine(i) + " of @" + functionName +
                  " needs an --input (random fill needs --random-seed and a "
                  "static shape)");
    args.push_back(ref::randomTensor(
        *elem, {argType.getShape().begin(), argType.getShape().end()},
        static_cast<uint64_t>(randomSeed) * 1000003u + i));
  }

  ref::Evaluator evaluator(*module);
  llvm::Expected<std::vector<ref::Tensor>> results =
      evaluator.run(functionName, args);
  if (!results)
    return fail(llvm::toString(results.takeError()));
  for (auto [i, result] : llvm::enumerate(*results)) {
    llvm::outs() << "result " << i << ": ";
    ref::printTensor(llvm::outs(), result);
  }
  return 0;
}
