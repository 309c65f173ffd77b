//===- GptOss.h - lm IR for gpt-oss -----------------------------*- C++ -*-===//
//
// Builds the lm IR of a `gpt_oss` checkpoint: one `lm.weight` per checkpoint
// tensor, and `@prefill` and `@decode` over a batch of sequences (tokens
// flattened, with each token's sequence and position). Each layer writes its
// keys and values to per-layer caches `[batch, max_seq_len, kv_heads *
// head_dim]` and attends over them (GQA with sinks, sliding or full per
// layer_types); its MoE routes with softmax over the top-k logits to MXFP4
// experts with clamped SwiGLU.
//
//===----------------------------------------------------------------------===//

#ifndef DAYBREAK_COMPILER_MODELS_GPTOSS_H
#define DAYBREAK_COMPILER_MODELS_GPTOSS_H

#include "compiler/importers/Checkpoint.h"
#include "compiler/importers/HfConfig.h"
#include "compiler/models/ModelRegistry.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"

namespace daybreak::models {

/// Emits the module, checking every tensor's shape and dtype against the
/// config. Errors name the tensor and the file.
llvm::Expected<mlir::OwningOpRef<mlir::ModuleOp>>
buildGptOss(mlir::MLIRContext &context, const importers::GptOssConfig &config,
            const importers::Checkpoint &checkpoint,
            const BuildOptions &options);

/// The gpt_oss family of the model registry.
llvm::Expected<std::unique_ptr<ModelDefinition>>
parseGptOssModel(llvm::StringRef json, llvm::StringRef path);

} // namespace daybreak::models

#endif // DAYBREAK_COMPILER_MODELS_GPTOSS_H
