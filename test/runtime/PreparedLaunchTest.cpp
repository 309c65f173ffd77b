//===- PreparedLaunchTest.cpp - The kernel ABI at load and per step -------===//
//
// Launches decoded at load against the kernel declarations: malformed ones
// fail naming the launch; the devices' launcher tables cover exactly the
// kernels declared for them; and running a step allocates nothing on the
// host: binding and dispatch for any device (a counting device), whole
// decode steps on the device DAYBREAK_DEVICE names (default the CPU; the
// CUDA device replays graphs), and prefill and decode steps on the CPU at
// one and three threads. The step tests read the artifact named by
// DAYBREAK_ARTIFACT (lit compiles one: test/tools/step-allocations.test;
// scripts/gpu-tests.sh passes a CUDA one) and skip, saying so, without it.
//
//===----------------------------------------------------------------------===//

#include "runtime/core/Dispatch.h"
#include "runtime/core/LaunchParams.h"
#include "runtime/devices/cpu/CpuDevice.h"
#include "runtime/executor/Model.h"
#ifdef DAYBREAK_HAVE_CUDA
#include "runtime/devices/cuda/CudaDevice.h"
#endif

#include "gtest/gtest.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <initializer_list>
#include <new>
#include <string>
#include <vector>

// Every host allocation of this test binary is counted.
static std::atomic<uint64_t> allocations{0};

void *operator new(size_t size) {
  ++allocations;
  if (void *p = std::malloc(size ? size : 1))
    return p;
  std::abort();
}
// Not inlined: GCC 12 would see std::free meet a pointer from operator new
// and warn (-Wmismatched-new-delete), though this pair is matched.
__attribute__((noinline)) void operator delete(void *p) noexcept {
  std::free(p);
}
__attribute__((noinline)) void operator delete(void *p, size_t) noexcept {
  std::free(p);
}
// The nothrow forms too, so that every block the deletes above free came
// from malloc (a sanitizer build replaces whichever forms are left).
__attribute__((noinline)) void *operator new(size_t size,
                                             const std::nothrow_t &) noexcept {
  ++allocations;
  return std::malloc(size ? size : 1);
}
__attribute__((noinline)) void
operator delete(void *p, const std::nothrow_t &) noexcept {
  std::free(p);
}

using namespace daybreak;
using namespace daybreak::runtime;

namespace {

// (Not the global `abi` that <cxxabi.h> declares.)
namespace abi = daybreak::abi;

/// A step of one rms_norm launch over buffers x [tokens, 8], w [8], out.
artifact::Manifest rmsNormManifest() {
  artifact::Manifest m;
  artifact::Step *step = m.add_steps();
  step->set_name("decode");
  step->add_size_names("tokens");
  step->add_max_sizes(4);
  step->set_arena_size(4096);
  for (const char *name : {"x", "w", "out"}) {
    artifact::Buffer *b = step->add_buffers();
    b->set_name(name);
    b->set_dtype(artifact::F32);
    b->set_offset(step->buffers_size() * 256);
    if (std::string(name) != "w") {
      artifact::SizeExpr *rows = b->add_dims();
      rows->add_coeffs(1);
    }
    b->add_dims()->set_constant(8);
  }
  // The host's buffers by role: three int32 inputs, `out` as the logits.
  for (const char *role : {"token_ids", "positions", "sequences"}) {
    artifact::Buffer *b = step->add_buffers();
    b->set_name(role);
    b->set_dtype(artifact::I32);
    b->set_offset(1024 + 256 * (step->buffers_size() - 4));
    b->add_dims()->add_coeffs(1);
    artifact::StepIO *io = step->add_io();
    io->set_role(role);
    io->set_buffer(step->buffers_size() - 1);
  }
  artifact::StepIO *logits = step->add_io();
  logits->set_role("logits");
  logits->set_buffer(2);
  logits->set_output(true);
  artifact::Launch *l = step->add_launches();
  l->set_kernel("rms_norm");
  l->add_operands()->set_buffer(0);
  l->add_operands()->set_buffer(1);
  l->add_results()->set_buffer(2);
  artifact::Attr *eps = l->add_attrs();
  eps->set_name("eps");
  eps->set_f(1e-6);
  return m;
}

std::string prepareError(const artifact::Manifest &m) {
  StatusOr<std::vector<PreparedStep>> steps = prepareSteps(m);
  return steps.ok() ? "" : steps.error().message();
}

/// The first step's first launch, and its attribute `name` (null if none).
artifact::Launch *launch(artifact::Manifest &m) {
  return m.mutable_steps(0)->mutable_launches(0);
}
artifact::Attr *attr(artifact::Manifest &m, const std::string &name) {
  for (artifact::Attr &a : *launch(m)->mutable_attrs())
    if (a.name() == name)
      return &a;
  return nullptr;
}

TEST(PreparedLaunch, DecodesAndBindsAWellFormedLaunch) {
  StatusOr<std::vector<PreparedStep>> steps = prepareSteps(rmsNormManifest());
  ASSERT_TRUE(steps.ok()) << steps.error().message();
  const PreparedLaunch &l = (*steps)[0].launches[0];
  EXPECT_EQ(l.kernel, abi::KernelId::RmsNorm);
  EXPECT_EQ(l.f(abi::RmsNorm::P::eps), 1e-6);
  EXPECT_EQ(l.label, "step 'decode' launch 0 (rms_norm)");
  uint64_t weights[1] = {0};
  BoundLaunch bound;
  bindLaunch(l, /*tokens=*/3, /*arenaBase=*/1 << 20, weights, bound);
  EXPECT_EQ(bound.in(abi::RmsNorm::In::input).address, (1u << 20) + 256u);
  EXPECT_EQ(bound.in(abi::RmsNorm::In::input).dim(0), 3);
  EXPECT_EQ(bound.in(abi::RmsNorm::In::input).back(), 8);
  EXPECT_EQ(bound.out(0).numel(), 24);
}

// Tests column views at load: a buffer with a row stride binds, with its
// stride, in a slot Kernels.def marks VIEW; in another slot, or with rows
// wider than the stride, or spanning past the arena, the load fails naming
// the launch and the buffer.
TEST(PreparedLaunch, ColumnViewsOnlyWhereDeclared) {
  const std::string label = "step 'decode' launch 0 (rms_norm): ";
  // x is columns [2, 10) of rows of 16.
  auto viewed = [](int64_t stride) {
    artifact::Manifest m = rmsNormManifest();
    artifact::Buffer *x = m.mutable_steps(0)->mutable_buffers(0);
    x->set_row_stride(stride);
    x->set_offset(x->offset() + 2 * 4);
    return m;
  };
  {
    StatusOr<std::vector<PreparedStep>> steps = prepareSteps(viewed(16));
    ASSERT_TRUE(steps.ok()) << steps.error().message();
    const PreparedLaunch &l = (*steps)[0].launches[0];
    uint64_t weights[1] = {0};
    BoundLaunch bound;
    bindLaunch(l, /*tokens=*/3, /*arenaBase=*/1 << 20, weights, bound);
    const BoundArg &x = bound.in(abi::RmsNorm::In::input);
    EXPECT_EQ(x.address, (1u << 20) + 256u + 8u);
    EXPECT_EQ(x.stride(), 16);
    EXPECT_EQ(x.rows(), 3);
    EXPECT_EQ(x.back(), 8);
    EXPECT_EQ(bound.out(0).stride(), 8); // dense rows
  }
  EXPECT_EQ(prepareError(viewed(6)),
            label + "operand 'input': column view 'x' has rows wider than "
                    "their stride 6");
  // Four rows of 4096 floats run past the arena of 4096 bytes.
  EXPECT_EQ(prepareError(viewed(4096)),
            label + "operand 'input': buffer 'x' runs past the step's arena");
  {
    // matmul's input takes dense rows only.
    artifact::Manifest m = viewed(16);
    artifact::Launch *l = m.mutable_steps(0)->mutable_launches(0);
    l->set_kernel("matmul");
    l->clear_attrs();
    l->add_operands()->set_absent(true);
    EXPECT_EQ(prepareError(m),
              "step 'decode' launch 0 (matmul): operand 'input': buffer "
              "'x' is a column view (rows 16 elements apart); the kernel "
              "reads dense rows");
  }
}

// Tests the queues at load: a side launch gets its place among the step's
// side launches and a later join may wait for it; a queue past the side
// one, a side launch that also joins, and a join of more side launches than
// come before it fail naming the launch.
TEST(PreparedLaunch, QueuesAreCheckedAtLoad) {
  // The rms_norm launch twice: the first on the side queue, the second
  // joining it.
  auto twice = [] {
    artifact::Manifest m = rmsNormManifest();
    artifact::Step *step = m.mutable_steps(0);
    *step->add_launches() = step->launches(0);
    return m;
  };
  {
    artifact::Manifest m = twice();
    m.mutable_steps(0)->mutable_launches(0)->set_queue(1);
    m.mutable_steps(0)->mutable_launches(1)->set_join_queue(1);
    StatusOr<std::vector<PreparedStep>> steps = prepareSteps(m);
    ASSERT_TRUE(steps.ok()) << steps.error().message();
    const PreparedStep &step = (*steps)[0];
    EXPECT_EQ(step.sideLaunches, 1u);
    EXPECT_EQ(step.launches[0].queue, 1);
    EXPECT_EQ(step.launches[0].sideIndex, 0u);
    EXPECT_EQ(step.launches[0].joinQueue, 0u);
    EXPECT_EQ(step.launches[1].queue, 0);
    EXPECT_EQ(step.launches[1].joinQueue, 1u);
  }
  {
    artifact::Manifest m = twice();
    m.mutable_steps(0)->mutable_launches(0)->set_queue(2);
    EXPECT_EQ(prepareError(m),
              "step 'decode' launch 0 (rms_norm): names queue 2; a step has "
              "queues 0 (main) and 1 (side)");
  }
  {
    artifact::Manifest m = twice();
    m.mutable_steps(0)->mutable_launches(0)->set_queue(1);
    m.mutable_steps(0)->mutable_launches(1)->set_queue(1);
    m.mutable_steps(0)->mutable_launches(1)->set_join_queue(1);
    EXPECT_EQ(prepareError(m), "step 'decode' launch 1 (rms_norm): runs on "
                               "the side queue and joins it");
  }
  {
    // The join comes before the side launch it names.
    artifact::Manifest m = twice();
    m.mutable_steps(0)->mutable_launches(0)->set_join_queue(1);
    m.mutable_steps(0)->mutable_launches(1)->set_queue(1);
    EXPECT_EQ(prepareError(m), "step 'decode' launch 0 (rms_norm): joins 1 "
                               "side launches, but only 0 come before it");
  }
}

TEST(PreparedLaunch, MalformedLaunchesFailNamingTheLaunch) {
  const std::string label = "step 'decode' launch 0 (rms_norm): ";
  {
    artifact::Manifest m = rmsNormManifest();
    m.mutable_steps(0)->mutable_launches(0)->set_kernel("rms_normalize");
    EXPECT_NE(prepareError(m).find("no kernel 'rms_normalize' is declared"),
              std::string::npos)
        << prepareError(m);
  }
  {
    artifact::Manifest m = rmsNormManifest();
    m.mutable_steps(0)->mutable_launches(0)->clear_attrs();
    EXPECT_EQ(prepareError(m), label + "lacks parameter 'eps'");
  }
  {
    artifact::Manifest m = rmsNormManifest();
    m.mutable_steps(0)->mutable_launches(0)->mutable_attrs(0)->set_i(1);
    EXPECT_EQ(prepareError(m), label + "parameter 'eps' must be float");
  }
  {
    artifact::Manifest m = rmsNormManifest();
    artifact::Attr *extra = m.mutable_steps(0)->mutable_launches(0)->add_attrs();
    extra->set_name("epsilon");
    extra->set_f(1e-6);
    EXPECT_EQ(prepareError(m),
              label + "'epsilon' is not a parameter of 'rms_norm'");
  }
  {
    artifact::Manifest m = rmsNormManifest();
    m.mutable_steps(0)->mutable_launches(0)->mutable_operands(1)->set_absent(
        true);
    EXPECT_EQ(prepareError(m), label + "operand 'weight' is required but absent");
  }
  {
    artifact::Manifest m = rmsNormManifest();
    m.mutable_steps(0)->mutable_launches(0)->add_operands()->set_buffer(0);
    EXPECT_EQ(prepareError(m), label + "expects 2 operand slots, got 3");
  }
  {
    artifact::Manifest m = rmsNormManifest();
    m.add_caches()->set_name("kv");
    m.mutable_steps(0)->mutable_launches(0)->mutable_operands(0)->set_cache(0);
    EXPECT_EQ(prepareError(m), label + "operand 'input' is a tensor, got a cache");
  }
  {
    artifact::Manifest m = rmsNormManifest();
    m.mutable_steps(0)->mutable_io(1)->set_role("position");
    EXPECT_EQ(prepareError(m),
              "step 'decode' has no input of role 'positions'");
  }
  {
    artifact::Manifest m = rmsNormManifest();
    m.mutable_steps(0)->mutable_buffers(0)->set_offset(4000);
    EXPECT_EQ(prepareError(m),
              label + "operand 'input': buffer 'x' runs past the step's arena");
  }
}

/// rmsNormManifest's step with its launch replaced by an MXFP4 expert
/// matmul: x [tokens, 8] (buffer 0), indices and output buffers, and the
/// weights values F4E2M1FN [4, 8, 64], scales F8E8M0FNU [4, 8, 2] and an
/// [4, 8] bf16 bias.
artifact::Manifest mxfp4Manifest() {
  artifact::Manifest m = rmsNormManifest();
  artifact::Step *step = m.mutable_steps(0);
  step->mutable_buffers(0)->mutable_dims(1)->set_constant(64);
  auto addWeight = [&](const char *name, artifact::DType dtype,
                       std::initializer_list<int64_t> shape) {
    artifact::Weight *w = m.add_weights();
    w->set_name(name);
    w->set_dtype(dtype);
    for (int64_t d : shape)
      w->add_shape(d);
  };
  addWeight("values", artifact::F4E2M1FN, {4, 8, 64});
  addWeight("scales", artifact::F8E8M0FNU, {4, 8, 2});
  addWeight("bias", artifact::BF16, {4, 8});
  artifact::Launch *l = step->mutable_launches(0);
  l->Clear();
  l->set_kernel("mxfp4_expert_matmul");
  l->add_operands()->set_buffer(0);    // input
  l->add_operands()->set_weight(0);    // weight
  l->add_operands()->set_weight(1);    // scales
  l->add_operands()->set_buffer(3);    // indices (token_ids)
  l->add_operands()->set_absent(true); // routing_weights
  l->add_operands()->set_weight(2);    // bias
  l->add_results()->set_buffer(2);
  return m;
}

TEST(PreparedLaunch, Mxfp4ExpertsAreCheckedAtLoad) {
  const std::string label = "step 'decode' launch 0 (mxfp4_expert_matmul): ";
  StatusOr<std::vector<PreparedStep>> steps = prepareSteps(mxfp4Manifest());
  ASSERT_TRUE(steps.ok()) << steps.error().message();
  EXPECT_EQ((*steps)[0].launches[0].kernel, abi::KernelId::Mxfp4ExpertMatmul);
  {
    artifact::Manifest m = mxfp4Manifest();
    m.mutable_weights(0)->set_dtype(artifact::BF16);
    EXPECT_EQ(prepareError(m), label + "operand 'weight' holds weight 'values' "
                                       "stored as BF16; the kernel reads "
                                       "f4e2m1fn");
  }
  {
    artifact::Manifest m = mxfp4Manifest();
    m.mutable_weights(1)->set_shape(2, 4);
    EXPECT_EQ(prepareError(m),
              label + "MXFP4 weight 'values' and scales 'scales' are not "
                      "[E, N, K] values with [E, N, K / 32] scales");
  }
  {
    artifact::Manifest m = mxfp4Manifest();
    m.mutable_steps(0)->mutable_launches(0)->mutable_operands(2)->set_buffer(0);
    EXPECT_EQ(prepareError(m),
              label + "reads MXFP4 values and scales that are not weights");
  }
  {
    artifact::Manifest m = mxfp4Manifest();
    m.mutable_weights(2)->set_shape(1, 9);
    EXPECT_EQ(prepareError(m),
              label + "the bias of MXFP4 weight 'values' is not [E, N]");
  }
}

/// rmsNormManifest's step with its launch replaced by dense attention: q
/// [tokens, 4, 8] (buffer 0) over K and V caches of 2 KV heads (widths 16
/// and 24: values of 12), output [tokens, 4, 12] (buffer 2), positions and
/// sequences by role, sinks [4] (a weight), window 8 on a window cache.
artifact::Manifest attentionManifest() {
  artifact::Manifest m = rmsNormManifest();
  artifact::Step *step = m.mutable_steps(0);
  for (auto [buffer, dims] :
       {std::pair<int, std::vector<int64_t>>{0, {4, 8}}, {2, {4, 12}}}) {
    artifact::Buffer *b = step->mutable_buffers(buffer);
    b->mutable_dims()->RemoveLast();
    for (int64_t d : dims)
      b->add_dims()->set_constant(d);
  }
  for (auto [name, width] : {std::pair<const char *, int64_t>{"k", 16},
                             {"v", 24}}) {
    artifact::Cache *c = m.add_caches();
    c->set_name(name);
    c->set_format(artifact::CACHE_F32);
    c->set_width(width);
    c->set_bytes_per_row(4 * width);
    c->set_kind(artifact::CACHE_WINDOW);
    c->set_window(8);
    c->set_window_rows(11);
  }
  artifact::Weight *sinks = m.add_weights();
  sinks->set_name("sinks");
  sinks->set_dtype(artifact::F32);
  sinks->add_shape(4);
  artifact::Launch *l = step->mutable_launches(0);
  l->Clear();
  l->set_kernel("attention");
  l->add_operands()->set_buffer(0); // q
  l->add_operands()->set_cache(0);  // k
  l->add_operands()->set_cache(1);  // v
  l->add_operands()->set_buffer(4); // positions
  l->add_operands()->set_buffer(5); // sequences
  l->add_operands()->set_weight(0); // sinks
  l->add_results()->set_buffer(2);
  for (auto [name, value] : {std::pair<const char *, int64_t>{"kv_heads", 2},
                             {"window", 8}}) {
    artifact::Attr *a = l->add_attrs();
    a->set_name(name);
    a->set_i(value);
  }
  artifact::Attr *scale = l->add_attrs();
  scale->set_name("scale");
  scale->set_f(0.125);
  return m;
}

TEST(PreparedLaunch, AttentionShapesAreCheckedAtLoad) {
  const std::string label = "step 'decode' launch 0 (attention): ";
  StatusOr<std::vector<PreparedStep>> steps =
      prepareSteps(attentionManifest());
  ASSERT_TRUE(steps.ok()) << steps.error().message();
  EXPECT_EQ((*steps)[0].launches[0].kernel, abi::KernelId::Attention);
  {
    artifact::Manifest m = attentionManifest();
    launch(m)->mutable_attrs(0)->set_i(3);
    EXPECT_EQ(prepareError(m),
              label + "expects q [T, Hq, D] and output [T, Hq, Dv] with Hq "
                      "a multiple of kv_heads (3)");
  }
  {
    artifact::Manifest m = attentionManifest();
    m.mutable_caches(0)->set_width(24);
    m.mutable_caches(0)->set_bytes_per_row(96);
    EXPECT_EQ(prepareError(m), label + "cache 'k' does not hold rows of 2 "
                                       "heads of 8 values");
  }
  {
    artifact::Manifest m = attentionManifest();
    m.mutable_caches(1)->set_width(20);
    m.mutable_caches(1)->set_bytes_per_row(80);
    EXPECT_EQ(prepareError(m), label + "writes an output of 4 x 12 per "
                                       "token, not 4 x 10");
  }
  {
    artifact::Manifest m = attentionManifest();
    launch(m)->mutable_attrs(1)->set_i(9);
    EXPECT_EQ(prepareError(m), label + "reads window cache 'k' (window 8) "
                                       "without a window that fits it");
  }
  {
    artifact::Manifest m = attentionManifest();
    launch(m)->mutable_attrs(1)->set_i(0);
    EXPECT_EQ(prepareError(m), label + "has window 0");
  }
  {
    artifact::Manifest m = attentionManifest();
    m.mutable_weights(0)->set_shape(0, 8);
    EXPECT_EQ(prepareError(m), label + "has sinks that are not [4]");
  }
}

/// rmsNormManifest's step with its launch replaced by a cache write with a
/// prologue: values x [tokens, 8] (buffer 0) into an f32 cache of width 8
/// at the positions (buffer 4), RMS-normalised over all 8 with w (buffer 1),
/// then rotated over [0, 4) of each head of 4 at the positions.
artifact::Manifest cacheWriteManifest() {
  artifact::Manifest m = rmsNormManifest();
  artifact::Cache *c = m.add_caches();
  c->set_name("latent");
  c->set_format(artifact::CACHE_F32);
  c->set_width(8);
  c->set_bytes_per_row(32);
  artifact::Launch *l = m.mutable_steps(0)->mutable_launches(0);
  l->Clear();
  l->set_kernel("cache_write");
  l->add_operands()->set_cache(0);     // cache
  l->add_operands()->set_buffer(0);    // values
  l->add_operands()->set_buffer(4);    // slots
  l->add_operands()->set_absent(true); // sequences
  l->add_operands()->set_buffer(1);    // norm_weight
  l->add_operands()->set_absent(true); // norm_bias
  l->add_operands()->set_buffer(4);    // positions
  auto add = [&](const char *name) {
    artifact::Attr *a = l->add_attrs();
    a->set_name(name);
    return a;
  };
  add("norm")->set_s("rms");
  add("norm_dim")->set_i(8);
  add("eps")->set_f(1e-6);
  add("rope_style")->set_s("half_split");
  add("rope_offset")->set_i(0);
  add("rope_dim")->set_i(4);
  add("rope_head_dim")->set_i(4);
  add("theta")->set_f(1e4);
  return m;
}

TEST(PreparedLaunch, CacheWritePrologueIsCheckedAtLoad) {
  const std::string label = "step 'decode' launch 0 (cache_write): ";
  StatusOr<std::vector<PreparedStep>> steps =
      prepareSteps(cacheWriteManifest());
  ASSERT_TRUE(steps.ok()) << steps.error().message();
  CacheWritePrologue p = cacheWritePrologue((*steps)[0].launches[0]);
  EXPECT_EQ(p.norm, CacheWritePrologue::Norm::Rms);
  EXPECT_EQ(p.normDim, 8);
  EXPECT_TRUE(p.rope);
  EXPECT_FALSE(p.ropeParams.interleaved);
  EXPECT_EQ(p.ropeParams.dim, 4);
  EXPECT_EQ(p.ropeHeadDim, 4);
  {
    artifact::Manifest m = cacheWriteManifest();
    launch(m)->mutable_attrs()->DeleteSubrange(2, 1); // eps
    EXPECT_EQ(prepareError(m), label + "has some of a norm prologue's fields "
                                       "(norm, norm_dim, eps, norm_weight), "
                                       "not all");
  }
  {
    artifact::Manifest m = cacheWriteManifest();
    launch(m)->mutable_operands(5)->set_buffer(1);
    EXPECT_EQ(prepareError(m), label + "has a norm_bias without a layer norm");
  }
  {
    artifact::Manifest m = cacheWriteManifest();
    launch(m)->mutable_operands(6)->set_absent(true);
    EXPECT_EQ(prepareError(m),
              label + "has some of a RoPE prologue's fields (rope_style, "
                      "rope_offset, rope_dim, theta, positions), not all");
  }
  {
    artifact::Manifest m = cacheWriteManifest();
    attr(m, "norm_dim")->set_i(9);
    EXPECT_EQ(prepareError(m), label + "normalises 9 columns of rows of 8");
  }
  {
    artifact::Manifest m = cacheWriteManifest();
    attr(m, "rope_head_dim")->set_i(3);
    EXPECT_EQ(prepareError(m), label + "rotates heads of 3 columns in rows "
                                       "of 8");
  }
  {
    artifact::Manifest m = cacheWriteManifest();
    attr(m, "rope_offset")->set_i(2);
    EXPECT_EQ(prepareError(m), label + "rotates columns [2, +4) (an even "
                                       "count) of heads of 4");
  }
  {
    artifact::Manifest m = cacheWriteManifest();
    attr(m, "norm")->set_s("l2");
    EXPECT_NE(prepareError(m).find("'l2', not one of rms|layer"),
              std::string::npos)
        << prepareError(m);
  }
}

/// rmsNormManifest's step with its launch replaced by a rope of rows
/// x [tokens, 8] (a column view of rows of 16) as heads of 4 (lm.rope's
/// head_dim), rotated over [0, 4) of each at the positions (buffer 4) into
/// out [tokens, 8].
artifact::Manifest ropeRowsManifest() {
  artifact::Manifest m = rmsNormManifest();
  m.mutable_steps(0)->mutable_buffers(0)->set_row_stride(16);
  artifact::Launch *l = launch(m);
  l->Clear();
  l->set_kernel("rope");
  l->add_operands()->set_buffer(0); // input
  l->add_operands()->set_buffer(4); // positions
  l->add_results()->set_buffer(2);
  auto add = [&](const char *name) {
    artifact::Attr *a = l->add_attrs();
    a->set_name(name);
    return a;
  };
  add("dim")->set_i(4);
  add("offset")->set_i(0);
  add("style")->set_s("half_split");
  add("theta")->set_f(1e4);
  add("head_dim")->set_i(4);
  return m;
}

TEST(PreparedLaunch, RopeRowsOfHeadsAreCheckedAtLoad) {
  const std::string label = "step 'decode' launch 0 (rope): ";
  StatusOr<std::vector<PreparedStep>> steps = prepareSteps(ropeRowsManifest());
  ASSERT_TRUE(steps.ok()) << steps.error().message();
  uint64_t weights[1] = {0};
  BoundLaunch bound;
  bindLaunch((*steps)[0].launches[0], /*tokens=*/3, /*arenaBase=*/0, weights,
             bound);
  // A token's two heads lie 4 apart in its row; rows 16 apart in the view,
  // 8 in the output.
  RopeLayout at = ropeLayout(bound);
  EXPECT_EQ(at.rowsPerToken, 2);
  EXPECT_EQ(at.rowDim, 4);
  EXPECT_EQ(at.input.token, 16);
  EXPECT_EQ(at.input.row, 4);
  EXPECT_EQ(at.output.token, 8);
  EXPECT_EQ(at.output.row, 4);
  {
    // Without head_dim: one row a token, rows where the view puts them.
    artifact::Manifest m = ropeRowsManifest();
    launch(m)->mutable_attrs()->DeleteSubrange(4, 1);
    StatusOr<std::vector<PreparedStep>> plain = prepareSteps(m);
    ASSERT_TRUE(plain.ok()) << plain.error().message();
    bindLaunch((*plain)[0].launches[0], 3, 0, weights, bound);
    RopeLayout rows = ropeLayout(bound);
    EXPECT_EQ(rows.rowsPerToken, 1);
    EXPECT_EQ(rows.rowDim, 8);
    EXPECT_EQ(rows.input.token, 16);
    EXPECT_EQ(rows.output.token, 8);
  }
  {
    artifact::Manifest m = ropeRowsManifest();
    attr(m, "head_dim")->set_i(3);
    EXPECT_EQ(prepareError(m), label + "rotates heads of 3 columns of rows "
                                       "that are not [tokens, width] of "
                                       "whole heads");
  }
  {
    artifact::Manifest m = ropeRowsManifest();
    attr(m, "offset")->set_i(2);
    EXPECT_EQ(prepareError(m), label + "rotates columns [2, +4) (an even "
                                       "count) of heads of 4");
  }
  {
    artifact::Manifest m = ropeRowsManifest();
    attr(m, "theta")->set_f(-1.0);
    EXPECT_EQ(prepareError(m), label + "has a RoPE theta that is not positive");
  }
  {
    // The output [8] is not rows of the input's width.
    artifact::Manifest m = ropeRowsManifest();
    launch(m)->mutable_results(0)->set_buffer(1);
    EXPECT_EQ(prepareError(m), label + "rotates input and output rows that "
                                       "are not of one constant width");
  }
}

/// rmsNormManifest's step with its launch replaced by DSA indexer scores
/// whose queries q [tokens, 2, 8] (buffer 6) are rotated over [0, 4) of
/// each head at the positions (buffer 4), scored with weights [tokens, 2]
/// (buffer 7) against an f32 key cache of width 8 into [tokens, 16]
/// (buffer 8).
artifact::Manifest indexerManifest() {
  artifact::Manifest m = rmsNormManifest();
  artifact::Cache *c = m.add_caches();
  c->set_name("keys");
  c->set_format(artifact::CACHE_F32);
  c->set_width(8);
  c->set_bytes_per_row(32);
  artifact::Step *step = m.mutable_steps(0);
  auto buffer = [&](const char *name, std::vector<int64_t> dims) {
    artifact::Buffer *b = step->add_buffers();
    b->set_name(name);
    b->set_dtype(artifact::F32);
    b->set_offset(2048 + 512 * (step->buffers_size() - 7));
    b->add_dims()->add_coeffs(1);
    for (int64_t d : dims)
      b->add_dims()->set_constant(d);
  };
  buffer("q", {2, 8});
  buffer("weights", {2});
  buffer("scores", {16});
  artifact::Launch *l = step->mutable_launches(0);
  l->Clear();
  l->set_kernel("dsa_indexer_scores");
  l->add_operands()->set_buffer(6);    // queries
  l->add_operands()->set_cache(0);     // keys
  l->add_operands()->set_buffer(7);    // weights
  l->add_operands()->set_absent(true); // sequences
  l->add_operands()->set_absent(true); // bounds
  l->add_operands()->set_buffer(4);    // positions
  l->add_results()->set_buffer(8);
  auto add = [&](const char *name) {
    artifact::Attr *a = l->add_attrs();
    a->set_name(name);
    return a;
  };
  add("scale")->set_f(0.5);
  add("rope_style")->set_s("interleaved");
  add("rope_offset")->set_i(0);
  add("rope_dim")->set_i(4);
  add("theta")->set_f(1e4);
  return m;
}

TEST(PreparedLaunch, IndexerQueryRopeIsCheckedAtLoad) {
  const std::string label = "step 'decode' launch 0 (dsa_indexer_scores): ";
  StatusOr<std::vector<PreparedStep>> steps = prepareSteps(indexerManifest());
  ASSERT_TRUE(steps.ok()) << steps.error().message();
  std::optional<RopeParams> rope = indexerQueryRope((*steps)[0].launches[0]);
  ASSERT_TRUE(rope.has_value());
  EXPECT_TRUE(rope->interleaved);
  EXPECT_EQ(rope->offset, 0);
  EXPECT_EQ(rope->dim, 4);
  EXPECT_EQ(rope->theta, 1e4);
  EXPECT_FALSE(rope->yarn);
  {
    // Without the prologue: none decoded.
    artifact::Manifest m = indexerManifest();
    launch(m)->mutable_operands(5)->set_absent(true);
    launch(m)->mutable_attrs()->DeleteSubrange(1, 4);
    StatusOr<std::vector<PreparedStep>> plain = prepareSteps(m);
    ASSERT_TRUE(plain.ok()) << plain.error().message();
    EXPECT_FALSE(indexerQueryRope((*plain)[0].launches[0]).has_value());
  }
  {
    artifact::Manifest m = indexerManifest();
    launch(m)->mutable_operands(5)->set_absent(true);
    EXPECT_EQ(prepareError(m),
              label + "has some of a RoPE prologue's fields (rope_style, "
                      "rope_offset, rope_dim, theta, positions), not all");
  }
  {
    artifact::Manifest m = indexerManifest();
    artifact::Attr *yarn = launch(m)->add_attrs();
    yarn->set_name("yarn_factor");
    yarn->set_f(40.0);
    EXPECT_EQ(prepareError(m), label + "has some of the yarn_* parameters, "
                                       "not all, or without RoPE");
  }
  {
    artifact::Manifest m = indexerManifest();
    attr(m, "rope_offset")->set_i(6);
    EXPECT_EQ(prepareError(m), label + "rotates columns [6, +4) (an even "
                                       "count) of heads of 8");
  }
  {
    artifact::Manifest m = indexerManifest();
    attr(m, "rope_dim")->set_i(3);
    EXPECT_EQ(prepareError(m), label + "rotates columns [0, +3) (an even "
                                       "count) of heads of 8");
  }
  {
    artifact::Manifest m = indexerManifest();
    attr(m, "theta")->set_f(0.0);
    EXPECT_EQ(prepareError(m), label + "has a RoPE theta that is not positive");
  }
}

TEST(PreparedLaunch, EnumChoicesAreTheDeclaredOnes) {
  const abi::KernelDecl &rope = abi::kernel(abi::KernelId::Rope);
  EXPECT_EQ(rope.enumIndex(abi::Rope::P::style, "interleaved"),
            abi::Rope::interleaved);
  EXPECT_EQ(rope.enumIndex(abi::Rope::P::style, "half_split"),
            abi::Rope::half_split);
  const abi::KernelDecl &write = abi::kernel(abi::KernelId::CacheWrite);
  EXPECT_EQ(write.enumIndex(abi::CacheWrite::P::norm, "rms"),
            abi::CacheWrite::rms);
  EXPECT_EQ(write.enumIndex(abi::CacheWrite::P::norm, "layer"),
            abi::CacheWrite::layer);
  EXPECT_EQ(write.enumIndex(abi::CacheWrite::P::rope_style, "interleaved"),
            abi::CacheWrite::interleaved);
  EXPECT_EQ(write.enumIndex(abi::CacheWrite::P::rope_style, "half_split"),
            abi::CacheWrite::half_split);
  const abi::KernelDecl &route = abi::kernel(abi::KernelId::MoeRoute);
  EXPECT_EQ(route.enumIndex(abi::MoeRoute::P::routing, "softmax"),
            abi::MoeRoute::softmax);
  EXPECT_EQ(route.enumIndex(abi::MoeRoute::P::routing, "sigmoid"),
            abi::MoeRoute::sigmoid);
  EXPECT_EQ(route.enumIndex(abi::MoeRoute::P::routing, "softmax_topk"),
            abi::MoeRoute::softmax_topk);
  EXPECT_EQ(route.enumIndex(abi::MoeRoute::P::routing, "relu"), -1);
}

/// Every kernel declared for `target` has a launcher in `table`, and no
/// other kernel does.
template <typename DeviceT>
void expectCovers(const LauncherTable<DeviceT> &table, uint8_t target) {
  for (unsigned i = 0; i < abi::kNumKernels; ++i) {
    const abi::KernelDecl &decl = abi::kernel(abi::KernelId(i));
    EXPECT_EQ(table[decl.id] != nullptr, (decl.targets & target) != 0)
        << decl.name;
  }
}

TEST(PreparedLaunch, LauncherTablesCoverTheDeclaredTargets) {
  expectCovers(cpu::CpuDevice::launchers(), abi::Cpu);
#ifdef DAYBREAK_HAVE_CUDA
  expectCovers(cuda::CudaDevice::launchers(), abi::Cuda);
#endif
}

/// A device that only counts the launches dispatched to it.
struct CountingDevice {
  uint64_t arenaAddress() const { return 1 << 20; }
  const uint64_t *weightAddresses() const { return weights.data(); }
  std::vector<uint64_t> weights;
  uint64_t launched = 0;
};

Status countLaunch(CountingDevice &d, const BoundLaunch &l) {
  ++d.launched;
  return Status::success();
}

const char *artifactPath() { return std::getenv("DAYBREAK_ARTIFACT"); }

TEST(StepAllocations, BindingAndDispatchAllocateNothing) {
  if (!artifactPath())
    GTEST_SKIP() << "set DAYBREAK_ARTIFACT to an artifact (lit does: "
                    "test/tools/step-allocations.test)";
  StatusOr<artifact::ArtifactFile> file =
      artifact::ArtifactFile::open(artifactPath());
  ASSERT_TRUE(file.ok()) << file.error().message();
  StatusOr<std::vector<PreparedStep>> steps = prepareSteps(file->manifest());
  ASSERT_TRUE(steps.ok()) << steps.error().message();
  CountingDevice device;
  device.weights.assign(file->manifest().weights_size(), 0);
  LauncherTable<CountingDevice> table({});
  for (unsigned i = 0; i < abi::kNumKernels; ++i)
    table.set(abi::KernelId(i), &countLaunch);
  ASSERT_TRUE(table.check(*steps, "counting").ok());
  uint64_t expected = 0;
  uint64_t before = allocations.load();
  for (const PreparedStep &step : *steps)
    for (int64_t tokens : {int64_t(1), step.step->max_sizes(0)}) {
      for (const PreparedLaunch &l : step.launches) {
        Status status = dispatch(device, table, l, tokens);
        if (!status.ok())
          ADD_FAILURE() << status.message();
      }
      expected += step.launches.size();
    }
  EXPECT_EQ(allocations.load() - before, 0u);
  EXPECT_EQ(device.launched, expected);
}

/// The device the step tests run on: DAYBREAK_DEVICE, else the CPU.
std::string deviceName() {
  const char *name = std::getenv("DAYBREAK_DEVICE");
  return name ? name : "cpu";
}

/// Tokens of `count` consecutive positions of one sequence.
struct Run {
  int32_t sequence, position, count;
};

/// A step's inputs: the tokens of `runs`, packed in order, positions taken
/// modulo the model's maximum sequence length and ids drawn from `seed`.
StepInputs stepInputs(const Model &model, uint32_t seed,
                      std::initializer_list<Run> runs) {
  StepInputs inputs;
  for (const Run &run : runs)
    for (int32_t i = 0; i < run.count; ++i) {
      seed = seed * 1664525u + 1013904223u;
      inputs.ids.push_back(
          static_cast<int32_t>((seed >> 8) % model.vocabSize()));
      inputs.positions.push_back(
          static_cast<int32_t>((run.position + i) % model.maxSeqLen()));
      inputs.sequences.push_back(run.sequence);
    }
  return inputs;
}

/// One step to run: which, on what, and where its logits go.
struct StepRun {
  const PreparedStep *step;
  StepInputs inputs;
};

/// Gives every row the runs will write a page first, so that the counted
/// steps measure the steps alone (a serving loop takes pages as sequences
/// grow; the page allocator is tested on its own).
void reservePages(Model &model, const std::vector<std::vector<StepRun>> &all) {
  std::vector<int64_t> rows(model.maxBatch(), 0);
  for (const std::vector<StepRun> &round : all)
    for (const StepRun &run : round)
      for (size_t t = 0; t < run.inputs.ids.size(); ++t)
        rows[run.inputs.sequences[t]] = std::max<int64_t>(
            rows[run.inputs.sequences[t]], run.inputs.positions[t] + 1);
  for (int64_t seq = 0; seq < model.maxBatch(); ++seq)
    if (rows[seq]) {
      Status status = model.reserve(seq, rows[seq]);
      ASSERT_TRUE(status.ok()) << status.message();
    }
}

/// Runs rounds[0] (one step of each shape: the warm-up), then the other
/// rounds (the same shapes on other tokens and positions), and returns the
/// host allocations of the later rounds. `logits[i]` ends with step i's
/// logits of the last round.
uint64_t allocationsAfterWarmUp(Model &model,
                                const std::vector<std::vector<StepRun>> &rounds,
                                std::vector<std::vector<float>> &logits) {
  logits.assign(rounds[0].size(), {});
  for (size_t r = 0; r < rounds.size(); ++r) {
    uint64_t before = allocations.load();
    for (size_t i = 0; i < rounds[r].size(); ++i) {
      const StepRun &run = rounds[r][i];
      Status status = model.run(*run.step, run.inputs, logits[i]);
      if (!status.ok()) {
        ADD_FAILURE() << run.step->step->name() << ": " << status.message();
        return 0;
      }
    }
    if (r == 0)
      continue;
    if (uint64_t during = allocations.load() - before)
      return during;
  }
  return 0;
}

/// Decode steps of one sequence and of two, over `rounds` rounds.
std::vector<std::vector<StepRun>>
decodeRounds(const Model &model, const PreparedStep *decode, int rounds) {
  std::vector<std::vector<StepRun>> all;
  int32_t second =
      static_cast<int32_t>(std::min<int64_t>(model.maxBatch(), 2) - 1);
  for (int r = 0; r < rounds; ++r) {
    uint32_t seed = 1000u * r;
    all.push_back(
        {{decode, stepInputs(model, seed + 1, {{0, 3 + r, 1}})},
         {decode, stepInputs(model, seed + 2,
                             {{0, 5 + r, 1}, {second, 9 + 2 * r, 1}})}});
  }
  return all;
}

TEST(StepAllocations, DecodeStepsOnTheDeviceAllocateNothing) {
  if (!artifactPath())
    GTEST_SKIP() << "set DAYBREAK_ARTIFACT to an artifact";
  LoadOptions options;
  options.device = deviceName();
  StatusOr<std::unique_ptr<Model>> model =
      Model::load(artifactPath(), options);
  if (!model.ok())
    GTEST_SKIP() << "no such device here: " << model.error().message();
  StatusOr<const PreparedStep *> decode = (*model)->step("decode");
  ASSERT_TRUE(decode.ok()) << decode.error().message();
  // The first round records the CUDA decode graphs (one per token count)
  // and grows the CPU kernels' scratch; five more allocate nothing.
  std::vector<std::vector<StepRun>> rounds = decodeRounds(**model, *decode, 6);
  reservePages(**model, rounds);
  std::vector<std::vector<float>> logits;
  EXPECT_EQ(allocationsAfterWarmUp(**model, rounds, logits), 0u)
      << "host allocations in decode steps on " << options.device;
}

// The per-launch profile of a decode step (the benchmark's kernel tables):
// on CUDA a graph with an event between launches, as the step itself runs
// as a graph. Every launch gets a finite time, and the step it ran leaves
// the next run of the same inputs bit for bit what it was.
TEST(StepProfile, DecodeProfileTimesEveryLaunch) {
  if (!artifactPath())
    GTEST_SKIP() << "set DAYBREAK_ARTIFACT to an artifact";
  LoadOptions options;
  options.device = deviceName();
  StatusOr<std::unique_ptr<Model>> model = Model::load(artifactPath(), options);
  if (!model.ok())
    GTEST_SKIP() << "no such device here: " << model.error().message();
  StatusOr<const PreparedStep *> decode = (*model)->step("decode");
  ASSERT_TRUE(decode.ok()) << decode.error().message();
  std::vector<std::vector<StepRun>> rounds = decodeRounds(**model, *decode, 1);
  reservePages(**model, rounds);
  for (const StepRun &run : rounds[0]) {
    std::vector<float> before, after;
    Status status = (*model)->run(*run.step, run.inputs, before);
    ASSERT_TRUE(status.ok()) << status.message();
    StatusOr<std::vector<double>> ms = (*model)->profile("decode", run.inputs);
    ASSERT_TRUE(ms.ok()) << ms.error().message();
    ASSERT_EQ(ms->size(), (*decode)->launches.size());
    double total = 0;
    for (size_t i = 0; i < ms->size(); ++i) {
      EXPECT_TRUE(std::isfinite((*ms)[i]) && (*ms)[i] >= 0)
          << (*decode)->launches[i].label << ": " << (*ms)[i] << " ms";
      total += (*ms)[i];
    }
    EXPECT_GT(total, 0) << options.device;
    status = (*model)->run(*run.step, run.inputs, after);
    ASSERT_TRUE(status.ok()) << status.message();
    EXPECT_EQ(before, after)
        << "the profiled step changed what decode computes";
  }
}

TEST(StepAllocations, PrefillAndDecodeStepsOnTheCpuAllocateNothing) {
  if (!artifactPath())
    GTEST_SKIP() << "set DAYBREAK_ARTIFACT to an artifact";
  if (deviceName() != "cpu")
    GTEST_SKIP() << "a CPU case; on " << deviceName()
                 << " the claim is the decode step's (above)";
  // One thread runs every chunk itself; three (more than some machines
  // have cores) hand chunks to whichever worker is free, so each step maps
  // chunks to threads anew: the scratch must not depend on that mapping.
  std::vector<std::vector<float>> firstLogits;
  for (unsigned threads : {1u, 3u}) {
    LoadOptions options;
    options.threads = threads;
    StatusOr<std::unique_ptr<Model>> model =
        Model::load(artifactPath(), options);
    ASSERT_TRUE(model.ok()) << model.error().message();
    Model &m = **model;
    StatusOr<const PreparedStep *> prefill = m.step("prefill");
    StatusOr<const PreparedStep *> decode = m.step("decode");
    ASSERT_TRUE(prefill.ok()) << prefill.error().message();
    ASSERT_TRUE(decode.ok()) << decode.error().message();
    // A serving loop's shapes: a full prefill chunk, a short one packing
    // two sequences, decode steps of one sequence and of two; each round
    // other tokens at other positions (other routing, other top-k sets).
    int32_t full = static_cast<int32_t>(std::min(m.maxTokens(), m.maxSeqLen()));
    int32_t second =
        static_cast<int32_t>(std::min<int64_t>(m.maxBatch(), 2) - 1);
    int32_t shortRun =
        static_cast<int32_t>(std::min<int64_t>(m.maxTokens(), 7));
    std::vector<std::vector<StepRun>> rounds;
    for (int r = 0; r < 4; ++r) {
      uint32_t seed = 7919u * (r + 1);
      rounds.push_back(
          {{*prefill, stepInputs(m, seed + 1, {{0, 0, full}})},
           {*prefill, stepInputs(m, seed + 2,
                                 {{second, 2 * r, shortRun - shortRun / 2},
                                  {0, 20 + r, shortRun / 2}})},
           {*decode, stepInputs(m, seed + 3, {{0, 30 + 3 * r, 1}})},
           {*decode, stepInputs(m, seed + 4,
                                {{0, 40 + r, 1}, {second, 11 + 5 * r, 1}})}});
    }
    // A prefill step that computes few logit rows (--max-logit-rows) is
    // asked for the last row of each chunk, as a session asks.
    for (std::vector<StepRun> &round : rounds)
      for (StepRun &run : round)
        if (run.step->logitRows) {
          run.inputs.everyLogitRow = false;
          run.inputs.logitRows = {
              static_cast<int32_t>(run.inputs.ids.size() - 1)};
        }
    reservePages(m, rounds);
    std::vector<std::vector<float>> logits;
    EXPECT_EQ(allocationsAfterWarmUp(m, rounds, logits), 0u)
        << "host allocations in prefill and decode steps with " << threads
        << " threads";
    // The same steps give the same logits, bit for bit, for any number of
    // threads (docs/runtime.md, "Threading and determinism").
    if (firstLogits.empty())
      firstLogits = logits;
    else
      EXPECT_TRUE(firstLogits == logits)
          << "logits differ between 1 and " << threads << " threads";
  }
}

} // namespace
