//===- FuseQueryRope.cpp - A query's RoPE into the indexer that scores it -===//
//
// DeepSeek-V3.2's indexer rotates its query heads (lm.rope over the first
// rope_dim columns of each [D] head) and then scores them: a launch of its
// own over 64 x 128 values a token. Where the rope feeds only
// lm.dsa_indexer_scores, it becomes the indexer's prologue: the kernel
// rotates each head as it stages the query.
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"

namespace daybreak {
#define GEN_PASS_DEF_LMFUSEQUERYROPE
#include "passes/Passes.h.inc"
} // namespace daybreak

using namespace mlir;
using namespace daybreak;

namespace {

struct LmFuseQueryRope
    : public daybreak::impl::LmFuseQueryRopeBase<LmFuseQueryRope> {
  void runOnOperation() override {
    SmallVector<lm::DsaIndexerScoresOp> indexers;
    getOperation().walk([&](lm::DsaIndexerScoresOp scores) {
      if (!scores.getPositions())
        indexers.push_back(scores);
    });
    OpBuilder b(&getContext());
    for (lm::DsaIndexerScoresOp scores : indexers) {
      Value q = scores.getQ();
      auto rope = q.getDefiningOp<lm::RopeOp>();
      if (!rope || !q.hasOneUse())
        continue;
      b.setInsertionPoint(scores);
      auto fused = lm::DsaIndexerScoresOp::create(
          b, scores.getLoc(), scores.getType(), rope.getInput(), scores.getK(),
          scores.getWeights(), scores.getSequences(), scores.getBounds(),
          rope.getPositions(), scores.getScaleAttr(), rope.getStyleAttr(),
          rope.getOffsetAttr(), rope.getDimAttr(), rope.getThetaAttr(),
          rope.getYarnAttr());
      scores.getResult().replaceAllUsesWith(fused.getResult());
      scores.erase();
      rope.erase();
      ++numFused;
    }
  }
};

} // namespace
