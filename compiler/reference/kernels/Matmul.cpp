//===- Matmul.cpp - Reference dense, FP8 block and MXFP4 expert matmuls ---===//

#include "compiler/reference/Kernels.h"
#include "compiler/reference/kernels/KernelUtils.h"

#include <algorithm>

namespace daybreak::ref {

using namespace detail;

namespace {

/// y[m, n] = sum_k x[m, k] * weightAt(n, k) over `rows` rows of x.
template <typename WeightFn>
void matmulRows(const float *x, int64_t rows, int64_t n, int64_t k,
                WeightFn weightAt, const Tensor &bias, float *y) {
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t j = 0; j < n; ++j) {
      double sum = bias.empty() ? 0.0 : bias.floats()[j];
      for (int64_t i = 0; i < k; ++i)
        sum += static_cast<double>(x[r * k + i]) * weightAt(j, i);
      y[r * n + j] = static_cast<float>(sum);
    }
  }
}

} // namespace

Tensor matmul(const Tensor &x, const Tensor &w, const Tensor &bias) {
  int64_t n = w.dim(0), k = w.dim(1);
  Tensor y = Tensor::zeros(ElementType::F32, withLastDim(x.shape(), n));
  const std::vector<float> &weights = w.floats();
  matmulRows(
      x.floats().data(), rowsOf(x), n, k,
      [&](int64_t j, int64_t i) { return double(weights[j * k + i]); }, bias,
      y.floats().data());
  return y;
}

Tensor fp8BlockMatmul(const Tensor &x, const Tensor &w, const Tensor &scaleInv,
                      int64_t blockN, int64_t blockK) {
  int64_t n = w.dim(0), k = w.dim(1);
  int64_t scaleCols = scaleInv.dim(1);
  Tensor y = Tensor::zeros(ElementType::F32, withLastDim(x.shape(), n));
  const std::vector<float> &weights = w.floats();
  const std::vector<float> &scales = scaleInv.floats();
  // The product of an e4m3 value and an fp32 scale is exact in double.
  matmulRows(
      x.floats().data(), rowsOf(x), n, k,
      [&](int64_t j, int64_t i) {
        return double(weights[j * k + i]) *
               scales[(j / blockN) * scaleCols + i / blockK];
      },
      Tensor(), y.floats().data());
  return y;
}

namespace {

/// Grouped expert matmul shared by the plain and MXFP4 forms; `weightAt(e,
/// j, i)` is expert e's weight [j, i] as a double.
template <typename WeightFn>
llvm::Expected<Tensor> groupedExperts(const Tensor &x, const Tensor &indices,
                                      const Tensor &routingWeights,
                                      const Tensor &bias, int64_t experts,
                                      int64_t n, int64_t k, const char *what,
                                      WeightFn weightAt) {
  int64_t tokens = indices.dim(0), slots = indices.dim(1);
  if (llvm::Error err =
          detail::checkSlotIndices(indices, experts, what, "token"))
    return std::move(err);

  bool perSlotInput = x.rank() == 3;
  bool weighted = !routingWeights.empty();
  std::vector<int64_t> shape = weighted
                                   ? std::vector<int64_t>{tokens, n}
                                   : std::vector<int64_t>{tokens, slots, n};
  Tensor y = Tensor::zeros(ElementType::F32, shape);
  std::vector<double> mixed(n);
  for (int64_t t = 0; t < tokens; ++t) {
    std::fill(mixed.begin(), mixed.end(), 0.0);
    for (int64_t s = 0; s < slots; ++s) {
      int64_t expert = intAt(indices, t * slots + s);
      if (expert < 0)
        continue; // an empty slot contributes zero
      int64_t slot = t * slots + s;
      const float *in = x.floats().data() + (perSlotInput ? slot : t) * k;
      for (int64_t j = 0; j < n; ++j) {
        double sum = bias.empty() ? 0.0 : bias.floats()[expert * n + j];
        for (int64_t i = 0; i < k; ++i)
          sum += static_cast<double>(in[i]) * weightAt(expert, j, i);
        if (weighted)
          mixed[j] += routingWeights.floats()[slot] * sum;
        else
          y.floats()[slot * n + j] = static_cast<float>(sum);
      }
    }
    if (weighted)
      for (int64_t j = 0; j < n; ++j)
        y.floats()[t * n + j] = static_cast<float>(mixed[j]);
  }
  return y;
}

} // namespace

llvm::Expected<Tensor> mxfp4ExpertMatmul(const Tensor &x, const Tensor &w,
                                         const Tensor &scales,
                                         const Tensor &indices,
                                         const Tensor &routingWeights,
                                         const Tensor &bias) {
  int64_t experts = w.dim(0), n = w.dim(1), k = w.dim(2);
  int64_t groups = scales.dim(2);
  const std::vector<float> &values = w.floats();
  const std::vector<float> &blockScales = scales.floats();
  // An E2M1 value times an E8M0 scale is exact in double.
  return groupedExperts(x, indices, routingWeights, bias, experts, n, k,
                        "mxfp4ExpertMatmul: expert id",
                        [&](int64_t e, int64_t j, int64_t i) {
                          return double(values[(e * n + j) * k + i]) *
                                 blockScales[(e * n + j) * groups + i / 32];
                        });
}

llvm::Expected<Mxfp4Fp8Experts>
mxfp4ToFp8Experts(const Tensor &w, const Tensor &scales, const Tensor &indices,
                  const Tensor &bias, int64_t slotCount,
                  std::optional<int64_t> allFromTokens) {
  int64_t experts = w.dim(0), n = w.dim(1), k = w.dim(2);
  int64_t groups = scales.dim(2);
  if (llvm::Error err = checkSlotIndices(
          indices, experts, "mxfp4ToFp8Experts: expert id", "token"))
    return std::move(err);
  std::vector<int64_t> slotOf(experts, -1);
  int64_t used = 0;
  if (allFromTokens && indices.dim(0) >= *allFromTokens) {
    // Every expert in its own slot, whatever the step selects.
    for (int64_t e = 0; e < experts; ++e)
      slotOf[e] = used++;
  } else {
    for (int64_t e : indices.ints())
      if (e >= 0)
        slotOf[e] = 0;
    for (int64_t &slot : slotOf)
      if (slot == 0)
        slot = used++;
  }
  if (used > slotCount)
    return llvm::createStringError(
        llvm::inconvertibleErrorCode(),
        "mxfp4ToFp8Experts: %lld distinct experts exceed the workspace's %lld "
        "slots",
        static_cast<long long>(used), static_cast<long long>(slotCount));
  Mxfp4Fp8Experts out;
  out.codes = Tensor::zeros(ElementType::F8E4M3FN, {slotCount, n, k});
  out.blockScales = Tensor::zeros(ElementType::F32, {slotCount, n, groups});
  out.slotBias = Tensor::zeros(ElementType::F32, {slotCount, n});
  out.slots = indices;
  for (int64_t e = 0; e < experts; ++e) {
    int64_t s = slotOf[e];
    if (s < 0)
      continue;
    // Every E2M1 value is an E4M3 value and 2^(byte - 127) an f32: copies.
    std::copy_n(w.floats().begin() + e * n * k, n * k,
                out.codes.floats().begin() + s * n * k);
    std::copy_n(scales.floats().begin() + e * n * groups, n * groups,
                out.blockScales.floats().begin() + s * n * groups);
    if (!bias.empty())
      std::copy_n(bias.floats().begin() + e * n, n,
                  out.slotBias.floats().begin() + s * n);
  }
  for (int64_t &e : out.slots.ints())
    if (e >= 0)
      e = slotOf[e];
  return out;
}

llvm::Expected<Tensor> expertMatmul(const Tensor &x, const Tensor &w,
                                    const Tensor &indices,
                                    const Tensor &routingWeights,
                                    const Tensor &bias) {
  int64_t experts = w.dim(0), n = w.dim(1), k = w.dim(2);
  const std::vector<float> &values = w.floats();
  return groupedExperts(x, indices, routingWeights, bias, experts, n, k,
                        "expertMatmul: expert id",
                        [&](int64_t e, int64_t j, int64_t i) {
                          return double(values[(e * n + j) * k + i]);
                        });
}

Tensor headMatmul(const Tensor &x, const Tensor &w, bool transposeWeight) {
  int64_t tokens = x.dim(0), heads = x.dim(1), k = x.dim(2);
  int64_t n = transposeWeight ? w.dim(1) : w.dim(2);
  Tensor y = Tensor::zeros(ElementType::F32, {tokens, heads, n});
  const std::vector<float> &weights = w.floats();
  for (int64_t t = 0; t < tokens; ++t)
    for (int64_t h = 0; h < heads; ++h) {
      const float *in = x.floats().data() + (t * heads + h) * k;
      const float *wh = weights.data() + h * n * k;
      for (int64_t j = 0; j < n; ++j) {
        double sum = 0.0;
        for (int64_t i = 0; i < k; ++i)
          sum += static_cast<double>(in[i]) *
                 (transposeWeight ? wh[j * k + i] : wh[i * n + j]);
        y.floats()[(t * heads + h) * n + j] = static_cast<float>(sum);
      }
    }
  return y;
}

Tensor transpose(const Tensor &x, const std::vector<int64_t> &permutation) {
  const int64_t rank = x.rank();
  std::vector<int64_t> shape(rank), strides(rank, 1), step(rank);
  for (int64_t d = rank - 2; d >= 0; --d)
    strides[d] = strides[d + 1] * x.dim(d + 1);
  for (int64_t d = 0; d < rank; ++d) {
    shape[d] = x.dim(permutation[d]);
    step[d] = strides[permutation[d]]; // x's stride along result dim d
  }
  Tensor y = Tensor::zeros(x.type(), shape);
  std::vector<int64_t> index(rank, 0);
  int64_t source = 0;
  for (int64_t i = 0, n = y.numel(); i < n; ++i) {
    if (x.isFloat())
      y.floats()[i] = x.floats()[source];
    else
      y.ints()[i] = x.ints()[source];
    // The next result index, row-major, and its source offset.
    for (int64_t d = rank - 1; d >= 0; --d) {
      source += step[d];
      if (++index[d] < shape[d])
        break;
      source -= step[d] * shape[d];
      index[d] = 0;
    }
  }
  return y;
}

Tensor fp8Dequant(const Tensor &w, const Tensor &scaleInv, int64_t blockN,
                  int64_t blockK) {
  int64_t n = w.dim(-2), k = w.dim(-1);
  int64_t batches = w.numel() / std::max<int64_t>(n * k, 1);
  int64_t scaleRows = scaleInv.dim(-2), scaleCols = scaleInv.dim(-1);
  Tensor y = Tensor::zeros(ElementType::F32, w.shape());
  for (int64_t b = 0; b < batches; ++b)
    for (int64_t j = 0; j < n; ++j)
      for (int64_t i = 0; i < k; ++i)
        y.floats()[(b * n + j) * k + i] =
            w.floats()[(b * n + j) * k + i] *
            scaleInv.floats()[(b * scaleRows + j / blockN) * scaleCols +
                              i / blockK];
  return y;
}

} // namespace daybreak::ref
