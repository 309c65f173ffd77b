//===- WeightLoader.cpp - lm.weight values from a checkpoint --------------===//

#include "compiler/importers/WeightLoader.h"

using namespace daybreak;
using namespace daybreak::importers;

llvm::Expected<ref::Tensor>
importers::loadWeight(const Checkpoint &checkpoint,
                      llvm::ArrayRef<std::string> sources) {
  if (sources.empty())
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "a weight without checkpoint sources");
  std::vector<ref::Tensor> parts;
  for (const std::string &name : sources) {
    auto view = checkpoint.find(name);
    if (!view)
      return view.takeError();
    auto tensor = Checkpoint::toTensor(**view);
    if (!tensor)
      return tensor.takeError();
    if (!parts.empty() && (tensor->shape() != parts.front().shape() ||
                           tensor->type() != parts.front().type()))
      return llvm::createStringError(
          llvm::inconvertibleErrorCode(),
          "cannot stack '%s' (%s) with '%s' (%s)", name.c_str(),
          tensor->describe().c_str(), sources.front().c_str(),
          parts.front().describe().c_str());
    parts.push_back(std::move(*tensor));
  }
  if (parts.size() == 1)
    return std::move(parts.front());
  std::vector<int64_t> shape = {static_cast<int64_t>(parts.size())};
  shape.insert(shape.end(), parts.front().shape().begin(),
               parts.front().shape().end());
  ref::Tensor stacked = ref::Tensor::zeros(parts.front().type(), shape);
  int64_t each = parts.front().numel();
  for (size_t i = 0; i < parts.size(); ++i) {
    if (stacked.isFloat())
      std::copy(parts[i].floats().begin(), parts[i].floats().end(),
                stacked.floats().begin() + i * each);
    else
      std::copy(parts[i].ints().begin(), parts[i].ints().end(),
                stacked.ints().begin() + i * each);
  }
  return stacked;
}
