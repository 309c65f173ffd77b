//===- GeneratedCodeTest.cpp - Models side by side in one process ---------===//
//
// Each CPU device loads its artifact's generated kernels from memory. Two
// models of different families, loaded one after the other and kept side by
// side (as the ranks of a tensor- or expert-parallel run are), must each
// run their own kernels: the second model's logits match transformers with
// the first still loaded, and the first's still match after.
//
//===----------------------------------------------------------------------===//

#include "compiler/pipeline/Pipeline.h"
#include "runtime/executor/Commands.h"
#include "runtime/executor/Model.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/raw_ostream.h"

#include "gtest/gtest.h"

#include <sstream>

using namespace daybreak;

namespace {

/// Compiles the fixture `name` for the CPU into `dir` with an f32 cache.
std::string compileFixture(const std::string &dir, const std::string &name,
                           int64_t maxBatch, int64_t maxTokens) {
  pipeline::Options options;
  options.checkpoint =
      std::string(DAYBREAK_SOURCE_DIR) + "/test/fixtures/" + name;
  options.output = dir + "/" + name + ".daybreak";
  options.maxSeqLen = 64;
  options.maxBatch = maxBatch;
  options.maxTokens = maxTokens;
  options.kvCacheDtype = "f32";
  std::string log;
  llvm::raw_string_ostream logStream(log);
  llvm::Error err = pipeline::compile(options, llvm::nulls(), logStream);
  EXPECT_FALSE(err) << llvm::toString(std::move(err)) << log;
  return options.output;
}

/// Runs the fixture's inputs on `model` and compares with its transformers
/// logits at 1e-4 (the fixtures' tolerance for an f32 cache).
void expectFixtureLogits(runtime::Model &model, const std::string &dir,
                         const std::string &name) {
  std::string fixture =
      std::string(DAYBREAK_SOURCE_DIR) + "/test/fixtures/" + name;
  std::string output = dir + "/" + name + ".safetensors";
  std::ostringstream log;
  Status ran = runtime::runLogits(model, fixture + "/inputs.json", output, log);
  ASSERT_TRUE(ran.ok()) << name << ": " << ran.message();
  runtime::CompareOptions compare;
  compare.expected = fixture + "/expected.safetensors";
  compare.atol = 1e-4;
  Status same = runtime::compareLogits(output, compare, log);
  EXPECT_TRUE(same.ok()) << name << ": " << same.message() << "\n" << log.str();
}

TEST(GeneratedCode, ModelsSideBySideRunTheirOwnKernels) {
  llvm::SmallString<128> dir;
  ASSERT_FALSE(llvm::sys::fs::createUniqueDirectory("generated-code", dir));
  std::string deepseek =
      compileFixture(dir.str().str(), "deepseek_v32_small", 2, 64);
  std::string gptOss = compileFixture(dir.str().str(), "gpt_oss_small", 3, 96);

  runtime::LoadOptions load;
  load.threads = 2;
  auto first = runtime::Model::load(deepseek, load);
  ASSERT_TRUE(first.ok()) << first.error().message();
  // Loaded while the first model's kernels are loaded, and after every
  // transient descriptor of its load is closed.
  auto second = runtime::Model::load(gptOss, load);
  ASSERT_TRUE(second.ok()) << second.error().message();
  expectFixtureLogits(**second, dir.str().str(), "gpt_oss_small");
  expectFixtureLogits(**first, dir.str().str(), "deepseek_v32_small");
  llvm::sys::fs::remove_directories(dir);
}

} // namespace
