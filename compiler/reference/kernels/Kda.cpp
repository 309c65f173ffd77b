//===- Kda.cpp - Reference KDA: short conv, gate, chunked and step scans --===//

#include "compiler/reference/Kernels.h"
#include "compiler/reference/kernels/KernelUtils.h"

#include <algorithm>
#include <cmath>

namespace daybreak::ref {

using namespace detail;

namespace {

/// A dense row-major matrix of doubles; the scans keep their state and all
/// chunk intermediates in double.
struct Matrix {
  int64_t rows = 0, cols = 0;
  std::vector<double> data;

  Matrix(int64_t rows, int64_t cols)
      : rows(rows), cols(cols), data(rows * cols, 0.0) {}
  double &operator()(int64_t r, int64_t c) { return data[r * cols + c]; }
  double operator()(int64_t r, int64_t c) const { return data[r * cols + c]; }
};

/// Copies q and k of one token and head, L2-normalising both if asked and
/// scaling q, as the kernels do on entry.
void prepareQk(const float *q, const float *k, int64_t dim,
               const KdaParams &params, double *qOut, double *kOut) {
  double qNorm = 1.0, kNorm = 1.0;
  if (params.qkL2Norm) {
    double qSum = 0.0, kSum = 0.0;
    for (int64_t d = 0; d < dim; ++d) {
      qSum += static_cast<double>(q[d]) * q[d];
      kSum += static_cast<double>(k[d]) * k[d];
    }
    qNorm = 1.0 / std::sqrt(qSum + 1e-6);
    kNorm = 1.0 / std::sqrt(kSum + 1e-6);
  }
  for (int64_t d = 0; d < dim; ++d) {
    qOut[d] = q[d] * qNorm * params.scale;
    kOut[d] = k[d] * kNorm;
  }
}

/// Loads state [.., keyDim, valueDim] number `index`, or zeros if absent.
Matrix loadState(const Tensor &state, int64_t index, int64_t keyDim,
                 int64_t valueDim) {
  Matrix s(keyDim, valueDim);
  if (!state.empty())
    for (int64_t i = 0; i < keyDim * valueDim; ++i)
      s.data[i] = state.floats()[index * keyDim * valueDim + i];
  return s;
}

void storeState(const Matrix &s, int64_t index, Tensor &state) {
  for (size_t i = 0; i < s.data.size(); ++i)
    state.floats()[index * s.data.size() + i] = static_cast<float>(s.data[i]);
}

} // namespace

ConvResult causalConv1d(const Tensor &x, const Tensor &weight,
                        const Tensor &state, ConvActivation activation) {
  int64_t tokens = x.dim(0), channels = x.dim(1), width = weight.dim(1);
  int64_t history = width - 1;
  // xx = state ++ x, so that xx[t + j] is tap j of output t.
  auto xx = [&](int64_t row, int64_t c) -> double {
    if (row < history)
      return state.empty() ? 0.0 : state.floats()[row * channels + c];
    return x.floats()[(row - history) * channels + c];
  };
  ConvResult result;
  result.output = Tensor::zeros(ElementType::F32, {tokens, channels});
  result.state = Tensor::zeros(ElementType::F32, {history, channels});
  for (int64_t t = 0; t < tokens; ++t) {
    for (int64_t c = 0; c < channels; ++c) {
      double sum = 0.0;
      for (int64_t j = 0; j < width; ++j)
        sum += weight.floats()[c * width + j] * xx(t + j, c);
      if (activation == ConvActivation::Silu)
        sum = siluOf(sum);
      result.output.floats()[t * channels + c] = static_cast<float>(sum);
    }
  }
  for (int64_t r = 0; r < history; ++r)
    for (int64_t c = 0; c < channels; ++c)
      result.state.floats()[r * channels + c] =
          static_cast<float>(xx(tokens + r, c));
  return result;
}

Tensor kdaGate(const Tensor &graw, const Tensor &aLog, const Tensor &dtBias,
               std::optional<double> lowerBound) {
  int64_t heads = graw.dim(-2), dim = graw.dim(-1);
  Tensor g = Tensor::zeros(ElementType::F32, graw.shape());
  // aLog and dtBias index flat, so [H] or [1, 1, H, 1] and [H, Dk] or
  // [H * Dk] all work.
  for (int64_t i = 0, n = graw.numel(); i < n; ++i) {
    int64_t h = (i / dim) % heads, d = i % dim;
    double a = std::exp(static_cast<double>(aLog.floats()[h]));
    double x =
        static_cast<double>(graw.floats()[i]) + dtBias.floats()[h * dim + d];
    double value =
        lowerBound ? *lowerBound * sigmoidOf(a * x) : -a * softplusOf(x);
    g.floats()[i] = static_cast<float>(value);
  }
  return g;
}

KdaResult kdaStep(const Tensor &q, const Tensor &k, const Tensor &v,
                  const Tensor &g, const Tensor &beta, const Tensor &state,
                  const KdaParams &params) {
  int64_t batch = q.dim(0), heads = q.dim(1), keyDim = q.dim(2);
  int64_t valueDim = v.dim(2);
  KdaResult result;
  result.output = Tensor::zeros(ElementType::F32, {batch, heads, valueDim});
  result.state =
      Tensor::zeros(ElementType::F32, {batch, heads, keyDim, valueDim});
  std::vector<double> qn(keyDim), kn(keyDim), u(valueDim);
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t h = 0; h < heads; ++h) {
      int64_t bh = b * heads + h;
      Matrix s = loadState(state, bh, keyDim, valueDim);
      prepareQk(q.floats().data() + bh * keyDim,
                k.floats().data() + bh * keyDim, keyDim, params, qn.data(),
                kn.data());
      const float *gate = g.floats().data() + bh * keyDim;
      const float *value = v.floats().data() + bh * valueDim;
      double betaT = beta.floats()[bh];
      for (int64_t i = 0; i < keyDim; ++i) {
        double decay = std::exp(static_cast<double>(gate[i]));
        for (int64_t j = 0; j < valueDim; ++j)
          s(i, j) *= decay;
      }
      for (int64_t j = 0; j < valueDim; ++j) {
        double predicted = 0.0;
        for (int64_t i = 0; i < keyDim; ++i)
          predicted += s(i, j) * kn[i];
        u[j] = betaT * (value[j] - predicted);
      }
      for (int64_t i = 0; i < keyDim; ++i)
        for (int64_t j = 0; j < valueDim; ++j)
          s(i, j) += kn[i] * u[j];
      for (int64_t j = 0; j < valueDim; ++j) {
        double o = 0.0;
        for (int64_t i = 0; i < keyDim; ++i)
          o += s(i, j) * qn[i];
        result.output.floats()[bh * valueDim + j] = static_cast<float>(o);
      }
      storeState(s, bh, result.state);
    }
  }
  return result;
}

KdaResult kdaChunk(const Tensor &q, const Tensor &k, const Tensor &v,
                   const Tensor &g, const Tensor &beta, const Tensor &state,
                   const KdaParams &params) {
  int64_t tokens = q.dim(0), heads = q.dim(1), keyDim = q.dim(2);
  int64_t valueDim = v.dim(2);
  KdaResult result;
  result.output = Tensor::zeros(ElementType::F32, {tokens, heads, valueDim});
  result.state = Tensor::zeros(ElementType::F32, {heads, keyDim, valueDim});

  int64_t chunkSize = std::max<int64_t>(params.chunkSize, 1);
  for (int64_t h = 0; h < heads; ++h) {
    Matrix s = loadState(state, h, keyDim, valueDim);
    for (int64_t start = 0; start < tokens; start += chunkSize) {
      int64_t n = std::min(chunkSize, tokens - start);
      // Per-chunk operands; gamma is the inclusive cumulative log decay.
      Matrix qc(n, keyDim), kc(n, keyDim), gamma(n, keyDim), vc(n, valueDim);
      std::vector<double> betas(n);
      for (int64_t r = 0; r < n; ++r) {
        int64_t th = (start + r) * heads + h;
        prepareQk(q.floats().data() + th * keyDim,
                  k.floats().data() + th * keyDim, keyDim, params, &qc(r, 0),
                  &kc(r, 0));
        for (int64_t d = 0; d < keyDim; ++d)
          gamma(r, d) =
              (r ? gamma(r - 1, d) : 0.0) + g.floats()[th * keyDim + d];
        for (int64_t j = 0; j < valueDim; ++j)
          vc(r, j) = v.floats()[th * valueDim + j];
        betas[r] = beta.floats()[th];
      }
      // a_r . (exp(gamma_r - gamma_c) * k_c) for c <= r: the exponent is
      // <= 0, so it cannot overflow the way e^gamma_r * e^-gamma_c would.
      auto decayedDot = [&](const Matrix &a, int64_t r, int64_t c) {
        double sum = 0.0;
        for (int64_t d = 0; d < keyDim; ++d)
          sum += a(r, d) * kc(c, d) * std::exp(gamma(r, d) - gamma(c, d));
        return sum;
      };

      // 1. L (strictly lower), then (I + L)^-1 by forward substitution.
      Matrix lower(n, n), inverse(n, n);
      for (int64_t r = 0; r < n; ++r)
        for (int64_t c = 0; c < r; ++c)
          lower(r, c) = betas[r] * decayedDot(kc, r, c);
      for (int64_t r = 0; r < n; ++r) {
        inverse(r, r) = 1.0;
        for (int64_t c = 0; c < r; ++c) {
          double sum = 0.0;
          for (int64_t m = c; m < r; ++m)
            sum += lower(r, m) * inverse(m, c);
          inverse(r, c) = -sum;
        }
      }
      // A = (I + L)^-1 diag(beta); W = A (exp(gamma) * K); U = A V.
      Matrix w(n, keyDim), u(n, valueDim);
      for (int64_t r = 0; r < n; ++r) {
        for (int64_t c = 0; c <= r; ++c) {
          double a = inverse(r, c) * betas[c];
          for (int64_t d = 0; d < keyDim; ++d)
            w(r, d) += a * std::exp(gamma(c, d)) * kc(c, d);
          for (int64_t j = 0; j < valueDim; ++j)
            u(r, j) += a * vc(c, j);
        }
      }
      // 2. Causal q-k matrix including the diagonal.
      Matrix aqk(n, n);
      for (int64_t r = 0; r < n; ++r)
        for (int64_t c = 0; c <= r; ++c)
          aqk(r, c) = decayedDot(qc, r, c);
      // 3. Pseudo-values V' = U - W S against the entering state.
      Matrix pseudo(n, valueDim);
      for (int64_t r = 0; r < n; ++r) {
        for (int64_t j = 0; j < valueDim; ++j) {
          double sum = u(r, j);
          for (int64_t d = 0; d < keyDim; ++d)
            sum -= w(r, d) * s(d, j);
          pseudo(r, j) = sum;
        }
      }
      // O = (Q * exp(gamma)) S + Aqk V'.
      for (int64_t r = 0; r < n; ++r) {
        for (int64_t j = 0; j < valueDim; ++j) {
          double o = 0.0;
          for (int64_t d = 0; d < keyDim; ++d)
            o += qc(r, d) * std::exp(gamma(r, d)) * s(d, j);
          for (int64_t c = 0; c <= r; ++c)
            o += aqk(r, c) * pseudo(c, j);
          int64_t th = (start + r) * heads + h;
          result.output.floats()[th * valueDim + j] = static_cast<float>(o);
        }
      }
      // S <- diag(exp(gamma_last)) S + (exp(gamma_last - gamma) * K)^T V'.
      int64_t last = n - 1;
      for (int64_t d = 0; d < keyDim; ++d) {
        for (int64_t j = 0; j < valueDim; ++j) {
          double sum = std::exp(gamma(last, d)) * s(d, j);
          for (int64_t c = 0; c < n; ++c)
            sum += std::exp(gamma(last, d) - gamma(c, d)) * kc(c, d) *
                   pseudo(c, j);
          s(d, j) = sum;
        }
      }
    }
    storeState(s, h, result.state);
  }
  return result;
}

//===----------------------------------------------------------------------===//
// Steps over many sequences: the per-sequence kernels above, slot by slot
//===----------------------------------------------------------------------===//

namespace {

/// The tokens of each slot of `slots`, in step order; an error names a
/// token whose slot is outside [0, slots).
llvm::Expected<std::vector<std::vector<int64_t>>>
tokensBySlot(const Tensor &sequences, int64_t slots, llvm::StringRef op) {
  std::vector<std::vector<int64_t>> bySlot(slots);
  for (int64_t t = 0; t < sequences.numel(); ++t) {
    int64_t slot = intAt(sequences, t);
    if (slot < 0 || slot >= slots)
      return llvm::createStringError(
          llvm::inconvertibleErrorCode(),
          "%s: token %lld names sequence %lld, outside the state's slots "
          "[0, %lld)",
          op.str().c_str(), static_cast<long long>(t),
          static_cast<long long>(slot), static_cast<long long>(slots));
    bySlot[slot].push_back(t);
  }
  return bySlot;
}

/// Values per index of x's leading dim.
int64_t rowSize(const Tensor &x) { return x.dim(0) ? x.numel() / x.dim(0) : 0; }

/// Rows `rows` of x (leading dim), as an F32 tensor.
Tensor takeRows(const Tensor &x, const std::vector<int64_t> &rows) {
  std::vector<int64_t> shape = x.shape();
  shape[0] = static_cast<int64_t>(rows.size());
  Tensor out = Tensor::zeros(ElementType::F32, shape);
  int64_t size = rowSize(x);
  for (size_t i = 0; i < rows.size(); ++i)
    std::copy_n(x.floats().begin() + rows[i] * size, size,
                out.floats().begin() + int64_t(i) * size);
  return out;
}

/// Writes the rows of `from` to rows `rows` of `into`.
void putRows(Tensor &into, const Tensor &from,
             const std::vector<int64_t> &rows) {
  int64_t size = rowSize(into);
  for (size_t i = 0; i < rows.size(); ++i)
    std::copy_n(from.floats().begin() + int64_t(i) * size, size,
                into.floats().begin() + rows[i] * size);
}

/// Slot b of state [B, ...], without its leading dim.
Tensor takeSlot(const Tensor &state, int64_t b) {
  std::vector<int64_t> shape(state.shape().begin() + 1, state.shape().end());
  return takeRows(state, {b}).reshaped(shape);
}

} // namespace

llvm::Expected<ConvResult>
causalConv1dSlots(const Tensor &x, const Tensor &weight, const Tensor &state,
                  const Tensor &sequences, ConvActivation activation) {
  auto bySlot = tokensBySlot(sequences, state.dim(0), "short_conv");
  if (!bySlot)
    return bySlot.takeError();
  ConvResult result;
  result.output = Tensor::zeros(ElementType::F32, x.shape());
  result.state = state.castTo(ElementType::F32);
  for (int64_t b = 0; b < state.dim(0); ++b) {
    const std::vector<int64_t> &tokens = (*bySlot)[b];
    if (tokens.empty())
      continue;
    ConvResult r = causalConv1d(takeRows(x, tokens), weight, takeSlot(state, b),
                                activation);
    putRows(result.output, r.output, tokens);
    putRows(result.state, r.state, {b});
  }
  return result;
}

llvm::Expected<KdaResult> kdaSlots(const Tensor &q, const Tensor &k,
                                   const Tensor &v, const Tensor &g,
                                   const Tensor &beta, const Tensor &state,
                                   const Tensor &sequences,
                                   const KdaParams &params, bool chunked) {
  auto bySlot =
      tokensBySlot(sequences, state.dim(0), chunked ? "kda_chunk" : "kda_step");
  if (!bySlot)
    return bySlot.takeError();
  KdaResult result;
  result.output =
      Tensor::zeros(ElementType::F32, {q.dim(0), q.dim(1), v.dim(2)});
  result.state = state.castTo(ElementType::F32);
  for (int64_t b = 0; b < state.dim(0); ++b) {
    const std::vector<int64_t> &tokens = (*bySlot)[b];
    if (tokens.empty())
      continue;
    Tensor slotState = takeSlot(state, b);
    if (chunked) {
      KdaResult r = kdaChunk(takeRows(q, tokens), takeRows(k, tokens),
                             takeRows(v, tokens), takeRows(g, tokens),
                             takeRows(beta, tokens), slotState, params);
      putRows(result.output, r.output, tokens);
      slotState = std::move(r.state);
    } else {
      // Token by token, each a batch of one.
      std::vector<int64_t> shape = slotState.shape();
      shape.insert(shape.begin(), 1);
      slotState = slotState.reshaped(shape);
      for (int64_t t : tokens) {
        KdaResult r =
            kdaStep(takeRows(q, {t}), takeRows(k, {t}), takeRows(v, {t}),
                    takeRows(g, {t}), takeRows(beta, {t}), slotState, params);
        putRows(result.output, r.output, {t});
        slotState = std::move(r.state);
      }
    }
    putRows(result.state, slotState, {b});
  }
  return result;
}

} // namespace daybreak::ref
