//===- KernelSelection.cpp - The runtime kernel an lm op lowers to --------===//

#include "passes/KernelSelection.h"

#include "dialects/lm/LmOps.h"
#include "runtime/abi/KernelAbi.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace daybreak;

std::optional<StringRef> daybreak::loweredKernelName(Operation *op) {
  using Result = std::optional<StringRef>;
  // The cases of Lowering::lowerOp (LowerToPlan.cpp), in its order.
  return llvm::TypeSwitch<Operation *, Result>(op)
      .Case<arith::ConstantOp, tensor::DimOp, tensor::SplatOp, lm::WeightRefOp,
            tensor::ExpandShapeOp, tensor::CollapseShapeOp>(
          [](Operation *) { return StringRef(); })
      .Case<tensor::ExtractSliceOp, tensor::ConcatOp>(
          [](Operation *) { return StringRef("copy_columns"); })
      .Case([](arith::AddFOp) { return StringRef("add"); })
      .Case([](arith::AddIOp) { return StringRef("add_scalar_i32"); })
      .Case([](arith::DivSIOp) { return StringRef("div_scalar_i32"); })
      .Case([](lm::Fp8DequantOp dequant) -> Result {
        // Codes and scales an expert matmul reads as they are; any other
        // dequantisation should have been folded (lm-fold-weights), and no
        // kernel runs it.
        if (llvm::all_of(dequant->getUsers(), [](Operation *user) {
              return isa<lm::ExpertMatmulOp>(user);
            }))
          return StringRef();
        return StringRef("fp8_dequant");
      })
      .Case([](lm::AttentionOp attention) -> Result {
        // The runtime kernel reads K and V from caches: only the form over
        // [B, S, Hkv, D] cache views, causal or sliding, lowers.
        if (cast<ShapedType>(attention.getK().getType()).getRank() != 4 ||
            attention.getMask() == lm::MaskKind::Bidirectional)
          return std::nullopt;
        return StringRef("attention");
      })
      .Default([](Operation *op) -> Result {
        // Every other lm op (lm.elementwise, lm.expert_matmul,
        // lm.mxfp4_expert_matmul, lm.cache_write included) launches the
        // kernel of its name.
        if (!isa<lm::LmDialect>(op->getDialect()))
          return std::nullopt;
        return op->getName().stripDialect();
      });
}

/// The declaration of the kernel the generic lowering launches for `op`,
/// when its operands fill the declared slots in order, the slots after them
/// optional (a layer_norm without its bias); else null.
static const abi::KernelDecl *genericDecl(Operation *op) {
  std::optional<StringRef> name = loweredKernelName(op);
  if (!name || name->empty() || op->hasAttr("operandSegmentSizes"))
    return nullptr;
  const abi::KernelDecl *decl = abi::findKernel(*name);
  if (!decl || decl->isVariadic() ||
      decl->numOperands() < op->getNumOperands() ||
      decl->numResults() != op->getNumResults())
    return nullptr;
  for (size_t slot = op->getNumOperands(); slot < decl->numOperands(); ++slot)
    if (decl->operands[slot].kind != abi::ArgKind::Optional)
      return nullptr;
  return decl;
}

bool daybreak::takesColumnView(OpOperand &use) {
  Operation *op = use.getOwner();
  if (const abi::KernelDecl *decl = genericDecl(op))
    return decl->operands[use.getOperandNumber()].columnView;
  // An op of optional operand groups (lm.cache_write): a group a declared
  // slot, as lm-lower-to-plan fills them.
  auto segments = op->getAttrOfType<DenseI32ArrayAttr>("operandSegmentSizes");
  std::optional<StringRef> name = loweredKernelName(op);
  const abi::KernelDecl *decl =
      segments && name && !name->empty() ? abi::findKernel(*name) : nullptr;
  if (!decl || decl->isVariadic() ||
      segments.size() > int64_t(decl->numOperands()))
    return false;
  unsigned first = 0;
  for (auto [slot, size] : llvm::enumerate(segments.asArrayRef())) {
    if (use.getOperandNumber() < first + size)
      return size == 1 && decl->operands[slot].columnView;
    first += size;
  }
  return false;
}

bool daybreak::writesColumnView(Value value) {
  auto result = dyn_cast<OpResult>(value);
  const abi::KernelDecl *decl =
      result ? genericDecl(result.getOwner()) : nullptr;
  return decl && decl->results[result.getResultNumber()].columnView;
}

uint8_t daybreak::targetMaskOrError(Operation *op, StringRef pass,
                                    StringRef target) {
  uint8_t mask = abi::targetMask(target);
  if (!mask)
    op->emitError() << pass << ": unknown target '" << target << "' (expected "
                    << abi::targetNames(abi::CpuAndCuda, " or ") << ")";
  return mask;
}
