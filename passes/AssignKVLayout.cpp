//===- AssignKVLayout.cpp - Choose how each cache is stored ---------------===//

#include "passes/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
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
      for (Operation *user : write.getResult().getUsers()) {
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
      write.setLayoutAttr(lm::KVLayoutAttr::get(
          ctx, kind, pageSize, width, storage, scaleBlock, tail,
          b.getBF16Type()));
    });
  }
};
} // namespace
