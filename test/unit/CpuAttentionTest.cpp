//===- CpuAttentionTest.cpp - Dense GQA attention and gpt-oss routing -----===//
//
// cpu::attention against an oracle written here in double precision, on
// seeded random queries, keys and values: paged caches with a shuffled page
// table and ring (window) caches of exactly the rows a step needs, windows
// shorter and longer than the prompts, several sequences of different
// lengths (prefill chunks, decode tokens, interleaved) in one launch, GQA
// ratios 1 to 8, sinks on and off, f32, bf16 and fp8 storage. The oracle
// reads the values the cache stores, dequantised by this file's own
// rounding (bf16 RNE; e4m3 with the power-of-two block scale), so every
// storage type is held to the fp32 tolerance. cpu::moeRouteSoftmaxTopK
// against the reference evaluator's routing, ties included.
//
//===----------------------------------------------------------------------===//

#include "compiler/reference/Kernels.h"
#include "runtime/devices/cpu/CpuKernels.h"
#include "runtime/numerics/Numerics.h"

#include "test/unit/KernelTestUtil.h"

#include "gtest/gtest.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <numeric>
#include <random>
#include <string>
#include <vector>

using namespace daybreak;

namespace {

using test::randomFloats;
using test::relClose;

/// This file's own dequantised copy of a stored row: bf16 round to nearest
/// even; Fp8Scaled blocks of e4m3 times 2^ceil(log2(max(amax, 1e-4) / 448))
/// and a bf16 tail.
std::vector<float> storedValues(const cpu::CacheView &view, const float *in) {
  std::vector<float> out(in, in + view.width);
  if (view.format == cpu::CacheFormat::BF16)
    for (float &x : out)
      x = numerics::roundToBf16(x);
  if (view.format != cpu::CacheFormat::Fp8Scaled)
    return out;
  int64_t quantized = view.width - view.tailDim;
  for (int64_t b0 = 0; b0 < quantized; b0 += view.scaleBlock) {
    double amax = 1e-4;
    for (int64_t i = b0; i < b0 + view.scaleBlock; ++i)
      amax = std::max(amax, std::fabs(double(in[i])));
    int e = static_cast<int>(std::ceil(std::log2(amax / 448.0)));
    if (std::ldexp(1.0, e - 1) >= amax / 448.0) // log2 rounding at 2^n
      --e;
    for (int64_t i = b0; i < b0 + view.scaleBlock; ++i)
      out[i] = std::ldexp(numerics::roundToE4m3(std::ldexp(in[i], -e)), e);
  }
  for (int64_t i = quantized; i < view.width; ++i)
    out[i] = numerics::roundToBf16(in[i]);
  return out;
}

/// A cache of `batch` sequences: paged through a shuffled page table, or a
/// ring of `ringRows` rows per sequence (pageSize 1, as the CPU device sets
/// it for window caches).
struct TestCache {
  std::vector<uint8_t> storage;
  std::vector<int32_t> pageTable;
  cpu::CacheView view;

  TestCache(std::mt19937 &rng, cpu::CacheFormat format, int64_t width,
            int64_t tailDim, int64_t scaleBlock, int64_t batch,
            int64_t maxSeqLen, int64_t pageSize, int64_t ringRows) {
    view.format = format;
    view.width = width;
    view.tailDim = tailDim;
    view.scaleBlock = scaleBlock;
    view.bytesPerRow =
        cpu::cacheBytesPerRow(format, width, tailDim, scaleBlock);
    view.batch = batch;
    view.maxSeqLen = maxSeqLen;
    view.ringRows = ringRows;
    view.pageSize = ringRows ? 1 : pageSize;
    int64_t rows = batch * ringRows;
    if (!ringRows) {
      int64_t pages = batch * view.pagesPerSeq();
      pageTable.resize(pages);
      std::iota(pageTable.begin(), pageTable.end(), 0);
      std::shuffle(pageTable.begin(), pageTable.end(), rng);
      view.pageTable = pageTable.data();
      rows = pages * pageSize;
    }
    storage.assign(rows * view.bytesPerRow, 0xA5); // never read as zeros
    view.base = storage.data();
  }
};

/// One launch: the sequences' histories (rows the caches hold, in order,
/// so a ring keeps the last ones) and the step's queries.
struct Scenario {
  std::vector<int64_t> lengths;              ///< rows per sequence
  std::vector<int32_t> positions, sequences; ///< per token
};

/// Tokens [first, length) of each (sequence, first, length) in order: a
/// fresh prompt, a later chunk of one, or a decode token.
Scenario packed(std::vector<std::array<int64_t, 3>> runs, int64_t batch) {
  Scenario s;
  s.lengths.assign(batch, 0);
  for (auto [seq, first, length] : runs) {
    s.lengths[seq] = std::max(s.lengths[seq], length);
    for (int64_t p = first; p < length; ++p) {
      s.positions.push_back(int32_t(p));
      s.sequences.push_back(int32_t(seq));
    }
  }
  return s;
}

struct Case {
  const char *name;
  int64_t heads, kvHeads, headDim, valueDim;
  cpu::CacheFormat format;
  bool ring;
  int64_t window; ///< 0: none
  bool sinks;
  Scenario scenario;
};

/// out[t, h] = sum_j softmax_j(scale q . k_j) v_j over the keys query t
/// sees, the sink in the maximum and the denominator only; in double.
std::vector<float> oracle(const Case &c, const std::vector<float> &q,
                          const std::vector<std::vector<float>> &keys,
                          const std::vector<std::vector<float>> &values,
                          const std::vector<float> &sinks, double scale) {
  const Scenario &s = c.scenario;
  int64_t tokens = s.positions.size(), group = c.heads / c.kvHeads;
  std::vector<float> out(tokens * c.heads * c.valueDim);
  for (int64_t t = 0; t < tokens; ++t) {
    int64_t seq = s.sequences[t], p = s.positions[t];
    int64_t first = c.window ? std::max<int64_t>(0, p - c.window + 1) : 0;
    for (int64_t h = 0; h < c.heads; ++h) {
      int64_t g = h / group;
      const float *query = q.data() + (t * c.heads + h) * c.headDim;
      std::vector<double> logits;
      for (int64_t j = first; j <= p; ++j) {
        const float *key =
            keys[seq].data() + (j * c.kvHeads + g) * c.headDim;
        double dot = 0.0;
        for (int64_t d = 0; d < c.headDim; ++d)
          dot += double(query[d]) * key[d];
        logits.push_back(scale * dot);
      }
      double top = c.sinks ? sinks[h] : -INFINITY;
      for (double l : logits)
        top = std::max(top, l);
      double denominator = c.sinks ? std::exp(sinks[h] - top) : 0.0;
      std::vector<double> acc(c.valueDim, 0.0);
      for (int64_t j = first; j <= p; ++j) {
        double e = std::exp(logits[j - first] - top);
        denominator += e;
        const float *value =
            values[seq].data() + (j * c.kvHeads + g) * c.valueDim;
        for (int64_t d = 0; d < c.valueDim; ++d)
          acc[d] += e * value[d];
      }
      for (int64_t d = 0; d < c.valueDim; ++d)
        out[(t * c.heads + h) * c.valueDim + d] =
            logits.empty() ? 0.0f : float(acc[d] / denominator);
    }
  }
  return out;
}

const int64_t kBatch = 3, kMaxSeqLen = 48, kPageSize = 4;

std::vector<Case> cases() {
  using F = cpu::CacheFormat;
  // Prefill: a fresh prompt, a later chunk of another, a decode token of a
  // third; decode: one token per sequence, of different lengths.
  Scenario prefill = packed({{0, 0, 13}, {2, 5, 11}, {1, 30, 31}}, kBatch);
  Scenario decode = packed({{0, 0, 1}, {1, 16, 17}, {2, 39, 40}}, kBatch);
  Scenario interleaved = prefill;
  std::mt19937 rng(3);
  std::vector<size_t> order(interleaved.positions.size());
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), rng);
  for (size_t i = 0; i < order.size(); ++i) {
    interleaved.positions[i] = prefill.positions[order[i]];
    interleaved.sequences[i] = prefill.sequences[order[i]];
  }
  return {
      {"mha-f32-paged-prefill", 4, 4, 32, 32, F::F32, false, 0, false,
       prefill},
      {"gqa2-f32-paged-decode-sinks", 4, 2, 32, 32, F::F32, false, 0, true,
       decode},
      {"gqa4-bf16-paged-window5-prefill", 8, 2, 64, 48, F::BF16, false, 5,
       true, prefill},
      {"gqa4-f32-ring-window5-prefill-sinks", 8, 2, 32, 32, F::F32, true, 5,
       true, prefill},
      {"gqa2-bf16-ring-window64-prefill", 4, 2, 32, 16, F::BF16, true, 64,
       false, prefill},
      {"gqa8-fp8-ring-window7-decode-sinks", 16, 2, 64, 64, F::Fp8Scaled, true,
       7, true, decode},
      {"gqa4-fp8-paged-interleaved", 8, 2, 32, 32, F::Fp8Scaled, false, 9,
       false, interleaved},
      {"mqa-fp8-paged-prefill-sinks", 4, 1, 64, 32, F::Fp8Scaled, false, 0,
       true, prefill},
  };
}

TEST(CpuAttention, DenseAgainstDoubleOracle) {
  std::mt19937 rng(2026);
  for (const Case &c : cases()) {
    SCOPED_TRACE(c.name);
    const Scenario &s = c.scenario;
    int64_t tokens = s.positions.size();
    int64_t kWidth = c.kvHeads * c.headDim, vWidth = c.kvHeads * c.valueDim;
    // Fp8: blocks of 16 values and the last 16 of each row in bf16.
    bool fp8 = c.format == cpu::CacheFormat::Fp8Scaled;
    int64_t tail = fp8 ? 16 : 0, block = fp8 ? 16 : 0;
    int64_t ringRows = c.ring ? c.window - 1 + tokens : 0;
    TestCache k(rng, c.format, kWidth, tail, block, kBatch, kMaxSeqLen,
                kPageSize, ringRows);
    TestCache v(rng, c.format, vWidth, tail, block, kBatch, kMaxSeqLen,
                kPageSize, ringRows);
    // Histories written in position order (a ring keeps the last rows).
    std::vector<std::vector<float>> keys(kBatch), values(kBatch);
    for (int64_t seq = 0; seq < kBatch; ++seq)
      for (int64_t p = 0; p < s.lengths[seq]; ++p) {
        // Spread magnitudes over rows so blocks get different scales.
        float spread = std::ldexp(1.0f, int(p % 5) - 2);
        std::vector<float> kr = randomFloats(rng, kWidth, -spread, spread);
        std::vector<float> vr = randomFloats(rng, vWidth, -spread, spread);
        k.view.write(seq, p, kr.data());
        v.view.write(seq, p, vr.data());
        std::vector<float> ks = storedValues(k.view, kr.data());
        std::vector<float> vs = storedValues(v.view, vr.data());
        keys[seq].insert(keys[seq].end(), ks.begin(), ks.end());
        values[seq].insert(values[seq].end(), vs.begin(), vs.end());
      }
    std::vector<float> q = randomFloats(rng, tokens * c.heads * c.headDim);
    std::vector<float> sinks = randomFloats(rng, c.heads, -2.0f, 3.0f);
    double scale = 1.0 / std::sqrt(double(c.headDim)) * 2.0;
    std::vector<float> expected = oracle(c, q, keys, values, sinks, scale);
    std::vector<float> first;
    for (unsigned threads : {1u, 4u}) {
      cpu::ThreadPool pool(threads);
      std::vector<float> out(expected.size(), NAN);
      Status status = cpu::attention(
          pool, q.data(), k.view, v.view, s.positions.data(),
          s.sequences.data(), c.sinks ? sinks.data() : nullptr, tokens,
          c.heads, c.kvHeads, scale, c.window, out.data());
      ASSERT_TRUE(status.ok()) << status.message();
      // fp32 dot products and sums against double: ~1e-6 of the largest
      // output; the storage rounding is in the oracle's inputs.
      EXPECT_TRUE(relClose(out, expected, 1e-5)) << threads << " threads";
      if (first.empty())
        first = out;
      else
        EXPECT_EQ(out, first) << "depends on the thread count";
    }
  }
}

// Absorbed MLA (Kimi Linear): one cache of latent rows [c_kv | k_pe] is
// both the keys and, through columnPrefixView (value_columns), the values:
// the first 32 of each 48-value row. FP8 rows keep k_pe as their bf16 tail,
// so the prefix is exactly their scaled part.
TEST(CpuAttention, ValuesAsTheLatentRowsPrefix) {
  std::mt19937 rng(11);
  constexpr int64_t kLora = 32, kRope = 16, kWidth = kLora + kRope;
  using F = cpu::CacheFormat;
  for (F format : {F::F32, F::BF16, F::Fp8Scaled}) {
    SCOPED_TRACE(int(format));
    bool fp8 = format == F::Fp8Scaled;
    Case c{"latent", 4,
           1,        kWidth,
           kLora,    format,
           false,    0,
           false,    packed({{0, 0, 13}, {2, 5, 11}, {1, 30, 31}}, kBatch)};
    const Scenario &s = c.scenario;
    int64_t tokens = s.positions.size();
    TestCache latent(rng, format, kWidth, fp8 ? kRope : 0, fp8 ? 16 : 0, kBatch,
                     kMaxSeqLen, kPageSize, 0);
    std::vector<std::vector<float>> keys(kBatch), values(kBatch);
    for (int64_t seq = 0; seq < kBatch; ++seq)
      for (int64_t p = 0; p < s.lengths[seq]; ++p) {
        float spread = std::ldexp(1.0f, int(p % 5) - 2);
        std::vector<float> row = randomFloats(rng, kWidth, -spread, spread);
        latent.view.write(seq, p, row.data());
        std::vector<float> stored = storedValues(latent.view, row.data());
        keys[seq].insert(keys[seq].end(), stored.begin(), stored.end());
        values[seq].insert(values[seq].end(), stored.begin(),
                           stored.begin() + kLora);
      }
    std::vector<float> q = randomFloats(rng, tokens * c.heads * kWidth);
    double scale = 1.0 / std::sqrt(double(kWidth)) * 2.0;
    std::vector<float> expected = oracle(c, q, keys, values, {}, scale);
    cpu::ThreadPool pool(2);
    std::vector<float> out(expected.size(), NAN);
    Status status = cpu::attention(
        pool, q.data(), latent.view,
        runtime::columnPrefixView(latent.view, kLora), s.positions.data(),
        s.sequences.data(), nullptr, tokens, c.heads, 1, scale, 0, out.data());
    ASSERT_TRUE(status.ok()) << status.message();
    EXPECT_TRUE(relClose(out, expected, 1e-5));
  }
}

TEST(CpuAttention, DenseWithoutSequencesReadsSequenceZero) {
  std::mt19937 rng(5);
  TestCache k(rng, cpu::CacheFormat::F32, 32, 0, 0, 1, 16, 4, 0);
  TestCache v(rng, cpu::CacheFormat::F32, 32, 0, 0, 1, 16, 4, 0);
  Case c{"", 2, 1, 32, 32, cpu::CacheFormat::F32, false, 0, false,
         packed({{0, 0, 9}}, 1)};
  std::vector<std::vector<float>> keys(1), values(1);
  for (int64_t p = 0; p < 9; ++p) {
    std::vector<float> kr = randomFloats(rng, 32), vr = randomFloats(rng, 32);
    k.view.write(0, p, kr.data());
    v.view.write(0, p, vr.data());
    keys[0].insert(keys[0].end(), kr.begin(), kr.end());
    values[0].insert(values[0].end(), vr.begin(), vr.end());
  }
  std::vector<float> q = randomFloats(rng, 9 * 2 * 32), out(9 * 2 * 32);
  cpu::ThreadPool pool(2);
  ASSERT_TRUE(cpu::attention(pool, q.data(), k.view, v.view,
                             c.scenario.positions.data(), nullptr, nullptr, 9,
                             2, 1, 0.3, 0, out.data())
                  .ok());
  EXPECT_TRUE(relClose(out, oracle(c, q, keys, values, {}, 0.3), 1e-5));
}

TEST(CpuAttention, DenseErrorsNameTheValueAndTheLimit) {
  std::mt19937 rng(6);
  cpu::ThreadPool pool(2);
  TestCache paged(rng, cpu::CacheFormat::F32, 64, 0, 0, 2, 8, 4, 0);
  TestCache ring(rng, cpu::CacheFormat::F32, 64, 0, 0, 2, 8, 4, 4);
  std::vector<float> q(2 * 4 * 32), out(2 * 4 * 32);
  std::vector<int32_t> positions = {0, 1}, sequences = {0, 1};
  auto run = [&](const cpu::CacheView &k, const int32_t *pos,
                 const int32_t *seq, int64_t kvHeads, int64_t window) {
    return cpu::attention(pool, q.data(), k, paged.view, pos, seq, nullptr, 2,
                          4, kvHeads, 1.0, window, out.data());
  };
  auto expectError = [](const Status &status, const std::string &text) {
    ASSERT_FALSE(status.ok()) << text;
    EXPECT_NE(status.message().find(text), std::string::npos)
        << status.message();
  };
  std::vector<int32_t> badSeq = {0, 2}, badPos = {8, 1};
  expectError(run(paged.view, positions.data(), badSeq.data(), 2, 0),
              "sequence 2 of token 1 is outside the batch [0, 2)");
  expectError(run(paged.view, badPos.data(), sequences.data(), 2, 0),
              "position 8 of token 0 is outside [0, 8)");
  expectError(run(paged.view, positions.data(), sequences.data(), 3, 0),
              "do not split into 3 KV heads");
  // A ring of 4 rows holds a window of 3 for 2 tokens, not of 4.
  ASSERT_TRUE(run(ring.view, positions.data(), sequences.data(), 2, 3).ok());
  expectError(run(ring.view, positions.data(), sequences.data(), 2, 4),
              "a window cache of 4 rows per sequence cannot hold a window of "
              "4 keys and 2 tokens");
  expectError(run(ring.view, positions.data(), sequences.data(), 2, 0),
              "cannot hold a window of 0 keys");
}

TEST(CpuRouting, SoftmaxTopKAgainstTheReference) {
  std::mt19937 rng(7);
  for (int64_t tokens : {1, 9}) {
    const int64_t experts = 32;
    std::vector<float> logits = randomFloats(rng, tokens * experts, -4, 4);
    // Quantised so that ties occur, some across the top-k boundary.
    for (int64_t i = 0; i < tokens * experts; i += 2)
      logits[i] = std::round(logits[i]);
    std::vector<float> bias = randomFloats(rng, experts, -0.5f, 0.5f);
    for (float &b : bias)
      b = std::round(b * 4) / 4;
    for (auto [topK, withBias, scaling] :
         {std::tuple<int64_t, bool, double>{4, false, 1.0},
          {4, true, 1.0},
          {1, false, 2.0},
          {32, true, 0.5}}) {
      ref::RoutingParams rp;
      rp.score = ref::RoutingScore::SoftmaxTopK;
      rp.topK = topK;
      rp.scalingFactor = scaling;
      ref::Routing expected = ref::moeRoute(
          ref::Tensor::fromFloats({tokens, experts}, logits),
          withBias ? ref::Tensor::fromFloats({experts}, bias) : ref::Tensor(),
          rp);
      cpu::RouteParams p;
      p.score = runtime::RouteScore::SoftmaxTopK;
      p.topK = topK;
      p.scalingFactor = scaling;
      for (unsigned threads : {1u, 4u}) {
        cpu::ThreadPool pool(threads);
        std::vector<int32_t> indices(tokens * topK);
        std::vector<float> weights(tokens * topK);
        cpu::moeRouteSoftmaxTopK(pool, logits.data(),
                                 withBias ? bias.data() : nullptr, tokens,
                                 experts, p, indices.data(), weights.data());
        std::vector<int32_t> want(expected.indices.ints().begin(),
                                  expected.indices.ints().end());
        EXPECT_EQ(indices, want) << topK << " " << withBias; // exact
        // Both in double, rounded once to fp32.
        for (size_t i = 0; i < weights.size(); ++i)
          EXPECT_NEAR(weights[i], expected.weights.floats()[i], 1e-7)
              << i;
      }
    }
  }
}

TEST(CpuRouting, SoftmaxTopKTiesPickTheLowerIdAndBiasOnlySelects) {
  // Logits [1, 3, 2, 3]: top-2 are 1 and 3 (a tie, lower id first). A bias
  // that lifts expert 0 to 3.5 picks it first, but its weight comes from
  // its unbiased logit 1: [e^1, e^3] / (e^1 + e^3).
  std::vector<float> logits = {1, 3, 2, 3}, bias = {2.5f, 0, 0, 0};
  cpu::ThreadPool pool(1);
  cpu::RouteParams p;
  p.score = runtime::RouteScore::SoftmaxTopK;
  p.topK = 2;
  std::vector<int32_t> indices(2);
  std::vector<float> weights(2);
  cpu::moeRouteSoftmaxTopK(pool, logits.data(), nullptr, 1, 4, p,
                           indices.data(), weights.data());
  EXPECT_EQ(indices, (std::vector<int32_t>{1, 3}));
  EXPECT_EQ(weights, (std::vector<float>{0.5f, 0.5f}));
  cpu::moeRouteSoftmaxTopK(pool, logits.data(), bias.data(), 1, 4, p,
                           indices.data(), weights.data());
  EXPECT_EQ(indices, (std::vector<int32_t>{0, 1}));
  double denominator = std::exp(1.0) + std::exp(3.0);
  EXPECT_FLOAT_EQ(weights[0], float(std::exp(1.0) / denominator));
  EXPECT_FLOAT_EQ(weights[1], float(std::exp(3.0) / denominator));
}

} // namespace
