//===- PlanDialect.cpp - Registration of the plan dialect -----------------===//

#include "dialects/plan/PlanDialect.h"
#include "dialects/plan/PlanOps.h"

#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace daybreak::plan;

#include "dialects/plan/PlanDialect.cpp.inc"
#include "dialects/plan/PlanEnums.cpp.inc"

#define GET_ATTRDEF_CLASSES
#include "dialects/plan/PlanAttrs.cpp.inc"

void PlanDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "dialects/plan/PlanOps.cpp.inc"
      >();
  addAttributes<
#define GET_ATTRDEF_LIST
#include "dialects/plan/PlanAttrs.cpp.inc"
      >();
}
