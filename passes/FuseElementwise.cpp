//===- FuseElementwise.cpp - Fuse pointwise chains into lm.elementwise ----===//

#include "passes/Passes.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/TypeSwitch.h"

namespace daybreak {
#define GEN_PASS_DEF_LMFUSEELEMENTWISE
#include "passes/Passes.h.inc"
} // namespace daybreak

using namespace mlir;
using namespace daybreak;

namespace {

/// Emits the scalar body of a pointwise op over `args`; null if the op is
/// not pointwise.
Value scalarBody(OpBuilder &b, Location loc, Operation *op, ValueRange args) {
  auto constant = [&](Type type, double v) -> Value {
    return arith::ConstantOp::create(b, loc, b.getFloatAttr(type, v));
  };
  // sigmoid(x) = 1 / (1 + exp(-x))
  auto sigmoid = [&](Value x) -> Value {
    Value e = math::ExpOp::create(b, loc, arith::NegFOp::create(b, loc, x));
    Value one = constant(x.getType(), 1.0);
    return arith::DivFOp::create(b, loc, one,
                                 arith::AddFOp::create(b, loc, one, e));
  };
  return llvm::TypeSwitch<Operation *, Value>(op)
      .Case([&](arith::AddFOp) -> Value {
        return arith::AddFOp::create(b, loc, args[0], args[1]);
      })
      .Case([&](arith::SubFOp) -> Value {
        return arith::SubFOp::create(b, loc, args[0], args[1]);
      })
      .Case([&](arith::MulFOp) -> Value {
        return arith::MulFOp::create(b, loc, args[0], args[1]);
      })
      .Case([&](arith::DivFOp) -> Value {
        return arith::DivFOp::create(b, loc, args[0], args[1]);
      })
      .Case([&](lm::SigmoidOp) { return sigmoid(args[0]); })
      .Case([&](lm::SiluOp) -> Value {
        return arith::MulFOp::create(b, loc, args[0], sigmoid(args[0]));
      })
      .Case([&](lm::SwigluOp s) -> Value {
        Type t = args[0].getType();
        Value g = args[0], u = args[1];
        if (std::optional<APFloat> limit = s.getLimit()) {
          double l = limit->convertToDouble();
          g = arith::MinimumFOp::create(b, loc, g, constant(t, l));
          u = arith::MaximumFOp::create(
              b, loc, arith::MinimumFOp::create(b, loc, u, constant(t, l)),
              constant(t, -l));
        }
        double alpha = s.getAlpha().convertToDouble();
        Value scaled = alpha == 1.0
                           ? g
                           : arith::MulFOp::create(b, loc, g,
                                                   constant(t, alpha))
                                 .getResult();
        Value act = arith::MulFOp::create(b, loc, g, sigmoid(scaled));
        double offset = s.getUpOffset().convertToDouble();
        if (offset != 0.0)
          u = arith::AddFOp::create(b, loc, u, constant(t, offset));
        return arith::MulFOp::create(b, loc, act, u);
      })
      .Case([&](lm::SituOp s) -> Value {
        Type t = args[0].getType();
        double beta = s.getBeta().convertToDouble();
        double linear = s.getLinearBeta().convertToDouble();
        auto softClip = [&](Value x, double bound) -> Value {
          Value scaled = arith::DivFOp::create(b, loc, x, constant(t, bound));
          return arith::MulFOp::create(b, loc, math::TanhOp::create(b, loc, scaled),
                                       constant(t, bound));
        };
        Value gate = arith::MulFOp::create(b, loc, softClip(args[0], beta),
                                           sigmoid(args[0]));
        return arith::MulFOp::create(b, loc, gate, softClip(args[1], linear));
      })
      .Default([](Operation *) { return Value(); });
}

/// True for the ops this pass turns into lm.elementwise.
bool isPointwise(Operation *op) {
  if (op->getNumResults() != 1 ||
      !isa<RankedTensorType>(op->getResult(0).getType()))
    return false;
  Type elem = cast<RankedTensorType>(op->getResult(0).getType()).getElementType();
  if (!isa<FloatType>(elem))
    return false;
  for (Value operand : op->getOperands())
    if (operand.getType() != op->getResult(0).getType())
      return false;
  return isa<arith::AddFOp, arith::SubFOp, arith::MulFOp, arith::DivFOp,
             lm::SigmoidOp, lm::SiluOp, lm::SwigluOp, lm::SituOp>(op);
}

/// Wraps a pointwise op into an lm.elementwise.
lm::ElementwiseOp wrap(OpBuilder &b, Operation *op) {
  b.setInsertionPoint(op);
  auto type = cast<RankedTensorType>(op->getResult(0).getType());
  auto fused = lm::ElementwiseOp::create(b, op->getLoc(), type,
                                         op->getOperands());
  Block *body = new Block();
  fused.getBody().push_back(body);
  SmallVector<Value> args;
  for (Value operand : op->getOperands())
    args.push_back(body->addArgument(
        cast<RankedTensorType>(operand.getType()).getElementType(),
        op->getLoc()));
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(body);
  Value result = scalarBody(b, op->getLoc(), op, args);
  lm::YieldOp::create(b, op->getLoc(), result);
  op->getResult(0).replaceAllUsesWith(fused.getResult());
  op->erase();
  return fused;
}

/// Merges `producer` (whose only user is `consumer`) into `consumer`.
lm::ElementwiseOp merge(OpBuilder &b, lm::ElementwiseOp producer,
                        lm::ElementwiseOp consumer) {
  // New inputs: consumer's, with the producer's result replaced by the
  // producer's inputs (deduplicated).
  SmallVector<Value> inputs;
  auto indexOf = [&](Value v) -> unsigned {
    for (auto [i, in] : llvm::enumerate(inputs))
      if (in == v)
        return i;
    inputs.push_back(v);
    return inputs.size() - 1;
  };
  SmallVector<unsigned> consumerMap, producerMap;
  for (Value in : consumer.getInputs())
    consumerMap.push_back(in == producer.getResult() ? ~0u : indexOf(in));
  for (Value in : producer.getInputs())
    producerMap.push_back(indexOf(in));

  b.setInsertionPoint(consumer);
  auto fused = lm::ElementwiseOp::create(b, consumer.getLoc(),
                                         consumer.getResult().getType(), inputs);
  Block *body = new Block();
  fused.getBody().push_back(body);
  for (Value in : inputs)
    body->addArgument(cast<RankedTensorType>(in.getType()).getElementType(),
                      consumer.getLoc());
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(body);
  IRMapping mapping;
  Block &pb = producer.getBody().front();
  for (auto [i, arg] : llvm::enumerate(pb.getArguments()))
    mapping.map(arg, body->getArgument(producerMap[i]));
  for (Operation &op : pb.without_terminator())
    b.clone(op, mapping);
  Value produced = mapping.lookup(cast<lm::YieldOp>(pb.back()).getValue());
  Block &cb = consumer.getBody().front();
  IRMapping cmapping;
  for (auto [i, arg] : llvm::enumerate(cb.getArguments()))
    cmapping.map(arg, consumerMap[i] == ~0u ? produced
                                            : body->getArgument(consumerMap[i]));
  for (Operation &op : cb)
    b.clone(op, cmapping);
  consumer.getResult().replaceAllUsesWith(fused.getResult());
  consumer.erase();
  producer.erase();
  return fused;
}

struct FuseElementwisePass
    : public daybreak::impl::LmFuseElementwiseBase<FuseElementwisePass> {
  using LmFuseElementwiseBase::LmFuseElementwiseBase;

  void runOnOperation() override {
    OpBuilder b(&getContext());
    SmallVector<Operation *> pointwise;
    getOperation().walk([&](Operation *op) {
      if (isPointwise(op))
        pointwise.push_back(op);
    });
    for (Operation *op : pointwise)
      wrap(b, op);
    // Merge producers into single consumers until nothing changes.
    bool changed = true;
    while (changed) {
      changed = false;
      for (auto consumer : llvm::make_early_inc_range(
               getOperation().getOps<lm::ElementwiseOp>())) {
        for (Value in : consumer.getInputs()) {
          auto producer = in.getDefiningOp<lm::ElementwiseOp>();
          if (!producer || !producer->hasOneUse())
            continue;
          merge(b, producer, consumer);
          ++numFused;
          changed = true;
          break;
        }
        if (changed)
          break;
      }
    }
  }
};
} // namespace
