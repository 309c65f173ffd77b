//===- CompileCache.h - On-disk cache of the CUDA toolchain's output -*- C++ -*-===//
//
// The CUDA target spends most of a compile in NVRTC (the library kernels
// specialised for a model's shapes) and ptxas (the library module, about
// 11 MB of PTX). Both are functions of their inputs, so their output is
// kept on disk under a hash of everything it depends on, one file an entry:
// a first line naming the format, then the payload. An entry is written to
// a temporary file renamed over its name, so concurrent compiles never read
// half of one; one that cannot be read as written is a miss.
//
//===----------------------------------------------------------------------===//

#ifndef DAYBREAK_COMPILER_TARGETS_CUDA_COMPILECACHE_H
#define DAYBREAK_COMPILER_TARGETS_CUDA_COMPILECACHE_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"

#include <optional>
#include <string>

namespace daybreak::targets::cuda {

/// The directory of one kind of entry ("nvrtc", "ptxas"):
/// $DAYBREAK_CACHE_DIR/<kind> (DAYBREAK_CACHE_DIR empty or "off": no cache),
/// else $XDG_CACHE_HOME/daybreak/<kind>, else ~/.cache/daybreak/<kind>.
std::optional<std::string> compileCacheDirectory(llvm::StringRef kind);

/// The path of the entry keyed by `parts` (each hashed with its length, so
/// no two lists collide by concatenation) in `directory`, named by the
/// SHA-256 digest in hex and `extension`.
std::string compileCacheEntry(llvm::StringRef directory,
                              llvm::ArrayRef<llvm::StringRef> parts,
                              llvm::StringRef extension);

/// The payload of the entry at `path` whose first line is `format`, or
/// std::nullopt (a miss: absent, unreadable, or another format).
std::optional<std::string> readCompileCache(llvm::StringRef path,
                                            llvm::StringRef format);

/// Writes the entry `format` + "\n" + `payload` to `path`. Best effort: a
/// cache that cannot be written only costs the next compile its time.
void writeCompileCache(llvm::StringRef path, llvm::StringRef format,
                       llvm::StringRef payload);

} // namespace daybreak::targets::cuda

#endif // DAYBREAK_COMPILER_TARGETS_CUDA_COMPILECACHE_H
