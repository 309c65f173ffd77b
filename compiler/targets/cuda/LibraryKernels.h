//===- LibraryKernels.h - Library kernels specialised by NVRTC -*- C++ -*-===//
// The CUDA library kernels (runtime/devices/cuda/CudaKernels.cu) are
// shape-generic: sizes arrive at run time. Its hot kernels also exist as
// templates on the model dimension their loops run over (the `_t` kernels).
// The pass plan-specialize-library-kernels (the CUDA target's last pass on
// plan) compiles the kernels' source, embedded in the compiler, with NVRTC
// for the model's shapes: one template instantiation per distinct shape the
// lowered plan launches, next to the generic kernels (the fallback). The
// pass keeps the PTX in the plan (plan.code_image @library) for the
// target's serialisation to write. Each specialised launch gets a
// `specialized` attribute naming its instantiation's entry point (the
// lowered, mangled name), which the CUDA device resolves in the library
// module instead of the generic kernel.
//
// Specialised:
//   rms_norm                 daybreak_rms_norm_t<dim>
//   add_rms_norm             daybreak_add_rms_norm_t<dim>
//   matmul, fp8_matmul       daybreak_matmul_small_m_t<k>   (m <= 8 path)
//   dsa_indexer_scores       daybreak_dsa_indexer_scores_t<index head dim>
//   sparse_attention         daybreak_sparse_attention_t<kv width, value dim>
//
//===----------------------------------------------------------------------===//

#ifndef DAYBREAK_COMPILER_TARGETS_CUDA_LIBRARYKERNELS_H
#define DAYBREAK_COMPILER_TARGETS_CUDA_LIBRARYKERNELS_H

#include "mlir/IR/BuiltinOps.h"
#include "llvm/Support/Error.h"

#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace daybreak::targets::cuda {

/// The library compiled for a model's shapes.
struct SpecializedLibrary {
  /// Every generic kernel and each instantiation.
  std::string ptx;
  /// Each distinct instantiation compiled: its name expression
  /// ("daybreak_rms_norm_t<128>") and its entry point (the lowered name).
  std::vector<std::pair<std::string, std::string>> instantiations;
  /// Launches annotated with `specialized`.
  size_t launches = 0;
};

/// Whether this build has NVRTC (else specializeLibraryKernels returns
/// std::nullopt and the prebuilt, generic PTX is the library).
bool haveNvrtc();

/// Compiles the library kernels with NVRTC for `chip` and the shapes of the
/// plan launches in `module` (after lowering to plan), and sets the
/// `specialized` attribute on each launch an instantiation serves.
/// std::nullopt (module unchanged) when this build has no NVRTC; an error
/// when NVRTC rejects the source.
llvm::Expected<std::optional<SpecializedLibrary>>
specializeLibraryKernels(mlir::ModuleOp module,
                         llvm::StringRef chip = "sm_90a");

} // namespace daybreak::targets::cuda

#endif // DAYBREAK_COMPILER_TARGETS_CUDA_LIBRARYKERNELS_H
