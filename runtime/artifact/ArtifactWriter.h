//===- ArtifactWriter.h - Writes .daybreak files ----------------*- C++ -*-===//
//
// The compiler side of the container described in ArtifactFile.h. It lives
// beside the reader so both sides share one library and one set of
// constants. Output is deterministic: the same sections and manifest give
// byte-identical files.
//
//===----------------------------------------------------------------------===//

#ifndef DAYBREAK_RUNTIME_ARTIFACT_ARTIFACTWRITER_H
#define DAYBREAK_RUNTIME_ARTIFACT_ARTIFACTWRITER_H

#include "runtime/support/Status.h"

#include "Manifest.pb.h"

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace daybreak::artifact {

/// Collects sections, then writes them with a manifest. Owns copies of the
/// section bytes until destroyed, except those added as borrowed pieces.
/// Not thread-safe.
class ArtifactWriter {
public:
  /// Appends a section and returns its index (for Weight.section). Sections
  /// are laid out in the order they are added.
  uint32_t addSection(std::string name, std::vector<uint8_t> bytes);
  /// Same, copying `size` bytes from `data`.
  uint32_t addSection(std::string name, const void *data, size_t size);
  /// Bytes at `offset` within a section, borrowed: they must stay valid
  /// until write() returns.
  struct Piece {
    uint64_t offset = 0;
    const void *data = nullptr;
    uint64_t size = 0;
  };
  /// A section of `size` bytes assembled from non-overlapping `pieces`, zero
  /// elsewhere, copied straight into the file by write(): a model's weights
  /// go from where they already are (the checkpoint's mapping, folded
  /// values) to the artifact without a buffer of their total size. Fails if
  /// a piece overlaps another or lies outside the section.
  StatusOr<uint32_t> addSection(std::string name, uint64_t size,
                                std::vector<Piece> pieces);

  size_t numSections() const { return sections.size(); }

  /// Writes the artifact to `path`: fills `manifest.format_version` and
  /// `manifest.sections` (replacing what they held), writes a temporary file
  /// beside `path` and renames it over `path`, so readers never see a partial
  /// file. Weights are not checked here; ArtifactFile::open checks them.
  Status write(const std::string &path, Manifest manifest) const;

private:
  struct PendingSection {
    std::string name;
    uint64_t size = 0;
    std::vector<uint8_t> bytes; ///< owned bytes, or
    std::vector<Piece> pieces;  ///< borrowed ones, sorted by offset
  };
  /// The pieces of `section` in order (its owned bytes as one piece).
  static std::vector<Piece> piecesOf(const PendingSection &section);
  std::vector<PendingSection> sections;
};

} // namespace daybreak::artifact

#endif // DAYBREAK_RUNTIME_ARTIFACT_ARTIFACTWRITER_H
