//===- GptOss.cpp - lm IR for gpt-oss -------------------------------------===//
//
// The math follows models.md section 3.4 and transformers' GptOss: pre-norm
// blocks; GQA attention with q/k/v/o biases, half-split YaRN RoPE over the
// whole head, learned per-head sinks, sliding-window or full causal masks per
// layer_types, keys and values written to per-layer caches and read back
// from them; MoE with a biased router, softmax over the top-k logits, and
// MXFP4 experts (interleaved gate/up rows, per-expert biases, clamped
// SwiGLU).
//
//===----------------------------------------------------------------------===//

#include "compiler/models/GptOss.h"
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
using importers::GptOssConfig;

namespace {

constexpr int64_t kDyn = ShapedType::kDynamic;

/// Emits the ops of one function; weights are declared once per module.
class Emitter : public ModelBuilder {
public:
  Emitter(ModuleOp module, const GptOssConfig &config,
          const importers::Checkpoint &checkpoint)
      : ModelBuilder(
            module, checkpoint,
            CheckpointTraits{std::nullopt, config.ropeTheta, config.yarn}),
        config(config) {}

  /// Query and key-value heads (with their sinks and caches), every
  /// expert's intermediate features and the LM head split over
  /// tensor-parallel ranks (docs/parallel.md).
  static constexpr bool kSupportsTensorParallel = true;

  llvm::Error buildFunction(StringRef name, const BuildOptions &options);

private:
  llvm::Expected<Value> attention(int64_t layer, Value x, Value positions,
                                  Value &kCache, Value &vCache);
  /// This rank's key-value heads `[first, first + count)`: its share when
  /// the tensor-parallel ranks divide them; when the ranks outnumber them
  /// (and are a multiple), the one head its query heads read, replicated
  /// over ranks / kv_heads ranks (as vLLM does).
  llvm::Expected<std::pair<int64_t, int64_t>> kvHeadRange();
  /// Rows `[first, first + count)` of the projection `name` ([out, in])
  /// with its bias when the config has attention biases.
  llvm::Expected<Value> projectionRows(Value x, StringRef name, int64_t out,
                                       int64_t in, int64_t first,
                                       int64_t count);
  llvm::Expected<Value> moe(int64_t layer, Value x);
  /// `name` projected to `out` features with its bias when the config has
  /// attention biases, split over tensor-parallel ranks as `split` says.
  llvm::Expected<Value> projection(Value x, StringRef name, int64_t out,
                                   int64_t in, Split split);

  std::string layerName(int64_t layer, StringRef rest) {
    return llvm::formatv("model.layers.{0}.{1}", layer, rest).str();
  }

  const GptOssConfig &config;
  /// The sequence (cache batch row) of each token.
  Value sequences;
};

} // namespace

static llvm::Error errorf(const llvm::Twine &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
}

llvm::Expected<Value> Emitter::projection(Value x, StringRef name, int64_t out,
                                          int64_t in, Split split) {
  std::string bias = config.attentionBias ? (name + ".bias").str() : "";
  return linear(x, (name + ".weight").str(), out, in, bias, split);
}

llvm::Expected<std::pair<int64_t, int64_t>> Emitter::kvHeadRange() {
  int64_t kv = config.numKeyValueHeads;
  if (tpRanks <= kv || tpRanks % kv != 0)
    return rankRange(kv, "num_key_value_heads");
  if (config.numHeads % tpRanks != 0)
    return rankRange(config.numHeads, "num_attention_heads");
  return std::make_pair(tpRank / (tpRanks / kv), int64_t(1));
}

llvm::Expected<Value> Emitter::projectionRows(Value x, StringRef name,
                                              int64_t out, int64_t in,
                                              int64_t first, int64_t count) {
  const std::vector<safetensors::DType> floats = {safetensors::DType::BF16,
                                                  safetensors::DType::F16,
                                                  safetensors::DType::F32};
  auto w =
      weightShard((name + ".weight").str(), {out, in}, floats, 0, first, count);
  if (!w)
    return w.takeError();
  Value bias;
  if (config.attentionBias) {
    auto bv =
        weightShard((name + ".bias").str(), {out}, floats, 0, first, count);
    if (!bv)
      return bv.takeError();
    bias = *bv;
  }
  auto type = cast<RankedTensorType>(x.getType());
  return lm::MatmulOp::create(b, loc, f32Tensor({type.getDimSize(0), count}), x,
                              *w, bias)
      .getResult();
}

llvm::Expected<Value> Emitter::attention(int64_t layer, Value x,
                                         Value positions, Value &kCache,
                                         Value &vCache) {
  const GptOssConfig &c = config;
  int64_t dim = c.headDim;
  auto name = [&](StringRef rest) {
    return layerName(layer, ("self_attn." + rest).str());
  };
  // This rank's query heads and the key-value heads they read.
  auto headRange = rankRange(c.numHeads, "num_attention_heads");
  if (!headRange)
    return headRange.takeError();
  auto kvRange = kvHeadRange();
  if (!kvRange)
    return kvRange.takeError();
  int64_t heads = headRange->second, kvHeads = kvRange->second;
  auto q = projection(x, name("q_proj"), c.numHeads * dim, c.hiddenSize,
                      Split::Output);
  if (!q)
    return q.takeError();
  // Keys and values of this rank's key-value heads (all on one rank).
  auto kv = [&](StringRef proj) -> llvm::Expected<Value> {
    int64_t out = c.numKeyValueHeads * dim;
    if (tpRanks == 1)
      return projection(x, name(proj), out, c.hiddenSize, Split::None);
    return projectionRows(x, name(proj), out, c.hiddenSize,
                          kvRange->first * dim, kvHeads * dim);
  };
  auto k = kv("k_proj");
  if (!k)
    return k.takeError();
  auto v = kv("v_proj");
  if (!v)
    return v.takeError();
  // Half-split RoPE over the whole head of queries and keys.
  Value qHeads = rope(reshape(*q, {kDyn, heads, dim}), positions,
                      lm::RopeStyle::HalfSplit, 0, dim);
  Value kRows = collapseLast(rope(reshape(*k, {kDyn, kvHeads, dim}), positions,
                                  lm::RopeStyle::HalfSplit, 0, dim));

  // This step's keys and values go to the caches first; attention reads
  // every sequence's rows through [B, S, Hkv, D] views of them.
  kCache = lm::CacheWriteOp::create(b, loc, kCache.getType(), kCache, kRows,
                                    positions, sequences, lm::KVLayoutAttr())
               .getResult();
  vCache = lm::CacheWriteOp::create(b, loc, vCache.getType(), vCache, *v,
                                    positions, sequences, lm::KVLayoutAttr())
               .getResult();
  auto cacheType = cast<RankedTensorType>(kCache.getType());
  SmallVector<int64_t> view = {cacheType.getDimSize(0), cacheType.getDimSize(1),
                               kvHeads, dim};
  Value keys = reshape(kCache, view), values = reshape(vCache, view);

  // Sinks are stored bf16; the attention reads them in f32 (a widening
  // lm-fold-weights computes once).
  auto sinks =
      tpRanks == 1
          ? floatWeight(name("sinks"), {heads})
          : weightShard(name("sinks"), {c.numHeads},
                        {safetensors::DType::BF16, safetensors::DType::F16,
                         safetensors::DType::F32},
                        0, headRange->first, heads);
  if (!sinks)
    return sinks.takeError();
  Value sinksF32 = *sinks;
  if (!cast<RankedTensorType>(sinksF32.getType()).getElementType().isF32())
    sinksF32 =
        arith::ExtFOp::create(b, loc, f32Tensor({heads}), sinksF32).getResult();

  bool sliding = c.slidingLayers[layer];
  Value out =
      lm::AttentionOp::create(
          b, loc, f32Tensor({kDyn, heads, dim}), qHeads, keys, values, sinksF32,
          positions, Value(), sequences, Value(),
          lm::MaskKindAttr::get(b.getContext(),
                                sliding ? lm::MaskKind::SlidingWindow
                                        : lm::MaskKind::Causal),
          b.getF64FloatAttr(1.0 / std::sqrt(double(dim))),
          sliding ? b.getI64IntegerAttr(c.slidingWindow) : IntegerAttr())
          .getResult();
  return projection(collapseLast(out), name("o_proj"), c.hiddenSize,
                    c.numHeads * dim, Split::Input);
}

llvm::Expected<Value> Emitter::moe(int64_t layer, Value x) {
  const GptOssConfig &c = config;
  MoeConfig moe;
  moe.hidden = c.hiddenSize;
  moe.inter = c.intermediateSize;
  moe.experts = c.numLocalExperts;
  moe.topK = c.numExpertsPerTok;
  moe.routing = lm::RoutingScore::SoftmaxTopK;
  moe.routerWeight = layerName(layer, "mlp.router.weight");
  moe.routerBias = layerName(layer, "mlp.router.bias");
  // MXFP4 experts, stacked as published: no shared expert to stack.
  moe.loadExperts = [&, layer](StringRef) -> llvm::Expected<RoutedExperts> {
    std::string prefix = layerName(layer, "mlp.experts.");
    int64_t experts = c.numLocalExperts, inter = c.intermediateSize;
    if (!c.mxfp4Experts)
      return errorf("gpt_oss experts without quantization_config (bf16 '" +
                    prefix +
                    "gate_up_proj' [experts, hidden, 2 * inter], "
                    "dequantised by transformers) are not supported yet; "
                    "compile the hub's MXFP4 checkpoint");
    RoutedExperts routed;
    routed.interleavedGateUp = true;
    // Over tensor-parallel ranks each expert's units split: the gate-up
    // rows (interleaved gate, up: a rank's rows are whole units) and the
    // down projection's columns.
    routed.splitByRank = tpRanks > 1 && epRanks == 1;
    // Under expert parallelism, whole experts instead (and their biases).
    auto mine = expertRange(experts, "'" + prefix + "*'");
    if (!mine)
      return mine.takeError();
    std::tie(routed.firstExpert, routed.localExperts) = *mine;
    if (routed.splitByRank)
      if (auto units = rankRange(inter, "intermediate_size"); !units)
        return units.takeError();
    auto gateUp = mxfp4Experts(prefix + "gate_up_proj", experts, 2 * inter,
                               c.hiddenSize, Split::Output);
    if (!gateUp)
      return gateUp.takeError();
    routed.gate = *gateUp;
    std::string biasName = prefix + "gate_up_proj_bias";
    const std::vector<safetensors::DType> floats = {safetensors::DType::BF16,
                                                    safetensors::DType::F16,
                                                    safetensors::DType::F32};
    // An [experts, features] bias: this rank's experts or all of them.
    auto expertBias = [&](const std::string &name,
                          int64_t features) -> llvm::Expected<Value> {
      if (epRanks > 1)
        return weightShard(name, {experts, features}, floats, 0, mine->first,
                           mine->second);
      return floatWeight(name, {experts, features});
    };
    llvm::Expected<Value> gateUpBias = Value();
    if (!routed.splitByRank) {
      gateUpBias = expertBias(biasName, 2 * inter);
    } else {
      auto units = rankRange(2 * inter, "'" + biasName + "' columns");
      if (!units)
        return units.takeError();
      gateUpBias = weightShard(biasName, {experts, 2 * inter}, floats, 1,
                               units->first, units->second);
    }
    if (!gateUpBias)
      return gateUpBias.takeError();
    routed.gateBias = *gateUpBias;
    auto down = mxfp4Experts(prefix + "down_proj", experts, c.hiddenSize, inter,
                             Split::Input);
    if (!down)
      return down.takeError();
    routed.down = *down;
    auto downBias = expertBias(prefix + "down_proj_bias", c.hiddenSize);
    if (!downBias)
      return downBias.takeError();
    routed.downBias = *downBias;
    return routed;
  };
  // Clamped SwiGLU: gate clamped above at the limit, up to [-limit, limit],
  // out = (up + 1) * gate * sigmoid(alpha * gate).
  moe.act = {c.swigluAlpha, c.swigluLimit, 1.0};
  return ModelBuilder::moe(x, moe);
}

llvm::Error Emitter::buildFunction(StringRef name,
                                   const BuildOptions &options) {
  const GptOssConfig &c = config;
  // Tokens of several sequences are flattened into one dim; `sequences`
  // says whose each token is, `positions` where it sits in its sequence.
  Type ids = tensor({kDyn}, b.getI32Type());
  StepFunction step(b, loc, name);
  unsigned tokenIdsIn = step.addInput("token_ids", ids);
  unsigned positionsIn = step.addInput("positions", ids);
  unsigned sequencesIn = step.addInput("sequences", ids);
  step.addOutput("logits", f32Tensor({kDyn, c.vocabSize}));
  // Each layer's key and value caches, one row of kv_heads * head_dim per
  // token.
  // (This rank's key-value heads.)
  auto kvRange = kvHeadRange();
  if (!kvRange)
    return kvRange.takeError();
  auto cacheType = cast<RankedTensorType>(f32Tensor(
      {options.maxBatch, options.maxSeqLen, kvRange->second * c.headDim}));
  for (int64_t l = 0; l < c.numLayers; ++l) {
    step.addCache(cacheType);
    step.addCache(cacheType);
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
    auto a =
        attention(l, *x, positions, step.cache(2 * l), step.cache(2 * l + 1));
    if (!a)
      return a.takeError();
    h = arith::AddFOp::create(b, loc, h, *a).getResult();
    auto x2 = rmsNorm(h, layerName(l, "post_attention_layernorm.weight"),
                      c.hiddenSize, c.rmsNormEps);
    if (!x2)
      return x2.takeError();
    auto f = moe(l, *x2);
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
models::buildGptOss(MLIRContext &context, const GptOssConfig &config,
                    const importers::Checkpoint &checkpoint,
                    const BuildOptions &options) {
  return buildStepFunctions<Emitter>(context, options, config, checkpoint);
}

llvm::Expected<std::unique_ptr<models::ModelDefinition>>
models::parseGptOssModel(llvm::StringRef json, llvm::StringRef path) {
  return parseConfiguredModel<GptOssConfig, importers::parseGptOssConfig, models::buildGptOss>("gpt_oss", json, path);
}
