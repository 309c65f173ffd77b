//===- Bench.h - Decode and prefill measured against their floors -*- C++ -*-===//
//
// `daybreak-run bench`: decode step latency for batch sizes x context
// lengths over caches holding that context, and prefill throughput for
// prompt lengths, timed on the device (CUDA events on a GPU) after warm-up.
// Each case carries the plan's floor: the bytes a decode step must move
// (weights as the device holds them, cache rows it reads and writes) at the
// copy bandwidth measured on the same device in the same run, and the
// FLOPs of a prefill at the vendor GEMM rate measured likewise.
//
// Contexts are filled without prefilling every token of every sequence
// (which at 64 x 32K tokens would take longer than the measurement): one
// real prefill of `fillTokens` tokens into slot 0, whose cache rows are
// then repeated along the context and copied to every slot. The rows are
// real keys of the model, so every kernel reads what it would in service;
// only their positions' RoPE phases repeat. The copy is checked by
// reading rows back.
//
//===----------------------------------------------------------------------===//

#ifndef DAYBREAK_RUNTIME_EXECUTOR_BENCH_H
#define DAYBREAK_RUNTIME_EXECUTOR_BENCH_H

#include "runtime/executor/Model.h"

#include <nlohmann/json.hpp>

#include <iosfwd>

namespace daybreak::runtime {

struct BenchOptions {
  std::vector<int64_t> batches{1, 8, 64};
  std::vector<int64_t> contexts{1024, 8192, 32768};
  std::vector<int64_t> prompts{1024, 8192};
  int warmup = 3;
  int iterations = 20;
  int prefillIterations = 3;
  /// Tokens of the real prefill each context is tiled from.
  int64_t fillTokens = 512;
  /// Fewer iterations when one would exceed this share of a case.
  double maxCaseSeconds = 60;
  /// Per-kernel times of every case (launches issued one by one).
  bool kernels = true;
  uint64_t seed = 1;
};

/// The bytes one decode step of `batch` sequences at context `context`
/// moves at least: every weight the step reads once, as the device holds
/// it (as stored: e4m3 codes and their block scales, bf16, fp32 folds),
/// except the embedding table (`batch` rows) and routed experts (the
/// expected share of experts `batch` tokens pick when routing is
/// uniform: 1 - (1 - k/E)^batch); and the cache rows: all context rows
/// for the indexer and dense attention, min(context, top-k) rows for
/// sparse attention, one row written per sequence and cache (a cache a
/// launch reads as both keys and values, absorbed MLA's latent rows, once);
/// and every slot state (KDA's recurrent state, short convolution windows)
/// read and written once per sequence.
struct DecodeFloor {
  double weightBytes = 0;
  double cacheBytes = 0;
  double stateBytes = 0;
};
DecodeFloor decodeFloor(const artifact::Manifest &manifest, int64_t batch,
                        int64_t context);

/// The FLOPs of prefilling one sequence of `prompt` tokens in steps of
/// max_tokens: 2 x M x N x K of every matmul (routed experts: top-k per
/// token), the indexer's scores against every earlier key, sparse
/// attention over min(position + 1, top-k) keys, dense attention over its
/// window (values: the V rows, or the key-row prefix a launch reads as
/// values), and KDA's recurrence (6 Dk Dv a token and head). Elementwise
/// work, norms, short convolutions and routing are left out (they are a
/// rounding error of these).
double prefillFlops(const artifact::Manifest &manifest, int64_t prompt);

/// Repeats rows [0, rows) of slot 0 of every paged cache along positions
/// [0, context) of slots [0, slots), and copies slot 0 of every slot-state
/// cache to slots [1, slots); each checked by reading back. A cache with a
/// row per r tokens (DSA k-pool) repeats its rows / r complete rows over
/// ceil(context / r) rows.
Status tileCaches(Model &model, int64_t rows, int64_t slots, int64_t context);

/// Runs the cases of `options`; a case the artifact's limits or the
/// device cannot serve is recorded with the reason instead. The result
/// follows the schema "daybreak-bench/1" (bench/README.md).
StatusOr<nlohmann::json> runBench(Model &model, const std::string &artifact,
                                  const BenchOptions &options,
                                  std::ostream &log);

} // namespace daybreak::runtime

#endif // DAYBREAK_RUNTIME_EXECUTOR_BENCH_H
