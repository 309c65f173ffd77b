//===- Commands.cpp - What daybreak-run does, as library calls ------------===//

#include "runtime/executor/Commands.h"
#ifdef DAYBREAK_HAVE_CUDA
#include "runtime/devices/cuda/CudaKernels.h"
#endif

#include "runtime/executor/RunInputs.h"
#include "runtime/executor/Session.h"

#include "runtime/safetensors/Safetensors.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <map>
#include <ostream>
#include <set>
#include <sstream>

using namespace daybreak;
using namespace daybreak::runtime;

Status runtime::runLogits(Model &model, const std::string &inputsPath,
                          const std::string &outputPath, std::ostream &log) {
  // An ifstream opens a folder without complaint.
  std::error_code error;
  if (std::filesystem::is_directory(inputsPath, error))
    return Status::error("cannot read " + inputsPath +
                         ": a folder, not a file");
  std::ifstream in(inputsPath);
  if (!in)
    return Status::error("cannot read " + inputsPath);
  std::stringstream text;
  text << in.rdbuf();
  StatusOr<LogitsInputs> parsed = parseLogitsInputs(text.str(), inputsPath);
  if (!parsed.ok())
    return parsed.error();
  std::vector<std::vector<int32_t>> &prompts = parsed->prompts,
                                    &decodes = parsed->decodes;
  int64_t batch = prompts.size();
  if (batch > model.maxBatch())
    return Status::error(inputsPath + " has " + std::to_string(batch) +
                         " sequences; the artifact serves at most " +
                         std::to_string(model.maxBatch()) + " (--max-batch)");
  int64_t vocab = model.vocabSize();

  // Every sequence at once: prompts prefilled together (in chunks of at
  // most max_tokens), then the given decode tokens, one step each.
  Session session(model);
  std::vector<SequenceId> ids;
  for (int64_t i = 0; i < batch; ++i) {
    SequenceRequest request;
    request.prompt = prompts[i];
    request.forced = decodes[i];
    StatusOr<SequenceId> id = session.admit(std::move(request));
    if (!id.ok())
      return id.error().withContext(inputsPath + ": sequence " +
                                    std::to_string(i));
    ids.push_back(*id);
  }
  std::vector<std::vector<float>> prefillLogits(batch), decodeLogits(batch);
  session.setObserver([&](const TokenLogits &row) {
    int64_t i = std::find(ids.begin(), ids.end(), row.sequence) - ids.begin();
    auto &out = row.prefill ? prefillLogits[i] : decodeLogits[i];
    out.insert(out.end(), row.logits, row.logits + vocab);
  });
  DAYBREAK_RETURN_IF_ERROR(session.runToCompletion());
  for (int64_t i = 0; i < batch; ++i)
    if (session.status(ids[i])->state == SequenceState::Failed)
      return Status::error("sequence " + std::to_string(i) + ": " +
                           session.status(ids[i])->error);

  std::vector<safetensors::F32Tensor> outputs;
  for (int64_t i = 0; i < batch; ++i)
    outputs.push_back({"seq" + std::to_string(i) + ".prefill_logits",
                       {int64_t(prompts[i].size()), vocab},
                       std::move(prefillLogits[i])});
  for (int64_t i = 0; i < batch; ++i)
    if (!decodes[i].empty())
      outputs.push_back({"seq" + std::to_string(i) + ".decode_logits",
                         {int64_t(decodes[i].size()), vocab},
                         std::move(decodeLogits[i])});
  // Ranks other than the first compute the same logits and write none.
  if (outputPath.empty())
    return Status::success();
  safetensors::Status written = safetensors::writeF32File(outputPath, outputs);
  if (!written.ok)
    return Status::error(written.message);
  const Session::Timing &time = session.timing();
  log << "logits: " << batch << " sequences, " << time.prefillTokens
      << " prefill tokens in " << time.prefillSteps << " steps and "
      << std::fixed << std::setprecision(3) << time.prefillSeconds << " s, "
      << time.decodeSteps << " decode steps in " << time.decodeSeconds
      << " s -> " << outputPath << "\n";
  return Status::success();
}

Status runtime::generate(Model &model, const GenerateOptions &options,
                         std::ostream &out) {
  if (options.promptIds.empty())
    return Status::error("--prompt-ids is empty");
  if (options.maxNewTokens < 0)
    return Status::error("--max-new-tokens must not be negative");
  int64_t promptTokens = options.promptIds.size();
  // The last generated token is not fed back, so needs no cache row.
  if (promptTokens + std::max<int64_t>(options.maxNewTokens - 1, 0) >
      model.maxSeqLen())
    return Status::error("the prompt (" + std::to_string(promptTokens) +
                         " tokens) plus --max-new-tokens (" +
                         std::to_string(options.maxNewTokens) +
                         ") exceeds the compiled maximum sequence length " +
                         std::to_string(model.maxSeqLen()) +
                         " (--max-seq-len)");
  Session session(model);
  SequenceRequest request;
  request.prompt = options.promptIds;
  request.maxNewTokens = options.maxNewTokens;
  request.sampling = options.sampling;
  StatusOr<SequenceId> id = session.admit(std::move(request));
  if (!id.ok())
    return id.error();
  DAYBREAK_RETURN_IF_ERROR(session.runToCompletion());
  const SequenceStatus &status = *session.status(*id);
  if (status.state == SequenceState::Failed)
    return Status::error(status.error);
  out << "tokens:";
  for (int32_t t : status.generated)
    out << " " << t;
  const Session::Timing &time = session.timing();
  int64_t prompt = options.promptIds.size();
  out << "\n" << std::fixed << std::setprecision(3)
      << "prefill: " << prompt << " tokens in " << time.prefillSeconds * 1e3
      << " ms (" << prompt / std::max(time.prefillSeconds, 1e-9)
      << " tokens/s)\n";
  out << "decode:  " << time.decodeSteps << " steps in "
      << time.decodeSeconds * 1e3 << " ms ("
      << time.decodeSteps / std::max(time.decodeSeconds, 1e-9)
      << " tokens/s)\n";
  return Status::success();
}

namespace {
/// The F32 values of tensor `name` of `file` (opened from `path`), of
/// `shape`; errors name the file and the tensor.
StatusOr<std::vector<float>> f32Values(const safetensors::File &file,
                                       const std::string &path,
                                       const std::string &name,
                                       const std::vector<int64_t> &shape) {
  const safetensors::TensorView *t = file.find(name);
  if (!t)
    return Status::error(path + " has no tensor '" + name + "'");
  if (t->dtype != safetensors::DType::F32 || t->shape != shape)
    return Status::error("'" + name + "' differs in dtype or shape in " + path);
  std::vector<float> values(t->byteSize / 4);
  std::memcpy(values.data(), t->data, t->byteSize);
  return values;
}
} // namespace

Status runtime::compareLogits(const std::string &actualPath,
                              const CompareOptions &options,
                              std::ostream &out) {
  const std::string &expectedPath = options.expected;
  safetensors::File actual, expected;
  safetensors::Status opened = safetensors::File::open(actualPath, actual);
  if (opened.ok)
    opened = safetensors::File::open(expectedPath, expected);
  if (!opened.ok)
    return Status::error(opened.message);
  std::vector<safetensors::File> spread(options.spread.size());
  for (size_t s = 0; s < spread.size(); ++s)
    if (safetensors::Status o =
            safetensors::File::open(options.spread[s], spread[s]);
        !o.ok)
      return Status::error(o.message);
  bool ok = true;
  for (const safetensors::TensorView &a : actual.tensors()) {
    if (a.dtype != safetensors::DType::F32 || a.shape.empty())
      return Status::error("'" + a.name + "' differs in dtype or shape (" +
                           actualPath + ": F32 logits of rank 1 or more)");
    int64_t cols = a.shape.back(), count = a.byteSize / 4;
    if (count == 0)
      return Status::error("'" + a.name + "' holds no values");
    StatusOr<std::vector<float>> x =
        f32Values(actual, actualPath, a.name, a.shape);
    StatusOr<std::vector<float>> y =
        f32Values(expected, expectedPath, a.name, a.shape);
    if (!x.ok())
      return x.error();
    if (!y.ok())
      return y.error();
    // Each value's tolerance: atol, plus kSpreadSigmas x the RMS of the
    // spread runs' differences from the reference.
    std::vector<double> tolerance(count, options.atol);
    if (!spread.empty()) {
      std::vector<double> squares(count, 0.0);
      for (size_t s = 0; s < spread.size(); ++s) {
        StatusOr<std::vector<float>> z =
            f32Values(spread[s], options.spread[s], a.name, a.shape);
        if (!z.ok())
          return z.error();
        for (int64_t i = 0; i < count; ++i) {
          double d = double((*z)[i]) - (*y)[i];
          squares[i] += d * d;
        }
      }
      for (int64_t i = 0; i < count; ++i)
        tolerance[i] += kSpreadSigmas * std::sqrt(squares[i] / spread.size());
    }
    double worst = 0, worstRatio = 0, scale = 0;
    int64_t rows = count / cols, agree = 0, decided = 0, nonFinite = 0;
    for (int64_t i = 0; i < count; ++i) {
      // A NaN or infinity fails (std::max would skip a NaN difference).
      double diff = std::fabs(double((*x)[i]) - (*y)[i]);
      if (!std::isfinite(diff) || !std::isfinite(tolerance[i])) {
        ++nonFinite;
        diff = INFINITY;
      }
      worst = std::max(worst, diff);
      worstRatio = std::max(worstRatio, diff / tolerance[i]);
      scale = std::max(scale, std::fabs(double((*y)[i])));
    }
    for (int64_t r = 0; r < rows; ++r) {
      const float *xr = x->data() + r * cols, *yr = y->data() + r * cols;
      const double *tr = tolerance.data() + r * cols;
      int64_t top = std::max_element(yr, yr + cols) - yr;
      // Without a spread every row counts (atol alone, as before).
      bool decides = true;
      for (int64_t j = 0; j < cols && !spread.empty() && decides; ++j)
        decides = j == top || double(yr[top]) - yr[j] > tr[top] + tr[j];
      if (!decides)
        continue;
      ++decided;
      agree += std::max_element(xr, xr + cols) - xr == top;
    }
    bool pass = worstRatio <= 1 && nonFinite == 0 && agree == decided;
    ok &= pass;
    out << (pass ? "ok   " : "FAIL ") << a.name << ": max |diff| "
        << std::scientific << std::setprecision(3) << worst;
    if (spread.empty()) {
      out << " (atol " << options.atol << ", max |expected| " << scale
          << "), top-1 " << std::dec << agree << "/" << rows;
    } else {
      out << ", max |diff| / tolerance " << std::fixed << std::setprecision(3)
          << worstRatio << std::scientific << " (tolerance " << options.atol
          << " + " << std::defaultfloat << kSpreadSigmas << " sigma of "
          << spread.size() << " runs: up to " << std::scientific
          << *std::max_element(tolerance.begin(), tolerance.end())
          << "; max |expected| " << scale << "), top-1 " << std::dec << agree
          << "/" << decided << " of the rows it decides (of " << rows << ")";
    }
    if (nonFinite)
      out << ", " << nonFinite << " values not finite";
    out << "\n";
  }
  if (actual.tensors().empty())
    return Status::error(actualPath + " holds no tensors");
  return ok ? Status::success()
            : Status::error("logits differ from " + expectedPath);
}

static std::string bytes(uint64_t n) {
  std::ostringstream os;
  os << std::fixed << std::setprecision(2);
  if (n >= (1ull << 30))
    os << n / double(1ull << 30) << " GiB";
  else if (n >= (1ull << 20))
    os << n / double(1ull << 20) << " MiB";
  else if (n >= (1ull << 10))
    os << n / double(1ull << 10) << " KiB";
  else
    os << n << " B";
  return os.str();
}

void runtime::inspect(const artifact::Manifest &m, std::ostream &out) {
  out << "model:     " << m.model_type() << " (target " << m.target()
      << ", format " << m.format_version() << ")\n"
      << "limits:    " << m.max_batch() << " sequences x " << m.max_seq_len()
      << " tokens, " << m.max_tokens() << " tokens per step, vocab "
      << m.vocab_size() << "\n";
  if (m.ranks() > 1) {
    out << "ranks:     rank " << m.rank() << " of " << m.ranks() << " (";
    if (m.tensor_parallel_size() > 1) {
      out << "heads and features split";
      if (m.tensor_parallel_size() < m.ranks())
        out << " over groups of " << m.tensor_parallel_size() << " ranks";
      out << (m.expert_parallel_size() > 1 ? ", " : "");
    }
    if (m.expert_parallel_size() > 1)
      out << "routed experts partitioned";
    out << "; this artifact holds its shards)\n";
  }
  out << "eos:      ";
  for (int64_t id : m.eos_token_ids())
    out << " " << id;
  out << (m.eos_token_ids_size() ? "\n" : " none\n");
  uint64_t weightBytes = 0;
  std::map<int, int> dtypes;
  for (const artifact::Weight &w : m.weights()) {
    weightBytes += w.size();
    ++dtypes[w.dtype()];
  }
  for (const artifact::ExternalFile &f : m.external_files())
    out << "weights file: " << f.path() << " (" << bytes(f.size())
        << ", by reference)\n";
  out << "weights:   " << m.weights_size() << " tensors, " << bytes(weightBytes)
      << " (";
  bool first = true;
  for (auto [dtype, count] : dtypes) {
    out << (first ? "" : ", ") << count << " "
        << artifact::DType_Name(static_cast<artifact::DType>(dtype));
    first = false;
  }
  out << ")\n";
  out << "caches:    " << m.caches_size();
  if (m.cache_pages())
    out << " (paged ones share " << m.cache_pages() << " pages)";
  out << "\n";
  for (const artifact::Cache &c : m.caches()) {
    out << "  " << c.name() << ": ";
    if (c.kind() == artifact::CACHE_SLOT_STATE) {
      out << "slot state " << artifact::DType_Name(c.state_dtype()) << " [";
      for (int i = 0; i < c.state_shape_size(); ++i)
        out << (i ? "x" : "") << c.state_shape(i);
      out << "], " << c.slot_bytes() << " B per sequence\n";
      continue;
    }
    out << artifact::CacheFormat_Name(c.format()) << ", " << c.width()
        << " values/row (tail " << c.tail_dim() << ", scale block "
        << c.scale_block() << "), " << c.bytes_per_row() << " B/row, ";
    if (c.kind() == artifact::CACHE_WINDOW)
      out << "window " << c.window() << " (ring of " << c.window_rows()
          << " rows per sequence)\n";
    else
      out << "pages of " << c.page_size() << "\n";
  }
  for (const artifact::Step &s : m.steps()) {
    std::map<std::string, int> kernels;
    for (const artifact::Launch &l : s.launches())
      ++kernels[l.kernel()];
    out << "step " << s.name() << ": " << s.launches_size() << " launches, "
        << s.buffers_size() << " buffers, arena " << bytes(s.arena_size());
    if (s.max_sizes_size())
      out << " at " << s.max_sizes(0) << " tokens";
    // lm-select-logit-rows: the logits of the rows the host names.
    for (const artifact::StepIO &io : s.io())
      if (io.role() == "logit_rows" && io.buffer() < uint32_t(s.buffers_size()))
        if (const artifact::Buffer &b = s.buffers(io.buffer()); b.dims_size())
          out << ", logits of " << b.dims(0).constant()
              << " rows asked for (--max-logit-rows)";
    out << "\n  ";
    first = true;
    for (auto &[name, count] : kernels) {
      out << (first ? "" : ", ") << name << " x" << count;
      first = false;
    }
    out << "\n";
  }
  // Library launches the compiler specialised (CUDA, NVRTC): their entry
  // points in the library module.
  std::set<std::string> specialized;
  for (const artifact::Step &s : m.steps())
    for (const artifact::Launch &l : s.launches())
      if (!l.specialized().empty())
        specialized.insert(l.specialized());
  for (const std::string &name : specialized)
    out << "specialized " << name << "\n";
  for (const artifact::CodeImage &image : m.code()) {
    out << "code " << image.module() << ": " << image.format() << " for "
        << image.arch() << " (section " << image.section() << ")";
    int64_t maxRegisters = 0;
    for (const artifact::KernelInfo &k : image.kernels())
      maxRegisters = std::max<int64_t>(maxRegisters, k.registers());
    if (image.kernels_size())
      out << ", " << image.kernels_size() << " kernels, up to " << maxRegisters
          << " registers";
    if (image.module() == "library") {
      out << ", library fingerprint " << std::hex << std::setw(16)
          << std::setfill('0') << image.library_fingerprint() << std::dec
          << std::setfill(' ');
#ifdef DAYBREAK_HAVE_CUDA
      out << (image.library_fingerprint() == cuda::cudaKernelsFingerprint()
                  ? " (this runtime's)"
                  : " (not this runtime's: the CUDA device refuses it)");
#endif
    }
    out << "\n";
  }
  for (const artifact::Section &s : m.sections())
    out << "section " << s.name() << ": " << bytes(s.size()) << " at offset "
        << s.offset() << ", fnv1a " << std::hex << s.checksum() << std::dec
        << "\n";
  const artifact::MemoryPlan &mem = m.memory();
  out << "memory:    weights " << bytes(mem.weight_bytes()) << " (stored "
      << bytes(mem.stored_weight_bytes()) << "), arena "
      << bytes(mem.arena_bytes()) << ", caches " << bytes(mem.cache_bytes())
      << " (" << mem.cache_bytes_per_token() << " B/token), total "
      << bytes(mem.total_bytes()) << "\n";
  for (const artifact::WeightPrecision &p : mem.weight_precisions())
    out << "  weights " << artifact::DType_Name(p.dtype()) << ": "
        << bytes(p.bytes()) << " in " << p.tensors() << " tensors, "
        << artifact::weightOriginText(p) << "\n";
  if (!mem.mxfp4_route().empty()) {
    // What the route holds against the offline route's E4M3 experts.
    uint64_t held = mem.mxfp4_stored_bytes() + mem.mxfp4_workspace_bytes();
    uint64_t offline = mem.mxfp4_offline_bytes();
    out << "  mxfp4 experts: route " << artifact::mxfp4RouteText(m)
        << ", stored " << bytes(mem.mxfp4_stored_bytes()) << ", workspace "
        << bytes(mem.mxfp4_workspace_bytes()) << " ("
        << artifact::mxfp4WorkspaceText(m) << "); "
        << "offline " << bytes(offline) << ", "
        << (held <= offline ? "saves " : "costs ")
        << bytes(held <= offline ? offline - held : held - offline) << "\n";
  }
}
