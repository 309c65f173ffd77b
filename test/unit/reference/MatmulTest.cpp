//===- MatmulTest.cpp - Tests of the reference matmuls --------------------===//

#include "compiler/reference/Kernels.h"
#include "runtime/numerics/Numerics.h"
#include "test/unit/reference/TestUtils.h"

#include <cmath>

using namespace daybreak::ref;
using namespace daybreak::ref::test;

namespace {

TEST(Matmul, HandValuesWithBias) {
  // w is [out=3, in=2]: y = [x0, x1, x0 + x1] + bias.
  Tensor x = floats({2, 2}, {1, 2, -1, 4});
  Tensor w = floats({3, 2}, {1, 0, 0, 1, 1, 1});
  Tensor bias = floats({3}, {0.5, 0, -1});
  EXPECT_TRUE(allClose(matmul(x, w, bias), {1.5, 2, 2, -0.5, 4, 2}, 0.0));
  EXPECT_TRUE(allClose(matmul(x, w, Tensor()), {1, 2, 3, -1, 4, 3}, 0.0));
}

TEST(Matmul, LeadingDimsAreRows) {
  std::mt19937 rng(11);
  Tensor x = randomTensor(rng, {2, 3, 5});
  Tensor w = randomTensor(rng, {4, 5});
  Tensor y = matmul(x, w, Tensor());
  EXPECT_EQ(y.shape(), (std::vector<int64_t>{2, 3, 4}));
  EXPECT_TRUE(allClose(
      y, matmul(x.reshaped({6, 5}), w, Tensor()).reshaped({2, 3, 4}), 0.0));
}

TEST(Fp8BlockMatmul, HandValues) {
  // N = K = 3 with 2x2 blocks: scaleInv is [2, 2] and the last row/column
  // are partial blocks. W = w * s[n / 2, k / 2].
  Tensor w = Tensor::fromFloats({3, 3}, {1, 1, 1, 1, 1, 1, 1, 1, 1},
                                ElementType::F8E4M3FN);
  Tensor s = floats({2, 2}, {1, 2, 3, 4});
  // W = [[1, 1, 2], [1, 1, 2], [3, 3, 4]]; x = [1, 10, 100].
  Tensor x = floats({1, 3}, {1, 10, 100});
  EXPECT_TRUE(allClose(fp8BlockMatmul(x, w, s, 2, 2), {211, 211, 433}, 0.0));
}

TEST(Fp8BlockMatmul, EqualsMatmulWithDequantisedWeight) {
  std::mt19937 rng(12);
  const int64_t n = 7, k = 10, blockN = 3, blockK = 4; // partial edges
  const int64_t scaleRows = 3, scaleCols = 3;
  Tensor w = randomTensor(rng, {n, k}, -448, 448).castTo(ElementType::F8E4M3FN);
  Tensor scales = randomTensor(rng, {scaleRows, scaleCols}, 1e-3f, 1e-2f);
  Tensor x = randomTensor(rng, {4, k});
  Tensor dense = Tensor::zeros(ElementType::F32, {n, k});
  for (int64_t r = 0; r < n; ++r)
    for (int64_t c = 0; c < k; ++c)
      dense.floats()[r * k + c] =
          w.floats()[r * k + c] *
          scales.floats()[(r / blockN) * scaleCols + c / blockK];
  Tensor expected = matmul(x, dense, Tensor());
  // The dense copy rounds each weight to fp32 once: ~1e-7 relative.
  EXPECT_TRUE(allClose(fp8BlockMatmul(x, w, scales, blockN, blockK), expected,
                       1e-5 * maxAbs(expected.floats())));
}

/// Experts of MXFP4 weights drawn from random codes and scale bytes, plus
/// their dense dequantised copy built with std::ldexp.
struct Mxfp4Experts {
  Tensor values; // [E, N, K] E2M1 values
  Tensor scales; // [E, N, K / 32] E8M0 values
  std::vector<Tensor> dense;
};

Mxfp4Experts randomExperts(std::mt19937 &rng, int64_t e, int64_t n, int64_t k) {
  static const float table[16] = {0,  0.5,  1,  1.5,  2,  3,  4,  6,
                                  -0, -0.5, -1, -1.5, -2, -3, -4, -6};
  std::uniform_int_distribution<int> code(0, 15), byte(120, 130);
  Mxfp4Experts experts;
  experts.values = Tensor::zeros(ElementType::F4E2M1FN, {e, n, k});
  experts.scales = Tensor::zeros(ElementType::F8E8M0FNU, {e, n, k / 32});
  std::vector<int> bytes(e * n * (k / 32));
  for (size_t i = 0; i < bytes.size(); ++i) {
    bytes[i] = byte(rng);
    experts.scales.floats()[i] = std::ldexp(1.0f, bytes[i] - 127);
  }
  for (int64_t x = 0; x < e; ++x) {
    Tensor dense = Tensor::zeros(ElementType::F32, {n, k});
    for (int64_t r = 0; r < n; ++r) {
      for (int64_t c = 0; c < k; ++c) {
        float value = table[code(rng)];
        experts.values.floats()[(x * n + r) * k + c] = value;
        dense.floats()[r * k + c] =
            std::ldexp(value, bytes[(x * n + r) * (k / 32) + c / 32] - 127);
      }
    }
    experts.dense.push_back(dense);
  }
  return experts;
}

TEST(Mxfp4ExpertMatmul, HandValue) {
  // One expert, K = 32: every code is 2 (= 1.0) and the scale byte 128
  // (= 2), so W = 2 everywhere and y = 2 * sum(x) = 2 * 32 = 64, + bias 1.
  Tensor w = Tensor::fromFloats({1, 1, 32}, std::vector<float>(32, 1.0f),
                                ElementType::F4E2M1FN);
  Tensor scales = Tensor::fromFloats({1, 1, 1}, {2.0f}, ElementType::F8E8M0FNU);
  Tensor x = floats({1, 32}, std::vector<float>(32, 1.0f));
  Tensor bias = floats({1, 1}, {1});
  Tensor y = takeValue(
      mxfp4ExpertMatmul(x, w, scales, ints({1, 2}, {0, -1}), Tensor(), bias));
  // Slot 1 is empty and stays zero.
  EXPECT_EQ(y.shape(), (std::vector<int64_t>{1, 2, 1}));
  EXPECT_TRUE(allClose(y, {65, 0}, 0.0));
}

TEST(Mxfp4ExpertMatmul, EqualsMatmulWithDequantisedExperts) {
  std::mt19937 rng(13);
  const int64_t e = 5, n = 6, k = 64, tokens = 3, slots = 2;
  Mxfp4Experts experts = randomExperts(rng, e, n, k);
  Tensor bias = randomTensor(rng, {e, n});
  Tensor indices = ints({tokens, slots}, {4, 0, -1, 2, 3, 3});
  Tensor routing = randomTensor(rng, {tokens, slots}, 0, 1);
  Tensor x2 = randomTensor(rng, {tokens, k});
  Tensor x3 = randomTensor(rng, {tokens, slots, k});

  for (bool perSlot : {false, true}) {
    const Tensor &x = perSlot ? x3 : x2;
    Tensor expectedSlots = Tensor::zeros(ElementType::F32, {tokens, slots, n});
    Tensor expectedMixed = Tensor::zeros(ElementType::F32, {tokens, n});
    for (int64_t t = 0; t < tokens; ++t) {
      for (int64_t s = 0; s < slots; ++s) {
        int64_t id = indices.ints()[t * slots + s];
        if (id < 0)
          continue;
        const float *row =
            x.floats().data() + (perSlot ? t * slots + s : t) * k;
        Tensor in = floats({1, k}, std::vector<float>(row, row + k));
        Tensor expertBias = floats(
            {n}, std::vector<float>(bias.floats().begin() + id * n,
                                    bias.floats().begin() + (id + 1) * n));
        Tensor y = matmul(in, experts.dense[id], expertBias);
        for (int64_t j = 0; j < n; ++j) {
          expectedSlots.floats()[(t * slots + s) * n + j] = y.floats()[j];
          expectedMixed.floats()[t * n + j] +=
              routing.floats()[t * slots + s] * y.floats()[j];
        }
      }
    }
    Tensor slotsOut = takeValue(mxfp4ExpertMatmul(
        x, experts.values, experts.scales, indices, Tensor(), bias));
    Tensor mixedOut = takeValue(mxfp4ExpertMatmul(
        x, experts.values, experts.scales, indices, routing, bias));
    // The weights are exact in both; only the summation order differs.
    EXPECT_TRUE(allClose(slotsOut, expectedSlots, 1e-5));
    EXPECT_TRUE(allClose(mixedOut, expectedMixed, 1e-5));
  }
}

TEST(Mxfp4ExpertMatmul, ExpertIdOutOfRangeIsAnError) {
  std::mt19937 rng(14);
  Mxfp4Experts experts = randomExperts(rng, 2, 2, 32);
  Tensor x = randomTensor(rng, {2, 32});
  std::string message = errorMessage(
      mxfp4ExpertMatmul(x, experts.values, experts.scales,
                        ints({2, 2}, {0, 1, 1, 2}), Tensor(), Tensor()));
  EXPECT_NE(message.find("expert id 2"), std::string::npos) << message;
  EXPECT_NE(message.find("[-1, 2)"), std::string::npos) << message;
  message = errorMessage(mxfp4ExpertMatmul(x, experts.values, experts.scales,
                                           ints({2, 1}, {-2, 0}), Tensor(),
                                           Tensor()));
  EXPECT_NE(message.find("expert id -2"), std::string::npos) << message;
}

} // namespace
