//===- DeepseekV32.cpp - lm IR for DeepSeek-V3.2 (DSA) --------------------===//
//
// The math follows models.md section 1 and transformers' DeepseekV32: pre-norm
// blocks; MLA with q-LoRA, interleaved YaRN RoPE on the last qk_rope dims of
// q and on the shared rope key; the lightning indexer (half-split RoPE on the
// first qk_rope dims of each head, LayerNorm with bias on the key, ReLU
// scores weighted per head); top-k = min(index_topk, causal length); MoE
// with sigmoid + correction-bias group-limited routing and a shared expert.
//
//===----------------------------------------------------------------------===//

#include "compiler/models/DeepseekV32.h"
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
using importers::DeepseekV32Config;

namespace {

constexpr int64_t kDyn = ShapedType::kDynamic;

/// Emits the ops of one function; weights are declared once per module.
class Emitter : public ModelBuilder {
public:
  Emitter(ModuleOp module, const DeepseekV32Config &config,
          const importers::Checkpoint &checkpoint)
      : ModelBuilder(module, checkpoint,
                     CheckpointTraits{config.fp8BlockSize, config.ropeTheta,
                                      config.yarn}),
        config(config) {}

  /// Heads, the dense MLP, the shared experts and the LM head split over
  /// tensor-parallel ranks; the latent projections, their caches and the
  /// indexer stay whole on every rank (docs/parallel.md).
  static constexpr bool kSupportsTensorParallel = true;

  llvm::Error buildFunction(StringRef name, const BuildOptions &options);

private:
  llvm::Expected<Value> attention(int64_t layer, Value x, Value positions,
                                  Value &kvCache, Value &indexCache);
  llvm::Expected<Value> moe(int64_t layer, Value x);

  std::string layerName(int64_t layer, StringRef rest) {
    return llvm::formatv("model.layers.{0}.{1}", layer, rest).str();
  }

  const DeepseekV32Config &config;
  /// Token count of the function being built (dynamic for prefill).
  int64_t tokens = kDyn;
  /// The sequence (cache batch row) of each token.
  Value sequences;
};

} // namespace

static llvm::Error errorf(const llvm::Twine &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
}

llvm::Expected<Value> Emitter::attention(int64_t layer, Value x,
                                         Value positions, Value &kvCache,
                                         Value &indexCache) {
  const DeepseekV32Config &c = config;
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

  // Queries through the q-LoRA, then [nope | rope] per head.
  auto qa = linear(x, name("q_a_proj.weight"), c.qLoraRank, c.hiddenSize);
  if (!qa)
    return qa.takeError();
  auto qr = rmsNorm(*qa, name("q_a_layernorm.weight"), c.qLoraRank, 1e-6);
  if (!qr)
    return qr.takeError();
  auto qf = linear(*qr, name("q_b_proj.weight"), c.numHeads * (nope + rot),
                   c.qLoraRank, {}, Split::Output);
  if (!qf)
    return qf.takeError();
  Value q = reshape(*qf, {tokens, heads, nope + rot});
  q = rope(q, positions, lm::RopeStyle::Interleaved, nope, rot);
  Value qNope = sliceLast(q, 0, nope);
  Value qRope = sliceLast(q, nope, rot);

  // Absorption: W_UK [H, nope, lora] into the query, W_UV after attention.
  auto absorbed = absorbMla(name("kv_b_proj.weight"), qNope, qRope, heads, nope,
                            rot, vdim, lora);
  if (!absorbed)
    return absorbed.takeError();
  Value qAbsorbed = absorbed->query;

  // The latent key row [normed c_kv | rotated k_pe], written to the cache.
  auto kv = linear(x, name("kv_a_proj_with_mqa.weight"), lora + rot,
                   c.hiddenSize);
  if (!kv)
    return kv.takeError();
  auto latent = rmsNorm(sliceLast(*kv, 0, lora), name("kv_a_layernorm.weight"),
                        lora, 1e-6);
  if (!latent)
    return latent.takeError();
  Value kRope = sliceLast(
      rope(*kv, positions, lm::RopeStyle::Interleaved, lora, rot), lora, rot);
  Value row = tensor::ConcatOp::create(b, loc, f32Tensor({tokens, lora + rot}),
                                       /*dim=*/1, ValueRange{*latent, kRope})
                  .getResult();
  kvCache = lm::CacheWriteOp::create(b, loc, kvCache.getType(), kvCache, row,
                                     positions, sequences, lm::KVLayoutAttr())
                .getResult();

  // Lightning indexer over the indexer key cache.
  int64_t iheads = c.indexNumHeads, idim = c.indexHeadDim;
  auto iqf = linear(*qr, name("indexer.wq_b.weight"), iheads * idim,
                    c.qLoraRank);
  if (!iqf)
    return iqf.takeError();
  Value iq = rope(reshape(*iqf, {tokens, iheads, idim}), positions,
                  lm::RopeStyle::HalfSplit, 0, rot);
  auto ik0 = linear(x, name("indexer.wk.weight"), idim, c.hiddenSize);
  if (!ik0)
    return ik0.takeError();
  auto knw = floatWeight(name("indexer.k_norm.weight"), {idim});
  auto knb = floatWeight(name("indexer.k_norm.bias"), {idim});
  if (!knw || !knb)
    return knw ? knb.takeError() : knw.takeError();
  Value ik = lm::LayerNormOp::create(b, loc, (*ik0).getType(), *ik0, *knw,
                                     *knb, b.getF64FloatAttr(1e-6))
                 .getResult();
  ik = rope(ik, positions, lm::RopeStyle::HalfSplit, 0, rot);
  indexCache = lm::CacheWriteOp::create(b, loc, indexCache.getType(),
                                        indexCache, ik, positions, sequences,
                                        lm::KVLayoutAttr())
                   .getResult();
  auto iw = linear(x, name("indexer.weights_proj.weight"), iheads,
                   c.hiddenSize);
  if (!iw)
    return iw.takeError();
  int64_t cacheRows = cast<RankedTensorType>(kvCache.getType()).getDimSize(1);
  double indexScale = std::pow(double(idim), -0.5) * std::pow(iheads, -0.5);
  // A query at position p sees keys 0..p; the indexer scores only those.
  Value one = arith::ConstantOp::create(b, loc, b.getI32IntegerAttr(1));
  Value ones = tensor::SplatOp::create(b, loc, positions.getType(), one,
                                       ValueRange(tokens == kDyn
                                                      ? ValueRange{dimOf(positions, 0)}
                                                      : ValueRange{}))
                   .getResult();
  Value bounds = arith::AddIOp::create(b, loc, positions, ones).getResult();
  Value scores = lm::DsaIndexerScoresOp::create(
                     b, loc, f32Tensor({tokens, cacheRows}), iq, indexCache,
                     *iw, sequences, bounds, b.getF64FloatAttr(indexScale))
                     .getResult();
  Value indices = lm::DsaIndexSelectOp::create(
                      b, loc, tensor({tokens, c.indexTopk}, b.getI32Type()),
                      scores, bounds, b.getI64IntegerAttr(c.indexTopk))
                      .getResult();

  Value latentOut = lm::SparseAttentionOp::create(
                        b, loc, f32Tensor({tokens, heads, lora}), qAbsorbed,
                        kvCache, indices, sequences, Value(),
                        b.getF64FloatAttr(c.softmaxScale()),
                        b.getI64IntegerAttr(lora))
                        .getResult();
  Value out = mlaValueUp(*absorbed, latentOut, heads, vdim);
  return linear(collapseLast(out), name("o_proj.weight"), c.hiddenSize,
                c.numHeads * vdim, {}, Split::Input);
}

llvm::Expected<Value> Emitter::moe(int64_t layer, Value x) {
  const DeepseekV32Config &c = config;
  MoeConfig moe;
  moe.hidden = c.hiddenSize;
  moe.inter = c.moeIntermediateSize;
  moe.experts = c.numRoutedExperts;
  moe.topK = c.numExpertsPerTok;
  moe.routing = lm::RoutingScore::Sigmoid;
  moe.numGroups = c.numGroups;
  moe.topKGroups = c.topkGroup;
  moe.renormalize = c.normTopkProb;
  moe.scalingFactor = c.routedScalingFactor;
  moe.routerWeight = layerName(layer, "mlp.gate.weight");
  moe.selectionBias = layerName(layer, "mlp.gate.e_score_correction_bias");
  // Stacked routed experts, plain or FP8 as the checkpoint stores them.
  moe.loadExperts = [&, layer](StringRef stackShared) {
    return perExpertGatedMlp(layerName(layer, "mlp.experts."),
                             "gate_proj.weight", "up_proj.weight",
                             "down_proj.weight", c.numRoutedExperts,
                             c.hiddenSize, c.moeIntermediateSize, stackShared);
  };
  moe.sharedPrefix = layerName(layer, "mlp.shared_experts.");
  moe.sharedInter = c.moeIntermediateSize * c.numSharedExperts;
  return ModelBuilder::moe(x, moe);
}

llvm::Error Emitter::buildFunction(StringRef name,
                                   const BuildOptions &options) {
  const DeepseekV32Config &c = config;
  // Tokens of several sequences are flattened into one dim; `sequences`
  // says whose each token is, `positions` where it sits in its sequence.
  tokens = kDyn;
  Type ids = tensor({tokens}, b.getI32Type());
  // Step inputs and outputs by role, for the runtime (no fixed positions);
  // each layer's latent and indexer key caches.
  StepFunction step(b, loc, name);
  unsigned tokenIdsIn = step.addInput("token_ids", ids);
  unsigned positionsIn = step.addInput("positions", ids);
  unsigned sequencesIn = step.addInput("sequences", ids);
  step.addOutput("logits", f32Tensor({tokens, c.vocabSize}));
  auto kvType = cast<RankedTensorType>(f32Tensor(
      {options.maxBatch, options.maxSeqLen, c.kvLoraRank + c.qkRopeHeadDim}));
  auto indexType = cast<RankedTensorType>(
      f32Tensor({options.maxBatch, options.maxSeqLen, c.indexHeadDim}));
  for (int64_t l = 0; l < c.numLayers; ++l) {
    step.addCache(kvType);
    step.addCache(indexType);
  }
  step.create(module);
  Value tokenIds = step.input(tokenIdsIn), positions = step.input(positionsIn);
  sequences = step.input(sequencesIn);

  auto embed = floatWeight("model.embed_tokens.weight",
                           {c.vocabSize, c.hiddenSize});
  if (!embed)
    return embed.takeError();
  Value h = lm::EmbeddingOp::create(b, loc, f32Tensor({tokens, c.hiddenSize}),
                                    *embed, tokenIds)
                .getResult();
  for (int64_t l = 0; l < c.numLayers; ++l) {
    auto x = rmsNorm(h, layerName(l, "input_layernorm.weight"), c.hiddenSize,
                     c.rmsNormEps);
    if (!x)
      return x.takeError();
    auto a = attention(l, *x, positions, step.cache(2 * l),
                       step.cache(2 * l + 1));
    if (!a)
      return a.takeError();
    h = arith::AddFOp::create(b, loc, h, *a).getResult();
    auto x2 = rmsNorm(h, layerName(l, "post_attention_layernorm.weight"),
                      c.hiddenSize, c.rmsNormEps);
    if (!x2)
      return x2.takeError();
    auto f = l < c.firstKDenseReplace
                 ? gatedMlp(*x2, layerName(l, "mlp."), c.hiddenSize,
                            c.intermediateSize)
                 : moe(l, *x2);
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
models::buildDeepseekV32(MLIRContext &context, const DeepseekV32Config &config,
                         const importers::Checkpoint &checkpoint,
                         const BuildOptions &options) {
  if (config.qLoraRank <= 0)
    return errorf("deepseek_v32 without q_lora_rank is not supported");
  if (config.qkRopeHeadDim > config.indexHeadDim)
    return errorf("index_head_dim must hold the qk_rope_head_dim rope dims");
  return buildStepFunctions<Emitter>(context, options, config, checkpoint);
}

llvm::Expected<std::unique_ptr<models::ModelDefinition>>
models::parseDeepseekV32Model(llvm::StringRef json, llvm::StringRef path) {
  return parseConfiguredModel<importers::DeepseekV32Config, importers::parseDeepseekV32Config, models::buildDeepseekV32>("deepseek_v32", json, path);
}
