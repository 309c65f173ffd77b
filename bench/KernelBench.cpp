//===- KernelBench.cpp - CUDA library kernels, generic vs specialised -----===//
//
// Times the library kernels that the compiler specialises with NVRTC
// (rms_norm, the decode matmul, DSA indexer scores, sparse attention) at
// DeepSeek-V3.2's real decode shapes, generic and as the instantiation for
// the shape (test/runtime/SpecializedKernels.cu, the same templates), sparse
// attention also split over its rows (the decode path), and the DSA top-k
// selection at 8K and 32K keys; prints each one's time, the bytes it must
// move at least, and the achieved
// fraction of the H200's 4.8 TB/s HBM peak. A benchmark, not a test:
// `DaybreakKernelBench` on the GPU machine (scripts/gpu-tests.sh runs it).
//
// Timing: 5 launches to warm up, then N launches back to back between two
// context synchronisations, wall clock / N (each case moves tens of MB or
// more, so launch overhead is small next to it except for rms_norm). The
// decode GEMVs on stored weights are timed as CUDA graph replays over a
// weight pool larger than L2, against the copy bandwidth of the same run
// (benchGemvs); `DaybreakKernelBench N gemv` runs only those. The direct
// MXFP4 expert matmul is timed the same way at gpt-oss-120b's decode shapes
// (benchMxfp4), and at prefill sizes on the grouped warpgroup GEMM against
// the FP8 routes' GEMM (benchMxfp4Prefill; `DaybreakKernelBench N mxfp4`
// runs only these two, `mxfp4-prefill` the second). Dense attention
// at gpt-oss-120b's shapes, prefill and decode, on the CUDA cores and the
// tensor cores, in TFLOP/s (benchAttention; `DaybreakKernelBench N
// attention` runs only it). The many-row tensor-core GEMMs run at prefill
// shapes, dense and grouped by expert, reporting TFLOP/s (benchTensorGemm;
// `DaybreakKernelBench N gemm` runs only them), and the warpgroup GEMMs of
// --precision=bf16 beside cuBLAS at the same shapes (benchWarpgroupGemm;
// `... wgmma` runs only them), and the exact ones (x in three bf16 parts)
// beside the three-part mma.sync GEMM (`... exact` runs only them). The KDA
// scans and the absorbed-MLA attention run at Kimi-Linear-48B's dims
// (`DaybreakKernelBench N kda` and `... mla` run only them). mHC's write-back
// and collapse with the sublayer's norm, separate and fused (mhc_post_pre), at
// GLM-5.3's n and D (benchMhc; `... mhc` runs only it). The routed experts at
// decode sizes, the CUDA-core kernel against the tensor-core expert GEMV, at
// DeepSeek-V3.2's and GLM-5.3-Flash's expert shapes (benchExpertGemv;
// `... experts` runs only it, with every expert of the real models).
//
//===----------------------------------------------------------------------===//

#include "runtime/devices/cpu/CpuKernels.h"
#include "runtime/devices/cuda/CudaKernels.h"
#include "runtime/devices/cuda/MatmulProbe.h"
#include "runtime/numerics/Numerics.h"

#include "SpecializedKernelsPtx.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <numeric>
#include <random>
#include <string>
#include <vector>

using namespace daybreak;
using namespace daybreak::cuda;

namespace {

constexpr double kPeakBytesPerSecond = 4.8e12; // H200 HBM3e, nominal

const Driver *driver = nullptr;

[[noreturn]] void fail(const std::string &message) {
  std::fprintf(stderr, "DaybreakKernelBench: %s\n", message.c_str());
  std::exit(1);
}

void check(CUresult result, const char *call) {
  Status status = driver->check(result, call);
  if (!status.ok())
    fail(status.message());
}

void check(const Status &status) {
  if (!status.ok())
    fail(status.message());
}

CUdeviceptr alloc(size_t bytes, uint8_t fill) {
  CUdeviceptr p = 0;
  check(driver->cuMemAlloc(&p, bytes), "cuMemAlloc");
  check(driver->cuMemsetD8(p, fill, bytes), "cuMemsetD8");
  return p;
}

/// A device copy of `values`.
CUdeviceptr upload(const std::vector<int32_t> &values) {
  CUdeviceptr p = 0;
  check(driver->cuMemAlloc(&p, values.size() * 4), "cuMemAlloc");
  check(driver->cuMemcpyHtoD(p, values.data(), values.size() * 4),
        "cuMemcpyHtoD");
  return p;
}

/// Seconds per launch of `launch`.
double timeIt(const std::function<Status()> &launch, int iterations) {
  for (int i = 0; i < 5; ++i)
    check(launch());
  check(driver->cuCtxSynchronize(), "cuCtxSynchronize");
  auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < iterations; ++i)
    check(launch());
  check(driver->cuCtxSynchronize(), "cuCtxSynchronize");
  std::chrono::duration<double> elapsed =
      std::chrono::steady_clock::now() - start;
  return elapsed.count() / iterations;
}

void row(const char *kernel, const std::string &shape, const char *variant,
         double seconds, double bytes) {
  double rate = bytes / seconds;
  std::printf("%-18s %-40s %-12s %10.2f us %9.1f GB/s %6.1f%% of HBM peak\n",
              kernel, shape.c_str(), variant, seconds * 1e6, rate / 1e9,
              100.0 * rate / kPeakBytesPerSecond);
}

/// The entry point of `prefix`'s instantiation in the specialised PTX.
CUfunction entry(const std::string &ptx, CUmodule module,
                 const std::string &prefix) {
  size_t at = ptx.find(".entry " + prefix);
  if (at == std::string::npos)
    fail("no entry point " + prefix + " in SpecializedKernels.cu's PTX");
  at += 7;
  std::string name = ptx.substr(at, ptx.find('(', at) - at);
  CUfunction fn = nullptr;
  check(driver->cuModuleGetFunction(&fn, module, name.c_str()),
        "cuModuleGetFunction");
  return fn;
}

/// Seconds per launch of `launch(i)` (i = 0, 1, ...: the launch's input
/// set) captured `count` times into a CUDA graph, timed with events around
/// each of 7 replays after a warm-up one; the median. A decode step replays
/// its launches this way, so no host launch cost is counted.
double timeGraph(const std::function<Status(int, CUstream)> &launch,
                 int count) {
  CUstream stream = nullptr;
  check(driver->cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING),
        "cuStreamCreate");
  check(driver->cuStreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_GLOBAL),
        "cuStreamBeginCapture");
  for (int i = 0; i < count; ++i)
    check(launch(i, stream));
  CUgraph graph = nullptr;
  check(driver->cuStreamEndCapture(stream, &graph), "cuStreamEndCapture");
  CUgraphExec exec = nullptr;
  check(driver->cuGraphInstantiateWithFlags(&exec, graph, 0),
        "cuGraphInstantiateWithFlags");
  CUevent begin = nullptr, end = nullptr;
  check(driver->cuEventCreate(&begin, CU_EVENT_DEFAULT), "cuEventCreate");
  check(driver->cuEventCreate(&end, CU_EVENT_DEFAULT), "cuEventCreate");
  std::vector<float> times;
  for (int replay = 0; replay < 8; ++replay) {
    check(driver->cuEventRecord(begin, stream), "cuEventRecord");
    check(driver->cuGraphLaunch(exec, stream), "cuGraphLaunch");
    check(driver->cuEventRecord(end, stream), "cuEventRecord");
    check(driver->cuEventSynchronize(end), "cuEventSynchronize");
    float ms = 0.0f;
    check(driver->cuEventElapsedTime(&ms, begin, end), "cuEventElapsedTime");
    if (replay > 0)
      times.push_back(ms);
  }
  std::sort(times.begin(), times.end());
  driver->cuEventDestroy(begin);
  driver->cuEventDestroy(end);
  driver->cuGraphExecDestroy(exec);
  driver->cuGraphDestroy(graph);
  driver->cuStreamDestroy(stream);
  return times[times.size() / 2] * 1e-3 / count;
}

/// Decode GEMVs on weights at their stored precision, at DeepSeek-V3.2's
/// real shapes, against the copy bandwidth measured here in the same run
/// (device-to-device copy of 2 GiB: bytes read + written per second). The
/// bytes are the stored weight (codes + fp32 block scales), x and out. The
/// weights are random (every byte with bit 6 clear: finite e4m3 codes and
/// bf16 values below 2) in a 2 GiB pool that successive launches walk
/// through, so no launch finds its weight in the 60 MB L2.
void benchGemvs(const CudaKernels &kernels, int iterations) {
  size_t copyBytes = size_t(1) << 31;
  CUdeviceptr a = alloc(copyBytes, 1), b = alloc(copyBytes, 0);
  double copySeconds = timeIt(
      [&] {
        return driver->check(driver->cuMemcpyDtoDAsync(b, a, copyBytes, 0),
                             "cuMemcpyDtoDAsync");
      },
      10);
  double copyRate = 2.0 * double(copyBytes) / copySeconds;
  std::printf("copy bandwidth (same run): %.1f GB/s\n", copyRate / 1e9);
  // The pool reuses the copy's source buffer.
  CUdeviceptr pool = a;
  // Kept to check results on the host: pool byte o is pattern[o % size].
  std::vector<uint8_t> pattern(size_t(64) << 20);
  {
    std::mt19937 rng(3);
    for (uint8_t &byte : pattern)
      byte = uint8_t(rng() & 0xBF);
    for (size_t at = 0; at < copyBytes; at += pattern.size())
      check(driver->cuMemcpyHtoD(pool + at, pattern.data(), pattern.size()),
            "cuMemcpyHtoD");
  }
  struct Case {
    const char *what;
    int64_t n, k;
    int32_t type; // 1 bf16, 2 e4m3
  };
  const Case cases[] = {
      {"q_a_proj", 1536, 7168, 2},    {"kv_a_proj", 576, 7168, 2},
      {"q_b_proj", 24576, 1536, 2},   {"indexer wq_b", 8192, 1536, 2},
      {"o_proj", 7168, 16384, 2},     {"dense gate/up", 18432, 7168, 2},
      {"dense down", 7168, 18432, 2}, {"expert gate/up", 2048, 7168, 2},
      {"expert down", 7168, 2048, 2}, {"lm_head", 129280, 7168, 1},
      {"router gate", 256, 7168, 1},  {"indexer weights", 64, 7168, 1}};
  std::vector<float> host(8 * 18432);
  {
    std::mt19937 rng(4);
    std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
    for (float &v : host)
      v = dist(rng);
  }
  CUdeviceptr scales = alloc(1 << 20, 0x3c), x = alloc(host.size() * 4, 0),
              out = alloc(8 * 129280 * 4, 0);
  check(driver->cuMemcpyHtoD(x, host.data(), host.size() * 4), "cuMemcpyHtoD");
  // The decode-step graphs' state: the norm reads `state` (the previous
  // GEMV's output, [m, k] of it; random where no GEMV wrote) into `normed`.
  std::vector<float> outHost(8 * 129280);
  {
    std::mt19937 rng(5);
    std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
    for (float &v : outHost)
      v = dist(rng);
  }
  CUdeviceptr state = alloc(outHost.size() * 4, 0),
              normed = alloc(host.size() * 4, 0);
  const CudaKernels serial = kernels.withProgrammaticLaunch(false),
                    early = kernels.withProgrammaticLaunch(true);
  struct Summary {
    std::string what;
    double us[2], percent[2];
  };
  struct StepSummary {
    std::string what;
    double mb;
    // [m == 8]: GEMV alone, and its PDL form; the norm alone; norm + GEMV
    // with and without PDL; the same-size copy's GB/s.
    double alone[2], alonePdl[2], norm[2], pair[2], pairPdl[2], copy[2];
    double bytes[2];
    std::string choice[2];
  };
  std::vector<StepSummary> steps;
  std::vector<Summary> summary;
  float scaleValue;
  {
    uint32_t bits = 0x3c3c3c3c; // the scales' fill byte
    std::memcpy(&scaleValue, &bits, 4);
  }
  int mismatches = 0;
  // The last GEMV's output `y` [m, n] against the host on 61 rows spread
  // over N, from the x it read; the worst error over the largest |out| of
  // those rows, per token.
  auto verify = [&](const char *label, CUdeviceptr xs, CUdeviceptr ys,
                    const DeviceWeight &w, int64_t m, int64_t n, int64_t k) {
    std::vector<float> hx(m * k), hy(m * n);
    check(driver->cuCtxSynchronize(), "cuCtxSynchronize");
    check(driver->cuMemcpyDtoH(hx.data(), xs, hx.size() * 4), "cuMemcpyDtoH");
    check(driver->cuMemcpyDtoH(hy.data(), ys, hy.size() * 4), "cuMemcpyDtoH");
    size_t base = size_t(w.data - pool);
    double worst = 0.0;
    for (int64_t t = 0; t < m; ++t) {
      double largest = 1e-30, error = 0.0;
      for (int64_t j = 0; j <= 60; ++j) {
        int64_t r = j * (n - 1) / 60;
        double sum = 0.0;
        for (int64_t i = 0; i < k; ++i) {
          size_t at = base + size_t(r * k + i) * (w.type == 1 ? 2 : 1);
          float v;
          if (w.type == 1)
            v = numerics::bf16ToFloat(
                uint16_t(pattern[at % pattern.size()] |
                         (pattern[(at + 1) % pattern.size()] << 8)));
          else
            v = numerics::e4m3ToFloat(pattern[at % pattern.size()]) *
                scaleValue;
          sum += double(hx[t * k + i]) * double(v);
        }
        largest = std::max(largest, std::fabs(sum));
        double got = hy[t * n + r];
        error =
            std::isnan(got) ? INFINITY : std::max(error, std::fabs(got - sum));
      }
      worst = std::max(worst, error / largest);
    }
    bool ok = worst <= 1e-5;
    mismatches += !ok;
    std::printf("%-18s %-40s %-12s checked (%s): worst error %.3g%s\n", "", "",
                "", label, worst, ok ? "" : " MISMATCH");
  };
  // A decode step's view of a GEMV: a CUDA graph of `count` (norm, GEMV)
  // pairs, the norm (rms_norm over [m, k] of the state) writing the GEMV's
  // x and reading the state the GEMV then overwrites: the RAW and WAR
  // hazards a programmatic launch must respect. Timed without and with PDL,
  // against the norm alone (the GEMV's share of a step is the difference)
  // and the GEMV alone (each GEMV after another, as before), with a copy of
  // the weight's size for context. The last GEMV's output is checked.
  auto stepCase = [&](const char *what, int64_t n, int64_t k, int32_t type,
                      int64_t m, int64_t weightBytes, double stored,
                      const std::function<DeviceWeight(int)> &at,
                      int64_t sets) {
    int count = std::max(iterations / 2, 8);
    int slot = m == 8;
    std::string shape = std::string(what) + " m=" + std::to_string(m);
    double bytes = stored + double(m * k * 4 + m * n * 4);
    if (slot == 0) {
      steps.push_back(StepSummary{});
      steps.back().what = std::string(what) +
                          (type == 1 ? " bf16 " : " e4m3 ") +
                          std::to_string(n) + " x " + std::to_string(k);
      steps.back().mb = stored / 1e6;
    }
    StepSummary &step = steps.back();
    step.bytes[slot] = bytes;
    TensorGemvChoice picked = kernels.tensorGemvChoice(at(0), m, n, k);
    // What tensorGemv would run (matmul keeps wide bf16 m = 1 on the CUDA
    // cores: lm_head).
    step.choice[slot] = picked.tiles ? "t" + std::to_string(picked.tiles) +
                                           " c" + std::to_string(picked.cluster)
                                     : "-";
    auto norm = [&](CUstream stream) {
      return kernels.rmsNorm(state, DeviceWeight(), m, k, 1e-6, normed, stream);
    };
    auto reset = [&] {
      check(driver->cuMemcpyHtoD(state, outHost.data(), outHost.size() * 4),
            "cuMemcpyHtoD");
    };
    auto alone = [&](const CudaKernels &with) {
      return timeGraph(
          [&](int i, CUstream stream) {
            return with.matmul(x, at(i), DeviceWeight(), m, n, k, out, stream,
                               nullptr, /*constantWeight=*/true);
          },
          count);
    };
    auto pair = [&](const CudaKernels &with) {
      reset();
      return timeGraph(
          [&](int i, CUstream stream) {
            Status status = norm(stream);
            if (!status.ok())
              return status;
            return with.matmul(normed, at(i), DeviceWeight(), m, n, k, state,
                               stream, nullptr, /*constantWeight=*/true);
          },
          count);
    };
    step.alone[slot] = alone(serial);
    step.alonePdl[slot] = alone(early);
    verify("GEMV alone, PDL", x, out, at(count - 1), m, n, k);
    reset();
    step.norm[slot] =
        timeGraph([&](int, CUstream stream) { return norm(stream); }, count);
    step.pair[slot] = pair(serial);
    verify("norm + GEMV", normed, state, at(count - 1), m, n, k);
    step.pairPdl[slot] = pair(early);
    verify("norm + GEMV, PDL", normed, state, at(count - 1), m, n, k);
    int64_t stride = (weightBytes + 255) / 256 * 256;
    double copySeconds = timeGraph(
        [&](int i, CUstream stream) {
          return driver->check(driver->cuMemcpyDtoDAsync(
                                   b, pool + CUdeviceptr((i % sets) * stride),
                                   size_t(weightBytes), stream),
                               "cuMemcpyDtoDAsync");
        },
        count);
    step.copy[slot] = 2.0 * double(weightBytes) / copySeconds / 1e9;
    auto share = [&](double seconds) {
      return 100.0 * bytes / seconds / copyRate;
    };
    std::printf("%-18s %-40s GEMV alone %.2f us (%.1f%%), PDL %.2f us "
                "(%.1f%%)\n",
                "step", shape.c_str(), step.alone[slot] * 1e6,
                share(step.alone[slot]), step.alonePdl[slot] * 1e6,
                share(step.alonePdl[slot]));
    std::printf("%-18s %-40s norm alone %.2f us; norm + GEMV %.2f us, PDL "
                "%.2f us; GEMV's share %.2f us (%.1f%%), PDL %.2f us "
                "(%.1f%%); same-size copy %.0f GB/s\n",
                "step", shape.c_str(), step.norm[slot] * 1e6,
                step.pair[slot] * 1e6, step.pairPdl[slot] * 1e6,
                (step.pair[slot] - step.norm[slot]) * 1e6,
                share(step.pair[slot] - step.norm[slot]),
                (step.pairPdl[slot] - step.norm[slot]) * 1e6,
                share(step.pairPdl[slot] - step.norm[slot]), step.copy[slot]);
  };
  for (const Case &c : cases) {
    Summary line{std::string(c.what) + (c.type == 1 ? " bf16 " : " e4m3 ") +
                     std::to_string(c.n) + " x " + std::to_string(c.k),
                 {0, 0},
                 {0, 0}};
    for (int64_t m : {1, 8}) {
      DeviceWeight weight;
      weight.type = c.type;
      weight.scales = scales;
      weight.blockN = weight.blockK = 128;
      int64_t weightBytes = c.n * c.k * (c.type == 1 ? 2 : 1);
      double stored = double(weightBytes);
      if (c.type == 2)
        stored += 4.0 * ((c.n + 127) / 128) * ((c.k + 127) / 128);
      double bytes = stored + double(m * c.k * 4 + m * c.n * 4);
      int64_t stride = (weightBytes + 255) / 256 * 256;
      int64_t sets = std::max<int64_t>(1, int64_t(copyBytes) / stride);
      std::string shape = std::string(c.what) + " m=" + std::to_string(m) +
                          " n=" + std::to_string(c.n) +
                          " k=" + std::to_string(c.k);
      auto at = [&](int i) {
        DeviceWeight w = weight;
        w.data = pool + CUdeviceptr((i % sets) * stride);
        return w;
      };
      struct Variant {
        const char *name;
        bool tensor;
        TensorGemvChoice choice;
      };
      std::vector<Variant> variants = {{"auto", false, {}}};
      if (CudaKernels::tensorGemvApplies(weight, m, c.k))
        for (int tiles : {1, 2})
          for (int cluster : {0, 1, 2, 4, 8, 16})
            variants.push_back({"tc", true, {tiles, cluster}});
      for (const Variant &v : variants) {
        auto run = [&](int i, CUstream stream) {
          return v.tensor ? kernels.tensorGemv(x, at(i), DeviceWeight(), m, c.n,
                                               c.k, out, stream, v.choice)
                          : kernels.matmul(x, at(i), DeviceWeight(), m, c.n,
                                           c.k, out, stream);
        };
        // A forced cluster some shapes cannot take is skipped.
        if (v.tensor) {
          Status status = run(0, nullptr);
          if (!status.ok())
            continue;
        }
        double seconds = timeGraph(run, std::max(iterations / 2, 8));
        std::string name = v.name;
        if (v.tensor)
          name += " t" + std::to_string(v.choice.tiles) + " c" +
                  (v.choice.cluster ? std::to_string(v.choice.cluster)
                                    : std::string("auto"));
        row("gemv", shape, c.type == 1 ? "bf16" : "e4m3", seconds, bytes);
        double percent = 100.0 * bytes / seconds / copyRate;
        std::printf("%-18s %-40s %-12s %5.1f%% of the copy bandwidth (%s)\n",
                    "", "", "", percent, name.c_str());
        if (!v.tensor) {
          TensorGemvChoice picked =
              kernels.tensorGemvChoice(at(0), m, c.n, c.k);
          if (picked.tiles)
            std::printf("%-18s %-40s %-12s launcher's choice t%d c%d\n", "", "",
                        "", picked.tiles, picked.cluster);
          line.us[m == 8] = seconds * 1e6;
          line.percent[m == 8] = percent;
          // The same launches back to back from the host (wall clock).
          int i = 0;
          double wall = timeIt([&] { return run(i++, nullptr); }, iterations);
          std::printf("%-18s %-40s %-12s %10.2f us wall clock, %5.1f%% of "
                      "the copy bandwidth\n",
                      "", "", "", wall * 1e6, 100.0 * bytes / wall / copyRate);
        }
      }
      stepCase(c.what, c.n, c.k, c.type, m, weightBytes, stored, at, sets);
    }
    summary.push_back(line);
  }
  // What a graph replay costs per launch at all: the smallest GEMV.
  {
    DeviceWeight tiny;
    tiny.data = pool;
    tiny.type = 2;
    tiny.scales = scales;
    tiny.blockN = tiny.blockK = 128;
    double seconds = timeGraph(
        [&](int, CUstream stream) {
          return kernels.matmul(x, tiny, DeviceWeight(), 1, 16, 128, out,
                                stream);
        },
        std::max(iterations / 2, 8));
    std::printf("launch floor (graph replay, e4m3 m=1 n=16 k=128): %.2f us\n",
                seconds * 1e6);
  }
  for (int slot = 0; slot < 2; ++slot) {
    std::printf(
        "\nDecode GEMVs at m=%d in a decode step: each after the norm that "
        "writes its x (graph replay; the GEMV's share = norm + GEMV less the "
        "norm alone; %% of the copy bandwidth %.0f GB/s):\n",
        slot ? 8 : 1, copyRate / 1e9);
    std::printf("| weight (real shape) | MB | launch | alone | alone, PDL | "
                "norm | norm + GEMV | + PDL | GEMV's share | %% of copy | "
                "share, PDL | %% of copy | same-size copy |\n"
                "|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
                "---:|\n");
    for (const StepSummary &step : steps) {
      double serialShare = step.pair[slot] - step.norm[slot],
             earlyShare = step.pairPdl[slot] - step.norm[slot];
      std::printf(
          "| %s | %.1f | %s | %.1f us | %.1f us | %.1f us | %.1f us | "
          "%.1f us | %.1f us | %.0f %% | %.1f us | **%.0f %%** | "
          "%.0f GB/s |\n",
          step.what.c_str(), step.mb, step.choice[slot].c_str(),
          step.alone[slot] * 1e6, step.alonePdl[slot] * 1e6,
          step.norm[slot] * 1e6, step.pair[slot] * 1e6,
          step.pairPdl[slot] * 1e6, serialShare * 1e6,
          100.0 * step.bytes[slot] / serialShare / copyRate, earlyShare * 1e6,
          100.0 * step.bytes[slot] / earlyShare / copyRate, step.copy[slot]);
    }
  }
  std::printf("\nDecode GEMVs as CudaKernels::matmul runs them (graph replay, "
              "copy %.0f GB/s):\n",
              copyRate / 1e9);
  std::printf("| weight (real shape) | m=1 | %% of copy | m=8 | %% of copy |\n"
              "|---|---:|---:|---:|---:|\n");
  for (const Summary &line : summary)
    std::printf("| %s | %.1f us | %.0f %% | %.1f us | %.0f %% |\n",
                line.what.c_str(), line.us[0], line.percent[0], line.us[1],
                line.percent[1]);
  for (CUdeviceptr p : {pool, b, scales, x, out, state, normed})
    driver->cuMemFree(p);
  if (mismatches)
    fail(std::to_string(mismatches) + " GEMV results differ from the host");
}

} // namespace

/// For a profiler (ncu): the auto-chosen GEMV of dense gate/up (e4m3) at
/// m = 1 and 8 and of lm_head (bf16) at m = 8, twice each, nothing timed.
void profileGemvs(const CudaKernels &kernels) {
  CUdeviceptr w = alloc(size_t(129280) * 7168 * 2, 0x3b),
              scales = alloc(1 << 20, 0x3c), x = alloc(8 * 18432 * 4, 0x3c),
              out = alloc(8 * 129280 * 4, 0);
  struct Case {
    int64_t n, k, m;
    int32_t type;
  };
  for (Case c : {Case{18432, 7168, 1, 2}, Case{18432, 7168, 8, 2},
                 Case{129280, 7168, 8, 1}})
    for (int i = 0; i < 2; ++i) {
      DeviceWeight weight;
      weight.data = w;
      weight.type = c.type;
      weight.scales = scales;
      weight.blockN = weight.blockK = 128;
      check(kernels.matmul(x, weight, DeviceWeight(), c.m, c.n, c.k, out,
                           nullptr));
      check(driver->cuCtxSynchronize(), "cuCtxSynchronize");
    }
}

/// gpt-oss-120b's MXFP4 expert shapes: the fused gate/up projection (one
/// input a token) and the down projection (one input a slot).
struct Mxfp4Shape {
  const char *name;
  int64_t n, k;
  bool perSlot;
};
constexpr Mxfp4Shape kMxfp4Shapes[] = {{"gate_up", 5760, 2880, false},
                                       {"down", 2880, 2880, true}};

/// `slots` distinct experts (of pool.size()) for a token, drawn uniformly: the
/// first `slots` of a partial shuffle of `pool` (which it overwrites).
static void drawUniformSlots(std::mt19937 &rng, std::vector<int32_t> &pool,
                             int64_t slots, int32_t *out) {
  int64_t experts = int64_t(pool.size());
  std::iota(pool.begin(), pool.end(), 0);
  for (int64_t j = 0; j < slots; ++j) {
    std::swap(pool[j], pool[j + rng() % (experts - j)]);
    out[j] = pool[j];
  }
}

/// The direct MXFP4 expert matmul (mxfp4_expert_matmul: E2M1 values
/// decoded in registers) at gpt-oss-120b's decode shapes: 128 experts,
/// top-4, hidden 2880; gate/up [5760, 2880] on the token's row, down
/// [2880, 2880] on each slot's row with the routing weights; bf16 biases.
/// Timed as graph replays of 32 launches. T = 1, 8 and 64 tokens whose
/// experts walk the whole pool (launch i, token t, slot j picks expert
/// 4 (i T + t) + j mod 128), so none finds its experts in L2 and T <= 32
/// picks each expert once (T = 64: each twice); then T = 16, 24, 32 and 64
/// routed uniformly ("uniform": each token 4 distinct experts drawn at
/// random), the pairs an expert of Mxfp4Kernel::Auto's cost model
/// (mxfp4TensorPays), where the two kernels cross. Bytes: the packed values,
/// E8M0 scales and bias rows of the *distinct* experts a launch picks (counted
/// from the picks, averaged over the launches: an expert two tokens pick is
/// read once), x and out. Each case on both kernels: the CUDA cores ("direct",
/// each task loading its own rows, the default; "staged", the copy engine
/// bringing them into shared memory) and the tensor-core GEMV ("tensor", the
/// register form of the decode expert GEMV on E2M1; its routed sum through
/// daybreak_expert_combine).
void benchMxfp4(const CudaKernels &kernels) {
  constexpr int64_t kExperts = 128, kSlots = 4, kLaunches = 32, kMaxT = 64;
  for (const Mxfp4Shape &shape : kMxfp4Shapes) {
    int64_t n = shape.n, k = shape.k;
    // 0x22: E2M1 codes 2 (1.0); 0x7F: scales 2^0; bias 0x3F80: 1.0.
    CUdeviceptr values = alloc(size_t(kExperts * n * k / 2), 0x22),
                scales = alloc(size_t(kExperts * n * k / 32), 0x7F),
                bias = alloc(size_t(kExperts * n * 2), 0x3F),
                x = alloc(size_t(kMaxT * kSlots * k * 4), 0x3C),
                routing = alloc(size_t(kMaxT * kSlots * 4), 0x3C),
                out = alloc(size_t(kMaxT * kSlots * n * 4), 0);
    const int64_t scratchBytes = expertGemvScratchBytes(kMaxT, kSlots, n, true);
    CUdeviceptr scratch = alloc(size_t(scratchBytes), 0);
    DeviceWeight b;
    b.data = bias;
    b.type = 1;
    struct Routing {
      int64_t tokens;
      bool uniform;
    };
    std::mt19937 rng(7);
    for (Routing picking :
         {Routing{1, false}, Routing{8, false}, Routing{kMaxT, false},
          Routing{16, true}, Routing{24, true}, Routing{32, true},
          Routing{kMaxT, true}}) {
      int64_t tokens = picking.tokens;
      std::vector<int32_t> picks(kLaunches * tokens * kSlots);
      std::vector<int32_t> pool(kExperts);
      for (int64_t i = 0; i < kLaunches; ++i)
        for (int64_t t = 0; t < tokens; ++t) {
          int32_t *slots = &picks[(i * tokens + t) * kSlots];
          if (picking.uniform)
            drawUniformSlots(rng, pool, kSlots, slots);
          else
            for (int64_t j = 0; j < kSlots; ++j)
              slots[j] = int32_t((kSlots * (i * tokens + t) + j) % kExperts);
        }
      CUdeviceptr indices = 0;
      check(driver->cuMemAlloc(&indices, picks.size() * 4), "cuMemAlloc");
      check(driver->cuMemcpyHtoD(indices, picks.data(), picks.size() * 4),
            "cuMemcpyHtoD");
      double distinct = 0;
      for (int64_t i = 0; i < kLaunches; ++i) {
        std::vector<bool> picked(kExperts);
        for (int64_t r = 0; r < tokens * kSlots; ++r)
          picked[picks[i * tokens * kSlots + r]] = true;
        distinct += double(std::count(picked.begin(), picked.end(), true)) /
                    double(kLaunches);
      }
      double bytes = distinct * double(n) * (k / 2 + k / 32 + 2) +
                     double(tokens * (shape.perSlot ? kSlots : 1) * k * 4) +
                     double(tokens * (shape.perSlot ? 1 : kSlots) * n * 4);
      struct Variant {
        const char *label;
        Mxfp4Kernel kernel;
        bool staged;
      };
      for (Variant v : {Variant{"direct", Mxfp4Kernel::CudaCores, false},
                        Variant{"staged", Mxfp4Kernel::CudaCores, true},
                        Variant{"tensor", Mxfp4Kernel::TensorCores, false}}) {
        CudaKernels forced =
            kernels.withMxfp4Kernel(v.kernel).withMxfp4Staging(v.staged);
        double seconds = timeGraph(
            [&](int i, CUstream stream) {
              return forced.mxfp4ExpertMatmul(
                  x, shape.perSlot, values, scales, b, kExperts, n, k,
                  indices + CUdeviceptr(i) * tokens * kSlots * 4, tokens,
                  kSlots, shape.perSlot ? routing : 0, out, stream, scratch,
                  scratchBytes);
            },
            kLaunches);
        char pairsAnExpert[32];
        std::snprintf(pairsAnExpert, sizeof(pairsAnExpert), " (%.2f/expert)",
                      double(tokens * kSlots) / distinct);
        row("mxfp4_expert",
            std::string(shape.name) + " T=" + std::to_string(tokens) +
                (picking.uniform ? " uniform" : "") +
                " top-4 n=" + std::to_string(n) + " k=2880" + pairsAnExpert,
            v.label, seconds, bytes);
      }
      driver->cuMemFree(indices);
    }
    for (CUdeviceptr p : {values, scales, bias, x, routing, out, scratch})
      driver->cuMemFree(p);
  }
}

/// The MXFP4 expert matmul at prefill sizes, gpt-oss-120b's shapes as
/// benchMxfp4 (128 experts, top-4, uniform routing, a fresh draw each
/// launch): T = 64, 256, 1024 and 8192 tokens, on the grouped warpgroup
/// GEMM that widens E2M1 in shared memory ("wg-exact": x in three bf16
/// parts, the default's; "wg-bf16": one part, --precision=bf16), against
/// the grouped GEMM the FP8 routes take on the converted experts (E4M3
/// codes with [1, 32] f32 scales: "fp8-k32", the exact mma.sync GEMM) and,
/// where it applies, the tensor-core GEMV. FLOPs: 2 x pairs x n x k (the
/// useful products; the exact forms issue three times as many).
void benchMxfp4Prefill(const CudaKernels &kernels) {
  constexpr int64_t kExperts = 128, kSlots = 4, kMaxT = 8192;
  for (const Mxfp4Shape &shape : kMxfp4Shapes) {
    int64_t n = shape.n, k = shape.k, pairsMax = kMaxT * kSlots;
    // 0x22: E2M1 codes 2 (1.0); 0x7F: scales 2^0; E4M3 0x38: 1.0.
    CUdeviceptr values = alloc(size_t(kExperts * n * k / 2), 0x22),
                scales = alloc(size_t(kExperts * n * k / 32), 0x7F),
                codes = alloc(size_t(kExperts * n * k), 0x38),
                codeScales = alloc(size_t(kExperts * n * k / 32 * 4), 0),
                bias = alloc(size_t(kExperts * n * 2), 0x3F),
                x = alloc(size_t(pairsMax * k * 4), 0x3C),
                routing = alloc(size_t(pairsMax * 4), 0x3C),
                out = alloc(size_t(pairsMax * n * 4), 0);
    {
      std::vector<float> ones(size_t(kExperts * n * k / 32), 1.0f);
      check(driver->cuMemcpyHtoD(codeScales, ones.data(), ones.size() * 4),
            "cuMemcpyHtoD");
    }
    const int64_t scratchBytes =
        expertGemmScratchBytes(kMaxT, kSlots, kExperts, n, true);
    const int64_t partsFloats = (3 * pairsMax * k + 1) / 2;
    CUdeviceptr scratch = alloc(size_t(scratchBytes), 0),
                parts = alloc(size_t(partsFloats * 4), 0);
    DeviceWeight b, fp8;
    b.data = bias;
    b.type = 1;
    fp8.data = codes;
    fp8.scales = codeScales;
    fp8.type = 2;
    fp8.blockN = 1;
    fp8.blockK = 32;
    std::mt19937 rng(11);
    for (int64_t tokens : {int64_t(64), int64_t(256), int64_t(1024), kMaxT}) {
      const int launches = tokens >= 1024 ? 4 : 16;
      std::vector<int32_t> picks(size_t(launches * tokens * kSlots));
      std::vector<int32_t> pool(kExperts);
      for (int64_t r = 0; r < launches * tokens; ++r)
        drawUniformSlots(rng, pool, kSlots, &picks[r * kSlots]);
      CUdeviceptr indices = 0;
      check(driver->cuMemAlloc(&indices, picks.size() * 4), "cuMemAlloc");
      check(driver->cuMemcpyHtoD(indices, picks.data(), picks.size() * 4),
            "cuMemcpyHtoD");
      const int64_t pairs = tokens * kSlots;
      const double flops = 2.0 * double(pairs) * double(n) * double(k);
      struct Variant {
        const char *label;
        Mxfp4Kernel kernel;
        bool bf16, fp8;
      };
      for (Variant v :
           {Variant{"wg-exact", Mxfp4Kernel::WarpgroupGemm, false, false},
            Variant{"wg-bf16", Mxfp4Kernel::WarpgroupGemm, true, false},
            Variant{"fp8-k32", Mxfp4Kernel::Auto, false, true},
            Variant{"gemv", Mxfp4Kernel::TensorCores, false, false}}) {
        if (v.kernel == Mxfp4Kernel::TensorCores && pairs > kExpertGemvMaxPairs)
          continue;
        CudaKernels forced = kernels.withMxfp4Kernel(v.kernel);
        InputRounding rounding{v.bf16, parts, partsFloats};
        double seconds = timeGraph(
            [&](int i, CUstream stream) {
              CUdeviceptr picked =
                  indices + CUdeviceptr(i) * CUdeviceptr(pairs) * 4;
              if (v.fp8)
                return forced.expertMatmul(
                    x, shape.perSlot, fp8, kExperts, n, k, picked, tokens,
                    kSlots, shape.perSlot ? routing : 0, out, stream, b,
                    scratch, scratchBytes, InputRounding());
              return forced.mxfp4ExpertMatmul(
                  x, shape.perSlot, values, scales, b, kExperts, n, k, picked,
                  tokens, kSlots, shape.perSlot ? routing : 0, out, stream,
                  scratch, scratchBytes, rounding);
            },
            launches);
        std::printf("%-18s %-40s %-12s %10.2f us %9.1f TFLOP/s\n",
                    "mxfp4_prefill",
                    (std::string(shape.name) + " T=" + std::to_string(tokens) +
                     " top-4 n=" + std::to_string(n) + " k=2880")
                        .c_str(),
                    v.label, seconds * 1e6, flops / seconds / 1e12);
      }
      driver->cuMemFree(indices);
    }
    for (CUdeviceptr p : {values, scales, codes, codeScales, bias, x, routing,
                          out, scratch, parts})
      driver->cuMemFree(p);
  }
}

/// Dense attention at gpt-oss-120b's shapes (64 query heads on 8 KV heads of
/// 64, an fp8 cache as AssignKVLayout lays it out: 512 e4m3 codes and four
/// block scales a row): prefill of one sequence of 1K and 8K tokens, full
/// (causal) and with the 128-key window, and decode steps of 1 sequence at
/// 1K (full and windowed: gpt-oss's B = 1 step) and 32K, 8 at 32K and 64 at
/// 8K and 32K, each on both paths (the CUDA cores with the decode split where
/// it applies). FLOPs: 2 x 2 x heads x dim per visible (query, key) pair.
void benchAttention(const CudaKernels &kernels, int iterations) {
  constexpr int64_t kHeads = 64, kKvHeads = 8, kDim = 64, kWidth = 512;
  auto cache = [](int64_t batch, int64_t seqLen) {
    DeviceCacheView v;
    v.format = cpu::CacheFormat::Fp8Scaled;
    v.width = kWidth;
    v.scaleBlock = 128;
    v.bytesPerRow = cpu::cacheBytesPerRow(v.format, kWidth, 0, 128);
    v.batch = batch;
    v.maxSeqLen = seqLen;
    v.pageSize = 64;
    // 0x38: e4m3 codes of 1.0 (scales of ~4e-5).
    v.base = alloc(size_t(batch * seqLen * v.bytesPerRow), 0x38);
    return v;
  };
  struct Case {
    const char *name;
    int64_t batch, tokens, context, window;
  };
  int64_t scratchFloats = attentionScratchFloats(kHeads / kKvHeads, kDim);
  CUdeviceptr scratch = alloc(scratchFloats * 4, 0);
  for (Case c :
       {Case{"prefill", 1, 1024, 1024, 0}, Case{"prefill", 1, 1024, 1024, 128},
        Case{"prefill", 1, 8192, 8192, 0}, Case{"prefill", 1, 8192, 8192, 128},
        Case{"decode", 1, 1, 1024, 0}, Case{"decode", 1, 1, 1024, 128},
        Case{"decode", 1, 1, 32768, 0}, Case{"decode", 8, 8, 32768, 0},
        Case{"decode", 64, 64, 8192, 0}, Case{"decode", 64, 64, 32768, 0},
        Case{"decode", 64, 64, 32768, 128}}) {
    DeviceCacheView kv = cache(c.batch, c.context);
    // Prefill: positions 0..T-1 of sequence 0; decode: the last position
    // of each sequence.
    std::vector<int32_t> positions(c.tokens), sequences(c.tokens);
    double pairs = 0.0;
    for (int64_t t = 0; t < c.tokens; ++t) {
      bool decode = std::string(c.name) == "decode";
      positions[t] = int32_t(decode ? c.context - 1 : t);
      sequences[t] = int32_t(decode ? t : 0);
      int64_t seen = positions[t] + 1;
      pairs += double(c.window > 0 ? std::min(seen, c.window) : seen);
    }
    CUdeviceptr dPos = upload(positions), dSeqs = upload(sequences);
    CUdeviceptr q = alloc(c.tokens * kHeads * kDim * 4, 0x3c),
                out = alloc(c.tokens * kHeads * kDim * 4, 0);
    double flops = 4.0 * kHeads * kDim * pairs;
    // Cache bytes a step must read: each visible K and V row once.
    double bytes = 2.0 * pairs * double(kv.bytesPerRow);
    // (The tensor cores do not split over keys: decode there would be one
    // block a KV head of each sequence.)
    for (AttentionPath path :
         {AttentionPath::CudaCores, AttentionPath::TensorCores}) {
      if (path == AttentionPath::TensorCores && c.tokens == c.batch)
        continue;
      // Replayed from a graph, as a decode step is: a launch's host cost
      // would otherwise be most of a small case's time.
      double seconds = timeGraph(
          [&](int, CUstream stream) {
            return kernels.attention(q, kv, kv, dPos, dSeqs, 0, c.tokens,
                                     kHeads, kKvHeads, 0.125, c.window, out,
                                     stream, scratch, scratchFloats, path);
          },
          std::max(3, iterations / 10));
      std::printf("%-18s %-40s %-12s %10.3f ms %9.1f TFLOP/s %8.0f GB/s\n",
                  "attention",
                  (std::string(c.name) + " B=" + std::to_string(c.batch) +
                   " T=" + std::to_string(c.tokens) +
                   " ctx=" + std::to_string(c.context) +
                   " win=" + std::to_string(c.window) + " H=64/8 D=64 fp8")
                      .c_str(),
                  path == AttentionPath::TensorCores ? "tensor" : "cuda",
                  seconds * 1e3, flops / seconds / 1e12, bytes / seconds / 1e9);
    }
    for (CUdeviceptr p : {kv.base, dPos, dSeqs, q, out})
      driver->cuMemFree(p);
  }
  driver->cuMemFree(scratch);
}

/// Absorbed MLA over a dense latent cache at Kimi-Linear-48B's dims (its
/// NoPE MLA layer: 32 query heads of 576 on one latent row a position, fp8
/// as the bench model stores it: 512 e4m3 columns in blocks of 128 and a
/// 64-column bf16 tail; values the rows' first 512 columns, read from the
/// same rows), through the launcher's own choice (daybreak_attention_wide).
/// Bytes: each visible latent row once; FLOPs: 2 x 32 x (576 + 512) a
/// (query, key) pair.
void benchMlaAttention(const CudaKernels &kernels, int iterations) {
  constexpr int64_t kHeads = 32, kWidth = 576, kValues = 512, kTail = 64;
  struct Case {
    const char *name;
    int64_t batch, tokens, context;
  };
  int64_t scratchFloats = attentionScratchFloats(kHeads, kValues);
  CUdeviceptr scratch = alloc(scratchFloats * 4, 0);
  for (Case c : {Case{"prefill", 1, 1024, 1024}, Case{"prefill", 1, 8192, 8192},
                 Case{"decode", 1, 1, 32768}, Case{"decode", 8, 8, 32768},
                 Case{"decode", 64, 64, 8192}, Case{"decode", 64, 64, 32768}}) {
    DeviceCacheView k;
    k.format = cpu::CacheFormat::Fp8Scaled;
    k.width = kWidth;
    k.tailDim = kTail;
    k.scaleBlock = 128;
    k.bytesPerRow = cpu::cacheBytesPerRow(k.format, kWidth, kTail, 128);
    k.batch = c.batch;
    k.maxSeqLen = c.context;
    k.pageSize = 64;
    // 0x38: e4m3 codes of 1.0 (scales and tails of ~4e-5 and ~1e-4).
    k.base = alloc(size_t(c.batch * c.context * k.bytesPerRow), 0x38);
    DeviceCacheView v = k;
    v.width = kValues;
    v.tailDim = 0;
    bool decode = std::string(c.name) == "decode";
    std::vector<int32_t> positions(c.tokens), sequences(c.tokens);
    double pairs = 0.0;
    for (int64_t t = 0; t < c.tokens; ++t) {
      positions[t] = int32_t(decode ? c.context - 1 : t);
      sequences[t] = int32_t(decode ? t : 0);
      pairs += double(positions[t] + 1);
    }
    CUdeviceptr dPos = upload(positions), dSeqs = upload(sequences);
    CUdeviceptr q = alloc(c.tokens * kHeads * kWidth * 4, 0x3c),
                out = alloc(c.tokens * kHeads * kValues * 4, 0);
    double flops = 2.0 * kHeads * (kWidth + kValues) * pairs;
    double bytes = decode ? pairs * double(k.bytesPerRow)
                          : double(c.context) * double(k.bytesPerRow);
    double seconds = timeIt(
        [&] {
          return kernels.attention(q, k, v, dPos, dSeqs, 0, c.tokens, kHeads, 1,
                                   1.0 / 24.0, 0, out, nullptr, scratch,
                                   scratchFloats);
        },
        std::max(3, iterations / 10));
    std::printf("%-18s %-40s %-12s %10.3f ms %9.1f TFLOP/s %8.0f GB/s\n",
                "attention (MLA)",
                (std::string(c.name) + " B=" + std::to_string(c.batch) +
                 " T=" + std::to_string(c.tokens) +
                 " ctx=" + std::to_string(c.context) + " H=32/1 D=576/512 fp8")
                    .c_str(),
                "cuda", seconds * 1e3, flops / seconds / 1e12,
                bytes / seconds / 1e9);
    for (CUdeviceptr p : {k.base, dPos, dSeqs, q, out})
      driver->cuMemFree(p);
  }
  driver->cuMemFree(scratch);
}

/// Kimi Delta Attention at Kimi-Linear-48B's dims (32 heads, Dk = Dv =
/// 128, fp32 state): the chunked prefill of one sequence of 4K to 64K
/// tokens, and the decode step of B sequences, whose floor is its state
/// bytes (read and written once: 2 x B x 32 x 128 x 128 x 4) plus its
/// inputs. Inputs are constant fills (q, k ~ 0.0115, g ~ -0.023, beta ~
/// 0.0115): the kernels' time does not depend on the values.
void benchKda(const CudaKernels &kernels, int iterations) {
  constexpr int64_t kHeads = 32, kDim = 128;
  auto inputs = [&](int64_t tokens) {
    DeviceKdaInputs in;
    in.q = alloc(tokens * kHeads * kDim * 4, 0x3c);
    in.k = alloc(tokens * kHeads * kDim * 4, 0x3c);
    in.v = alloc(tokens * kHeads * kDim * 4, 0x3c);
    in.g = alloc(tokens * kHeads * kDim * 4, 0xbc);
    in.beta = alloc(tokens * kHeads * 4, 0x3c);
    return in;
  };
  auto release = [](const DeviceKdaInputs &in) {
    for (CUdeviceptr p : {in.q, in.k, in.v, in.g, in.beta})
      driver->cuMemFree(p);
  };
  auto run = [&](bool chunked, int64_t slots, int64_t tokens, int reps) {
    DeviceKdaInputs in = inputs(tokens);
    std::vector<int32_t> sequences(tokens);
    for (int64_t t = 0; t < tokens; ++t)
      sequences[t] = int32_t(chunked ? 0 : t);
    CUdeviceptr dSeqs = upload(sequences),
                out = alloc(tokens * kHeads * kDim * 4, 0);
    DeviceState state;
    state.slots = slots;
    state.slotBytes = kHeads * kDim * kDim * 4;
    state.base = alloc(slots * state.slotBytes, 0);
    uint64_t scratchBytes =
        CudaKernels::kdaChunkScratchBytes(tokens, slots, kHeads, kDim, kDim);
    CUdeviceptr scratch = chunked ? alloc(scratchBytes, 0) : 0;
    double seconds = timeIt(
        [&] {
          return kernels.kda(chunked, in, state, dSeqs, tokens, kHeads, kDim,
                             kDim, 1.0 / std::sqrt(double(kDim)), true, scratch,
                             scratchBytes, out, nullptr);
        },
        reps);
    if (scratch)
      driver->cuMemFree(scratch);
    double stateBytes = 2.0 * slots * state.slotBytes;
    double ioBytes = double(tokens) * kHeads * (5 * kDim + 1) * 4;
    std::string shape = (chunked ? "prefill T=" : "decode B=") +
                        std::to_string(chunked ? tokens : slots) +
                        " H=32 Dk=Dv=128 f32 state";
    if (chunked)
      std::printf("%-18s %-40s %-12s %10.3f ms %9.1f Mtok/s %8.0f GB/s\n",
                  "kda_chunk", shape.c_str(), "cuda", seconds * 1e3,
                  tokens / seconds / 1e6,
                  (stateBytes + ioBytes) / seconds / 1e9);
    else
      row("kda_step", shape, "cuda", seconds, stateBytes + ioBytes);
    release(in);
    for (CUdeviceptr p : {dSeqs, out, state.base})
      driver->cuMemFree(p);
  };
  for (int64_t tokens : {4096, 8192, 16384, 32768, 65536})
    run(true, 1, tokens, std::max(2, iterations / 20));
  for (int64_t batch : {1, 8, 64, 256})
    run(false, batch, batch, iterations);
}

/// mHC's write-back and next collapse at GLM-5.3's n = 4 streams of D =
/// 4096 (CudaKernels.cu's mHC section): mhc_post, mhc_pre and the
/// sublayer's rms_norm as three launches ("separate") against mhc_post_pre
/// with the norm fused, at T = 1, 64 and 8192; 20 Sinkhorn rounds. Bytes:
/// the least each variant must move: fn and the norm weight once, and per
/// token X, y, post and comb read and X' written (mhc_post's part), then
/// the input, post and comb written; separately also X' read back (the
/// logits) and the input read and written again (rms_norm).
void benchMhc(const CudaKernels &kernels, int iterations) {
  constexpr int64_t n = 4, width = 4096, flat = n * width, mixes = (2 + n) * n,
                    maxTokens = 8192;
  CUdeviceptr streams = alloc(maxTokens * flat * 4, 0x3c),
              next = alloc(maxTokens * flat * 4, 0),
              y = alloc(maxTokens * width * 4, 0x3c),
              post = alloc(maxTokens * n * 4, 0x3c),
              comb = alloc(maxTokens * n * n * 4, 0x3c),
              fn = alloc(mixes * flat * 4, 0x3c), base = alloc(mixes * 4, 0),
              scale = alloc(3 * 4, 0x3c), weight = alloc(width * 4, 0x3c),
              input = alloc(maxTokens * width * 4, 0),
              normed = alloc(maxTokens * width * 4, 0),
              nextPost = alloc(maxTokens * n * 4, 0),
              nextComb = alloc(maxTokens * n * n * 4, 0);
  uint64_t scratchBytes = mhcPreScratchBytes(maxTokens, n, width);
  CUdeviceptr scratch = alloc(scratchBytes, 0);
  DeviceWeight norm = DeviceWeight::f32(weight);
  for (int64_t tokens : {1, 64, 8192}) {
    double once = 4.0 * (mixes * flat + width);
    double postBytes = 4.0 * tokens * ((2 * n + 1) * width + n + n * n);
    double outBytes = 4.0 * tokens * (width + n + n * n);
    double separate =
        once + postBytes + outBytes + 4.0 * tokens * (flat + 2 * width);
    std::string shape = "T=" + std::to_string(tokens) + " n=4 D=4096";
    int reps = tokens > 64 ? std::max(2, iterations / 10) : iterations;
    row("mhc post+pre+norm", shape, "separate",
        timeIt(
            [&] {
              Status s = kernels.mhcPost(streams, y, post, comb, tokens, n,
                                         width, next, nullptr);
              if (s.ok())
                s = kernels.mhcPre(next, fn, base, scale, tokens, n, width, 20,
                                   1e-6, 1e-6, DeviceWeight{}, 0.0, scratch,
                                   scratchBytes, input, nextPost, nextComb,
                                   nullptr);
              if (s.ok())
                s = kernels.rmsNorm(input, norm, tokens, width, 1e-5, normed,
                                    nullptr);
              return s;
            },
            reps),
        separate);
    row("mhc_post_pre", shape, "fused norm",
        timeIt(
            [&] {
              return kernels.mhcPostPre(streams, y, post, comb, fn, base, scale,
                                        tokens, n, width, 20, 1e-6, 1e-6, norm,
                                        1e-5, scratch, scratchBytes, next,
                                        input, nextPost, nextComb, nullptr);
            },
            reps),
        once + postBytes + outBytes);
  }
  for (CUdeviceptr p : {streams, next, y, post, comb, fn, base, scale, weight,
                        input, normed, nextPost, nextComb, scratch})
    driver->cuMemFree(p);
}

/// The many-row tensor-core GEMMs at prefill shapes: a dense 8192 x 7168 x
/// 7168 projection (DeepSeek-V3.2; e4m3 with 128 x 128 scales, and bf16)
/// and grouped expert matmuls of 8192 tokens: gpt-oss-120b's top-4 of 128
/// experts (e4m3 with [1, 32] scales, the MXFP4 workspace: gate_up 5760 x
/// 2880 per token, down 2880 x 2880 per slot with routing weights) and
/// DeepSeek-V3.2's top-8 of 256 (gate_up 4096 x 7168). Routing spreads each
/// token's slots over distinct experts. Prints time and TFLOP/s (2 M N K,
/// M the token or token x slot rows) against the roofline in
/// CudaKernels.cu: a third of the dense bf16 rate for three mma a product
/// (exact x); the "bf16 x" rows (--precision=bf16) take one.
void benchTensorGemm(const CudaKernels &kernels, int iterations) {
  auto tflops = [](const char *kernel, const std::string &shape, double seconds,
                   double flop) {
    std::printf("%-18s %-52s %10.1f us %7.1f TFLOP/s %5.1f%% of 330\n", kernel,
                shape.c_str(), seconds * 1e6, flop / seconds / 1e12,
                100.0 * flop / seconds / 330e12);
  };
  constexpr int64_t kTokens = 8192;
  {
    constexpr int64_t n = 7168, k = 7168;
    CUdeviceptr x = alloc(size_t(kTokens * k * 4), 0x3c),
                out = alloc(size_t(kTokens * n * 4), 0);
    for (int32_t type : {2, 1}) {
      // e4m3 0x38: 1.0; bf16 0x3c3c: 0.0115; scales 0x3c3c3c3c: 0.0115.
      DeviceWeight w;
      w.data =
          alloc(size_t(n * k * (type == 2 ? 1 : 2)), type == 2 ? 0x38 : 0x3c);
      w.type = type;
      if (type == 2) {
        w.scales = alloc(size_t((n / 128) * (k / 128) * 4), 0x3c);
        w.blockN = w.blockK = 128;
      }
      for (bool bf16Input : {false, true}) {
        double seconds = timeIt(
            [&] {
              return kernels.tensorGemm(x, w, DeviceWeight(), kTokens, n, k,
                                        out, nullptr, bf16Input);
            },
            std::max(iterations / 10, 3));
        tflops(bf16Input ? "tensor_gemm bf16 x" : "tensor_gemm",
               std::string(type == 2 ? "e4m3 128x128" : "bf16") +
                   " m=8192 n=7168 k=7168",
               seconds, 2.0 * kTokens * n * k);
      }
      driver->cuMemFree(w.data);
      if (w.scales)
        driver->cuMemFree(w.scales);
    }
    driver->cuMemFree(x);
    driver->cuMemFree(out);
  }
  struct Experts {
    const char *name;
    int64_t experts, slots, n, k, blockN, blockK;
    bool perSlot;
  };
  for (Experts e :
       {Experts{"gpt-oss gate_up", 128, 4, 5760, 2880, 1, 32, false},
        Experts{"gpt-oss down", 128, 4, 2880, 2880, 1, 32, true},
        Experts{"dsv3 gate_up", 256, 8, 4096, 7168, 128, 128, false}}) {
    int64_t rows = kTokens * e.slots;
    DeviceWeight w;
    w.data = alloc(size_t(e.experts * e.n * e.k), 0x38);
    w.type = 2;
    w.blockN = e.blockN;
    w.blockK = e.blockK;
    w.scales = alloc(size_t(e.experts * ((e.n + e.blockN - 1) / e.blockN) *
                            (e.k / e.blockK) * 4),
                     0x3c);
    CUdeviceptr x = alloc(size_t((e.perSlot ? rows : kTokens) * e.k * 4), 0x3c),
                routing = alloc(size_t(rows * 4), 0x3c),
                out = alloc(size_t(rows * e.n * 4), 0);
    // Token t's slot j: expert (slots t + j) mod E, distinct within a token.
    std::vector<int32_t> picks(rows);
    for (int64_t r = 0; r < rows; ++r)
      picks[r] = int32_t(((r / e.slots) * e.slots + r % e.slots) % e.experts);
    CUdeviceptr indices = alloc(picks.size() * 4, 0);
    check(driver->cuMemcpyHtoD(indices, picks.data(), picks.size() * 4),
          "cuMemcpyHtoD");
    bool routed = e.perSlot;
    int64_t scratchBytes =
        expertGemmScratchBytes(kTokens, e.slots, e.experts, e.n, routed);
    CUdeviceptr scratch = alloc(size_t(scratchBytes), 0);
    for (bool bf16Input : {false, true}) {
      double seconds = timeIt(
          [&] {
            return kernels.tensorExpertMatmul(
                x, e.perSlot, w, e.experts, e.n, e.k, indices, kTokens, e.slots,
                routed ? routing : 0, out, nullptr, DeviceWeight(), scratch,
                scratchBytes, bf16Input);
          },
          std::max(iterations / 10, 3));
      tflops(bf16Input ? "tensor_expert_gemm bf16 x" : "tensor_expert_gemm",
             std::string(e.name) + " T=8192 top-" + std::to_string(e.slots) +
                 " n=" + std::to_string(e.n) + " k=" + std::to_string(e.k),
             seconds, 2.0 * rows * e.n * e.k);
    }
    for (CUdeviceptr p : {w.data, w.scales, x, routing, out, indices, scratch})
      driver->cuMemFree(p);
  }
}

/// The warpgroup GEMMs of --precision=bf16 (warpgroupGemm: x rounded to
/// bf16 codes, wgmma fed by the copy engine, e4m3 widened in shared memory) at
/// DeepSeek-V3.2's prefill shapes on random data, each beside cuBLAS's bf16
/// GEMM of the same shape with fp32 output (item 2's bar: 70 % of it) and
/// the one-part tensor-core GEMM (tensorGemm with bf16 x). Times include
/// the rounding of x. `exact`: the default precision's forms instead (x in
/// three bf16 parts: warpgroupGemm without rounding.bf16 against the
/// three-part tensorGemm), at gpt-oss-120b's shapes (its head and
/// projections at decode's 64 rows and prefill's) and DeepSeek-V3.2's FP8
/// ones; times include the split of x.
void benchWarpgroupGemm(const CudaKernels &kernels, int iterations,
                        bool exact = false) {
  struct Case {
    int64_t m, n, k;
    int32_t type;
  };
  uint32_t state = 7;
  auto next = [&] {
    state = state * 1664525u + 1013904223u;
    return state;
  };
  auto randomDevice = [&](size_t bytes, bool e4m3, bool f32) {
    std::vector<uint32_t> host((bytes + 3) / 4);
    for (uint32_t &v : host) {
      if (f32) {
        float f = float(next() >> 8) / float(1u << 23) - 1.0f;
        std::memcpy(&v, &f, 4);
      } else if (e4m3) {
        v = next() & 0x77777777u; // no NaN codes, |w| < 2^0.x
      } else {
        uint32_t lo = next() >> 8, hi = next() >> 8;
        float a = float(lo) / float(1u << 23) - 1.0f,
              b = float(hi) / float(1u << 23) - 1.0f;
        uint32_t ba, bb;
        std::memcpy(&ba, &a, 4);
        std::memcpy(&bb, &b, 4);
        v = (ba >> 16) | (bb & 0xFFFF0000u);
      }
    }
    CUdeviceptr p = alloc(host.size() * 4, 0);
    check(driver->cuMemcpyHtoD(p, host.data(), host.size() * 4),
          "cuMemcpyHtoD");
    return p;
  };
  // The LM head and a narrow bf16 weight at decode batches first (bound by
  // the weight's stream: GB/s against the HBM peak in brackets).
  const std::vector<Case> rounded = {
      Case{64, 129280, 7168, 1},  Case{16, 129280, 7168, 1},
      Case{64, 64, 7168, 1},      Case{8192, 7168, 7168, 1},
      Case{2048, 7168, 7168, 1},  Case{512, 7168, 7168, 1},
      Case{8192, 24576, 1536, 1}, Case{8192, 7168, 7168, 2},
      Case{2048, 7168, 7168, 2},  Case{512, 7168, 7168, 2},
      Case{256, 7168, 7168, 2},   Case{8192, 18432, 7168, 2},
      Case{8192, 7168, 18432, 2}};
  const std::vector<Case> exactCases = {
      Case{64, 201088, 2880, 1}, Case{16, 201088, 2880, 1},
      Case{64, 5120, 2880, 1},   Case{64, 2880, 4096, 1},
      Case{1024, 5120, 2880, 1}, Case{8192, 5120, 2880, 1},
      Case{8192, 2880, 4096, 1}, Case{8192, 7168, 7168, 2},
      Case{512, 7168, 7168, 2},  Case{64, 7168, 16384, 2},
      Case{16, 7168, 16384, 2}};
  for (Case c : exact ? exactCases : rounded) {
    DeviceWeight w;
    w.type = c.type;
    w.data = randomDevice(size_t(c.n * c.k * (c.type == 2 ? 1 : 2)),
                          c.type == 2, false);
    if (c.type == 2) {
      w.blockN = w.blockK = 128;
      w.scales =
          randomDevice(size_t((c.n / 128) * (c.k / 128) * 4), false, true);
    }
    CUdeviceptr x = randomDevice(size_t(c.m * c.k * 4), false, true),
                out = alloc(size_t(c.m * c.n * 4), 0);
    int64_t floats =
        exact ? CudaKernels::warpgroupGemmScratchFloats(c.m, c.k, false)
              : kernels.matmulRoundingFloats(w, c.m, c.n, c.k, true);
    CUdeviceptr scratch = alloc(size_t(floats * 4), 0);
    InputRounding rounding{!exact, scratch, floats};
    double flop = 2.0 * c.m * c.n * c.k;
    int reps = std::max(iterations / 10, 3);
    double wg = timeIt(
        [&] {
          return kernels.warpgroupGemm(x, w, DeviceWeight(), c.m, c.n, c.k, out,
                                       nullptr, rounding);
        },
        reps);
    double tc = timeIt(
        [&] {
          return kernels.tensorGemm(x, w, DeviceWeight(), c.m, c.n, c.k, out,
                                    nullptr, !exact);
        },
        reps);
    std::string how;
    StatusOr<double> cublas =
        cublasMatmulRate(*driver, nullptr, c.m, c.n, c.k, true, how);
    char shape[80];
    std::snprintf(shape, sizeof(shape), "%s m=%ld n=%ld k=%ld",
                  c.type == 2 ? "e4m3 128x128" : "bf16", long(c.m), long(c.n),
                  long(c.k));
    double cublasRate = cublas.ok() ? *cublas : 0.0;
    std::printf(
        "%-18s %-36s %9.1f us %6.1f TFLOP/s (%4.0f%% of cuBLAS "
        "%5.1f) | tensor_gemm %s %9.1f us %6.1f TFLOP/s",
        exact ? "warpgroup_gemm x3" : "warpgroup_gemm", shape, wg * 1e6,
        flop / wg / 1e12, cublasRate > 0 ? 100.0 * flop / wg / cublasRate : 0.0,
        cublasRate / 1e12, exact ? "x3" : "bf16 x", tc * 1e6, flop / tc / 1e12);
    if (c.m <= 64) {
      double bytes = double(c.n) * double(c.k) * (c.type == 2 ? 1 : 2);
      std::printf(" [weight stream: %.0f%% / %.0f%% of HBM peak]",
                  100.0 * bytes / wg / kPeakBytesPerSecond,
                  100.0 * bytes / tc / kPeakBytesPerSecond);
    }
    std::printf("\n");
    if (!cublas.ok())
      std::printf("  (cuBLAS: %s)\n", cublas.error().message().c_str());
    if (c.type == 2 && !exact) {
      // The FP8 GEMM on the same weight (x quantized to e4m3, 1 x 128
      // scales; the time includes the quantization).
      int64_t fp8Floats = CudaKernels::fp8GemmScratchFloats(c.m, c.k);
      CUdeviceptr fp8Scratch = alloc(size_t(fp8Floats * 4), 0);
      double fp8 = timeIt(
          [&] {
            return kernels.fp8Gemm(x, w, DeviceWeight(), c.m, c.n, c.k, out,
                                   nullptr,
                                   InputRounding{true, fp8Scratch, fp8Floats});
          },
          reps);
      std::printf("%-18s %-36s %9.1f us %6.1f TFLOP/s (x in FP8, 1 x 128 "
                  "scales)\n",
                  "fp8_gemm", shape, fp8 * 1e6, flop / fp8 / 1e12);
      driver->cuMemFree(fp8Scratch);
    }
    for (CUdeviceptr p : {w.data, w.scales, x, out, scratch})
      if (p)
        driver->cuMemFree(p);
  }
  if (exact)
    return;

  // The grouped expert GEMMs (warpgroupExpertMatmul against the one-part
  // mma.sync kernel, tensorExpertMatmul with bf16 x) at DeepSeek-V3.2's
  // expert shapes: 256 experts of 128 x 128 e4m3 blocks, top-8 picked at
  // random (distinct within a token); gate/up on the token's row, down on
  // each slot's row with the routing weights. Beside cuBLAS's dense bf16
  // GEMM of as many rows (its rate: the grouped GEMM also reads 256
  // experts' weights and groups, gathers and combines).
  struct Experts {
    const char *name;
    int64_t n, k;
    bool perSlot;
  };
  constexpr int64_t kExperts = 256, kSlots = 8;
  for (Experts e : {Experts{"dsv3 gate_up", 4096, 7168, false},
                    Experts{"dsv3 down", 7168, 2048, true}}) {
    DeviceWeight w;
    w.type = 2;
    w.blockN = w.blockK = 128;
    w.data = randomDevice(size_t(kExperts * e.n * e.k), true, false);
    w.scales = randomDevice(size_t(kExperts * (e.n / 128) * (e.k / 128) * 4),
                            false, true);
    for (int64_t tokens : {8192, 1024, 64}) {
      int64_t rows = tokens * kSlots;
      std::vector<int32_t> picks(rows);
      for (int64_t t = 0; t < tokens; ++t)
        for (int64_t j = 0; j < kSlots; ++j) {
          int32_t pick;
          bool taken;
          do {
            pick = int32_t(next() % kExperts);
            taken = false;
            for (int64_t i = 0; i < j; ++i)
              taken |= picks[t * kSlots + i] == pick;
          } while (taken);
          picks[t * kSlots + j] = pick;
        }
      CUdeviceptr indices = alloc(picks.size() * 4, 0);
      check(driver->cuMemcpyHtoD(indices, picks.data(), picks.size() * 4),
            "cuMemcpyHtoD");
      CUdeviceptr x = randomDevice(
                      size_t((e.perSlot ? rows : tokens) * e.k * 4), false,
                      true),
                  routing = randomDevice(size_t(rows * 4), false, true),
                  out = alloc(size_t((e.perSlot ? tokens : rows) * e.n * 4), 0);
      bool routed = e.perSlot;
      int64_t scratchBytes =
          expertGemmScratchBytes(tokens, kSlots, kExperts, e.n, routed);
      int64_t floats = CudaKernels::expertRoundingFloats(
          w, kExperts, e.n, e.k, tokens, kSlots, e.perSlot, true);
      CUdeviceptr scratch = alloc(size_t(scratchBytes), 0),
                  gathered = alloc(size_t(floats * 4), 0);
      InputRounding rounding{true, gathered, floats};
      int reps = std::max(iterations / 10, 3);
      double wg = timeIt(
          [&] {
            return kernels.warpgroupExpertMatmul(
                x, e.perSlot, w, kExperts, e.n, e.k, indices, tokens, kSlots,
                routed ? routing : 0, out, nullptr, DeviceWeight(), scratch,
                scratchBytes, rounding);
          },
          reps);
      double tc = timeIt(
          [&] {
            return kernels.tensorExpertMatmul(
                x, e.perSlot, w, kExperts, e.n, e.k, indices, tokens, kSlots,
                routed ? routing : 0, out, nullptr, DeviceWeight(), scratch,
                scratchBytes, true);
          },
          reps);
      int64_t fp8Floats = CudaKernels::expertRoundingFloats(
          w, kExperts, e.n, e.k, tokens, kSlots, e.perSlot, true, true);
      CUdeviceptr fp8Scratch = alloc(size_t(fp8Floats * 4), 0);
      double fp8 = timeIt(
          [&] {
            return kernels.fp8ExpertMatmul(
                x, e.perSlot, w, kExperts, e.n, e.k, indices, tokens, kSlots,
                routed ? routing : 0, out, nullptr, DeviceWeight(), scratch,
                scratchBytes, InputRounding{true, fp8Scratch, fp8Floats, true});
          },
          reps);
      driver->cuMemFree(fp8Scratch);
      std::string how;
      StatusOr<double> cublas =
          cublasMatmulRate(*driver, nullptr, rows, e.n, e.k, true, how);
      double cublasRate = cublas.ok() ? *cublas : 0.0;
      double flop = 2.0 * rows * e.n * e.k;
      char shape[80];
      std::snprintf(shape, sizeof(shape), "%s T=%ld top-8 n=%ld k=%ld", e.name,
                    long(tokens), long(e.n), long(e.k));
      std::printf("%-18s %-36s %9.1f us %6.1f TFLOP/s (%4.0f%% of cuBLAS "
                  "%5.1f) | tensor_expert_gemm bf16 x %9.1f us %6.1f "
                  "TFLOP/s\n",
                  "warpgroup_experts", shape, wg * 1e6, flop / wg / 1e12,
                  cublasRate > 0 ? 100.0 * flop / wg / cublasRate : 0.0,
                  cublasRate / 1e12, tc * 1e6, flop / tc / 1e12);
      std::printf("%-18s %-36s %9.1f us %6.1f TFLOP/s (x in FP8, 1 x 128 "
                  "scales)\n",
                  "fp8_experts", shape, fp8 * 1e6, flop / fp8 / 1e12);
      for (CUdeviceptr p : {indices, x, routing, out, scratch, gathered})
        driver->cuMemFree(p);
    }
    driver->cuMemFree(w.data);
    driver->cuMemFree(w.scales);
  }
}

/// The routed experts at decode sizes (expert_matmul, T = 1 and 8 tokens,
/// top-8) at DeepSeek-V3.2's expert shapes (256 experts, hidden 7168, moe
/// 2048) and GLM-5.3-Flash's (288, 4096, 2048): gate/up [2 moe, hidden] on
/// the token's row (gate and up in one launch), gate [moe, hidden] (each
/// of the two launches ModelBuilder emits today), down [hidden, moe] on
/// each slot's row with the routing weights; the CUDA-core kernel
/// (cudaCoreExpertMatmul: a warp per output column and (token, slot), each
/// reading its expert) against the tensor-core GEMV as expertMatmul runs it
/// (each picked expert read once; for down also without routing weights, the
/// GEMV alone, to show what the combining launch costs). Weights: random e4m3
/// codes (bit 6 clear: finite) with 128 x 128 scales. Each case is a graph of
/// launches whose tokens each pick 8 distinct random experts afresh, so a
/// launch finds little of its experts in L2 (T = 1 reads 67-235 MB). Bytes: the
/// codes and scales of the distinct experts a launch picks (averaged over
/// the launches; what any kernel must read), in % of the copy bandwidth of
/// the same run (1 GiB device-to-device). The last launch's output is
/// checked against the CUDA-core kernel's (1e-5 of each row's largest).
/// At T = 8 also with a shared expert as the models stack it (one more
/// expert, a ninth slot every token picks: a group of 8 pairs). With
/// `allExperts` false (the default run) each shape holds 64 experts,
/// under 2 GB of device memory (T = 8 then picks ~42 distinct experts,
/// not ~57); `DaybreakKernelBench N experts` holds the real counts (7.5 GB
/// for DeepSeek's gate/up).
void benchExpertGemv(const CudaKernels &kernels, int iterations,
                     bool allExperts) {
  size_t copyBytes = size_t(1) << 30;
  double copyRate;
  {
    CUdeviceptr a = alloc(copyBytes, 1), b = alloc(copyBytes, 0);
    double seconds = timeIt(
        [&] {
          return driver->check(driver->cuMemcpyDtoDAsync(b, a, copyBytes, 0),
                               "cuMemcpyDtoDAsync");
        },
        10);
    copyRate = 2.0 * double(copyBytes) / seconds;
    driver->cuMemFree(a);
    driver->cuMemFree(b);
  }
  std::printf("expert GEMVs: copy bandwidth (same run) %.1f GB/s\n",
              copyRate / 1e9);
  struct Model {
    const char *name;
    int64_t experts, hidden, moe;
  };
  struct Shape {
    const char *name;
    int64_t n, k;
    bool perSlot; // x a row per slot, and routing weights
  };
  // 8 routed slots a token; a shared expert as the models stack it (one
  // more expert, picked by every token in a ninth slot) at T = 8, where its
  // group has every token's pair.
  constexpr int64_t kRouted = 8, kMaxSlots = kRouted + 1, kMaxTokens = 8;
  const int count = std::max(iterations / 2, 8);
  std::mt19937 rng(6);
  struct Line {
    std::string what;
    double oldUs, newUs, aloneUs, percentOld, percentNew, percentAlone;
  };
  std::vector<Line> lines;
  int mismatches = 0;
  for (Model model : {Model{"DeepSeek-V3.2", 256, 7168, 2048},
                      Model{"GLM-5.3-Flash", 288, 4096, 2048}})
    for (Shape shape : {Shape{"gate_up", 2 * model.moe, model.hidden, false},
                        Shape{"gate", model.moe, model.hidden, false},
                        Shape{"down", model.hidden, model.moe, true}}) {
      const int64_t routedExperts = allExperts ? model.experts : 64;
      const int64_t n = shape.n, k = shape.k;
      const int64_t scaleCount = ((n + 127) / 128) * ((k + 127) / 128);
      // The shared expert after the routed ones.
      const size_t codeBytes = size_t((routedExperts + 1) * n * k);
      // Random codes: a 64 MB pattern, then copied over the rest on the
      // device.
      CUdeviceptr codes = alloc(codeBytes, 0);
      {
        std::vector<uint8_t> pattern(std::min(codeBytes, size_t(64) << 20));
        for (uint8_t &byte : pattern)
          byte = uint8_t(rng() & 0xBF);
        check(driver->cuMemcpyHtoD(codes, pattern.data(), pattern.size()),
              "cuMemcpyHtoD");
        for (size_t at = pattern.size(); at < codeBytes; at += pattern.size())
          check(driver->cuMemcpyDtoDAsync(
                    codes + at, codes, std::min(pattern.size(), codeBytes - at),
                    nullptr),
                "cuMemcpyDtoDAsync");
        check(driver->cuCtxSynchronize(), "cuCtxSynchronize");
      }
      std::vector<float> hostX(kMaxTokens * kMaxSlots * k),
          hostRouting(kMaxTokens * kMaxSlots);
      {
        std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
        for (float &v : hostX)
          v = dist(rng);
        for (float &v : hostRouting)
          v = 0.5f * (dist(rng) + 1.0f);
      }
      CUdeviceptr scales =
                      alloc(size_t((routedExperts + 1) * scaleCount * 4), 0x3c),
                  x = alloc(hostX.size() * 4, 0),
                  routing = alloc(hostRouting.size() * 4, 0),
                  out = alloc(size_t(kMaxTokens * kMaxSlots * n * 4), 0),
                  reference = alloc(size_t(kMaxTokens * kMaxSlots * n * 4), 0);
      check(driver->cuMemcpyHtoD(x, hostX.data(), hostX.size() * 4),
            "cuMemcpyHtoD");
      check(driver->cuMemcpyHtoD(routing, hostRouting.data(),
                                 hostRouting.size() * 4),
            "cuMemcpyHtoD");
      int64_t scratchBytes = expertGemmScratchBytes(kMaxTokens, kMaxSlots,
                                                    routedExperts + 1, n, true);
      CUdeviceptr scratch = alloc(size_t(scratchBytes), 0);
      DeviceWeight w;
      w.data = codes;
      w.scales = scales;
      w.type = 2;
      w.blockN = w.blockK = 128;
      for (auto [tokens, shared] : {std::pair{int64_t(1), false},
                                    {kMaxTokens, false},
                                    {kMaxTokens, true}}) {
        const int64_t kSlots = shared ? kMaxSlots : kRouted;
        const int64_t experts = routedExperts + (shared ? 1 : 0);
        if (!CudaKernels::tensorExpertGemvApplies(w, experts, n, k, tokens,
                                                  kSlots))
          fail("the tensor-core expert GEMV does not take " +
               std::string(shape.name));
        // Launch i's picks: 8 distinct experts a token.
        std::vector<int32_t> picks(count * tokens * kSlots);
        double distinct = 0.0;
        for (int i = 0; i < count; ++i) {
          std::vector<bool> picked(experts);
          for (int64_t t = 0; t < tokens; ++t) {
            std::vector<int32_t> all(routedExperts);
            std::iota(all.begin(), all.end(), 0);
            for (int64_t j = 0; j < kRouted; ++j) {
              std::swap(all[j], all[j + rng() % (routedExperts - j)]);
              picks[(i * tokens + t) * kSlots + j] = all[j];
              picked[all[j]] = true;
            }
            if (shared) {
              picks[(i * tokens + t) * kSlots + kRouted] =
                  int32_t(routedExperts);
              picked[routedExperts] = true;
            }
          }
          distinct +=
              double(std::count(picked.begin(), picked.end(), true)) / count;
        }
        CUdeviceptr indices = upload(picks);
        auto at = [&](int i) {
          return indices + CUdeviceptr(i) * tokens * kSlots * 4;
        };
        CUdeviceptr routed = shape.perSlot ? routing : 0;
        double bytes = distinct * double(n * k + 4 * scaleCount);
        auto cudaCores = [&](int i, CUstream stream) {
          return kernels.cudaCoreExpertMatmul(
              x, shape.perSlot, w, experts, n, k, at(i), tokens, kSlots, routed,
              reference, stream, DeviceWeight());
        };
        auto tensor = [&](int i, CUstream stream) {
          return kernels.expertMatmul(x, shape.perSlot, w, experts, n, k, at(i),
                                      tokens, kSlots, routed, out, stream,
                                      DeviceWeight(), scratch, scratchBytes);
        };
        double oldSeconds = timeGraph(cudaCores, std::max(count / 4, 4));
        double newSeconds = timeGraph(tensor, count);
        // down without routing weights: the GEMV alone, no combining launch.
        double aloneSeconds =
            shape.perSlot
                ? timeGraph(
                      [&](int i, CUstream stream) {
                        return kernels.expertMatmul(
                            x, true, w, experts, n, k, at(i), tokens, kSlots, 0,
                            out, stream, DeviceWeight(), scratch, scratchBytes);
                      },
                      count)
                : newSeconds;
        std::string what =
            std::string(model.name) + " " + shape.name +
            " T=" + std::to_string(tokens) + " top-8 of " +
            std::to_string(routedExperts) + (shared ? " + shared" : "") +
            " n=" + std::to_string(n) + " k=" + std::to_string(k);
        auto percent = [&](double seconds) {
          return 100.0 * bytes / seconds / copyRate;
        };
        std::printf("%-18s %-52s %.1f distinct experts, %.1f MB\n",
                    "expert_matmul", what.c_str(), distinct, bytes / 1e6);
        std::printf("%-18s %-52s %-12s %10.2f us %5.1f%% of the copy "
                    "bandwidth\n",
                    "", "", "cuda cores", oldSeconds * 1e6,
                    percent(oldSeconds));
        std::printf("%-18s %-52s %-12s %10.2f us %5.1f%% of the copy "
                    "bandwidth\n",
                    "", "", "tensor gemv", newSeconds * 1e6,
                    percent(newSeconds));
        if (shape.perSlot)
          std::printf("%-18s %-52s %-12s %10.2f us %5.1f%% of the copy "
                      "bandwidth (no routing weights: no combine)\n",
                      "", "", "tensor gemv", aloneSeconds * 1e6,
                      percent(aloneSeconds));
        // Each way of streaming the weights, forced; the ring forms unsplit,
        // split as chooseExpertGemvCluster picks, and over clusters of 2
        // and 4 blocks.
        struct Forced {
          ExpertGemvStreaming form;
          int cluster;
          const char *name;
        };
        for (Forced f : {Forced{ExpertGemvStreaming::Registers, 1, "registers"},
                         {ExpertGemvStreaming::Ring4, 1, "ring of 4"},
                         {ExpertGemvStreaming::Ring4, 0, "ring4 split"},
                         {ExpertGemvStreaming::Ring4, 2, "ring4 by 2"},
                         {ExpertGemvStreaming::Ring4, 4, "ring4 by 4"},
                         {ExpertGemvStreaming::Ring8, 1, "ring of 8"},
                         {ExpertGemvStreaming::Ring8, 0, "ring8 split"},
                         {ExpertGemvStreaming::Ring8, 2, "ring8 by 2"},
                         {ExpertGemvStreaming::Ring8, 4, "ring8 by 4"}}) {
          CudaKernels forced =
              kernels.withExpertGemvStreaming(f.form).withExpertGemvCluster(
                  f.cluster);
          double seconds = timeGraph(
              [&](int i, CUstream stream) {
                return forced.expertMatmul(x, shape.perSlot, w, experts, n, k,
                                           at(i), tokens, kSlots, routed, out,
                                           stream, DeviceWeight(), scratch,
                                           scratchBytes);
              },
              count);
          std::printf("%-18s %-52s %-12s %10.2f us %5.1f%% of the copy "
                      "bandwidth\n",
                      "", "", f.name, seconds * 1e6, percent(seconds));
        }
        // The last launch, both kernels, against each other.
        check(cudaCores(count - 1, nullptr));
        check(tensor(count - 1, nullptr));
        check(driver->cuCtxSynchronize(), "cuCtxSynchronize");
        int64_t rows = shape.perSlot ? tokens : tokens * kSlots;
        std::vector<float> want(rows * n), got(rows * n);
        check(driver->cuMemcpyDtoH(want.data(), reference, want.size() * 4),
              "cuMemcpyDtoH");
        check(driver->cuMemcpyDtoH(got.data(), out, got.size() * 4),
              "cuMemcpyDtoH");
        double worst = 0.0;
        for (int64_t r = 0; r < rows; ++r) {
          double largest = 1e-30, error = 0.0;
          for (int64_t c = 0; c < n; ++c) {
            largest = std::max(largest, double(std::fabs(want[r * n + c])));
            double d = std::fabs(double(got[r * n + c]) - want[r * n + c]);
            error = std::isnan(d) ? INFINITY : std::max(error, d);
          }
          worst = std::max(worst, error / largest);
        }
        bool ok = worst <= 1e-5;
        mismatches += !ok;
        std::printf("%-18s %-52s %-12s checked against the CUDA cores: worst "
                    "error %.3g%s\n",
                    "", "", "", worst, ok ? "" : " MISMATCH");
        lines.push_back(Line{what, oldSeconds * 1e6, newSeconds * 1e6,
                             aloneSeconds * 1e6, percent(oldSeconds),
                             percent(newSeconds), percent(aloneSeconds)});
        driver->cuMemFree(indices);
      }
      for (CUdeviceptr p : {codes, scales, x, routing, out, reference, scratch})
        driver->cuMemFree(p);
    }
  std::printf("\nRouted experts at decode sizes (graph replay; %% of the copy "
              "bandwidth %.0f GB/s on the distinct experts' codes and "
              "scales):\n",
              copyRate / 1e9);
  std::printf("| case | CUDA cores | %% of copy | tensor GEMV | %% of copy | "
              "GEMV without combine | %% of copy |\n"
              "|---|---:|---:|---:|---:|---:|---:|\n");
  for (const Line &line : lines)
    std::printf("| %s | %.1f us | %.0f %% | %.1f us | **%.0f %%** | %.1f us | "
                "%.0f %% |\n",
                line.what.c_str(), line.oldUs, line.percentOld, line.newUs,
                line.percentNew, line.aloneUs, line.percentAlone);
  if (mismatches)
    fail(std::to_string(mismatches) +
         " expert GEMV results differ from the CUDA-core kernel's");
}

/// The FP8 GEMM's tiles at DeepSeek-V3.2's FP8 projections for decode
/// batches (`fp8tiles`): every library kind (64 or 128 rows a block, K
/// split 1-8 ways) and two compiled stage counts beside the path these
/// rows took before the 64-row tile (x quantized and written back, the
/// one-part tensor-core GEMM), each with the time GemmTiles.h's model
/// predicts; `*` marks the model's choice. Weight bytes / time against
/// the HBM peak: these shapes are bound by the weight stream.
void benchFp8GemmTiles(const CudaKernels &kernels, int iterations,
                       const std::string &ptx, CUmodule specialized) {
  struct Shape {
    const char *name;
    int64_t n, k;
  };
  const Shape shapes[] = {
      {"q_a", 1536, 7168},          {"kv_a", 576, 7168},
      {"q_b", 24576, 1536},         {"o_proj", 7168, 16384},
      {"indexer wq_b", 8192, 1536}, {"mlp gate/up", 18432, 7168},
      {"mlp down", 7168, 18432},    {"shared gate/up", 4096, 7168},
      {"shared down", 7168, 2048}};
  CUfunction compiled[2] = {
      entry(ptx, specialized, "_Z22daybreak_gemm_wg_fp8_tILi64ELi4EE"),
      entry(ptx, specialized, "_Z22daybreak_gemm_wg_fp8_tILi64ELi6EE")};
  for (CUfunction fn : compiled)
    check(kernels.allowSharedMemory(fn));
  for (int64_t m : {16, 64, 128}) {
    for (const Shape &shape : shapes) {
      DeviceWeight w;
      w.type = 2;
      w.blockN = w.blockK = 128;
      w.data = alloc(size_t(shape.n * shape.k), 0x38);
      w.scales = alloc(size_t((shape.n / 128 + 1) * (shape.k / 128) * 4), 0x3c);
      CUdeviceptr x = alloc(size_t(m * shape.k * 4), 0x3c),
                  out = alloc(size_t(m * shape.n * 4), 0);
      int64_t floats =
          CudaKernels::fp8GemmScratchFloats(m, shape.k, shape.n, kMaxSplits) +
          m * shape.k;
      CUdeviceptr scratch = alloc(size_t(floats * 4), 0);
      InputRounding rounding{true, scratch, floats, true};
      const double bytes = double(shape.n) * double(shape.k);
      const Fp8GemmTile chosen = kernels.fp8GemmTile(m, shape.n, shape.k);
      char label[96];
      std::snprintf(label, sizeof(label), "%s m=%ld n=%ld k=%ld", shape.name,
                    long(m), long(shape.n), long(shape.k));
      auto print = [&](const std::string &variant, double seconds,
                       double predicted) {
        std::printf("%-14s %-40s %-22s %9.2f us %6.1f%% of HBM peak "
                    "(model %7.2f us)\n",
                    "fp8_gemm_tile", label, variant.c_str(), seconds * 1e6,
                    100.0 * bytes / seconds / kPeakBytesPerSecond, predicted);
      };
      int reps = std::max(iterations, 20);
      print("before: mma.sync",
            timeIt(
                [&] {
                  StatusOr<CUdeviceptr> q =
                      kernels.fp8Dequantized(x, m, shape.k, rounding, nullptr);
                  if (!q.ok())
                    return q.error();
                  return kernels.tensorGemm(*q, w, DeviceWeight(), m, shape.n,
                                            shape.k, out, nullptr, true);
                },
                reps),
            0.0);
      std::vector<std::pair<Fp8GemmTile, CUfunction>> tiles;
      for (int32_t splits : {1, 2, 3, 4, 6, 8})
        tiles.push_back({{64, 128, 9, splits}, nullptr});
      for (int32_t splits : {1, 2, 4})
        tiles.push_back({{128, 128, 6, splits}, nullptr});
      tiles.push_back({{64, 128, 4, chosen.splits}, compiled[0]});
      tiles.push_back({{64, 128, 6, chosen.splits}, compiled[1]});
      for (auto &[tile, fn] : tiles) {
        if (int64_t(tile.splits) * kMinBlocksPerSplit > (shape.k + 127) / 128 &&
            tile.splits > 1)
          continue;
        double seconds = timeIt(
            [&] {
              return kernels.fp8Gemm(x, w, DeviceWeight(), m, shape.n, shape.k,
                                     out, nullptr, rounding, &tile, fn);
            },
            reps);
        std::string variant = std::to_string(tile.rows) + " rows, " +
                              std::to_string(tile.stages) + " st, split " +
                              std::to_string(tile.splits) +
                              (tile == chosen ? " *" : "");
        print(variant, seconds, fp8GemmMicroseconds(tile, m, shape.n, shape.k));
      }
      for (CUdeviceptr p : {w.data, w.scales, x, out, scratch})
        driver->cuMemFree(p);
    }
  }
}

/// The L2 priority of the weight streams (streamPolicy in CudaKernels.cu):
/// a decode layer's chain at one token, as a CUDA graph of `count` rounds
/// of (rms_norm over 7168, RoPE of 128 heads' 64 columns, an e4m3 GEMV
/// streaming `what`'s weight from a 2 GiB pool), programmatic launches on,
/// timed with the weights evicted first from L2 (the default) and at the
/// normal priority (daybreak_l2_evict_first = 0, what
/// DAYBREAK_CUDA_L2_EVICT_FIRST=0 sets at load), and the two small kernels
/// alone (their code and data then stay in L2: the floor of their share).
void benchL2Policy(const CudaKernels &kernels, CUmodule library,
                   int iterations) {
  CUdeviceptr flag = 0;
  size_t flagBytes = 0;
  check(driver->cuModuleGetGlobal(&flag, &flagBytes, library,
                                  "daybreak_l2_evict_first"),
        "cuModuleGetGlobal");
  auto setPolicy = [&](int32_t evictFirst) {
    check(driver->cuMemcpyHtoD(flag, &evictFirst, sizeof(evictFirst)),
          "cuMemcpyHtoD");
  };
  const size_t poolBytes = size_t(1) << 31;
  CUdeviceptr pool = alloc(poolBytes, 0x35), scales = alloc(1 << 20, 0x3c);
  const int64_t hidden = 7168, heads = 128, headDim = 192;
  CUdeviceptr state = alloc(hidden * 4 * 4, 0x3c), normed = alloc(24576 * 4, 0),
              q = alloc(heads * headDim * 4, 0x3c), out = alloc(32768 * 4, 0);
  std::vector<int32_t> position = {777};
  CUdeviceptr positions = alloc(4, 0);
  check(driver->cuMemcpyHtoD(positions, position.data(), 4), "cuMemcpyHtoD");
  runtime::RopeParams rope;
  rope.interleaved = true;
  rope.offset = 128;
  rope.dim = 64;
  rope.yarn = true;
  rope.factor = 40;
  rope.attentionFactor = 1.2;
  struct Case {
    const char *what;
    int64_t n, k;
  };
  const int count = std::max(iterations, 8);
  for (const Case &c :
       {Case{"o_proj", 7168, 16384}, Case{"q_a_proj", 1536, 7168},
        Case{"q_b_proj", 24576, 1536}}) {
    int64_t weightBytes = c.n * c.k;
    int64_t stride = (weightBytes + 255) / 256 * 256;
    int64_t sets = std::max<int64_t>(1, int64_t(poolBytes) / stride);
    auto at = [&](int i) {
      DeviceWeight w;
      w.type = 2;
      w.scales = scales;
      w.blockN = w.blockK = 128;
      w.data = pool + CUdeviceptr((i % sets) * stride);
      return w;
    };
    auto small = [&](CUstream stream) {
      Status status = kernels.rmsNorm(state, DeviceWeight(), 1, hidden, 1e-6,
                                      normed, stream);
      if (!status.ok())
        return status;
      return kernels.rope(q, positions, 1, heads, headDim, rope, stream);
    };
    auto chain = [&](int i, CUstream stream) {
      Status status = small(stream);
      if (!status.ok())
        return status;
      return kernels.matmul(normed, at(i), DeviceWeight(), 1, c.n, c.k, out,
                            stream, nullptr, /*constantWeight=*/true);
    };
    double seconds[2];
    for (int32_t evictFirst : {1, 0}) {
      setPolicy(evictFirst);
      seconds[evictFirst] = timeGraph(chain, count);
    }
    setPolicy(1);
    double smallAlone =
        timeGraph([&](int, CUstream stream) { return small(stream); }, count);
    std::string shape = std::string(c.what) + " e4m3 " + std::to_string(c.n) +
                        " x " + std::to_string(c.k);
    std::printf("%-18s %-40s norm + rope + GEMV: evict-first %.2f us, normal "
                "%.2f us (%+.2f us); norm + rope alone %.2f us\n",
                "l2 policy", shape.c_str(), seconds[1] * 1e6, seconds[0] * 1e6,
                (seconds[1] - seconds[0]) * 1e6, smallAlone * 1e6);
  }
  for (CUdeviceptr p : {pool, scales, state, normed, q, out, positions})
    driver->cuMemFree(p);
}

int main(int argc, char **argv) {
  // DaybreakKernelBench [iterations [gemv | gemv-profile | experts |
  // mxfp4 | mxfp4-prefill | attention | gemm | kda | mla | mhc | dsa | l2]]:
  // "gemv" runs only
  // the GEMVs, "gemv-profile" three of them untimed for a profiler, "experts"
  // only the decode expert matmuls with the real expert counts, "mxfp4"
  // only the MXFP4 expert matmuls ("mxfp4-prefill" only those at prefill
  // sizes), "attention" only dense attention,
  // "gemm" only the many-row tensor-core GEMMs, "fp8tiles" the FP8 GEMM's
  // tiles at decode batches, "kda" only the KDA scans,
  // "mla" only the absorbed-MLA attention, "mhc" only mHC's separate and
  // fused forms, "dsa" only the DSA indexer, sparse MLA and top-k, "l2" a
  // decode chain with the weight streams' L2 priority on and off.
  int iterations = argc > 1 ? std::atoi(argv[1]) : 50;
  bool gemvOnly = argc > 2 && std::string(argv[2]) == "gemv";
  StatusOr<const Driver *> loaded = Driver::get();
  if (!loaded.ok())
    fail("no GPU here: " + loaded.error().message());
  driver = *loaded;
  CUdevice device = 0;
  CUcontext context = nullptr;
  check(driver->cuDeviceGet(&device, 0), "cuDeviceGet");
  check(driver->cuDevicePrimaryCtxRetain(&context, device),
        "cuDevicePrimaryCtxRetain");
  check(driver->cuCtxSetCurrent(context), "cuCtxSetCurrent");
  CUmodule library = nullptr, specialized = nullptr;
  check(driver->cuModuleLoadDataEx(&library, cudaKernelsPtx(), 0, nullptr,
                                   nullptr),
        "cuModuleLoadDataEx");
  std::string ptx;
  for (const char *chunk : kSpecializedKernelsPtxChunks)
    ptx += chunk;
  check(driver->cuModuleLoadDataEx(&specialized, ptx.c_str(), 0, nullptr,
                                   nullptr),
        "cuModuleLoadDataEx");
  StatusOr<CudaKernels> k = CudaKernels::load(*driver, library);
  check(k.ok() ? Status::success() : k.error());
  const CudaKernels &kernels = *k;
  char name[128];
  driver->cuDeviceGetName(name, sizeof(name), device);
  std::printf("%s, %d iterations per case; bytes = the least each launch "
              "must read and write\n",
              name, iterations);

  if (argc > 2 && std::string(argv[2]) == "gemv-profile") {
    profileGemvs(kernels);
    return 0;
  }
  if (argc > 2 && std::string(argv[2]) == "l2") {
    benchL2Policy(kernels, library, iterations);
    return 0;
  }
  if (argc > 2 && std::string(argv[2]) == "mxfp4") {
    benchMxfp4(kernels);
    benchMxfp4Prefill(kernels);
    return 0;
  }
  if (argc > 2 && std::string(argv[2]) == "mxfp4-prefill") {
    benchMxfp4Prefill(kernels);
    return 0;
  }
  if (argc > 2 && std::string(argv[2]) == "attention") {
    benchAttention(kernels, iterations);
    return 0;
  }
  if (argc > 2 && std::string(argv[2]) == "kda") {
    benchKda(kernels, iterations);
    return 0;
  }
  if (argc > 2 && std::string(argv[2]) == "mla") {
    benchMlaAttention(kernels, iterations);
    return 0;
  }
  if (argc > 2 && std::string(argv[2]) == "fp8tiles") {
    benchFp8GemmTiles(kernels, iterations, ptx, specialized);
    return 0;
  }
  if (argc > 2 && std::string(argv[2]) == "wgmma") {
    benchWarpgroupGemm(kernels, iterations);
    return 0;
  }
  if (argc > 2 && std::string(argv[2]) == "exact") {
    benchWarpgroupGemm(kernels, iterations, /*exact=*/true);
    return 0;
  }
  if (argc > 2 && std::string(argv[2]) == "gemm") {
    benchWarpgroupGemm(kernels, iterations);
    benchTensorGemm(kernels, iterations);
    return 0;
  }
  if (argc > 2 && std::string(argv[2]) == "mhc") {
    benchMhc(kernels, iterations);
    return 0;
  }
  if (argc > 2 && std::string(argv[2]) == "experts") {
    benchExpertGemv(kernels, iterations, /*allExperts=*/true);
    return 0;
  }
  // "dsa": only the DSA kernels over the caches (indexer, sparse MLA, top-k)
  // below.
  // "topk": only the DSA top-k.
  bool topkOnly = argc > 2 && std::string(argv[2]) == "topk";
  bool dsaOnly = topkOnly || (argc > 2 && std::string(argv[2]) == "dsa");
  if (!dsaOnly) {
    benchGemvs(kernels, iterations);
    if (gemvOnly)
      return 0;
    benchExpertGemv(kernels, iterations, /*allExperts=*/false);
    benchMxfp4(kernels);
    benchAttention(kernels, iterations);
    benchMlaAttention(kernels, iterations);
    benchWarpgroupGemm(kernels, iterations);
    benchWarpgroupGemm(kernels, iterations, /*exact=*/true);
    benchTensorGemm(kernels, iterations);
    benchKda(kernels, iterations);
    benchMhc(kernels, iterations);
  }

  // rms_norm over the hidden size (7168): read x and weight, write out.
  if (!dsaOnly) {
    CUfunction t = entry(ptx, specialized, "_Z19daybreak_rms_norm_tILi7168EE");
    CUdeviceptr x = alloc(64 * 7168 * 4, 0x3c), w = alloc(7168 * 4, 0x3c),
                out = alloc(64 * 7168 * 4, 0);
    for (int64_t rows : {1, 64}) {
      double bytes = double(rows * 7168 * 8 + 7168 * 4);
      std::string shape = "rows=" + std::to_string(rows) + " dim=7168";
      for (CUfunction fn : {CUfunction(nullptr), t})
        row("rms_norm", shape, fn ? "<7168>" : "generic",
            timeIt(
                [&] {
                  return kernels.rmsNorm(x, w, rows, 7168, 1e-6, out, nullptr,
                                         fn);
                },
                iterations),
            bytes);
    }
  }

  // Decode matmuls (m <= 8) with K = hidden: q_a_proj (N 1536) and a dense
  // MLP's gate/up (N 18432). Weights fp32 as the runtime holds them.
  if (!dsaOnly) {
    CUfunction t =
        entry(ptx, specialized, "_Z25daybreak_matmul_small_m_tILi7168EE");
    int64_t k = 7168, maxN = 18432;
    CUdeviceptr x = alloc(8 * k * 4, 0x3c), w = alloc(maxN * k * 4, 0x3c),
                out = alloc(8 * maxN * 4, 0);
    for (int64_t n : {1536, 18432})
      for (int64_t m : {1, 8}) {
        double bytes = double(n * k * 4 + m * k * 4 + m * n * 4);
        std::string shape =
            "m=" + std::to_string(m) + " n=" + std::to_string(n) + " k=7168";
        for (CUfunction fn : {CUfunction(nullptr), t})
          row("matmul", shape, fn ? "<7168>" : "generic",
              timeIt(
                  [&] {
                    return kernels.matmul(x, w, 0, m, n, k, out, nullptr, fn);
                  },
                  iterations),
              bytes);
      }
  }

  // Caches in DeepSeek's fp8 layouts, one sequence of 4096 tokens: the
  // indexer keys (128 e4m3 + one f32 scale) and the MLA latent (512 e4m3 in
  // 128-blocks with f32 scales + 64 bf16 rope values: 656 bytes).
  auto makeCache = [](int64_t width, int64_t tail, int64_t block,
                      int64_t seqLen) {
    DeviceCacheView v;
    v.format = cpu::CacheFormat::Fp8Scaled;
    v.width = width;
    v.tailDim = tail;
    v.scaleBlock = block;
    v.bytesPerRow = cpu::cacheBytesPerRow(v.format, width, tail, block);
    v.batch = 1;
    v.maxSeqLen = seqLen;
    v.pageSize = 64;
    v.base = alloc(size_t(seqLen * v.bytesPerRow), 0x38);
    return v;
  };
  int64_t seqLen = 4096;
  CUdeviceptr sequences = alloc(2048 * 4, 0); // slot 0 for up to 2048 tokens

  // Indexer scores: 64 heads of 128 over every cached key, for one query
  // token (decode) and for 64 (a batch or a prefill chunk), and on the
  // tensor cores (q in bf16: --attention=tensor-cores) for 512 as well. The
  // bytes are the keys read once and the scores written; the work, 2 x 64 x
  // 128 FLOPs a token and key, is printed beside them.
  if (!topkOnly) {
    CUfunction t =
        entry(ptx, specialized, "_Z29daybreak_dsa_indexer_scores_tILi128EE");
    if (t && !kernels.allowSharedMemory(t).ok())
      t = nullptr;
    DeviceCacheView keys = makeCache(128, 0, 128, seqLen);
    CUdeviceptr q = alloc(2048 * 64 * 128 * 4, 0x3c),
                weights = alloc(2048 * 64 * 4, 0x3c),
                scores = alloc(2048 * seqLen * 4, 0);
    for (int64_t tokens : {1, 64, 512, 2048}) {
      double bytes = double(seqLen * keys.bytesPerRow + tokens * seqLen * 4);
      double flops = 2.0 * 64 * 128 * double(tokens * seqLen);
      std::string shape = "T=" + std::to_string(tokens) +
                          " H=64 D=128 S=" + std::to_string(seqLen);
      using Tiles = CudaKernels::IndexerTiles;
      struct Variant {
        const char *name;
        CUfunction fn;
        bool tensor;
        Tiles tiles;
      };
      for (Variant v :
           {Variant{"generic", nullptr, false, Tiles::Auto},
            Variant{"<128>", t, false, Tiles::Auto},
            Variant{"tensor", nullptr, true, Tiles::PerToken},
            Variant{"tensor-groups", nullptr, true, Tiles::TokenGroups}}) {
        if ((!v.tensor && tokens > 64) ||
            (std::string(v.name) == "<128>" && !t))
          continue;
        double seconds = timeIt(
            [&] {
              return kernels.dsaIndexerScores(q, weights, keys, sequences, 0,
                                              tokens, 64, 0.1, scores, nullptr,
                                              v.fn, v.tensor, v.tiles);
            },
            iterations);
        row("dsa_indexer_scores", shape, v.name, seconds, bytes);
        std::printf("%-18s %-40s %-12s %10.1f TFLOPS (%s)\n", "", "", v.name,
                    flops / seconds / 1e12, v.tensor ? "bf16 x e4m3" : "fp32");
      }
    }
  }

  // The indexer of a decode step compiled for 128K positions: its grid is
  // sized once for the longest row, and the rows hold `context` keys. The
  // tokens read one sequence here (the keys come from L2 past the first);
  // the bytes are the keys once and every score row written.
  if (!topkOnly) {
    const int64_t maxSeqLen = 131072;
    DeviceCacheView keys = makeCache(128, 0, 128, maxSeqLen);
    CUdeviceptr q = alloc(64 * 64 * 128 * 4, 0x3c),
                weights = alloc(64 * 64 * 4, 0x3c),
                scores = alloc(64 * maxSeqLen * 4, 0);
    for (int64_t context : {int64_t(1024), int64_t(32768), maxSeqLen})
      for (int64_t tokens : {1, 8, 64}) {
        CUdeviceptr bounds =
            upload(std::vector<int32_t>(size_t(tokens), int32_t(context)));
        double bytes =
            double(context * keys.bytesPerRow + tokens * maxSeqLen * 4);
        std::string shape = "T=" + std::to_string(tokens) +
                            " H=64 D=128 C=" + std::to_string(context) +
                            " of 128K";
        row("dsa_indexer_scores", shape, "tensor",
            timeIt(
                [&] {
                  return kernels.dsaIndexerScores(
                      q, weights, keys, sequences, bounds, tokens, 64, 0.1,
                      scores, nullptr, nullptr, true,
                      CudaKernels::IndexerTiles::Auto);
                },
                iterations),
            bytes);
      }
  }

  // Absorbed MLA's head matmuls (DeepSeek-V3.2: 128 heads, W_UK^T [512, 128]
  // and W_UV [128, 512] a head, bf16 as lm-fold-weights stores them): the
  // tensor-core per-head GEMM (exact: three parts of x; bf16 x: one), the
  // per-head GEMV at one token, and the CUDA-core kernel. The bytes are the
  // weight, x and the output once.
  if (!topkOnly) {
    const int64_t heads = 128, maxTokens = 8192;
    CUdeviceptr x = alloc(maxTokens * heads * 512 * 4, 0x3c),
                out = alloc(maxTokens * heads * 512 * 4, 0),
                w = alloc(heads * 512 * 128 * 2, 0x3c);
    DeviceWeight weight;
    weight.data = w;
    weight.type = 1;
    InputRounding bf16;
    bf16.bf16 = true;
    for (auto [k, n] : {std::pair<int64_t, int64_t>{128, 512}, {512, 128}})
      for (int64_t tokens : {1, 64, 1024, 8192}) {
        double bytes = double(heads * n * k * 2 + tokens * heads * (k + n) * 4);
        double flops = 2.0 * double(tokens * heads * n * k);
        std::string shape = "T=" + std::to_string(tokens) +
                            " H=128 K=" + std::to_string(k) +
                            " N=" + std::to_string(n) + " bf16";
        // "tensor": headMatmul's own choice; then, where the per-head GEMV
        // applies, each of the two forced.
        struct Variant {
          const char *name;
          bool tensor, rounded;
          HeadMatmulKernel kernel;
        };
        for (Variant v :
             {Variant{"tensor", true, false, HeadMatmulKernel::Auto},
              Variant{"tensor-bf16x", true, true, HeadMatmulKernel::Auto},
              Variant{"gemv", true, false, HeadMatmulKernel::Gemv},
              Variant{"gemv-bf16x", true, true, HeadMatmulKernel::Gemv},
              Variant{"gemm", true, false, HeadMatmulKernel::Gemm},
              Variant{"gemm-bf16x", true, true, HeadMatmulKernel::Gemm},
              Variant{"cuda-cores", false, false, HeadMatmulKernel::Auto}}) {
          if (!v.tensor && tokens > 1024)
            continue;
          if (v.kernel != HeadMatmulKernel::Auto &&
              !CudaKernels::headGemvApplies(weight, true, tokens, k, true))
            continue;
          CudaKernels forced = kernels.withHeadMatmulKernel(v.kernel);
          double seconds = timeIt(
              [&] {
                return forced.headMatmul(
                    x, weight, true, tokens, heads, k, n, out, nullptr,
                    v.rounded ? bf16 : InputRounding{}, v.tensor);
              },
              iterations);
          row("head_matmul", shape, v.name, seconds, bytes);
          std::printf("%-18s %-40s %-12s %10.1f TFLOPS\n", "", "", v.name,
                      flops / seconds / 1e12);
        }
      }
  }

  // Sparse MLA: 128 heads, top-2048 of the latent cache; the minimum is
  // reading each selected row once per token.
  if (!topkOnly) {
    CUfunction t = entry(ptx, specialized,
                         "_Z27daybreak_sparse_attention_tILi576ELi512EE");
    DeviceCacheView kv = makeCache(576, 64, 128, seqLen);
    int64_t heads = 128, topK = 2048, maxTokens = 2048;
    std::mt19937 rng(1);
    std::vector<int32_t> indices(maxTokens * topK);
    for (int32_t &i : indices)
      i = int32_t(rng() % seqLen);
    CUdeviceptr dIndices = 0;
    check(driver->cuMemAlloc(&dIndices, indices.size() * 4), "cuMemAlloc");
    check(driver->cuMemcpyHtoD(dIndices, indices.data(), indices.size() * 4),
          "cuMemcpyHtoD");
    CUdeviceptr q = alloc(maxTokens * heads * 576 * 4, 0x3c),
                out = alloc(maxTokens * heads * 512 * 4, 0);
    // Split over the selected rows (flash decoding) with the scratch the
    // CUDA device gives it, and not.
    int64_t scratchFloats = sparseAttentionScratchFloats(512);
    CUdeviceptr scratch = alloc(scratchFloats * 4, 0);
    // (CUDA-core split launches always take the generic split kernel, and at
    // T = 64 none splits; the tensor-core kernel splits in two there, under
    // a block per SM. T = 512, a prefill chunk: the tensor cores only.)
    for (int64_t tokens : {1, 8, 64, 512, 2048}) {
      double bytes = double(tokens * topK * kv.bytesPerRow +
                            tokens * heads * (576 + 512) * 4);
      std::string shape =
          "T=" + std::to_string(tokens) + " H=128 top-2048 W=576 fp8";
      struct Variant {
        const char *name;
        CUfunction fn;
        bool split;
        AttentionPath path;
        SparseMlaKernel kernel = SparseMlaKernel::MmaSync;
      };
      double flops = 2.0 * double(tokens * heads * topK) * (576 + 512);
      for (Variant v :
           {Variant{"generic", nullptr, false, AttentionPath::CudaCores},
            Variant{"<576,512>", t, false, AttentionPath::CudaCores},
            Variant{"split", nullptr, true, AttentionPath::CudaCores},
            Variant{"tensor", nullptr, false, AttentionPath::TensorCores},
            Variant{"tensor+split", nullptr, true, AttentionPath::TensorCores},
            Variant{"wgmma", nullptr, false, AttentionPath::TensorCores,
                    SparseMlaKernel::Warpgroups},
            Variant{"wgmma+split", nullptr, true, AttentionPath::TensorCores,
                    SparseMlaKernel::Warpgroups}}) {
        if (tokens > 64 && v.path != AttentionPath::TensorCores)
          continue;
        double seconds = timeIt(
            [&] {
              return kernels.sparseAttention(
                  q, kv, dIndices, topK, sequences, tokens, heads, 0.04, 512, 0,
                  out, nullptr, v.fn, v.split ? scratch : 0,
                  v.split ? scratchFloats : 0, v.path, v.kernel);
            },
            iterations);
        row("sparse_attention", shape, v.name, seconds, bytes);
        if (v.path == AttentionPath::TensorCores)
          std::printf("%-18s %-40s %-12s %10.1f TFLOPS (bf16)\n", "", "",
                      v.name, flops / seconds / 1e12);
      }
    }
    // Decode at a context under top-k (C = 1024, the model benchmark's):
    // the selection is 1024 rows and 1024 of -1 padding, as
    // daybreak_dsa_index_select leaves it, and the splits share the 1024.
    std::vector<int32_t> shortSelection(maxTokens * topK, -1);
    for (int64_t t = 0; t < maxTokens; ++t)
      for (int64_t i = 0; i < 1024; ++i)
        shortSelection[t * topK + i] = int32_t(rng() % seqLen);
    check(driver->cuMemcpyHtoD(dIndices, shortSelection.data(),
                               shortSelection.size() * 4),
          "cuMemcpyHtoD");
    for (int64_t tokens : {1, 8}) {
      double bytes = double(tokens * 1024 * kv.bytesPerRow +
                            tokens * heads * (576 + 512) * 4);
      std::string shape =
          "T=" + std::to_string(tokens) + " H=128 top-2048 of C=1024 fp8";
      // The split launches of the rows above.
      struct Variant {
        const char *name;
        AttentionPath path;
        SparseMlaKernel kernel;
      };
      for (Variant v :
           {Variant{"split", AttentionPath::CudaCores, SparseMlaKernel::Auto},
            Variant{"tensor+split", AttentionPath::TensorCores,
                    SparseMlaKernel::MmaSync},
            Variant{"wgmma+split", AttentionPath::TensorCores,
                    SparseMlaKernel::Warpgroups}})
        row("sparse_attention", shape, v.name,
            timeIt(
                [&] {
                  return kernels.sparseAttention(
                      q, kv, dIndices, topK, sequences, tokens, heads, 0.04,
                      512, 0, out, nullptr, nullptr, scratch, scratchFloats,
                      v.path, v.kernel);
                },
                iterations),
            bytes);
    }
  }

  // DSA top-k: the best 2048 of C indexer scores per token (decode: every
  // token sees the whole context). The minimum is reading each score once.
  {
    int64_t topK = 2048, maxTokens = 64, maxKeys = 32768;
    std::mt19937 rng(2);
    std::vector<float> scores(maxTokens * maxKeys);
    std::normal_distribution<float> normal;
    for (float &v : scores)
      v = normal(rng);
    CUdeviceptr dScores = 0, dBounds = 0,
                dOut = alloc(maxTokens * topK * 4, 0);
    check(driver->cuMemAlloc(&dScores, scores.size() * 4), "cuMemAlloc");
    check(driver->cuMemcpyHtoD(dScores, scores.data(), scores.size() * 4),
          "cuMemcpyHtoD");
    check(driver->cuMemAlloc(&dBounds, maxTokens * 4), "cuMemAlloc");
    // 1024: every key picked (decode under 2K); 4096, 8192, 32768: radix.
    for (int64_t keys :
         {int64_t(1024), int64_t(4096), int64_t(8192), maxKeys}) {
      std::vector<int32_t> bounds(maxTokens, int32_t(keys));
      check(driver->cuMemcpyHtoD(dBounds, bounds.data(), bounds.size() * 4),
            "cuMemcpyHtoD");
      for (int64_t tokens : {int64_t(1), maxTokens}) {
        std::string shape = "T=" + std::to_string(tokens) +
                            " C=" + std::to_string(keys) + " top-2048";
        row("dsa_index_select", shape, "generic",
            timeIt(
                [&] {
                  return kernels.dsaIndexSelect(dScores, dBounds, tokens, keys,
                                                topK, dOut, nullptr);
                },
                iterations),
            double(tokens * (keys * 4 + topK * 4)));
      }
    }
  }
  return 0;
}
