//===- CudaKernelsTest.cpp - CUDA library kernels against the CPU ones ----===//
//
// Runs every CUDA kernel (CudaKernels.h) and its CPU counterpart (the
// oracle: CpuKernels.h, itself tested against the reference evaluator) on
// the same seeded random inputs and compares. The kernels with
// shape-specialised templates run twice: generic, and as the instantiation
// for the shape (SpecializedKernels.cu). Without a GPU every test
// skips, saying why. Tolerances sit next to each comparison: fp32 sums in a
// different order stay within ~1e-5 of the row's largest magnitude; copies,
// cache bytes, routing and top-k indices are exact.
//
//===----------------------------------------------------------------------===//

#include "runtime/devices/cuda/CudaKernels.h"
#include "runtime/devices/cpu/CpuKernels.h"
#include "runtime/numerics/Numerics.h"
#include "test/unit/KernelTestUtil.h"
#include "test/unit/Mxfp4TestData.h"

#include "gtest/gtest.h"

#include "SpecializedKernelsPtx.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <numeric>
#include <optional>
#include <random>
#include <string>
#include <tuple>
#include <vector>

using namespace daybreak;
using namespace daybreak::cuda;

namespace {

/// A device buffer freed on scope exit.
class Buffer {
public:
  Buffer(const Driver &driver, size_t bytes) : driver(driver) {
    if (bytes)
      driver.cuMemAlloc(&ptr, bytes);
  }
  template <typename T>
  Buffer(const Driver &driver, const std::vector<T> &host)
      : Buffer(driver, host.size() * sizeof(T)) {
    if (!host.empty())
      driver.cuMemcpyHtoD(ptr, host.data(), host.size() * sizeof(T));
  }
  ~Buffer() {
    if (ptr)
      driver.cuMemFree(ptr);
  }
  template <typename T> std::vector<T> read(size_t count) const {
    std::vector<T> host(count);
    if (count)
      driver.cuMemcpyDtoH(host.data(), ptr, count * sizeof(T));
    return host;
  }
  CUdeviceptr get() const { return ptr; }
  operator CUdeviceptr() const { return ptr; }

private:
  const Driver &driver;
  CUdeviceptr ptr = 0;
};

class CudaKernelsTest : public ::testing::Test {
protected:
  void SetUp() override {
    StatusOr<const Driver *> loaded = Driver::get();
    if (!loaded.ok())
      GTEST_SKIP() << "no GPU here: " << loaded.error().message();
    driver = *loaded;
    int count = 0;
    if (!driver->check(driver->cuDeviceGetCount(&count), "cuDeviceGetCount")
             .ok() ||
        count == 0)
      GTEST_SKIP() << "no GPU here: the driver sees no device";
    ASSERT_TRUE(ok(driver->cuDeviceGet(&device, 0), "cuDeviceGet"));
    ASSERT_TRUE(ok(driver->cuDevicePrimaryCtxRetain(&context, device),
                   "cuDevicePrimaryCtxRetain"));
    ASSERT_TRUE(ok(driver->cuCtxSetCurrent(context), "cuCtxSetCurrent"));
    ASSERT_TRUE(ok(driver->cuModuleLoadDataEx(&module, cudaKernelsPtx(), 0,
                                              nullptr, nullptr),
                   "cuModuleLoadDataEx"));
    StatusOr<CudaKernels> k = CudaKernels::load(*driver, module);
    ASSERT_TRUE(k.ok()) << k.error().message();
    kernels.emplace(*k);
    for (const char *chunk : kSpecializedKernelsPtxChunks)
      specializedPtx += chunk;
    ASSERT_TRUE(ok(driver->cuModuleLoadDataEx(&specializedModule,
                                              specializedPtx.c_str(), 0,
                                              nullptr, nullptr),
                   "cuModuleLoadDataEx(SpecializedKernels)"));
  }
  void TearDown() override {
    if (specializedModule)
      driver->cuModuleUnload(specializedModule);
    if (module)
      driver->cuModuleUnload(module);
    if (context)
      driver->cuDevicePrimaryCtxRelease(device);
  }
  bool ok(CUresult result, const char *call) {
    Status status = driver->check(result, call);
    if (!status.ok())
      ADD_FAILURE() << status.message();
    return status.ok();
  }
  /// Captures what `record` launches on a new stream into a graph, replays
  /// the graph `replays` times and waits for it (a fatal failure on any
  /// error; call it under ASSERT_NO_FATAL_FAILURE).
  void replayCaptured(const std::function<Status(CUstream)> &record,
                      int replays) {
    CUstream stream = nullptr;
    ASSERT_TRUE(ok(driver->cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING),
                   "cuStreamCreate"));
    ASSERT_TRUE(
        ok(driver->cuStreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_GLOBAL),
           "cuStreamBeginCapture"));
    Status launched = record(stream);
    CUgraph graph = nullptr;
    ASSERT_TRUE(
        ok(driver->cuStreamEndCapture(stream, &graph), "cuStreamEndCapture"));
    ASSERT_TRUE(launched.ok()) << launched.message();
    CUgraphExec exec = nullptr;
    ASSERT_TRUE(ok(driver->cuGraphInstantiateWithFlags(&exec, graph, 0),
                   "cuGraphInstantiateWithFlags"));
    for (int replay = 0; replay < replays; ++replay)
      ASSERT_TRUE(ok(driver->cuGraphLaunch(exec, stream), "cuGraphLaunch"));
    ASSERT_TRUE(ok(driver->cuStreamSynchronize(stream), "cuStreamSynchronize"));
    driver->cuGraphExecDestroy(exec);
    driver->cuGraphDestroy(graph);
    driver->cuStreamDestroy(stream);
  }
  /// The kernel to run for `instantiation` (say "daybreak_rms_norm_t<7>"):
  /// nullptr, the generic kernel, when empty; else the instantiation's entry
  /// point in SpecializedKernels.cu's PTX, found by its mangled prefix
  /// (_Z<length><name>I<Li<n>E...>E). A missing one fails the test.
  CUfunction variant(const std::string &instantiation) {
    if (instantiation.empty())
      return nullptr;
    size_t open = instantiation.find('<');
    std::string name = instantiation.substr(0, open);
    std::string prefix = "_Z" + std::to_string(name.size()) + name + "I";
    std::string args = instantiation.substr(open + 1);
    for (size_t at = 0; at < args.size();) {
      size_t end = args.find_first_of(",>", at);
      prefix += "Li" + args.substr(at, end - at) + "E";
      at = args.find_first_not_of(", ", end + 1);
      if (args[end] == '>')
        break;
    }
    prefix += "E";
    size_t entry = specializedPtx.find(".entry " + prefix);
    if (entry == std::string::npos) {
      ADD_FAILURE() << "no entry point " << prefix << "... for "
                    << instantiation << " in SpecializedKernels.cu";
      return nullptr;
    }
    size_t begin = entry + 7;
    std::string mangled =
        specializedPtx.substr(begin, specializedPtx.find('(', begin) - begin);
    CUfunction fn = nullptr;
    ok(driver->cuModuleGetFunction(&fn, specializedModule, mangled.c_str()),
       "cuModuleGetFunction");
    return fn;
  }
  /// Launch status, then the kernel's completion.
  void expectRan(const Status &status) {
    ASSERT_TRUE(status.ok()) << status.message();
    ASSERT_TRUE(ok(driver->cuCtxSynchronize(), "cuCtxSynchronize"));
  }

  const Driver *driver = nullptr;
  CUdevice device = 0;
  CUcontext context = nullptr;
  CUmodule module = nullptr;
  CUmodule specializedModule = nullptr;
  std::string specializedPtx;
  std::optional<CudaKernels> kernels;
  cpu::ThreadPool pool{4};
  std::mt19937 rng{1234};

  std::vector<float> random(size_t n, float lo = -1.0f, float hi = 1.0f) {
    std::uniform_real_distribution<float> dist(lo, hi);
    std::vector<float> v(n);
    for (float &x : v)
      x = dist(rng);
    return v;
  }
};

/// Worst |gpu - cpu| / max(max_row |cpu|, 1e-30) over rows of `cols`.
double rowRelativeError(const std::vector<float> &gpu,
                        const std::vector<float> &cpu, int64_t cols) {
  double worst = 0.0;
  for (size_t r0 = 0; r0 < cpu.size(); r0 += cols) {
    double rowMax = 1e-30, err = 0.0;
    for (int64_t i = 0; i < cols; ++i) {
      rowMax = std::max(rowMax, double(std::fabs(cpu[r0 + i])));
      err = std::max(err, double(std::fabs(gpu[r0 + i] - cpu[r0 + i])));
      if (std::isnan(gpu[r0 + i]) != std::isnan(cpu[r0 + i]))
        return INFINITY;
    }
    worst = std::max(worst, err / rowMax);
  }
  return worst;
}

void report(const char *kernel, const char *shape, double error) {
  std::printf("  %-18s %-40s worst error %.3g\n", kernel, shape, error);
}

TEST_F(CudaKernelsTest, Embedding) {
  // Rows shorter than, and several batches of, the kernel's 8 x 256 values.
  for (auto [tokens, dim] :
       {std::pair<int64_t, int64_t>{1, 257}, {37, 257}, {3, 7168}, {2, 5000}}) {
    int64_t vocab = 1000;
    auto table = random(vocab * dim);
    std::vector<int32_t> ids(tokens);
    for (auto &id : ids)
      id = int32_t(rng() % vocab);
    std::vector<float> expected(tokens * dim);
    ASSERT_TRUE(cpu::embedding(pool, table.data(), vocab, dim, ids.data(),
                               tokens, expected.data())
                    .ok());
    Buffer dTable(*driver, table), dIds(*driver, ids),
        dOut(*driver, tokens * dim * 4);
    expectRan(
        kernels->embedding(dTable, vocab, dim, dIds, tokens, dOut, nullptr));
    EXPECT_EQ(dOut.read<float>(tokens * dim), expected); // a copy: exact
  }
}

TEST_F(CudaKernelsTest, Norms) {
  for (int64_t rows : {1, 5, 64})
    for (int64_t dim : {7, 1000, 7168})
      for (bool withWeight : {true, false}) {
        auto x = random(rows * dim, -3, 3), weight = random(dim),
             bias = random(dim);
        std::vector<float> rms(rows * dim), ln(rows * dim);
        const float *w = withWeight ? weight.data() : nullptr;
        const float *b = withWeight ? bias.data() : nullptr;
        cpu::rmsNorm(pool, x.data(), w, rows, dim, 1e-6, rms.data());
        cpu::layerNorm(pool, x.data(), w, b, rows, dim, 1e-5, ln.data());
        Buffer dx(*driver, x), dw(*driver, weight), db(*driver, bias),
            dOut(*driver, rows * dim * 4);
        CUdeviceptr pw = withWeight ? dw.get() : 0,
                    pb = withWeight ? db.get() : 0;
        char shape[64];
        std::snprintf(shape, sizeof(shape), "%ldx%ld weight=%d", long(rows),
                      long(dim), withWeight);
        std::string specialized =
            "daybreak_rms_norm_t<" + std::to_string(dim) + ">";
        std::vector<std::vector<float>> results;
        for (const std::string &instantiation : {std::string(), specialized}) {
          expectRan(kernels->rmsNorm(dx, pw, rows, dim, 1e-6, dOut, nullptr,
                                     variant(instantiation)));
          results.push_back(dOut.read<float>(rows * dim));
          double e = rowRelativeError(results.back(), rms, dim);
          report(instantiation.empty() ? "rmsNorm" : instantiation.c_str(),
                 shape, e);
          EXPECT_LE(e, 1e-5); // fp32 block sum vs the CPU's double sum
        }
        // The instantiation keeps a thread's values in registers: the same
        // sums in the same order as the generic kernel, also in place.
        EXPECT_EQ(results[1], results[0]) << shape;
        Buffer inPlace(*driver, x);
        expectRan(kernels->rmsNorm(inPlace, pw, rows, dim, 1e-6, inPlace,
                                   nullptr, variant(specialized)));
        EXPECT_EQ(inPlace.read<float>(rows * dim), results[0]) << shape;
        expectRan(
            kernels->layerNorm(dx, pw, pb, rows, dim, 1e-5, dOut, nullptr));
        double e = rowRelativeError(dOut.read<float>(rows * dim), ln, dim);
        report("layerNorm", shape, e);
        EXPECT_LE(e, 1e-5);
      }
}

// add_rms_norm against the CPU kernel: the sum bit for bit (one fp32 add),
// the normed rows within the fp32 block sum's error as Norms, the
// instantiation equal to the generic kernel, and both outputs over their
// inputs in place (the plan may alias them).
TEST_F(CudaKernelsTest, AddRmsNorm) {
  for (int64_t rows : {1, 5, 64})
    for (int64_t dim : {7, 1000, 7168})
      for (bool bf16Weight : {false, true}) {
        auto x = random(rows * dim, -3, 3),
             residual = random(rows * dim, -3, 3), weight = random(dim);
        std::vector<uint16_t> weightBf16(dim);
        for (int64_t i = 0; i < dim; ++i) {
          weightBf16[i] = numerics::floatToBf16(weight[i]);
          if (bf16Weight)
            weight[i] = numerics::bf16ToFloat(weightBf16[i]);
        }
        std::vector<float> sum(rows * dim), normed(rows * dim);
        cpu::addRmsNorm(pool, x.data(), residual.data(),
                        cpu::WeightView::f32(weight.data()), rows, dim, 1e-6,
                        sum.data(), normed.data());
        Buffer dx(*driver, x), dr(*driver, residual), dw(*driver, weight),
            dwb(*driver, weightBf16), dSum(*driver, rows * dim * 4),
            dOut(*driver, rows * dim * 4);
        DeviceWeight w = DeviceWeight::f32(dw);
        if (bf16Weight) {
          w.data = dwb;
          w.type = 1; // BF16
        }
        char shape[64];
        std::snprintf(shape, sizeof(shape), "%ldx%ld %s", long(rows), long(dim),
                      bf16Weight ? "bf16" : "f32");
        std::string specialized =
            "daybreak_add_rms_norm_t<" + std::to_string(dim) + ">";
        std::vector<std::vector<float>> results;
        for (const std::string &instantiation : {std::string(), specialized}) {
          expectRan(kernels->addRmsNorm(dx, dr, w, rows, dim, 1e-6, dSum, dOut,
                                        nullptr, variant(instantiation)));
          EXPECT_EQ(dSum.read<float>(rows * dim), sum) << shape;
          results.push_back(dOut.read<float>(rows * dim));
          double e = rowRelativeError(results.back(), normed, dim);
          report(instantiation.empty() ? "addRmsNorm" : instantiation.c_str(),
                 shape, e);
          EXPECT_LE(e, 1e-5) << shape; // fp32 block sum vs the CPU's double
        }
        EXPECT_EQ(results[1], results[0]) << shape;
        // In place: the sum over x, the normed rows over the residual.
        for (const std::string &instantiation : {std::string(), specialized}) {
          Buffer ix(*driver, x), ir(*driver, residual);
          expectRan(kernels->addRmsNorm(ix, ir, w, rows, dim, 1e-6, ix, ir,
                                        nullptr, variant(instantiation)));
          EXPECT_EQ(ix.read<float>(rows * dim), sum) << shape;
          EXPECT_EQ(ir.read<float>(rows * dim), results[0]) << shape;
        }
      }
}

TEST_F(CudaKernelsTest, Matmul) {
  struct Shape {
    int64_t m, n, k;
  };
  for (Shape s :
       {Shape{1, 1000, 7168}, Shape{2, 1536, 7168}, Shape{8, 129, 300},
        Shape{3, 70, 257}, Shape{9, 130, 257}, Shape{100, 200, 513},
        Shape{256, 256, 64}, Shape{65, 7, 7168}})
    for (bool withBias : {false, true}) {
      auto x = random(s.m * s.k), w = random(s.n * s.k), bias = random(s.n);
      std::vector<float> expected(s.m * s.n);
      cpu::matmul(pool, x.data(), w.data(), withBias ? bias.data() : nullptr,
                  s.m, s.n, s.k, expected.data());
      Buffer dx(*driver, x), dw(*driver, w), db(*driver, bias),
          dOut(*driver, s.m * s.n * 4);
      // The decode path (m <= 8) also as its instantiation for k.
      std::vector<std::string> variants = {""};
      if (s.m <= 8)
        variants.push_back("daybreak_matmul_small_m_t<" + std::to_string(s.k) +
                           ">");
      for (const std::string &instantiation : variants) {
        expectRan(kernels->matmul(dx, dw, withBias ? db.get() : 0, s.m, s.n,
                                  s.k, dOut, nullptr, variant(instantiation)));
        double e = rowRelativeError(dOut.read<float>(s.m * s.n), expected, s.n);
        char shape[64];
        std::snprintf(shape, sizeof(shape), "m=%ld n=%ld k=%ld bias=%d",
                      long(s.m), long(s.n), long(s.k), withBias);
        report(instantiation.empty() ? "matmul" : instantiation.c_str(), shape,
               e);
        EXPECT_LE(e, 1e-5); // fp32 sums in another order
      }
    }
}

TEST_F(CudaKernelsTest, HeadMatmul) {
  for (int64_t tokens : {1, 70})
    for (bool transpose : {false, true}) {
      int64_t heads = 3, k = 129, n = 65;
      auto x = random(tokens * heads * k), w = random(heads * k * n);
      std::vector<float> expected(tokens * heads * n);
      cpu::headMatmul(pool, x.data(), w.data(), transpose, tokens, heads, k, n,
                      expected.data());
      Buffer dx(*driver, x), dw(*driver, w), dOut(*driver, expected.size() * 4);
      expectRan(kernels->headMatmul(dx, dw, transpose, tokens, heads, k, n,
                                    dOut, nullptr));
      double e =
          rowRelativeError(dOut.read<float>(expected.size()), expected, n);
      char shape[64];
      std::snprintf(shape, sizeof(shape), "T=%ld H=3 k=129 n=65 transpose=%d",
                    long(tokens), transpose);
      report("headMatmul", shape, e);
      EXPECT_LE(e, 1e-5);
    }
}

TEST_F(CudaKernelsTest, Rope) {
  // 3 rows a token (one partial block of kRopeRows) and 37 (two whole
  // blocks and a partial one).
  for (int64_t rowsPerToken : {int64_t(3), int64_t(37)})
    for (bool interleaved : {false, true})
      for (bool yarn : {false, true}) {
        int64_t tokens = 9, rowDim = 200;
        cpu::RopeParams p;
        p.interleaved = interleaved;
        p.offset = 72;
        p.dim = 64;
        p.yarn = yarn;
        p.factor = 40;
        p.betaFast = 32;
        p.betaSlow = 1;
        p.attentionFactor = yarn ? 1.3 : 1.0;
        auto x = random(tokens * rowsPerToken * rowDim);
        std::vector<int32_t> positions(tokens);
        for (auto &pos : positions)
          pos = int32_t(rng() % 160000);
        positions[0] = 0;
        std::vector<float> expected = x;
        cpu::rope(pool, expected.data(), positions.data(), tokens, rowsPerToken,
                  rowDim, p);
        Buffer dx(*driver, x), dPos(*driver, positions);
        expectRan(
            kernels->rope(dx, dPos, tokens, rowsPerToken, rowDim, p, nullptr));
        double e = rowRelativeError(dx.read<float>(x.size()), expected, rowDim);
        char shape[64];
        std::snprintf(shape, sizeof(shape), "rows=%ld interleaved=%d yarn=%d",
                      long(rowsPerToken), interleaved, yarn);
        report("rope", shape, e);
        EXPECT_LE(e, 1e-6); // both in double: rounding of the last fp32 step
      }
}

TEST_F(CudaKernelsTest, ElementwiseAndCopies) {
  int64_t n = 100003;
  auto a = random(n, -20, 20), b = random(n, -20, 20);
  Buffer da(*driver, a), db(*driver, b), dOut(*driver, n * 4);
  for (bool limit : {false, true}) {
    std::vector<float> expected(n);
    cpu::swiglu(pool, a.data(), b.data(), n, 1.702, limit, 7.0, 1.0,
                expected.data());
    expectRan(
        kernels->swiglu(da, db, n, 1.702, limit, 7.0, 1.0, dOut, nullptr));
    auto got = dOut.read<float>(n);
    double e = 0;
    for (int64_t i = 0; i < n; ++i)
      e = std::max(e, std::fabs(double(got[i]) - expected[i]) /
                          std::max(1.0, std::fabs(double(expected[i]))));
    report("swiglu", limit ? "n=100003 limit" : "n=100003", e);
    EXPECT_LE(e, 1e-6); // double on both sides, one fp32 rounding
  }
  std::vector<float> sum(n);
  cpu::add(pool, a.data(), b.data(), n, sum.data());
  expectRan(kernels->add(da, db, n, dOut, nullptr));
  EXPECT_EQ(dOut.read<float>(n), sum); // one fp32 add: exact

  // Columns [3, 3 + 50) of 7 rows of 61 into columns [10, ...) of rows of 80.
  int64_t rows = 7;
  auto src = random(rows * 61), dst = random(rows * 80);
  std::vector<float> expected = dst;
  cpu::copyColumns(pool, src.data(), 61, 3, expected.data(), 80, 10, rows, 50);
  Buffer dSrc(*driver, src), dDst(*driver, dst);
  expectRan(kernels->copyColumns(dSrc, 61, 3, dDst, 80, 10, rows, 50, nullptr));
  EXPECT_EQ(dDst.read<float>(dst.size()), expected); // exact

  // One column of 5001 rows of two (gpt-oss's interleaved gate and up).
  {
    int64_t rows = 5001;
    auto src = random(rows * 2), dst = random(rows);
    for (int64_t column : {0, 1}) {
      std::vector<float> expected = dst;
      cpu::copyColumns(pool, src.data(), 2, column, expected.data(), 1, 0, rows,
                       1);
      Buffer dSrc(*driver, src), dDst(*driver, dst);
      expectRan(
          kernels->copyColumns(dSrc, 2, column, dDst, 1, 0, rows, 1, nullptr));
      EXPECT_EQ(dDst.read<float>(dst.size()), expected); // exact
    }
  }

  std::vector<int32_t> positions = {0, 5, 17, 4095, 2};
  std::vector<int32_t> bounds(positions.size());
  cpu::causalBounds(positions.data(), positions.size(), bounds.data());
  Buffer dPos(*driver, positions), dBounds(*driver, bounds.size() * 4);
  expectRan(kernels->causalBounds(dPos, positions.size(), dBounds, nullptr));
  EXPECT_EQ(dBounds.read<int32_t>(bounds.size()), bounds);

  // Rank 1 of 4 of 256 experts: ids 64..127 renumbered, the others (empty
  // slots -1 among them) empty; 1001 slots, past one block.
  {
    std::mt19937 rng(9);
    std::vector<int32_t> ids(1001), expected(ids.size());
    for (int32_t &id : ids)
      id = int32_t(rng() % 257) - 1;
    cpu::localExperts(ids.data(), ids.size(), 64, 64, expected.data());
    Buffer dIds(*driver, ids), dOut(*driver, ids.size() * 4);
    expectRan(kernels->localExperts(dIds, ids.size(), 64, 64, dOut, nullptr));
    EXPECT_EQ(dOut.read<int32_t>(ids.size()), expected);
  }
}

TEST_F(CudaKernelsTest, MoeRouteSigmoid) {
  struct Case {
    int64_t tokens, experts, topK, groups, keepGroups;
    bool ties;
    int64_t shared = 0;
  };
  // DeepSeek-V3 (8 groups of 32, keep 4; with its shared expert as a
  // slot), Kimi Linear (256 ungrouped), the kernel's limits (1024 experts
  // in 64 groups; with 33 shared slots, more than a warp), more picks than
  // candidates, and ties.
  for (Case c :
       {Case{33, 256, 8, 8, 4, false}, Case{33, 256, 8, 8, 4, true},
        Case{33, 256, 8, 8, 4, false, 1}, Case{3, 256, 8, 1, 1, false},
        Case{3, 1024, 40, 64, 5, false}, Case{3, 1024, 40, 64, 5, false, 33},
        Case{1, 64, 6, 1, 1, false}, Case{5, 16, 6, 4, 1, true},
        Case{7, 12, 3, 3, 2, true, 2}}) {
    auto logits = random(c.tokens * c.experts, -4, 4);
    auto bias = random(c.experts, -0.1f, 0.1f);
    if (c.ties) { // few distinct values: ties in experts and groups
      for (float &l : logits)
        l = std::round(l);
      std::fill(bias.begin(), bias.end(), 0.0f);
    }
    cpu::RouteParams p;
    p.topK = c.topK;
    p.numGroups = c.groups;
    p.topKGroups = c.keepGroups;
    p.scalingFactor = 2.5;
    p.sharedExperts = c.shared;
    const int64_t slots = c.topK + c.shared;
    std::vector<int32_t> indices(c.tokens * slots);
    std::vector<float> weights(c.tokens * slots);
    cpu::moeRouteSigmoid(pool, logits.data(), bias.data(), c.tokens, c.experts,
                         p, indices.data(), weights.data());
    Buffer dLogits(*driver, logits), dBias(*driver, bias),
        dIdx(*driver, indices.size() * 4), dW(*driver, weights.size() * 4);
    expectRan(kernels->moeRouteSigmoid(dLogits, dBias, c.tokens, c.experts, p,
                                       dIdx, dW, nullptr));
    EXPECT_EQ(dIdx.read<int32_t>(indices.size()), indices); // exact
    double e = rowRelativeError(dW.read<float>(weights.size()), weights, slots);
    // The shared slots as the op defines them (the CPU kernel's too).
    for (int64_t t = 0; t < c.tokens; ++t)
      for (int64_t s = 0; s < c.shared; ++s) {
        EXPECT_EQ(indices[t * slots + c.topK + s], c.experts + s);
        EXPECT_EQ(weights[t * slots + c.topK + s], 1.0f);
      }
    char shape[80];
    std::snprintf(shape, sizeof(shape),
                  "E=%ld k=%ld groups=%ld/%ld ties=%d shared=%ld",
                  long(c.experts), long(c.topK), long(c.keepGroups),
                  long(c.groups), c.ties, long(c.shared));
    report("moeRouteSigmoid", shape, e);
    EXPECT_LE(e, 1e-6); // double on both sides
  }
}

TEST_F(CudaKernelsTest, MoeRouteSoftmaxTopK) {
  for (auto [tokens, experts, topK, ties] :
       {std::tuple<int64_t, int64_t, int64_t, bool>{33, 128, 4, false},
        {33, 128, 4, true}, {1, 32, 4, true}, {5, 16, 16, false}}) {
    auto logits = random(tokens * experts, -4, 4);
    auto bias = random(experts, -0.5f, 0.5f);
    if (ties) // few distinct values: ties across the top-k boundary
      for (float &l : logits)
        l = std::round(l);
    cpu::RouteParams p;
    p.score = runtime::RouteScore::SoftmaxTopK;
    p.topK = topK;
    p.scalingFactor = 1.5;
    for (bool withBias : {false, true}) {
      const float *hostBias = withBias ? bias.data() : nullptr;
      std::vector<int32_t> indices(tokens * topK);
      std::vector<float> weights(tokens * topK);
      cpu::moeRouteSoftmaxTopK(pool, logits.data(), hostBias, tokens, experts,
                               p, indices.data(), weights.data());
      Buffer dLogits(*driver, logits), dBias(*driver, bias),
          dIdx(*driver, indices.size() * 4), dW(*driver, weights.size() * 4);
      expectRan(kernels->moeRouteSoftmaxTopK(dLogits,
                                             withBias ? dBias.get() : 0,
                                             tokens, experts, p, dIdx, dW,
                                             nullptr));
      EXPECT_EQ(dIdx.read<int32_t>(indices.size()), indices); // exact
      double e = rowRelativeError(dW.read<float>(weights.size()), weights, topK);
      char shape[64];
      std::snprintf(shape, sizeof(shape), "E=%ld k=%ld ties=%d bias=%d",
                    long(experts), long(topK), ties, withBias);
      report("moeRouteSoftmaxTopK", shape, e);
      EXPECT_LE(e, 1e-6); // double on both sides
    }
  }
}

TEST_F(CudaKernelsTest, ExpertMatmul) {
  int64_t experts = 6, n = 70, k = 300, slots = 4;
  for (int64_t tokens : {1, 5})
    for (bool perSlot : {false, true})
      for (bool routed : {false, true}) {
        auto x = random(tokens * (perSlot ? slots : 1) * k);
        auto w = random(experts * n * k);
        auto routing = random(tokens * slots, 0, 1);
        std::vector<int32_t> indices(tokens * slots);
        for (auto &i : indices)
          i = int32_t(rng() % (experts + 1)) - 1; // some -1
        int64_t outRows = routed ? tokens : tokens * slots;
        std::vector<float> expected(outRows * n);
        ASSERT_TRUE(cpu::expertMatmul(pool, x.data(), perSlot, w.data(),
                                      experts, n, k, indices.data(), tokens,
                                      slots, routed ? routing.data() : nullptr,
                                      expected.data())
                        .ok());
        Buffer dx(*driver, x), dw(*driver, w), dIdx(*driver, indices),
            dR(*driver, routing), dOut(*driver, expected.size() * 4);
        expectRan(kernels->expertMatmul(dx, perSlot, dw, experts, n, k, dIdx,
                                        tokens, slots, routed ? dR.get() : 0,
                                        dOut, nullptr));
        double e =
            rowRelativeError(dOut.read<float>(expected.size()), expected, n);
        char shape[64];
        std::snprintf(shape, sizeof(shape), "T=%ld perSlot=%d routed=%d",
                      long(tokens), perSlot, routed);
        report("expertMatmul", shape, e);
        EXPECT_LE(e, 1e-5);
      }
}

TEST_F(CudaKernelsTest, Mxfp4ExpertMatmul) {
  // MXFP4 experts read as stored (the direct route) against the CPU kernel:
  // both within the fp32 rounding bound of the exact result
  // (test/unit/Mxfp4TestData.h), so within twice it of each other. The
  // kernel is expert-major (blocks of 8 output rows, each distinct expert
  // read once for all the pairs that picked it, two pairs at a time, K in
  // parts of 32 blocks of 32). Shapes: K of one block, of blocks that leave
  // lanes idle, of several parts (gpt-oss's 2880: 3 parts), N off the 8
  // rows; T = 1, 2, 5, 7, 8, 64 with top-1 .. top-8; -1 slots; `crowd`
  // limits the picks to the first experts (many pairs an expert, odd counts
  // for the two-at-a-time loop, the other experts never picked); 300
  // experts (several bitmap words a lane); the ends of E8M0 (2^-127,
  // 2^127, NaN) with inputs small enough that no block overflows; prefill
  // steps of more pairs than one launch takes. The CUDA-core kernel runs
  // forced in both its forms (rows loaded by each task, or brought into
  // shared-memory stages by the copy engine). The grouped warpgroup GEMM
  // (forced wherever it applies, and as Auto takes it from 257 pairs)
  // scales each value rather than each block's sum, so at E8M0 253 and 254
  // values overflow where the block sums do not (docs/mxfp4.md): its
  // extreme case (extreme 2) ends at 252.
  struct Case {
    int64_t experts, n, k, tokens, slots;
    int extreme;   // 1: E8M0 up to 254; 2: up to 252
    int64_t crowd; // picks among experts [0, crowd); 0: all
  };
  for (Case c :
       {Case{3, 5, 32, 1, 4, false, 0}, Case{6, 70, 96, 5, 4, false, 0},
        Case{5, 37, 2880, 1, 4, false, 0}, Case{4, 131, 2880, 8, 4, false, 0},
        Case{4, 24, 128, 7, 4, true, 0}, Case{16, 45, 352, 2, 1, false, 0},
        Case{128, 20, 2880, 8, 8, false, 0},
        Case{40, 67, 1056, 64, 4, false, 0}, Case{40, 19, 320, 64, 4, false, 3},
        Case{9, 33, 64, 64, 8, false, 2}, Case{300, 9, 64, 2, 8, false, 0},
        Case{7, 29, 2880, 8, 2, false, 1},
        // The staged form's (N a multiple of 8, K of 64): gpt-oss's K at
        // T = 1; many distinct experts through its four stages (each
        // refilled many times); crowded; K = 7168, where two stages fit.
        Case{5, 40, 2880, 1, 4, false, 0}, Case{128, 24, 2880, 8, 8, false, 0},
        Case{40, 16, 2880, 64, 4, false, 3}, Case{9, 16, 7168, 6, 4, false, 0},
        // The tensor-core GEMV's own: a partial last group of 256 values
        // (K = 1088: four groups and two blocks), gpt-oss's B = 64 at
        // top-4 (256 pairs, its limit), crowded into three experts (groups
        // of 8 pairs: three mma tiles a k-step).
        Case{40, 67, 1088, 64, 4, false, 0},
        Case{40, 19, 2880, 64, 4, false, 3},
        // Prefill: more pairs than a block's shared memory holds, so the
        // launcher runs the tokens in several launches (about 1,200 pairs
        // each).
        Case{16, 21, 320, 700, 4, false, 0}, Case{8, 13, 64, 1300, 1, false, 3},
        // The warpgroup GEMM's: K of an odd count of blocks (a last stage
        // half past K), N over a 128-column tile and off it, one expert
        // with several 128-row tiles and a partial one, gpt-oss's K, the
        // in-range ends of E8M0 (2^-127 subnormal in bf16, NaN).
        Case{6, 200, 352, 300, 4, false, 2},
        Case{4, 131, 2880, 96, 4, false, 0}, Case{5, 40, 96, 64, 4, 2, 0}})
    for (bool perSlot : {false, true})
      for (bool routed : {false, true})
        for (bool biased : {false, true}) {
          int64_t slots = c.slots;
          testutil::Mxfp4TestExperts w =
              c.extreme == 1 ? testutil::randomMxfp4Experts(
                                   rng, c.experts, c.n, c.k,
                                   {0, 1, 2, 120, 127, 200, 253, 254})
              : c.extreme == 2
                  ? testutil::randomMxfp4Experts(
                        rng, c.experts, c.n, c.k,
                        {0, 1, 2, 120, 127, 200, 251, 252})
                  : testutil::randomMxfp4Experts(rng, c.experts, c.n, c.k);
          if (c.extreme)
            w.scales[5] = 0xFF;
          auto x = random(c.tokens * (perSlot ? slots : 1) * c.k);
          if (c.extreme)
            for (float &v : x)
              v = std::ldexp(v, -24);
          auto routing = random(c.tokens * slots, -1, 1);
          std::vector<int32_t> indices(c.tokens * slots);
          int64_t choices = c.crowd ? c.crowd : c.experts;
          for (auto &i : indices)
            i = int32_t(rng() % (choices + 1)) - 1; // some -1
          // bf16 bias, as gpt-oss stores it.
          std::vector<uint16_t> bias16;
          std::vector<float> bias;
          if (biased)
            for (float b : random(c.experts * c.n, -2, 2)) {
              bias16.push_back(numerics::floatToBf16(b));
              bias.push_back(numerics::bf16ToFloat(bias16.back()));
            }
          testutil::Mxfp4Expected expected = testutil::mxfp4Expected(
              w, x, perSlot, bias, indices, c.tokens, slots,
              routed ? routing : std::vector<float>());
          int64_t outRows = routed ? c.tokens : c.tokens * slots;
          std::vector<float> cpuOut(outRows * c.n);
          cpu::Mxfp4Weights hw;
          hw.values = w.values.data();
          hw.scales = w.scales.data();
          cpu::WeightView hb;
          if (biased) {
            hb.data = bias16.data();
            hb.type = cpu::WeightType::BF16;
          }
          Status status = cpu::mxfp4ExpertMatmul(
              pool, x.data(), perSlot, hw, hb, c.experts, c.n, c.k,
              indices.data(), c.tokens, slots,
              routed ? routing.data() : nullptr, cpuOut.data());
          ASSERT_TRUE(status.ok()) << status.message();

          Buffer dx(*driver, x), dv(*driver, w.values), ds(*driver, w.scales),
              dBias(*driver, bias16), dIdx(*driver, indices),
              dR(*driver, routing), dOut(*driver, cpuOut.size() * 4);
          DeviceWeight gb;
          if (biased) {
            gb.data = dBias;
            gb.type = 1;
          }
          expectRan(kernels->mxfp4ExpertMatmul(
              dx, perSlot, dv, ds, gb, c.experts, c.n, c.k, dIdx, c.tokens,
              slots, routed ? dR.get() : 0, dOut, nullptr));
          std::vector<float> gpuOut = dOut.read<float>(cpuOut.size());

          char shape[96];
          std::snprintf(
              shape, sizeof(shape),
              "E=%ld N=%ld K=%ld T=%ld top-%ld perSlot=%d routed=%d bias=%d%s",
              long(c.experts), long(c.n), long(c.k), long(c.tokens),
              long(slots), perSlot, routed, biased,
              c.extreme ? " extreme"
              : c.crowd ? " crowded"
                        : "");
          // A kernel's output: within the bound of the exact value, and
          // within twice it of the CPU's (each is within it).
          auto check = [&](const std::vector<float> &out, const char *kernel,
                           const char *label) {
            int64_t bad = testutil::firstOutOfBound(out, expected);
            EXPECT_EQ(bad, -1)
                << shape << ": " << kernel << " element " << bad << " is "
                << out[std::max<int64_t>(bad, 0)] << ", exact "
                << expected.exact[std::max<int64_t>(bad, 0)];
            double worst = 0;
            for (size_t i = 0; i < out.size(); ++i) {
              if (std::isnan(cpuOut[i]) || std::isnan(out[i])) {
                EXPECT_EQ(std::isnan(cpuOut[i]), std::isnan(out[i]))
                    << shape << " " << kernel << " element " << i;
                continue;
              }
              double diff = std::fabs(double(out[i]) - cpuOut[i]);
              EXPECT_LE(diff, 2 * expected.bound[i])
                  << shape << " " << kernel << " element " << i;
              worst =
                  std::max(worst, diff / std::max(expected.bound[i], 1e-300));
            }
            report(label, shape, worst); // |gpu - cpu| / bound
          };
          check(gpuOut, "gpu", "mxfp4 (of bound)");

          // The CUDA-core kernel forced, in its staged form (where it
          // applies: N a multiple of 8, K of 64) and not: the same sums in
          // the same order, so the same bits.
          std::vector<float> coreOut[2];
          for (bool staged : {true, false}) {
            Buffer dCore(*driver, cpuOut.size() * 4);
            ASSERT_EQ(driver->cuMemsetD8(dCore.get(), 0xff, cpuOut.size() * 4),
                      CUDA_SUCCESS);
            expectRan(kernels->withMxfp4Kernel(Mxfp4Kernel::CudaCores)
                          .withMxfp4Staging(staged)
                          .mxfp4ExpertMatmul(dx, perSlot, dv, ds, gb, c.experts,
                                             c.n, c.k, dIdx, c.tokens, slots,
                                             routed ? dR.get() : 0, dCore,
                                             nullptr));
            coreOut[staged] = dCore.read<float>(cpuOut.size());
            check(coreOut[staged], staged ? "staged" : "unstaged",
                  staged ? "mxfp4 staged (of bound)"
                         : "mxfp4 unstaged (of bound)");
          }
          EXPECT_EQ(0, std::memcmp(coreOut[0].data(), coreOut[1].data(),
                                   coreOut[0].size() * sizeof(float)))
              << shape << ": staged and unstaged differ";

          // The grouped warpgroup GEMM, forced, exact (x in three bf16
          // parts) and with --precision=bf16's one part against x rounded
          // on the host. Its products are exact (a bf16 part times an
          // E2M1 value times its scale, widened exactly), its sums the
          // tensor cores' fp32 over all of K: 3 K (or K) products a term,
          // K / 64 stages and the bias, each at most an ulp (2u: the
          // tensor cores may truncate), then the routed sum.
          if (CudaKernels::mxfp4WarpgroupApplies(c.experts, c.n, c.k, dx, dv) &&
              c.extreme != 1) {
            int64_t pairs = c.tokens * slots;
            int64_t groupBytes =
                expertGemmScratchBytes(c.tokens, slots, c.experts, c.n, routed);
            Buffer dGroup(*driver, groupBytes),
                dParts(*driver, (3 * pairs * c.k + 1) / 2 * 4 + 16),
                dGemm(*driver, cpuOut.size() * 4);
            // The exact form's expectation, which Auto's check below reuses.
            testutil::Mxfp4Expected exactWide;
            for (bool bf16 : {false, true}) {
              std::vector<float> xr = x;
              if (bf16)
                for (float &v : xr)
                  v = numerics::bf16ToFloat(numerics::floatToBf16(v));
              testutil::Mxfp4Expected wide = testutil::mxfp4Expected(
                  w, xr, perSlot, bias, indices, c.tokens, slots,
                  routed ? routing : std::vector<float>(),
                  2 * ((bf16 ? 1 : 3) * c.k + c.k / 64 + 2));
              if (!bf16)
                exactWide = wide;
              // Poisoned (NaN): every output must be written.
              ASSERT_EQ(
                  driver->cuMemsetD8(dGemm.get(), 0xff, cpuOut.size() * 4),
                  CUDA_SUCCESS);
              expectRan(kernels->withMxfp4Kernel(Mxfp4Kernel::WarpgroupGemm)
                            .mxfp4ExpertMatmul(
                                dx, perSlot, dv, ds, gb, c.experts, c.n, c.k,
                                dIdx, c.tokens, slots, routed ? dR.get() : 0,
                                dGemm, nullptr, dGroup, groupBytes,
                                InputRounding{bf16, dParts,
                                              (3 * pairs * c.k + 1) / 2}));
              std::vector<float> out = dGemm.read<float>(cpuOut.size());
              int64_t bad = testutil::firstOutOfBound(out, wide);
              EXPECT_EQ(bad, -1) << shape << (bf16 ? " bf16" : " exact")
                                 << ": warpgroup GEMM element " << bad << " is "
                                 << out[std::max<int64_t>(bad, 0)] << ", exact "
                                 << wide.exact[std::max<int64_t>(bad, 0)];
              double worst = 0;
              for (size_t i = 0; i < out.size(); ++i)
                if (!std::isnan(out[i]) && !std::isnan(wide.exact[i]))
                  worst = std::max(worst, std::fabs(out[i] - wide.exact[i]) /
                                              std::max(wide.bound[i], 1e-300));
              report(bf16 ? "mxfp4 warpgroup bf16 (of bound)"
                          : "mxfp4 warpgroup exact (of bound)",
                     shape, worst);
            }
            // Auto takes it past the GEMV's pairs, given the scratch.
            if (pairs >= kMxfp4WarpgroupMinPairs) {
              ASSERT_EQ(
                  driver->cuMemsetD8(dGemm.get(), 0xff, cpuOut.size() * 4),
                  CUDA_SUCCESS);
              expectRan(kernels->mxfp4ExpertMatmul(
                  dx, perSlot, dv, ds, gb, c.experts, c.n, c.k, dIdx, c.tokens,
                  slots, routed ? dR.get() : 0, dGemm, nullptr, dGroup,
                  groupBytes,
                  InputRounding{false, dParts, (3 * pairs * c.k + 1) / 2}));
              EXPECT_EQ(testutil::firstOutOfBound(
                            dGemm.read<float>(cpuOut.size()), exactWide),
                        -1)
                  << shape << ": Auto at " << pairs << " pairs";
            }
          }

          // The tensor-core GEMV where it applies (K a multiple of 64, at
          // most 256 pairs): the same bounds. Its products are exact (f16
          // E2M1 values times x in three f16 parts, scaled per 256 columns
          // by a power of two), its sums fewer than the bound's 32 + G + 2
          // a term even at the tensor cores' truncating 2u each: two
          // mma steps a block (six with three tiles), the block sums, the
          // groups and the bias.
          if (!CudaKernels::mxfp4ExpertGemvApplies(c.experts, c.n, c.k,
                                                   c.tokens, slots, dx, dv, ds))
            continue;
          Buffer dScratch(*driver,
                          expertGemvScratchBytes(c.tokens, slots, c.n, true)),
              dTensor(*driver, cpuOut.size() * 4);
          expectRan(
              kernels->withMxfp4Kernel(Mxfp4Kernel::TensorCores)
                  .mxfp4ExpertMatmul(
                      dx, perSlot, dv, ds, gb, c.experts, c.n, c.k, dIdx,
                      c.tokens, slots, routed ? dR.get() : 0, dTensor, nullptr,
                      dScratch,
                      expertGemvScratchBytes(c.tokens, slots, c.n, true)));
          check(dTensor.read<float>(cpuOut.size()), "tensor-core",
                "mxfp4 tensor cores (of bound)");
        }
}

TEST(CudaKernelRules, Mxfp4AutoTakesTensorCoresFromItsCrossing) {
  // Mxfp4Kernel::Auto's rule (no GPU): the tensor-core GEMV where the
  // pairs a distinct expert expected of uniform routing reach the measured
  // cost ratio. A token alone picks each expert once, so never; all
  // pairs on one expert, always; gpt-oss-120b (128 experts, top-4) and
  // gpt-oss-20b (32) cross where CudaKernels.h says, and stay crossed.
  EXPECT_FALSE(mxfp4TensorPays(128, 1, 4));
  EXPECT_FALSE(mxfp4TensorPays(32, 1, 4));
  EXPECT_TRUE(mxfp4TensorPays(1, 2, 1));
  EXPECT_FALSE(mxfp4TensorPays(0, 8, 4));
  EXPECT_FALSE(mxfp4TensorPays(128, 15, 4));
  EXPECT_TRUE(mxfp4TensorPays(128, 16, 4));
  EXPECT_FALSE(mxfp4TensorPays(32, 4, 4));
  EXPECT_TRUE(mxfp4TensorPays(32, 5, 4));
  for (int64_t tokens = 16; tokens <= kExpertGemvMaxPairs / 4; ++tokens)
    EXPECT_TRUE(mxfp4TensorPays(128, tokens, 4)) << tokens << " tokens";
}

TEST(CudaKernelRules, Mxfp4StagedFormWhereItsStagesFit) {
  // Where the CUDA-core MXFP4 kernel's staged form applies (no GPU): a
  // stage is an expert's 8 rows of K / 2 value bytes and K / 32 scale bytes
  // (12,240 at gpt-oss's K = 2880), up to four beside the launch's sums in
  // 72 KiB, at least two. gpt-oss-120b's T = 1 gate/up (4 pairs, 3 parts:
  // 384 bytes of sums, 32 of lists) takes four; T = 64 (256 pairs: 24,576
  // + 1,536) three; K = 7168 (30,464 a stage) two.
  EXPECT_EQ(mxfp4StagedStages(5760, 2880, 416, true), 4);
  EXPECT_EQ(mxfp4StagedStages(2880, 2880, 416, true), 4);
  EXPECT_EQ(mxfp4StagedStages(5760, 2880, 26112, true), 3);
  EXPECT_EQ(mxfp4StagedStages(16, 7168, 5508, true), 2);
  // Two stages no longer fit beside 49,000 bytes of sums at K = 2880.
  EXPECT_EQ(mxfp4StagedStages(5760, 2880, 49000, true), 2);
  EXPECT_EQ(mxfp4StagedStages(5760, 2880, 49300, true), 0);
  // N off the 8 rows, K off 64, unaligned pointers.
  EXPECT_EQ(mxfp4StagedStages(20, 2880, 416, true), 0);
  EXPECT_EQ(mxfp4StagedStages(5760, 2912, 416, true), 0);
  EXPECT_EQ(mxfp4StagedStages(5760, 2880, 416, false), 0);
}

TEST(CudaKernelRules, Mxfp4WarpgroupGemmAndItsScratch) {
  // Where the grouped MXFP4 warpgroup GEMM applies and the rounding scratch
  // the device plans for it (no GPU). It needs K a multiple of 32 (16-byte
  // rows of packed values), x and the values 16-byte aligned, 1 to 4096
  // experts. gpt-oss-120b's gate/up at 1K tokens (4096 pairs) gathers x as
  // three bf16 parts, a pair a row: 3 x 4096 x 2880 bf16 = 17,694,720
  // floats; one part under --precision=bf16: 5,898,240. Below 257 pairs
  // (64 tokens x 4) the GEMVs take x as it is: nothing in the exact
  // default, the fp32 copy of x rounded under bf16 (64 x 2880; per slot,
  // 256 x 2880).
  EXPECT_TRUE(CudaKernels::mxfp4WarpgroupApplies(128, 5760, 2880, 0, 0));
  EXPECT_TRUE(CudaKernels::mxfp4WarpgroupApplies(3, 5, 32, 256, 512));
  EXPECT_FALSE(CudaKernels::mxfp4WarpgroupApplies(128, 5760, 2896, 0, 0));
  EXPECT_FALSE(CudaKernels::mxfp4WarpgroupApplies(128, 5760, 2880, 8, 0));
  EXPECT_FALSE(CudaKernels::mxfp4WarpgroupApplies(128, 5760, 2880, 0, 8));
  EXPECT_FALSE(CudaKernels::mxfp4WarpgroupApplies(0, 5760, 2880, 0, 0));
  EXPECT_FALSE(CudaKernels::mxfp4WarpgroupApplies(4097, 64, 2880, 0, 0));
  EXPECT_FALSE(
      CudaKernels::mxfp4WarpgroupApplies(4096, int64_t(1) << 19, 64, 0, 0));

  EXPECT_EQ(CudaKernels::mxfp4RoundingFloats(128, 5760, 2880, 1024, 4, false,
                                             false, true),
            17694720);
  EXPECT_EQ(CudaKernels::mxfp4RoundingFloats(128, 5760, 2880, 1024, 4, false,
                                             true, true),
            5898240);
  EXPECT_EQ(CudaKernels::mxfp4RoundingFloats(128, 5760, 2880, 64, 4, false,
                                             false, true),
            0);
  EXPECT_EQ(CudaKernels::mxfp4RoundingFloats(128, 5760, 2880, 64, 4, false,
                                             true, true),
            64 * 2880);
  EXPECT_EQ(CudaKernels::mxfp4RoundingFloats(128, 2880, 2880, 64, 4, true, true,
                                             true),
            256 * 2880);
  // x not 16-byte aligned: the GEMM does not apply, the fallback's need.
  EXPECT_EQ(CudaKernels::mxfp4RoundingFloats(128, 5760, 2880, 1024, 4, false,
                                             false, false),
            0);
  EXPECT_EQ(CudaKernels::mxfp4RoundingFloats(128, 5760, 2880, 1024, 4, false,
                                             true, false),
            1024 * 2880);
  // Auto's threshold: the GEMV's most pairs plus one.
  EXPECT_EQ(kMxfp4WarpgroupMinPairs, kExpertGemvMaxPairs + 1);
}

TEST_F(CudaKernelsTest, Mxfp4ToFp8Experts) {
  // The MXFP4 online route's conversion against the CPU kernel (itself
  // checked exhaustively and against the reference in Mxfp4RoutesTest):
  // every code and every E8M0 byte (255 included), gpt-oss's K = 2880 and
  // K of one block, bf16 bias and none; selections with -1 slots, one
  // expert, none, and every expert (T x k > E). Codes, scales and bias rows
  // of the used slots and the remapped indices must be identical (the
  // conversion is exact: no tolerance). Then the FP8 expert matmul on the
  // workspace (block [1, 32], the slots' bias) against the CPU's. And the
  // overlapped conversion's modes: every expert into its own slot (All),
  // and the indices as slots (SlotsOnly), identical to the CPU's.
  struct Case {
    int64_t experts, n, k;
  };
  std::vector<uint8_t> everyByte(256);
  for (int b = 0; b < 256; ++b)
    everyByte[b] = uint8_t(b);
  for (Case c : {Case{5, 70, 2880}, Case{9, 33, 32}})
    for (bool biased : {false, true}) {
      testutil::Mxfp4TestExperts w =
          testutil::randomMxfp4Experts(rng, c.experts, c.n, c.k, everyByte);
      std::vector<uint16_t> bias16;
      for (float b : random(c.experts * c.n, -2, 2))
        bias16.push_back(numerics::floatToBf16(b));
      int64_t slots = 4;
      std::vector<std::vector<int32_t>> selections = {
          {-1, -1, -1, -1},
          {3, -1, 3, -1, -1, 3, 3, -1},
          {2, -1, 0, 4, 4, 2, -1, 1},
      };
      std::vector<int32_t> every;
      for (int64_t i = 0; i < 3 * c.experts; ++i)
        every.push_back(int32_t(i % c.experts));
      every.resize((every.size() + slots - 1) / slots * slots, -1);
      selections.push_back(every);
      {
        cpu::WeightView hb;
        DeviceWeight gb;
        Buffer dBias(*driver, bias16);
        if (biased) {
          hb.data = bias16.data();
          hb.type = cpu::WeightType::BF16;
          gb.data = dBias;
          gb.type = 1;
        }
        int64_t e = c.experts, groups = c.k / 32;
        std::vector<uint8_t> codes(e * c.n * c.k);
        std::vector<float> scales(e * c.n * groups), bias(e * c.n);
        ASSERT_TRUE(cpu::mxfp4ToFp8Experts(
                        pool, {w.values.data(), w.scales.data()}, hb, e, c.n,
                        c.k, nullptr, 0, 0, e, codes.data(), scales.data(),
                        bias.data(), nullptr, runtime::Mxfp4ConvertMode::All)
                        .ok());
        Buffer dv(*driver, w.values), ds(*driver, w.scales),
            dCodes(*driver, codes.size()), dScales(*driver, scales.size() * 4),
            dSlotBias(*driver, bias.size() * 4);
        expectRan(kernels->mxfp4ToFp8Experts(
            dv, ds, gb, e, c.n, c.k, 0, 0, 0, e, dCodes, dScales, dSlotBias, 0,
            nullptr, runtime::Mxfp4ConvertMode::All));
        ASSERT_EQ(dCodes.read<uint8_t>(codes.size()), codes);
        std::vector<float> gpuScales = dScales.read<float>(scales.size());
        for (size_t i = 0; i < scales.size(); ++i)
          ASSERT_TRUE(std::memcmp(&gpuScales[i], &scales[i], 4) == 0 ||
                      (std::isnan(gpuScales[i]) && std::isnan(scales[i])))
              << "all experts: scale " << i;
        ASSERT_EQ(dSlotBias.read<float>(bias.size()), bias);
        // A workspace of fewer slots than experts is refused.
        EXPECT_FALSE(kernels
                         ->mxfp4ToFp8Experts(dv, ds, gb, e, c.n, c.k, 0, 0, 0,
                                             e - 1, dCodes, dScales, dSlotBias,
                                             0, nullptr,
                                             runtime::Mxfp4ConvertMode::All)
                         .ok());
        // The indices as slots: the CPU's, -1 kept, and nothing converted.
        std::vector<int32_t> indices = {2, -1, 0, int32_t(e - 1), -1, -1, 1, 1};
        std::vector<int32_t> remapped(indices.size());
        ASSERT_TRUE(
            cpu::mxfp4ToFp8Experts(pool, {w.values.data(), w.scales.data()}, hb,
                                   e, c.n, c.k, indices.data(), 2, slots, e,
                                   nullptr, nullptr, nullptr, remapped.data(),
                                   runtime::Mxfp4ConvertMode::SlotsOnly)
                .ok());
        Buffer dIdx(*driver, indices), dRemapped(*driver, remapped.size() * 4);
        std::vector<uint8_t> zeros(codes.size());
        Buffer dUntouched(*driver, zeros);
        expectRan(kernels->mxfp4ToFp8Experts(
            dv, ds, gb, e, c.n, c.k, dIdx, 2, slots, e, dUntouched, dScales,
            dSlotBias, dRemapped, nullptr,
            runtime::Mxfp4ConvertMode::SlotsOnly));
        ASSERT_EQ(dRemapped.read<int32_t>(remapped.size()), remapped);
        EXPECT_EQ(remapped[1], -1);
        ASSERT_EQ(dUntouched.read<uint8_t>(zeros.size()), zeros);
      }
      for (const std::vector<int32_t> &indices : selections) {
        int64_t tokens = int64_t(indices.size()) / slots;
        int64_t ws = std::min<int64_t>(c.experts, tokens * slots);
        int64_t groups = c.k / 32;
        std::vector<uint8_t> codes(ws * c.n * c.k);
        std::vector<float> scales(ws * c.n * groups), bias(ws * c.n);
        std::vector<int32_t> remapped(indices.size());
        cpu::WeightView hb;
        if (biased) {
          hb.data = bias16.data();
          hb.type = cpu::WeightType::BF16;
        }
        Status status = cpu::mxfp4ToFp8Experts(
            pool, {w.values.data(), w.scales.data()}, hb, c.experts, c.n, c.k,
            indices.data(), tokens, slots, ws, codes.data(), scales.data(),
            bias.data(), remapped.data());
        ASSERT_TRUE(status.ok()) << status.message();
        Buffer dv(*driver, w.values), ds(*driver, w.scales),
            dBias(*driver, bias16), dIdx(*driver, indices),
            dCodes(*driver, codes.size()), dScales(*driver, scales.size() * 4),
            dSlotBias(*driver, bias.size() * 4),
            dRemapped(*driver, remapped.size() * 4);
        DeviceWeight gb;
        if (biased) {
          gb.data = dBias;
          gb.type = 1;
        }
        expectRan(kernels->mxfp4ToFp8Experts(
            dv, ds, gb, c.experts, c.n, c.k, dIdx, tokens, slots, ws, dCodes,
            dScales, dSlotBias, dRemapped, nullptr));
        std::vector<int32_t> gpuRemapped =
            dRemapped.read<int32_t>(remapped.size());
        ASSERT_EQ(gpuRemapped, remapped);
        int64_t used = 0;
        for (int32_t r : remapped)
          used = std::max<int64_t>(used, r + 1);
        std::vector<uint8_t> gpuCodes = dCodes.read<uint8_t>(codes.size());
        std::vector<float> gpuScales = dScales.read<float>(scales.size());
        std::vector<float> gpuBias = dSlotBias.read<float>(bias.size());
        for (int64_t i = 0; i < used * c.n * c.k; ++i)
          ASSERT_EQ(gpuCodes[i], codes[i]) << "code " << i;
        for (int64_t i = 0; i < used * c.n * groups; ++i)
          ASSERT_EQ(std::memcmp(&gpuScales[i], &scales[i], 4) == 0 ||
                        (std::isnan(gpuScales[i]) && std::isnan(scales[i])),
                    true)
              << "scale " << i;
        for (int64_t i = 0; i < used * c.n; ++i)
          ASSERT_EQ(gpuBias[i], bias[i]) << "bias row value " << i;

        // The FP8 expert matmul on the workspace, routed, with the bias.
        auto x = random(tokens * c.k, -1, 1);
        for (float &v : x)
          v = std::ldexp(v, -20); // no block overflows at byte 254
        auto routing = random(tokens * slots, -1, 1);
        std::vector<float> cpuOut(tokens * c.n);
        cpu::WeightView fp8;
        fp8.data = codes.data();
        fp8.type = cpu::WeightType::F8E4M3;
        fp8.scales = scales.data();
        fp8.blockN = 1;
        fp8.blockK = 32;
        ASSERT_TRUE(cpu::expertMatmul(pool, x.data(), false, fp8, ws, c.n, c.k,
                                      remapped.data(), tokens, slots,
                                      routing.data(), cpuOut.data(),
                                      cpu::WeightView::f32(bias.data()))
                        .ok());
        Buffer dx(*driver, x), dR(*driver, routing),
            dOut(*driver, cpuOut.size() * 4);
        DeviceWeight gw;
        gw.data = dCodes;
        gw.type = 2;
        gw.scales = dScales;
        gw.blockN = 1;
        gw.blockK = 32;
        expectRan(kernels->expertMatmul(dx, false, gw, ws, c.n, c.k, dRemapped,
                                        tokens, slots, dR, dOut, nullptr,
                                        DeviceWeight::f32(dSlotBias)));
        std::vector<float> gpuOut = dOut.read<float>(cpuOut.size());
        for (size_t i = 0; i < gpuOut.size(); ++i) {
          // Bytes 253 and 254 make some weights infinite (docs/mxfp4.md), 255
          // NaN: both devices must agree on what is not finite.
          if (!std::isfinite(cpuOut[i]) || !std::isfinite(gpuOut[i])) {
            EXPECT_TRUE((std::isnan(cpuOut[i]) && std::isnan(gpuOut[i])) ||
                        cpuOut[i] == gpuOut[i])
                << "output " << i << ": " << cpuOut[i] << " vs " << gpuOut[i];
            continue;
          }
          // Two fp32 summation orders of K products, the bias and the
          // slots: gamma_(K + 2 + slots) of the sum of magnitudes each,
          // bounded here by that of the CPU result's largest term sum.
          double magnitude = 0;
          for (int64_t s = 0; s < slots; ++s) {
            int64_t e = indices[(i / c.n) * slots + s];
            if (e < 0)
              continue;
            int64_t slot = remapped[(i / c.n) * slots + s];
            double sum = std::fabs(bias[slot * c.n + i % c.n]);
            for (int64_t p = 0; p < c.k; ++p)
              sum +=
                  std::fabs(double(x[(i / c.n) * c.k + p]) *
                            numerics::e4m3ToFloat(
                                codes[(slot * c.n + i % c.n) * c.k + p]) *
                            scales[(slot * c.n + i % c.n) * groups + p / 32]);
            magnitude += std::fabs(routing[(i / c.n) * slots + s]) * sum;
          }
          double rounds = double(c.k + 4 + slots);
          double gamma = rounds * std::ldexp(1.0, -24) /
                         (1 - rounds * std::ldexp(1.0, -24));
          EXPECT_LE(std::fabs(double(gpuOut[i]) - cpuOut[i]),
                    2 * gamma * magnitude + std::ldexp(1.0, -140))
              << "output " << i;
        }
      }
    }
}

/// A paged cache on both sides: the CPU view over host bytes and the device
/// view over a copy. Batch 2, a non-identity page table.
struct TestCache {
  cpu::CacheView host;
  std::vector<uint8_t> bytes;
  std::vector<int32_t> pageTable;
  std::optional<Buffer> dBytes, dTable;

  /// Paged through a shuffled page table, or with `ringRows` a ring of
  /// that many rows per sequence (a window cache: page size 1, no table).
  TestCache(cpu::CacheFormat format, int64_t width, int64_t tailDim,
            int64_t scaleBlock, int64_t maxSeqLen, int64_t pageSize,
            std::mt19937 &rng, int64_t ringRows = 0, int64_t batch = 2) {
    host.format = format;
    host.width = width;
    host.tailDim = tailDim;
    host.scaleBlock = scaleBlock;
    host.bytesPerRow =
        cpu::cacheBytesPerRow(format, width, tailDim, scaleBlock);
    host.batch = batch;
    host.maxSeqLen = maxSeqLen;
    host.pageSize = ringRows ? 1 : pageSize;
    host.ringRows = ringRows;
    int64_t rows = host.batch * ringRows;
    if (!ringRows) {
      int64_t pages = host.batch * host.pagesPerSeq();
      pageTable.resize(pages);
      std::iota(pageTable.begin(), pageTable.end(), 0);
      std::shuffle(pageTable.begin(), pageTable.end(), rng);
      rows = pages * pageSize;
      host.pageTable = pageTable.data();
    }
    bytes.resize(rows * host.bytesPerRow);
    for (auto &b : bytes)
      b = uint8_t(rng());
    host.base = bytes.data();
  }
  /// Fills every row with values of varied magnitude (per 64-wide span).
  void fill(std::mt19937 &rng) {
    std::uniform_real_distribution<float> dist(-1, 1);
    std::vector<float> row(host.width);
    for (int64_t s = 0; s < host.batch; ++s)
      for (int64_t p = 0; p < host.maxSeqLen; ++p) {
        for (int64_t i = 0; i < host.width; ++i)
          row[i] = dist(rng) * std::pow(10.0f, float((i / 64 + p) % 5) - 2);
        host.write(s, p, row.data());
      }
  }
  DeviceCacheView upload(const Driver &driver) {
    dBytes.emplace(driver, bytes);
    dTable.emplace(driver, pageTable);
    DeviceCacheView v;
    v.base = *dBytes;
    v.format = host.format;
    v.width = host.width;
    v.tailDim = host.tailDim;
    v.scaleBlock = host.scaleBlock;
    v.bytesPerRow = host.bytesPerRow;
    v.batch = host.batch;
    v.maxSeqLen = host.maxSeqLen;
    v.pageSize = host.pageSize;
    v.pageTable = *dTable;
    v.ringRows = host.ringRows;
    return v;
  }
};

const char *formatName(cpu::CacheFormat f) {
  return f == cpu::CacheFormat::F32    ? "f32"
         : f == cpu::CacheFormat::BF16 ? "bf16"
                                       : "fp8";
}

TEST_F(CudaKernelsTest, CacheWrite) {
  for (auto format : {cpu::CacheFormat::F32, cpu::CacheFormat::BF16,
                      cpu::CacheFormat::Fp8Scaled}) {
    bool fp8 = format == cpu::CacheFormat::Fp8Scaled;
    TestCache cache(format, fp8 ? 576 : 96, fp8 ? 64 : 0, fp8 ? 128 : 0, 40, 16,
                    rng);
    int64_t tokens = 12, width = cache.host.width;
    std::vector<float> values(tokens * width);
    std::uniform_real_distribution<float> dist(-1, 1);
    // Magnitudes from 1e-7 (the 1e-4 amax floor, e4m3 subnormals) to 3e3.
    for (int64_t t = 0; t < tokens; ++t)
      for (int64_t i = 0; i < width; ++i)
        values[t * width + i] =
            dist(rng) * std::pow(10.0f, float((i / 128 + t) % 11) - 7);
    values[5] = 0.0f;
    values[width + 7] = -0.0f;
    std::vector<int32_t> slots = {0, 39, 17, -1, 17, 5, 33, 16, 15, 2, 17, 38};
    std::vector<int32_t> seqs = {0, 1, 1, 0, 1, 0, 1, 0, 1, 1, 0, 0};
    DeviceCacheView view = cache.upload(*driver);
    ASSERT_TRUE(cpu::cacheWrite(pool, cache.host, values.data(), slots.data(),
                                seqs.data(), tokens)
                    .ok());
    Buffer dValues(*driver, values), dSlots(*driver, slots),
        dSeqs(*driver, seqs);
    expectRan(
        kernels->cacheWrite(view, dValues, dSlots, dSeqs, tokens, nullptr));
    auto got = cache.dBytes->read<uint8_t>(cache.bytes.size());
    int64_t mismatches = 0;
    for (size_t i = 0; i < got.size(); ++i)
      mismatches += got[i] != cache.bytes[i];
    report("cacheWrite", formatName(format), double(mismatches));
    EXPECT_EQ(mismatches, 0); // byte-exact codecs
  }
}

TEST_F(CudaKernelsTest, CacheWritePrologue) {
  // The cache write that normalises and rotates its rows
  // (daybreak_cache_write_rows) stores what the norm, rope and plain write
  // kernels it replaces store, byte for byte: the same row code (rmsNormRow,
  // layerNormRow, ropeAngle, storeCacheRow) with the same 256 threads.
  // DeepSeek's latent row (576: RMS over 512, interleaved YaRN RoPE over
  // the last 64), its indexer key (128: layer norm with a bf16 bias, half-
  // split RoPE over the first 64), a norm alone, RoPE alone and RoPE of
  // each head (gpt-oss's 8 key heads of 64); rows from a
  // column view of a wider buffer; skipped and repeated slots. Against the
  // CPU's fused write (fp32 rows): within the norms' fp32 sums.
  struct Case {
    int64_t width, normDim;
    bool layer, bias;
    int64_t ropeOffset, ropeDim;
    bool interleaved, yarn;
    int64_t tail, block;
    int64_t headDim = 0;
  };
  const Case cases[] = {
      {576, 512, false, false, 512, 64, true, true, 64, 128},
      {128, 128, true, true, 0, 64, false, false, 0, 128},
      {96, 64, false, false, 0, 0, false, false, 32, 64},
      {160, 0, false, false, 8, 32, false, true, 32, 64},
      {512, 0, false, false, 0, 64, false, true, 0, 128, 64}}; // gpt-oss
  const int64_t tokens = 12;
  std::vector<int32_t> slots = {0, 39, 17, -1, 17, 5, 33, 16, 15, 2, 17, 38};
  std::vector<int32_t> seqs = {0, 1, 1, 0, 1, 0, 1, 0, 1, 1, 0, 0};
  std::vector<int32_t> positions(tokens);
  for (auto &pos : positions)
    pos = int32_t(rng() % 160000);
  positions[0] = 0;
  Buffer dSlots(*driver, slots), dSeqs(*driver, seqs),
      dPositions(*driver, positions);
  for (const Case &c : cases)
    for (auto format : {cpu::CacheFormat::F32, cpu::CacheFormat::BF16,
                        cpu::CacheFormat::Fp8Scaled}) {
      bool fp8 = format == cpu::CacheFormat::Fp8Scaled;
      const int64_t width = c.width, stride = width + 40;
      std::vector<float> values = random(tokens * width, -3, 3);
      std::vector<float> wide(tokens * stride, 1e30f);
      for (int64_t t = 0; t < tokens; ++t)
        std::copy_n(values.data() + t * width, width,
                    wide.data() + t * stride + 8);
      std::vector<float> weight = random(width, 0.5, 1.5);
      std::vector<uint16_t> bias(width);
      std::vector<float> biasValues = random(width);
      for (int64_t i = 0; i < width; ++i)
        bias[i] = numerics::floatToBf16(biasValues[i]);
      Buffer dValues(*driver, values), dWide(*driver, wide),
          dRows(*driver, values), dWeight(*driver, weight),
          dBias(*driver, bias);

      runtime::CacheWritePrologue p;
      if (c.normDim) {
        p.norm = c.layer ? runtime::CacheWritePrologue::Norm::Layer
                         : runtime::CacheWritePrologue::Norm::Rms;
        p.normDim = c.normDim;
        p.eps = 1e-6;
      }
      if (c.ropeDim) {
        p.rope = true;
        p.ropeParams.interleaved = c.interleaved;
        p.ropeParams.offset = c.ropeOffset;
        p.ropeParams.dim = c.ropeDim;
        p.ropeParams.yarn = c.yarn;
        p.ropeParams.factor = 40;
        p.ropeParams.attentionFactor = c.yarn ? 1.25 : 1.0;
        p.ropeHeadDim = c.headDim;
      }
      DeviceWeight dw = DeviceWeight::f32(dWeight), db;
      if (c.bias) {
        db.data = dBias;
        db.type = 1; // bf16
      }
      CacheWritePrologueArgs args;
      args.params = p;
      args.weight = c.normDim ? dw : DeviceWeight();
      args.bias = db;
      args.positions = dPositions;

      // Two caches of the same random bytes: the ops' and the fused write's.
      std::mt19937 r1 = rng, r2 = rng;
      int64_t tail = fp8 ? c.tail : 0, block = fp8 ? c.block : 0;
      TestCache ops(format, width, tail, block, 40, 16, r1);
      TestCache fused(format, width, tail, block, 40, 16, r2);
      rng = r1;
      DeviceCacheView opsView = ops.upload(*driver);
      DeviceCacheView fusedView = fused.upload(*driver);
      if (p.norm == runtime::CacheWritePrologue::Norm::Rms)
        expectRan(kernels->rmsNorm(dRows, dw, tokens, c.normDim, p.eps, dRows,
                                   nullptr, nullptr, width, width));
      else if (p.norm == runtime::CacheWritePrologue::Norm::Layer)
        expectRan(kernels->layerNorm(dRows, dw, db, tokens, c.normDim, p.eps,
                                     dRows, nullptr, width, width));
      int64_t head = c.headDim ? c.headDim : width;
      if (p.rope)
        expectRan(kernels->rope(dRows, dPositions, tokens, width / head, head,
                                p.ropeParams, nullptr));
      expectRan(
          kernels->cacheWrite(opsView, dRows, dSlots, dSeqs, tokens, nullptr));
      expectRan(kernels->cacheWrite(fusedView, dWide.get() + 8 * sizeof(float),
                                    dSlots, dSeqs, tokens, nullptr, &args,
                                    stride));
      auto expected = ops.dBytes->read<uint8_t>(ops.bytes.size());
      auto got = fused.dBytes->read<uint8_t>(fused.bytes.size());
      int64_t mismatches = 0;
      for (size_t i = 0; i < got.size(); ++i)
        mismatches += got[i] != expected[i];
      std::string shape = std::to_string(width) + " " + formatName(format);
      report("cacheWriteRows", shape.c_str(), double(mismatches));
      EXPECT_EQ(mismatches, 0) << shape;

      if (format != cpu::CacheFormat::F32)
        continue;
      // The CPU's fused write of the same rows, read back as fp32.
      cpu::CacheWritePrologueArgs host;
      host.params = p;
      if (c.normDim)
        host.weight = cpu::WeightView::f32(weight.data());
      if (c.bias) {
        host.bias.data = bias.data();
        host.bias.type = cpu::WeightType::BF16;
      }
      host.positions = positions.data();
      ASSERT_TRUE(cpu::cacheWrite(pool, fused.host, values.data(), slots.data(),
                                  seqs.data(), tokens, &host)
                      .ok());
      std::vector<float> cpuRows(width), gpuRows(width);
      double worst = 0.0;
      for (int64_t t = 0; t < tokens; ++t) {
        if (slots[t] < 0)
          continue;
        fused.host.read(seqs[t], slots[t], cpuRows.data());
        cpu::CacheView deviceHost = fused.host;
        deviceHost.base = got.data();
        deviceHost.read(seqs[t], slots[t], gpuRows.data());
        for (int64_t i = 0; i < width; ++i)
          worst = std::max(worst, double(std::fabs(cpuRows[i] - gpuRows[i])));
      }
      report("cacheWriteRows vs cpu", shape.c_str(), worst);
      EXPECT_LT(worst, 2e-5) << shape; // values ~1: a few fp32 ulps
    }
}

TEST_F(CudaKernelsTest, DsaIndexerScores) {
  for (auto format : {cpu::CacheFormat::F32, cpu::CacheFormat::BF16,
                      cpu::CacheFormat::Fp8Scaled})
    for (auto [dim, heads] :
         {std::pair<int64_t, int64_t>{128, 64}, {128, 4}, {32, 37}, {30, 33}}) {
      bool fp8 = format == cpu::CacheFormat::Fp8Scaled;
      // Scale blocks of FP8 rows divide the quantised width.
      if (fp8 && dim % 32)
        continue;
      int64_t tokens = 3;
      TestCache cache(format, dim, 0, fp8 ? std::min<int64_t>(dim, 64) : 0, 100,
                      16, rng);
      cache.fill(rng);
      auto q = random(tokens * heads * dim), weights = random(tokens * heads);
      std::vector<int32_t> seqs = {0, 1, 1};
      // Bounds: within a block and a warp's 8 keys, at a block's end (64
      // keys a block), past the cache. Heads: one lane's pair (64), fewer
      // than a warp (4), one past a warp (33, 37: the second of a lane's
      // pair absent); widths not a multiple of 4 (30) pad q and keys.
      std::vector<int32_t> bounds = {37, 64, 250};
      DeviceCacheView view = cache.upload(*driver);
      Buffer dq(*driver, q), dw(*driver, weights), dSeqs(*driver, seqs),
          dBounds(*driver, bounds), dOut(*driver, tokens * 100 * 4);
      for (bool bounded : {false, true}) {
        std::vector<float> expected(tokens * 100);
        ASSERT_TRUE(cpu::dsaIndexerScores(pool, q.data(), weights.data(),
                                          cache.host, seqs.data(),
                                          bounded ? bounds.data() : nullptr,
                                          tokens, heads, 0.125, expected.data())
                        .ok());
        std::string specialized =
            "daybreak_dsa_indexer_scores_t<" + std::to_string(dim) + ">";
        for (const std::string &instantiation : {std::string(), specialized}) {
          // Poisoned first: the zeros past a bound must be written.
          ASSERT_EQ(driver->cuMemsetD8(dOut.get(), 0xff, expected.size() * 4),
                    CUDA_SUCCESS);
          CUfunction fn = variant(instantiation);
          if (fn) {
            ASSERT_TRUE(kernels->allowSharedMemory(fn).ok());
          }
          expectRan(kernels->dsaIndexerScores(
              dq, dw, view, dSeqs, bounded ? dBounds.get() : 0, tokens, heads,
              0.125, dOut, nullptr, fn));
          double e = rowRelativeError(dOut.read<float>(expected.size()),
                                      expected, 100);
          char shape[64];
          std::snprintf(shape, sizeof(shape), "%s dim=%ld heads=%ld%s",
                        formatName(format), long(dim), long(heads),
                        bounded ? " bounded" : "");
          report(instantiation.empty() ? "dsaIndexerScores"
                                       : instantiation.c_str(),
                 shape, e);
          EXPECT_LE(e, 1e-5);
        }
      }
    }
}

/// A bound on |gpu - cpu| for each score of the tensor-core indexer
/// against its oracle (cpu::dsaIndexerScores rounding q), u = 2^-24. Both
/// multiply the same bf16(q) by the same keys exactly (f16 keeps bf16(q)
/// times a power of two exactly down to 2^-28 of the head's largest |q|;
/// below that it rounds at 2^-39 of it: the absolute term). The GPU sums a
/// head's dot on the tensor cores: at most 8 k-steps, each adding 16
/// products with truncation (2 roundings of 2u each, on at most the sum
/// of the magnitudes S_h = sum_d |bf16(q_hd) k_d|); then ReLU (1-Lipschitz),
/// the head factor, a pair, three shuffles and at most 8 warps' sums, the
/// scale: 14 roundings on sum_h |w_h| S_h (`headRoundings`; the token-group
/// kernel: a lane's 2 n heads of its n head tiles in turn, a product and an
/// add each, two shuffles, the row scale and the scale: 4 n + 4). The CPU's
/// fp32 GEMM sums D products (D u S_h), then rounds the double sum once.
std::vector<double> indexerTcBound(
    const cpu::CacheView &keys, const std::vector<float> &q,
    const std::vector<float> &weights, const std::vector<int32_t> &seqs,
    const std::vector<int32_t> &bounds, int64_t tokens, int64_t heads,
    double scale, int64_t headRoundings, cpu::ThreadPool &pool) {
  const int64_t dim = keys.width, count = keys.maxSeqLen;
  const double u = std::ldexp(1.0, -24);
  const double gamma =
      (4.0 * double(dim / 16) + double(headRoundings) + double(dim) + 1.0) * u;
  std::vector<double> bound(tokens * count, 0.0);
  pool.parallelFor(tokens, 1, [&](int64_t begin, int64_t end) {
    std::vector<float> key(dim);
    std::vector<double> qr(heads * dim), qmax(heads, 0.0);
    for (int64_t t = begin; t < end; ++t) {
      for (int64_t h = 0; h < heads; ++h)
        for (int64_t d = 0; d < dim; ++d) {
          qr[h * dim + d] =
              std::fabs(numerics::roundToBf16(q[(t * heads + h) * dim + d]));
          qmax[h] = std::max(qmax[h], qr[h * dim + d]);
        }
      int64_t visible = std::clamp<int64_t>(bounds[t], 0, count);
      for (int64_t s = 0; s < visible; ++s) {
        keys.read(seqs[t], s, key.data());
        double kmax = 0.0, total = 0.0;
        for (float k : key)
          kmax = std::max(kmax, double(std::fabs(k)));
        for (int64_t h = 0; h < heads; ++h) {
          double magnitude = 0.0;
          for (int64_t d = 0; d < dim; ++d)
            magnitude += qr[h * dim + d] * std::fabs(key[d]);
          total += std::fabs(weights[t * heads + h]) *
                   (gamma * magnitude +
                    std::ldexp(1.0, -38) * double(dim) * qmax[h] * kmax);
        }
        bound[t * count + s] = std::fabs(scale) * total;
      }
    }
  });
  return bound;
}

TEST_F(CudaKernelsTest, DsaIndexerScoresTensorCores) {
  // The indexer on the tensor cores (daybreak_dsa_indexer_tc_*) against
  // its oracle, the CPU kernel with q rounded to bf16, within the bound
  // indexerTcBound derives (the products are the same exact products of
  // bf16(q) and the keys; the sums differ). bf16 and FP8 rows (one scale a row)
  // of 16 to 128 values; 1 to 128 heads (a partial 16-head tile: 4, 37); 5
  // tokens (one 64-key tile a block) and 600 (chunks of 3 tiles: the
  // double-buffered walk); bounds inside a tile, at its end, at 0 and past the
  // cache; two sequences through a shuffled page table of 16-row pages
  // (a page lookup a key) and of 64-row pages (a lookup a 64-key tile).
  // Both kernels, a block a token and a block a token group (its groups
  // then hold two sequences: a pass each), and 130 tokens of one sequence
  // (a group's one pass; a partial last group). A cache of 20000 rows with
  // rows mostly far shorter (a decode step's grid is sized for the longest
  // row): blocks take every G-th tile of a row, several each at 64
  // tokens, and zero the tiles past the bound.
  // Each result must also differ from the exact kernel's (q was rounded),
  // and an f32 cache, which the tensor cores do not take, must give the
  // exact result.
  for (auto format : {cpu::CacheFormat::BF16, cpu::CacheFormat::Fp8Scaled,
                      cpu::CacheFormat::F32})
    for (auto [dim, heads] : {std::pair<int64_t, int64_t>{128, 64},
                              {128, 128},
                              {32, 4},
                              {64, 37},
                              {16, 1}})
      for (auto [tokens, pageRows, sequences, maxSeqLen] :
           {std::tuple<int64_t, int64_t, int32_t, int64_t>{5, 16, 2, 300},
            {600, 16, 2, 300},
            {5, 64, 2, 300},
            {600, 64, 2, 300},
            {130, 64, 1, 300},
            {5, 64, 2, 20000},
            {64, 64, 2, 20000}})
        for (auto tiles : {CudaKernels::IndexerTiles::PerToken,
                           CudaKernels::IndexerTiles::TokenGroups}) {
          const bool longCache = maxSeqLen > 300;
          if (longCache && (dim != 128 || format == cpu::CacheFormat::F32))
            continue;
          if (format == cpu::CacheFormat::F32 &&
              (dim != 128 || heads != 64 || pageRows != 16 || sequences != 2 ||
               tiles != CudaKernels::IndexerTiles::PerToken))
            continue;
          const bool groups = tiles == CudaKernels::IndexerTiles::TokenGroups;
          bool fp8 = format == cpu::CacheFormat::Fp8Scaled;
          TestCache cache(format, dim, 0, fp8 ? dim : 0, maxSeqLen, pageRows,
                          rng);
          cache.fill(rng);
          auto q = random(tokens * heads * dim),
               weights = random(tokens * heads);
          std::vector<int32_t> seqs(tokens), bounds(tokens);
          for (int64_t t = 0; t < tokens; ++t) {
            seqs[t] = int32_t(t % sequences);
            bounds[t] = int32_t(t == 0       ? 37
                                : t == 1     ? 64
                                : t == 2     ? 0
                                : !longCache ? (t * 53) % 340
                                : t == 3     ? maxSeqLen + 5
                                             : (t * 997) % (maxSeqLen / 4));
          }
          ASSERT_EQ(runtime::indexerTensorCoresApply(cache.host.format, dim, 0,
                                                     cache.host.scaleBlock,
                                                     heads),
                    format != cpu::CacheFormat::F32);
          DeviceCacheView view = cache.upload(*driver);
          Buffer dq(*driver, q), dw(*driver, weights), dSeqs(*driver, seqs),
              dBounds(*driver, bounds), dOut(*driver, tokens * maxSeqLen * 4);
          std::vector<float> expected(tokens * maxSeqLen),
              exact(tokens * maxSeqLen);
          for (auto [out, rounded] :
               {std::pair{&expected, true}, std::pair{&exact, false}})
            ASSERT_TRUE(cpu::dsaIndexerScores(
                            pool, q.data(), weights.data(), cache.host,
                            seqs.data(), bounds.data(), tokens, heads, 0.125,
                            out->data(),
                            rounded ? numerics::OperandRounding::nearestEven()
                                    : numerics::OperandRounding())
                            .ok());
          // Poisoned first: the zeros past a bound must be written.
          ASSERT_EQ(driver->cuMemsetD8(dOut.get(), 0xff, expected.size() * 4),
                    CUDA_SUCCESS);
          expectRan(kernels->dsaIndexerScores(
              dq, dw, view, dSeqs, dBounds, tokens, heads, 0.125, dOut, nullptr,
              nullptr, /*tensorCores=*/true, tiles));
          std::vector<float> out = dOut.read<float>(expected.size());
          char shape[128];
          std::snprintf(shape, sizeof(shape),
                        "%s dim=%ld heads=%ld T=%ld S=%ld pages of %ld, %d "
                        "seq, %s",
                        formatName(format), long(dim), long(heads),
                        long(tokens), long(maxSeqLen), long(pageRows),
                        int(sequences),
                        groups ? "token groups" : "a block a token");
          if (format == cpu::CacheFormat::F32) {
            // The exact kernel: its own test's measure.
            EXPECT_EQ(expected, exact) << shape; // no rounding on f32 rows
            double e = rowRelativeError(out, expected, maxSeqLen);
            report("dsaIndexerScores (tc)", shape, e);
            EXPECT_LE(e, 1e-5) << shape;
            continue;
          }
          std::vector<double> bound = indexerTcBound(
              cache.host, q, weights, seqs, bounds, tokens, heads, 0.125,
              groups ? 4 * (heads > 64 ? 16 : 8) + 4 : 14, pool);
          double worst = 0.0;
          int64_t outside = 0;
          for (size_t i = 0; i < out.size(); ++i) {
            double err = std::fabs(double(out[i]) - double(expected[i]));
            if (!(err <= bound[i])) // NaN counts as outside
              ++outside;
            if (bound[i] > 0)
              worst = std::max(worst, err / bound[i]);
          }
          report("dsaIndexerScores (tc)", shape, worst);
          EXPECT_EQ(outside, 0)
              << shape << ": worst " << worst << " of the bound";
          EXPECT_GT(rowRelativeError(out, exact, maxSeqLen), 1e-5) << shape;
        }
}

TEST_F(CudaKernelsTest, DsaIndexerScoresQueryRope) {
  // The indexer's query prologue (lm.dsa_indexer_scores' rope) in every
  // kernel form against the CPU kernel with the same prologue (cpu::rope's
  // rows scored): the exact kernel (generic and specialised) within 1e-5;
  // the tensor-core kernels, a block a token and in token groups, against
  // the CPU's rotated q rounded to bf16 within indexerTcBound on it. DeepSeek's
  // indexer (64 heads of 128, half-split over [0, 64), YaRN) and interleaved
  // pairs over an inner slice [8, 40) of 4 heads of 64; positions past
  // YaRN's original context; tokens of two sequences.
  struct Case {
    int64_t heads, dim;
    cpu::CacheFormat format;
    bool interleaved;
    int64_t offset, ropeDim, tokens;
  };
  for (Case c : {Case{64, 128, cpu::CacheFormat::Fp8Scaled, false, 0, 64, 3},
                 Case{64, 128, cpu::CacheFormat::Fp8Scaled, false, 0, 64, 70},
                 Case{4, 64, cpu::CacheFormat::BF16, true, 8, 32, 3},
                 Case{4, 64, cpu::CacheFormat::BF16, true, 8, 32, 40},
                 Case{4, 64, cpu::CacheFormat::F32, true, 8, 32, 5}}) {
    const bool fp8 = c.format == cpu::CacheFormat::Fp8Scaled;
    const int64_t maxSeqLen = 300, tokens = c.tokens;
    TestCache cache(c.format, c.dim, 0, fp8 ? c.dim : 0, maxSeqLen, 64, rng);
    cache.fill(rng);
    auto q = random(tokens * c.heads * c.dim),
         weights = random(tokens * c.heads);
    std::vector<int32_t> seqs(tokens), bounds(tokens), positions(tokens);
    for (int64_t t = 0; t < tokens; ++t) {
      seqs[t] = int32_t(t % 2);
      bounds[t] = int32_t(1 + (t * 53) % maxSeqLen);
      positions[t] = int32_t(t == 1 ? 70000 : (t * 997) % 5000);
    }
    cpu::QueryRope rope;
    rope.params.interleaved = c.interleaved;
    rope.params.offset = c.offset;
    rope.params.dim = c.ropeDim;
    rope.params.yarn = !c.interleaved;
    rope.params.factor = 40;
    rope.params.originalMaxPositions = 4096;
    rope.positions = positions.data();
    std::vector<float> rotated = q;
    cpu::rope(pool, rotated.data(), positions.data(), tokens, c.heads, c.dim,
              rope.params);
    DeviceCacheView view = cache.upload(*driver);
    Buffer dq(*driver, q), dw(*driver, weights), dSeqs(*driver, seqs),
        dBounds(*driver, bounds), dPositions(*driver, positions),
        dOut(*driver, tokens * maxSeqLen * 4);
    QueryRopeArgs args{rope.params, dPositions.get()};
    char shape[128];
    std::snprintf(shape, sizeof(shape),
                  "%s heads=%ld dim=%ld T=%ld %s [%ld, +%ld)",
                  formatName(c.format), long(c.heads), long(c.dim),
                  long(tokens), c.interleaved ? "interleaved" : "half_split",
                  long(c.offset), long(c.ropeDim));
    // The exact kernel, generic and specialised.
    std::vector<float> expected(tokens * maxSeqLen);
    ASSERT_TRUE(cpu::dsaIndexerScores(pool, q.data(), weights.data(),
                                      cache.host, seqs.data(), bounds.data(),
                                      tokens, c.heads, 0.125, expected.data(),
                                      {}, &rope)
                    .ok());
    std::string specialized =
        "daybreak_dsa_indexer_scores_t<" + std::to_string(c.dim) + ">";
    for (const std::string &instantiation : {std::string(), specialized}) {
      ASSERT_EQ(driver->cuMemsetD8(dOut.get(), 0xff, expected.size() * 4),
                CUDA_SUCCESS);
      CUfunction fn = variant(instantiation);
      if (fn) {
        ASSERT_TRUE(kernels->allowSharedMemory(fn).ok());
      }
      expectRan(kernels->dsaIndexerScores(
          dq, dw, view, dSeqs, dBounds, tokens, c.heads, 0.125, dOut, nullptr,
          fn, /*tensorCores=*/false, CudaKernels::IndexerTiles::Auto, &args));
      double e = rowRelativeError(dOut.read<float>(expected.size()), expected,
                                  maxSeqLen);
      report(instantiation.empty() ? "dsaIndexerScores + rope"
                                   : "dsaIndexerScores_t + rope",
             shape, e);
      EXPECT_LE(e, 1e-5) << shape;
    }
    if (c.format == cpu::CacheFormat::F32)
      continue; // the tensor cores do not take f32 rows
    std::vector<float> roundedExpected(tokens * maxSeqLen);
    ASSERT_TRUE(
        cpu::dsaIndexerScores(pool, q.data(), weights.data(), cache.host,
                              seqs.data(), bounds.data(), tokens, c.heads,
                              0.125, roundedExpected.data(),
                              numerics::OperandRounding::nearestEven(), &rope)
            .ok());
    for (auto tiles : {CudaKernels::IndexerTiles::PerToken,
                       CudaKernels::IndexerTiles::TokenGroups}) {
      const bool groups = tiles == CudaKernels::IndexerTiles::TokenGroups;
      ASSERT_EQ(driver->cuMemsetD8(dOut.get(), 0xff, expected.size() * 4),
                CUDA_SUCCESS);
      expectRan(kernels->dsaIndexerScores(
          dq, dw, view, dSeqs, dBounds, tokens, c.heads, 0.125, dOut, nullptr,
          nullptr, /*tensorCores=*/true, tiles, &args));
      std::vector<float> out = dOut.read<float>(expected.size());
      std::vector<double> bound = indexerTcBound(
          cache.host, rotated, weights, seqs, bounds, tokens, c.heads, 0.125,
          groups ? 4 * (c.heads > 64 ? 16 : 8) + 4 : 14, pool);
      double worst = 0.0;
      int64_t outside = 0;
      for (size_t i = 0; i < out.size(); ++i) {
        double err = std::fabs(double(out[i]) - double(roundedExpected[i]));
        if (!(err <= bound[i]))
          ++outside;
        if (bound[i] > 0)
          worst = std::max(worst, err / bound[i]);
      }
      report(groups ? "dsaIndexerScores (tc groups) + rope"
                    : "dsaIndexerScores (tc) + rope",
             shape, worst);
      EXPECT_EQ(outside, 0) << shape << ": worst " << worst << " of the bound";
    }
  }
}

TEST_F(CudaKernelsTest, DsaIndexSelect) {
  struct Case {
    int64_t keys, topK;
    bool ties;
  };
  // Rows whose every key is picked list them; others radix-select the k-th
  // key and gather the keys up to it in key order: up to DeepSeek-V3.2's
  // 2048 of 40000 keys, k > 4096 and k of 1.
  for (Case c :
       {Case{50, 16, false}, Case{3000, 2048, false}, Case{3000, 2048, true},
        Case{5000, 2048, false}, Case{5000, 64, true}, Case{1, 4, false},
        Case{40000, 2048, false}, Case{40000, 2048, true},
        Case{9000, 4096, true}, Case{9000, 5000, false}, Case{9000, 1, true},
        Case{131072, 2048, false}}) {
    int64_t tokens = 6;
    std::vector<float> scores(tokens * c.keys);
    for (int64_t t = 0; t < tokens; ++t) {
      // Well separated: a shuffled ramp; with ties: 7 distinct values, NaN
      // and both zeros.
      std::vector<float> row(c.keys);
      for (int64_t i = 0; i < c.keys; ++i)
        row[i] = c.ties ? float(int64_t(rng() % 7) - 3) : float(i) * 0.5f;
      if (!c.ties)
        std::shuffle(row.begin(), row.end(), rng);
      else if (c.keys > 3) {
        row[1] = NAN;
        row[2] = -0.0f;
      }
      std::copy(row.begin(), row.end(), scores.begin() + t * c.keys);
    }
    std::vector<int32_t> bounds = {
        int32_t(c.keys),      0,
        int32_t(c.keys / 2),  int32_t(std::min<int64_t>(c.topK / 2, 3)),
        int32_t(c.keys + 10), -3};
    std::vector<int32_t> expected(tokens * c.topK);
    cpu::dsaIndexSelect(pool, scores.data(), bounds.data(), tokens, c.keys,
                        c.topK, expected.data());
    Buffer dScores(*driver, scores), dBounds(*driver, bounds),
        dOut(*driver, expected.size() * 4);
    expectRan(kernels->dsaIndexSelect(dScores, dBounds, tokens, c.keys, c.topK,
                                      dOut, nullptr));
    auto got = dOut.read<int32_t>(expected.size());
    int64_t mismatches = 0;
    for (size_t i = 0; i < got.size(); ++i)
      mismatches += got[i] != expected[i];
    char shape[64];
    std::snprintf(shape, sizeof(shape), "S=%ld k=%ld ties=%d", long(c.keys),
                  long(c.topK), c.ties);
    report("dsaIndexSelect", shape, double(mismatches));
    // Exact, order included: the set is unique (ties to the lower index)
    // and listed in key order.
    EXPECT_EQ(mismatches, 0);
  }
}

TEST_F(CudaKernelsTest, SparseAttention) {
  for (auto format : {cpu::CacheFormat::F32, cpu::CacheFormat::BF16,
                      cpu::CacheFormat::Fp8Scaled})
    for (int64_t heads : {16, 5})
      for (bool withSinks : {false, true})
        for (bool small : {false, true}) {
          // DeepSeek's latent cache (512 + 64 rope; fp8: 128-wide scale
          // blocks, rope in bf16) and the small fixture's (64 + 16).
          bool fp8 = format == cpu::CacheFormat::Fp8Scaled;
          int64_t width = small ? 80 : 576, valueDim = small ? 64 : 512,
                  rope = small ? 16 : 64, tokens = 4, topK = 37;
          TestCache cache(format, width, fp8 ? rope : 0,
                          fp8 ? (small ? 64 : 128) : 0, 64, 16, rng);
          cache.fill(rng);
          auto q = random(tokens * heads * width, -0.2f, 0.2f);
          auto sinks = random(heads);
          std::vector<int32_t> seqs = {1, 0, 1, 0};
          std::vector<int32_t> indices(tokens * topK);
          for (int64_t i = 0; i < tokens * topK; ++i)
            indices[i] = int32_t(rng() % 70) - 6; // some -1 (and < -1)
          for (auto &i : indices)
            i = std::max(i, -1);
          std::fill(indices.begin() + 3 * topK, indices.end(), -1); // empty set
          std::vector<float> expected(tokens * heads * valueDim);
          ASSERT_TRUE(cpu::sparseAttention(
                          pool, q.data(), cache.host, indices.data(), topK,
                          seqs.data(), tokens, heads, 0.07, valueDim,
                          withSinks ? sinks.data() : nullptr, expected.data())
                          .ok());
          DeviceCacheView view = cache.upload(*driver);
          Buffer dq(*driver, q), dIdx(*driver, indices), dSeqs(*driver, seqs),
              dSinks(*driver, sinks), dOut(*driver, expected.size() * 4);
          std::string specialized = "daybreak_sparse_attention_t<" +
                                    std::to_string(width) + ", " +
                                    std::to_string(valueDim) + ">";
          // With scratch, these 4-token grids split over the rows (5
          // splits of 8 rows here: some hold only -1, one token none) and
          // are merged by daybreak_sparse_attention_combine.
          int64_t scratchFloats = sparseAttentionScratchFloats(valueDim);
          Buffer dScratch(*driver, scratchFloats * 4);
          for (const std::string &instantiation :
               {std::string(), specialized})
          for (bool split : {false, true}) {
            // NaN first, so a path that leaves outputs unwritten fails.
            ASSERT_EQ(driver->cuMemsetD8(dOut.get(), 0xff, expected.size() * 4),
                      CUDA_SUCCESS);
            expectRan(kernels->sparseAttention(
                dq, view, dIdx, topK, dSeqs, tokens, heads, 0.07, valueDim,
                withSinks ? dSinks.get() : 0, dOut, nullptr,
                variant(instantiation), split ? dScratch.get() : 0,
                split ? scratchFloats : 0));
            auto got = dOut.read<float>(expected.size());
            double e = rowRelativeError(got, expected, valueDim);
            char shape[80];
            std::snprintf(shape, sizeof(shape),
                          "%s W=%ld H=%ld k=37 sinks=%d split=%d",
                          formatName(format), long(width), long(heads),
                          withSinks, split);
            report(instantiation.empty() ? "sparseAttention"
                                         : instantiation.c_str(),
                   shape, e);
            EXPECT_LE(e, 2e-5); // fp32 online softmax vs double exp on the CPU
            // The empty set gives exact zeros.
            for (int64_t i = 3 * heads * valueDim;
                 i < tokens * heads * valueDim; ++i)
              ASSERT_EQ(got[i], 0.0f);
          }
        }
}

/// Rows a selection masks (-1) weigh nothing, whatever shared memory held
/// before: each launch follows one that leaves NaN in the rows' shared
/// memory of every SM (the same kernel over a cache of NaN), and whole
/// chunks of -1 lead some tokens' selections (GLM-5.3's k-pool: pools not
/// yet complete).
TEST_F(CudaKernelsTest, SparseAttentionMaskedChunks) {
  const int64_t width = 80, valueDim = 64, heads = 5, tokens = 4, topK = 37;
  TestCache cache(cpu::CacheFormat::F32, width, 0, 0, 64, 16, rng);
  cache.fill(rng);
  TestCache poison(cpu::CacheFormat::F32, width, 0, 0, 64, 16, rng);
  std::fill(poison.bytes.begin(), poison.bytes.end(), uint8_t(0xff));
  auto q = random(tokens * heads * width, -0.2f, 0.2f);
  std::vector<int32_t> seqs = {1, 0, 1, 0};
  std::vector<int32_t> indices(tokens * topK);
  for (int64_t t = 0; t < tokens; ++t)
    for (int64_t i = 0; i < topK; ++i) {
      bool masked =
          (t == 0 && i < 24) || (t == 2 && i % 2) || (t == 3 && i < topK - 13);
      indices[t * topK + i] = masked ? -1 : int32_t((7 * i + t) % 64);
    }
  std::vector<float> expected(tokens * heads * valueDim);
  ASSERT_TRUE(cpu::sparseAttention(pool, q.data(), cache.host, indices.data(),
                                   topK, seqs.data(), tokens, heads, 0.07,
                                   valueDim, nullptr, expected.data())
                  .ok());
  // The poisoning launch: every SM runs its blocks, all rows NaN.
  const int64_t poisonTokens = 4096;
  std::vector<int32_t> poisonSeqs(poisonTokens), poisonIdx(poisonTokens * topK);
  for (int64_t i = 0; i < poisonTokens; ++i)
    poisonSeqs[i] = int32_t(i % 2);
  for (int64_t i = 0; i < poisonTokens * topK; ++i)
    poisonIdx[i] = int32_t(i % 64);
  auto poisonQ = random(poisonTokens * heads * width);
  DeviceCacheView view = cache.upload(*driver),
                  poisonView = poison.upload(*driver);
  Buffer dq(*driver, q), dIdx(*driver, indices), dSeqs(*driver, seqs),
      dOut(*driver, expected.size() * 4), dPq(*driver, poisonQ),
      dPIdx(*driver, poisonIdx), dPSeqs(*driver, poisonSeqs),
      dPOut(*driver, poisonTokens * heads * valueDim * 4);
  int64_t scratchFloats = sparseAttentionScratchFloats(valueDim);
  Buffer dScratch(*driver, scratchFloats * 4);
  std::string specialized = "daybreak_sparse_attention_t<" +
                            std::to_string(width) + ", " +
                            std::to_string(valueDim) + ">";
  for (const std::string &instantiation : {std::string(), specialized})
    for (bool split : {false, true}) {
      expectRan(kernels->sparseAttention(
          dPq, poisonView, dPIdx, topK, dPSeqs, poisonTokens, heads, 0.07,
          valueDim, 0, dPOut, nullptr, variant(instantiation), 0, 0));
      expectRan(kernels->sparseAttention(
          dq, view, dIdx, topK, dSeqs, tokens, heads, 0.07, valueDim, 0, dOut,
          nullptr, variant(instantiation), split ? dScratch.get() : 0,
          split ? scratchFloats : 0));
      auto got = dOut.read<float>(expected.size());
      double e = rowRelativeError(got, expected, valueDim);
      char shape[64];
      std::snprintf(shape, sizeof(shape), "masked chunks split=%d", split);
      report(instantiation.empty() ? "sparseAttention" : instantiation.c_str(),
             shape, e);
      EXPECT_LE(e, 2e-5);
    }
}

/// The tensor-core sparse MLA (CudaSparseMla.cuh: the mma.sync kernel, and
/// the warpgroup kernel on DeepSeek's FP8 rows) against the CPU on
/// random rows, every element within a bound derived from its roundings:
/// Q to bf16 (each value moves by up to 2^-9 of itself) and the
/// probabilities to bf16 (up to 2^-9), the cache values being exact bf16.
/// For a head, with A_j = scale sum_i |q_i k_ji| over selected row j, Q's
/// rounding moves logit j by up to 2^-9 A_j; the tensor core's fp32 sums
/// over the row's 16-wide steps add at most 2^-16 A_j (36 steps of
/// 2^-22); P's rounding multiplies weight j by 1 + r, |r| <= 2^-9, which
/// is its logit moved by at most 2^-9 (1 + 2^-8). The normalised weights
/// of logits moved by at most D each change by a factor within e^(+-2D),
/// so an output moves by at most (e^(2D) - 1) sum_j w_j |v_j| (w the exact
/// weights), plus the fp32 sums of P V over up to 2^5 tiles of 2^5 rows
/// (2^-14 of the same sum). Half the cases take Q exactly representable
/// in bf16, where the bound is mostly P's rounding. Also: exact zeros for
/// a token without valid rows and one outside the batch, the split launch
/// merged by daybreak_sparse_attention_combine, and the paths' choices (an
/// f32 cache is refused when the tensor cores are demanded, and preferred
/// ones fall back to the exact CUDA-core kernel).
TEST_F(CudaKernelsTest, SparseAttentionTensorCores) {
  struct Shape {
    int64_t width, valueDim, tail, scaleBlock;
  };
  // DeepSeek's latent rows (512 + 64 rope, 128-wide scale blocks) and a
  // small one with several scale blocks.
  const Shape shapes[] = {{576, 512, 64, 128}, {80, 64, 16, 32}};
  const int64_t tokens = 6, topK = 300, maxSeqLen = 320;
  const double scale = 1.0 / std::sqrt(192.0);
  for (auto format : {cpu::CacheFormat::BF16, cpu::CacheFormat::Fp8Scaled})
    for (const Shape &sh : shapes)
      for (int64_t heads : {128, 37, 4})
        for (bool withSinks : {false, true})
          for (bool exactQ : {false, true}) {
            bool fp8 = format == cpu::CacheFormat::Fp8Scaled;
            TestCache cache(format, sh.width, fp8 ? sh.tail : 0,
                            fp8 ? sh.scaleBlock : 0, maxSeqLen, 16, rng);
            {
              std::uniform_real_distribution<float> dist(-1, 1);
              std::vector<float> row(sh.width);
              for (int64_t s = 0; s < 2; ++s)
                for (int64_t p = 0; p < maxSeqLen; ++p) {
                  for (int64_t i = 0; i < sh.width; ++i)
                    row[i] = dist(rng) * float(1 + (i / 64 + p) % 3);
                  cache.host.write(s, p, row.data());
                }
            }
            auto q = random(tokens * heads * sh.width, -0.3f, 0.3f);
            if (exactQ)
              for (float &x : q)
                x = numerics::bf16ToFloat(numerics::floatToBf16(x));
            auto sinks = random(heads, -1.0f, 2.0f);
            // Token 0: rows anywhere, some -1, below -1 or past the cache;
            // 1: a few valid rows among -1; 2: 70 valid rows, then -1
            // padding; 3: none; 4: outside the batch; 5: one row.
            std::vector<int32_t> seqs = {1, 0, 1, 0, 7, 1};
            std::vector<int32_t> indices(tokens * topK, -1);
            for (int64_t i = 0; i < topK; ++i) {
              indices[i] = std::max(int32_t(rng() % 340) - 6, -1);
              if (i % 37 == 5)
                indices[topK + i] = int32_t(rng() % maxSeqLen);
              if (i < 70)
                indices[2 * topK + i] = int32_t(rng() % maxSeqLen);
              indices[4 * topK + i] = int32_t(rng() % maxSeqLen);
            }
            indices[5 * topK + 17] = 5;
            // The CPU refuses what the GPU skips: it gets -1 for indices
            // outside the cache and slot 0 for the token outside the batch,
            // whose expected output is zeros.
            std::vector<int32_t> cpuIndices = indices, cpuSeqs = seqs;
            for (int32_t &i : cpuIndices)
              i = i >= 0 && i < maxSeqLen ? i : -1;
            cpuSeqs[4] = 0;
            std::vector<float> expected(tokens * heads * sh.valueDim);
            ASSERT_TRUE(cpu::sparseAttention(
                            pool, q.data(), cache.host, cpuIndices.data(), topK,
                            cpuSeqs.data(), tokens, heads, scale, sh.valueDim,
                            withSinks ? sinks.data() : nullptr, expected.data())
                            .ok());
            std::fill(expected.begin() + 4 * heads * sh.valueDim,
                      expected.begin() + 5 * heads * sh.valueDim, 0.0f);
            // The bound per output element (see above).
            std::vector<double> bound(expected.size(), 0.0);
            std::vector<float> row(sh.width);
            for (int64_t t = 0; t < tokens; ++t) {
              if (seqs[t] < 0 || seqs[t] >= 2)
                continue;
              std::vector<std::vector<float>> rows;
              for (int64_t i = 0; i < topK; ++i) {
                int32_t pos = indices[t * topK + i];
                if (pos < 0 || pos >= maxSeqLen)
                  continue;
                cache.host.read(seqs[t], pos, row.data());
                rows.push_back(row);
              }
              for (int64_t h = 0; h < heads; ++h) {
                const float *qh = q.data() + (t * heads + h) * sh.width;
                std::vector<double> logit(rows.size()), weight(rows.size());
                double top = withSinks ? sinks[h] : -INFINITY, moved = 0.0;
                for (size_t j = 0; j < rows.size(); ++j) {
                  double dot = 0.0, absDot = 0.0;
                  for (int64_t i = 0; i < sh.width; ++i) {
                    dot += double(qh[i]) * rows[j][i];
                    absDot += std::fabs(double(qh[i]) * rows[j][i]);
                  }
                  logit[j] = scale * dot;
                  top = std::max(top, logit[j]);
                  moved =
                      std::max(moved, 0x1p-9 * (1 + 0x1p-8) +
                                          (0x1p-9 + 0x1p-16) * scale * absDot);
                }
                double sum = withSinks ? std::exp(sinks[h] - top) : 0.0;
                for (size_t j = 0; j < rows.size(); ++j)
                  sum += weight[j] = std::exp(logit[j] - top);
                double factor = std::expm1(2 * moved) + 0x1p-14;
                for (int64_t d = 0; d < sh.valueDim; ++d) {
                  double mass = 0.0;
                  for (size_t j = 0; j < rows.size(); ++j)
                    mass += weight[j] / sum * std::fabs(rows[j][d]);
                  bound[(t * heads + h) * sh.valueDim + d] = factor * mass;
                }
              }
            }
            DeviceCacheView view = cache.upload(*driver);
            Buffer dq(*driver, q), dIdx(*driver, indices), dSeqs(*driver, seqs),
                dSinks(*driver, sinks), dOut(*driver, expected.size() * 4);
            int64_t scratchFloats = sparseAttentionScratchFloats(sh.valueDim);
            Buffer dScratch(*driver, scratchFloats * 4);
            ASSERT_TRUE(CudaKernels::sparseMlaTcApplies(view, sh.valueDim));
            // DeepSeek's FP8 rows also run the warpgroup kernel.
            const bool warpgroups = fp8 && sh.width == 576;
            ASSERT_EQ(CudaKernels::sparseMlaWgApplies(view, sh.valueDim),
                      warpgroups);
            for (SparseMlaKernel kernel :
                 {SparseMlaKernel::MmaSync, SparseMlaKernel::Warpgroups})
              for (bool split : {false, true}) {
                if (kernel == SparseMlaKernel::Warpgroups && !warpgroups)
                  continue;
                // NaN first, so a path that leaves outputs unwritten fails.
                ASSERT_EQ(
                    driver->cuMemsetD8(dOut.get(), 0xff, expected.size() * 4),
                    CUDA_SUCCESS);
                expectRan(kernels->sparseAttention(
                    dq, view, dIdx, topK, dSeqs, tokens, heads, scale,
                    sh.valueDim, withSinks ? dSinks.get() : 0, dOut, nullptr,
                    nullptr, split ? dScratch.get() : 0,
                    split ? scratchFloats : 0, AttentionPath::TensorCores,
                    kernel));
                auto got = dOut.read<float>(expected.size());
                double worst = 0.0; // error / bound
                int64_t failures = 0;
                for (size_t e = 0; e < got.size(); ++e) {
                  double err = std::fabs(double(got[e]) - expected[e]);
                  if (!(err <= bound[e])) {
                    if (++failures <= 3)
                      ADD_FAILURE()
                          << "element " << e << ": " << got[e] << " vs "
                          << expected[e] << ", bound " << bound[e];
                  } else if (bound[e] > 0) {
                    worst = std::max(worst, err / bound[e]);
                  }
                }
                EXPECT_EQ(failures, 0);
                char shape[96];
                std::snprintf(shape, sizeof(shape),
                              "%s W=%ld H=%ld k=300 sinks=%d q%s split=%d",
                              formatName(format), long(sh.width), long(heads),
                              withSinks, exactQ ? "=bf16" : "=f32", split);
                std::printf(
                    "  %-18s %-40s worst error %.3g of its bound, "
                    "row-relative %.3g\n",
                    kernel == SparseMlaKernel::Warpgroups ? "sparseMlaWg"
                                                          : "sparseMlaTc",
                    shape, worst, rowRelativeError(got, expected, sh.valueDim));
                // No valid row, or a sequence outside the batch: zeros.
                for (int64_t t : {3, 4})
                  for (int64_t i = 0; i < heads * sh.valueDim; ++i)
                    ASSERT_EQ(got[t * heads * sh.valueDim + i], 0.0f)
                        << "token " << t;
              }
          }

  // An f32 cache: refused on demand, the exact kernel when preferred.
  const int64_t width = 80, valueDim = 64, heads = 4, k = 37;
  TestCache cache(cpu::CacheFormat::F32, width, 0, 0, 64, 16, rng);
  cache.fill(rng);
  DeviceCacheView view = cache.upload(*driver);
  EXPECT_FALSE(CudaKernels::sparseMlaTcApplies(view, valueDim));
  auto q = random(2 * heads * width, -0.2f, 0.2f);
  std::vector<int32_t> seqs = {0, 1}, indices(2 * k);
  for (auto &i : indices)
    i = int32_t(rng() % 64);
  std::vector<float> expected(2 * heads * valueDim);
  ASSERT_TRUE(cpu::sparseAttention(pool, q.data(), cache.host, indices.data(),
                                   k, seqs.data(), 2, heads, 0.07, valueDim,
                                   nullptr, expected.data())
                  .ok());
  Buffer dq(*driver, q), dIdx(*driver, indices), dSeqs(*driver, seqs),
      dOut(*driver, expected.size() * 4);
  Status refused = kernels->sparseAttention(
      dq, view, dIdx, k, dSeqs, 2, heads, 0.07, valueDim, 0, dOut, nullptr,
      nullptr, 0, 0, AttentionPath::TensorCores);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.message().find("tensor-core path"), std::string::npos)
      << refused.message();
  refused = kernels->sparseAttention(
      dq, view, dIdx, k, dSeqs, 2, heads, 0.07, valueDim, 0, dOut, nullptr,
      nullptr, 0, 0, AttentionPath::TensorCores, SparseMlaKernel::Warpgroups);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.message().find("warpgroup kernel"), std::string::npos)
      << refused.message();
  expectRan(kernels->sparseAttention(dq, view, dIdx, k, dSeqs, 2, heads, 0.07,
                                     valueDim, 0, dOut, nullptr, nullptr, 0, 0,
                                     AttentionPath::PreferTensorCores));
  EXPECT_LE(
      rowRelativeError(dOut.read<float>(expected.size()), expected, valueDim),
      2e-5);
}

TEST_F(CudaKernelsTest, DenseAttention) {
  struct Shape {
    int64_t heads, kvHeads, headDim, valueDim;
  };
  struct Step {
    const char *name;
    std::vector<int32_t> positions, sequences;
  };
  // The fp8 layout of a cache row of `width` values: a bf16 tail and a
  // scale block (the quantized part whole blocks, as CachePlan requires).
  struct Fp8Layout {
    int64_t tail, scaleBlock;
  };
  // One case on the CPU, then on every GPU path that takes it: the CUDA
  // cores whole and split over keys (flash decoding, with the scratch the
  // CUDA device gives it), the tensor cores where tensorAttentionApplies,
  // and the launcher's own choice with that scratch (what a model runs).
  auto compare = [&](cpu::CacheFormat format, const Shape &sh, const Step &step,
                     int64_t window, int64_t ringRows, bool withSinks,
                     int64_t maxSeqLen, int64_t batch,
                     Fp8Layout (*fp8Layout)(int64_t width)) {
    bool fp8 = format == cpu::CacheFormat::Fp8Scaled;
    int64_t tokens = step.positions.size();
    int64_t kWidth = sh.kvHeads * sh.headDim, vWidth = sh.kvHeads * sh.valueDim;
    Fp8Layout kLayout = fp8 ? fp8Layout(kWidth) : Fp8Layout{0, 0},
              vLayout = fp8 ? fp8Layout(vWidth) : Fp8Layout{0, 0};
    TestCache k(format, kWidth, kLayout.tail, kLayout.scaleBlock, maxSeqLen, 16,
                rng, ringRows, batch);
    TestCache v(format, vWidth, vLayout.tail, vLayout.scaleBlock, maxSeqLen, 16,
                rng, ringRows, batch);
    k.fill(rng);
    v.fill(rng);
    auto q = random(tokens * sh.heads * sh.headDim);
    auto sinks = random(sh.heads, -2.0f, 3.0f);
    double scale = 1.0 / std::sqrt(double(sh.headDim));
    std::vector<float> expected(tokens * sh.heads * sh.valueDim);
    ASSERT_TRUE(cpu::attention(pool, q.data(), k.host, v.host,
                               step.positions.data(), step.sequences.data(),
                               withSinks ? sinks.data() : nullptr, tokens,
                               sh.heads, sh.kvHeads, scale, window,
                               expected.data())
                    .ok());
    DeviceCacheView dk = k.upload(*driver), dv = v.upload(*driver);
    Buffer dq(*driver, q), dPos(*driver, step.positions),
        dSeqs(*driver, step.sequences), dSinks(*driver, sinks),
        dOut(*driver, expected.size() * 4);
    int64_t scratchFloats =
        attentionScratchFloats(sh.heads / sh.kvHeads, sh.valueDim);
    Buffer dScratch(*driver, scratchFloats * 4);
    struct Variant {
      const char *name;
      AttentionPath path;
      bool split;
    };
    std::vector<Variant> variants = {
        {"cuda", AttentionPath::CudaCores, false},
        {"cuda+split", AttentionPath::CudaCores, true},
        {"auto", AttentionPath::Auto, true},
        {"prefer tensor", AttentionPath::PreferTensorCores, true}};
    if (CudaKernels::tensorAttentionApplies(dk, dv, sh.kvHeads))
      variants.push_back({"tensor", AttentionPath::TensorCores, false});
    for (const Variant &variant : variants) {
      // NaN first, so a path that leaves outputs unwritten fails.
      ASSERT_EQ(driver->cuMemsetD8(dOut.get(), 0xff, expected.size() * 4),
                CUDA_SUCCESS);
      expectRan(kernels->attention(
          dq, dk, dv, dPos, dSeqs, withSinks ? dSinks.get() : 0, tokens,
          sh.heads, sh.kvHeads, scale, window, dOut, nullptr,
          variant.split ? dScratch.get() : 0, variant.split ? scratchFloats : 0,
          variant.path));
      double e = rowRelativeError(dOut.read<float>(expected.size()), expected,
                                  sh.valueDim);
      char shape[128];
      std::snprintf(
          shape, sizeof(shape), "%s %s H=%ld/%ld D=%ld/%ld win=%ld%s%s %s",
          formatName(format), step.name, long(sh.heads), long(sh.kvHeads),
          long(sh.headDim), long(sh.valueDim), long(window),
          ringRows ? " ring" : "", withSinks ? " sinks" : "", variant.name);
      report("attention", shape, e);
      // CUDA cores: fp32 scores and online softmax (expf) against the
      // CPU's fp32 GEMMs with a double softmax, on the same decoded K and
      // V. Tensor cores (bf16 and fp8 caches only; not the exact mode's
      // path, see CudaAttention.cuh): mma.sync does not sum as fp32 does,
      // so the bound is the caches' own rounding instead. A bf16 cache
      // rounds each K and V value by up to 2^-9 of it (fp8: 2^-4), which
      // moves an output by up to about 2^-9 of its row's largest value;
      // the tensor path must stay under an eighth of that, 2^-12 (2.4e-4),
      // far below what a misplaced fragment or a dropped key tile gives
      // (1e-2 and more). Measured on the H200: up to 2.8e-5 (D = 64) and
      // 3.7e-5 (D = 128); before each k-step had its own accumulator, 5.5e-5
      // and 6.6e-5.
      bool tensor = CudaKernels::tensorAttentionApplies(dk, dv, sh.kvHeads) &&
                    (variant.path == AttentionPath::TensorCores ||
                     variant.path == AttentionPath::PreferTensorCores);
      EXPECT_LE(e, tensor ? 0x1p-12 : 2e-5) << shape;
    }
  };

  // gpt-oss (64 query heads on 8 KV heads of 64), the fixtures' MHA of 32,
  // MQA at 64 query heads, the widest heads, a value dim unlike the key's.
  const Shape shapes[] = {
      {64, 8, 64, 64}, {4, 4, 32, 32}, {64, 1, 64, 64},
      {16, 2, 256, 256}, {6, 3, 32, 48}};
  // Decode: one token per sequence; prefill: a chunk of one sequence and a
  // fresh prompt of the other. Windows: none, shorter than the prompts
  // (on a ring of window - 1 + tokens rows), longer than any sequence.
  std::vector<Step> steps = {{"decode", {95, 40}, {0, 1}}, {"prefill", {}, {}}};
  for (int32_t p = 60; p < 80; ++p) {
    steps[1].positions.push_back(p);
    steps[1].sequences.push_back(0);
  }
  for (int32_t p = 0; p < 30; ++p) {
    steps[1].positions.push_back(p);
    steps[1].sequences.push_back(1);
  }
  // Fp8: 32-wide scale blocks (several a head) and a bf16 tail of 16 or
  // more columns.
  auto blocksAndTail = [](int64_t width) {
    return Fp8Layout{16 + (width - 16) % 32, 32};
  };
  for (auto format : {cpu::CacheFormat::F32, cpu::CacheFormat::BF16,
                      cpu::CacheFormat::Fp8Scaled})
    for (const Shape &sh : shapes)
      for (const Step &step : steps)
        for (int64_t window : {0, 16, 1000})
          compare(format, sh, step, window,
                  window == 16 ? window - 1 + int64_t(step.positions.size())
                               : 0,
                  window != 1000, 96, 2, blocksAndTail);

  // Prefill at the tensor cores' shapes: GQA groups of 8 (gpt-oss), 4 (at
  // dims of 128), 1, and 80 (two blocks of heads, dims unlike each other);
  // bf16 caches and fp8 ones laid out as AssignKVLayout does (no tail,
  // blocks of up to 128). Steps: a one-token prompt, a 300-token prompt,
  // three prompts in one batch (runs of tokens that end inside a block's
  // tile), and a later chunk of one sequence with a fresh prompt and a
  // decode token of others. Windows none, 16, 128 (gpt-oss) on paged and
  // ring caches (the chunk and the decode token wrap the ring), and 1000;
  // sinks on and off.
  const Shape prefillShapes[] = {
      {64, 8, 64, 64}, {32, 4, 128, 128}, {4, 4, 64, 64}, {80, 1, 32, 48}};
  auto run = [](const char *name,
                std::vector<std::pair<int32_t, int32_t>> spans) {
    Step step{name, {}, {}};
    for (size_t s = 0; s < spans.size(); ++s)
      for (int32_t p = spans[s].first; p < spans[s].second; ++p) {
        step.positions.push_back(p);
        step.sequences.push_back(int32_t(s));
      }
    return step;
  };
  const std::vector<Step> prefills = {
      run("prompt 1", {{0, 1}}), run("prompt 300", {{0, 300}}),
      run("3 prompts", {{0, 37}, {0, 5}, {0, 121}}),
      run("chunk+prompt+decode", {{200, 264}, {0, 100}, {250, 251}})};
  auto modelLayout = [](int64_t width) {
    return Fp8Layout{0, std::gcd<int64_t>(width, 128)};
  };
  for (auto format : {cpu::CacheFormat::BF16, cpu::CacheFormat::Fp8Scaled})
    for (const Shape &sh : prefillShapes)
      for (const Step &step : prefills)
        for (auto [window, ring] : {std::pair{int64_t(0), false},
                                    {16, false},
                                    {16, true},
                                    {128, false},
                                    {128, true},
                                    {1000, false}})
          for (bool withSinks : {false, true})
            compare(format, sh, step, window,
                    ring ? window - 1 + int64_t(step.positions.size()) : 0,
                    withSinks, 320, 3, modelLayout);

  // Decode (daybreak_attention_decode where decodeAttentionApplies, with
  // the scratch; the generic kernel without it or where it does not apply):
  // sequences at positions that leave warps and splits without keys, a
  // last tile of one key, and 700 keys over every warp; two tokens of one
  // sequence (tokens <= batch still). Groups of
  // 8 (gpt-oss), 4 at dims of 128, 1, 16 (two blocks of 8 heads) and 12
  // (8 and 4, head dim 48).
  const Shape decodeShapes[] = {{64, 8, 64, 64},
                                {32, 4, 128, 128},
                                {4, 4, 64, 64},
                                {16, 1, 32, 32},
                                {24, 2, 48, 32}};
  const std::vector<Step> decodes = {
      {"decode 6", {0, 31, 128, 129, 699, 400}, {0, 1, 2, 3, 4, 5}},
      {"decode 2 of 1", {500, 501}, {2, 2}}};
  for (auto format : {cpu::CacheFormat::F32, cpu::CacheFormat::BF16,
                      cpu::CacheFormat::Fp8Scaled})
    for (const Shape &sh : decodeShapes)
      for (const Step &step : decodes)
        for (auto [window, ring] : {std::pair{int64_t(0), false},
                                    {128, false},
                                    {128, true},
                                    {1000, false}})
          for (bool withSinks : {false, true})
            compare(format, sh, step, window,
                    ring ? window - 1 + int64_t(step.positions.size()) : 0,
                    withSinks, 700, 6, modelLayout);
}

/// cpu::attention's semantics in double over the caches' decoded values:
/// the exact result both kernels' fp32 results are measured against.
std::vector<double>
exactAttention(const std::vector<float> &q, const cpu::CacheView &k,
               const cpu::CacheView &v, const std::vector<int32_t> &positions,
               const std::vector<int32_t> &sequences, const float *sinks,
               int64_t heads, int64_t kvHeads, double scale, int64_t window) {
  int64_t tokens = positions.size(), headDim = k.width / kvHeads,
          valueDim = v.width / kvHeads, group = heads / kvHeads;
  std::vector<double> out(tokens * heads * valueDim);
  std::vector<float> kr(headDim), vr(valueDim);
  for (int64_t t = 0; t < tokens; ++t) {
    int64_t p = positions[t], seq = sequences[t];
    int64_t first = window > 0 ? std::max<int64_t>(0, p - window + 1) : 0;
    for (int64_t h = 0; h < heads; ++h) {
      int64_t g = h / group;
      const float *qh = &q[(t * heads + h) * headDim];
      std::vector<double> s;
      for (int64_t j = first; j <= p; ++j) {
        k.readColumns(seq, j, g * headDim, headDim, kr.data());
        double dot = 0;
        for (int64_t d = 0; d < headDim; ++d)
          dot += double(qh[d]) * kr[d];
        s.push_back(dot * scale);
      }
      double top = sinks ? sinks[h] : -INFINITY;
      for (double x : s)
        top = std::max(top, x);
      double sum = sinks ? std::exp(sinks[h] - top) : 0.0;
      for (double x : s)
        sum += std::exp(x - top);
      double *o = &out[(t * heads + h) * valueDim];
      for (int64_t j = first; j <= p; ++j) {
        v.readColumns(seq, j, g * valueDim, valueDim, vr.data());
        double w = std::exp(s[j - first] - top) / sum;
        for (int64_t d = 0; d < valueDim; ++d)
          o[d] += w * vr[d];
      }
    }
  }
  return out;
}

/// The largest over rows of max |got - exact| / max |exact| in the row.
double rowRelativeError(const std::vector<float> &got,
                        const std::vector<double> &exact, int64_t width) {
  double worst = 0;
  for (size_t r = 0; r * width < exact.size(); ++r) {
    double diff = 0, top = 0;
    for (int64_t i = 0; i < width; ++i) {
      if (std::isnan(got[r * width + i]))
        return INFINITY; // unwritten (NaN-poisoned) or wrong
      diff =
          std::max(diff, std::fabs(got[r * width + i] - exact[r * width + i]));
      top = std::max(top, std::fabs(exact[r * width + i]));
    }
    worst = std::max(worst, top > 0 ? diff / top : diff);
  }
  return worst;
}

// Wide heads in large groups (daybreak_attention_wide): absorbed MLA, 32 or
// 40 query heads of 576 on one KV head whose values are the first 512
// columns of the same latent rows (fp8: the 512 quantized in blocks of 128,
// the rope part a bf16 tail of 64), and heads of 320 / 160 and 264 / 136
// with V in its own cache; decode (one token a sequence, split over keys by
// the scratch, or not) and prefill (a prompt and a chunk); windows and
// sinks; against the CPU kernel on the same bytes.
TEST_F(CudaKernelsTest, WideAttention) {
  struct Shape {
    int64_t heads, kvHeads, headDim, valueDim;
    bool shared;
  };
  const Shape shapes[] = {{32, 1, 576, 512, true},
                          {40, 1, 576, 512, true},
                          {32, 2, 320, 160, false},
                          {16, 1, 264, 136, false}};
  struct Step {
    const char *name;
    std::vector<int32_t> positions, sequences;
  };
  std::vector<Step> steps = {{"decode 4", {0, 33, 299, 130}, {0, 1, 2, 3}},
                             {"prefill", {}, {}}};
  for (int32_t p = 0; p < 45; ++p) {
    steps[1].positions.push_back(p);
    steps[1].sequences.push_back(1);
  }
  for (int32_t p = 200; p < 240; ++p) {
    steps[1].positions.push_back(p);
    steps[1].sequences.push_back(3);
  }
  for (auto format : {cpu::CacheFormat::F32, cpu::CacheFormat::BF16,
                      cpu::CacheFormat::Fp8Scaled})
    for (const Shape &sh : shapes)
      for (const Step &step : steps)
        for (int64_t window : {0, 100})
          for (bool withSinks : {false, true}) {
            bool fp8 = format == cpu::CacheFormat::Fp8Scaled;
            int64_t tokens = step.positions.size();
            int64_t kWidth = sh.kvHeads * sh.headDim,
                    vWidth = sh.kvHeads * sh.valueDim;
            // fp8 K: the value columns quantized, the rest a bf16 tail.
            int64_t kTail = fp8 ? (sh.shared ? kWidth - vWidth : 8) : 0;
            int64_t kBlock = fp8 ? std::gcd<int64_t>(kWidth - kTail, 128) : 0;
            TestCache k(format, kWidth, kTail, kBlock, 320, 16, rng, 0, 4);
            k.fill(rng);
            std::optional<TestCache> vOwn;
            cpu::CacheView vHost = k.host;
            if (sh.shared) {
              vHost.width = vWidth;
              vHost.tailDim = 0;
            } else {
              vOwn.emplace(format, vWidth, fp8 ? 8 : 0,
                           fp8 ? std::gcd<int64_t>(vWidth - 8, 128) : 0, 320,
                           16, rng, 0, 4);
              vOwn->fill(rng);
              vHost = vOwn->host;
            }
            auto q = random(tokens * sh.heads * sh.headDim);
            auto sinks = random(sh.heads, -2.0f, 3.0f);
            double scale = 1.0 / std::sqrt(double(sh.headDim));
            std::vector<float> expected(tokens * sh.heads * sh.valueDim);
            ASSERT_TRUE(cpu::attention(pool, q.data(), k.host, vHost,
                                       step.positions.data(),
                                       step.sequences.data(),
                                       withSinks ? sinks.data() : nullptr,
                                       tokens, sh.heads, sh.kvHeads, scale,
                                       window, expected.data())
                            .ok());
            std::vector<double> exact =
                exactAttention(q, k.host, vHost, step.positions, step.sequences,
                               withSinks ? sinks.data() : nullptr, sh.heads,
                               sh.kvHeads, scale, window);
            double cpuError = rowRelativeError(expected, exact, sh.valueDim);
            DeviceCacheView dk = k.upload(*driver), dv = dk;
            if (sh.shared) {
              dv.width = vWidth;
              dv.tailDim = 0;
            } else {
              dv = vOwn->upload(*driver);
            }
            ASSERT_TRUE(CudaKernels::wideAttentionApplies(dk, dv, sh.kvHeads));
            ASSERT_EQ(CudaKernels::attentionSharesRows(dk, dv, sh.kvHeads),
                      sh.shared);
            Buffer dq(*driver, q), dPos(*driver, step.positions),
                dSeqs(*driver, step.sequences), dSinks(*driver, sinks),
                dOut(*driver, expected.size() * 4);
            int64_t scratchFloats =
                attentionScratchFloats(sh.heads / sh.kvHeads, sh.valueDim);
            Buffer dScratch(*driver, scratchFloats * 4);
            for (bool split : {false, true}) {
              ASSERT_EQ(
                  driver->cuMemsetD8(dOut.get(), 0xff, expected.size() * 4),
                  CUDA_SUCCESS);
              expectRan(kernels->attention(
                  dq, dk, dv, dPos, dSeqs, withSinks ? dSinks.get() : 0, tokens,
                  sh.heads, sh.kvHeads, scale, window, dOut, nullptr,
                  split ? dScratch.get() : 0, split ? scratchFloats : 0));
              double e = rowRelativeError(dOut.read<float>(expected.size()),
                                          exact, sh.valueDim);
              char shape[128];
              std::snprintf(
                  shape, sizeof(shape),
                  "%s %s H=%ld/%ld D=%ld/%ld%s win=%ld%s%s", formatName(format),
                  step.name, long(sh.heads), long(sh.kvHeads), long(sh.headDim),
                  long(sh.valueDim), sh.shared ? " shared" : "", long(window),
                  withSinks ? " sinks" : "", split ? " split" : "");
              report("attentionWide", shape, e);
              if (!split)
                report("  (CPU kernel)", shape, cpuError);
              // Against the exact result: as accurate as the CPU kernel,
              // within a factor of 3. Both sum the scores' 264-576
              // products in fp32 in different orders (the CPU in SIMD
              // blocks, this kernel two partial sums of 4-wide steps), so
              // on these caches (values from 1e-2 to 1e2 a row: scores in
              // the hundreds) each differs from the exact result by up to
              // ~3e-5 of a row and from the other by up to twice that: the
              // 2e-5 bound against the CPU that the dims to 256 meet does
              // not hold at these widths. A dropped key, a misplaced chunk
              // or a lost sink costs 1e-3 and more.
              EXPECT_LE(e, std::max(3 * cpuError, 2e-5))
                  << shape << " (CPU kernel: " << cpuError << ")";
            }
          }
}

//===----------------------------------------------------------------------===//
// Weights at their stored precision: bf16, and e4m3 codes with fp32 block
// scales, against the CPU kernels on the same stored bytes.
//===----------------------------------------------------------------------===//

/// Random stored weights of `count` values: bf16 bits, or e4m3 codes (every
/// code, NaN ones too, appears) with `scaleCount` positive scales.
struct StoredWeights {
  std::vector<uint8_t> bytes;
  std::vector<float> scales;
};

StoredWeights randomStored(std::mt19937 &rng, cpu::WeightType type,
                           int64_t count, int64_t scaleCount) {
  StoredWeights s;
  if (type == cpu::WeightType::BF16) {
    std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
    s.bytes.resize(count * 2);
    for (int64_t i = 0; i < count; ++i) {
      float v = dist(rng);
      uint32_t bits;
      std::memcpy(&bits, &v, 4);
      uint16_t half = uint16_t(bits >> 16);
      std::memcpy(&s.bytes[2 * i], &half, 2);
    }
  } else {
    s.bytes.resize(count);
    for (int64_t i = 0; i < count; ++i) {
      uint8_t code = uint8_t(rng() % 256);
      // NaN codes only in a few places, so most rows stay finite.
      if ((code & 0x7F) == 0x7F && rng() % 64 != 0)
        code ^= 1;
      s.bytes[i] = code;
    }
    std::uniform_real_distribution<float> dist(0.01f, 0.1f);
    for (int64_t i = 0; i < scaleCount; ++i)
      s.scales.push_back(dist(rng));
  }
  return s;
}

TEST_F(CudaKernelsTest, StoredWeightMatmul) {
  struct Shape {
    int64_t m, n, k, blockN, blockK;
  };
  // Real DeepSeek-V3.2 block scales (128 x 128) at decode and prefill m,
  // partial edge blocks, and k that no 16-byte piece divides (the generic
  // fallback).
  for (cpu::WeightType type : {cpu::WeightType::BF16, cpu::WeightType::F8E4M3})
    for (Shape s : {Shape{1, 1536, 7168, 128, 128}, Shape{2, 300, 1024, 128, 128},
                    Shape{8, 129, 512, 128, 128}, Shape{3, 70, 200, 64, 32},
                    Shape{5, 33, 257, 16, 64}, Shape{9, 130, 384, 128, 128},
                    Shape{65, 200, 256, 128, 128},
                    // m = 1 with N large enough for eight columns a warp.
                    Shape{1, 20003, 512, 128, 128}})
      for (bool withBias : {false, true}) {
        int64_t scaleCount = ((s.n + s.blockN - 1) / s.blockN) *
                             ((s.k + s.blockK - 1) / s.blockK);
        StoredWeights w = randomStored(rng, type, s.n * s.k, scaleCount);
        StoredWeights bias = randomStored(rng, cpu::WeightType::BF16, s.n, 0);
        auto x = random(s.m * s.k);
        cpu::WeightView hw;
        hw.data = w.bytes.data();
        hw.type = type;
        hw.scales = w.scales.data();
        hw.blockN = s.blockN;
        hw.blockK = s.blockK;
        cpu::WeightView hb;
        if (withBias) {
          hb.data = bias.bytes.data();
          hb.type = cpu::WeightType::BF16;
        }
        std::vector<float> expected(s.m * s.n);
        cpu::matmul(pool, x.data(), hw, hb, s.m, s.n, s.k, expected.data(),
                    cpu::MatmulTiling());
        Buffer dx(*driver, x), dw(*driver, w.bytes), ds(*driver, w.scales),
            db(*driver, bias.bytes), dOut(*driver, s.m * s.n * 4);
        DeviceWeight gw;
        gw.data = dw;
        gw.type = type == cpu::WeightType::BF16 ? 1 : 2;
        gw.scales = ds.get();
        gw.blockN = s.blockN;
        gw.blockK = s.blockK;
        DeviceWeight gb;
        if (withBias) {
          gb.data = db;
          gb.type = 1;
        }
        expectRan(
            kernels->matmul(dx, gw, gb, s.m, s.n, s.k, dOut, nullptr, nullptr));
        double e = rowRelativeError(dOut.read<float>(s.m * s.n), expected, s.n);
        char shape[80];
        std::snprintf(shape, sizeof(shape), "%s m=%ld n=%ld k=%ld bias=%d",
                      type == cpu::WeightType::BF16 ? "bf16" : "e4m3",
                      long(s.m), long(s.n), long(s.k), withBias);
        report("matmul (stored)", shape, e);
        EXPECT_LE(e, 1e-5); // fp32 sums in another order, same widened values
      }
}

TEST_F(CudaKernelsTest, TensorCoreGemv) {
  // Every tensor-core GEMV kernel (one or two row tiles a warp) with K
  // whole in one block and split over clusters of 2, 3, 8 and 16 blocks
  // (where K has that many groups), m = 1, 3 and 8, partial row tiles, NaN
  // codes, with and without bias; x spans
  // 2^-30 to 2^30 between groups (each 128-column group of a token is
  // scaled on its own for e4m3) and at long K, the real shapes' 7168 and
  // 18432 columns with the launcher's own choice.
  struct Shape {
    int64_t m, n, k;
    bool sweep; // every kernel and cluster, else the launcher's choice
  };
  for (cpu::WeightType type : {cpu::WeightType::BF16, cpu::WeightType::F8E4M3})
    for (Shape s : {Shape{1, 300, 1024, true}, Shape{3, 129, 1024, true},
                    Shape{8, 200, 512, true}, Shape{1, 130, 7168, false},
                    Shape{8, 96, 7168, false}, Shape{2, 48, 18432, false},
                    Shape{1, 64, 18432, false}})
      for (bool withBias : {false, true}) {
        int64_t blocks = 128;
        int64_t scaleCount = ((s.n + blocks - 1) / blocks) * (s.k / blocks);
        StoredWeights w = randomStored(rng, type, s.n * s.k, scaleCount);
        StoredWeights bias = randomStored(rng, cpu::WeightType::BF16, s.n, 0);
        auto x = random(s.m * s.k);
        std::uniform_int_distribution<int> exponent(-30, 30);
        for (int64_t g = 0; g < s.m * s.k / 128; ++g) {
          float factor = std::ldexp(1.0f, exponent(rng));
          for (int64_t i = 0; i < 128; ++i)
            x[g * 128 + i] *= factor;
        }
        cpu::WeightView hw;
        hw.data = w.bytes.data();
        hw.type = type;
        hw.scales = w.scales.data();
        hw.blockN = hw.blockK = blocks;
        cpu::WeightView hb;
        if (withBias) {
          hb.data = bias.bytes.data();
          hb.type = cpu::WeightType::BF16;
        }
        std::vector<float> expected(s.m * s.n);
        cpu::matmul(pool, x.data(), hw, hb, s.m, s.n, s.k, expected.data(),
                    cpu::MatmulTiling());
        Buffer dx(*driver, x), dw(*driver, w.bytes), ds(*driver, w.scales),
            db(*driver, bias.bytes), dOut(*driver, s.m * s.n * 4);
        DeviceWeight gw;
        gw.data = dw;
        gw.type = type == cpu::WeightType::BF16 ? 1 : 2;
        gw.scales = ds.get();
        gw.blockN = gw.blockK = blocks;
        DeviceWeight gb;
        if (withBias) {
          gb.data = db;
          gb.type = 1;
        }
        ASSERT_TRUE(CudaKernels::tensorGemvApplies(gw, s.m, s.k));
        std::vector<TensorGemvChoice> choices = {TensorGemvChoice()};
        if (s.sweep)
          for (int tiles : {1, 2})
            for (int cluster : {1, 2, 3, 8, 16})
              if (cluster <= s.k / (type == cpu::WeightType::BF16 ? 64 : 128))
                choices.push_back(TensorGemvChoice{tiles, cluster});
        for (TensorGemvChoice choice : choices) {
          // Poisoned (NaN) first: every output must be written.
          ASSERT_EQ(driver->cuMemsetD8(dOut.get(), 0xff, s.m * s.n * 4),
                    CUDA_SUCCESS);
          expectRan(kernels->tensorGemv(dx, gw, gb, s.m, s.n, s.k, dOut,
                                        nullptr, choice));
          double e =
              rowRelativeError(dOut.read<float>(s.m * s.n), expected, s.n);
          char shape[96];
          std::snprintf(shape, sizeof(shape),
                        "%s m=%ld n=%ld k=%ld bias=%d tiles=%d cluster=%d",
                        type == cpu::WeightType::BF16 ? "bf16" : "e4m3",
                        long(s.m), long(s.n), long(s.k), withBias, choice.tiles,
                        choice.cluster);
          report("tensorGemv", shape, e);
          EXPECT_LE(e, 1e-5); // exact products, fp32 sums in another order
        }
      }
}

TEST_F(CudaKernelsTest, TensorCoreGemm) {
  // The many-row tensor-core GEMM, forced (tensorGemm) and as matmul picks
  // it, on bf16 and e4m3 weights with DeepSeek's 128 x 128 block scales
  // and gpt-oss's [1, 32] ones: m from one partial row tile to 16 of them,
  // N past a multiple of the 128-column tile, K a multiple of 16 but not of
  // the 64-column stage (a partial last stage and scale block), NaN codes,
  // with and without bias; x spans 2^-30 to 2^30 between 64-column stages
  // (each stage of a row is scaled on its own for e4m3).
  struct Shape {
    int64_t m, n, k;
  };
  struct Format {
    cpu::WeightType type;
    int64_t blockN, blockK;
  };
  for (Format f : {Format{cpu::WeightType::BF16, 0, 0},
                   Format{cpu::WeightType::F8E4M3, 128, 128},
                   Format{cpu::WeightType::F8E4M3, 1, 32}})
    for (Shape s :
         {Shape{16, 200, 512}, Shape{17, 130, 1040}, Shape{100, 300, 2880},
          Shape{300, 129, 336}, Shape{1024, 257, 1024},
          // One stage short of 64 columns (glm5_next_pools' k = 16 and 48;
          // that model gave NaNs on the H200 in session 12).
          Shape{227, 64, 16}, Shape{227, 144, 48}})
      for (bool withBias : {false, true}) {
        bool e4m3 = f.type == cpu::WeightType::F8E4M3;
        int64_t scaleCount = e4m3 ? ((s.n + f.blockN - 1) / f.blockN) *
                                        ((s.k + f.blockK - 1) / f.blockK)
                                  : 0;
        StoredWeights w = randomStored(rng, f.type, s.n * s.k, scaleCount);
        StoredWeights bias = randomStored(rng, cpu::WeightType::BF16, s.n, 0);
        auto x = random(s.m * s.k);
        std::uniform_int_distribution<int> exponent(-30, 30);
        for (int64_t r = 0; r < s.m; ++r)
          for (int64_t c0 = 0; c0 < s.k; c0 += 64) {
            float factor = std::ldexp(1.0f, exponent(rng));
            for (int64_t c = c0; c < std::min(c0 + 64, s.k); ++c)
              x[r * s.k + c] *= factor;
          }
        cpu::WeightView hw;
        hw.data = w.bytes.data();
        hw.type = f.type;
        hw.scales = w.scales.data();
        hw.blockN = f.blockN;
        hw.blockK = f.blockK;
        cpu::WeightView hb;
        if (withBias) {
          hb.data = bias.bytes.data();
          hb.type = cpu::WeightType::BF16;
        }
        std::vector<float> expected(s.m * s.n);
        cpu::matmul(pool, x.data(), hw, hb, s.m, s.n, s.k, expected.data(),
                    cpu::MatmulTiling());
        Buffer dx(*driver, x), dw(*driver, w.bytes), ds(*driver, w.scales),
            db(*driver, bias.bytes), dOut(*driver, s.m * s.n * 4);
        DeviceWeight gw;
        gw.data = dw;
        gw.type = e4m3 ? 2 : 1;
        gw.scales = ds.get();
        gw.blockN = f.blockN;
        gw.blockK = f.blockK;
        DeviceWeight gb;
        if (withBias) {
          gb.data = db;
          gb.type = 1;
        }
        ASSERT_TRUE(CudaKernels::tensorGemmApplies(gw, s.k));
        for (bool forced : {true, false}) {
          // Poisoned (NaN) first: every output must be written.
          ASSERT_EQ(driver->cuMemsetD8(dOut.get(), 0xff, s.m * s.n * 4),
                    CUDA_SUCCESS);
          expectRan(forced ? kernels->tensorGemm(dx, gw, gb, s.m, s.n, s.k,
                                                 dOut, nullptr)
                           : kernels->matmul(dx, gw, gb, s.m, s.n, s.k, dOut,
                                             nullptr));
          double e =
              rowRelativeError(dOut.read<float>(s.m * s.n), expected, s.n);
          char shape[96];
          std::snprintf(
              shape, sizeof(shape), "%s/%ldx%ld m=%ld n=%ld k=%ld bias=%d %s",
              e4m3 ? "e4m3" : "bf16", long(f.blockN), long(f.blockK), long(s.m),
              long(s.n), long(s.k), withBias, forced ? "tensorGemm" : "matmul");
          report("tensorGemm", shape, e);
          EXPECT_LE(e, 1e-5) << shape; // exact products, fp32 sums reordered
        }
      }
}

TEST_F(CudaKernelsTest, TensorCoreExpertMatmul) {
  // The grouped expert GEMM on the tensor cores, forced and as
  // expertMatmul picks it (with scratch), against the CPU kernel: bf16,
  // e4m3 with [1, 32] and 128 x 128 scales; 64 to 1024 tokens, top-1 to
  // top-8; skewed routing (expert 3 takes most slots, several experts take
  // none), empty slots (-1); x per token or per slot; with and without
  // routing weights and bias. N and K are not multiples of the tiles.
  struct Format {
    cpu::WeightType type;
    int64_t blockN, blockK;
  };
  constexpr int64_t experts = 10, n = 200, k = 336;
  int run = 0;
  for (Format f : {Format{cpu::WeightType::F8E4M3, 1, 32},
                   Format{cpu::WeightType::F8E4M3, 128, 128},
                   Format{cpu::WeightType::BF16, 0, 0}})
    for (auto [tokens, slots] : {std::pair<int64_t, int64_t>{64, 1},
                                 {64, 8},
                                 {300, 4},
                                 {1024, 2},
                                 {1024, 8}})
      for (bool perSlot : {false, true})
        for (bool routed : {false, true}) {
          bool e4m3 = f.type == cpu::WeightType::F8E4M3;
          bool withBias = ++run % 2 == 0;
          int64_t scaleCount = e4m3
                                   ? experts * ((n + f.blockN - 1) / f.blockN) *
                                         ((k + f.blockK - 1) / f.blockK)
                                   : 0;
          StoredWeights w =
              randomStored(rng, f.type, experts * n * k, scaleCount);
          auto bias = random(experts * n);
          auto x = random(tokens * (perSlot ? slots : 1) * k);
          auto routing = random(tokens * slots, 0, 1);
          // 70 % of the slots on expert 3, 5 % empty, the rest on experts
          // 0-5 (6 to 9 never picked).
          std::vector<int32_t> indices(tokens * slots);
          for (auto &i : indices) {
            uint32_t draw = rng() % 100;
            i = draw < 70 ? 3 : draw < 75 ? -1 : int32_t(rng() % 6);
          }
          cpu::WeightView hw;
          hw.data = w.bytes.data();
          hw.type = f.type;
          hw.scales = w.scales.data();
          hw.blockN = f.blockN;
          hw.blockK = f.blockK;
          cpu::WeightView hb;
          if (withBias)
            hb.data = bias.data();
          int64_t outRows = routed ? tokens : tokens * slots;
          std::vector<float> expected(outRows * n);
          ASSERT_TRUE(cpu::expertMatmul(pool, x.data(), perSlot, hw, experts, n,
                                        k, indices.data(), tokens, slots,
                                        routed ? routing.data() : nullptr,
                                        expected.data(), hb)
                          .ok());
          int64_t scratchBytes =
              expertGemmScratchBytes(tokens, slots, experts, n, routed);
          Buffer dx(*driver, x), dw(*driver, w.bytes), ds(*driver, w.scales),
              db(*driver, bias), dIdx(*driver, indices), dR(*driver, routing),
              dOut(*driver, expected.size() * 4),
              dScratch(*driver, size_t(scratchBytes));
          DeviceWeight gw;
          gw.data = dw;
          gw.type = e4m3 ? 2 : 1;
          gw.scales = ds.get();
          gw.blockN = f.blockN;
          gw.blockK = f.blockK;
          DeviceWeight gb;
          if (withBias)
            gb.data = db; // f32
          for (bool forced : {true, false}) {
            ASSERT_EQ(driver->cuMemsetD8(dOut.get(), 0xff, expected.size() * 4),
                      CUDA_SUCCESS);
            expectRan(forced ? kernels->tensorExpertMatmul(
                                   dx, perSlot, gw, experts, n, k, dIdx, tokens,
                                   slots, routed ? dR.get() : 0, dOut, nullptr,
                                   gb, dScratch, scratchBytes)
                             : kernels->expertMatmul(
                                   dx, perSlot, gw, experts, n, k, dIdx, tokens,
                                   slots, routed ? dR.get() : 0, dOut, nullptr,
                                   gb, dScratch, scratchBytes));
            double e = rowRelativeError(dOut.read<float>(expected.size()),
                                        expected, n);
            char shape[112];
            std::snprintf(shape, sizeof(shape),
                          "%s/%ldx%ld T=%ld top-%ld perSlot=%d routed=%d "
                          "bias=%d %s",
                          e4m3 ? "e4m3" : "bf16", long(f.blockN),
                          long(f.blockK), long(tokens), long(slots), perSlot,
                          routed, withBias, forced ? "forced" : "auto");
            report("expertMatmul (tc)", shape, e);
            EXPECT_LE(e, 1e-5) << shape;
          }
        }
}

TEST_F(CudaKernelsTest, Bf16InputMatmuls) {
  // --precision=bf16 (InputRounding): matmul and expertMatmul on bf16 and
  // e4m3 weights take x rounded to bf16 through every path they pick: the
  // one-part tensor-core GEMMs (more than 8 rows), and a rounded copy in
  // the scratch before the tensor-core GEMVs (8 rows or fewer, K a multiple
  // of 128) and the CUDA-core kernels (K = 200, [1, 32] experts at decode).
  // The oracle is the CPU kernel on x rounded on the host
  // (numerics::roundToBf16): the products are then the same exact
  // products of bf16(x) and the widened weight, only the fp32 sums' order
  // differs. Each case must also differ from the exact result (the
  // rounding happened), leave x as it was, and a scratch one float short
  // of a copy is an error.
  struct Format {
    cpu::WeightType type;
    int64_t blockN, blockK;
  };
  struct Shape {
    int64_t m, n, k;
  };
  auto rounded = [](std::vector<float> x) {
    for (float &v : x)
      v = numerics::roundToBf16(v);
    return x;
  };
  for (Format f : {Format{cpu::WeightType::BF16, 0, 0},
                   Format{cpu::WeightType::F8E4M3, 128, 128},
                   Format{cpu::WeightType::F8E4M3, 1, 32}}) {
    bool e4m3 = f.type == cpu::WeightType::F8E4M3;
    cpu::WeightView hw;
    hw.type = f.type;
    hw.blockN = f.blockN;
    hw.blockK = f.blockK;
    DeviceWeight gw;
    gw.type = e4m3 ? 2 : 1;
    gw.blockN = f.blockN;
    gw.blockK = f.blockK;
    auto scaleCount = [&](int64_t rows, int64_t n, int64_t k) {
      return e4m3 ? rows * ((n + f.blockN - 1) / f.blockN) *
                        ((k + f.blockK - 1) / f.blockK)
                  : 0;
    };
    for (Shape s : {Shape{1, 300, 1024}, Shape{8, 129, 512}, Shape{5, 70, 200},
                    Shape{64, 200, 512}, Shape{300, 129, 336}}) {
      StoredWeights w =
          randomStored(rng, f.type, s.n * s.k, scaleCount(1, s.n, s.k));
      auto x = random(s.m * s.k);
      std::uniform_int_distribution<int> exponent(-20, 20);
      for (int64_t r = 0; r < s.m; ++r) {
        float factor = std::ldexp(1.0f, exponent(rng));
        for (int64_t c = 0; c < s.k; ++c)
          x[r * s.k + c] *= factor;
      }
      hw.data = w.bytes.data();
      hw.scales = w.scales.data();
      std::vector<float> expected(s.m * s.n), exact(s.m * s.n);
      std::vector<float> xr = rounded(x);
      cpu::matmul(pool, xr.data(), hw, cpu::WeightView(), s.m, s.n, s.k,
                  expected.data(), cpu::MatmulTiling());
      cpu::matmul(pool, x.data(), hw, cpu::WeightView(), s.m, s.n, s.k,
                  exact.data(), cpu::MatmulTiling());
      Buffer dx(*driver, x), dw(*driver, w.bytes), ds(*driver, w.scales),
          dOut(*driver, s.m * s.n * 4), dScratch(*driver, s.m * s.k * 4);
      gw.data = dw;
      gw.scales = ds.get();
      ASSERT_EQ(driver->cuMemsetD8(dOut.get(), 0xff, s.m * s.n * 4),
                CUDA_SUCCESS);
      InputRounding rounding{true, dScratch, s.m * s.k};
      expectRan(kernels->matmul(dx, gw, DeviceWeight(), s.m, s.n, s.k, dOut,
                                nullptr, nullptr, false, rounding));
      std::vector<float> out = dOut.read<float>(s.m * s.n);
      double e = rowRelativeError(out, expected, s.n);
      char shape[96];
      std::snprintf(shape, sizeof(shape), "%s/%ldx%ld m=%ld n=%ld k=%ld",
                    e4m3 ? "e4m3" : "bf16", long(f.blockN), long(f.blockK),
                    long(s.m), long(s.n), long(s.k));
      report("matmul (bf16 x)", shape, e);
      EXPECT_LE(e, 1e-5) << shape;
      EXPECT_GT(rowRelativeError(out, exact, s.n), 1e-5) << shape;
      EXPECT_EQ(dx.read<float>(x.size()), x) << shape;
      if (s.m <= 8) {
        // The copy's paths: one float short of the input is refused.
        rounding.scratchFloats = s.m * s.k - 1;
        Status refused =
            kernels->matmul(dx, gw, DeviceWeight(), s.m, s.n, s.k, dOut,
                            nullptr, nullptr, false, rounding);
        EXPECT_FALSE(refused.ok()) << shape;
        EXPECT_NE(refused.message().find("needs as much scratch"),
                  std::string::npos)
            << refused.message();
      }
    }

    // Experts: 4 tokens (the tensor-core GEMV for 128 x 128 and bf16, the
    // CUDA cores for [1, 32]) and 64 (the grouped GEMM), x per token and
    // per slot, routed.
    constexpr int64_t experts = 6, n = 136, k = 512, slots = 4;
    for (int64_t tokens : {4, 64})
      for (bool perSlot : {false, true}) {
        StoredWeights w = randomStored(rng, f.type, experts * n * k,
                                       scaleCount(experts, n, k));
        auto x = random(tokens * (perSlot ? slots : 1) * k);
        auto routing = random(tokens * slots, 0, 1);
        std::vector<int32_t> indices(tokens * slots);
        for (auto &i : indices)
          i = int32_t(rng() % experts);
        hw.data = w.bytes.data();
        hw.scales = w.scales.data();
        std::vector<float> expected(tokens * n), exact(tokens * n);
        std::vector<float> xr = rounded(x);
        ASSERT_TRUE(cpu::expertMatmul(pool, xr.data(), perSlot, hw, experts, n,
                                      k, indices.data(), tokens, slots,
                                      routing.data(), expected.data(),
                                      cpu::WeightView())
                        .ok());
        ASSERT_TRUE(cpu::expertMatmul(pool, x.data(), perSlot, hw, experts, n,
                                      k, indices.data(), tokens, slots,
                                      routing.data(), exact.data(),
                                      cpu::WeightView())
                        .ok());
        int64_t scratchBytes =
            std::max(expertGemmScratchBytes(tokens, slots, experts, n, true),
                     expertGemvScratchBytes(tokens, slots, n, true));
        int64_t roundFloats = CudaKernels::expertRoundingFloats(
            gw, experts, n, k, tokens, slots, perSlot, true);
        Buffer dx(*driver, x), dw(*driver, w.bytes), ds(*driver, w.scales),
            dIdx(*driver, indices), dR(*driver, routing),
            dOut(*driver, expected.size() * 4),
            dScratch(*driver, size_t(scratchBytes)),
            dRound(*driver, std::max<int64_t>(roundFloats, 1) * 4);
        gw.data = dw;
        gw.scales = ds.get();
        ASSERT_EQ(driver->cuMemsetD8(dOut.get(), 0xff, expected.size() * 4),
                  CUDA_SUCCESS);
        expectRan(kernels->expertMatmul(
            dx, perSlot, gw, experts, n, k, dIdx, tokens, slots, dR, dOut,
            nullptr, DeviceWeight(), dScratch, scratchBytes,
            InputRounding{true, dRound, roundFloats}));
        std::vector<float> out = dOut.read<float>(expected.size());
        double e = rowRelativeError(out, expected, n);
        char shape[96];
        std::snprintf(shape, sizeof(shape),
                      "%s/%ldx%ld T=%ld top-%ld perSlot=%d",
                      e4m3 ? "e4m3" : "bf16", long(f.blockN), long(f.blockK),
                      long(tokens), long(slots), perSlot);
        report("expertMatmul (bf16 x)", shape, e);
        EXPECT_LE(e, 1e-5) << shape;
        EXPECT_GT(rowRelativeError(out, exact, n), 1e-5) << shape;
        EXPECT_EQ(dx.read<float>(x.size()), x) << shape;
      }
  }
}

TEST_F(CudaKernelsTest, WarpgroupExpertMatmul) {
  // --precision=bf16's grouped expert matmul on the warpgroup MMA
  // (warpgroupExpertMatmul: rows grouped by expert into 128-row tiles, x
  // gathered in that order as bf16 codes, each expert's rows read by the
  // copy engine from all experts' weights as one matrix), forced and as
  // expertMatmul picks it, against the CPU kernel on x rounded on the
  // host: the same exact products, fp32 sums in another order. bf16, and
  // e4m3 with 128 x 128 and 256 x 64 blocks; 17 to 1024 tokens, top-1 to
  // top-8; skewed routing (expert 3 takes most rows: several full tiles
  // and a partial one; experts 6 to 8 none; the last expert some, so its
  // partial column tile reads past the weight's end), empty slots (-1); x
  // per token or per slot; with and without routing weights and bias. N
  // and K are not multiples of the tiles. The output is poisoned first.
  struct Format {
    cpu::WeightType type;
    int64_t blockN, blockK;
  };
  constexpr int64_t experts = 10, n = 200, k = 336;
  int run = 0;
  for (Format f : {Format{cpu::WeightType::BF16, 0, 0},
                   Format{cpu::WeightType::F8E4M3, 128, 128},
                   Format{cpu::WeightType::F8E4M3, 256, 64}})
    for (auto [tokens, slots] :
         {std::pair<int64_t, int64_t>{17, 8}, {130, 1}, {300, 4}, {1024, 2}})
      for (bool perSlot : {false, true})
        for (bool routed : {false, true}) {
          bool e4m3 = f.type == cpu::WeightType::F8E4M3;
          bool withBias = ++run % 2 == 0;
          int64_t scaleCount = e4m3
                                   ? experts * ((n + f.blockN - 1) / f.blockN) *
                                         ((k + f.blockK - 1) / f.blockK)
                                   : 0;
          StoredWeights w =
              randomStored(rng, f.type, experts * n * k, scaleCount);
          auto bias = random(experts * n);
          auto x = random(tokens * (perSlot ? slots : 1) * k);
          std::vector<float> xr = x;
          for (float &v : xr)
            v = numerics::roundToBf16(v);
          auto routing = random(tokens * slots, 0, 1);
          std::vector<int32_t> indices(tokens * slots);
          for (auto &i : indices) {
            uint32_t draw = rng() % 100;
            i = draw < 60   ? 3
                : draw < 65 ? -1
                : draw < 75 ? int32_t(experts - 1)
                            : int32_t(rng() % 6);
          }
          cpu::WeightView hw;
          hw.data = w.bytes.data();
          hw.type = f.type;
          hw.scales = w.scales.data();
          hw.blockN = f.blockN;
          hw.blockK = f.blockK;
          cpu::WeightView hb;
          if (withBias)
            hb.data = bias.data();
          int64_t outRows = routed ? tokens : tokens * slots;
          std::vector<float> expected(outRows * n);
          ASSERT_TRUE(cpu::expertMatmul(pool, xr.data(), perSlot, hw, experts,
                                        n, k, indices.data(), tokens, slots,
                                        routed ? routing.data() : nullptr,
                                        expected.data(), hb)
                          .ok());
          DeviceWeight gw;
          gw.type = e4m3 ? 2 : 1;
          gw.blockN = f.blockN;
          gw.blockK = f.blockK;
          int64_t scratchBytes =
              expertGemmScratchBytes(tokens, slots, experts, n, routed);
          int64_t roundFloats = CudaKernels::expertRoundingFloats(
              gw, experts, n, k, tokens, slots, perSlot, true);
          ASSERT_EQ(roundFloats, (tokens * slots * k + 1) / 2);
          Buffer dx(*driver, x), dw(*driver, w.bytes), ds(*driver, w.scales),
              db(*driver, bias), dIdx(*driver, indices), dR(*driver, routing),
              dOut(*driver, expected.size() * 4),
              dScratch(*driver, size_t(scratchBytes)),
              dRound(*driver, size_t(roundFloats) * 4);
          gw.data = dw;
          gw.scales = ds.get();
          DeviceWeight gb;
          if (withBias)
            gb.data = db; // f32
          InputRounding rounding{true, dRound, roundFloats};
          char shape[112];
          std::snprintf(shape, sizeof(shape),
                        "%s/%ldx%ld T=%ld top-%ld perSlot=%d routed=%d "
                        "bias=%d",
                        e4m3 ? "e4m3" : "bf16", long(f.blockN), long(f.blockK),
                        long(tokens), long(slots), perSlot, routed, withBias);
          for (bool forced : {true, false}) {
            ASSERT_EQ(driver->cuMemsetD8(dOut.get(), 0xff, expected.size() * 4),
                      CUDA_SUCCESS);
            expectRan(forced ? kernels->warpgroupExpertMatmul(
                                   dx, perSlot, gw, experts, n, k, dIdx, tokens,
                                   slots, routed ? dR.get() : 0, dOut, nullptr,
                                   gb, dScratch, scratchBytes, rounding)
                             : kernels->expertMatmul(
                                   dx, perSlot, gw, experts, n, k, dIdx, tokens,
                                   slots, routed ? dR.get() : 0, dOut, nullptr,
                                   gb, dScratch, scratchBytes, rounding));
            double e = rowRelativeError(dOut.read<float>(expected.size()),
                                        expected, n);
            report(
                "expertMatmul (warpgroup)",
                (std::string(shape) + (forced ? " forced" : " auto")).c_str(),
                e);
            EXPECT_LE(e, 1e-5) << shape << (forced ? " forced" : " auto");
          }
          EXPECT_EQ(dx.read<float>(x.size()), x) << shape;
          // A gather scratch one float short is refused.
          rounding.scratchFloats = roundFloats - 1;
          Status refused = kernels->expertMatmul(
              dx, perSlot, gw, experts, n, k, dIdx, tokens, slots,
              routed ? dR.get() : 0, dOut, nullptr, gb, dScratch, scratchBytes,
              rounding);
          EXPECT_FALSE(refused.ok()) << shape;
          EXPECT_NE(refused.message().find("floats of 16-byte aligned scratch"),
                    std::string::npos)
              << refused.message();
        }
  // Below the row minimum and on scale blocks it cannot fold, the other
  // paths take the launch.
  DeviceWeight w32;
  w32.type = 2;
  w32.blockN = 1;
  w32.blockK = 32;
  EXPECT_FALSE(
      CudaKernels::warpgroupExpertGemmApplies(w32, 8, 512, 512, 1024, 8));
  DeviceWeight bf;
  bf.type = 1;
  EXPECT_FALSE(CudaKernels::warpgroupExpertGemmApplies(bf, 8, 512, 512, 15, 8));
  EXPECT_TRUE(CudaKernels::warpgroupExpertGemmApplies(bf, 8, 512, 512, 16, 8));
}

/// x quantized as daybreak_quant_fp8 does (its oracle): per row and 128
/// columns, scale 2^ceil(log2(max(amax, 1e-4) / 448)) and the codes
/// numerics::floatToE4m3(x / scale) (RNE, saturating); `dequantized` gets
/// code x scale.
void quantizeFp8Rows(const std::vector<float> &x, int64_t m, int64_t k,
                     std::vector<uint8_t> &codes, std::vector<float> &scales,
                     std::vector<float> &dequantized) {
  int64_t blocks = (k + 127) / 128;
  codes.assign(m * k, 0);
  scales.assign(m * blocks, 0.0f);
  dequantized.assign(m * k, 0.0f);
  for (int64_t r = 0; r < m; ++r)
    for (int64_t b = 0; b < blocks; ++b) {
      int64_t end = std::min(k, (b + 1) * 128);
      double amax = 1e-4;
      for (int64_t c = b * 128; c < end; ++c)
        amax = std::max(amax, double(std::fabs(x[r * k + c])));
      // The least power of two not below amax / 448.
      int exponent;
      double mantissa = std::frexp(amax / 448.0, &exponent);
      if (mantissa == 0.5)
        --exponent;
      scales[r * blocks + b] = std::ldexp(1.0f, exponent);
      for (int64_t c = b * 128; c < end; ++c) {
        uint8_t code =
            numerics::floatToE4m3(std::ldexp(x[r * k + c], -exponent), true);
        codes[r * k + c] = code;
        dequantized[r * k + c] =
            std::ldexp(numerics::e4m3ToFloat(code), exponent);
      }
    }
}

TEST_F(CudaKernelsTest, Fp8Gemm) {
  // The FP8 GEMM (fp8Gemm: x quantized to e4m3 with a power-of-two scale a
  // row and 128 columns, the fp8 warpgroup MMA, each 128 columns' sums
  // folded with both scales). Three checks:
  // - the quantization: the scratch holds exactly the codes and scales
  //   quantizeFp8Rows computes on the host;
  // - exactness: on small-integer data (x an integer in [-4, 4] times a
  //   power of two per row, weight codes integers in [-4, 4], power-of-two
  //   block scales) every product, every 128-column sum in the tensor core
  //   (at most 2^11 quanta: exact with its 13 or more bits) and every fold
  //   are exact, and so are the CPU's fp32 sums: the result must equal the
  //   CPU kernel's bit for bit. This catches any misplaced tile, swizzle,
  //   row or scale;
  // - random data (row magnitudes 2^-20 to 2^20, random codes and scales,
  //   a bias): the CPU kernel on the dequantized x is the oracle, within a
  //   bound derived from the tensor core's short sums: they keep at least
  //   13 bits (DeepSeek-V3's report measures about 14) and truncate, so
  //   each of a block's at most 127 additions loses under 2^-12 of the
  //   block's sum of |products|, B_b; the folds and the CPU's fp32 sums add
  //   at most (k + blocks + 4) 2^-24 of B + |bias|, with B the whole sum of
  //   |products| (each block's with its scales):
  //   |error| <= 127 2^-12 B + (k + blocks + splits + 4) 2^-24 (B + |bias|)
  //   (split-K adds its partials in up to `splits` more fp32 additions).
  // Each shape runs on the tile fp8GemmTile chooses and on every kind the
  // library has (64 and 128 rows a block, K unsplit and split 2, 3 and 5
  // ways, a split with no blocks of K past the end included).
  struct Shape {
    int64_t m, n, k;
    int64_t blockN;
    bool bias;
  };
  for (bool integers : {true, false})
    for (Shape s :
         {Shape{1, 300, 1024, 128, false}, Shape{130, 129, 208, 128, true},
          Shape{384, 512, 2048, 256, false}, Shape{257, 1000, 720, 128, true},
          Shape{1100, 384, 1536, 128, false}, Shape{64, 300, 2048, 128, true},
          Shape{16, 576, 1792, 128, false}, Shape{9, 256, 512, 256, true}})
      for (int choice = 0; choice < 8; ++choice) {
        if (choice > 0 && s.m * s.n * s.k > 100'000'000)
          break; // the oracle's bound is slow; the kinds run on the others
        Fp8GemmTile tile = kernels->fp8GemmTile(s.m, s.n, s.k);
        CUfunction instantiation = nullptr;
        if (choice > 0) {
          const Fp8GemmTile kinds[] = {{64, 128, 9, 1}, {128, 128, 6, 1},
                                       {64, 128, 9, 3}, {128, 128, 6, 2},
                                       {64, 128, 9, 5}, {64, 128, 4, 2},
                                       {128, 128, 7, 3}};
          tile = kinds[choice - 1];
          if (tile.stages != fp8GemmLibraryStages(tile.rows)) {
            instantiation =
                variant("daybreak_gemm_wg_fp8_t<" + std::to_string(tile.rows) +
                        ", " + std::to_string(tile.stages) + ">");
            ASSERT_NE(instantiation, nullptr);
            ASSERT_TRUE(kernels->allowSharedMemory(instantiation).ok());
          }
        }
        int64_t blocks = (s.k + 127) / 128;
        int64_t scaleCount = ((s.n + s.blockN - 1) / s.blockN) * blocks;
        StoredWeights w =
            randomStored(rng, cpu::WeightType::F8E4M3, s.n * s.k, scaleCount);
        std::uniform_int_distribution<int> small(-4, 4), exponent(-20, 20),
            scaleExponent(-7, -3);
        for (uint8_t &code : w.bytes) {
          if (integers)
            code = numerics::floatToE4m3(float(small(rng)), true);
          else if ((code & 0x7F) == 0x7F)
            code ^= 1; // no NaN
        }
        if (integers)
          for (float &scale : w.scales)
            scale = std::ldexp(1.0f, scaleExponent(rng));
        std::vector<float> x(s.m * s.k);
        std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
        for (int64_t r = 0; r < s.m; ++r) {
          int e = exponent(rng);
          for (int64_t c = 0; c < s.k; ++c)
            x[r * s.k + c] = integers ? std::ldexp(float(small(rng)), e)
                                      : std::ldexp(uniform(rng), e);
        }
        if (s.m > 2) {
          std::fill(x.begin(), x.begin() + s.k, 0.0f); // amax 0: the floor
          for (int64_t c = 0; c < s.k; ++c)
            x[s.k + c] *= 1e-30f; // under the 1e-4 floor: subnormal codes
        }
        std::vector<uint8_t> codes;
        std::vector<float> scales, xq;
        quantizeFp8Rows(x, s.m, s.k, codes, scales, xq);
        // (No bias with integers: where the CPU adds it is its own choice.)
        bool withBias = s.bias && !integers;
        std::vector<float> bias = random(withBias ? s.n : 0);
        cpu::WeightView hw, hb;
        hw.type = cpu::WeightType::F8E4M3;
        hw.blockN = s.blockN;
        hw.blockK = 128;
        hw.data = w.bytes.data();
        hw.scales = w.scales.data();
        if (withBias)
          hb.data = bias.data();
        std::vector<float> expected(s.m * s.n);
        cpu::matmul(pool, xq.data(), hw, hb, s.m, s.n, s.k, expected.data(),
                    cpu::MatmulTiling());

        DeviceWeight gw, gb;
        gw.type = 2;
        gw.blockN = s.blockN;
        gw.blockK = 128;
        int64_t floats =
            CudaKernels::fp8GemmScratchFloats(s.m, s.k, s.n, tile.splits);
        Buffer dx(*driver, x), dw(*driver, w.bytes), ds(*driver, w.scales),
            dOut(*driver, s.m * s.n * 4), dScratch(*driver, floats * 4);
        std::unique_ptr<Buffer> db;
        gw.data = dw;
        gw.scales = ds.get();
        if (withBias) {
          db = std::make_unique<Buffer>(*driver, bias);
          gb.data = db->get(); // f32
        }
        ASSERT_TRUE(CudaKernels::fp8GemmApplies(gw, s.k));
        ASSERT_EQ(driver->cuMemsetD8(dOut.get(), 0xff, s.m * s.n * 4),
                  CUDA_SUCCESS);
        expectRan(kernels->fp8Gemm(dx, gw, gb, s.m, s.n, s.k, dOut, nullptr,
                                   InputRounding{true, dScratch, floats},
                                   choice ? &tile : nullptr, instantiation));
        std::vector<float> out = dOut.read<float>(s.m * s.n);
        char shape[128];
        std::snprintf(shape, sizeof(shape),
                      "%s %ldx128 m=%ld n=%ld k=%ld%s tile %dx%d/%d%s",
                      integers ? "integers" : "random", long(s.blockN),
                      long(s.m), long(s.n), long(s.k), withBias ? " bias" : "",
                      tile.rows, tile.splits, tile.stages,
                      choice ? "" : " (chosen)");

        // The quantization, exactly.
        std::vector<uint8_t> scratch = dScratch.read<uint8_t>(floats * 4);
        int64_t codeBytes = (s.m * s.k + 15) / 16 * 16;
        EXPECT_TRUE(std::equal(codes.begin(), codes.end(), scratch.begin()))
            << shape;
        std::vector<float> deviceScales(scales.size());
        std::memcpy(deviceScales.data(), scratch.data() + codeBytes,
                    scales.size() * 4);
        EXPECT_EQ(deviceScales, scales) << shape;

        if (integers) {
          EXPECT_EQ(out, expected) << shape;
          report("fp8_gemm", shape, rowRelativeError(out, expected, s.n));
          continue;
        }
        double worst = 0.0;
        int64_t outside = 0;
        const double u = std::ldexp(1.0, -24);
        std::vector<float> wAbs(w.bytes.size());
        for (size_t i = 0; i < wAbs.size(); ++i)
          wAbs[i] = std::fabs(numerics::e4m3ToFloat(w.bytes[i]));
        for (int64_t r = 0; r < s.m; ++r)
          for (int64_t c = 0; c < s.n; ++c) {
            // B: the sum of |products| with their scales.
            double whole = 0.0;
            for (int64_t b = 0; b < blocks; ++b) {
              double sum = 0.0;
              for (int64_t j = b * 128; j < std::min(s.k, (b + 1) * 128); ++j)
                sum += std::fabs(double(xq[r * s.k + j])) * wAbs[c * s.k + j];
              whole += sum * w.scales[(c / s.blockN) * blocks + b];
            }
            double bound = 127 * std::ldexp(1.0, -12) * whole +
                           double(s.k + blocks + tile.splits + 4) * u *
                               (whole + (withBias ? std::fabs(bias[c]) : 0.0));
            double err = std::fabs(double(out[r * s.n + c]) -
                                   double(expected[r * s.n + c]));
            if (!(err <= bound))
              ++outside;
            if (bound > 0)
              worst = std::max(worst, err / bound);
          }
        report("fp8_gemm", shape, worst);
        EXPECT_EQ(outside, 0)
            << shape << ": worst " << worst << " of the bound";
      }
  // A scratch one float short, a tile the kernel does not take or one the
  // library has no instantiation of, and weights it cannot read, are
  // refused.
  DeviceWeight w;
  w.type = 2;
  w.blockN = 128;
  w.blockK = 128;
  Status refused = kernels->fp8Gemm(
      0, w, DeviceWeight(), 256, 128, 256, 0, nullptr,
      InputRounding{true, 0, CudaKernels::fp8GemmScratchFloats(256, 256) - 1});
  EXPECT_FALSE(refused.ok());
  EXPECT_NE(refused.message().find("floats of 16-byte aligned scratch"),
            std::string::npos)
      << refused.message();
  for (Fp8GemmTile bad :
       {Fp8GemmTile{96, 128, 6, 1}, Fp8GemmTile{64, 64, 9, 1},
        Fp8GemmTile{64, 128, 10, 1}, Fp8GemmTile{128, 128, 6, 9}}) {
    refused = kernels->fp8Gemm(0, w, DeviceWeight(), 256, 128, 256, 0, nullptr,
                               InputRounding{true, 0, 1 << 24}, &bad);
    EXPECT_FALSE(refused.ok());
    EXPECT_NE(refused.message().find("no FP8 GEMM takes the tile"),
              std::string::npos)
        << refused.message();
  }
  Fp8GemmTile fewerStages{64, 128, 4, 1};
  refused = kernels->fp8Gemm(0, w, DeviceWeight(), 256, 128, 256, 0, nullptr,
                             InputRounding{true, 0, 1 << 24}, &fewerStages);
  EXPECT_FALSE(refused.ok());
  EXPECT_NE(refused.message().find("needs the compiler's instantiation"),
            std::string::npos)
      << refused.message();
  w.blockK = 64;
  EXPECT_FALSE(CudaKernels::fp8GemmApplies(w, 256));
  refused = kernels->fp8Gemm(0, w, DeviceWeight(), 256, 128, 256, 0, nullptr,
                             InputRounding{true, 0, 1 << 20});
  EXPECT_FALSE(refused.ok());
  EXPECT_NE(refused.message().find("no FP8 GEMM"), std::string::npos)
      << refused.message();
}

TEST_F(CudaKernelsTest, Fp8Inputs) {
  // --precision=fp8 (InputRounding::fp8) through matmul() and
  // expertMatmul() on e4m3 weights of 128 x 128 blocks, every path they
  // pick: the FP8 GEMMs (128 rows or more; grouped experts past 8 tokens
  // and 128 rows), and below them the exact paths on x quantized and
  // written back as fp32 (the GEMVs, the tensor-core GEMMs). The oracle is
  // the CPU device's: cpu::quantizeFp8Rows, then the CPU kernels.
  // - Small-integer data (x an integer in [-4, 4] times a power of two per
  //   row, weight codes integers in [-4, 4], power-of-two scales and
  //   routing weights): every path is exact, so each must equal the CPU bit
  //   for bit.
  // - Random data below the FP8 GEMMs' rows: the same exact products, fp32
  //   sums in another order (1e-5 of the row's largest output); the FP8
  //   GEMMs' own rounding is Fp8Gemm's test.
  // The scratch is what CudaDevice plans (matmulRoundingFloats,
  // expertRoundingFloats with fp8); one float less is refused.
  std::uniform_int_distribution<int> small(-4, 4), exponent(-12, 12),
      scaleExponent(-7, -3);
  auto integerCodes = [&](StoredWeights &w) {
    for (uint8_t &code : w.bytes)
      code = numerics::floatToE4m3(float(small(rng)), true);
    for (float &scale : w.scales)
      scale = std::ldexp(1.0f, scaleExponent(rng));
  };
  auto makeX = [&](int64_t rows, int64_t k, bool integers) {
    std::vector<float> x(rows * k);
    std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
    for (int64_t r = 0; r < rows; ++r) {
      int e = exponent(rng);
      for (int64_t c = 0; c < k; ++c)
        x[r * k + c] =
            std::ldexp(integers ? float(small(rng)) : uniform(rng), e);
    }
    return x;
  };
  DeviceWeight gw;
  gw.type = 2;
  gw.blockN = gw.blockK = 128;
  cpu::WeightView hw;
  hw.type = cpu::WeightType::F8E4M3;
  hw.blockN = hw.blockK = 128;
  for (bool integers : {true, false})
    for (auto [m, n, k] : {std::tuple<int64_t, int64_t, int64_t>{1, 300, 512},
                           {8, 129, 384},
                           {64, 200, 512},
                           {127, 256, 256},
                           {300, 129, 384}}) {
      if (!integers && m > kFp8GemvMaxRows)
        continue;
      StoredWeights w = randomStored(rng, cpu::WeightType::F8E4M3, n * k,
                                     ((n + 127) / 128) * ((k + 127) / 128));
      if (integers)
        integerCodes(w);
      else
        for (uint8_t &code : w.bytes)
          if ((code & 0x7F) == 0x7F)
            code ^= 1;
      auto x = makeX(m, k, integers);
      std::vector<float> xq(x.size()), expected(m * n);
      cpu::quantizeFp8Rows(pool, x.data(), m, k, xq.data());
      hw.data = w.bytes.data();
      hw.scales = w.scales.data();
      cpu::matmul(pool, xq.data(), hw, cpu::WeightView(), m, n, k,
                  expected.data(), cpu::MatmulTiling());
      int64_t floats = kernels->matmulRoundingFloats(gw, m, n, k, true, true);
      Buffer dx(*driver, x), dw(*driver, w.bytes), ds(*driver, w.scales),
          dOut(*driver, m * n * 4), dScratch(*driver, floats * 4);
      gw.data = dw;
      gw.scales = ds.get();
      ASSERT_EQ(driver->cuMemsetD8(dOut.get(), 0xff, m * n * 4), CUDA_SUCCESS);
      InputRounding rounding{true, dScratch, floats, true};
      expectRan(kernels->matmul(dx, gw, DeviceWeight(), m, n, k, dOut, nullptr,
                                nullptr, false, rounding));
      std::vector<float> out = dOut.read<float>(m * n);
      char shape[80];
      std::snprintf(shape, sizeof(shape), "matmul %s m=%ld n=%ld k=%ld",
                    integers ? "integers" : "random", long(m), long(n),
                    long(k));
      report("fp8 inputs", shape, rowRelativeError(out, expected, n));
      if (integers)
        EXPECT_EQ(out, expected) << shape;
      else
        EXPECT_LE(rowRelativeError(out, expected, n), 1e-5) << shape;
      rounding.scratchFloats = floats - 1;
      EXPECT_FALSE(kernels
                       ->matmul(dx, gw, DeviceWeight(), m, n, k, dOut, nullptr,
                                nullptr, false, rounding)
                       .ok())
          << shape;
    }

  // Experts: 4 tokens (the GEMV), 12 x top-4 (48 rows: the tensor-core
  // GEMM on the copy), 64 x top-8 and 300 x top-4 (the grouped FP8 GEMM);
  // x per token and per slot, routed (power-of-two weights) and not.
  constexpr int64_t experts = 6, n = 200, k = 384;
  for (auto [tokens, slots] :
       {std::pair<int64_t, int64_t>{4, 4}, {12, 4}, {64, 8}, {300, 4}})
    for (bool perSlot : {false, true})
      for (bool routed : {false, true}) {
        StoredWeights w =
            randomStored(rng, cpu::WeightType::F8E4M3, experts * n * k,
                         experts * ((n + 127) / 128) * ((k + 127) / 128));
        integerCodes(w);
        auto x = makeX(tokens * (perSlot ? slots : 1), k, true);
        std::vector<float> routing(tokens * slots);
        for (float &r : routing)
          r = std::ldexp(1.0f, -int(rng() % 4));
        std::vector<int32_t> indices(tokens * slots);
        for (auto &i : indices)
          i = int32_t(rng() % 10) < 7 ? int32_t(rng() % experts) : 2;
        std::vector<float> xq(x.size());
        cpu::quantizeFp8Rows(pool, x.data(), int64_t(x.size()) / k, k,
                             xq.data());
        hw.data = w.bytes.data();
        hw.scales = w.scales.data();
        int64_t outRows = routed ? tokens : tokens * slots;
        std::vector<float> expected(outRows * n);
        ASSERT_TRUE(cpu::expertMatmul(pool, xq.data(), perSlot, hw, experts, n,
                                      k, indices.data(), tokens, slots,
                                      routed ? routing.data() : nullptr,
                                      expected.data(), cpu::WeightView())
                        .ok());
        int64_t scratchBytes =
            std::max(expertGemmScratchBytes(tokens, slots, experts, n, routed),
                     expertGemvScratchBytes(tokens, slots, n, routed));
        int64_t floats = CudaKernels::expertRoundingFloats(
            gw, experts, n, k, tokens, slots, perSlot, true, true);
        Buffer dx(*driver, x), dw(*driver, w.bytes), ds(*driver, w.scales),
            dIdx(*driver, indices), dR(*driver, routing),
            dOut(*driver, expected.size() * 4),
            dScratch(*driver, size_t(scratchBytes)),
            dRound(*driver, size_t(floats) * 4);
        gw.data = dw;
        gw.scales = ds.get();
        ASSERT_EQ(driver->cuMemsetD8(dOut.get(), 0xff, expected.size() * 4),
                  CUDA_SUCCESS);
        InputRounding rounding{true, dRound, floats, true};
        expectRan(kernels->expertMatmul(dx, perSlot, gw, experts, n, k, dIdx,
                                        tokens, slots, routed ? dR.get() : 0,
                                        dOut, nullptr, DeviceWeight(), dScratch,
                                        scratchBytes, rounding));
        std::vector<float> out = dOut.read<float>(expected.size());
        char shape[80];
        std::snprintf(shape, sizeof(shape),
                      "experts T=%ld top-%ld perSlot=%d routed=%d",
                      long(tokens), long(slots), perSlot, routed);
        report("fp8 inputs", shape, rowRelativeError(out, expected, n));
        EXPECT_EQ(out, expected) << shape;
        rounding.scratchFloats = floats - 1;
        EXPECT_FALSE(kernels
                         ->expertMatmul(dx, perSlot, gw, experts, n, k, dIdx,
                                        tokens, slots, routed ? dR.get() : 0,
                                        dOut, nullptr, DeviceWeight(), dScratch,
                                        scratchBytes, rounding)
                         .ok())
            << shape;
      }
}

TEST_F(CudaKernelsTest, WarpgroupGemm) {
  // --precision=bf16's many-row matmuls on the warpgroup MMA
  // (warpgroupGemm: x rounded to bf16 codes, read with the weight by the
  // tensor copy engine; e4m3 codes widened in shared memory, their block
  // scales applied in the accumulators). The oracle is the CPU kernel on x
  // rounded on the host: the same exact products, fp32 sums in another
  // order. Shapes cover partial row tiles (m not a multiple of 128),
  // partial column tiles (n not a multiple of 256 or 128, odd n: the
  // single-float stores), K not a multiple of the 64-column stage or of
  // the 128-column scale block, a bias, and a K long enough to wrap the
  // stage ring several times. The output is poisoned first (every element
  // must be written); x is left as it was; a scratch one float short is an
  // error; and matmul() takes this path at or above its row minimum (a
  // bf16 weight's past 8 rows).
  struct Format {
    cpu::WeightType type;
    int64_t blockN, blockK;
  };
  struct Shape {
    int64_t m, n, k;
    bool bias;
  };
  for (Format f : {Format{cpu::WeightType::BF16, 0, 0},
                   Format{cpu::WeightType::F8E4M3, 128, 128},
                   Format{cpu::WeightType::F8E4M3, 256, 64}}) {
    bool e4m3 = f.type == cpu::WeightType::F8E4M3;
    for (Shape s : {Shape{1, 300, 1024, false}, Shape{130, 129, 200, true},
                    Shape{384, 512, 2048, false}, Shape{257, 1000, 712, true},
                    Shape{1100, 384, 1536, false}, Shape{40, 600, 512, true},
                    Shape{9, 256, 256, false}}) {
      if (e4m3 && s.k % 16 != 0)
        s.k += 8; // e4m3 rows: 16-byte multiples for the copy engine
      int64_t scales = e4m3 ? ((s.n + f.blockN - 1) / f.blockN) *
                                  ((s.k + f.blockK - 1) / f.blockK)
                            : 0;
      StoredWeights w = randomStored(rng, f.type, s.n * s.k, scales);
      StoredWeights bias =
          randomStored(rng, cpu::WeightType::BF16, s.bias ? s.n : 0, 0);
      auto x = random(s.m * s.k);
      std::uniform_int_distribution<int> exponent(-20, 20);
      for (int64_t r = 0; r < s.m; ++r) {
        float factor = std::ldexp(1.0f, exponent(rng));
        for (int64_t c = 0; c < s.k; ++c)
          x[r * s.k + c] *= factor;
      }
      std::vector<float> xr = x;
      for (float &v : xr)
        v = numerics::roundToBf16(v);
      cpu::WeightView hw, hb;
      hw.type = f.type;
      hw.blockN = f.blockN;
      hw.blockK = f.blockK;
      hw.data = w.bytes.data();
      hw.scales = w.scales.data();
      if (s.bias) {
        hb.type = cpu::WeightType::BF16;
        hb.data = bias.bytes.data();
      }
      std::vector<float> expected(s.m * s.n);
      cpu::matmul(pool, xr.data(), hw, hb, s.m, s.n, s.k, expected.data(),
                  cpu::MatmulTiling());

      DeviceWeight gw, gb;
      gw.type = e4m3 ? 2 : 1;
      gw.blockN = f.blockN;
      gw.blockK = f.blockK;
      int64_t need = kernels->matmulRoundingFloats(
          gw, std::max(s.m, kWarpgroupGemmMinRows), s.n, s.k, true);
      Buffer dx(*driver, x), dw(*driver, w.bytes), ds(*driver, w.scales),
          dOut(*driver, s.m * s.n * 4), dScratch(*driver, need * 4);
      std::unique_ptr<Buffer> db;
      gw.data = dw;
      gw.scales = ds.get();
      if (s.bias) {
        db = std::make_unique<Buffer>(*driver, bias.bytes);
        gb.type = 1;
        gb.data = db->get();
      }
      ASSERT_EQ(driver->cuMemsetD8(dOut.get(), 0xff, s.m * s.n * 4),
                CUDA_SUCCESS);
      InputRounding rounding{true, dScratch, need};
      expectRan(kernels->warpgroupGemm(dx, gw, gb, s.m, s.n, s.k, dOut, nullptr,
                                       rounding));
      std::vector<float> out = dOut.read<float>(s.m * s.n);
      double e = rowRelativeError(out, expected, s.n);
      char shape[96];
      std::snprintf(shape, sizeof(shape), "%s/%ldx%ld m=%ld n=%ld k=%ld%s",
                    e4m3 ? "e4m3" : "bf16", long(f.blockN), long(f.blockK),
                    long(s.m), long(s.n), long(s.k), s.bias ? " bias" : "");
      report("warpgroup_gemm", shape, e);
      EXPECT_LE(e, 1e-5) << shape;
      EXPECT_EQ(dx.read<float>(x.size()), x) << shape;

      // Through matmul(): the warpgroup path at or above its row minimum
      // (then the scratch must hold the bf16 copy: one float short is
      // refused), the tensor-core GEMM below it.
      bool takes = CudaKernels::warpgroupGemmApplies(gw, s.m, s.k);
      EXPECT_EQ(takes, s.m >= (e4m3 ? kWarpgroupGemmMinRows
                                    : kWarpgroupGemmMinRowsBf16))
          << shape;
      ASSERT_EQ(driver->cuMemsetD8(dOut.get(), 0xff, s.m * s.n * 4),
                CUDA_SUCCESS);
      expectRan(kernels->matmul(dx, gw, gb, s.m, s.n, s.k, dOut, nullptr,
                                nullptr, false, rounding));
      EXPECT_LE(rowRelativeError(dOut.read<float>(s.m * s.n), expected, s.n),
                1e-5)
          << shape << " through matmul()";
      rounding.scratchFloats =
          kernels->matmulRoundingFloats(gw, s.m, s.n, s.k, true) - 1;
      if (takes) {
        Status refused = kernels->matmul(dx, gw, gb, s.m, s.n, s.k, dOut,
                                         nullptr, nullptr, false, rounding);
        EXPECT_FALSE(refused.ok()) << shape;
        EXPECT_NE(refused.message().find("floats of 16-byte aligned scratch"),
                  std::string::npos)
            << refused.message();
      }
    }
  }
  // Shapes the copy engine cannot take are refused with the reason.
  DeviceWeight odd;
  odd.type = 1;
  EXPECT_FALSE(CudaKernels::warpgroupGemmApplies(odd, 4096, 100));
  Status refused =
      kernels->warpgroupGemm(0, odd, DeviceWeight(), 256, 64, 100, 0, nullptr,
                             InputRounding{true, 0, 0});
  EXPECT_FALSE(refused.ok());
  EXPECT_NE(refused.message().find("no warpgroup GEMM"), std::string::npos)
      << refused.message();
}

/// x [m, k] . w^T (+ bias) in double from the stored weight (bf16, or e4m3
/// codes times their block's scale: exact in double), and each element's
/// bound on the distance of an fp32 result whose terms are exact and whose
/// sums take at most `rounds` roundings of a partial sum each: rounds x
/// 2^-23 (one ulp: a truncating accumulator's worst) x the sum of |terms|.
/// NaN codes give NaN.
void exactMatmulBound(const std::vector<float> &x, const StoredWeights &w,
                      bool e4m3, int64_t blockN, int64_t blockK,
                      const StoredWeights &bias, int64_t m, int64_t n,
                      int64_t k, double rounds, std::vector<double> &exact,
                      std::vector<double> &bound) {
  std::vector<double> wd(n * k);
  const int64_t blocksK = e4m3 ? (k + blockK - 1) / blockK : 0;
  for (int64_t j = 0; j < n; ++j)
    for (int64_t i = 0; i < k; ++i) {
      if (!e4m3) {
        uint16_t bits;
        std::memcpy(&bits, &w.bytes[2 * (j * k + i)], 2);
        wd[j * k + i] = numerics::bf16ToFloat(bits);
      } else {
        wd[j * k + i] = double(numerics::e4m3ToFloat(w.bytes[j * k + i])) *
                        w.scales[(j / blockN) * blocksK + i / blockK];
      }
    }
  const double gamma = rounds * std::ldexp(1.0, -23);
  exact.assign(m * n, 0.0);
  bound.assign(m * n, 0.0);
  for (int64_t r = 0; r < m; ++r)
    for (int64_t j = 0; j < n; ++j) {
      double sum = 0.0, magnitude = 0.0;
      if (!bias.bytes.empty()) {
        uint16_t bits;
        std::memcpy(&bits, &bias.bytes[2 * j], 2);
        sum = numerics::bf16ToFloat(bits);
        magnitude = std::fabs(sum);
      }
      for (int64_t i = 0; i < k; ++i) {
        double term = double(x[r * k + i]) * wd[j * k + i];
        sum += term;
        magnitude += std::fabs(term);
      }
      exact[r * n + j] = sum;
      bound[r * n + j] = gamma * magnitude;
    }
}

/// The first element past its bound (or whose NaN-ness differs), or -1.
int64_t firstPastBound(const std::vector<float> &got,
                       const std::vector<double> &exact,
                       const std::vector<double> &bound) {
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::isnan(exact[i]) || std::isnan(got[i])) {
      if (std::isnan(exact[i]) != std::isnan(got[i]))
        return int64_t(i);
      continue;
    }
    if (!(std::fabs(double(got[i]) - exact[i]) <= bound[i]))
      return int64_t(i);
  }
  return -1;
}

bool sameBits(const std::vector<float> &a, const std::vector<float> &b) {
  return a.size() == b.size() &&
         std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

TEST_F(CudaKernelsTest, WarpgroupGemmExact) {
  // The exact default's many-row matmuls on the warpgroup MMA
  // (warpgroupGemm without rounding.bf16: x split into three bf16 parts
  // that sum to it, each part's products summed into the same
  // accumulators).
  //
  // First, that the three parts are all there, in their places (300 rows,
  // and 50: bf16's narrow form, 64-row blocks): one
  // nonzero weight a row (a power of two; e4m3 block scales powers of two
  // too), so each output is one x times it, every partial sum exact
  // whatever the order and the accumulator's rounding, and the result
  // must be x w (+ bias, rounded once) to the bit. A part dropped or read
  // from the wrong rows changes the low bits of every output.
  struct Format {
    cpu::WeightType type;
    int64_t blockN, blockK;
  };
  std::uniform_int_distribution<int> exponent(-20, 20), small(-4, 4);
  for (Format f : {Format{cpu::WeightType::BF16, 0, 0},
                   Format{cpu::WeightType::F8E4M3, 128, 128}})
    for (int64_t m : {300, 50}) {
      const bool e4m3 = f.type == cpu::WeightType::F8E4M3;
      const int64_t n = 200, k = 704;
      const int64_t blocksK = e4m3 ? (k + f.blockK - 1) / f.blockK : 0;
      StoredWeights w;
      w.bytes.assign(n * k * (e4m3 ? 1 : 2), 0);
      std::vector<int64_t> at(n);
      std::vector<float> value(n);
      for (int64_t s = 0; s < ((n + 127) / 128) * blocksK; ++s)
        w.scales.push_back(std::ldexp(1.0f, small(rng)));
      for (int64_t j = 0; j < n; ++j) {
        at[j] = int64_t(rng() % k);
        int e = small(rng);
        bool negative = rng() % 2;
        if (e4m3) {
          w.bytes[j * k + at[j]] =
              uint8_t((negative ? 0x80 : 0) | (e + 7) << 3);
          value[j] = numerics::e4m3ToFloat(w.bytes[j * k + at[j]]) *
                     w.scales[(j / 128) * blocksK + at[j] / f.blockK];
        } else {
          uint16_t bits =
              numerics::floatToBf16(std::ldexp(negative ? -1.0f : 1.0f, e));
          std::memcpy(&w.bytes[2 * (j * k + at[j])], &bits, 2);
          value[j] = numerics::bf16ToFloat(bits);
        }
      }
      StoredWeights bias = randomStored(rng, cpu::WeightType::BF16, n, 0);
      auto x = random(m * k);
      for (int64_t r = 0; r < m; ++r) {
        float factor = std::ldexp(1.0f, exponent(rng));
        for (int64_t c = 0; c < k; ++c)
          x[r * k + c] *= factor;
      }
      std::vector<float> expected(m * n);
      for (int64_t r = 0; r < m; ++r)
        for (int64_t j = 0; j < n; ++j) {
          uint16_t bits;
          std::memcpy(&bits, &bias.bytes[2 * j], 2);
          expected[r * n + j] =
              x[r * k + at[j]] * value[j] + numerics::bf16ToFloat(bits);
        }
      DeviceWeight gw, gb;
      gw.type = e4m3 ? 2 : 1;
      gw.blockN = f.blockN;
      gw.blockK = f.blockK;
      int64_t need = CudaKernels::warpgroupGemmScratchFloats(m, k, false);
      Buffer dx(*driver, x), dw(*driver, w.bytes), ds(*driver, w.scales),
          db(*driver, bias.bytes), dOut(*driver, m * n * 4),
          dScratch(*driver, need * 4);
      gw.data = dw;
      gw.scales = ds.get();
      gb.type = 1;
      gb.data = db;
      expectRan(kernels->warpgroupGemm(dx, gw, gb, m, n, k, dOut, nullptr,
                                       InputRounding{false, dScratch, need}));
      std::vector<float> out = dOut.read<float>(m * n);
      int64_t differ = 0;
      for (int64_t i = 0; i < m * n; ++i)
        differ += out[i] != expected[i];
      EXPECT_EQ(differ, 0) << (e4m3 ? "e4m3" : "bf16") << " m=" << m
                           << ": outputs not x w + bias to the bit";
    }

  // Then random weights (NaN codes among the e4m3), partial row and column
  // tiles, K not a multiple of the stage or the scale block, bias, against
  // x . w in double with the bound of exactMatmulBound: 3 K additions of
  // the parts' products, a fold a 64-column group or scale block (the
  // mma.sync GEMM's and the e4m3 blocks'), the bias. Rows of x are
  // scaled by 2^-20 .. 2^20 and a quarter of the values by a further
  // 2^-12. matmul() takes this path given the scratch (bit-identical to
  // the direct call) and the mma.sync GEMM without it (within the same
  // bound); a scratch one float short is an error for the direct call.
  struct Shape {
    int64_t m, n, k;
    bool bias;
  };
  std::bernoulli_distribution quarter(0.25);
  for (Format f : {Format{cpu::WeightType::BF16, 0, 0},
                   Format{cpu::WeightType::F8E4M3, 128, 128},
                   Format{cpu::WeightType::F8E4M3, 256, 64}}) {
    bool e4m3 = f.type == cpu::WeightType::F8E4M3;
    for (Shape s : {Shape{130, 129, 200, true}, Shape{384, 512, 2048, false},
                    Shape{257, 1000, 712, true}, Shape{64, 1000, 2880, true},
                    Shape{9, 256, 256, false}, Shape{1100, 384, 1536, false}}) {
      if (e4m3 && s.k % 16 != 0)
        s.k += 8;
      int64_t scales = e4m3 ? ((s.n + f.blockN - 1) / f.blockN) *
                                  ((s.k + f.blockK - 1) / f.blockK)
                            : 0;
      StoredWeights w = randomStored(rng, f.type, s.n * s.k, scales);
      StoredWeights bias =
          randomStored(rng, cpu::WeightType::BF16, s.bias ? s.n : 0, 0);
      auto x = random(s.m * s.k);
      for (int64_t r = 0; r < s.m; ++r) {
        float factor = std::ldexp(1.0f, exponent(rng));
        for (int64_t c = 0; c < s.k; ++c)
          x[r * s.k + c] *= quarter(rng) ? factor * 0x1p-12f : factor;
      }
      std::vector<double> exact, bound;
      exactMatmulBound(x, w, e4m3, f.blockN, f.blockK, bias, s.m, s.n, s.k,
                       3.0 * s.k + s.k / 64 + 2, exact, bound);

      DeviceWeight gw, gb;
      gw.type = e4m3 ? 2 : 1;
      gw.blockN = f.blockN;
      gw.blockK = f.blockK;
      // What the device plans for this launch: x's three bf16 parts (6
      // bytes an element) past the row minimum, else nothing.
      int64_t need = CudaKernels::warpgroupGemmScratchFloats(s.m, s.k, false);
      EXPECT_GE(need * 4, 6 * s.m * s.k) << "the parts' 6 bytes an element";
      EXPECT_EQ(CudaKernels::exactMatmulScratchFloats(gw, s.m, s.k, true),
                s.m >= kWarpgroupGemmMinRowsExact ? need : 0);
      EXPECT_EQ(CudaKernels::exactMatmulScratchFloats(gw, s.m, s.k, false), 0);
      Buffer dx(*driver, x), dw(*driver, w.bytes), ds(*driver, w.scales),
          dOut(*driver, s.m * s.n * 4), dScratch(*driver, need * 4);
      std::unique_ptr<Buffer> db;
      gw.data = dw;
      gw.scales = ds.get();
      if (s.bias) {
        db = std::make_unique<Buffer>(*driver, bias.bytes);
        gb.type = 1;
        gb.data = db->get();
      }
      char shape[96];
      std::snprintf(shape, sizeof(shape), "%s/%ldx%ld m=%ld n=%ld k=%ld%s",
                    e4m3 ? "e4m3" : "bf16", long(f.blockN), long(f.blockK),
                    long(s.m), long(s.n), long(s.k), s.bias ? " bias" : "");
      ASSERT_EQ(driver->cuMemsetD8(dOut.get(), 0xff, s.m * s.n * 4),
                CUDA_SUCCESS);
      InputRounding exactInputs{false, dScratch, need};
      expectRan(kernels->warpgroupGemm(dx, gw, gb, s.m, s.n, s.k, dOut, nullptr,
                                       exactInputs));
      std::vector<float> out = dOut.read<float>(s.m * s.n);
      EXPECT_EQ(firstPastBound(out, exact, bound), -1) << shape;
      EXPECT_EQ(dx.read<float>(x.size()), x) << shape;

      bool takes =
          CudaKernels::warpgroupGemmApplies(gw, s.m, s.k, /*bf16=*/false);
      EXPECT_EQ(takes, s.m >= kWarpgroupGemmMinRowsExact) << shape;
      ASSERT_EQ(driver->cuMemsetD8(dOut.get(), 0xff, s.m * s.n * 4),
                CUDA_SUCCESS);
      expectRan(kernels->matmul(dx, gw, gb, s.m, s.n, s.k, dOut, nullptr,
                                nullptr, false, exactInputs));
      std::vector<float> through = dOut.read<float>(s.m * s.n);
      EXPECT_EQ(firstPastBound(through, exact, bound), -1)
          << shape << " through matmul()";
      if (takes) {
        EXPECT_TRUE(sameBits(through, out))
            << shape << ": matmul() took another path";
      }
      ASSERT_EQ(driver->cuMemsetD8(dOut.get(), 0xff, s.m * s.n * 4),
                CUDA_SUCCESS);
      expectRan(kernels->matmul(dx, gw, gb, s.m, s.n, s.k, dOut, nullptr,
                                nullptr, false, InputRounding()));
      EXPECT_EQ(firstPastBound(dOut.read<float>(s.m * s.n), exact, bound), -1)
          << shape << " through matmul() without the scratch";
      InputRounding shortScratch{false, dScratch, need - 1};
      Status refused = kernels->warpgroupGemm(dx, gw, gb, s.m, s.n, s.k, dOut,
                                              nullptr, shortScratch);
      EXPECT_FALSE(refused.ok()) << shape;
      EXPECT_NE(refused.message().find("floats of 16-byte aligned scratch"),
                std::string::npos)
          << refused.message();
    }
  }
}

/// The routed expert matmul in double from the stored bytes (e4m3 code
/// times its block's scale, or bf16, both exact in double), with a bound on
/// each element's distance to what daybreak_expert_gemv_tc_* computes: the
/// products of the weight and x's three 16-bit parts are exact; a 128-column
/// group's sum runs through at most 24 mma accumulations of 16 products (up
/// to 40 roundings, truncating: 2u each), then one fold a group with its
/// scale (K / 128 roundings; split over C blocks, at most ceil(K / 128C) in
/// a block and C - 1 adding the blocks' sums: no more), the bias, and with
/// routing weights a product
/// and `slots` additions. x's f16 parts are scaled by a power of two per
/// 128 columns (at most twice the group's largest |x|), so a part below
/// f16's subnormal step loses at most 2^-25 of that scale: an absolute
/// term of 2^-24 max|x_group| |w| a product.
testutil::Mxfp4Expected storedExpertExpected(
    const StoredWeights &w, cpu::WeightType type, int64_t blockN,
    int64_t blockK, const std::vector<float> &x, bool perSlot,
    const std::vector<uint8_t> &bias16, const std::vector<int32_t> &indices,
    int64_t experts, int64_t n, int64_t k, int64_t tokens, int64_t slots,
    const std::vector<float> &routing) {
  const double u = std::ldexp(1.0, -24);
  bool weighted = !routing.empty(), e4m3 = type == cpu::WeightType::F8E4M3;
  double rounds =
      2 * 40 + double(k + 127) / 128 + 1 + (weighted ? 1 + double(slots) : 0);
  double gamma = rounds * u / (1 - rounds * u);
  int64_t scaleRows = e4m3 ? (n + blockN - 1) / blockN : 0,
          scaleCols = e4m3 ? (k + blockK - 1) / blockK : 0;
  auto weightAt = [&](int64_t e, int64_t j, int64_t i) -> double {
    int64_t at = (e * n + j) * k + i;
    if (!e4m3) {
      uint16_t half;
      std::memcpy(&half, &w.bytes[2 * at], 2);
      return numerics::bf16ToFloat(half);
    }
    return double(numerics::e4m3ToFloat(w.bytes[at])) *
           w.scales[(e * scaleRows + j / blockN) * scaleCols + i / blockK];
  };
  testutil::Mxfp4Expected out;
  int64_t rows = weighted ? tokens : tokens * slots;
  out.exact.assign(rows * n, 0.0);
  out.bound.assign(rows * n, 0.0);
  for (int64_t t = 0; t < tokens; ++t)
    for (int64_t s = 0; s < slots; ++s) {
      int64_t slot = t * slots + s, e = indices[slot];
      if (e < 0 || e >= experts)
        continue; // an empty slot adds nothing
      double weight = weighted ? routing[slot] : 1.0;
      int64_t row = weighted ? t : slot;
      const float *in = x.data() + (perSlot ? slot : t) * k;
      for (int64_t j = 0; j < n; ++j) {
        double sum = 0.0, magnitude = 0.0, split = 0.0;
        if (!bias16.empty()) {
          uint16_t half;
          std::memcpy(&half, &bias16[2 * (e * n + j)], 2);
          sum = numerics::bf16ToFloat(half);
          magnitude = std::fabs(sum);
        }
        for (int64_t g = 0; g < k; g += 128) {
          double largest = 0.0, weights = 0.0;
          for (int64_t i = g; i < std::min(g + 128, k); ++i) {
            double wi = weightAt(e, j, i), term = double(in[i]) * wi;
            sum += term;
            magnitude += std::fabs(term);
            largest = std::max(largest, std::fabs(double(in[i])));
            weights += std::fabs(wi);
          }
          split += 2 * largest * weights;
        }
        out.exact[row * n + j] += weight * sum;
        out.bound[row * n + j] +=
            std::fabs(weight) * (gamma * magnitude + u * split);
      }
    }
  return out;
}

TEST_F(CudaKernelsTest, TensorCoreExpertGemv) {
  // The decode expert GEMV on the tensor cores, forced (tensorExpertGemv)
  // and as expertMatmul picks it (with scratch), against the CPU kernel:
  // e4m3 with 128 x 128 and 16 x 256 scales (a partial last block) and
  // bf16; 1, 2, 5 and 8 tokens of top-8 and top-6; x per token or per
  // slot; with and without routing weights and bias. Two routings: each
  // token picks distinct experts of 24 (so tokens share experts: groups
  // of one pair and of several) with 1 slot in 8 empty; and skewed, 60 %
  // of the slots on expert 3 with repeats within a token, so one expert
  // takes more than 8 pairs (several groups), and 10 % empty. N not a
  // multiple of the 64-row task; K the smallest the kernel takes, 1024,
  // and long enough that one pair's x takes two stage chunks (37 e4m3
  // groups a chunk); x spans 2^-30 to 2^30 between 128-column groups;
  // NaN codes. Outputs NaN-poisoned first. Every form, the ring forms
  // also split over clusters of 2 and 3 blocks, within the exact result's
  // bound; the registers form forced twice and both unsplit rings bitwise
  // equal (deterministic, and the forms differ only in how the weights
  // arrive), a split form and expertMatmul bitwise equal run to run.
  struct Format {
    cpu::WeightType type;
    int64_t blockN, blockK;
  };
  struct Shape {
    int64_t n, k;
  };
  constexpr int64_t experts = 24;
  int run = 0;
  for (Format f : {Format{cpu::WeightType::F8E4M3, 128, 128},
                   Format{cpu::WeightType::F8E4M3, 16, 256},
                   Format{cpu::WeightType::BF16, 0, 0}}) {
    bool e4m3 = f.type == cpu::WeightType::F8E4M3;
    for (Shape s :
         {Shape{200, e4m3 ? 128 : 64}, Shape{72, 1024}, Shape{40, 4992}}) {
      int64_t scaleCount = e4m3 ? experts * ((s.n + f.blockN - 1) / f.blockN) *
                                      ((s.k + f.blockK - 1) / f.blockK)
                                : 0;
      StoredWeights w =
          randomStored(rng, f.type, experts * s.n * s.k, scaleCount);
      StoredWeights bias =
          randomStored(rng, cpu::WeightType::BF16, experts * s.n, 0);
      cpu::WeightView hw;
      hw.data = w.bytes.data();
      hw.type = f.type;
      hw.scales = w.scales.data();
      hw.blockN = f.blockN;
      hw.blockK = f.blockK;
      Buffer dw(*driver, w.bytes), ds(*driver, w.scales),
          db(*driver, bias.bytes);
      DeviceWeight gw;
      gw.data = dw;
      gw.type = e4m3 ? 2 : 1;
      gw.scales = ds.get();
      gw.blockN = f.blockN;
      gw.blockK = f.blockK;
      for (int64_t tokens : {1, 2, 5, 8})
        for (int64_t slots : {8, 6})
          for (bool perSlot : {false, true})
            for (bool routed : {false, true}) {
              bool withBias = ++run % 2 == 0, skewed = run % 3 == 0;
              std::vector<int32_t> indices(tokens * slots);
              for (int64_t t = 0; t < tokens; ++t) {
                std::vector<int32_t> picks(experts);
                std::iota(picks.begin(), picks.end(), 0);
                std::shuffle(picks.begin(), picks.end(), rng);
                for (int64_t j = 0; j < slots; ++j) {
                  uint32_t draw = rng() % 100;
                  indices[t * slots + j] =
                      skewed ? (draw < 60   ? 3
                                : draw < 70 ? -1
                                            : int32_t(rng() % experts))
                             : (draw < 12 ? -1 : picks[j]);
                }
              }
              auto x = random(tokens * (perSlot ? slots : 1) * s.k);
              std::uniform_int_distribution<int> exponent(-30, 30);
              for (size_t g0 = 0; g0 < x.size(); g0 += 128) {
                float factor = std::ldexp(1.0f, exponent(rng));
                for (size_t i = g0; i < std::min(g0 + 128, x.size()); ++i)
                  x[i] *= factor;
              }
              auto routing = random(tokens * slots, 0, 1);
              cpu::WeightView hb;
              DeviceWeight gb;
              if (withBias) {
                hb.data = bias.bytes.data();
                hb.type = cpu::WeightType::BF16;
                gb.data = db;
                gb.type = 1;
              }
              int64_t outRows = routed ? tokens : tokens * slots;
              std::vector<float> expected(outRows * s.n);
              ASSERT_TRUE(cpu::expertMatmul(pool, x.data(), perSlot, hw,
                                            experts, s.n, s.k, indices.data(),
                                            tokens, slots,
                                            routed ? routing.data() : nullptr,
                                            expected.data(), hb)
                              .ok());
              ASSERT_TRUE(CudaKernels::tensorExpertGemvApplies(
                  gw, experts, s.n, s.k, tokens, slots));
              int64_t scratchBytes =
                  expertGemvScratchBytes(tokens, slots, s.n, routed);
              Buffer dx(*driver, x), dIdx(*driver, indices),
                  dR(*driver, routing), dOut(*driver, expected.size() * 4),
                  dScratch(*driver, size_t(scratchBytes));
              char shape[112];
              std::snprintf(shape, sizeof(shape),
                            "%s/%ldx%ld n=%ld k=%ld T=%ld top-%ld perSlot=%d "
                            "routed=%d bias=%d %s",
                            e4m3 ? "e4m3" : "bf16", long(f.blockN),
                            long(f.blockK), long(s.n), long(s.k), long(tokens),
                            long(slots), perSlot, routed, withBias,
                            skewed ? "skewed" : "shared");
              std::vector<std::vector<float>> results;
              // Attempts 0 and 1: the registers form, forced; 2 and 8: as
              // expertMatmul picks it; 3 and 4: the ring forms unsplit; 5
              // to 7: split over clusters of 2 and 3 blocks (where K has
              // the groups).
              struct Attempt {
                ExpertGemvStreaming form;
                int cluster; // withExpertGemvCluster's; -1: expertMatmul
              };
              const Attempt attempts[9] = {{ExpertGemvStreaming::Registers, 1},
                                           {ExpertGemvStreaming::Registers, 1},
                                           {ExpertGemvStreaming::Auto, -1},
                                           {ExpertGemvStreaming::Ring4, 1},
                                           {ExpertGemvStreaming::Ring8, 1},
                                           {ExpertGemvStreaming::Ring4, 2},
                                           {ExpertGemvStreaming::Ring8, 3},
                                           {ExpertGemvStreaming::Ring8, 3},
                                           {ExpertGemvStreaming::Auto, -1}};
              for (const Attempt &attempt : attempts) {
                // Poisoned (NaN) first: every output must be written.
                ASSERT_EQ(
                    driver->cuMemsetD8(dOut.get(), 0xff, expected.size() * 4),
                    CUDA_SUCCESS);
                CudaKernels forced =
                    kernels->withExpertGemvStreaming(attempt.form)
                        .withExpertGemvCluster(attempt.cluster);
                expectRan(attempt.cluster >= 0
                              ? forced.tensorExpertGemv(
                                    dx, perSlot, gw, experts, s.n, s.k, dIdx,
                                    tokens, slots, routed ? dR.get() : 0, dOut,
                                    nullptr, gb, dScratch, scratchBytes)
                              : kernels->expertMatmul(
                                    dx, perSlot, gw, experts, s.n, s.k, dIdx,
                                    tokens, slots, routed ? dR.get() : 0, dOut,
                                    nullptr, gb, dScratch, scratchBytes));
                results.push_back(dOut.read<float>(expected.size()));
              }
              // Against the exact result within the kernel's bound: at
              // this range of x the CPU kernel's fp32 sums are another
              // approximation of it, not an oracle (the CPU result only
              // checks the NaN pattern below).
              testutil::Mxfp4Expected exact = storedExpertExpected(
                  w, f.type, f.blockN, f.blockK, x, perSlot,
                  withBias ? bias.bytes : std::vector<uint8_t>(), indices,
                  experts, s.n, s.k, tokens, slots,
                  routed ? routing : std::vector<float>());
              // Every attempt within the bound, NaNs where the CPU's are.
              const char *names[9] = {"registers",
                                      "registers again",
                                      "expertMatmul",
                                      "4-slot ring",
                                      "8-slot ring",
                                      "4-slot ring, clusters of 2",
                                      "8-slot ring, clusters of 3",
                                      "8-slot ring, clusters of 3 "
                                      "again",
                                      "expertMatmul again"};
              for (int a = 0; a < 9; ++a) {
                int64_t bad = testutil::firstOutOfBound(results[a], exact);
                EXPECT_EQ(bad, -1)
                    << shape << ", " << names[a] << ": element " << bad
                    << " is " << results[a][std::max<int64_t>(bad, 0)]
                    << ", exact " << exact.exact[std::max<int64_t>(bad, 0)]
                    << " +- " << exact.bound[std::max<int64_t>(bad, 0)];
                int64_t nanMismatch = 0;
                for (size_t i = 0; i < expected.size(); ++i)
                  nanMismatch +=
                      std::isnan(expected[i]) != std::isnan(results[a][i]);
                EXPECT_EQ(nanMismatch, 0)
                    << shape << ", " << names[a] << ": NaNs unlike the CPU's";
              }
              double worst = 0.0;
              for (size_t i = 0; i < results[0].size(); ++i)
                if (exact.bound[i] > 0 && !std::isnan(exact.exact[i]))
                  worst = std::max(worst,
                                   std::fabs(results[0][i] - exact.exact[i]) /
                                       exact.bound[i]);
              report("expertGemv err/bound", shape, worst);
              // The unsplit forms add the same products in the same order;
              // a split one and expertMatmul give the same bits run to run.
              const std::pair<int, int> same[5] = {
                  {1, 0}, {3, 0}, {4, 0}, {7, 6}, {8, 2}};
              for (auto [a, b] : same)
                EXPECT_EQ(std::memcmp(results[a].data(), results[b].data(),
                                      expected.size() * 4),
                          0)
                    << shape << ": " << names[a] << " differs from "
                    << names[b];
            }
    }
  }
  // What it does not take: routing weights without scratch (expertMatmul
  // then runs the CUDA-core kernel), K off the group, more than 8 tokens.
  DeviceWeight gw;
  gw.data = 256;
  gw.type = 2;
  gw.blockN = gw.blockK = 128;
  EXPECT_FALSE(kernels
                   ->tensorExpertGemv(256, false, gw, 4, 64, 256, 256, 1, 8,
                                      256, 256, nullptr, DeviceWeight(), 0, 0)
                   .ok());
  EXPECT_FALSE(CudaKernels::tensorExpertGemvApplies(gw, 4, 64, 192, 1, 8));
  EXPECT_FALSE(CudaKernels::tensorExpertGemvApplies(gw, 4, 64, 256, 9, 8));
  EXPECT_TRUE(CudaKernels::tensorExpertGemvApplies(gw, 4, 64, 256, 8, 8));
}

TEST_F(CudaKernelsTest, DependentLaunchChainInGraph) {
  // Kernels launched as programmatic dependents (launchDependent: add,
  // rms_norm, add_rms_norm) back to back in a captured graph, each reading
  // what the one before wrote and writing what it read: c = a + b;
  // a = rms_norm(c); b = a + c and a = rms_norm(b) (add_rms_norm). One that
  // read or wrote before its predecessor finished would be off by O(1) in
  // some rows (64 rows of 7168, more blocks than the GPU holds at once).
  // Replayed three times against the CPU kernels; the chain carries each
  // norm's fp32 sum order (1e-5 a norm), hence 1e-4.
  constexpr int64_t kRows = 64, kDim = 7168, kN = kRows * kDim;
  constexpr int kRounds = 8, kReplays = 3;
  const CudaKernels early = kernels->withProgrammaticLaunch(true);
  std::vector<float> a = random(kN, -3, 3), b = random(kN, -3, 3), c(kN),
                     weight = random(kDim);
  Buffer da(*driver, a), db(*driver, b), dc(*driver, kN * 4),
      dw(*driver, weight);
  DeviceWeight w = DeviceWeight::f32(dw);
  ASSERT_NO_FATAL_FAILURE(replayCaptured(
      [&](CUstream stream) {
        Status launched = Status::success();
        for (int r = 0; r < kRounds && launched.ok(); ++r) {
          launched = early.add(da, db, kN, dc, stream);
          if (launched.ok())
            launched = early.rmsNorm(dc, w, kRows, kDim, 1e-6, da, stream);
          if (launched.ok())
            launched =
                early.addRmsNorm(da, dc, w, kRows, kDim, 1e-6, db, da, stream);
        }
        return launched;
      },
      kReplays));
  cpu::WeightView hw = cpu::WeightView::f32(weight.data());
  for (int replay = 0; replay < kReplays; ++replay)
    for (int r = 0; r < kRounds; ++r) {
      cpu::add(pool, a.data(), b.data(), kN, c.data());
      cpu::rmsNorm(pool, c.data(), hw, kRows, kDim, 1e-6, a.data());
      cpu::addRmsNorm(pool, a.data(), c.data(), hw, kRows, kDim, 1e-6,
                      b.data(), a.data());
    }
  double e = std::max({rowRelativeError(da.read<float>(kN), a, kDim),
                       rowRelativeError(db.read<float>(kN), b, kDim),
                       rowRelativeError(dc.read<float>(kN), c, kDim)});
  report("dependent chain", "64x7168", e);
  EXPECT_LE(e, 1e-4);
}

TEST_F(CudaKernelsTest, ProgrammaticGemvInGraph) {
  // Tensor-core GEMVs launched as programmatic dependents (PDL) inside a
  // captured graph, each right after an rms_norm that writes its x (read
  // after write) and reads the buffer the GEMV then overwrites (write after
  // read): round r's norm reads round r - 1's output. Replayed three times
  // and replayed on the host with the CPU kernels. A GEMV that read x or
  // wrote its output before the norm finished would be off by O(1); the
  // chain of 18 rounds carries the fp32 reordering of each, hence 1e-4 for
  // it, and the last GEMV alone, from the x the device read, holds 1e-5.
  struct Case {
    cpu::WeightType type;
    int64_t m, n, k;
    TensorGemvChoice choice;
  };
  constexpr int kWeights = 3, kRounds = 6, kReplays = 3;
  const CudaKernels early = kernels->withProgrammaticLaunch(true);
  for (Case c : {Case{cpu::WeightType::F8E4M3, 8, 2048, 1024, {}},
                 Case{cpu::WeightType::F8E4M3, 1, 1536, 1024, {1, 2}},
                 Case{cpu::WeightType::BF16, 3, 1024, 1024, {}}}) {
    int64_t blocks = 128, scaleCount = (c.n / blocks) * (c.k / blocks);
    std::vector<StoredWeights> w;
    std::vector<std::optional<Buffer>> dw(kWeights), ds(kWeights);
    std::vector<cpu::WeightView> hw(kWeights);
    std::vector<DeviceWeight> gw(kWeights);
    w.reserve(kWeights);
    for (int i = 0; i < kWeights; ++i) {
      w.push_back(randomStored(rng, c.type, c.n * c.k, scaleCount));
      for (uint8_t &code : w[i].bytes) // no NaN: a row of them spreads
        if (c.type == cpu::WeightType::F8E4M3 && (code & 0x7F) == 0x7F)
          code ^= 1;
      dw[i].emplace(*driver, w[i].bytes);
      ds[i].emplace(*driver, w[i].scales);
      hw[i].data = w[i].bytes.data();
      hw[i].type = c.type;
      hw[i].scales = w[i].scales.data();
      hw[i].blockN = hw[i].blockK = blocks;
      gw[i].data = *dw[i];
      gw[i].type = c.type == cpu::WeightType::BF16 ? 1 : 2;
      gw[i].scales = ds[i]->get();
      gw[i].blockN = gw[i].blockK = blocks;
    }
    // n >= k: the norm's [m, k] rows lie in the GEMV's [m, n] output.
    std::vector<float> state = random(c.m * c.n), normed(c.m * c.k);
    Buffer dState(*driver, state), dNormed(*driver, c.m * c.k * 4);
    ASSERT_NO_FATAL_FAILURE(replayCaptured(
        [&](CUstream stream) {
          Status launched = Status::success();
          for (int r = 0; r < kRounds && launched.ok(); ++r) {
            launched = early.rmsNorm(dState, DeviceWeight(), c.m, c.k, 1e-6,
                                     dNormed, stream);
            if (launched.ok())
              launched = early.tensorGemv(
                  dNormed, gw[r % kWeights], DeviceWeight(), c.m, c.n, c.k,
                  dState, stream, c.choice, /*constantWeight=*/true);
          }
          return launched;
        },
        kReplays));
    for (int replay = 0; replay < kReplays; ++replay)
      for (int r = 0; r < kRounds; ++r) {
        cpu::rmsNorm(pool, state.data(), nullptr, c.m, c.k, 1e-6,
                     normed.data());
        cpu::matmul(pool, normed.data(), hw[r % kWeights], cpu::WeightView(),
                    c.m, c.n, c.k, state.data(), cpu::MatmulTiling());
      }
    std::vector<float> gotState = dState.read<float>(c.m * c.n),
                       gotNormed = dNormed.read<float>(c.m * c.k);
    char shape[96];
    std::snprintf(shape, sizeof(shape), "%s m=%ld n=%ld k=%ld cluster=%d",
                  c.type == cpu::WeightType::BF16 ? "bf16" : "e4m3", long(c.m),
                  long(c.n), long(c.k), c.choice.cluster);
    double chain = std::max(rowRelativeError(gotState, state, c.n),
                            rowRelativeError(gotNormed, normed, c.k));
    report("PDL chain", shape, chain);
    EXPECT_LE(chain, 1e-4);
    std::vector<float> last(c.m * c.n);
    cpu::matmul(pool, gotNormed.data(), hw[(kRounds - 1) % kWeights],
                cpu::WeightView(), c.m, c.n, c.k, last.data(),
                cpu::MatmulTiling());
    double e = rowRelativeError(gotState, last, c.n);
    report("PDL last GEMV", shape, e);
    EXPECT_LE(e, 1e-5); // exact products, fp32 sums in another order
  }
}

TEST_F(CudaKernelsTest, StoredWeightExpertAndHeadMatmul) {
  // e4m3 experts with 128 x 128 scales (partial blocks), routed and not.
  int64_t experts = 5, n = 200, k = 300, slots = 3, bn = 128, bk = 128;
  int64_t scaleCount = experts * ((n + bn - 1) / bn) * ((k + bk - 1) / bk);
  for (int64_t tokens : {1, 6})
    for (bool routed : {false, true}) {
      StoredWeights w =
          randomStored(rng, cpu::WeightType::F8E4M3, experts * n * k, scaleCount);
      auto x = random(tokens * k), routing = random(tokens * slots, 0, 1);
      std::vector<int32_t> indices(tokens * slots);
      for (auto &i : indices)
        i = int32_t(rng() % (experts + 1)) - 1;
      cpu::WeightView hw;
      hw.data = w.bytes.data();
      hw.type = cpu::WeightType::F8E4M3;
      hw.scales = w.scales.data();
      hw.blockN = bn;
      hw.blockK = bk;
      int64_t outRows = routed ? tokens : tokens * slots;
      std::vector<float> expected(outRows * n);
      ASSERT_TRUE(cpu::expertMatmul(pool, x.data(), false, hw, experts, n, k,
                                    indices.data(), tokens, slots,
                                    routed ? routing.data() : nullptr,
                                    expected.data())
                      .ok());
      Buffer dx(*driver, x), dw(*driver, w.bytes), ds(*driver, w.scales),
          dIdx(*driver, indices), dR(*driver, routing),
          dOut(*driver, expected.size() * 4);
      DeviceWeight gw;
      gw.data = dw;
      gw.type = 2;
      gw.scales = ds.get();
      gw.blockN = bn;
      gw.blockK = bk;
      expectRan(kernels->expertMatmul(dx, false, gw, experts, n, k, dIdx,
                                      tokens, slots, routed ? dR.get() : 0,
                                      dOut, nullptr));
      double e = rowRelativeError(dOut.read<float>(expected.size()), expected, n);
      char shape[64];
      std::snprintf(shape, sizeof(shape), "e4m3 T=%ld routed=%d", long(tokens),
                    routed);
      report("expertMatmul", shape, e);
      EXPECT_LE(e, 1e-5);
    }
  // bf16 head matrices (absorbed MLA kept at the checkpoint's precision).
  for (bool transpose : {false, true}) {
    int64_t tokens = 5, heads = 3, hk = 129, hn = 65;
    StoredWeights w = randomStored(rng, cpu::WeightType::BF16, heads * hk * hn, 0);
    auto x = random(tokens * heads * hk);
    cpu::WeightView hw;
    hw.data = w.bytes.data();
    hw.type = cpu::WeightType::BF16;
    std::vector<float> expected(tokens * heads * hn);
    cpu::headMatmul(pool, x.data(), hw, transpose, tokens, heads, hk, hn,
                    expected.data());
    Buffer dx(*driver, x), dw(*driver, w.bytes), dOut(*driver, expected.size() * 4);
    DeviceWeight gw;
    gw.data = dw;
    gw.type = 1;
    expectRan(kernels->headMatmul(dx, gw, transpose, tokens, heads, hk, hn,
                                  dOut, nullptr));
    double e = rowRelativeError(dOut.read<float>(expected.size()), expected, hn);
    report("headMatmul", transpose ? "bf16 transposed" : "bf16", e);
    EXPECT_LE(e, 1e-5);
  }
}

TEST_F(CudaKernelsTest, HeadMatmulTensorCores) {
  // lm.head_matmul on bf16 [H, N, K] weights (MLA's W_UK, transposed at
  // compile time, and W_UV) takes the per-head GEMV at up to 4 tokens for
  // exact x and the per-head tensor-core GEMM otherwise (x split exactly
  // into three parts); each is also forced where the GEMV applies. The
  // exact mode within 1e-5 of the CPU's row, and under --precision=bf16 x
  // rounded to bf16 in the kernel (against the CPU on x rounded on the
  // host, and it must differ from the exact result; no rounding scratch is
  // given: neither kernel needs one). Shapes: decode (one token,
  // DeepSeek's 128 heads of 128 -> 512 and 512 -> 128), the GEMV's other K
  // (64, 256, 1024: 8 to 128 chunks a row) at 2 to 4 tokens with N off its
  // rows a warp, prefill tiles with partial row and column tiles, K of one
  // 16-column step.
  struct Shape {
    int64_t tokens, heads, k, n;
  };
  for (Shape c :
       {Shape{1, 128, 128, 512}, Shape{1, 128, 512, 128}, Shape{3, 5, 64, 33},
        Shape{2, 7, 256, 100}, Shape{4, 3, 1024, 17}, Shape{200, 4, 512, 128},
        Shape{130, 3, 48, 200}, Shape{5, 2, 16, 65}}) {
    DeviceWeight bf16Weight;
    bf16Weight.type = 1;
    ASSERT_TRUE(CudaKernels::headGemmApplies(bf16Weight, true, c.k, true));
    const bool gemvApplies =
        CudaKernels::headGemvApplies(bf16Weight, true, c.tokens, c.k, true);
    EXPECT_EQ(gemvApplies, c.tokens <= kHeadGemvMaxTokens && c.k >= 64);
    StoredWeights w =
        randomStored(rng, cpu::WeightType::BF16, c.heads * c.n * c.k, 0);
    auto x = random(c.tokens * c.heads * c.k);
    std::vector<float> rounded(x.size());
    for (size_t i = 0; i < x.size(); ++i)
      rounded[i] = numerics::roundToBf16(x[i]);
    cpu::WeightView hw;
    hw.data = w.bytes.data();
    hw.type = cpu::WeightType::BF16;
    std::vector<float> exact(c.tokens * c.heads * c.n), expected(exact.size());
    cpu::headMatmul(pool, x.data(), hw, true, c.tokens, c.heads, c.k, c.n,
                    exact.data());
    cpu::headMatmul(pool, rounded.data(), hw, true, c.tokens, c.heads, c.k, c.n,
                    expected.data());
    Buffer dx(*driver, x), dw(*driver, w.bytes),
        dOut(*driver, exact.size() * 4);
    DeviceWeight gw;
    gw.data = dw;
    gw.type = 1;
    struct Form {
      HeadMatmulKernel kernel;
      const char *name;
    };
    for (Form form : {Form{HeadMatmulKernel::Auto, "auto"},
                      Form{HeadMatmulKernel::Gemv, "GEMV"},
                      Form{HeadMatmulKernel::Gemm, "GEMM"}}) {
      if (form.kernel != HeadMatmulKernel::Auto && !gemvApplies)
        continue;
      CudaKernels forced = kernels->withHeadMatmulKernel(form.kernel);
      char shape[96];
      std::snprintf(shape, sizeof(shape), "T=%ld H=%ld K=%ld N=%ld %s",
                    long(c.tokens), long(c.heads), long(c.k), long(c.n),
                    form.name);
      expectRan(forced.headMatmul(dx, gw, true, c.tokens, c.heads, c.k, c.n,
                                  dOut, nullptr));
      double e = rowRelativeError(dOut.read<float>(exact.size()), exact, c.n);
      report("headMatmul (tensor cores)", shape, e);
      EXPECT_LE(e, 1e-5) << shape;
      InputRounding bf16;
      bf16.bf16 = true;
      expectRan(forced.headMatmul(dx, gw, true, c.tokens, c.heads, c.k, c.n,
                                  dOut, nullptr, bf16));
      std::vector<float> out = dOut.read<float>(exact.size());
      e = rowRelativeError(out, expected, c.n);
      report("headMatmul (tensor cores, bf16 x)", shape, e);
      EXPECT_LE(e, 1e-5) << shape;
      EXPECT_GT(rowRelativeError(out, exact, c.n), 1e-5) << shape;
    }
  }
}

TEST_F(CudaKernelsTest, StoredWeightEmbeddingAndNorms) {
  int64_t vocab = 300, dim = 1000, tokens = 7, rows = 5;
  StoredWeights table = randomStored(rng, cpu::WeightType::BF16, vocab * dim, 0);
  StoredWeights weight = randomStored(rng, cpu::WeightType::BF16, dim, 0);
  StoredWeights bias = randomStored(rng, cpu::WeightType::BF16, dim, 0);
  std::vector<int32_t> ids(tokens);
  for (auto &id : ids)
    id = int32_t(rng() % vocab);
  auto hostView = [](const StoredWeights &s) {
    cpu::WeightView v;
    v.data = s.bytes.data();
    v.type = cpu::WeightType::BF16;
    return v;
  };
  std::vector<float> emb(tokens * dim);
  ASSERT_TRUE(cpu::embedding(pool, hostView(table), vocab, dim, ids.data(),
                             tokens, emb.data())
                  .ok());
  auto x = random(rows * dim, -3, 3);
  std::vector<float> rms(rows * dim), ln(rows * dim);
  cpu::rmsNorm(pool, x.data(), hostView(weight), rows, dim, 1e-6, rms.data());
  cpu::layerNorm(pool, x.data(), hostView(weight), hostView(bias), rows, dim,
                 1e-5, ln.data());
  Buffer dTable(*driver, table.bytes), dW(*driver, weight.bytes),
      dB(*driver, bias.bytes), dIds(*driver, ids), dx(*driver, x),
      dOut(*driver, std::max(tokens, rows) * dim * 4);
  auto deviceView = [](CUdeviceptr p) {
    DeviceWeight w;
    w.data = p;
    w.type = 1;
    return w;
  };
  expectRan(kernels->embedding(deviceView(dTable), vocab, dim, dIds, tokens,
                               dOut, nullptr));
  EXPECT_EQ(dOut.read<float>(tokens * dim), emb); // widened copies: exact
  expectRan(kernels->rmsNorm(dx, deviceView(dW), rows, dim, 1e-6, dOut,
                             nullptr));
  EXPECT_LE(rowRelativeError(dOut.read<float>(rows * dim), rms, dim), 1e-5);
  expectRan(kernels->layerNorm(dx, deviceView(dW), deviceView(dB), rows, dim,
                               1e-5, dOut, nullptr));
  EXPECT_LE(rowRelativeError(dOut.read<float>(rows * dim), ln, dim), 1e-5);
}

} // namespace

// The KDA kernels against the CPU ones (CpuKdaTest checks those against the
// reference recurrence): tokens of several slots interleaved in the step,
// lengths across the 64-token chunk (1, 63, 64, 65, 130, 200), a slot no
// token names, key dims of 32 and 128 (the largest the kernels take), value
// dims not a multiple of 32, state in and out in f32 and bf16.
TEST_F(CudaKernelsTest, KdaScansAndShortConv) {
  struct Shape {
    int64_t heads, dk, dv;
    std::vector<int64_t> lengths;
  };
  for (const Shape &s :
       {Shape{2, 32, 32, {1, 63, 0, 65, 130}}, Shape{3, 128, 80, {200, 1, 64}},
        Shape{2, 16, 8, {5, 5, 5, 5}}})
    for (bool bf16 : {false, true}) {
      std::vector<int32_t> sequences;
      for (size_t slot = 0; slot < s.lengths.size(); ++slot)
        sequences.insert(sequences.end(), s.lengths[slot], int32_t(slot));
      std::shuffle(sequences.begin(), sequences.end(), rng);
      int64_t tokens = int64_t(sequences.size());
      int64_t slots = int64_t(s.lengths.size());
      int64_t h = s.heads, dk = s.dk, dv = s.dv;
      auto q = random(tokens * h * dk), k = random(tokens * h * dk),
           v = random(tokens * h * dv), beta = random(tokens * h, 0, 1);
      auto raw = random(tokens * h * dk, -6, 3), aLog = random(h),
           dtBias = random(h * dk);
      std::vector<float> g(raw.size());
      cpu::kdaGate(pool, raw.data(), aLog.data(), dtBias.data(), tokens, h, dk,
                   nullptr, g.data());
      // State values bf16-exact, so both storages start equal.
      std::vector<float> state0 = random(slots * h * dk * dv, -0.5, 0.5);
      for (float &x : state0)
        x = numerics::roundToBf16(x);
      std::vector<uint16_t> state0Bf16(state0.size());
      for (size_t i = 0; i < state0.size(); ++i)
        state0Bf16[i] = numerics::floatToBf16(state0[i]);
      int64_t valueBytes = bf16 ? 2 : 4;
      cpu::KdaShape shape;
      shape.heads = h;
      shape.keyDim = dk;
      shape.valueDim = dv;
      shape.scale = 1.0 / std::sqrt(double(dk));
      shape.qkL2Norm = true;
      Buffer dq(*driver, q), dk_(*driver, k), dv_(*driver, v), dg(*driver, g),
          dBeta(*driver, beta), dSeq(*driver, sequences),
          dOut(*driver, tokens * h * dv * 4);
      for (bool chunked : {true, false}) {
        char label[96];
        std::snprintf(label, sizeof(label), "%s H%ld Dk%ld Dv%ld T%ld %s",
                      chunked ? "chunk" : "step", long(h), long(dk), long(dv),
                      long(tokens), bf16 ? "bf16" : "f32");
        SCOPED_TRACE(label);
        // The CPU oracle on the same storage.
        std::vector<float> cpuState = state0;
        std::vector<uint16_t> cpuStateBf16 = state0Bf16;
        cpu::StateView view;
        view.base = bf16 ? reinterpret_cast<uint8_t *>(cpuStateBf16.data())
                         : reinterpret_cast<uint8_t *>(cpuState.data());
        view.bf16 = bf16;
        view.slots = slots;
        view.slotBytes = h * dk * dv * valueBytes;
        std::vector<float> expected(tokens * h * dv);
        cpu::KdaInputs in{q.data(), k.data(), v.data(), g.data(), beta.data()};
        Status ran = chunked ? cpu::kdaChunk(pool, in, view, sequences.data(),
                                             tokens, shape, expected.data())
                             : cpu::kdaStep(pool, in, view, sequences.data(),
                                            tokens, shape, expected.data());
        ASSERT_TRUE(ran.ok()) << ran.message();
        Buffer dState =
            bf16 ? Buffer(*driver, state0Bf16) : Buffer(*driver, state0);
        DeviceState state;
        state.base = dState;
        state.bf16 = bf16;
        state.slots = slots;
        state.slotBytes = view.slotBytes;
        DeviceKdaInputs din;
        din.q = dq;
        din.k = dk_;
        din.v = dv_;
        din.g = dg;
        din.beta = dBeta;
        uint64_t scratchBytes =
            CudaKernels::kdaChunkScratchBytes(tokens, slots, h, dk, dv);
        Buffer dScratch(*driver, scratchBytes);
        if (chunked) {
          // Too little scratch: an error naming it, nothing launched.
          Status small = kernels->kda(true, din, state, dSeq, tokens, h, dk, dv,
                                      shape.scale, true, dScratch,
                                      scratchBytes - 1, dOut, nullptr);
          EXPECT_FALSE(small.ok());
          EXPECT_NE(small.message().find("bytes of scratch"), std::string::npos)
              << small.message();
        } else {
          // A step past the kernel's 32-bit indexing: an error naming the
          // limit, nothing launched (no buffer is that large).
          int64_t past = 0x7FFFFFFF / (h * std::max(dk, dv)) + 1;
          Status huge = kernels->kda(false, din, state, dSeq, past, h, dk, dv,
                                     shape.scale, true, 0, 0, dOut, nullptr);
          EXPECT_FALSE(huge.ok());
          EXPECT_NE(huge.message().find("exceed 2^31 - 1"), std::string::npos)
              << huge.message();
        }
        expectRan(kernels->kda(chunked, din, state, dSeq, tokens, h, dk, dv,
                               shape.scale, true, dScratch, scratchBytes, dOut,
                               nullptr));
        double e =
            rowRelativeError(dOut.read<float>(tokens * h * dv), expected, dv);
        report(chunked ? "kdaChunk" : "kdaStep", label, e);
        // fp32 sums in another order over up to 200 tokens of recurrence.
        EXPECT_LE(e, 1e-4);
        std::vector<float> gotState(state0.size());
        if (bf16) {
          std::vector<uint16_t> bits = dState.read<uint16_t>(state0.size());
          int64_t off = 0;
          for (size_t i = 0; i < bits.size(); ++i) {
            gotState[i] = numerics::bf16ToFloat(bits[i]);
            cpuState[i] = numerics::bf16ToFloat(cpuStateBf16[i]);
            // One bf16 step either way where fp32 sums round differently.
            off += std::fabs(gotState[i] - cpuState[i]) >
                   std::ldexp(std::fabs(cpuState[i]), -7) + 1e-6;
          }
          EXPECT_EQ(off, 0) << "state values beyond one bf16 rounding";
        } else {
          gotState = dState.read<float>(state0.size());
          EXPECT_LE(rowRelativeError(gotState, cpuState, dk * dv), 1e-4);
        }
      }

      // short_conv over the same slots: channels h * dk, width 4.
      int64_t channels = h * dk, width = 4;
      auto x = random(tokens * channels), w = random(channels * width);
      std::vector<float> conv0 = random(slots * (width - 1) * channels);
      for (float &c : conv0)
        c = numerics::roundToBf16(c);
      std::vector<uint16_t> conv0Bf16(conv0.size());
      for (size_t i = 0; i < conv0.size(); ++i)
        conv0Bf16[i] = numerics::floatToBf16(conv0[i]);
      std::vector<float> cpuConv = conv0, expected(tokens * channels);
      std::vector<uint16_t> cpuConvBf16 = conv0Bf16;
      cpu::StateView view;
      view.base = bf16 ? reinterpret_cast<uint8_t *>(cpuConvBf16.data())
                       : reinterpret_cast<uint8_t *>(cpuConv.data());
      view.bf16 = bf16;
      view.slots = slots;
      view.slotBytes = (width - 1) * channels * valueBytes;
      ASSERT_TRUE(cpu::shortConv(pool, x.data(), cpu::WeightView::f32(w.data()),
                                 channels, width, view, sequences.data(),
                                 tokens, /*silu*/ 2, expected.data())
                      .ok());
      Buffer dx(*driver, x), dw(*driver, w),
          dConvOut(*driver, tokens * channels * 4);
      Buffer dConv = bf16 ? Buffer(*driver, conv0Bf16) : Buffer(*driver, conv0);
      DeviceState state;
      state.base = dConv;
      state.bf16 = bf16;
      state.slots = slots;
      state.slotBytes = view.slotBytes;
      expectRan(kernels->shortConv(dx, DeviceWeight::f32(dw), channels, width,
                                   state, dSeq, tokens, 2, dConvOut, nullptr));
      EXPECT_LE(rowRelativeError(dConvOut.read<float>(tokens * channels),
                                 expected, channels),
                1e-5);
      // The new windows are copies: exact.
      if (bf16)
        EXPECT_EQ(dConv.read<uint16_t>(conv0.size()), cpuConvBf16);
      else
        EXPECT_EQ(dConv.read<float>(conv0.size()), cpuConv);
    }
}

TEST_F(CudaKernelsTest, KdaGateAndGatedNorm) {
  int64_t tokens = 9, heads = 3, dim = 128;
  auto raw = random(tokens * heads * dim, -30, 30), aLog = random(heads),
       dtBias = random(heads * dim);
  Buffer dRaw(*driver, raw), dA(*driver, aLog), dB(*driver, dtBias),
      dOut(*driver, raw.size() * 4);
  for (bool bounded : {false, true}) {
    double bound = -5.0;
    std::vector<float> expected(raw.size());
    cpu::kdaGate(pool, raw.data(), aLog.data(), dtBias.data(), tokens, heads,
                 dim, bounded ? &bound : nullptr, expected.data());
    expectRan(kernels->kdaGate(dRaw, dA, dB, tokens, heads, dim,
                               bounded ? &bound : nullptr, dOut, nullptr));
    // Both in double, rounded once.
    EXPECT_LE(rowRelativeError(dOut.read<float>(raw.size()), expected, dim),
              1e-6);
  }
  auto x = random(tokens * heads * dim, -3, 3), gate = random(x.size(), -4, 4),
       weight = random(dim);
  Buffer dx(*driver, x), dGate(*driver, gate), dw(*driver, weight);
  for (int64_t activation : {1, 2}) {
    std::vector<float> expected(x.size());
    cpu::gatedRmsNorm(pool, x.data(), gate.data(),
                      cpu::WeightView::f32(weight.data()), tokens * heads, dim,
                      1e-5, activation, expected.data());
    expectRan(kernels->gatedRmsNorm(dx, dGate, DeviceWeight::f32(dw),
                                    tokens * heads, dim, 1e-5, activation, dOut,
                                    nullptr));
    EXPECT_LE(rowRelativeError(dOut.read<float>(x.size()), expected, dim),
              1e-5);
  }
}

/// Model-like mHC mixing weights for n streams of `width`: fn ~ N(0, 1 /
/// (nD)) so the logits are of order one, base ~ N(0, 0.5^2) with 2 more on
/// comb's diagonal, scale ~ U(0.5, 1.5).
struct MhcWeights {
  std::vector<float> fn, base, scale;
};

MhcWeights randomMhcWeights(std::mt19937 &rng, int64_t n, int64_t width) {
  auto gaussian = [&](size_t count, double stddev) {
    std::normal_distribution<double> dist(0.0, stddev);
    std::vector<float> v(count);
    for (float &x : v)
      x = float(dist(rng));
    return v;
  };
  int64_t flat = n * width, mixes = (2 + n) * n;
  MhcWeights w;
  w.fn = gaussian(mixes * flat, 1.0 / std::sqrt(double(flat)));
  w.base = gaussian(mixes, 0.5);
  for (int64_t i = 0; i < n; ++i)
    w.base[2 * n + i * n + i] += 2.0f;
  std::uniform_real_distribution<float> dist(0.5f, 1.5f);
  for (int i = 0; i < 3; ++i)
    w.scale.push_back(dist(rng));
  return w;
}

/// The CPU kernels' mixing over `w` (no norm).
cpu::MhcMix mhcMix(const MhcWeights &w, int64_t iters, double eps,
                   double normEps) {
  cpu::MhcMix mix;
  mix.fn = w.fn.data();
  mix.base = w.base.data();
  mix.scale = w.scale.data();
  mix.sinkhornIters = iters;
  mix.eps = eps;
  mix.normEps = normEps;
  return mix;
}

TEST_F(CudaKernelsTest, MhcPreAndPost) {
  // Model-like magnitudes (randomMhcWeights). n = 3 and 8 take the other
  // logits kernels' row counts (8 the wide one, not at D = 4096, where the
  // CPU oracle takes most of the test's time); D = 203 the unaligned rows;
  // T = 37 several tiles.
  const double eps = 1e-6, normEps = 1e-6;
  for (int64_t n : {1, 2, 3, 4, 8})
    for (int64_t width : {64, 200, 203, 4096})
      for (int64_t tokens : {1, 3, 37, 227})
        for (int64_t iters : {1, 20}) {
          if (n == 8 && width == 4096)
            continue;
          // 227 tokens (glm5_next_pools' prefill step, which gave NaNs on
          // the H200 in session 12): at its n and D only.
          if (tokens == 227 && (n != 4 || width != 64))
            continue;
          int64_t flat = n * width;
          auto streams = random(tokens * flat);
          MhcWeights w = randomMhcWeights(rng, n, width);
          std::vector<float> input(tokens * width), post(tokens * n),
              comb(tokens * n * n);
          ASSERT_TRUE(cpu::mhcPre(pool, streams.data(), tokens, n, width,
                                  mhcMix(w, iters, eps, normEps), input.data(),
                                  post.data(), comb.data())
                          .ok());
          uint64_t scratchBytes = mhcPreScratchBytes(tokens, n, width);
          Buffer dStreams(*driver, streams), dFn(*driver, w.fn),
              dBase(*driver, w.base), dScale(*driver, w.scale),
              dScratch(*driver, scratchBytes),
              dInput(*driver, input.size() * 4),
              dPost(*driver, post.size() * 4), dComb(*driver, comb.size() * 4);
          expectRan(kernels->mhcPre(dStreams, dFn, dBase, dScale, tokens, n,
                                    width, iters, eps, normEps, DeviceWeight{},
                                    0.0, dScratch, scratchBytes, dInput, dPost,
                                    dComb, nullptr));
          char shape[64];
          std::snprintf(shape, sizeof(shape), "T=%ld n=%ld D=%ld iters=%ld",
                        long(tokens), long(n), long(width), long(iters));
          // The logits' sums run in fp32 (a lane's columns, then a warp's
          // tree; the splits in double) where the CPU sums in double: ~1e-7
          // relative to the largest product sum, carried through the
          // double math after it (sigmoids, softmax, Sinkhorn: Lipschitz
          // near one at these magnitudes) and rounded once to fp32. 1e-5 of
          // each output's largest magnitude leaves a margin of ~10.
          for (auto [name, actual, expected] :
               {std::tuple{"mhcPre input", dInput.read<float>(input.size()),
                           &input},
                std::tuple{"mhcPre post", dPost.read<float>(post.size()),
                           &post},
                std::tuple{"mhcPre comb", dComb.read<float>(comb.size()),
                           &comb}}) {
            double e =
                rowRelativeError(actual, *expected, int64_t(expected->size()));
            report(name, shape, e);
            EXPECT_LE(e, 1e-5) << name << " " << shape;
          }

          // mhc_post on the CPU's post and comb.
          auto y = random(tokens * width);
          std::vector<float> next(tokens * flat);
          ASSERT_TRUE(cpu::mhcPost(pool, streams.data(), y.data(), post.data(),
                                   comb.data(), tokens, n, width, next.data())
                          .ok());
          Buffer dY(*driver, y), dOut(*driver, next.size() * 4);
          Buffer dPostIn(*driver, post), dCombIn(*driver, comb);
          expectRan(kernels->mhcPost(dStreams, dY, dPostIn, dCombIn, tokens, n,
                                     width, dOut, nullptr));
          double e = rowRelativeError(dOut.read<float>(next.size()), next,
                                      int64_t(next.size()));
          report("mhcPost", shape, e);
          EXPECT_LE(e, 1e-6) << shape; // double on both sides, rounded once
        }
}

TEST_F(CudaKernelsTest, MhcNormAndPostPre) {
  // The fused forms against the CPU kernels, on MhcPreAndPost's
  // magnitudes: mhc_pre with the sublayer's RMSNorm (fp32 and bf16
  // weights), and mhc_post_pre without a norm and with each. n = 8 takes
  // mhcPostPre's unfused path; D = 203 the unaligned rows and a chunk's
  // partial columns; T = 37 several tiles.
  const double eps = 1e-6, normEps = 1e-6, inputEps = 1e-5;
  for (int64_t n : {1, 2, 3, 4, 8})
    for (int64_t width : {64, 203, 4096})
      // The finish fuses the norm at 1-3 tokens, at 37 where D < 1024
      // (few column slices to walk) and at 1100 (a tile an SM on the
      // H200); 37 tokens of 4096 run the norm as its own launch.
      for (int64_t tokens : {1, 3, 37, 1100})
        for (int64_t iters : {1, 20}) {
          if (tokens == 1100 && (width != 203 || (n != 4 && n != 8)))
            continue;
          if (n == 8 && width == 4096)
            continue; // the CPU oracle's time, as MhcPreAndPost
          int64_t flat = n * width;
          auto streams = random(tokens * flat), y = random(tokens * width);
          MhcWeights w = randomMhcWeights(rng, n, width);
          cpu::MhcMix mix = mhcMix(w, iters, eps, normEps);
          // The incoming post and comb: the CPU's mhc_pre of the streams (a
          // comb as the model has it: positive, nearly doubly stochastic).
          std::vector<float> post(tokens * n), comb(tokens * n * n),
              collapsed(tokens * width);
          ASSERT_TRUE(cpu::mhcPre(pool, streams.data(), tokens, n, width, mix,
                                  collapsed.data(), post.data(), comb.data())
                          .ok());
          // Norm weights as stored, fp32 and bf16, around one as trained
          // norms are (the tolerance below counts on it).
          auto normF32 = random(width, 0.5f, 1.5f);
          std::vector<uint16_t> normBf16;
          for (float v : random(width, 0.5f, 1.5f))
            normBf16.push_back(numerics::floatToBf16(v));
          uint64_t scratchBytes = mhcPreScratchBytes(tokens, n, width);
          Buffer dStreams(*driver, streams), dY(*driver, y),
              dPost(*driver, post), dComb(*driver, comb), dFn(*driver, w.fn),
              dBase(*driver, w.base), dScale(*driver, w.scale),
              dNormF32(*driver, normF32), dNormBf16(*driver, normBf16),
              dScratch(*driver, scratchBytes), dOut(*driver, tokens * flat * 4),
              dInput(*driver, tokens * width * 4),
              dNextPost(*driver, post.size() * 4),
              dNextComb(*driver, comb.size() * 4);
          struct Norm {
            const char *name;
            cpu::WeightView host;
            DeviceWeight device;
          };
          Norm none{"no norm", {}, {}};
          Norm f32{"f32 norm", cpu::WeightView::f32(normF32.data()),
                   DeviceWeight::f32(dNormF32)};
          Norm bf16{"bf16 norm", {}, {}};
          bf16.host.data = normBf16.data();
          bf16.host.type = cpu::WeightType::BF16;
          bf16.device.data = dNormBf16;
          bf16.device.type = 1;
          for (const Norm &norm : {none, f32, bf16}) {
            mix.norm = norm.host;
            mix.inputEps = inputEps;
            char shape[80];
            std::snprintf(shape, sizeof(shape),
                          "T=%ld n=%ld D=%ld iters=%ld %s", long(tokens),
                          long(n), long(width), long(iters), norm.name);
            std::vector<float> out(tokens * flat), input(tokens * width),
                nextPost(post.size()), nextComb(comb.size());
            // Tolerances: the new streams are double sums on both sides,
            // rounded once: 1e-6. Post, comb and the plain input as
            // MhcPreAndPost derives: 1e-5 of the largest magnitude. The
            // normed input u w / rms(u): u is within ~1e-6 of its largest
            // magnitude (that derivation, a margin of ~10 left); the factor
            // 1 / sqrt(mean(u^2) + eps) is a smooth function of the sum of
            // squares, whose relative error is at most twice u's, halved by
            // the square root (~1e-7 of the factor carried through); the
            // products with the weight are double, rounded once (or, below
            // a tile an SM, the rms_norm kernel's: fp32 sums of at most 16
            // squares a thread then a tree, ~1.5e-6 of the sum). Weights in
            // [0.5, 1.5] scale an element's error and the largest output
            // by at most 3 relative to each other, so ~3e-6 at worst: 1e-5
            // holds.
            auto compare = [&](const char *kernel, const Buffer &dActual,
                               const std::vector<float> &expected,
                               double tolerance) {
              double e = rowRelativeError(dActual.read<float>(expected.size()),
                                          expected, int64_t(expected.size()));
              report(kernel, shape, e);
              EXPECT_LE(e, tolerance) << kernel << " " << shape;
            };
            if (norm.host.data) {
              // mhc_pre with the norm (MhcPreAndPost runs it without).
              ASSERT_TRUE(cpu::mhcPre(pool, streams.data(), tokens, n, width,
                                      mix, input.data(), nextPost.data(),
                                      nextComb.data())
                              .ok());
              expectRan(kernels->mhcPre(dStreams, dFn, dBase, dScale, tokens, n,
                                        width, iters, eps, normEps, norm.device,
                                        inputEps, dScratch, scratchBytes,
                                        dInput, dNextPost, dNextComb, nullptr));
              compare("mhcPre input", dInput, input, 1e-5);
              compare("mhcPre post", dNextPost, nextPost, 1e-5);
              compare("mhcPre comb", dNextComb, nextComb, 1e-5);
            }
            ASSERT_TRUE(cpu::mhcPostPre(pool, streams.data(), y.data(),
                                        post.data(), comb.data(), tokens, n,
                                        width, mix, out.data(), input.data(),
                                        nextPost.data(), nextComb.data())
                            .ok());
            expectRan(kernels->mhcPostPre(
                dStreams, dY, dPost, dComb, dFn, dBase, dScale, tokens, n,
                width, iters, eps, normEps, norm.device, inputEps, dScratch,
                scratchBytes, dOut, dInput, dNextPost, dNextComb, nullptr));
            compare("mhcPostPre streams", dOut, out, 1e-6);
            compare("mhcPostPre input", dInput, input, 1e-5);
            compare("mhcPostPre post", dNextPost, nextPost, 1e-5);
            compare("mhcPostPre comb", dNextComb, nextComb, 1e-5);
          }
        }
}

TEST_F(CudaKernelsTest, MhcRefusesWhatItCannotRun) {
  // Errors before anything launches: null buffers are never touched.
  Status pre = kernels->mhcPre(0, 0, 0, 0, 1, 9, 64, 20, 1e-6, 1e-6,
                               DeviceWeight{}, 0.0, 0, 0, 0, 0, 0, nullptr);
  ASSERT_FALSE(pre.ok());
  EXPECT_NE(pre.message().find("mhc_pre: 9 streams (the CUDA kernels take 1 "
                               "to 8)"),
            std::string::npos)
      << pre.message();
  Status post = kernels->mhcPost(0, 0, 0, 0, 1, 9, 64, 0, nullptr);
  ASSERT_FALSE(post.ok());
  EXPECT_NE(post.message().find("mhc_post: 9 streams"), std::string::npos)
      << post.message();
  Status iters = kernels->mhcPre(0, 0, 0, 0, 1, 4, 64, 0, 1e-6, 1e-6,
                                 DeviceWeight{}, 0.0, 0, 0, 0, 0, 0, nullptr);
  ASSERT_FALSE(iters.ok());
  EXPECT_NE(iters.message().find("sinkhorn_iters 0"), std::string::npos)
      << iters.message();
  Status scratch =
      kernels->mhcPre(0, 0, 0, 0, 5, 4, 64, 20, 1e-6, 1e-6, DeviceWeight{}, 0.0,
                      0, mhcPreScratchBytes(4, 4, 64), 0, 0, 0, nullptr);
  ASSERT_FALSE(scratch.ok());
  EXPECT_NE(scratch.message().find("bytes of scratch"), std::string::npos)
      << scratch.message();
  // mhc_post_pre: the same limits, under its own name (9 streams, and the
  // fused path's scratch at n = 4).
  Status postPre =
      kernels->mhcPostPre(0, 0, 0, 0, 0, 0, 0, 1, 9, 64, 20, 1e-6, 1e-6,
                          DeviceWeight{}, 0.0, 0, 0, 0, 0, 0, 0, nullptr);
  ASSERT_FALSE(postPre.ok());
  EXPECT_NE(postPre.message().find("mhc_post_pre: 9 streams"),
            std::string::npos)
      << postPre.message();
  Status postPreIters =
      kernels->mhcPostPre(0, 0, 0, 0, 0, 0, 0, 1, 4, 64, 0, 1e-6, 1e-6,
                          DeviceWeight{}, 0.0, 0, 0, 0, 0, 0, 0, nullptr);
  ASSERT_FALSE(postPreIters.ok());
  EXPECT_NE(postPreIters.message().find("mhc_post_pre: sinkhorn_iters 0"),
            std::string::npos)
      << postPreIters.message();
  Status postPreScratch = kernels->mhcPostPre(
      0, 0, 0, 0, 0, 0, 0, 5, 4, 64, 20, 1e-6, 1e-6, DeviceWeight{}, 0.0, 0,
      mhcPreScratchBytes(4, 4, 64), 0, 0, 0, 0, nullptr);
  ASSERT_FALSE(postPreScratch.ok());
  EXPECT_NE(postPreScratch.message().find("mhc_post_pre: "), std::string::npos)
      << postPreScratch.message();
  EXPECT_NE(postPreScratch.message().find("bytes of scratch"),
            std::string::npos)
      << postPreScratch.message();
}

// An artifact's library code must come from this runtime's kernel sources: the
// fingerprint the compiler records is checked when the CUDA device loads it
// (no GPU needed for the check itself).
TEST_F(CudaKernelsTest, DsaKpool) {
  // GLM's k-pool against the CPU kernel (itself tested against the
  // reference): steps whose slots' tokens interleave and advance by ragged
  // amounts (pools completed across steps, one token a slot as in decode, a
  // slot starting over at position 0), f32 and bf16 tail state carried on
  // each side, pools of 1 to 8 and widths within and past a block's 128
  // threads; then the expansion to tokens and the position division.
  struct Case {
    int64_t pool, width;
  };
  for (Case c : {Case{4, 32}, Case{8, 130}, Case{2, 64}, Case{1, 16}})
    for (bool bf16 : {false, true}) {
      char label[64];
      std::snprintf(label, sizeof(label), "P%ld D%ld %s", long(c.pool),
                    long(c.width), bf16 ? "bf16" : "f32");
      SCOPED_TRACE(label);
      const int64_t slots = 3, tailRows = std::max<int64_t>(c.pool - 1, 1);
      const int64_t slotValues = tailRows * 2 * c.width;
      auto ape = random(c.pool * c.width);
      std::vector<float> cpuState(slots * slotValues, 0.0f);
      std::vector<uint16_t> cpuState16(slots * slotValues, 0);
      Buffer dState(*driver, slots * slotValues * (bf16 ? 2 : 4));
      ASSERT_TRUE(
          ok(driver->cuMemsetD8(dState, 0, slots * slotValues * (bf16 ? 2 : 4)),
             "cuMemsetD8"));
      Buffer dApe(*driver, ape);
      std::vector<int64_t> next(slots, 0);
      double worst = 0.0;
      for (std::vector<int64_t> lengths : {std::vector<int64_t>{5, 1, 0},
                                           {7, 13, 2},
                                           {1, 3, 9},
                                           {1, 1, 1},
                                           {0, 1, 1},
                                           {2, 0, 17}}) {
        if (lengths == std::vector<int64_t>{2, 0, 17})
          next[0] = 0;
        std::vector<int32_t> sequences;
        for (int64_t s = 0; s < slots; ++s)
          sequences.insert(sequences.end(), lengths[s], int32_t(s));
        std::shuffle(sequences.begin(), sequences.end(), rng);
        std::vector<int32_t> positions(sequences.size());
        for (size_t t = 0; t < sequences.size(); ++t)
          positions[t] = int32_t(next[sequences[t]]++);
        int64_t tokens = int64_t(sequences.size());
        auto keys = random(tokens * c.width),
             gate = random(tokens * c.width, -2, 2);
        cpu::StateView view;
        view.base = bf16 ? reinterpret_cast<uint8_t *>(cpuState16.data())
                         : reinterpret_cast<uint8_t *>(cpuState.data());
        view.bf16 = bf16;
        view.slots = slots;
        view.slotBytes = slotValues * (bf16 ? 2 : 4);
        std::vector<float> expected(tokens * c.width);
        Status ran = cpu::dsaKpool(pool, keys.data(), gate.data(),
                                   cpu::WeightView::f32(ape.data()), c.pool,
                                   c.width, view, positions.data(),
                                   sequences.data(), tokens, expected.data());
        ASSERT_TRUE(ran.ok()) << ran.message();
        Buffer dKeys(*driver, keys), dGate(*driver, gate),
            dPos(*driver, positions), dSeq(*driver, sequences),
            dOut(*driver, tokens * c.width * 4);
        DeviceState state;
        state.base = dState;
        state.bf16 = bf16;
        state.slots = slots;
        state.slotBytes = view.slotBytes;
        expectRan(kernels->dsaKpool(dKeys, dGate, DeviceWeight::f32(dApe),
                                    c.pool, c.width, state, dPos, dSeq, tokens,
                                    dOut, nullptr));
        // A softmax of up to 8 terms with __expf against the CPU's double.
        worst =
            std::max(worst, rowRelativeError(dOut.read<float>(tokens * c.width),
                                             expected, c.width));
        // The tail rows the next steps read, bit for bit (raw copies).
        if (bf16) {
          std::vector<uint16_t> got = dState.read<uint16_t>(slots * slotValues);
          for (int64_t s = 0; s < slots; ++s)
            for (int64_t m = next[s] / c.pool * c.pool; m < next[s]; ++m)
              for (int64_t i = 0; i < 2 * c.width; ++i) {
                int64_t k = s * slotValues + m % c.pool * 2 * c.width + i;
                ASSERT_EQ(got[k], cpuState16[k]) << "slot " << s;
              }
        } else {
          std::vector<float> got = dState.read<float>(slots * slotValues);
          for (int64_t s = 0; s < slots; ++s)
            for (int64_t m = next[s] / c.pool * c.pool; m < next[s]; ++m)
              for (int64_t i = 0; i < 2 * c.width; ++i) {
                int64_t k = s * slotValues + m % c.pool * 2 * c.width + i;
                ASSERT_EQ(got[k], cpuState[k]) << "slot " << s;
              }
        }
      }
      report("dsaKpool", label, worst);
      EXPECT_LE(worst, 1e-5);
    }

  // Expansion: selected pools (then -1) to their tokens plus the tail.
  for (int64_t poolSize : {1, 4, 8}) {
    int64_t tokens = 37, k = 300; // k past a block's 256 threads
    std::vector<int32_t> pools(tokens * k, -1), positions(tokens);
    std::uniform_int_distribution<int> pos(0, 4000);
    for (int64_t t = 0; t < tokens; ++t) {
      positions[t] = pos(rng);
      int64_t complete = (positions[t] + 1) / poolSize;
      std::vector<int32_t> all(complete);
      for (int64_t j = 0; j < complete; ++j)
        all[j] = int32_t(j);
      std::shuffle(all.begin(), all.end(), rng);
      for (int64_t i = 0; i < k && i < complete; ++i)
        pools[t * k + i] = all[i];
    }
    int64_t width = k * poolSize + poolSize - 1;
    std::vector<int32_t> expected(tokens * width);
    cpu::dsaKpoolExpand(pool, pools.data(), positions.data(), tokens, k,
                        poolSize, expected.data());
    Buffer dPools(*driver, pools), dPos(*driver, positions),
        dOut(*driver, tokens * width * 4);
    expectRan(kernels->dsaKpoolExpand(dPools, dPos, tokens, k, poolSize, dOut,
                                      nullptr));
    EXPECT_EQ(dOut.read<int32_t>(tokens * width), expected)
        << "pool " << poolSize;
  }
  std::vector<int32_t> positions = {0, 1, 3, 4, 7, 8, 1023, 4096};
  Buffer dPos(*driver, positions), dRows(*driver, positions.size() * 4);
  expectRan(kernels->divScalarI32(dPos, int64_t(positions.size()), 4, dRows,
                                  nullptr));
  EXPECT_EQ(dRows.read<int32_t>(positions.size()),
            (std::vector<int32_t>{0, 0, 0, 1, 1, 2, 255, 1024}));
  EXPECT_FALSE(
      kernels->divScalarI32(dPos, int64_t(positions.size()), 0, dRows, nullptr)
          .ok());
}

TEST(CudaLibraryFingerprint, OnlyThisRuntimesLibraryLoads) {
  uint64_t own = cudaKernelsFingerprint();
  EXPECT_NE(own, 0u);
  artifact::CodeImage image;
  image.set_module("library");
  image.set_library_fingerprint(own);
  EXPECT_TRUE(checkLibraryFingerprint(image, own).ok());
  image.set_library_fingerprint(0x0123456789abcdefull);
  Status other = checkLibraryFingerprint(image, own);
  ASSERT_FALSE(other.ok());
  EXPECT_NE(other.message().find("fingerprint 0123456789abcdef"),
            std::string::npos)
      << other.message();
  EXPECT_NE(other.message().find("recompile the artifact"), std::string::npos);
  image.clear_library_fingerprint();
  Status none = checkLibraryFingerprint(image, own);
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.message().find("no fingerprint"), std::string::npos)
      << none.message();
}

// Tests the kernels that take column views (Kernels.def's VIEW slots) on
// rows of other widths than their own: the same values as the CPU kernels
// (checked against the reference by CpuKernels.ColumnViews) with the same
// strides, and nothing written outside the view.
TEST_F(CudaKernelsTest, ColumnViews) {
  const float kSentinel = -1234.5f;
  const int64_t tokens = 7, heads = 3;
  // rms_norm: columns [50, 1050) of rows of 1100 into [100, 1100) of rows
  // of 1200; the generic kernel and the instantiation for 1000.
  {
    const int64_t dim = 1000;
    auto x = random(tokens * 1100, -3, 3), weight = random(dim);
    std::vector<float> wide(tokens * 1200, kSentinel), expected = wide;
    cpu::rmsNorm(pool, x.data() + 50, cpu::WeightView::f32(weight.data()),
                 tokens, dim, 1e-6, expected.data() + 100, 1100, 1200);
    Buffer dx(*driver, x), dw(*driver, weight), dOut(*driver, wide);
    for (const std::string &instantiation :
         {std::string(), std::string("daybreak_rms_norm_t<1000>")}) {
      expectRan(kernels->rmsNorm(dx + 50 * 4, DeviceWeight::f32(dw), tokens,
                                 dim, 1e-6, dOut + 100 * 4, nullptr,
                                 variant(instantiation), 1100, 1200));
      std::vector<float> out = dOut.read<float>(wide.size());
      double e =
          rowRelativeError(test::columnsOf(out, 1200, 100, dim),
                           test::columnsOf(expected, 1200, 100, dim), dim);
      report(instantiation.empty() ? "rmsNorm view" : instantiation.c_str(),
             "7 rows of 1000 in 1100 -> 1200", e);
      EXPECT_LE(e, 1e-5);
      EXPECT_TRUE(test::untouchedOutside(out, 1200, 100, dim, kSentinel));
    }
  }
  // layer_norm: columns [1536, 1664) of rows of 2240 (the indexer's key in
  // DeepSeek-V3.2's stacked q_a | wk | kv_a projection) into [8, 136) of
  // rows of 144, with a bias.
  {
    const int64_t dim = 128;
    auto x = random(tokens * 2240, -3, 3), weight = random(dim),
         bias = random(dim);
    std::vector<float> wide(tokens * 144, kSentinel), expected = wide;
    cpu::layerNorm(pool, x.data() + 1536, cpu::WeightView::f32(weight.data()),
                   cpu::WeightView::f32(bias.data()), tokens, dim, 1e-6,
                   expected.data() + 8, 2240, 144);
    Buffer dx(*driver, x), dw(*driver, weight), db(*driver, bias),
        dOut(*driver, wide);
    expectRan(kernels->layerNorm(dx + 1536 * 4, DeviceWeight::f32(dw),
                                 DeviceWeight::f32(db), tokens, dim, 1e-6,
                                 dOut + 8 * 4, nullptr, 2240, 144));
    std::vector<float> out = dOut.read<float>(wide.size());
    double e = rowRelativeError(test::columnsOf(out, 144, 8, dim),
                                test::columnsOf(expected, 144, 8, dim), dim);
    report("layerNorm view", "7 rows of 128 in 2240 -> 144", e);
    EXPECT_LE(e, 1e-5);
    EXPECT_TRUE(test::untouchedOutside(out, 144, 8, dim, kSentinel));
  }
  // rope out of place: rows of 16 at column 32 of rows of 48 into column 64
  // of rows of 80, rotating [4, 12) of each and copying the rest.
  for (bool interleaved : {true, false}) {
    cpu::RopeParams p;
    p.interleaved = interleaved;
    p.offset = 4;
    p.dim = 8;
    auto x = random(tokens * heads * 48);
    std::vector<int32_t> positions(tokens);
    for (auto &pos : positions)
      pos = int32_t(rng() % 160000);
    std::vector<float> wide(tokens * heads * 80, kSentinel), expected = wide;
    cpu::rope(pool, x.data() + 32, runtime::RopeRows::dense(heads, 48),
              expected.data() + 64, runtime::RopeRows::dense(heads, 80),
              positions.data(), tokens, heads, 16, p);
    Buffer dx(*driver, x), dPos(*driver, positions), dOut(*driver, wide);
    expectRan(kernels->rope(dx + 32 * 4, runtime::RopeRows::dense(heads, 48),
                            dOut + 64 * 4, runtime::RopeRows::dense(heads, 80),
                            dPos, tokens, heads, 16, p, nullptr));
    std::vector<float> out = dOut.read<float>(wide.size());
    double e = rowRelativeError(test::columnsOf(out, 80, 64, 16),
                                test::columnsOf(expected, 80, 64, 16), 16);
    report("rope view", interleaved ? "interleaved" : "half_split", e);
    EXPECT_LE(e, 1e-6);
    EXPECT_TRUE(test::untouchedOutside(out, 80, 64, 16, kSentinel));
  }
  // rope over rows of heads (lm.rope's head_dim): a token's `heads` heads
  // of 16 at column 24 of rows of 104 (a projection's part), into column 8
  // of rows of 88; the CPU kernel rotates the same heads of a dense copy.
  for (bool interleaved : {true, false}) {
    cpu::RopeParams p;
    p.interleaved = interleaved;
    p.offset = 2;
    p.dim = 12;
    const int64_t width = heads * 16;
    auto x = random(tokens * 104);
    std::vector<int32_t> positions(tokens);
    for (auto &pos : positions)
      pos = int32_t(rng() % 160000);
    std::vector<float> dense = test::columnsOf(x, 104, 24, width);
    cpu::rope(pool, dense.data(), positions.data(), tokens, heads, 16, p);
    std::vector<float> wide(tokens * 88, kSentinel);
    Buffer dx(*driver, x), dPos(*driver, positions), dOut(*driver, wide);
    expectRan(kernels->rope(dx + 24 * 4, runtime::RopeRows{104, 16},
                            dOut + 8 * 4, runtime::RopeRows{88, 16}, dPos,
                            tokens, heads, 16, p, nullptr));
    std::vector<float> out = dOut.read<float>(wide.size());
    double e = rowRelativeError(test::columnsOf(out, 88, 8, width), dense, 16);
    report("rope heads of a view", interleaved ? "interleaved" : "half_split",
           e);
    EXPECT_LE(e, 1e-6);
    EXPECT_TRUE(test::untouchedOutside(out, 88, 8, width, kSentinel));
  }
  // head_matmul: x columns [0, 32) of rows of 48, out columns [0, 20) of
  // rows of 36: bf16 weights on the tensor cores (row stride a multiple of
  // 4), and with x rounded to bf16; bf16 off them (rows of 50: not 16-byte
  // aligned) with x rounded over the rows it spans; fp32 weights.
  struct Case {
    const char *name;
    int weightType; // 0 f32, 1 bf16
    int64_t xStride;
    bool bf16;
  };
  for (Case c :
       {Case{"tensor cores", 1, 48, false},
        Case{"tensor cores, bf16 x", 1, 48, true},
        Case{"CUDA cores, bf16 x", 1, 50, true}, Case{"fp32", 0, 50, false}}) {
    const int64_t k = 32, n = 20;
    ASSERT_EQ(CudaKernels::headRowsAligned(16, c.xStride), c.xStride % 4 == 0);
    auto x = random(tokens * heads * c.xStride);
    std::vector<float> xIn = x;
    if (c.bf16)
      for (float &v : xIn)
        v = numerics::roundToBf16(v);
    StoredWeights w;
    if (c.weightType) {
      w = randomStored(rng, cpu::WeightType::BF16, heads * n * k, 0);
    } else {
      std::vector<float> f = random(heads * n * k);
      w.bytes.resize(f.size() * 4);
      std::memcpy(w.bytes.data(), f.data(), w.bytes.size());
    }
    cpu::WeightView hw;
    hw.data = w.bytes.data();
    hw.type = c.weightType ? cpu::WeightType::BF16 : cpu::WeightType::F32;
    std::vector<float> wide(tokens * heads * 36, kSentinel), expected = wide;
    cpu::headMatmul(pool, xIn.data(), hw, true, tokens, heads, k, n,
                    expected.data(), c.xStride, 36);
    Buffer dx(*driver, x), dw(*driver, w.bytes), dOut(*driver, wide);
    DeviceWeight gw;
    gw.data = dw;
    gw.type = c.weightType;
    InputRounding rounding;
    rounding.bf16 = c.bf16;
    Buffer scratch(*driver, tokens * heads * c.xStride * 4);
    rounding.scratch = scratch;
    rounding.scratchFloats = tokens * heads * c.xStride;
    expectRan(kernels->headMatmul(dx, gw, true, tokens, heads, k, n, dOut,
                                  nullptr, rounding, true, c.xStride, 36));
    std::vector<float> out = dOut.read<float>(wide.size());
    double e = rowRelativeError(test::columnsOf(out, 36, 0, n),
                                test::columnsOf(expected, 36, 0, n), n);
    report("headMatmul view", c.name, e);
    EXPECT_LE(e, 1e-5) << c.name;
    EXPECT_TRUE(test::untouchedOutside(out, 36, 0, n, kSentinel)) << c.name;
  }
}
