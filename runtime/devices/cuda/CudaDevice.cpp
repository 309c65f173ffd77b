//===- CudaDevice.cpp - Running artifact launches on an NVIDIA GPU --------===//

#include "runtime/devices/cuda/CudaDevice.h"
#include "runtime/devices/cuda/MatmulProbe.h"
#include "runtime/executor/LaunchParams.h"

#include <algorithm>
#include <cstring>

using namespace daybreak;
using namespace daybreak::cuda;
using artifact::DType;
using runtime::attrFloat;
using runtime::attrInt;
using runtime::findAttr;

/// The kernels the CUDA device runs, by launch name.
static const char *const kKernels[] = {
    "embedding",     "rms_norm",           "layer_norm",
    "matmul",        "fp8_matmul",         "head_matmul",
    "rope",          "copy_columns",       "add",
    "add_scalar_i32", "swiglu",            "moe_route",
    "expert_matmul", "cache_write",        "dsa_indexer_scores",
    "dsa_index_select", "sparse_attention", "elementwise"};

int64_t CudaDevice::Tensor::numel() const {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

StatusOr<std::unique_ptr<CudaDevice>> CudaDevice::open(int ordinal) {
  StatusOr<const Driver *> driver = Driver::get();
  if (!driver.ok())
    return driver.error();
  const Driver &d = **driver;
  int count = 0;
  Status status = d.check(d.cuDeviceGetCount(&count), "cuDeviceGetCount");
  if (!status.ok())
    return status;
  if (ordinal < 0 || ordinal >= count)
    return Status::error("cuda:" + std::to_string(ordinal) +
                         " does not exist (" + std::to_string(count) +
                         " CUDA devices)");
  CUdevice device;
  status = d.check(d.cuDeviceGet(&device, ordinal), "cuDeviceGet");
  CUcontext context = nullptr;
  if (status.ok())
    status = d.check(d.cuDevicePrimaryCtxRetain(&context, device),
                     "cuDevicePrimaryCtxRetain");
  if (status.ok())
    status = d.check(d.cuCtxSetCurrent(context), "cuCtxSetCurrent");
  if (!status.ok())
    return status;
  std::unique_ptr<CudaDevice> gpu(new CudaDevice(d, ordinal, device, context));
  // One non-blocking stream carries every copy and launch: graphs are
  // recorded from it.
  status = d.check(d.cuStreamCreate(&gpu->stream, CU_STREAM_NON_BLOCKING),
                   "cuStreamCreate");
  if (!status.ok())
    return status;
  return gpu;
}

CudaDevice::~CudaDevice() {
  driver.cuCtxSetCurrent(context);
  for (auto &[key, graph] : graphs)
    driver.cuGraphExecDestroy(graph);
  for (CUevent e : events)
    driver.cuEventDestroy(e);
  if (stream) {
    driver.cuStreamSynchronize(stream);
    driver.cuStreamDestroy(stream);
  }
  if (pool)
    driver.cuMemFree(pool);
  if (libraryModule)
    driver.cuModuleUnload(libraryModule);
  if (generatedModule)
    driver.cuModuleUnload(generatedModule);
  driver.cuDevicePrimaryCtxRelease(device);
}

/// Sub-allocations are 256-byte aligned (coalesced access, vector loads).
static size_t alignUp(size_t bytes) { return (bytes + 255) / 256 * 256; }

StatusOr<CUdeviceptr> CudaDevice::allocate(size_t bytes,
                                           const std::string &what) {
  // Carved from the one pool prepare() reserved for everything.
  size_t size = alignUp(bytes ? bytes : 1);
  if (poolUsed + size > poolSize)
    return Status::error("the device pool of " + std::to_string(poolSize) +
                         " bytes cannot hold " + what);
  CUdeviceptr p = pool + poolUsed;
  poolUsed += size;
  allocated = poolUsed;
  return p;
}

Status CudaDevice::upload(CUdeviceptr dst, const void *src, size_t bytes) {
  return driver.check(driver.cuMemcpyHtoD(dst, src, bytes), "cuMemcpyHtoD");
}

Status CudaDevice::runLaunches(const artifact::Step &step, int64_t tokens) {
  if (step.name() != "decode")
    return Device::runLaunches(step, tokens);
  auto key = std::make_pair(&step, tokens);
  auto found = graphs.find(key);
  if (found == graphs.end()) {
    // Record the step once for this batch size: kernels, pointers and sizes
    // are fixed, and each replay reads the inputs just copied into the arena.
    Status status = driver.check(
        driver.cuStreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL),
        "cuStreamBeginCapture");
    if (!status.ok())
      return status;
    Status launched = Device::runLaunches(step, tokens);
    CUgraph graph = nullptr;
    status = driver.check(driver.cuStreamEndCapture(stream, &graph),
                          "cuStreamEndCapture");
    if (!launched.ok()) {
      if (graph)
        driver.cuGraphDestroy(graph);
      return launched;
    }
    if (!status.ok())
      return status;
    CUgraphExec exec = nullptr;
    status = driver.check(driver.cuGraphInstantiateWithFlags(&exec, graph, 0),
                          "cuGraphInstantiateWithFlags");
    driver.cuGraphDestroy(graph);
    if (!status.ok())
      return status;
    found = graphs.emplace(key, exec).first;
  }
  return driver.check(driver.cuGraphLaunch(found->second, stream),
                      "cuGraphLaunch");
}

std::string CudaDevice::hardware() const {
  char buffer[256] = {};
  if (driver.cuDeviceGetName(buffer, sizeof(buffer) - 1, device) !=
      CUDA_SUCCESS)
    return name();
  return buffer;
}

StatusOr<CUevent> CudaDevice::event(size_t i) {
  while (events.size() <= i) {
    CUevent e = nullptr;
    Status status = driver.check(
        driver.cuEventCreate(&e, CU_EVENT_DEFAULT), "cuEventCreate");
    if (!status.ok())
      return status;
    events.push_back(e);
  }
  return events[i];
}

StatusOr<double> CudaDevice::elapsed(CUevent start, CUevent end) {
  Status status =
      driver.check(driver.cuEventSynchronize(end), "cuEventSynchronize");
  float ms = 0;
  if (status.ok())
    status = driver.check(driver.cuEventElapsedTime(&ms, start, end),
                          "cuEventElapsedTime");
  if (!status.ok())
    return status;
  return double(ms);
}

StatusOr<double> CudaDevice::timeLaunches(const artifact::Step &step,
                                          int64_t tokens) {
  StatusOr<CUevent> start = event(0), end = event(1);
  if (!start.ok() || !end.ok())
    return start.ok() ? end.error() : start.error();
  Status status = driver.check(driver.cuEventRecord(*start, stream),
                               "cuEventRecord");
  if (status.ok())
    status = runLaunches(step, tokens);
  if (status.ok())
    status = driver.check(driver.cuEventRecord(*end, stream), "cuEventRecord");
  if (!status.ok())
    return status;
  return elapsed(*start, *end);
}

StatusOr<std::vector<double>>
CudaDevice::profileLaunches(const artifact::Step &step, int64_t tokens) {
  int n = step.launches_size();
  StatusOr<CUevent> last = event(n);
  if (!last.ok())
    return last.error();
  for (int i = 0; i <= n; ++i) {
    Status status = driver.check(driver.cuEventRecord(events[i], stream),
                                 "cuEventRecord");
    if (status.ok() && i < n)
      status = launch(step, step.launches(i), tokens)
                   .withContext("kernel " + step.launches(i).kernel());
    if (!status.ok())
      return status;
  }
  std::vector<double> ms;
  for (int i = 0; i < n; ++i) {
    StatusOr<double> t = elapsed(events[i], events[i + 1]);
    if (!t.ok())
      return t.error();
    ms.push_back(*t);
  }
  return ms;
}

StatusOr<CUdeviceptr> CudaDevice::cacheRows(int cache, int64_t seq,
                                            int64_t pos, int64_t rows) const {
  StatusOr<uint64_t> offset =
      runtime::identityCacheRowOffset(*manifest, cache, seq, pos, rows);
  if (!offset.ok())
    return offset.error();
  return caches[cache].base + *offset;
}

Status CudaDevice::copyCacheRows(int cache, int64_t srcSeq, int64_t srcPos,
                                 int64_t dstSeq, int64_t dstPos,
                                 int64_t rows) {
  StatusOr<CUdeviceptr> src = cacheRows(cache, srcSeq, srcPos, rows);
  if (!src.ok())
    return src.error();
  StatusOr<CUdeviceptr> dst = cacheRows(cache, dstSeq, dstPos, rows);
  if (!dst.ok())
    return dst.error();
  if (rows == 0)
    return Status::success();
  return driver.check(
      driver.cuMemcpyDtoDAsync(*dst, *src, rows * caches[cache].bytesPerRow,
                               stream),
      "cuMemcpyDtoDAsync");
}

Status CudaDevice::readCacheRows(int cache, int64_t seq, int64_t pos,
                                 int64_t rows, void *out) {
  StatusOr<CUdeviceptr> src = cacheRows(cache, seq, pos, rows);
  if (!src.ok())
    return src.error();
  Status status = driver.check(
      driver.cuMemcpyDtoHAsync(out, *src, rows * caches[cache].bytesPerRow,
                               stream),
      "cuMemcpyDtoHAsync");
  if (!status.ok())
    return status;
  return driver.check(driver.cuStreamSynchronize(stream),
                      "cuStreamSynchronize");
}

StatusOr<double> CudaDevice::copyBandwidth(uint64_t bytes) {
  // Two buffers outside the pool; halve the size until they fit.
  CUdeviceptr a = 0, b = 0;
  for (; bytes >= (uint64_t(1) << 26); bytes /= 2) {
    if (driver.cuMemAlloc(&a, bytes) != CUDA_SUCCESS) {
      a = 0;
      continue;
    }
    if (driver.cuMemAlloc(&b, bytes) == CUDA_SUCCESS)
      break;
    driver.cuMemFree(a);
    a = b = 0;
  }
  if (!a || !b)
    return Status::error("no device memory left for the copy probe");
  double best = 0;
  Status status = driver.check(driver.cuMemsetD8(a, 1, bytes), "cuMemsetD8");
  StatusOr<CUevent> start = event(0), end = event(1);
  if (status.ok() && (!start.ok() || !end.ok()))
    status = start.ok() ? end.error() : start.error();
  for (int i = 0; i < 6 && status.ok(); ++i) {
    status = driver.check(driver.cuEventRecord(*start, stream),
                          "cuEventRecord");
    if (status.ok())
      status = driver.check(driver.cuMemcpyDtoDAsync(b, a, bytes, stream),
                            "cuMemcpyDtoDAsync");
    if (status.ok())
      status =
          driver.check(driver.cuEventRecord(*end, stream), "cuEventRecord");
    StatusOr<double> ms =
        status.ok() ? elapsed(*start, *end) : StatusOr<double>(status);
    if (!ms.ok())
      status = ms.error();
    else if (i > 0) // the first copy warms up
      best = std::max(best, 2.0 * bytes / (*ms * 1e-3));
  }
  driver.cuMemFree(a);
  driver.cuMemFree(b);
  if (!status.ok())
    return status;
  return best;
}

StatusOr<double> CudaDevice::matmulRate(std::string &how) {
  return cublasMatmulRate(driver, stream, 8192, how);
}

StatusOr<std::pair<size_t, size_t>> CudaDevice::memoryInfo() const {
  size_t freeBytes = 0, total = 0;
  Status status =
      driver.check(driver.cuMemGetInfo(&freeBytes, &total), "cuMemGetInfo");
  if (!status.ok())
    return status;
  return std::make_pair(freeBytes, total);
}

/// Loads module `name` of the artifact: its cubin when one was built for this
/// GPU's architecture, else its PTX (the driver compiles it at load).
static Status loadModule(const Driver &driver,
                         const artifact::ArtifactFile &file,
                         const std::string &name, const std::string &arch,
                         CUmodule &module, std::string &loadedAs) {
  const artifact::CodeImage *ptx = nullptr, *cubin = nullptr;
  for (const artifact::CodeImage &image : file.manifest().code()) {
    if (image.module() != name)
      continue;
    if (image.format() == "cubin" && image.arch() == arch)
      cubin = &image;
    else if (image.format() == "ptx")
      ptx = &image;
  }
  const artifact::CodeImage *image = cubin ? cubin : ptx;
  if (!image)
    return Status::error("the artifact has no '" + name + "' GPU code");
  const artifact::Section &s = file.manifest().sections(image->section());
  const uint8_t *data = file.sectionData(image->section());
  loadedAs = image->format() + " (" + image->arch() + ")";
  if (cubin)
    return driver.check(
        driver.cuModuleLoadDataEx(&module, data, 0, nullptr, nullptr),
        ("cuModuleLoadDataEx (" + name + " cubin)").c_str());
  // PTX is text the driver reads up to a NUL.
  std::string text(reinterpret_cast<const char *>(data), s.size());
  return driver.check(
      driver.cuModuleLoadDataEx(&module, text.c_str(), 0, nullptr, nullptr),
      ("cuModuleLoadDataEx (" + name + " PTX)").c_str());
}

Status CudaDevice::prepare(const artifact::ArtifactFile &file) {
  manifest = &file.manifest();
  const artifact::Manifest &m = *manifest;
  bool needsGenerated = false;
  for (const artifact::Step &step : m.steps())
    for (const artifact::Launch &l : step.launches()) {
      bool known = false;
      for (const char *k : kKernels)
        known |= l.kernel() == k;
      if (!known)
        return Status::error("step '" + step.name() + "' launches kernel '" +
                             l.kernel() + "', which the cuda device lacks");
      needsGenerated |= l.kernel() == "elementwise";
    }
  // sm_90a cubins use Hopper-only features and run on compute 9.0 only.
  int major = 0, minor = 0;
  driver.cuDeviceGetAttribute(
      &major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, device);
  driver.cuDeviceGetAttribute(
      &minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, device);
  std::string arch = "sm_" + std::to_string(major) + std::to_string(minor) +
                     (major == 9 && minor == 0 ? "a" : "");
  Status status = loadModule(driver, file, "library", arch, libraryModule,
                             libraryLoadedAs);
  if (!status.ok())
    return status;
  StatusOr<CudaKernels> loaded = CudaKernels::load(driver, libraryModule);
  if (!loaded.ok())
    return loaded.error();
  kernels.emplace(std::move(*loaded));
  // Launches the compiler specialised name their instantiation in the
  // library module.
  specialized.clear();
  for (const artifact::Step &step : m.steps())
    for (const artifact::Launch &l : step.launches()) {
      const artifact::Attr *name = findAttr(l, "specialized");
      if (!name || specialized.count(name->s()))
        continue;
      CUfunction fn = nullptr;
      status = driver.check(
          driver.cuModuleGetFunction(&fn, libraryModule, name->s().c_str()),
          "cuModuleGetFunction");
      if (!status.ok())
        return status.withContext("specialised kernel " + name->s());
      specialized[name->s()] = fn;
    }
  if (needsGenerated) {
    status = loadModule(driver, file, "generated", arch, generatedModule,
                        generatedLoadedAs);
    if (!status.ok())
      return status;
  }

  // Weights: fp32 on the host once, then one upload each.
  StatusOr<std::vector<std::vector<float>>> hostWeights =
      runtime::loadWeightsF32(file);
  if (!hostWeights.ok())
    return hostWeights.error();

  // Partials of sparse attention split over its rows (decode), beside the
  // plan's arena: a few MB at DeepSeek-V3.2's dimensions.
  int64_t valueDim = 0;
  for (const artifact::Step &step : m.steps())
    for (const artifact::Launch &l : step.launches())
      if (l.kernel() == "sparse_attention")
        valueDim = std::max(valueDim, attrInt(l, "value_dim", 0));
  if (valueDim > 0)
    attentionPartialFloats = sparseAttentionScratchFloats(valueDim);

  // Everything lives in one allocation, sized here: the weights, the page
  // table, the caches, the arena, the attention partials and the generated
  // kernels' input tables. One cuMemAlloc keeps the footprint what the plan
  // says (no per-buffer rounding) and leaves nothing to allocate later.
  {
    int64_t batch = m.max_batch(), maxSeq = m.max_seq_len();
    int64_t pagesPerSeq = 0;
    for (const artifact::Cache &c : m.caches())
      pagesPerSeq = std::max<int64_t>(
          pagesPerSeq, (maxSeq + c.page_size() - 1) / c.page_size());
    size_t total = 0;
    for (const std::vector<float> &w : *hostWeights)
      total += alignUp(std::max<size_t>(w.size() * sizeof(float), 1));
    total += alignUp(batch * pagesPerSeq * sizeof(int32_t));
    for (const artifact::Cache &c : m.caches())
      total += alignUp(size_t(batch) *
                       ((maxSeq + c.page_size() - 1) / c.page_size()) *
                       c.page_size() * c.bytes_per_row());
    uint64_t arenaBytes = 0;
    for (const artifact::Step &step : m.steps()) {
      arenaBytes = std::max<uint64_t>(arenaBytes, step.arena_size());
      for (const artifact::Launch &l : step.launches())
        if (l.kernel() == "elementwise")
          total += alignUp(l.operands_size() * sizeof(CUdeviceptr));
    }
    total += alignUp(arenaBytes);
    total += alignUp(attentionPartialFloats * sizeof(float));
    StatusOr<std::pair<size_t, size_t>> before = memoryInfo();
    if (!before.ok())
      return before.error();
    status = driver.check(driver.cuMemAlloc(&pool, total), "cuMemAlloc");
    if (!status.ok())
      return status.withContext(std::to_string(total) +
                                " bytes for the model (weights, caches, "
                                "arena), with " +
                                std::to_string(before->first) + " free");
    poolSize = total;
    StatusOr<std::pair<size_t, size_t>> after = memoryInfo();
    if (!after.ok())
      return after.error();
    measuredBytes = before->first - after->first;
  }
  for (int i = 0; i < m.weights_size(); ++i) {
    const std::vector<float> &w = (*hostWeights)[i];
    StatusOr<CUdeviceptr> p =
        allocate(w.size() * sizeof(float), "weight '" + m.weights(i).name() + "'");
    if (!p.ok())
      return p.error();
    status = upload(*p, w.data(), w.size() * sizeof(float));
    if (!status.ok())
      return status;
    weights.push_back(*p);
  }

  // Caches (zeroed) with an identity page table, and the arena.
  int64_t batch = m.max_batch(), maxSeq = m.max_seq_len();
  int64_t pagesPerSeq = 0;
  for (const artifact::Cache &c : m.caches()) {
    DeviceCacheView view;
    switch (c.format()) {
    case artifact::CACHE_F32:
      view.format = cpu::CacheFormat::F32;
      break;
    case artifact::CACHE_BF16:
      view.format = cpu::CacheFormat::BF16;
      break;
    case artifact::CACHE_FP8_SCALED:
      view.format = cpu::CacheFormat::Fp8Scaled;
      break;
    default:
      return Status::error("cache '" + c.name() + "' has an unknown format");
    }
    view.width = c.width();
    view.tailDim = c.tail_dim();
    view.scaleBlock = c.scale_block();
    view.bytesPerRow = c.bytes_per_row();
    view.batch = batch;
    view.maxSeqLen = maxSeq;
    view.pageSize = c.page_size();
    int64_t pages = batch * ((maxSeq + c.page_size() - 1) / c.page_size());
    size_t bytes = size_t(pages) * c.page_size() * c.bytes_per_row();
    StatusOr<CUdeviceptr> p = allocate(bytes, "cache '" + c.name() + "'");
    if (!p.ok())
      return p.error();
    status = driver.check(driver.cuMemsetD8(*p, 0, bytes), "cuMemsetD8");
    if (!status.ok())
      return status;
    view.base = *p;
    caches.push_back(view);
    pagesPerSeq = std::max<int64_t>(
        pagesPerSeq, (maxSeq + c.page_size() - 1) / c.page_size());
  }
  // The page table after the caches: it is smaller than any of them, so
  // limits too large to serve fail on a cache, with its name, before the
  // host builds the table.
  std::vector<int32_t> identity(batch * pagesPerSeq);
  for (size_t i = 0; i < identity.size(); ++i)
    identity[i] = static_cast<int32_t>(i);
  StatusOr<CUdeviceptr> pageTable =
      allocate(identity.size() * sizeof(int32_t), "the page table");
  if (!pageTable.ok())
    return pageTable.error();
  status = upload(*pageTable, identity.data(), identity.size() * sizeof(int32_t));
  if (!status.ok())
    return status;
  for (DeviceCacheView &view : caches)
    view.pageTable = *pageTable;
  for (const artifact::Step &step : m.steps())
    arenaSize = std::max<uint64_t>(arenaSize, step.arena_size());
  StatusOr<CUdeviceptr> a = allocate(arenaSize, "the step arena");
  if (!a.ok())
    return a.error();
  arena = *a;
  if (attentionPartialFloats > 0) {
    StatusOr<CUdeviceptr> p =
        allocate(attentionPartialFloats * sizeof(float),
                 "the sparse attention partials");
    if (!p.ok())
      return p.error();
    attentionPartials = *p;
  }

  // Generated kernels read their inputs through a table of pointers; the
  // addresses are fixed once the arena exists, so each table is built once.
  for (const artifact::Step &step : m.steps())
    for (const artifact::Launch &l : step.launches()) {
      if (l.kernel() != "elementwise")
        continue;
      const artifact::Attr *symbol = findAttr(l, "symbol");
      if (!symbol)
        return Status::error("a generated kernel launch names no symbol");
      if (!generated.count(symbol->s())) {
        CUfunction fn;
        status = driver.check(driver.cuModuleGetFunction(
                                  &fn, generatedModule, symbol->s().c_str()),
                              "cuModuleGetFunction");
        if (!status.ok())
          return status.withContext(symbol->s());
        generated[symbol->s()] = fn;
      }
      std::vector<CUdeviceptr> inputs;
      for (const artifact::Operand &op : l.operands()) {
        StatusOr<Tensor> t = operand(step, op, /*tokens=*/1);
        if (!t.ok())
          return t.error();
        inputs.push_back(t->data);
      }
      StatusOr<CUdeviceptr> table =
          allocate(inputs.size() * sizeof(CUdeviceptr), "input pointers");
      if (!table.ok())
        return table.error();
      status = upload(*table, inputs.data(), inputs.size() * sizeof(CUdeviceptr));
      if (!status.ok())
        return status;
      inputTables[&l] = *table;
    }
  // The zeroing and uploads above ran on the legacy stream, which the
  // non-blocking step stream does not wait for.
  return driver.check(driver.cuCtxSynchronize(), "cuCtxSynchronize");
}

StatusOr<CudaDevice::Tensor> CudaDevice::operand(const artifact::Step &step,
                                                 const artifact::Operand &op,
                                                 int64_t tokens) {
  Tensor t;
  switch (op.kind_case()) {
  case artifact::Operand::kBuffer: {
    if (op.buffer() >= uint32_t(step.buffers_size()))
      return Status::error("operand names a missing buffer");
    const artifact::Buffer &b = step.buffers(op.buffer());
    t.shape = runtime::bufferShape(b, tokens);
    if (b.offset() + t.numel() * runtime::elementBytes(b.dtype()) > arenaSize)
      return Status::error("buffer '" + b.name() + "' runs past the arena");
    t.data = arena + b.offset();
    return t;
  }
  case artifact::Operand::kWeight: {
    if (op.weight() >= weights.size())
      return Status::error("operand names a missing weight");
    const artifact::Weight &w = manifest->weights(op.weight());
    t.shape.assign(w.shape().begin(), w.shape().end());
    t.data = weights[op.weight()];
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

Status CudaDevice::writeArena(uint64_t offset, const void *data,
                              size_t bytes) {
  if (offset + bytes > arenaSize)
    return Status::error("arena write past its end");
  return driver.check(
      driver.cuMemcpyHtoDAsync(arena + offset, data, bytes, stream),
      "cuMemcpyHtoDAsync");
}

Status CudaDevice::readArena(uint64_t offset, void *data, size_t bytes) {
  if (offset + bytes > arenaSize)
    return Status::error("arena read past its end");
  // The one synchronisation of a step: its outputs back to the host.
  Status status = driver.check(
      driver.cuMemcpyDtoHAsync(data, arena + offset, bytes, stream),
      "cuMemcpyDtoHAsync");
  if (!status.ok())
    return status;
  return driver.check(driver.cuStreamSynchronize(stream),
                      "cuStreamSynchronize");
}

Status CudaDevice::launch(const artifact::Step &step, const artifact::Launch &l,
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
  auto need = [&](size_t ins, size_t outs) {
    return in.size() >= ins && out.size() == outs;
  };
  const CudaKernels &k = *kernels;
  const std::string &name = l.kernel();
  CUfunction fn = nullptr; // the specialised kernel, if any
  if (const artifact::Attr *s = findAttr(l, "specialized")) {
    auto found = specialized.find(s->s());
    if (found != specialized.end())
      fn = found->second;
  }
  if (name == "embedding" && need(2, 1))
    return k.embedding(in[0].data, in[0].shape[0], in[0].shape[1], in[1].data,
                       tokens, out[0].data, stream);
  if (name == "rms_norm" && need(2, 1)) {
    int64_t dim = in[0].shape.back();
    return k.rmsNorm(in[0].data, in[1].data, in[0].numel() / dim, dim,
                     attrFloat(l, "eps", 1e-6), out[0].data, stream, fn);
  }
  if (name == "layer_norm" && need(2, 1)) {
    int64_t dim = in[0].shape.back();
    return k.layerNorm(in[0].data, in[1].data, in.size() > 2 ? in[2].data : 0,
                       in[0].numel() / dim, dim, attrFloat(l, "eps", 1e-6),
                       out[0].data, stream);
  }
  if ((name == "matmul" || name == "fp8_matmul") && need(2, 1)) {
    int64_t n = in[1].shape[0], kk = in[1].shape[1];
    CUdeviceptr bias = name == "matmul" && in.size() > 2 ? in[2].data : 0;
    return k.matmul(in[0].data, in[1].data, bias, in[0].numel() / kk, n, kk,
                    out[0].data, stream, fn);
  }
  if (name == "head_matmul" && need(2, 1)) {
    bool transpose = attrInt(l, "transpose_weight", 0) != 0;
    int64_t n = transpose ? in[1].shape[1] : in[1].shape[2];
    return k.headMatmul(in[0].data, in[1].data, transpose, in[0].shape[0],
                        in[0].shape[1], in[0].shape[2], n, out[0].data, stream);
  }
  if (name == "rope" && need(2, 1)) {
    if (out[0].data != in[0].data) {
      Status copied = k.copyColumns(in[0].data, 1, 0, out[0].data, 1, 0,
                                    in[0].numel(), 1, stream);
      if (!copied.ok())
        return copied;
    }
    cpu::RopeParams p = runtime::ropeParams(l);
    int64_t rowDim = out[0].shape.back();
    return k.rope(out[0].data, in[1].data, tokens,
                  out[0].numel() / std::max<int64_t>(tokens * rowDim, 1),
                  rowDim, p, stream);
  }
  if (name == "copy_columns" && need(1, 1)) {
    int64_t srcStride = in[0].shape.back(), dstStride = out[0].shape.back();
    int64_t srcOffset = attrInt(l, "src_offset", 0);
    int64_t dstOffset = attrInt(l, "dst_offset", 0);
    int64_t cols = std::min(srcStride - srcOffset, dstStride - dstOffset);
    return k.copyColumns(in[0].data, srcStride, srcOffset, out[0].data,
                         dstStride, dstOffset, in[0].numel() / srcStride, cols,
                         stream);
  }
  if (name == "add" && need(2, 1))
    return k.add(in[0].data, in[1].data, in[0].numel(), out[0].data, stream);
  if (name == "add_scalar_i32" && need(1, 1)) {
    if (attrInt(l, "value", 0) != 1)
      return Status::error("the cuda device adds only 1 (causal bounds)");
    return k.causalBounds(in[0].data, in[0].numel(), out[0].data, stream);
  }
  if (name == "swiglu" && need(2, 1)) {
    const artifact::Attr *limit = findAttr(l, "limit");
    return k.swiglu(in[0].data, in[1].data, in[0].numel(),
                    attrFloat(l, "alpha", 1.0), limit != nullptr,
                    limit ? limit->f() : 0.0, attrFloat(l, "up_offset", 0.0),
                    out[0].data, stream);
  }
  if (name == "moe_route" && need(1, 2)) {
    StatusOr<cpu::RouteParams> route = runtime::sigmoidRouteParams(l, "cuda");
    if (!route.ok())
      return route.error();
    const cpu::RouteParams &p = *route;
    return k.moeRouteSigmoid(in[0].data, in.size() > 1 ? in[1].data : 0,
                             tokens, in[0].shape[1], p, out[0].data,
                             out[1].data, stream);
  }
  if (name == "expert_matmul" && need(3, 1)) {
    bool weighted = attrInt(l, "segments.3", 0) != 0;
    if (attrInt(l, "segments.4", 0) != 0)
      return Status::error("expert biases are not supported on cuda yet");
    const Tensor &w = in[1];
    return k.expertMatmul(in[0].data, in[0].shape.size() == 3, w.data,
                          w.shape[0], w.shape[1], w.shape[2], in[2].data,
                          tokens, in[2].shape[1], weighted ? in[3].data : 0,
                          out[0].data, stream);
  }
  if (name == "cache_write" && need(3, 0) && in[0].cache)
    return k.cacheWrite(*in[0].cache, in[1].data, in[2].data,
                        in.size() > 3 ? in[3].data : 0, tokens, stream);
  if (name == "dsa_indexer_scores" && need(3, 1) && in[1].cache)
    return k.dsaIndexerScores(in[0].data, in[2].data, *in[1].cache,
                              in.size() > 3 ? in[3].data : 0, tokens,
                              in[0].shape[1], attrFloat(l, "scale", 1.0),
                              out[0].data, stream, fn);
  if (name == "dsa_index_select" && need(2, 1))
    return k.dsaIndexSelect(in[0].data, in[1].data, tokens, in[0].shape[1],
                            attrInt(l, "top_k", 1), out[0].data, stream);
  if (name == "sparse_attention" && need(3, 1) && in[1].cache) {
    bool hasSeq = attrInt(l, "segments.3", 0) != 0;
    bool hasSinks = attrInt(l, "segments.4", 0) != 0;
    CUdeviceptr seq = hasSeq ? in[3].data : 0;
    CUdeviceptr sinks = hasSinks ? in[3 + hasSeq].data : 0;
    return k.sparseAttention(
        in[0].data, *in[1].cache, in[2].data, in[2].shape[1], seq, tokens,
        in[0].shape[1], attrFloat(l, "scale", 1.0), attrInt(l, "value_dim", 0),
        sinks, out[0].data, stream, fn, attentionPartials,
        attentionPartialFloats);
  }
  if (name == "elementwise" && out.size() == 1) {
    const artifact::Attr *symbol = findAttr(l, "symbol");
    auto fn = symbol ? generated.find(symbol->s()) : generated.end();
    auto table = inputTables.find(&l);
    if (fn == generated.end() || table == inputTables.end())
      return Status::error("generated kernel not loaded");
    int64_t n = out[0].numel();
    CUdeviceptr inputs = table->second, result = out[0].data;
    void *params[] = {&n, &inputs, &result};
    unsigned blocks = static_cast<unsigned>(
        std::min<int64_t>((n + 255) / 256, 65535 * 8));
    if (n == 0)
      return Status::success();
    return driver.check(driver.cuLaunchKernel(fn->second, blocks, 1, 1, 256, 1,
                                              1, 0, stream, params, nullptr),
                        "cuLaunchKernel (generated)");
  }
  return Status::error("kernel '" + name + "' got " + std::to_string(in.size()) +
                       " operands and " + std::to_string(out.size()) +
                       " results, which it does not take");
}
