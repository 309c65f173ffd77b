//===- StepFunction.h - A step's signature: inputs, caches, state -*- C++ -*-===//
//
// Part of the builder toolkit (ModelBuilder.h): the signature every family's
// step functions (@prefill, @decode) share, and the threading of what they
// keep across steps.
//
// - inputs by role: flattened per-token tensors the runtime writes
//   ("token_ids", "positions", "sequences"), found by role, never position;
// - caches: per-token rows `[max_batch, max_seq_len, width]`, written with
//   lm.cache_write; lm-assign-kv-layout picks their storage (paged rows, or a
//   window ring when only sliding-window attention reads them);
// - state: per-sequence `[max_batch, shape...]` values (KDA's recurrent
//   state, a short convolution's last inputs), marked `lm.state`;
//   lm-assign-kv-layout picks their storage (`state-dtype`) and the plan
//   keeps one slot per sequence, zeroed when a sequence takes it;
// - outputs by role ("logits").
//
// `finish` returns the outputs, then every cache and state as last updated,
// so the IR threads each from argument to result.
//
//===----------------------------------------------------------------------===//

#ifndef DAYBREAK_COMPILER_MODELS_STEPFUNCTION_H
#define DAYBREAK_COMPILER_MODELS_STEPFUNCTION_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"

#include <string>
#include <utility>

namespace daybreak::models {

class StepFunction {
public:
  StepFunction(mlir::OpBuilder &b, mlir::Location loc, llvm::StringRef name)
      : b(b), loc(loc), name(name.str()) {}

  /// A step input the runtime finds by `role`; returns its index.
  unsigned addInput(llvm::StringRef role, mlir::Type type);
  /// A per-token cache `[max_batch, max_seq_len, width]`; returns its index.
  /// A [batch, rows, width] cache; with `rowTokens` > 1 a row holds what
  /// rowTokens consecutive tokens share (a k-pool: row = position /
  /// rowTokens), marked `lm.row_tokens` for its pages.
  unsigned addCache(mlir::RankedTensorType type, int64_t rowTokens = 1);
  /// Per-sequence state `[max_batch, shape...]`; returns its index.
  unsigned addState(mlir::RankedTensorType type);
  /// An output the runtime reads by `role`.
  void addOutput(llvm::StringRef role, mlir::Type type);

  /// Creates the function at the end of `module` with its entry block and
  /// leaves the builder at its start.
  mlir::func::FuncOp create(mlir::ModuleOp module);

  mlir::Value input(unsigned i) const;
  /// The current value of cache `i` or state `i`: assign the updated one.
  mlir::Value &cache(unsigned i) { return caches[i]; }
  mlir::Value &state(unsigned i) { return states[i]; }
  unsigned numCaches() const { return cacheTypes.size(); }
  unsigned numStates() const { return stateTypes.size(); }

  /// Returns `outputs` (in addOutput order), then the caches and states.
  void finish(mlir::ValueRange outputs);

private:
  mlir::OpBuilder &b;
  mlir::Location loc;
  std::string name;
  llvm::SmallVector<std::pair<std::string, mlir::Type>> inputs, outputs;
  llvm::SmallVector<mlir::Type> cacheTypes, stateTypes;
  llvm::SmallVector<int64_t> cacheRowTokens;
  mlir::func::FuncOp func;
  llvm::SmallVector<mlir::Value> inputValues, caches, states;
};

} // namespace daybreak::models

#endif // DAYBREAK_COMPILER_MODELS_STEPFUNCTION_H
