//===- CpuKpoolTest.cpp - GLM's k-pool kernels against the reference ------===//
//
// dsa_kpool and dsa_kpool_expand on seeded random data against
// daybreak::ref (double precision, written from the definition in
// glm5_next.md 5.2-5.3): pool sizes 1, 2, 4 and 8, key widths inside and
// across the kernel's 64-channel blocks, several slots whose tokens
// interleave in a step and advance by ragged amounts over several steps
// (pools completed across steps, one token at a time as decode does, and a
// slot starting again at position 0), f32 and bf16 state, 1 and 3 threads,
// and the errors on bad slots and non-consecutive positions.
//
//===----------------------------------------------------------------------===//

#include "compiler/reference/Kernels.h"
#include "runtime/devices/cpu/CpuKernels.h"
#include "runtime/numerics/Numerics.h"

#include "test/unit/KernelTestUtil.h"

#include "gtest/gtest.h"

#include <algorithm>
#include <random>
#include <vector>

using namespace daybreak;
using ref::Tensor;
using test::randomFloats;
using test::relClose;

namespace {

struct KpoolCase {
  int64_t pool, width, slots;
  bool bf16;
  int threads;
};

class CpuKpool : public ::testing::TestWithParam<KpoolCase> {};

TEST_P(CpuKpool, MatchesReferenceAcrossSteps) {
  const KpoolCase c = GetParam();
  std::mt19937 rng(unsigned(1000 * c.pool + c.width + c.slots));
  int64_t tailRows = std::max<int64_t>(c.pool - 1, 1);
  int64_t slotValues = tailRows * 2 * c.width;
  std::vector<float> ape = randomFloats(rng, c.pool * c.width, -1.0f, 1.0f);
  // The kernel's state as stored (f32 values or bf16 bits) and the
  // reference's, rounded as the kernel stores it.
  std::vector<float> state(c.slots * slotValues, 0.0f);
  std::vector<uint16_t> state16(c.slots * slotValues, 0);
  std::vector<float> refState(c.slots * slotValues, 0.0f);
  std::vector<int64_t> next(c.slots, 0);
  cpu::ThreadPool pool(c.threads);
  // Steps: prompts in ragged chunks, then one token a slot (decode), then
  // slot 0 starts a new sequence at position 0.
  std::vector<std::vector<int64_t>> steps = {{5, 1, 0}, {7, 13, 2}, {1, 3, 9},
                                             {1, 1, 1}, {1, 1, 1},  {2, 0, 17}};
  for (size_t step = 0; step < steps.size(); ++step) {
    if (step == steps.size() - 1)
      next[0] = 0;
    std::vector<int32_t> sequences;
    for (int64_t s = 0; s < c.slots; ++s)
      sequences.insert(sequences.end(), steps[step][s % 3], int32_t(s));
    std::stable_sort(sequences.begin(), sequences.end());
    std::shuffle(sequences.begin(), sequences.end(), rng);
    // Positions in step order within each slot.
    std::vector<int32_t> positions(sequences.size());
    std::vector<int64_t> at = next;
    for (size_t t = 0; t < sequences.size(); ++t)
      positions[t] = int32_t(at[sequences[t]]++);
    int64_t tokens = int64_t(sequences.size());
    std::vector<float> keys = randomFloats(rng, tokens * c.width);
    std::vector<float> gate = randomFloats(rng, tokens * c.width, -2.0f, 2.0f);

    cpu::StateView view;
    view.base = c.bf16 ? reinterpret_cast<uint8_t *>(state16.data())
                       : reinterpret_cast<uint8_t *>(state.data());
    view.bf16 = c.bf16;
    view.slots = c.slots;
    view.slotBytes = slotValues * (c.bf16 ? 2 : 4);
    std::vector<float> out(tokens * c.width, -7.0f);
    Status status =
        cpu::dsaKpool(pool, keys.data(), gate.data(),
                      cpu::WeightView::f32(ape.data()), c.pool, c.width, view,
                      positions.data(), sequences.data(), tokens, out.data());
    ASSERT_TRUE(status.ok()) << status.message();

    auto ints = [](const std::vector<int32_t> &v) {
      return Tensor::fromInts({int64_t(v.size())},
                              std::vector<int64_t>(v.begin(), v.end()));
    };
    auto expected = ref::dsaKpool(
        Tensor::fromFloats({tokens, c.width}, keys),
        Tensor::fromFloats({tokens, c.width}, gate),
        Tensor::fromFloats({c.pool, c.width}, ape),
        Tensor::fromFloats({c.slots, tailRows, 2 * c.width}, refState),
        ints(positions), ints(sequences));
    ASSERT_TRUE(bool(expected)) << llvm::toString(expected.takeError());
    std::vector<float> want(expected->output.floats().begin(),
                            expected->output.floats().end());
    EXPECT_TRUE(relClose(out, want, 1e-6)) << "step " << step;
    refState.assign(expected->state.floats().begin(),
                    expected->state.floats().end());
    if (c.bf16)
      for (float &x : refState)
        x = numerics::roundToBf16(x);
    // The state rows the next steps read: those of each slot's incomplete
    // pool (the others are stale by design).
    for (int64_t s = 0; s < c.slots; ++s) {
      int64_t end = at[s];
      for (int64_t m = end / c.pool * c.pool; m < end; ++m)
        for (int64_t i = 0; i < 2 * c.width; ++i) {
          int64_t k = s * slotValues + (m % c.pool) * 2 * c.width + i;
          float got = c.bf16 ? numerics::bf16ToFloat(state16[k]) : state[k];
          ASSERT_EQ(got, refState[k])
              << "step " << step << " slot " << s << " position " << m;
        }
    }
    next = at;
  }
}

INSTANTIATE_TEST_SUITE_P(Pools, CpuKpool,
                         ::testing::Values(KpoolCase{4, 32, 3, false, 1},
                                           KpoolCase{4, 100, 3, false, 3},
                                           KpoolCase{8, 16, 2, false, 3},
                                           KpoolCase{2, 64, 4, true, 3},
                                           KpoolCase{1, 24, 3, false, 1},
                                           KpoolCase{4, 130, 3, true, 1}));

TEST(CpuKpoolErrors, RefusesBadSlotsAndGaps) {
  cpu::ThreadPool pool(1);
  std::vector<float> keys(3 * 8, 0.5f), gate(3 * 8, 0.0f), ape(4 * 8, 0.0f);
  std::vector<float> state(2 * 3 * 16, 0.0f), out(3 * 8);
  cpu::StateView view;
  view.base = reinterpret_cast<uint8_t *>(state.data());
  view.slots = 2;
  view.slotBytes = 3 * 16 * 4;
  std::vector<int32_t> positions = {0, 1, 3}, sequences = {0, 0, 0};
  Status gap = cpu::dsaKpool(pool, keys.data(), gate.data(),
                             cpu::WeightView::f32(ape.data()), 4, 8, view,
                             positions.data(), sequences.data(), 3, out.data());
  ASSERT_FALSE(gap.ok());
  EXPECT_NE(gap.message().find("consecutive positions"), std::string::npos)
      << gap.message();
  positions = {0, 1, 2};
  sequences = {0, 2, 0};
  Status slot = cpu::dsaKpool(
      pool, keys.data(), gate.data(), cpu::WeightView::f32(ape.data()), 4, 8,
      view, positions.data(), sequences.data(), 3, out.data());
  ASSERT_FALSE(slot.ok());
  EXPECT_NE(slot.message().find("outside the 2 state slots"), std::string::npos)
      << slot.message();
  view.slotBytes = 2 * 16 * 4; // a tail of 2 rows for pools of 4
  sequences = {0, 1, 0};
  Status size = cpu::dsaKpool(
      pool, keys.data(), gate.data(), cpu::WeightView::f32(ape.data()), 4, 8,
      view, positions.data(), sequences.data(), 3, out.data());
  ASSERT_FALSE(size.ok());
  EXPECT_NE(size.message().find("is not the [3, 2 x 8] tail"),
            std::string::npos)
      << size.message();
}

TEST(CpuKpoolExpand, MatchesReference) {
  std::mt19937 rng(7);
  cpu::ThreadPool pool(2);
  for (int64_t poolSize : {1, 3, 4}) {
    int64_t tokens = 40, k = 5;
    std::vector<int32_t> pools(tokens * k), positions(tokens);
    std::uniform_int_distribution<int> pos(0, 60);
    for (int64_t t = 0; t < tokens; ++t) {
      positions[t] = pos(rng);
      // Some distinct complete pools, then -1 padding, as dsa_index_select
      // gives them.
      int64_t complete = (positions[t] + 1) / poolSize;
      std::vector<int32_t> all(complete);
      for (int64_t j = 0; j < complete; ++j)
        all[j] = int32_t(j);
      std::shuffle(all.begin(), all.end(), rng);
      for (int64_t i = 0; i < k; ++i)
        pools[t * k + i] = i < complete ? all[i] : -1;
    }
    int64_t width = k * poolSize + poolSize - 1;
    std::vector<int32_t> out(tokens * width, 99);
    cpu::dsaKpoolExpand(pool, pools.data(), positions.data(), tokens, k,
                        poolSize, out.data());
    Tensor want = ref::dsaKpoolExpand(
        Tensor::fromInts({tokens, k},
                         std::vector<int64_t>(pools.begin(), pools.end())),
        Tensor::fromInts(
            {tokens}, std::vector<int64_t>(positions.begin(), positions.end())),
        poolSize);
    for (int64_t i = 0; i < tokens * width; ++i)
      ASSERT_EQ(out[i], want.ints()[i]) << "pool " << poolSize << " at " << i;
    // Every attended token is causal; a query sees itself only through its
    // tail or a selected pool holding it.
    for (int64_t t = 0; t < tokens; ++t)
      for (int64_t i = 0; i < width; ++i)
        EXPECT_LE(out[t * width + i], positions[t]);
  }
}

} // namespace
