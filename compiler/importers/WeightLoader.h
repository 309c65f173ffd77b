//===- WeightLoader.h - lm.weight values from a checkpoint ------*- C++ -*-===//
//
// Supplies the reference evaluator with the values of `lm.weight` symbols:
// each weight's checkpoint sources converted to host tensors, stacked along
// a new leading dim when there are several (routed experts).
//
//===----------------------------------------------------------------------===//

#ifndef DAYBREAK_COMPILER_IMPORTERS_WEIGHTLOADER_H
#define DAYBREAK_COMPILER_IMPORTERS_WEIGHTLOADER_H

#include "compiler/importers/Checkpoint.h"
#include "compiler/reference/Tensor.h"

namespace daybreak::importers {

/// The tensor made of `sources` (one tensor, or several of one shape and
/// dtype stacked along a new leading dim).
llvm::Expected<ref::Tensor> loadWeight(const Checkpoint &checkpoint,
                                       llvm::ArrayRef<std::string> sources);

} // namespace daybreak::importers

#endif // DAYBREAK_COMPILER_IMPORTERS_WEIGHTLOADER_H
