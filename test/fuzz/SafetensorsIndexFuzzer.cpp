//===- SafetensorsIndexFuzzer.cpp - Any text as a shard index -------------===//
//
// Feeds the sharded checkpoint reader (compiler/importers/Checkpoint) an
// arbitrary index over a folder holding two real shards
// (model-00001-of-00002.safetensors: "a", "b"; model-00002-of-00002:
// "c"), written once per process: the JSON, the weight_map's names and
// shard paths (which must stay inside the folder), tensors mapped to the
// wrong shard or to none. An index it accepts must name exactly tensors the
// checkpoint finds.
//
//===----------------------------------------------------------------------===//

#include "compiler/importers/Checkpoint.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/Path.h"

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

using namespace daybreak;

namespace {
/// A temporary checkpoint folder with two shards, removed at exit.
struct ShardFolder {
  llvm::SmallString<128> dir;

  ShardFolder() {
    if (llvm::sys::fs::createUniqueDirectory("daybreak-fuzz-index", dir))
      std::abort();
    write("model-00001-of-00002.safetensors",
          {{"a", {2}, {1, 2}}, {"b", {1, 2}, {3, 4}}});
    write("model-00002-of-00002.safetensors", {{"c", {1}, {5}}});
  }
  ~ShardFolder() { llvm::sys::fs::remove_directories(dir); }

  void write(llvm::StringRef name,
             const std::vector<safetensors::F32Tensor> &tensors) {
    llvm::SmallString<128> path(dir);
    llvm::sys::path::append(path, name);
    if (!safetensors::writeF32File(std::string(path), tensors).ok)
      std::abort();
  }
};
} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static ShardFolder folder;
  llvm::StringRef text(reinterpret_cast<const char *>(data), size);
  llvm::SmallString<128> indexPath(folder.dir);
  llvm::sys::path::append(indexPath, "model.safetensors.index.json");
  llvm::Expected<importers::Checkpoint> checkpoint =
      importers::Checkpoint::openIndexed(folder.dir, text, indexPath);
  if (!checkpoint) {
    llvm::consumeError(checkpoint.takeError());
    return 0;
  }
  // Accepted: the index parsed, and every name it maps is in its shard.
  llvm::Expected<llvm::json::Value> index = llvm::json::parse(text);
  if (!index)
    __builtin_trap();
  for (const auto &entry : *index->getAsObject()->getObject("weight_map")) {
    llvm::Expected<const safetensors::TensorView *> view =
        checkpoint->find(entry.first);
    if (!view)
      __builtin_trap();
    std::optional<importers::Checkpoint::Location> location =
        checkpoint->locate(entry.first);
    if (!location ||
        !llvm::StringRef(location->path).ends_with(*entry.second.getAsString()))
      __builtin_trap();
  }
  return 0;
}
