//===- TensorIO.cpp - Tensors from command-line specs, and printing -------===//

#include "compiler/reference/TensorIO.h"

#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringSwitch.h"
#include "llvm/Support/Format.h"

#include <cmath>
#include <random>

using namespace daybreak::ref;

static llvm::Error specError(llvm::StringRef spec, const llvm::Twine &why) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                 "bad tensor spec '" + spec + "': " + why);
}

static std::optional<ElementType> parseElementType(llvm::StringRef name) {
  return llvm::StringSwitch<std::optional<ElementType>>(name)
      .Case("f64", ElementType::F64)
      .Case("f32", ElementType::F32)
      .Case("f16", ElementType::F16)
      .Case("bf16", ElementType::BF16)
      .Case("f8E4M3FN", ElementType::F8E4M3FN)
      .Case("f8E8M0FNU", ElementType::F8E8M0FNU)
      .Case("f4E2M1FN", ElementType::F4E2M1FN)
      .Case("i1", ElementType::I1)
      .Case("i8", ElementType::I8)
      .Case("ui8", ElementType::UI8)
      .Case("i32", ElementType::I32)
      .Case("i64", ElementType::I64)
      .Default(std::nullopt);
}

Tensor daybreak::ref::randomTensor(ElementType type, std::vector<int64_t> shape,
                                   uint64_t seed) {
  Tensor t = Tensor::zeros(type, std::move(shape));
  std::mt19937_64 rng(seed);
  if (t.isFloat()) {
    std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
    for (float &v : t.floats())
      v = roundTo(type, dist(rng));
  } else {
    std::uniform_int_distribution<int64_t> dist(0, 7);
    for (int64_t &v : t.ints())
      v = dist(rng);
  }
  return t;
}

llvm::Expected<Tensor> daybreak::ref::parseTensorSpec(llvm::StringRef spec) {
  auto [typePart, valuePart] = spec.split('=');
  if (valuePart.empty() && !spec.contains('='))
    return specError(spec, "expected SHAPExTYPE=VALUES");
  llvm::SmallVector<llvm::StringRef> pieces;
  typePart.split(pieces, 'x');
  std::optional<ElementType> type = parseElementType(pieces.back());
  if (!type)
    return specError(spec, "unknown element type '" + pieces.back() + "'");
  std::vector<int64_t> shape;
  int64_t count = 1;
  for (llvm::StringRef dim : llvm::ArrayRef(pieces).drop_back()) {
    int64_t size;
    if (dim.getAsInteger(10, size) || size < 0)
      return specError(spec, "bad dim '" + dim + "'");
    shape.push_back(size);
    count *= size;
  }
  if (valuePart == "iota") {
    Tensor t = Tensor::zeros(*type, shape);
    for (int64_t i = 0; i < count; ++i) {
      if (t.isFloat())
        t.floats()[i] = roundTo(*type, static_cast<float>(i));
      else
        t.ints()[i] = i;
    }
    return t;
  }
  if (valuePart.consume_front("random")) {
    uint64_t seed = 0;
    if (valuePart.consume_front(":") && valuePart.getAsInteger(10, seed))
      return specError(spec, "bad random seed '" + valuePart + "'");
    return randomTensor(*type, shape, seed);
  }
  llvm::SmallVector<llvm::StringRef> items;
  valuePart.split(items, ',');
  if (items.size() != 1 && static_cast<int64_t>(items.size()) != count)
    return specError(spec, llvm::Twine(items.size()) + " values for " +
                               llvm::Twine(count) + " elements");
  Tensor t = Tensor::zeros(*type, shape);
  for (int64_t i = 0; i < count; ++i) {
    llvm::StringRef item = items.size() == 1 ? items[0] : items[i];
    item = item.trim();
    if (t.isFloat()) {
      double v;
      if (item.getAsDouble(v))
        return specError(spec, "bad float '" + item + "'");
      t.floats()[i] = roundTo(*type, static_cast<float>(v));
    } else {
      int64_t v;
      if (item.getAsInteger(10, v))
        return specError(spec, "bad integer '" + item + "'");
      t.ints()[i] = v;
    }
  }
  return t;
}

static void printElement(llvm::raw_ostream &os, const Tensor &t, int64_t i) {
  if (t.isFloat())
    os << llvm::format("%.6g", t.floats()[i]);
  else
    os << t.ints()[i];
}

/// Prints dims [dim, rank) of the block starting at `offset`, nested.
static void printNested(llvm::raw_ostream &os, const Tensor &t, int64_t dim,
                        int64_t offset, int64_t stride) {
  os << "[";
  int64_t inner = stride / std::max<int64_t>(t.dim(dim), 1);
  for (int64_t i = 0; i < t.dim(dim); ++i) {
    if (i)
      os << ", ";
    if (dim + 1 == t.rank())
      printElement(os, t, offset + i);
    else
      printNested(os, t, dim + 1, offset + i * inner, inner);
  }
  os << "]";
}

void daybreak::ref::printTensor(llvm::raw_ostream &os, const Tensor &t,
                                int64_t maxElements) {
  os << t.describe() << " = ";
  int64_t n = t.numel();
  if (n <= maxElements) {
    if (t.rank() == 0)
      printElement(os, t, 0);
    else
      printNested(os, t, 0, 0, n);
    os << "\n";
    return;
  }
  os << "[";
  for (int64_t i = 0; i < 8; ++i) {
    printElement(os, t, i);
    os << ", ";
  }
  os << "...]";
  double lo = INFINITY, hi = -INFINITY, sum = 0, sumAbs = 0;
  for (int64_t i = 0; i < n; ++i) {
    double v = t.isFloat() ? t.floats()[i] : static_cast<double>(t.ints()[i]);
    lo = std::min(lo, v);
    hi = std::max(hi, v);
    sum += v;
    sumAbs += std::fabs(v);
  }
  os << llvm::format(" min %.6g max %.6g mean %.6g mean|x| %.6g\n", lo, hi,
                     sum / n, sumAbs / n);
}
