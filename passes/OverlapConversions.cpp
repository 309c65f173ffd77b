//===- OverlapConversions.cpp - MXFP4 conversions on the side queue -------===//
//
// The online MXFP4 route's conversion of every expert reads only weights, so
// it can start long before the routing of its layer: as soon as the expert
// matmul that last read its workspace is done. This pass moves each such
// launch there, onto the side queue, and makes the first later launch that
// touches its workspace wait for it. Memory is identified per allocation
// (a buffer's name, a view's source, a cache pool's layer); every argument
// of another launch counts as touched, read or written.
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/StringSet.h"

namespace daybreak {
#define GEN_PASS_DEF_PLANOVERLAPCONVERSIONS
#include "passes/Passes.h.inc"
} // namespace daybreak

using namespace mlir;
using namespace daybreak;

namespace {

/// The kernel this pass schedules (runtime/abi/Kernels.def).
constexpr llvm::StringLiteral kAllExpertsEntry = "mxfp4_to_fp8_all_experts";

/// The allocation `v` lives in, as a key; "" for what no launch writes (a
/// weight) or what is not memory (a size).
std::string storageOf(Value v) {
  Operation *def = v.getDefiningOp();
  if (!def)
    return "";
  if (auto buffer = dyn_cast<plan::BufferOp>(def))
    return ("buffer:" + buffer.getName()).str();
  if (auto view = dyn_cast<plan::ColumnViewOp>(def))
    return storageOf(view.getSource());
  if (auto cache = dyn_cast<plan::CacheRefOp>(def))
    return ("cache:" + cache.getPool() + ":" + Twine(cache.getLayer())).str();
  return "";
}

/// Whether `op` does work at run time in program order (a launch or a host
/// step), rather than define a value.
bool isScheduled(Operation *op) { return isa<plan::LaunchOp, plan::HostOp>(op); }

bool touchesAny(Operation *op, const llvm::StringSet<> &storages) {
  for (Value v : op->getOperands())
    if (storages.contains(storageOf(v)))
      return true;
  return false;
}

bool isSideLaunch(Operation *op) {
  auto queue = op->getAttrOfType<IntegerAttr>(plan::kQueueAttr);
  return queue && queue.getInt() != 0;
}

struct OverlapConversionsPass
    : public daybreak::impl::PlanOverlapConversionsBase<OverlapConversionsPass> {
  using PlanOverlapConversionsBase::PlanOverlapConversionsBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    llvm::StringSet<> allExperts;
    for (auto kernel : module.getOps<plan::KernelOp>())
      if (kernel.getEntry() == kAllExpertsEntry)
        allExperts.insert(kernel.getSymName());
    if (allExperts.empty())
      return;
    for (auto step : module.getOps<plan::StepOp>()) {
      Block &body = step.getBody().front();
      SmallVector<plan::LaunchOp> conversions;
      for (auto launch : body.getOps<plan::LaunchOp>())
        if (allExperts.contains(launch.getKernel()))
          conversions.push_back(launch);
      llvm::DenseMap<Operation *, Operation *> joinedBy;
      for (plan::LaunchOp launch : conversions)
        if (Operation *joiner = overlap(launch))
          joinedBy[launch] = joiner;
      // Each join waits for the side launches up to the one it needs, by
      // their final order.
      int64_t sideLaunches = 0;
      Builder b(module.getContext());
      for (Operation &op : body) {
        if (!isSideLaunch(&op))
          continue;
        ++sideLaunches;
        if (Operation *joiner = joinedBy.lookup(&op)) {
          auto had = joiner->getAttrOfType<IntegerAttr>(plan::kJoinQueueAttr);
          joiner->setAttr(
              plan::kJoinQueueAttr,
              b.getI64IntegerAttr(std::max<int64_t>(
                  sideLaunches, had ? had.getInt() : 0)));
        }
      }
    }
  }

  /// Moves `launch` early onto the side queue; returns the launch that must
  /// join it (null: none, or the launch did not move).
  Operation *overlap(plan::LaunchOp launch) {
    llvm::StringSet<> written;
    for (Value v : launch.getArgs())
      if (std::string key = storageOf(v); !key.empty())
        written.insert(key);
    // The earliest point: just after the last scheduled op before the
    // launch that touches its workspace or is itself a side launch (the
    // side queue runs in program order), or the block's start.
    Block *block = launch->getBlock();
    Operation *after = nullptr;
    for (Operation *op = launch->getPrevNode(); op; op = op->getPrevNode())
      if (isScheduled(op) && (isSideLaunch(op) || touchesAny(op, written))) {
        after = op;
        break;
      }
    // Nothing scheduled between that point and the launch: no gain.
    Operation *first = after ? after->getNextNode() : &block->front();
    bool passesWork = false;
    for (Operation *op = first; op != launch.getOperation();
         op = op->getNextNode())
      passesWork |= isScheduled(op);
    if (!passesWork)
      return nullptr;
    // Its arguments' definitions (buffers of step-argument sizes, weight
    // references) move with it where they come later; one that needs a
    // value defined in between keeps the launch where it is.
    SmallVector<Operation *> defs;
    for (Value v : launch->getOperands()) {
      Operation *def = v.getDefiningOp();
      if (!def || def->getBlock() != block ||
          (after && def->isBeforeInBlock(after)) || llvm::is_contained(defs, def))
        continue;
      for (Value operand : def->getOperands())
        if (Operation *inner = operand.getDefiningOp();
            inner && inner->getBlock() == block &&
            (!after || after->isBeforeInBlock(inner)))
          return nullptr;
      defs.push_back(def);
    }
    // The join: the first scheduled op after the launch that touches what
    // it writes (the runtime joins at the step's end if there is none).
    Operation *joiner = nullptr;
    for (Operation *op = launch->getNextNode(); op && !joiner;
         op = op->getNextNode())
      if (isScheduled(op) && touchesAny(op, written))
        joiner = op;
    Operation *insertBefore = first;
    for (Operation *def : defs) {
      if (def == insertBefore)
        insertBefore = def->getNextNode();
      else
        def->moveBefore(insertBefore);
    }
    launch->moveBefore(insertBefore);
    launch->setAttr(plan::kQueueAttr,
                    Builder(launch->getContext()).getI64IntegerAttr(1));
    ++numOverlapped;
    return joiner;
  }
};

} // namespace
