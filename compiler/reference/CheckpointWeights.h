//===- CheckpointWeights.h - lm.weight values read from a checkpoint -*- C++ -*-===//
//
// The weight provider of the reference evaluator and of lm-fold-weights:
// each lm.weight's checkpoint sources, cut to its shard, read as its
// declared element type (importers::loadWeight).
//
//===----------------------------------------------------------------------===//

#ifndef DAYBREAK_COMPILER_REFERENCE_CHECKPOINTWEIGHTS_H
#define DAYBREAK_COMPILER_REFERENCE_CHECKPOINTWEIGHTS_H

#include "compiler/importers/Checkpoint.h"
#include "compiler/reference/Evaluator.h"

namespace daybreak::ref {

/// Reads weights from `checkpoint`, which must outlive the provider.
WeightProvider checkpointWeights(const importers::Checkpoint &checkpoint);

} // namespace daybreak::ref

#endif // DAYBREAK_COMPILER_REFERENCE_CHECKPOINTWEIGHTS_H
