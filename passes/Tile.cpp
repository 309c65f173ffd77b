//===- Tile.cpp - Choose the work split of each matmul per phase ----------===//
//
// CPU cost model: a job computes rows x cols outputs over the whole K (the
// kernel blocks K itself). Prefill is compute-bound: 96 x 256 panels reuse
// each loaded weight row across many activation rows. Decode multiplies at
// most a batch of rows by every weight and is bound by the weight stream:
// all rows go in one job and the columns are split narrowly, so every core
// streams its own slice of each matrix.
//
// CUDA: each fp8_matmul the FP8 GEMM serves gets the tile GemmTiles.h's
// model chooses for the phase's most rows (the batch of @decode, the token
// budget of @prefill): rows a block, stages and the split of K. The
// specialisation pass instantiates the kernel for it.
//===----------------------------------------------------------------------===//

#include "passes/KernelSelection.h"
#include "passes/Passes.h"
#include "runtime/abi/KernelAbi.h"
#include "runtime/devices/cuda/GemmTiles.h"

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
    uint8_t mask = targetMaskOrError(getOperation(), "lm-tile", target);
    if (!mask)
      return signalPassFailure();
    if (mask == abi::Cuda) {
      if (maxBatch <= 0 || maxTokens <= 0) {
        getOperation().emitError(
            "lm-tile: max-batch and max-tokens must be positive");
        return signalPassFailure();
      }
      return tileForCuda();
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

  /// `cuda_tile` on each fp8_matmul the FP8 GEMM runs: a weight
  /// cuda::fp8GemmWeightApplies takes (DeepSeek's 128 x 128 blocks, K a
  /// multiple of 16) and more rows than the decode GEMVs take
  /// (CudaKernels::matmul's rule). Its rows are
  /// the phase's tokens times the input's static leading dimensions.
  void tileForCuda() {
    Builder b(&getContext());
    for (auto func : getOperation().getOps<func::FuncOp>()) {
      int64_t tokens = func.getSymName() == "decode" ? maxBatch : maxTokens;
      func.walk([&](lm::Fp8MatmulOp op) {
        auto input = cast<RankedTensorType>(op.getInput().getType());
        auto weight = cast<RankedTensorType>(op.getWeight().getType());
        ArrayRef<int64_t> blocks = op.getBlockSize();
        if (weight.getRank() != 2 || !weight.hasStaticShape() ||
            blocks.size() != 2 ||
            !cuda::fp8GemmWeightApplies(blocks[0], blocks[1],
                                        weight.getDimSize(1)))
          return;
        int64_t n = weight.getDimSize(0), k = weight.getDimSize(1);
        int64_t rows = 1;
        for (int64_t d : input.getShape().drop_back())
          rows *= ShapedType::isDynamic(d) ? tokens : d;
        if (rows <= cuda::kFp8GemvMaxRows)
          return;
        cuda::Fp8GemmTile tile = cuda::chooseFp8GemmTile(rows, n, k, sms);
        op->setAttr("cuda_tile",
                    b.getDenseI64ArrayAttr(
                        {tile.rows, tile.columns, tile.stages, tile.splits}));
      });
    }
  }
};
} // namespace
