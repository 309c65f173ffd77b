//===- Checkpoint.h - Hugging Face safetensors checkpoints -----*- C++ -*-===//
//
// Opens a checkpoint folder (one `model.safetensors`, or shards listed by
// `model.safetensors.index.json`), finds tensors by name with shape and dtype
// checks, and converts them to the reference evaluator's host tensors.
//
//===----------------------------------------------------------------------===//

#ifndef DAYBREAK_COMPILER_IMPORTERS_CHECKPOINT_H
#define DAYBREAK_COMPILER_IMPORTERS_CHECKPOINT_H

#include "runtime/safetensors/Safetensors.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <string>
#include <vector>

namespace daybreak::ref {
class Tensor;
} // namespace daybreak::ref

namespace daybreak::importers {

/// A checkpoint's memory-mapped safetensors files and a name index over all
/// of them. Owns the mappings; move-only. Immutable after `open`, so const
/// use from several threads is safe; views stay valid while it lives.
class Checkpoint {
public:
  Checkpoint(Checkpoint &&) = default;
  Checkpoint &operator=(Checkpoint &&) = default;
  Checkpoint(const Checkpoint &) = delete;
  Checkpoint &operator=(const Checkpoint &) = delete;

  /// Opens <dir>/model.safetensors.index.json if present, else
  /// <dir>/model.safetensors. Every shard must open, every indexed name must
  /// be in the shard the index names, and no name may be in two shards.
  static llvm::Expected<Checkpoint> open(llvm::StringRef dir);
  /// What open() does once it has read an index: opens the shards under
  /// `dir` that `indexJson` lists (the index's text; `indexPath` names it
  /// in errors) and checks its weight_map against them.
  static llvm::Expected<Checkpoint> openIndexed(llvm::StringRef dir,
                                                llvm::StringRef indexJson,
                                                llvm::StringRef indexPath);

  bool has(llvm::StringRef name) const;
  /// The tensor `name`, unchecked; an error names the missing tensor.
  llvm::Expected<const safetensors::TensorView *>
  find(llvm::StringRef name) const;
  /// The tensor `name` checked against an expected shape and a set of
  /// allowed dtypes; errors name the tensor, the file, the expected and
  /// actual shape/dtype.
  llvm::Expected<const safetensors::TensorView *>
  get(llvm::StringRef name, llvm::ArrayRef<int64_t> shape,
      llvm::ArrayRef<safetensors::DType> dtypes) const;
  /// Converts a view to a host tensor: BF16/F16/F32 -> BF16/F16/F32 (values
  /// exact), F8_E4M3 -> F8E4M3FN, I8/I32/I64 -> I8/I32/I64, U8 -> UI8,
  /// BOOL -> I1. F64 and I16 have no exact host type and are errors.
  static llvm::Expected<ref::Tensor>
  toTensor(const safetensors::TensorView &view);
  /// Every tensor name, sorted.
  std::vector<std::string> tensorNames() const;

  /// Where a tensor's bytes lie on disk: its file (absolute path), the
  /// offset of its data in that file, and the file's mapping.
  struct Location {
    std::string path;
    uint64_t offset = 0;
    const safetensors::File *file = nullptr;
  };
  /// The location of tensor `name`, or nullopt for an unknown name.
  std::optional<Location> locate(llvm::StringRef name) const;

private:
  Checkpoint() = default;
  /// Maps the safetensors file at `path` and indexes its tensors.
  llvm::Error addFile(llvm::StringRef path);
  /// Opens every shard the index text `indexJson` lists and checks its
  /// weight_map; `indexPath` names the index in errors.
  llvm::Error addShards(llvm::StringRef indexJson, llvm::StringRef indexPath);

  struct Entry {
    const safetensors::TensorView *view;
    size_t file; // Index into `files` and `filePaths`.
  };

  std::string directory;
  std::vector<std::string> filePaths;
  // The views in `index` point into these Files' tensor lists, which keep
  // their storage when a File (or this vector) moves.
  std::vector<safetensors::File> files;
  llvm::StringMap<Entry> index;
};

} // namespace daybreak::importers

#endif // DAYBREAK_COMPILER_IMPORTERS_CHECKPOINT_H
