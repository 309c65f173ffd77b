//===- RoutingTest.cpp - Tests of the reference MoE router ----------------===//

#include "compiler/reference/Kernels.h"
#include "test/unit/reference/TestUtils.h"

#include <cmath>

using namespace daybreak::ref;
using namespace daybreak::ref::test;

namespace {

const float kLn3 = static_cast<float>(std::log(3.0));

RoutingParams sigmoidParams(int64_t topK, double scale) {
  RoutingParams params;
  params.score = RoutingScore::Sigmoid;
  params.topK = topK;
  params.scalingFactor = scale;
  return params;
}

TEST(MoeRoute, SigmoidTiesGoToTheLowerId) {
  // s = sigmoid([0, ln 3, -ln 3, ln 3]) = [1/2, 3/4, 1/4, 3/4]: experts 1
  // and 3 tie, 1 comes first. Renormalised: 3/4 / (3/2) = 1/2, * 2.5.
  Tensor logits = floats({1, 4}, {0, kLn3, -kLn3, kLn3});
  Routing r = moeRoute(logits, Tensor(), sigmoidParams(2, 2.5));
  EXPECT_EQ(r.indices.ints(), (std::vector<int64_t>{1, 3}));
  EXPECT_TRUE(allClose(r.weights, {1.25, 1.25}, 1e-6));
}

TEST(MoeRoute, SigmoidBiasSelectsButDoesNotWeigh) {
  // s + bias = [1/2, 3/4, 5/4, 3/4] picks 2 then 1; weights use s only:
  // [1/4, 3/4] / 1 (+ 1e-20).
  Tensor logits = floats({1, 4}, {0, kLn3, -kLn3, kLn3});
  Tensor bias = floats({4}, {0, 0, 1, 0});
  Routing r = moeRoute(logits, bias, sigmoidParams(2, 1.0));
  EXPECT_EQ(r.indices.ints(), (std::vector<int64_t>{2, 1}));
  EXPECT_TRUE(allClose(r.weights, {0.25, 0.75}, 1e-6));
  // Without renormalisation the raw scores come back.
  RoutingParams raw = sigmoidParams(2, 2.0);
  raw.renormalize = false;
  EXPECT_TRUE(allClose(moeRoute(logits, bias, raw).weights, {0.5, 1.5}, 1e-6));
}

/// Logits 0 give s = 1/2, so the bias sets each selection score s + bias.
Tensor biasFor(const std::vector<float> &selectScores) {
  std::vector<float> bias;
  for (float value : selectScores)
    bias.push_back(value - 0.5f);
  return floats({int64_t(bias.size())}, bias);
}

TEST(MoeRoute, GroupLimitUsesTheTopTwoSum) {
  // Two groups of three. Group 0 = [0.9, 0.2, 0.2]: max 0.9, top-2 sum 1.1,
  // full sum 1.3. Group 1 = [0.6, 0.6, 0.0]: max 0.6, top-2 sum 1.2, full
  // sum 1.2. Only the top-2 rule keeps group 1, so expert 0 (the best
  // single score) is excluded and the picks are 3, 4.
  Tensor logits = floats({1, 6}, std::vector<float>(6, 0.0f));
  Tensor bias = biasFor({0.9f, 0.2f, 0.2f, 0.6f, 0.6f, 0.0f});
  RoutingParams params = sigmoidParams(2, 1.0);
  params.numGroups = 2;
  params.topKGroups = 1;
  Routing r = moeRoute(logits, bias, params);
  EXPECT_EQ(r.indices.ints(), (std::vector<int64_t>{3, 4}));
  EXPECT_TRUE(allClose(r.weights, {0.5, 0.5}, 1e-6));
  // With both groups allowed expert 0 wins.
  params.topKGroups = 2;
  EXPECT_EQ(moeRoute(logits, bias, params).indices.ints(),
            (std::vector<int64_t>{0, 3}));
}

TEST(MoeRoute, GroupLimitKeepsTheBestGroups) {
  // Four groups of two: sums 0.9, 1.0, 1.6, 0.2 keep groups 2 and 1, so
  // expert 0 (0.9) loses to 4 and 5 (0.8 each).
  Tensor logits = floats({1, 8}, std::vector<float>(8, 0.0f));
  Tensor bias = biasFor({0.9f, 0.0f, 0.5f, 0.5f, 0.8f, 0.8f, 0.1f, 0.1f});
  RoutingParams params = sigmoidParams(3, 1.0);
  params.numGroups = 4;
  params.topKGroups = 2;
  // Third pick: experts 2 and 3 tie at 0.5, 2 first.
  EXPECT_EQ(moeRoute(logits, bias, params).indices.ints(),
            (std::vector<int64_t>{4, 5, 2}));
}

TEST(MoeRoute, SoftmaxThenTopK) {
  // softmax(ln [1, 2, 3, 4]) = [0.1, 0.2, 0.3, 0.4]; top-2 = 3, 2.
  std::vector<float> lnValues;
  for (double v : {1.0, 2.0, 3.0, 4.0})
    lnValues.push_back(float(std::log(v)));
  Tensor logits = floats({1, 4}, lnValues);
  RoutingParams params;
  params.score = RoutingScore::Softmax;
  params.topK = 2;
  params.renormalize = false;
  Routing r = moeRoute(logits, Tensor(), params);
  EXPECT_EQ(r.indices.ints(), (std::vector<int64_t>{3, 2}));
  EXPECT_TRUE(allClose(r.weights, {0.4, 0.3}, 1e-6));
  params.renormalize = true;
  EXPECT_TRUE(allClose(moeRoute(logits, Tensor(), params).weights,
                       {4.0 / 7, 3.0 / 7}, 1e-6));
}

TEST(MoeRoute, GptOssSoftmaxOverTheSelected) {
  // Logits [1, 3, 2, 3]: top-2 are 1 and 3 (tie, lower id first) with
  // softmax([3, 3]) = [1/2, 1/2]; top-3 adds 2 with weights
  // [e^3, e^3, e^2] / (2 e^3 + e^2).
  Tensor logits = floats({2, 4}, {1, 3, 2, 3, 0, 0, 0, 0});
  RoutingParams params;
  params.score = RoutingScore::SoftmaxTopK;
  params.topK = 2;
  Routing r = moeRoute(logits, Tensor(), params);
  EXPECT_EQ(r.indices.ints(), (std::vector<int64_t>{1, 3, 0, 1}));
  EXPECT_TRUE(allClose(r.weights, {0.5, 0.5, 0.5, 0.5}, 1e-6));
  params.topK = 3;
  r = moeRoute(logits, Tensor(), params);
  double denominator = 2 * std::exp(3.0) + std::exp(2.0);
  EXPECT_EQ(r.indices.ints(), (std::vector<int64_t>{1, 3, 2, 0, 1, 2}));
  EXPECT_TRUE(
      allClose(r.weights,
               {std::exp(3.0) / denominator, std::exp(3.0) / denominator,
                std::exp(2.0) / denominator, 1.0 / 3, 1.0 / 3, 1.0 / 3},
               1e-6));
}

TEST(MoeRoute, AllEqualScoresPickTheLowestIds) {
  Tensor logits = floats({1, 6}, std::vector<float>(6, 0.5f));
  for (RoutingScore score : {RoutingScore::Sigmoid, RoutingScore::Softmax,
                             RoutingScore::SoftmaxTopK}) {
    RoutingParams params;
    params.score = score;
    params.topK = 3;
    Routing r = moeRoute(logits, Tensor(), params);
    EXPECT_EQ(r.indices.ints(), (std::vector<int64_t>{0, 1, 2}));
    EXPECT_TRUE(allClose(r.weights, {1.0 / 3, 1.0 / 3, 1.0 / 3}, 1e-6));
  }
}

} // namespace
