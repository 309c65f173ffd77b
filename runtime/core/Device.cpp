//===- Device.cpp - Helpers devices share to read launches ----------------===//

#include "runtime/core/Device.h"

#include "runtime/numerics/Numerics.h"

#include <chrono>
#include <cstring>

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
      if (l.args[weight].kind != PreparedArg::Kind::Weight ||
          l.args[scale].kind != PreparedArg::Kind::Weight)
        return Status::error(l.label + ": expects weight and scale weights");
      if (!l.has(blocks) || l.ints(blocks).size() != 2)
        return Status::error(l.label + ": expects two block sizes");
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
    if (!status.ok())
      return status.withContext(l.label);
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

StatusOr<uint64_t> runtime::identityCacheRowOffset(const artifact::Manifest &m,
                                                   int cache, int64_t seq,
                                                   int64_t pos, int64_t rows) {
  if (cache < 0 || cache >= m.caches_size())
    return Status::error("no cache " + std::to_string(cache));
  const artifact::Cache &c = m.caches(cache);
  if (seq < 0 || seq >= m.max_batch() || pos < 0 || rows < 0 ||
      pos + rows > m.max_seq_len())
    return Status::error("rows [" + std::to_string(pos) + ", " +
                         std::to_string(pos + rows) + ") of slot " +
                         std::to_string(seq) + " are outside cache '" +
                         c.name() + "'");
  int64_t pagesPerSeq = (m.max_seq_len() + c.page_size() - 1) / c.page_size();
  return (uint64_t(seq) * pagesPerSeq * c.page_size() + pos) *
         c.bytes_per_row();
}
