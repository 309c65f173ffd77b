//===- Session.h - Sequences served over one loaded model -------*- C++ -*-===//
//
// The session layer: what a serving loop needs on top of a Model.
//
// - Admission: a sequence gets a free slot (its pages returned and its
//   slot state zeroed), after its request is checked against the compiled
//   limits; with every slot taken, or a request past a limit, admission is
//   refused with an error naming the limit, and nothing changes.
// - Scheduling: step() runs one step of the artifact. While any prompt has
//   tokens left it runs a prefill step packing prompt tokens of several
//   sequences, a long prompt split over steps (chunked prefill, at most
//   max_tokens tokens per step); otherwise one decode step over every
//   sequence with a next token (batching across sequences). A prefill
//   step asks for the logits of the prompts it finishes only (their last
//   rows), unless the observer wants every row: then each prefill step
//   takes at most the artifact's logit rows (--max-logit-rows) tokens.
// - Cache pages: before a step, each sequence's rows get pages; a sequence
//   that cannot get them is ended with an error naming the pool (its pages
//   returned) and the step runs for the others.
// - Sampling: a generating sequence samples its next token from the logits
//   of its last token (its own seeded Sampler), ends at an EOS id of the
//   manifest or after max_new_tokens; a teacher-forced sequence feeds given
//   tokens instead.
// - Release: a finished or unwanted sequence gives its slot back.
//
// The observer, if set, sees the logits of each row a step computes.
// Allocation happens at admission; steps reuse the session's vectors. One
// thread at a time.
//
//===----------------------------------------------------------------------===//

#ifndef DAYBREAK_RUNTIME_EXECUTOR_SESSION_H
#define DAYBREAK_RUNTIME_EXECUTOR_SESSION_H

#include "runtime/executor/Model.h"
#include "runtime/sampling/Sampler.h"
#include "runtime/support/Status.h"

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace daybreak::runtime {

using SequenceId = int64_t;

struct SequenceRequest {
  std::vector<int32_t> prompt;
  /// Teacher forcing: tokens fed one per decode step after the prompt,
  /// instead of sampled ones. Empty: generate.
  std::vector<int32_t> forced;
  /// Tokens to generate when not forced (EOS may end it earlier).
  int64_t maxNewTokens = 0;
  SamplingOptions sampling;
};

enum class SequenceState { Prefilling, Decoding, Finished, Failed };

struct SequenceStatus {
  SequenceState state = SequenceState::Prefilling;
  int64_t slot = -1;
  /// Tokens whose rows are in the caches.
  int64_t position = 0;
  std::vector<int32_t> generated;
  /// Why a Failed sequence ended.
  std::string error;
};

/// One token row of a step's logits.
struct TokenLogits {
  SequenceId sequence;
  int64_t position; ///< of the token whose logits these are
  bool prefill;
  const float *logits; ///< [vocab]
};

class Session {
public:
  explicit Session(Model &model);

  /// Admits a sequence into a free slot. Errors (and nothing changes) when
  /// every slot is taken, the prompt is empty, holds a token outside the
  /// vocabulary, or prompt + new tokens exceed the compiled sequence length.
  StatusOr<SequenceId> admit(SequenceRequest request);
  /// Runs one step (prefill while prompts have tokens left, else decode).
  /// Returns false when nothing was left to run. A device error fails the
  /// call; a sequence that runs out of cache pages fails on its own.
  StatusOr<bool> step();
  /// Steps until no sequence has work left.
  Status runToCompletion();
  /// Gives the sequence's slot back (pages returned at once; the slot's
  /// state is zeroed when it is next admitted). Unknown ids are an error.
  Status release(SequenceId id);

  /// The sequence's status, or null for an id never admitted or released.
  const SequenceStatus *status(SequenceId id) const;
  /// Sequences admitted and not released.
  int64_t active() const;
  int64_t freeSlots() const;
  /// Called for each token row whose logits a step computes: with
  /// `everyRow`, every token's (scoring: prefill steps then take at most
  /// the artifact's logit rows each); otherwise those sampled from, a
  /// prompt's last token and each decode token.
  void setObserver(std::function<void(const TokenLogits &)> observer,
                   bool everyRow = true) {
    this->observer = std::move(observer);
    observeEveryRow = this->observer && everyRow;
  }
  Model &model() { return m; }

  /// Seconds spent in prefill and decode steps, and tokens they ran.
  struct Timing {
    double prefillSeconds = 0, decodeSeconds = 0;
    int64_t prefillTokens = 0, prefillSteps = 0, decodeSteps = 0,
            decodeTokens = 0;
  };
  const Timing &timing() const { return time; }

private:
  struct Sequence {
    SequenceId id = -1;
    SequenceRequest request;
    SequenceStatus status;
    std::optional<Sampler> sampler;
    /// The next decode input, when known.
    std::optional<int32_t> next;
  };

  Sequence *find(SequenceId id);
  /// Gives `seq` pages for `rows` rows, or fails it (pages returned).
  bool reserveOrFail(Sequence &seq, int64_t rows);
  /// After the logits of `seq`'s last known token: the next input.
  void advance(Sequence &seq, const float *logits);
  void fail(Sequence &seq, const std::string &why);

  Model &m;
  const PreparedStep *prefill = nullptr, *decode = nullptr;
  Status missingStep;
  std::vector<Sequence> sequences; ///< admitted, by admission order
  std::vector<bool> slotBusy;
  SequenceId nextId = 0;
  std::function<void(const TokenLogits &)> observer;
  bool observeEveryRow = false;
  // Reused by every step.
  StepInputs inputs;
  std::vector<Sequence *> rowOwner;
  std::vector<float> logits;
  Timing time;
};

} // namespace daybreak::runtime

#endif // DAYBREAK_RUNTIME_EXECUTOR_SESSION_H
