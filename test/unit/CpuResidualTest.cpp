//===- CpuResidualTest.cpp - The CPU mHC kernels against the reference ----===//
//
// mhc_pre and mhc_post on seeded random data against daybreak::ref
// (double precision): 1, 2 and 4 streams (GLM-5.3's and DeepSeek-V4's n is
// 4), widths that are not a multiple of anything, 1 and 20 Sinkhorn
// iterations, 1 and 3 threads; the errors on stream counts the kernel does
// not take.
//
//===----------------------------------------------------------------------===//

#include "compiler/reference/Kernels.h"
#include "runtime/devices/cpu/CpuKernels.h"
#include "runtime/devices/cpu/ThreadPool.h"

#include "test/unit/KernelTestUtil.h"

#include "gtest/gtest.h"

#include <random>
#include <vector>

using namespace daybreak;
using ref::Tensor;
using test::randomFloats;
using test::relClose;

namespace {

std::vector<float> toVector(const Tensor &t) {
  return std::vector<float>(t.floats().begin(), t.floats().end());
}

TEST(CpuResidual, MhcPreAndPostMatchTheReference) {
  std::mt19937 rng(11);
  struct Case {
    int64_t tokens, n, width, iters;
    int threads;
  };
  for (const Case &c : {Case{5, 4, 67, 20, 3}, Case{1, 4, 64, 1, 1},
                        Case{9, 2, 33, 7, 3}, Case{3, 1, 16, 20, 1}}) {
    SCOPED_TRACE(testing::Message()
                 << "T " << c.tokens << " n " << c.n << " D " << c.width
                 << " iters " << c.iters << " threads " << c.threads);
    int64_t flat = c.n * c.width, mixes = (2 + c.n) * c.n;
    std::vector<float> streams = randomFloats(rng, c.tokens * flat, -2, 2),
                       fn = randomFloats(rng, mixes * flat, -0.1f, 0.1f),
                       base = randomFloats(rng, mixes),
                       scale = {0.7f, 1.3f, 2.1f},
                       y = randomFloats(rng, c.tokens * c.width);
    double eps = 1e-6, normEps = 1e-6;
    ref::MhcPre expected =
        ref::mhcPre(Tensor::fromFloats({c.tokens, c.n, c.width}, streams),
                    Tensor::fromFloats({mixes, flat}, fn),
                    Tensor::fromFloats({mixes}, base),
                    Tensor::fromFloats({3}, scale), c.iters, eps, normEps);

    cpu::ThreadPool pool(c.threads);
    std::vector<float> input(c.tokens * c.width), post(c.tokens * c.n),
        comb(c.tokens * c.n * c.n);
    Status ran = cpu::mhcPre(pool, streams.data(), fn.data(), base.data(),
                             scale.data(), c.tokens, c.n, c.width, c.iters, eps,
                             normEps, input.data(), post.data(), comb.data());
    ASSERT_TRUE(ran.ok()) << ran.message();
    EXPECT_TRUE(relClose(input, toVector(expected.input), 1e-6));
    EXPECT_TRUE(relClose(post, toVector(expected.post), 1e-6));
    EXPECT_TRUE(relClose(comb, toVector(expected.comb), 1e-6));
    // Sinkhorn makes comb close to doubly stochastic: columns sum to ~1.
    for (int64_t t = 0; t < c.tokens; ++t)
      for (int64_t j = 0; j < c.n; ++j) {
        double sum = 0.0;
        for (int64_t i = 0; i < c.n; ++i)
          sum += comb[(t * c.n + i) * c.n + j];
        EXPECT_NEAR(sum, 1.0, 1e-4);
      }

    Tensor expectedPost =
        ref::mhcPost(Tensor::fromFloats({c.tokens, c.n, c.width}, streams),
                     Tensor::fromFloats({c.tokens, c.width}, y), expected.post,
                     expected.comb);
    std::vector<float> out(c.tokens * flat);
    ran = cpu::mhcPost(pool, streams.data(), y.data(), post.data(), comb.data(),
                       c.tokens, c.n, c.width, out.data());
    ASSERT_TRUE(ran.ok()) << ran.message();
    EXPECT_TRUE(relClose(out, toVector(expectedPost), 1e-6));
  }
}

TEST(CpuResidual, StreamCountsBeyondTheKernelAreErrors) {
  cpu::ThreadPool pool(1);
  std::vector<float> buffer(1024);
  float *p = buffer.data();
  Status pre = cpu::mhcPre(pool, p, p, p, p, 1, cpu::kMhcMaxStreams + 1, 4, 20,
                           1e-6, 1e-6, p, p, p);
  ASSERT_FALSE(pre.ok());
  EXPECT_EQ(pre.message(), "mhc_pre: 9 streams (the CPU kernel takes 1 to 8)");
  Status post = cpu::mhcPost(pool, p, p, p, p, 1, 0, 4, p);
  ASSERT_FALSE(post.ok());
  EXPECT_EQ(post.message(),
            "mhc_post: 0 streams (the CPU kernel takes 1 to 8)");
  Status iters = cpu::mhcPre(pool, p, p, p, p, 1, 4, 4, 0, 1e-6, 1e-6, p, p, p);
  ASSERT_FALSE(iters.ok());
  EXPECT_EQ(iters.message(), "mhc_pre: sinkhorn_iters 0 (at least 1)");
}

} // namespace
