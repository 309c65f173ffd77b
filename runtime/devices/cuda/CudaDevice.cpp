//===- CudaDevice.cpp - Running artifact launches on an NVIDIA GPU --------===//

#include "runtime/devices/cuda/CudaDevice.h"
#include "runtime/devices/cuda/MatmulProbe.h"
#include "runtime/core/Dispatch.h"
#include "runtime/core/LaunchParams.h"

#include <algorithm>
#include <cstring>
#include <tuple>

using namespace daybreak;
using namespace daybreak::cuda;
using artifact::DType;
using runtime::BoundArg;
using runtime::BoundLaunch;
using runtime::PreparedLaunch;
namespace abi = daybreak::abi;

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
  // The side queue's stream, and the events between the two (ordering
  // only: no timing).
  if (status.ok())
    status = d.check(d.cuStreamCreate(&gpu->sideStream, CU_STREAM_NON_BLOCKING),
                     "cuStreamCreate");
  if (status.ok())
    status = d.check(d.cuEventCreate(&gpu->forkEvent, CU_EVENT_DISABLE_TIMING),
                     "cuEventCreate");
  if (!status.ok())
    return status;
  return gpu;
}

CudaDevice::~CudaDevice() {
  driver.cuCtxSetCurrent(context);
  // A rank whose peer died would wait forever for its collectives: the
  // watched wait aborts them past the timeout.
  if (nccl && stream)
    (void)nccl->wait(stream, "closing the device");
  nccl.reset();
  for (auto &[key, graph] : graphs)
    driver.cuGraphExecDestroy(graph);
  for (CUevent e : events)
    driver.cuEventDestroy(e);
  for (CUevent e : sideDone)
    driver.cuEventDestroy(e);
  if (forkEvent)
    driver.cuEventDestroy(forkEvent);
  if (sideStream) {
    driver.cuStreamSynchronize(sideStream);
    driver.cuStreamDestroy(sideStream);
  }
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

Status CudaDevice::runLaunches(const runtime::PreparedStep &step,
                               int64_t tokens) {
  // A finite check reads each launch's results right after it: one queue.
  serialQueues = checksFiniteResults();
  if (step.step->name() != "decode" || checksFiniteResults()) {
    Status launched = Device::runLaunches(step, tokens);
    Status joined = joinSideQueue();
    return launched.ok() ? joined : launched;
  }
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
    // A capture ends with every stream it forked joined back.
    Status joined = joinSideQueue();
    if (launched.ok())
      launched = joined;
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

StatusOr<double> CudaDevice::timeLaunches(const runtime::PreparedStep &step,
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
CudaDevice::profileLaunches(const runtime::PreparedStep &step,
                            int64_t tokens) {
  // Each launch is timed alone, between events on the main stream: the
  // side queue's launches run there too (and their overlap goes unseen).
  serialQueues = true;
  int n = static_cast<int>(step.launches.size());
  StatusOr<CUevent> last = event(n);
  if (!last.ok())
    return last.error();
  // A decode step runs as a graph (runLaunches), so its profile is recorded
  // as one too, with an event between launches: issued one by one, a launch
  // of a few microseconds would be timed at the host's pace of issuing it.
  // The events break the programmatic edges, so the times add up to a bit
  // more than a replay of the step's own graph.
  const bool graphed = step.step->name() == "decode" && !checksFiniteResults();
  if (graphed) {
    Status status =
        driver.check(driver.cuStreamBeginCapture(
                         stream, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL),
                     "cuStreamBeginCapture");
    if (!status.ok())
      return status;
  }
  Status recorded = Status::success();
  for (int i = 0; i <= n && recorded.ok(); ++i) {
    // Under capture only an external record becomes a node that records
    // the event when the graph runs (a plain one orders the capture).
    recorded = driver.check(
        driver.cuEventRecordWithFlags(events[i], stream,
                                      graphed ? CU_EVENT_RECORD_EXTERNAL : 0),
        "cuEventRecordWithFlags");
    if (recorded.ok() && i < n)
      recorded =
          launch(step.launches[i], tokens).withContext(step.launches[i].label);
  }
  if (graphed) {
    CUgraph graph = nullptr;
    Status status = driver.check(driver.cuStreamEndCapture(stream, &graph),
                                 "cuStreamEndCapture");
    if (recorded.ok())
      recorded = status;
    CUgraphExec exec = nullptr;
    if (recorded.ok())
      recorded =
          driver.check(driver.cuGraphInstantiateWithFlags(&exec, graph, 0),
                       "cuGraphInstantiateWithFlags");
    if (graph)
      driver.cuGraphDestroy(graph);
    // The first replay warms the instruction caches and the weights' TLB
    // entries as the step's graph already is; the second is timed.
    for (int replay = 0; replay < 2 && recorded.ok(); ++replay) {
      recorded =
          driver.check(driver.cuGraphLaunch(exec, stream), "cuGraphLaunch");
      if (recorded.ok())
        recorded = driver.check(driver.cuStreamSynchronize(stream),
                                "cuStreamSynchronize");
    }
    if (exec)
      driver.cuGraphExecDestroy(exec);
  }
  if (!recorded.ok())
    return recorded;
  std::vector<double> ms;
  for (int i = 0; i < n; ++i) {
    StatusOr<double> t = elapsed(events[i], events[i + 1]);
    if (!t.ok())
      return t.error();
    ms.push_back(*t);
  }
  return ms;
}

Status CudaDevice::uploadPageTable(int64_t first, int64_t count) {
  // Pageable source: the copy is staged before the call returns, so the
  // host table may change right after; kernels queued later see it.
  return driver.check(
      driver.cuMemcpyHtoDAsync(pageTable + first * sizeof(int32_t),
                               hostPageTable() + first,
                               count * sizeof(int32_t), stream),
      "cuMemcpyHtoDAsync");
}

Status CudaDevice::copyCacheBytes(int cache, uint64_t dst, uint64_t src,
                                  uint64_t bytes) {
  if (bytes == 0)
    return Status::success();
  CUdeviceptr base = caches[cache].base;
  return driver.check(
      driver.cuMemcpyDtoDAsync(base + dst, base + src, bytes, stream),
      "cuMemcpyDtoDAsync");
}

Status CudaDevice::readCacheBytes(int cache, uint64_t src, void *out,
                                  uint64_t bytes) {
  Status status = driver.check(
      driver.cuMemcpyDtoHAsync(out, caches[cache].base + src, bytes, stream),
      "cuMemcpyDtoHAsync");
  if (!status.ok())
    return status;
  return synchronize("reading cache bytes");
}

Status CudaDevice::writeCacheBytes(int cache, uint64_t dst, const void *in,
                                   uint64_t bytes) {
  return driver.check(
      driver.cuMemcpyHtoDAsync(caches[cache].base + dst, in, bytes, stream),
      "cuMemcpyHtoDAsync");
}

Status CudaDevice::zeroCacheBytes(int cache, uint64_t offset,
                                  uint64_t bytes) {
  return driver.check(driver.cuMemsetD8Async(caches[cache].base + offset, 0,
                                             bytes, stream),
                      "cuMemsetD8Async");
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
  if (name == "library")
    DAYBREAK_RETURN_IF_ERROR(
        checkLibraryFingerprint(*image, cudaKernelsFingerprint()));
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

Status CudaDevice::prepare(const artifact::ArtifactFile &file,
                           const std::vector<runtime::PreparedStep> &prepared) {
  manifest = &file.manifest();
  steps = &prepared;
  const artifact::Manifest &m = *manifest;
  Status status = launchers().check(prepared, "cuda");
  if (!status.ok())
    return status;
  size_t launches = 0;
  bool needsGenerated = false;
  for (const runtime::PreparedStep &step : prepared) {
    for (const PreparedLaunch &l : step.launches) {
      ++launches;
      needsGenerated |= l.kernel == abi::KernelId::Elementwise;
    }
    // An event after each side launch of the step with the most.
    while (sideDone.size() < step.sideLaunches) {
      CUevent e = nullptr;
      DAYBREAK_RETURN_IF_ERROR(driver.check(
          driver.cuEventCreate(&e, CU_EVENT_DISABLE_TIMING), "cuEventCreate"));
      sideDone.push_back(e);
    }
  }
  specializedFns.assign(launches, nullptr);
  gemmTiles.assign(launches, Fp8GemmTile{0, 0, 0, 0});
  generatedFns.assign(launches, nullptr);
  inputTables.assign(launches, 0);
  // sm_90a cubins use Hopper-only features and run on compute 9.0 only.
  int major = 0, minor = 0;
  driver.cuDeviceGetAttribute(
      &major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, device);
  driver.cuDeviceGetAttribute(
      &minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, device);
  std::string arch = "sm_" + std::to_string(major) + std::to_string(minor) +
                     (major == 9 && minor == 0 ? "a" : "");
  status = loadModule(driver, file, "library", arch, libraryModule,
                      libraryLoadedAs);
  if (!status.ok())
    return status;
  StatusOr<CudaKernels> loaded = CudaKernels::load(driver, libraryModule);
  if (!loaded.ok())
    return loaded.error();
  kernels.emplace(loaded->withMxfp4Kernel(mxfp4Kernel));
  // Launches the compiler specialised name their instantiation in the
  // library module: resolved once per launch.
  std::map<std::string, CUfunction> byName;
  for (const runtime::PreparedStep &step : prepared)
    for (const PreparedLaunch &l : step.launches) {
      if (l.specialized.empty())
        continue;
      CUfunction &fn = byName[l.specialized];
      if (!fn) {
        status = driver.check(driver.cuModuleGetFunction(
                                  &fn, libraryModule, l.specialized.c_str()),
                              "cuModuleGetFunction");
        if (status.ok() && l.kernel == abi::KernelId::DsaIndexerScores)
          status = kernels->allowSharedMemory(fn);
        if (!status.ok())
          return status.withContext(l.label + ": specialised kernel " +
                                    l.specialized);
      }
      specializedFns[l.ordinal] = fn;
    }
  // The FP8 GEMM tiles lm-tile chose: checked once against what the kernel
  // takes.
  for (const runtime::PreparedStep &step : prepared)
    for (const PreparedLaunch &l : step.launches) {
      if (l.kernel != abi::KernelId::Fp8Matmul ||
          !l.has(abi::Fp8Matmul::P::cuda_tile))
        continue;
      const std::vector<int64_t> &t = l.ints(abi::Fp8Matmul::P::cuda_tile);
      std::optional<Fp8GemmTile> read = fp8GemmTileFrom(t.data(), t.size());
      if (!read)
        return Status::error(l.label +
                             ": cuda_tile is not an FP8 GEMM tile the kernel "
                             "takes: " +
                             fp8GemmTileRule());
      const Fp8GemmTile tile = *read;
      if (l.specialized.empty() &&
          tile.stages != fp8GemmLibraryStages(tile.rows))
        return Status::error(
            l.label + ": cuda_tile has " + std::to_string(tile.stages) +
            " stages but the launch names no instantiation "
            "(the library's has " +
            std::to_string(fp8GemmLibraryStages(tile.rows)) + ")");
      if (specializedFns[l.ordinal])
        status = kernels->allowSharedMemory(specializedFns[l.ordinal]);
      if (!status.ok())
        return status.withContext(l.label);
      gemmTiles[l.ordinal] = tile;
    }
  if (needsGenerated) {
    status = loadModule(driver, file, "generated", arch, generatedModule,
                        generatedLoadedAs);
    if (!status.ok())
      return status;
    // Images that say their kernels begin as programmatic dependents are
    // launched so; older ones as ordinary kernels.
    for (const artifact::CodeImage &image : m.code())
      if (image.module() == "generated")
        generatedDependent = image.dependent_launch();
  }

  // Weights stay as stored: uploaded byte for byte from the mapped artifact.
  status = runtime::checkWeightScales(m, prepared);
  if (!status.ok())
    return status;

  // Partials of sparse and dense attention split over their keys (decode),
  // beside the plan's arena, one buffer for both (launches run in order on
  // one stream): a few MB at DeepSeek-V3.2's and gpt-oss's dimensions.
  for (const runtime::PreparedStep &step : prepared)
    for (const PreparedLaunch &l : step.launches) {
      if (l.kernel == abi::KernelId::SparseAttention)
        attentionPartialFloats = std::max(
            attentionPartialFloats,
            sparseAttentionScratchFloats(
                l.i(abi::SparseAttention::P::value_dim)));
      if (l.kernel == abi::KernelId::Attention) {
        // Shapes checked at load (prepareSteps): q [T, Hq, D], output
        // [T, Hq, Dv].
        using In = abi::Attention::In;
        int64_t heads = l.args[In::q].constant[1];
        int64_t valueDim = l.args[l.numOperands].constant[2];
        // A decode step (at most a token a cache slot) unsplit, too.
        attentionPartialFloats = std::max(
            {attentionPartialFloats,
             attentionScratchFloats(heads / l.i(abi::Attention::P::kv_heads),
                                    valueDim),
             decodeAttentionScratchFloats(
                 std::min(m.max_tokens(), m.max_batch()), heads, valueDim)});
      }
    }

  // Scratch of grouped expert matmuls on the tensor cores, its own buffer
  // (the attention partials may be smaller): each extent at the maximum
  // token count, indices [T, slots], weights [E, N, K] (a workspace's too).
  for (const runtime::PreparedStep &step : prepared)
    for (const PreparedLaunch &l : step.launches) {
      if (l.kernel == abi::KernelId::Mxfp4ExpertMatmul) {
        using In = abi::Mxfp4ExpertMatmul::In;
        const runtime::PreparedArg &indices = l.args[In::indices],
                                   &weight = l.args[In::weight];
        auto extent = [&](const runtime::PreparedArg &a, int d) {
          return a.constant[d] + a.perToken[d] * m.max_tokens();
        };
        int64_t slots = extent(indices, 1), tokens = extent(indices, 0);
        int64_t experts = extent(weight, 0), n = extent(weight, 1),
                k = extent(weight, 2);
        bool routed = l.args[In::routing_weights].kind !=
                      runtime::PreparedArg::Kind::Absent;
        if (slots < 1)
          continue;
        // The warpgroup GEMM of a step of many pairs (Mxfp4Kernel::Auto):
        // its grouping and routed results at the most tokens.
        if (tokens * slots >= mxfp4WarpgroupMinPairs(mxfp4Kernel) &&
            CudaKernels::mxfp4WarpgroupApplies(experts, n, k, 0, 0))
          expertScratchBytes = std::max(
              expertScratchBytes,
              expertGemmScratchBytes(tokens, slots, experts, n, routed));
        // The tensor-core MXFP4 GEMV of a decode step (at most
        // kExpertGemvMaxPairs pairs): each routed pair's result.
        if (!routed)
          continue;
        tokens = std::min(tokens, kExpertGemvMaxPairs / slots);
        expertScratchBytes = std::max(
            expertScratchBytes, expertGemvScratchBytes(tokens, slots, n, true));
        continue;
      }
      if (l.kernel != abi::KernelId::ExpertMatmul)
        continue;
      using In = abi::ExpertMatmul::In;
      auto extent = [&](unsigned arg, int d) {
        const runtime::PreparedArg &a = l.args[arg];
        return a.constant[d] + a.perToken[d] * m.max_tokens();
      };
      // Only launches the tensor-core path takes: an e4m3 weight (the one
      // kind with block sizes) of scale blocks it does not read, such as
      // the MXFP4 routes' [1, 32], stays on the CUDA cores.
      if (l.has(abi::ExpertMatmul::P::block_size)) {
        const std::vector<int64_t> &blocks =
            l.ints(abi::ExpertMatmul::P::block_size);
        DeviceWeight e4m3;
        e4m3.type = 2;
        e4m3.blockN = blocks[0];
        e4m3.blockK = blocks[1];
        if (!CudaKernels::tensorGemmApplies(e4m3, extent(In::weight, 2)))
          continue;
      }
      bool routed = l.args[In::routing_weights].kind !=
                    runtime::PreparedArg::Kind::Absent;
      expertScratchBytes =
          std::max(expertScratchBytes,
                   expertGemmScratchBytes(
                       extent(In::indices, 0), extent(In::indices, 1),
                       extent(In::weight, 0), extent(In::weight, 1), routed));
    }

  // --precision=bf16 and fp8: the rounded (or FP8) copies of matmul inputs
  // (InputRounding), for the largest launch. A matmul's or an expert
  // matmul's need is CudaKernels's own (matmulRoundingFloats,
  // expertRoundingFloats, evaluated where each path needs the most); the
  // other kernels round their whole input unless the
  // tensor-core GEMMs take it (more than 8 rows of 16-byte aligned x on a
  // weight they apply to), so at most 8 rows of such a launch are copied.
  // The exact default takes scratch only for the warpgroup GEMMs' three
  // bf16 parts of x (exactMatmulScratchFloats).
  for (const runtime::PreparedStep &step : prepared)
    for (const PreparedLaunch &l : step.launches) {
      namespace K = abi;
      bool matmul =
          l.kernel == K::KernelId::Matmul || l.kernel == K::KernelId::Fp8Matmul;
      bool experts = l.kernel == K::KernelId::ExpertMatmul;
      if (!matmul && !experts && l.kernel != K::KernelId::HeadMatmul &&
          l.kernel != K::KernelId::Mxfp4ExpertMatmul)
        continue;
      const bool mxfp4 = l.kernel == K::KernelId::Mxfp4ExpertMatmul;
      if (!bf16Inputs && !matmul && !mxfp4)
        continue;
      // Operand 0 is the input, 1 the weight, in all five.
      const runtime::PreparedArg &x = l.args[0], &w = l.args[1];
      if (w.dtype == artifact::F32)
        continue;
      auto numel = [&](int64_t tokens) {
        int64_t n = 1;
        for (int d = 0; d < x.rank; ++d)
          n *= x.constant[d] + x.perToken[d] * tokens;
        return n;
      };
      int64_t tokens = m.max_tokens();
      int64_t k = w.constant[w.rank - 1] + w.perToken[w.rank - 1] * tokens;
      DeviceWeight stored;
      stored.type = w.dtype == artifact::BF16 ? 1 : 2;
      stored.blockK = 128;
      if (l.kernel == K::KernelId::Fp8Matmul)
        stored.blockK = l.ints(abi::Fp8Matmul::P::block_size)[1];
      stored.blockN = 128;
      if (l.kernel == K::KernelId::Fp8Matmul)
        stored.blockN = l.ints(abi::Fp8Matmul::P::block_size)[0];
      if (experts && l.has(abi::ExpertMatmul::P::block_size)) {
        stored.blockN = l.ints(abi::ExpertMatmul::P::block_size)[0];
        stored.blockK = l.ints(abi::ExpertMatmul::P::block_size)[1];
      }
      bool xAligned =
          x.kind == runtime::PreparedArg::Kind::Buffer && x.offset % 16 == 0;
      if (mxfp4) {
        // CudaKernels's own need (mxfp4RoundingFloats): each path's grows
        // with the tokens, so the most is at the last count below the
        // warpgroup GEMM's pairs and at the most tokens.
        using In = abi::Mxfp4ExpertMatmul::In;
        const runtime::PreparedArg &indices = l.args[In::indices];
        int64_t slots = indices.constant[1] + indices.perToken[1] * tokens;
        int64_t below =
            std::min<int64_t>(tokens, (kMxfp4WarpgroupMinPairs - 1) /
                                          std::max<int64_t>(slots, 1));
        for (int64_t t : {below, tokens})
          roundScratchFloats =
              std::max(roundScratchFloats,
                       CudaKernels::mxfp4RoundingFloats(
                           w.constant[0], w.constant[1], k, t, slots,
                           /*perSlotInput=*/x.rank == 3, bf16Inputs, xAligned,
                           mxfp4WarpgroupMinPairs(mxfp4Kernel)));
        continue;
      }
      if (matmul) {
        // Each path needs more with more rows: the most is at 8 tokens,
        // at the last token count below the many-row GEMMs' row minimum,
        // and at the most. The FP8 GEMM's split-K partials grow with the
        // rows on a recorded tile; without one, its splits are chosen
        // per row count, so every count past the GEMVs' is asked.
        auto rows = [&](int64_t t) {
          return numel(t) / std::max<int64_t>(k, 1);
        };
        // A decode step takes a token a sequence (one a cache slot): a
        // recorded tile's split partials are sized for those, not for
        // the prefill budget.
        if (step.step->name() == "decode")
          tokens = std::min(tokens, m.max_batch());
        const Fp8GemmTile &tile = gemmTiles[l.ordinal];
        int64_t n = w.constant[0] + w.perToken[0] * tokens;
        auto need = [&](int64_t t) -> int64_t {
          if (!bf16Inputs)
            return CudaKernels::exactMatmulScratchFloats(stored, rows(t), k,
                                                         xAligned);
          return kernels->matmulRoundingFloats(stored, rows(t), n, k, xAligned,
                                               fp8Inputs,
                                               tile.rows ? &tile : nullptr);
        };
        int64_t below = std::min<int64_t>(tokens, kWarpgroupGemmMinRows);
        while (below > 1 && rows(below) >= kWarpgroupGemmMinRows)
          --below;
        for (int64_t t : {std::min<int64_t>(tokens, 8), below, tokens})
          roundScratchFloats = std::max(roundScratchFloats, need(t));
        if (fp8Inputs && !tile.rows && stored.type == 2)
          for (int64_t t = 9; t < tokens; ++t)
            roundScratchFloats = std::max(roundScratchFloats, need(t));
        continue;
      }
      if (experts && (stored.type == 1 || w.dtype == artifact::F8E4M3FN)) {
        // CudaKernels's own need (expertRoundingFloats): each of its
        // paths needs more with more tokens, so the most is at the last
        // token count of each: 8 (the GEMVs), the last below the
        // warpgroup GEMM's row minimum, and the most tokens.
        using In = abi::ExpertMatmul::In;
        const runtime::PreparedArg &indices = l.args[In::indices];
        int64_t slots = indices.constant[1] + indices.perToken[1] * tokens;
        bool perSlot = x.rank == 3; // x [T, slots, K]
        int64_t below =
            (kWarpgroupGemmMinRows - 1) / std::max<int64_t>(slots, 1);
        for (int64_t t : {std::min<int64_t>(tokens, 8),
                          std::min<int64_t>(tokens, below), tokens})
          roundScratchFloats = std::max(
              roundScratchFloats, CudaKernels::expertRoundingFloats(
                                      stored, w.constant[0], w.constant[1], k,
                                      t, slots, perSlot, xAligned, fp8Inputs));
        continue;
      }
      if (l.kernel == K::KernelId::HeadMatmul) {
        // x [T, H, K]: none on the tensor-core GEMM (headMatmul's own
        // rule; weights start 256-byte aligned), else all of it.
        bool transpose = l.has(abi::HeadMatmul::P::transpose_weight) &&
                         l.i(abi::HeadMatmul::P::transpose_weight);
        int64_t heads = x.constant[1] + x.perToken[1] * tokens;
        roundScratchFloats = std::max(
            roundScratchFloats,
            CudaKernels::headMatmulRoundingFloats(
                stored, transpose,
                numel(tokens) / std::max<int64_t>(heads * k, 1), heads, k,
                xAligned && CudaKernels::headRowsAligned(
                                x.offset, x.rowStride ? x.rowStride : k),
                x.rowStride));
        continue;
      }
      roundScratchFloats = std::max(roundScratchFloats, numel(tokens));
    }

  // Everything lives in one allocation, sized here: the weights, the page
  // table, the caches, the arena, the attention partials and the generated
  // kernels' input tables. One cuMemAlloc keeps the footprint what the plan
  // says (no per-buffer rounding) and leaves nothing to allocate later.
  DAYBREAK_RETURN_IF_ERROR(planCaches(m));
  const runtime::CachePlan &plan = cachePlan();

  // kda_chunk's scratch (its chunk table and per-chunk products), at the
  // maximum token count over every slot.
  for (const runtime::PreparedStep &step : prepared)
    for (const PreparedLaunch &l : step.launches) {
      if (l.kernel != abi::KernelId::KdaChunk)
        continue;
      using In = abi::KdaChunk::In;
      const runtime::PreparedArg &q = l.args[In::q], &v = l.args[In::v];
      kdaScratchBytes = std::max<uint64_t>(
          kdaScratchBytes,
          CudaKernels::kdaChunkScratchBytes(
              q.constant[0] + q.perToken[0] * m.max_tokens(), plan.batch,
              q.constant[1], q.constant[2], v.constant[2]));
    }
  // all_gather's rank-major result, at the maximum token count.
  bool collectives = false;
  for (const runtime::PreparedStep &step : prepared)
    for (const PreparedLaunch &l : step.launches) {
      collectives |= l.kernel == abi::KernelId::AllReduce ||
                     l.kernel == abi::KernelId::AllGather;
      if (l.kernel != abi::KernelId::AllGather)
        continue;
      const runtime::PreparedArg &out = l.args[l.numOperands];
      uint64_t n = 1;
      for (unsigned d = 0; d < out.rank; ++d)
        n *= out.constant[d] + out.perToken[d] * m.max_tokens();
      gatherScratchBytes = std::max(gatherScratchBytes, n * sizeof(float));
    }
  if (collectives) {
    runtime::Communicator *host = communicator();
    if (!host)
      return Status::error(
          "the plan has collectives but the device has no communicator "
          "(load every rank's artifact)");
    // One NCCL communicator over every rank: a collective over groups of
    // them (tensor parallelism inside expert-parallel groups) would need
    // one a group (ncclCommSplit), not built yet.
    for (const runtime::PreparedStep &step : prepared)
      for (const PreparedLaunch &l : step.launches) {
        int64_t ranks = l.kernel == abi::KernelId::AllReduce
                            ? l.i(abi::AllReduce::P::ranks)
                        : l.kernel == abi::KernelId::AllGather
                            ? l.i(abi::AllGather::P::ranks)
                            : host->size();
        if (ranks != host->size())
          return Status::error(
              l.label + ": a collective over groups of " +
              std::to_string(ranks) + " of the " +
              std::to_string(host->size()) +
              " ranks, which the CUDA device does not run yet (its NCCL "
              "communicator spans every rank); the CPU device runs it");
      }
    StatusOr<std::unique_ptr<NcclCommunicator>> joined =
        NcclCommunicator::create(driver, *host);
    if (!joined.ok())
      return joined.error().withContext("rank " + std::to_string(host->rank()) +
                                        " joining NCCL");
    nccl = std::move(*joined);
  }
  // mhc_pre's and mhc_post_pre's partial sums of their split products, at
  // the maximum token count.
  for (const runtime::PreparedStep &step : prepared)
    for (const PreparedLaunch &l : step.launches) {
      if (l.kernel != abi::KernelId::MhcPre &&
          l.kernel != abi::KernelId::MhcPostPre)
        continue;
      const runtime::PreparedArg &x =
          l.args[l.kernel == abi::KernelId::MhcPre
                     ? int(abi::MhcPre::In::streams)
                     : int(abi::MhcPostPre::In::streams)];
      auto extent = [&](int d) {
        return x.constant[d] + x.perToken[d] * m.max_tokens();
      };
      mhcScratchBytes = std::max(
          mhcScratchBytes, mhcPreScratchBytes(extent(0), extent(1), extent(2)));
    }
  {
    size_t total = 0;
    for (const artifact::Weight &w : m.weights())
      total += alignUp(std::max<size_t>(w.size(), 1));
    total += alignUp(std::max<size_t>(plan.pageTableEntries() * sizeof(int32_t), 1));
    for (const runtime::CacheLayout &layout : plan.caches)
      total += alignUp(layout.bytes);
    uint64_t arenaBytes = 0;
    for (const runtime::PreparedStep &step : prepared) {
      arenaBytes = std::max<uint64_t>(arenaBytes, step.step->arena_size());
      for (const PreparedLaunch &l : step.launches)
        if (l.kernel == abi::KernelId::Elementwise)
          total += alignUp(l.numOperands * sizeof(CUdeviceptr));
    }
    total += alignUp(std::max<uint64_t>(arenaBytes, 1)); // as allocate() rounds
    total += alignUp(attentionPartialFloats * sizeof(float));
    total += alignUp(expertScratchBytes);
    total += alignUp(kdaScratchBytes);
    total += alignUp(mhcScratchBytes);
    total += alignUp(gatherScratchBytes);
    total += alignUp(uint64_t(roundScratchFloats) * sizeof(float));
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
  for (const artifact::Weight &w : m.weights()) {
    StatusOr<CUdeviceptr> p = allocate(w.size(), "weight '" + w.name() + "'");
    if (!p.ok())
      return p.error();
    uint64_t at = 0;
    for (auto [piece, bytes] : file.weightPieces(w)) {
      if (!status.ok())
        break;
      status = upload(*p + at, piece, bytes);
      at += bytes;
    }
    if (!status.ok())
      return status;
    weights.push_back(*p);
    weightAddressTable.push_back(*p);
  }

  // Caches and slot states (zeroed), every page-table entry at the zero
  // page, and the arena.
  StatusOr<CUdeviceptr> table = allocate(
      std::max<size_t>(plan.pageTableEntries() * sizeof(int32_t), 1),
      "the page table");
  if (!table.ok())
    return table.error();
  pageTable = *table;
  if (plan.pageTableEntries())
    DAYBREAK_RETURN_IF_ERROR(uploadPageTable(0, plan.pageTableEntries()));
  for (int i = 0; i < m.caches_size(); ++i) {
    const runtime::CacheLayout &layout = plan.caches[i];
    DeviceCacheView view;
    runtime::fillCacheView(view, plan, i);
    view.pageTable = pageTable;
    StatusOr<CUdeviceptr> p =
        allocate(layout.bytes, "cache '" + m.caches(i).name() + "'");
    if (!p.ok())
      return p.error();
    status = driver.check(driver.cuMemsetD8(*p, 0, layout.bytes),
                          "cuMemsetD8");
    if (!status.ok())
      return status;
    view.base = *p;
    caches.push_back(view);
  }
  for (const artifact::Step &step : m.steps())
    arenaSize = std::max<uint64_t>(arenaSize, step.arena_size());
  StatusOr<CUdeviceptr> a = allocate(arenaSize, "the step arena");
  if (!a.ok())
    return a.error();
  arena = *a;
  // The launchers' scratch buffers, where the plan's launches need them.
  for (auto [bytes, what, target] :
       {std::tuple{uint64_t(attentionPartialFloats) * sizeof(float),
                   "the attention partials", &attentionPartials},
        std::tuple{uint64_t(expertScratchBytes), "the expert matmul scratch",
                   &expertScratch},
        std::tuple{kdaScratchBytes, "the kda_chunk scratch", &kdaScratch},
        std::tuple{mhcScratchBytes, "the mhc_pre scratch", &mhcScratch},
        std::tuple{gatherScratchBytes, "the all_gather scratch",
                   &gatherScratch},
        std::tuple{uint64_t(roundScratchFloats) * sizeof(float),
                   "the bf16 matmul inputs", &roundScratch}}) {
    if (bytes == 0)
      continue;
    StatusOr<CUdeviceptr> p = allocate(bytes, what);
    if (!p.ok())
      return p.error();
    *target = *p;
  }

  // Generated kernels read their inputs through a table of pointers; the
  // addresses are fixed once the arena exists, so each table is built once.
  std::map<std::string, CUfunction> generatedByName;
  for (const runtime::PreparedStep &step : prepared)
    for (const PreparedLaunch &l : step.launches) {
      if (l.kernel != abi::KernelId::Elementwise)
        continue;
      const std::string &symbol = l.s(abi::Elementwise::P::symbol);
      CUfunction &fn = generatedByName[symbol];
      if (!fn) {
        status = driver.check(driver.cuModuleGetFunction(
                                  &fn, generatedModule, symbol.c_str()),
                              "cuModuleGetFunction");
        if (!status.ok())
          return status.withContext(l.label + ": " + symbol);
      }
      generatedFns[l.ordinal] = fn;
      BoundLaunch bound;
      runtime::bindLaunch(l, /*tokens=*/1, arena, weightAddressTable.data(),
                          bound);
      std::vector<CUdeviceptr> inputs;
      for (unsigned i = 0; i < l.numOperands; ++i)
        inputs.push_back(bound.in(i).address);
      StatusOr<CUdeviceptr> table =
          allocate(inputs.size() * sizeof(CUdeviceptr), "input pointers");
      if (!table.ok())
        return table.error();
      status = upload(*table, inputs.data(), inputs.size() * sizeof(CUdeviceptr));
      if (!status.ok())
        return status;
      inputTables[l.ordinal] = *table;
    }
  // The zeroing and uploads above ran on the legacy stream, which the
  // non-blocking step stream does not wait for.
  return driver.check(driver.cuCtxSynchronize(), "cuCtxSynchronize");
}

Status CudaDevice::writeArena(uint64_t offset, const void *data,
                              size_t bytes) {
  if (offset + bytes > arenaSize)
    return Status::error("arena write past its end");
  // After whatever a side launch issued outside a step still does.
  DAYBREAK_RETURN_IF_ERROR(joinSideQueue());
  return driver.check(
      driver.cuMemcpyHtoDAsync(arena + offset, data, bytes, stream),
      "cuMemcpyHtoDAsync");
}

Status CudaDevice::readArena(uint64_t offset, void *data, size_t bytes) {
  if (offset + bytes > arenaSize)
    return Status::error("arena read past its end");
  DAYBREAK_RETURN_IF_ERROR(joinSideQueue());
  // The one synchronisation of a step: its outputs back to the host.
  Status status = driver.check(
      driver.cuMemcpyDtoHAsync(data, arena + offset, bytes, stream),
      "cuMemcpyDtoHAsync");
  if (!status.ok())
    return status;
  return synchronize("reading the step's outputs");
}

Status CudaDevice::synchronize(const char *what) {
  DAYBREAK_RETURN_IF_ERROR(joinSideQueue());
  if (nccl)
    return nccl->wait(stream, what);
  return driver.check(driver.cuStreamSynchronize(stream),
                      "cuStreamSynchronize");
}

//===----------------------------------------------------------------------===//
// Launchers: one per declared kernel the CUDA device implements.
//===----------------------------------------------------------------------===//

namespace daybreak::cuda {
/// The launchers reach the device's kernels, stream, caches and the state
/// it resolved per launch at load.
struct CudaLaunchers {
  static CUdeviceptr p(const BoundArg &a) { return a.address; }
  /// A weight slot as stored (absent: data 0). `scale` is the slot of an
  /// e4m3 weight's block scales and `blocks` their block sizes.
  static DeviceWeight weight(const BoundArg &a, const BoundArg *scale = nullptr,
                             const std::vector<int64_t> *blocks = nullptr) {
    DeviceWeight w;
    if (!a.present())
      return w;
    w.data = a.address;
    if (a.arg->dtype == artifact::BF16) {
      w.type = 1;
    } else if (a.arg->dtype == artifact::F8E4M3FN) {
      w.type = 2;
      w.scales = scale->address;
      w.blockN = (*blocks)[0];
      w.blockK = (*blocks)[1];
    }
    return w;
  }
  static const DeviceCacheView &cache(CudaDevice &d, const BoundArg &a) {
    return d.caches[a.cache()];
  }
  /// The instantiation the compiler specialised for this launch, if any.
  static CUfunction specialized(CudaDevice &d, const BoundLaunch &l) {
    return d.specializedFns[l->ordinal];
  }

  static Status embedding(CudaDevice &d, const BoundLaunch &l) {
    using In = abi::Embedding::In;
    const BoundArg &table = l.in(In::table);
    return d.kernels->embedding(weight(table), table.dim(0), table.dim(1),
                                p(l.in(In::ids)), l.tokens, p(l.out(0)),
                                d.stream);
  }
  static Status gatherRows(CudaDevice &d, const BoundLaunch &l) {
    using In = abi::GatherRows::In;
    const BoundArg &x = l.in(In::input), &rows = l.in(In::rows);
    // The embedding kernel over an fp32 table.
    return d.kernels->embedding(p(x), x.dim(0), x.back(), p(rows), rows.numel(),
                                p(l.out(0)), d.stream);
  }
  static Status rmsNorm(CudaDevice &d, const BoundLaunch &l) {
    using In = abi::RmsNorm::In;
    const BoundArg &x = l.in(In::input), &out = l.out(0);
    return d.kernels->rmsNorm(p(x), weight(l.in(In::weight)), x.rows(),
                              x.back(), l->f(abi::RmsNorm::P::eps), p(out),
                              d.stream, specialized(d, l), x.stride(),
                              out.stride());
  }
  static Status addRmsNorm(CudaDevice &d, const BoundLaunch &l) {
    using In = abi::AddRmsNorm::In;
    const BoundArg &x = l.in(In::input);
    return d.kernels->addRmsNorm(p(x), p(l.in(In::residual)),
                                 weight(l.in(In::weight)), x.rows(), x.back(),
                                 l->f(abi::AddRmsNorm::P::eps), p(l.out(0)),
                                 p(l.out(1)), d.stream, specialized(d, l));
  }
  static Status layerNorm(CudaDevice &d, const BoundLaunch &l) {
    using In = abi::LayerNorm::In;
    const BoundArg &x = l.in(In::input), &out = l.out(0);
    return d.kernels->layerNorm(p(x), weight(l.in(In::weight)),
                                weight(l.in(In::bias)), x.rows(), x.back(),
                                l->f(abi::LayerNorm::P::eps), p(out), d.stream,
                                x.stride(), out.stride());
  }
  /// matmul and fp8_matmul: weight [N, K] as stored.
  static Status matmulWith(CudaDevice &d, const BoundLaunch &l,
                           const DeviceWeight &w, const DeviceWeight &bias) {
    const BoundArg &x = l.in(0);
    int64_t n = l.in(1).dim(0), k = l.in(1).dim(1);
    // A weight slot is written only at load: a decode GEMV may stream it
    // before the kernel ahead of it has finished (programmatic launch).
    bool constant = l.in(1).arg->kind == runtime::PreparedArg::Kind::Weight;
    const Fp8GemmTile &tile = d.gemmTiles[l->ordinal];
    return d.kernels->matmul(p(x), w, bias, x.numel() / k, n, k, p(l.out(0)),
                             d.stream, specialized(d, l), constant,
                             d.rounding(), tile.rows ? &tile : nullptr);
  }
  static Status matmul(CudaDevice &d, const BoundLaunch &l) {
    using In = abi::Matmul::In;
    return matmulWith(d, l, weight(l.in(In::weight)), weight(l.in(In::bias)));
  }
  static Status fp8Matmul(CudaDevice &d, const BoundLaunch &l) {
    using In = abi::Fp8Matmul::In;
    return matmulWith(d, l,
                      weight(l.in(In::weight), &l.in(In::weight_scale),
                             &l->ints(abi::Fp8Matmul::P::block_size)),
                      DeviceWeight());
  }
  static Status headMatmul(CudaDevice &d, const BoundLaunch &l) {
    using In = abi::HeadMatmul::In;
    const BoundArg &x = l.in(In::input), &w = l.in(In::weight);
    bool transpose = l->has(abi::HeadMatmul::P::transpose_weight) &&
                     l->i(abi::HeadMatmul::P::transpose_weight);
    int64_t n = transpose ? w.dim(1) : w.dim(2);
    const BoundArg &out = l.out(0);
    return d.kernels->headMatmul(p(x), weight(w), transpose, x.dim(0), x.dim(1),
                                 x.dim(2), n, p(out), d.stream, d.rounding(),
                                 /*tensorCores=*/true, x.stride(),
                                 out.stride());
  }
  static Status rope(CudaDevice &d, const BoundLaunch &l) {
    using In = abi::Rope::In;
    const BoundArg &x = l.in(In::input), &out = l.out(0);
    runtime::RopeLayout at = runtime::ropeLayout(l);
    return d.kernels->rope(p(x), at.input, p(out), at.output,
                           p(l.in(In::positions)), l.tokens, at.rowsPerToken,
                           at.rowDim, runtime::ropeParams(*l), d.stream);
  }
  static Status copyColumns(CudaDevice &d, const BoundLaunch &l) {
    using P = abi::CopyColumns::P;
    const BoundArg &x = l.in(0), &out = l.out(0);
    int64_t srcOffset = l->i(P::src_offset), dstOffset = l->i(P::dst_offset);
    int64_t cols = std::min(x.back() - srcOffset, out.back() - dstOffset);
    return d.kernels->copyColumns(p(x), x.back(), srcOffset, p(out),
                                  out.back(), dstOffset, x.numel() / x.back(),
                                  cols, d.stream);
  }
  static Status add(CudaDevice &d, const BoundLaunch &l) {
    using In = abi::Add::In;
    return d.kernels->add(p(l.in(In::lhs)), p(l.in(In::rhs)),
                          l.in(In::lhs).numel(), p(l.out(0)), d.stream);
  }
  static Status addScalarI32(CudaDevice &d, const BoundLaunch &l) {
    if (l->i(abi::AddScalarI32::P::value) != 1)
      return Status::error("the cuda device adds only 1 (causal bounds)");
    return d.kernels->causalBounds(p(l.in(0)), l.in(0).numel(), p(l.out(0)),
                                   d.stream);
  }
  /// The NCCL group of collective `l` over `ranks` ranks, or null when
  /// nothing is left to do: no rows, or one rank (its input copied). An
  /// error when the device has no group or one of another size.
  static StatusOr<NcclCommunicator *> groupOf(CudaDevice &d,
                                              const BoundLaunch &l,
                                              const char *what, int64_t ranks) {
    int64_t size = d.nccl ? d.nccl->size() : 1;
    if (size != ranks)
      return Status::error(std::string(what) + " over " +
                           std::to_string(ranks) + " ranks, run by " +
                           std::to_string(size) +
                           (d.nccl ? "" : " (load every rank's artifact)"));
    const BoundArg &x = l.in(0), &out = l.out(0);
    if (x.numel() == 0)
      return nullptr;
    if (ranks == 1) {
      Status copied = d.driver.check(
          d.driver.cuMemcpyDtoDAsync(p(out), p(x), x.numel() * 4, d.stream),
          "cuMemcpyDtoDAsync");
      if (!copied)
        return copied;
      return nullptr;
    }
    return d.nccl.get();
  }
  static Status allReduce(CudaDevice &d, const BoundLaunch &l) {
    const BoundArg &x = l.in(abi::AllReduce::In::input), &out = l.out(0);
    auto c = groupOf(d, l, "all_reduce", l->i(abi::AllReduce::P::ranks));
    if (!c.ok())
      return c.error();
    if (!*c)
      return Status::success();
    return (*c)->allReduceSum(p(x), p(out), x.numel(), d.stream);
  }
  /// NCCL gathers rank-major ([ranks][rows][width]) into the scratch; one
  /// strided copy a rank then lays it out along the last dim ([rows][ranks
  /// * width]).
  static Status allGather(CudaDevice &d, const BoundLaunch &l) {
    const BoundArg &x = l.in(abi::AllGather::In::input), &out = l.out(0);
    auto c = groupOf(d, l, "all_gather", l->i(abi::AllGather::P::ranks));
    if (!c.ok())
      return c.error();
    if (!*c)
      return Status::success();
    int64_t ranks = (*c)->size(), rows = x.rows(), width = x.back();
    if (uint64_t(out.numel()) * sizeof(float) > d.gatherScratchBytes)
      return Status::error("all_gather: " + std::to_string(out.numel()) +
                           " floats past the scratch planned at load");
    if (Status s = (*c)->allGather(p(x), d.gatherScratch, x.numel(), d.stream);
        !s)
      return s;
    size_t rowBytes = width * sizeof(float);
    for (int64_t r = 0; r < ranks; ++r) {
      CUDA_MEMCPY2D copy = {};
      copy.srcMemoryType = CU_MEMORYTYPE_DEVICE;
      copy.srcDevice = d.gatherScratch + r * rows * rowBytes;
      copy.srcPitch = rowBytes;
      copy.dstMemoryType = CU_MEMORYTYPE_DEVICE;
      copy.dstDevice = p(out) + r * rowBytes;
      copy.dstPitch = ranks * rowBytes;
      copy.WidthInBytes = rowBytes;
      copy.Height = rows;
      if (Status s = d.driver.check(d.driver.cuMemcpy2DAsync(&copy, d.stream),
                                    "cuMemcpy2DAsync");
          !s)
        return s;
    }
    return Status::success();
  }
  static Status localExperts(CudaDevice &d, const BoundLaunch &l) {
    using P = abi::LocalExperts::P;
    const BoundArg &ids = l.in(abi::LocalExperts::In::indices);
    return d.kernels->localExperts(p(ids), ids.numel(), l->i(P::first),
                                   l->i(P::count), p(l.out(0)), d.stream);
  }
  static Status swiglu(CudaDevice &d, const BoundLaunch &l) {
    using In = abi::Swiglu::In;
    using P = abi::Swiglu::P;
    const BoundArg &gate = l.in(In::gate);
    return d.kernels->swiglu(
        p(gate), p(l.in(In::up)), gate.numel(), l->f(P::alpha),
        l->has(P::limit), l->has(P::limit) ? l->f(P::limit) : 0.0,
        l->f(P::up_offset), p(l.out(0)), d.stream);
  }
  static Status moeRoute(CudaDevice &d, const BoundLaunch &l) {
    using In = abi::MoeRoute::In;
    StatusOr<runtime::RouteParams> route = runtime::routeParams(*l, "cuda");
    if (!route.ok())
      return route.error();
    const BoundArg &logits = l.in(In::logits);
    auto kernel = route->score == runtime::RouteScore::SoftmaxTopK
                      ? &CudaKernels::moeRouteSoftmaxTopK
                      : &CudaKernels::moeRouteSigmoid;
    return ((*d.kernels).*kernel)(p(logits), p(l.in(In::bias)), l.tokens,
                                  logits.dim(1), *route, p(l.out(0)),
                                  p(l.out(1)), d.stream);
  }
  static Status expertMatmul(CudaDevice &d, const BoundLaunch &l) {
    using In = abi::ExpertMatmul::In;
    const BoundArg &x = l.in(In::input), &w = l.in(In::weight),
                   &indices = l.in(In::indices);
    const std::vector<int64_t> *blocks =
        l->has(abi::ExpertMatmul::P::block_size)
            ? &l->ints(abi::ExpertMatmul::P::block_size)
            : nullptr;
    return d.kernels->expertMatmul(
        p(x), x.rank == 3, weight(w, &l.in(In::weight_scale), blocks), w.dim(0),
        w.dim(1), w.dim(2), p(indices), l.tokens, indices.dim(1),
        p(l.in(In::routing_weights)), p(l.out(0)), d.stream,
        weight(l.in(In::bias)), d.expertScratch, d.expertScratchBytes,
        d.rounding());
  }
  static Status mxfp4ToFp8Experts(CudaDevice &d, const BoundLaunch &l) {
    using In = abi::Mxfp4ToFp8Experts::In;
    using Out = abi::Mxfp4ToFp8Experts::Out;
    using P = abi::Mxfp4ToFp8Experts::P;
    const BoundArg &w = l.in(In::weight), &indices = l.in(In::indices);
    const BoundArg &codes = l.out(Out::codes);
    return d.kernels->mxfp4ToFp8Experts(
        p(w), p(l.in(In::scales)), weight(l.in(In::bias)), w.dim(0), w.dim(1),
        w.dim(2), p(indices), l.tokens, indices.dim(1), codes.dim(0), p(codes),
        p(l.out(Out::block_scales)), p(l.out(Out::slot_bias)),
        p(l.out(Out::slots)), d.stream,
        runtime::mxfp4SelectionMode(l.tokens, l->has(P::all_from_tokens)
                                                  ? l->i(P::all_from_tokens)
                                                  : 0));
  }
  static Status mxfp4ToFp8AllExperts(CudaDevice &d, const BoundLaunch &l) {
    using In = abi::Mxfp4ToFp8AllExperts::In;
    using Out = abi::Mxfp4ToFp8AllExperts::Out;
    // Below from_tokens the step converts its selection instead.
    if (l.tokens < l->i(abi::Mxfp4ToFp8AllExperts::P::from_tokens))
      return Status::success();
    const BoundArg &w = l.in(In::weight), &codes = l.out(Out::codes);
    return d.kernels->mxfp4ToFp8Experts(
        p(w), p(l.in(In::scales)), weight(l.in(In::bias)), w.dim(0), w.dim(1),
        w.dim(2), 0, l.tokens, 0, codes.dim(0), p(codes),
        p(l.out(Out::block_scales)), p(l.out(Out::slot_bias)), 0, d.stream,
        runtime::Mxfp4ConvertMode::All);
  }
  static Status mxfp4ExpertMatmul(CudaDevice &d, const BoundLaunch &l) {
    using In = abi::Mxfp4ExpertMatmul::In;
    const BoundArg &x = l.in(In::input), &w = l.in(In::weight),
                   &indices = l.in(In::indices);
    // x rounded (--precision=bf16) or split (exact) by the kernels.
    return d.kernels->mxfp4ExpertMatmul(
        p(x), x.rank == 3, p(w), p(l.in(In::scales)), weight(l.in(In::bias)),
        w.dim(0), w.dim(1), w.dim(2), p(indices), l.tokens, indices.dim(1),
        p(l.in(In::routing_weights)), p(l.out(0)), d.stream, d.expertScratch,
        d.expertScratchBytes, d.rounding());
  }
  static Status cacheWrite(CudaDevice &d, const BoundLaunch &l) {
    using In = abi::CacheWrite::In;
    CacheWritePrologueArgs prologue;
    prologue.params = runtime::cacheWritePrologue(*l);
    if (prologue.params.any()) {
      prologue.weight = weight(l.in(In::norm_weight));
      prologue.bias = weight(l.in(In::norm_bias));
      prologue.positions = p(l.in(In::positions));
    }
    const BoundArg &values = l.in(In::values);
    return d.kernels->cacheWrite(cache(d, l.in(In::cache)), p(values),
                                 p(l.in(In::slots)), p(l.in(In::sequences)),
                                 l.tokens, d.stream, &prologue,
                                 values.arg->rowStride);
  }
  /// --precision=bf16 and fp8 take the tensor-core kernels
  /// (daybreak_dsa_indexer_tc_*, in token groups from 32 tokens; q rounded
  /// to bf16 as the CPU device's modes round it) where they apply; the
  /// exact mode the exact kernel.
  static Status dsaIndexerScores(CudaDevice &d, const BoundLaunch &l) {
    using In = abi::DsaIndexerScores::In;
    const BoundArg &q = l.in(In::queries);
    std::optional<QueryRopeArgs> rope;
    if (std::optional<runtime::RopeParams> r = runtime::indexerQueryRope(*l))
      rope = QueryRopeArgs{*r, p(l.in(In::positions))};
    return d.kernels->dsaIndexerScores(
        p(q), p(l.in(In::weights)), cache(d, l.in(In::keys)),
        p(l.in(In::sequences)), p(l.in(In::bounds)), l.tokens, q.dim(1),
        l->f(abi::DsaIndexerScores::P::scale), p(l.out(0)), d.stream,
        specialized(d, l), /*tensorCores=*/d.bf16Inputs,
        CudaKernels::IndexerTiles::Auto, rope ? &*rope : nullptr);
  }
  static Status dsaIndexSelect(CudaDevice &d, const BoundLaunch &l) {
    using In = abi::DsaIndexSelect::In;
    const BoundArg &scores = l.in(In::scores);
    return d.kernels->dsaIndexSelect(
        p(scores), p(l.in(In::bounds)), l.tokens, scores.dim(1),
        l->i(abi::DsaIndexSelect::P::top_k), p(l.out(0)), d.stream);
  }
  static Status sparseAttention(CudaDevice &d, const BoundLaunch &l) {
    using In = abi::SparseAttention::In;
    using P = abi::SparseAttention::P;
    const BoundArg &q = l.in(In::q), &indices = l.in(In::indices);
    return d.kernels->sparseAttention(
        p(q), cache(d, l.in(In::kv)), p(indices), indices.dim(1),
        p(l.in(In::sequences)), l.tokens, q.dim(1), l->f(P::scale),
        l->i(P::value_dim), p(l.in(In::sinks)), p(l.out(0)), d.stream,
        specialized(d, l), d.attentionPartials, d.attentionPartialFloats,
        d.attentionPath);
  }
  static Status attention(CudaDevice &d, const BoundLaunch &l) {
    using In = abi::Attention::In;
    using P = abi::Attention::P;
    const BoundArg &q = l.in(In::q);
    DeviceCacheView v = cache(d, l.in(In::v));
    if (l->has(P::value_columns))
      v = runtime::columnPrefixView(v, l->i(P::value_columns));
    return d.kernels->attention(
        p(q), cache(d, l.in(In::k)), v, p(l.in(In::positions)),
        p(l.in(In::sequences)), p(l.in(In::sinks)), l.tokens, q.dim(1),
        l->i(P::kv_heads), l->f(P::scale),
        l->has(P::window) ? l->i(P::window) : 0, p(l.out(0)), d.stream,
        d.attentionPartials, d.attentionPartialFloats, d.attentionPath);
  }
  static DeviceState state(CudaDevice &d, const BoundArg &a) {
    DeviceState view;
    runtime::fillStateView(view, d.cachePlan(), a.cache());
    view.base = d.caches[a.cache()].base;
    return view;
  }
  static Status shortConv(CudaDevice &d, const BoundLaunch &l) {
    using In = abi::ShortConv::In;
    const BoundArg &w = l.in(In::weight);
    return d.kernels->shortConv(
        p(l.in(In::input)), weight(w), w.dim(0), w.dim(1),
        state(d, l.in(In::state)), p(l.in(In::sequences)), l.tokens,
        l->i(abi::ShortConv::P::activation), p(l.out(0)), d.stream);
  }
  static Status dsaKpool(CudaDevice &d, const BoundLaunch &l) {
    using In = abi::DsaKpool::In;
    const BoundArg &keys = l.in(In::keys), &ape = l.in(In::ape);
    return d.kernels->dsaKpool(
        p(keys), p(l.in(In::gate)), weight(ape), ape.dim(0), keys.dim(1),
        state(d, l.in(In::state)), p(l.in(In::positions)),
        p(l.in(In::sequences)), l.tokens, p(l.out(0)), d.stream);
  }
  static Status dsaKpoolExpand(CudaDevice &d, const BoundLaunch &l) {
    using In = abi::DsaKpoolExpand::In;
    const BoundArg &pools = l.in(In::pools);
    return d.kernels->dsaKpoolExpand(
        p(pools), p(l.in(In::positions)), l.tokens, pools.dim(1),
        l->i(abi::DsaKpoolExpand::P::pool_size), p(l.out(0)), d.stream);
  }
  static Status divScalarI32(CudaDevice &d, const BoundLaunch &l) {
    return d.kernels->divScalarI32(p(l.in(0)), l.in(0).numel(),
                                   l->i(abi::DivScalarI32::P::value),
                                   p(l.out(0)), d.stream);
  }
  static Status kdaGate(CudaDevice &d, const BoundLaunch &l) {
    using In = abi::KdaGate::In;
    using P = abi::KdaGate::P;
    const BoundArg &raw = l.in(In::raw);
    double bound = l->has(P::lower_bound) ? l->f(P::lower_bound) : 0.0;
    return d.kernels->kdaGate(p(raw), p(l.in(In::a_log)), p(l.in(In::dt_bias)),
                              l.tokens, raw.dim(1), raw.dim(2),
                              l->has(P::lower_bound) ? &bound : nullptr,
                              p(l.out(0)), d.stream);
  }
  /// kda_chunk and kda_step: the same operands and parameters (but
  /// chunk_size, which the CUDA kernel fixes at 64).
  template <typename In, typename P>
  static Status kda(CudaDevice &d, const BoundLaunch &l, bool chunked) {
    const BoundArg &q = l.in(In::q), &v = l.in(In::v);
    DeviceKdaInputs in;
    in.q = p(q);
    in.k = p(l.in(In::k));
    in.v = p(v);
    in.g = p(l.in(In::g));
    in.beta = p(l.in(In::beta));
    return d.kernels->kda(
        chunked, in, state(d, l.in(In::state)), p(l.in(In::sequences)),
        l.tokens, q.dim(1), q.dim(2), v.dim(2), l->f(P::scale),
        l->has(P::qk_l2norm) && l->i(P::qk_l2norm), d.kdaScratch,
        d.kdaScratchBytes, p(l.out(0)), d.stream);
  }
  static Status kdaChunk(CudaDevice &d, const BoundLaunch &l) {
    return kda<abi::KdaChunk::In, abi::KdaChunk::P>(d, l, true);
  }
  static Status kdaStep(CudaDevice &d, const BoundLaunch &l) {
    return kda<abi::KdaStep::In, abi::KdaStep::P>(d, l, false);
  }
  static Status gatedRmsNorm(CudaDevice &d, const BoundLaunch &l) {
    using In = abi::GatedRmsNorm::In;
    using P = abi::GatedRmsNorm::P;
    const BoundArg &x = l.in(In::input);
    return d.kernels->gatedRmsNorm(
        p(x), p(l.in(In::gate)), weight(l.in(In::weight)), x.numel() / x.back(),
        x.back(), l->f(P::eps), l->i(P::activation), p(l.out(0)), d.stream);
  }
  /// mhc_pre's and mhc_post_pre's optional norm (the same operand and
  /// parameter names): its weight (data 0: none) and input_eps, which a
  /// norm needs.
  template <typename In, typename P>
  static Status mhcNorm(const BoundLaunch &l, const char *name,
                        DeviceWeight &norm, double &inputEps) {
    norm = weight(l.in(In::norm_weight));
    inputEps = 0.0;
    if (!norm.data)
      return Status::success();
    if (!l->has(P::input_eps))
      return Status::error(std::string(name) +
                           ": a norm_weight without input_eps");
    inputEps = l->f(P::input_eps);
    return Status::success();
  }
  static Status mhcPre(CudaDevice &d, const BoundLaunch &l) {
    using In = abi::MhcPre::In;
    using P = abi::MhcPre::P;
    const BoundArg &x = l.in(In::streams);
    DeviceWeight norm;
    double inputEps = 0.0;
    DAYBREAK_RETURN_IF_ERROR((mhcNorm<In, P>(l, "mhc_pre", norm, inputEps)));
    return d.kernels->mhcPre(
        p(x), p(l.in(In::fn)), p(l.in(In::base)), p(l.in(In::scale)), x.dim(0),
        x.dim(1), x.dim(2), l->i(P::sinkhorn_iters), l->f(P::eps),
        l->f(P::norm_eps), norm, inputEps, d.mhcScratch, d.mhcScratchBytes,
        p(l.out(0)), p(l.out(1)), p(l.out(2)), d.stream);
  }
  static Status mhcPostPre(CudaDevice &d, const BoundLaunch &l) {
    using In = abi::MhcPostPre::In;
    using P = abi::MhcPostPre::P;
    const BoundArg &x = l.in(In::streams);
    DeviceWeight norm;
    double inputEps = 0.0;
    DAYBREAK_RETURN_IF_ERROR(
        (mhcNorm<In, P>(l, "mhc_post_pre", norm, inputEps)));
    return d.kernels->mhcPostPre(
        p(x), p(l.in(In::y)), p(l.in(In::post)), p(l.in(In::comb)),
        p(l.in(In::fn)), p(l.in(In::base)), p(l.in(In::scale)), x.dim(0),
        x.dim(1), x.dim(2), l->i(P::sinkhorn_iters), l->f(P::eps),
        l->f(P::norm_eps), norm, inputEps, d.mhcScratch, d.mhcScratchBytes,
        p(l.out(0)), p(l.out(1)), p(l.out(2)), p(l.out(3)), d.stream);
  }
  static Status mhcPost(CudaDevice &d, const BoundLaunch &l) {
    using In = abi::MhcPost::In;
    const BoundArg &x = l.in(In::streams);
    return d.kernels->mhcPost(p(x), p(l.in(In::y)), p(l.in(In::post)),
                              p(l.in(In::comb)), x.dim(0), x.dim(1), x.dim(2),
                              p(l.out(0)), d.stream);
  }
  static Status elementwise(CudaDevice &d, const BoundLaunch &l) {
    CUfunction fn = d.generatedFns[l->ordinal];
    CUdeviceptr inputs = d.inputTables[l->ordinal];
    if (!fn || !inputs)
      return Status::error("generated kernel not loaded");
    int64_t begin = 0, n = l.out(0).numel();
    if (n == 0)
      return Status::success();
    CUdeviceptr result = p(l.out(0));
    void *params[] = {&begin, &n, &inputs, &result};
    unsigned blocks = static_cast<unsigned>(
        std::min<int64_t>((n + 255) / 256, 65535 * 8));
    if (d.generatedDependent)
      return d.kernels->launchDependent(fn, "generated kernel", blocks, 1, 1,
                                        256, 0, d.stream, params);
    return d.driver.check(d.driver.cuLaunchKernel(fn, blocks, 1, 1, 256, 1, 1,
                                                  0, d.stream, params, nullptr),
                          "cuLaunchKernel (generated)");
  }
};
} // namespace daybreak::cuda

const runtime::LauncherTable<CudaDevice> &CudaDevice::launchers() {
  using K = abi::KernelId;
  static const runtime::LauncherTable<CudaDevice> table = {
      {K::Embedding, &CudaLaunchers::embedding},
      {K::GatherRows, &CudaLaunchers::gatherRows},
      {K::AllReduce, &CudaLaunchers::allReduce},
      {K::AllGather, &CudaLaunchers::allGather},
      {K::LocalExperts, &CudaLaunchers::localExperts},
      {K::RmsNorm, &CudaLaunchers::rmsNorm},
      {K::AddRmsNorm, &CudaLaunchers::addRmsNorm},
      {K::LayerNorm, &CudaLaunchers::layerNorm},
      {K::Matmul, &CudaLaunchers::matmul},
      {K::Fp8Matmul, &CudaLaunchers::fp8Matmul},
      {K::HeadMatmul, &CudaLaunchers::headMatmul},
      {K::Rope, &CudaLaunchers::rope},
      {K::CopyColumns, &CudaLaunchers::copyColumns},
      {K::Add, &CudaLaunchers::add},
      {K::AddScalarI32, &CudaLaunchers::addScalarI32},
      {K::Swiglu, &CudaLaunchers::swiglu},
      {K::MoeRoute, &CudaLaunchers::moeRoute},
      {K::ExpertMatmul, &CudaLaunchers::expertMatmul},
      {K::Mxfp4ExpertMatmul, &CudaLaunchers::mxfp4ExpertMatmul},
      {K::Mxfp4ToFp8Experts, &CudaLaunchers::mxfp4ToFp8Experts},
      {K::Mxfp4ToFp8AllExperts, &CudaLaunchers::mxfp4ToFp8AllExperts},
      {K::CacheWrite, &CudaLaunchers::cacheWrite},
      {K::DsaIndexerScores, &CudaLaunchers::dsaIndexerScores},
      {K::DsaIndexSelect, &CudaLaunchers::dsaIndexSelect},
      {K::SparseAttention, &CudaLaunchers::sparseAttention},
      {K::Attention, &CudaLaunchers::attention},
      {K::ShortConv, &CudaLaunchers::shortConv},
      {K::KdaGate, &CudaLaunchers::kdaGate},
      {K::KdaChunk, &CudaLaunchers::kdaChunk},
      {K::KdaStep, &CudaLaunchers::kdaStep},
      {K::GatedRmsNorm, &CudaLaunchers::gatedRmsNorm},
      {K::DsaKpool, &CudaLaunchers::dsaKpool},
      {K::DsaKpoolExpand, &CudaLaunchers::dsaKpoolExpand},
      {K::DivScalarI32, &CudaLaunchers::divScalarI32},
      {K::MhcPre, &CudaLaunchers::mhcPre},
      {K::MhcPost, &CudaLaunchers::mhcPost},
      {K::MhcPostPre, &CudaLaunchers::mhcPostPre},
      {K::Elementwise, &CudaLaunchers::elementwise},
  };
  return table;
}

Status CudaDevice::launch(const PreparedLaunch &launch, int64_t tokens) {
  if (!serialQueues && launch.queue != 0)
    return launchOnSideQueue(launch, tokens);
  if (launch.joinQueue)
    DAYBREAK_RETURN_IF_ERROR(joinSideQueue(launch.joinQueue));
  return runtime::dispatch(*this, launchers(), launch, tokens);
}

Status CudaDevice::launchOnSideQueue(const PreparedLaunch &launch,
                                     int64_t tokens) {
  if (launch.sideIndex >= sideDone.size())
    return Status::error("side launch " + std::to_string(launch.sideIndex) +
                         " of a step prepared for " +
                         std::to_string(sideDone.size()));
  DAYBREAK_RETURN_IF_ERROR(
      driver.check(driver.cuEventRecord(forkEvent, stream), "cuEventRecord"));
  DAYBREAK_RETURN_IF_ERROR(driver.check(
      driver.cuStreamWaitEvent(sideStream, forkEvent, 0), "cuStreamWaitEvent"));
  // The launchers issue on `stream`: the side one for this launch.
  std::swap(stream, sideStream);
  Status status = runtime::dispatch(*this, launchers(), launch, tokens);
  std::swap(stream, sideStream);
  sidePending = launch.sideIndex;
  DAYBREAK_RETURN_IF_ERROR(status);
  return driver.check(
      driver.cuEventRecord(sideDone[launch.sideIndex], sideStream),
      "cuEventRecord");
}

Status CudaDevice::joinSideQueue(uint32_t count) {
  // The side stream runs its launches in order: the count-th's event
  // covers those before it. One the main stream waited for already (a
  // later join of fewer) is waited for again, which costs nothing.
  if (sidePending < 0 || count == 0)
    return Status::success();
  int64_t last = std::min<int64_t>(count, sidePending + 1) - 1;
  if (last == sidePending)
    sidePending = -1;
  return driver.check(driver.cuStreamWaitEvent(stream, sideDone[last], 0),
                      "cuStreamWaitEvent");
}

Status CudaDevice::joinSideQueue() {
  return sidePending < 0 ? Status::success()
                         : joinSideQueue(uint32_t(sidePending + 1));
}
