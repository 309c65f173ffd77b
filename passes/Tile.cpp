//===- Tile.cpp - Choose the work split of each matmul per phase ----------===//
//
// CPU cost model: a job computes rows x cols outputs over the whole K (the
// kernel blocks K itself). Prefill is compute-bound: 96 x 256 panels reuse
// each loaded weight row across many activation rows. Decode multiplies at
// most a batch of rows by every weight and is bound by the weight stream:
// all rows go in one job and the columns are split narrowly, so every core
// streams its own slice of each matrix.
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"
#include "runtime/abi/KernelAbi.h"

#include "mlir/IR/Builders.h"

namespace daybreak {
#define GEN_PASS_DEF_LMTILE
#include "passes/Passes.h.inc"
} // namespace daybreak

using namespace mlir;
using namespace daybreak;

namespace {
struct TilePass : public daybreak::impl::LmTileBase<TilePass> {
  using LmTileBase::LmTileBase;

  void runOnOperation() override {
    uint8_t mask = abi::targetMask(target);
    if (!mask) {
      getOperation().emitError("lm-tile: unsupported target '")
          << target << "' (expected "
          << abi::targetNames(abi::CpuAndCuda, " or ") << ")";
      return signalPassFailure();
    }
    // The CUDA matmuls choose their own grids: no tile would be read.
    if (mask == abi::Cuda) {
      getOperation().emitRemark("lm-tile: target 'cuda' reads no tiles (the "
                                "CUDA library matmuls size their own grids); "
                                "none recorded");
      return;
    }
    if (decodeColumns <= 0) {
      getOperation().emitError("lm-tile: decode-columns must be positive");
      return signalPassFailure();
    }
    Builder b(&getContext());
    for (auto func : getOperation().getOps<func::FuncOp>()) {
      bool decode = func.getSymName() == "decode";
      func.walk([&](Operation *op) {
        if (!isa<lm::MatmulOp, lm::Fp8MatmulOp>(op))
          return;
        int64_t n = cast<RankedTensorType>(op->getResult(0).getType())
                        .getShape()
                        .back();
        // Decode: every row in one job, columns split; prefill: 2-D panels.
        SmallVector<int64_t> tile =
            decode ? SmallVector<int64_t>{1 << 20,
                                          std::min<int64_t>(decodeColumns, n)}
                   : SmallVector<int64_t>{96, std::min<int64_t>(256, n)};
        op->setAttr("tile", b.getDenseI64ArrayAttr(tile));
      });
    }
  }
};
} // namespace
