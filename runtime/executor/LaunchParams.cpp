//===- LaunchParams.cpp - Launch attributes as kernel parameters ----------===//

#include "runtime/executor/LaunchParams.h"

using namespace daybreak;

cpu::RopeParams runtime::ropeParams(const artifact::Launch &l) {
  cpu::RopeParams p;
  const artifact::Attr *style = findAttr(l, "style");
  p.interleaved = style && style->s() == "interleaved";
  p.offset = attrInt(l, "offset", 0);
  p.dim = attrInt(l, "dim", 0);
  p.theta = attrFloat(l, "theta", 10000.0);
  p.yarn = attrInt(l, "yarn", 0) != 0;
  if (p.yarn) {
    p.factor = attrFloat(l, "yarn.factor", 1.0);
    p.originalMaxPositions = attrInt(l, "yarn.original_max_positions", 4096);
    p.betaFast = attrFloat(l, "yarn.beta_fast", 32.0);
    p.betaSlow = attrFloat(l, "yarn.beta_slow", 1.0);
    p.attentionFactor = attrFloat(l, "yarn.attention_factor", 1.0);
    p.truncate = attrInt(l, "yarn.truncate", 1) != 0;
  }
  return p;
}

StatusOr<cpu::RouteParams>
runtime::sigmoidRouteParams(const artifact::Launch &l,
                            const std::string &device) {
  const artifact::Attr *routing = findAttr(l, "routing");
  if (!routing || routing->s() != "sigmoid")
    return Status::error("only sigmoid routing runs on the " + device +
                         " device");
  cpu::RouteParams p;
  p.topK = attrInt(l, "top_k", 1);
  p.numGroups = attrInt(l, "num_groups", 1);
  p.topKGroups = attrInt(l, "top_k_groups", 1);
  p.renormalize = attrInt(l, "renormalize", 1) != 0;
  p.scalingFactor = attrFloat(l, "scaling_factor", 1.0);
  return p;
}
