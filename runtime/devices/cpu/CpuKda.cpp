//===- CpuKda.cpp - Kimi Delta Attention kernels for the CPU --------------===//
//
// The KDA layer's kernels over per-slot state (Kernels.def: short_conv,
// kda_gate, kda_chunk, kda_step, gated_rms_norm). A step's tokens are
// grouped by their slot first (a counting sort, step order kept within a
// slot); the scans then run one work item per slot and head (per channel
// block for the convolution), each loading its state into fp32 scratch,
// updating it and storing it back as stored (f32, or bf16 rounded to
// nearest even). kda_chunk is the chunked WY/UT form of models.md 2.4 with
// the decay differences exp(G_r - G_c), c <= r, taken directly (never
// factored into exp(G_r) exp(-G_c), which overflows over long chunks).
//
//===----------------------------------------------------------------------===//

#include "runtime/abi/KernelAbi.h"
#include "runtime/devices/cpu/CpuKernels.h"
#include "runtime/numerics/Numerics.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

namespace daybreak::cpu {

namespace {

/// A step's tokens grouped by slot: group i is slot slot[i], its tokens
/// tokens[start[i] .. start[i + 1]) in step order.
struct SlotGroups {
  int64_t count = 0;
  int32_t *slot = nullptr, *start = nullptr, *tokens = nullptr;
};

Status groupBySlot(const char *kernel, const int32_t *sequences, int64_t tokens,
                   int64_t slots, ScratchFrame &frame, SlotGroups &groups) {
  for (int64_t t = 0; t < tokens; ++t)
    if (sequences[t] < 0 || sequences[t] >= slots)
      return Status::error(std::string(kernel) + ": sequence " +
                           std::to_string(sequences[t]) + " of token " +
                           std::to_string(t) + " is outside the " +
                           std::to_string(slots) + " state slots");
  int32_t *firstOf = frame.take<int32_t>(slots + 1);
  std::fill(firstOf, firstOf + slots + 1, 0);
  for (int64_t t = 0; t < tokens; ++t)
    ++firstOf[sequences[t] + 1];
  groups.slot = frame.take<int32_t>(std::min(slots, tokens) + 1);
  groups.start = frame.take<int32_t>(std::min(slots, tokens) + 1);
  groups.tokens = frame.take<int32_t>(tokens);
  groups.count = 0;
  for (int64_t s = 0; s < slots; ++s) {
    if (firstOf[s + 1]) {
      groups.slot[groups.count] = int32_t(s);
      groups.start[groups.count++] = firstOf[s];
    }
    firstOf[s + 1] += firstOf[s];
  }
  groups.start[groups.count] = int32_t(tokens);
  for (int64_t t = 0; t < tokens; ++t)
    groups.tokens[firstOf[sequences[t]]++] = int32_t(t);
  return Status::success();
}

void loadState(const StateView &state, int64_t slot, int64_t first,
               int64_t count, float *out) {
  const uint8_t *base = state.base + slot * state.slotBytes;
  if (state.bf16) {
    const uint16_t *values = reinterpret_cast<const uint16_t *>(base) + first;
    for (int64_t i = 0; i < count; ++i)
      out[i] = numerics::bf16ToFloat(values[i]);
  } else {
    std::memcpy(out, reinterpret_cast<const float *>(base) + first,
                count * sizeof(float));
  }
}

void storeState(const StateView &state, int64_t slot, int64_t first,
                int64_t count, const float *in) {
  uint8_t *base = state.base + slot * state.slotBytes;
  if (state.bf16) {
    uint16_t *values = reinterpret_cast<uint16_t *>(base) + first;
    for (int64_t i = 0; i < count; ++i)
      values[i] = numerics::floatToBf16(in[i]);
  } else {
    std::memcpy(reinterpret_cast<float *>(base) + first, in,
                count * sizeof(float));
  }
}

float activate(int64_t activation, float x) {
  switch (activation) {
  case abi::sigmoid:
    return 1.0f / (1.0f + std::exp(-x));
  case abi::silu:
    return x / (1.0f + std::exp(-x));
  default:
    return x;
  }
}

/// q and k of one token and head as the scans use them: L2-normalised if
/// asked (x / sqrt(sum x^2 + 1e-6)), q then times the scale.
void prepareQk(const float *q, const float *k, int64_t dim,
               const KdaShape &shape, float *qOut, float *kOut) {
  double qScale = shape.scale, kScale = 1.0;
  if (shape.qkL2Norm) {
    double qSum = 0.0, kSum = 0.0;
    for (int64_t d = 0; d < dim; ++d) {
      qSum += double(q[d]) * q[d];
      kSum += double(k[d]) * k[d];
    }
    qScale /= std::sqrt(qSum + 1e-6);
    kScale /= std::sqrt(kSum + 1e-6);
  }
  for (int64_t d = 0; d < dim; ++d) {
    qOut[d] = static_cast<float>(q[d] * qScale);
    kOut[d] = static_cast<float>(k[d] * kScale);
  }
}

Status checkKdaShape(const char *kernel, const KdaShape &shape,
                     const StateView &state) {
  int64_t bytes =
      shape.heads * shape.keyDim * shape.valueDim * (state.bf16 ? 2 : 4);
  if (bytes != state.slotBytes)
    return Status::error(std::string(kernel) + ": a state slot of " +
                         std::to_string(state.slotBytes) +
                         " bytes does not hold " + std::to_string(shape.heads) +
                         " heads of " + std::to_string(shape.keyDim) + " x " +
                         std::to_string(shape.valueDim));
  return Status::success();
}

} // namespace

Status shortConv(ThreadPool &pool, const float *x, const WeightView &weight,
                 int64_t channels, int64_t width, const StateView &state,
                 const int32_t *sequences, int64_t tokens, int64_t activation,
                 float *out) {
  if (width < 1 ||
      (width - 1) * channels * (state.bf16 ? 2 : 4) != state.slotBytes)
    return Status::error(
        "short_conv: a state slot of " + std::to_string(state.slotBytes) +
        " bytes is not the " + std::to_string(width - 1) + " x " +
        std::to_string(channels) + " window of a width-" +
        std::to_string(width) + " convolution");
  ScratchFrame frame;
  SlotGroups groups;
  DAYBREAK_RETURN_IF_ERROR(
      groupBySlot("short_conv", sequences, tokens, state.slots, frame, groups));
  int64_t history = width - 1;
  // Channels in blocks: each block walks every slot's tokens.
  constexpr int64_t kBlock = 64;
  int64_t blocks = (channels + kBlock - 1) / kBlock;
  pool.parallelFor(blocks, 1, [&](int64_t begin, int64_t end) {
    ScratchFrame local;
    float *taps = local.take<float>(kBlock * width);
    float *window = local.take<float>((history + 1) * kBlock);
    for (int64_t blk = begin; blk < end; ++blk) {
      int64_t c0 = blk * kBlock, cn = std::min(kBlock, channels - c0);
      for (int64_t c = 0; c < cn; ++c)
        for (int64_t j = 0; j < width; ++j)
          taps[c * width + j] = weight.at((c0 + c) * width + j);
      for (int64_t g = 0; g < groups.count; ++g) {
        int64_t slot = groups.slot[g];
        // window rows 0 .. history - 1: the inputs before the next token.
        for (int64_t j = 0; j < history; ++j)
          loadState(state, slot, j * channels + c0, cn, window + j * kBlock);
        for (int64_t i = groups.start[g]; i < groups.start[g + 1]; ++i) {
          int64_t t = groups.tokens[i];
          std::memcpy(window + history * kBlock, x + t * channels + c0,
                      cn * sizeof(float));
          for (int64_t c = 0; c < cn; ++c) {
            float sum = 0.0f;
            for (int64_t j = 0; j < width; ++j)
              sum += taps[c * width + j] * window[j * kBlock + c];
            out[t * channels + c0 + c] = activate(activation, sum);
          }
          std::memmove(window, window + kBlock,
                       history * kBlock * sizeof(float));
        }
        for (int64_t j = 0; j < history; ++j)
          storeState(state, slot, j * channels + c0, cn, window + j * kBlock);
      }
    }
  });
  return Status::success();
}

void kdaGate(ThreadPool &pool, const float *raw, const float *aLog,
             const float *dtBias, int64_t tokens, int64_t heads, int64_t dim,
             const double *lowerBound, float *out) {
  pool.parallelFor(tokens, std::max<int64_t>(1, 16384 / (heads * dim)),
                   [&](int64_t begin, int64_t end) {
                     for (int64_t t = begin; t < end; ++t)
                       for (int64_t h = 0; h < heads; ++h) {
                         double a = std::exp(double(aLog[h]));
                         for (int64_t d = 0; d < dim; ++d) {
                           int64_t i = (t * heads + h) * dim + d;
                           double z = double(raw[i]) + dtBias[h * dim + d];
                           double g;
                           if (lowerBound) {
                             g = *lowerBound / (1.0 + std::exp(-a * z));
                           } else {
                             // softplus(z) = log1p(exp(z)), linear past 20 (as
                             // torch).
                             double softplus =
                                 z > 20.0 ? z : std::log1p(std::exp(z));
                             g = -a * softplus;
                           }
                           out[i] = static_cast<float>(g);
                         }
                       }
                   });
}

Status kdaChunk(ThreadPool &pool, const KdaInputs &in, const StateView &state,
                const int32_t *sequences, int64_t tokens, const KdaShape &shape,
                float *out) {
  DAYBREAK_RETURN_IF_ERROR(checkKdaShape("kda_chunk", shape, state));
  if (shape.chunkSize <= 0)
    return Status::error("kda_chunk: chunk size " +
                         std::to_string(shape.chunkSize));
  ScratchFrame frame;
  SlotGroups groups;
  DAYBREAK_RETURN_IF_ERROR(
      groupBySlot("kda_chunk", sequences, tokens, state.slots, frame, groups));
  const int64_t heads = shape.heads, dk = shape.keyDim, dv = shape.valueDim;
  const int64_t chunk = std::min(shape.chunkSize, std::max<int64_t>(tokens, 1));
  pool.parallelFor(groups.count * heads, 1, [&](int64_t begin, int64_t end) {
    ScratchFrame local;
    float *s = local.take<float>(dk * dv);
    float *q = local.take<float>(chunk * dk),
          *k = local.take<float>(chunk * dk);
    float *gamma = local.take<float>(chunk * dk);
    float *v = local.take<float>(chunk * dv), *beta = local.take<float>(chunk);
    float *lower = local.take<float>(chunk * chunk);
    float *qk = local.take<float>(chunk * chunk);
    float *inverse = local.take<float>(chunk * chunk);
    float *w = local.take<float>(chunk * dk);
    float *u = local.take<float>(chunk * dv);
    double *acc = local.take<double>(std::max(dk, dv));
    for (int64_t item = begin; item < end; ++item) {
      int64_t g = item / heads, h = item % heads;
      int64_t slot = groups.slot[g];
      loadState(state, slot, h * dk * dv, dk * dv, s);
      const int32_t *ids = groups.tokens + groups.start[g];
      int64_t count = groups.start[g + 1] - groups.start[g];
      for (int64_t c0 = 0; c0 < count; c0 += chunk) {
        int64_t n = std::min(chunk, count - c0);
        // The chunk's rows: q, k prepared, v, beta, and G the cumulative
        // log decay (G_r = g_0 + ... + g_r).
        for (int64_t r = 0; r < n; ++r) {
          int64_t t = ids[c0 + r];
          prepareQk(in.q + (t * heads + h) * dk, in.k + (t * heads + h) * dk,
                    dk, shape, q + r * dk, k + r * dk);
          std::memcpy(v + r * dv, in.v + (t * heads + h) * dv,
                      dv * sizeof(float));
          beta[r] = in.beta[t * heads + h];
          const float *gr = in.g + (t * heads + h) * dk;
          for (int64_t d = 0; d < dk; ++d)
            gamma[r * dk + d] = (r ? gamma[(r - 1) * dk + d] : 0.0f) + gr[d];
        }
        // L[r, c] = beta_r sum_d k_r k_c exp(G_r - G_c) (c < r) and
        // Aqk[r, c] = sum_d q_r k_c exp(G_r - G_c) (c <= r).
        for (int64_t r = 0; r < n; ++r)
          for (int64_t c = 0; c <= r; ++c) {
            double kk = 0.0, qkSum = 0.0;
            for (int64_t d = 0; d < dk; ++d) {
              double e =
                  std::exp(double(gamma[r * dk + d]) - gamma[c * dk + d]);
              double kc = double(k[c * dk + d]) * e;
              kk += double(k[r * dk + d]) * kc;
              qkSum += double(q[r * dk + d]) * kc;
            }
            lower[r * chunk + c] = c < r ? float(beta[r] * kk) : 0.0f;
            qk[r * chunk + c] = float(qkSum);
          }
        // (I + L)^-1 by forward substitution, unit lower triangular:
        // row r = e_r - sum_{c<r} L[r, c] row c.
        for (int64_t r = 0; r < n; ++r)
          for (int64_t j = 0; j <= r; ++j) {
            double sum = j == r ? 1.0 : 0.0;
            for (int64_t c = j; c < r; ++c)
              sum -= double(lower[r * chunk + c]) * inverse[c * chunk + j];
            inverse[r * chunk + j] = float(sum);
          }
        // A = (I + L)^-1 diag(beta); W = A (exp(G) k), U = A v; then the
        // pseudo-values V' = U - W S, kept in u.
        for (int64_t r = 0; r < n; ++r) {
          for (int64_t d = 0; d < dk; ++d) {
            double sum = 0.0;
            for (int64_t c = 0; c <= r; ++c)
              sum += double(inverse[r * chunk + c]) * beta[c] * k[c * dk + d] *
                     std::exp(double(gamma[c * dk + d]));
            w[r * dk + d] = float(sum);
          }
          for (int64_t e = 0; e < dv; ++e)
            acc[e] = 0.0;
          for (int64_t c = 0; c <= r; ++c) {
            double a = double(inverse[r * chunk + c]) * beta[c];
            for (int64_t e = 0; e < dv; ++e)
              acc[e] += a * v[c * dv + e];
          }
          for (int64_t d = 0; d < dk; ++d) {
            double wd = w[r * dk + d];
            for (int64_t e = 0; e < dv; ++e)
              acc[e] -= wd * s[d * dv + e];
          }
          for (int64_t e = 0; e < dv; ++e)
            u[r * dv + e] = float(acc[e]);
        }
        // O = (q exp(G)) S + Aqk V'.
        for (int64_t r = 0; r < n; ++r) {
          for (int64_t e = 0; e < dv; ++e)
            acc[e] = 0.0;
          for (int64_t d = 0; d < dk; ++d) {
            double qd =
                double(q[r * dk + d]) * std::exp(double(gamma[r * dk + d]));
            for (int64_t e = 0; e < dv; ++e)
              acc[e] += qd * s[d * dv + e];
          }
          for (int64_t c = 0; c <= r; ++c) {
            double a = qk[r * chunk + c];
            for (int64_t e = 0; e < dv; ++e)
              acc[e] += a * u[c * dv + e];
          }
          float *o = out + (ids[c0 + r] * heads + h) * dv;
          for (int64_t e = 0; e < dv; ++e)
            o[e] = float(acc[e]);
        }
        // S = diag(exp(G_last)) S + (exp(G_last - G) k)^T V'.
        const float *last = gamma + (n - 1) * dk;
        for (int64_t d = 0; d < dk; ++d) {
          for (int64_t e = 0; e < dv; ++e)
            acc[e] = double(s[d * dv + e]) * std::exp(double(last[d]));
          for (int64_t c = 0; c < n; ++c) {
            double kd = double(k[c * dk + d]) *
                        std::exp(double(last[d]) - gamma[c * dk + d]);
            for (int64_t e = 0; e < dv; ++e)
              acc[e] += kd * u[c * dv + e];
          }
          for (int64_t e = 0; e < dv; ++e)
            s[d * dv + e] = float(acc[e]);
        }
      }
      storeState(state, slot, h * dk * dv, dk * dv, s);
    }
  });
  return Status::success();
}

Status kdaStep(ThreadPool &pool, const KdaInputs &in, const StateView &state,
               const int32_t *sequences, int64_t tokens, const KdaShape &shape,
               float *out) {
  DAYBREAK_RETURN_IF_ERROR(checkKdaShape("kda_step", shape, state));
  ScratchFrame frame;
  SlotGroups groups;
  DAYBREAK_RETURN_IF_ERROR(
      groupBySlot("kda_step", sequences, tokens, state.slots, frame, groups));
  const int64_t heads = shape.heads, dk = shape.keyDim, dv = shape.valueDim;
  pool.parallelFor(groups.count * heads, 1, [&](int64_t begin, int64_t end) {
    ScratchFrame local;
    float *s = local.take<float>(dk * dv);
    float *q = local.take<float>(dk), *k = local.take<float>(dk);
    double *acc = local.take<double>(dv);
    for (int64_t item = begin; item < end; ++item) {
      int64_t g = item / heads, h = item % heads;
      int64_t slot = groups.slot[g];
      loadState(state, slot, h * dk * dv, dk * dv, s);
      for (int64_t i = groups.start[g]; i < groups.start[g + 1]; ++i) {
        int64_t t = groups.tokens[i];
        prepareQk(in.q + (t * heads + h) * dk, in.k + (t * heads + h) * dk, dk,
                  shape, q, k);
        const float *gt = in.g + (t * heads + h) * dk;
        const float *vt = in.v + (t * heads + h) * dv;
        double beta = in.beta[t * heads + h];
        // S <- diag(exp(g)) S; u = beta (v - S^T k); S <- S + k u^T.
        for (int64_t e = 0; e < dv; ++e)
          acc[e] = 0.0;
        for (int64_t d = 0; d < dk; ++d) {
          float decay = std::exp(gt[d]);
          float *row = s + d * dv;
          for (int64_t e = 0; e < dv; ++e) {
            row[e] *= decay;
            acc[e] += double(k[d]) * row[e];
          }
        }
        for (int64_t e = 0; e < dv; ++e)
          acc[e] = beta * (vt[e] - acc[e]);
        for (int64_t d = 0; d < dk; ++d) {
          float *row = s + d * dv;
          for (int64_t e = 0; e < dv; ++e)
            row[e] += static_cast<float>(k[d] * acc[e]);
        }
        // o = S^T q.
        for (int64_t e = 0; e < dv; ++e)
          acc[e] = 0.0;
        for (int64_t d = 0; d < dk; ++d)
          for (int64_t e = 0; e < dv; ++e)
            acc[e] += double(q[d]) * s[d * dv + e];
        float *o = out + (t * heads + h) * dv;
        for (int64_t e = 0; e < dv; ++e)
          o[e] = static_cast<float>(acc[e]);
      }
      storeState(state, slot, h * dk * dv, dk * dv, s);
    }
  });
  return Status::success();
}

void gatedRmsNorm(ThreadPool &pool, const float *x, const float *gate,
                  const WeightView &weight, int64_t rows, int64_t dim,
                  double eps, int64_t activation, float *out) {
  pool.parallelFor(
      rows, std::max<int64_t>(1, 16384 / dim), [&](int64_t begin, int64_t end) {
        for (int64_t r = begin; r < end; ++r) {
          const float *in = x + r * dim, *gr = gate + r * dim;
          double sumSquares = 0.0;
          for (int64_t i = 0; i < dim; ++i)
            sumSquares += double(in[i]) * in[i];
          double inv = 1.0 / std::sqrt(sumSquares / double(dim) + eps);
          for (int64_t i = 0; i < dim; ++i)
            out[r * dim + i] = static_cast<float>(
                in[i] * inv * (weight.data ? weight.at(i) : 1.0f) *
                activate(activation, gr[i]));
        }
      });
}

//===----------------------------------------------------------------------===//
// DSA k-pool (GLM-5.3's pooled indexer keys): per-slot state like the scans
// above, so it shares their grouping and state access.
//===----------------------------------------------------------------------===//

Status dsaKpool(ThreadPool &pool, const float *keys, const float *gate,
                const WeightView &ape, int64_t poolSize, int64_t width,
                const StateView &state, const int32_t *positions,
                const int32_t *sequences, int64_t tokens, float *out) {
  int64_t tailRows = std::max<int64_t>(poolSize - 1, 1);
  if (poolSize < 1 ||
      tailRows * 2 * width * (state.bf16 ? 2 : 4) != state.slotBytes)
    return Status::error("dsa_kpool: a state slot of " +
                         std::to_string(state.slotBytes) +
                         " bytes is not the [" + std::to_string(tailRows) +
                         ", 2 x " + std::to_string(width) + "] tail of " +
                         std::to_string(poolSize) + "-token pools");
  ScratchFrame frame;
  SlotGroups groups;
  DAYBREAK_RETURN_IF_ERROR(
      groupBySlot("dsa_kpool", sequences, tokens, state.slots, frame, groups));
  for (int64_t g = 0; g < groups.count; ++g) {
    int64_t first = positions[groups.tokens[groups.start[g]]];
    if (first < 0)
      return Status::error("dsa_kpool: negative position " +
                           std::to_string(first));
    for (int64_t i = groups.start[g]; i < groups.start[g + 1]; ++i)
      if (positions[groups.tokens[i]] != first + (i - groups.start[g]))
        return Status::error(
            "dsa_kpool: the tokens of sequence " +
            std::to_string(groups.slot[g]) +
            " in a step must have consecutive positions; token " +
            std::to_string(groups.tokens[i]) + " is at " +
            std::to_string(positions[groups.tokens[i]]));
  }
  // Work items: a slot's pools over a block of channels. Each reads the
  // slot's old tail (the first pool's members from earlier steps) before
  // it writes the new one, for its own channels only.
  constexpr int64_t kBlock = 64;
  int64_t blocks = (width + kBlock - 1) / kBlock;
  pool.parallelFor(groups.count * blocks, 1, [&](int64_t begin, int64_t end) {
    ScratchFrame local;
    float *member = local.take<float>(2 * poolSize * kBlock);
    double *weights = local.take<double>(kBlock);
    for (int64_t item = begin; item < end; ++item) {
      int64_t g = item / blocks, c0 = item % blocks * kBlock;
      int64_t cn = std::min(kBlock, width - c0), slot = groups.slot[g];
      const int32_t *mine = groups.tokens + groups.start[g];
      int64_t count = groups.start[g + 1] - groups.start[g];
      int64_t first = positions[mine[0]], last = first + count - 1;
      for (int64_t j = first / poolSize; j <= last / poolSize; ++j) {
        int64_t start = j * poolSize;
        int64_t members = std::min(start + poolSize - 1, last) - start + 1;
        // member rows: [key (cn) | gate (cn)] of each member.
        for (int64_t m = 0; m < members; ++m) {
          float *row = member + 2 * m * kBlock;
          int64_t position = start + m;
          if (position < first) {
            int64_t tail = position % poolSize * 2 * width;
            loadState(state, slot, tail + c0, cn, row);
            loadState(state, slot, tail + width + c0, cn, row + kBlock);
          } else {
            int64_t t = mine[position - first];
            std::memcpy(row, keys + t * width + c0, cn * sizeof(float));
            std::memcpy(row + kBlock, gate + t * width + c0,
                        cn * sizeof(float));
          }
        }
        // Per channel, the softmax over members of gate + ape.
        for (int64_t c = 0; c < cn; ++c) {
          double top = -INFINITY;
          for (int64_t m = 0; m < members; ++m)
            top = std::max(top, double(member[(2 * m + 1) * kBlock + c]) +
                                    ape.at(m * width + c0 + c));
          double num = 0.0, den = 0.0;
          for (int64_t m = 0; m < members; ++m) {
            double e = std::exp(double(member[(2 * m + 1) * kBlock + c]) +
                                ape.at(m * width + c0 + c) - top);
            num += e * member[2 * m * kBlock + c];
            den += e;
          }
          weights[c] = num / den;
        }
        for (int64_t position = std::max(start, first);
             position < start + members; ++position)
          for (int64_t c = 0; c < cn; ++c)
            out[mine[position - first] * width + c0 + c] = float(weights[c]);
      }
      // The incomplete pool after the step: its members from this step
      // (those from earlier steps are in their rows already).
      for (int64_t position = std::max(first, (last + 1) / poolSize * poolSize);
           position <= last; ++position) {
        int64_t t = mine[position - first],
                tail = position % poolSize * 2 * width;
        storeState(state, slot, tail + c0, cn, keys + t * width + c0);
        storeState(state, slot, tail + width + c0, cn, gate + t * width + c0);
      }
    }
  });
  return Status::success();
}

void dsaKpoolExpand(ThreadPool &pool, const int32_t *pools,
                    const int32_t *positions, int64_t tokens, int64_t k,
                    int64_t poolSize, int32_t *out) {
  int64_t width = k * poolSize + poolSize - 1;
  pool.parallelFor(tokens, 64, [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      int32_t *row = out + t * width;
      int64_t n = 0;
      for (int64_t i = 0; i < k; ++i)
        if (int64_t j = pools[t * k + i]; j >= 0)
          for (int64_t m = 0; m < poolSize; ++m)
            row[n++] = int32_t(j * poolSize + m);
      int64_t p = positions[t];
      for (int64_t m = (p + 1) / poolSize * poolSize; m <= p; ++m)
        row[n++] = int32_t(m);
      std::fill(row + n, row + width, -1);
    }
  });
}

} // namespace daybreak::cpu
