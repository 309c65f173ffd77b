//===- Session.cpp - Sequences served over one loaded model ---------------===//

#include "runtime/executor/Session.h"

#include <algorithm>
#include <chrono>

using namespace daybreak;
using namespace daybreak::runtime;
using Clock = std::chrono::steady_clock;

Session::Session(Model &model) : m(model) {
  StatusOr<const PreparedStep *> p = m.step("prefill");
  StatusOr<const PreparedStep *> d = m.step("decode");
  if (p.ok())
    prefill = *p;
  if (d.ok())
    decode = *d;
  if (!p.ok() || !d.ok())
    missingStep = p.ok() ? d.error() : p.error();
  slotBusy.assign(m.maxBatch(), false);
  int64_t tokens = m.maxTokens();
  inputs.ids.reserve(tokens);
  inputs.positions.reserve(tokens);
  inputs.sequences.reserve(tokens);
  rowOwner.reserve(tokens);
  // Rows of logits a step returns: at most a prefill step's logit rows, or
  // a decode step's tokens (one a sequence).
  int64_t rows = std::max(prefill ? m.maxLogitRows(*prefill) : tokens,
                          std::min(tokens, m.maxBatch()));
  inputs.logitRows.reserve(rows);
  logits.reserve(rows * m.vocabSize());
}

StatusOr<SequenceId> Session::admit(SequenceRequest request) {
  if (!missingStep.ok())
    return missingStep;
  int64_t prompt = request.prompt.size();
  if (prompt == 0)
    return Status::error("the prompt is empty");
  if (request.maxNewTokens < 0)
    return Status::error("max new tokens must not be negative");
  for (int32_t id : request.prompt)
    if (id < 0 || id >= m.vocabSize())
      return Status::error("token id " + std::to_string(id) +
                           " is outside the vocabulary [0, " +
                           std::to_string(m.vocabSize()) + ")");
  for (int32_t id : request.forced)
    if (id < 0 || id >= m.vocabSize())
      return Status::error("token id " + std::to_string(id) +
                           " is outside the vocabulary [0, " +
                           std::to_string(m.vocabSize()) + ")");
  // Rows the sequence may write: the prompt, then every fed token (the
  // last generated token is not fed).
  int64_t fed = request.forced.empty()
                    ? std::max<int64_t>(request.maxNewTokens - 1, 0)
                    : int64_t(request.forced.size());
  if (prompt + fed > m.maxSeqLen())
    return Status::error(
        "the prompt (" + std::to_string(prompt) + " tokens) plus " +
        std::to_string(fed) +
        " tokens to decode exceeds the compiled maximum sequence length " +
        std::to_string(m.maxSeqLen()) + " (--max-seq-len)");
  auto free = std::find(slotBusy.begin(), slotBusy.end(), false);
  if (free == slotBusy.end())
    return Status::error("all " + std::to_string(slotBusy.size()) +
                         " sequence slots are in use (the artifact serves at "
                         "most " +
                         std::to_string(m.maxBatch()) +
                         " sequences at once, --max-batch)");
  int64_t slot = free - slotBusy.begin();
  DAYBREAK_RETURN_IF_ERROR(m.resetSlot(slot));
  *free = true;
  Sequence seq;
  seq.id = nextId++;
  seq.status.slot = slot;
  seq.status.generated.reserve(request.forced.empty() ? request.maxNewTokens
                                                      : 0);
  if (request.forced.empty())
    seq.sampler.emplace(request.sampling);
  seq.request = std::move(request);
  sequences.push_back(std::move(seq));
  return sequences.back().id;
}

Session::Sequence *Session::find(SequenceId id) {
  for (Sequence &s : sequences)
    if (s.id == id)
      return &s;
  return nullptr;
}

const SequenceStatus *Session::status(SequenceId id) const {
  for (const Sequence &s : sequences)
    if (s.id == id)
      return &s.status;
  return nullptr;
}

int64_t Session::active() const { return sequences.size(); }

int64_t Session::freeSlots() const {
  return std::count(slotBusy.begin(), slotBusy.end(), false);
}

Status Session::release(SequenceId id) {
  auto it = std::find_if(sequences.begin(), sequences.end(),
                         [&](const Sequence &s) { return s.id == id; });
  if (it == sequences.end())
    return Status::error("no sequence " + std::to_string(id) +
                         " (never admitted, or released)");
  int64_t slot = it->status.slot;
  sequences.erase(it);
  slotBusy[slot] = false;
  return m.release(slot);
}

void Session::fail(Sequence &seq, const std::string &why) {
  seq.status.state = SequenceState::Failed;
  seq.status.error = why;
  seq.next.reset();
  // Its pages go back now so the others can use them; the slot stays the
  // sequence's until it is released.
  Status released = m.release(seq.status.slot);
  if (!released.ok())
    seq.status.error += "; " + released.message();
}

bool Session::reserveOrFail(Sequence &seq, int64_t rows) {
  Status status = m.reserve(seq.status.slot, rows);
  if (status.ok())
    return true;
  fail(seq, status.message());
  return false;
}

void Session::advance(Sequence &seq, const float *rowLogits) {
  const SequenceRequest &r = seq.request;
  SequenceStatus &st = seq.status;
  st.state = SequenceState::Decoding;
  if (!r.forced.empty()) {
    // Teacher forcing: the next given token, until they run out.
    int64_t fed = st.position - int64_t(r.prompt.size());
    if (fed < int64_t(r.forced.size()))
      seq.next = r.forced[fed];
    else
      st.state = SequenceState::Finished;
    return;
  }
  if (int64_t(st.generated.size()) >= r.maxNewTokens) {
    st.state = SequenceState::Finished;
    return;
  }
  int32_t token = seq.sampler->sample(rowLogits, m.vocabSize());
  st.generated.push_back(token);
  const auto &eos = m.manifest().eos_token_ids();
  if (std::find(eos.begin(), eos.end(), token) != eos.end() ||
      int64_t(st.generated.size()) == r.maxNewTokens)
    st.state = SequenceState::Finished;
  else
    seq.next = token;
}

StatusOr<bool> Session::step() {
  inputs.ids.clear();
  inputs.positions.clear();
  inputs.sequences.clear();
  rowOwner.clear();
  inputs.logitRows.clear();
  int64_t budget = m.maxTokens();
  bool isPrefill = false;
  for (const Sequence &s : sequences)
    isPrefill |= s.status.state == SequenceState::Prefilling;
  // Every row's logits, from a step that computes only some: steps of at
  // most that many tokens.
  if (isPrefill && observeEveryRow)
    budget = std::min(budget, m.maxLogitRows(*prefill));

  for (Sequence &s : sequences) {
    if (int64_t(inputs.ids.size()) == budget)
      break;
    SequenceStatus &st = s.status;
    if (isPrefill) {
      if (st.state != SequenceState::Prefilling)
        continue;
      int64_t left = int64_t(s.request.prompt.size()) - st.position;
      int64_t n = std::min(left, budget - int64_t(inputs.ids.size()));
      if (!reserveOrFail(s, st.position + n))
        continue;
      // The prompt's last row, if this step reaches it: what comes next.
      if (st.position + n == int64_t(s.request.prompt.size()))
        inputs.logitRows.push_back(
            static_cast<int32_t>(inputs.ids.size() + n - 1));
      for (int64_t i = 0; i < n; ++i) {
        inputs.ids.push_back(s.request.prompt[st.position + i]);
        inputs.positions.push_back(static_cast<int32_t>(st.position + i));
        inputs.sequences.push_back(static_cast<int32_t>(st.slot));
        rowOwner.push_back(&s);
      }
    } else {
      if (st.state != SequenceState::Decoding || !s.next)
        continue;
      if (!reserveOrFail(s, st.position + 1))
        continue;
      inputs.ids.push_back(*s.next);
      inputs.positions.push_back(static_cast<int32_t>(st.position));
      inputs.sequences.push_back(static_cast<int32_t>(st.slot));
      rowOwner.push_back(&s);
    }
  }
  if (inputs.ids.empty()) {
    // Every candidate may have failed for pages: there may be more to do.
    for (const Sequence &s : sequences)
      if (s.status.state == SequenceState::Prefilling ||
          (s.status.state == SequenceState::Decoding && s.next))
        return true;
    return false;
  }

  // Decode samples every row; prefill the prompts' last rows, unless the
  // observer wants them all.
  inputs.everyLogitRow = !isPrefill || observeEveryRow;
  auto start = Clock::now();
  DAYBREAK_RETURN_IF_ERROR(
      m.run(isPrefill ? *prefill : *decode, inputs, logits));
  double seconds =
      std::chrono::duration<double>(Clock::now() - start).count();
  int64_t tokens = inputs.ids.size();
  if (isPrefill) {
    time.prefillSeconds += seconds;
    time.prefillTokens += tokens;
    ++time.prefillSteps;
  } else {
    time.decodeSeconds += seconds;
    ++time.decodeSteps;
    time.decodeTokens += tokens;
  }

  // Every token's row is in the caches now.
  for (int64_t t = 0; t < tokens; ++t) {
    Sequence &s = *rowOwner[t];
    s.status.position = int64_t(inputs.positions[t]) + 1;
    s.next.reset();
  }
  int64_t vocab = m.vocabSize();
  int64_t rows =
      inputs.everyLogitRow ? tokens : int64_t(inputs.logitRows.size());
  for (int64_t r = 0; r < rows; ++r) {
    int64_t t = inputs.everyLogitRow ? r : inputs.logitRows[r];
    Sequence &s = *rowOwner[t];
    const float *row = logits.data() + r * vocab;
    if (observer)
      observer({s.id, inputs.positions[t], isPrefill, row});
    // A prompt's last row, or a decode row: what comes next.
    if (!isPrefill ||
        int64_t(inputs.positions[t]) + 1 == int64_t(s.request.prompt.size()))
      advance(s, row);
  }
  return true;
}

Status Session::runToCompletion() {
  for (;;) {
    StatusOr<bool> ran = step();
    if (!ran.ok())
      return ran.error();
    if (!*ran)
      return Status::success();
  }
}
