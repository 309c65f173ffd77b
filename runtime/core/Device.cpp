//===- Device.cpp - Helpers devices share to read launches ----------------===//

#include "runtime/core/Device.h"

#include "runtime/numerics/Numerics.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <ostream>

using namespace daybreak;
using namespace daybreak::runtime;
using artifact::DType;

/// Bytes per element of an artifact dtype.
int64_t runtime::elementBytes(DType dtype) {
  switch (dtype) {
  case DType::F32:
  case DType::I32:
    return 4;
  case DType::BF16:
  case DType::F16:
    return 2;
  case DType::I64:
    return 8;
  default:
    return 1;
  }
}

std::vector<int64_t> runtime::bufferShape(const artifact::Buffer &b,
                                          int64_t tokens) {
  std::vector<int64_t> shape;
  for (const artifact::SizeExpr &e : b.dims()) {
    int64_t size = e.constant();
    for (int i = 0; i < e.coeffs_size(); ++i)
      size += e.coeffs(i) * tokens;
    shape.push_back(size);
  }
  return shape;
}

StatusOr<std::vector<Fp8Scaling>>
runtime::fp8Scalings(const artifact::Manifest &m,
                     const std::vector<PreparedStep> &steps) {
  std::vector<Fp8Scaling> scalings(m.weights_size());
  for (const PreparedStep &step : steps)
    for (const PreparedLaunch &l : step.launches) {
      // fp8_matmul's weight_scale slot; expert_matmul's when present.
      unsigned weight, scale, blocks;
      if (l.kernel == abi::KernelId::Fp8Matmul) {
        weight = abi::Fp8Matmul::In::weight;
        scale = abi::Fp8Matmul::In::weight_scale;
        blocks = abi::Fp8Matmul::P::block_size;
      } else if (l.kernel == abi::KernelId::ExpertMatmul &&
                 l.args[abi::ExpertMatmul::In::weight_scale].kind !=
                     PreparedArg::Kind::Absent) {
        weight = abi::ExpertMatmul::In::weight;
        scale = abi::ExpertMatmul::In::weight_scale;
        blocks = abi::ExpertMatmul::P::block_size;
      } else {
        continue;
      }
      if (!l.has(blocks) || l.ints(blocks).size() != 2)
        return Status::error(l.label + ": expects two block sizes");
      const PreparedArg &w = l.args[weight], &sc = l.args[scale];
      if (w.kind == PreparedArg::Kind::Buffer &&
          sc.kind == PreparedArg::Kind::Buffer) {
        // A workspace an earlier launch fills (the MXFP4 online route):
        // static e4m3 [E, N, K] with fp32 scales covering its blocks.
        int64_t bn = l.ints(blocks)[0], bk = l.ints(blocks)[1];
        if (w.dtype != DType::F8E4M3FN || sc.dtype != DType::F32 ||
            w.rank != 3 || sc.rank != 3 || bn <= 0 || bk <= 0 ||
            w.perToken[0] || w.perToken[1] || w.perToken[2] || sc.perToken[0] ||
            sc.perToken[1] || sc.perToken[2] ||
            sc.constant[0] != w.constant[0] ||
            sc.constant[1] != (w.constant[1] + bn - 1) / bn ||
            sc.constant[2] != (w.constant[2] + bk - 1) / bk)
          return Status::error(l.label +
                               ": the e4m3 workspace and its scales are not "
                               "[E, N, K] with fp32 block scales covering it");
        continue;
      }
      if (w.kind != PreparedArg::Kind::Weight ||
          sc.kind != PreparedArg::Kind::Weight)
        return Status::error(l.label + ": expects weight and scale weights "
                                       "(or both buffers)");
      Fp8Scaling &s = scalings[l.args[weight].index];
      s.scale = l.args[scale].index;
      s.blockN = l.ints(blocks)[0];
      s.blockK = l.ints(blocks)[1];
    }
  return scalings;
}

Status runtime::checkWeightScales(const artifact::Manifest &m,
                                  const std::vector<PreparedStep> &steps) {
  StatusOr<std::vector<Fp8Scaling>> scalings = fp8Scalings(m, steps);
  if (!scalings.ok())
    return scalings.error();
  for (int wi = 0; wi < m.weights_size(); ++wi) {
    const Fp8Scaling &s = (*scalings)[wi];
    const artifact::Weight &w = m.weights(wi);
    if (s.scale < 0)
      continue;
    // [N, K] with scales [ceil(N/bn), ceil(K/bk)], or per expert:
    // [E, N, K] with [E, ceil(N/bn), ceil(K/bk)], all fp32.
    const artifact::Weight &scale = m.weights(s.scale);
    int rank = w.shape_size();
    if (w.dtype() != DType::F8E4M3FN || scale.dtype() != DType::F32 ||
        (rank != 2 && rank != 3) || scale.shape_size() != rank ||
        s.blockN <= 0 || s.blockK <= 0)
      return Status::error("weight '" + w.name() + "' and its scales '" +
                           scale.name() +
                           "' are not e4m3 [(E,) N, K] with fp32 block scales");
    int64_t n = w.shape(rank - 2), k = w.shape(rank - 1);
    if ((rank == 3 && scale.shape(0) != w.shape(0)) ||
        scale.shape(rank - 2) != (n + s.blockN - 1) / s.blockN ||
        scale.shape(rank - 1) != (k + s.blockK - 1) / s.blockK)
      return Status::error("scales '" + scale.name() + "' do not cover the " +
                           std::to_string(s.blockN) + "x" +
                           std::to_string(s.blockK) + " blocks of '" +
                           w.name() + "'");
  }
  return Status::success();
}

Status Device::runLaunches(const PreparedStep &step, int64_t tokens) {
  for (const PreparedLaunch &l : step.launches) {
    Status status = launch(l, tokens);
    if (status.ok() && finiteLog_)
      status = reportNonFinite(l, tokens);
    if (!status.ok())
      return status.withContext(l.label);
  }
  return Status::success();
}

Status Device::reportNonFinite(const PreparedLaunch &l, int64_t tokens) {
  std::vector<uint8_t> bytes;
  for (unsigned slot = 0; slot < l.numResults; ++slot) {
    const PreparedArg &arg = l.args[l.numOperands + slot];
    if (arg.kind != PreparedArg::Kind::Buffer ||
        (arg.dtype != DType::F32 && arg.dtype != DType::BF16 &&
         arg.dtype != DType::F16))
      continue;
    std::vector<int64_t> shape;
    int64_t numel = 1;
    for (unsigned d = 0; d < arg.rank; ++d) {
      shape.push_back(arg.constant[d] + arg.perToken[d] * tokens);
      numel *= shape.back();
    }
    // A column view's rows lie row_stride elements apart.
    int64_t cols = shape.empty() ? 1 : shape.back();
    int64_t stride = arg.rowStride ? arg.rowStride : cols;
    int64_t rows = cols ? numel / cols : 0;
    int64_t span = rows ? (rows - 1) * stride + cols : 0;
    int64_t width = elementBytes(arg.dtype);
    bytes.resize(span * width);
    Status status = readArena(arg.offset, bytes.data(), bytes.size());
    if (!status.ok())
      return status;
    // copy_columns writes columns [dst_offset, dst_offset + the input's
    // width - src_offset) of its result (a concatenation's part); the
    // others are not its own.
    int64_t lo = 0, hi = cols;
    if (l.kernel == abi::KernelId::CopyColumns && !shape.empty()) {
      using P = abi::CopyColumns::P;
      const PreparedArg &in = l.args[0];
      int64_t inCols =
          in.constant[in.rank - 1] + in.perToken[in.rank - 1] * tokens;
      lo = l.i(P::dst_offset);
      hi = std::min(cols, lo + inCols - l.i(P::src_offset));
    }
    int64_t nan = 0, posInf = 0, negInf = 0, first = -1;
    for (int64_t i = 0; i < numel; ++i) {
      if (i % cols < lo || i % cols >= hi)
        continue;
      int64_t at = i / cols * stride + i % cols;
      float v;
      if (arg.dtype == DType::F32) {
        std::memcpy(&v, bytes.data() + 4 * at, 4);
      } else {
        uint16_t bits;
        std::memcpy(&bits, bytes.data() + 2 * at, 2);
        v = arg.dtype == DType::BF16 ? numerics::bf16ToFloat(bits)
                                     : numerics::f16ToFloat(bits);
      }
      if (std::isfinite(v))
        continue;
      if (first < 0)
        first = i;
      (std::isnan(v) ? nan : v > 0 ? posInf : negInf) += 1;
    }
    if (first < 0)
      continue;
    *finiteLog_ << "non-finite: " << l.label << " result " << slot << " [";
    for (size_t d = 0; d < shape.size(); ++d)
      *finiteLog_ << (d ? "," : "") << shape[d];
    *finiteLog_ << "]: " << nan << " NaN, " << posInf << " +inf, " << negInf
                << " -inf of " << numel << ", first at element " << first
                << "\n";
  }
  return Status::success();
}

StatusOr<double> Device::timeLaunches(const PreparedStep &step,
                                      int64_t tokens) {
  auto start = std::chrono::steady_clock::now();
  Status status = runLaunches(step, tokens);
  if (!status.ok())
    return status;
  return std::chrono::duration<double, std::milli>(
             std::chrono::steady_clock::now() - start)
      .count();
}

StatusOr<std::vector<double>>
Device::profileLaunches(const PreparedStep &step, int64_t tokens) {
  std::vector<double> ms;
  for (const PreparedLaunch &l : step.launches) {
    auto start = std::chrono::steady_clock::now();
    Status status = launch(l, tokens);
    if (!status.ok())
      return status.withContext(l.label);
    ms.push_back(std::chrono::duration<double, std::milli>(
                     std::chrono::steady_clock::now() - start)
                     .count());
  }
  return ms;
}

StatusOr<double> Device::matmulRate(std::string &how) {
  how.clear();
  return Status::error("the " + name() +
                       " device has no vendor matrix-multiply probe");
}

Status Device::planCaches(const artifact::Manifest &m) {
  StatusOr<CachePlan> plan = CachePlan::build(m);
  if (!plan.ok())
    return plan.error();
  caches_ = std::move(*plan);
  pageTable_.assign(caches_.pageTableEntries(), caches_.zeroPage());
  return Status::success();
}

Status Device::writePageTable(int64_t first, const int32_t *entries,
                              int64_t count) {
  if (first < 0 || count < 0 ||
      first + count > static_cast<int64_t>(pageTable_.size()))
    return Status::error("page-table entries [" + std::to_string(first) +
                         ", " + std::to_string(first + count) +
                         ") are outside the table of " +
                         std::to_string(pageTable_.size()));
  for (int64_t i = 0; i < count; ++i)
    if (entries[i] < 0 || entries[i] > caches_.zeroPage())
      return Status::error("page-table entry " + std::to_string(first + i) +
                           " names page " + std::to_string(entries[i]) +
                           " of a pool of " + std::to_string(caches_.pages));
  if (count == 0)
    return Status::success();
  std::memcpy(pageTable_.data() + first, entries, count * sizeof(int32_t));
  return uploadPageTable(first, count);
}

Status Device::zeroSlotState(int64_t seq) {
  if (seq < 0 || seq >= caches_.batch)
    return Status::error("slot " + std::to_string(seq) +
                         " is outside the compiled batch of " +
                         std::to_string(caches_.batch));
  for (size_t c = 0; c < caches_.caches.size(); ++c) {
    const CacheLayout &layout = caches_.caches[c];
    if (layout.kind == CacheKind::SlotState)
      DAYBREAK_RETURN_IF_ERROR(zeroCacheBytes(
          int(c), uint64_t(seq) * layout.slotBytes, layout.slotBytes));
  }
  return Status::success();
}

StatusOr<uint64_t> Device::slotOffset(int cache, int64_t seq) const {
  if (cache < 0 || cache >= static_cast<int>(caches_.caches.size()))
    return Status::error("no cache " + std::to_string(cache));
  const CacheLayout &layout = caches_.caches[cache];
  if (layout.kind != CacheKind::SlotState)
    return Status::error("cache '" + layout.cache->name() +
                         "' holds rows, not per-slot state");
  if (seq < 0 || seq >= caches_.batch)
    return Status::error("slot " + std::to_string(seq) +
                         " is outside the compiled batch of " +
                         std::to_string(caches_.batch));
  return uint64_t(seq) * layout.slotBytes;
}

Status Device::readSlotState(int cache, int64_t seq, void *out) {
  StatusOr<uint64_t> offset = slotOffset(cache, seq);
  if (!offset.ok())
    return offset.error();
  return readCacheBytes(cache, *offset, out, caches_.caches[cache].slotBytes);
}

Status Device::writeSlotState(int cache, int64_t seq, const void *in) {
  StatusOr<uint64_t> offset = slotOffset(cache, seq);
  if (!offset.ok())
    return offset.error();
  return writeCacheBytes(cache, *offset, in, caches_.caches[cache].slotBytes);
}

template <typename Fn>
Status Device::forEachRun(int cache, int64_t seq, int64_t pos, int64_t rows,
                          Fn &&fn) const {
  if (cache < 0 || cache >= static_cast<int>(caches_.caches.size()))
    return Status::error("no cache " + std::to_string(cache));
  const CacheLayout &layout = caches_.caches[cache];
  const std::string &name = layout.cache->name();
  if (layout.kind == CacheKind::SlotState)
    return Status::error("cache '" + name + "' is per-slot state, not rows");
  int64_t maxRows =
      (caches_.maxSeqLen + layout.rowTokens - 1) / layout.rowTokens;
  if (seq < 0 || seq >= caches_.batch || pos < 0 || rows < 0 ||
      pos + rows > maxRows)
    return Status::error("rows [" + std::to_string(pos) + ", " +
                         std::to_string(pos + rows) + ") of slot " +
                         std::to_string(seq) + " are outside cache '" + name +
                         "'");
  // A run ends at a page boundary (paged) or where the ring wraps.
  int64_t span = layout.kind == CacheKind::Paged ? layout.pageSize
                                                 : layout.ringRows;
  if (layout.kind == CacheKind::Window && rows > layout.ringRows)
    return Status::error(std::to_string(rows) + " rows do not fit the " +
                         std::to_string(layout.ringRows) +
                         "-row ring of cache '" + name + "'");
  for (int64_t p = pos; p < pos + rows;) {
    int64_t n = std::min(pos + rows, (p / span + 1) * span) - p;
    if (layout.kind == CacheKind::Paged &&
        pageTable_[seq * caches_.pagesPerSeq + p / span] ==
            caches_.zeroPage())
      return Status::error("row " + std::to_string(p) + " of slot " +
                           std::to_string(seq) + " of cache '" + name +
                           "' has no page (reserve the rows first)");
    DAYBREAK_RETURN_IF_ERROR(
        fn(caches_.rowOffset(cache, seq, p, pageTable_.data()), n));
    p += n;
  }
  return Status::success();
}

Status Device::copyCacheRows(int cache, int64_t srcSeq, int64_t srcPos,
                             int64_t dstSeq, int64_t dstPos, int64_t rows) {
  // Row by row where the two ranges' runs differ: split at both.
  std::vector<std::pair<uint64_t, int64_t>> src, dst;
  auto collect = [](std::vector<std::pair<uint64_t, int64_t>> &runs) {
    return [&runs](uint64_t offset, int64_t n) {
      runs.emplace_back(offset, n);
      return Status::success();
    };
  };
  DAYBREAK_RETURN_IF_ERROR(forEachRun(cache, srcSeq, srcPos, rows,
                                      collect(src)));
  DAYBREAK_RETURN_IF_ERROR(forEachRun(cache, dstSeq, dstPos, rows,
                                      collect(dst)));
  uint64_t bytesPerRow = caches_.caches[cache].bytesPerRow;
  size_t i = 0, j = 0;
  int64_t usedSrc = 0, usedDst = 0;
  while (i < src.size() && j < dst.size()) {
    int64_t n = std::min(src[i].second - usedSrc, dst[j].second - usedDst);
    DAYBREAK_RETURN_IF_ERROR(
        copyCacheBytes(cache, dst[j].first + usedDst * bytesPerRow,
                       src[i].first + usedSrc * bytesPerRow,
                       n * bytesPerRow));
    usedSrc += n;
    usedDst += n;
    if (usedSrc == src[i].second)
      ++i, usedSrc = 0;
    if (usedDst == dst[j].second)
      ++j, usedDst = 0;
  }
  return Status::success();
}

Status Device::readCacheRows(int cache, int64_t seq, int64_t pos,
                             int64_t rows, void *out) {
  auto *bytes = static_cast<uint8_t *>(out);
  return forEachRun(cache, seq, pos, rows, [&](uint64_t offset, int64_t n) {
    uint64_t size = n * caches_.caches[cache].bytesPerRow;
    Status status = readCacheBytes(cache, offset, bytes, size);
    bytes += size;
    return status;
  });
}
