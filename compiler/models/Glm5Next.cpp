//===- Glm5Next.cpp - lm IR for GLM-5.3 (glm5_next) -----------------------===//
//
// The math follows glm5_next.md (written from transformers 5.24's
// glm5_next and checked against it): per token, hc_mult copies of the
// embedding; around every sub-layer lm.mhc_pre collapses the streams into
// the branch input (RMS norm without weight, Sinkhorn-normalised mixing)
// and lm.mhc_post writes the branch output back; the model's output is the
// mean of the streams, RMS-normed, through the untied head.
//
// Mixers: Kimi Delta Attention (ModelBuilder::kdaMixer, A_log stored [h],
// the bounded forget gate when gate_lower_bound is set), or NoPE MLA over
// the latent rows c_kv in absorbed form, attending only the tokens its DSA
// indexer selects: pooled indexer keys (lm.dsa_kpool: a softmax over each
// pool's members of gate + ape weighting their LayerNormed keys) cached one
// row per pool, scored with the lightning-indexer form, the best
// index_topk / index_kpool complete pools taken (lm.dsa_index_select) and
// expanded to their tokens plus the query's own incomplete pool
// (lm.dsa_kpool_expand). A "shared" DSA layer reuses the selection of the
// full layer before it. MLPs: the SwiGLU clamped at swiglu_limit, dense or
// a sigmoid-routed MoE with a correction bias and shared experts.
//
//===----------------------------------------------------------------------===//

#include "compiler/models/Glm5Next.h"
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
using importers::Glm5NextConfig;

namespace {

constexpr int64_t kDyn = ShapedType::kDynamic;

/// The indexer key's LayerNorm eps (transformers' default, not
/// rms_norm_eps).
constexpr double kIndexerNormEps = 1e-6;

/// A DSA layer's caches and state: the latent rows, and for a layer that
/// runs its own indexer the pooled keys (a cache row per pool) and the
/// incomplete pool's raw keys and gates (per-sequence state).
struct DsaState {
  Value *latent, *pools = nullptr, *tail = nullptr;
};

/// Emits the ops of one function; weights are declared once per module.
class Emitter : public ModelBuilder {
public:
  Emitter(ModuleOp module, const Glm5NextConfig &config,
          const importers::Checkpoint &checkpoint)
      : ModelBuilder(module, checkpoint,
                     CheckpointTraits{config.fp8BlockSize, 10000.0, {}}),
        config(config) {}

  /// KDA and DSA heads (with KDA's state), the MLPs, every routed expert's
  /// intermediate features and the LM head split over tensor-parallel
  /// ranks; the latent cache, the indexer and the mHC streams stay whole on
  /// every rank (docs/parallel.md).
  static constexpr bool kSupportsTensorParallel = true;

  llvm::Error buildFunction(StringRef name, const BuildOptions &options);

private:
  llvm::Expected<Value> dsa(int64_t layer, Value x, DsaState state);
  llvm::Expected<Value> mlp(int64_t layer, Value x);
  /// One mHC block around `branch`: the `hc_{kind}_*` weights of `layer`
  /// mix `streams` [T, n, H] into the branch input and the branch output
  /// back into new streams.
  llvm::Expected<Value>
  mhcBlock(int64_t layer, StringRef kind, Value streams,
           llvm::function_ref<llvm::Expected<Value>(Value)> branch);
  /// The f32 value of the float weight `name` (bf16 widened in IR, folded).
  llvm::Expected<Value> f32Weight(StringRef name, ArrayRef<int64_t> shape);

  std::string layerName(int64_t layer, StringRef rest) {
    return llvm::formatv("model.language_model.layers.{0}.{1}", layer, rest)
        .str();
  }
  KdaSpec kdaSpec(int64_t layer) {
    KdaSpec spec;
    spec.prefix = layerName(layer, "self_attn.");
    spec.hidden = config.hiddenSize;
    spec.heads = config.kdaHeads;
    spec.dim = config.kdaHeadDim;
    spec.convWidth = config.shortConvKernel;
    spec.normEps = config.rmsNormEps;
    spec.lowerBound = config.gateLowerBound;
    spec.aLogShape = {config.kdaHeads};
    return spec;
  }
  /// An i32 [T] splat of `value` shaped like `like`.
  Value splatLike(Value like, int32_t value) {
    Value c = arith::ConstantOp::create(b, loc, b.getI32IntegerAttr(value));
    return tensor::SplatOp::create(b, loc, like.getType(), c,
                                   ValueRange{dimOf(like, 0)})
        .getResult();
  }

  const Glm5NextConfig &config;
  /// The sequence (cache and state slot) and position of each token.
  Value sequences, positions;
  /// The attended tokens of the last full DSA layer, for a shared one.
  Value selection;
};

} // namespace

static llvm::Error errorf(const llvm::Twine &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
}

llvm::Expected<Value> Emitter::f32Weight(StringRef name,
                                         ArrayRef<int64_t> shape) {
  auto w = floatWeight(name, shape);
  if (!w)
    return w.takeError();
  if (cast<RankedTensorType>(w->getType()).getElementType().isF32())
    return *w;
  return arith::ExtFOp::create(b, loc, f32Tensor(shape), *w).getResult();
}

llvm::Expected<Value>
Emitter::mhcBlock(int64_t layer, StringRef kind, Value streams,
                  llvm::function_ref<llvm::Expected<Value>(Value)> branch) {
  const Glm5NextConfig &c = config;
  int64_t n = c.hcMult, mixes = (2 + n) * n;
  std::string prefix = layerName(layer, ("hc_" + kind + "_").str());
  auto fn = f32Weight(prefix + "fn", {mixes, n * c.hiddenSize});
  if (!fn)
    return fn.takeError();
  auto base = weight(prefix + "base", {mixes}, {safetensors::DType::F32});
  if (!base)
    return base.takeError();
  auto scale = weight(prefix + "scale", {3}, {safetensors::DType::F32});
  if (!scale)
    return scale.takeError();
  auto pre = lm::MhcPreOp::create(
      b, loc, f32Tensor({kDyn, c.hiddenSize}), f32Tensor({kDyn, n}),
      f32Tensor({kDyn, n, n}), streams, *fn, *base, *scale, /*norm=*/Value(),
      b.getI64IntegerAttr(c.hcSinkhornIters), b.getF64FloatAttr(c.hcEps),
      b.getF64FloatAttr(c.rmsNormEps), /*input_eps=*/FloatAttr());
  auto y = branch(pre.getInput());
  if (!y)
    return y.takeError();
  return lm::MhcPostOp::create(b, loc, streams.getType(), streams, *y,
                               pre.getPost(), pre.getComb())
      .getResult();
}

llvm::Expected<Value> Emitter::dsa(int64_t layer, Value x, DsaState state) {
  const Glm5NextConfig &c = config;
  int64_t nope = c.qkNopeHeadDim, vdim = c.vHeadDim;
  int64_t lora = c.kvLoraRank, qLora = c.qLoraRank;
  auto name = [&](StringRef rest) {
    return layerName(layer, ("self_attn." + rest).str());
  };
  // This rank's heads.
  auto headRange = rankRange(c.numHeads, "num_attention_heads");
  if (!headRange)
    return headRange.takeError();
  int64_t heads = headRange->second;

  // Queries through the q-LoRA (c_q also feeds the indexer), absorbed
  // through W_UK; no rope part.
  auto qa = linear(x, name("q_a_proj.weight"), qLora, c.hiddenSize);
  if (!qa)
    return qa.takeError();
  auto cq = rmsNorm(*qa, name("q_a_layernorm.weight"), qLora, c.rmsNormEps);
  if (!cq)
    return cq.takeError();
  auto qf = linear(*cq, name("q_b_proj.weight"), c.numHeads * nope, qLora, {},
                   Split::Output);
  if (!qf)
    return qf.takeError();
  auto absorbed =
      absorbMla(name("kv_b_proj.weight"), reshape(*qf, {kDyn, heads, nope}),
                Value(), heads, nope, /*rot=*/0, vdim, lora);
  if (!absorbed)
    return absorbed.takeError();

  // The latent row c_kv, cached; every head's keys and (its columns) values.
  auto kv = linear(x, name("kv_a_proj_with_mqa.weight"), lora, c.hiddenSize);
  if (!kv)
    return kv.takeError();
  auto latent = rmsNorm(*kv, name("kv_a_layernorm.weight"), lora, c.rmsNormEps);
  if (!latent)
    return latent.takeError();
  *state.latent = lm::CacheWriteOp::create(b, loc, state.latent->getType(),
                                           *state.latent, *latent, positions,
                                           sequences, lm::KVLayoutAttr())
                      .getResult();

  if (state.pools) {
    // The indexer: per-token keys and pool gates, pooled (a cache row per
    // pool, each token writing its pool's key as known so far), scored per
    // query, the best complete pools selected and expanded to tokens.
    int64_t iheads = c.indexHeads, idim = c.indexHeadDim, pool = c.indexKpool;
    auto iqf = linear(*cq, name("indexer.wq_b.weight"), iheads * idim, qLora);
    if (!iqf)
      return iqf.takeError();
    auto ik0 = linear(x, name("indexer.wk.weight"), idim, c.hiddenSize);
    if (!ik0)
      return ik0.takeError();
    auto knw = floatWeight(name("indexer.k_norm.weight"), {idim});
    auto knb = floatWeight(name("indexer.k_norm.bias"), {idim});
    if (!knw || !knb)
      return knw ? knb.takeError() : knw.takeError();
    Value ik = lm::LayerNormOp::create(b, loc, ik0->getType(), *ik0, *knw, *knb,
                                       b.getF64FloatAttr(kIndexerNormEps))
                   .getResult();
    auto gate = linear(x, name("indexer.index_kpool_compress_gate"), idim,
                       c.hiddenSize);
    if (!gate)
      return gate.takeError();
    auto ape =
        floatWeight(name("indexer.index_kpool_compress_ape"), {pool, idim});
    if (!ape)
      return ape.takeError();
    auto kpool = lm::DsaKpoolOp::create(b, loc, f32Tensor({kDyn, idim}),
                                        state.tail->getType(), ik, *gate, *ape,
                                        *state.tail, positions, sequences);
    *state.tail = kpool.getNewState();
    Value rows =
        arith::DivSIOp::create(b, loc, positions, splatLike(positions, pool))
            .getResult();
    *state.pools = lm::CacheWriteOp::create(b, loc, state.pools->getType(),
                                            *state.pools, kpool.getOutput(),
                                            rows, sequences, lm::KVLayoutAttr())
                       .getResult();
    auto iw =
        linear(x, name("indexer.weights_proj.weight"), iheads, c.hiddenSize);
    if (!iw)
      return iw.takeError();
    int64_t poolRows =
        cast<RankedTensorType>(state.pools->getType()).getDimSize(1);
    // w = weights_proj(x) iheads^-0.5 and q . K idim^-0.5: both scales are
    // positive, so they apply outside the ReLU.
    double indexScale = std::pow(double(idim), -0.5) * std::pow(iheads, -0.5);
    // A query at position p sees the (p + 1) / P pools complete by then;
    // the indexer scores only those.
    Value bounds =
        arith::DivSIOp::create(
            b, loc,
            arith::AddIOp::create(b, loc, positions, splatLike(positions, 1))
                .getResult(),
            splatLike(positions, pool))
            .getResult();
    Value scores = lm::DsaIndexerScoresOp::create(
                       b, loc, f32Tensor({kDyn, poolRows}),
                       reshape(*iqf, {kDyn, iheads, idim}), *state.pools, *iw,
                       sequences, bounds, b.getF64FloatAttr(indexScale))
                       .getResult();
    int64_t topPools = c.indexTopk / pool;
    Value pools = lm::DsaIndexSelectOp::create(
                      b, loc, tensor({kDyn, topPools}, b.getI32Type()), scores,
                      bounds, b.getI64IntegerAttr(topPools))
                      .getResult();
    selection =
        lm::DsaKpoolExpandOp::create(
            b, loc, tensor({kDyn, topPools * pool + pool - 1}, b.getI32Type()),
            pools, positions, b.getI64IntegerAttr(pool))
            .getResult();
  } else if (!selection) {
    return errorf(llvm::formatv("layer {0}: a shared DSA layer needs a full "
                                "DSA layer before it",
                                layer)
                      .str());
  }

  Value latentOut =
      lm::SparseAttentionOp::create(
          b, loc, f32Tensor({kDyn, heads, lora}), absorbed->query,
          *state.latent, selection, sequences, Value(),
          b.getF64FloatAttr(c.softmaxScale()), b.getI64IntegerAttr(lora))
          .getResult();
  Value out = mlaValueUp(*absorbed, latentOut, heads, vdim);
  return linear(collapseLast(out), name("o_proj.weight"), c.hiddenSize,
                c.numHeads * vdim, {}, Split::Input);
}

llvm::Expected<Value> Emitter::mlp(int64_t layer, Value x) {
  const Glm5NextConfig &c = config;
  GluParams act;
  act.limit = c.swigluLimit;
  if (c.denseMlp[layer])
    return gatedMlp(x, layerName(layer, "mlp."), c.hiddenSize,
                    c.intermediateSize, act);
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
  moe.routerWeight = layerName(layer, "mlp.gate.weight");
  moe.selectionBias = layerName(layer, "mlp.gate.e_score_correction_bias");
  moe.act = act;
  moe.loadExperts = [&, layer](StringRef stackShared) {
    return perExpertGatedMlp(layerName(layer, "mlp.experts."),
                             "gate_proj.weight", "up_proj.weight",
                             "down_proj.weight", c.numExperts, c.hiddenSize,
                             c.moeIntermediateSize, stackShared);
  };
  if (c.numSharedExperts > 0) {
    moe.sharedPrefix = layerName(layer, "mlp.shared_experts.");
    moe.sharedInter = c.moeIntermediateSize * c.numSharedExperts;
  }
  return ModelBuilder::moe(x, moe);
}

llvm::Error Emitter::buildFunction(StringRef name,
                                   const BuildOptions &options) {
  const Glm5NextConfig &c = config;
  bool decode = name == "decode";
  selection = Value();
  Type ids = tensor({kDyn}, b.getI32Type());
  StepFunction step(b, loc, name);
  unsigned tokenIdsIn = step.addInput("token_ids", ids);
  unsigned positionsIn = step.addInput("positions", ids);
  unsigned sequencesIn = step.addInput("sequences", ids);
  step.addOutput("logits", f32Tensor({kDyn, c.vocabSize}));
  // KDA layers: three convolution windows and the recurrent state per
  // sequence. DSA layers: the latent cache; with their own indexer, the
  // pooled-key cache (a row per pool) and the incomplete pool's state.
  // (This rank's KDA heads.)
  auto kdaHeads = ModelBuilder::kdaHeads(kdaSpec(0));
  if (!kdaHeads)
    return kdaHeads.takeError();
  int64_t width = *kdaHeads * c.kdaHeadDim, pool = c.indexKpool;
  auto latentType = cast<RankedTensorType>(
      f32Tensor({options.maxBatch, options.maxSeqLen, c.kvLoraRank}));
  auto poolType = cast<RankedTensorType>(
      f32Tensor({options.maxBatch, (options.maxSeqLen + pool - 1) / pool,
                 c.indexHeadDim}));
  auto tailType = cast<RankedTensorType>(f32Tensor(
      {options.maxBatch, std::max<int64_t>(pool - 1, 1), 2 * c.indexHeadDim}));
  auto windowType = cast<RankedTensorType>(
      f32Tensor({options.maxBatch, c.shortConvKernel - 1, width}));
  auto recurrentType = cast<RankedTensorType>(
      f32Tensor({options.maxBatch, *kdaHeads, c.kdaHeadDim, c.kdaHeadDim}));
  struct LayerSlots {
    unsigned first = 0, pools = 0, tail = 0;
  };
  std::vector<LayerSlots> slots(c.numLayers);
  for (int64_t l = 0; l < c.numLayers; ++l) {
    if (c.kdaLayers[l]) {
      slots[l].first = step.addState(windowType);
      step.addState(windowType);
      step.addState(windowType);
      step.addState(recurrentType);
      continue;
    }
    slots[l].first = step.addCache(latentType);
    if (!c.sharedIndexer[l]) {
      slots[l].pools = step.addCache(poolType, pool);
      slots[l].tail = step.addState(tailType);
    }
  }
  step.create(module);
  Value tokenIds = step.input(tokenIdsIn);
  positions = step.input(positionsIn);
  sequences = step.input(sequencesIn);

  // hc_mult copies of the embedding: the streams [T, n, H].
  int64_t n = c.hcMult, hidden = c.hiddenSize;
  auto embed = floatWeight("model.language_model.embed_tokens.weight",
                           {c.vocabSize, hidden});
  if (!embed)
    return embed.takeError();
  Value h = lm::EmbeddingOp::create(b, loc, f32Tensor({kDyn, hidden}), *embed,
                                    tokenIds)
                .getResult();
  Value streams =
      reshape(tensor::ConcatOp::create(b, loc, f32Tensor({kDyn, n * hidden}),
                                       /*dim=*/1, SmallVector<Value>(n, h))
                  .getResult(),
              {kDyn, n, hidden});
  for (int64_t l = 0; l < c.numLayers; ++l) {
    auto mixer = [&](Value u) -> llvm::Expected<Value> {
      auto x = rmsNorm(u, layerName(l, "input_layernorm.weight"), hidden,
                       c.rmsNormEps);
      if (!x)
        return x.takeError();
      if (c.kdaLayers[l])
        return kdaMixer(kdaSpec(l), *x, decode,
                        KdaState{&step.state(slots[l].first),
                                 &step.state(slots[l].first + 1),
                                 &step.state(slots[l].first + 2),
                                 &step.state(slots[l].first + 3)},
                        sequences);
      DsaState state{&step.cache(slots[l].first)};
      if (!c.sharedIndexer[l]) {
        state.pools = &step.cache(slots[l].pools);
        state.tail = &step.state(slots[l].tail);
      }
      return dsa(l, *x, state);
    };
    auto ffn = [&](Value u) -> llvm::Expected<Value> {
      auto x = rmsNorm(u, layerName(l, "post_attention_layernorm.weight"),
                       hidden, c.rmsNormEps);
      if (!x)
        return x.takeError();
      return mlp(l, *x);
    };
    auto attn = mhcBlock(l, "attn", streams, mixer);
    if (!attn)
      return attn.takeError();
    auto next = mhcBlock(l, "ffn", *attn, ffn);
    if (!next)
      return next.takeError();
    streams = *next;
    // A selection is handed on only to the layer right after a full one.
    if (c.kdaLayers[l])
      selection = Value();
  }

  // The mean of the streams, RMS-normed: RMSNorm(sum / n, eps) equals
  // RMSNorm(sum, n^2 eps), so the sum is normed with the scaled eps.
  Value flat = collapseLast(streams);
  Value sum = sliceLast(flat, 0, hidden);
  for (int64_t i = 1; i < n; ++i)
    sum =
        arith::AddFOp::create(b, loc, sum, sliceLast(flat, i * hidden, hidden))
            .getResult();
  auto xf = rmsNorm(sum, "model.language_model.norm.weight", hidden,
                    c.rmsNormEps * double(n) * double(n));
  if (!xf)
    return xf.takeError();
  // Each rank computes its rows of the vocabulary.
  auto logits =
      linear(*xf,
             c.tieWordEmbeddings ? "model.language_model.embed_tokens.weight"
                                 : "lm_head.weight",
             c.vocabSize, hidden, {}, Split::Output);
  if (!logits)
    return logits.takeError();
  step.finish({allGather(*logits)});
  return llvm::Error::success();
}

llvm::Expected<OwningOpRef<ModuleOp>>
models::buildGlm5Next(MLIRContext &context, const Glm5NextConfig &config,
                      const importers::Checkpoint &checkpoint,
                      const BuildOptions &options) {
  return buildStepFunctions<Emitter>(context, options, config, checkpoint);
}

llvm::Expected<std::unique_ptr<models::ModelDefinition>>
models::parseGlm5NextModel(llvm::StringRef json, llvm::StringRef path) {
  return parseConfiguredModel<Glm5NextConfig, importers::parseGlm5NextConfig,
                              models::buildGlm5Next>("glm5_next", json, path);
}
