//===- CheckpointWeights.cpp - lm.weight values read from a checkpoint ----===//

#include "compiler/reference/CheckpointWeights.h"

#include "compiler/importers/WeightLoader.h"

using namespace mlir;
using namespace daybreak;

ref::WeightProvider
ref::checkpointWeights(const importers::Checkpoint &checkpoint) {
  return [&checkpoint](lm::WeightOp weight) -> llvm::Expected<Tensor> {
    std::vector<std::string> sources;
    for (Attribute source : weight.getSources())
      sources.push_back(cast<StringAttr>(source).str());
    std::optional<importers::SourceSlice> slice;
    if (lm::ShardAttr shard = weight.getShardAttr())
      slice = importers::SourceSlice{shard.getDim(), shard.getOffset(),
                                     shard.getSize()};
    llvm::Expected<Tensor> value = importers::loadWeight(
        checkpoint, sources,
        toElementType(cast<ShapedType>(weight.getType()).getElementType()),
        slice);
    if (!value)
      return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                     "weight @%s: %s",
                                     weight.getSymName().str().c_str(),
                                     llvm::toString(value.takeError()).c_str());
    return value;
  };
}
