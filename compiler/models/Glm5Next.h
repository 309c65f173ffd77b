//===- Glm5Next.h - lm IR for GLM-5.3 (glm5_next) ---------------*- C++ -*-===//
//
// Builds the lm IR of a `glm5_next` checkpoint (GLM-5.3-Flash's text model,
// tensors under `model.language_model.`): the residual stream carried as
// hc_mult mHC streams mixed around every sub-layer (lm.mhc_pre /
// lm.mhc_post), Kimi Delta Attention layers with the bounded forget gate
// (per-sequence state, as Kimi Linear's), NoPE MLA layers whose attention
// is restricted to the tokens a DSA indexer selects over pooled keys (k-pool:
// pooled indexer keys in their own cache, the incomplete pool's raw keys in
// per-sequence state, the query's own incomplete pool always attended;
// "shared" layers reuse the previous layer's selection), dense or MoE
// MLPs with the clamped SwiGLU (glm5_next.md).
//
//===----------------------------------------------------------------------===//

#ifndef DAYBREAK_COMPILER_MODELS_GLM5NEXT_H
#define DAYBREAK_COMPILER_MODELS_GLM5NEXT_H

#include "compiler/importers/Checkpoint.h"
#include "compiler/importers/HfConfig.h"
#include "compiler/models/ModelRegistry.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"

namespace daybreak::models {

/// Emits the module, checking every tensor's shape and dtype against the
/// config. Errors name the tensor and the file.
llvm::Expected<mlir::OwningOpRef<mlir::ModuleOp>> buildGlm5Next(
    mlir::MLIRContext &context, const importers::Glm5NextConfig &config,
    const importers::Checkpoint &checkpoint, const BuildOptions &options);

/// The glm5_next family of the model registry.
llvm::Expected<std::unique_ptr<ModelDefinition>>
parseGlm5NextModel(llvm::StringRef json, llvm::StringRef path);

} // namespace daybreak::models

#endif // DAYBREAK_COMPILER_MODELS_GLM5NEXT_H
