//===- NarrowRope.cpp - Rotate only the columns read rotated --------------===//
//
// MLA's query rows are [nope | rope] and its key rows [latent | rope]: the
// builders rotate the whole row (lm.rope passes the other columns through)
// and slice the parts apart. Rewriting each slice to read the rope's input,
// or a rope of offset 0 over the rotated columns alone, leaves every value
// the same and every slice a column view of a kernel's input or output:
// lm-lower-to-plan copies nothing, and the rope writes only the columns it
// rotates.
//
//===----------------------------------------------------------------------===//

#include "passes/ColumnSlice.h"
#include "passes/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"

namespace daybreak {
#define GEN_PASS_DEF_LMNARROWROPE
#include "passes/Passes.h.inc"
} // namespace daybreak

using namespace mlir;
using namespace daybreak;

namespace {

/// The same columns as `slice`, of `source` (of the same shape).
Value sliceOf(OpBuilder &b, tensor::ExtractSliceOp slice, Value source) {
  auto [offset, columns] = sliceColumns(slice);
  return sliceColumnsOf(b, slice.getLoc(), source, offset, columns);
}

struct NarrowRopePass
    : public daybreak::impl::LmNarrowRopeBase<NarrowRopePass> {
  void runOnOperation() override {
    SmallVector<lm::RopeOp> ropes;
    getOperation().walk([&](lm::RopeOp rope) { ropes.push_back(rope); });
    for (lm::RopeOp rope : ropes)
      narrow(rope);
  }

  void narrow(lm::RopeOp rope) {
    Value input = rope.getInput();
    int64_t first = rope.getOffset(), end = first + rope.getDim();
    // Only a rope every reader of which narrows goes (else it would run
    // twice): slices outside the rotated columns or of exactly them, and
    // its shape.
    auto narrows = [&](Operation *user) {
      if (isa<tensor::DimOp>(user))
        return true;
      auto slice = dyn_cast<tensor::ExtractSliceOp>(user);
      if (!slice || !isColumnSlice(slice))
        return false;
      auto [offset, columns] = sliceColumns(slice);
      return offset + columns <= first || offset >= end ||
             (offset == first && offset + columns == end);
    };
    if (rope->use_empty() || !llvm::all_of(rope->getUsers(), narrows))
      return;
    OpBuilder b(rope);
    for (Operation *user : llvm::make_early_inc_range(rope->getUsers())) {
      auto slice = dyn_cast<tensor::ExtractSliceOp>(user);
      if (!slice)
        continue;
      auto [offset, columns] = sliceColumns(slice);
      b.setInsertionPoint(slice);
      Value replacement;
      if (offset + columns <= first || offset >= end) {
        replacement = sliceOf(b, slice, input);
      } else {
        Value rotated = sliceOf(b, slice, input);
        auto narrowed = cast<lm::RopeOp>(b.clone(*rope));
        narrowed->setOperand(0, rotated);
        narrowed.getResult().setType(cast<RankedTensorType>(rotated.getType()));
        narrowed.setOffset(0);
        replacement = narrowed.getResult();
      }
      slice.getResult().replaceAllUsesWith(replacement);
      slice.erase();
      ++numNarrowed;
    }
    // The readers left ask for its shape: they ask the input's.
    for (Operation *user : llvm::make_early_inc_range(rope->getUsers()))
      cast<tensor::DimOp>(user).getSourceMutable().assign(input);
    rope.erase();
  }
};

} // namespace
