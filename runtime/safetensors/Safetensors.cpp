//===- Safetensors.cpp - Validating reader for .safetensors files ---------===//

#include "runtime/safetensors/Safetensors.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

namespace daybreak::safetensors {

namespace {

/// Real checkpoints have headers of a few MiB at most; a larger length is
/// almost certainly a corrupt or non-safetensors file.
constexpr uint64_t kMaxHeaderBytes = 100ull << 20;

struct DTypeInfo {
  DType dtype;
  std::string_view name;
  size_t size;
};

constexpr DTypeInfo kDTypes[] = {
    {DType::BF16, "BF16", 2},      {DType::F16, "F16", 2},
    {DType::F32, "F32", 4},        {DType::F64, "F64", 8},
    {DType::F8E4M3, "F8_E4M3", 1}, {DType::I8, "I8", 1},
    {DType::U8, "U8", 1},          {DType::I16, "I16", 2},
    {DType::I32, "I32", 4},        {DType::I64, "I64", 8},
    {DType::Bool, "BOOL", 1},
};

const DTypeInfo &infoOf(DType dtype) {
  for (const DTypeInfo &info : kDTypes)
    if (info.dtype == dtype)
      return info;
  return kDTypes[0]; // Unreachable: every enumerator is in the table.
}

/// Builds "<path>: tensor '<name>': <what>".
std::string tensorError(const std::string &path, const std::string &name,
                        const std::string &what) {
  return path + ": tensor '" + name + "': " + what;
}

/// Checks one header entry and fills `view` (data still relative to the data
/// area start, in `begin`/`end`).
Status parseEntry(const std::string &path, const std::string &name,
                  const nlohmann::json &entry, uint64_t dataSize,
                  TensorView &view, uint64_t &begin, uint64_t &end) {
  if (!entry.is_object())
    return Status::error(tensorError(path, name, "entry is not a JSON object"));

  auto dtypeIt = entry.find("dtype");
  if (dtypeIt == entry.end())
    return Status::error(tensorError(path, name, "missing 'dtype'"));
  if (!dtypeIt->is_string())
    return Status::error(tensorError(path, name, "'dtype' is not a string"));
  const std::string &dtypeText = dtypeIt->get_ref<const std::string &>();
  std::optional<DType> dtype = parseDType(dtypeText);
  if (!dtype)
    return Status::error(
        tensorError(path, name, "unknown dtype '" + dtypeText + "'"));

  auto shapeIt = entry.find("shape");
  if (shapeIt == entry.end())
    return Status::error(tensorError(path, name, "missing 'shape'"));
  if (!shapeIt->is_array())
    return Status::error(tensorError(path, name, "'shape' is not an array"));
  std::vector<int64_t> shape;
  uint64_t elements = 1;
  bool overflow = false;
  for (const nlohmann::json &dim : *shapeIt) {
    if (!dim.is_number_integer())
      return Status::error(
          tensorError(path, name, "'shape' holds a non-integer " + dim.dump()));
    if (dim.is_number_unsigned()) {
      uint64_t value = dim.get<uint64_t>();
      if (value > uint64_t(INT64_MAX))
        return Status::error(tensorError(
            path, name, "dimension " + std::to_string(value) + " too large"));
      shape.push_back(int64_t(value));
    } else {
      int64_t value = dim.get<int64_t>();
      if (value < 0)
        return Status::error(tensorError(
            path, name, "negative dimension " + std::to_string(value)));
      shape.push_back(value);
    }
    overflow |=
        __builtin_mul_overflow(elements, uint64_t(shape.back()), &elements);
  }
  uint64_t expectedBytes = 0;
  overflow |= __builtin_mul_overflow(elements, uint64_t(dtypeSize(*dtype)),
                                     &expectedBytes);
  if (overflow)
    return Status::error(tensorError(path, name,
                                     "shape " + shapeIt->dump() + " of " +
                                         dtypeText +
                                         " overflows a 64-bit byte count"));

  auto offsetsIt = entry.find("data_offsets");
  if (offsetsIt == entry.end())
    return Status::error(tensorError(path, name, "missing 'data_offsets'"));
  if (!offsetsIt->is_array() || offsetsIt->size() != 2 ||
      !(*offsetsIt)[0].is_number_unsigned() ||
      !(*offsetsIt)[1].is_number_unsigned())
    return Status::error(
        tensorError(path, name,
                    "'data_offsets' is not two non-negative integers: " +
                        offsetsIt->dump()));
  begin = (*offsetsIt)[0].get<uint64_t>();
  end = (*offsetsIt)[1].get<uint64_t>();
  if (begin > end)
    return Status::error(tensorError(path, name,
                                     "data_offsets begin " +
                                         std::to_string(begin) + " > end " +
                                         std::to_string(end)));
  if (end > dataSize)
    return Status::error(tensorError(path, name,
                                     "data_offsets [" + std::to_string(begin) +
                                         ", " + std::to_string(end) +
                                         ") outside the data area of " +
                                         std::to_string(dataSize) + " bytes"));
  if (end - begin != expectedBytes)
    return Status::error(tensorError(
        path, name,
        "shape " + shapeIt->dump() + " of " + dtypeText + " needs " +
            std::to_string(expectedBytes) + " bytes but data_offsets span " +
            std::to_string(end - begin)));

  view.name = name;
  view.dtype = *dtype;
  view.shape = std::move(shape);
  view.data = nullptr;
  view.byteSize = size_t(end - begin);
  return Status::success();
}

} // namespace

size_t dtypeSize(DType dtype) { return infoOf(dtype).size; }

std::string_view dtypeName(DType dtype) { return infoOf(dtype).name; }

std::optional<DType> parseDType(std::string_view name) {
  for (const DTypeInfo &info : kDTypes)
    if (info.name == name)
      return info.dtype;
  return std::nullopt;
}

const TensorView *File::find(std::string_view name) const {
  auto it = indexByName.find(name);
  return it == indexByName.end() ? nullptr : &tensorList[it->second];
}

Status File::open(const std::string &path, File &out) {
  File file;
  std::string mapped = MappedFile::open(path, file.mapping);
  if (!mapped.empty())
    return Status::error(mapped);
  file.bytes = file.mapping.data();
  file.size = file.mapping.size();
  Status status = file.parse(path);
  if (status.ok)
    out = std::move(file);
  return status;
}

Status File::openBytes(const std::string &name, const uint8_t *data,
                       size_t size, File &out) {
  File file;
  file.bytes = data;
  file.size = size;
  Status status = file.parse(name);
  if (status.ok)
    out = std::move(file);
  return status;
}

Status File::parse(const std::string &path) {
  uint64_t fileSize = size;
  if (fileSize < 8)
    return Status::error(path + ": file is " + std::to_string(fileSize) +
                         " bytes, shorter than the 8-byte header length");

  uint64_t headerSize = 0;
  for (int i = 7; i >= 0; --i)
    headerSize = (headerSize << 8) | bytes[i];
  if (headerSize > kMaxHeaderBytes)
    return Status::error(path + ": header length " +
                         std::to_string(headerSize) + " exceeds the limit of " +
                         std::to_string(kMaxHeaderBytes) + " bytes");
  if (headerSize > fileSize - 8)
    return Status::error(
        path + ": header length " + std::to_string(headerSize) +
        " runs past the end of the " + std::to_string(fileSize) + "-byte file");

  dataStart = 8 + headerSize;
  const char *headerBegin = reinterpret_cast<const char *>(bytes + 8);
  nlohmann::json header =
      nlohmann::json::parse(headerBegin, headerBegin + headerSize, nullptr,
                            /*allow_exceptions=*/false);
  if (header.is_discarded())
    return Status::error(path + ": header is not valid JSON");
  if (!header.is_object())
    return Status::error(path + ": header is not a JSON object");

  const uint8_t *dataArea = bytes + 8 + headerSize;
  uint64_t dataSize = fileSize - 8 - headerSize;
  struct Range {
    uint64_t begin, end;
    size_t index;
  };
  std::vector<Range> ranges;
  for (const auto &[name, entry] : header.items()) {
    if (name == "__metadata__") {
      if (!entry.is_object())
        return Status::error(path + ": '__metadata__' is not a JSON object");
      for (const auto &[key, value] : entry.items()) {
        if (!value.is_string())
          return Status::error(path + ": '__metadata__' value of '" + key +
                               "' is not a string: " + value.dump());
        metadataMap[key] = value.get<std::string>();
      }
      continue;
    }
    TensorView view;
    uint64_t begin = 0, end = 0;
    Status status = parseEntry(path, name, entry, dataSize, view, begin, end);
    if (!status.ok)
      return status;
    view.data = dataArea + begin;
    ranges.push_back({begin, end, tensorList.size()});
    indexByName[name] = tensorList.size();
    tensorList.push_back(std::move(view));
  }

  // Sorted by start, a non-empty range overlaps an earlier one exactly when
  // it starts before the furthest end seen so far.
  std::sort(ranges.begin(), ranges.end(), [](const Range &a, const Range &b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  const Range *furthest = nullptr;
  for (const Range &range : ranges) {
    if (range.begin == range.end)
      continue;
    if (furthest && range.begin < furthest->end)
      return Status::error(
          tensorError(path, tensorList[range.index].name,
                      "data_offsets [" + std::to_string(range.begin) + ", " +
                          std::to_string(range.end) + ") overlap tensor '" +
                          tensorList[furthest->index].name + "' at [" +
                          std::to_string(furthest->begin) + ", " +
                          std::to_string(furthest->end) + ")"));
    if (!furthest || range.end > furthest->end)
      furthest = &range;
  }
  return Status::success();
}

Status writeF32File(const std::string &path,
                    const std::vector<F32Tensor> &tensors) {
  std::vector<const F32Tensor *> sorted;
  for (const F32Tensor &t : tensors)
    sorted.push_back(&t);
  std::sort(sorted.begin(), sorted.end(),
            [](const F32Tensor *a, const F32Tensor *b) { return a->name < b->name; });
  nlohmann::json header = nlohmann::json::object();
  size_t offset = 0;
  for (const F32Tensor *t : sorted) {
    size_t bytes = t->values.size() * sizeof(float);
    header[t->name] = {{"dtype", "F32"},
                       {"shape", t->shape},
                       {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  std::string text = header.dump();
  // Pad the header with spaces to 8 bytes, as the reference writer does.
  text.append((8 - text.size() % 8) % 8, ' ');
  FILE *out = std::fopen(path.c_str(), "wb");
  if (!out)
    return Status::error("cannot write " + path + ": " + std::strerror(errno));
  uint64_t length = text.size();
  unsigned char prefix[8];
  for (int i = 0; i < 8; ++i)
    prefix[i] = static_cast<unsigned char>(length >> (8 * i));
  bool ok = std::fwrite(prefix, 1, 8, out) == 8 &&
            std::fwrite(text.data(), 1, text.size(), out) == text.size();
  for (const F32Tensor *t : sorted)
    ok = ok && std::fwrite(t->values.data(), sizeof(float), t->values.size(),
                           out) == t->values.size();
  ok = std::fclose(out) == 0 && ok;
  if (!ok)
    return Status::error("cannot write " + path + ": " + std::strerror(errno));
  return Status::success();
}

} // namespace daybreak::safetensors
