//===- StepFunction.cpp - A step's signature: inputs, caches, state -------===//

#include "compiler/models/StepFunction.h"

using namespace mlir;
using namespace daybreak::models;

unsigned StepFunction::addInput(StringRef role, Type type) {
  assert(!func && "add inputs before create()");
  inputs.push_back({role.str(), type});
  return inputs.size() - 1;
}

unsigned StepFunction::addCache(RankedTensorType type, int64_t rowTokens) {
  assert(!func && type.getRank() == 3 && type.hasStaticShape() &&
         rowTokens >= 1);
  cacheTypes.push_back(type);
  cacheRowTokens.push_back(rowTokens);
  return cacheTypes.size() - 1;
}

unsigned StepFunction::addState(RankedTensorType type) {
  assert(!func && type.getRank() >= 2 && type.hasStaticShape());
  stateTypes.push_back(type);
  return stateTypes.size() - 1;
}

void StepFunction::addOutput(StringRef role, Type type) {
  assert(!func && "add outputs before create()");
  outputs.push_back({role.str(), type});
}

func::FuncOp StepFunction::create(ModuleOp module) {
  SmallVector<Type> args, results;
  for (auto &[role, type] : inputs)
    args.push_back(type);
  for (auto &[role, type] : outputs)
    results.push_back(type);
  args.append(cacheTypes.begin(), cacheTypes.end());
  args.append(stateTypes.begin(), stateTypes.end());
  results.append(cacheTypes.begin(), cacheTypes.end());
  results.append(stateTypes.begin(), stateTypes.end());

  b.setInsertionPointToEnd(module.getBody());
  func = func::FuncOp::create(b, loc, name, b.getFunctionType(args, results));
  // Inputs and outputs by role; state marked for lm-assign-kv-layout, which
  // gives it its storage.
  for (auto [i, input] : llvm::enumerate(inputs))
    func.setArgAttr(i, "lm.role", b.getStringAttr(input.first));
  for (auto [i, output] : llvm::enumerate(outputs))
    func.setResultAttr(i, "lm.role", b.getStringAttr(output.first));
  unsigned firstState = inputs.size() + cacheTypes.size();
  for (unsigned i = 0; i < cacheTypes.size(); ++i)
    if (cacheRowTokens[i] > 1)
      func.setArgAttr(inputs.size() + i, "lm.row_tokens",
                      b.getI64IntegerAttr(cacheRowTokens[i]));
  for (unsigned i = 0; i < stateTypes.size(); ++i)
    func.setArgAttr(firstState + i, "lm.state", b.getUnitAttr());

  Block *entry = func.addEntryBlock();
  b.setInsertionPointToStart(entry);
  auto args0 = entry->getArguments();
  inputValues.assign(args0.begin(), args0.begin() + inputs.size());
  caches.assign(args0.begin() + inputs.size(), args0.begin() + firstState);
  states.assign(args0.begin() + firstState, args0.end());
  return func;
}

Value StepFunction::input(unsigned i) const { return inputValues[i]; }

void StepFunction::finish(ValueRange values) {
  assert(values.size() == outputs.size() && "one value per output");
  SmallVector<Value> results(values.begin(), values.end());
  results.append(caches.begin(), caches.end());
  results.append(states.begin(), states.end());
  func::ReturnOp::create(b, loc, results);
}
