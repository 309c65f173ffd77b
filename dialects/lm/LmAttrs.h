//===- LmAttrs.h - Enums and attributes of the lm dialect -------*- C++ -*-===//

#ifndef DAYBREAK_DIALECTS_LM_LMATTRS_H
#define DAYBREAK_DIALECTS_LM_LMATTRS_H

#include "mlir/IR/Attributes.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/DialectImplementation.h"

#include "dialects/lm/LmEnums.h.inc"

#define GET_ATTRDEF_CLASSES
#include "dialects/lm/LmAttrs.h.inc"

#endif // DAYBREAK_DIALECTS_LM_LMATTRS_H
