//===- LmDialect.cpp - Registration of the lm dialect ---------------------===//

#include "dialects/lm/LmDialect.h"
#include "dialects/lm/LmAttrs.h"
#include "dialects/lm/LmOps.h"

using namespace mlir;
using namespace daybreak::lm;

#include "dialects/lm/LmDialect.cpp.inc"

void LmDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "dialects/lm/LmOps.cpp.inc"
      >();
  registerAttributes();
}
