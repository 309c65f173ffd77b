//===- DsaTest.cpp - Tests of the DSA indexer scores and selection --------===//

#include "compiler/reference/Kernels.h"
#include "test/unit/reference/TestUtils.h"

#include <algorithm>
#include <numeric>

using namespace daybreak::ref;
using namespace daybreak::ref::test;

namespace {

TEST(DsaIndexerScores, HandValues) {
  // q heads [1, 0] and [0, 1], head weights [2, 3], scale 1/2.
  // key [1, 1]:  (2 * relu(1) + 3 * relu(1)) / 2 = 2.5
  // key [-1, 2]: (2 * relu(-1) + 3 * relu(2)) / 2 = 3
  Tensor q = floats({1, 2, 2}, {1, 0, 0, 1});
  Tensor k = floats({2, 2}, {1, 1, -1, 2});
  Tensor w = floats({1, 2}, {2, 3});
  EXPECT_TRUE(allClose(dsaIndexerScores(q, k, w, 0.5), {2.5, 3}, 1e-6));
}

TEST(DsaIndexSelect, TiesGoToTheLowerIndex) {
  // Scores [1, 5, 3, 5, 3]: 5s at 1 and 3, then 3s at 2 and 4: {1, 3, 2},
  // listed in key order.
  Tensor scores = floats({1, 5}, {1, 5, 3, 5, 3});
  EXPECT_EQ(dsaIndexSelect(scores, ints({1}, {5}), 3).ints(),
            (std::vector<int64_t>{1, 2, 3}));
}

TEST(DsaIndexSelect, BoundsPadClampAndEmpty) {
  // Row 0: bound 2 < k = 3 -> both keys, then -1.
  // Row 1: bound 0 -> the empty set.
  // Row 2: bound 9 > S = 4 is clamped to 4.
  // Row 3: a negative bound is clamped to 0.
  Tensor scores = floats({4, 4}, {0, 9, 8, 7, //
                                  1, 2, 3, 4, //
                                  4, 1, 3, 2, //
                                  5, 5, 5, 5});
  Tensor bounds = ints({4}, {2, 0, 9, -3});
  EXPECT_EQ(dsaIndexSelect(scores, bounds, 3).ints(),
            (std::vector<int64_t>{0, 1, -1,   //
                                  -1, -1, -1, //
                                  0, 2, 3,    //
                                  -1, -1, -1}));
}

TEST(DsaIndexSelect, MatchesASortedBruteForce) {
  std::mt19937 rng(31);
  const int64_t tokens = 8, keys = 40, topK = 12;
  Tensor scores = randomTensor(rng, {tokens, keys});
  // Quantise so that ties occur.
  for (float &value : scores.floats())
    value = std::round(value * 4) / 4;
  std::vector<int64_t> boundValues;
  for (int64_t t = 0; t < tokens; ++t)
    boundValues.push_back(int64_t(rng() % (keys + 5)));
  Tensor selected = dsaIndexSelect(scores, ints({tokens}, boundValues), topK);
  for (int64_t t = 0; t < tokens; ++t) {
    int64_t bound = std::min(boundValues[t], keys);
    std::vector<int64_t> order(bound);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
      return scores.floats()[t * keys + a] > scores.floats()[t * keys + b];
    });
    order.resize(std::min(bound, topK));
    std::sort(order.begin(), order.end()); // listed in key order
    order.resize(topK, -1);
    EXPECT_EQ(std::vector<int64_t>(selected.ints().begin() + t * topK,
                                   selected.ints().begin() + (t + 1) * topK),
              order)
        << "query " << t;
  }
}

} // namespace
