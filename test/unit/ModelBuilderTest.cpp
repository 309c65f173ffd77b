//===- ModelBuilderTest.cpp - The model builders' toolkit -----------------===//
//
// The toolkit's MXFP4 expert matmul, end to end from a checkpoint: random
// E2M1 codes and E8M0 scales written as gpt-oss publishes them (`*_blocks`,
// `*_scales`), the lm IR the toolkit builds from them, evaluated by the
// reference evaluator, against a dequantise-then-matmul written here from
// the format's definition (models.md section 3.3); and its checked weight
// access.
//
//===----------------------------------------------------------------------===//

#include "compiler/models/ModelBuilder.h"
#include "compiler/importers/Checkpoint.h"
#include "compiler/importers/WeightLoader.h"
#include "compiler/reference/CheckpointWeights.h"
#include "compiler/reference/Evaluator.h"
#include "test/unit/SafetensorsWriter.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Verifier.h"
#include "llvm/Support/FileSystem.h"

#include "gtest/gtest.h"

#include <cmath>
#include <random>

using namespace mlir;
using namespace daybreak;
using testutil::RawTensor;

namespace {

constexpr int64_t kExperts = 4, kOut = 8, kIn = 64, kTokens = 3, kTopK = 2;
const char *const kExpertsName = "model.layers.0.mlp.experts.gate_up_proj";

/// An empty directory under the test temp dir, fresh for every run.
std::string freshDir(const std::string &name) {
  std::string dir = ::testing::TempDir() + "model_builder_" + name;
  (void)llvm::sys::fs::remove_directories(dir);
  EXPECT_FALSE(llvm::sys::fs::create_directories(dir));
  return dir;
}

/// MXFP4 experts as gpt-oss stores them, with an f32 bias.
struct StoredExperts {
  std::vector<uint8_t> blocks; // [E, out, in / 32, 16]
  std::vector<uint8_t> scales; // [E, out, in / 32]
  std::vector<float> bias;     // [E, out]
};

StoredExperts randomExperts(std::mt19937 &rng) {
  StoredExperts s;
  std::uniform_int_distribution<int> byte(0, 255);
  // Scales 2^-4 .. 2^4: every code times every scale stays a normal float.
  std::uniform_int_distribution<int> exponent(127 - 4, 127 + 4);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  s.blocks.resize(kExperts * kOut * kIn / 2);
  for (uint8_t &b : s.blocks)
    b = uint8_t(byte(rng));
  s.scales.resize(kExperts * kOut * kIn / 32);
  for (uint8_t &e : s.scales)
    e = uint8_t(exponent(rng));
  s.bias.resize(kExperts * kOut);
  for (float &b : s.bias)
    b = normal(rng);
  return s;
}

/// The dense [E, out, in] weights, dequantised from the stored bytes by the
/// format's definition: W[e, r, 32g + 2b] = FP4[low nibble] * 2^(s - 127),
/// W[e, r, 32g + 2b + 1] = FP4[high nibble] * 2^(s - 127).
std::vector<double> dequantise(const StoredExperts &s) {
  static const double kFp4[16] = {0.0,  0.5,  1.0,  1.5,  2.0,  3.0,
                                  4.0,  6.0,  -0.0, -0.5, -1.0, -1.5,
                                  -2.0, -3.0, -4.0, -6.0};
  std::vector<double> w(kExperts * kOut * kIn);
  for (int64_t row = 0; row < kExperts * kOut; ++row)
    for (int64_t g = 0; g < kIn / 32; ++g) {
      double scale = std::ldexp(1.0, int(s.scales[row * (kIn / 32) + g]) - 127);
      for (int64_t b = 0; b < 16; ++b) {
        uint8_t byte = s.blocks[(row * (kIn / 32) + g) * 16 + b];
        w[row * kIn + 32 * g + 2 * b] = kFp4[byte & 0xF] * scale;
        w[row * kIn + 32 * g + 2 * b + 1] = kFp4[byte >> 4] * scale;
      }
    }
  return w;
}

/// Builds, with the toolkit, @experts(x [T, in], indices [T, k],
/// routing [T, k]) -> (per-slot [T, k, out] with the bias, weighted sum
/// [T, out] without it).
class ExpertsBuilder : public models::ModelBuilder {
public:
  ExpertsBuilder(ModuleOp module, const importers::Checkpoint &checkpoint)
      : ModelBuilder(module, checkpoint, models::CheckpointTraits{}) {}

  llvm::Error build() {
    int64_t t = ShapedType::kDynamic;
    auto type = b.getFunctionType(
        {f32Tensor({t, kIn}), tensor({t, kTopK}, b.getI32Type()),
         f32Tensor({t, kTopK})},
        {f32Tensor({t, kTopK, kOut}), f32Tensor({t, kOut})});
    b.setInsertionPointToEnd(module.getBody());
    auto func = func::FuncOp::create(b, loc, "experts", type);
    b.setInsertionPointToStart(func.addEntryBlock());
    auto experts = mxfp4Experts(kExpertsName, kExperts, kOut, kIn);
    if (!experts)
      return experts.takeError();
    auto bias =
        floatWeight((std::string(kExpertsName) + "_bias"), {kExperts, kOut});
    if (!bias)
      return bias.takeError();
    Value x = func.getArgument(0), indices = func.getArgument(1);
    Value slots = expertMatmul(x, *experts, indices, {}, *bias);
    Value mixed = expertMatmul(x, *experts, indices, func.getArgument(2));
    func::ReturnOp::create(b, loc, ValueRange{slots, mixed});
    return llvm::Error::success();
  }

  /// The toolkit's checked access alone, for its error messages.
  llvm::Error read(int64_t in) {
    b.setInsertionPointToEnd(module.getBody());
    auto func = func::FuncOp::create(b, loc, "read", b.getFunctionType({}, {}));
    b.setInsertionPointToStart(func.addEntryBlock());
    return mxfp4Experts(kExpertsName, kExperts, kOut, in).takeError();
  }
};

struct Built {
  std::unique_ptr<MLIRContext> context;
  OwningOpRef<ModuleOp> module;
};

Built newModule() {
  Built built;
  built.context = std::make_unique<MLIRContext>();
  built.context->loadDialect<lm::LmDialect, func::FuncDialect,
                             arith::ArithDialect, tensor::TensorDialect>();
  built.module = ModuleOp::create(UnknownLoc::get(built.context.get()));
  return built;
}

void writeCheckpoint(const std::string &dir, const StoredExperts &s,
                     std::vector<int64_t> blockShape = {kExperts, kOut,
                                                        kIn / 32, 16},
                     std::string scaleDtype = "U8") {
  std::string name = kExpertsName;
  std::vector<uint8_t> scales = s.scales;
  if (scaleDtype == "F32") // the right shape, the wrong dtype
    scales = testutil::bytesOf(std::vector<float>(s.scales.size(), 1.0f));
  testutil::writeSafetensors(
      dir + "/model.safetensors",
      {RawTensor{name + "_blocks", "U8", blockShape, s.blocks},
       RawTensor{
           name + "_scales", scaleDtype, {kExperts, kOut, kIn / 32}, scales},
       RawTensor{name + "_bias",
                 "F32",
                 {kExperts, kOut},
                 testutil::bytesOf(s.bias)}});
}

TEST(ModelBuilder, Mxfp4ExpertsMatchDequantisedMatmul) {
  std::mt19937 rng(20251201);
  StoredExperts stored = randomExperts(rng);
  std::string dir = freshDir("mxfp4");
  writeCheckpoint(dir, stored);
  auto checkpoint = importers::Checkpoint::open(dir);
  ASSERT_TRUE(bool(checkpoint)) << llvm::toString(checkpoint.takeError());

  Built built = newModule();
  ExpertsBuilder builder(*built.module, *checkpoint);
  llvm::Error err = builder.build();
  ASSERT_FALSE(err) << llvm::toString(std::move(err));
  ASSERT_TRUE(succeeded(verify(*built.module)));
  // The stored form decides the op: MXFP4 experts keep their codes and
  // scales (declared as the E2M1 and E8M0 values the bytes hold).
  int mxfp4Ops = 0;
  built.module->walk([&](lm::Mxfp4ExpertMatmulOp) { ++mxfp4Ops; });
  EXPECT_EQ(mxfp4Ops, 2);
  auto blocks = built.module->lookupSymbol<lm::WeightOp>(
      std::string(kExpertsName) + "_blocks");
  ASSERT_TRUE(blocks);
  EXPECT_EQ(cast<RankedTensorType>(blocks.getType()),
            RankedTensorType::get({kExperts, kOut, kIn},
                                  Float4E2M1FNType::get(built.context.get())));

  // Random activations, routing with one empty slot (-1) and weights.
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(kTokens * kIn), routing(kTokens * kTopK);
  for (float &v : x)
    v = normal(rng);
  for (float &v : routing)
    v = normal(rng);
  std::vector<int64_t> indices = {2, 0, 3, 1, -1, 3};
  ref::WeightProvider weights = ref::checkpointWeights(*checkpoint);
  ref::Evaluator evaluator(*built.module, weights);
  auto results = evaluator.run(
      "experts", {ref::Tensor::fromFloats({kTokens, kIn}, x),
                  ref::Tensor::fromInts({kTokens, kTopK}, indices),
                  ref::Tensor::fromFloats({kTokens, kTopK}, routing)});
  ASSERT_TRUE(bool(results)) << llvm::toString(results.takeError());
  const std::vector<float> &slots = (*results)[0].floats();
  const std::vector<float> &mixed = (*results)[1].floats();

  // The oracle, in double: dense weights, then per slot x . W_e (+ bias).
  std::vector<double> w = dequantise(stored);
  double largest = 0.0, worst = 0.0;
  for (int64_t t = 0; t < kTokens; ++t)
    for (int64_t n = 0; n < kOut; ++n) {
      double sum = 0.0;
      for (int64_t j = 0; j < kTopK; ++j) {
        int64_t e = indices[t * kTopK + j];
        double dot = 0.0;
        if (e >= 0)
          for (int64_t k = 0; k < kIn; ++k)
            dot += double(x[t * kIn + k]) * w[(e * kOut + n) * kIn + k];
        double expected = e >= 0 ? dot + stored.bias[e * kOut + n] : 0.0;
        worst = std::max(
            worst, std::abs(slots[(t * kTopK + j) * kOut + n] - expected));
        largest = std::max(largest, std::abs(expected));
        sum += routing[t * kTopK + j] * dot;
      }
      worst = std::max(worst, std::abs(mixed[t * kOut + n] - sum));
      largest = std::max(largest, std::abs(sum));
    }
  ASSERT_GT(largest, 1.0) << "the random data should not give near-zeros";
  // The evaluator also sums in double: only the final rounding to f32
  // differs, so 1e-6 of the largest output.
  EXPECT_LE(worst, 1e-6 * largest);
}

TEST(ModelBuilder, Mxfp4ExpertsAreChecked) {
  std::mt19937 rng(7);
  StoredExperts stored = randomExperts(rng);
  auto expectError = [](llvm::Error err,
                        std::initializer_list<std::string> needles) {
    ASSERT_TRUE(bool(err)) << "expected an error";
    std::string message = llvm::toString(std::move(err));
    for (const std::string &needle : needles)
      EXPECT_NE(message.find(needle), std::string::npos)
          << "'" << needle << "' not in: " << message;
  };
  std::string blocks = std::string(kExpertsName) + "_blocks";
  std::string scales = std::string(kExpertsName) + "_scales";
  {
    // Blocks of the wrong shape: named with their file.
    std::string dir = freshDir("mxfp4_shape");
    writeCheckpoint(dir, stored, {kExperts, kOut, kIn / 16, 8});
    auto checkpoint = importers::Checkpoint::open(dir);
    ASSERT_TRUE(bool(checkpoint)) << llvm::toString(checkpoint.takeError());
    Built built = newModule();
    ExpertsBuilder builder(*built.module, *checkpoint);
    expectError(builder.read(kIn),
                {"'" + blocks + "'", "model.safetensors", "shape"});
  }
  {
    // Scales stored as F32 instead of E8M0 bytes.
    std::string dir = freshDir("mxfp4_dtype");
    writeCheckpoint(dir, stored, {kExperts, kOut, kIn / 32, 16}, "F32");
    auto checkpoint = importers::Checkpoint::open(dir);
    ASSERT_TRUE(bool(checkpoint)) << llvm::toString(checkpoint.takeError());
    Built built = newModule();
    ExpertsBuilder builder(*built.module, *checkpoint);
    expectError(builder.read(kIn),
                {"'" + scales + "'", "model.safetensors", "dtype"});
  }
  {
    // Input features that are not whole MXFP4 blocks.
    std::string dir = freshDir("mxfp4_blocks");
    writeCheckpoint(dir, stored);
    auto checkpoint = importers::Checkpoint::open(dir);
    ASSERT_TRUE(bool(checkpoint)) << llvm::toString(checkpoint.takeError());
    Built built = newModule();
    ExpertsBuilder builder(*built.module, *checkpoint);
    expectError(builder.read(48), {"'" + blocks + "'", "48 input features",
                                   "not whole blocks of 32"});
  }
}

} // namespace
