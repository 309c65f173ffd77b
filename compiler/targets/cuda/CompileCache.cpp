//===- CompileCache.cpp - On-disk cache of the CUDA toolchain's output ----===//

#include "compiler/targets/cuda/CompileCache.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Process.h"
#include "llvm/Support/SHA256.h"
#include "llvm/Support/raw_ostream.h"

using namespace daybreak;

std::optional<std::string>
targets::cuda::compileCacheDirectory(llvm::StringRef kind) {
  if (std::optional<std::string> dir =
          llvm::sys::Process::GetEnv("DAYBREAK_CACHE_DIR")) {
    if (dir->empty() || *dir == "off")
      return std::nullopt;
    llvm::SmallString<128> path(*dir);
    llvm::sys::path::append(path, kind);
    return std::string(path);
  }
  llvm::SmallString<128> dir;
  if (std::optional<std::string> xdg =
          llvm::sys::Process::GetEnv("XDG_CACHE_HOME");
      xdg && !xdg->empty())
    dir = *xdg;
  else if (llvm::sys::path::home_directory(dir))
    llvm::sys::path::append(dir, ".cache");
  else
    return std::nullopt;
  llvm::sys::path::append(dir, "daybreak", kind);
  return std::string(dir);
}

std::string
targets::cuda::compileCacheEntry(llvm::StringRef directory,
                                 llvm::ArrayRef<llvm::StringRef> parts,
                                 llvm::StringRef extension) {
  llvm::SHA256 hash;
  for (llvm::StringRef part : parts) {
    hash.update(std::to_string(part.size()));
    hash.update(":");
    hash.update(part);
  }
  std::array<uint8_t, 32> digest = hash.final();
  llvm::SmallString<128> path(directory);
  llvm::sys::path::append(path, llvm::toHex(digest, /*LowerCase=*/true) +
                                    "." + extension);
  return std::string(path);
}

std::optional<std::string>
targets::cuda::readCompileCache(llvm::StringRef path, llvm::StringRef format) {
  auto buffer = llvm::MemoryBuffer::getFile(path, /*IsText=*/false,
                                            /*RequiresNullTerminator=*/false);
  if (!buffer)
    return std::nullopt;
  auto [first, payload] = (*buffer)->getBuffer().split('\n');
  if (first != format)
    return std::nullopt;
  return payload.str();
}

void targets::cuda::writeCompileCache(llvm::StringRef path,
                                      llvm::StringRef format,
                                      llvm::StringRef payload) {
  if (llvm::sys::fs::create_directories(llvm::sys::path::parent_path(path)))
    return;
  llvm::SmallString<128> temporary;
  int fd = -1;
  if (llvm::sys::fs::createUniqueFile(path + ".%%%%%%.tmp", fd, temporary))
    return;
  llvm::raw_fd_ostream os(fd, /*shouldClose=*/true);
  os << format << "\n" << payload;
  os.close();
  if (os.has_error()) {
    os.clear_error();
    llvm::sys::fs::remove(temporary);
    return;
  }
  if (llvm::sys::fs::rename(temporary, path))
    llvm::sys::fs::remove(temporary);
}
