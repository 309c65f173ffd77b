//===- CpuTarget.h - The CPU target -----------------------------*- C++ -*-===//
//
// x86-64 CPUs: the runtime's C++ kernels for every library kernel, matmuls
// tiled by lm-tile, and the generated kernels compiled by CpuCodegen into
// one shared object (the artifact's "code.x86_64" section).
//
//===----------------------------------------------------------------------===//

#ifndef DAYBREAK_COMPILER_TARGETS_CPU_CPUTARGET_H
#define DAYBREAK_COMPILER_TARGETS_CPU_CPUTARGET_H

namespace daybreak::targets {
class Target;
} // namespace daybreak::targets

namespace daybreak::targets::cpu {

/// The `cpu` target (a singleton; look it up with getTarget("cpu")).
const Target &getCpuTarget();

} // namespace daybreak::targets::cpu

#endif // DAYBREAK_COMPILER_TARGETS_CPU_CPUTARGET_H
