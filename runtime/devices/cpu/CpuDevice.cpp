//===- CpuDevice.cpp - Running artifact launches on the CPU ---------------===//

#include "runtime/devices/cpu/CpuDevice.h"
#include "runtime/core/Dispatch.h"
#include "runtime/core/LaunchParams.h"

#include "runtime/numerics/Numerics.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <dlfcn.h>
#include <fstream>
#include <optional>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

using namespace daybreak;
using namespace daybreak::cpu;
using artifact::DType;
using runtime::BoundArg;
using runtime::BoundLaunch;
using runtime::PreparedLaunch;
namespace abi = daybreak::abi;

CpuDevice::~CpuDevice() {
  if (codeHandle)
    dlclose(codeHandle);
  if (codeFd >= 0)
    close(codeFd);
}

Status CpuDevice::loadGeneratedCode(const artifact::ArtifactFile &file) {
  std::vector<std::string> symbols;
  for (const runtime::PreparedStep &step : *steps)
    for (const PreparedLaunch &l : step.launches)
      if (l.kernel == abi::KernelId::Elementwise)
        symbols.push_back(l.s(abi::Elementwise::P::symbol));
  if (symbols.empty())
    return Status::success();
  std::optional<uint32_t> section = file.findSection("code.x86_64");
  if (!section)
    return Status::error("the steps launch generated kernels but the artifact "
                         "has no code.x86_64 section");
  // The shared object is loaded from memory through a memfd, so nothing is
  // written to disk. The descriptor stays open while the library is loaded:
  // dlopen reuses an already loaded object whose path matches, so a closed
  // descriptor's number, taken again by another device's memfd (ranks load
  // side by side in one process), would hand that device this device's
  // kernels.
  int fd = memfd_create("daybreak-kernels", MFD_CLOEXEC);
  if (fd < 0)
    return Status::error("memfd_create failed for the generated kernels");
  const artifact::Section &s = (*manifest).sections(*section);
  const uint8_t *bytes = file.sectionData(*section);
  size_t written = 0;
  while (written < s.size()) {
    ssize_t n = write(fd, bytes + written, s.size() - written);
    if (n <= 0) {
      close(fd);
      return Status::error("cannot stage the generated kernels in memory");
    }
    written += n;
  }
  std::string path = "/proc/self/fd/" + std::to_string(fd);
  codeHandle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!codeHandle) {
    close(fd);
    return Status::error(std::string("cannot load the generated kernels: ") +
                         dlerror());
  }
  codeFd = fd;
  // Resolved once per launch: a step indexes this by the launch's ordinal.
  for (const runtime::PreparedStep &step : *steps)
    for (const PreparedLaunch &l : step.launches) {
      if (l.kernel != abi::KernelId::Elementwise)
        continue;
      const std::string &symbol = l.s(abi::Elementwise::P::symbol);
      void *fn = dlsym(codeHandle, symbol.c_str());
      if (!fn)
        return Status::error(l.label + ": the generated kernels lack '" +
                             symbol + "'");
      generated[l.ordinal] = reinterpret_cast<ElementwiseFn>(fn);
    }
  return Status::success();
}

namespace {

/// What new allocations may take of the host's memory: /proc/meminfo's
/// MemAvailable and, under an address-space limit (RLIMIT_AS), what the
/// limit leaves beside the process's current size; the smaller, named.
struct HostMemory {
  uint64_t bytes;
  std::string source;
};
std::optional<HostMemory> availableHostMemory() {
  std::optional<HostMemory> best;
  auto consider = [&](uint64_t bytes, std::string source) {
    if (!best || bytes < best->bytes)
      best = HostMemory{bytes, std::move(source)};
  };
  std::ifstream meminfo("/proc/meminfo");
  for (std::string line; std::getline(meminfo, line);) {
    unsigned long long kib = 0;
    if (std::sscanf(line.c_str(), "MemAvailable: %llu kB", &kib) == 1)
      consider(uint64_t(kib) * 1024, "MemAvailable in /proc/meminfo");
  }
  rlimit limit{};
  if (getrlimit(RLIMIT_AS, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY) {
    unsigned long long pages = 0;
    std::ifstream statm("/proc/self/statm");
    statm >> pages;
    uint64_t used = uint64_t(pages) * uint64_t(sysconf(_SC_PAGESIZE));
    uint64_t cap = uint64_t(limit.rlim_cur);
    consider(cap > used ? cap - used : 0,
             "the address-space limit (RLIMIT_AS, " + std::to_string(cap) +
                 " bytes) less this process's " + std::to_string(used));
  }
  return best;
}

std::string gib(uint64_t bytes) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.2f GiB", double(bytes) / (1ull << 30));
  return text;
}

} // namespace

Status CpuDevice::allocate(Allocation &a, uint64_t bytes, const std::string &what) {
  // calloc, not a vector: an impossible size is a message, not an abort.
  void *p = bytes ? std::calloc(bytes, 1) : nullptr;
  if (bytes && !p)
    return Status::error("cannot allocate " + std::to_string(bytes) +
                         " bytes for " + what);
  a.data.reset(static_cast<uint8_t *>(p));
  a.size = bytes;
  return Status::success();
}

Status CpuDevice::prepare(const artifact::ArtifactFile &file,
                          const std::vector<runtime::PreparedStep> &prepared) {
  manifest = &file.manifest();
  steps = &prepared;
  const artifact::Manifest &m = *manifest;
  Status supported = launchers().check(prepared, name());
  if (!supported.ok())
    return supported;
  size_t launches = 0;
  for (const runtime::PreparedStep &step : prepared)
    launches += step.launches.size();
  generated.assign(launches, nullptr);

  Status code = loadGeneratedCode(file);
  if (!code.ok())
    return code;

  // Weights as stored, mapped in place.
  // Weights stay as stored, where the artifact is mapped: the kernels read
  // them in place and widen values as they use them.
  Status scales = runtime::checkWeightScales(m, prepared);
  if (!scales.ok())
    return scales;
  // Before allocating anything: the plan's host memory (weights assembled
  // from pieces, caches, arena) against what the host has.
  DAYBREAK_RETURN_IF_ERROR(planCaches(m));
  uint64_t arenaBytes = 0;
  for (const artifact::Step &step : m.steps())
    arenaBytes = std::max<uint64_t>(arenaBytes, step.arena_size());
  // A weight read in place must sit at an address aligned for its elements
  // (a checkpoint's safetensors data need not be: its header has any
  // length); one that does not is copied, as a weight in pieces is.
  auto inPlace = [&](const artifact::Weight &w) -> const uint8_t * {
    const uint8_t *data = file.weightData(w);
    uint64_t align = artifact::dtypeSize(w.dtype()).value_or(1);
    if (data && align > 1 && reinterpret_cast<uintptr_t>(data) % align != 0)
      return nullptr;
    return data;
  };
  {
    uint64_t assembledBytes = 0;
    for (const artifact::Weight &w : m.weights())
      if (!inPlace(w))
        assembledBytes += w.size();
    uint64_t cachesBytes = cachePlan().totalBytes();
    uint64_t needed = assembledBytes + cachesBytes + arenaBytes;
    std::optional<HostMemory> available = availableHostMemory();
    if (available && needed > available->bytes)
      return Status::error(
          "the model needs " + gib(needed) + " (" + std::to_string(needed) +
          " bytes) of host memory beyond its mapped weights (caches " +
          gib(cachesBytes) + ", arena " + gib(arenaBytes) +
          ", weights copied (in pieces or misaligned) " + gib(assembledBytes) +
          "); " + gib(available->bytes) + " available (" + available->source +
          "): lower --max-batch, --max-seq-len or --kv-cache-tokens, or "
          "free memory");
  }

  // A weight in pieces (a stack of checkpoint tensors referenced in place)
  // or misaligned is copied once into memory of its own.
  weightBytes = 0;
  for (const artifact::Weight &w : m.weights()) {
    const uint8_t *data = inPlace(w);
    if (!data) {
      Allocation &a = assembled.emplace_back();
      Status status = allocate(a, w.size(), "weight '" + w.name() + "'");
      if (!status.ok())
        return status;
      uint64_t at = 0;
      for (auto [piece, bytes] : file.weightPieces(w)) {
        std::memcpy(a.data.get() + at, piece, bytes);
        at += bytes;
      }
      data = a.data.get();
    }
    weightAddressTable.push_back(reinterpret_cast<uintptr_t>(data));
    weightBytes += w.size();
  }

  // Caches and slot states (zeroed), every page unmapped, and the arena.
  const runtime::CachePlan &plan = cachePlan();
  caches.resize(m.caches_size());
  cacheBytes.resize(m.caches_size());
  for (int i = 0; i < m.caches_size(); ++i) {
    const runtime::CacheLayout &layout = plan.caches[i];
    CacheView &view = caches[i];
    runtime::fillCacheView(view, plan, i);
    view.pageTable = hostPageTable();
    DAYBREAK_RETURN_IF_ERROR(allocate(cacheBytes[i], layout.bytes,
                                      "cache '" + m.caches(i).name() + "'"));
    view.base = cacheBytes[i].data.get();
  }
  return allocate(arena, arenaBytes, "the step arena");
}

Status CpuDevice::uploadPageTable(int64_t, int64_t) {
  return Status::success(); // the kernels read hostPageTable() in place
}

Status CpuDevice::copyCacheBytes(int cache, uint64_t dst, uint64_t src,
                                 uint64_t bytes) {
  uint8_t *base = cacheBytes[cache].data.get();
  std::memcpy(base + dst, base + src, bytes);
  return Status::success();
}

Status CpuDevice::readCacheBytes(int cache, uint64_t src, void *out,
                                 uint64_t bytes) {
  std::memcpy(out, cacheBytes[cache].data.get() + src, bytes);
  return Status::success();
}

Status CpuDevice::writeCacheBytes(int cache, uint64_t dst, const void *in,
                                  uint64_t bytes) {
  std::memcpy(cacheBytes[cache].data.get() + dst, in, bytes);
  return Status::success();
}

Status CpuDevice::zeroCacheBytes(int cache, uint64_t offset, uint64_t bytes) {
  std::memset(cacheBytes[cache].data.get() + offset, 0, bytes);
  return Status::success();
}

StatusOr<double> CpuDevice::copyBandwidth(uint64_t bytes) {
  bytes = std::min<uint64_t>(bytes, uint64_t(1) << 30);
  Allocation a, b;
  Status status = allocate(a, bytes, "the copy probe");
  if (status.ok())
    status = allocate(b, bytes, "the copy probe");
  if (!status.ok())
    return status;
  double best = 0;
  for (int i = 0; i < 4; ++i) {
    auto start = std::chrono::steady_clock::now();
    std::memcpy(b.data.get(), a.data.get(), bytes);
    double seconds = std::chrono::duration<double>(
                         std::chrono::steady_clock::now() - start)
                         .count();
    if (i > 0) // the first copy faults the destination's pages in
      best = std::max(best, 2.0 * bytes / seconds);
  }
  return best;
}

uint64_t CpuDevice::residentBytes() const {
  uint64_t bytes = arena.size + weightBytes;
  for (const auto &c : cacheBytes)
    bytes += c.size;
  return bytes;
}

//===----------------------------------------------------------------------===//
// Launchers: one per declared kernel the CPU device implements.
//===----------------------------------------------------------------------===//

namespace daybreak::cpu {
/// The launchers reach the device's pool, caches and generated kernels.
struct CpuLaunchers {
  static float *f(const BoundArg &a) { return a.as<float>(); }
  /// A weight slot as stored (absent: a null view). `scale` is the slot of
  /// an e4m3 weight's block scales and `blocks` their block sizes.
  static WeightView weight(const BoundArg &a, const BoundArg *scale = nullptr,
                           const std::vector<int64_t> *blocks = nullptr) {
    WeightView w;
    if (!a.present())
      return w;
    w.data = a.as<void>();
    switch (a.arg->dtype) {
    case artifact::BF16:
      w.type = WeightType::BF16;
      break;
    case artifact::F8E4M3FN:
      w.type = WeightType::F8E4M3;
      w.scales = scale->as<float>();
      w.blockN = (*blocks)[0];
      w.blockK = (*blocks)[1];
      break;
    default:
      break;
    }
    return w;
  }
  static int32_t *i32(const BoundArg &a) { return a.as<int32_t>(); }
  /// An optional operand's data, or null when absent.
  template <typename T> static T *opt(const BoundArg &a) {
    return a.present() ? a.as<T>() : nullptr;
  }
  static const CacheView &cache(CpuDevice &d, const BoundArg &a) {
    return d.caches[a.cache()];
  }

  static Status embedding(CpuDevice &d, const BoundLaunch &l) {
    using In = abi::Embedding::In;
    const BoundArg &table = l.in(In::table);
    return cpu::embedding(d.pool, weight(table), table.dim(0), table.dim(1),
                          i32(l.in(In::ids)), l.tokens, f(l.out(0)));
  }
  static Status gatherRows(CpuDevice &d, const BoundLaunch &l) {
    using In = abi::GatherRows::In;
    const BoundArg &x = l.in(In::input), &rows = l.in(In::rows);
    return cpu::embedding(d.pool, f(x), x.dim(0), x.back(), i32(rows),
                          rows.numel(), f(l.out(0)));
  }
  /// The communicator of a collective over `ranks` ranks, each
  /// consecutive group of them when the device's group is larger: null for
  /// one rank (the collective copies), an error when the device has none
  /// or `ranks` does not divide its group.
  static StatusOr<runtime::Communicator *>
  ranksOf(CpuDevice &d, const char *what, int64_t ranks) {
    runtime::Communicator *c = d.communicator();
    int64_t size = c ? c->size() : 1;
    if (ranks < 1 || ranks > size || size % ranks != 0)
      return Status::error(std::string(what) + " over " +
                           std::to_string(ranks) + " ranks, run by " +
                           std::to_string(size) +
                           (c ? " (groups of the ranks must divide them)"
                              : " (load every rank's artifact)"));
    return ranks == 1 ? nullptr : c;
  }
  static Status allReduce(CpuDevice &d, const BoundLaunch &l) {
    const BoundArg &x = l.in(abi::AllReduce::In::input), &out = l.out(0);
    const int64_t ranks = l->i(abi::AllReduce::P::ranks);
    auto c = ranksOf(d, "all_reduce", ranks);
    if (!c.ok())
      return c.error();
    if (!*c) {
      std::copy_n(f(x), x.numel(), f(out));
      return Status::success();
    }
    return (*c)->groupAllReduceSum(f(x), f(out), x.numel(), ranks);
  }
  static Status allGather(CpuDevice &d, const BoundLaunch &l) {
    const BoundArg &x = l.in(abi::AllGather::In::input), &out = l.out(0);
    const int64_t ranks = l->i(abi::AllGather::P::ranks);
    auto c = ranksOf(d, "all_gather", ranks);
    if (!c.ok())
      return c.error();
    if (!*c) {
      std::copy_n(f(x), x.numel(), f(out));
      return Status::success();
    }
    return (*c)->groupAllGather(f(x), f(out), x.rows(), x.back(), ranks);
  }
  static Status rmsNorm(CpuDevice &d, const BoundLaunch &l) {
    using In = abi::RmsNorm::In;
    const BoundArg &x = l.in(In::input);
    const BoundArg &out = l.out(0);
    cpu::rmsNorm(d.pool, f(x), weight(l.in(In::weight)), x.rows(), x.back(),
                 l->f(abi::RmsNorm::P::eps), f(out), x.stride(), out.stride());
    return Status::success();
  }
  static Status addRmsNorm(CpuDevice &d, const BoundLaunch &l) {
    using In = abi::AddRmsNorm::In;
    const BoundArg &x = l.in(In::input);
    cpu::addRmsNorm(d.pool, f(x), f(l.in(In::residual)),
                    weight(l.in(In::weight)), x.rows(), x.back(),
                    l->f(abi::AddRmsNorm::P::eps), f(l.out(0)), f(l.out(1)));
    return Status::success();
  }
  static Status layerNorm(CpuDevice &d, const BoundLaunch &l) {
    using In = abi::LayerNorm::In;
    const BoundArg &x = l.in(In::input);
    const BoundArg &out = l.out(0);
    cpu::layerNorm(d.pool, f(x), weight(l.in(In::weight)),
                   weight(l.in(In::bias)), x.rows(), x.back(),
                   l->f(abi::LayerNorm::P::eps), f(out), x.stride(),
                   out.stride());
    return Status::success();
  }
  /// matmul and fp8_matmul: weight [N, K] as stored.
  /// A matmul's input: `x` itself, or, under roundMatmulInputs on a weight
  /// stored below fp32, its copy rounded to bf16 (to nearest even), or,
  /// with fp8 on an e4m3 weight where runtime::fp8InputsApply holds,
  /// quantized to FP8 per row and 128 columns (cpu::quantizeFp8Rows).
  static const float *input(CpuDevice &d, const BoundArg &x,
                            const WeightView &w) {
    if (!d.bf16Inputs || w.isF32())
      return f(x);
    // A column view is rounded over the rows it spans, strides kept.
    int64_t n =
        x.rowStride ? (x.rows() - 1) * x.stride() + x.back() : x.numel();
    if (int64_t(d.roundedInput.size()) < n)
      d.roundedInput.resize(n);
    const float *src = f(x);
    float *dst = d.roundedInput.data();
    if (d.fp8Inputs && w.type == WeightType::F8E4M3 && !x.rowStride &&
        runtime::fp8InputsApply(w.blockN, w.blockK)) {
      cpu::quantizeFp8Rows(d.pool, src, n / x.back(), x.back(), dst,
                           d.nextRounding());
      return dst;
    }
    numerics::OperandRounding rounding = d.nextRounding();
    for (int64_t i = 0; i < n; ++i)
      dst[i] = rounding(src[i], i);
    return dst;
  }
  static Status matmulWith(CpuDevice &d, const BoundLaunch &l,
                           const WeightView &w, const WeightView &bias,
                           const std::vector<int64_t> *tile) {
    const BoundArg &x = l.in(0);
    int64_t n = l.in(1).dim(0), k = l.in(1).dim(1);
    MatmulTiling tiling;
    if (tile && tile->size() == 2) {
      tiling.rowBlock = (*tile)[0];
      tiling.colBlock = (*tile)[1];
    }
    cpu::matmul(d.pool, input(d, x, w), w, bias, x.numel() / k, n, k,
                f(l.out(0)), tiling);
    return Status::success();
  }
  static Status matmul(CpuDevice &d, const BoundLaunch &l) {
    using In = abi::Matmul::In;
    using P = abi::Matmul::P;
    return matmulWith(d, l, weight(l.in(In::weight)), weight(l.in(In::bias)),
                      l->has(P::tile) ? &l->ints(P::tile) : nullptr);
  }
  static Status fp8Matmul(CpuDevice &d, const BoundLaunch &l) {
    using In = abi::Fp8Matmul::In;
    using P = abi::Fp8Matmul::P;
    return matmulWith(
        d, l,
        weight(l.in(In::weight), &l.in(In::weight_scale), &l->ints(P::block_size)),
        WeightView(), l->has(P::tile) ? &l->ints(P::tile) : nullptr);
  }
  static Status headMatmul(CpuDevice &d, const BoundLaunch &l) {
    using In = abi::HeadMatmul::In;
    const BoundArg &x = l.in(In::input), &w = l.in(In::weight);
    bool transpose = l->has(abi::HeadMatmul::P::transpose_weight) &&
                     l->i(abi::HeadMatmul::P::transpose_weight);
    int64_t n = transpose ? w.dim(1) : w.dim(2);
    WeightView stored = weight(w);
    const BoundArg &out = l.out(0);
    cpu::headMatmul(d.pool, input(d, x, stored), stored, transpose, x.dim(0),
                    x.dim(1), x.dim(2), n, f(out), x.stride(), out.stride());
    return Status::success();
  }
  static Status rope(CpuDevice &d, const BoundLaunch &l) {
    using In = abi::Rope::In;
    const BoundArg &x = l.in(In::input), &out = l.out(0);
    runtime::RopeLayout at = runtime::ropeLayout(l);
    cpu::rope(d.pool, f(x), at.input, f(out), at.output,
              i32(l.in(In::positions)), l.tokens, at.rowsPerToken, at.rowDim,
              runtime::ropeParams(*l));
    return Status::success();
  }
  static Status copyColumns(CpuDevice &d, const BoundLaunch &l) {
    using P = abi::CopyColumns::P;
    const BoundArg &x = l.in(0), &out = l.out(0);
    int64_t srcOffset = l->i(P::src_offset), dstOffset = l->i(P::dst_offset);
    int64_t cols = std::min(x.back() - srcOffset, out.back() - dstOffset);
    cpu::copyColumns(d.pool, f(x), x.back(), srcOffset, f(out), out.back(),
                     dstOffset, x.numel() / x.back(), cols);
    return Status::success();
  }
  static Status add(CpuDevice &d, const BoundLaunch &l) {
    using In = abi::Add::In;
    cpu::add(d.pool, f(l.in(In::lhs)), f(l.in(In::rhs)), l.in(In::lhs).numel(),
             f(l.out(0)));
    return Status::success();
  }
  static Status addScalarI32(CpuDevice &, const BoundLaunch &l) {
    int32_t value = static_cast<int32_t>(l->i(abi::AddScalarI32::P::value));
    const int32_t *x = i32(l.in(0));
    int32_t *out = i32(l.out(0));
    for (int64_t t = 0, n = l.in(0).numel(); t < n; ++t)
      out[t] = x[t] + value;
    return Status::success();
  }
  static Status localExperts(CpuDevice &, const BoundLaunch &l) {
    using P = abi::LocalExperts::P;
    const BoundArg &ids = l.in(abi::LocalExperts::In::indices);
    cpu::localExperts(i32(ids), ids.numel(), l->i(P::first), l->i(P::count),
                      i32(l.out(0)));
    return Status::success();
  }
  static Status divScalarI32(CpuDevice &, const BoundLaunch &l) {
    int64_t value = l->i(abi::DivScalarI32::P::value);
    if (value <= 0)
      return Status::error("div_scalar_i32: divisor " + std::to_string(value) +
                           " is not positive");
    const int32_t *x = i32(l.in(0));
    int32_t *out = i32(l.out(0));
    for (int64_t t = 0, n = l.in(0).numel(); t < n; ++t)
      out[t] = int32_t(x[t] / value);
    return Status::success();
  }
  static Status swiglu(CpuDevice &d, const BoundLaunch &l) {
    using In = abi::Swiglu::In;
    using P = abi::Swiglu::P;
    const BoundArg &gate = l.in(In::gate);
    cpu::swiglu(d.pool, f(gate), f(l.in(In::up)), gate.numel(), l->f(P::alpha),
                l->has(P::limit), l->has(P::limit) ? l->f(P::limit) : 0.0,
                l->f(P::up_offset), f(l.out(0)));
    return Status::success();
  }
  static Status moeRoute(CpuDevice &d, const BoundLaunch &l) {
    using In = abi::MoeRoute::In;
    StatusOr<cpu::RouteParams> route = runtime::routeParams(*l, "cpu");
    if (!route.ok())
      return route.error();
    const BoundArg &logits = l.in(In::logits);
    auto kernel = route->score == runtime::RouteScore::SoftmaxTopK
                      ? &cpu::moeRouteSoftmaxTopK
                      : &cpu::moeRouteSigmoid;
    kernel(d.pool, f(logits), opt<float>(l.in(In::bias)), l.tokens,
           logits.dim(1), *route, i32(l.out(0)), f(l.out(1)));
    return Status::success();
  }
  static Status expertMatmul(CpuDevice &d, const BoundLaunch &l) {
    using In = abi::ExpertMatmul::In;
    const BoundArg &x = l.in(In::input), &w = l.in(In::weight),
                   &indices = l.in(In::indices);
    const std::vector<int64_t> *blocks =
        l->has(abi::ExpertMatmul::P::block_size)
            ? &l->ints(abi::ExpertMatmul::P::block_size)
            : nullptr;
    WeightView stored = weight(w, &l.in(In::weight_scale), blocks);
    return cpu::expertMatmul(d.pool, input(d, x, stored), x.rank == 3, stored,
                             w.dim(0), w.dim(1), w.dim(2), i32(indices),
                             l.tokens, indices.dim(1),
                             opt<float>(l.in(In::routing_weights)), f(l.out(0)),
                             weight(l.in(In::bias)));
  }
  static Status mxfp4ExpertMatmul(CpuDevice &d, const BoundLaunch &l) {
    using In = abi::Mxfp4ExpertMatmul::In;
    const BoundArg &x = l.in(In::input), &w = l.in(In::weight),
                   &indices = l.in(In::indices);
    Mxfp4Weights packed;
    packed.values = w.as<uint8_t>();
    packed.scales = l.in(In::scales).as<uint8_t>();
    WeightView stored; // below fp32: rounded to bf16 like any stored weight
    stored.type = WeightType::BF16;
    return cpu::mxfp4ExpertMatmul(
        d.pool, input(d, x, stored), x.rank == 3, packed,
        weight(l.in(In::bias)), w.dim(0), w.dim(1), w.dim(2), i32(indices),
        l.tokens, indices.dim(1), opt<float>(l.in(In::routing_weights)),
        f(l.out(0)));
  }
  static Status mxfp4ToFp8Experts(CpuDevice &d, const BoundLaunch &l) {
    using In = abi::Mxfp4ToFp8Experts::In;
    using Out = abi::Mxfp4ToFp8Experts::Out;
    const BoundArg &w = l.in(In::weight), &indices = l.in(In::indices);
    Mxfp4Weights packed;
    packed.values = w.as<uint8_t>();
    packed.scales = l.in(In::scales).as<uint8_t>();
    const BoundArg &codes = l.out(Out::codes);
    using P = abi::Mxfp4ToFp8Experts::P;
    return cpu::mxfp4ToFp8Experts(
        d.pool, packed, weight(l.in(In::bias)), w.dim(0), w.dim(1), w.dim(2),
        i32(indices), l.tokens, indices.dim(1), codes.dim(0),
        codes.as<uint8_t>(), f(l.out(Out::block_scales)),
        f(l.out(Out::slot_bias)), i32(l.out(Out::slots)),
        runtime::mxfp4SelectionMode(l.tokens, l->has(P::all_from_tokens)
                                                  ? l->i(P::all_from_tokens)
                                                  : 0));
  }
  static Status mxfp4ToFp8AllExperts(CpuDevice &d, const BoundLaunch &l) {
    using In = abi::Mxfp4ToFp8AllExperts::In;
    using Out = abi::Mxfp4ToFp8AllExperts::Out;
    // Below from_tokens the step converts its selection instead.
    if (l.tokens < l->i(abi::Mxfp4ToFp8AllExperts::P::from_tokens))
      return Status::success();
    const BoundArg &w = l.in(In::weight), &codes = l.out(Out::codes);
    Mxfp4Weights packed;
    packed.values = w.as<uint8_t>();
    packed.scales = l.in(In::scales).as<uint8_t>();
    return cpu::mxfp4ToFp8Experts(
        d.pool, packed, weight(l.in(In::bias)), w.dim(0), w.dim(1), w.dim(2),
        nullptr, l.tokens, 0, codes.dim(0), codes.as<uint8_t>(),
        f(l.out(Out::block_scales)), f(l.out(Out::slot_bias)), nullptr,
        runtime::Mxfp4ConvertMode::All);
  }
  static Status cacheWrite(CpuDevice &d, const BoundLaunch &l) {
    using In = abi::CacheWrite::In;
    cpu::CacheWritePrologueArgs prologue;
    prologue.params = runtime::cacheWritePrologue(*l);
    if (prologue.params.any()) {
      prologue.weight = weight(l.in(In::norm_weight));
      prologue.bias = weight(l.in(In::norm_bias));
      prologue.positions = opt<int32_t>(l.in(In::positions));
    }
    const BoundArg &values = l.in(In::values);
    return cpu::cacheWrite(d.pool, cache(d, l.in(In::cache)), f(values),
                           i32(l.in(In::slots)),
                           opt<int32_t>(l.in(In::sequences)), l.tokens,
                           &prologue, values.arg->rowStride);
  }
  static Status dsaIndexerScores(CpuDevice &d, const BoundLaunch &l) {
    using In = abi::DsaIndexerScores::In;
    const BoundArg &q = l.in(In::queries);
    std::optional<cpu::QueryRope> rope;
    if (std::optional<runtime::RopeParams> params =
            runtime::indexerQueryRope(*l))
      rope = cpu::QueryRope{*params, i32(l.in(In::positions))};
    return cpu::dsaIndexerScores(
        d.pool, f(q), f(l.in(In::weights)), cache(d, l.in(In::keys)),
        opt<int32_t>(l.in(In::sequences)), opt<int32_t>(l.in(In::bounds)),
        l.tokens, q.dim(1), l->f(abi::DsaIndexerScores::P::scale), f(l.out(0)),
        // As the CUDA device's tensor cores round it.
        d.bf16Inputs ? d.nextRounding() : numerics::OperandRounding(),
        rope ? &*rope : nullptr);
  }
  static Status dsaIndexSelect(CpuDevice &d, const BoundLaunch &l) {
    using In = abi::DsaIndexSelect::In;
    const BoundArg &scores = l.in(In::scores);
    cpu::dsaIndexSelect(d.pool, f(scores), i32(l.in(In::bounds)), l.tokens,
                        scores.dim(1), l->i(abi::DsaIndexSelect::P::top_k),
                        i32(l.out(0)));
    return Status::success();
  }
  static Status sparseAttention(CpuDevice &d, const BoundLaunch &l) {
    using In = abi::SparseAttention::In;
    using P = abi::SparseAttention::P;
    const BoundArg &q = l.in(In::q), &indices = l.in(In::indices);
    CacheView kv = cache(d, l.in(In::kv));
    int64_t valueDim = l->i(P::value_dim);
    // As the CUDA device's tensor cores round them, where they apply.
    numerics::OperandRounding rounding;
    if (d.tensorCoreRounding &&
        runtime::sparseMlaTensorCoresApply(kv.format, kv.width, kv.tailDim,
                                           kv.scaleBlock, valueDim))
      rounding = d.nextRounding();
    return cpu::sparseAttention(
        d.pool, f(q), kv, i32(indices), indices.dim(1),
        opt<int32_t>(l.in(In::sequences)), l.tokens, q.dim(1), l->f(P::scale),
        valueDim, opt<float>(l.in(In::sinks)), f(l.out(0)), rounding);
  }
  static Status attention(CpuDevice &d, const BoundLaunch &l) {
    using In = abi::Attention::In;
    using P = abi::Attention::P;
    const BoundArg &q = l.in(In::q);
    CacheView v = cache(d, l.in(In::v));
    if (l->has(P::value_columns))
      v = runtime::columnPrefixView(v, l->i(P::value_columns));
    return cpu::attention(
        d.pool, f(q), cache(d, l.in(In::k)), v, i32(l.in(In::positions)),
        opt<int32_t>(l.in(In::sequences)), opt<float>(l.in(In::sinks)),
        l.tokens, q.dim(1), l->i(P::kv_heads), l->f(P::scale),
        l->has(P::window) ? l->i(P::window) : 0, f(l.out(0)));
  }
  static StateView state(CpuDevice &d, const BoundArg &a) {
    StateView view;
    runtime::fillStateView(view, d.cachePlan(), a.cache());
    view.base = d.cacheBytes[a.cache()].data.get();
    return view;
  }
  static Status shortConv(CpuDevice &d, const BoundLaunch &l) {
    using In = abi::ShortConv::In;
    const BoundArg &w = l.in(In::weight);
    return cpu::shortConv(d.pool, f(l.in(In::input)), weight(w), w.dim(0),
                          w.dim(1), state(d, l.in(In::state)),
                          i32(l.in(In::sequences)), l.tokens,
                          l->i(abi::ShortConv::P::activation), f(l.out(0)));
  }
  static Status dsaKpool(CpuDevice &d, const BoundLaunch &l) {
    using In = abi::DsaKpool::In;
    const BoundArg &keys = l.in(In::keys), &ape = l.in(In::ape);
    return cpu::dsaKpool(d.pool, f(keys), f(l.in(In::gate)), weight(ape),
                         ape.dim(0), keys.dim(1), state(d, l.in(In::state)),
                         i32(l.in(In::positions)), i32(l.in(In::sequences)),
                         l.tokens, f(l.out(0)));
  }
  static Status dsaKpoolExpand(CpuDevice &d, const BoundLaunch &l) {
    using In = abi::DsaKpoolExpand::In;
    const BoundArg &pools = l.in(In::pools);
    cpu::dsaKpoolExpand(d.pool, i32(pools), i32(l.in(In::positions)), l.tokens,
                        pools.dim(1), l->i(abi::DsaKpoolExpand::P::pool_size),
                        i32(l.out(0)));
    return Status::success();
  }
  static Status kdaGate(CpuDevice &d, const BoundLaunch &l) {
    using In = abi::KdaGate::In;
    using P = abi::KdaGate::P;
    const BoundArg &raw = l.in(In::raw);
    double bound = l->has(P::lower_bound) ? l->f(P::lower_bound) : 0.0;
    cpu::kdaGate(d.pool, f(raw), f(l.in(In::a_log)), f(l.in(In::dt_bias)),
                 l.tokens, raw.dim(1), raw.dim(2),
                 l->has(P::lower_bound) ? &bound : nullptr, f(l.out(0)));
    return Status::success();
  }
  /// kda_chunk and kda_step share their operands and parameters but
  /// chunk_size.
  template <typename In, typename P>
  static void kdaOperands(const BoundLaunch &l, KdaInputs &in,
                          KdaShape &shape) {
    const BoundArg &q = l.in(In::q), &v = l.in(In::v);
    in = {f(q), f(l.in(In::k)), f(v), f(l.in(In::g)), f(l.in(In::beta))};
    shape.heads = q.dim(1);
    shape.keyDim = q.dim(2);
    shape.valueDim = v.dim(2);
    shape.scale = l->f(P::scale);
    shape.qkL2Norm = l->has(P::qk_l2norm) && l->i(P::qk_l2norm);
  }
  static Status kdaChunk(CpuDevice &d, const BoundLaunch &l) {
    using In = abi::KdaChunk::In;
    using P = abi::KdaChunk::P;
    KdaInputs in;
    KdaShape shape;
    kdaOperands<In, P>(l, in, shape);
    shape.chunkSize = l->i(P::chunk_size);
    return cpu::kdaChunk(d.pool, in, state(d, l.in(In::state)),
                         i32(l.in(In::sequences)), l.tokens, shape,
                         f(l.out(0)));
  }
  static Status kdaStep(CpuDevice &d, const BoundLaunch &l) {
    using In = abi::KdaStep::In;
    KdaInputs in;
    KdaShape shape;
    kdaOperands<In, abi::KdaStep::P>(l, in, shape);
    return cpu::kdaStep(d.pool, in, state(d, l.in(In::state)),
                        i32(l.in(In::sequences)), l.tokens, shape, f(l.out(0)));
  }
  static Status gatedRmsNorm(CpuDevice &d, const BoundLaunch &l) {
    using In = abi::GatedRmsNorm::In;
    using P = abi::GatedRmsNorm::P;
    const BoundArg &x = l.in(In::input);
    cpu::gatedRmsNorm(d.pool, f(x), f(l.in(In::gate)), weight(l.in(In::weight)),
                      x.numel() / x.back(), x.back(), l->f(P::eps),
                      l->i(P::activation), f(l.out(0)));
    return Status::success();
  }
  /// mhc_pre's and mhc_post_pre's mixing (the same operand and parameter
  /// names).
  template <typename In, typename P>
  static Status mhcMix(const BoundLaunch &l, const char *name,
                       cpu::MhcMix &mix) {
    mix.fn = f(l.in(In::fn));
    mix.base = f(l.in(In::base));
    mix.scale = f(l.in(In::scale));
    mix.sinkhornIters = l->i(P::sinkhorn_iters);
    mix.eps = l->f(P::eps);
    mix.normEps = l->f(P::norm_eps);
    mix.norm = weight(l.in(In::norm_weight));
    if (!mix.norm.data)
      return Status::success();
    if (!l->has(P::input_eps))
      return Status::error(std::string(name) +
                           ": a norm_weight without input_eps");
    mix.inputEps = l->f(P::input_eps);
    return Status::success();
  }
  static Status mhcPre(CpuDevice &d, const BoundLaunch &l) {
    const BoundArg &x = l.in(abi::MhcPre::In::streams);
    cpu::MhcMix mix;
    Status mixed = mhcMix<abi::MhcPre::In, abi::MhcPre::P>(l, "mhc_pre", mix);
    if (!mixed.ok())
      return mixed;
    return cpu::mhcPre(d.pool, f(x), x.dim(0), x.dim(1), x.dim(2), mix,
                       f(l.out(0)), f(l.out(1)), f(l.out(2)));
  }
  static Status mhcPostPre(CpuDevice &d, const BoundLaunch &l) {
    using In = abi::MhcPostPre::In;
    const BoundArg &x = l.in(In::streams);
    cpu::MhcMix mix;
    Status mixed =
        mhcMix<abi::MhcPostPre::In, abi::MhcPostPre::P>(l, "mhc_post_pre", mix);
    if (!mixed.ok())
      return mixed;
    return cpu::mhcPostPre(d.pool, f(x), f(l.in(In::y)), f(l.in(In::post)),
                           f(l.in(In::comb)), x.dim(0), x.dim(1), x.dim(2), mix,
                           f(l.out(0)), f(l.out(1)), f(l.out(2)), f(l.out(3)));
  }
  static Status mhcPost(CpuDevice &d, const BoundLaunch &l) {
    using In = abi::MhcPost::In;
    const BoundArg &x = l.in(In::streams);
    return cpu::mhcPost(d.pool, f(x), f(l.in(In::y)), f(l.in(In::post)),
                        f(l.in(In::comb)), x.dim(0), x.dim(1), x.dim(2),
                        f(l.out(0)));
  }
  static Status elementwise(CpuDevice &d, const BoundLaunch &l) {
    CpuDevice::ElementwiseFn kernel = d.generated[l->ordinal];
    if (!kernel)
      return Status::error("generated kernel not loaded");
    const BoundArg &out = l.out(0);
    unsigned inputs = l.numOperands();
    float *result = f(out);
    // The kernel indexes its inputs itself (column views read rows of
    // another width), so each chunk passes its range and the whole buffers.
    const float *buffers[runtime::kMaxLaunchArgs];
    for (unsigned i = 0; i < inputs; ++i)
      buffers[i] = f(l.in(i));
    d.pool.parallelFor(out.numel(), 16384, [&](int64_t begin, int64_t end) {
      kernel(begin, end, buffers, result);
    });
    return Status::success();
  }
};
} // namespace daybreak::cpu

const runtime::LauncherTable<CpuDevice> &CpuDevice::launchers() {
  using K = abi::KernelId;
  static const runtime::LauncherTable<CpuDevice> table = {
      {K::Embedding, &CpuLaunchers::embedding},
      {K::GatherRows, &CpuLaunchers::gatherRows},
      {K::AllReduce, &CpuLaunchers::allReduce},
      {K::AllGather, &CpuLaunchers::allGather},
      {K::LocalExperts, &CpuLaunchers::localExperts},
      {K::RmsNorm, &CpuLaunchers::rmsNorm},
      {K::AddRmsNorm, &CpuLaunchers::addRmsNorm},
      {K::LayerNorm, &CpuLaunchers::layerNorm},
      {K::Matmul, &CpuLaunchers::matmul},
      {K::Fp8Matmul, &CpuLaunchers::fp8Matmul},
      {K::HeadMatmul, &CpuLaunchers::headMatmul},
      {K::Rope, &CpuLaunchers::rope},
      {K::CopyColumns, &CpuLaunchers::copyColumns},
      {K::Add, &CpuLaunchers::add},
      {K::AddScalarI32, &CpuLaunchers::addScalarI32},
      {K::Swiglu, &CpuLaunchers::swiglu},
      {K::MoeRoute, &CpuLaunchers::moeRoute},
      {K::ExpertMatmul, &CpuLaunchers::expertMatmul},
      {K::Mxfp4ExpertMatmul, &CpuLaunchers::mxfp4ExpertMatmul},
      {K::Mxfp4ToFp8Experts, &CpuLaunchers::mxfp4ToFp8Experts},
      {K::Mxfp4ToFp8AllExperts, &CpuLaunchers::mxfp4ToFp8AllExperts},
      {K::CacheWrite, &CpuLaunchers::cacheWrite},
      {K::DsaIndexerScores, &CpuLaunchers::dsaIndexerScores},
      {K::DsaIndexSelect, &CpuLaunchers::dsaIndexSelect},
      {K::SparseAttention, &CpuLaunchers::sparseAttention},
      {K::Attention, &CpuLaunchers::attention},
      {K::ShortConv, &CpuLaunchers::shortConv},
      {K::KdaGate, &CpuLaunchers::kdaGate},
      {K::KdaChunk, &CpuLaunchers::kdaChunk},
      {K::KdaStep, &CpuLaunchers::kdaStep},
      {K::GatedRmsNorm, &CpuLaunchers::gatedRmsNorm},
      {K::DsaKpool, &CpuLaunchers::dsaKpool},
      {K::DsaKpoolExpand, &CpuLaunchers::dsaKpoolExpand},
      {K::DivScalarI32, &CpuLaunchers::divScalarI32},
      {K::MhcPre, &CpuLaunchers::mhcPre},
      {K::MhcPost, &CpuLaunchers::mhcPost},
      {K::MhcPostPre, &CpuLaunchers::mhcPostPre},
      {K::Elementwise, &CpuLaunchers::elementwise},
  };
  return table;
}

Status CpuDevice::launch(const PreparedLaunch &launch, int64_t tokens) {
  return runtime::dispatch(*this, launchers(), launch, tokens);
}

Status CpuDevice::writeArena(uint64_t offset, const void *data, size_t bytes) {
  if (offset + bytes > arena.size)
    return Status::error("arena write past its end");
  std::memcpy(arena.data.get() + offset, data, bytes);
  return Status::success();
}

Status CpuDevice::readArena(uint64_t offset, void *data, size_t bytes) {
  if (offset + bytes > arena.size)
    return Status::error("arena read past its end");
  std::memcpy(data, arena.data.get() + offset, bytes);
  return Status::success();
}
