//===- WeightLoader.h - lm.weight values from a checkpoint ------*- C++ -*-===//
//
// Supplies the reference evaluator with the values of `lm.weight` symbols:
// each weight's checkpoint sources converted to host tensors, stacked along
// a new leading dim when there are several (routed experts), MXFP4 bytes
// read as the E2M1 codes and E8M0 scales they hold.
//
//===----------------------------------------------------------------------===//

#ifndef DAYBREAK_COMPILER_IMPORTERS_WEIGHTLOADER_H
#define DAYBREAK_COMPILER_IMPORTERS_WEIGHTLOADER_H

#include "compiler/importers/Checkpoint.h"
#include "compiler/reference/Tensor.h"

#include <optional>

namespace daybreak::importers {

/// Indices `[offset, offset + size)` of dim `dim` of a tensor as stored.
struct SourceSlice {
  int64_t dim = 0;
  int64_t offset = 0;
  int64_t size = 0;
};

/// The tensor made of `sources` (one tensor, or several of one shape and
/// dtype stacked along a new leading dim). With `as`, the element type the
/// weight is declared with: MXFP4 parts stored as bytes, as gpt-oss
/// publishes them, are read as what they hold: U8 `*_blocks` [..., G, 16]
/// (two E2M1 codes a byte, low nibble first) as F4E2M1FN [..., 32 G], U8
/// `*_scales` as F8E8M0FNU. Any other pairing is read as stored. With
/// `slice` (a rank's shard), each source is cut to it before stacking; a
/// slice past a source's dims is an error naming the source.
llvm::Expected<ref::Tensor>
loadWeight(const Checkpoint &checkpoint, llvm::ArrayRef<std::string> sources,
           std::optional<ref::ElementType> as = std::nullopt,
           std::optional<SourceSlice> slice = std::nullopt);

} // namespace daybreak::importers

#endif // DAYBREAK_COMPILER_IMPORTERS_WEIGHTLOADER_H
