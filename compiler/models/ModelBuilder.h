//===- ModelBuilder.h - The toolkit model builders share --------*- C++ -*-===//
//
// What every family's builder needs to write lm IR from a checkpoint:
// checked weight access (each checkpoint tensor declared once as an
// lm.weight, its shape and dtype checked, errors naming it), stacked experts,
// linear layers (optional bias) on plain or FP8 block-scaled weights (kept at
// their stored precision: lm.fp8_matmul reads the codes and scales), expert
// matmuls over plain, FP8 or MXFP4 experts, the gated MLP and the MoE block
// (routing, routed experts in any of those formats, optional shared
// experts), RMSNorm, RoPE with YaRN, and the slicing and reshaping the
// attention variants need. A family derives from it (DeepseekV32.cpp,
// GptOss.cpp) and adds its blocks. Builds one module; not thread-safe.
//
//===----------------------------------------------------------------------===//

#ifndef DAYBREAK_COMPILER_MODELS_MODELBUILDER_H
#define DAYBREAK_COMPILER_MODELS_MODELBUILDER_H

#include "compiler/importers/Checkpoint.h"
#include "compiler/importers/HfConfig.h"
#include "compiler/models/ModelRegistry.h"
#include "dialects/lm/LmOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"

#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/StringMap.h"

#include <array>
#include <functional>
#include <optional>
#include <string>

namespace daybreak::models {

/// How a checkpoint stores and rotates what the toolkit reads.
struct CheckpointTraits {
  /// quantization_config's FP8 weight_block_size, when FP8.
  std::optional<std::array<int64_t, 2>> fp8BlockSize;
  double ropeTheta = 10000.0;
  std::optional<importers::YarnConfig> yarn;
};

/// lm.swiglu's parameters: y = g' sigmoid(alpha g') (u' + upOffset), g' and
/// u' clamped by `limit` when set.
struct GluParams {
  double alpha = 1.0;
  std::optional<double> limit;
  double upOffset = 0.0;
};

/// How a projection's [out, in] weight is split over the tensor-parallel
/// ranks (docs/parallel.md).
enum class Split {
  /// Every rank holds all of it.
  None,
  /// Rows: each rank computes `out / ranks` of the output features
  /// (column-parallel).
  Output,
  /// Columns: each rank reads `in / ranks` of the input features, and the
  /// ranks' partial products are summed by an lm.all_reduce (row-parallel).
  Input,
};

class ModelBuilder {
public:
  ModelBuilder(mlir::ModuleOp module, const importers::Checkpoint &checkpoint,
               const CheckpointTraits &traits)
      : module(module), checkpoint(checkpoint),
        fp8BlockSize(traits.fp8BlockSize), ropeTheta(traits.ropeTheta),
        yarnScaling(traits.yarn), b(module.getContext()),
        loc(b.getUnknownLoc()) {}

  /// Families whose builders split their layers over tensor-parallel ranks
  /// say so; the others are built for one rank only.
  static constexpr bool kSupportsTensorParallel = false;
  /// Builds rank `rank`'s functions (before any is built) of `tensor`
  /// tensor-parallel ranks (heads and features split) and `expert`
  /// expert-parallel ones (routed experts partitioned whole), each 1 or
  /// the rank count (docs/parallel.md).
  /// Rank `rank` of max(tensor, expert) ranks: the routed experts
  /// partitioned over all of them (expert > 1), attention, the dense MLPs,
  /// the shared experts and the head split over each consecutive group of
  /// `tensor` (which divides `expert`; checkParallel).
  void setParallel(int64_t rank, int64_t tensor, int64_t expert) {
    ranks = std::max(tensor, expert);
    this->rank = rank;
    tpRanks = tensor;
    tpRank = tensor > 1 ? rank % tensor : 0;
    epRanks = expert;
  }

protected:
  mlir::Type f32() { return b.getF32Type(); }
  mlir::RankedTensorType tensor(llvm::ArrayRef<int64_t> shape,
                                mlir::Type elem) {
    return mlir::RankedTensorType::get(shape, elem);
  }
  mlir::RankedTensorType f32Tensor(llvm::ArrayRef<int64_t> shape) {
    return tensor(shape, f32());
  }

  /// Declares (once) and reads the checkpoint tensor `name`, checking its
  /// shape and that its dtype is one of `dtypes`.
  llvm::Expected<mlir::Value> weight(llvm::StringRef name,
                                     llvm::ArrayRef<int64_t> shape,
                                     llvm::ArrayRef<safetensors::DType> dtypes);
  /// The same, cut to this rank's `[offset, offset + size)` of dim `dim`
  /// (a `#lm.shard`), declared as `{name}.shard{dim}`.
  llvm::Expected<mlir::Value>
  weightShard(llvm::StringRef name, llvm::ArrayRef<int64_t> shape,
              llvm::ArrayRef<safetensors::DType> dtypes, int64_t dim,
              int64_t offset, int64_t size);
  /// This rank's `[offset, size)` of `total` indices split evenly over the
  /// tensor-parallel ranks; an error naming `what` when they do not divide
  /// it.
  llvm::Expected<std::pair<int64_t, int64_t>>
  rankRange(int64_t total, const llvm::Twine &what);
  /// This rank's routed experts `[first, first + count)` of `experts`: all
  /// of them, or under expert parallelism an equal share of whole experts;
  /// an error naming `what` when the ranks do not divide them.
  llvm::Expected<std::pair<int64_t, int64_t>>
  expertRange(int64_t experts, const llvm::Twine &what);
  /// The sum over all ranks of each one's `x`.
  /// The sum of x over each consecutive group of `group` ranks (x itself
  /// for one): the tensor-parallel group's partial products (tpRanks), or
  /// the MoE block's partial outputs over every rank (ranks).
  mlir::Value allReduce(mlir::Value x, int64_t group);
  /// Every tensor-parallel rank's `x` [..., D], concatenated along the last
  /// dim in rank order.
  mlir::Value allGather(mlir::Value x);
  /// `experts` routed experts `prefix.{j}.suffix` stacked into
  /// [experts, shape...] (one weight whose sources are the expert tensors).
  llvm::Expected<mlir::Value> stackedExperts(llvm::StringRef prefix,
                                             llvm::StringRef suffix,
                                             int64_t experts,
                                             llvm::ArrayRef<int64_t> shape);
  /// The same with the dtypes each expert tensor may have, with `shard`,
  /// each expert tensor cut to indices [offset, offset + size) of its dim
  /// `dim` (declared as `{prefix}*.{suffix}.shard{dim}`), from
  /// `firstExpert` on (`experts` of them), and with a non-empty `after`
  /// (a shared expert's tensor) stacked after them (`...+shared`).
  struct Cut {
    int64_t dim, offset, size;
  };
  llvm::Expected<mlir::Value>
  stackedExperts(llvm::StringRef prefix, llvm::StringRef suffix,
                 int64_t experts, llvm::ArrayRef<int64_t> shape,
                 llvm::ArrayRef<safetensors::DType> dtypes,
                 std::optional<Cut> shard = std::nullopt,
                 int64_t firstExpert = 0, llvm::StringRef after = {});
  /// A float weight (bf16/f16/f32) used as is.
  llvm::Expected<mlir::Value> floatWeight(llvm::StringRef name,
                                          llvm::ArrayRef<int64_t> shape) {
    return weight(name, shape,
                  {safetensors::DType::BF16, safetensors::DType::F16,
                   safetensors::DType::F32});
  }
  /// True when `name` is stored FP8 with a `_scale_inv` companion.
  bool isFp8(llvm::StringRef name) {
    return checkpoint.has((name + "_scale_inv").str());
  }

  /// The e4m3 [out, in] weight `name` and its f32 block scales.
  struct Fp8Weight {
    mlir::Value values, scaleInv;
  };
  llvm::Expected<Fp8Weight> fp8Weight(llvm::StringRef name, int64_t out,
                                      int64_t in, Split split = Split::None);

  /// How routed experts' [E, out, in] weights are stored.
  enum class ExpertFormat {
    Plain, ///< bf16, f16 or f32
    Fp8,   ///< e4m3 codes with f32 block scales (`_scale_inv`)
    Mxfp4, ///< E2M1 values with one E8M0 scale per 32 along `in`
  };
  /// Routed experts' weights stacked [E, out, in], in their stored form.
  struct ExpertWeights {
    ExpertFormat format = ExpertFormat::Plain;
    /// [E, out, in]: plain floats, e4m3 codes or E2M1 values.
    mlir::Value values;
    /// Fp8: f32 [E, ceil(out / block[0]), ceil(in / block[1])];
    /// Mxfp4: E8M0 [E, out, in / 32]; Plain: null.
    mlir::Value scales;
    /// Fp8: the block of each scale.
    std::array<int64_t, 2> fp8Block = {0, 0};
  };
  /// Routed experts stored one tensor per expert, `{prefix}{j}.{suffix}`
  /// [out, in] for j < experts (DeepSeek, Kimi): plain, or e4m3 with
  /// `{suffix}_scale_inv` companions in the config's FP8 blocks.
  /// Split::Output or Input cuts every expert's rows or columns to this
  /// rank's, FP8 scales by whole blocks (fp8Weight's rule). A non-empty
  /// `after` is stacked after the experts (a shared expert's tensor, with
  /// its own `_scale_inv`).
  llvm::Expected<ExpertWeights>
  perExpertWeights(llvm::StringRef prefix, llvm::StringRef suffix,
                   int64_t experts, int64_t out, int64_t in,
                   Split split = Split::None, llvm::StringRef after = {});
  /// Routed experts stored stacked in MXFP4 as gpt-oss publishes them:
  /// `{name}_blocks` U8 [experts, out, in / 32, 16] (two E2M1 codes a byte,
  /// low nibble first) and `{name}_scales` U8 [experts, out, in / 32] (E8M0),
  /// declared as the E2M1 [experts, out, in] and E8M0 [experts, out, in / 32]
  /// weights they hold.
  /// Split::Output cuts every expert's rows, Split::Input its columns in
  /// whole blocks of 32 (a rank's columns must be whole blocks).
  llvm::Expected<ExpertWeights> mxfp4Experts(llvm::StringRef name,
                                             int64_t experts, int64_t out,
                                             int64_t in,
                                             Split split = Split::None);
  /// For each token t and routing slot j, x[t, (j,) :] @ W_e^T (+ bias[e])
  /// with e = indices[t, j] (-1: an empty slot): lm.expert_matmul over
  /// plain experts and FP8 ones (through lm.fp8_dequant, which
  /// lm-fold-weights leaves for the kernel to read as stored),
  /// lm.mxfp4_expert_matmul over MXFP4 ones. `x` is [T, in] or [T, k, in];
  /// the result is f32 [T, k, out], or with `routingWeights` [T, k] the
  /// weighted sum over the slots, [T, out].
  mlir::Value expertMatmul(mlir::Value x, const ExpertWeights &weights,
                           mlir::Value indices, mlir::Value routingWeights = {},
                           mlir::Value bias = {});

  /// x @ W^T for the [out, in] weight `name`, plain or FP8 block-scaled,
  /// plus the [out] float weight `bias` when named (plain weights only).
  /// Split::Output gives this rank's `out / ranks` features (and bias);
  /// Split::Input takes x's `in / ranks` features of this rank and returns
  /// the sum over the ranks, the bias added by rank 0 alone. `out` and `in`
  /// are the checkpoint's.
  llvm::Expected<mlir::Value> linear(mlir::Value x, llvm::StringRef name,
                                     int64_t out, int64_t in,
                                     llvm::StringRef bias = {},
                                     Split split = Split::None,
                                     bool reduce = true);

  mlir::Value swiglu(mlir::Value gate, mlir::Value up, const GluParams &act);
  /// The dense gated MLP `{prefix}{gate,up,down}_proj.weight`:
  /// down(swiglu(gate(x), up(x))); over tensor-parallel ranks, gate and up
  /// split by output and down by input.
  /// With `reduce` false, the down projection's partial sum is returned
  /// for the caller to all-reduce with others.
  llvm::Expected<mlir::Value> gatedMlp(mlir::Value x, llvm::StringRef prefix,
                                       int64_t hidden, int64_t inter,
                                       const GluParams &act = {},
                                       bool reduce = true);

  /// A layer's routed experts as the MoE block reads them, with their
  /// optional [E, out] biases.
  struct RoutedExperts {
    /// Separate gate and up projections [E, inter, hidden]; with
    /// `interleavedGateUp`, `gate` alone holds both, [E, 2 inter, hidden],
    /// row 2j gate unit j and row 2j + 1 up unit j (gpt-oss), and
    /// `gateBias` their [E, 2 inter] bias.
    ExpertWeights gate, up, down;
    bool interleavedGateUp = false;
    /// Each expert's intermediate features split over the tensor-parallel
    /// ranks (gate and up by rows, down by columns): the routed output is
    /// this rank's partial sum, which the MoE block all-reduces.
    bool splitByRank = false;
    /// Under expert parallelism, the experts this rank holds whole,
    /// `[firstExpert, firstExpert + localExperts)` (the weights' leading
    /// dim): the MoE block renumbers the routed ids for them
    /// (lm.local_experts) and all-reduces the ranks' routed outputs.
    int64_t firstExpert = 0, localExperts = 0;
    /// Shared experts stacked after the routed ones (expert ids E, E + 1,
    /// ...): the MoE block gives them a slot each with weight 1
    /// (lm.moe_route's shared_experts) instead of an MLP of their own.
    int64_t sharedExperts = 0;
    mlir::Value gateBias, upBias, downBias;
  };
  /// A mixture-of-experts block: router logits, lm.moe_route, the routed
  /// experts' gated MLP weighted per slot, plus optional shared experts.
  struct MoeConfig {
    int64_t hidden = 0, inter = 0, experts = 0, topK = 0;
    lm::RoutingScore routing = lm::RoutingScore::Softmax;
    int64_t numGroups = 1, topKGroups = 1;
    bool renormalize = true;
    double scalingFactor = 1.0;
    /// The router's [experts, hidden] weight and its optional [experts]
    /// bias, added to the logits.
    std::string routerWeight, routerBias;
    /// An optional f32 [experts] bias on the selection scores only
    /// (DeepSeek's e_score_correction_bias).
    std::string selectionBias;
    /// Loads the routed experts; called once the router is emitted, with
    /// the shared experts' prefix where they may be stacked after the
    /// routed ones (perExpertGatedMlp's `stackShared`), else "".
    std::function<llvm::Expected<RoutedExperts>(llvm::StringRef stackShared)>
        loadExperts;
    GluParams act;
    /// Shared experts `{sharedPrefix}{gate,up,down}_proj.weight` of width
    /// sharedInter, added to the routed output; none when the prefix is
    /// empty.
    std::string sharedPrefix;
    int64_t sharedInter = 0;
  };
  llvm::Expected<mlir::Value> moe(mlir::Value x, const MoeConfig &config);
  /// Routed experts stored one tensor per expert and projection,
  /// `{prefix}{j}.{gate,up,down}` ([inter, hidden] and [hidden, inter]),
  /// plain or FP8 as perExpertWeights reads them; over tensor-parallel
  /// ranks, every expert's intermediate features split among them. With
  /// `stackShared` (a shared expert's
  /// `{stackShared}{gate,up,down}_proj.weight`) stored as expert 0's are
  /// (dtype, shape, FP8 scales), the shared expert is stacked after the routed
  /// ones (`sharedExperts` 1).
  llvm::Expected<RoutedExperts>
  perExpertGatedMlp(llvm::StringRef prefix, llvm::StringRef gate,
                    llvm::StringRef up, llvm::StringRef down, int64_t experts,
                    int64_t hidden, int64_t inter,
                    llvm::StringRef stackShared = {});
  /// MLA in absorbed form: `kvB` (kv_b_proj, [heads * (nope + vdim),
  /// lora], dense) split per head into W_UK, transposed to [H, lora, nope],
  /// and W_UV [H, vdim, lora] (both [H, N, K]); `query` is [q_nope W_UK |
  /// q_rope], f32 [T, H, lora + rot], and `up(out)` takes attention's latent
  /// output [T, H, lora] through W_UV to [T, H, vdim].
  struct AbsorbedMla {
    mlir::Value wUK, wUV, query;
  };
  /// Over tensor-parallel ranks, `heads` is this rank's (qNope's) and
  /// `kvB`'s rows are split with them.
  llvm::Expected<AbsorbedMla> absorbMla(llvm::StringRef kvB, mlir::Value qNope,
                                        mlir::Value qRope, int64_t heads,
                                        int64_t nope, int64_t rot, int64_t vdim,
                                        int64_t lora);
  mlir::Value mlaValueUp(const AbsorbedMla &mla, mlir::Value latentOut,
                         int64_t heads, int64_t vdim);
  /// A Kimi Delta Attention mixer as Kimi Linear and GLM-5.3 store it, under
  /// `prefix`: q, k, v projections [heads * dim, hidden] each through a
  /// causal depthwise convolution `{q,k,v}_conv1d.weight` [heads * dim, 1,
  /// convWidth] with SiLU; q and k L2-normalised per head, q scaled by
  /// dim^-0.5; beta = sigmoid(b_proj x); the per-channel log decay from the
  /// low-rank forget gate f_b(f_a(x)), `A_log` (stored as aLogShape, heads
  /// values) and `dt_bias` [heads * dim] (lm.kda_gate: softplus, or bounded
  /// by lowerBound); the gated delta rule chunked (prefill) or one step a
  /// token (decode); the output RMS-normed per head (`o_norm`, normEps)
  /// times sigmoid(g_b(g_a(x))), then o_proj.
  struct KdaSpec {
    std::string prefix;
    int64_t hidden = 0, heads = 0, dim = 0, convWidth = 0;
    double normEps = 1e-5;
    std::optional<double> lowerBound;
    llvm::SmallVector<int64_t, 4> aLogShape;
  };
  /// A KDA layer's per-sequence state, threaded through the step: the q, k
  /// and v convolution windows [batch, convWidth - 1, heads * dim] and the
  /// recurrent state [batch, heads, dim, dim] (over tensor-parallel ranks,
  /// this rank's heads: kdaHeads).
  struct KdaState {
    mlir::Value *convQ, *convK, *convV, *recurrent;
  };
  /// Over tensor-parallel ranks each rank runs its heads (projections,
  /// convolutions, gates and state of those heads; o_proj by input).
  llvm::Expected<mlir::Value> kdaMixer(const KdaSpec &spec, mlir::Value x,
                                       bool decode, const KdaState &state,
                                       mlir::Value sequences);
  /// This rank's KDA heads of `spec`.
  llvm::Expected<int64_t> kdaHeads(const KdaSpec &spec) {
    auto range = rankRange(spec.heads, "'" + spec.prefix + "' KDA head count");
    if (!range)
      return range.takeError();
    return range->second;
  }
  /// x [T, n] -> [T, n] through the causal depthwise convolution `name`
  /// ([n, 1, width] as stored) with SiLU, its window threaded through
  /// `window`. With `channels` (the checkpoint's, over tensor-parallel
  /// ranks), x holds this rank's n of them and the weight is cut to match.
  llvm::Expected<mlir::Value> shortConv(mlir::Value x, llvm::StringRef name,
                                        int64_t width, mlir::Value &window,
                                        mlir::Value sequences,
                                        int64_t channels = 0);
  /// The dense [out, in] value of weight `name` (FP8 dequantised in IR),
  /// this rank's part of it when split.
  llvm::Expected<mlir::Value> denseWeight(llvm::StringRef name, int64_t out,
                                          int64_t in,
                                          Split split = Split::None);
  llvm::Expected<mlir::Value> rmsNorm(mlir::Value x, llvm::StringRef name,
                                      int64_t dim, double eps);
  /// RoPE (with the checkpoint's YaRN scaling, if any) on dims
  /// [offset, offset + dim) of the last axis.
  mlir::Value rope(mlir::Value x, mlir::Value positions, lm::RopeStyle style,
                   int64_t offset, int64_t dim);
  /// x[:, ..., offset : offset + size] along the last dim (first dim T).
  mlir::Value sliceLast(mlir::Value x, int64_t offset, int64_t size);
  mlir::Value dimOf(mlir::Value x, int64_t d) {
    return mlir::tensor::DimOp::create(b, loc, x, d);
  }
  /// Splits dim `splitDim` of x (by default the last) into the extra dims
  /// of `shape`.
  mlir::Value reshape(mlir::Value x, llvm::ArrayRef<int64_t> shape,
                      int64_t splitDim = -1);
  mlir::Value collapseLast(mlir::Value x);

  /// Declares (once) the lm.weight `symbol` of `type` made of the
  /// checkpoint tensors `sources` (cut to `shard` when given), and reads it.
  mlir::Value declaredWeight(llvm::StringRef symbol,
                             mlir::RankedTensorType type,
                             llvm::ArrayRef<std::string> sources,
                             lm::ShardAttr shard = {});

  mlir::ModuleOp module;
  const importers::Checkpoint &checkpoint;
  std::optional<std::array<int64_t, 2>> fp8BlockSize;
  double ropeTheta;
  std::optional<importers::YarnConfig> yarnScaling;
  mlir::OpBuilder b;
  mlir::Location loc;
  llvm::StringMap<lm::WeightOp> declared;
  /// This builder's rank of `ranks`; its tensor-parallel rank and their
  /// count (0 and 1 without tensor parallelism); the expert-parallel ranks.
  int64_t rank = 0, ranks = 1, tpRank = 0, tpRanks = 1, epRanks = 1;
};

/// A family's lm module: `Emitter(module, emitterArgs...)` emits @prefill
/// (prompts, chunked by the runtime) and @decode (one token a sequence)
/// with its `buildFunction(name, options)`. They compute the same function
/// and are separate entry points because the pipeline plans and tiles them
/// differently.
/// An error unless `options` name an existing rank of a parallel layout
/// the builders support: tensor parallelism over T ranks, expert
/// parallelism over E, T dividing E when both are used (attention split
/// over groups of T, routed experts over all E ranks).
llvm::Error checkParallel(const BuildOptions &options);

template <typename Emitter, typename... Args>
llvm::Expected<mlir::OwningOpRef<mlir::ModuleOp>>
buildStepFunctions(mlir::MLIRContext &context, const BuildOptions &options,
                   const Args &...emitterArgs) {
  context.loadDialect<lm::LmDialect, mlir::func::FuncDialect,
                      mlir::arith::ArithDialect, mlir::tensor::TensorDialect>();
  if (options.maxSeqLen <= 0 || options.maxBatch <= 0)
    return llvm::createStringError(
        llvm::inconvertibleErrorCode(),
        "max sequence length and batch must be positive, got " +
            llvm::Twine(options.maxSeqLen) + " and " +
            llvm::Twine(options.maxBatch));
  if (llvm::Error err = checkParallel(options))
    return std::move(err);
  if (options.ranks() > 1 && !Emitter::kSupportsTensorParallel)
    return llvm::createStringError(
        llvm::inconvertibleErrorCode(),
        "tensor and expert parallelism are not supported for this model "
        "family yet; build it for one rank");
  mlir::OwningOpRef<mlir::ModuleOp> module =
      mlir::ModuleOp::create(mlir::UnknownLoc::get(&context));
  Emitter emitter(*module, emitterArgs...);
  emitter.setParallel(options.rank, options.tensorParallel,
                      options.expertParallel);
  for (llvm::StringRef name : {"prefill", "decode"})
    if (llvm::Error err = emitter.buildFunction(name, options))
      return std::move(err);
  return std::move(module);
}

} // namespace daybreak::models

#endif // DAYBREAK_COMPILER_MODELS_MODELBUILDER_H
