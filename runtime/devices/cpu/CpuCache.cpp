//===- CpuCache.cpp - Paged cache rows: encode, decode and scatter --------===//
//
// Row codecs for the three cache formats (F32, BF16, DeepSeek's scaled FP8
// latent row) and the cacheWrite kernel that scatters token rows into them.
// The e4m3 decoding table is built once; nothing is allocated per call.
//
//===----------------------------------------------------------------------===//

#include "runtime/devices/cpu/CpuKernels.h"
#include "runtime/numerics/Numerics.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <string>

namespace daybreak::cpu {

using namespace numerics;

uint8_t *CacheView::row(int64_t seq, int64_t pos) const {
  if (ringRows)
    return base + (seq * ringRows + pos % ringRows) * bytesPerRow;
  int64_t logicalPage = seq * pagesPerSeq() + pos / pageSize;
  int64_t page = pageTable ? pageTable[logicalPage] : logicalPage;
  return base + (page * pageSize + pos % pageSize) * bytesPerRow;
}

namespace {

/// 2^ceil(log2(max(amax, 1e-4) / 448)) as an exponent, computed exactly.
int fp8ScaleExponent(float amax) {
  double ratio = std::max(double(amax), 1e-4) / 448.0;
  int exponent;
  double mantissa =
      std::frexp(ratio, &exponent); // ratio = m * 2^e, m in [.5, 1)
  return mantissa == 0.5 ? exponent - 1 : exponent;
}

/// Each e4m3 byte's value, built once.
const std::array<float, 256> &e4m3Values() {
  static const std::array<float, 256> table = [] {
    std::array<float, 256> values;
    for (int b = 0; b < 256; ++b)
      values[b] = e4m3ToFloat(static_cast<uint8_t>(b));
    return values;
  }();
  return table;
}

} // namespace

void CacheView::read(int64_t seq, int64_t pos, float *out) const {
  const uint8_t *src = row(seq, pos);
  switch (format) {
  case CacheFormat::F32:
    std::memcpy(out, src, width * sizeof(float));
    return;
  case CacheFormat::BF16:
    for (int64_t i = 0; i < width; ++i) {
      uint16_t bits;
      std::memcpy(&bits, src + 2 * i, 2);
      out[i] = bf16ToFloat(bits);
    }
    return;
  case CacheFormat::Fp8Scaled: {
    int64_t quantized = width - tailDim, tiles = quantized / scaleBlock;
    const uint8_t *scales = src + quantized;
    const uint8_t *tail = scales + 4 * tiles;
    const std::array<float, 256> &table = e4m3Values();
    for (int64_t tile = 0; tile < tiles; ++tile) {
      float scale;
      std::memcpy(&scale, scales + 4 * tile, 4);
      for (int64_t i = tile * scaleBlock; i < (tile + 1) * scaleBlock; ++i)
        out[i] = table[src[i]] * scale;
    }
    for (int64_t i = 0; i < tailDim; ++i) {
      uint16_t bits;
      std::memcpy(&bits, tail + 2 * i, 2);
      out[quantized + i] = bf16ToFloat(bits);
    }
    return;
  }
  }
}

void CacheView::readColumns(int64_t seq, int64_t pos, int64_t first,
                            int64_t count, float *out) const {
  const uint8_t *src = row(seq, pos);
  switch (format) {
  case CacheFormat::F32:
    std::memcpy(out, src + 4 * first, count * sizeof(float));
    return;
  case CacheFormat::BF16:
    for (int64_t i = 0; i < count; ++i) {
      uint16_t bits;
      std::memcpy(&bits, src + 2 * (first + i), 2);
      out[i] = bf16ToFloat(bits);
    }
    return;
  case CacheFormat::Fp8Scaled: {
    // Column by column, the same value read() gives it.
    int64_t quantized = width - tailDim;
    const uint8_t *scales = src + quantized;
    const uint8_t *tail = scales + 4 * (quantized / scaleBlock);
    const std::array<float, 256> &table = e4m3Values();
    for (int64_t i = 0; i < count; ++i) {
      int64_t c = first + i;
      if (c < quantized) {
        float scale;
        std::memcpy(&scale, scales + 4 * (c / scaleBlock), 4);
        out[i] = table[src[c]] * scale;
      } else {
        uint16_t bits;
        std::memcpy(&bits, tail + 2 * (c - quantized), 2);
        out[i] = bf16ToFloat(bits);
      }
    }
    return;
  }
  }
}

void CacheView::write(int64_t seq, int64_t pos, const float *in) const {
  uint8_t *dst = row(seq, pos);
  switch (format) {
  case CacheFormat::F32:
    std::memcpy(dst, in, width * sizeof(float));
    return;
  case CacheFormat::BF16:
    for (int64_t i = 0; i < width; ++i) {
      uint16_t bits = floatToBf16(in[i]);
      std::memcpy(dst + 2 * i, &bits, 2);
    }
    return;
  case CacheFormat::Fp8Scaled: {
    int64_t quantized = width - tailDim, tiles = quantized / scaleBlock;
    uint8_t *scales = dst + quantized;
    uint8_t *tail = scales + 4 * tiles;
    for (int64_t tile = 0; tile < tiles; ++tile) {
      const float *values = in + tile * scaleBlock;
      float amax = 0.0f;
      for (int64_t i = 0; i < scaleBlock; ++i)
        amax = std::max(amax, std::fabs(values[i]));
      int exponent = fp8ScaleExponent(amax);
      float scale = std::ldexp(1.0f, exponent);
      float inverse = std::ldexp(1.0f, -exponent); // exact: a power of two
      std::memcpy(scales + 4 * tile, &scale, 4);
      for (int64_t i = 0; i < scaleBlock; ++i)
        dst[tile * scaleBlock + i] = floatToE4m3(values[i] * inverse);
    }
    for (int64_t i = 0; i < tailDim; ++i) {
      uint16_t bits = floatToBf16(in[quantized + i]);
      std::memcpy(tail + 2 * i, &bits, 2);
    }
    return;
  }
  }
}

Status cacheWrite(ThreadPool &pool, const CacheView &cache, const float *values,
                  const int32_t *slots, const int32_t *sequences,
                  int64_t tokens, const CacheWritePrologueArgs *prologue,
                  int64_t valuesStride) {
  if (valuesStride == 0)
    valuesStride = cache.width;
  // Check everything first so a bad token leaves the cache untouched.
  for (int64_t t = 0; t < tokens; ++t) {
    int64_t seq = sequences ? sequences[t] : 0;
    if (seq < 0 || seq >= cache.batch)
      return Status::error("cacheWrite: sequence " + std::to_string(seq) +
                           " of token " + std::to_string(t) +
                           " is outside the batch [0, " +
                           std::to_string(cache.batch) + ")");
    if (slots[t] < -1 || slots[t] >= cache.maxSeqLen)
      return Status::error("cacheWrite: slot " + std::to_string(slots[t]) +
                           " at row " + std::to_string(t) +
                           " is outside the cache [-1, " +
                           std::to_string(cache.maxSeqLen) + ")");
  }
  // When two tokens name the same row the later one wins (as a sequential
  // scatter); the earlier ones are dropped so threads never race on a row.
  struct Write {
    int64_t row, token; // row: sequence * maxSeqLen + slot
    bool operator<(const Write &o) const {
      return row != o.row ? row < o.row : token < o.token;
    }
  };
  ScratchFrame frame;
  Write *writes = frame.take<Write>(tokens);
  int64_t count = 0;
  for (int64_t t = 0; t < tokens; ++t)
    if (slots[t] >= 0)
      writes[count++] = {
          (sequences ? sequences[t] : 0) * cache.maxSeqLen + slots[t], t};
  std::sort(writes, writes + count);
  int64_t *writers = frame.take<int64_t>(tokens);
  int64_t writerCount = 0;
  for (int64_t i = 0; i < count; ++i)
    if (i + 1 == count || writes[i + 1].row != writes[i].row)
      writers[writerCount++] = writes[i].token;
  int64_t grain =
      std::max<int64_t>(1, 8192 / std::max<int64_t>(cache.width, 1));
  // With a prologue, each row stored (only those) is normalised and
  // rotated into scratch first.
  static const runtime::CacheWritePrologue kNone;
  const runtime::CacheWritePrologue &p = prologue ? prologue->params : kNone;
  const RopeParams &rope = p.ropeParams;
  int64_t half = p.rope ? rope.dim / 2 : 0;
  double *freqs = frame.take<double>(half);
  if (p.rope)
    ropeFrequencies(rope, freqs);
  pool.parallelFor(writerCount, grain, [&](int64_t begin, int64_t end) {
    ScratchFrame chunkFrame;
    float *row = p.any() ? chunkFrame.take<float>(cache.width) : nullptr;
    double *cosines = chunkFrame.take<double>(half);
    double *sines = chunkFrame.take<double>(half);
    for (int64_t i = begin; i < end; ++i) {
      int64_t t = writers[i];
      const float *in = values + t * valuesStride;
      if (p.any()) {
        std::copy_n(in, cache.width, row);
        in = row;
      }
      if (p.norm == runtime::CacheWritePrologue::Norm::Rms)
        rmsNormRow(row, prologue->weight, p.normDim, p.eps, row);
      else if (p.norm == runtime::CacheWritePrologue::Norm::Layer)
        layerNormRow(row, prologue->weight, prologue->bias, p.normDim, p.eps,
                     row);
      if (p.rope) {
        ropeAngles(double(prologue->positions[t]), freqs, rope, cosines, sines);
        int64_t head = p.ropeHeadDim > 0 ? p.ropeHeadDim : cache.width;
        for (int64_t h = 0; h + head <= cache.width; h += head)
          ropeRotate(row + h, row + h, cosines, sines, rope);
      }
      cache.write(sequences ? sequences[t] : 0, slots[t], in);
    }
  });
  return Status::success();
}

} // namespace daybreak::cpu
