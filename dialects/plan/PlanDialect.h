//===- PlanDialect.h - The plan dialect -------------------------*- C++ -*-===//

#ifndef DAYBREAK_DIALECTS_PLAN_PLANDIALECT_H
#define DAYBREAK_DIALECTS_PLAN_PLANDIALECT_H

#include "dialects/lm/LmDialect.h"
#include "mlir/IR/Dialect.h"

#include "dialects/plan/PlanDialect.h.inc"

#endif // DAYBREAK_DIALECTS_PLAN_PLANDIALECT_H
