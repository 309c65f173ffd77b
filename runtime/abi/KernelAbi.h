//===- KernelAbi.h - Runtime kernels as declared data -----------*- C++ -*-===//
//
// The kernel ABI shared by the compiler (which emits launches), the artifact
// (which stores them) and the runtime (which decodes and runs them), from
// the one declaration in Kernels.def. Plain C++ with no dependencies, so the
// compiler can check launches without including any device header.
//
// For each kernel Id the header also defines index constants, so launchers
// name operands and parameters instead of counting positions:
//   abi::RmsNorm::In::input, abi::RmsNorm::Out::output, abi::RmsNorm::P::eps
// and for ENUM parameters the choices in order, e.g.
//   abi::Rope::Style::half_split.
//
// Everything here is immutable after static initialisation: thread-safe.
//
//===----------------------------------------------------------------------===//

#ifndef DAYBREAK_RUNTIME_ABI_KERNELABI_H
#define DAYBREAK_RUNTIME_ABI_KERNELABI_H

#include <cstdint>
#include <string>
#include <string_view>

namespace daybreak::abi {

enum class KernelId : uint8_t {
#define DAYBREAK_KERNEL(Id, Name, Targets, Operands, Results, Params) Id,
#include "runtime/abi/Kernels.def"
#undef DAYBREAK_KERNEL
};

constexpr unsigned kNumKernels = 0
#define DAYBREAK_KERNEL(Id, Name, Targets, Operands, Results, Params) +1
#include "runtime/abi/Kernels.def"
#undef DAYBREAK_KERNEL
    ;

/// What an operand slot holds.
enum class ArgKind : uint8_t {
  Tensor,   ///< a buffer or a weight, present
  Optional, ///< a buffer or a weight, or absent
  Cache,    ///< a cache (paged or window rows)
  State,    ///< per-slot state (a slot-state cache)
  Variadic, ///< any number of tensors (last operand only)
};

enum class ParamType : uint8_t { Int, Float, Bool, String, Ints, Enum };
enum class Presence : uint8_t { Required, Optional };

/// Devices a kernel runs on (a target's legality check reads this).
enum TargetMask : uint8_t { Cpu = 1, Cuda = 2, CpuAndCuda = 3 };

/// Each target of the targets column by the name `--target=` and
/// `--device=` spell it.
struct TargetName {
  TargetMask mask;
  const char *name;
};
inline constexpr TargetName kTargetNames[] = {{Cpu, "cpu"}, {Cuda, "cuda"}};
/// The mask of the target `name`, or 0 for a name no kernel declares.
uint8_t targetMask(std::string_view name);
/// The names of the targets in `mask`, joined by `separator` ("cpu, cuda").
std::string targetNames(uint8_t mask, std::string_view separator = ", ");

/// Shapes the CUDA kernels take beyond what the declarations say:
/// lm-check-target rejects others for target cuda at compile time, and the
/// CUDA device checks again at launch. KDA key dims (kda_chunk, kda_step)
/// up to 128 (a block holds a head's key rows); short convolution widths 2
/// to 8 (a thread holds a window).
inline constexpr int64_t kCudaKdaMaxKeyDim = 128;
inline constexpr int64_t kCudaShortConvMinWidth = 2, kCudaShortConvMaxWidth = 8;

/// Stored types a weight operand may have. F4E2M1FN weights are packed two
/// values a byte (low nibble first); F8E8M0FNU holds MX block scales.
enum WeightTypeMask : uint8_t {
  F32 = 1,
  BF16 = 2,
  F8E4M3 = 4,
  F4E2M1FN = 8,
  F8E8M0FNU = 16,
};

struct ArgDecl {
  const char *role = nullptr;
  ArgKind kind = ArgKind::Tensor;
  /// The stored types a weight in this slot may have.
  uint8_t weightTypes = F32;
  /// The kernel takes a column view in this slot: a buffer whose rows are
  /// `row_stride` elements apart (columns of a wider buffer's rows). Other
  /// slots take dense rows only.
  bool columnView = false;
};

struct ParamDecl {
  const char *name = nullptr;
  ParamType type = ParamType::Int;
  Presence presence = Presence::Required;
  /// ENUM parameters: the choices, separated by '|'.
  const char *choices = nullptr;
};

/// Upper bounds of the declaration's fixed arrays.
constexpr unsigned kMaxDeclaredOperands = 8;
constexpr unsigned kMaxDeclaredResults = 4;
constexpr unsigned kMaxParams = 16;

struct KernelDecl {
  KernelId id;
  const char *name;
  uint8_t targets;
  ArgDecl operands[kMaxDeclaredOperands];
  ArgDecl results[kMaxDeclaredResults];
  ParamDecl params[kMaxParams];

  unsigned numOperands() const { return count(operands); }
  unsigned numResults() const { return count(results); }
  unsigned numParams() const {
    unsigned n = 0;
    while (n < kMaxParams && params[n].name)
      ++n;
    return n;
  }
  bool isVariadic() const {
    unsigned n = numOperands();
    return n && operands[n - 1].kind == ArgKind::Variadic;
  }
  /// The index of parameter `name`, or -1.
  int paramIndex(std::string_view name) const;
  /// The index of `choice` among ENUM parameter `param`'s choices, or -1.
  int enumIndex(unsigned param, std::string_view choice) const;

private:
  template <unsigned N> static unsigned count(const ArgDecl (&args)[N]) {
    unsigned n = 0;
    while (n < N && args[n].role)
      ++n;
    return n;
  }
};

/// The declaration of kernel `id`.
const KernelDecl &kernel(KernelId id);
/// The declaration named `name` (a launch's kernel), or null.
const KernelDecl *findKernel(std::string_view name);
/// "int", "float", "bool", "string", "ints", "enum".
const char *paramTypeName(ParamType type);
/// "f32|bf16", ... for a WeightTypeMask.
std::string weightTypesName(uint8_t types);

//===----------------------------------------------------------------------===//
// Index constants per kernel: abi::<Id>::In, Out and P.
//===----------------------------------------------------------------------===//

#define ARG(role) role,
#define VIEW(role) role,
#define OPT(role) role,
#define WEIGHT(role, types) role,
#define OPT_WEIGHT(role, types) role,
#define CACHE(role) role,
#define STATE(role) role,
#define VARIADIC(role) role,
#define INT(name, presence) name,
#define FLOAT(name, presence) name,
#define BOOL(name, presence) name,
#define STRING(name, presence) name,
#define INTS(name, presence) name,
#define ENUM(name, presence, choices) name,
#define DAYBREAK_OPERANDS(...)                                                 \
  struct In {                                                                  \
    enum : unsigned { __VA_ARGS__ kCount };                                    \
  };
#define DAYBREAK_RESULTS(...)                                                  \
  struct Out {                                                                 \
    enum : unsigned { __VA_ARGS__ kCount };                                    \
  };
#define DAYBREAK_PARAMS(...)                                                   \
  struct P {                                                                   \
    enum : unsigned { __VA_ARGS__ kCount };                                    \
  };
#define DAYBREAK_KERNEL(Id, Name, Targets, Operands, Results, Params)          \
  namespace Id {                                                               \
  Operands Results Params                                                      \
  }
#include "runtime/abi/Kernels.def"
#undef DAYBREAK_KERNEL
#undef DAYBREAK_OPERANDS
#undef DAYBREAK_RESULTS
#undef DAYBREAK_PARAMS
#undef ARG
#undef VIEW
#undef OPT
#undef WEIGHT
#undef OPT_WEIGHT
#undef CACHE
#undef STATE
#undef VARIADIC
#undef INT
#undef FLOAT
#undef BOOL
#undef STRING
#undef INTS
#undef ENUM

/// The choices of ENUM parameters, in declaration order.
namespace Rope {
enum Style : int64_t { interleaved, half_split };
} // namespace Rope
namespace CacheWrite {
enum Norm : int64_t { rms, layer };
enum RopeStyle : int64_t { interleaved, half_split };
} // namespace CacheWrite
namespace DsaIndexerScores {
enum RopeStyle : int64_t { interleaved, half_split };
} // namespace DsaIndexerScores
namespace MoeRoute {
enum Routing : int64_t { softmax, sigmoid, softmax_topk };
} // namespace MoeRoute
/// short_conv's and gated_rms_norm's activation.
enum Activation : int64_t { none, sigmoid, silu };

} // namespace daybreak::abi

#endif // DAYBREAK_RUNTIME_ABI_KERNELABI_H
