//===- CpuKdaTest.cpp - The CPU KDA kernels against the reference ---------===//
//
// short_conv, kda_gate, kda_chunk, kda_step and gated_rms_norm on seeded
// random data against daybreak::ref (double precision; the KDA oracle is its
// token-by-token recurrence): several slots whose tokens interleave in the
// step, lengths across chunk boundaries (1, 63, 64, 65, 130 tokens), state
// carried into and out of the call and across calls, bf16 state slots, 1
// and 4 threads, and the errors on bad slots.
//
//===----------------------------------------------------------------------===//

#include "compiler/reference/Kernels.h"
#include "runtime/abi/KernelAbi.h"
#include "runtime/devices/cpu/CpuKernels.h"
#include "runtime/numerics/Numerics.h"

#include "test/unit/KernelTestUtil.h"

#include "gtest/gtest.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

using namespace daybreak;
using ref::Tensor;
using test::randomFloats;
using test::relClose;

namespace {

Tensor floats(std::vector<int64_t> shape, const std::vector<float> &values) {
  return Tensor::fromFloats(std::move(shape), values);
}

std::vector<float> toVector(const Tensor &t) {
  return std::vector<float>(t.floats().begin(), t.floats().end());
}

/// The slot of each token: `lengths[s]` tokens of slot s, interleaved in a
/// shuffled order that keeps each slot's tokens in order.
std::vector<int32_t> interleavedSlots(std::mt19937 &rng,
                                      const std::vector<int64_t> &lengths) {
  std::vector<int32_t> slots;
  for (size_t s = 0; s < lengths.size(); ++s)
    slots.insert(slots.end(), lengths[s], int32_t(s));
  std::shuffle(slots.begin(), slots.end(), rng);
  return slots;
}

Tensor sequencesTensor(const std::vector<int32_t> &slots) {
  return Tensor::fromInts({int64_t(slots.size())},
                          std::vector<int64_t>(slots.begin(), slots.end()));
}

cpu::StateView stateView(std::vector<float> &values, int64_t slots) {
  cpu::StateView view;
  view.base = reinterpret_cast<uint8_t *>(values.data());
  view.slots = slots;
  view.slotBytes = int64_t(values.size() * sizeof(float)) / slots;
  return view;
}

/// One KDA problem: H heads of Dk x Dv over tokens of several slots.
struct KdaProblem {
  int64_t heads, dk, dv, slots;
  std::vector<int32_t> sequences;
  std::vector<float> q, k, v, g, beta, state;

  KdaProblem(std::mt19937 &rng, int64_t heads, int64_t dk, int64_t dv,
             const std::vector<int64_t> &lengths)
      : heads(heads), dk(dk), dv(dv), slots(int64_t(lengths.size())) {
    sequences = interleavedSlots(rng, lengths);
    int64_t t = int64_t(sequences.size());
    q = randomFloats(rng, t * heads * dk);
    k = randomFloats(rng, t * heads * dk);
    v = randomFloats(rng, t * heads * dv);
    // Log decays as the gate makes them: mostly near 0, some strong.
    std::vector<float> raw = randomFloats(rng, t * heads * dk, -6.0f, 3.0f);
    g.resize(raw.size());
    for (size_t i = 0; i < raw.size(); ++i)
      g[i] = -std::log1p(std::exp(raw[i]));
    beta = randomFloats(rng, t * heads, 0.0f, 1.0f);
    state = randomFloats(rng, slots * heads * dk * dv, -0.5f, 0.5f);
  }
  int64_t tokens() const { return int64_t(sequences.size()); }
  cpu::KdaInputs inputs() const {
    return {q.data(), k.data(), v.data(), g.data(), beta.data()};
  }
  cpu::KdaShape shape(int64_t chunk) const {
    cpu::KdaShape s;
    s.heads = heads;
    s.keyDim = dk;
    s.valueDim = dv;
    s.scale = 1.0 / std::sqrt(double(dk));
    s.qkL2Norm = true;
    s.chunkSize = chunk;
    return s;
  }
  /// The reference recurrence, token by token, from `state`.
  ref::KdaResult expected() const {
    int64_t t = tokens();
    ref::KdaParams params;
    params.scale = 1.0 / std::sqrt(double(dk));
    params.qkL2Norm = true;
    auto result = ref::kdaSlots(
        floats({t, heads, dk}, q), floats({t, heads, dk}, k),
        floats({t, heads, dv}, v), floats({t, heads, dk}, g),
        floats({t, heads}, beta), floats({slots, heads, dk, dv}, state),
        sequencesTensor(sequences), params, /*chunked=*/false);
    EXPECT_TRUE(bool(result));
    return std::move(*result);
  }
};

enum class Form { Chunk, Step };

Status runKda(cpu::ThreadPool &pool, Form form, const KdaProblem &p,
              const cpu::KdaInputs &in, const int32_t *sequences,
              int64_t tokens, cpu::StateView state, int64_t chunk, float *out) {
  if (form == Form::Chunk)
    return cpu::kdaChunk(pool, in, state, sequences, tokens, p.shape(chunk),
                         out);
  return cpu::kdaStep(pool, in, state, sequences, tokens, p.shape(chunk), out);
}

} // namespace

TEST(CpuKda, ShortConvMatchesReference) {
  std::mt19937 rng(21);
  const int64_t channels = 80, width = 4; // two channel blocks, one partial
  std::vector<int64_t> lengths = {5, 1, 0, 9};
  std::vector<int32_t> slots = interleavedSlots(rng, lengths);
  int64_t tokens = int64_t(slots.size()), batch = int64_t(lengths.size());
  std::vector<float> x = randomFloats(rng, tokens * channels);
  std::vector<float> w = randomFloats(rng, channels * width);
  std::vector<float> state0 = randomFloats(rng, batch * (width - 1) * channels);
  for (auto [activation, refActivation] :
       {std::pair<int64_t, ref::ConvActivation>{daybreak::abi::silu,
                                                ref::ConvActivation::Silu},
        {daybreak::abi::none, ref::ConvActivation::None}}) {
    auto expected = ref::causalConv1dSlots(
        floats({tokens, channels}, x), floats({channels, width}, w),
        floats({batch, width - 1, channels}, state0), sequencesTensor(slots),
        refActivation);
    ASSERT_TRUE(bool(expected));
    for (unsigned threads : {1u, 4u}) {
      cpu::ThreadPool pool(threads);
      std::vector<float> state = state0, out(tokens * channels, NAN);
      Status status =
          cpu::shortConv(pool, x.data(), cpu::WeightView::f32(w.data()),
                         channels, width, stateView(state, batch), slots.data(),
                         tokens, activation, out.data());
      ASSERT_TRUE(status.ok()) << status.message();
      EXPECT_TRUE(relClose(out, toVector(expected->output), 1e-6));
      EXPECT_TRUE(relClose(state, toVector(expected->state), 0.0))
          << "the window is the slot's last inputs, exactly";
    }
  }
}

TEST(CpuKda, GateAndGatedNormMatchReference) {
  std::mt19937 rng(22);
  const int64_t tokens = 7, heads = 3, dim = 16;
  std::vector<float> raw = randomFloats(rng, tokens * heads * dim, -30, 30);
  std::vector<float> aLog = randomFloats(rng, heads);
  std::vector<float> dtBias = randomFloats(rng, heads * dim);
  cpu::ThreadPool pool(2);
  for (bool bounded : {false, true}) {
    double bound = -5.0;
    Tensor expected =
        ref::kdaGate(floats({tokens, heads, dim}, raw), floats({heads}, aLog),
                     floats({heads, dim}, dtBias),
                     bounded ? std::optional<double>(bound) : std::nullopt);
    std::vector<float> out(raw.size(), NAN);
    cpu::kdaGate(pool, raw.data(), aLog.data(), dtBias.data(), tokens, heads,
                 dim, bounded ? &bound : nullptr, out.data());
    EXPECT_TRUE(relClose(out, toVector(expected), 1e-6)) << bounded;
  }
  std::vector<float> x = randomFloats(rng, tokens * heads * dim);
  std::vector<float> gate = randomFloats(rng, tokens * heads * dim, -4, 4);
  std::vector<float> weight = randomFloats(rng, dim);
  for (auto [activation, refActivation] :
       {std::pair<int64_t, ref::GateActivation>{daybreak::abi::sigmoid,
                                                ref::GateActivation::Sigmoid},
        {daybreak::abi::silu, ref::GateActivation::Silu}}) {
    Tensor expected = ref::gatedRmsNorm(
        floats({tokens, heads, dim}, x), floats({tokens, heads, dim}, gate),
        floats({dim}, weight), 1e-5, refActivation);
    std::vector<float> out(x.size(), NAN);
    cpu::gatedRmsNorm(pool, x.data(), gate.data(),
                      cpu::WeightView::f32(weight.data()), tokens * heads, dim,
                      1e-5, activation, out.data());
    EXPECT_TRUE(relClose(out, toVector(expected), 1e-6));
  }
}

// The chunked form against the reference recurrence, per slot: lengths on
// both sides of the chunk boundary, ragged last chunks, a slot no token
// names (its state untouched), for chunks of 64 and 16 and the step form.
TEST(CpuKda, ChunkAndStepFormsMatchTheRecurrence) {
  std::mt19937 rng(23);
  KdaProblem p(rng, 2, 32, 16, {1, 63, 0, 65, 130, 64});
  ref::KdaResult expected = p.expected();
  std::vector<float> first;
  for (auto [form, chunk] : {std::pair{Form::Chunk, int64_t(64)},
                             {Form::Chunk, int64_t(16)},
                             {Form::Step, int64_t(0)}})
    for (unsigned threads : {1u, 4u}) {
      SCOPED_TRACE(testing::Message()
                   << (form == Form::Chunk ? "chunk " : "step ") << chunk
                   << ", " << threads << " threads");
      cpu::ThreadPool pool(threads);
      std::vector<float> state = p.state;
      std::vector<float> out(p.tokens() * p.heads * p.dv, NAN);
      Status status =
          runKda(pool, form, p, p.inputs(), p.sequences.data(), p.tokens(),
                 stateView(state, p.slots), chunk, out.data());
      ASSERT_TRUE(status.ok()) << status.message();
      // fp32 against the double recurrence over up to 130 tokens.
      EXPECT_TRUE(relClose(out, toVector(expected.output), 2e-5));
      EXPECT_TRUE(relClose(state, toVector(expected.state), 2e-5));
      if (form == Form::Chunk && chunk == 64) {
        if (first.empty())
          first = out;
        else
          EXPECT_EQ(out, first) << "depends on the thread count";
      }
    }
}

// A prompt split over calls (a chunked prefill, then decode steps) carries
// its state: the outputs equal one call's.
TEST(CpuKda, StateCarriesAcrossCalls) {
  std::mt19937 rng(24);
  KdaProblem p(rng, 2, 16, 16, {100, 37});
  ref::KdaResult expected = p.expected();
  cpu::ThreadPool pool(2);
  std::vector<float> state = p.state;
  std::vector<float> out(p.tokens() * p.heads * p.dv, NAN);
  int64_t splits[] = {0, 1, 8, 71, 120, p.tokens()};
  for (int i = 0; i + 1 < 6; ++i) {
    int64_t t0 = splits[i], n = splits[i + 1] - t0;
    cpu::KdaInputs in = {
        p.q.data() + t0 * p.heads * p.dk, p.k.data() + t0 * p.heads * p.dk,
        p.v.data() + t0 * p.heads * p.dv, p.g.data() + t0 * p.heads * p.dk,
        p.beta.data() + t0 * p.heads};
    Form form = n == 1 ? Form::Step : Form::Chunk;
    Status status =
        runKda(pool, form, p, in, p.sequences.data() + t0, n,
               stateView(state, p.slots), 64, out.data() + t0 * p.heads * p.dv);
    ASSERT_TRUE(status.ok()) << status.message();
  }
  EXPECT_TRUE(relClose(out, toVector(expected.output), 2e-5));
  EXPECT_TRUE(relClose(state, toVector(expected.state), 2e-5));
}

// bf16 slots are read widened and written rounded: from a bf16-exact state
// the final state is the f32 run's, rounded, and the outputs equal.
TEST(CpuKda, Bf16StateRoundsOnlyWhatItStores) {
  std::mt19937 rng(25);
  KdaProblem p(rng, 2, 16, 32, {70, 3});
  for (float &x : p.state)
    x = numerics::roundToBf16(x);
  cpu::ThreadPool pool(2);
  for (Form form : {Form::Chunk, Form::Step}) {
    std::vector<float> f32State = p.state, f32Out(p.tokens() * p.heads * p.dv);
    ASSERT_TRUE(runKda(pool, form, p, p.inputs(), p.sequences.data(),
                       p.tokens(), stateView(f32State, p.slots), 64,
                       f32Out.data())
                    .ok());
    std::vector<uint16_t> bf16State(p.state.size());
    for (size_t i = 0; i < p.state.size(); ++i)
      bf16State[i] = numerics::floatToBf16(p.state[i]);
    cpu::StateView view;
    view.base = reinterpret_cast<uint8_t *>(bf16State.data());
    view.bf16 = true;
    view.slots = p.slots;
    view.slotBytes = int64_t(bf16State.size() * 2) / p.slots;
    std::vector<float> out(f32Out.size(), NAN);
    ASSERT_TRUE(runKda(pool, form, p, p.inputs(), p.sequences.data(),
                       p.tokens(), view, 64, out.data())
                    .ok());
    EXPECT_EQ(out, f32Out);
    for (size_t i = 0; i < bf16State.size(); ++i)
      ASSERT_EQ(bf16State[i], numerics::floatToBf16(f32State[i])) << i;
  }
}

TEST(CpuKda, ErrorsNameTheSlotAndTheLimit) {
  std::mt19937 rng(26);
  KdaProblem p(rng, 1, 8, 8, {3, 2});
  cpu::ThreadPool pool(1);
  std::vector<float> state = p.state, out(p.tokens() * p.dv);
  std::vector<int32_t> bad = p.sequences;
  bad[2] = 2;
  for (Form form : {Form::Chunk, Form::Step}) {
    Status status = runKda(pool, form, p, p.inputs(), bad.data(), p.tokens(),
                           stateView(state, p.slots), 64, out.data());
    ASSERT_FALSE(status.ok());
    EXPECT_NE(status.message().find("sequence 2 of token 2 is outside the 2 "
                                    "state slots"),
              std::string::npos)
        << status.message();
  }
  EXPECT_EQ(state, p.state) << "a rejected launch changes no state";
  // A slot of another shape: 8 x 8 per head is not 8 x 4.
  cpu::KdaShape shape = p.shape(64);
  shape.valueDim = 4;
  Status status =
      cpu::kdaChunk(pool, p.inputs(), stateView(state, p.slots),
                    p.sequences.data(), p.tokens(), shape, out.data());
  ASSERT_FALSE(status.ok());
  EXPECT_NE(status.message().find("does not hold 1 heads of 8 x 4"),
            std::string::npos)
      << status.message();
  std::vector<float> x(p.tokens() * 8), w(8 * 4), conv(p.slots * 2 * 8);
  status = cpu::shortConv(pool, x.data(), cpu::WeightView::f32(w.data()), 8, 4,
                          stateView(conv, p.slots), p.sequences.data(),
                          p.tokens(), daybreak::abi::silu, x.data());
  ASSERT_FALSE(status.ok());
  EXPECT_NE(status.message().find("is not the 3 x 8 window"), std::string::npos)
      << status.message();
}
