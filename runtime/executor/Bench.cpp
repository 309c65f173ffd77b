//===- Bench.cpp - Decode and prefill measured against their floors -------===//

#include "runtime/executor/Bench.h"
#include "runtime/abi/KernelAbi.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <functional>
#include <iomanip>
#include <limits>
#include <map>
#include <ostream>
#include <random>
#include <set>

using namespace daybreak;
using namespace daybreak::runtime;
using nlohmann::json;

/// A launch's int or bool parameter `name`, or `fallback` when absent (the
/// floors read the artifact itself, not prepared launches).
static int64_t attrInt(const artifact::Launch &l, const std::string &name,
                       int64_t fallback) {
  for (const artifact::Attr &a : l.attrs())
    if (a.name() == name)
      return a.i();
  return fallback;
}

static const artifact::Step *findStep(const artifact::Manifest &m,
                                      const std::string &name) {
  for (const artifact::Step &s : m.steps())
    if (s.name() == name)
      return &s;
  return nullptr;
}

/// The shape of a buffer or weight operand at `tokens` tokens (caches have
/// none).
static std::vector<int64_t> operandShape(const artifact::Manifest &m,
                                         const artifact::Step &step,
                                         const artifact::Operand &op,
                                         int64_t tokens) {
  if (op.kind_case() == artifact::Operand::kBuffer)
    return bufferShape(step.buffers(op.buffer()), tokens);
  if (op.kind_case() == artifact::Operand::kWeight)
    return {m.weights(op.weight()).shape().begin(),
            m.weights(op.weight()).shape().end()};
  return {};
}

static double product(const std::vector<int64_t> &shape) {
  double n = 1;
  for (int64_t d : shape)
    n *= double(d);
  return n;
}

/// The width of a launch's top-k operand (its second dimension), or 0.
static int64_t topK(const artifact::Manifest &m, const artifact::Step &step,
                    const artifact::Launch &l, int index, int64_t tokens) {
  if (l.operands_size() <= index)
    return 0;
  std::vector<int64_t> shape = operandShape(m, step, l.operands(index), tokens);
  return shape.size() >= 2 ? shape[1] : 0;
}

/// The shared-expert slots at the end of launch `l`'s routing (operand
/// `index`): the shared_experts of the moe_route launch that writes it.
static int64_t sharedSlots(const artifact::Step &step,
                           const artifact::Launch &l, int index) {
  if (l.operands_size() <= index)
    return 0;
  const std::string routing = l.operands(index).SerializeAsString();
  for (const artifact::Launch &r : step.launches())
    if (r.kernel() == "moe_route" && r.results_size() >= 1 &&
        r.results(0).SerializeAsString() == routing)
      return attrInt(r, "shared_experts", 0);
  return 0;
}

DecodeFloor runtime::decodeFloor(const artifact::Manifest &m, int64_t batch,
                                 int64_t context) {
  DecodeFloor floor;
  const artifact::Step *step = findStep(m, "decode");
  if (!step)
    return floor;
  // Weight bytes by weight: each is read once per step however many
  // launches use it.
  std::map<uint32_t, double> weightBytes;
  auto readWeight = [&](uint32_t index, double bytes) {
    weightBytes[index] = std::max(weightBytes[index], bytes);
  };
  // Slot states by cache: read and written once a step.
  std::map<uint32_t, double> stateBytes;
  for (const artifact::Launch &l : step->launches()) {
    const std::string &k = l.kernel();
    std::set<uint32_t> cachesRead; // K and V of one cache: read once
    for (int i = 0; i < l.operands_size(); ++i) {
      const artifact::Operand &op = l.operands(i);
      if (op.kind_case() == artifact::Operand::kWeight) {
        // Weights are held as stored: e4m3 codes and their block scales
        // are both read per step.
        std::vector<int64_t> shape = operandShape(m, *step, op, batch);
        const artifact::Weight &w = m.weights(op.weight());
        double bytes = double(w.size());
        if (k == "embedding" && i == 0 && shape.size() == 2 && shape[0] > 0)
          bytes = bytes / double(shape[0]) * std::min<int64_t>(batch, shape[0]);
        // Expert weights: only the experts the batch picks are read (packed
        // MXFP4 values, their scales and biases included).
        // The online MXFP4 route's conversion reads the packed experts the
        // step picks; the workspace it writes and the matmul reads is not
        // counted (the floor is on the bytes as stored).
        int indices = -1;
        if (k == "expert_matmul" && (i == abi::ExpertMatmul::In::weight ||
                                     i == abi::ExpertMatmul::In::weight_scale ||
                                     i == abi::ExpertMatmul::In::bias))
          indices = abi::ExpertMatmul::In::indices;
        else if (k == "mxfp4_expert_matmul" &&
                 (i == abi::Mxfp4ExpertMatmul::In::weight ||
                  i == abi::Mxfp4ExpertMatmul::In::scales ||
                  i == abi::Mxfp4ExpertMatmul::In::bias))
          indices = abi::Mxfp4ExpertMatmul::In::indices;
        else if (k == "mxfp4_to_fp8_experts" &&
                 (i == abi::Mxfp4ToFp8Experts::In::weight ||
                  i == abi::Mxfp4ToFp8Experts::In::scales ||
                  i == abi::Mxfp4ToFp8Experts::In::bias))
          indices = abi::Mxfp4ToFp8Experts::In::indices;
        if (indices >= 0 && !shape.empty()) {
          // Shared experts stacked after the routed ones are read always.
          double shared = double(sharedSlots(*step, l, indices));
          double experts = double(shape[0]) - shared;
          double picks = double(topK(m, *step, l, indices, batch)) - shared;
          double share = 1 - std::pow(1 - std::min(1.0, picks / experts),
                                      double(batch));
          bytes *= (experts * share + shared) / (experts + shared);
        }
        readWeight(op.weight(), bytes);
      } else if (op.kind_case() == artifact::Operand::kCache) {
        const artifact::Cache &cache = m.caches(op.cache());
        if (cache.kind() == artifact::CACHE_SLOT_STATE) {
          stateBytes[op.cache()] = 2.0 * batch * double(cache.slot_bytes());
          continue;
        }
        if (!cachesRead.insert(op.cache()).second)
          continue;
        double rowBytes = double(cache.bytes_per_row());
        double rows = double(context + 1);
        if (k == "cache_write")
          rows = 1;
        else if (k == "sparse_attention")
          rows = std::min<double>(rows, double(topK(m, *step, l, 2, batch)));
        else if (k == "attention" && attrInt(l, "window", 0) > 0)
          rows = std::min<double>(rows, double(attrInt(l, "window", 0)));
        floor.cacheBytes += batch * rows * rowBytes;
      }
    }
  }
  for (const auto &[index, bytes] : weightBytes)
    floor.weightBytes += bytes;
  for (const auto &[index, bytes] : stateBytes)
    floor.stateBytes += bytes;
  return floor;
}

double runtime::prefillFlops(const artifact::Manifest &m, int64_t prompt) {
  const artifact::Step *step = findStep(m, "prefill");
  if (!step || m.max_tokens() <= 0)
    return 0;
  double flops = 0;
  for (int64_t start = 0; start < prompt; start += m.max_tokens()) {
    int64_t tokens = std::min(prompt - start, m.max_tokens());
    // Sums over the chunk's positions p of (p + 1) and min(p + 1, k).
    auto keys = [&](int64_t cap) {
      double sum = 0;
      for (int64_t p = start; p < start + tokens; ++p)
        sum += double(std::min(p + 1, cap));
      return sum;
    };
    for (const artifact::Launch &l : step->launches()) {
      const std::string &k = l.kernel();
      auto shape = [&](int i) {
        return i < l.operands_size()
                   ? operandShape(m, *step, l.operands(i), tokens)
                   : std::vector<int64_t>{};
      };
      if (k == "matmul" || k == "fp8_matmul") {
        std::vector<int64_t> x = shape(0), w = shape(1);
        if (w.size() == 2)
          flops += 2 * product(x) / double(w[1]) * double(w[0]) * double(w[1]);
      } else if (k == "head_matmul") {
        std::vector<int64_t> x = shape(0), w = shape(1);
        if (x.size() == 3 && w.size() == 3) {
          int64_t n = attrInt(l, "transpose_weight", 0) ? w[1] : w[2];
          flops += 2 * product(x) * double(n);
        }
      } else if (k == "expert_matmul" || k == "mxfp4_expert_matmul") {
        std::vector<int64_t> w = shape(1);
        int indices = k == "expert_matmul"
                          ? int(abi::ExpertMatmul::In::indices)
                          : int(abi::Mxfp4ExpertMatmul::In::indices);
        if (w.size() == 3)
          flops += 2.0 * tokens * double(topK(m, *step, l, indices, tokens)) *
                   double(w[1]) * double(w[2]);
      } else if (k == "dsa_indexer_scores") {
        std::vector<int64_t> q = shape(0);
        if (q.size() == 3)
          flops += 2.0 * double(q[1]) * double(q[2]) *
                   keys(std::numeric_limits<int64_t>::max());
      } else if (k == "attention") {
        // Scores and values over each query's window of keys (D from q,
        // Dv from the V cache's rows of kv_heads x Dv, or the column prefix
        // the launch reads as values: absorbed MLA's c_kv).
        std::vector<int64_t> q = shape(abi::Attention::In::q);
        int64_t kvHeads = attrInt(l, "kv_heads", 0);
        int64_t window = attrInt(l, "window", 0);
        const artifact::Operand &v = l.operands(abi::Attention::In::v);
        if (q.size() == 3 && kvHeads > 0 &&
            v.kind_case() == artifact::Operand::kCache) {
          int64_t valueDim = attrInt(l, "value_columns",
                                     m.caches(v.cache()).width() / kvHeads);
          flops +=
              2.0 * double(q[1]) * double(q[2] + valueDim) *
              keys(window > 0 ? window : std::numeric_limits<int64_t>::max());
        }
      } else if (k == "kda_chunk") {
        // The recurrence's three products a token and head (S^T k, k u^T,
        // S^T q), 2 Dk Dv FLOPs each; the chunked form does more.
        std::vector<int64_t> q = shape(abi::KdaChunk::In::q),
                             v = shape(abi::KdaChunk::In::v);
        if (q.size() == 3 && v.size() == 3)
          flops += 6.0 * tokens * double(q[1]) * double(q[2]) * double(v[2]);
      } else if (k == "sparse_attention") {
        std::vector<int64_t> q = shape(0);
        if (q.size() == 3)
          flops += 2.0 * double(q[1]) *
                   double(q[2] + attrInt(l, "value_dim", q[2])) *
                   keys(topK(m, *step, l, 2, tokens));
      }
    }
  }
  return flops;
}

Status runtime::tileCaches(Model &model, int64_t rows, int64_t slots,
                           int64_t context) {
  Device &device = model.onDevice();
  int caches = model.manifest().caches_size();
  // Pages for the context and the token each decode step writes after it.
  for (int64_t s = 0; s < slots; ++s)
    DAYBREAK_RETURN_IF_ERROR(model.reserve(s, std::min(context + 1,
                                                       model.maxSeqLen())));
  auto tiled = [&](int c) {
    return model.cachePlan().caches[c].kind == CacheKind::Paged;
  };
  // A cache with a row per several tokens (DSA k-pool) repeats the complete
  // rows the fill wrote, up to the row of the context's last token.
  auto rowsOf = [&](int c, int64_t tokens, bool complete) {
    int64_t per = std::max<int64_t>(model.cachePlan().caches[c].rowTokens, 1);
    return complete ? tokens / per : (tokens + per - 1) / per;
  };
  for (int c = 0; c < caches; ++c) {
    if (!tiled(c)) // windows and slot state (below) have no rows to repeat
      continue;
    int64_t unit = rowsOf(c, rows, true), total = rowsOf(c, context, false);
    if (unit < 1)
      return Status::error(
          "cache '" + model.manifest().caches(c).name() + "' holds a row per " +
          std::to_string(model.cachePlan().caches[c].rowTokens) +
          " tokens: a fill of " + std::to_string(rows) +
          " tokens completes none to repeat (--fill-tokens)");
    // Doubling copies along slot 0, then slot 0 into the others.
    for (int64_t filled = unit; filled < total;) {
      int64_t n = std::min(filled, total - filled);
      Status status = device.copyCacheRows(c, 0, 0, 0, filled, n);
      if (!status.ok())
        return status;
      filled += n;
    }
    for (int64_t s = 1; s < slots; ++s) {
      Status status = device.copyCacheRows(c, 0, 0, s, 0, total);
      if (!status.ok())
        return status;
    }
  }
  // Slot state (KDA's recurrent state, convolution windows) has no context
  // to repeat: the state the fill left in slot 0 goes to every slot, and
  // the last slot reads back as slot 0.
  for (int c = 0; c < caches; ++c) {
    const CacheLayout &layout = model.cachePlan().caches[c];
    if (layout.kind != CacheKind::SlotState || slots < 2)
      continue;
    std::vector<uint8_t> state(layout.slotBytes), back(layout.slotBytes);
    DAYBREAK_RETURN_IF_ERROR(device.readSlotState(c, 0, state.data()));
    for (int64_t s = 1; s < slots; ++s)
      DAYBREAK_RETURN_IF_ERROR(device.writeSlotState(c, s, state.data()));
    DAYBREAK_RETURN_IF_ERROR(device.readSlotState(c, slots - 1, back.data()));
    if (back != state)
      return Status::error("state '" + model.manifest().caches(c).name() +
                           "': slot " + std::to_string(slots - 1) +
                           " differs from slot 0, which it copies");
  }
  // Check a few rows of each cache against the rows they repeat.
  for (int c = 0; c < caches; ++c) {
    if (!tiled(c))
      continue;
    const artifact::Cache &cache = model.manifest().caches(c);
    std::vector<uint8_t> got(cache.bytes_per_row()),
        want(cache.bytes_per_row());
    int64_t unit = rowsOf(c, rows, true), total = rowsOf(c, context, false);
    for (int64_t s : {int64_t(0), slots - 1})
      for (int64_t p : {unit - 1, unit, total - 1}) {
        if (p < 0 || p >= total)
          continue;
        Status status = device.readCacheRows(c, s, p, 1, got.data());
        if (status.ok())
          status = device.readCacheRows(c, 0, p % unit, 1, want.data());
        if (!status.ok())
          return status;
        if (got != want)
          return Status::error("cache '" + cache.name() + "': row " +
                               std::to_string(p) + " of slot " +
                               std::to_string(s) +
                               " differs from the row it repeats");
      }
  }
  return Status::success();
}

namespace {
struct Stats {
  double median = 0, p90 = 0, mean = 0;
};
} // namespace

static Stats statistics(std::vector<double> v) {
  Stats s;
  if (v.empty())
    return s;
  std::sort(v.begin(), v.end());
  auto at = [&](double q) {
    // Nearest rank.
    size_t i = size_t(std::ceil(q * double(v.size()))) - 1;
    return v[std::min(i, v.size() - 1)];
  };
  s.median = at(0.5);
  s.p90 = at(0.9);
  for (double x : v)
    s.mean += x / double(v.size());
  return s;
}

/// Milliseconds per kernel name over `ms` (one per launch of `step`).
static json kernelTable(const artifact::Step &step,
                        const std::vector<double> &ms) {
  std::map<std::string, std::pair<int64_t, double>> byKernel;
  for (int i = 0; i < step.launches_size() && i < int(ms.size()); ++i) {
    auto &entry = byKernel[step.launches(i).kernel()];
    entry.first += 1;
    entry.second += ms[i];
  }
  std::vector<std::pair<std::string, std::pair<int64_t, double>>> rows(
      byKernel.begin(), byKernel.end());
  std::sort(rows.begin(), rows.end(), [](const auto &a, const auto &b) {
    return a.second.second > b.second.second;
  });
  json table = json::array();
  for (const auto &[kernel, entry] : rows)
    table.push_back(
        {{"kernel", kernel}, {"count", entry.first}, {"total_ms", entry.second}});
  return table;
}

/// floor_ms = `work` (bytes or FLOPs) at `rate` per second, and the
/// fraction of it `measuredMs` achieves; nulls where the rate is unknown.
static void setFloor(json &row, double work, double rate, double measuredMs) {
  if (rate <= 0) {
    row["floor_ms"] = nullptr;
    row["fraction_of_floor"] = nullptr;
    return;
  }
  double floorMs = work / rate * 1e3;
  row["floor_ms"] = floorMs;
  row["fraction_of_floor"] = floorMs / measuredMs;
}

/// A prompt of random token ids for slot `seq` at positions [start, end).
static StepInputs randomTokens(std::mt19937_64 &rng, int64_t vocab,
                               int64_t seq, int64_t start, int64_t end) {
  StepInputs in;
  std::uniform_int_distribution<int32_t> id(0, int32_t(vocab - 1));
  for (int64_t p = start; p < end; ++p) {
    in.ids.push_back(id(rng));
    in.positions.push_back(int32_t(p));
    in.sequences.push_back(int32_t(seq));
  }
  return in;
}

/// Runs `once` `warmup` times (at least once), then up to `wanted` times
/// more, as many as fit the case's time share given the last warm-up's
/// time: the measured milliseconds.
static StatusOr<std::vector<double>>
repeat(const BenchOptions &o, int warmup, int wanted,
       const std::function<StatusOr<double>()> &once) {
  double first = 0;
  for (int i = 0; i < std::max(1, warmup); ++i) {
    StatusOr<double> ms = once();
    if (!ms.ok())
      return ms.error();
    first = *ms;
  }
  int n = wanted;
  if (first > 0) {
    // A double until clamped: the runs that fit can exceed any int.
    double fit = o.maxCaseSeconds * 1e3 / first;
    if (fit < wanted)
      n = int(std::max(fit, 1.0));
  }
  std::vector<double> times;
  for (int i = 0; i < n; ++i) {
    StatusOr<double> ms = once();
    if (!ms.ok())
      return ms.error();
    times.push_back(*ms);
  }
  return times;
}

static json decodeCase(Model &model, const BenchOptions &o,
                       std::mt19937_64 &rng, int64_t batch, int64_t context,
                       double bandwidth, json &kernels, std::ostream &log) {
  json row = {{"batch", batch}, {"context", context}};
  StepInputs in;
  std::uniform_int_distribution<int32_t> id(0, int32_t(model.vocabSize() - 1));
  for (int64_t s = 0; s < batch; ++s) {
    in.ids.push_back(id(rng));
    in.positions.push_back(int32_t(context));
    in.sequences.push_back(int32_t(s));
  }
  // The first warm-up step records the step's graph on a GPU.
  StatusOr<std::vector<double>> measured = repeat(
      o, o.warmup, o.iterations, [&] { return model.time("decode", in); });
  if (!measured.ok()) {
    row["skipped"] = measured.error().message();
    return row;
  }
  const std::vector<double> &times = *measured;
  int n = int(times.size());
  // Host wall time of whole steps: input upload, launches, logits read back.
  std::vector<double> wall;
  std::vector<float> logits;
  for (int i = 0; i < std::min(n, 5); ++i) {
    auto start = std::chrono::steady_clock::now();
    Status status = model.run("decode", in, logits);
    if (!status.ok()) {
      row["skipped"] = status.message();
      return row;
    }
    wall.push_back(std::chrono::duration<double, std::milli>(
                       std::chrono::steady_clock::now() - start)
                       .count());
  }
  Stats t = statistics(times);
  DecodeFloor floor = decodeFloor(model.manifest(), batch, context);
  double floorBytes = floor.weightBytes + floor.cacheBytes + floor.stateBytes;
  row["iterations"] = n;
  row["median_ms"] = t.median;
  row["p90_ms"] = t.p90;
  row["mean_ms"] = t.mean;
  row["wall_median_ms"] = statistics(wall).median;
  row["tokens_per_s"] = batch / (t.median * 1e-3);
  row["floor_weight_bytes"] = floor.weightBytes;
  row["floor_cache_bytes"] = floor.cacheBytes;
  row["floor_state_bytes"] = floor.stateBytes;
  row["floor_bytes"] = floorBytes;
  setFloor(row, floorBytes, bandwidth, t.median);
  log << "decode batch " << batch << " context " << context << ": median "
      << std::fixed << std::setprecision(3) << t.median << " ms, p90 "
      << t.p90 << " ms, " << std::setprecision(1) << batch / (t.median * 1e-3)
      << " tokens/s; floor " << std::setprecision(3) << floorBytes / 1e9
      << " GB" << std::defaultfloat << "\n";
  if (o.kernels) {
    StatusOr<std::vector<double>> ms = model.profile("decode", in);
    if (!ms.ok())
      log << "decode batch " << batch << " context " << context
          << ": no per-launch profile: " << ms.error().message() << "\n";
    else
      kernels.push_back({{"step", "decode"},
                         {"batch", batch},
                         {"context", context},
                         {"tokens", batch},
                         {"launches", kernelTable(*findStep(model.manifest(),
                                                            "decode"),
                                                   *ms)}});
  }
  return row;
}

static json prefillCase(Model &model, const BenchOptions &o,
                        std::mt19937_64 &rng, int64_t prompt, double rate,
                        json &kernels, std::ostream &log) {
  json row = {{"tokens", prompt}};
  StepInputs all = randomTokens(rng, model.vocabSize(), 0, 0, prompt);
  int64_t chunk = model.maxTokens();
  auto slice = [&](int64_t start) {
    int64_t end = std::min(prompt, start + chunk);
    StepInputs in;
    in.ids.assign(all.ids.begin() + start, all.ids.begin() + end);
    in.positions.assign(all.positions.begin() + start,
                        all.positions.begin() + end);
    in.sequences.assign(all.sequences.begin() + start,
                        all.sequences.begin() + end);
    // As a session serves a prompt: the logits of its last token only.
    in.everyLogitRow = false;
    if (end == prompt)
      in.logitRows.push_back(static_cast<int32_t>(end - start - 1));
    return in;
  };
  // One pass: the chunks in order (each reads the cache the earlier ones
  // wrote), timed on the device.
  auto pass = [&]() -> StatusOr<double> {
    double total = 0;
    for (int64_t start = 0; start < prompt; start += chunk) {
      StatusOr<double> ms = model.time("prefill", slice(start));
      if (!ms.ok())
        return ms.error();
      total += *ms;
    }
    return total;
  };
  StatusOr<std::vector<double>> measured =
      repeat(o, std::min(o.warmup, 1), o.prefillIterations, pass);
  if (!measured.ok()) {
    row["skipped"] = measured.error().message();
    return row;
  }
  const std::vector<double> &times = *measured;
  int n = int(times.size());
  Stats t = statistics(times);
  double flops = prefillFlops(model.manifest(), prompt);
  row["iterations"] = n;
  row["steps"] = (prompt + chunk - 1) / chunk;
  row["ms"] = t.median;
  row["tokens_per_s"] = prompt / (t.median * 1e-3);
  row["floor_flops"] = flops;
  row["achieved_flops_per_s"] = flops / (t.median * 1e-3);
  setFloor(row, flops, rate, t.median);
  log << "prefill " << prompt << " tokens: " << std::fixed
      << std::setprecision(3) << t.median << " ms, " << std::setprecision(1)
      << prompt / (t.median * 1e-3) << " tokens/s; " << std::setprecision(3)
      << flops / 1e12 << " TFLOP" << std::defaultfloat << "\n";
  if (o.kernels) {
    // Per-kernel times summed over the chunks.
    const artifact::Step &step = *findStep(model.manifest(), "prefill");
    std::vector<double> sum(step.launches_size(), 0.0);
    for (int64_t start = 0; start < prompt; start += chunk) {
      StatusOr<std::vector<double>> ms = model.profile("prefill", slice(start));
      if (!ms.ok()) {
        log << "prefill " << prompt
            << " tokens: no per-launch profile: " << ms.error().message()
            << "\n";
        return row;
      }
      for (size_t i = 0; i < ms->size() && i < sum.size(); ++i)
        sum[i] += (*ms)[i];
    }
    kernels.push_back({{"step", "prefill"},
                       {"tokens", prompt},
                       {"launches", kernelTable(step, sum)}});
  }
  return row;
}

StatusOr<json> runtime::runBench(Model &model, const std::string &artifact,
                                 const BenchOptions &o, std::ostream &log) {
  if (o.warmup < 0 || o.iterations < 1 || o.prefillIterations < 1 ||
      o.fillTokens < 1)
    return Status::error("bench: --warmup must be >= 0 and --iterations, "
                         "--prefill-iterations and --fill-tokens >= 1");
  const artifact::Manifest &m = model.manifest();
  Device &device = model.onDevice();
  json doc;
  doc["schema"] = "daybreak-bench/1";
  doc["artifact"] = artifact;
  doc["device"] = device.name();
  doc["gpu"] = device.hardware();
  const artifact::MemoryPlan &plan = m.memory();
  json config = json::parse(m.config_json(), nullptr, false);
  // A multimodal hub config (GLM-5.3) nests the language model's fields in
  // text_config.
  if (config.is_object() && config.contains("text_config") &&
      config["text_config"].is_object())
    config = config["text_config"];
  auto configInt = [&](const char *key) -> json {
    if (config.is_object() && config.contains(key))
      return config[key];
    return nullptr;
  };
  doc["model"] = {{"name", m.model_type()},
                  {"layers", configInt("num_hidden_layers")},
                  {"hidden", configInt("hidden_size")},
                  {"weight_bytes", plan.weight_bytes()},
                  {"cache_bytes_per_token", plan.cache_bytes_per_token()},
                  {"max_batch", m.max_batch()},
                  {"max_seq_len", m.max_seq_len()},
                  {"max_tokens", m.max_tokens()}};

  // The rooflines, measured on this device now.
  json probes;
  StatusOr<double> bandwidth = device.copyBandwidth(uint64_t(1) << 30);
  probes["copy_bandwidth_bytes_per_s"] =
      bandwidth.ok() ? json(*bandwidth) : json(nullptr);
  probes["copy_probe"] = bandwidth.ok() ? "device-to-device copy, bytes read "
                                          "+ written, best of 5"
                                        : bandwidth.error().message();
  std::string how;
  StatusOr<double> rate = device.matmulRate(how);
  probes["tensor_flops_per_s"] = rate.ok() ? json(*rate) : json(nullptr);
  probes["tensor_probe"] = rate.ok() ? how : rate.error().message();
  doc["probes"] = probes;
  double copyRate = bandwidth.ok() ? *bandwidth : 0;
  log << "probes: copy "
      << (bandwidth.ok() ? std::to_string(*bandwidth / 1e9) + " GB/s"
                         : bandwidth.error().message())
      << "; matmul "
      << (rate.ok() ? std::to_string(*rate / 1e12) + " TFLOP/s"
                    : rate.error().message())
      << "\n";
  doc["settings"] = {{"warmup", o.warmup},
                     {"iterations", o.iterations},
                     {"prefill_iterations", o.prefillIterations},
                     {"fill_tokens", o.fillTokens},
                     {"seed", o.seed}};

  std::mt19937_64 rng(o.seed);
  json decode = json::array(), prefill = json::array(),
       kernels = json::array();
  for (int64_t context : o.contexts) {
    auto skip = [&](int64_t batch, const std::string &why) {
      decode.push_back(
          {{"batch", batch}, {"context", context}, {"skipped", why}});
      log << "decode batch " << batch << " context " << context
          << ": skipped (" << why << ")\n";
    };
    if (context < 1 || context + 1 > m.max_seq_len()) {
      for (int64_t batch : o.batches)
        skip(batch, "context " + std::to_string(context) +
                        " needs --max-seq-len >= " +
                        std::to_string(context + 1) + " (compiled " +
                        std::to_string(m.max_seq_len()) + ")");
      continue;
    }
    int64_t slots = 0;
    for (int64_t batch : o.batches)
      if (batch >= 1 && batch <= m.max_batch() && batch <= m.max_tokens())
        slots = std::max(slots, batch);
    // The context of every slot: a real prefill of slot 0, tiled.
    int64_t rows = std::min({o.fillTokens, context, m.max_tokens()});
    std::vector<float> logits;
    StepInputs fill = randomTokens(rng, model.vocabSize(), 0, 0, rows);
    fill.everyLogitRow = false;
    Status filled = model.run("prefill", fill, logits);
    if (filled.ok() && slots > 0)
      filled = tileCaches(model, rows, slots, context);
    for (int64_t batch : o.batches) {
      if (batch < 1 || batch > m.max_batch())
        skip(batch, "batch " + std::to_string(batch) +
                        " exceeds --max-batch (compiled " +
                        std::to_string(m.max_batch()) + ")");
      else if (batch > m.max_tokens())
        skip(batch, "batch " + std::to_string(batch) +
                        " exceeds --max-tokens (compiled " +
                        std::to_string(m.max_tokens()) + ")");
      else if (!filled.ok())
        skip(batch, "filling the caches: " + filled.message());
      else
        decode.push_back(decodeCase(model, o, rng, batch, context, copyRate,
                                    kernels, log));
    }
  }
  for (int64_t prompt : o.prompts) {
    if (prompt < 1 || prompt > m.max_seq_len()) {
      std::string why = "prompt of " + std::to_string(prompt) +
                        " tokens needs --max-seq-len >= " +
                        std::to_string(prompt) + " (compiled " +
                        std::to_string(m.max_seq_len()) + ")";
      prefill.push_back({{"tokens", prompt}, {"skipped", why}});
      log << "prefill " << prompt << " tokens: skipped (" << why << ")\n";
      continue;
    }
    prefill.push_back(prefillCase(model, o, rng, prompt,
                                  rate.ok() ? *rate : 0, kernels, log));
  }
  doc["decode"] = decode;
  doc["prefill"] = prefill;
  doc["kernels"] = kernels;
  return doc;
}
