//===- Collectives.cpp - The evaluator's collectives over a communicator --===//

#include "compiler/reference/Collectives.h"

using namespace daybreak;
using namespace daybreak::ref;

static llvm::Error toError(const Status &status) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                 status.message());
}

static llvm::Error checkFloat(const Tensor &value, const char *what) {
  if (value.isFloat() && value.rank() >= 1)
    return llvm::Error::success();
  return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                 "%s of %s: expected a float tensor of rank "
                                 ">= 1",
                                 what, value.describe().c_str());
}

llvm::Expected<Tensor>
CommunicatorCollectives::allReduceSum(const Tensor &value, int64_t group) {
  if (llvm::Error err = checkFloat(value, "all_reduce"))
    return std::move(err);
  Tensor sum = Tensor::zeros(value.type(), value.shape());
  Status s = communicator.groupAllReduceSum(
      value.floats().data(), sum.floats().data(), value.numel(), group);
  if (!s)
    return toError(s);
  return sum;
}

llvm::Expected<Tensor> CommunicatorCollectives::allGather(const Tensor &value,
                                                          int64_t group) {
  if (llvm::Error err = checkFloat(value, "all_gather"))
    return std::move(err);
  std::vector<int64_t> shape = value.shape();
  int64_t width = shape.back(),
          rows = value.numel() / std::max<int64_t>(width, 1);
  shape.back() *= group;
  Tensor gathered = Tensor::zeros(value.type(), shape);
  Status s = communicator.groupAllGather(
      value.floats().data(), gathered.floats().data(), rows, width, group);
  if (!s)
    return toError(s);
  return gathered;
}
