//===- CpuKernelsTest.cpp - The CPU kernels against the reference ---------===//
//
// Every runtime CPU kernel runs on seeded random inputs at several shapes
// (one token, K off the block sizes, batches, empty sets, -1 slots) with 1
// and 4 threads and is compared with daybreak::ref, the oracle. Cache formats
// are checked by write-then-read round trips against an independent
// quantize-dequantize.
//
//===----------------------------------------------------------------------===//

#include "runtime/devices/cpu/CpuKernels.h"
#include "compiler/reference/Kernels.h"
#include "runtime/numerics/Numerics.h"
#include "test/unit/Mxfp4TestData.h"

#include "test/unit/KernelTestUtil.h"

#include "gtest/gtest.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>
#include <set>
#include <thread>
#include <vector>

using namespace daybreak;
using ref::ElementType;
using ref::Tensor;
using test::columnsOf;
using test::randomFloats;
using test::relClose;
using test::untouchedOutside;

namespace {

const unsigned kThreadCounts[] = {1, 4};

Tensor floats(std::vector<int64_t> shape, std::vector<float> values) {
  return Tensor::fromFloats(std::move(shape), std::move(values));
}

Tensor ints(std::vector<int64_t> shape, const std::vector<int32_t> &values) {
  return Tensor::fromInts(std::move(shape),
                          std::vector<int64_t>(values.begin(), values.end()));
}

std::vector<int32_t> toInts(const Tensor &t) {
  return std::vector<int32_t>(t.ints().begin(), t.ints().end());
}

/// A paged cache whose page table is a non-identity permutation.
struct PagedCache {
  std::vector<uint8_t> storage;
  std::vector<int32_t> pageTable;
  cpu::CacheView view;

  PagedCache(cpu::CacheFormat format, int64_t width, int64_t tailDim,
             int64_t scaleBlock, int64_t batch, int64_t maxSeqLen,
             int64_t pageSize) {
    view.format = format;
    view.width = width;
    view.tailDim = tailDim;
    view.scaleBlock = scaleBlock;
    view.bytesPerRow =
        cpu::cacheBytesPerRow(format, width, tailDim, scaleBlock);
    view.batch = batch;
    view.maxSeqLen = maxSeqLen;
    view.pageSize = pageSize;
    int64_t pages = batch * view.pagesPerSeq();
    pageTable.resize(pages);
    // Reverse order, so logical and physical pages always differ.
    for (int64_t i = 0; i < pages; ++i)
      pageTable[i] = static_cast<int32_t>(pages - 1 - i);
    storage.assign(pages * pageSize * view.bytesPerRow, 0);
    view.base = storage.data();
    view.pageTable = pageTable.data();
  }
};

/// The test's own Fp8Scaled quantize-dequantize of one row.
std::vector<float> fp8RoundTrip(const float *in, int64_t width, int64_t tail,
                                int64_t block) {
  std::vector<float> out(width);
  for (int64_t b0 = 0; b0 < width - tail; b0 += block) {
    double amax = 1e-4;
    for (int64_t i = b0; i < b0 + block; ++i)
      amax = std::max(amax, std::fabs(double(in[i])));
    int e = static_cast<int>(std::ceil(std::log2(amax / 448.0)));
    // Guard log2 rounding at exact powers of two.
    if (std::ldexp(1.0, e - 1) >= amax / 448.0)
      --e;
    for (int64_t i = b0; i < b0 + block; ++i)
      out[i] = std::ldexp(numerics::roundToE4m3(std::ldexp(in[i], -e)), e);
  }
  for (int64_t i = width - tail; i < width; ++i)
    out[i] = numerics::roundToBf16(in[i]);
  return out;
}

TEST(CpuThreadPool, CoversEveryIndexOnceUnderRepeatedUse) {
  for (unsigned threads : {1u, 2u, 4u, 7u}) {
    cpu::ThreadPool pool(threads);
    EXPECT_EQ(pool.size(), threads);
    for (int iter = 0; iter < 2000; ++iter) {
      int64_t n = 1 + iter % 97;
      std::vector<int> hits(n, 0);
      pool.parallelFor(n, 1 + iter % 5, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i)
          ++hits[i];
      });
      ASSERT_EQ(std::count(hits.begin(), hits.end(), 1), n) << iter;
    }
  }
}

TEST(CpuThreadPool, SizeOneRunsInline) {
  cpu::ThreadPool pool(1);
  std::thread::id caller = std::this_thread::get_id();
  bool inline_ = false;
  pool.parallelFor(100, 1, [&](int64_t b, int64_t e) {
    inline_ = b == 0 && e == 100 && std::this_thread::get_id() == caller;
  });
  EXPECT_TRUE(inline_);
}

TEST(CpuScratch, NestedFramesDoNotAliasAndReleaseInOrder) {
  cpu::ScratchArena arena;
  auto disjoint = [](const float *a, int64_t n, const float *b, int64_t m) {
    return a + n <= b || b + m <= a;
  };
  for (int pass = 0; pass < 2; ++pass) { // the first pass grows the block
    cpu::ScratchFrame outer(arena);
    float *a = outer.take<float>(1000);
    float *b = outer.take<float>(10);
    EXPECT_TRUE(disjoint(a, 1000, b, 10));
    float *c;
    {
      cpu::ScratchFrame inner(arena);
      c = inner.take<float>(500);
      EXPECT_TRUE(disjoint(a, 1000, c, 500));
      EXPECT_TRUE(disjoint(b, 10, c, 500));
      for (float *p : {a, b, c})
        EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 64, 0u);
    }
    // The inner frame's memory is free again for the next take.
    cpu::ScratchFrame again(arena);
    float *d = again.take<float>(500);
    if (pass == 1) {
      EXPECT_EQ(c, d);
    }
    EXPECT_TRUE(disjoint(a, 1000, d, 500));
  }
  // 1000, 10 and 500 floats rounded up to 64 bytes each.
  EXPECT_EQ(arena.highWater(), 4032u + 64u + 2048u);
  EXPECT_EQ(arena.capacity(), arena.highWater());
}

TEST(CpuScratch, TheSameTakesReuseTheSameMemory) {
  cpu::ScratchArena arena;
  std::vector<float *> first, second;
  for (std::vector<float *> *seen : {&first, &second}) {
    cpu::ScratchFrame frame(arena);
    for (int64_t n : {7, 300, 0, 4096})
      seen->push_back(frame.take<float>(n));
  }
  // The first sequence grew the block to hold it all; from then on the same
  // takes get the same addresses.
  EXPECT_EQ(arena.capacity(), arena.highWater());
  std::vector<float *> third;
  {
    cpu::ScratchFrame frame(arena);
    for (int64_t n : {7, 300, 0, 4096})
      third.push_back(frame.take<float>(n));
  }
  EXPECT_EQ(second, third);
  size_t capacity = arena.capacity();
  arena.reserve(capacity / 2); // never shrinks
  EXPECT_EQ(arena.capacity(), capacity);
}

TEST(CpuThreadPool, EveryParticipantGetsTheLargestScratchSeen) {
  cpu::ThreadPool pool(4);
  // One chunk of one loop needs 64 KiB; afterwards every participant's
  // arena holds that, whichever ran it, so later chunks never grow one.
  pool.parallelFor(1, 1, [&](int64_t, int64_t) {
    cpu::ScratchFrame frame;
    std::fill_n(frame.take<float>(16384), 16384, 1.0f);
  });
  std::vector<size_t> capacities(64);
  for (int iter = 0; iter < 50; ++iter)
    pool.parallelFor(64, 1, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i)
        capacities[i] = cpu::currentScratch().capacity();
    });
  for (size_t capacity : capacities)
    EXPECT_GE(capacity, 65536u);
  // Outside a loop the current arena is the calling thread's own.
  cpu::ScratchArena *own = &cpu::currentScratch();
  pool.parallelFor(
      64, 1, [&](int64_t, int64_t) { EXPECT_NE(&cpu::currentScratch(), own); });
  EXPECT_EQ(&cpu::currentScratch(), own);
}

TEST(CpuKernels, Embedding) {
  std::mt19937 rng(1);
  const int64_t vocab = 50, dim = 33;
  std::vector<float> table = randomFloats(rng, vocab * dim);
  std::vector<int32_t> ids = {3, 49, 0, 3, 17};
  Tensor expected = llvm::cantFail(ref::embedding(
      floats({vocab, dim}, table), ints({int64_t(ids.size())}, ids)));
  for (unsigned threads : kThreadCounts) {
    cpu::ThreadPool pool(threads);
    std::vector<float> out(ids.size() * dim);
    ASSERT_TRUE(cpu::embedding(pool, table.data(), vocab, dim, ids.data(),
                               ids.size(), out.data())
                    .ok());
    EXPECT_EQ(out, expected.floats()); // a copy: exact
    std::vector<int32_t> bad = {1, 50};
    Status status = cpu::embedding(pool, table.data(), vocab, dim, bad.data(),
                                   2, out.data());
    ASSERT_FALSE(status.ok());
    EXPECT_NE(status.message().find("token id 50"), std::string::npos)
        << status.message();
  }
}

TEST(CpuKernels, Norms) {
  std::mt19937 rng(2);
  for (auto [rows, dim] : {std::pair<int64_t, int64_t>{1, 7}, {9, 1000}}) {
    std::vector<float> x = randomFloats(rng, rows * dim, -3, 3);
    std::vector<float> w = randomFloats(rng, dim), b = randomFloats(rng, dim);
    Tensor xt = floats({rows, dim}, x);
    Tensor rms = ref::rmsNorm(xt, floats({dim}, w), 1e-6);
    Tensor ln = ref::layerNorm(xt, floats({dim}, w), floats({dim}, b), 1e-5);
    Tensor lnNoBias = ref::layerNorm(xt, floats({dim}, w), Tensor(), 1e-5);
    for (unsigned threads : kThreadCounts) {
      cpu::ThreadPool pool(threads);
      std::vector<float> out(rows * dim);
      cpu::rmsNorm(pool, x.data(), w.data(), rows, dim, 1e-6, out.data());
      EXPECT_TRUE(relClose(out, rms.floats(), 1e-6)); // double sums: ~ulp
      cpu::layerNorm(pool, x.data(), w.data(), b.data(), rows, dim, 1e-5,
                     out.data());
      EXPECT_TRUE(relClose(out, ln.floats(), 1e-6));
      cpu::layerNorm(pool, x.data(), w.data(), nullptr, rows, dim, 1e-5,
                     out.data());
      EXPECT_TRUE(relClose(out, lnNoBias.floats(), 1e-6));
    }
  }
}

// add_rms_norm against the reference's add and norm, and bit for bit
// against cpu::add then cpu::rmsNorm (the launches it replaces), also with
// the sum written over its input (the workspace may give them one buffer)
// and a bf16 weight.
TEST(CpuKernels, AddRmsNorm) {
  std::mt19937 rng(21);
  for (auto [rows, dim] : {std::pair<int64_t, int64_t>{1, 7}, {9, 1000}}) {
    std::vector<float> x = randomFloats(rng, rows * dim, -3, 3),
                       r = randomFloats(rng, rows * dim, -3, 3),
                       w = randomFloats(rng, dim);
    std::vector<uint16_t> wBf16(dim);
    for (int64_t i = 0; i < dim; ++i)
      wBf16[i] = numerics::floatToBf16(w[i]);
    Tensor h = floats({rows, dim}, x);
    for (int64_t i = 0; i < rows * dim; ++i)
      h.floats()[i] += r[i];
    Tensor norm = ref::rmsNorm(h, floats({dim}, w), 1e-6);
    for (unsigned threads : kThreadCounts) {
      cpu::ThreadPool pool(threads);
      std::vector<float> sum(rows * dim), out(rows * dim);
      cpu::addRmsNorm(pool, x.data(), r.data(), cpu::WeightView::f32(w.data()),
                      rows, dim, 1e-6, sum.data(), out.data());
      EXPECT_EQ(sum, h.floats()); // one float add each: exact
      EXPECT_TRUE(relClose(out, norm.floats(), 1e-6));
      // The two launches it replaces, bit for bit.
      std::vector<float> added(rows * dim), normed(rows * dim);
      cpu::add(pool, x.data(), r.data(), rows * dim, added.data());
      cpu::rmsNorm(pool, added.data(), cpu::WeightView::f32(w.data()), rows,
                   dim, 1e-6, normed.data());
      EXPECT_EQ(sum, added);
      EXPECT_EQ(out, normed);
      // The sum over its input, and a bf16 weight, against the same pair.
      std::vector<float> inPlace = x;
      cpu::WeightView bf16;
      bf16.data = wBf16.data();
      bf16.type = cpu::WeightType::BF16;
      cpu::addRmsNorm(pool, inPlace.data(), r.data(), bf16, rows, dim, 1e-6,
                      inPlace.data(), out.data());
      cpu::rmsNorm(pool, added.data(), bf16, rows, dim, 1e-6, normed.data());
      EXPECT_EQ(inPlace, added);
      EXPECT_EQ(out, normed);
    }
  }
}

TEST(CpuKernels, MatmulMatchesReference) {
  std::mt19937 rng(3);
  struct Shape {
    int64_t m, n, k;
    bool bias;
  };
  for (Shape s : {Shape{1, 33, 77, false}, Shape{3, 50, 300, true},
                  Shape{5, 17, 513, false}, Shape{7, 16, 1000, true},
                  Shape{200, 300, 600, true}, Shape{2, 40, 5000, false},
                  Shape{64, 9, 3, true}}) {
    std::vector<float> x = randomFloats(rng, s.m * s.k);
    std::vector<float> w = randomFloats(rng, s.n * s.k);
    std::vector<float> b = randomFloats(rng, s.n);
    Tensor expected = ref::matmul(floats({s.m, s.k}, x), floats({s.n, s.k}, w),
                                  s.bias ? floats({s.n}, b) : Tensor());
    std::vector<float> first;
    for (unsigned threads : kThreadCounts) {
      SCOPED_TRACE(::testing::Message() << s.m << "x" << s.n << "x" << s.k
                                        << " threads " << threads);
      cpu::ThreadPool pool(threads);
      std::vector<float> out(s.m * s.n);
      cpu::matmul(pool, x.data(), w.data(), s.bias ? b.data() : nullptr, s.m,
                  s.n, s.k, out.data());
      // fp32 blocked accumulation vs the fp64 oracle.
      EXPECT_TRUE(relClose(out, expected.floats(), 1e-5));
      if (first.empty())
        first = out;
      else
        EXPECT_EQ(out, first); // deterministic across thread counts
    }
    // The compiler's tilings (lm-tile): column splits never change a result
    // bit; row splits change the rows per GEMM call, hence possibly the
    // accumulation path, so they are held to the oracle tolerance.
    for (cpu::MatmulTiling tiling :
         {cpu::MatmulTiling{96, 256}, cpu::MatmulTiling{1 << 20, 64},
          cpu::MatmulTiling{1, 7}}) {
      cpu::ThreadPool pool(4);
      std::vector<float> out(s.m * s.n);
      cpu::matmul(pool, x.data(), w.data(), s.bias ? b.data() : nullptr, s.m,
                  s.n, s.k, out.data(), tiling);
      if (tiling.rowBlock >= s.m)
        EXPECT_EQ(out, first) << "tiling " << tiling.rowBlock << "x"
                              << tiling.colBlock;
      else
        EXPECT_TRUE(relClose(out, expected.floats(), 1e-5))
            << "tiling " << tiling.rowBlock << "x" << tiling.colBlock;
    }
  }
}

TEST(CpuKernels, HeadMatmulBothLayouts) {
  std::mt19937 rng(4);
  for (int64_t tokens : {1, 20}) {
    const int64_t heads = 3, k = 70, n = 45;
    std::vector<float> x = randomFloats(rng, tokens * heads * k);
    std::vector<float> w = randomFloats(rng, heads * k * n);
    for (bool transpose : {false, true}) {
      Tensor wt =
          transpose ? floats({heads, n, k}, w) : floats({heads, k, n}, w);
      Tensor expected =
          ref::headMatmul(floats({tokens, heads, k}, x), wt, transpose);
      for (unsigned threads : kThreadCounts) {
        cpu::ThreadPool pool(threads);
        std::vector<float> out(tokens * heads * n);
        cpu::headMatmul(pool, x.data(), w.data(), transpose, tokens, heads, k,
                        n, out.data());
        EXPECT_TRUE(relClose(out, expected.floats(), 1e-5))
            << "tokens " << tokens << " transpose " << transpose;
      }
    }
  }
}

/// The reference evaluator's form of the CPU kernels' RoPE parameters.
ref::RopeParams refRope(const cpu::RopeParams &p) {
  ref::RopeParams rp;
  rp.style =
      p.interleaved ? ref::RopeStyle::Interleaved : ref::RopeStyle::HalfSplit;
  rp.offset = p.offset;
  rp.dim = p.dim;
  rp.theta = p.theta;
  if (p.yarn) {
    ref::YarnParams yarn;
    yarn.factor = p.factor;
    yarn.originalMaxPositions = p.originalMaxPositions;
    yarn.betaFast = p.betaFast;
    yarn.betaSlow = p.betaSlow;
    yarn.attentionFactor = p.attentionFactor;
    yarn.truncate = p.truncate;
    rp.yarn = yarn;
  }
  return rp;
}

TEST(CpuKernels, RopeStylesAndYarn) {
  std::mt19937 rng(5);
  const int64_t tokens = 5, rowsPerToken = 3, rowDim = 80;
  std::vector<int32_t> positions = {0, 1, 17, 4095, 70000};
  for (int variant = 0; variant < 4; ++variant) {
    cpu::RopeParams p;
    p.interleaved = variant % 2 == 0;
    p.offset = variant < 2 ? 16 : 0;
    p.dim = 64;
    p.yarn = variant >= 1;
    p.factor = 40;
    p.truncate = variant != 3;
    p.attentionFactor = variant == 3 ? 1.25 : 1.0;
    ref::RopeParams rp = refRope(p);
    std::vector<float> x = randomFloats(rng, tokens * rowsPerToken * rowDim);
    Tensor expected = ref::rope(floats({tokens, rowsPerToken, rowDim}, x),
                                ints({tokens}, positions), rp);
    for (unsigned threads : kThreadCounts) {
      cpu::ThreadPool pool(threads);
      std::vector<float> out = x;
      cpu::rope(pool, out.data(), positions.data(), tokens, rowsPerToken,
                rowDim, p);
      // Same double-precision angles: agreement to ~1 ulp.
      EXPECT_TRUE(relClose(out, expected.floats(), 1e-6)) << variant;
    }
  }
}

// Tests the kernels that take column views (Kernels.def's VIEW slots): each
// reads columns of wider rows and writes columns of other wider rows, as
// the reference computes them on the columns alone, and writes nothing
// else.
TEST(CpuKernels, ColumnViews) {
  std::mt19937 rng(21);
  const float kSentinel = -1234.5f;
  const int64_t tokens = 5, heads = 3;
  std::vector<int32_t> positions = {0, 3, 17, 4095, 70000};
  for (unsigned threads : kThreadCounts) {
    cpu::ThreadPool pool(threads);
    // rms_norm: columns [8, 72) of rows of 80 into [4, 68) of rows of 96.
    {
      const int64_t dim = 64;
      std::vector<float> x = randomFloats(rng, tokens * 80, -3, 3);
      std::vector<float> w = randomFloats(rng, dim);
      std::vector<float> out(tokens * 96, kSentinel);
      cpu::rmsNorm(pool, x.data() + 8, cpu::WeightView::f32(w.data()), tokens,
                   dim, 1e-6, out.data() + 4, 80, 96);
      Tensor expected =
          ref::rmsNorm(floats({tokens, dim}, columnsOf(x, 80, 8, dim)),
                       floats({dim}, w), 1e-6);
      EXPECT_TRUE(
          relClose(columnsOf(out, 96, 4, dim), expected.floats(), 1e-6));
      EXPECT_TRUE(untouchedOutside(out, 96, 4, dim, kSentinel));
    }
    // layer_norm: columns [16, 48) of rows of 56 (the indexer's key part of
    // a stacked projection) into [8, 40) of rows of 40, with a bias.
    {
      const int64_t dim = 32;
      std::vector<float> x = randomFloats(rng, tokens * 56, -3, 3);
      std::vector<float> w = randomFloats(rng, dim),
                         bias = randomFloats(rng, dim);
      std::vector<float> out(tokens * 40, kSentinel);
      cpu::layerNorm(pool, x.data() + 16, cpu::WeightView::f32(w.data()),
                     cpu::WeightView::f32(bias.data()), tokens, dim, 1e-6,
                     out.data() + 8, 56, 40);
      Tensor expected =
          ref::layerNorm(floats({tokens, dim}, columnsOf(x, 56, 16, dim)),
                         floats({dim}, w), floats({dim}, bias), 1e-6);
      EXPECT_TRUE(
          relClose(columnsOf(out, 40, 8, dim), expected.floats(), 1e-6));
      EXPECT_TRUE(untouchedOutside(out, 40, 8, dim, kSentinel));
    }
    // rope out of place: rows of 16 at column 32 of rows of 48 (heads a
    // token) into column 64 of rows of 80; offset 4 and dim 8 within the
    // view, so the columns around the rotated ones are copied.
    for (bool interleaved : {true, false}) {
      cpu::RopeParams p;
      p.interleaved = interleaved;
      p.offset = 4;
      p.dim = 8;
      std::vector<float> x = randomFloats(rng, tokens * heads * 48);
      std::vector<float> out(tokens * heads * 80, kSentinel);
      cpu::rope(pool, x.data() + 32, runtime::RopeRows::dense(heads, 48),
                out.data() + 64, runtime::RopeRows::dense(heads, 80),
                positions.data(), tokens, heads, 16, p);
      Tensor expected =
          ref::rope(floats({tokens, heads, 16}, columnsOf(x, 48, 32, 16)),
                    ints({tokens}, positions), refRope(p));
      EXPECT_TRUE(relClose(columnsOf(out, 80, 64, 16), expected.floats(), 1e-6))
          << interleaved;
      EXPECT_TRUE(untouchedOutside(out, 80, 64, 16, kSentinel));
    }
    // rope over rows of heads (lm.rope's head_dim): a token's heads of 16
    // at column 24 of rows of 104 (a projection's part) into column 8 of
    // rows of 88, against the reference's [T, H, 16] rope.
    for (bool interleaved : {true, false}) {
      cpu::RopeParams p;
      p.interleaved = interleaved;
      p.offset = 2;
      p.dim = 12;
      const int64_t width = heads * 16;
      std::vector<float> x = randomFloats(rng, tokens * 104);
      std::vector<float> out(tokens * 88, kSentinel);
      cpu::rope(pool, x.data() + 24, runtime::RopeRows{104, 16}, out.data() + 8,
                runtime::RopeRows{88, 16}, positions.data(), tokens, heads, 16,
                p);
      Tensor expected =
          ref::rope(floats({tokens, heads, 16}, columnsOf(x, 104, 24, width)),
                    ints({tokens}, positions), refRope(p));
      EXPECT_TRUE(
          relClose(columnsOf(out, 88, 8, width), expected.floats(), 1e-6))
          << interleaved;
      EXPECT_TRUE(untouchedOutside(out, 88, 8, width, kSentinel));
    }
    // head_matmul: x columns [0, 32) of rows of 48 into out columns
    // [0, 20) of rows of 36, both weight layouts.
    for (bool transpose : {false, true}) {
      const int64_t k = 32, n = 20;
      std::vector<float> x = randomFloats(rng, tokens * heads * 48);
      std::vector<float> w = randomFloats(rng, heads * k * n);
      std::vector<float> out(tokens * heads * 36, kSentinel);
      cpu::headMatmul(pool, x.data(), cpu::WeightView::f32(w.data()), transpose,
                      tokens, heads, k, n, out.data(), 48, 36);
      Tensor wt =
          transpose ? floats({heads, n, k}, w) : floats({heads, k, n}, w);
      Tensor expected = ref::headMatmul(
          floats({tokens, heads, k}, columnsOf(x, 48, 0, k)), wt, transpose);
      EXPECT_TRUE(relClose(columnsOf(out, 36, 0, n), expected.floats(), 1e-5))
          << transpose;
      EXPECT_TRUE(untouchedOutside(out, 36, 0, n, kSentinel));
    }
  }
}

TEST(CpuKernels, SwigluAndAdd) {
  std::mt19937 rng(6);
  const int64_t n = 40000; // several chunks
  std::vector<float> g = randomFloats(rng, n, -10, 10);
  std::vector<float> u = randomFloats(rng, n, -10, 10);
  Tensor gt = floats({n}, g), ut = floats({n}, u);
  Tensor plain = ref::swiglu(gt, ut, 1.0, std::nullopt, 0.0);
  Tensor limited = ref::swiglu(gt, ut, 1.702, 7.0, 1.0);
  for (unsigned threads : kThreadCounts) {
    cpu::ThreadPool pool(threads);
    std::vector<float> out(n);
    cpu::swiglu(pool, g.data(), u.data(), n, 1.0, false, 0.0, 0.0, out.data());
    EXPECT_TRUE(relClose(out, plain.floats(), 1e-6));
    cpu::swiglu(pool, g.data(), u.data(), n, 1.702, true, 7.0, 1.0, out.data());
    EXPECT_TRUE(relClose(out, limited.floats(), 1e-6));
    cpu::add(pool, g.data(), u.data(), n, out.data());
    for (int64_t i = 0; i < n; ++i)
      ASSERT_EQ(out[i], g[i] + u[i]); // exact
  }
}

TEST(CpuKernels, MoeRouteSigmoid) {
  std::mt19937 rng(7);
  for (int64_t tokens : {1, 9}) {
    const int64_t experts = 32;
    std::vector<float> logits = randomFloats(rng, tokens * experts, -4, 4);
    // Quantise so that ties occur.
    for (int64_t i = 0; i < tokens * experts; i += 3)
      logits[i] = std::round(logits[i]);
    std::vector<float> bias = randomFloats(rng, experts, -0.1f, 0.1f);
    for (auto [groups, keep, topK, renorm] :
         {std::tuple<int64_t, int64_t, int64_t, bool>{4, 2, 6, true},
          {1, 1, 8, false},
          {8, 1, 6, true}}) { // only 4 eligible experts: -1 slots
      ref::RoutingParams rp;
      rp.topK = topK;
      rp.numGroups = groups;
      rp.topKGroups = keep;
      rp.renormalize = renorm;
      rp.scalingFactor = 2.5;
      ref::Routing expected = ref::moeRoute(floats({tokens, experts}, logits),
                                            floats({experts}, bias), rp);
      cpu::RouteParams p;
      p.topK = topK;
      p.numGroups = groups;
      p.topKGroups = keep;
      p.renormalize = renorm;
      p.scalingFactor = 2.5;
      for (unsigned threads : kThreadCounts) {
        cpu::ThreadPool pool(threads);
        std::vector<int32_t> indices(tokens * topK);
        std::vector<float> weights(tokens * topK);
        cpu::moeRouteSigmoid(pool, logits.data(), bias.data(), tokens, experts,
                             p, indices.data(), weights.data());
        EXPECT_EQ(indices, toInts(expected.indices)); // exact
        EXPECT_TRUE(relClose(weights, expected.weights.floats(), 1e-6));
      }
    }
  }
}

TEST(CpuKernels, ExpertMatmul) {
  std::mt19937 rng(8);
  const int64_t experts = 5, n = 37, k = 300;
  std::vector<float> w = randomFloats(rng, experts * n * k);
  for (int64_t tokens : {1, 30}) {
    const int64_t slots = 3;
    std::vector<int32_t> idx(tokens * slots);
    for (int32_t &e : idx)
      e = static_cast<int32_t>(rng() % (experts + 1)) - 1; // -1 included
    std::vector<float> rw = randomFloats(rng, tokens * slots, 0, 1);
    for (bool perSlot : {false, true}) {
      std::vector<float> x =
          randomFloats(rng, tokens * (perSlot ? slots : 1) * k);
      Tensor xt =
          perSlot ? floats({tokens, slots, k}, x) : floats({tokens, k}, x);
      for (bool weighted : {false, true}) {
        Tensor expected = llvm::cantFail(ref::expertMatmul(
            xt, floats({experts, n, k}, w), ints({tokens, slots}, idx),
            weighted ? floats({tokens, slots}, rw) : Tensor(), Tensor()));
        for (unsigned threads : kThreadCounts) {
          cpu::ThreadPool pool(threads);
          std::vector<float> out(tokens * (weighted ? 1 : slots) * n, 7.0f);
          ASSERT_TRUE(cpu::expertMatmul(pool, x.data(), perSlot, w.data(),
                                        experts, n, k, idx.data(), tokens,
                                        slots, weighted ? rw.data() : nullptr,
                                        out.data())
                          .ok());
          EXPECT_TRUE(relClose(out, expected.floats(), 1e-5))
              << tokens << " " << perSlot << " " << weighted;
        }
      }
    }
  }
  cpu::ThreadPool pool(4);
  std::vector<int32_t> bad = {0, 5};
  std::vector<float> x(2 * k), out(2 * n);
  Status status = cpu::expertMatmul(pool, x.data(), false, w.data(), experts, n,
                                    k, bad.data(), 1, 2, nullptr, out.data());
  ASSERT_FALSE(status.ok());
  EXPECT_NE(status.message().find("expert id 5"), std::string::npos)
      << status.message();
}

/// An MXFP4 expert matmul's bias: none, or stored in f32 or bf16.
enum class MxfpBias { None, F32, BF16 };

/// The reference's tensors of MXFP4 test experts: F4E2M1FN values and
/// F8E8M0FNU scales, unpacked.
std::pair<Tensor, Tensor> referenceMxfp4(const testutil::Mxfp4TestExperts &w) {
  return {Tensor::fromFloats({w.experts, w.n, w.k}, w.codeValues(),
                             ElementType::F4E2M1FN),
          Tensor::fromFloats({w.experts, w.n, w.k / 32}, w.scaleValues(),
                             ElementType::F8E8M0FNU)};
}

/// The CPU kernel and the reference evaluator's kernel on the same MXFP4
/// experts, both within the fp32 rounding bound of the exact result
/// (Mxfp4TestData.h), and the CPU result the same for 1 and 4 threads.
void checkMxfp4(std::mt19937 &rng, const testutil::Mxfp4TestExperts &w,
                int64_t tokens, int64_t slots, float inputScale) {
  int64_t experts = w.experts, n = w.n, k = w.k;
  auto [values, scales] = referenceMxfp4(w);
  std::vector<int32_t> idx(tokens * slots);
  for (int32_t &e : idx)
    e = static_cast<int32_t>(rng() % (experts + 1)) - 1; // -1 included
  if (tokens > 1)
    std::fill(idx.begin(), idx.begin() + slots, -1); // a token with none
  std::vector<float> rw = randomFloats(rng, tokens * slots, -1, 1);
  for (bool perSlot : {false, true}) {
    std::vector<float> x =
        randomFloats(rng, tokens * (perSlot ? slots : 1) * k);
    for (float &v : x)
      v *= inputScale;
    Tensor xt =
        perSlot ? floats({tokens, slots, k}, x) : floats({tokens, k}, x);
    for (bool weighted : {false, true})
      for (MxfpBias biasType :
           {MxfpBias::None, MxfpBias::F32, MxfpBias::BF16}) {
        bool biased = biasType != MxfpBias::None;
        std::vector<float> bias;
        std::vector<uint16_t> bias16;
        if (biased)
          bias = randomFloats(rng, experts * n, -2, 2);
        if (biasType == MxfpBias::BF16)
          for (float &b : bias) {
            bias16.push_back(numerics::floatToBf16(b));
            b = numerics::bf16ToFloat(bias16.back());
          }
        std::vector<float> routing = weighted ? rw : std::vector<float>();
        testutil::Mxfp4Expected expected = testutil::mxfp4Expected(
            w, x, perSlot, bias, idx, tokens, slots, routing);
        std::string what =
            "T=" + std::to_string(tokens) + " E=" + std::to_string(experts) +
            " N=" + std::to_string(n) + " K=" + std::to_string(k) +
            " perSlot=" + std::to_string(perSlot) +
            " weighted=" + std::to_string(weighted) +
            " bias=" + std::to_string(int(biasType));

        Tensor reference = llvm::cantFail(ref::mxfp4ExpertMatmul(
            xt, values, scales, ints({tokens, slots}, idx),
            weighted ? floats({tokens, slots}, rw) : Tensor(),
            biased ? Tensor::fromFloats({experts, n}, bias) : Tensor()));
        int64_t bad = testutil::firstOutOfBound(reference.floats(), expected);
        EXPECT_EQ(bad, -1) << "reference, " << what << ": "
                           << reference.floats()[std::max<int64_t>(bad, 0)];

        cpu::Mxfp4Weights packed;
        packed.values = w.values.data();
        packed.scales = w.scales.data();
        cpu::WeightView biasView;
        if (biasType == MxfpBias::F32) {
          biasView = cpu::WeightView::f32(bias.data());
        } else if (biasType == MxfpBias::BF16) {
          biasView.data = bias16.data();
          biasView.type = cpu::WeightType::BF16;
        }
        std::vector<float> first;
        for (unsigned threads : kThreadCounts) {
          cpu::ThreadPool pool(threads);
          std::vector<float> out(tokens * (weighted ? 1 : slots) * n, 7.0f);
          Status status = cpu::mxfp4ExpertMatmul(
              pool, x.data(), perSlot, packed, biasView, experts, n, k,
              idx.data(), tokens, slots, weighted ? rw.data() : nullptr,
              out.data());
          ASSERT_TRUE(status.ok()) << status.message();
          bad = testutil::firstOutOfBound(out, expected);
          EXPECT_EQ(bad, -1)
              << "cpu, " << what << ", " << threads << " threads: element "
              << bad << " is " << out[std::max<int64_t>(bad, 0)] << ", exact "
              << expected.exact[std::max<int64_t>(bad, 0)] << " +- "
              << expected.bound[std::max<int64_t>(bad, 0)];
          if (first.empty())
            first = out;
          else // the work split never depends on the thread count
            EXPECT_EQ(0, std::memcmp(first.data(), out.data(),
                                     out.size() * sizeof(float)))
                << what;
        }
      }
  }
}

TEST(CpuKernels, Mxfp4ExpertMatmul) {
  std::mt19937 rng(17);
  // K of one block, of blocks that do not fill 32 lanes, and of many; N off
  // the 8-column tiles; one token and a batch with -1 slots.
  struct Shape {
    int64_t experts, n, k;
  };
  for (Shape shape : {Shape{3, 5, 32}, Shape{5, 37, 96}, Shape{4, 70, 1088}})
    for (int64_t tokens : {1, 30}) {
      testutil::Mxfp4TestExperts w =
          testutil::randomMxfp4Experts(rng, shape.experts, shape.n, shape.k);
      checkMxfp4(rng, w, tokens, /*slots=*/3, /*inputScale=*/1.0f);
    }
}

TEST(CpuKernels, Mxfp4ExpertMatmulExtremeScales) {
  // The ends of E8M0: 2^-127 (a subnormal fp32), 2^127, NaN (255), with
  // small inputs so that no block's sum overflows. A NaN scale makes its
  // slot's outputs NaN, and a weighted sum over it NaN, as in the reference.
  std::mt19937 rng(18);
  testutil::Mxfp4TestExperts w = testutil::randomMxfp4Experts(
      rng, 4, 24, 128, {0, 1, 2, 120, 127, 200, 253, 254});
  w.scales[5] = 0xFF;
  w.scales[w.scales.size() / 2] = 0xFF;
  checkMxfp4(rng, w, 7, 2, std::ldexp(1.0f, -24));
}

TEST(CpuKernels, Mxfp4ExpertMatmulErrors) {
  std::mt19937 rng(19);
  testutil::Mxfp4TestExperts w = testutil::randomMxfp4Experts(rng, 2, 4, 64);
  cpu::Mxfp4Weights packed;
  packed.values = w.values.data();
  packed.scales = w.scales.data();
  cpu::ThreadPool pool(2);
  std::vector<float> x(64), out(2 * 4);
  std::vector<int32_t> bad = {0, 2};
  Status status =
      cpu::mxfp4ExpertMatmul(pool, x.data(), false, packed, cpu::WeightView(),
                             2, 4, 64, bad.data(), 1, 2, nullptr, out.data());
  ASSERT_FALSE(status.ok());
  EXPECT_NE(status.message().find("mxfp4ExpertMatmul: expert id 2 at token 0, "
                                  "slot 1 is outside [-1, 2)"),
            std::string::npos)
      << status.message();
}

TEST(CpuCache, RoundTripsAllFormatsThroughAPagedView) {
  std::mt19937 rng(9);
  const int64_t width = 160, tail = 32, block = 64, batch = 2, maxSeq = 10;
  EXPECT_EQ(cpu::cacheBytesPerRow(cpu::CacheFormat::Fp8Scaled, 576, 64, 128),
            656); // DeepSeek's latent row
  for (cpu::CacheFormat format : {cpu::CacheFormat::F32, cpu::CacheFormat::BF16,
                                  cpu::CacheFormat::Fp8Scaled}) {
    PagedCache cache(format, width, tail, block, batch, maxSeq, 4);
    std::vector<float> rows = randomFloats(rng, batch * maxSeq * width, -5, 5);
    // Spread magnitudes so tiles get different scales, one tile all tiny.
    for (int64_t i = 0; i < width; ++i)
      rows[i] *= i < block ? 1e-6f : std::ldexp(1.0f, int(i % 7) - 3);
    for (int64_t s = 0; s < batch; ++s)
      for (int64_t p = 0; p < maxSeq; ++p)
        cache.view.write(s, p, rows.data() + (s * maxSeq + p) * width);
    for (int64_t s = 0; s < batch; ++s)
      for (int64_t p = 0; p < maxSeq; ++p) {
        const float *in = rows.data() + (s * maxSeq + p) * width;
        std::vector<float> expected(in, in + width), got(width);
        if (format == cpu::CacheFormat::BF16)
          for (float &v : expected)
            v = numerics::roundToBf16(v);
        if (format == cpu::CacheFormat::Fp8Scaled)
          expected = fp8RoundTrip(in, width, tail, block);
        cache.view.read(s, p, got.data());
        ASSERT_EQ(got, expected) << "format " << int(format) << " seq " << s
                                 << " pos " << p; // bit-exact codecs
      }
  }
}

TEST(CpuCache, CacheWriteMatchesReference) {
  std::mt19937 rng(10);
  const int64_t width = 24, batch = 2, maxSeq = 9, tokens = 7;
  std::vector<float> values = randomFloats(rng, tokens * width);
  std::vector<int32_t> slots = {0, 3, -1, 8, 3, 5, 3};
  std::vector<int32_t> seqs = {0, 1, 1, 0, 1, 0, 1}; // (1, 3) written twice
  for (auto [format, type] :
       {std::pair{cpu::CacheFormat::F32, ElementType::F32},
        std::pair{cpu::CacheFormat::BF16, ElementType::BF16}}) {
    Tensor initial = floats({batch, maxSeq, width},
                            randomFloats(rng, batch * maxSeq * width))
                         .castTo(type);
    Tensor expected = llvm::cantFail(
        ref::cacheWrite(initial, floats({tokens, width}, values),
                        ints({tokens}, slots), ints({tokens}, seqs)));
    for (unsigned threads : kThreadCounts) {
      cpu::ThreadPool pool(threads);
      PagedCache cache(format, width, 0, 0, batch, maxSeq, 4);
      for (int64_t s = 0; s < batch; ++s)
        for (int64_t p = 0; p < maxSeq; ++p)
          cache.view.write(s, p,
                           initial.floats().data() + (s * maxSeq + p) * width);
      ASSERT_TRUE(cpu::cacheWrite(pool, cache.view, values.data(), slots.data(),
                                  seqs.data(), tokens)
                      .ok());
      std::vector<float> got(batch * maxSeq * width);
      for (int64_t s = 0; s < batch; ++s)
        for (int64_t p = 0; p < maxSeq; ++p)
          cache.view.read(s, p, got.data() + (s * maxSeq + p) * width);
      EXPECT_EQ(got, expected.floats()); // exact

      std::vector<int32_t> badSlot = {9}, goodSeq = {0}, badSeq = {2},
                           goodSlot = {0};
      Status status = cpu::cacheWrite(pool, cache.view, values.data(),
                                      badSlot.data(), goodSeq.data(), 1);
      ASSERT_FALSE(status.ok());
      EXPECT_NE(status.message().find("slot 9"), std::string::npos)
          << status.message();
      status = cpu::cacheWrite(pool, cache.view, values.data(), goodSlot.data(),
                               badSeq.data(), 1);
      ASSERT_FALSE(status.ok());
      EXPECT_NE(status.message().find("sequence 2"), std::string::npos)
          << status.message();
    }
  }
}

TEST(CpuCache, CacheWritePrologueEqualsItsOps) {
  // A cache write that normalises and rotates its rows stores what the
  // norm, rope and plain write it replaces store, bit for bit: DeepSeek's
  // latent row (RMS over a prefix, interleaved YaRN RoPE after it), its
  // indexer key (layer norm with bias over the row, half-split RoPE at its
  // start), a norm alone (Kimi Linear's latent row), RoPE alone and RoPE of
  // each head (gpt-oss's GQA keys, a norm before it or not); in
  // every cache format, with skipped and repeated slots, from dense rows
  // and from a column view of wider ones.
  std::mt19937 rng(23);
  struct Case {
    int64_t width, normDim; // normDim 0: no norm
    bool layer, bias;
    int64_t ropeOffset, ropeDim; // ropeDim 0: no rope
    bool interleaved, yarn;
    int64_t tail, block; // the fp8 layout
    int64_t headDim = 0; // RoPE of each head of this many columns
  };
  const Case cases[] = {{80, 64, false, false, 64, 16, true, true, 16, 32},
                        {32, 32, true, true, 0, 16, false, false, 0, 32},
                        {24, 16, false, false, 0, 0, false, false, 8, 16},
                        {40, 0, false, false, 4, 8, false, true, 8, 32},
                        {36, 20, true, false, 24, 12, true, false, 4, 16},
                        {64, 0, false, false, 0, 16, false, true, 0, 32, 16},
                        {48, 48, false, false, 2, 8, true, false, 16, 32, 12}};
  const int64_t batch = 2, maxSeq = 9, tokens = 7;
  std::vector<int32_t> slots = {0, 3, -1, 8, 3, 5, 3};
  std::vector<int32_t> seqs = {0, 1, 1, 0, 1, 0, 1}; // (1, 3) written twice
  std::vector<int32_t> positions = {0, 3, 17, 4095, 3, 70000, 2};
  for (const Case &c : cases)
    for (cpu::CacheFormat format :
         {cpu::CacheFormat::F32, cpu::CacheFormat::BF16,
          cpu::CacheFormat::Fp8Scaled}) {
      SCOPED_TRACE("width " + std::to_string(c.width) + " format " +
                   std::to_string(int(format)));
      std::vector<float> values = randomFloats(rng, tokens * c.width, -3, 3);
      std::vector<float> weight = randomFloats(rng, c.width, 0.5, 1.5);
      std::vector<uint16_t> bias(c.width);
      std::vector<float> biasValues = randomFloats(rng, c.width, -1, 1);
      for (int64_t i = 0; i < c.width; ++i)
        bias[i] = numerics::floatToBf16(biasValues[i]);
      cpu::WeightView weightView = cpu::WeightView::f32(weight.data());
      cpu::WeightView biasView;
      if (c.bias) {
        biasView.data = bias.data();
        biasView.type = cpu::WeightType::BF16;
      }
      cpu::CacheWritePrologueArgs prologue;
      runtime::CacheWritePrologue &p = prologue.params;
      if (c.normDim) {
        p.norm = c.layer ? runtime::CacheWritePrologue::Norm::Layer
                         : runtime::CacheWritePrologue::Norm::Rms;
        p.normDim = c.normDim;
        p.eps = 1e-6;
        prologue.weight = weightView;
        prologue.bias = biasView;
      }
      if (c.ropeDim) {
        p.rope = true;
        p.ropeParams.interleaved = c.interleaved;
        p.ropeParams.offset = c.ropeOffset;
        p.ropeParams.dim = c.ropeDim;
        p.ropeParams.yarn = c.yarn;
        p.ropeParams.factor = 40;
        p.ropeParams.originalMaxPositions = 4096;
        p.ropeParams.attentionFactor = c.yarn ? 1.25 : 1.0;
        prologue.positions = positions.data();
        p.ropeHeadDim = c.headDim;
      }
      int64_t tail = format == cpu::CacheFormat::Fp8Scaled ? c.tail : 0;
      int64_t block = format == cpu::CacheFormat::Fp8Scaled ? c.block : 0;
      for (unsigned threads : kThreadCounts) {
        cpu::ThreadPool pool(threads);
        // The ops the prologue replaces: norm, rope, then the plain write.
        std::vector<float> rows = values;
        if (c.normDim && c.layer)
          cpu::layerNorm(pool, rows.data(), weightView, biasView, tokens,
                         c.normDim, p.eps, rows.data(), c.width, c.width);
        else if (c.normDim)
          cpu::rmsNorm(pool, rows.data(), weightView, tokens, c.normDim, p.eps,
                       rows.data(), c.width, c.width);
        int64_t head = c.headDim ? c.headDim : c.width;
        if (c.ropeDim)
          cpu::rope(pool, rows.data(), positions.data(), tokens, c.width / head,
                    head, p.ropeParams);
        PagedCache expected(format, c.width, tail, block, batch, maxSeq, 4);
        PagedCache fused(format, c.width, tail, block, batch, maxSeq, 4);
        ASSERT_TRUE(cpu::cacheWrite(pool, expected.view, rows.data(),
                                    slots.data(), seqs.data(), tokens)
                        .ok());
        ASSERT_TRUE(cpu::cacheWrite(pool, fused.view, values.data(),
                                    slots.data(), seqs.data(), tokens,
                                    &prologue)
                        .ok());
        EXPECT_EQ(fused.storage, expected.storage) << threads << " threads";
        // The same rows as a column view of a wider buffer.
        const int64_t stride = c.width + 7;
        std::vector<float> wide(tokens * stride, 1e30f);
        for (int64_t t = 0; t < tokens; ++t)
          std::copy_n(values.data() + t * c.width, c.width,
                      wide.data() + t * stride + 3);
        PagedCache viewed(format, c.width, tail, block, batch, maxSeq, 4);
        ASSERT_TRUE(cpu::cacheWrite(pool, viewed.view, wide.data() + 3,
                                    slots.data(), seqs.data(), tokens,
                                    &prologue, stride)
                        .ok());
        EXPECT_EQ(viewed.storage, expected.storage) << threads << " threads";
        // And the rows are normalised and rotated (not stored as given).
        std::vector<float> stored(c.width);
        fused.view.read(0, 0, stored.data());
        EXPECT_NE(std::vector<float>(values.begin(), values.begin() + c.width),
                  stored);
      }
    }
}

/// Fills a paged cache with random rows and returns the decoded contents as
/// a [batch, maxSeq, width] tensor (what the reference reads).
Tensor fillCache(std::mt19937 &rng, PagedCache &cache) {
  const cpu::CacheView &v = cache.view;
  std::vector<float> rows = randomFloats(rng, v.batch * v.maxSeqLen * v.width);
  std::vector<float> decoded(rows.size());
  for (int64_t s = 0; s < v.batch; ++s)
    for (int64_t p = 0; p < v.maxSeqLen; ++p) {
      int64_t at = (s * v.maxSeqLen + p) * v.width;
      v.write(s, p, rows.data() + at);
      v.read(s, p, decoded.data() + at);
    }
  return floats({v.batch, v.maxSeqLen, v.width}, decoded);
}

TEST(CpuAttention, DsaIndexerScores) {
  std::mt19937 rng(11);
  for (auto [tokens, heads, dim, format] :
       {std::tuple<int64_t, int64_t, int64_t, cpu::CacheFormat>{
            1, 4, 32, cpu::CacheFormat::F32},
        {10, 16, 64, cpu::CacheFormat::Fp8Scaled},
        {12, 3, 40, cpu::CacheFormat::BF16}}) {
    const int64_t batch = 2, maxSeq = 300;
    PagedCache cache(format, dim, 0, dim / 2, batch, maxSeq, 64);
    Tensor keys = fillCache(rng, cache);
    std::vector<float> q = randomFloats(rng, tokens * heads * dim);
    std::vector<float> w = randomFloats(rng, tokens * heads);
    std::vector<int32_t> seqs(tokens);
    for (int64_t t = 0; t < tokens; ++t)
      seqs[t] = t < tokens / 2 ? 1 : 0;
    // Causal bounds: 0, inside the first key block, at and past a block's
    // end, past the cache (clamped); runs of one sequence with different
    // bounds share a block's decoded keys.
    std::vector<int32_t> bounds(tokens);
    for (int64_t t = 0; t < tokens; ++t)
      bounds[t] = int32_t(
          std::vector<int64_t>{0, 5, 64, 65, 257, 299, 300, 1000}[t % 8]);
    for (bool bounded : {false, true}) {
      Tensor expected = llvm::cantFail(ref::dsaIndexerScores(
          floats({tokens, heads, dim}, q), keys, floats({tokens, heads}, w),
          ints({tokens}, seqs), 0.125,
          bounded ? ints({tokens}, bounds) : Tensor()));
      if (bounded) {
        for (int64_t t = 0; t < tokens; ++t) {
          for (int64_t s = std::min<int64_t>(bounds[t], maxSeq); s < maxSeq;
               ++s) {
            ASSERT_EQ(expected.floats()[t * maxSeq + s], 0.0f);
          }
        }
      }
      for (unsigned threads : kThreadCounts) {
        cpu::ThreadPool pool(threads);
        std::vector<float> scores(tokens * maxSeq, 7.0f);
        ASSERT_TRUE(cpu::dsaIndexerScores(pool, q.data(), w.data(), cache.view,
                                          seqs.data(),
                                          bounded ? bounds.data() : nullptr,
                                          tokens, heads, 0.125, scores.data())
                        .ok());
        EXPECT_TRUE(relClose(scores, expected.floats(), 1e-5))
            << tokens << (bounded ? " bounded" : "");
      }
    }
  }
  cpu::ThreadPool pool(4);
  PagedCache cache(cpu::CacheFormat::F32, 8, 0, 0, 2, 4, 2);
  std::vector<float> q(8), w(1), scores(4);
  std::vector<int32_t> bad = {-1};
  Status status =
      cpu::dsaIndexerScores(pool, q.data(), w.data(), cache.view, bad.data(),
                            nullptr, 1, 1, 1.0, scores.data());
  ASSERT_FALSE(status.ok());
  EXPECT_NE(status.message().find("sequence -1"), std::string::npos)
      << status.message();
}

/// dsaIndexerScores' query prologue (lm.dsa_indexer_scores' rope): the
/// reference evaluator's scores of its rope's output within 1e-5, and bit
/// for bit the CPU rope kernel's rows scored by the plain kernel (what the
/// two launches it replaces compute); both styles, an offset slice, YaRN
/// and positions past its original context.
TEST(CpuAttention, DsaIndexerScoresQueryRope) {
  std::mt19937 rng(37);
  const int64_t tokens = 6, heads = 5, dim = 48, batch = 2, maxSeq = 130;
  std::vector<int32_t> positions = {0, 1, 17, 129, 4095, 70000};
  std::vector<int32_t> seqs = {0, 1, 1, 0, 1, 0};
  std::vector<int32_t> bounds = {1, 2, 18, 130, 130, 100};
  for (int variant = 0; variant < 3; ++variant) {
    cpu::QueryRope rope;
    cpu::RopeParams &p = rope.params;
    p.interleaved = variant == 1;
    p.offset = variant == 0 ? 0 : 16;
    p.dim = variant == 2 ? 32 : 16;
    p.yarn = variant != 1;
    p.factor = 40;
    p.originalMaxPositions = 64;
    p.attentionFactor = variant == 2 ? 1.25 : 1.0;
    rope.positions = positions.data();
    ref::RopeParams rp = refRope(p);
    PagedCache cache(cpu::CacheFormat::Fp8Scaled, dim, 0, dim / 2, batch,
                     maxSeq, 64);
    Tensor keys = fillCache(rng, cache);
    std::vector<float> q = randomFloats(rng, tokens * heads * dim);
    std::vector<float> w = randomFloats(rng, tokens * heads);
    Tensor rotated = ref::rope(floats({tokens, heads, dim}, q),
                               ints({tokens}, positions), rp);
    Tensor expected = llvm::cantFail(ref::dsaIndexerScores(
        rotated, keys, floats({tokens, heads}, w), ints({tokens}, seqs), 0.125,
        ints({tokens}, bounds)));
    for (unsigned threads : kThreadCounts) {
      cpu::ThreadPool pool(threads);
      std::vector<float> scores(tokens * maxSeq, 7.0f);
      ASSERT_TRUE(cpu::dsaIndexerScores(pool, q.data(), w.data(), cache.view,
                                        seqs.data(), bounds.data(), tokens,
                                        heads, 0.125, scores.data(), {}, &rope)
                      .ok());
      EXPECT_TRUE(relClose(scores, expected.floats(), 1e-5)) << variant;
      std::vector<float> staged = q, unfused(tokens * maxSeq, 7.0f);
      cpu::rope(pool, staged.data(), positions.data(), tokens, heads, dim, p);
      ASSERT_TRUE(cpu::dsaIndexerScores(pool, staged.data(), w.data(),
                                        cache.view, seqs.data(), bounds.data(),
                                        tokens, heads, 0.125, unfused.data())
                      .ok());
      EXPECT_EQ(scores, unfused) << variant;
    }
  }
}

/// dsaIndexerScores' roundQ (the CUDA tensor-core indexer's rounding):
/// where runtime::indexerTensorCoresApply holds (bf16 rows, FP8 rows with
/// one scale a row, widths 16..128 a multiple of 16, up to 128 heads) the
/// scores are the reference evaluator's on q rounded to bf16; elsewhere
/// (f32 rows, two scales a row, a width of 40, 129 heads) q stays exact.
TEST(CpuAttention, DsaIndexerScoresBf16Q) {
  std::mt19937 rng(29);
  struct Case {
    int64_t heads, dim, scaleBlock;
    cpu::CacheFormat format;
    bool rounds;
  };
  for (Case c : {Case{4, 32, 32, cpu::CacheFormat::Fp8Scaled, true},
                 Case{16, 128, 0, cpu::CacheFormat::BF16, true},
                 Case{3, 16, 0, cpu::CacheFormat::BF16, true},
                 Case{4, 32, 0, cpu::CacheFormat::F32, false},
                 Case{4, 64, 32, cpu::CacheFormat::Fp8Scaled, false},
                 Case{4, 40, 0, cpu::CacheFormat::BF16, false},
                 Case{129, 16, 0, cpu::CacheFormat::BF16, false}}) {
    const int64_t tokens = 5, batch = 2, maxSeq = 70;
    PagedCache cache(c.format, c.dim, 0, c.scaleBlock, batch, maxSeq, 16);
    Tensor keys = fillCache(rng, cache);
    std::vector<float> q = randomFloats(rng, tokens * c.heads * c.dim);
    std::vector<float> w = randomFloats(rng, tokens * c.heads);
    std::vector<int32_t> seqs = {0, 1, 1, 0, 1};
    ASSERT_EQ(runtime::indexerTensorCoresApply(c.format, c.dim, 0, c.scaleBlock,
                                               c.heads),
              c.rounds);
    std::vector<float> rounded = q;
    if (c.rounds)
      for (float &v : rounded)
        v = numerics::roundToBf16(v);
    Tensor expected = llvm::cantFail(ref::dsaIndexerScores(
        floats({tokens, c.heads, c.dim}, rounded), keys,
        floats({tokens, c.heads}, w), ints({tokens}, seqs), 0.125, Tensor()));
    cpu::ThreadPool pool(3);
    std::vector<float> scores(tokens * maxSeq, 7.0f);
    ASSERT_TRUE(cpu::dsaIndexerScores(pool, q.data(), w.data(), cache.view,
                                      seqs.data(), nullptr, tokens, c.heads,
                                      0.125, scores.data(),
                                      numerics::OperandRounding::nearestEven())
                    .ok());
    EXPECT_TRUE(relClose(scores, expected.floats(), 1e-5))
        << c.heads << " heads of " << c.dim;
    if (c.rounds) {
      // And not the exact scores: q was rounded.
      Tensor exact = llvm::cantFail(ref::dsaIndexerScores(
          floats({tokens, c.heads, c.dim}, q), keys,
          floats({tokens, c.heads}, w), ints({tokens}, seqs), 0.125, Tensor()));
      EXPECT_FALSE(relClose(scores, exact.floats(), 1e-5))
          << c.heads << " heads of " << c.dim;
    }
  }
}

TEST(CpuAttention, DsaIndexSelect) {
  std::mt19937 rng(12);
  const int64_t tokens = 7, keys = 500, topK = 64;
  std::vector<float> scores = randomFloats(rng, tokens * keys);
  for (float &s : scores)
    s = std::round(s * 8) / 8; // ties
  std::vector<int32_t> bounds = {0, 1, 63, 64, 65, 500, 900};
  Tensor expected = ref::dsaIndexSelect(floats({tokens, keys}, scores),
                                        ints({tokens}, bounds), topK);
  for (unsigned threads : kThreadCounts) {
    cpu::ThreadPool pool(threads);
    std::vector<int32_t> indices(tokens * topK);
    cpu::dsaIndexSelect(pool, scores.data(), bounds.data(), tokens, keys, topK,
                        indices.data());
    EXPECT_EQ(indices, toInts(expected)); // exact
  }
}

TEST(CpuAttention, SparseAttention) {
  std::mt19937 rng(13);
  for (auto [tokens, heads, format, withSinks] :
       {std::tuple<int64_t, int64_t, cpu::CacheFormat, bool>{
            1, 20, cpu::CacheFormat::Fp8Scaled, false},
        {6, 4, cpu::CacheFormat::F32, true},
        {20, 3, cpu::CacheFormat::BF16, false}}) {
    const int64_t width = 96, tail = 32, valueDim = 64, batch = 2, maxSeq = 50,
                  topK = 12;
    PagedCache cache(format, width, tail, 32, batch, maxSeq, 8);
    Tensor kv = fillCache(rng, cache);
    std::vector<float> q = randomFloats(rng, tokens * heads * width);
    std::vector<float> sinks = randomFloats(rng, heads);
    std::vector<int32_t> idx(tokens * topK), seqs(tokens);
    for (int64_t t = 0; t < tokens; ++t) {
      seqs[t] = static_cast<int32_t>(t % batch);
      for (int64_t i = 0; i < topK; ++i)
        idx[t * topK + i] = (t == tokens - 1 && tokens > 1) || rng() % 4 == 0
                                ? -1 // the last token's set is empty
                                : static_cast<int32_t>(rng() % maxSeq);
    }
    double scale = 0.135;
    Tensor expected = llvm::cantFail(ref::sparseAttention(
        floats({tokens, heads, width}, q), kv, ints({tokens, topK}, idx), scale,
        valueDim, withSinks ? floats({heads}, sinks) : Tensor(),
        ints({tokens}, seqs)));
    for (unsigned threads : kThreadCounts) {
      cpu::ThreadPool pool(threads);
      std::vector<float> out(tokens * heads * valueDim, 3.0f);
      ASSERT_TRUE(
          cpu::sparseAttention(pool, q.data(), cache.view, idx.data(), topK,
                               seqs.data(), tokens, heads, scale, valueDim,
                               withSinks ? sinks.data() : nullptr, out.data())
              .ok());
      EXPECT_TRUE(relClose(out, expected.floats(), 1e-5)) << tokens;
    }
  }
  cpu::ThreadPool pool(4);
  PagedCache cache(cpu::CacheFormat::F32, 8, 0, 0, 1, 4, 2);
  std::vector<float> q(8), out(8);
  std::vector<int32_t> badIndex = {4}, seq = {0}, goodIndex = {1}, badSeq = {1};
  Status status =
      cpu::sparseAttention(pool, q.data(), cache.view, badIndex.data(), 1,
                           seq.data(), 1, 1, 1.0, 8, nullptr, out.data());
  ASSERT_FALSE(status.ok());
  EXPECT_NE(status.message().find("index 4"), std::string::npos)
      << status.message();
  status =
      cpu::sparseAttention(pool, q.data(), cache.view, goodIndex.data(), 1,
                           badSeq.data(), 1, 1, 1.0, 8, nullptr, out.data());
  ASSERT_FALSE(status.ok());
  EXPECT_NE(status.message().find("sequence 1"), std::string::npos)
      << status.message();
}

/// sparseAttention's rounding (the CUDA tensor-core kernel's roundings):
/// on values whose products and sums are exact in fp32 (small dyadic cache
/// values, Q already bf16, a power-of-two scale), the probabilities are
/// exp(logit - max) rounded to bf16 and the denominator sums the rounded
/// ones; and Q is rounded first: Q moved by less than half a bf16 step gives
/// the same outputs, bit for bit.
TEST(CpuAttention, SparseAttentionBf16Operands) {
  std::mt19937 rng(17);
  const int64_t width = 48, valueDim = 32, tokens = 3, heads = 5, topK = 12,
                maxSeq = 40;
  const double scale = 0.125;
  PagedCache cache(cpu::CacheFormat::F32, width, 0, 0, 2, maxSeq, 8);
  std::vector<float> row(width);
  for (int64_t s = 0; s < 2; ++s)
    for (int64_t p = 0; p < maxSeq; ++p) {
      for (float &x : row)
        x = float(int(rng() % 17) - 8) / 8.0f;
      cache.view.write(s, p, row.data());
    }
  std::vector<float> q(tokens * heads * width), nudged(q.size());
  for (size_t i = 0; i < q.size(); ++i) {
    q[i] = float(int(rng() % 33) - 16) / 16.0f;
    nudged[i] = q[i] * (1.0f + 0x1p-12f); // rounds back to q
  }
  std::vector<int32_t> idx(tokens * topK), seqs = {0, 1, 1};
  for (int32_t &i : idx)
    i = rng() % 5 == 0 ? -1 : int32_t(rng() % maxSeq);
  // The roundings' oracle, in double.
  std::vector<double> expected(tokens * heads * valueDim),
      exact(expected.size());
  std::vector<float> kv(width);
  for (int64_t t = 0; t < tokens; ++t)
    for (int64_t h = 0; h < heads; ++h) {
      std::vector<double> logits;
      std::vector<std::vector<float>> rows;
      for (int64_t i = 0; i < topK; ++i) {
        int32_t pos = idx[t * topK + i];
        if (pos < 0)
          continue;
        cache.view.read(seqs[t], pos, kv.data());
        double dot = 0.0;
        for (int64_t d = 0; d < width; ++d)
          dot += double(q[(t * heads + h) * width + d]) * kv[d];
        logits.push_back(scale * dot);
        rows.push_back(kv);
      }
      double top = -INFINITY;
      for (double l : logits)
        top = std::max(top, l);
      double sum = 0.0, exactSum = 0.0;
      std::vector<double> p(logits.size()), e(logits.size());
      for (size_t j = 0; j < logits.size(); ++j) {
        e[j] = std::exp(logits[j] - top);
        p[j] = numerics::bf16ToFloat(numerics::floatToBf16(float(e[j])));
        sum += p[j];
        exactSum += e[j];
      }
      for (int64_t d = 0; d < valueDim; ++d) {
        double a = 0.0, b = 0.0;
        for (size_t j = 0; j < rows.size(); ++j) {
          a += p[j] * rows[j][d];
          b += e[j] * rows[j][d];
        }
        expected[(t * heads + h) * valueDim + d] = rows.empty() ? 0 : a / sum;
        exact[(t * heads + h) * valueDim + d] = rows.empty() ? 0 : b / exactSum;
      }
    }
  cpu::ThreadPool pool(4);
  std::vector<float> out(expected.size()), fromNudged(expected.size());
  ASSERT_TRUE(cpu::sparseAttention(pool, q.data(), cache.view, idx.data(), topK,
                                   seqs.data(), tokens, heads, scale, valueDim,
                                   nullptr, out.data(),
                                   numerics::OperandRounding::nearestEven())
                  .ok());
  ASSERT_TRUE(cpu::sparseAttention(pool, nudged.data(), cache.view, idx.data(),
                                   topK, seqs.data(), tokens, heads, scale,
                                   valueDim, nullptr, fromNudged.data(),
                                   numerics::OperandRounding::nearestEven())
                  .ok());
  double worst = 0.0, fromExact = 0.0;
  for (size_t i = 0; i < out.size(); ++i) {
    worst = std::max(worst, std::fabs(out[i] - expected[i]));
    fromExact = std::max(fromExact, std::fabs(out[i] - exact[i]));
  }
  EXPECT_LE(worst, 1e-6);
  EXPECT_GT(fromExact, 1e-4); // the roundings show: the oracle tells them
  EXPECT_EQ(out, fromNudged);
  // Without them, the nudge shows (so the equality above is Q's rounding).
  std::vector<float> plain(out.size()), plainNudged(out.size());
  ASSERT_TRUE(cpu::sparseAttention(pool, q.data(), cache.view, idx.data(), topK,
                                   seqs.data(), tokens, heads, scale, valueDim,
                                   nullptr, plain.data())
                  .ok());
  ASSERT_TRUE(cpu::sparseAttention(pool, nudged.data(), cache.view, idx.data(),
                                   topK, seqs.data(), tokens, heads, scale,
                                   valueDim, nullptr, plainNudged.data())
                  .ok());
  EXPECT_NE(plain, plainNudged);
}

TEST(CpuKernels, CopyColumnsAndCausalBounds) {
  std::mt19937 rng(14);
  const int64_t rows = 5;
  std::vector<float> src = randomFloats(rng, rows * 10);
  std::vector<float> dst(rows * 12, 0.0f);
  for (unsigned threads : kThreadCounts) {
    cpu::ThreadPool pool(threads);
    cpu::copyColumns(pool, src.data(), 10, 3, dst.data(), 12, 5, rows, 6);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < 12; ++c)
        EXPECT_EQ(dst[r * 12 + c],
                  c >= 5 && c < 11 ? src[r * 10 + 3 + c - 5] : 0.0f);
  }
  std::vector<int32_t> positions = {0, 7, 41}, bounds(3);
  cpu::causalBounds(positions.data(), 3, bounds.data());
  EXPECT_EQ(bounds, (std::vector<int32_t>{1, 8, 42}));
}

/// Weights at their stored precision: the kernels on bf16 and e4m3 (+ block
/// scales) weights must equal, bit for bit, the fp32 kernels on weights
/// widened here independently (numerics codecs, one float multiply by the
/// block's scale), since they widen the same values and sum them the same
/// way.
TEST(CpuKernels, StoredWeightsEqualTheWidenedFp32Kernels) {
  std::mt19937 rng(77);
  cpu::ThreadPool pool(3);
  int64_t experts = 3, n = 150, k = 260, bn = 64, bk = 128;
  int64_t scaleRows = (n + bn - 1) / bn, scaleCols = (k + bk - 1) / bk;
  std::vector<uint8_t> codes(experts * n * k);
  for (uint8_t &c : codes)
    c = uint8_t(rng() % 256) & 0xF7; // no NaN codes (0x7F / 0xFF)
  std::vector<float> scales = randomFloats(rng, experts * scaleRows * scaleCols,
                                           0.01f, 0.1f);
  std::vector<uint16_t> bf16(experts * n * k);
  for (uint16_t &b : bf16)
    b = numerics::floatToBf16(randomFloats(rng, 1)[0]);
  // The independent widening.
  std::vector<float> wideE4m3(codes.size()), wideBf16(bf16.size());
  for (int64_t e = 0; e < experts; ++e)
    for (int64_t r = 0; r < n; ++r)
      for (int64_t c = 0; c < k; ++c) {
        int64_t i = (e * n + r) * k + c;
        wideE4m3[i] = numerics::e4m3ToFloat(codes[i]) *
                      scales[(e * scaleRows + r / bn) * scaleCols + c / bk];
        wideBf16[i] = numerics::bf16ToFloat(bf16[i]);
      }
  cpu::WeightView e4m3;
  e4m3.data = codes.data();
  e4m3.type = cpu::WeightType::F8E4M3;
  e4m3.scales = scales.data();
  e4m3.blockN = bn;
  e4m3.blockK = bk;
  cpu::WeightView half;
  half.data = bf16.data();
  half.type = cpu::WeightType::BF16;
  for (int64_t m : {1, 3, 70}) {
    std::vector<float> x = randomFloats(rng, m * k);
    for (auto [view, wide] : {std::pair{e4m3, &wideE4m3}, {half, &wideBf16}}) {
      std::vector<float> got(m * n), want(m * n);
      cpu::matmul(pool, x.data(), view, cpu::WeightView(), m, n, k, got.data(),
                  cpu::MatmulTiling());
      cpu::matmul(pool, x.data(), wide->data(), nullptr, m, n, k, want.data());
      EXPECT_EQ(got, want) << "matmul m=" << m;
    }
  }
  // Experts: the third matrix's scales are offset per expert.
  int64_t tokens = 4, slots = 2;
  std::vector<float> x = randomFloats(rng, tokens * k);
  std::vector<int32_t> indices = {2, 0, 1, -1, 2, 2, 0, 1};
  std::vector<float> got(tokens * slots * n), want(tokens * slots * n);
  ASSERT_TRUE(cpu::expertMatmul(pool, x.data(), false, e4m3, experts, n, k,
                                indices.data(), tokens, slots, nullptr,
                                got.data())
                  .ok());
  ASSERT_TRUE(cpu::expertMatmul(pool, x.data(), false, wideE4m3.data(),
                                experts, n, k, indices.data(), tokens, slots,
                                nullptr, want.data())
                  .ok());
  EXPECT_EQ(got, want);
  // Head matrices and vectors (bf16).
  std::vector<float> hx = randomFloats(rng, 5 * experts * k);
  for (bool transpose : {false, true}) {
    std::vector<float> hg(5 * experts * n), hw(5 * experts * n);
    cpu::headMatmul(pool, hx.data(), half, transpose, 5, experts, k, n,
                    hg.data());
    cpu::headMatmul(pool, hx.data(), wideBf16.data(), transpose, 5, experts, k,
                    n, hw.data());
    EXPECT_EQ(hg, hw) << "headMatmul transpose=" << transpose;
  }
  std::vector<float> rx = randomFloats(rng, 2 * k), rg(2 * k), rw(2 * k);
  cpu::rmsNorm(pool, rx.data(), half, 2, k, 1e-6, rg.data());
  cpu::rmsNorm(pool, rx.data(), wideBf16.data(), 2, k, 1e-6, rw.data());
  EXPECT_EQ(rg, rw);
  std::vector<int32_t> ids = {5, 0, 149};
  std::vector<float> eg(3 * k), ew(3 * k);
  ASSERT_TRUE(cpu::embedding(pool, half, n, k, ids.data(), 3, eg.data()).ok());
  ASSERT_TRUE(
      cpu::embedding(pool, wideBf16.data(), n, k, ids.data(), 3, ew.data()).ok());
  EXPECT_EQ(eg, ew);
}

} // namespace

TEST(CpuMatmulInputs, QuantizeFp8RowsMatchesABruteForceOracle) {
  // cpu::quantizeFp8Rows (--precision=fp8's x) against a brute-force
  // reading of its rule: per row and 128 columns, the least power of two s
  // (found by doubling and halving) with max(amax, 1e-4) / s <= 448, and
  // each value the nearest of the 256 e4m3 values times s (ties to the even
  // code, beyond 448 the largest). Rows of mixed magnitudes, a zero row
  // (the 1e-4 floor), a row whose amax is exactly 448 times a power of two
  // (the boundary), and a partial last block (k = 200).
  cpu::ThreadPool pool(2);
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  std::uniform_int_distribution<int> exponent(-30, 30);
  constexpr int64_t rows = 40, k = 200;
  std::vector<float> x(rows * k);
  for (int64_t r = 0; r < rows; ++r) {
    int e = exponent(rng);
    for (int64_t c = 0; c < k; ++c)
      x[r * k + c] = std::ldexp(uniform(rng), e);
  }
  std::fill(x.begin(), x.begin() + k, 0.0f);
  x[k + 3] = 448.0f * 0.25f; // amax exactly 448 / 4 in row 1's first block
  for (int64_t c = 0; c < 128; ++c)
    if (c != 3)
      x[k + c] = std::min(std::fabs(x[k + c]), 100.0f) * 0.5f;
  std::vector<float> out(rows * k);
  cpu::quantizeFp8Rows(pool, x.data(), rows, k, out.data());
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t b = 0; b < k; b += 128) {
      int64_t end = std::min(k, b + 128);
      double amax = 1e-4;
      for (int64_t c = b; c < end; ++c)
        amax = std::max(amax, double(std::fabs(x[r * k + c])));
      double s = 1.0;
      while (amax / s > 448.0)
        s *= 2.0;
      while (amax / (s / 2.0) <= 448.0)
        s /= 2.0;
      for (int64_t c = b; c < end; ++c) {
        double v = double(x[r * k + c]) / s;
        int best = 0;
        for (int code = 0; code < 256; ++code) {
          double candidate = numerics::e4m3ToFloat(uint8_t(code));
          if (std::isnan(candidate))
            continue;
          double was = numerics::e4m3ToFloat(uint8_t(best));
          double dc = std::fabs(candidate - v), db = std::fabs(was - v);
          if (dc < db || (dc == db && (code & 1) == 0 && candidate != was))
            best = code;
        }
        double expected = numerics::e4m3ToFloat(uint8_t(best)) * s;
        ASSERT_EQ(double(out[r * k + c]), expected)
            << "row " << r << " column " << c << " x " << x[r * k + c];
      }
    }
}
