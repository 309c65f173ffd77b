//===- KdaTest.cpp - Tests of the KDA conv, gate, chunked and step scans --===//

#include "compiler/reference/Kernels.h"
#include "test/unit/reference/TestUtils.h"

#include <cmath>

using namespace daybreak::ref;
using namespace daybreak::ref::test;

namespace {

TEST(CausalConv1d, HandValuesAndState) {
  // One channel, taps [1, 2, 3], state [10, 20], x = [1, 2]:
  // xx = [10, 20, 1, 2]; y0 = 10 + 40 + 3 = 53, y1 = 20 + 2 + 6 = 28.
  // The new state is the last two rows of xx.
  Tensor x = floats({2, 1}, {1, 2});
  Tensor w = floats({1, 3}, {1, 2, 3});
  Tensor state = floats({2, 1}, {10, 20});
  ConvResult r = causalConv1d(x, w, state, ConvActivation::None);
  EXPECT_TRUE(allClose(r.output, {53, 28}, 0.0));
  EXPECT_TRUE(allClose(r.state, {1, 2}, 0.0));
  // Small taps keep SiLU away from identity: y0 = 0.1 + 0.4 + 0.03.
  Tensor small = floats({1, 3}, {0.01f, 0.02f, 0.03f});
  ConvResult s = causalConv1d(x, small, state, ConvActivation::Silu);
  double y0 = 0.01 * 10 + 0.02 * 20 + 0.03 * 1;
  EXPECT_NEAR(s.output.floats()[0], y0 / (1 + std::exp(-y0)), 1e-6);
}

TEST(CausalConv1d, StreamingEqualsOneShot) {
  // Two calls threading the state equal one call over the whole input.
  std::mt19937 rng(41);
  Tensor x = randomTensor(rng, {7, 5});
  Tensor w = randomTensor(rng, {5, 4});
  Tensor state = randomTensor(rng, {3, 5});
  ConvResult whole = causalConv1d(x, w, state, ConvActivation::Silu);
  Tensor head = Tensor::fromFloats(
      {3, 5}, std::vector<float>(x.floats().begin(), x.floats().begin() + 15));
  Tensor tail = Tensor::fromFloats(
      {4, 5}, std::vector<float>(x.floats().begin() + 15, x.floats().end()));
  ConvResult first = causalConv1d(head, w, state, ConvActivation::Silu);
  ConvResult second = causalConv1d(tail, w, first.state, ConvActivation::Silu);
  std::vector<float> joined = first.output.floats();
  joined.insert(joined.end(), second.output.floats().begin(),
                second.output.floats().end());
  EXPECT_TRUE(allClose(whole.output, Tensor::fromFloats({7, 5}, joined), 0.0));
  EXPECT_TRUE(allClose(whole.state, second.state, 0.0));
}

TEST(KdaGate, HandValues) {
  // H = 2, Dk = 2. exp(aLog) = [2, 1]; graw + dtBias = [0, 1 | 0, -1].
  // Unbounded: -a * softplus(x): softplus(0) = ln 2, softplus(1) =
  // ln(1 + e), softplus(-1) = ln(1 + 1/e).
  // Bounded (-5): -5 * sigmoid(a * x).
  Tensor graw = floats({1, 2, 2}, {0, 2, 1, 0});
  Tensor aLog = floats({2}, {float(std::log(2.0)), 0});
  Tensor dtBias = floats({2, 2}, {0, -1, -1, -1});
  double e = std::exp(1.0);
  EXPECT_TRUE(allClose(kdaGate(graw, aLog, dtBias, std::nullopt),
                       {-2 * std::log(2.0), -2 * std::log(1 + e),
                        -std::log(2.0), -std::log(1 + 1 / e)},
                       1e-6));
  EXPECT_TRUE(allClose(kdaGate(graw, aLog, dtBias, -5.0),
                       {-2.5, -5 / (1 + std::exp(-2.0)), -2.5, -5 / (1 + e)},
                       1e-6));
}

KdaParams rawParams(int64_t chunkSize) {
  KdaParams params;
  params.qkL2Norm = false;
  params.scale = 1.0;
  params.chunkSize = chunkSize;
  return params;
}

TEST(KdaStep, ScalarHandValue) {
  // S = 2; decay exp(ln 1/2) -> 1; u = 1/2 * (3 - 1 * 1) = 1; S = 1 + 1 = 2;
  // o = S * q = 2 * 2 = 4.
  KdaResult r =
      kdaStep(floats({1, 1, 1}, {2}), floats({1, 1, 1}, {1}),
              floats({1, 1, 1}, {3}), floats({1, 1, 1}, {float(std::log(0.5))}),
              floats({1, 1}, {0.5}), floats({1, 1, 1, 1}, {2}), rawParams(64));
  EXPECT_TRUE(allClose(r.output, {4}, 1e-6));
  EXPECT_TRUE(allClose(r.state, {2}, 1e-6));
}

TEST(KdaStep, L2NormAndScale) {
  // k = [3, 4] -> [0.6, 0.8]; q = [0, 5] -> [0, 1] * 0.5. S = 0, g = 0,
  // beta = 1, v = 10: u = 10, S = [6, 8]^T, o = 0.5 * 8 = 4.
  KdaParams params;
  params.scale = 0.5;
  KdaResult r = kdaStep(floats({1, 1, 2}, {0, 5}), floats({1, 1, 2}, {3, 4}),
                        floats({1, 1, 1}, {10}), floats({1, 1, 2}, {0, 0}),
                        floats({1, 1}, {1}),
                        Tensor::zeros(ElementType::F32, {1, 1, 2, 1}), params);
  EXPECT_TRUE(allClose(r.output, {4}, 1e-5));
  EXPECT_TRUE(allClose(r.state, {6, 8}, 1e-5));
}

TEST(KdaChunk, ScalarHandValues) {
  // Token 0 as in KdaStep.ScalarHandValue: o = 4, S = 2. Token 1: g = 0,
  // k = 1, v = 6, beta = 1/4: u = (6 - 2) / 4 = 1, S = 3, o = 3 * 1.
  Tensor q = floats({2, 1, 1}, {2, 1});
  Tensor k = floats({2, 1, 1}, {1, 1});
  Tensor v = floats({2, 1, 1}, {3, 6});
  Tensor g = floats({2, 1, 1}, {float(std::log(0.5)), 0});
  Tensor beta = floats({2, 1}, {0.5, 0.25});
  Tensor state = floats({1, 1, 1}, {2});
  for (int64_t chunk : {1, 2, 64}) {
    KdaResult r = kdaChunk(q, k, v, g, beta, state, rawParams(chunk));
    EXPECT_TRUE(allClose(r.output, {4, 3}, 1e-6)) << "chunk " << chunk;
    EXPECT_TRUE(allClose(r.state, {3}, 1e-6)) << "chunk " << chunk;
  }
}

struct KdaInputs {
  Tensor q, k, v, g, beta, state;
};

KdaInputs randomInputs(std::mt19937 &rng, int64_t tokens, int64_t heads,
                       int64_t keyDim, int64_t valueDim, bool withState,
                       float gMin = -1.0f) {
  KdaInputs in;
  in.q = randomTensor(rng, {tokens, heads, keyDim});
  in.k = randomTensor(rng, {tokens, heads, keyDim});
  in.v = randomTensor(rng, {tokens, heads, valueDim});
  in.g = randomTensor(rng, {tokens, heads, keyDim}, gMin, 0.0f);
  in.beta = randomTensor(rng, {tokens, heads}, 0.0f, 1.0f);
  in.state = withState
                 ? randomTensor(rng, {heads, keyDim, valueDim})
                 : Tensor::zeros(ElementType::F32, {heads, keyDim, valueDim});
  return in;
}

/// Row t of a [T, ...] tensor as a [1, ...] tensor (a batch of one).
Tensor tokenSlice(const Tensor &x, int64_t t) {
  int64_t size = x.numel() / x.dim(0);
  std::vector<int64_t> shape = x.shape();
  shape[0] = 1;
  return Tensor::fromFloats(
      shape, std::vector<float>(x.floats().begin() + t * size,
                                x.floats().begin() + (t + 1) * size));
}

/// The recurrent oracle: kdaStep token by token.
KdaResult stepByStep(const KdaInputs &in, const KdaParams &params) {
  int64_t tokens = in.q.dim(0), heads = in.q.dim(1), valueDim = in.v.dim(2);
  std::vector<int64_t> stateShape = in.state.shape();
  stateShape.insert(stateShape.begin(), 1);
  Tensor state = in.state.reshaped(stateShape);
  std::vector<float> outputs;
  for (int64_t t = 0; t < tokens; ++t) {
    KdaResult r =
        kdaStep(tokenSlice(in.q, t), tokenSlice(in.k, t), tokenSlice(in.v, t),
                tokenSlice(in.g, t), tokenSlice(in.beta, t), state, params);
    outputs.insert(outputs.end(), r.output.floats().begin(),
                   r.output.floats().end());
    state = r.state;
  }
  KdaResult result;
  result.output =
      Tensor::fromFloats({tokens, heads, valueDim}, std::move(outputs));
  result.state = state.reshaped(in.state.shape());
  return result;
}

/// Chunked and recurrent results agree to 1e-4 relative to the largest
/// magnitude of the expected tensor (absolute 1e-4 below magnitude 1).
void expectChunkMatchesSteps(const KdaInputs &in, const KdaParams &params) {
  KdaResult chunked =
      kdaChunk(in.q, in.k, in.v, in.g, in.beta, in.state, params);
  KdaResult stepped = stepByStep(in, params);
  double outTol = 1e-4 * std::max(1.0, maxAbs(stepped.output.floats()));
  double stateTol = 1e-4 * std::max(1.0, maxAbs(stepped.state.floats()));
  EXPECT_TRUE(allClose(chunked.output, stepped.output, outTol));
  EXPECT_TRUE(allClose(chunked.state, stepped.state, stateTol));
}

TEST(KdaChunk, EqualsTokenByTokenSteps) {
  std::mt19937 rng(42);
  struct Dims {
    int64_t keyDim, valueDim;
  };
  for (int64_t chunk : {16, 64}) {
    for (Dims dims : {Dims{8, 8}, Dims{16, 12}}) {
      // T < chunk, T = chunk, T = 2.5 chunks.
      for (int64_t tokens : {chunk / 2 - 1, chunk, chunk * 5 / 2}) {
        for (bool withState : {false, true}) {
          SCOPED_TRACE(::testing::Message()
                       << "chunk " << chunk << " Dk " << dims.keyDim << " Dv "
                       << dims.valueDim << " T " << tokens << " state "
                       << withState);
          KdaInputs in = randomInputs(rng, tokens, 2, dims.keyDim,
                                      dims.valueDim, withState);
          KdaParams params;
          params.chunkSize = chunk;
          params.scale = 1.0 / std::sqrt(double(dims.keyDim));
          expectChunkMatchesSteps(in, params);
        }
      }
    }
  }
}

TEST(KdaChunk, WithoutL2NormAndSmallKeys) {
  std::mt19937 rng(43);
  KdaInputs in = randomInputs(rng, 40, 2, 8, 8, true);
  for (float &value : in.k.floats())
    value *= 0.3f; // keeps beta |k|^2 < 2, so the raw delta rule is stable
  KdaParams params = rawParams(16);
  params.scale = 0.7;
  expectChunkMatchesSteps(in, params);
}

TEST(KdaChunk, StrongDecayDoesNotOverflow) {
  // g down to -20 per token: over a 64-token chunk Gamma reaches about
  // -1280, where e^-Gamma would overflow even a double.
  std::mt19937 rng(44);
  KdaInputs in = randomInputs(rng, 100, 2, 8, 8, true, -20.0f);
  KdaParams params;
  params.chunkSize = 64;
  expectChunkMatchesSteps(in, params);
  KdaResult r = kdaChunk(in.q, in.k, in.v, in.g, in.beta, in.state, params);
  for (float value : r.output.floats())
    ASSERT_TRUE(std::isfinite(value));
}

TEST(KdaChunk, EmptySequenceKeepsTheState) {
  std::mt19937 rng(45);
  KdaInputs in = randomInputs(rng, 0, 2, 8, 4, true);
  KdaResult r =
      kdaChunk(in.q, in.k, in.v, in.g, in.beta, in.state, KdaParams());
  EXPECT_EQ(r.output.shape(), (std::vector<int64_t>{0, 2, 4}));
  EXPECT_TRUE(allClose(r.state, in.state, 0.0));
}

//===----------------------------------------------------------------------===//
// Steps over several sequences (the `sequences` forms)
//===----------------------------------------------------------------------===//

/// Rows `rows` of a [T, ...] tensor.
Tensor rowsOf(const Tensor &x, const std::vector<int64_t> &rows) {
  int64_t size = x.dim(0) ? x.numel() / x.dim(0) : 0;
  std::vector<int64_t> shape = x.shape();
  shape[0] = int64_t(rows.size());
  std::vector<float> values;
  for (int64_t r : rows)
    values.insert(values.end(), x.floats().begin() + r * size,
                  x.floats().begin() + (r + 1) * size);
  return Tensor::fromFloats(shape, values);
}

/// Slot b of a [B, ...] state.
Tensor slotOf(const Tensor &state, int64_t b) {
  std::vector<int64_t> shape(state.shape().begin() + 1, state.shape().end());
  return rowsOf(state, {b}).reshaped(shape);
}

/// A step of 4 slots whose tokens interleave: slot 1 has three (two apart),
/// slot 0 two, slot 2 one, slot 3 none.
const std::vector<int64_t> kSlotOfToken = {1, 0, 1, 2, 0, 1};
std::vector<int64_t> tokensOf(int64_t slot) {
  std::vector<int64_t> tokens;
  for (size_t t = 0; t < kSlotOfToken.size(); ++t)
    if (kSlotOfToken[t] == slot)
      tokens.push_back(int64_t(t));
  return tokens;
}

TEST(CausalConv1dSlots, EachSlotAsItsOwnSequence) {
  std::mt19937 rng(46);
  int64_t tokens = int64_t(kSlotOfToken.size());
  Tensor x = randomTensor(rng, {tokens, 5});
  Tensor w = randomTensor(rng, {5, 4});
  Tensor state = randomTensor(rng, {4, 3, 5});
  Tensor sequences = Tensor::fromInts({tokens}, kSlotOfToken, ElementType::I32);
  auto r = causalConv1dSlots(x, w, state, sequences, ConvActivation::Silu);
  ASSERT_TRUE(!!r) << llvm::toString(r.takeError());
  for (int64_t b = 0; b < 4; ++b) {
    SCOPED_TRACE(::testing::Message() << "slot " << b);
    std::vector<int64_t> mine = tokensOf(b);
    ConvResult alone = causalConv1d(rowsOf(x, mine), w, slotOf(state, b),
                                    ConvActivation::Silu);
    EXPECT_TRUE(allClose(rowsOf(r->output, mine), alone.output, 0.0));
    // Slot 3 has no token: its state as it was.
    EXPECT_TRUE(allClose(slotOf(r->state, b),
                         mine.empty() ? slotOf(state, b) : alone.state, 0.0));
  }
  Tensor outside =
      Tensor::fromInts({tokens}, {1, 0, 4, 2, 0, 1}, ElementType::I32);
  auto bad = causalConv1dSlots(x, w, state, outside, ConvActivation::Silu);
  ASSERT_FALSE(!!bad);
  EXPECT_EQ(llvm::toString(bad.takeError()),
            "short_conv: token 2 names sequence 4, outside the state's slots "
            "[0, 4)");
}

TEST(KdaSlots, EachSlotAsItsOwnSequence) {
  std::mt19937 rng(47);
  int64_t tokens = int64_t(kSlotOfToken.size()), heads = 2, keyDim = 8,
          valueDim = 4;
  KdaInputs in = randomInputs(rng, tokens, heads, keyDim, valueDim, false);
  Tensor state = randomTensor(rng, {4, heads, keyDim, valueDim});
  Tensor sequences = Tensor::fromInts({tokens}, kSlotOfToken, ElementType::I32);
  KdaParams params;
  params.scale = 1.0 / std::sqrt(double(keyDim));
  for (bool chunked : {true, false}) {
    auto r = kdaSlots(in.q, in.k, in.v, in.g, in.beta, state, sequences, params,
                      chunked);
    ASSERT_TRUE(!!r) << llvm::toString(r.takeError());
    for (int64_t b = 0; b < 4; ++b) {
      SCOPED_TRACE(::testing::Message()
                   << "slot " << b << " chunked " << chunked);
      std::vector<int64_t> mine = tokensOf(b);
      KdaInputs alone{rowsOf(in.q, mine),    rowsOf(in.k, mine),
                      rowsOf(in.v, mine),    rowsOf(in.g, mine),
                      rowsOf(in.beta, mine), slotOf(state, b)};
      // Each slot's tokens from its own state: the per-sequence chunked
      // kernel, or the recurrent oracle token by token.
      KdaResult expected = chunked
                               ? kdaChunk(alone.q, alone.k, alone.v, alone.g,
                                          alone.beta, alone.state, params)
                               : stepByStep(alone, params);
      EXPECT_TRUE(allClose(rowsOf(r->output, mine), expected.output, 0.0));
      EXPECT_TRUE(allClose(slotOf(r->state, b), expected.state, 0.0));
    }
  }
}

} // namespace
