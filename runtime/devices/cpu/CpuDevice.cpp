//===- CpuDevice.cpp - Running artifact launches on the CPU ---------------===//

#include "runtime/devices/cpu/CpuDevice.h"
#include "runtime/executor/LaunchParams.h"

#include "runtime/numerics/Numerics.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <dlfcn.h>
#include <sys/mman.h>
#include <unistd.h>

using namespace daybreak;
using namespace daybreak::cpu;
using artifact::DType;
using runtime::attrFloat;
using runtime::attrInt;
using runtime::findAttr;

/// The kernels of the CPU device, by the name launches use.
static const char *const kKernels[] = {
    "embedding",    "rms_norm",         "layer_norm",     "matmul",
    "fp8_matmul",   "head_matmul",      "rope",           "copy_columns",
    "add",          "add_scalar_i32",   "swiglu",         "moe_route",
    "expert_matmul", "cache_write",     "dsa_indexer_scores",
    "dsa_index_select", "sparse_attention", "elementwise"};

int64_t CpuDevice::Tensor::numel() const {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

CpuDevice::~CpuDevice() {
  if (codeHandle)
    dlclose(codeHandle);
}

Status CpuDevice::loadGeneratedCode(const artifact::ArtifactFile &file) {
  std::vector<std::string> symbols;
  for (const artifact::Step &step : (*manifest).steps())
    for (const artifact::Launch &l : step.launches())
      if (l.kernel() == "elementwise") {
        const artifact::Attr *symbol = nullptr;
        for (const artifact::Attr &a : l.attrs())
          if (a.name() == "symbol")
            symbol = &a;
        if (!symbol)
          return Status::error("a generated kernel launch names no symbol");
        symbols.push_back(symbol->s());
      }
  if (symbols.empty())
    return Status::success();
  std::optional<uint32_t> section = file.findSection("code.x86_64");
  if (!section)
    return Status::error("the steps launch generated kernels but the artifact "
                         "has no code.x86_64 section");
  // The shared object is loaded from memory through a memfd, so nothing is
  // written to disk.
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
  close(fd);
  if (!codeHandle)
    return Status::error(std::string("cannot load the generated kernels: ") +
                         dlerror());
  for (const std::string &symbol : symbols) {
    void *fn = dlsym(codeHandle, symbol.c_str());
    if (!fn)
      return Status::error("the generated kernels lack '" + symbol + "'");
    generated[symbol] = reinterpret_cast<ElementwiseFn>(fn);
  }
  return Status::success();
}

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

Status CpuDevice::prepare(const artifact::ArtifactFile &file) {
  manifest = &file.manifest();
  const artifact::Manifest &m = *manifest;
  // Every launch must name a kernel this device has.
  for (const artifact::Step &step : m.steps())
    for (const artifact::Launch &l : step.launches()) {
      bool known = false;
      for (const char *k : kKernels)
        known |= l.kernel() == k;
      if (!known)
        return Status::error("step '" + step.name() + "' launches kernel '" +
                             l.kernel() +
                             "', which the cpu device does not have");
    }

  Status code = loadGeneratedCode(file);
  if (!code.ok())
    return code;

  // Weights, once, to fp32 (FP8 matmul weights dequantised).
  StatusOr<std::vector<std::vector<float>>> loaded =
      runtime::loadWeightsF32(file);
  if (!loaded.ok())
    return loaded.error();
  weights = std::move(*loaded);

  // Caches with identity page tables, and the arena.
  int64_t batch = m.max_batch(), maxSeq = m.max_seq_len();
  caches.resize(m.caches_size());
  cacheBytes.resize(m.caches_size());
  for (int i = 0; i < m.caches_size(); ++i) {
    const artifact::Cache &c = m.caches(i);
    CacheView &view = caches[i];
    switch (c.format()) {
    case artifact::CACHE_F32:
      view.format = CacheFormat::F32;
      break;
    case artifact::CACHE_BF16:
      view.format = CacheFormat::BF16;
      break;
    case artifact::CACHE_FP8_SCALED:
      view.format = CacheFormat::Fp8Scaled;
      break;
    default:
      return Status::error("cache '" + c.name() + "' has an unknown format");
    }
    view.width = c.width();
    view.tailDim = c.tail_dim();
    view.scaleBlock = c.scale_block();
    view.bytesPerRow = cacheBytesPerRow(view.format, view.width,
                                             view.tailDim, view.scaleBlock);
    if (view.bytesPerRow != c.bytes_per_row())
      return Status::error("cache '" + c.name() + "' declares " +
                           std::to_string(c.bytes_per_row()) +
                           " bytes per row; its format needs " +
                           std::to_string(view.bytesPerRow));
    view.batch = batch;
    view.maxSeqLen = maxSeq;
    view.pageSize = c.page_size();
    int64_t pages = batch * view.pagesPerSeq();
    uint64_t bytes;
    if (__builtin_mul_overflow(uint64_t(pages),
                               uint64_t(view.pageSize * view.bytesPerRow),
                               &bytes))
      return Status::error("cache '" + c.name() + "' is too large");
    Status status = allocate(cacheBytes[i], bytes, "cache '" + c.name() + "'");
    if (!status.ok())
      return status;
    view.base = cacheBytes[i].data.get();
  }
  // The identity page table, after the caches: it is smaller than any of
  // them, so limits too large to serve fail on a cache, with its name.
  int64_t maxPagesPerSeq = 0;
  for (const CacheView &view : caches)
    maxPagesPerSeq = std::max<int64_t>(maxPagesPerSeq, view.pagesPerSeq());
  pageTable.resize(batch * maxPagesPerSeq);
  for (size_t i = 0; i < pageTable.size(); ++i)
    pageTable[i] = static_cast<int32_t>(i);
  for (CacheView &view : caches)
    view.pageTable = pageTable.data();
  uint64_t arenaSize = 0;
  for (const artifact::Step &step : m.steps())
    arenaSize = std::max<uint64_t>(arenaSize, step.arena_size());
  return allocate(arena, arenaSize, "the step arena");
}

StatusOr<uint8_t *> CpuDevice::cacheRows(int cache, int64_t seq, int64_t pos,
                                         int64_t rows) const {
  StatusOr<uint64_t> offset =
      runtime::identityCacheRowOffset(*manifest, cache, seq, pos, rows);
  if (!offset.ok())
    return offset.error();
  return cacheBytes[cache].data.get() + *offset;
}

Status CpuDevice::copyCacheRows(int cache, int64_t srcSeq, int64_t srcPos,
                                int64_t dstSeq, int64_t dstPos, int64_t rows) {
  StatusOr<uint8_t *> src = cacheRows(cache, srcSeq, srcPos, rows);
  if (!src.ok())
    return src.error();
  StatusOr<uint8_t *> dst = cacheRows(cache, dstSeq, dstPos, rows);
  if (!dst.ok())
    return dst.error();
  std::memcpy(*dst, *src, rows * caches[cache].bytesPerRow);
  return Status::success();
}

Status CpuDevice::readCacheRows(int cache, int64_t seq, int64_t pos,
                                int64_t rows, void *out) {
  StatusOr<uint8_t *> src = cacheRows(cache, seq, pos, rows);
  if (!src.ok())
    return src.error();
  std::memcpy(out, *src, rows * caches[cache].bytesPerRow);
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
  uint64_t bytes = arena.size;
  for (const auto &w : weights)
    bytes += w.size() * sizeof(float);
  for (const auto &c : cacheBytes)
    bytes += c.size;
  return bytes;
}

StatusOr<CpuDevice::Tensor> CpuDevice::operand(const artifact::Step &step,
                                       const artifact::Operand &op,
                                       int64_t tokens) {
  Tensor t;
  switch (op.kind_case()) {
  case artifact::Operand::kBuffer: {
    if (op.buffer() >= uint32_t(step.buffers_size()))
      return Status::error("operand names buffer " +
                           std::to_string(op.buffer()) + " of " +
                           std::to_string(step.buffers_size()));
    const artifact::Buffer &b = step.buffers(op.buffer());
    t.dtype = b.dtype();
    t.shape = runtime::bufferShape(b, tokens);
    int64_t bytes = t.numel() * runtime::elementBytes(t.dtype);
    if (b.offset() + bytes > arena.size)
      return Status::error("buffer '" + b.name() + "' runs past the arena");
    t.data = arena.data.get() + b.offset();
    return t;
  }
  case artifact::Operand::kWeight: {
    if (op.weight() >= weights.size())
      return Status::error("operand names a missing weight");
    const artifact::Weight &w = (*manifest).weights(op.weight());
    t.dtype = DType::F32;
    t.shape.assign(w.shape().begin(), w.shape().end());
    t.data = weights[op.weight()].data();
    return t;
  }
  case artifact::Operand::kCache:
    if (op.cache() >= caches.size())
      return Status::error("operand names a missing cache");
    t.cache = &caches[op.cache()];
    return t;
  default:
    return Status::error("empty operand");
  }
}

Status CpuDevice::launch(const artifact::Step &step, const artifact::Launch &l,
                     int64_t tokens) {
  std::vector<Tensor> in, out;
  for (const artifact::Operand &op : l.operands()) {
    StatusOr<Tensor> t = operand(step, op, tokens);
    if (!t.ok())
      return t.error();
    in.push_back(*t);
  }
  for (const artifact::Operand &op : l.results()) {
    StatusOr<Tensor> t = operand(step, op, tokens);
    if (!t.ok())
      return t.error();
    out.push_back(*t);
  }
  auto f = [](const Tensor &t) { return static_cast<float *>(t.data); };
  auto i32 = [](const Tensor &t) { return static_cast<int32_t *>(t.data); };
  auto need = [&](size_t ins, size_t outs) {
    return in.size() >= ins && out.size() == outs;
  };
  const std::string &k = l.kernel();
  if (k == "embedding" && need(2, 1))
    return embedding(pool, f(in[0]), in[0].shape[0], in[0].shape[1],
                          i32(in[1]), tokens, f(out[0]));
  if (k == "rms_norm" && need(2, 1)) {
    int64_t dim = in[0].shape.back();
    rmsNorm(pool, f(in[0]), f(in[1]), in[0].numel() / dim, dim,
                 attrFloat(l, "eps", 1e-6), f(out[0]));
    return Status::success();
  }
  if (k == "layer_norm" && need(2, 1)) {
    int64_t dim = in[0].shape.back();
    layerNorm(pool, f(in[0]), f(in[1]), in.size() > 2 ? f(in[2]) : nullptr,
                   in[0].numel() / dim, dim, attrFloat(l, "eps", 1e-6),
                   f(out[0]));
    return Status::success();
  }
  if ((k == "matmul" || k == "fp8_matmul") && need(2, 1)) {
    int64_t n = in[1].shape[0], kk = in[1].shape[1];
    const float *bias = k == "matmul" && in.size() > 2 ? f(in[2]) : nullptr;
    MatmulTiling tiling;
    tiling.rowBlock = attrInt(l, "tile.0", 0);
    tiling.colBlock = attrInt(l, "tile.1", 0);
    matmul(pool, f(in[0]), f(in[1]), bias, in[0].numel() / kk, n, kk,
                f(out[0]), tiling);
    return Status::success();
  }
  if (k == "head_matmul" && need(2, 1)) {
    bool transpose = attrInt(l, "transpose_weight", 0) != 0;
    int64_t heads = in[0].shape[1], kk = in[0].shape[2];
    int64_t n = transpose ? in[1].shape[1] : in[1].shape[2];
    headMatmul(pool, f(in[0]), f(in[1]), transpose, in[0].shape[0],
                    heads, kk, n, f(out[0]));
    return Status::success();
  }
  if (k == "rope" && need(2, 1)) {
    if (out[0].data != in[0].data)
      std::memcpy(out[0].data, in[0].data, in[0].numel() * sizeof(float));
    cpu::RopeParams p = runtime::ropeParams(l);
    int64_t rowDim = out[0].shape.back();
    rope(pool, f(out[0]), i32(in[1]), tokens,
              out[0].numel() / std::max<int64_t>(tokens * rowDim, 1), rowDim,
              p);
    return Status::success();
  }
  if (k == "copy_columns" && need(1, 1)) {
    int64_t srcStride = in[0].shape.back(), dstStride = out[0].shape.back();
    int64_t srcOffset = attrInt(l, "src_offset", 0);
    int64_t dstOffset = attrInt(l, "dst_offset", 0);
    int64_t cols = std::min(srcStride - srcOffset, dstStride - dstOffset);
    copyColumns(pool, f(in[0]), srcStride, srcOffset, f(out[0]),
                     dstStride, dstOffset, in[0].numel() / srcStride, cols);
    return Status::success();
  }
  if (k == "add" && need(2, 1)) {
    add(pool, f(in[0]), f(in[1]), in[0].numel(), f(out[0]));
    return Status::success();
  }
  if (k == "add_scalar_i32" && need(1, 1)) {
    int32_t value = static_cast<int32_t>(attrInt(l, "value", 0));
    for (int64_t t = 0, n = in[0].numel(); t < n; ++t)
      i32(out[0])[t] = i32(in[0])[t] + value;
    return Status::success();
  }
  if (k == "swiglu" && need(2, 1)) {
    const artifact::Attr *limit = findAttr(l, "limit");
    swiglu(pool, f(in[0]), f(in[1]), in[0].numel(),
                attrFloat(l, "alpha", 1.0), limit != nullptr,
                limit ? limit->f() : 0.0, attrFloat(l, "up_offset", 0.0),
                f(out[0]));
    return Status::success();
  }
  if (k == "moe_route" && need(1, 2)) {
    StatusOr<cpu::RouteParams> route = runtime::sigmoidRouteParams(l, "cpu");
    if (!route.ok())
      return route.error();
    const cpu::RouteParams &p = *route;
    moeRouteSigmoid(pool, f(in[0]), in.size() > 1 ? f(in[1]) : nullptr,
                         tokens, in[0].shape[1], p, i32(out[0]), f(out[1]));
    return Status::success();
  }
  if (k == "expert_matmul" && need(3, 1)) {
    // Segments: input, weight, indices, routing_weights, bias.
    bool weighted = attrInt(l, "segments.3", 0) != 0;
    if (attrInt(l, "segments.4", 0) != 0)
      return Status::error("expert biases are not supported on cpu yet");
    const Tensor &w = in[1];
    return expertMatmul(pool, f(in[0]), in[0].shape.size() == 3, f(w),
                             w.shape[0], w.shape[1], w.shape[2], i32(in[2]),
                             tokens, in[2].shape[1],
                             weighted ? f(in[3]) : nullptr, f(out[0]));
  }
  if (k == "cache_write" && need(3, 0) && in[0].cache)
    return cacheWrite(pool, *in[0].cache, f(in[1]), i32(in[2]),
                           in.size() > 3 ? i32(in[3]) : nullptr, tokens);
  if (k == "dsa_indexer_scores" && need(3, 1) && in[1].cache)
    return dsaIndexerScores(pool, f(in[0]), f(in[2]), *in[1].cache,
                                 in.size() > 3 ? i32(in[3]) : nullptr, tokens,
                                 in[0].shape[1], attrFloat(l, "scale", 1.0),
                                 f(out[0]));
  if (k == "dsa_index_select" && need(2, 1)) {
    dsaIndexSelect(pool, f(in[0]), i32(in[1]), tokens, in[0].shape[1],
                        attrInt(l, "top_k", 1), i32(out[0]));
    return Status::success();
  }
  if (k == "sparse_attention" && need(3, 1) && in[1].cache) {
    // Segments: q, kv, indices, sequences, sinks.
    bool hasSeq = attrInt(l, "segments.3", 0) != 0;
    bool hasSinks = attrInt(l, "segments.4", 0) != 0;
    const int32_t *seq = hasSeq ? i32(in[3]) : nullptr;
    const float *sinks = hasSinks ? f(in[3 + hasSeq]) : nullptr;
    return sparseAttention(pool, f(in[0]), *in[1].cache, i32(in[2]),
                                in[2].shape[1], seq, tokens, in[0].shape[1],
                                attrFloat(l, "scale", 1.0),
                                attrInt(l, "value_dim", 0), sinks, f(out[0]));
  }
  if (k == "elementwise" && out.size() == 1) {
    const artifact::Attr *symbol = findAttr(l, "symbol");
    auto fn = symbol ? generated.find(symbol->s()) : generated.end();
    if (fn == generated.end())
      return Status::error("generated kernel not loaded");
    ElementwiseFn kernel = fn->second;
    float *result = f(out[0]);
    pool.parallelFor(out[0].numel(), 16384, [&](int64_t begin, int64_t end) {
      std::vector<const float *> inputs;
      for (const Tensor &t : in)
        inputs.push_back(f(t) + begin);
      kernel(end - begin, inputs.data(), result + begin);
    });
    return Status::success();
  }
  return Status::error("kernel '" + k + "' got " + std::to_string(in.size()) +
                       " operands and " + std::to_string(out.size()) +
                       " results, which it does not take");
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
