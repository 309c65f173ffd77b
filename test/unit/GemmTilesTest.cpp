//===- GemmTilesTest.cpp - The FP8 GEMM's cost model against the H200 ----===//
//
// GemmTiles.h's model chooses each FP8 GEMM launch's tile (lm-tile records
// it). Its oracle here is a measurement, not the model: every library tile
// timed on the H200 at DeepSeek-V3.2's FP8 projections (`DaybreakKernelBench
// 20 fp8tiles`, bench/results/2026-12-04-h200-deepseek-session23/
// fp8tiles.txt, copied below). The model's choice must be the fastest tile
// measured there or within 2.5 us of it (a split the sweep did not time is
// judged by the mean of its measured neighbours). Its structural promises hold
// on shapes of every size.
//
//===----------------------------------------------------------------------===//

#include "runtime/devices/cuda/GemmTiles.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <optional>
#include <random>
#include <vector>

using namespace daybreak::cuda;

namespace {

struct Timed {
  int32_t rows, splits;
  double us;
};
struct Measured {
  int64_t m, n, k;
  std::vector<Timed> tiles;
};

// Median of 20 launches each (x's quantization included), H200, session 23.
const Measured kMeasured[] = {
    {16,
     1536,
     7168,
     {{64, 1, 25.08},
      {64, 2, 18.97},
      {64, 3, 17.86},
      {64, 4, 16.49},
      {64, 6, 15.74},
      {64, 8, 15.17},
      {128, 1, 26.31},
      {128, 2, 19.60},
      {128, 4, 17.60}}},
    {16,
     576,
     7168,
     {{64, 1, 25.00},
      {64, 2, 19.29},
      {64, 3, 16.91},
      {64, 4, 15.59},
      {64, 6, 15.27},
      {64, 8, 14.43},
      {128, 1, 26.26},
      {128, 2, 20.21},
      {128, 4, 15.72}}},
    {16,
     24576,
     1536,
     {{64, 1, 21.81},
      {64, 2, 28.29},
      {64, 3, 35.18},
      {128, 1, 24.50},
      {128, 2, 30.73}}},
    {16,
     7168,
     16384,
     {{64, 1, 51.28},
      {64, 2, 44.34},
      {64, 3, 53.38},
      {64, 4, 49.09},
      {64, 6, 53.48},
      {64, 8, 56.99},
      {128, 1, 71.06},
      {128, 2, 59.48},
      {128, 4, 61.91}}},
    {16,
     8192,
     1536,
     {{64, 1, 12.17},
      {64, 2, 13.88},
      {64, 3, 17.55},
      {128, 1, 13.51},
      {128, 2, 14.74}}},
    {16,
     18432,
     7168,
     {{64, 1, 58.27},
      {64, 2, 58.27},
      {64, 3, 59.57},
      {64, 4, 62.57},
      {64, 6, 68.35},
      {64, 8, 75.03},
      {128, 1, 69.67},
      {128, 2, 67.31},
      {128, 4, 70.99}}},
    {16,
     7168,
     18432,
     {{64, 1, 57.23},
      {64, 2, 47.62},
      {64, 3, 56.67},
      {64, 4, 53.06},
      {64, 6, 56.62},
      {64, 8, 61.24},
      {128, 1, 71.94},
      {128, 2, 64.57},
      {128, 4, 68.36}}},
    {16,
     4096,
     7168,
     {{64, 1, 25.36},
      {64, 2, 21.11},
      {64, 3, 20.53},
      {64, 4, 19.56},
      {64, 6, 24.72},
      {64, 8, 23.73},
      {128, 1, 26.65},
      {128, 2, 24.03},
      {128, 4, 22.39}}},
    {16,
     7168,
     2048,
     {{64, 1, 13.54},
      {64, 2, 14.36},
      {64, 3, 18.35},
      {64, 4, 18.88},
      {128, 1, 15.33},
      {128, 2, 15.51},
      {128, 4, 19.30}}},
    {64,
     1536,
     7168,
     {{64, 1, 26.00},
      {64, 2, 19.99},
      {64, 3, 18.19},
      {64, 4, 17.21},
      {64, 6, 15.84},
      {64, 8, 15.89},
      {128, 1, 27.39},
      {128, 2, 20.75},
      {128, 4, 17.63}}},
    {64,
     576,
     7168,
     {{64, 1, 26.10},
      {64, 2, 19.96},
      {64, 3, 17.64},
      {64, 4, 16.48},
      {64, 6, 15.89},
      {64, 8, 15.70},
      {128, 1, 27.48},
      {128, 2, 20.60},
      {128, 4, 16.63}}},
    {64,
     24576,
     1536,
     {{64, 1, 23.99},
      {64, 2, 35.64},
      {64, 3, 42.10},
      {128, 1, 24.49},
      {128, 2, 35.90}}},
    {64,
     7168,
     16384,
     {{64, 1, 54.25},
      {64, 2, 47.00},
      {64, 3, 56.64},
      {64, 4, 52.71},
      {64, 6, 57.97},
      {64, 8, 61.67},
      {128, 1, 57.73},
      {128, 2, 55.56},
      {128, 4, 59.20}}},
    {64,
     8192,
     1536,
     {{64, 1, 12.81},
      {64, 2, 15.02},
      {64, 3, 18.55},
      {128, 1, 13.01},
      {128, 2, 15.44}}},
    {64,
     18432,
     7168,
     {{64, 1, 60.70},
      {64, 2, 63.15},
      {64, 3, 65.82},
      {64, 4, 70.67},
      {64, 6, 80.48},
      {64, 8, 89.89},
      {128, 1, 64.09},
      {128, 2, 65.31},
      {128, 4, 72.08}}},
    {64,
     7168,
     18432,
     {{64, 1, 59.64},
      {64, 2, 50.78},
      {64, 3, 61.13},
      {64, 4, 57.92},
      {64, 6, 62.28},
      {64, 8, 66.39},
      {128, 1, 64.52},
      {128, 2, 59.04},
      {128, 4, 65.42}}},
    {64,
     4096,
     7168,
     {{64, 1, 26.43},
      {64, 2, 21.12},
      {64, 3, 19.70},
      {64, 4, 19.13},
      {64, 6, 25.60},
      {64, 8, 25.77},
      {128, 1, 27.72},
      {128, 2, 22.69},
      {128, 4, 21.57}}},
    {64,
     7168,
     2048,
     {{64, 1, 13.71},
      {64, 2, 15.12},
      {64, 3, 19.30},
      {64, 4, 19.41},
      {128, 1, 14.36},
      {128, 2, 15.97},
      {128, 4, 20.54}}},
    {128,
     1536,
     7168,
     {{64, 1, 26.82},
      {64, 2, 21.78},
      {64, 3, 19.82},
      {64, 4, 18.39},
      {64, 6, 22.77},
      {64, 8, 22.44},
      {128, 1, 34.19},
      {128, 2, 24.26},
      {128, 4, 19.14}}},
    {128,
     576,
     7168,
     {{64, 1, 26.92},
      {64, 2, 20.79},
      {64, 3, 18.91},
      {64, 4, 17.64},
      {64, 6, 16.74},
      {64, 8, 16.43},
      {128, 1, 32.81},
      {128, 2, 24.46},
      {128, 4, 18.87}}},
    {128,
     24576,
     1536,
     {{64, 1, 34.21},
      {64, 2, 57.00},
      {64, 3, 69.72},
      {128, 1, 27.45},
      {128, 2, 43.07}}},
    {128,
     7168,
     16384,
     {{64, 1, 63.71},
      {64, 2, 78.32},
      {64, 3, 84.47},
      {64, 4, 87.85},
      {64, 6, 93.04},
      {64, 8, 97.87},
      {128, 1, 70.22},
      {128, 2, 53.11},
      {128, 4, 60.57}}},
    {128,
     8192,
     1536,
     {{64, 1, 14.19},
      {64, 2, 21.89},
      {64, 3, 25.68},
      {128, 1, 14.48},
      {128, 2, 17.43}}},
    {128,
     18432,
     7168,
     {{64, 1, 93.76},
      {64, 2, 105.06},
      {64, 3, 108.93},
      {64, 4, 113.97},
      {64, 6, 130.89},
      {64, 8, 147.96},
      {128, 1, 73.81},
      {128, 2, 76.06},
      {128, 4, 83.56}}},
    {128,
     7168,
     18432,
     {{64, 1, 70.91},
      {64, 2, 85.07},
      {64, 3, 90.57},
      {64, 4, 95.14},
      {64, 6, 98.87},
      {64, 8, 102.82},
      {128, 1, 80.09},
      {128, 2, 57.44},
      {128, 4, 66.36}}},
    {128,
     4096,
     7168,
     {{64, 1, 28.95},
      {64, 2, 24.68},
      {64, 3, 34.05},
      {64, 4, 33.02},
      {64, 6, 37.67},
      {64, 8, 41.65},
      {128, 1, 33.55},
      {128, 2, 25.91},
      {128, 4, 21.71}}},
    {128,
     7168,
     2048,
     {{64, 1, 14.82},
      {64, 2, 21.85},
      {64, 3, 27.25},
      {64, 4, 31.25},
      {128, 1, 15.81},
      {128, 2, 16.88},
      {128, 4, 23.41}}},
};

TEST(GemmTiles, ChoiceIsTheFastestMeasuredOrNearIt) {
  for (const Measured &shape : kMeasured) {
    Fp8GemmTile chosen = chooseFp8GemmTile(shape.m, shape.n, shape.k);
    double best = 1e30, at = -1, below = -1, above = -1;
    for (const Timed &t : shape.tiles) {
      best = std::min(best, t.us);
      if (t.rows != chosen.rows)
        continue;
      if (t.splits == chosen.splits)
        at = t.us;
      else if (t.splits < chosen.splits)
        below = t.us; // the nearest measured below (ascending order)
      else if (above < 0)
        above = t.us;
    }
    // A split the sweep did not time: between its measured neighbours.
    double time = at >= 0                    ? at
                  : below >= 0 && above >= 0 ? (below + above) / 2
                                             : std::max(below, above);
    ASSERT_GT(time, 0) << "m=" << shape.m << " n=" << shape.n
                       << " k=" << shape.k << ": no measurement near "
                       << chosen.rows << " rows, split " << chosen.splits;
    EXPECT_LE(time, best + 2.5)
        << "m=" << shape.m << " n=" << shape.n << " k=" << shape.k << ": chose "
        << chosen.rows << " rows, split " << chosen.splits << " (" << time
        << " us); the fastest measured took " << best;
  }
}

TEST(GemmTiles, ChoicesAreTilesTheKernelTakes) {
  std::mt19937_64 rng(23);
  std::uniform_int_distribution<int64_t> rows(9, 16384), columns(1, 32768),
      depth(16, 32768);
  for (int i = 0; i < 20000; ++i) {
    int64_t m = rows(rng), n = columns(rng), k = depth(rng) / 16 * 16;
    for (int64_t sms : {8, 114, 132}) {
      Fp8GemmTile t = chooseFp8GemmTile(m, n, k, sms);
      ASSERT_TRUE(fp8GemmTileValid(t)) << m << " " << n << " " << k;
      EXPECT_EQ(t.rows, m <= 64 ? 64 : 128);
      EXPECT_EQ(t.columns, 128);
      EXPECT_EQ(t.stages, fp8GemmLibraryStages(t.rows));
      EXPECT_LE(fp8GemmSharedBytes(t), 227 * 1024);
      // A split keeps at least kMinBlocksPerSplit blocks of K each.
      int64_t kBlocks = (k + 127) / 128;
      if (t.splits > 1) {
        EXPECT_GE(kBlocks, t.splits * kMinBlocksPerSplit);
      }
    }
  }
  // A grid of whole waves (column tiles a multiple of the SMs) is never
  // split: a split only adds waves and the sum.
  for (int64_t sms : {8, 132})
    for (int64_t waves : {1, 2, 3})
      for (int64_t k : {1536, 7168, 18432}) {
        Fp8GemmTile t = chooseFp8GemmTile(64, 128 * sms * waves, k, sms);
        EXPECT_EQ(t.splits, 1) << sms << " SMs, " << waves << " waves, k " << k;
      }
}

TEST(GemmTiles, LibraryStagesFitAndAreTheMost) {
  // The library's entries: 9 stages beside 64 rows (the most that fit), 6
  // beside 128 (one short of the 7 that fit).
  EXPECT_EQ(fp8GemmMaxStages(64), 9);
  EXPECT_EQ(fp8GemmMaxStages(128), 7);
  EXPECT_EQ(fp8GemmLibraryStages(64), 9);
  EXPECT_EQ(fp8GemmLibraryStages(128), 6);
  EXPECT_GT(fp8GemmSharedBytes({64, 128, 10, 1}), 227 * 1024);
  EXPECT_FALSE(fp8GemmTileValid({96, 128, 6, 1}));
  EXPECT_FALSE(fp8GemmTileValid({64, 256, 6, 1}));
  EXPECT_FALSE(fp8GemmTileValid({64, 128, 1, 1}));
  EXPECT_FALSE(fp8GemmTileValid({128, 128, 6, kMaxSplits + 1}));
}

TEST(GemmTiles, TileAttributeIsReadOnceAndChecked) {
  // cuda_tile's four values: a tile the kernel takes, or nothing.
  const int64_t good[] = {64, 128, 9, 2};
  std::optional<Fp8GemmTile> tile = fp8GemmTileFrom(good, 4);
  ASSERT_TRUE(tile);
  EXPECT_EQ(*tile, (Fp8GemmTile{64, 128, 9, 2}));
  EXPECT_FALSE(fp8GemmTileFrom(good, 3));
  const int64_t tooManyStages[] = {128, 128, 8, 1};
  EXPECT_FALSE(fp8GemmTileFrom(tooManyStages, 4));
  // A value past int32 must not wrap into a valid one (2^32 + 64 rows).
  const int64_t wraps[] = {(int64_t(1) << 32) + 64, 128, 6, 1};
  EXPECT_FALSE(fp8GemmTileFrom(wraps, 4));
  EXPECT_EQ(fp8GemmTileRule(), "[rows 64 or 128, columns 128, stages 2-9 (7 "
                               "beside 128 rows), splits 1-8]");
}

TEST(GemmTiles, WeightRuleIsDeepSeeksBlocks) {
  EXPECT_TRUE(fp8GemmWeightApplies(128, 128, 7168));
  EXPECT_TRUE(fp8GemmWeightApplies(256, 128, 16));
  EXPECT_FALSE(fp8GemmWeightApplies(64, 128, 7168));  // rows of 64
  EXPECT_FALSE(fp8GemmWeightApplies(128, 64, 7168));  // columns of 64
  EXPECT_FALSE(fp8GemmWeightApplies(128, 128, 7160)); // K not of 16
  EXPECT_FALSE(fp8GemmWeightApplies(0, 128, 7168));
  EXPECT_FALSE(fp8GemmWeightApplies(128, 128, 0));
}

// The decode expert GEMV's streaming form against measured timings of
// the forced forms (`DaybreakKernelBench 20 experts`, bench/NOTES.md):
// 8 slots a token, 132 SMs x 3 resident blocks of the ring of 4. Tasks are
// pair groups (the pairs, at most one an expert plus one per 8) times
// 64-row tiles of N; K groups are 128 columns (e4m3).
struct MeasuredExpertGemv {
  const char *name;
  int64_t tokens, n, k;
  double registersUs, ring4Us;
};

int64_t expertGemvTasks(const MeasuredExpertGemv &c) {
  constexpr int64_t kSlots = 8, kExperts = 256;
  int64_t pairs = c.tokens * kSlots;
  int64_t groups = std::min(pairs, kExperts + (pairs + 7) / 8);
  return groups * ((c.n + 63) / 64);
}

void expectFasterForm(const MeasuredExpertGemv &c, int64_t ringCluster) {
  constexpr int64_t kRingBlocks = 132 * 3;
  ExpertGemvStreaming faster = c.ring4Us < c.registersUs
                                   ? ExpertGemvStreaming::Ring4
                                   : ExpertGemvStreaming::Registers;
  EXPECT_EQ(chooseExpertGemvStreaming(expertGemvTasks(c), kRingBlocks,
                                      int(ringCluster)),
            faster)
      << c.name << " (" << expertGemvTasks(c) << " tasks, clusters of "
      << ringCluster << ")";
}

// The H200, rings unsplit (session 31;
// bench/results/2026-12-05-h200-session31/experts.txt.xz): between one and
// two rounds the registers form wins.
TEST(GemmTiles, ExpertGemvStreamingPicksTheFasterUnsplitForm) {
  const MeasuredExpertGemv cases[] = {
      {"DeepSeek-V3.2 gate+up, T = 1", 1, 4096, 7168, 96.0, 119.5},
      {"DeepSeek-V3.2 gate+up, T = 8", 8, 4096, 7168, 672.4, 649.0},
      {"DeepSeek-V3.2 gate, T = 1", 1, 2048, 7168, 63.5, 52.0},
      {"DeepSeek-V3.2 down, T = 1", 1, 7168, 2048, 58.9, 50.8},
      {"DeepSeek-V3.2 down, T = 8", 8, 7168, 2048, 291.9, 256.6},
      {"GLM-5.3-Flash gate+up, T = 1", 1, 4096, 4096, 53.9, 61.2},
      {"GLM-5.3-Flash down, T = 1", 1, 4096, 2048, 31.6, 35.2},
      {"GLM-5.3-Flash down, T = 8", 8, 4096, 2048, 184.5, 178.4},
  };
  for (const MeasuredExpertGemv &c : cases)
    expectFasterForm(c, 1);
}

// The H100, the ring of 4 split as chooseExpertGemvCluster picks (session
// 40; bench/results/2026-12-06-h100-session40/experts.txt.xz), clusters
// of c modelled as packing the SMs (396 / c at once): the split evens out
// the partial round, and the ring wins every case.
TEST(GemmTiles, ExpertGemvStreamingPicksTheFasterSplitForm) {
  const MeasuredExpertGemv cases[] = {
      {"DeepSeek-V3.2 gate+up, T = 1", 1, 4096, 7168, 133.48, 103.35},
      {"DeepSeek-V3.2 gate+up, T = 8", 8, 4096, 7168, 849.75, 679.84},
      {"DeepSeek-V3.2 gate, T = 1", 1, 2048, 7168, 63.47, 55.97},
      {"DeepSeek-V3.2 gate, T = 8", 8, 2048, 7168, 453.59, 353.93},
      {"DeepSeek-V3.2 down, T = 1", 1, 7168, 2048, 72.41, 58.08},
      {"DeepSeek-V3.2 down, T = 8", 8, 7168, 2048, 404.91, 343.52},
      {"GLM-5.3-Flash gate+up, T = 1", 1, 4096, 4096, 74.88, 62.55},
      {"GLM-5.3-Flash gate, T = 1", 1, 2048, 4096, 37.31, 35.03},
      {"GLM-5.3-Flash down, T = 1", 1, 4096, 2048, 37.49, 36.65},
      {"GLM-5.3-Flash down, T = 8", 8, 4096, 2048, 240.64, 208.68},
  };
  int64_t active[kExpertGemvMaxCluster + 1] = {};
  for (int c = 1; c <= kExpertGemvMaxCluster; ++c)
    active[c] = 396 / c;
  for (const MeasuredExpertGemv &c : cases)
    expectFasterForm(
        c, chooseExpertGemvCluster(expertGemvTasks(c), c.k / 128, active));
}

TEST(GemmTiles, ExpertGemvStreamingBoundaries) {
  // One task a block, then between one and two rounds, then two or more.
  EXPECT_EQ(chooseExpertGemvStreaming(1, 396, 1), ExpertGemvStreaming::Ring4);
  EXPECT_EQ(chooseExpertGemvStreaming(396, 396, 1), ExpertGemvStreaming::Ring4);
  EXPECT_EQ(chooseExpertGemvStreaming(397, 396, 1),
            ExpertGemvStreaming::Registers);
  EXPECT_EQ(chooseExpertGemvStreaming(791, 396, 1),
            ExpertGemvStreaming::Registers);
  EXPECT_EQ(chooseExpertGemvStreaming(792, 396, 1), ExpertGemvStreaming::Ring4);
  // A split ring evens out the partial round.
  EXPECT_EQ(chooseExpertGemvStreaming(397, 396, 2), ExpertGemvStreaming::Ring4);
}

TEST(GemmTiles, ExpertGemvClusterBalancesTheBusiestCluster) {
  // The 8-slot ring on an H100's 132 SMs (two blocks an SM), clusters of
  // c blocks as if every size packed the SMs: 264 / c.
  int64_t active[kExpertGemvMaxCluster + 1] = {};
  for (int c = 1; c <= kExpertGemvMaxCluster; ++c)
    active[c] = 264 / c;
  // DeepSeek-V3.2's gate/up at one token with the shared slot: 576 tasks
  // of 56 K groups. Unsplit, some blocks take 3 tasks (168 groups); over
  // clusters of 4, 9 quarter tasks of 14 groups plus the reduction's one
  // (135), the least of every size.
  EXPECT_EQ(chooseExpertGemvCluster(576, 56, active), 4);
  // Its down projection: 1008 tasks of 16 groups, 4 a block unsplit (64);
  // clusters of 2 take 8 tasks of 8 + 1 (72).
  EXPECT_EQ(chooseExpertGemvCluster(1008, 16, active), 1);
  // Fewer tasks than blocks: every cluster one task, the widest that
  // still saves 3 % a step (8: 1 task x (2 + 1)).
  EXPECT_EQ(chooseExpertGemvCluster(20, 16, active), 8);
  // No wider than K's groups, nor a size the GPU cannot hold.
  EXPECT_EQ(chooseExpertGemvCluster(20, 2, active), 1);
  active[8] = active[7] = active[6] = active[5] = 0;
  EXPECT_EQ(chooseExpertGemvCluster(20, 16, active), 4);
  // No tasks: unsplit.
  EXPECT_EQ(chooseExpertGemvCluster(0, 56, active), 1);
}

} // namespace
