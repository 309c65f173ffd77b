//===- Model.cpp - A loaded artifact ready to run steps -------------------===//

#include "runtime/executor/Model.h"

#include "runtime/devices/cpu/CpuDevice.h"

#include <algorithm>
#include <cstdlib>
#include <iostream>
#ifdef DAYBREAK_HAVE_CUDA
#include "runtime/devices/cuda/CudaDevice.h"
#endif

using namespace daybreak;
using namespace daybreak::runtime;

StatusOr<std::unique_ptr<Model>> Model::load(const std::string &path,
                                             const LoadOptions &options) {
  StatusOr<artifact::ArtifactFile> file = artifact::ArtifactFile::open(path);
  if (!file.ok())
    return file.error();
  std::unique_ptr<Device> device;
  const std::string &target = file->manifest().target();
  if (options.roundingNoiseSeed && options.device != "cpu")
    return Status::error("--rounding-noise models roundings on the CPU "
                         "device only, not --device=" +
                         options.device);
  if (options.mxfp4Kernel != "auto" && options.device == "cpu")
    return Status::error("--mxfp4-kernel=" + options.mxfp4Kernel +
                         " chooses among CUDA kernels; --device=cpu has one");
  if (options.device == "cpu") {
    if (target != "cpu")
      return Status::error(path + ": compiled for target '" + target +
                           "', which --device=cpu does not run");
    auto cpuDevice = std::make_unique<cpu::CpuDevice>(options.threads);
    // No tensor cores here: their roundings, as the GPU path's oracle.
    cpuDevice->emulateTensorCoreAttention(options.tensorCoreAttention);
    cpuDevice->roundMatmulInputs(options.bf16MatmulInputs,
                                 options.fp8MatmulInputs);
    if (options.roundingNoiseSeed)
      cpuDevice->modelRoundingAsNoise(options.roundingNoiseSeed);
    device = std::move(cpuDevice);
  } else if (options.device.rfind("cuda", 0) == 0) {
#ifdef DAYBREAK_HAVE_CUDA
    if (target != "cuda")
      return Status::error(path + ": compiled for target '" + target +
                           "', which --device=" + options.device +
                           " does not run (compile with --target=cuda)");
    int ordinal = 0;
    if (options.device.size() > 4) {
      if (options.device[4] != ':' ||
          options.device.find_first_not_of("0123456789", 5) !=
              std::string::npos ||
          options.device.size() == 5)
        return Status::error("--device=" + options.device +
                             ": expected cuda or cuda:N");
      if (options.device.size() > 9)
        return Status::error("--device=" + options.device +
                             ": no such device ordinal");
      ordinal = static_cast<int>(
          std::strtol(options.device.c_str() + 5, nullptr, 10));
    }
    StatusOr<std::unique_ptr<cuda::CudaDevice>> gpu =
        cuda::CudaDevice::open(ordinal);
    if (!gpu.ok())
      return gpu.error().withContext("--device=" + options.device);
    (*gpu)->preferTensorCoreAttention(options.tensorCoreAttention);
    (*gpu)->forceMxfp4Kernel(
        options.mxfp4Kernel == "cuda-cores"     ? cuda::Mxfp4Kernel::CudaCores
        : options.mxfp4Kernel == "tensor-cores" ? cuda::Mxfp4Kernel::TensorCores
        : options.mxfp4Kernel == "warpgroup" ? cuda::Mxfp4Kernel::WarpgroupGemm
                                             : cuda::Mxfp4Kernel::Auto);
    (*gpu)->roundMatmulInputs(options.bf16MatmulInputs,
                              options.fp8MatmulInputs);
    device = std::move(*gpu);
#else
    return Status::error("--device=" + options.device +
                         ": this runtime was built without the CUDA device");
#endif
  } else {
    return Status::error("--device=" + options.device +
                         " is not a device (devices: cpu, cuda[:N]; see "
                         "daybreak-run devices)");
  }
  // A rank of a tensor-parallel model meets the others' collectives.
  const artifact::Manifest &m = file->manifest();
  int64_t ranks = std::max<int64_t>(m.ranks(), 1);
  int64_t given = options.communicator ? options.communicator->size() : 1;
  if (ranks != given)
    return Status::error(
        path + ": rank " + std::to_string(m.rank()) + " of " +
        std::to_string(ranks) + " ranks, loaded " +
        (given == 1 ? "alone (run it with the other ranks' artifacts: "
                      "runtime::runRanks, as daybreak-run does)"
                    : "as one of " + std::to_string(given)));
  if (ranks > 1 && options.communicator->rank() != m.rank())
    return Status::error(path + ": the artifact of rank " +
                         std::to_string(m.rank()) + ", loaded as rank " +
                         std::to_string(options.communicator->rank()));
  device->setCommunicator(ranks > 1 ? options.communicator : nullptr);
  std::unique_ptr<Model> model(new Model(std::move(*file), std::move(device)));
  StatusOr<std::vector<PreparedStep>> steps =
      prepareSteps(model->file.manifest());
  if (!steps.ok())
    return steps.error().withContext("loading " + path);
  model->steps = std::move(*steps);
  if (options.checkFinite)
    model->device->checkFiniteResults(&std::cerr);
  Status status = model->device->prepare(model->file, model->steps);
  if (!status.ok())
    return status.withContext("loading " + path + " on " +
                              model->device->name());
  model->pageAllocator = PageAllocator(model->device->cachePlan());
  return model;
}

StatusOr<const PreparedStep *> Model::step(const std::string &name) const {
  for (const PreparedStep &s : steps)
    if (s.step->name() == name)
      return &s;
  return Status::error("the artifact has no step '" + name + "'");
}

Status Model::stage(const PreparedStep &prepared, const StepInputs &inputs) {
  const artifact::Step *step = prepared.step;
  const std::string &name = step->name();
  int64_t tokens = inputs.ids.size();
  if (inputs.positions.size() != inputs.ids.size() ||
      inputs.sequences.size() != inputs.ids.size())
    return Status::error("step '" + name +
                         "': ids, positions and sequences differ in length");
  if (tokens == 0)
    return Status::error("step '" + name + "' needs at least one token");
  if (tokens > prepared.maxTokens)
    return Status::error("step '" + name + "' of " + std::to_string(tokens) +
                         " tokens exceeds the compiled maximum of " +
                         std::to_string(prepared.maxTokens) +
                         (prepared.maxTokens < maxTokens()
                              ? " tokens per step (one a sequence, --max-batch)"
                              : " tokens per step (--max-tokens)"));
  for (int64_t t = 0; t < tokens; ++t) {
    if (inputs.positions[t] < 0 || inputs.positions[t] >= maxSeqLen())
      return Status::error("position " + std::to_string(inputs.positions[t]) +
                           " exceeds the compiled maximum sequence length " +
                           std::to_string(maxSeqLen()) + " (--max-seq-len)");
    if (inputs.sequences[t] < 0 || inputs.sequences[t] >= maxBatch())
      return Status::error("sequence slot " +
                           std::to_string(inputs.sequences[t]) +
                           " exceeds the compiled maximum batch of " +
                           std::to_string(maxBatch()) + " (--max-batch)");
    if (inputs.ids[t] < 0 || inputs.ids[t] >= vocabSize())
      return Status::error("token id " + std::to_string(inputs.ids[t]) +
                           " is outside the vocabulary [0, " +
                           std::to_string(vocabSize()) + ")");
  }
  // The rows whose logits the step returns: checked here, written below for
  // a step that selects them.
  int64_t rows =
      inputs.everyLogitRow ? tokens : int64_t(inputs.logitRows.size());
  if (!inputs.everyLogitRow)
    for (int32_t row : inputs.logitRows)
      if (row < 0 || row >= tokens)
        return Status::error("step '" + name + "': logit row " +
                             std::to_string(row) +
                             " is not a token of the step's " +
                             std::to_string(tokens));
  if (prepared.logitRows && rows > prepared.maxLogitRows)
    return Status::error(
        "step '" + name + "' computes the logits of at most " +
        std::to_string(prepared.maxLogitRows) +
        " token rows (--max-logit-rows); asked for " + std::to_string(rows) +
        (inputs.everyLogitRow ? " (every token of the step)" : ""));
  // Pages for every token's row; the device's table gets the new entries.
  for (int64_t t = 0; t < tokens; ++t)
    DAYBREAK_RETURN_IF_ERROR(
        reserve(inputs.sequences[t], int64_t(inputs.positions[t]) + 1));
  // The input buffers, by role (prepareSteps found and checked them).
  const std::pair<const artifact::Buffer *, const std::vector<int32_t> *>
      writes[] = {{prepared.tokenIds, &inputs.ids},
                  {prepared.positions, &inputs.positions},
                  {prepared.sequences, &inputs.sequences}};
  for (auto [buffer, values] : writes) {
    Status status = device->writeArena(buffer->offset(), values->data(),
                                       tokens * sizeof(int32_t));
    if (!status.ok())
      return status;
  }
  if (!prepared.logitRows)
    return Status::success();
  // Every slot holds a token of the step: the rows asked for, then row 0.
  std::vector<int32_t> &scratch = logitRowsScratch;
  scratch.assign(prepared.maxLogitRows, 0);
  if (inputs.everyLogitRow)
    for (int64_t t = 0; t < tokens; ++t)
      scratch[t] = static_cast<int32_t>(t);
  else
    std::copy(inputs.logitRows.begin(), inputs.logitRows.end(),
              scratch.begin());
  return device->writeArena(prepared.logitRows->offset(), scratch.data(),
                            scratch.size() * sizeof(int32_t));
}

Status Model::reserve(int64_t seq, int64_t rows) {
  int64_t first, count;
  DAYBREAK_RETURN_IF_ERROR(pageAllocator.grow(seq, rows, first, count));
  return device->writePageTable(first, pageAllocator.table() + first, count);
}

Status Model::release(int64_t seq) {
  int64_t first, count;
  pageAllocator.release(seq, first, count);
  return device->writePageTable(first, pageAllocator.table() + first, count);
}

Status Model::resetSlot(int64_t seq) {
  DAYBREAK_RETURN_IF_ERROR(release(seq));
  return device->zeroSlotState(seq);
}

Status Model::run(const PreparedStep &step, const StepInputs &inputs,
                  std::vector<float> &logits) {
  Status staged = stage(step, inputs);
  if (!staged.ok())
    return staged;
  int64_t tokens = inputs.ids.size();
  Status launched = device->runLaunches(step, tokens);
  if (!launched.ok())
    return launched;
  const artifact::Buffer &out = *step.logits;
  int64_t vocab = vocabSize();
  uint64_t rowBytes = vocab * sizeof(float);
  if (inputs.everyLogitRow || step.logitRows) {
    // The rows asked for lead the logits buffer.
    int64_t rows =
        inputs.everyLogitRow ? tokens : int64_t(inputs.logitRows.size());
    logits.resize(rows * vocab);
    if (rows == 0)
      return Status::success();
    return device->readArena(out.offset(), logits.data(), rows * rowBytes);
  }
  // A step that computes every token's logits: the rows asked for, each.
  logits.resize(inputs.logitRows.size() * vocab);
  for (size_t i = 0; i < inputs.logitRows.size(); ++i)
    DAYBREAK_RETURN_IF_ERROR(
        device->readArena(out.offset() + inputs.logitRows[i] * rowBytes,
                          logits.data() + i * vocab, rowBytes));
  return Status::success();
}

Status Model::run(const std::string &name, const StepInputs &inputs,
                  std::vector<float> &logits) {
  StatusOr<const PreparedStep *> found = step(name);
  if (!found.ok())
    return found.error();
  return run(**found, inputs, logits);
}

StatusOr<const PreparedStep *> Model::stage(const std::string &name,
                                            const StepInputs &inputs) {
  StatusOr<const PreparedStep *> found = step(name);
  if (!found.ok())
    return found.error();
  Status staged = stage(**found, inputs);
  if (!staged.ok())
    return staged;
  return found;
}

StatusOr<double> Model::time(const std::string &name,
                             const StepInputs &inputs) {
  StatusOr<const PreparedStep *> staged = stage(name, inputs);
  if (!staged.ok())
    return staged.error();
  return device->timeLaunches(**staged, inputs.ids.size());
}

StatusOr<std::vector<double>> Model::profile(const std::string &name,
                                             const StepInputs &inputs) {
  StatusOr<const PreparedStep *> staged = stage(name, inputs);
  if (!staged.ok())
    return staged.error();
  return device->profileLaunches(**staged, inputs.ids.size());
}
