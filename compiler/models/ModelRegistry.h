//===- ModelRegistry.h - Model families by model_type -----------*- C++ -*-===//
//
// The pipeline knows models only through this interface: a family is found
// by its config.json `model_type`, parses its config into a
// ModelDefinition, and the definition answers what the pipeline and the
// artifact need (vocabulary, positions, end-of-sequence ids) and builds the
// lm IR. Adding a family is one entry in modelFamilies() (ModelRegistry.cpp)
// and its definition, built from the shared builder toolkit.
//
// Definitions are immutable once parsed: safe to share between threads.
//
//===----------------------------------------------------------------------===//

#ifndef DAYBREAK_COMPILER_MODELS_MODELREGISTRY_H
#define DAYBREAK_COMPILER_MODELS_MODELREGISTRY_H

#include "compiler/importers/Checkpoint.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <memory>
#include <vector>

namespace daybreak::models {

struct BuildOptions {
  /// Rows of each per-layer cache: the longest sequence the functions serve.
  int64_t maxSeqLen = 4096;
  /// Sequences the caches hold at once.
  int64_t maxBatch = 8;
  /// Tensor and expert parallelism (docs/parallel.md): the functions of
  /// rank `rank` of ranks(), over its shards of the weights, with heads
  /// and features split over `tensorParallel` ranks and the routed experts
  /// partitioned over `expertParallel` ones (each 1 or ranks()).
  int64_t tensorParallel = 1;
  int64_t expertParallel = 1;
  int64_t rank = 0;
  int64_t ranks() const {
    return tensorParallel > expertParallel ? tensorParallel : expertParallel;
  }
};

/// One model's parsed config and how to build it.
class ModelDefinition {
public:
  virtual ~ModelDefinition();
  /// The config's model_type ("deepseek_v32").
  virtual llvm::StringRef modelType() const = 0;
  virtual int64_t vocabSize() const = 0;
  /// max_position_embeddings: the longest sequence the model allows.
  virtual int64_t maxPositions() const = 0;
  /// Every id eos_token_id lists (empty: none).
  virtual llvm::ArrayRef<int64_t> eosTokenIds() const = 0;
  /// The lm IR of @prefill and @decode over `checkpoint`'s weights.
  virtual llvm::Expected<mlir::OwningOpRef<mlir::ModuleOp>>
  build(mlir::MLIRContext &context, const importers::Checkpoint &checkpoint,
        const BuildOptions &options) const = 0;
};

/// The registry definition of a family whose config type `Config` has
/// vocabSize, maxPositionEmbeddings and eosTokenIds, built by `Build`.
template <typename Config,
          llvm::Expected<mlir::OwningOpRef<mlir::ModuleOp>> (*Build)(
              mlir::MLIRContext &, const Config &,
              const importers::Checkpoint &, const BuildOptions &)>
class ConfiguredModel final : public ModelDefinition {
public:
  ConfiguredModel(llvm::StringRef type, Config config)
      : type(type), config(std::move(config)) {}
  llvm::StringRef modelType() const override { return type; }
  int64_t vocabSize() const override { return config.vocabSize; }
  int64_t maxPositions() const override {
    return config.maxPositionEmbeddings;
  }
  llvm::ArrayRef<int64_t> eosTokenIds() const override {
    return config.eosTokenIds;
  }
  llvm::Expected<mlir::OwningOpRef<mlir::ModuleOp>>
  build(mlir::MLIRContext &context, const importers::Checkpoint &checkpoint,
        const BuildOptions &options) const override {
    return Build(context, config, checkpoint, options);
  }

private:
  llvm::StringRef type;
  Config config;
};

/// Parses a `type` config with `Parse` into a ConfiguredModel.
template <typename Config,
          llvm::Expected<Config> (*Parse)(llvm::StringRef, llvm::StringRef),
          llvm::Expected<mlir::OwningOpRef<mlir::ModuleOp>> (*Build)(
              mlir::MLIRContext &, const Config &,
              const importers::Checkpoint &, const BuildOptions &)>
llvm::Expected<std::unique_ptr<ModelDefinition>>
parseConfiguredModel(llvm::StringRef type, llvm::StringRef json,
                     llvm::StringRef path) {
  llvm::Expected<Config> config = Parse(json, path);
  if (!config)
    return config.takeError();
  return std::make_unique<ConfiguredModel<Config, Build>>(type,
                                                          std::move(*config));
}

struct ModelFamily {
  const char *modelType;
  /// Parses a config.json of this family; `path` names it in errors.
  llvm::Expected<std::unique_ptr<ModelDefinition>> (*parse)(
      llvm::StringRef json, llvm::StringRef path);
};

/// Every supported family.
llvm::ArrayRef<ModelFamily> modelFamilies();

/// Reads <dir>/config.json and parses it with the family its model_type
/// names; errors name the file and, for an unknown model_type, the
/// supported ones.
llvm::Expected<std::unique_ptr<ModelDefinition>> loadModel(llvm::StringRef dir);

} // namespace daybreak::models

#endif // DAYBREAK_COMPILER_MODELS_MODELREGISTRY_H
