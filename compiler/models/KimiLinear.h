//===- KimiLinear.h - lm IR for Kimi Linear ---------------------*- C++ -*-===//
//
// Builds the lm IR of a `kimi_linear` checkpoint: one `lm.weight` per
// checkpoint tensor, and `@prefill` and `@decode` over a batch of sequences
// (tokens flattened, with each token's sequence and position). KDA layers
// keep per-sequence state (three short-convolution windows and the
// recurrent [heads, Dk, Dv] state) instead of a cache; NoPE MLA layers
// write their latent rows to a cache `[batch, max_seq_len, kv_lora_rank +
// qk_rope_head_dim]` and attend over it as MQA in absorbed form; the first
// layers' MLP is dense, the rest a sigmoid-routed MoE with shared experts
// (models.md section 2).
//
//===----------------------------------------------------------------------===//

#ifndef DAYBREAK_COMPILER_MODELS_KIMILINEAR_H
#define DAYBREAK_COMPILER_MODELS_KIMILINEAR_H

#include "compiler/importers/Checkpoint.h"
#include "compiler/importers/HfConfig.h"
#include "compiler/models/ModelRegistry.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"

namespace daybreak::models {

/// Emits the module, checking every tensor's shape and dtype against the
/// config. Errors name the tensor and the file.
llvm::Expected<mlir::OwningOpRef<mlir::ModuleOp>> buildKimiLinear(
    mlir::MLIRContext &context, const importers::KimiLinearConfig &config,
    const importers::Checkpoint &checkpoint, const BuildOptions &options);

/// The kimi_linear family of the model registry.
llvm::Expected<std::unique_ptr<ModelDefinition>>
parseKimiLinearModel(llvm::StringRef json, llvm::StringRef path);

} // namespace daybreak::models

#endif // DAYBREAK_COMPILER_MODELS_KIMILINEAR_H
