//===- TensorIO.h - Tensors from command-line specs, and printing -*- C++ -*-===//
//
// IREE-style tensor literals for tools and tests: `SHAPExTYPE=VALUES`, e.g.
// `2x3xf32=1,2,3,4,5,6`, `4xi32=iota` (0, 1, 2, ...), `8x16xbf16=random:7`
// (uniform in [-1, 1) from seed 7, rounded to the type), `3xf32=0.5` (a
// single value broadcast). Thread-safe.
//
//===----------------------------------------------------------------------===//

#ifndef DAYBREAK_COMPILER_REFERENCE_TENSORIO_H
#define DAYBREAK_COMPILER_REFERENCE_TENSORIO_H

#include "compiler/reference/Tensor.h"

#include "llvm/Support/Error.h"
#include "llvm/Support/raw_ostream.h"

namespace daybreak::ref {

/// Parses one tensor literal; errors quote the spec and what is wrong.
llvm::Expected<Tensor> parseTensorSpec(llvm::StringRef spec);

/// A seeded uniform [-1, 1) tensor of a float type (or [0, 8) for integer
/// types), rounded to the element type.
Tensor randomTensor(ElementType type, std::vector<int64_t> shape,
                    uint64_t seed);

/// Prints `f32[2x3] = [[1, 2, 3], [4, 5, 6]]`; tensors with more than
/// `maxElements` elements print their first elements, then summary
/// statistics (min, max, mean, mean |x|).
void printTensor(llvm::raw_ostream &os, const Tensor &tensor,
                 int64_t maxElements = 64);

} // namespace daybreak::ref

#endif // DAYBREAK_COMPILER_REFERENCE_TENSORIO_H
