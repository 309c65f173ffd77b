//===- CpuCodegenTest.cpp - Generated CPU kernels vs the reference --------===//
//
// Fuses pointwise chains of a small lm function, lowers them to plan (which
// outlines the generated kernels), compiles those through LLVM into a shared
// object, loads it, and runs each kernel on seeded random inputs at several
// lengths (1, odd, a vector-loop remainder, and a long run), comparing with
// the reference evaluator on the unfused function.
//
//===----------------------------------------------------------------------===//

#include "compiler/reference/Evaluator.h"
#include "compiler/targets/cpu/CpuCodegen.h"
#include "passes/Passes.h"

#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"

#include "gtest/gtest.h"

#include <cmath>
#include <cstdio>
#include <dlfcn.h>
#include <random>
#include <sys/mman.h>
#include <unistd.h>

using namespace mlir;
using namespace daybreak;

namespace {

// gpt-oss's clamped SwiGLU feeding a residual add, and SiTU: chains with
// exp, tanh, clamps and constants.
const char *kSource = R"mlir(
  func.func @f(%g: tensor<?xf32>, %u: tensor<?xf32>, %h: tensor<?xf32>)
      -> (tensor<?xf32>, tensor<?xf32>) {
    %a = lm.swiglu %g, %u {alpha = 1.702 : f64, limit = 7.0 : f64, up_offset = 1.0 : f64}
        : (tensor<?xf32>, tensor<?xf32>) -> tensor<?xf32>
    %r = arith.addf %h, %a : tensor<?xf32>
    %s = lm.situ %g, %u {beta = 4.0 : f64, linear_beta = 25.0 : f64}
        : (tensor<?xf32>, tensor<?xf32>) -> tensor<?xf32>
    return %r, %s : tensor<?xf32>, tensor<?xf32>
  }
  // Column slices read in place (lm-lower-to-plan's column views): the two
  // halves of a stacked gate/up result, and the odd columns of interleaved
  // pairs seen through a reshape (gpt-oss's layout) times an input.
  func.func @views(%both: tensor<?x10xf32>, %pairs: tensor<?x3x2xf32>,
                   %x: tensor<?x3xf32>) -> (tensor<?x5xf32>, tensor<?x3xf32>) {
    %c0 = arith.constant 0 : index
    %t = tensor.dim %both, %c0 : tensor<?x10xf32>
    %g = tensor.extract_slice %both[0, 0] [%t, 5] [1, 1]
        : tensor<?x10xf32> to tensor<?x5xf32>
    %u = tensor.extract_slice %both[0, 5] [%t, 5] [1, 1]
        : tensor<?x10xf32> to tensor<?x5xf32>
    %a = lm.swiglu %g, %u : (tensor<?x5xf32>, tensor<?x5xf32>) -> tensor<?x5xf32>
    %p = tensor.dim %pairs, %c0 : tensor<?x3x2xf32>
    %odd = tensor.extract_slice %pairs[0, 0, 1] [%p, 3, 1] [1, 1, 1]
        : tensor<?x3x2xf32> to tensor<?x3x1xf32>
    %o = tensor.collapse_shape %odd [[0], [1, 2]]
        : tensor<?x3x1xf32> into tensor<?x3xf32>
    %m = arith.mulf %o, %x : tensor<?x3xf32>
    return %a, %m : tensor<?x5xf32>, tensor<?x3xf32>
  })mlir";

using Kernel = void (*)(int64_t begin, int64_t end, const float *const *,
                        float *);

TEST(CpuCodegen, GeneratedKernelsMatchTheReference) {
  DialectRegistry registry;
  registry.insert<lm::LmDialect, func::FuncDialect, arith::ArithDialect,
                  math::MathDialect, plan::PlanDialect, memref::MemRefDialect,
                  LLVM::LLVMDialect, scf::SCFDialect, tensor::TensorDialect>();
  MLIRContext context(registry);
  context.loadAllAvailableDialects();
  OwningOpRef<ModuleOp> reference = parseSourceString<ModuleOp>(kSource, &context);
  ASSERT_TRUE(!!reference);
  OwningOpRef<ModuleOp> lowered = reference->clone();

  PassManager pm(&context);
  pm.addNestedPass<func::FuncOp>(createLmFuseElementwise());
  pm.addPass(createLmLowerToPlan());
  ASSERT_TRUE(succeeded(pm.run(*lowered)));
  ModuleOp kernels = plan::findGeneratedKernels(*lowered);
  ASSERT_TRUE(!!kernels);
  auto shared = targets::cpu::compileToSharedObject(kernels, nullptr);
  ASSERT_TRUE(!!shared) << llvm::toString(shared.takeError());

  int fd = memfd_create("codegen-test", 0);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(write(fd, shared->data(), shared->size()),
            static_cast<ssize_t>(shared->size()));
  std::string path = "/proc/self/fd/" + std::to_string(fd);
  void *handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  close(fd);
  ASSERT_NE(handle, nullptr) << dlerror();
  // Two chains: (h, g, u) -> h + swiglu(g, u) and (g, u) -> situ(g, u).
  auto addKernel = reinterpret_cast<Kernel>(dlsym(handle, "daybreak_elementwise_0"));
  auto situKernel = reinterpret_cast<Kernel>(dlsym(handle, "daybreak_elementwise_1"));
  ASSERT_TRUE(addKernel && situKernel);

  ref::Evaluator evaluator(*reference);
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> dist(-9.0f, 9.0f); // past the clamps
  for (int64_t n : {1, 7, 13, 4099}) {
    std::vector<float> g(n), u(n), h(n);
    for (int64_t i = 0; i < n; ++i) {
      g[i] = dist(rng);
      u[i] = dist(rng);
      h[i] = dist(rng);
    }
    auto expected = evaluator.run(
        "f", {ref::Tensor::fromFloats({n}, g), ref::Tensor::fromFloats({n}, u),
              ref::Tensor::fromFloats({n}, h)});
    ASSERT_TRUE(!!expected) << llvm::toString(expected.takeError());
    std::vector<float> sum(n), situ(n);
    const float *sumInputs[] = {h.data(), g.data(), u.data()};
    const float *situInputs[] = {g.data(), u.data()};
    addKernel(0, n, sumInputs, sum.data());
    // In two ranges, as the CPU device's threads run it.
    situKernel(0, n / 2, situInputs, situ.data());
    situKernel(n / 2, n, situInputs, situ.data());
    // fp32 exp/tanh and division against the fp64 reference: a few ulps of
    // the result magnitude (up to ~70 here).
    for (int64_t i = 0; i < n; ++i) {
      EXPECT_NEAR(sum[i], (*expected)[0].floats()[i],
                  2e-6 * std::max(1.0f, std::fabs(sum[i])))
          << "n " << n << " i " << i;
      EXPECT_NEAR(situ[i], (*expected)[1].floats()[i],
                  2e-6 * std::max(1.0f, std::fabs(situ[i])))
          << "n " << n << " i " << i;
    }
  }

  // The views' kernels: no copy_columns launch is left in the plan.
  auto viewSwiglu =
      reinterpret_cast<Kernel>(dlsym(handle, "daybreak_elementwise_2"));
  auto viewMul =
      reinterpret_cast<Kernel>(dlsym(handle, "daybreak_elementwise_3"));
  ASSERT_TRUE(viewSwiglu && viewMul);
  int launches = 0;
  lowered->walk([&](Operation *op) {
    auto name = op->getAttrOfType<FlatSymbolRefAttr>("kernel");
    if (!name)
      return;
    ++launches;
    EXPECT_NE(name.getValue().str().rfind("copy_columns", 0), 0u)
        << "a column slice was copied";
  });
  EXPECT_GT(launches, 0);
  for (int64_t rows : {1, 3, 37}) {
    std::vector<float> both(rows * 10), pairs(rows * 6), x(rows * 3);
    for (float &v : both)
      v = dist(rng);
    for (float &v : pairs)
      v = dist(rng);
    for (float &v : x)
      v = dist(rng);
    auto expected =
        evaluator.run("views", {ref::Tensor::fromFloats({rows, 10}, both),
                                ref::Tensor::fromFloats({rows, 3, 2}, pairs),
                                ref::Tensor::fromFloats({rows, 3}, x)});
    ASSERT_TRUE(!!expected) << llvm::toString(expected.takeError());
    std::vector<float> glu(rows * 5), product(rows * 3);
    const float *gluInputs[] = {both.data(), both.data()};
    const float *mulInputs[] = {pairs.data(), x.data()};
    // Ranges that start and end inside a row.
    int64_t cut = (rows * 5) / 3;
    viewSwiglu(0, cut, gluInputs, glu.data());
    viewSwiglu(cut, rows * 5, gluInputs, glu.data());
    viewMul(0, rows * 3, mulInputs, product.data());
    for (int64_t i = 0; i < rows * 5; ++i)
      EXPECT_NEAR(glu[i], (*expected)[0].floats()[i],
                  2e-6 * std::max(1.0f, std::fabs(glu[i])))
          << "rows " << rows << " i " << i;
    for (int64_t i = 0; i < rows * 3; ++i)
      EXPECT_EQ(product[i], (*expected)[1].floats()[i])
          << "rows " << rows << " i " << i;
  }
  dlclose(handle);
}

} // namespace
