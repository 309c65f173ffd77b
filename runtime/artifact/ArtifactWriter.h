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
/// section bytes until destroyed. Not thread-safe.
class ArtifactWriter {
public:
  /// Appends a section and returns its index (for Weight.section). Sections
  /// are laid out in the order they are added.
  uint32_t addSection(std::string name, std::vector<uint8_t> bytes);
  /// Same, copying `size` bytes from `data`.
  uint32_t addSection(std::string name, const void *data, size_t size);

  size_t numSections() const { return sections.size(); }

  /// Writes the artifact to `path`: fills `manifest.format_version` and
  /// `manifest.sections` (replacing what they held), writes a temporary file
  /// beside `path` and renames it over `path`, so readers never see a partial
  /// file. Weights are not checked here; ArtifactFile::open checks them.
  Status write(const std::string &path, Manifest manifest) const;

private:
  struct PendingSection {
    std::string name;
    std::vector<uint8_t> bytes;
  };
  std::vector<PendingSection> sections;
};

} // namespace daybreak::artifact

#endif // DAYBREAK_RUNTIME_ARTIFACT_ARTIFACTWRITER_H
