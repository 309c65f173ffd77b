//===- OutOfMemory.h - Host memory exhaustion as an error exit ---*- C++
//-*-===//
//
// The tools refuse, before allocating, what their plans show will not fit
// (a model larger than the host or GPU memory). Anything else that runs out
// of host memory lands in operator new; there, with this handler, the tool
// prints one line and exits 1 instead of letting std::bad_alloc abort it
// (daybreak-run has no exceptions) or LLVM's handler abort with a stack
// dump. Header-only: the handler writes with write(2) and allocates nothing.
//
//===----------------------------------------------------------------------===//

#ifndef DAYBREAK_RUNTIME_SUPPORT_OUTOFMEMORY_H
#define DAYBREAK_RUNTIME_SUPPORT_OUTOFMEMORY_H

#include <cstdlib>
#include <cstring>
#include <new>
#include <unistd.h>

namespace daybreak {

/// Installs the handler for a tool whose messages start with `prefix`
/// ("daybreak-run: "), a string literal that outlives the process.
inline void exitOnOutOfMemory(const char *prefix) {
  static const char *toolPrefix;
  toolPrefix = prefix;
  std::set_new_handler([] {
    static const char message[] =
        "out of host memory (an allocation failed); lower the limits the "
        "artifact was compiled with, or free memory\n";
    (void)!::write(2, toolPrefix, std::strlen(toolPrefix));
    (void)!::write(2, message, sizeof(message) - 1);
    std::_Exit(1);
  });
}

} // namespace daybreak

#endif // DAYBREAK_RUNTIME_SUPPORT_OUTOFMEMORY_H
