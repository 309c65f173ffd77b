//===- AssignKVLayout.cpp - Choose how each cache is stored ---------------===//

#include "passes/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Builders.h"

#include <numeric>

namespace daybreak {
#define GEN_PASS_DEF_LMASSIGNKVLAYOUT
#include "passes/Passes.h.inc"
} // namespace daybreak

using namespace mlir;
using namespace daybreak;

namespace {
struct AssignKVLayoutPass
    : public daybreak::impl::LmAssignKVLayoutBase<AssignKVLayoutPass> {
  using LmAssignKVLayoutBase::LmAssignKVLayoutBase;

  void runOnOperation() override {
    MLIRContext *ctx = &getContext();
    Builder b(ctx);
    Type storage;
    if (kvCacheDtype == "fp8")
      storage = b.getType<Float8E4M3FNType>();
    else if (kvCacheDtype == "bf16")
      storage = b.getBF16Type();
    else if (kvCacheDtype == "f32")
      storage = b.getF32Type();
    else {
      getOperation().emitError("unsupported kv-cache-dtype '")
          << kvCacheDtype << "' (expected fp8, bf16 or f32)";
      return signalPassFailure();
    }
    if (pageSize <= 0) {
      getOperation().emitError("page-size must be positive, got ")
          << static_cast<int64_t>(pageSize);
      return signalPassFailure();
    }
    bool fp8 = kvCacheDtype == "fp8";

    getOperation().walk([&](lm::CacheWriteOp write) {
      auto type = cast<RankedTensorType>(write.getCache().getType());
      int64_t width = type.getShape().back();
      // The reader of the written cache says what the rows are.
      lm::CacheKind kind = lm::CacheKind::KeyValue;
      int64_t valueDim = width;
      // Read only by sliding-window attention: a ring of `window` rows.
      int64_t window = 0;
      bool allWindowed = true;
      // Readers, seen through reshapes and slices of the cache; a dense
      // attention whose values are a column prefix of the rows (absorbed
      // MLA: values are the c_kv of latent rows [c_kv | k_pe]) makes them
      // latent rows of that value width.
      SmallVector<Operation *> readers;
      SmallVector<std::pair<Value, int64_t>> worklist = {
          {write.getResult(), 0}};
      while (!worklist.empty()) {
        auto [value, columns] = worklist.pop_back_val();
        for (OpOperand &use : value.getUses()) {
          Operation *user = use.getOwner();
          if (auto slice = dyn_cast<tensor::ExtractSliceOp>(user))
            worklist.push_back(
                {slice.getResult(), slice.getStaticSizes().back()});
          else if (isa<tensor::CollapseShapeOp, tensor::ExpandShapeOp>(user))
            worklist.push_back({user->getResult(0), columns});
          else if (!isa<func::ReturnOp>(user)) // on to the next step
            readers.push_back(user);
          auto dense = dyn_cast<lm::AttentionOp>(user);
          if (dense && columns > 0 && columns < width &&
              use.get() == dense.getV()) {
            kind = lm::CacheKind::MlaLatent;
            valueDim = columns;
          }
        }
      }
      for (Operation *user : readers) {
        auto dense = dyn_cast<lm::AttentionOp>(user);
        bool windowed = dense &&
                        dense.getMask() == lm::MaskKind::SlidingWindow &&
                        dense.getWindow();
        allWindowed &= windowed;
        if (windowed)
          window = std::max<int64_t>(window, int64_t(*dense.getWindow()));
        if (auto attn = dyn_cast<lm::SparseAttentionOp>(user)) {
          kind = lm::CacheKind::MlaLatent;
          valueDim = attn.getValueDim();
        } else if (isa<lm::DsaIndexerScoresOp>(user)) {
          kind = lm::CacheKind::IndexerKey;
        }
      }
      // FP8 rows keep the MLA RoPE key (the columns past the value) in
      // bf16 and scale the rest per tile of up to 128 values.
      int64_t tail = fp8 && kind == lm::CacheKind::MlaLatent ? width - valueDim
                                                             : 0;
      int64_t scaleBlock = fp8 ? std::gcd<int64_t>(width - tail, 128) : 0;
      // A cache with a row per `rowTokens` tokens (a k-pool's pooled keys)
      // pages the same token spans as the others: pageSize / rowTokens rows
      // a page, so one page table serves it.
      int64_t page = pageSize;
      if (auto arg = dyn_cast<BlockArgument>(write.getCache())) {
        auto func = cast<func::FuncOp>(arg.getOwner()->getParentOp());
        if (auto rowTokens = func.getArgAttrOfType<IntegerAttr>(
                arg.getArgNumber(), "lm.row_tokens")) {
          int64_t r = rowTokens.getInt();
          if (r <= 0 || pageSize % r != 0) {
            write.emitError("page-size ")
                << static_cast<int64_t>(pageSize)
                << " is not a multiple of the " << r
                << " tokens a row of this cache holds";
            signalPassFailure();
            return;
          }
          page = pageSize / r;
        }
      }
      write.setLayoutAttr(lm::KVLayoutAttr::get(
          ctx, kind, page, width, storage, scaleBlock, tail, b.getBF16Type(),
          allWindowed && !readers.empty() ? window : 0));
    });

    // Per-sequence state: arguments that KDA and short convolutions carry
    // as their state get `lm.state`, the KDA ops the same layout.
    Type stateType;
    if (stateDtype == "f32")
      stateType = b.getF32Type();
    else if (stateDtype == "bf16")
      stateType = b.getBF16Type();
    else {
      getOperation().emitError("unsupported state-dtype '")
          << stateDtype << "' (expected f32 or bf16)";
      return signalPassFailure();
    }
    auto stateLayout =
        lm::StateLayoutAttr::get(ctx, stateType, b.getBoolAttr(true));
    getOperation().walk([&](func::FuncOp func) {
      for (BlockArgument arg : func.getArguments()) {
        // Declared state (StepFunction::addState marks it).
        if (func.getArgAttr(arg.getArgNumber(), "lm.state"))
          func.setArgAttr(arg.getArgNumber(), "lm.state", stateLayout);
        for (Operation *user : arg.getUsers()) {
          bool isState = false;
          if (auto step = dyn_cast<lm::KdaStepOp>(user)) {
            isState = step.getState() == arg;
            if (isState && !step.getLayout())
              step.setLayoutAttr(stateLayout);
          } else if (auto chunk = dyn_cast<lm::KdaChunkOp>(user)) {
            isState = chunk.getState() == arg;
            if (isState && !chunk.getLayout())
              chunk.setLayoutAttr(stateLayout);
          } else if (auto conv = dyn_cast<lm::ShortConvOp>(user)) {
            isState = conv.getState() == arg;
          }
          if (isState && !func.getArgAttr(arg.getArgNumber(), "lm.state"))
            func.setArgAttr(arg.getArgNumber(), "lm.state", stateLayout);
        }
      }
    });
  }
};
} // namespace
