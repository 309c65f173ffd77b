//===- Mxfp4RoutesTest.cpp - The MXFP4 -> FP8 conversion of the routes ----===//
//
// The offline and online MXFP4 routes re-encode E2M1 x E8M0 as E4M3 codes
// with one f32 scale per block of 32 (docs/mxfp4.md). Tested here: the
// conversion exhaustively (all 16 codes x all 256 scales) on each of its
// paths (the runtime's code table, the compiler's APFloat rounding that
// stores the offline route's codes, the CPU kernel of the online route);
// the online kernel against the reference evaluator's; and the FP8 expert
// matmul on the converted workspace against the direct route and the exact
// result, for empty (-1) slots, one expert, and more slots than experts.
//
//===----------------------------------------------------------------------===//

#include "compiler/reference/Kernels.h"
#include "runtime/devices/cpu/CpuKernels.h"
#include "runtime/numerics/Numerics.h"
#include "test/unit/Mxfp4TestData.h"

#include "llvm/ADT/APFloat.h"

#include "gtest/gtest.h"

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

using namespace daybreak;

namespace {

/// E2M1 code `c` times E8M0 byte `s`, exactly (double holds 2^-128..6x2^127).
double exactValue(uint8_t c, uint8_t s) {
  if (s == 0xFF)
    return std::nan("");
  return std::ldexp(double(numerics::e2m1ToFloat(c)), int(s) - 127);
}

/// True when a and b are the same double, NaN-ness and zero sign included.
bool same(double a, double b) {
  if (std::isnan(a) || std::isnan(b))
    return std::isnan(a) && std::isnan(b);
  return a == b && std::signbit(a) == std::signbit(b);
}

TEST(Mxfp4Routes, ConversionIsExactForEveryCodeAndScale) {
  // The runtime's table and the compiler's rounding (lm-fold-weights stores
  // the offline route's codes through APFloat) give the same E4M3 code, and
  // code x f32 scale is the MXFP4 value exactly: no code and no scale rounds,
  // 2^-127 (byte 0, an f32 subnormal) and 2^127 included; byte 255 is NaN.
  for (int c = 0; c < 16; ++c) {
    uint8_t code = numerics::e2m1ToE4m3(uint8_t(c));
    llvm::APFloat value(double(numerics::e2m1ToFloat(uint8_t(c))));
    bool lost = true;
    value.convert(llvm::APFloat::Float8E4M3FN(),
                  llvm::APFloat::rmNearestTiesToEven, &lost);
    EXPECT_FALSE(lost) << "E2M1 code " << c;
    EXPECT_EQ(value.bitcastToAPInt().getZExtValue(), code) << "E2M1 code " << c;
    for (int s = 0; s < 256; ++s) {
      float scale = numerics::e8m0ToFloat(uint8_t(s));
      // The offline route's f32 scales come from the weight loader's
      // numerics::e8m0ToFloat; APFloat agrees on every finite byte. (APFloat
      // converts byte 255 to +inf, not NaN, so nothing converts E8M0
      // through it.)
      if (s != 0xFF) {
        llvm::APFloat e8m0(llvm::APFloat::Float8E8M0FNU(), llvm::APInt(8, s));
        bool scaleLost = true;
        e8m0.convert(llvm::APFloat::IEEEsingle(),
                     llvm::APFloat::rmNearestTiesToEven, &scaleLost);
        EXPECT_FALSE(scaleLost) << "E8M0 " << s;
        EXPECT_TRUE(same(e8m0.convertToFloat(), scale))
            << "E8M0 " << s << ": " << e8m0.convertToFloat() << " vs " << scale;
      } else {
        EXPECT_TRUE(std::isnan(scale));
      }
      double converted = double(numerics::e4m3ToFloat(code)) * double(scale);
      EXPECT_TRUE(same(converted, exactValue(uint8_t(c), uint8_t(s))))
          << "code " << c << " scale " << s << ": " << converted;
    }
  }
}

TEST(Mxfp4Routes, FoldedScaleIsExactOnlyForBytes119To133) {
  // docs/mxfp4.md's statement about folding the scale into one E4M3 code
  // (not what Daybreak does): E2M1 x 2^(s - 127) is an E4M3 value for
  // every code iff 119 <= s <= 133; for every other byte some code rounds,
  // flushes or overflows (byte 255: NaN, no finite code).
  for (int s = 0; s < 255; ++s) {
    bool allExact = true;
    for (int c = 0; c < 16; ++c) {
      llvm::APFloat value(exactValue(uint8_t(c), uint8_t(s)));
      bool lost = false;
      llvm::APFloat::opStatus status =
          value.convert(llvm::APFloat::Float8E4M3FN(),
                        llvm::APFloat::rmNearestTiesToEven, &lost);
      bool exact =
          !lost && status == llvm::APFloat::opOK && value.isFinite() &&
          value.convertToDouble() == exactValue(uint8_t(c), uint8_t(s));
      allExact &= exact;
    }
    EXPECT_EQ(allExact, s >= 119 && s <= 133) << "E8M0 byte " << s;
  }
}

/// Experts whose rows hold every code in every block, one scale byte per
/// row and block: expert e's row r has scale bytes (r * blocks + b) % 256.
testutil::Mxfp4TestExperts everyCodeAndScale(int64_t experts, int64_t k) {
  testutil::Mxfp4TestExperts w;
  w.experts = experts;
  w.n = 256 / (k / 32);
  w.k = k;
  w.values.resize(experts * w.n * k / 2);
  for (size_t i = 0; i < w.values.size(); ++i)
    w.values[i] = uint8_t((2 * i) % 16 | (((2 * i + 1) % 16) << 4));
  w.scales.resize(experts * w.n * (k / 32));
  for (size_t i = 0; i < w.scales.size(); ++i)
    w.scales[i] = uint8_t(i % 256);
  return w;
}

TEST(Mxfp4Routes, CpuKernelConvertsEveryCodeAndScale) {
  // The online route's CPU kernel on experts holding all 16 x 256 pairs:
  // each converted value is exactly the MXFP4 value.
  cpu::ThreadPool pool(2);
  int64_t experts = 3, k = 64;
  testutil::Mxfp4TestExperts w = everyCodeAndScale(experts, k);
  int64_t n = w.n, groups = k / 32;
  // Token 0 picks experts 2 and -1, token 1 expert 0: slots 0 (expert 0)
  // and 1 (expert 2).
  std::vector<int32_t> indices = {2, -1, 0, 2};
  std::vector<uint8_t> codes(2 * n * k, 0xAA);
  std::vector<float> scales(2 * n * groups), bias(2 * n, -1.0f);
  std::vector<int32_t> remapped(indices.size());
  std::vector<float> expertBias(experts * n);
  for (size_t i = 0; i < expertBias.size(); ++i)
    expertBias[i] = float(i) / 8;
  cpu::WeightView biasView = cpu::WeightView::f32(expertBias.data());
  Status status = cpu::mxfp4ToFp8Experts(
      pool, {w.values.data(), w.scales.data()}, biasView, experts, n, k,
      indices.data(), 2, 2, 2, codes.data(), scales.data(), bias.data(),
      remapped.data());
  ASSERT_TRUE(status.ok()) << status.message();
  EXPECT_EQ(remapped, (std::vector<int32_t>{1, -1, 0, 1}));
  int64_t checked = 0;
  for (int64_t slot = 0; slot < 2; ++slot) {
    int64_t e = slot == 0 ? 0 : 2;
    for (int64_t j = 0; j < n; ++j) {
      EXPECT_EQ(bias[slot * n + j], expertBias[e * n + j]);
      for (int64_t i = 0; i < k; ++i) {
        double value =
            double(numerics::e4m3ToFloat(codes[(slot * n + j) * k + i])) *
            scales[(slot * n + j) * groups + i / 32];
        ASSERT_TRUE(same(value, w.at(e, j, i)))
            << "slot " << slot << " row " << j << " value " << i << ": "
            << value << " vs " << w.at(e, j, i);
        ++checked;
      }
    }
  }
  // Two slots, each holding all 16 x 256 (code, scale) pairs twice.
  EXPECT_EQ(checked, 2 * 16 * 256 * 2);
}

TEST(Mxfp4Routes, CpuKernelMatchesReference) {
  // The CPU kernel and the reference evaluator's (which gives
  // lm.mxfp4_to_fp8_experts its meaning) agree on every written slot, for
  // random selections with -1 slots, one expert, none, and all of them.
  std::mt19937 rng(7);
  cpu::ThreadPool pool(2);
  int64_t experts = 5, n = 9, k = 96, slots = 3;
  testutil::Mxfp4TestExperts w = testutil::randomMxfp4Experts(
      rng, experts, n, k, {0, 1, 100, 127, 140, 254, 255});
  std::vector<std::vector<int32_t>> cases = {
      {-1, -1, -1, -1, -1, -1}, // nothing selected
      {3, -1, -1, 3, -1, 3},    // one expert
      {4, 0, 2, 1, 3, 0},       // every expert (T x k > E)
      {2, -1, 4, 4, -1, 2},     // -1 slots
  };
  for (const std::vector<int32_t> &indices : cases) {
    int64_t tokens = int64_t(indices.size()) / slots, ws = experts;
    std::vector<uint8_t> codes(ws * n * k);
    std::vector<float> scales(ws * n * (k / 32)), bias(ws * n);
    std::vector<int32_t> remapped(indices.size());
    Status status = cpu::mxfp4ToFp8Experts(
        pool, {w.values.data(), w.scales.data()}, cpu::WeightView(), experts, n,
        k, indices.data(), tokens, slots, ws, codes.data(), scales.data(),
        bias.data(), remapped.data());
    ASSERT_TRUE(status.ok()) << status.message();
    std::vector<int64_t> ids(indices.begin(), indices.end());
    auto ref = ref::mxfp4ToFp8Experts(
        ref::Tensor::fromFloats({experts, n, k}, w.codeValues(),
                                ref::ElementType::F4E2M1FN),
        ref::Tensor::fromFloats({experts, n, k / 32}, w.scaleValues(),
                                ref::ElementType::F8E8M0FNU),
        ref::Tensor::fromInts({tokens, slots}, ids), ref::Tensor(), ws);
    ASSERT_TRUE(bool(ref)) << llvm::toString(ref.takeError());
    for (size_t i = 0; i < indices.size(); ++i)
      EXPECT_EQ(remapped[i], ref->slots.ints()[i]) << "entry " << i;
    int64_t used = 0;
    for (int32_t r : remapped)
      used = std::max<int64_t>(used, r + 1);
    for (int64_t i = 0; i < used * n * k; ++i)
      ASSERT_EQ(numerics::e4m3ToFloat(codes[i]), ref->codes.floats()[i])
          << "code " << i;
    for (int64_t i = 0; i < used * n * (k / 32); ++i)
      ASSERT_TRUE(same(scales[i], ref->blockScales.floats()[i]))
          << "scale " << i;
    for (int64_t i = 0; i < used * n; ++i)
      EXPECT_EQ(bias[i], 0.0f);
  }
  // More distinct experts than workspace slots is an error, naming both.
  std::vector<int32_t> all = {0, 1, 2};
  std::vector<uint8_t> codes(2 * n * k);
  std::vector<float> scales(2 * n * (k / 32)), bias(2 * n);
  std::vector<int32_t> remapped(3);
  Status status = cpu::mxfp4ToFp8Experts(
      pool, {w.values.data(), w.scales.data()}, cpu::WeightView(), experts, n,
      k, all.data(), 1, 3, 2, codes.data(), scales.data(), bias.data(),
      remapped.data());
  ASSERT_FALSE(status.ok());
  EXPECT_NE(status.message().find("3 distinct experts exceed the workspace's "
                                  "2 slots"),
            std::string::npos)
      << status.message();
}

TEST(Mxfp4Routes, CpuAllExpertsModesMatchReference) {
  // The overlapped conversion's two launches (mxfp4_to_fp8_all_experts:
  // every expert into its slot; mxfp4_to_fp8_experts past all_from_tokens:
  // the indices as slots) against the reference of lm.mxfp4_to_fp8_experts
  // {all_from_tokens}, with a bf16 bias: every slot's codes, scales and
  // bias row, and every remapped entry (-1 kept). Then the selection below
  // all_from_tokens, and the error for a workspace of fewer than E slots.
  std::mt19937 rng(9);
  cpu::ThreadPool pool(2);
  std::uniform_real_distribution<float> dist(-1, 1);
  int64_t experts = 5, n = 7, k = 64, slots = 2;
  testutil::Mxfp4TestExperts w = testutil::randomMxfp4Experts(
      rng, experts, n, k, {0, 1, 100, 127, 140, 254, 255});
  std::vector<uint16_t> bias16;
  std::vector<float> biasValues;
  for (int64_t i = 0; i < experts * n; ++i) {
    bias16.push_back(numerics::floatToBf16(dist(rng)));
    biasValues.push_back(numerics::bf16ToFloat(bias16.back()));
  }
  cpu::WeightView bias;
  bias.data = bias16.data();
  bias.type = cpu::WeightType::BF16;
  auto reference = [&](const std::vector<int32_t> &indices, int64_t from) {
    std::vector<int64_t> ids(indices.begin(), indices.end());
    return ref::mxfp4ToFp8Experts(
        ref::Tensor::fromFloats({experts, n, k}, w.codeValues(),
                                ref::ElementType::F4E2M1FN),
        ref::Tensor::fromFloats({experts, n, k / 32}, w.scaleValues(),
                                ref::ElementType::F8E8M0FNU),
        ref::Tensor::fromInts({int64_t(indices.size()) / slots, slots}, ids),
        ref::Tensor::fromFloats({experts, n}, biasValues), experts, from);
  };
  // Three tokens (from 3 on: every expert), one of them with a -1 slot.
  std::vector<int32_t> indices = {4, -1, 1, 4, 0, 2};
  int64_t tokens = 3;
  std::vector<uint8_t> codes(experts * n * k);
  std::vector<float> scales(experts * n * (k / 32)), slotBias(experts * n);
  std::vector<int32_t> remapped(indices.size(), 99);
  ASSERT_TRUE(cpu::mxfp4ToFp8Experts(
                  pool, {w.values.data(), w.scales.data()}, bias, experts, n, k,
                  nullptr, tokens, 0, experts, codes.data(), scales.data(),
                  slotBias.data(), nullptr, runtime::Mxfp4ConvertMode::All)
                  .ok());
  ASSERT_TRUE(runtime::mxfp4SelectionMode(tokens, 3) ==
              runtime::Mxfp4ConvertMode::SlotsOnly);
  ASSERT_TRUE(cpu::mxfp4ToFp8Experts(pool, {w.values.data(), w.scales.data()},
                                     bias, experts, n, k, indices.data(),
                                     tokens, slots, experts, nullptr, nullptr,
                                     nullptr, remapped.data(),
                                     runtime::Mxfp4ConvertMode::SlotsOnly)
                  .ok());
  auto all = reference(indices, 3);
  ASSERT_TRUE(bool(all)) << llvm::toString(all.takeError());
  for (size_t i = 0; i < indices.size(); ++i)
    EXPECT_EQ(remapped[i], all->slots.ints()[i]) << "entry " << i;
  EXPECT_EQ(remapped[1], -1);
  EXPECT_EQ(remapped[0], 4);
  for (int64_t i = 0; i < experts * n * k; ++i)
    ASSERT_EQ(numerics::e4m3ToFloat(codes[i]), all->codes.floats()[i])
        << "code " << i;
  for (int64_t i = 0; i < experts * n * (k / 32); ++i)
    ASSERT_TRUE(same(scales[i], all->blockScales.floats()[i])) << "scale " << i;
  for (int64_t i = 0; i < experts * n; ++i)
    ASSERT_EQ(slotBias[i], all->slotBias.floats()[i]) << "bias " << i;
  // Below all_from_tokens the reference is the selection: expert 4 in slot
  // 3 of the 4 selected (0, 1, 2, 4), not in slot 4.
  auto below = reference(indices, 4);
  ASSERT_TRUE(bool(below)) << llvm::toString(below.takeError());
  EXPECT_EQ(below->slots.ints()[0], 3);
  EXPECT_TRUE(runtime::mxfp4SelectionMode(tokens, 4) ==
              runtime::Mxfp4ConvertMode::Selected);
  EXPECT_TRUE(runtime::mxfp4SelectionMode(tokens, 0) ==
              runtime::Mxfp4ConvertMode::Selected);
  // Every expert needs E slots.
  Status status = cpu::mxfp4ToFp8Experts(
      pool, {w.values.data(), w.scales.data()}, bias, experts, n, k, nullptr,
      tokens, 0, experts - 1, codes.data(), scales.data(), slotBias.data(),
      nullptr, runtime::Mxfp4ConvertMode::All);
  ASSERT_FALSE(status.ok());
  EXPECT_NE(status.message().find("converting all 5 experts needs as many "
                                  "workspace slots, got 4"),
            std::string::npos)
      << status.message();
}

TEST(Mxfp4Routes, Fp8ExpertMatmulOnWorkspaceMatchesDirect) {
  // The online route on the CPU: convert, then the FP8 expert matmul with
  // [1, 32] blocks, a bf16 bias (as gpt-oss) and remapped indices, against
  // the exact result (bound: the product, K - 1 additions and the bias per
  // term, Mxfp4TestData.h) and the direct kernel (each within its bound).
  std::mt19937 rng(11);
  cpu::ThreadPool pool(2);
  std::uniform_real_distribution<float> dist(-1, 1);
  int64_t experts = 6, n = 40, k = 128, slots = 2;
  testutil::Mxfp4TestExperts w =
      testutil::randomMxfp4Experts(rng, experts, n, k);
  std::vector<uint16_t> bias16;
  std::vector<float> bias;
  for (int64_t i = 0; i < experts * n; ++i) {
    bias16.push_back(numerics::floatToBf16(dist(rng)));
    bias.push_back(numerics::bf16ToFloat(bias16.back()));
  }
  cpu::WeightView biasView;
  biasView.data = bias16.data();
  biasView.type = cpu::WeightType::BF16;
  std::vector<std::vector<int32_t>> cases = {
      {5, -1, 5, -1, 5, -1},          // one expert, -1 slots
      {-1, -1},                       // nothing
      {0, 1, 2, 3, 4, 5, 1, 0, 3, 2}, // all experts, T x k > E
      {3, 1, -1, 4, 1, 3},            // mixed
  };
  for (const std::vector<int32_t> &indices : cases)
    for (bool routed : {false, true}) {
      int64_t tokens = int64_t(indices.size()) / slots;
      int64_t ws = std::min<int64_t>(experts, tokens * slots);
      std::vector<float> x(tokens * k), routing(tokens * slots);
      for (float &v : x)
        v = dist(rng);
      for (float &v : routing)
        v = dist(rng);
      std::vector<uint8_t> codes(ws * n * k);
      std::vector<float> scales(ws * n * (k / 32)), slotBias(ws * n);
      std::vector<int32_t> remapped(indices.size());
      ASSERT_TRUE(
          cpu::mxfp4ToFp8Experts(pool, {w.values.data(), w.scales.data()},
                                 biasView, experts, n, k, indices.data(),
                                 tokens, slots, ws, codes.data(), scales.data(),
                                 slotBias.data(), remapped.data())
              .ok());
      cpu::WeightView fp8;
      fp8.data = codes.data();
      fp8.type = cpu::WeightType::F8E4M3;
      fp8.scales = scales.data();
      fp8.blockN = 1;
      fp8.blockK = 32;
      int64_t outRows = routed ? tokens : tokens * slots;
      std::vector<float> online(outRows * n), direct(outRows * n);
      const float *rw = routed ? routing.data() : nullptr;
      ASSERT_TRUE(cpu::expertMatmul(pool, x.data(), false, fp8, ws, n, k,
                                    remapped.data(), tokens, slots, rw,
                                    online.data(),
                                    cpu::WeightView::f32(slotBias.data()))
                      .ok());
      ASSERT_TRUE(cpu::mxfp4ExpertMatmul(
                      pool, x.data(), false, {w.values.data(), w.scales.data()},
                      biasView, experts, n, k, indices.data(), tokens, slots,
                      rw, direct.data())
                      .ok());
      std::vector<float> none;
      testutil::Mxfp4Expected exact =
          testutil::mxfp4Expected(w, x, false, bias, indices, tokens, slots,
                                  routed ? routing : none, /*dotRounds=*/k + 1);
      EXPECT_EQ(testutil::firstOutOfBound(online, exact), -1);
      EXPECT_EQ(testutil::firstOutOfBound(direct, exact), -1);
      for (size_t i = 0; i < online.size(); ++i)
        EXPECT_LE(std::fabs(double(online[i]) - direct[i]), 2 * exact.bound[i])
            << "element " << i;
    }
}

} // namespace
