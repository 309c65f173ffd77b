//===- Collectives.h - The evaluator's collectives over a communicator -*- C++
//-*-===//
//
// Runs the reference evaluator's lm.all_reduce and lm.all_gather through a
// runtime communicator (runtime/core/Communicator.h): with
// runtime::LoopbackGroup, every rank's Evaluator on a thread of its own in
// one process, the oracle of the tensor-parallel split (docs/parallel.md).
//
//===----------------------------------------------------------------------===//

#ifndef DAYBREAK_COMPILER_REFERENCE_COLLECTIVES_H
#define DAYBREAK_COMPILER_REFERENCE_COLLECTIVES_H

#include "compiler/reference/Evaluator.h"
#include "runtime/core/Communicator.h"

namespace daybreak::ref {

class CommunicatorCollectives final : public Collectives {
public:
  /// `communicator` must outlive this.
  explicit CommunicatorCollectives(runtime::Communicator &communicator)
      : communicator(communicator) {}

  int64_t rank() const override { return communicator.rank(); }
  int64_t size() const override { return communicator.size(); }
  llvm::Expected<Tensor> allReduceSum(const Tensor &value,
                                      int64_t group) override;
  llvm::Expected<Tensor> allGather(const Tensor &value, int64_t group) override;

private:
  runtime::Communicator &communicator;
};

} // namespace daybreak::ref

#endif // DAYBREAK_COMPILER_REFERENCE_COLLECTIVES_H
