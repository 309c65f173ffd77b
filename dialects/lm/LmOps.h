//===- LmOps.h - Ops of the lm dialect --------------------------*- C++ -*-===//

#ifndef DAYBREAK_DIALECTS_LM_LMOPS_H
#define DAYBREAK_DIALECTS_LM_LMOPS_H

#include "dialects/lm/LmAttrs.h"
#include "dialects/lm/LmDialect.h"

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#define GET_OP_CLASSES
#include "dialects/lm/LmOps.h.inc"

#endif // DAYBREAK_DIALECTS_LM_LMOPS_H
