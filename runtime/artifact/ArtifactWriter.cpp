//===- ArtifactWriter.cpp - Writes .daybreak files ------------------------===//

#include "runtime/artifact/ArtifactWriter.h"

#include "runtime/artifact/ArtifactFile.h"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace daybreak::artifact {

namespace {

void storeLE32(uint8_t *bytes, uint32_t value) {
  for (int i = 0; i < 4; ++i)
    bytes[i] = uint8_t(value >> (8 * i));
}

void storeLE64(uint8_t *bytes, uint64_t value) {
  for (int i = 0; i < 8; ++i)
    bytes[i] = uint8_t(value >> (8 * i));
}

uint64_t alignUp(uint64_t value) {
  return (value + kSectionAlignment - 1) / kSectionAlignment *
         kSectionAlignment;
}

/// Serializes deterministically (sorted map keys, should the schema ever get
/// maps), so the same manifest always gives the same bytes.
bool serialize(const Manifest &manifest, std::string &out) {
  out.clear();
  if (manifest.ByteSizeLong() > size_t(INT_MAX))
    return false;
  google::protobuf::io::StringOutputStream stream(&out);
  google::protobuf::io::CodedOutputStream coded(&stream);
  coded.SetSerializationDeterministic(true);
  bool written = manifest.SerializeToCodedStream(&coded);
  coded.Trim();
  return written && !coded.HadError();
}

/// Writes all of [data, data+size) to `fd`, retrying short writes.
bool writeAll(int fd, const uint8_t *data, uint64_t size) {
  while (size > 0) {
    ssize_t written =
        ::write(fd, data, size_t(std::min<uint64_t>(size, 1u << 30)));
    if (written < 0) {
      if (errno == EINTR)
        continue;
      return false;
    }
    data += written;
    size -= uint64_t(written);
  }
  return true;
}

bool writeZeros(int fd, uint64_t count) {
  static const uint8_t zeros[4096] = {};
  while (count > 0) {
    uint64_t chunk = std::min<uint64_t>(count, sizeof(zeros));
    if (!writeAll(fd, zeros, chunk))
      return false;
    count -= chunk;
  }
  return true;
}

} // namespace

uint32_t ArtifactWriter::addSection(std::string name,
                                    std::vector<uint8_t> bytes) {
  PendingSection section;
  section.name = std::move(name);
  section.size = bytes.size();
  section.bytes = std::move(bytes);
  sections.push_back(std::move(section));
  return uint32_t(sections.size() - 1);
}

StatusOr<uint32_t> ArtifactWriter::addSection(std::string name, uint64_t size,
                                              std::vector<Piece> pieces) {
  std::sort(pieces.begin(), pieces.end(),
            [](const Piece &a, const Piece &b) { return a.offset < b.offset; });
  uint64_t end = 0;
  for (const Piece &piece : pieces) {
    if (piece.offset < end || piece.offset + piece.size > size ||
        piece.offset + piece.size < piece.offset)
      return Status::error("section '" + name + "': bytes [" +
                           std::to_string(piece.offset) + ", " +
                           std::to_string(piece.offset + piece.size) +
                           ") overlap others or lie outside its " +
                           std::to_string(size) + " bytes");
    end = piece.offset + piece.size;
  }
  PendingSection section;
  section.name = std::move(name);
  section.size = size;
  section.pieces = std::move(pieces);
  sections.push_back(std::move(section));
  return uint32_t(sections.size() - 1);
}

std::vector<ArtifactWriter::Piece>
ArtifactWriter::piecesOf(const PendingSection &section) {
  if (!section.pieces.empty() || section.bytes.empty())
    return section.pieces;
  return {{0, section.bytes.data(), section.bytes.size()}};
}

uint32_t ArtifactWriter::addSection(std::string name, const void *data,
                                    size_t size) {
  const uint8_t *begin = static_cast<const uint8_t *>(data);
  return addSection(std::move(name), std::vector<uint8_t>(begin, begin + size));
}

Status ArtifactWriter::write(const std::string &path, Manifest manifest) const {
  manifest.set_format_version(kFormatVersion);
  manifest.clear_sections();
  for (const PendingSection &pending : sections) {
    Section *section = manifest.add_sections();
    section->set_name(pending.name);
    section->set_size(pending.size);
    // XXH3-64 over the pieces and the zeros between them, in order.
    static const uint8_t zeros[4096] = {};
    Xxh3 hash;
    uint64_t position = 0;
    auto hashZeros = [&](uint64_t count) {
      for (; count > 0; count -= std::min<uint64_t>(count, sizeof(zeros)))
        hash.update(zeros, std::min<uint64_t>(count, sizeof(zeros)));
    };
    for (const Piece &piece : piecesOf(pending)) {
      hashZeros(piece.offset - position);
      hash.update(piece.data, piece.size);
      position = piece.offset + piece.size;
    }
    hashZeros(pending.size - position);
    section->set_checksum(hash.digest());
  }

  // The manifest records the section offsets, which depend on the manifest's
  // size: lay sections out from a guessed start, serialize, and move the
  // start up until the manifest fits before it. Offsets only grow, so the
  // varint-encoded manifest only grows and this ends in a few rounds.
  std::string manifestBytes;
  uint64_t dataStart = kSectionAlignment;
  uint64_t fileSize = 0;
  for (;;) {
    uint64_t offset = dataStart;
    for (Section &section : *manifest.mutable_sections()) {
      offset = alignUp(offset);
      section.set_offset(offset);
      offset += section.size();
    }
    if (!serialize(manifest, manifestBytes))
      return Status::error(path + ": cannot serialize the manifest (over " +
                           "protobuf's 2 GiB limit?)");
    uint64_t manifestEnd = kHeaderSize + manifestBytes.size();
    if (sections.empty()) {
      fileSize = manifestEnd;
      break;
    }
    if (alignUp(manifestEnd) <= dataStart) {
      fileSize = offset;
      break;
    }
    dataStart = alignUp(manifestEnd);
  }

  uint8_t header[kHeaderSize] = {};
  std::memcpy(header, kMagic, sizeof(kMagic));
  storeLE32(header + kVersionOffset, kFormatVersion);
  storeLE32(header + kFlagsOffset, 0);
  storeLE64(header + kManifestOffsetOffset, kHeaderSize);
  storeLE64(header + kManifestSizeOffset, manifestBytes.size());
  storeLE64(header + kManifestChecksumOffset,
            fnv1a64(reinterpret_cast<const uint8_t *>(manifestBytes.data()),
                    manifestBytes.size()));
  storeLE64(header + kFileSizeOffset, fileSize);

  std::string tempPath = path + ".tmp.XXXXXX";
  int fd = ::mkostemp(tempPath.data(), O_CLOEXEC);
  if (fd < 0)
    return Status::error(path + ": cannot create a temporary file beside it: " +
                         std::strerror(errno));
  auto fail = [&](const std::string &what) {
    std::string reason = std::strerror(errno);
    ::close(fd);
    ::unlink(tempPath.c_str());
    return Status::error(path + ": " + what + " " + tempPath + ": " + reason);
  };

  uint64_t position = kHeaderSize + manifestBytes.size();
  if (!writeAll(fd, header, kHeaderSize) ||
      !writeAll(fd, reinterpret_cast<const uint8_t *>(manifestBytes.data()),
                manifestBytes.size()))
    return fail("cannot write");
  for (size_t i = 0; i < sections.size(); ++i) {
    const Section &section = manifest.sections(int(i));
    if (!writeZeros(fd, section.offset() - position))
      return fail("cannot write");
    position = section.offset();
    for (const Piece &piece : piecesOf(sections[i])) {
      if (!writeZeros(fd, section.offset() + piece.offset - position) ||
          !writeAll(fd, static_cast<const uint8_t *>(piece.data), piece.size))
        return fail("cannot write");
      position = section.offset() + piece.offset + piece.size;
    }
    if (!writeZeros(fd, section.offset() + section.size() - position))
      return fail("cannot write");
    position = section.offset() + section.size();
  }
  // A trailing empty section may sit past the last byte written.
  if (!writeZeros(fd, fileSize - position))
    return fail("cannot write");
  // mkstemp creates 0600; an artifact is meant to be shared.
  if (::fchmod(fd, 0644) != 0 || ::fsync(fd) != 0)
    return fail("cannot finish");
  if (::close(fd) != 0) {
    std::string reason = std::strerror(errno);
    ::unlink(tempPath.c_str());
    return Status::error(path + ": cannot close " + tempPath + ": " + reason);
  }
  if (::rename(tempPath.c_str(), path.c_str()) != 0) {
    std::string reason = std::strerror(errno);
    ::unlink(tempPath.c_str());
    return Status::error(path + ": cannot rename " + tempPath +
                         " over it: " + reason);
  }
  return Status::success();
}

} // namespace daybreak::artifact
