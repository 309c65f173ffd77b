//===- PassEquivalence.h - A pass against the evaluator ---------*- C++ -*-===//
//
// Random tensor bytes in the checkpoint's stored forms (e4m3 codes, FP8
// block scales, bf16), for tests that write a checkpoint, run the reference
// evaluator on a module before and after a pass, and expect the same
// outputs bit for bit.
//
//===----------------------------------------------------------------------===//

#ifndef DAYBREAK_TEST_UNIT_PASSEQUIVALENCE_H
#define DAYBREAK_TEST_UNIT_PASSEQUIVALENCE_H

#include "compiler/importers/Checkpoint.h"
#include "compiler/reference/CheckpointWeights.h"
#include "compiler/reference/Evaluator.h"
#include "compiler/reference/Tensor.h"
#include "dialects/lm/LmDialect.h"
#include "test/unit/SafetensorsWriter.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"

#include "llvm/ADT/STLExtras.h"

#include "gtest/gtest.h"

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

namespace daybreak::testutil {

/// `count` e4m3 codes, finite (bit 6 clear keeps the exponent below 15).
/// `count` values drawn from N(0, sigma^2): activations and weights of a
/// module evaluated before and after a pass.
inline std::vector<float> normalFloats(std::mt19937 &rng, int64_t count,
                                       float sigma = 2.0f) {
  std::normal_distribution<float> normal(0.0f, sigma);
  std::vector<float> out(count);
  for (float &v : out)
    v = normal(rng);
  return out;
}

inline std::vector<uint8_t> randomE4m3Codes(std::mt19937 &rng, int64_t count) {
  std::uniform_int_distribution<int> byte(0, 255);
  std::vector<uint8_t> out(count);
  for (uint8_t &v : out)
    v = uint8_t(byte(rng) & 0xBF);
  return out;
}

/// `count` f32 power-of-two block scales, 2^-9 .. 2^-5, no two neighbours
/// alike (a scale read for the wrong block shows).
inline std::vector<uint8_t> randomBlockScales(std::mt19937 &rng,
                                              int64_t count) {
  std::uniform_int_distribution<int> exponent(-9, -5);
  std::vector<float> out(count);
  for (int64_t i = 0; i < count; ++i) {
    do
      out[i] = std::ldexp(1.0f, exponent(rng));
    while (i > 0 && out[i] == out[i - 1]);
  }
  return bytesOf(out);
}

/// `count` bf16 values, normal around `mean` with deviation 0.1.
inline std::vector<uint8_t> randomBf16s(std::mt19937 &rng, int64_t count,
                                        float mean = 0.0f) {
  std::normal_distribution<float> normal(mean, 0.1f);
  std::vector<uint16_t> out(count);
  for (uint16_t &v : out) {
    float f = normal(rng);
    uint32_t bits;
    std::memcpy(&bits, &f, 4);
    v = uint16_t(bits >> 16);
  }
  return bytesOf(out);
}

/// The dialects a module of lm ops over func, arith and tensor needs.
inline mlir::DialectRegistry lmTestDialects() {
  mlir::DialectRegistry registry;
  registry.insert<lm::LmDialect, mlir::func::FuncDialect,
                  mlir::arith::ArithDialect, mlir::tensor::TensorDialect>();
  return registry;
}

/// Each of `after` is `before`'s result bit for bit, and none is all zeros
/// (the comparison is not vacuous).
inline void expectSameOutputs(const std::vector<ref::Tensor> &before,
                              const std::vector<ref::Tensor> &after) {
  ASSERT_EQ(after.size(), before.size());
  for (size_t r = 0; r < before.size(); ++r) {
    EXPECT_EQ(after[r].shape(), before[r].shape()) << "result " << r;
    EXPECT_EQ(after[r].floats(), before[r].floats()) << "result " << r;
    EXPECT_TRUE(
        llvm::any_of(before[r].floats(), [](float v) { return v != 0.0f; }))
        << "result " << r;
  }
}

} // namespace daybreak::testutil

#endif // DAYBREAK_TEST_UNIT_PASSEQUIVALENCE_H
