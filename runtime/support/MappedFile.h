//===- MappedFile.h - A read-only mapping of a whole file -------*- C++ -*-===//
//
// What the artifact reader and the safetensors reader both stand on: the
// file mapped read-only and private, unmapped when the owner goes. Each
// reader validates the bytes its own way; this only opens, maps and owns.
//
//===----------------------------------------------------------------------===//

#ifndef DAYBREAK_RUNTIME_SUPPORT_MAPPEDFILE_H
#define DAYBREAK_RUNTIME_SUPPORT_MAPPEDFILE_H

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <fcntl.h>
#include <string>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace daybreak {

class MappedFile {
public:
  MappedFile() = default;
  MappedFile(MappedFile &&other) noexcept
      : bytes(other.bytes), length(other.length) {
    other.bytes = nullptr;
    other.length = 0;
  }
  MappedFile &operator=(MappedFile &&other) noexcept {
    if (this != &other) {
      reset();
      bytes = other.bytes;
      length = other.length;
      other.bytes = nullptr;
      other.length = 0;
    }
    return *this;
  }
  MappedFile(const MappedFile &) = delete;
  MappedFile &operator=(const MappedFile &) = delete;
  ~MappedFile() { reset(); }

  /// Maps all of `path` into `out`. On failure returns "<path>: cannot
  /// open|stat|mmap: <reason>" and leaves `out` empty; an empty file maps
  /// to no bytes (callers check the size they need).
  static std::string open(const std::string &path, MappedFile &out) {
    out.reset();
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0)
      return path + ": cannot open: " + std::strerror(errno);
    struct stat info;
    std::string error;
    if (::fstat(fd, &info) != 0) {
      error = path + ": cannot stat: " + std::strerror(errno);
    } else if (info.st_size > 0) {
      void *mapped = ::mmap(nullptr, size_t(info.st_size), PROT_READ,
                            MAP_PRIVATE, fd, 0);
      if (mapped == MAP_FAILED) {
        error = path + ": cannot mmap: " + std::strerror(errno);
      } else {
        out.bytes = static_cast<const uint8_t *>(mapped);
        out.length = size_t(info.st_size);
      }
    }
    ::close(fd);
    return error;
  }

  const uint8_t *data() const { return bytes; }
  size_t size() const { return length; }

  void reset() {
    if (bytes)
      ::munmap(const_cast<uint8_t *>(bytes), length);
    bytes = nullptr;
    length = 0;
  }

private:
  const uint8_t *bytes = nullptr;
  size_t length = 0;
};

} // namespace daybreak

#endif // DAYBREAK_RUNTIME_SUPPORT_MAPPEDFILE_H
