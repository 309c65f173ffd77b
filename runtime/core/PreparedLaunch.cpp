//===- PreparedLaunch.cpp - Decoding launches against their declarations --===//

#include "runtime/core/PreparedLaunch.h"
#include "runtime/core/Device.h"

#include <algorithm>

using namespace daybreak;
using namespace daybreak::runtime;
using abi::ArgKind;
using abi::ParamType;

/// The kernel ABI's bit for a stored weight type (0: none reads it).
static uint8_t weightTypeBit(artifact::DType dtype) {
  switch (dtype) {
  case artifact::F32:
    return abi::F32;
  case artifact::BF16:
    return abi::BF16;
  case artifact::F8E4M3FN:
    return abi::F8E4M3;
  case artifact::F4E2M1FN:
    return abi::F4E2M1FN;
  case artifact::F8E8M0FNU:
    return abi::F8E8M0FNU;
  default:
    return 0;
  }
}

/// Resolves operand `op` into `arg`, checking it against the slot's kind
/// and, for a weight, its stored type against the slot's.
static Status prepareArg(const artifact::Manifest &m, const artifact::Step &step,
                         const artifact::Operand &op, const abi::ArgDecl &decl,
                         ArgKind kind, PreparedArg &arg) {
  const char *role = decl.role;
  std::string slot = std::string("operand '") + role + "'";
  using Kind = PreparedArg::Kind;
  switch (op.kind_case()) {
  case artifact::Operand::kAbsent:
    if (kind != ArgKind::Optional)
      return Status::error(slot + " is required but absent");
    arg.kind = Kind::Absent;
    return Status::success();
  case artifact::Operand::kCache: {
    if (kind != ArgKind::Cache && kind != ArgKind::State)
      return Status::error(slot + " is a tensor, got a cache");
    if (op.cache() >= uint32_t(m.caches_size()))
      return Status::error(slot + " names cache " + std::to_string(op.cache()) +
                           " of " + std::to_string(m.caches_size()));
    const artifact::Cache &c = m.caches(op.cache());
    bool isState = c.kind() == artifact::CACHE_SLOT_STATE;
    if (isState != (kind == ArgKind::State))
      return Status::error(slot + " takes " +
                           (isState ? "a cache of rows" : "per-slot state") +
                           ", got '" + c.name() + "'");
    arg.kind = Kind::Cache;
    arg.index = op.cache();
    return Status::success();
  }
  case artifact::Operand::kWeight: {
    if (kind == ArgKind::Cache || kind == ArgKind::State)
      return Status::error(slot + " is a cache, got a weight");
    if (op.weight() >= uint32_t(m.weights_size()))
      return Status::error(slot + " names weight " +
                           std::to_string(op.weight()) + " of " +
                           std::to_string(m.weights_size()));
    const artifact::Weight &w = m.weights(op.weight());
    if (w.shape_size() > int(kMaxRank))
      return Status::error(slot + ": weight '" + w.name() + "' has rank " +
                           std::to_string(w.shape_size()));
    if (!(weightTypeBit(w.dtype()) & decl.weightTypes))
      return Status::error(slot + " holds weight '" + w.name() + "' stored as " +
                           artifact::DType_Name(w.dtype()) +
                           "; the kernel reads " +
                           abi::weightTypesName(decl.weightTypes));
    arg.kind = Kind::Weight;
    arg.index = op.weight();
    arg.dtype = w.dtype();
    arg.rank = w.shape_size();
    for (int d = 0; d < w.shape_size(); ++d)
      arg.constant[d] = w.shape(d);
    return Status::success();
  }
  case artifact::Operand::kBuffer: {
    if (kind == ArgKind::Cache || kind == ArgKind::State)
      return Status::error(slot + " is a cache, got a buffer");
    if (op.buffer() >= uint32_t(step.buffers_size()))
      return Status::error(slot + " names buffer " +
                           std::to_string(op.buffer()) + " of " +
                           std::to_string(step.buffers_size()));
    const artifact::Buffer &b = step.buffers(op.buffer());
    if (b.dims_size() > int(kMaxRank))
      return Status::error(slot + ": buffer '" + b.name() + "' has rank " +
                           std::to_string(b.dims_size()));
    // A column view: rows row_stride elements apart, in a slot that takes
    // one.
    int64_t rowStride = b.row_stride();
    if (rowStride != 0 && !decl.columnView)
      return Status::error(slot + ": buffer '" + b.name() +
                           "' is a column view (rows " +
                           std::to_string(rowStride) +
                           " elements apart); the kernel reads dense rows");
    if (rowStride != 0 &&
        (b.dims_size() == 0 || b.dims(b.dims_size() - 1).coeffs_size() != 0 ||
         b.dims(b.dims_size() - 1).constant() > rowStride))
      return Status::error(slot + ": column view '" + b.name() +
                           "' has rows wider than their stride " +
                           std::to_string(rowStride));
    // The largest extent each dim reaches, at the step's maximum sizes.
    int64_t maxElements = 1;
    for (int d = 0; d < b.dims_size(); ++d) {
      const artifact::SizeExpr &e = b.dims(d);
      if (e.coeffs_size() > 1)
        return Status::error(slot + ": buffer '" + b.name() +
                             "' depends on sizes other than tokens");
      arg.constant[d] = e.constant();
      arg.perToken[d] = e.coeffs_size() ? e.coeffs(0) : 0;
      int64_t maxTokens = step.max_sizes_size() ? step.max_sizes(0) : 0;
      int64_t extent;
      if (arg.constant[d] < 0 || arg.perToken[d] < 0 ||
          __builtin_mul_overflow(arg.perToken[d], maxTokens, &extent) ||
          __builtin_add_overflow(extent, arg.constant[d], &extent) ||
          extent < 0 ||
          __builtin_mul_overflow(maxElements, extent, &maxElements))
        return Status::error(slot + ": buffer '" + b.name() +
                             "' has an invalid extent");
    }
    // A view spans its rows up to the last one's columns.
    if (rowStride != 0 && maxElements != 0) {
      int64_t columns = arg.constant[b.dims_size() - 1];
      int64_t rows = maxElements / columns;
      if (__builtin_mul_overflow(rows - 1, rowStride, &maxElements) ||
          __builtin_add_overflow(maxElements, columns, &maxElements))
        return Status::error(slot + ": buffer '" + b.name() +
                             "' has an invalid extent");
    }
    uint64_t bytes = 0;
    if (b.dtype() == artifact::DTYPE_UNSPECIFIED ||
        __builtin_mul_overflow(uint64_t(maxElements),
                               uint64_t(elementBytes(b.dtype())), &bytes) ||
        b.offset() > step.arena_size() || bytes > step.arena_size() - b.offset())
      return Status::error(slot + ": buffer '" + b.name() +
                           "' runs past the step's arena");
    arg.kind = Kind::Buffer;
    arg.index = op.buffer();
    arg.dtype = b.dtype();
    arg.rank = b.dims_size();
    arg.offset = b.offset();
    arg.rowStride = rowStride;
    return Status::success();
  }
  default:
    return Status::error(slot + " is empty");
  }
}

/// Decodes attribute `a` as parameter `index` of `decl` into `value`.
static Status prepareParam(const abi::KernelDecl &decl, unsigned index,
                           const artifact::Attr &a, ParamValue &value) {
  const abi::ParamDecl &param = decl.params[index];
  std::string what = std::string("parameter '") + param.name + "'";
  auto expect = [&](artifact::Attr::ValueCase c) {
    return a.value_case() == c
               ? Status::success()
               : Status::error(what + " must be " +
                               abi::paramTypeName(param.type));
  };
  if (value.present)
    return Status::error(what + " is given twice");
  value.present = true;
  switch (param.type) {
  case ParamType::Int:
    value.i = a.i();
    return expect(artifact::Attr::kI);
  case ParamType::Bool:
    value.i = a.i() != 0;
    if (a.value_case() == artifact::Attr::kI && a.i() != 0 && a.i() != 1)
      return Status::error(what + " must be 0 or 1");
    return expect(artifact::Attr::kI);
  case ParamType::Float:
    value.f = a.f();
    return expect(artifact::Attr::kF);
  case ParamType::String:
    value.s = a.s();
    return expect(artifact::Attr::kS);
  case ParamType::Ints:
    value.ints.assign(a.ints().values().begin(), a.ints().values().end());
    return expect(artifact::Attr::kInts);
  case ParamType::Enum: {
    Status status = expect(artifact::Attr::kS);
    if (!status.ok())
      return status;
    value.s = a.s();
    value.i = decl.enumIndex(index, a.s());
    if (value.i < 0)
      return Status::error(what + " is '" + a.s() + "', not one of " +
                           param.choices);
    return Status::success();
  }
  }
  return Status::error(what + " has an unknown type");
}

/// An MXFP4 expert launch reads its packed values and scales by the
/// weight's shape: [E, N, K] values (K whole blocks of 32), [E, N, K / 32]
/// scales and an [E, N] bias, all weights (a buffer holds no packed
/// values), so the kernels never read past them.
static Status checkMxfp4Experts(const artifact::Manifest &m,
                                const PreparedLaunch &p, unsigned valuesSlot,
                                unsigned scalesSlot, unsigned biasSlot) {
  const PreparedArg &values = p.args[valuesSlot], &scales = p.args[scalesSlot];
  if (values.kind != PreparedArg::Kind::Weight ||
      scales.kind != PreparedArg::Kind::Weight)
    return Status::error("reads MXFP4 values and scales that are not weights");
  const artifact::Weight &w = m.weights(values.index);
  const artifact::Weight &s = m.weights(scales.index);
  if (w.shape_size() != 3 || s.shape_size() != 3 || w.shape(2) % 32 != 0 ||
      s.shape(0) != w.shape(0) || s.shape(1) != w.shape(1) ||
      s.shape(2) != w.shape(2) / 32)
    return Status::error("MXFP4 weight '" + w.name() + "' and scales '" +
                         s.name() +
                         "' are not [E, N, K] values with [E, N, K / 32] "
                         "scales");
  const PreparedArg &bias = p.args[biasSlot];
  if (bias.kind != PreparedArg::Kind::Absent &&
      (bias.rank != 2 || bias.perToken[0] || bias.perToken[1] ||
       bias.constant[0] != w.shape(0) || bias.constant[1] != w.shape(1)))
    return Status::error("the bias of MXFP4 weight '" + w.name() +
                         "' is not [E, N]");
  return Status::success();
}

/// Where a kernel with a RoPE prologue declares its fields.
struct RopeFields {
  unsigned positions, style, offset, dim, theta, yarnFirst, yarnLast;
};
constexpr RopeFields kCacheWriteRope{
    abi::CacheWrite::In::positions,   abi::CacheWrite::P::rope_style,
    abi::CacheWrite::P::rope_offset,  abi::CacheWrite::P::rope_dim,
    abi::CacheWrite::P::theta,        abi::CacheWrite::P::yarn_factor,
    abi::CacheWrite::P::yarn_truncate};
constexpr RopeFields kRope{
    abi::Rope::In::positions,   abi::Rope::P::style, abi::Rope::P::offset,
    abi::Rope::P::dim,          abi::Rope::P::theta, abi::Rope::P::yarn_factor,
    abi::Rope::P::yarn_truncate};
constexpr RopeFields kIndexerRope{abi::DsaIndexerScores::In::positions,
                                  abi::DsaIndexerScores::P::rope_style,
                                  abi::DsaIndexerScores::P::rope_offset,
                                  abi::DsaIndexerScores::P::rope_dim,
                                  abi::DsaIndexerScores::P::theta,
                                  abi::DsaIndexerScores::P::yarn_factor,
                                  abi::DsaIndexerScores::P::yarn_truncate};

/// A RoPE prologue's fields (rope_style, rope_offset, rope_dim, theta and
/// the positions operand; YaRN's all or none, and only with them) come
/// together: whether the launch has one.
static StatusOr<bool> ropePrologue(const PreparedLaunch &p,
                                   const RopeFields &f) {
  unsigned rope = p.args[f.positions].kind != PreparedArg::Kind::Absent;
  for (unsigned i : {f.style, f.offset, f.dim, f.theta})
    rope += p.params[i].present;
  if (rope != 0 && rope != 5)
    return Status::error("has some of a RoPE prologue's fields (rope_style, "
                         "rope_offset, rope_dim, theta, positions), not all");
  unsigned yarn = 0;
  for (unsigned i = f.yarnFirst; i <= f.yarnLast; ++i)
    yarn += p.params[i].present;
  if (yarn != 0 && (rope == 0 || yarn != f.yarnLast - f.yarnFirst + 1))
    return Status::error("has some of the yarn_* parameters, not all, or "
                         "without RoPE");
  return rope != 0;
}

/// A RoPE prologue rotates [rope_offset, rope_offset + rope_dim), an even
/// count, of heads of `head` columns, with a positive theta.
static Status checkRopeColumns(const PreparedLaunch &p, const RopeFields &f,
                               int64_t head) {
  int64_t offset = p.params[f.offset].i, dim = p.params[f.dim].i;
  if (dim <= 0 || dim % 2 != 0 || offset < 0 || dim > head - offset)
    return Status::error("rotates columns [" + std::to_string(offset) + ", +" +
                         std::to_string(dim) +
                         ") (an even count) of heads of " +
                         std::to_string(head));
  if (!(p.params[f.theta].f > 0.0))
    return Status::error("has a RoPE theta that is not positive");
  return Status::success();
}

/// A cache write reads a column view only of rows [T, W]. Its prologue's
/// fields come together: the norm's (norm, norm_dim, eps and its weight; a
/// bias only for a layer norm) and RoPE's (rope_style, offset, dim, theta
/// and the positions; YaRN's all or none), on rows [T, W] of a constant W
/// that hold the normalised prefix and the rotated columns of each head,
/// with a weight (and bias) of norm_dim values.
static Status checkCacheWrite(const PreparedLaunch &p) {
  using In = abi::CacheWrite::In;
  using P = abi::CacheWrite::P;
  auto present = [&](unsigned slot) {
    return p.args[slot].kind != PreparedArg::Kind::Absent;
  };
  auto countParams = [&](std::initializer_list<unsigned> params) {
    unsigned n = 0;
    for (unsigned i : params)
      n += p.params[i].present;
    return n;
  };
  unsigned norm =
      countParams({P::norm, P::norm_dim, P::eps}) + present(In::norm_weight);
  if (norm != 0 && norm != 4)
    return Status::error("has some of a norm prologue's fields (norm, "
                         "norm_dim, eps, norm_weight), not all");
  if (present(In::norm_bias) &&
      (norm == 0 || p.params[P::norm].i != abi::CacheWrite::layer))
    return Status::error("has a norm_bias without a layer norm");
  StatusOr<bool> hasRope = ropePrologue(p, kCacheWriteRope);
  if (!hasRope.ok())
    return hasRope.error();
  const bool rope = *hasRope;
  if (p.params[P::rope_head_dim].present && !rope)
    return Status::error("has a rope_head_dim without RoPE");
  const PreparedArg &values = p.args[In::values];
  if (values.rowStride != 0 && values.rank != 2)
    return Status::error("writes a column view of values that are not "
                         "[tokens, width]");
  if (norm == 0 && !rope)
    return Status::success();
  if (values.rank != 2 || values.perToken[1] != 0)
    return Status::error("normalises or rotates rows of values that are not "
                         "[tokens, width]");
  int64_t width = values.constant[1];
  if (norm) {
    int64_t normDim = p.params[P::norm_dim].i;
    if (normDim <= 0 || normDim > width)
      return Status::error("normalises " + std::to_string(normDim) +
                           " columns of rows of " + std::to_string(width));
    for (unsigned slot : {unsigned(In::norm_weight), unsigned(In::norm_bias)}) {
      const PreparedArg &w = p.args[slot];
      if (w.kind != PreparedArg::Kind::Absent &&
          (w.rank != 1 || w.perToken[0] != 0 || w.constant[0] != normDim))
        return Status::error(
            std::string("has a ") +
            (slot == In::norm_weight ? "norm_weight" : "norm_bias") +
            " that is not [norm_dim] (" + std::to_string(normDim) + ")");
    }
  }
  if (rope) {
    int64_t head = p.params[P::rope_head_dim].present
                       ? p.params[P::rope_head_dim].i
                       : width;
    if (head <= 0 || width % head != 0)
      return Status::error("rotates heads of " + std::to_string(head) +
                           " columns in rows of " + std::to_string(width));
    return checkRopeColumns(p, kCacheWriteRope, head);
  }
  return Status::success();
}

/// An indexer's query prologue rotates the columns of each [D] head of
/// queries [T, H, D].
static Status checkIndexerScores(const PreparedLaunch &p) {
  using In = abi::DsaIndexerScores::In;
  StatusOr<bool> rope = ropePrologue(p, kIndexerRope);
  if (!rope.ok())
    return rope.error();
  if (!*rope)
    return Status::success();
  const PreparedArg &q = p.args[In::queries];
  if (q.rank != 3 || q.perToken[2] != 0)
    return Status::error("rotates queries that are not [tokens, heads, dim]");
  return checkRopeColumns(p, kIndexerRope, q.constant[2]);
}

/// A rope reads and writes rows of one constant width, YaRN's fields all
/// or none, and rotates [offset, offset + dim) of each row, or of each head
/// of head_dim columns of rows [T, W] (checkRopeColumns).
static Status checkRope(const PreparedLaunch &p) {
  using In = abi::Rope::In;
  using P = abi::Rope::P;
  unsigned yarn = 0;
  for (unsigned i = kRope.yarnFirst; i <= kRope.yarnLast; ++i)
    yarn += p.params[i].present;
  if (yarn != 0 && yarn != kRope.yarnLast - kRope.yarnFirst + 1)
    return Status::error("has some of the yarn_* parameters, not all");
  const PreparedArg &x = p.args[In::input], &out = p.args[p.numOperands];
  unsigned last = x.rank - 1;
  if (x.rank == 0 || out.rank != x.rank || x.perToken[last] ||
      out.perToken[last] || out.constant[last] != x.constant[last])
    return Status::error("rotates input and output rows that are not of one "
                         "constant width");
  int64_t width = x.constant[last], head = width;
  if (p.params[P::head_dim].present) {
    head = p.params[P::head_dim].i;
    if (x.rank != 2 || head <= 0 || width % head != 0)
      return Status::error("rotates heads of " + std::to_string(head) +
                           " columns of rows that are not [tokens, width] "
                           "of whole heads");
  }
  return checkRopeColumns(p, kRope, head);
}

/// A dense attention launch reads q [T, Hq, D] and writes [T, Hq, Dv] by
/// the K and V caches' widths (rows of kv_heads x D and kv_heads x Dv), so
/// the kernels never read or write past them; a window cache must hold the
/// launch's window.
static Status checkAttention(const artifact::Manifest &m,
                             const PreparedLaunch &p) {
  using In = abi::Attention::In;
  using P = abi::Attention::P;
  const PreparedArg &q = p.args[In::q], &out = p.args[p.numOperands];
  int64_t kvHeads = p.params[P::kv_heads].i;
  if (kvHeads <= 0)
    return Status::error("has kv_heads " + std::to_string(kvHeads));
  if (p.params[P::window].present && p.params[P::window].i <= 0)
    return Status::error("has window " +
                         std::to_string(p.params[P::window].i));
  if (q.rank != 3 || q.perToken[1] || q.perToken[2] || out.rank != 3 ||
      out.perToken[1] || out.perToken[2] || q.constant[1] % kvHeads != 0)
    return Status::error("expects q [T, Hq, D] and output [T, Hq, Dv] with "
                         "Hq a multiple of kv_heads (" +
                         std::to_string(kvHeads) + ")");
  int64_t heads = q.constant[1], dims[2] = {q.constant[2], 0};
  for (unsigned slot : {In::k, In::v}) {
    const artifact::Cache &c = m.caches(p.args[slot].index);
    bool isK = slot == In::k;
    if (c.kind() == artifact::CACHE_SLOT_STATE || c.width() % kvHeads != 0 ||
        (isK && c.width() != kvHeads * dims[0]))
      return Status::error("cache '" + c.name() + "' does not hold rows of " +
                           std::to_string(kvHeads) + " heads" +
                           (isK ? " of " + std::to_string(dims[0]) + " values"
                                : std::string()));
    if (!isK)
      dims[1] = c.width() / kvHeads;
    if (!isK && p.params[P::value_columns].present) {
      // Values as the prefix of one KV head's rows: for a scaled FP8 row,
      // exactly its scaled part (the bf16 tail follows its scales).
      int64_t columns = p.params[P::value_columns].i;
      int64_t limit = c.format() == artifact::CACHE_FP8_SCALED
                          ? c.width() - c.tail_dim()
                          : c.width();
      if (kvHeads != 1 || columns <= 0 || columns > limit ||
          (c.format() == artifact::CACHE_FP8_SCALED && columns != limit))
        return Status::error("reads value_columns " + std::to_string(columns) +
                             " of cache '" + c.name() + "' (" +
                             std::to_string(kvHeads) +
                             " KV heads; a prefix of one head's " +
                             std::to_string(limit) + " values is required)");
      dims[1] = columns;
    }
    if (c.kind() == artifact::CACHE_WINDOW &&
        (!p.params[P::window].present || p.params[P::window].i > c.window()))
      return Status::error("reads window cache '" + c.name() + "' (window " +
                           std::to_string(c.window()) +
                           ") without a window that fits it");
  }
  if (out.constant[1] != heads || out.constant[2] != dims[1])
    return Status::error("writes an output of " +
                         std::to_string(out.constant[1]) + " x " +
                         std::to_string(out.constant[2]) + " per token, not " +
                         std::to_string(heads) + " x " +
                         std::to_string(dims[1]));
  const PreparedArg &sinks = p.args[In::sinks];
  if (sinks.kind != PreparedArg::Kind::Absent &&
      (sinks.rank != 1 || sinks.perToken[0] || sinks.constant[0] != heads))
    return Status::error("has sinks that are not [" + std::to_string(heads) +
                         "]");
  return Status::success();
}

/// The online route's conversion writes S whole experts into a workspace:
/// codes [S, N, K] E4M3, block scales [S, N, K / 32] and bias rows [S, N]
/// f32 buffers of the weight's N and K (S = E where it converts every
/// expert: `all`), so the kernels never write past them.
static Status checkMxfp4WorkspaceBuffers(const artifact::Weight &w,
                                         const PreparedArg &codes,
                                         const PreparedArg &scales,
                                         const PreparedArg &bias, bool all) {
  // `a` has exactly the static extents `dims`.
  auto fixed = [](const PreparedArg &a, std::initializer_list<int64_t> dims) {
    if (a.rank != dims.size())
      return false;
    unsigned d = 0;
    for (int64_t size : dims) {
      if (a.perToken[d] || a.constant[d] != size)
        return false;
      ++d;
    }
    return true;
  };
  int64_t s = codes.constant[0]; // the workspace's slots
  if (codes.dtype != artifact::F8E4M3FN || scales.dtype != artifact::F32 ||
      bias.dtype != artifact::F32 || s < 1 || s > w.shape(0) ||
      !fixed(codes, {s, w.shape(1), w.shape(2)}) ||
      !fixed(scales, {s, w.shape(1), w.shape(2) / 32}) ||
      !fixed(bias, {s, w.shape(1)}))
    return Status::error("the FP8 workspace of MXFP4 weight '" + w.name() +
                         "' is not E4M3 [S, N, K] codes, f32 [S, N, K / 32] "
                         "scales and f32 [S, N] bias rows, 1 <= S <= E");
  if (all && s != w.shape(0))
    return Status::error("the FP8 workspace of MXFP4 weight '" + w.name() +
                         "' has " + std::to_string(s) +
                         " slots, but converting every expert needs E = " +
                         std::to_string(w.shape(0)));
  return Status::success();
}

/// mxfp4_to_fp8_all_experts: the experts and a workspace of every one.
static Status checkMxfp4AllExperts(const artifact::Manifest &m,
                                   const PreparedLaunch &p) {
  using In = abi::Mxfp4ToFp8AllExperts::In;
  using Out = abi::Mxfp4ToFp8AllExperts::Out;
  DAYBREAK_RETURN_IF_ERROR(
      checkMxfp4Experts(m, p, In::weight, In::scales, In::bias));
  if (p.i(abi::Mxfp4ToFp8AllExperts::P::from_tokens) < 1)
    return Status::error("from_tokens must be positive");
  return checkMxfp4WorkspaceBuffers(
      m.weights(p.args[In::weight].index), p.args[p.numOperands + Out::codes],
      p.args[p.numOperands + Out::block_scales],
      p.args[p.numOperands + Out::slot_bias], /*all=*/true);
}

/// mxfp4_to_fp8_experts: its workspace, and remapped indices of the
/// indices' shape.
static Status checkMxfp4Workspace(const artifact::Manifest &m,
                                  const PreparedLaunch &p) {
  using In = abi::Mxfp4ToFp8Experts::In;
  using Out = abi::Mxfp4ToFp8Experts::Out;
  using P = abi::Mxfp4ToFp8Experts::P;
  DAYBREAK_RETURN_IF_ERROR(
      checkMxfp4Experts(m, p, In::weight, In::scales, In::bias));
  const artifact::Weight &w = m.weights(p.args[In::weight].index);
  bool all = p.has(P::all_from_tokens);
  if (all && p.i(P::all_from_tokens) < 1)
    return Status::error("all_from_tokens must be positive");
  DAYBREAK_RETURN_IF_ERROR(
      checkMxfp4WorkspaceBuffers(w, p.args[p.numOperands + Out::codes],
                                 p.args[p.numOperands + Out::block_scales],
                                 p.args[p.numOperands + Out::slot_bias], all));
  const PreparedArg &indices = p.args[In::indices];
  const PreparedArg &slots = p.args[p.numOperands + Out::slots];
  if (slots.rank != 2 || indices.rank != 2 ||
      slots.constant[1] != indices.constant[1] ||
      slots.perToken[0] != indices.perToken[0] ||
      slots.constant[0] != indices.constant[0])
    return Status::error("the remapped indices of MXFP4 weight '" + w.name() +
                         "' do not have the indices' shape");
  return Status::success();
}

/// Decodes launch `l` of `step` into `p`.
static Status prepareLaunch(const artifact::Manifest &m,
                            const artifact::Step &step,
                            const artifact::Launch &l, PreparedLaunch &p) {
  const abi::KernelDecl *decl = abi::findKernel(l.kernel());
  if (!decl)
    return Status::error("no kernel '" + l.kernel() +
                         "' is declared (runtime/abi/Kernels.def)");
  p.kernel = decl->id;
  p.specialized = l.specialized();
  if (l.queue() > 1)
    return Status::error("names queue " + std::to_string(l.queue()) +
                         "; a step has queues 0 (main) and 1 (side)");
  if (l.queue() && l.join_queue())
    return Status::error("runs on the side queue and joins it");
  p.queue = uint8_t(l.queue());
  p.joinQueue = l.join_queue();
  // Operand slots by declaration; a variadic last slot takes the rest.
  unsigned declared = decl->numOperands();
  unsigned given = l.operands_size();
  if (decl->isVariadic() ? given + 1 < declared : given != declared)
    return Status::error("expects " + std::to_string(declared) +
                         " operand slots, got " + std::to_string(given));
  if (unsigned(l.results_size()) != decl->numResults())
    return Status::error("expects " + std::to_string(decl->numResults()) +
                         " results, got " + std::to_string(l.results_size()));
  if (given + decl->numResults() > kMaxLaunchArgs)
    return Status::error("has " + std::to_string(given + decl->numResults()) +
                         " operands and results; at most " +
                         std::to_string(kMaxLaunchArgs) + " are supported");
  p.numOperands = given;
  p.numResults = decl->numResults();
  p.args.resize(given + p.numResults);
  for (unsigned i = 0; i < given; ++i) {
    const abi::ArgDecl &slot = decl->operands[std::min(i, declared - 1)];
    ArgKind kind = slot.kind == ArgKind::Variadic ? ArgKind::Tensor : slot.kind;
    DAYBREAK_RETURN_IF_ERROR(
        prepareArg(m, step, l.operands(i), slot, kind, p.args[i]));
  }
  for (unsigned r = 0; r < p.numResults; ++r) {
    DAYBREAK_RETURN_IF_ERROR(prepareArg(m, step, l.results(r),
                                        decl->results[r], ArgKind::Tensor,
                                        p.args[given + r]));
    if (p.args[given + r].kind != PreparedArg::Kind::Buffer)
      return Status::error(std::string("result '") + decl->results[r].role +
                           "' is not a buffer");
  }
  // Parameters: each declared, of its type; the required ones present.
  p.params.assign(decl->numParams(), ParamValue());
  for (const artifact::Attr &a : l.attrs()) {
    int index = decl->paramIndex(a.name());
    if (index < 0)
      return Status::error("'" + a.name() + "' is not a parameter of '" +
                           l.kernel() + "'");
    DAYBREAK_RETURN_IF_ERROR(prepareParam(*decl, index, a, p.params[index]));
  }
  for (unsigned i = 0; i < p.params.size(); ++i)
    if (!p.params[i].present &&
        decl->params[i].presence == abi::Presence::Required)
      return Status::error(std::string("lacks parameter '") +
                           decl->params[i].name + "'");
  if (p.kernel == abi::KernelId::ExpertMatmul) {
    using In = abi::ExpertMatmul::In;
    bool e4m3 = p.args[In::weight].dtype == artifact::F8E4M3FN;
    bool scaled = p.args[In::weight_scale].kind != PreparedArg::Kind::Absent;
    if (e4m3 != scaled)
      return Status::error(e4m3 ? "reads an e4m3 weight without weight_scale"
                                : "has weight_scale for a weight not in e4m3");
  }
  if (p.kernel == abi::KernelId::Mxfp4ExpertMatmul) {
    using In = abi::Mxfp4ExpertMatmul::In;
    DAYBREAK_RETURN_IF_ERROR(
        checkMxfp4Experts(m, p, In::weight, In::scales, In::bias));
  }
  if (p.kernel == abi::KernelId::Mxfp4ToFp8Experts)
    DAYBREAK_RETURN_IF_ERROR(checkMxfp4Workspace(m, p));
  if (p.kernel == abi::KernelId::Mxfp4ToFp8AllExperts)
    DAYBREAK_RETURN_IF_ERROR(checkMxfp4AllExperts(m, p));
  if (p.kernel == abi::KernelId::Attention)
    DAYBREAK_RETURN_IF_ERROR(checkAttention(m, p));
  if (p.kernel == abi::KernelId::CacheWrite)
    DAYBREAK_RETURN_IF_ERROR(checkCacheWrite(p));
  if (p.kernel == abi::KernelId::DsaIndexerScores)
    DAYBREAK_RETURN_IF_ERROR(checkIndexerScores(p));
  if (p.kernel == abi::KernelId::Rope)
    DAYBREAK_RETURN_IF_ERROR(checkRope(p));
  return Status::success();
}

StatusOr<std::vector<PreparedStep>>
runtime::prepareSteps(const artifact::Manifest &m) {
  std::vector<PreparedStep> steps(m.steps_size());
  uint32_t ordinal = 0;
  for (int s = 0; s < m.steps_size(); ++s) {
    const artifact::Step &step = m.steps(s);
    steps[s].step = &step;
    // Buffers are checked against the arena at the step's planned tokens,
    // the most a run of the step may have: the artifact's max_tokens, or
    // for decode (one token a sequence) at least min(max_tokens, max_batch).
    if (step.max_sizes_size() != 1)
      return Status::error("step '" + step.name() + "' is planned for " +
                           std::to_string(step.max_sizes_size()) +
                           " sizes; steps have one, their tokens");
    int64_t least = step.name() == "decode"
                        ? std::min(m.max_tokens(), m.max_batch())
                        : m.max_tokens();
    if (step.max_sizes(0) < least)
      return Status::error("step '" + step.name() + "' is planned for " +
                           std::to_string(step.max_sizes(0)) +
                           " tokens, fewer than the " + std::to_string(least) +
                           " the artifact's limits allow it");
    steps[s].maxTokens = step.max_sizes(0);
    // The host's buffers by role: int32 inputs, the fp32 logits output.
    struct Role {
      const char *name;
      bool output;
      artifact::DType dtype;
      const artifact::Buffer **slot;
    } roles[] = {{"token_ids", false, artifact::I32, &steps[s].tokenIds},
                 {"positions", false, artifact::I32, &steps[s].positions},
                 {"sequences", false, artifact::I32, &steps[s].sequences},
                 {"logits", true, artifact::F32, &steps[s].logits}};
    for (const artifact::StepIO &io : step.io()) {
      if (io.buffer() >= uint32_t(step.buffers_size()))
        return Status::error("step '" + step.name() + "': its " + io.role() +
                             " names buffer " + std::to_string(io.buffer()) +
                             " of " + std::to_string(step.buffers_size()));
      for (Role &role : roles)
        if (io.role() == role.name && io.output() == role.output)
          *role.slot = &step.buffers(io.buffer());
    }
    for (const Role &role : roles) {
      if (!*role.slot)
        return Status::error("step '" + step.name() + "' has no " +
                             (role.output ? "output" : "input") +
                             " of role '" + role.name + "'");
      if ((*role.slot)->dtype() != role.dtype)
        return Status::error("step '" + step.name() + "': its " + role.name +
                             " buffer holds " +
                             artifact::DType_Name((*role.slot)->dtype()));
    }
    // Optional: the rows whose logits the step computes, [R] int32, and
    // then logits of [R, vocab].
    for (const artifact::StepIO &io : step.io())
      if (io.role() == "logit_rows" && !io.output())
        steps[s].logitRows = &step.buffers(io.buffer());
    if (const artifact::Buffer *rows = steps[s].logitRows) {
      auto fixed = [](const artifact::SizeExpr &d) {
        for (int64_t c : d.coeffs())
          if (c)
            return false;
        return d.constant() > 0;
      };
      const artifact::Buffer &logits = *steps[s].logits;
      if (rows->dtype() != artifact::I32 || rows->dims_size() != 1 ||
          !fixed(rows->dims(0)))
        return Status::error("step '" + step.name() +
                             "': its logit_rows buffer is not [R] int32 of "
                             "a fixed R");
      int64_t count = rows->dims(0).constant();
      if (logits.dims_size() != 2 || !fixed(logits.dims(0)) ||
          logits.dims(0).constant() != count)
        return Status::error("step '" + step.name() + "': it selects " +
                             std::to_string(count) +
                             " logit rows, but its logits are not [" +
                             std::to_string(count) + ", vocab]");
      steps[s].maxLogitRows = count;
    }
    steps[s].launches.resize(step.launches_size());
    for (int i = 0; i < step.launches_size(); ++i) {
      PreparedLaunch &p = steps[s].launches[i];
      p.ordinal = ordinal++;
      p.label = "step '" + step.name() + "' launch " + std::to_string(i) +
                " (" + step.launches(i).kernel() + ")";
      Status status = prepareLaunch(m, step, step.launches(i), p);
      if (status.ok() && p.joinQueue > steps[s].sideLaunches)
        status = Status::error("joins " + std::to_string(p.joinQueue) +
                               " side launches, but only " +
                               std::to_string(steps[s].sideLaunches) +
                               " come before it");
      if (!status.ok())
        return status.withContext(p.label);
      if (p.queue != 0)
        p.sideIndex = steps[s].sideLaunches++;
    }
  }
  return steps;
}

void runtime::bindLaunch(const PreparedLaunch &launch, int64_t tokens,
                         uint64_t arenaBase, const uint64_t *weightAddresses,
                         BoundLaunch &bound) {
  bound.launch = &launch;
  bound.tokens = tokens;
  for (size_t i = 0, e = launch.args.size(); i < e; ++i) {
    const PreparedArg &arg = launch.args[i];
    BoundArg &b = bound.args[i];
    b.arg = &arg;
    b.rank = arg.rank;
    b.rowStride = arg.rowStride;
    for (unsigned d = 0; d < arg.rank; ++d)
      b.shape[d] = arg.constant[d] + arg.perToken[d] * tokens;
    switch (arg.kind) {
    case PreparedArg::Kind::Buffer:
      b.address = arenaBase + arg.offset;
      break;
    case PreparedArg::Kind::Weight:
      b.address = weightAddresses[arg.index];
      break;
    case PreparedArg::Kind::Cache:
      b.address = arg.index;
      break;
    case PreparedArg::Kind::Absent:
      b.address = 0;
      break;
    }
  }
}
