//===- Evaluator.h - Interpreter for lm IR on host tensors ------*- C++ -*-===//
//
// Executes a func.func of lm IR op by op with the reference kernels of
// Kernels.h: the oracle for whole functions. Besides the lm ops it runs the
// handful of upstream ops the model builders emit around them (func.call and
// return, arith constants and elementwise float arithmetic on tensors,
// tensor slices, reshapes and concatenation). Each result is rounded to its
// declared element type, so a bf16 function is evaluated with bf16
// rounding between ops and fp32/fp64 inside them.
//
// An Evaluator holds a reference to the module; it is not thread-safe, but
// separate Evaluators may run concurrently.
//
//===----------------------------------------------------------------------===//

#ifndef DAYBREAK_COMPILER_REFERENCE_EVALUATOR_H
#define DAYBREAK_COMPILER_REFERENCE_EVALUATOR_H

#include "compiler/reference/Tensor.h"

#include "mlir/IR/BuiltinOps.h"
#include "llvm/Support/Error.h"

#include <functional>
#include <map>
#include <optional>
#include <vector>

namespace mlir {
class DenseElementsAttr;
class Operation;
class Type;
} // namespace mlir

namespace daybreak::ref {

/// The reference element type of an MLIR element type, if it has one.
std::optional<ElementType> toElementType(mlir::Type type);

/// A tensor holding the values of a dense elements attribute.
llvm::Expected<Tensor> tensorFromAttr(mlir::DenseElementsAttr attr);

/// Supplies the value of an `lm.weight` (by symbol name, with its declared
/// type and checkpoint sources); errors name the weight.
using WeightProvider = std::function<llvm::Expected<Tensor>(
    llvm::StringRef name, mlir::Type type, llvm::ArrayRef<std::string> sources)>;

/// Sees each op after it is evaluated, with the tensors bound to its operands
/// and results (ops of called functions included, before their call op).
/// The tensors live only for the duration of the call; a result the op left
/// unbound is null.
using OpObserver = std::function<void(mlir::Operation *op,
                                      llvm::ArrayRef<const Tensor *> operands,
                                      llvm::ArrayRef<const Tensor *> results)>;

class Evaluator {
public:
  explicit Evaluator(mlir::ModuleOp module, WeightProvider weights = {})
      : module(module), weights(std::move(weights)) {}

  /// Runs the function `name` on `args` (checked against its signature:
  /// element types and static dims) and returns its results. Errors name
  /// the function, the op and what was wrong.
  llvm::Expected<std::vector<Tensor>> run(llvm::StringRef name,
                                          llvm::ArrayRef<Tensor> args);

  /// The value of weight `name`, loaded once through the provider.
  llvm::Expected<const Tensor *> weight(llvm::StringRef name);

  /// Intermediate values for tests and debugging: `observer` is called after
  /// every op evaluated from now on (an empty one stops it).
  void setOpObserver(OpObserver observer) { opObserver = std::move(observer); }
  const OpObserver &getOpObserver() const { return opObserver; }

private:
  mlir::ModuleOp module;
  WeightProvider weights;
  std::map<std::string, Tensor, std::less<>> loaded;
  OpObserver opObserver;
  /// Nesting depth of func.call, bounded to reject recursion.
  unsigned depth = 0;
};

} // namespace daybreak::ref

#endif // DAYBREAK_COMPILER_REFERENCE_EVALUATOR_H
