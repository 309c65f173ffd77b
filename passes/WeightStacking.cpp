//===- WeightStacking.cpp - Checkpoint weights declared as one ------------===//

#include "passes/WeightStacking.h"

#include "mlir/IR/Builders.h"

using namespace mlir;
using namespace daybreak;

lm::WeightOp daybreak::sourcedWeight(ModuleOp module, Value value) {
  auto ref = value.getDefiningOp<lm::WeightRefOp>();
  if (!ref)
    return {};
  auto weight = module.lookupSymbol<lm::WeightOp>(ref.getWeightAttr());
  if (!weight || weight.getValue() || weight.getSources().empty())
    return {};
  return weight;
}

lm::WeightOp daybreak::stackedWeight(ModuleOp module,
                                     ArrayRef<lm::WeightOp> parts,
                                     int64_t experts) {
  if (parts.size() < 2)
    return {};
  lm::WeightOp front = parts.front();
  auto first = cast<RankedTensorType>(front.getType());
  int64_t rank = first.getRank(), dim = experts > 0 ? 1 : 0;
  if (rank <= dim || (experts > 0 && first.getDimSize(0) != experts))
    return {};
  SmallVector<int64_t> shape(first.getShape());
  shape[dim] = 0;
  std::string name;
  for (lm::WeightOp part : parts) {
    auto type = cast<RankedTensorType>(part.getType());
    if (type.getElementType() != first.getElementType() ||
        type.getRank() != rank || type.isDynamicDim(dim))
      return {};
    for (int64_t d = 0; d < rank; ++d)
      if (d != dim && type.getDimSize(d) != first.getDimSize(d))
        return {};
    if (experts > 0 && part.getSources().size() != size_t(experts))
      return {};
    // Each source is cut the same way, so the stack is of whole shards.
    if (part.getShardAttr() != front.getShardAttr())
      return {};
    shape[dim] += type.getDimSize(dim);
    name += (name.empty() ? "" : "+") + part.getSymName().str();
  }
  if (auto existing = module.lookupSymbol<lm::WeightOp>(name))
    return existing;
  OpBuilder b(front);
  SmallVector<Attribute> sources;
  if (experts == 0) {
    for (lm::WeightOp part : parts)
      llvm::append_range(sources, part.getSources());
  } else {
    for (int64_t e = 0; e < experts; ++e)
      for (lm::WeightOp part : parts)
        sources.push_back(part.getSources()[e]);
  }
  return lm::WeightOp::create(
      b, front.getLoc(), name,
      RankedTensorType::get(shape, first.getElementType()),
      b.getArrayAttr(sources), ElementsAttr(), front.getShardAttr());
}
