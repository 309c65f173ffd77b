//===- TargetTest.cpp - The target registry and interface -----------------===//

#include "compiler/targets/Target.h"

#include "gtest/gtest.h"

#include <set>
#include <string>
#include <vector>

using namespace daybreak;

namespace {

/// Kernels.def's names and targets columns, read here with its own macro
/// rather than through the table the targets use.
struct Declared {
  const char *name;
  uint8_t targets;
};
using daybreak::abi::Cpu;
using daybreak::abi::CpuAndCuda;
using daybreak::abi::Cuda;
const Declared kDeclared[] = {
#define DAYBREAK_KERNEL(Id, Name, Targets, Operands, Results, Params)          \
  {Name, Targets},
#include "runtime/abi/Kernels.def"
#undef DAYBREAK_KERNEL
};

TEST(Target, RegistryFindsTargetsByName) {
  EXPECT_EQ(targets::getTargetNames(),
            (std::vector<llvm::StringRef>{"cpu", "cuda"}));
  for (llvm::StringRef name : targets::getTargetNames()) {
    const targets::Target *target = targets::getTarget(name);
    ASSERT_NE(target, nullptr) << name.str();
    EXPECT_EQ(target->getName(), name);
  }
  EXPECT_EQ(targets::getTarget("tpu"), nullptr);
  EXPECT_EQ(targets::getTarget(""), nullptr);
  EXPECT_EQ(targets::getTarget("cpu")->getCodePhase(), "llvm");
  EXPECT_EQ(targets::getTarget("cuda")->getCodePhase(), "ptx");
}

TEST(Target, KernelsAreKernelsDefTargetsColumn) {
  for (llvm::StringRef name : targets::getTargetNames()) {
    const targets::Target *target = targets::getTarget(name);
    uint8_t bit = name == "cpu" ? Cpu : Cuda;
    std::set<std::string> expected, actual;
    for (const Declared &kernel : kDeclared)
      if (kernel.targets & bit)
        expected.insert(kernel.name);
    for (const daybreak::abi::KernelDecl *kernel : target->getKernels()) {
      actual.insert(kernel->name);
      EXPECT_TRUE(target->implements(*kernel)) << kernel->name;
    }
    EXPECT_FALSE(expected.empty()) << name.str();
    EXPECT_EQ(actual, expected) << name.str();
  }
}

} // namespace
