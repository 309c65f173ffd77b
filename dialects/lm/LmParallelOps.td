//===- LmParallelOps.td - Collectives between ranks -------*- tablegen -*-===//
//
// Under tensor and expert parallelism (docs/parallel.md) every rank runs the
// same step function over its shard of the weights, and these ops combine
// what the ranks computed. They are value-semantic: a rank's result is a
// function of every rank's operand, so the reference evaluator runs them with
// a stand-in for the communicator, and each becomes one launch of a
// collective in plan IR. All ranks' functions are built and compiled the same
// way, so they meet the same collectives in the same order.
//
//===----------------------------------------------------------------------===//

#ifndef DAYBREAK_LM_PARALLEL_OPS_TD
#define DAYBREAK_LM_PARALLEL_OPS_TD

include "dialects/lm/LmAttrs.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

def Lm_AllReduceOp : Lm_Op<"all_reduce", [Pure, SameOperandsAndResultType]> {
  let summary = "the sum of a tensor over the ranks";
  let description = [{
    Every rank's `input` summed element by element, in rank order, on each
    of the `ranks` ranks: the partial products of a row-parallel projection
    (each rank holds some of its input columns) become the whole.

    ```mlir
    %y = lm.all_reduce %partial over 2 ranks : tensor<?x256xf32>
    ```
  }];
  let arguments = (ins Lm_FloatTensor:$input, I64Attr:$ranks);
  let results = (outs Lm_FloatTensor:$result);
  let assemblyFormat = "$input `over` $ranks `ranks` attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def Lm_AllGatherOp : Lm_Op<"all_gather", [Pure]> {
  let summary = "every rank's tensor, concatenated along the last dim";
  let description = [{
    `result[..., r * D + d] = input_r[..., d]` for each of the `ranks`
    ranks' `input [..., D]`: the logits of a column-parallel LM head, each
    rank holding `V / ranks` of the vocabulary rows.

    ```mlir
    %logits = lm.all_gather %part over 2 ranks
        : tensor<?x256xf32> -> tensor<?x512xf32>
    ```
  }];
  let arguments = (ins Lm_FloatTensor:$input, I64Attr:$ranks);
  let results = (outs Lm_FloatTensor:$result);
  let assemblyFormat = [{
    $input `over` $ranks `ranks` attr-dict `:` type($input) `->` type($result)
  }];
  let hasVerifier = 1;
}

def Lm_LocalExpertsOp : Lm_Op<"local_experts",
    [Pure, SameOperandsAndResultType]> {
  let summary = "routed expert ids renumbered for the experts a rank holds";
  let description = [{
    Under expert parallelism a rank holds the `count` routed experts
    `[first, first + count)` whole. Each id of that range becomes its
    position there (`id - first`); every other id, and an empty slot's -1,
    becomes -1, a slot the rank's expert matmuls leave empty. The tokens
    are every rank's already (attention's outputs are), so this is the
    whole dispatch: each rank runs its experts on the slots that chose them,
    and the MoE block's all-reduce is the combine.

    ```mlir
    %local = lm.local_experts %indices from 4 count 4 : tensor<?x2xi32>
    ```
  }];
  let arguments = (ins Lm_IndexTensor:$indices, I64Attr:$first,
                       I64Attr:$count);
  let results = (outs Lm_IndexTensor:$result);
  let assemblyFormat = [{
    $indices `from` $first `count` $count attr-dict `:` type($result)
  }];
  let hasVerifier = 1;
}

#endif // DAYBREAK_LM_PARALLEL_OPS_TD
