//===- PreparedLaunch.h - Launches decoded once at load ---------*- C++ -*-===//
//
// An artifact's launches are decoded once, when a model loads, against the
// kernel declarations (runtime/abi/Kernels.def) into prepared launches: the
// kernel id, each operand slot resolved to a buffer (arena offset and size
// expressions), weight or cache, and the parameters typed by their
// declaration. A launch naming an unknown kernel, or with a missing,
// unknown or ill-typed parameter, or an operand of the wrong kind, fails the
// load with the launch named. At run time a step binds its prepared launches
// to addresses and shapes for its token count into fixed-size structs: no
// string is looked up and nothing is allocated.
//
// Prepared steps are immutable after prepareSteps returns: share them freely
// between threads.
//
//===----------------------------------------------------------------------===//

#ifndef DAYBREAK_RUNTIME_EXECUTOR_PREPAREDLAUNCH_H
#define DAYBREAK_RUNTIME_EXECUTOR_PREPAREDLAUNCH_H

#include "runtime/abi/KernelAbi.h"
#include "runtime/artifact/Manifest.pb.h"
#include "runtime/support/Status.h"

#include <cstdint>
#include <string>
#include <vector>

namespace daybreak::runtime {

/// Bounds of a bound launch: tensor rank and operand + result slots.
constexpr unsigned kMaxRank = 4;
constexpr unsigned kMaxLaunchArgs = 32;

/// One operand or result slot of a prepared launch.
struct PreparedArg {
  enum class Kind : uint8_t { Absent, Buffer, Weight, Cache };
  Kind kind = Kind::Absent;
  artifact::DType dtype = artifact::DTYPE_UNSPECIFIED;
  uint8_t rank = 0;
  /// Index of the step's buffer, the manifest's weight or cache.
  uint32_t index = 0;
  /// A buffer's offset in the arena.
  uint64_t offset = 0;
  /// A column view's elements between row starts (Kernels.def's VIEW
  /// slots); 0 for dense rows.
  int64_t rowStride = 0;
  /// Extent d is constant[d] + perToken[d] * tokens.
  int64_t constant[kMaxRank] = {};
  int64_t perToken[kMaxRank] = {};
};

/// A parameter's value, by its declared type (int and bool in i, enums as
/// the index of their choice in i).
struct ParamValue {
  bool present = false;
  int64_t i = 0;
  double f = 0;
  std::string s;
  std::vector<int64_t> ints;
};

struct PreparedLaunch {
  abi::KernelId kernel = abi::KernelId::Embedding;
  /// Position among all launches of all steps: devices index the state
  /// they keep per launch (loaded functions, pointer tables) by it.
  uint32_t ordinal = 0;
  /// Operand slots (a variadic slot expanded), then result slots.
  uint32_t numOperands = 0, numResults = 0;
  std::vector<PreparedArg> args;
  std::vector<ParamValue> params; ///< by declared index
  /// The library instantiation the compiler built for this launch, or "".
  std::string specialized;
  /// 0: the step's main queue; 1: the side queue (plan.launch's `queue`):
  /// after every main launch before it, beside those after it. Devices
  /// that run one queue run it in order, which is always valid.
  uint8_t queue = 0;
  /// A side launch's position among its step's side launches.
  uint32_t sideIndex = 0;
  /// n > 0: waits first for the step's first n side launches to finish
  /// (`join_queue`).
  uint32_t joinQueue = 0;
  /// "step 'decode' launch 12 (rms_norm)", for errors.
  std::string label;

  const abi::KernelDecl &decl() const { return abi::kernel(kernel); }
  bool has(unsigned param) const { return params[param].present; }
  int64_t i(unsigned param) const { return params[param].i; }
  double f(unsigned param) const { return params[param].f; }
  const std::string &s(unsigned param) const { return params[param].s; }
  const std::vector<int64_t> &ints(unsigned param) const {
    return params[param].ints;
  }
};

struct PreparedStep {
  const artifact::Step *step = nullptr;
  std::vector<PreparedLaunch> launches;
  /// The buffers the host writes and reads, found by role at load.
  const artifact::Buffer *tokenIds = nullptr, *positions = nullptr,
                         *sequences = nullptr, *logits = nullptr;
  /// A step compiled by lm-select-logit-rows computes the logits of the
  /// `maxLogitRows` token rows the host writes here (`[maxLogitRows]`
  /// int32); other steps (null, 0) those of every token.
  const artifact::Buffer *logitRows = nullptr;
  int64_t maxLogitRows = 0;
  /// The most tokens a run of the step may have (its arena's plan): the
  /// artifact's max_tokens, or for decode min(max_tokens, max_batch).
  int64_t maxTokens = 0;
  /// Its launches on the side queue (PreparedLaunch::queue).
  uint32_t sideLaunches = 0;
};

/// Decodes every launch of every step of `m`, in the manifest's order.
StatusOr<std::vector<PreparedStep>>
prepareSteps(const artifact::Manifest &m);

/// A slot bound for one step: its address (a buffer's or weight's device
/// address; for a cache, its index) and its shape at the step's tokens.
struct BoundArg {
  uint64_t address = 0;
  const PreparedArg *arg = nullptr;
  int64_t shape[kMaxRank] = {};
  uint8_t rank = 0;
  /// A column view's row stride, 0 for dense rows: read it through
  /// stride().
  int64_t rowStride = 0;

  bool present() const { return arg->kind != PreparedArg::Kind::Absent; }
  /// Elements between the starts of consecutive rows (of the last dim).
  int64_t stride() const { return rowStride ? rowStride : back(); }
  /// Rows of the last dim: every leading dim together.
  int64_t rows() const {
    int64_t n = 1;
    for (unsigned d = 0; d + 1 < rank; ++d)
      n *= shape[d];
    return n;
  }
  int64_t dim(int d) const { return shape[d < 0 ? rank + d : d]; }
  int64_t back() const { return shape[rank - 1]; }
  int64_t numel() const {
    int64_t n = 1;
    for (unsigned d = 0; d < rank; ++d)
      n *= shape[d];
    return n;
  }
  int cache() const { return static_cast<int>(arg->index); }
  template <typename T> T *as() const {
    return reinterpret_cast<T *>(static_cast<uintptr_t>(address));
  }
};

/// A prepared launch bound to a step's token count and a device's
/// addresses: what a device's launcher receives.
struct BoundLaunch {
  const PreparedLaunch *launch = nullptr;
  int64_t tokens = 0;
  BoundArg args[kMaxLaunchArgs];

  const BoundArg &in(unsigned slot) const { return args[slot]; }
  const BoundArg &out(unsigned slot) const {
    return args[launch->numOperands + slot];
  }
  unsigned numOperands() const { return launch->numOperands; }
  const PreparedLaunch &operator*() const { return *launch; }
  const PreparedLaunch *operator->() const { return launch; }
};

/// Binds `launch` for `tokens` tokens: buffers at `arenaBase` plus their
/// offset, weights at `weightAddresses[index]`.
void bindLaunch(const PreparedLaunch &launch, int64_t tokens,
                uint64_t arenaBase, const uint64_t *weightAddresses,
                BoundLaunch &bound);

} // namespace daybreak::runtime

#endif // DAYBREAK_RUNTIME_EXECUTOR_PREPAREDLAUNCH_H
