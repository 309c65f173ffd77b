//===- WeightLoader.cpp - lm.weight values from a checkpoint --------------===//

#include "compiler/importers/WeightLoader.h"

#include "runtime/numerics/Numerics.h"

using namespace daybreak;
using namespace daybreak::importers;

/// `bytes` (U8) read as the MXFP4 part of type `as` it holds, if it is one.
static std::optional<ref::Tensor> readMxfp4(const ref::Tensor &bytes,
                                            ref::ElementType as) {
  if (bytes.type() != ref::ElementType::UI8)
    return std::nullopt;
  const std::vector<int64_t> &codes = bytes.ints();
  if (as == ref::ElementType::F8E8M0FNU) {
    ref::Tensor scales = ref::Tensor::zeros(as, bytes.shape());
    float decoded[256]; // each code decoded once: billions of values
    for (int c = 0; c < 256; ++c)
      decoded[c] = numerics::e8m0ToFloat(uint8_t(c));
    for (size_t i = 0; i < codes.size(); ++i)
      scales.floats()[i] = decoded[uint8_t(codes[i])];
    return scales;
  }
  // [..., G, 16] bytes: element 2b of a block in the low nibble of byte b,
  // element 2b + 1 in the high one.
  if (as != ref::ElementType::F4E2M1FN || bytes.rank() < 2 ||
      bytes.dim(-1) != 16)
    return std::nullopt;
  std::vector<int64_t> shape(bytes.shape().begin(), bytes.shape().end() - 1);
  shape.back() *= 32;
  ref::Tensor values = ref::Tensor::zeros(as, shape);
  float decoded[16];
  for (int c = 0; c < 16; ++c)
    decoded[c] = numerics::e2m1ToFloat(uint8_t(c));
  float *out = values.floats().data();
  for (size_t i = 0; i < codes.size(); ++i) {
    out[2 * i] = decoded[uint8_t(codes[i]) & 0xF];
    out[2 * i + 1] = decoded[uint8_t(codes[i]) >> 4];
  }
  return values;
}

/// Indices [offset, offset + size) of `slice.dim` of `tensor`; `name` is
/// the source's, for errors.
static llvm::Expected<ref::Tensor>
cut(const ref::Tensor &tensor, const SourceSlice &slice, llvm::StringRef name) {
  if (slice.dim >= tensor.rank() ||
      slice.offset + slice.size > tensor.dim(slice.dim))
    return llvm::createStringError(
        llvm::inconvertibleErrorCode(),
        "'%s' (%s) has no indices [%lld, %lld) of dim %lld", name.data(),
        tensor.describe().c_str(), (long long)slice.offset,
        (long long)(slice.offset + slice.size), (long long)slice.dim);
  std::vector<int64_t> shape = tensor.shape();
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < slice.dim; ++d)
    outer *= shape[d];
  for (int64_t d = slice.dim + 1; d < tensor.rank(); ++d)
    inner *= shape[d];
  int64_t from = shape[slice.dim];
  shape[slice.dim] = slice.size;
  ref::Tensor part = ref::Tensor::zeros(tensor.type(), shape);
  auto copy = [&](const auto &in, auto &out) {
    for (int64_t o = 0; o < outer; ++o)
      std::copy_n(in.begin() + (o * from + slice.offset) * inner,
                  slice.size * inner, out.begin() + o * slice.size * inner);
  };
  if (tensor.isFloat())
    copy(tensor.floats(), part.floats());
  else
    copy(tensor.ints(), part.ints());
  return part;
}

/// The tensor of `sources` as stored, each cut to `slice`: several of one
/// shape stacked along a new leading dim, of one type and trailing dims
/// concatenated along dim 0 (their bytes, one after another, either way).
static llvm::Expected<ref::Tensor>
loadStored(const Checkpoint &checkpoint, llvm::ArrayRef<std::string> sources,
           const std::optional<SourceSlice> &slice) {
  if (sources.empty())
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "a weight without checkpoint sources");
  std::vector<ref::Tensor> parts;
  for (const std::string &name : sources) {
    auto view = checkpoint.find(name);
    if (!view)
      return view.takeError();
    auto tensor = Checkpoint::toTensor(**view);
    if (!tensor)
      return tensor.takeError();
    if (slice) {
      tensor = cut(*tensor, *slice, name);
      if (!tensor)
        return tensor.takeError();
    }
    auto trailing = [](const ref::Tensor &t) {
      return t.shape().empty()
                 ? t.shape()
                 : std::vector<int64_t>(t.shape().begin() + 1, t.shape().end());
    };
    if (!parts.empty() &&
        (tensor->type() != parts.front().type() ||
         tensor->shape().empty() != parts.front().shape().empty() ||
         trailing(*tensor) != trailing(parts.front())))
      return llvm::createStringError(
          llvm::inconvertibleErrorCode(),
          "cannot stack '%s' (%s) with '%s' (%s)", name.c_str(),
          tensor->describe().c_str(), sources.front().c_str(),
          parts.front().describe().c_str());
    parts.push_back(std::move(*tensor));
  }
  if (parts.size() == 1)
    return std::move(parts.front());
  bool equal = llvm::all_of(parts, [&](const ref::Tensor &part) {
    return part.shape() == parts.front().shape();
  });
  std::vector<int64_t> shape = parts.front().shape();
  if (equal) {
    shape.insert(shape.begin(), static_cast<int64_t>(parts.size()));
  } else {
    for (size_t i = 1; i < parts.size(); ++i)
      shape[0] += parts[i].shape()[0];
  }
  ref::Tensor stacked = ref::Tensor::zeros(parts.front().type(), shape);
  int64_t at = 0;
  for (const ref::Tensor &part : parts) {
    if (stacked.isFloat())
      std::copy(part.floats().begin(), part.floats().end(),
                stacked.floats().begin() + at);
    else
      std::copy(part.ints().begin(), part.ints().end(),
                stacked.ints().begin() + at);
    at += part.numel();
  }
  return stacked;
}

llvm::Expected<ref::Tensor> importers::loadWeight(
    const Checkpoint &checkpoint, llvm::ArrayRef<std::string> sources,
    std::optional<ref::ElementType> as, std::optional<SourceSlice> slice) {
  llvm::Expected<ref::Tensor> stored = loadStored(checkpoint, sources, slice);
  if (!stored || !as)
    return stored;
  if (std::optional<ref::Tensor> mxfp4 = readMxfp4(*stored, *as))
    return std::move(*mxfp4);
  return stored;
}
