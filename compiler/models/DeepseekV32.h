//===- DeepseekV32.h - lm IR for DeepSeek-V3.2 (DSA) ------------*- C++ -*-===//
//
// Builds the lm IR of a `deepseek_v32` checkpoint: one `lm.weight` per
// checkpoint tensor (routed experts stacked per layer), and the functions
// `@prefill` and `@decode` over a batch of sequences (tokens flattened, with
// each token's sequence and position), with the latent and indexer caches
// `[batch, max_seq_len, width]` threaded from arguments to results. MLA is emitted in absorbed form (W_UK folded into the query,
// W_UV applied after attention); attention is the DSA sparse form.
//
//===----------------------------------------------------------------------===//

#ifndef DAYBREAK_COMPILER_MODELS_DEEPSEEKV32_H
#define DAYBREAK_COMPILER_MODELS_DEEPSEEKV32_H

#include "compiler/importers/Checkpoint.h"
#include "compiler/importers/HfConfig.h"
#include "compiler/models/ModelRegistry.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"

namespace daybreak::models {

/// Emits the module, reading tensor dtypes and checking every tensor's
/// shape against the config. Errors name the tensor and the file.
llvm::Expected<mlir::OwningOpRef<mlir::ModuleOp>>
buildDeepseekV32(mlir::MLIRContext &context,
                 const importers::DeepseekV32Config &config,
                 const importers::Checkpoint &checkpoint,
                 const BuildOptions &options);

/// The deepseek_v32 family of the model registry.
llvm::Expected<std::unique_ptr<ModelDefinition>>
parseDeepseekV32Model(llvm::StringRef json, llvm::StringRef path);

} // namespace daybreak::models

#endif // DAYBREAK_COMPILER_MODELS_DEEPSEEKV32_H
