//===- Commands.cpp - What daybreak-run does, as library calls ------------===//

#include "runtime/executor/Commands.h"

#include "runtime/safetensors/Safetensors.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <fstream>
#include <iomanip>
#include <map>
#include <ostream>
#include <set>
#include <sstream>

using namespace daybreak;
using namespace daybreak::runtime;
using Clock = std::chrono::steady_clock;

static double secondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

/// Runs `inputs` through step `name` in chunks of at most max_tokens tokens,
/// appending each token's logits to `logits`.
static Status runChunked(Model &model, const std::string &name,
                         const StepInputs &inputs, std::vector<float> &logits) {
  StatusOr<const PreparedStep *> found = model.step(name);
  if (!found.ok())
    return found.error();
  const PreparedStep &step = **found;
  int64_t chunk = model.maxTokens(), vocab = model.vocabSize();
  std::vector<float> part;
  logits.clear();
  for (size_t start = 0; start < inputs.ids.size(); start += chunk) {
    size_t end = std::min(inputs.ids.size(), start + size_t(chunk));
    StepInputs slice;
    slice.ids.assign(inputs.ids.begin() + start, inputs.ids.begin() + end);
    slice.positions.assign(inputs.positions.begin() + start,
                           inputs.positions.begin() + end);
    slice.sequences.assign(inputs.sequences.begin() + start,
                           inputs.sequences.begin() + end);
    Status status = model.run(step, slice, part);
    if (!status.ok())
      return status;
    logits.insert(logits.end(), part.begin(), part.begin() + (end - start) * vocab);
  }
  return Status::success();
}

static Status intList(const nlohmann::json &seq, const char *key,
                      const std::string &path, std::vector<int32_t> &out) {
  auto it = seq.find(key);
  if (it == seq.end() || !it->is_array())
    return Status::error(path + ": a sequence lacks the list '" + key + "'");
  for (const nlohmann::json &v : *it) {
    if (!v.is_number_integer())
      return Status::error(path + ": '" + key + "' holds a non-integer");
    out.push_back(v.get<int32_t>());
  }
  return Status::success();
}

Status runtime::runLogits(Model &model, const std::string &inputsPath,
                          const std::string &outputPath, std::ostream &log) {
  std::ifstream in(inputsPath);
  if (!in)
    return Status::error("cannot read " + inputsPath);
  std::stringstream text;
  text << in.rdbuf();
  nlohmann::json json = nlohmann::json::parse(text.str(), nullptr, false);
  if (json.is_discarded() || !json.is_object() ||
      !json.contains("sequences") || !json["sequences"].is_array())
    return Status::error(inputsPath +
                         ": not JSON with a 'sequences' list");
  std::vector<std::vector<int32_t>> prompts, decodes;
  for (const nlohmann::json &seq : json["sequences"]) {
    if (!seq.is_object())
      return Status::error(inputsPath + ": a sequence is not an object");
    prompts.emplace_back();
    decodes.emplace_back();
    Status status = intList(seq, "prompt_ids", inputsPath, prompts.back());
    if (status.ok() && seq.contains("decode_ids"))
      status = intList(seq, "decode_ids", inputsPath, decodes.back());
    if (!status.ok())
      return status;
    if (prompts.back().empty())
      return Status::error(inputsPath + ": an empty prompt");
  }
  int64_t batch = prompts.size();
  if (batch > model.maxBatch())
    return Status::error(inputsPath + " has " + std::to_string(batch) +
                         " sequences; the artifact serves at most " +
                         std::to_string(model.maxBatch()) + " (--max-batch)");
  int64_t vocab = model.vocabSize();

  // One prefill over every prompt.
  StepInputs prefill;
  for (int64_t i = 0; i < batch; ++i)
    for (size_t p = 0; p < prompts[i].size(); ++p) {
      prefill.ids.push_back(prompts[i][p]);
      prefill.positions.push_back(static_cast<int32_t>(p));
      prefill.sequences.push_back(static_cast<int32_t>(i));
    }
  std::vector<float> logits;
  auto start = Clock::now();
  Status status = runChunked(model, "prefill", prefill, logits);
  if (!status.ok())
    return status;
  double prefillSeconds = secondsSince(start);
  std::vector<safetensors::F32Tensor> outputs;
  size_t row = 0;
  for (int64_t i = 0; i < batch; ++i) {
    int64_t n = prompts[i].size();
    outputs.push_back({"seq" + std::to_string(i) + ".prefill_logits",
                       {n, vocab},
                       std::vector<float>(logits.begin() + row * vocab,
                                          logits.begin() + (row + n) * vocab)});
    row += n;
  }

  // Teacher-forced decode: one token per sequence that still has one.
  std::vector<std::vector<float>> decodeLogits(batch);
  size_t steps = 0;
  for (const auto &d : decodes)
    steps = std::max(steps, d.size());
  start = Clock::now();
  for (size_t t = 0; t < steps; ++t) {
    StepInputs step;
    std::vector<int64_t> who;
    for (int64_t i = 0; i < batch; ++i)
      if (t < decodes[i].size()) {
        step.ids.push_back(decodes[i][t]);
        step.positions.push_back(static_cast<int32_t>(prompts[i].size() + t));
        step.sequences.push_back(static_cast<int32_t>(i));
        who.push_back(i);
      }
    status = runChunked(model, "decode", step, logits);
    if (!status.ok())
      return status;
    for (size_t j = 0; j < who.size(); ++j)
      decodeLogits[who[j]].insert(decodeLogits[who[j]].end(),
                                  logits.begin() + j * vocab,
                                  logits.begin() + (j + 1) * vocab);
  }
  double decodeSeconds = secondsSince(start);
  for (int64_t i = 0; i < batch; ++i)
    if (!decodes[i].empty())
      outputs.push_back({"seq" + std::to_string(i) + ".decode_logits",
                         {int64_t(decodes[i].size()), vocab},
                         std::move(decodeLogits[i])});
  safetensors::Status written = safetensors::writeF32File(outputPath, outputs);
  if (!written.ok)
    return Status::error(written.message);
  log << "logits: " << batch << " sequences, " << prefill.ids.size()
      << " prefill tokens in " << std::fixed << std::setprecision(3)
      << prefillSeconds << " s, " << steps << " decode steps in "
      << decodeSeconds << " s -> " << outputPath << "\n";
  return Status::success();
}

Status runtime::generate(Model &model, const GenerateOptions &options,
                         std::ostream &out) {
  int64_t prompt = options.promptIds.size();
  if (prompt == 0)
    return Status::error("--prompt-ids is empty");
  if (options.maxNewTokens < 0)
    return Status::error("--max-new-tokens must not be negative");
  if (prompt + options.maxNewTokens > model.maxSeqLen())
    return Status::error("the prompt (" + std::to_string(prompt) +
                         " tokens) plus --max-new-tokens (" +
                         std::to_string(options.maxNewTokens) +
                         ") exceeds the compiled maximum sequence length " +
                         std::to_string(model.maxSeqLen()) +
                         " (--max-seq-len)");
  Sampler sampler(options.sampling);
  StepInputs inputs;
  for (int64_t p = 0; p < prompt; ++p) {
    inputs.ids.push_back(options.promptIds[p]);
    inputs.positions.push_back(static_cast<int32_t>(p));
    inputs.sequences.push_back(0);
  }
  std::vector<float> logits;
  auto start = Clock::now();
  Status status = runChunked(model, "prefill", inputs, logits);
  if (!status.ok())
    return status;
  double prefillSeconds = secondsSince(start);
  int64_t vocab = model.vocabSize();
  std::vector<int32_t> generated;
  int32_t next = sampler.sample(logits.data() + (prompt - 1) * vocab, vocab);
  start = Clock::now();
  // The decode step, found once for the loop.
  StatusOr<const PreparedStep *> decode = model.step("decode");
  if (!decode.ok())
    return decode.error();
  const auto &eos = model.manifest().eos_token_ids();
  while (static_cast<int64_t>(generated.size()) < options.maxNewTokens) {
    generated.push_back(next);
    if (std::find(eos.begin(), eos.end(), next) != eos.end() ||
        static_cast<int64_t>(generated.size()) == options.maxNewTokens)
      break;
    StepInputs step;
    step.ids = {next};
    step.positions = {static_cast<int32_t>(prompt + generated.size() - 1)};
    step.sequences = {0};
    status = model.run(**decode, step, logits);
    if (!status.ok())
      return status;
    next = sampler.sample(logits.data(), vocab);
  }
  double decodeSeconds = secondsSince(start);
  out << "tokens:";
  for (int32_t t : generated)
    out << " " << t;
  out << "\n" << std::fixed << std::setprecision(3)
      << "prefill: " << prompt << " tokens in " << prefillSeconds * 1e3
      << " ms (" << prompt / std::max(prefillSeconds, 1e-9)
      << " tokens/s)\n";
  int64_t decoded = std::max<int64_t>(int64_t(generated.size()) - 1, 0);
  out << "decode:  " << decoded << " steps in " << decodeSeconds * 1e3
      << " ms (" << decoded / std::max(decodeSeconds, 1e-9)
      << " tokens/s)\n";
  return Status::success();
}

Status runtime::compareLogits(const std::string &actualPath,
                              const std::string &expectedPath, double atol,
                              std::ostream &out) {
  safetensors::File actual, expected;
  safetensors::Status opened = safetensors::File::open(actualPath, actual);
  if (opened.ok)
    opened = safetensors::File::open(expectedPath, expected);
  if (!opened.ok)
    return Status::error(opened.message);
  bool ok = true;
  for (const safetensors::TensorView &a : actual.tensors()) {
    const safetensors::TensorView *e = expected.find(a.name);
    if (!e)
      return Status::error(expectedPath + " has no tensor '" + a.name + "'");
    if (a.dtype != safetensors::DType::F32 ||
        e->dtype != safetensors::DType::F32 || a.shape != e->shape ||
        a.shape.empty())
      return Status::error("'" + a.name + "' differs in dtype or shape");
    int64_t cols = a.shape.back(), count = a.byteSize / 4;
    std::vector<float> x(count), y(count);
    std::memcpy(x.data(), a.data, a.byteSize);
    std::memcpy(y.data(), e->data, e->byteSize);
    double worst = 0, scale = 0;
    int64_t rows = count / cols, agree = 0;
    for (int64_t i = 0; i < count; ++i) {
      worst = std::max(worst, std::fabs(double(x[i]) - y[i]));
      scale = std::max(scale, std::fabs(double(y[i])));
    }
    for (int64_t r = 0; r < rows; ++r) {
      const float *xr = x.data() + r * cols, *yr = y.data() + r * cols;
      agree += std::max_element(xr, xr + cols) - xr ==
               std::max_element(yr, yr + cols) - yr;
    }
    bool pass = worst <= atol && agree == rows;
    ok &= pass;
    out << (pass ? "ok   " : "FAIL ") << a.name << ": max |diff| "
        << std::scientific << std::setprecision(3) << worst << " (atol "
        << atol << ", max |expected| " << scale << "), top-1 " << std::dec
        << agree << "/" << rows << "\n";
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
  out << "caches:    " << m.caches_size() << "\n";
  for (const artifact::Cache &c : m.caches())
    out << "  " << c.name() << ": "
        << artifact::CacheFormat_Name(c.format()) << ", " << c.width()
        << " values/row (tail " << c.tail_dim() << ", scale block "
        << c.scale_block() << "), " << c.bytes_per_row() << " B/row, pages of "
        << c.page_size() << "\n";
  for (const artifact::Step &s : m.steps()) {
    std::map<std::string, int> kernels;
    for (const artifact::Launch &l : s.launches())
      ++kernels[l.kernel()];
    out << "step " << s.name() << ": " << s.launches_size() << " launches, "
        << s.buffers_size() << " buffers, arena " << bytes(s.arena_size())
        << "\n  ";
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
}
