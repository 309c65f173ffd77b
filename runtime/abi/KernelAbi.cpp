//===- KernelAbi.cpp - The kernel declaration table -----------------------===//

#include "runtime/abi/KernelAbi.h"

using namespace daybreak::abi;

namespace {

#define ARG(role) {#role, ArgKind::Tensor, F32},
#define VIEW(role) {#role, ArgKind::Tensor, F32, true},
#define OPT(role) {#role, ArgKind::Optional, F32},
#define WEIGHT(role, types) {#role, ArgKind::Tensor, uint8_t(types)},
#define OPT_WEIGHT(role, types) {#role, ArgKind::Optional, uint8_t(types)},
#define CACHE(role) {#role, ArgKind::Cache, F32},
#define STATE(role) {#role, ArgKind::State, F32},
#define VARIADIC(role) {#role, ArgKind::Variadic, F32},
#define INT(name, presence) {#name, ParamType::Int, Presence::presence},
#define FLOAT(name, presence) {#name, ParamType::Float, Presence::presence},
#define BOOL(name, presence) {#name, ParamType::Bool, Presence::presence},
#define STRING(name, presence) {#name, ParamType::String, Presence::presence},
#define INTS(name, presence) {#name, ParamType::Ints, Presence::presence},
#define ENUM(name, presence, choices)                                          \
  {#name, ParamType::Enum, Presence::presence, choices},
#define DAYBREAK_OPERANDS(...) {__VA_ARGS__}
#define DAYBREAK_RESULTS(...) {__VA_ARGS__}
#define DAYBREAK_PARAMS(...) {__VA_ARGS__}
#define DAYBREAK_KERNEL(Id, Name, Targets, Operands, Results, Params)          \
  {KernelId::Id, Name, Targets, Operands, Results, Params},

const KernelDecl kKernels[] = {
#include "runtime/abi/Kernels.def"
};

#undef DAYBREAK_KERNEL
#undef DAYBREAK_OPERANDS
#undef DAYBREAK_RESULTS
#undef DAYBREAK_PARAMS

static_assert(sizeof(kKernels) / sizeof(kKernels[0]) == kNumKernels,
              "one declaration per kernel id");

} // namespace

const KernelDecl &daybreak::abi::kernel(KernelId id) {
  return kKernels[static_cast<unsigned>(id)];
}

const KernelDecl *daybreak::abi::findKernel(std::string_view name) {
  for (const KernelDecl &decl : kKernels)
    if (name == decl.name)
      return &decl;
  return nullptr;
}

int KernelDecl::paramIndex(std::string_view name) const {
  for (unsigned i = 0, e = numParams(); i < e; ++i)
    if (name == params[i].name)
      return static_cast<int>(i);
  return -1;
}

int KernelDecl::enumIndex(unsigned param, std::string_view choice) const {
  if (param >= numParams() || params[param].type != ParamType::Enum)
    return -1;
  std::string_view choices = params[param].choices;
  for (int index = 0;; ++index) {
    size_t bar = choices.find('|');
    if (choices.substr(0, bar) == choice)
      return index;
    if (bar == std::string_view::npos)
      return -1;
    choices.remove_prefix(bar + 1);
  }
}

std::string daybreak::abi::weightTypesName(uint8_t types) {
  std::string names;
  for (auto [bit, name] : {std::pair<uint8_t, const char *>{F32, "f32"},
                           {BF16, "bf16"},
                           {F8E4M3, "f8e4m3"},
                           {F4E2M1FN, "f4e2m1fn"},
                           {F8E8M0FNU, "f8e8m0fnu"}})
    if (types & bit)
      names += (names.empty() ? "" : "|") + std::string(name);
  return names;
}

uint8_t daybreak::abi::targetMask(std::string_view name) {
  for (const TargetName &target : kTargetNames)
    if (name == target.name)
      return target.mask;
  return 0;
}

std::string daybreak::abi::targetNames(uint8_t mask,
                                       std::string_view separator) {
  std::string names;
  for (const TargetName &target : kTargetNames)
    if (mask & target.mask) {
      if (!names.empty())
        names += separator;
      names += target.name;
    }
  return names;
}

const char *daybreak::abi::paramTypeName(ParamType type) {
  switch (type) {
  case ParamType::Int:
    return "int";
  case ParamType::Float:
    return "float";
  case ParamType::Bool:
    return "bool";
  case ParamType::String:
    return "string";
  case ParamType::Ints:
    return "ints";
  case ParamType::Enum:
    return "enum";
  }
  return "?";
}
