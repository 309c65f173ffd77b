//===- LmDialect.h - The lm dialect -----------------------------*- C++ -*-===//

#ifndef DAYBREAK_DIALECTS_LM_LMDIALECT_H
#define DAYBREAK_DIALECTS_LM_LMDIALECT_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Dialect.h"

#include "dialects/lm/LmDialect.h.inc"

#endif // DAYBREAK_DIALECTS_LM_LMDIALECT_H
