//===- LmOps.td - All ops of the lm dialect ----------------*- tablegen -*-===//

#ifndef DAYBREAK_LM_OPS_TD
#define DAYBREAK_LM_OPS_TD

include "dialects/lm/LmElementwiseOps.td"
include "dialects/lm/LmMatmulOps.td"
include "dialects/lm/LmAttentionOps.td"
include "dialects/lm/LmStateOps.td"
include "dialects/lm/LmResidualOps.td"
include "dialects/lm/LmMemoryOps.td"
include "dialects/lm/LmParallelOps.td"

#endif // DAYBREAK_LM_OPS_TD
