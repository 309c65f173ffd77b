// REQUIRES: nvrtc
// Tests the NVRTC cache (compiler/targets/cuda/CompileCache.h): the first
// compile of a plan's library fills it with one entry named by its key; a
// later compile takes the PTX and the lowered names from that entry (here
// with a comment appended to it, which the recorded library then holds); a
// damaged entry is a miss, compiled again (NVRTC numbers its virtual
// registers differently from run to run, so the PTX is not compared byte
// for byte); and DAYBREAK_CACHE_DIR=off writes nothing. The plan is
// plan-specialize-library-kernels.mlir's.
// RUN: rm -rf %t.cache
// RUN: env DAYBREAK_CACHE_DIR=%t.cache daybreak-opt %S/plan-specialize-library-kernels.mlir --plan-specialize-library-kernels | FileCheck %s --check-prefix=MISS
// RUN: ls %t.cache/nvrtc | FileCheck %s --check-prefix=ENTRY
// RUN: for f in %t.cache/nvrtc/*.ptx; do echo "// taken from the cache" >> $f; done
// RUN: env DAYBREAK_CACHE_DIR=%t.cache daybreak-opt %S/plan-specialize-library-kernels.mlir --plan-specialize-library-kernels | FileCheck %s --check-prefix=HIT
// RUN: for f in %t.cache/nvrtc/*.ptx; do echo damaged > $f; done
// RUN: env DAYBREAK_CACHE_DIR=%t.cache daybreak-opt %S/plan-specialize-library-kernels.mlir --plan-specialize-library-kernels | FileCheck %s --check-prefix=MISS
// RUN: ls %t.cache/nvrtc | FileCheck %s --check-prefix=ENTRY
// RUN: not grep -q damaged %t.cache/nvrtc/*.ptx
// RUN: rm -rf %t.off && mkdir %t.off && cd %t.off && env DAYBREAK_CACHE_DIR=off HOME=%t.off XDG_CACHE_HOME=%t.off daybreak-opt %S/plan-specialize-library-kernels.mlir --plan-specialize-library-kernels | FileCheck %s --check-prefix=MISS
// RUN: ls -A %t.off | count 0

// ENTRY: {{^[0-9a-f]{64}\.ptx$}}
// ENTRY-NOT: .ptx
// MISS: plan.code_image @library
// MISS-SAME: instantiations {"daybreak_add_rms_norm_t<128>" = "_Z23daybreak_add_rms_norm_tILi128EE
// MISS-NOT: taken from the cache
// HIT: plan.code_image @library
// HIT-SAME: instantiations {"daybreak_add_rms_norm_t<128>" = "_Z23daybreak_add_rms_norm_tILi128EE
// HIT-SAME: // taken from the cache
