//===- AssignWorkspace.cpp - Place a step's buffers in one arena ----------===//
//
// Buffers with the same name are one allocation (reshapes alias), and a
// column view (plan.column_view) is its source's. Each allocation lives from
// the first to the last launch or host step that touches it; step inputs
// and outputs live through the whole step, since the host writes them
// before and reads them after. What a side-queue launch touches lives until
// the first launch that joins it (`join_queue` past its place among the
// side launches; the step's end without one): it runs beside the launches
// in between. Allocations are placed
// largest first at the lowest 256-byte-aligned offset that overlaps no
// placed allocation live at the same time. Each buffer records its range of
// launches as `live = array<i64: first, last>`.
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"

#include "mlir/IR/Builders.h"

namespace daybreak {
#define GEN_PASS_DEF_PLANASSIGNWORKSPACE
#include "passes/Passes.h.inc"
} // namespace daybreak

using namespace mlir;
using namespace daybreak;

namespace {

constexpr int64_t kAlignment = 256;

int64_t alignUp(int64_t value) {
  return (value + kAlignment - 1) / kAlignment * kAlignment;
}

struct Allocation {
  SmallVector<plan::BufferOp> buffers;
  int64_t bytes = 0;
  int64_t first = INT64_MAX, last = -1;
  int64_t offset = 0;
};

struct AssignWorkspacePass
    : public daybreak::impl::PlanAssignWorkspaceBase<AssignWorkspacePass> {
  using PlanAssignWorkspaceBase::PlanAssignWorkspaceBase;

  void runOnOperation() override {
    for (auto step : getOperation().getOps<plan::StepOp>())
      if (failed(assign(step)))
        return signalPassFailure();
  }

  LogicalResult assign(plan::StepOp step) {
    Block &body = step.getBody().front();
    std::optional<ArrayRef<int64_t>> maxSizes = step.getMaxSizes();
    if (!maxSizes)
      return step.emitError("needs max_sizes to size its buffers");
    // Owned one by one: pointers to them must stay valid as more arrive.
    std::vector<std::unique_ptr<Allocation>> allocations;
    llvm::StringMap<Allocation *> byName;
    llvm::DenseMap<Value, Allocation *> ofValue;
    int64_t end = 0;
    // What each side launch not yet joined touches, by its place among the
    // step's side launches.
    SmallVector<std::pair<int64_t, Allocation *>> sideTouched;
    int64_t sideLaunches = 0;
    auto joinSide = [&](int64_t count, int64_t index) {
      llvm::erase_if(sideTouched, [&](std::pair<int64_t, Allocation *> &t) {
        if (t.first >= count)
          return false;
        t.second->last = std::max(t.second->last, index);
        return true;
      });
    };
    for (Operation &op : body) {
      if (auto buffer = dyn_cast<plan::BufferOp>(op)) {
        Allocation *&slot = byName[buffer.getName()];
        if (!slot) {
          allocations.push_back(std::make_unique<Allocation>());
          slot = allocations.back().get();
        }
        Allocation &a = *slot;
        a.buffers.push_back(buffer);
        // Dynamic dims take the max size of the size operand.
        auto type = cast<MemRefType>(buffer.getType());
        int64_t elements = 1;
        auto size = buffer.getSizes().begin();
        for (int64_t d : type.getShape()) {
          if (!ShapedType::isDynamic(d)) {
            elements *= d;
            continue;
          }
          auto arg = dyn_cast<BlockArgument>(*size++);
          if (!arg || arg.getOwner() != &body)
            return buffer.emitError("dynamic sizes must be step arguments");
          elements *= (*maxSizes)[arg.getArgNumber()];
        }
        a.bytes = std::max(
            a.bytes, (elements * type.getElementTypeBitWidth() + 7) / 8);
        ofValue[buffer.getResult()] = &a;
        if (buffer->hasAttr("io")) {
          a.first = -1;
          a.last = INT64_MAX;
        }
        continue;
      }
      // A column view is its source's bytes.
      if (auto view = dyn_cast<plan::ColumnViewOp>(op)) {
        ofValue[view.getResult()] = ofValue.lookup(view.getSource());
        continue;
      }
      int64_t index = end++;
      if (auto join = op.getAttrOfType<IntegerAttr>(plan::kJoinQueueAttr))
        joinSide(join.getInt(), index);
      auto queue = op.getAttrOfType<IntegerAttr>(plan::kQueueAttr);
      bool side = queue && queue.getInt() != 0;
      for (Value operand : op.getOperands())
        if (Allocation *a = ofValue.lookup(operand)) {
          a->first = std::min(a->first, index);
          a->last = std::max(a->last, index);
          if (side)
            sideTouched.push_back({sideLaunches, a});
        }
      sideLaunches += side;
    }
    joinSide(sideLaunches, end);

    SmallVector<Allocation *> order;
    for (auto &a : allocations)
      order.push_back(a.get());
    llvm::stable_sort(order, [](Allocation *x, Allocation *y) {
      return x->bytes > y->bytes;
    });
    int64_t peak = 0;
    SmallVector<Allocation *> placed;
    for (Allocation *a : order) {
      if (a->last < a->first) {
        a->first = a->last = 0; // never touched: still give it bytes
      }
      // Candidate offsets: 0 and the ends of live-overlapping allocations.
      SmallVector<Allocation *> overlapping;
      for (Allocation *p : placed)
        if (p->first <= a->last && a->first <= p->last)
          overlapping.push_back(p);
      llvm::sort(overlapping, [](Allocation *x, Allocation *y) {
        return x->offset < y->offset;
      });
      int64_t offset = 0;
      for (Allocation *p : overlapping) {
        if (offset + a->bytes <= p->offset)
          break;
        offset = std::max(offset, alignUp(p->offset + p->bytes));
      }
      a->offset = offset;
      placed.push_back(a);
      peak = std::max(peak, offset + a->bytes);
    }
    peak = alignUp(peak);
    step.setArenaSize(peak);
    for (Allocation *a : placed)
      for (plan::BufferOp buffer : a->buffers) {
        buffer.setOffset(a->offset);
        // For the reader: the launches (by index in the step) between which
        // the bytes are the buffer's; step inputs and outputs hold them
        // through the whole step and carry no range.
        if (!buffer->hasAttr("io"))
          buffer->setAttr("live", DenseI64ArrayAttr::get(buffer.getContext(),
                                                         {a->first, a->last}));
      }
    peakBytes = std::max<int64_t>(peakBytes, peak);
    return success();
  }
};
} // namespace
