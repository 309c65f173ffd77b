//===- ArtifactFile.h - The .daybreak container and its reader --*- C++ -*-===//
//
// A `.daybreak` artifact is one file, all integers little-endian:
//
//   offset 0   header, 64 bytes
//                [0, 8)    magic "DAYBREAK"
//                [8, 12)   u32 format version (kFormatVersion)
//                [12, 16)  u32 flags, 0 (no flags are defined)
//                [16, 24)  u64 manifest offset (64: right after the header)
//                [24, 32)  u64 manifest size in bytes
//                [32, 40)  u64 manifest checksum, FNV-1a 64 of its bytes
//                [40, 48)  u64 file size in bytes
//                [48, 64)  reserved, zero
//   offset 64  the Manifest (Manifest.proto), deterministically serialized
//   then       each section at a 4096-byte aligned offset, in the order the
//              writer received them, zero padding in between; the manifest's
//              `sections` record name, offset, size and XXH3-64 checksum.
//
// Sections are aligned so the runtime can mmap weights and copy them to a
// device without parsing. ArtifactFile verifies every field, checksum and
// offset before it hands anything out; a file it does not understand is
// refused with a message naming the file and the problem.
//
//===----------------------------------------------------------------------===//

#ifndef DAYBREAK_RUNTIME_ARTIFACT_ARTIFACTFILE_H
#define DAYBREAK_RUNTIME_ARTIFACT_ARTIFACTFILE_H

#include "runtime/support/MappedFile.h"
#include "runtime/support/Status.h"

#include "Manifest.pb.h"

#include <cstddef>
#include <cstdint>

struct XXH3_state_s; // <xxhash.h>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace daybreak::artifact {

inline constexpr char kMagic[8] = {'D', 'A', 'Y', 'B', 'R', 'E', 'A', 'K'};
/// Bump on any change an older runtime would misread (ArtifactFile refuses
/// other versions). 5: generated elementwise kernels take an element range
/// [begin, end) and index their inputs themselves (column views). 6:
/// buffers may be column views (Buffer.row_stride) in a kernel's VIEW
/// slots.
inline constexpr uint32_t kFormatVersion = 6;
inline constexpr uint64_t kHeaderSize = 64;
inline constexpr uint64_t kSectionAlignment = 4096;

// Byte offsets of the header fields.
inline constexpr size_t kVersionOffset = 8;
inline constexpr size_t kFlagsOffset = 12;
inline constexpr size_t kManifestOffsetOffset = 16;
inline constexpr size_t kManifestSizeOffset = 24;
inline constexpr size_t kManifestChecksumOffset = 32;
inline constexpr size_t kFileSizeOffset = 40;
inline constexpr size_t kReservedOffset = 48;

inline constexpr uint64_t kFnv1a64Basis = 0xcbf29ce484222325ull;

/// FNV-1a 64 of `size` bytes; pass a previous result as `hash` to continue.
/// XXH3-64 of `size` bytes (sections and external weight files: ~10x
/// faster than FNV-1a, which only the small manifest still uses).
uint64_t xxh3(const void *data, size_t size);
/// XXH3-64 over bytes fed in pieces. Not copyable; not thread-safe.
class Xxh3 {
public:
  Xxh3();
  ~Xxh3();
  Xxh3(const Xxh3 &) = delete;
  Xxh3 &operator=(const Xxh3 &) = delete;
  void update(const void *data, size_t size);
  uint64_t digest() const;

private:
  struct ::XXH3_state_s *state;
};

uint64_t fnv1a64(const uint8_t *data, size_t size,
                 uint64_t hash = kFnv1a64Basis);

/// Bytes per element of `dtype`; std::nullopt for DTYPE_UNSPECIFIED or a value
/// this runtime does not know.
std::optional<uint64_t> dtypeSize(DType dtype);
/// Bits per element of a dtype (4 for packed E2M1), or nullopt.
std::optional<uint64_t> dtypeBits(DType dtype);

/// Why weights of one precision group are stored as they are, for memory
/// plans: "as the checkpoint stores them", or for folds (fp32) that the
/// compiler computed them and fp32 keeps the product exact.
std::string weightOriginText(const WeightPrecision &p);

/// The MXFP4 route of the memory plan, for memory plans: the route's name,
/// and for the online route which steps convert (the decode step reads the
/// packed experts unless it has conversions of its own).
std::string mxfp4RouteText(const Manifest &m);
/// How the online route's workspace is laid out, for the memory plan:
/// "shared by all layers", or, where the conversions run overlapped
/// (plan-overlap-conversions), two that consecutive conversions alternate.
std::string mxfp4WorkspaceText(const Manifest &m);

/// The artifact of tensor-parallel rank `rank` of `ranks` for the output
/// name `output` (daybreak-compile --tensor-parallel): "model.daybreak"
/// becomes "model.rank0-of-2.daybreak"; `output` itself for one rank.
std::string rankArtifactPath(const std::string &output, int64_t rank,
                             int64_t ranks);

/// A read-only mapping of a verified `.daybreak` file. Owns the mapping (not
/// the bytes given to openBytes); move-only; pointers it returns stay valid
/// while it lives (moving keeps them valid). Immutable after `open`, so
/// concurrent reads are safe.
class ArtifactFile {
public:
  ArtifactFile(ArtifactFile &&other) noexcept = default;
  ArtifactFile &operator=(ArtifactFile &&other) noexcept = default;
  ArtifactFile(const ArtifactFile &) = delete;
  ArtifactFile &operator=(const ArtifactFile &) = delete;

  /// Maps `path` and verifies the header, the manifest, every section
  /// (alignment, bounds, overlap, checksum) and every weight (section, range,
  /// size against shape and dtype). Reads every byte of the file once.
  static StatusOr<ArtifactFile> open(const std::string &path);
  /// Verifies the `size` bytes at `data` as open() verifies a mapped file,
  /// `name` standing for its path; the result points into `data`, which
  /// the caller keeps alive and unchanged while it lives (fuzzing, bytes
  /// from elsewhere). External weights files are mapped as open() maps them.
  static StatusOr<ArtifactFile> openBytes(const std::string &name,
                                          const uint8_t *data, size_t size);

  const Manifest &manifest() const { return *parsed; }
  const std::string &path() const { return filePath; }
  /// The first byte of section `index`, or nullptr if there is no such
  /// section.
  const uint8_t *sectionData(uint32_t index) const;
  /// The index of the first section called `name`, if any.
  std::optional<uint32_t> findSection(std::string_view name) const;
  /// The first byte of `weight`, which must be one of manifest().weights():
  /// in a section, or in an external weights file; nullptr for a weight
  /// made of several external pieces (see weightPieces).
  const uint8_t *weightData(const Weight &weight) const;
  /// The byte ranges that make up `weight`, in order (one for a weight in a
  /// section or in one external range).
  std::vector<std::pair<const uint8_t *, uint64_t>>
  weightPieces(const Weight &weight) const;
  /// Hashes every byte of every external weights file against the
  /// manifest (open() checks only their sizes and safetensors headers).
  Status verifyExternalFiles() const;

private:
  ArtifactFile() = default;
  /// Verifies `bytes` (the header, the manifest, sections and weights) and
  /// opens the external weights files.
  Status verify();
  /// Maps the external weights files and checks their sizes, header
  /// hashes and that every external weight lies inside its file.
  Status openExternalFiles();

  std::string filePath;
  MappedFile mapping;
  /// The file's bytes: `mapping`'s, or those openBytes was given.
  const uint8_t *bytes = nullptr;
  uint64_t size = 0;
  std::vector<MappedFile> externals;
  // Behind a pointer so that moves are cheap and never touch protobuf's
  // arena-aware move semantics.
  std::unique_ptr<Manifest> parsed;
};

} // namespace daybreak::artifact

#endif // DAYBREAK_RUNTIME_ARTIFACT_ARTIFACTFILE_H
