//===- ArtifactFuzzer.cpp - Any bytes as a .daybreak artifact -------------===//
//
// Feeds the artifact reader and verifier (runtime/artifact/ArtifactFile)
// arbitrary bytes twice: as they are, which exercises the header and every
// checksum, and resealed (below) so that a mutated manifest gets past the
// checksums to what lies behind them: the sections' and weights' bounds,
// the external weights files. An artifact it accepts is then decoded as
// Model::load decodes it, no device needed: every launch against the kernel
// table (prepareSteps), and the cache plan (CachePlan::build). Each launch
// is then bound (bindLaunch) for one token and for the artifact's maximum,
// and its buffers must lie inside the step's arena.
//
//===----------------------------------------------------------------------===//

#include "runtime/artifact/ArtifactFile.h"
#include "runtime/core/CacheState.h"
#include "runtime/core/Device.h"
#include "runtime/core/PreparedLaunch.h"

#include <google/protobuf/stubs/logging.h>

#include <algorithm>
#include <climits>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

using namespace daybreak;
using namespace daybreak::artifact;

static uint64_t load64(const std::vector<uint8_t> &file, size_t at) {
  uint64_t value = 0;
  for (int i = 7; i >= 0; --i)
    value = (value << 8) | file[at + i];
  return value;
}

static void store64(std::vector<uint8_t> &file, size_t at, uint64_t value) {
  for (int i = 0; i < 8; ++i)
    file[at + i] = uint8_t(value >> (8 * i));
}

/// The input with a valid header (magic, version, flags, reserved bytes,
/// file size) and its manifest rewritten in place with every in-range
/// section's XXH3 and the manifest's FNV-1a recomputed; empty where the
/// header's manifest range does not hold a manifest, or the rewritten one
/// would run into a section.
static std::vector<uint8_t> reseal(const uint8_t *data, size_t size) {
  if (size < kHeaderSize)
    return {};
  std::vector<uint8_t> file(data, data + size);
  std::memcpy(file.data(), kMagic, sizeof(kMagic));
  for (size_t i = kVersionOffset; i < kManifestOffsetOffset; ++i)
    file[i] = 0;
  file[kVersionOffset] = uint8_t(kFormatVersion);
  std::memset(file.data() + kReservedOffset, 0, kHeaderSize - kReservedOffset);
  store64(file, kFileSizeOffset, size);
  uint64_t offset = load64(file, kManifestOffsetOffset);
  uint64_t oldSize = load64(file, kManifestSizeOffset);
  if (offset < kHeaderSize || offset > size || oldSize > size - offset ||
      oldSize > uint64_t(INT_MAX))
    return {};
  Manifest manifest;
  if (!manifest.ParseFromArray(file.data() + offset, int(oldSize)))
    return {};
  uint64_t room = size;
  for (Section &section : *manifest.mutable_sections()) {
    if (section.offset() <= size && section.size() <= size - section.offset())
      section.set_checksum(
          xxh3(file.data() + section.offset(), size_t(section.size())));
    if (section.offset() >= offset)
      room = std::min<uint64_t>(room, section.offset());
  }
  std::string bytes;
  if (!manifest.SerializeToString(&bytes) || bytes.size() > room - offset)
    return {};
  std::memset(file.data() + offset, 0, size_t(oldSize));
  std::memcpy(file.data() + offset, bytes.data(), bytes.size());
  store64(file, kManifestSizeOffset, bytes.size());
  store64(file, kManifestChecksumOffset,
          fnv1a64(file.data() + offset, bytes.size()));
  return file;
}

/// Decodes an accepted artifact as a model load does, short of a device.
static void decode(const ArtifactFile &file) {
  const Manifest &m = file.manifest();
  // The first and last byte of every weight: one outside the buffer or a
  // weights file's mapping is an ASan report or a fault.
  uint8_t ends = 0;
  for (const Weight &weight : m.weights())
    for (auto [bytes, size] : file.weightPieces(weight)) {
      if (size && !bytes)
        __builtin_trap();
      if (size)
        ends ^= bytes[0] ^ bytes[size - 1];
    }
  volatile uint8_t sink = ends;
  (void)sink;
  StatusOr<runtime::CachePlan> plan = runtime::CachePlan::build(m);
  StatusOr<std::vector<runtime::PreparedStep>> steps = runtime::prepareSteps(m);
  if (!plan.ok() || !steps.ok())
    return;
  // Bound for the fewest and the most tokens a step admits (Model::stage),
  // every buffer must lie inside its step's arena: the kernels write there.
  std::vector<uint64_t> weights(size_t(m.weights_size()), 4096);
  for (const runtime::PreparedStep &step : *steps) {
    for (const runtime::PreparedLaunch &launch : step.launches) {
      if (launch.args.size() > runtime::kMaxLaunchArgs)
        __builtin_trap();
      for (int64_t tokens : {int64_t(1), m.max_tokens()}) {
        if (tokens < 1)
          continue;
        runtime::BoundLaunch bound;
        runtime::bindLaunch(launch, tokens, 0, weights.data(), bound);
        for (size_t i = 0; i < launch.args.size(); ++i) {
          const runtime::BoundArg &arg = bound.args[i];
          if (arg.arg->kind != runtime::PreparedArg::Kind::Buffer)
            continue;
          uint64_t bytes = uint64_t(runtime::elementBytes(arg.arg->dtype));
          for (unsigned d = 0; d < arg.rank; ++d)
            if (arg.shape[d] < 0 ||
                __builtin_mul_overflow(bytes, uint64_t(arg.shape[d]), &bytes))
              __builtin_trap();
          if (arg.address > step.step->arena_size() ||
              bytes > step.step->arena_size() - arg.address)
            __builtin_trap();
        }
      }
    }
  }
}

extern "C" int LLVMFuzzerInitialize(int *argc, char ***argv) {
  // Protobuf logs every string field that is not UTF-8 as it refuses the
  // manifest; the refusal is what is fuzzed, the log only slows it down.
  google::protobuf::SetLogHandler(nullptr);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  StatusOr<ArtifactFile> file =
      ArtifactFile::openBytes("fuzz.daybreak", data, size);
  if (file.ok())
    decode(*file);
  std::vector<uint8_t> resealed = reseal(data, size);
  if (resealed.empty())
    return 0;
  StatusOr<ArtifactFile> sealed = ArtifactFile::openBytes(
      "fuzz.daybreak", resealed.data(), resealed.size());
  if (sealed.ok())
    decode(*sealed);
  return 0;
}
