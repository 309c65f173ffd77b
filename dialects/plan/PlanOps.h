//===- PlanOps.h - Ops of the plan dialect ----------------------*- C++ -*-===//

#ifndef DAYBREAK_DIALECTS_PLAN_PLANOPS_H
#define DAYBREAK_DIALECTS_PLAN_PLANOPS_H

#include "dialects/lm/LmAttrs.h"
#include "dialects/plan/PlanDialect.h"

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "dialects/plan/PlanEnums.h.inc"

#define GET_ATTRDEF_CLASSES
#include "dialects/plan/PlanAttrs.h.inc"

#define GET_OP_CLASSES
#include "dialects/plan/PlanOps.h.inc"

#endif // DAYBREAK_DIALECTS_PLAN_PLANOPS_H
