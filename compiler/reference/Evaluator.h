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
#include "dialects/lm/LmOps.h"

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

/// Supplies the value of an `lm.weight` read from a checkpoint (its
/// sources, cut to its shard, as its declared element type); errors name the
/// weight. `checkpointWeights` (CheckpointWeights.h) is the usual one.
using WeightProvider =
    std::function<llvm::Expected<Tensor>(lm::WeightOp weight)>;

/// Sees each op after it is evaluated, with the tensors bound to its operands
/// and results (ops of called functions included, before their call op).
/// The tensors live only for the duration of the call; a result the op left
/// unbound is null.
using OpObserver = std::function<void(mlir::Operation *op,
                                      llvm::ArrayRef<const Tensor *> operands,
                                      llvm::ArrayRef<const Tensor *> results)>;

/// One rank's view of the ranks whose functions meet at `lm.all_reduce` and
/// `lm.all_gather` (docs/parallel.md). Each call returns once every rank has
/// made it, or with an error naming the collective when a rank failed or
/// did not come. Collectives.h has the in-process one.
class Collectives {
public:
  virtual ~Collectives() = default;
  virtual int64_t rank() const = 0;
  virtual int64_t size() const = 0;
  /// Every rank's `value` summed element by element, in rank order, over
  /// each consecutive group of `group` ranks (`group` divides size(): the
  /// world when equal).
  virtual llvm::Expected<Tensor> allReduceSum(const Tensor &value,
                                              int64_t group) = 0;
  /// Every rank's `value` concatenated along the last dim, in rank order,
  /// over each consecutive group of `group` ranks.
  virtual llvm::Expected<Tensor> allGather(const Tensor &value,
                                           int64_t group) = 0;
};

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

  /// The ranks this one's collectives meet (not owned; null, the default,
  /// runs a function of one rank, whose collectives are identities).
  void setCollectives(Collectives *ranks) { collectives = ranks; }
  Collectives *getCollectives() const { return collectives; }

private:
  mlir::ModuleOp module;
  WeightProvider weights;
  std::map<std::string, Tensor, std::less<>> loaded;
  OpObserver opObserver;
  Collectives *collectives = nullptr;
  /// Nesting depth of func.call, bounded to reject recursion.
  unsigned depth = 0;
};

} // namespace daybreak::ref

#endif // DAYBREAK_COMPILER_REFERENCE_EVALUATOR_H
