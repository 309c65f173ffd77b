//===- KimiLinear.cpp - lm IR for Kimi Linear -----------------------------===//
//
// The math follows models.md section 2 and transformers' KimiLinear (5.17,
// checked against an independent recurrence in the kimi_linear fixture's
// README): pre-norm blocks whose token mixer is either
// - Kimi Delta Attention: q, k, v projections through causal depthwise
//   convolutions with SiLU (their windows per-sequence state), the gated
//   delta rule over L2-normalised q and k with q scaled by Dk^-0.5, beta =
//   sigmoid(b_proj x), the per-channel log decay from the low-rank forget
//   gate (f_b(f_a(x)), A_log, dt_bias), and the output RMS-normed per head
//   times sigmoid of the low-rank output gate g_b(g_a(x)); or
// - NoPE MLA: the latent row [normed c_kv | k_pe] cached per token, queries
//   absorbed through W_UK and scored against it as MQA (no rotation; the
//   rope-width part still scores), values through W_UV;
// and an MLP that is dense for the first first_k_dense_replace layers and a
// sigmoid-routed MoE (selection bias, renormalised, scaled, shared experts)
// after.
//
//===----------------------------------------------------------------------===//

#include "compiler/models/KimiLinear.h"
#include "compiler/models/ModelBuilder.h"
#include "compiler/models/StepFunction.h"

#include "dialects/lm/LmOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Builders.h"
#include "llvm/Support/FormatVariadic.h"

#include <cmath>

using namespace mlir;
using namespace daybreak;
using namespace daybreak::models;
using importers::KimiLinearConfig;

namespace {

constexpr int64_t kDyn = ShapedType::kDynamic;

/// The MLA layers' q_a_layernorm and kv_a_layernorm: transformers'
/// KimiLinearRMSNorm at its default eps, not rms_norm_eps (the block norms
/// and KDA's o_norm take rms_norm_eps).
constexpr double kLatentNormEps = 1e-6;

/// Emits the ops of one function; weights are declared once per module.
class Emitter : public ModelBuilder {
public:
  Emitter(ModuleOp module, const KimiLinearConfig &config,
          const importers::Checkpoint &checkpoint)
      : ModelBuilder(module, checkpoint, CheckpointTraits{}), config(config) {}

  /// KDA and MLA heads (with their state), the MLPs, every routed expert's
  /// intermediate features and the LM head split over tensor-parallel
  /// ranks; MLA's latent cache stays whole on every rank (docs/parallel.md).
  static constexpr bool kSupportsTensorParallel = true;

  llvm::Error buildFunction(StringRef name, const BuildOptions &options);

private:
  llvm::Expected<Value> mla(int64_t layer, Value x, Value positions,
                            Value &cache);
  llvm::Expected<Value> mlp(int64_t layer, Value x);

  std::string layerName(int64_t layer, StringRef rest) {
    return llvm::formatv("model.layers.{0}.{1}", layer, rest).str();
  }
  /// A KDA layer's weights: A_log stored [1, 1, heads, 1], the unbounded
  /// softplus gate.
  KdaSpec kdaSpec(int64_t layer) {
    KdaSpec spec;
    spec.prefix = layerName(layer, "self_attn.");
    spec.hidden = config.hiddenSize;
    spec.heads = config.kdaHeads;
    spec.dim = config.kdaHeadDim;
    spec.convWidth = config.shortConvKernel;
    spec.normEps = config.rmsNormEps;
    spec.aLogShape = {1, 1, config.kdaHeads, 1};
    return spec;
  }
  const KimiLinearConfig &config;
  /// The sequence (cache and state slot) of each token.
  Value sequences;
};

} // namespace

llvm::Expected<Value> Emitter::mla(int64_t layer, Value x, Value positions,
                                   Value &cache) {
  const KimiLinearConfig &c = config;
  int64_t nope = c.qkNopeHeadDim, rot = c.qkRopeHeadDim;
  int64_t lora = c.kvLoraRank, vdim = c.vHeadDim;
  auto name = [&](StringRef rest) {
    return layerName(layer, ("self_attn." + rest).str());
  };
  // This rank's heads.
  auto headRange = rankRange(c.numHeads, "num_attention_heads");
  if (!headRange)
    return headRange.takeError();
  int64_t heads = headRange->second;

  // Queries [nope | rope] per head, through the q-LoRA when there is one.
  llvm::Expected<Value> qf = Value();
  if (c.qLoraRank == 0) {
    qf = linear(x, name("q_proj.weight"), c.numHeads * (nope + rot),
                c.hiddenSize, {}, Split::Output);
  } else {
    auto qa = linear(x, name("q_a_proj.weight"), c.qLoraRank, c.hiddenSize);
    if (!qa)
      return qa.takeError();
    auto qr =
        rmsNorm(*qa, name("q_a_layernorm.weight"), c.qLoraRank, kLatentNormEps);
    if (!qr)
      return qr.takeError();
    qf = linear(*qr, name("q_b_proj.weight"), c.numHeads * (nope + rot),
                c.qLoraRank, {}, Split::Output);
  }
  if (!qf)
    return qf.takeError();
  Value q = reshape(*qf, {kDyn, heads, nope + rot});
  Value qNope = sliceLast(q, 0, nope), qRope = sliceLast(q, nope, rot);

  // Absorption: W_UK [H, nope, lora] into the query, W_UV after attention.
  auto absorbed = absorbMla(name("kv_b_proj.weight"), qNope, qRope, heads, nope,
                            rot, vdim, lora);
  if (!absorbed)
    return absorbed.takeError();
  Value qAbsorbed = absorbed->query;

  // The latent row [normed c_kv | k_pe] (no rotation), cached first; every
  // sequence's rows are then one KV head of keys [B, S, 1, lora + rot] and,
  // their first lora columns, of values.
  auto kv =
      linear(x, name("kv_a_proj_with_mqa.weight"), lora + rot, c.hiddenSize);
  if (!kv)
    return kv.takeError();
  auto latent = rmsNorm(sliceLast(*kv, 0, lora), name("kv_a_layernorm.weight"),
                        lora, kLatentNormEps);
  if (!latent)
    return latent.takeError();
  Value row =
      tensor::ConcatOp::create(b, loc, f32Tensor({kDyn, lora + rot}), /*dim=*/1,
                               ValueRange{*latent, sliceLast(*kv, lora, rot)})
          .getResult();
  cache = lm::CacheWriteOp::create(b, loc, cache.getType(), cache, row,
                                   positions, sequences, lm::KVLayoutAttr())
              .getResult();
  auto cacheType = cast<RankedTensorType>(cache.getType());
  int64_t batch = cacheType.getDimSize(0), rows = cacheType.getDimSize(1);
  Value keys = reshape(cache, {batch, rows, 1, lora + rot});
  SmallVector<OpFoldResult> zeros(3, b.getIndexAttr(0));
  SmallVector<OpFoldResult> sizes = {
      b.getIndexAttr(batch), b.getIndexAttr(rows), b.getIndexAttr(lora)};
  SmallVector<OpFoldResult> ones(3, b.getIndexAttr(1));
  Value values =
      reshape(tensor::ExtractSliceOp::create(b, loc, cache, zeros, sizes, ones)
                  .getResult(),
              {batch, rows, 1, lora});
  Value latentOut =
      lm::AttentionOp::create(
          b, loc, f32Tensor({kDyn, heads, lora}), qAbsorbed, keys, values,
          Value(), positions, Value(), sequences, Value(),
          lm::MaskKindAttr::get(b.getContext(), lm::MaskKind::Causal),
          b.getF64FloatAttr(c.softmaxScale()), IntegerAttr())
          .getResult();
  Value out = mlaValueUp(*absorbed, latentOut, heads, vdim);
  return linear(collapseLast(out), name("o_proj.weight"), c.hiddenSize,
                c.numHeads * vdim, {}, Split::Input);
}

llvm::Expected<Value> Emitter::mlp(int64_t layer, Value x) {
  const KimiLinearConfig &c = config;
  if (layer < c.firstKDenseReplace)
    return gatedMlp(x, layerName(layer, "mlp."), c.hiddenSize,
                    c.intermediateSize);
  MoeConfig moe;
  moe.hidden = c.hiddenSize;
  moe.inter = c.moeIntermediateSize;
  moe.experts = c.numExperts;
  moe.topK = c.numExpertsPerToken;
  moe.routing = lm::RoutingScore::Sigmoid;
  moe.numGroups = c.numExpertGroups;
  moe.topKGroups = c.topkGroup;
  moe.renormalize = c.moeRenormalize;
  moe.scalingFactor = c.routedScalingFactor;
  moe.routerWeight = layerName(layer, "block_sparse_moe.gate.weight");
  moe.selectionBias =
      layerName(layer, "block_sparse_moe.gate.e_score_correction_bias");
  // Experts one tensor each: w1 gate, w3 up, w2 down.
  moe.loadExperts = [&, layer](StringRef stackShared) {
    return perExpertGatedMlp(layerName(layer, "block_sparse_moe.experts."),
                             "w1.weight", "w3.weight", "w2.weight",
                             c.numExperts, c.hiddenSize, c.moeIntermediateSize,
                             stackShared);
  };
  if (c.numSharedExperts > 0) {
    moe.sharedPrefix = layerName(layer, "block_sparse_moe.shared_experts.");
    moe.sharedInter = c.moeIntermediateSize * c.numSharedExperts;
  }
  return ModelBuilder::moe(x, moe);
}

llvm::Error Emitter::buildFunction(StringRef name,
                                   const BuildOptions &options) {
  const KimiLinearConfig &c = config;
  bool decode = name == "decode";
  // Tokens of several sequences are flattened into one dim; `sequences`
  // says whose each token is, `positions` where it sits in its sequence.
  Type ids = tensor({kDyn}, b.getI32Type());
  StepFunction step(b, loc, name);
  unsigned tokenIdsIn = step.addInput("token_ids", ids);
  unsigned positionsIn = step.addInput("positions", ids);
  unsigned sequencesIn = step.addInput("sequences", ids);
  step.addOutput("logits", f32Tensor({kDyn, c.vocabSize}));
  // MLA layers: one latent cache each. KDA layers: three convolution
  // windows and the recurrent state per sequence.
  // (This rank's KDA heads.)
  auto kdaHeads = ModelBuilder::kdaHeads(kdaSpec(0));
  if (!kdaHeads)
    return kdaHeads.takeError();
  int64_t width = *kdaHeads * c.kdaHeadDim;
  auto cacheType = cast<RankedTensorType>(f32Tensor(
      {options.maxBatch, options.maxSeqLen, c.kvLoraRank + c.qkRopeHeadDim}));
  auto windowType = cast<RankedTensorType>(
      f32Tensor({options.maxBatch, c.shortConvKernel - 1, width}));
  auto recurrentType = cast<RankedTensorType>(
      f32Tensor({options.maxBatch, *kdaHeads, c.kdaHeadDim, c.kdaHeadDim}));
  std::vector<unsigned> cacheOf(c.numLayers), stateOf(c.numLayers);
  for (int64_t l = 0; l < c.numLayers; ++l) {
    if (!c.kdaLayers[l]) {
      cacheOf[l] = step.addCache(cacheType);
      continue;
    }
    stateOf[l] = step.addState(windowType);
    step.addState(windowType);
    step.addState(windowType);
    step.addState(recurrentType);
  }
  step.create(module);
  Value tokenIds = step.input(tokenIdsIn), positions = step.input(positionsIn);
  sequences = step.input(sequencesIn);

  auto embed =
      floatWeight("model.embed_tokens.weight", {c.vocabSize, c.hiddenSize});
  if (!embed)
    return embed.takeError();
  Value h = lm::EmbeddingOp::create(b, loc, f32Tensor({kDyn, c.hiddenSize}),
                                    *embed, tokenIds)
                .getResult();
  for (int64_t l = 0; l < c.numLayers; ++l) {
    auto x = rmsNorm(h, layerName(l, "input_layernorm.weight"), c.hiddenSize,
                     c.rmsNormEps);
    if (!x)
      return x.takeError();
    llvm::Expected<Value> a =
        c.kdaLayers[l] ? kdaMixer(kdaSpec(l), *x, decode,
                                  KdaState{&step.state(stateOf[l]),
                                           &step.state(stateOf[l] + 1),
                                           &step.state(stateOf[l] + 2),
                                           &step.state(stateOf[l] + 3)},
                                  sequences)
                       : mla(l, *x, positions, step.cache(cacheOf[l]));
    if (!a)
      return a.takeError();
    h = arith::AddFOp::create(b, loc, h, *a).getResult();
    auto x2 = rmsNorm(h, layerName(l, "post_attention_layernorm.weight"),
                      c.hiddenSize, c.rmsNormEps);
    if (!x2)
      return x2.takeError();
    auto f = mlp(l, *x2);
    if (!f)
      return f.takeError();
    h = arith::AddFOp::create(b, loc, h, *f).getResult();
  }
  auto xf = rmsNorm(h, "model.norm.weight", c.hiddenSize, c.rmsNormEps);
  if (!xf)
    return xf.takeError();
  // Each rank computes its rows of the vocabulary.
  auto logits = linear(
      *xf, c.tieWordEmbeddings ? "model.embed_tokens.weight" : "lm_head.weight",
      c.vocabSize, c.hiddenSize, {}, Split::Output);
  if (!logits)
    return logits.takeError();
  step.finish({allGather(*logits)});
  return llvm::Error::success();
}

llvm::Expected<OwningOpRef<ModuleOp>>
models::buildKimiLinear(MLIRContext &context, const KimiLinearConfig &config,
                        const importers::Checkpoint &checkpoint,
                        const BuildOptions &options) {
  return buildStepFunctions<Emitter>(context, options, config, checkpoint);
}

llvm::Expected<std::unique_ptr<models::ModelDefinition>>
models::parseKimiLinearModel(llvm::StringRef json, llvm::StringRef path) {
  return parseConfiguredModel<KimiLinearConfig,
                              importers::parseKimiLinearConfig,
                              models::buildKimiLinear>("kimi_linear", json,
                                                       path);
}
