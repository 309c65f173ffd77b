//===- LmBase.td - The lm dialect and its base op class ----*- tablegen -*-===//

#ifndef DAYBREAK_LM_BASE_TD
#define DAYBREAK_LM_BASE_TD

include "mlir/IR/OpBase.td"
include "mlir/IR/AttrTypeBase.td"

def Lm_Dialect : Dialect {
  let name = "lm";
  let cppNamespace = "::daybreak::lm";
  let summary = "What a language model computes, at the level of its layers";
  let description = [{
    The `lm` dialect describes model semantics on tensors: norms, RoPE,
    matmuls in the checkpoint's storage formats (plain, FP8 block-scaled,
    MXFP4 experts), MoE routing, dense and sparse attention, DeepSeek Sparse
    Attention index selection, Kimi Delta Attention state updates and
    cross-layer residuals. Persistent state (KV caches, indexer caches, KDA
    recurrent and conv states) flows through ops as explicit operands and
    results, so a function's signature shows every byte that outlives a step.
    Every op has a reference semantics in `compiler/reference/Kernels.h`.
  }];
  let useDefaultAttributePrinterParser = 1;
  let dependentDialects = ["::mlir::func::FuncDialect"];
  let extraClassDeclaration = [{
    /// Registers the attributes; lives in LmAttrs.cpp beside their storage.
    void registerAttributes();
  }];
}

// Base class of every lm op.
class Lm_Op<string mnemonic, list<Trait> traits = []>
    : Op<Lm_Dialect, mnemonic, traits>;

// Tensor constraints shared by the op families.
def Lm_FloatTensor : RankedTensorOf<[F32, BF16, F16]>;
def Lm_F32Tensor : RankedTensorOf<[F32]>;
def Lm_IndexTensor : RankedTensorOf<[I32]>;
def Lm_PositionTensor : RankedTensorOf<[I32, I64]>;
// Weights as stored by a checkpoint (before any repacking).
def Lm_WeightTensor : RankedTensorOf<[F32, BF16, F16]>;
def Lm_Fp8Tensor : RankedTensorOf<[F8E4M3FN]>;
def Lm_Fp4Tensor : RankedTensorOf<[F4E2M1FN]>;
def Lm_E8M0Tensor : RankedTensorOf<[F8E8M0FNU]>;

#endif // DAYBREAK_LM_BASE_TD
