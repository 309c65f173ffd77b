//===- daybreak-run.cpp - Run a compiled .daybreak artifact ---------------===//
//
//   daybreak-run generate model.daybreak --prompt-ids 1,2,3
//       [--max-new-tokens N] [--temperature T] [--top-p P] [--seed S]
//   daybreak-run logits model.daybreak --inputs inputs.json
//       --output logits.safetensors
//   (an artifact of one rank of a tensor-parallel model,
//   model.rank0-of-2.daybreak, runs every rank, on threads of one process)
//   daybreak-run inspect model.daybreak
//   daybreak-run bench model.daybreak [--batch 1,8,64]
//       [--context 1024,8192,32768] [--prefill 1024,8192] [--warmup 3]
//       [--iterations 20] [--prefill-iterations 3] [--fill-tokens 512]
//       [--max-case-seconds 60] [--kernels 1] [--seed 1] [--json out.json]
//   daybreak-run compare logits.safetensors --expected expected.safetensors
//       [--atol 1e-4] [--spread a.safetensors,b.safetensors,...]
//   common: [--device=cpu|cuda[:N]] (default: the artifact's target)
//           [--threads N] [--precision=exact|bf16|fp8]
//           [--attention=exact|tensor-cores] [--rounding-noise SEED]
//           [--check-finite 1] (report launches whose results hold NaN/inf)
//           [--mxfp4-kernel=auto|cuda-cores|tensor-cores|warpgroup] (CUDA)
//
//===----------------------------------------------------------------------===//

#include "runtime/executor/Bench.h"
#include "runtime/executor/Commands.h"
#include "runtime/executor/Ranks.h"
#include "runtime/executor/RunInputs.h"
#include "runtime/support/OutOfMemory.h"
#ifdef DAYBREAK_HAVE_CUDA_DRIVER
#include "runtime/devices/cuda/CudaDriver.h"
#endif

#include <cstdlib>
#include <fstream>
#include <iostream>
#include <thread>

using namespace daybreak;
using namespace daybreak::runtime;

static int usage() {
  static const char *const lines[] = {
      "usage: daybreak-run generate|logits|bench|inspect|verify model.daybreak",
      "           [options] | daybreak-run devices",
      "  generate: --prompt-ids 1,2,3 [--max-new-tokens N] [--temperature T]",
      "            [--top-p P] [--seed S]",
      "  logits:   --inputs inputs.json --output out.safetensors",
      "  bench:    [--batch 1,8,64] [--context 1024,8192,32768]",
      "            [--prefill 1024,8192] [--warmup 3] [--iterations 20]",
      "            [--prefill-iterations 3] [--fill-tokens 512]",
      "            [--max-case-seconds 60] [--kernels 0|1] [--seed 1]",
      "            [--json out.json] (JSON on stdout without it)",
      "  compare (logits.safetensors instead of model.daybreak):",
      "            --expected e.safetensors [--atol 1e-4]",
      "            [--spread a.safetensors,b.safetensors,...] (the bf16",
      "            test's derived tolerance: atol + 7 x each value's RMS",
      "            difference in 32 or more --rounding-noise runs;",
      "            docs/bf16-tolerance.md)",
      "  common:   [--device=cpu|cuda[:N]] (default: the artifact's target)",
      "            [--threads N]",
      "            [--precision=exact|bf16] (bf16: every matmul on a weight",
      "            stored below fp32 takes its input rounded to bf16, a third",
      "            of the tensor-core work; attention as tensor-cores below",
      "            unless --attention says otherwise. Both devices round the",
      "            same way: the CPU is the GPU's oracle)",
      "            [--attention=exact|tensor-cores] (CUDA: dense attention on",
      "            the tensor cores where a launch does not split over keys:",
      "            prefill, large decode batches; sparse MLA on them with Q",
      "            and P in bf16; faster, not exact. CPU: sparse MLA with",
      "            those roundings, the GPU path's oracle)",
      "            [--rounding-noise SEED] (CPU, testing: each rounding of",
      "            the bf16/fp8 modes becomes its probabilistic model, x (1 +",
      "            d), d uniform in [-u, u] (bf16: u = 2^-8; e4m3: 2^-4), for",
      "            compare --spread)",
      "            [--check-finite 1] (debugging: name on stderr each launch",
      "            whose results hold NaN or infinities; slow)",
      "            [--mxfp4-kernel=auto|cuda-cores|tensor-cores|warpgroup]",
      "            (CUDA, testing: the kernel every MXFP4 expert matmul",
      "            takes; auto, the default, the device's rule; a forced",
      "            kernel fails where it does not apply)",
  };
  for (const char *line : lines)
    std::cerr << line << "\n";
  return 2;
}

static int fail(const std::string &message) {
  // One write: ranks launched as processes share the launcher's stderr.
  std::cerr << ("daybreak-run: " + message + "\n");
  return 1;
}

int main(int argc, char **argv) {
  exitOnOutOfMemory("daybreak-run: ");
  if (argc == 2 && std::string(argv[1]) == "devices") {
    // The devices this machine offers: the CPU always, CUDA GPUs when a
    // driver is installed.
    std::cout << "cpu: " << std::thread::hardware_concurrency()
              << " hardware threads\n";
#ifdef DAYBREAK_HAVE_CUDA_DRIVER
    StatusOr<const cuda::Driver *> driver = cuda::Driver::get();
    if (!driver.ok()) {
      std::cout << "cuda: none (" << driver.error().message() << ")\n";
      return 0;
    }
    auto devices = cuda::listDevices(**driver);
    if (!devices.ok())
      return fail(devices.error().message());
    for (const cuda::DeviceInfo &d : *devices)
      std::cout << "cuda:" << d.ordinal << ": " << d.name << ", sm_"
                << d.computeMajor << d.computeMinor << ", "
                << (d.totalMemory >> 20) << " MiB, " << d.multiprocessors
                << " SMs (driver " << (*driver)->version << ")\n";
#else
    std::cout << "cuda: not built in\n";
#endif
    return 0;
  }
  if (argc < 3)
    return usage();
  std::string command = argv[1], path = argv[2];
  StatusOr<RunFlags> flags =
      parseRunFlags(std::vector<std::string>(argv + 3, argv + argc));
  if (!flags.ok())
    return fail(flags.error().message());
  LoadOptions load;
  if (Status status = parseLoadOptions(*flags, load); !status.ok())
    return fail(status.message());
  // Default: the device the artifact was compiled for (cuda:0 for CUDA
  // artifacts, so a GPU is used whenever the artifact targets one).
  std::string device = load.device;
  auto flag = [&](const std::string &name) {
    auto it = flags->find(name);
    return it == flags->end() ? std::string() : it->second;
  };
  if (command == "compare") {
    // daybreak-run compare actual.safetensors --expected e.safetensors
    CompareOptions options;
    if (Status status = parseCompareOptions(*flags, options); !status.ok())
      return fail(status.message());
    Status status = compareLogits(path, options, std::cout);
    return status.ok() ? 0 : fail(status.message());
  }
  if (command != "generate" && command != "logits" && command != "inspect" &&
      command != "bench" && command != "verify")
    return usage();

  if (command == "verify") {
    // Opening checks the header, the manifest, every section's checksum and
    // the size and safetensors header of each referenced weights file; this
    // also hashes every byte of those files.
    StatusOr<artifact::ArtifactFile> file = artifact::ArtifactFile::open(path);
    if (!file.ok())
      return fail(file.error().message());
    Status status = file->verifyExternalFiles();
    if (!status.ok())
      return fail(status.message());
    std::cout << path << ": sections and " << file->manifest().external_files_size()
              << " referenced weights files verified\n";
    return 0;
  }

  if (command == "inspect") {
    // Reading the artifact needs no device.
    StatusOr<artifact::ArtifactFile> file = artifact::ArtifactFile::open(path);
    if (!file.ok())
      return fail(file.error().message());
    inspect(file->manifest(), std::cout);
    return 0;
  }
  // The manifest says the default device (the artifact's target: cuda:0
  // for CUDA artifacts, so a GPU is used whenever the artifact targets one)
  // and whether the artifact is one rank of a tensor-parallel model.
  std::vector<std::string> paths;
  {
    StatusOr<artifact::ArtifactFile> file = artifact::ArtifactFile::open(path);
    if (!file.ok())
      return fail(file.error().message());
    if (device.empty())
      load.device = file->manifest().target() == "cuda" ? "cuda:0" : "cpu";
    StatusOr<std::vector<std::string>> ranks =
        rankArtifacts(path, file->manifest());
    if (!ranks.ok())
      return fail(ranks.error().message());
    paths = std::move(*ranks);
  }
  // A launcher (torchrun, mpirun) that started one process a rank says so
  // in the environment: this process then runs only its own rank.
  StatusOr<std::optional<LaunchEnvironment>> launched = launchEnvironment();
  if (!launched.ok())
    return fail(launched.error().message());
  // Timed cases stop after a time, which the ranks do not reach together
  // (their steps, and so their collectives, would part).
  if (command == "bench" && paths.size() > 1)
    return fail(path + " is one of " + std::to_string(paths.size()) +
                " ranks: bench runs artifacts of one rank (its timed cases "
                "stop after a time, which the ranks would not reach "
                "together)");
  // Every rank runs the command (runRanks: one thread a rank, their
  // collectives meeting in process; or this process's rank alone,
  // runLaunchedRank); rank 0's outputs are the command's.
  std::ostream discard(nullptr);
  auto runCommand = [&](Model &model, int64_t rank) -> Status {
    bool lead = rank == 0;
    if (command == "logits") {
      std::string inputs = flag("inputs"), output = flag("output");
      if (inputs.empty() || output.empty())
        return Status::error("logits needs --inputs and --output");
      return runLogits(model, inputs, lead ? output : std::string(),
                       lead ? std::cerr : discard);
    }
    if (command == "bench") {
      BenchOptions options;
      DAYBREAK_RETURN_IF_ERROR(parseBenchOptions(*flags, options));
      StatusOr<nlohmann::json> result =
          runBench(model, path, options, lead ? std::cerr : discard);
      if (!result.ok())
        return result.error();
      if (!lead)
        return Status::success();
      std::string out = flag("json");
      if (out.empty()) {
        std::cout << result->dump(1) << "\n";
        return Status::success();
      }
      std::ofstream file(out);
      file << result->dump(1) << "\n";
      if (!file)
        return Status::error("cannot write " + out);
      return Status::success();
    }
    GenerateOptions options;
    DAYBREAK_RETURN_IF_ERROR(parseGenerateOptions(*flags, options));
    std::ostream &out = lead ? std::cout : discard;
    const artifact::MemoryPlan &mem = model.manifest().memory();
    out << "memory plan: " << mem.total_bytes() << " bytes (weights "
        << mem.weight_bytes() << ", arena " << mem.arena_bytes() << ", caches "
        << mem.cache_bytes() << ") on " << model.deviceName();
    if (paths.size() > 1)
      out << " for each of " << paths.size() << " ranks";
    out << "; resident " << model.residentBytes() << " bytes";
    if (uint64_t measured = model.measuredResidentBytes())
      out << ", measured " << measured << " bytes (cuMemGetInfo)";
    out << "\n";
    return generate(model, options, out);
  };
  Status status = *launched
                      ? runLaunchedRank(paths, **launched, load, runCommand)
                      : runRanks(paths, load, runCommand);
  return status.ok() ? 0 : fail(status.message());
}
