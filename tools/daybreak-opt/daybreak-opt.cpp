//===- daybreak-opt.cpp - The opt-style driver for Daybreak IR ------------===//

#include "dialects/lm/LmDialect.h"
#include "dialects/plan/PlanDialect.h"
#include "passes/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "mlir/Transforms/Passes.h"

int main(int argc, char **argv) {
  mlir::DialectRegistry registry;
  registry.insert<daybreak::lm::LmDialect, daybreak::plan::PlanDialect,
                  mlir::func::FuncDialect, mlir::memref::MemRefDialect,
                  mlir::math::MathDialect, mlir::scf::SCFDialect,
                  mlir::LLVM::LLVMDialect,
                  mlir::arith::ArithDialect, mlir::tensor::TensorDialect>();
  mlir::registerTransformsPasses();
  daybreak::registerDaybreakPasses();
  return mlir::asMainReturnCode(
      mlir::MlirOptMain(argc, argv, "Daybreak optimizer driver\n", registry));
}
