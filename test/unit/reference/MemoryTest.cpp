//===- MemoryTest.cpp - Tests of embedding, cache writes and Tensor -------===//

#include "compiler/reference/Kernels.h"
#include "test/unit/reference/TestUtils.h"

#include <cmath>

using namespace daybreak::ref;
using namespace daybreak::ref::test;

namespace {

TEST(Embedding, GathersRows) {
  Tensor table = floats({3, 2}, {1, 2, 3, 4, 5, 6});
  Tensor out = takeValue(embedding(table, ints({4}, {2, 0, 2, 1})));
  EXPECT_EQ(out.shape(), (std::vector<int64_t>{4, 2}));
  EXPECT_TRUE(allClose(out, {5, 6, 1, 2, 5, 6, 3, 4}, 0.0));
}

TEST(Embedding, IdOutOfRangeIsAnError) {
  Tensor table = Tensor::zeros(ElementType::BF16, {512, 4});
  EXPECT_EQ(errorMessage(embedding(table, ints({4}, {0, 1, 2, 612}))),
            "embedding: token id 612 at position 3 is outside the vocabulary "
            "[0, 512)");
  EXPECT_EQ(errorMessage(embedding(table, ints({1}, {-1}))),
            "embedding: token id -1 at position 0 is outside the vocabulary "
            "[0, 512)");
}

TEST(CacheWrite, ScattersRowsAndSkipsMinusOne) {
  // cache [4, 2]; rows 0..2 go to slots 3, -1 (skipped), 0.
  Tensor cache = floats({4, 2}, {1, 1, 2, 2, 3, 3, 4, 4});
  Tensor values = floats({3, 2}, {10, 11, 20, 21, 30, 31});
  Tensor out = takeValue(cacheWrite(cache, values, ints({3}, {3, -1, 0})));
  EXPECT_TRUE(allClose(out, {30, 31, 2, 2, 3, 3, 10, 11}, 0.0));
  // The input cache is untouched.
  EXPECT_TRUE(allClose(cache, {1, 1, 2, 2, 3, 3, 4, 4}, 0.0));
}

TEST(CacheWrite, RoundsToTheCacheType) {
  // A bf16 cache stores 1 + 2^-8 as 1 (tie to even) and 1 + 3 * 2^-8 as
  // 1 + 2^-6.
  Tensor cache = Tensor::zeros(ElementType::BF16, {2, 1, 1});
  Tensor values = floats({2, 1, 1}, {1.00390625f, 1.01171875f});
  Tensor out = takeValue(cacheWrite(cache, values, ints({2}, {1, 0})));
  EXPECT_EQ(out.type(), ElementType::BF16);
  EXPECT_TRUE(allClose(out, {1.015625, 1.0}, 0.0));
}

TEST(CacheWrite, SlotOutOfRangeIsAnError) {
  Tensor cache = Tensor::zeros(ElementType::F32, {8, 2});
  Tensor values = Tensor::zeros(ElementType::F32, {3, 2});
  EXPECT_EQ(errorMessage(cacheWrite(cache, values, ints({3}, {0, -1, 9}))),
            "cacheWrite: slot 9 at row 2 is outside the cache [-1, 8)");
  EXPECT_EQ(errorMessage(cacheWrite(cache, values, ints({3}, {-2, 0, 1}))),
            "cacheWrite: slot -2 at row 0 is outside the cache [-1, 8)");
}

//===----------------------------------------------------------------------===//
// Tensor basics used by every kernel
//===----------------------------------------------------------------------===//

TEST(Tensor, RoundToEveryFloatType) {
  EXPECT_EQ(roundTo(ElementType::F32, 0.1f), 0.1f);
  EXPECT_EQ(roundTo(ElementType::BF16, 1.00390625f), 1.0f);
  EXPECT_EQ(roundTo(ElementType::F16, 65519.0f), 65504.0f);
  EXPECT_EQ(roundTo(ElementType::F8E4M3FN, 1000.0f), 448.0f);
  EXPECT_EQ(roundTo(ElementType::F4E2M1FN, 2.5f), 2.0f);
  // E8M0: nearest power of two, the midpoint 1.5 * 2^e rounding up.
  EXPECT_EQ(roundTo(ElementType::F8E8M0FNU, 3.0f), 4.0f);
  EXPECT_EQ(roundTo(ElementType::F8E8M0FNU, 2.9f), 2.0f);
  EXPECT_EQ(roundTo(ElementType::F8E8M0FNU, 0.7f), 0.5f);
  EXPECT_EQ(roundTo(ElementType::F8E8M0FNU, 0.75f), 1.0f);
  EXPECT_EQ(roundTo(ElementType::F8E8M0FNU, 1e-40f), std::ldexp(1.0f, -127));
  EXPECT_EQ(roundTo(ElementType::F8E8M0FNU, 3e38f), std::ldexp(1.0f, 127));
  EXPECT_TRUE(std::isnan(roundTo(ElementType::F8E8M0FNU, 0.0f)));
  EXPECT_TRUE(std::isnan(roundTo(ElementType::F8E8M0FNU, -2.0f)));
}

TEST(Tensor, ConstructionCastAndDescribe) {
  Tensor t = Tensor::fromFloats({2, 3}, {1, 2, 3, 4, 5, 1.00390625f},
                                ElementType::BF16);
  EXPECT_EQ(t.floats().back(), 1.0f); // rounded on construction
  EXPECT_EQ(t.describe(), "bf16[2x3]");
  EXPECT_EQ(t.numel(), 6);
  EXPECT_EQ(t.dim(-1), 3);
  EXPECT_EQ(t.offset({1, 2}), 5);
  EXPECT_TRUE(t.isFloat());
  EXPECT_FALSE(t.empty());
  EXPECT_TRUE(Tensor().empty());
  EXPECT_EQ(Tensor().numel(), 0);

  Tensor r = t.reshaped({3, 2});
  EXPECT_EQ(r.describe(), "bf16[3x2]");
  EXPECT_EQ(r.floats(), t.floats());

  Tensor e =
      Tensor::fromFloats({2}, {3.3f, -500.0f}).castTo(ElementType::F8E4M3FN);
  EXPECT_EQ(e.type(), ElementType::F8E4M3FN);
  EXPECT_EQ(e.floats(), (std::vector<float>{3.25f, -448.0f}));

  Tensor i = Tensor::fromInts({2}, {7, -3}, ElementType::I64);
  EXPECT_EQ(i.describe(), "i64[2]");
  EXPECT_EQ(i.castTo(ElementType::F32).floats(), (std::vector<float>{7, -3}));
  EXPECT_EQ(
      Tensor::fromFloats({2}, {2.7f, -2.7f}).castTo(ElementType::I32).ints(),
      (std::vector<int64_t>{2, -2}));
  EXPECT_EQ(Tensor::zeros(ElementType::F8E8M0FNU, {}).describe(),
            "f8E8M0FNU[]");
}

} // namespace
