//===- CpuResidualTest.cpp - The CPU mHC kernels against the reference ----===//
//
// mhc_pre and mhc_post on seeded random data against daybreak::ref
// (double precision): 1, 2 and 4 streams (GLM-5.3's and DeepSeek-V4's n is
// 4), widths that are not a multiple of anything, 1 and 20 Sinkhorn
// iterations, 1 and 3 threads; the collapse fused with the sublayer's
// RMSNorm (f32 and bf16 weights) and the write-back fused with the next
// collapse (mhc_post_pre: bitwise the two kernels); the errors on stream
// counts the kernel does not take.
//
//===----------------------------------------------------------------------===//

#include "compiler/reference/Kernels.h"
#include "runtime/devices/cpu/CpuKernels.h"
#include "runtime/devices/cpu/ThreadPool.h"
#include "runtime/numerics/Numerics.h"

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
    cpu::MhcMix mix;
    mix.fn = fn.data();
    mix.base = base.data();
    mix.scale = scale.data();
    mix.sinkhornIters = c.iters;
    mix.eps = eps;
    mix.normEps = normEps;
    Status ran = cpu::mhcPre(pool, streams.data(), c.tokens, c.n, c.width, mix,
                             input.data(), post.data(), comb.data());
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

cpu::MhcMix mixOf(const std::vector<float> &fn, const std::vector<float> &base,
                  const std::vector<float> &scale, int64_t iters) {
  cpu::MhcMix mix;
  mix.fn = fn.data();
  mix.base = base.data();
  mix.scale = scale.data();
  mix.sinkhornIters = iters;
  mix.eps = 1e-6;
  mix.normEps = 1e-6;
  return mix;
}

TEST(CpuResidual, CollapseFusedWithTheSublayerNorm) {
  std::mt19937 rng(12);
  for (int64_t n : {4, 3}) {
    int64_t tokens = 6, width = 45, flat = n * width, mixes = (2 + n) * n;
    std::vector<float> streams = randomFloats(rng, tokens * flat, -2, 2),
                       fn = randomFloats(rng, mixes * flat, -0.1f, 0.1f),
                       base = randomFloats(rng, mixes),
                       scale = {0.9f, 1.1f, 1.7f},
                       weight = randomFloats(rng, width, 0.5f, 1.5f);
    std::vector<uint16_t> weight16(width);
    std::vector<float> wide16(width);
    for (int64_t i = 0; i < width; ++i) {
      weight16[i] = numerics::floatToBf16(weight[i]);
      wide16[i] = numerics::bf16ToFloat(weight16[i]);
    }
    double inputEps = 1e-5;
    ref::MhcPre collapse =
        ref::mhcPre(Tensor::fromFloats({tokens, n, width}, streams),
                    Tensor::fromFloats({mixes, flat}, fn),
                    Tensor::fromFloats({mixes}, base),
                    Tensor::fromFloats({3}, scale), 20, 1e-6, 1e-6);
    cpu::ThreadPool pool(3);
    cpu::WeightView half;
    half.data = weight16.data();
    half.type = cpu::WeightType::BF16;
    for (auto [view, wide] :
         {std::pair{cpu::WeightView::f32(weight.data()), &weight},
          std::pair{half, &wide16}}) {
      SCOPED_TRACE(testing::Message()
                   << "n " << n << (view.isF32() ? " f32" : " bf16"));
      Tensor expected = ref::rmsNorm(
          collapse.input, Tensor::fromFloats({width}, *wide), inputEps);
      cpu::MhcMix mix = mixOf(fn, base, scale, 20);
      mix.norm = view;
      mix.inputEps = inputEps;
      std::vector<float> input(tokens * width), post(tokens * n),
          comb(tokens * n * n);
      Status ran = cpu::mhcPre(pool, streams.data(), tokens, n, width, mix,
                               input.data(), post.data(), comb.data());
      ASSERT_TRUE(ran.ok()) << ran.message();
      EXPECT_TRUE(relClose(input, toVector(expected), 1e-5));
      EXPECT_TRUE(relClose(post, toVector(collapse.post), 1e-6));
      EXPECT_TRUE(relClose(comb, toVector(collapse.comb), 1e-6));

      // The same as the collapse followed by the CPU norm kernel, bit for bit.
      cpu::MhcMix plain = mixOf(fn, base, scale, 20);
      std::vector<float> collapsed(tokens * width), normed(tokens * width);
      ASSERT_TRUE(cpu::mhcPre(pool, streams.data(), tokens, n, width, plain,
                              collapsed.data(), post.data(), comb.data())
                      .ok());
      cpu::rmsNorm(pool, collapsed.data(), view, tokens, width, inputEps,
                   normed.data());
      EXPECT_EQ(input, normed);
    }
  }
}

TEST(CpuResidual, WriteBackFusedWithTheNextCollapse) {
  std::mt19937 rng(13);
  for (int threads : {1, 3}) {
    for (int64_t n : {4, 2}) {
      SCOPED_TRACE(testing::Message() << "n " << n << " threads " << threads);
      int64_t tokens = 7, width = 38, flat = n * width, mixes = (2 + n) * n;
      std::vector<float> streams = randomFloats(rng, tokens * flat, -2, 2),
                         y = randomFloats(rng, tokens * width),
                         post = randomFloats(rng, tokens * n, 0, 2),
                         comb = randomFloats(rng, tokens * n * n, 0, 1),
                         fn = randomFloats(rng, mixes * flat, -0.1f, 0.1f),
                         base = randomFloats(rng, mixes),
                         scale = {0.8f, 1.2f, 1.9f},
                         weight = randomFloats(rng, width, 0.5f, 1.5f);
      cpu::ThreadPool pool(threads);
      cpu::MhcMix mix = mixOf(fn, base, scale, 20);
      mix.norm = cpu::WeightView::f32(weight.data());
      mix.inputEps = 1e-5;

      std::vector<float> out(tokens * flat), input(tokens * width),
          nextPost(tokens * n), nextComb(tokens * n * n);
      Status ran =
          cpu::mhcPostPre(pool, streams.data(), y.data(), post.data(),
                          comb.data(), tokens, n, width, mix, out.data(),
                          input.data(), nextPost.data(), nextComb.data());
      ASSERT_TRUE(ran.ok()) << ran.message();

      std::vector<float> wantOut(tokens * flat), wantInput(tokens * width),
          wantPost(tokens * n), wantComb(tokens * n * n);
      ASSERT_TRUE(cpu::mhcPost(pool, streams.data(), y.data(), post.data(),
                               comb.data(), tokens, n, width, wantOut.data())
                      .ok());
      ASSERT_TRUE(cpu::mhcPre(pool, wantOut.data(), tokens, n, width, mix,
                              wantInput.data(), wantPost.data(),
                              wantComb.data())
                      .ok());
      EXPECT_EQ(out, wantOut);
      EXPECT_EQ(input, wantInput);
      EXPECT_EQ(nextPost, wantPost);
      EXPECT_EQ(nextComb, wantComb);

      // And both against the double-precision reference.
      Tensor refOut =
          ref::mhcPost(Tensor::fromFloats({tokens, n, width}, streams),
                       Tensor::fromFloats({tokens, width}, y),
                       Tensor::fromFloats({tokens, n}, post),
                       Tensor::fromFloats({tokens, n, n}, comb));
      EXPECT_TRUE(relClose(out, toVector(refOut), 1e-6));
    }
  }
}

TEST(CpuResidual, StreamCountsBeyondTheKernelAreErrors) {
  cpu::ThreadPool pool(1);
  std::vector<float> buffer(1024);
  float *p = buffer.data();
  cpu::MhcMix mix;
  mix.fn = mix.base = mix.scale = p;
  mix.sinkhornIters = 20;
  Status pre =
      cpu::mhcPre(pool, p, 1, cpu::kMhcMaxStreams + 1, 4, mix, p, p, p);
  ASSERT_FALSE(pre.ok());
  EXPECT_EQ(pre.message(), "mhc_pre: 9 streams (the CPU kernel takes 1 to 8)");
  Status post = cpu::mhcPost(pool, p, p, p, p, 1, 0, 4, p);
  ASSERT_FALSE(post.ok());
  EXPECT_EQ(post.message(),
            "mhc_post: 0 streams (the CPU kernel takes 1 to 8)");
  Status fused = cpu::mhcPostPre(pool, p, p, p, p, 1, cpu::kMhcMaxStreams + 1,
                                 4, mix, p, p, p, p);
  ASSERT_FALSE(fused.ok());
  EXPECT_EQ(fused.message(),
            "mhc_post_pre: 9 streams (the CPU kernel takes 1 to 8)");
  mix.sinkhornIters = 0;
  Status iters = cpu::mhcPre(pool, p, 1, 4, 4, mix, p, p, p);
  ASSERT_FALSE(iters.ok());
  EXPECT_EQ(iters.message(), "mhc_pre: sinkhorn_iters 0 (at least 1)");
  iters = cpu::mhcPostPre(pool, p, p, p, p, 1, 4, 4, mix, p, p, p, p);
  ASSERT_FALSE(iters.ok());
  EXPECT_EQ(iters.message(), "mhc_post_pre: sinkhorn_iters 0 (at least 1)");
}

} // namespace
