//===- SelectLogitRows.cpp - A prefill step's logits for chosen rows
//-------===//
//
// The builders give every step logits for every token: `[tokens, vocab]`.
// Decode needs them all (each token is a sequence's last), prefill almost
// none: the last prompt token of each sequence it finishes. This pass gives
// the prefill step an input of the rows wanted and gathers them before the
// LM head, so the head's GEMM and the logits buffer are sized for
// `max-rows`, not for `max-tokens`.
//
// The gather is hoisted above the chain of row-wise ops that compute the
// logits from one value and feed nothing else (final norm, head matmul):
// a row of their result depends on the same row of their input alone, so
// gathering first gives the same rows, bit for bit.
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"

#include "dialects/lm/LmOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"

namespace daybreak {
#define GEN_PASS_DEF_LMSELECTLOGITROWS
#include "passes/Passes.h.inc"
} // namespace daybreak

using namespace mlir;
using namespace daybreak;

namespace {

/// An op whose result row t depends on row t of operand 0 alone (and on
/// weights), for rank-2 operands and results.
bool isRowWise(Operation *op) {
  if (!isa<lm::MatmulOp, lm::Fp8MatmulOp, lm::RmsNormOp, lm::LayerNormOp>(op))
    return false;
  if (op->getNumResults() != 1)
    return false;
  auto in = dyn_cast<RankedTensorType>(op->getOperand(0).getType());
  auto out = dyn_cast<RankedTensorType>(op->getResult(0).getType());
  if (!in || !out || in.getRank() != 2 || out.getRank() != 2)
    return false;
  // The other operands are weights: nothing of the tokens.
  return llvm::all_of(op->getOperands().drop_front(), [](Value v) {
    return v.getDefiningOp<lm::WeightRefOp>() != nullptr;
  });
}

struct SelectLogitRowsPass
    : public daybreak::impl::LmSelectLogitRowsBase<SelectLogitRowsPass> {
  using LmSelectLogitRowsBase::LmSelectLogitRowsBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (maxRows <= 0) {
      module.emitError("lm-select-logit-rows: max-rows must be positive, got ")
          << static_cast<int64_t>(maxRows);
      return signalPassFailure();
    }
    auto func = module.lookupSymbol<func::FuncOp>(function);
    if (!func)
      return;
    if (failed(select(func)))
      signalPassFailure();
  }

  LogicalResult select(func::FuncOp func) {
    // The result of role "logits" and the return that yields it.
    std::optional<unsigned> index;
    for (unsigned i = 0, e = func.getNumResults(); i < e; ++i)
      if (auto role = func.getResultAttrOfType<StringAttr>(i, "lm.role"))
        if (role.getValue() == "logits")
          index = i;
    if (!index)
      return func.emitError("lm-select-logit-rows: @")
             << func.getSymName() << " has no result of role 'logits'";
    for (unsigned i = 0, e = func.getNumArguments(); i < e; ++i)
      if (auto role = func.getArgAttrOfType<StringAttr>(i, "lm.role"))
        if (role.getValue() == "logit_rows")
          return func.emitError("lm-select-logit-rows: @")
                 << func.getSymName() << " already selects its logit rows";
    auto ret = cast<func::ReturnOp>(func.getBody().front().getTerminator());
    Value logits = ret.getOperand(*index);
    auto logitsType = dyn_cast<RankedTensorType>(logits.getType());
    if (!logitsType || logitsType.getRank() != 2)
      return func.emitError("lm-select-logit-rows: @")
             << func.getSymName()
             << "'s logits are not [tokens, vocab]: " << logits.getType();

    // The row-wise chain that computes the logits, from the last op up,
    // each op's result read by the next alone.
    SmallVector<Operation *> chain;
    Value source = logits;
    while (Operation *def = source.getDefiningOp()) {
      if (!isRowWise(def) || !source.hasOneUse())
        break;
      chain.push_back(def);
      source = def->getOperand(0);
    }
    auto sourceType = cast<RankedTensorType>(source.getType());
    if (!sourceType.getElementType().isF32())
      return func.emitError("lm-select-logit-rows: @")
             << func.getSymName() << "'s logits come from " << sourceType
             << ", not f32 activations lm.gather_rows can take";
    numHoisted += chain.size();

    // The new input, after the other inputs by role (before the caches).
    unsigned position = 0;
    for (unsigned i = 0, e = func.getNumArguments(); i < e; ++i)
      if (func.getArgAttr(i, "lm.role"))
        position = i + 1;
    OpBuilder b(func.getContext());
    auto rowsType = RankedTensorType::get({maxRows}, b.getI32Type());
    DictionaryAttr attrs = b.getDictionaryAttr(
        b.getNamedAttr("lm.role", b.getStringAttr("logit_rows")));
    if (failed(func.insertArgument(position, rowsType, attrs, func.getLoc())))
      return func.emitError("lm-select-logit-rows: cannot add an argument");
    Value rows = func.getArgument(position);

    // Gather right after `source` is defined, then retype the chain.
    if (Operation *def = source.getDefiningOp())
      b.setInsertionPointAfter(def);
    else
      b.setInsertionPointToStart(&func.getBody().front());
    auto gathered = lm::GatherRowsOp::create(
        b, source.getLoc(),
        RankedTensorType::get({maxRows, sourceType.getDimSize(1)},
                              sourceType.getElementType()),
        source, rows);
    Value current = gathered.getResult();
    if (chain.empty()) {
      ret->setOperand(*index, current);
    } else {
      chain.back()->setOperand(0, current);
      for (Operation *op : llvm::reverse(chain)) {
        auto type = cast<RankedTensorType>(op->getResult(0).getType());
        op->getResult(0).setType(RankedTensorType::get(
            {maxRows, type.getDimSize(1)}, type.getElementType()));
      }
    }

    SmallVector<Type> results(func.getResultTypes());
    results[*index] = ret.getOperand(*index).getType();
    func.setFunctionType(b.getFunctionType(func.getArgumentTypes(), results));
    return success();
  }
};

} // namespace
