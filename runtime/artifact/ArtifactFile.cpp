//===- ArtifactFile.cpp - Verifying reader for .daybreak files ------------===//

#include "runtime/artifact/ArtifactFile.h"

#include <xxhash.h>

#include <algorithm>
#include <climits>
#include <cstring>
#include <numeric>
#include <vector>

namespace daybreak::artifact {

namespace {

uint32_t loadLE32(const uint8_t *bytes) {
  uint32_t value = 0;
  for (int i = 3; i >= 0; --i)
    value = (value << 8) | bytes[i];
  return value;
}

uint64_t loadLE64(const uint8_t *bytes) {
  uint64_t value = 0;
  for (int i = 7; i >= 0; --i)
    value = (value << 8) | bytes[i];
  return value;
}

std::string hex(uint64_t value) {
  static const char digits[] = "0123456789abcdef";
  std::string text = "0x";
  for (int shift = 60; shift >= 0; shift -= 4)
    text += digits[(value >> shift) & 0xf];
  return text;
}

/// "[offset, offset+size)" without overflowing.
std::string range(uint64_t offset, uint64_t size) {
  return "[" + std::to_string(offset) + ", " + std::to_string(offset) + "+" +
         std::to_string(size) + ")";
}

/// Whether [offset, offset+size) lies within [0, limit), overflow-safe.
bool fits(uint64_t offset, uint64_t size, uint64_t limit) {
  return size <= limit && offset <= limit - size;
}

std::string sectionLabel(const Manifest &manifest, size_t index) {
  return "section " + std::to_string(index) + " '" +
         manifest.sections(int(index)).name() + "'";
}

/// Checks alignment, bounds, overlap and checksums of every section.
/// `dataStart` is the end of the manifest: no section may begin before it.
Status verifySections(const std::string &path, const Manifest &manifest,
                      const uint8_t *bytes, uint64_t fileSize,
                      uint64_t dataStart) {
  const int count = manifest.sections_size();
  for (int i = 0; i < count; ++i) {
    const Section &section = manifest.sections(i);
    std::string label = path + ": " + sectionLabel(manifest, size_t(i));
    if (section.offset() % kSectionAlignment != 0)
      return Status::error(
          label + ": offset " + std::to_string(section.offset()) +
          " is not a multiple of " + std::to_string(kSectionAlignment));
    if (!fits(section.offset(), section.size(), fileSize))
      return Status::error(
          label + ": byte range " + range(section.offset(), section.size()) +
          " lies outside the " + std::to_string(fileSize) + "-byte file");
    if (section.offset() < dataStart)
      return Status::error(label + ": offset " +
                           std::to_string(section.offset()) +
                           " overlaps the header and manifest, which end at " +
                           std::to_string(dataStart));
  }

  // Overlap: sort by offset, then each section must end before the next one
  // starts. Empty sections overlap nothing.
  std::vector<int> order(static_cast<size_t>(count));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
    return manifest.sections(a).offset() < manifest.sections(b).offset();
  });
  int previous = -1;
  for (int index : order) {
    const Section &section = manifest.sections(index);
    if (section.size() == 0)
      continue;
    if (previous >= 0) {
      const Section &before = manifest.sections(previous);
      if (before.offset() + before.size() > section.offset())
        return Status::error(
            path + ": " + sectionLabel(manifest, size_t(index)) + " at " +
            range(section.offset(), section.size()) + " overlaps " +
            sectionLabel(manifest, size_t(previous)) + " at " +
            range(before.offset(), before.size()));
    }
    previous = index;
  }

  for (int i = 0; i < count; ++i) {
    const Section &section = manifest.sections(i);
    uint64_t actual = xxh3(bytes + section.offset(), size_t(section.size()));
    if (actual != section.checksum())
      return Status::error(path + ": " + sectionLabel(manifest, size_t(i)) +
                           ": checksum mismatch: manifest says " +
                           hex(section.checksum()) + ", bytes hash to " +
                           hex(actual) + " (the file is corrupt)");
  }
  return Status::success();
}

/// Checks that every weight names a section, lies inside it and has the byte
/// size its shape and dtype imply.
Status verifyWeights(const std::string &path, const Manifest &manifest) {
  for (const Weight &weight : manifest.weights()) {
    std::string label = path + ": weight '" + weight.name() + "'";
    if (weight.pieces_size() == 0 &&
        weight.section() >= uint32_t(manifest.sections_size()))
      return Status::error(
          label + ": section index " + std::to_string(weight.section()) +
          " is out of range (the manifest has " +
          std::to_string(manifest.sections_size()) + " sections)");
    // External weights are checked against their file once it is mapped.
    if (weight.pieces_size() == 0) {
      const Section &section = manifest.sections(int(weight.section()));
      if (!fits(weight.offset(), weight.size(), section.size()))
        return Status::error(
            label + ": byte range " + range(weight.offset(), weight.size()) +
            " lies outside " + sectionLabel(manifest, weight.section()) +
            " of " + std::to_string(section.size()) + " bytes");
    }

    std::optional<uint64_t> bits = dtypeBits(weight.dtype());
    if (!bits)
      return Status::error(label + ": unknown dtype " +
                           std::to_string(int(weight.dtype())));
    uint64_t count = 1;
    for (int64_t dim : weight.shape()) {
      if (dim < 0)
        return Status::error(label + ": negative dimension " +
                             std::to_string(dim) + " in its shape");
      if (dim != 0 && count > (UINT64_MAX / 8) / uint64_t(dim))
        return Status::error(label + ": shape overflows 64-bit byte size");
      count *= uint64_t(dim);
    }
    // Sub-byte types are packed: two E2M1 values per byte.
    uint64_t expected = (count * *bits + 7) / 8;
    if (expected != weight.size())
      return Status::error(label + ": size " + std::to_string(weight.size()) +
                           " bytes disagrees with its shape and dtype " +
                           DType_Name(weight.dtype()) + ", which need " +
                           std::to_string(expected) + " bytes");
  }
  return Status::success();
}

} // namespace

uint64_t xxh3(const void *data, size_t size) { return XXH3_64bits(data, size); }

Xxh3::Xxh3() : state(XXH3_createState()) { XXH3_64bits_reset(state); }
Xxh3::~Xxh3() { XXH3_freeState(state); }
void Xxh3::update(const void *data, size_t size) {
  XXH3_64bits_update(state, data, size);
}
uint64_t Xxh3::digest() const { return XXH3_64bits_digest(state); }

uint64_t fnv1a64(const uint8_t *data, size_t size, uint64_t hash) {
  constexpr uint64_t kPrime = 0x100000001b3ull;
  for (size_t i = 0; i < size; ++i) {
    hash ^= data[i];
    hash *= kPrime;
  }
  return hash;
}

std::string weightOriginText(const WeightPrecision &p) {
  if (p.origin() == "checkpoint")
    return "as the checkpoint stores them";
  if (p.dtype() == F8E4M3FN)
    return p.origin() + ": MXFP4 experts the offline route converted to E4M3 "
                        "at compile time (every E2M1 value is exact in E4M3; "
                        "docs/mxfp4.md)";
  if (p.dtype() == BF16)
    return p.origin() +
           ": values the compiler computed once, every one a bf16 value "
           "(absorbed MLA's head matrices: e4m3 codes times power-of-two "
           "scales, or bf16 slices), so stored as bf16 with no rounding";
  return p.origin() +
         ": values the compiler computed once (absorbed MLA, dequantised "
         "folds, widened bf16 sinks, the offline MXFP4 route's block "
         "scales), kept in fp32 so the fold adds no rounding";
}

std::string mxfp4WorkspaceText(const Manifest &m) {
  bool any = false;
  for (const Step &step : m.steps())
    for (const Buffer &b : step.buffers()) {
      if (b.name().rfind("mxfp4_workspace.0.", 0) == 0)
        return "two, alternating between layers: each conversion runs "
               "beside the layer before";
      any |= b.name().rfind("mxfp4_workspace", 0) == 0;
    }
  return any ? "shared by all layers" : "none: no step converts";
}

std::string mxfp4RouteText(const Manifest &m) {
  const std::string &route = m.memory().mxfp4_route();
  if (route != "online")
    return route;
  std::string converting, packed;
  for (const Step &step : m.steps()) {
    bool converts = false;
    for (const Launch &l : step.launches())
      converts |= l.kernel() == "mxfp4_to_fp8_experts";
    std::string &list = converts ? converting : packed;
    list += (list.empty() ? "" : ", ") + step.name();
  }
  if (packed.empty())
    return route + " (every step converts)";
  if (converting.empty())
    return route + " (no step converts: every step reads the packed experts)";
  return route + " (" + (converting.empty() ? "no step" : converting) +
         " converts; " + packed + " reads the packed experts)";
}

std::string rankArtifactPath(const std::string &output, int64_t rank,
                             int64_t ranks) {
  if (ranks <= 1)
    return output;
  const std::string suffix = ".daybreak";
  std::string stem = output;
  if (stem.size() >= suffix.size() &&
      stem.compare(stem.size() - suffix.size(), suffix.size(), suffix) == 0)
    stem.resize(stem.size() - suffix.size());
  return stem + ".rank" + std::to_string(rank) + "-of-" +
         std::to_string(ranks) + suffix;
}

std::optional<uint64_t> dtypeBits(DType dtype) {
  if (dtype == F4E2M1FN)
    return 4;
  std::optional<uint64_t> bytes = dtypeSize(dtype);
  if (!bytes)
    return std::nullopt;
  return *bytes * 8;
}

std::optional<uint64_t> dtypeSize(DType dtype) {
  switch (dtype) {
  case F32:
  case I32:
    return 4;
  case BF16:
  case F16:
    return 2;
  case F8E4M3FN:
  case F8E8M0FNU:
  case U8:
    return 1;
  case I64:
    return 8;
  default:
    return std::nullopt;
  }
}

StatusOr<ArtifactFile> ArtifactFile::open(const std::string &path) {
  ArtifactFile file;
  file.filePath = path;
  std::string mapped = MappedFile::open(path, file.mapping);
  if (!mapped.empty())
    return Status::error(mapped);
  file.bytes = file.mapping.data();
  file.size = file.mapping.size();
  if (Status status = file.verify(); !status)
    return status;
  return StatusOr<ArtifactFile>(std::move(file));
}

StatusOr<ArtifactFile> ArtifactFile::openBytes(const std::string &name,
                                               const uint8_t *data,
                                               size_t size) {
  ArtifactFile file;
  file.filePath = name;
  file.bytes = data;
  file.size = size;
  if (Status status = file.verify(); !status)
    return status;
  return StatusOr<ArtifactFile>(std::move(file));
}

Status ArtifactFile::verify() {
  const std::string &path = filePath;
  uint64_t fileSize = size;
  if (fileSize < kHeaderSize)
    return Status::error(path + ": file is " + std::to_string(fileSize) +
                         " bytes, shorter than the " +
                         std::to_string(kHeaderSize) +
                         "-byte .daybreak header");

  if (std::memcmp(bytes, kMagic, sizeof(kMagic)) != 0)
    return Status::error(path + ": bad magic: not a .daybreak artifact");
  uint32_t version = loadLE32(bytes + kVersionOffset);
  if (version != kFormatVersion)
    return Status::error(
        path + ": was written by format version " + std::to_string(version) +
        "; this runtime reads version " + std::to_string(kFormatVersion));
  uint32_t flags = loadLE32(bytes + kFlagsOffset);
  if (flags != 0)
    return Status::error(path + ": unknown header flags " + hex(flags) +
                         " (format version 1 defines none)");
  for (size_t i = kReservedOffset; i < kHeaderSize; ++i)
    if (bytes[i] != 0)
      return Status::error(path + ": reserved header byte " +
                           std::to_string(i) + " is not zero");
  uint64_t recordedSize = loadLE64(bytes + kFileSizeOffset);
  if (recordedSize != fileSize)
    return Status::error(path + ": header records a file size of " +
                         std::to_string(recordedSize) + " bytes but the file " +
                         "has " + std::to_string(fileSize) +
                         " (truncated or appended to?)");

  uint64_t manifestOffset = loadLE64(bytes + kManifestOffsetOffset);
  uint64_t manifestSize = loadLE64(bytes + kManifestSizeOffset);
  if (manifestOffset < kHeaderSize ||
      !fits(manifestOffset, manifestSize, fileSize))
    return Status::error(path + ": manifest byte range " +
                         range(manifestOffset, manifestSize) +
                         " lies outside the " + std::to_string(fileSize) +
                         "-byte file or inside its header");
  if (manifestSize > uint64_t(INT_MAX))
    return Status::error(path + ": manifest of " +
                         std::to_string(manifestSize) +
                         " bytes exceeds protobuf's 2 GiB limit");
  const uint8_t *manifestBytes = bytes + manifestOffset;
  uint64_t recordedChecksum = loadLE64(bytes + kManifestChecksumOffset);
  uint64_t actualChecksum = fnv1a64(manifestBytes, size_t(manifestSize));
  if (actualChecksum != recordedChecksum)
    return Status::error(path + ": manifest checksum mismatch: header says " +
                         hex(recordedChecksum) + ", bytes hash to " +
                         hex(actualChecksum) + " (the file is corrupt)");

  parsed = std::make_unique<Manifest>();
  if (!parsed->ParseFromArray(manifestBytes, int(manifestSize)))
    return Status::error(path + ": manifest does not parse as a "
                                "daybreak.artifact.Manifest");
  const Manifest &manifest = *parsed;
  if (manifest.format_version() != kFormatVersion)
    return Status::error(path + ": manifest says format version " +
                         std::to_string(manifest.format_version()) +
                         " but the header says " + std::to_string(version));

  if (Status status = verifySections(path, manifest, bytes, fileSize,
                                     manifestOffset + manifestSize);
      !status)
    return status;
  if (Status status = verifyWeights(path, manifest); !status)
    return status;
  return openExternalFiles();
}

const uint8_t *ArtifactFile::sectionData(uint32_t index) const {
  if (!parsed || index >= uint32_t(parsed->sections_size()))
    return nullptr;
  return bytes + parsed->sections(int(index)).offset();
}

std::optional<uint32_t> ArtifactFile::findSection(std::string_view name) const {
  for (int i = 0; i < parsed->sections_size(); ++i)
    if (parsed->sections(i).name() == name)
      return uint32_t(i);
  return std::nullopt;
}

const uint8_t *ArtifactFile::weightData(const Weight &weight) const {
  if (weight.pieces_size() == 1)
    return externals[weight.pieces(0).file()].data() + weight.pieces(0).offset();
  if (weight.pieces_size() > 1)
    return nullptr;
  const uint8_t *section = sectionData(weight.section());
  return section ? section + weight.offset() : nullptr;
}

std::vector<std::pair<const uint8_t *, uint64_t>>
ArtifactFile::weightPieces(const Weight &weight) const {
  if (weight.pieces_size() == 0)
    return {{weightData(weight), weight.size()}};
  std::vector<std::pair<const uint8_t *, uint64_t>> pieces;
  for (const WeightPiece &p : weight.pieces())
    pieces.push_back({externals[p.file()].data() + p.offset(), p.size()});
  return pieces;
}

Status ArtifactFile::openExternalFiles() {
  const Manifest &m = *parsed;
  externals.resize(m.external_files_size());
  for (int i = 0; i < m.external_files_size(); ++i) {
    const ExternalFile &f = m.external_files(i);
    std::string label = filePath + ": weights file '" + f.path() + "'";
    std::string opened = MappedFile::open(f.path(), externals[i]);
    if (!opened.empty())
      return Status::error(label + ": " + opened +
                           " (the artifact refers to the checkpoint's files "
                           "by path: recompile, or restore the file)");
    if (externals[i].size() != f.size())
      return Status::error(label + " has " +
                           std::to_string(externals[i].size()) +
                           " bytes; the artifact was compiled against " +
                           std::to_string(f.size()) +
                           " (the checkpoint changed: recompile)");
    if (f.head_bytes() > f.size() ||
        xxh3(externals[i].data(), f.head_bytes()) != f.head_xxh3())
      return Status::error(label + ": its safetensors header differs from "
                           "the one the artifact was compiled against (the "
                           "checkpoint changed: recompile)");
  }
  // Every piece inside its file, and the pieces exactly the weight's bytes.
  for (const Weight &w : m.weights()) {
    if (w.pieces_size() == 0)
      continue;
    std::string label = filePath + ": weight '" + w.name() + "'";
    uint64_t total = 0;
    for (const WeightPiece &p : w.pieces()) {
      if (p.file() >= uint32_t(m.external_files_size()))
        return Status::error(label + " names weights file " +
                             std::to_string(p.file()) + " of " +
                             std::to_string(m.external_files_size()));
      if (!fits(p.offset(), p.size(), externals[p.file()].size()))
        return Status::error(label + ": byte range " +
                             range(p.offset(), p.size()) + " lies outside '" +
                             m.external_files(p.file()).path() + "'");
      total += p.size();
    }
    if (total != w.size())
      return Status::error(label + ": its pieces hold " +
                           std::to_string(total) + " bytes, its size is " +
                           std::to_string(w.size()));
  }
  return Status::success();
}

Status ArtifactFile::verifyExternalFiles() const {
  const Manifest &m = *parsed;
  for (int i = 0; i < m.external_files_size(); ++i) {
    const ExternalFile &f = m.external_files(i);
    uint64_t actual = xxh3(externals[i].data(), externals[i].size());
    if (actual != f.xxh3())
      return Status::error(filePath + ": weights file '" + f.path() +
                           "': its bytes hash to " + hex(actual) +
                           ", the artifact was compiled against " +
                           hex(f.xxh3()) + " (the checkpoint changed: "
                           "recompile)");
  }
  return Status::success();
}

} // namespace daybreak::artifact
