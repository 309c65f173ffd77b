//===- Checkpoint.cpp - Hugging Face safetensors checkpoints --------------===//
//
// The safetensors reader has already checked every header entry's dtype,
// shape and byte range, so this file only adds what spans files: the shard
// index, cross-shard name uniqueness, and expectations of the importer.
//
//===----------------------------------------------------------------------===//

#include "compiler/importers/Checkpoint.h"

#include "compiler/reference/Tensor.h"
#include "runtime/numerics/Numerics.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallString.h"
#include "llvm/ADT/Twine.h"
#include "llvm/ADT/bit.h"
#include "llvm/Support/Endian.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>

using namespace llvm;

namespace daybreak::importers {

using safetensors::DType;
using safetensors::TensorView;

namespace {

Error makeError(const Twine &message) {
  return createStringError(inconvertibleErrorCode(), message);
}

std::string formatShape(ArrayRef<int64_t> shape) {
  std::string text;
  raw_string_ostream os(text);
  os << '[';
  interleaveComma(shape, os);
  os << ']';
  return text;
}

StringRef nameOf(DType dtype) {
  std::string_view name = safetensors::dtypeName(dtype);
  return StringRef(name.data(), name.size());
}

/// Shard names come from a file we do not control; keep them inside the
/// checkpoint folder.
bool isPlainRelativePath(StringRef file) {
  if (file.empty() || sys::path::is_absolute(file))
    return false;
  return none_of(make_range(sys::path::begin(file), sys::path::end(file)),
                 [](StringRef part) { return part == ".."; });
}

} // namespace

Error Checkpoint::addFile(StringRef path) {
  safetensors::File file;
  safetensors::Status status = safetensors::File::open(path.str(), file);
  if (!status.ok)
    return makeError("cannot open checkpoint file " + path + ": " +
                     status.message);
  size_t fileIndex = files.size();
  files.push_back(std::move(file));
  filePaths.push_back(path.str());
  for (const TensorView &view : files.back().tensors()) {
    auto [it, inserted] = index.try_emplace(view.name, Entry{&view, fileIndex});
    // Which copy is meant would be a guess.
    if (!inserted)
      return makeError("tensor '" + view.name + "' is in both " +
                       filePaths[it->second.file] + " and " + path);
  }
  return Error::success();
}

Error Checkpoint::addShards(StringRef indexJson, StringRef indexPath) {
  Expected<json::Value> root = json::parse(indexJson);
  if (!root)
    return makeError("malformed JSON in " + indexPath + ": " +
                     toString(root.takeError()));
  const json::Object *rootObject = root->getAsObject();
  const json::Object *weightMap =
      rootObject ? rootObject->getObject("weight_map") : nullptr;
  if (!weightMap)
    return makeError("missing object 'weight_map' in " + indexPath);

  // Sorted, so the first error reported does not depend on hash order.
  std::vector<std::pair<std::string, std::string>> entries;
  for (const auto &[name, value] : *weightMap) {
    std::optional<StringRef> file = value.getAsString();
    if (!file || !isPlainRelativePath(*file))
      return makeError("weight_map entry '" + name.str() + "' in " + indexPath +
                       " must be a file name inside the checkpoint folder");
    entries.emplace_back(name.str(), file->str());
  }
  llvm::sort(entries);
  if (entries.empty())
    return makeError("empty 'weight_map' in " + indexPath);

  std::vector<std::string> shards;
  for (const auto &entry : entries)
    shards.push_back(entry.second);
  llvm::sort(shards);
  shards.erase(std::unique(shards.begin(), shards.end()), shards.end());
  for (const std::string &shard : shards) {
    SmallString<256> path(directory);
    sys::path::append(path, shard);
    if (Error error = addFile(path))
      return error;
  }

  for (const auto &[name, shard] : entries) {
    auto it = index.find(name);
    SmallString<256> expected(directory);
    sys::path::append(expected, shard);
    if (it == index.end())
      return makeError("tensor '" + name + "' mapped to " + shard + " by " +
                       indexPath + " is not in " + expected);
    if (filePaths[it->second.file] != expected)
      return makeError("tensor '" + name + "' mapped to " + shard + " by " +
                       indexPath + " is in " + filePaths[it->second.file] +
                       " instead");
  }
  return Error::success();
}

Expected<Checkpoint> Checkpoint::open(StringRef dir) {
  Checkpoint checkpoint;
  checkpoint.directory = dir.str();
  SmallString<256> indexPath(dir);
  sys::path::append(indexPath, "model.safetensors.index.json");
  SmallString<256> singlePath(dir);
  sys::path::append(singlePath, "model.safetensors");
  if (sys::fs::exists(indexPath)) {
    ErrorOr<std::unique_ptr<MemoryBuffer>> buffer =
        MemoryBuffer::getFile(indexPath, /*IsText=*/true);
    if (!buffer)
      return makeError("cannot read " + indexPath + ": " +
                       buffer.getError().message());
    return openIndexed(dir, (*buffer)->getBuffer(), indexPath);
  }
  if (!sys::fs::exists(singlePath))
    return makeError("no model.safetensors or model.safetensors.index.json "
                     "in " +
                     dir);
  if (Error error = checkpoint.addFile(singlePath))
    return error;
  return checkpoint;
}

Expected<Checkpoint> Checkpoint::openIndexed(StringRef dir, StringRef indexJson,
                                             StringRef indexPath) {
  Checkpoint checkpoint;
  checkpoint.directory = dir.str();
  if (Error error = checkpoint.addShards(indexJson, indexPath))
    return error;
  return checkpoint;
}

bool Checkpoint::has(StringRef name) const { return index.contains(name); }

Expected<const TensorView *> Checkpoint::find(StringRef name) const {
  auto it = index.find(name);
  if (it == index.end())
    return makeError("missing tensor '" + name + "' in " + directory);
  return it->second.view;
}

Expected<const TensorView *> Checkpoint::get(StringRef name,
                                             ArrayRef<int64_t> shape,
                                             ArrayRef<DType> dtypes) const {
  auto it = index.find(name);
  if (it == index.end())
    return makeError("missing tensor '" + name + "' in " + directory);
  const TensorView *view = it->second.view;
  StringRef file = filePaths[it->second.file];
  if (!is_contained(dtypes, view->dtype)) {
    std::string allowed;
    for (DType dtype : dtypes)
      allowed += (allowed.empty() ? "" : " or ") + nameOf(dtype).str();
    return makeError("tensor '" + name + "' in " + file + " has dtype " +
                     nameOf(view->dtype) + ", expected " + allowed);
  }
  if (ArrayRef<int64_t>(view->shape) != shape)
    return makeError("tensor '" + name + "' in " + file + " has shape " +
                     formatShape(view->shape) + ", expected " +
                     formatShape(shape));
  return view;
}

Expected<ref::Tensor> Checkpoint::toTensor(const TensorView &view) {
  using ref::ElementType;
  std::optional<ElementType> type;
  switch (view.dtype) {
  case DType::BF16:
    type = ElementType::BF16;
    break;
  case DType::F16:
    type = ElementType::F16;
    break;
  case DType::F32:
    type = ElementType::F32;
    break;
  case DType::F8E4M3:
    type = ElementType::F8E4M3FN;
    break;
  case DType::I8:
    type = ElementType::I8;
    break;
  case DType::U8:
    type = ElementType::UI8;
    break;
  case DType::I32:
    type = ElementType::I32;
    break;
  case DType::I64:
    type = ElementType::I64;
    break;
  case DType::Bool:
    type = ElementType::I1;
    break;
  case DType::F64: // Host tensors keep floats as float: not exact.
  case DType::I16: // No 16-bit integer host type.
    break;
  }
  if (!type)
    return makeError("tensor '" + view.name + "' has dtype " +
                     nameOf(view.dtype) +
                     ", which has no exact host tensor type");

  ref::Tensor tensor = ref::Tensor::zeros(*type, view.shape);
  // Safetensors data is little-endian whatever the host.
  const uint8_t *data = view.data;
  int64_t count = tensor.numel();
  for (int64_t i = 0; i < count; ++i) {
    switch (view.dtype) {
    case DType::BF16:
      tensor.floats()[i] =
          numerics::bf16ToFloat(support::endian::read16le(data + 2 * i));
      break;
    case DType::F16:
      tensor.floats()[i] =
          numerics::f16ToFloat(support::endian::read16le(data + 2 * i));
      break;
    case DType::F32:
      tensor.floats()[i] =
          llvm::bit_cast<float>(support::endian::read32le(data + 4 * i));
      break;
    case DType::F8E4M3:
      tensor.floats()[i] = numerics::e4m3ToFloat(data[i]);
      break;
    case DType::I8:
      tensor.ints()[i] = static_cast<int8_t>(data[i]);
      break;
    case DType::U8:
      tensor.ints()[i] = data[i];
      break;
    case DType::Bool:
      tensor.ints()[i] = data[i] != 0;
      break;
    case DType::I32:
      tensor.ints()[i] =
          static_cast<int32_t>(support::endian::read32le(data + 4 * i));
      break;
    case DType::I64:
      tensor.ints()[i] =
          static_cast<int64_t>(support::endian::read64le(data + 8 * i));
      break;
    case DType::F64:
    case DType::I16:
      break;
    }
  }
  return tensor;
}

std::vector<std::string> Checkpoint::tensorNames() const {
  std::vector<std::string> names;
  names.reserve(index.size());
  for (const auto &entry : index)
    names.push_back(entry.getKey().str());
  llvm::sort(names);
  return names;
}

std::optional<Checkpoint::Location>
Checkpoint::locate(llvm::StringRef name) const {
  auto found = index.find(name);
  if (found == index.end())
    return std::nullopt;
  const safetensors::File &file = files[found->second.file];
  llvm::SmallString<256> path(filePaths[found->second.file]);
  llvm::sys::fs::make_absolute(path);
  Location location;
  location.path = path.str().str();
  location.offset = uint64_t(found->second.view->data - file.fileData());
  location.file = &file;
  return location;
}

} // namespace daybreak::importers
