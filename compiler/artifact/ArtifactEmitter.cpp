//===- ArtifactEmitter.cpp - plan IR to a .daybreak artifact --------------===//

#include "compiler/artifact/ArtifactEmitter.h"

#include <climits>
#include <deque>
#include <map>
#include <set>

#include "dialects/lm/LmOps.h"
#include "dialects/plan/PlanOps.h"
#include "runtime/abi/KernelAbi.h"
#include "runtime/artifact/ArtifactFile.h"
#include "runtime/artifact/ArtifactWriter.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/FormatVariadic.h"

using namespace mlir;
using namespace daybreak;
using namespace daybreak::artifact;

static llvm::Error errorf(const llvm::Twine &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
}

static std::optional<DType> toDType(Type type) {
  if (type.isF32())
    return DType::F32;
  if (type.isBF16())
    return DType::BF16;
  if (type.isF16())
    return DType::F16;
  if (isa<Float8E4M3FNType>(type))
    return DType::F8E4M3FN;
  if (isa<Float4E2M1FNType>(type))
    return DType::F4E2M1FN;
  if (isa<Float8E8M0FNUType>(type))
    return DType::F8E8M0FNU;
  if (type.isInteger(32))
    return DType::I32;
  if (type.isInteger(64))
    return DType::I64;
  if (type.isInteger(8))
    return DType::U8;
  return std::nullopt;
}

/// The stored bytes of a weight's value: its raw data as MLIR holds it, or
/// where that is not the stored layout, bytes built into `owned` (which
/// must outlive the writer): a splat repeated, and 4-bit types (MLIR keeps
/// one value a byte) packed two a byte, low nibble first, as plan.weight
/// sizes them. Fails unless the result is `size` bytes.
static llvm::Expected<ArrayRef<char>>
storedBytes(DenseElementsAttr value, uint64_t size,
            std::deque<std::vector<char>> &owned) {
  ArrayRef<char> raw = value.getRawData();
  Type elem = value.getElementType();
  int64_t count = value.getNumElements();
  unsigned bits = elem.isIntOrFloat() ? elem.getIntOrFloatBitWidth() : 0;
  if (bits == 4) {
    std::vector<char> &packed = owned.emplace_back((count + 1) / 2, 0);
    for (int64_t i = 0; i < count; ++i) {
      uint8_t nibble = uint8_t(raw[value.isSplat() ? 0 : i]) & 0xF;
      packed[i / 2] = char(uint8_t(packed[i / 2]) | (nibble << (4 * (i % 2))));
    }
    raw = packed;
  } else if (value.isSplat() && count > 1) {
    std::vector<char> &repeated = owned.emplace_back();
    repeated.reserve(raw.size() * count);
    for (int64_t i = 0; i < count; ++i)
      repeated.insert(repeated.end(), raw.begin(), raw.end());
    raw = repeated;
  }
  if (raw.size() != size)
    return errorf("holds " + Twine(raw.size()) + " bytes of value, its type " +
                  Twine(size));
  return raw;
}

/// Stores kernel parameter `name` (checked against the kernel's declaration
/// by plan.launch's verifier) in its artifact form.
/// The bytes of `source` a weight of shard `shard` holds, in order, as
/// (offset into the tensor's bytes, size) ranges: one range when every dim
/// before the cut is 1 (rows of a projection, experts of a stack), else one
/// for each index of those dims (columns). Errors name the weight and
/// source.
static llvm::Expected<SmallVector<std::pair<uint64_t, uint64_t>>>
shardRanges(const safetensors::TensorView &source, StringRef sourceName,
            lm::ShardAttr shard, StringRef weight) {
  SmallVector<std::pair<uint64_t, uint64_t>> ranges;
  if (!shard) {
    ranges.push_back({0, uint64_t(source.byteSize)});
    return ranges;
  }
  int64_t dim = shard.getDim(), rank = source.shape.size();
  if (dim >= rank || shard.getOffset() + shard.getSize() > source.shape[dim])
    return errorf("weight @" + weight + ": its shard " +
                  llvm::formatv("[{0}, {1}) of dim {2}", shard.getOffset(),
                                shard.getOffset() + shard.getSize(), dim)
                      .str() +
                  " is outside '" + sourceName + "'");
  uint64_t outer = 1, inner = safetensors::dtypeSize(source.dtype);
  for (int64_t d = 0; d < dim; ++d)
    outer *= source.shape[d];
  for (int64_t d = dim + 1; d < rank; ++d)
    inner *= source.shape[d];
  uint64_t row = source.shape[dim] * inner;
  for (uint64_t o = 0; o < outer; ++o)
    ranges.push_back(
        {o * row + shard.getOffset() * inner, shard.getSize() * inner});
  return ranges;
}

static void addParam(Launch &launch, StringRef name, Attribute value) {
  Attr *attr = launch.add_attrs();
  attr->set_name(name.str());
  llvm::TypeSwitch<Attribute>(value)
      .Case([&](BoolAttr b) { attr->set_i(b.getValue()); })
      .Case([&](IntegerAttr i) { attr->set_i(i.getInt()); })
      .Case([&](FloatAttr f) { attr->set_f(f.getValueAsDouble()); })
      .Case([&](UnitAttr) { attr->set_i(1); })
      .Case([&](StringAttr s) { attr->set_s(s.str()); })
      .Case([&](DenseI32ArrayAttr a) {
        for (int32_t v : a.asArrayRef())
          attr->mutable_ints()->add_values(v);
      })
      .Case([&](DenseI64ArrayAttr a) {
        for (int64_t v : a.asArrayRef())
          attr->mutable_ints()->add_values(v);
      });
}

/// The MXFP4 figures of the memory plan: the online workspace (the largest
/// per step of its buffers, one allocation per name), and the experts'
/// stored and offline bytes, from the weights the MXFP4 launches read (a
/// value is 1/2 + 1/32 bytes packed, 1 + 4/32 as E4M3 with fp32 scales).
static void setMxfp4Figures(const Manifest &manifest, MemoryPlan &memory) {
  uint64_t workspace = 0;
  std::set<uint32_t> read;
  for (const Step &step : manifest.steps()) {
    std::map<std::string, uint64_t> shared;
    for (const Buffer &b : step.buffers())
      if (llvm::StringRef(b.name()).starts_with("mxfp4_workspace."))
        shared[b.name()] = std::max<uint64_t>(shared[b.name()], b.max_bytes());
    uint64_t bytes = 0;
    for (const auto &[name, size] : shared)
      bytes += (size + 255) / 256 * 256;
    workspace = std::max(workspace, bytes);
    for (const Launch &l : step.launches()) {
      // The launch's MXFP4 weight, or the offline route's E4M3 one ([1, 32]
      // blocks).
      int slot = -1;
      if (l.kernel() == "mxfp4_to_fp8_experts")
        slot = abi::Mxfp4ToFp8Experts::In::weight;
      else if (l.kernel() == "mxfp4_expert_matmul")
        slot = abi::Mxfp4ExpertMatmul::In::weight;
      else if (l.kernel() == "expert_matmul" &&
               memory.mxfp4_route() == "offline")
        for (const Attr &a : l.attrs())
          if (a.name() == "block_size" && a.ints().values_size() == 2 &&
              a.ints().values(0) == 1 && a.ints().values(1) == 32)
            slot = abi::ExpertMatmul::In::weight;
      if (slot >= 0 && l.operands(slot).has_weight())
        read.insert(l.operands(slot).weight());
    }
  }
  uint64_t values = 0;
  for (uint32_t w : read) {
    uint64_t n = 1;
    for (int64_t d : manifest.weights(w).shape())
      n *= d;
    values += n;
  }
  memory.set_mxfp4_workspace_bytes(workspace);
  memory.set_mxfp4_offline_bytes(values + values / 32 * 4);
  memory.set_mxfp4_stored_bytes(memory.mxfp4_route() == "offline"
                                    ? values + values / 32 * 4
                                    : values / 2 + values / 32);
}

llvm::Expected<Manifest>
artifact::emitArtifact(ModuleOp module, const importers::Checkpoint &checkpoint,
                       const EmitInfo &info, const std::string &path) {
  Manifest manifest;
  manifest.set_model_type(info.modelType);
  manifest.set_config_json(info.configJson);
  manifest.set_vocab_size(info.vocabSize);
  // eos_token_id keeps the first for readers of one id; all are listed.
  manifest.set_eos_token_id(info.eosTokenIds.empty() ? -1
                                                     : info.eosTokenIds[0]);
  for (int64_t id : info.eosTokenIds)
    manifest.add_eos_token_ids(id);
  manifest.set_target(info.target);
  if (info.ranks() > 1) {
    manifest.set_rank(info.rank);
    manifest.set_ranks(info.ranks());
    manifest.set_tensor_parallel_size(info.tensorParallel);
    manifest.set_expert_parallel_size(info.expertParallel);
  }

  // Weights: section 0 in plan order at the planned offsets.
  // The bytes stay where they are (folded values in the module, tensors in
  // the checkpoint's mapping) until the writer copies them into the file.
  uint64_t weightSectionSize = 0;
  std::vector<ArtifactWriter::Piece> weightPieces;
  // Values whose stored bytes differ from MLIR's (packed, splats), kept
  // here until the writer copies them.
  std::deque<std::vector<char>> owned;
  llvm::StringMap<uint32_t> weightIndex;
  // By reference: one external file per checkpoint file used, hashed once;
  // the weights still embedded are packed anew (64-byte aligned).
  llvm::StringMap<uint32_t> externalIndex;
  uint64_t packed = 0;
  for (auto weight : module.getOps<plan::WeightOp>()) {
    auto type = cast<RankedTensorType>(weight.getType());
    std::optional<DType> dtype = toDType(type.getElementType());
    if (!dtype)
      return errorf("weight @" + weight.getSymName() +
                    " has no artifact dtype");
    uint64_t offset = weight.getOffsetAttr().getInt();
    uint64_t size = weight.getByteSize();
    auto sources = weight->getAttrOfType<ArrayAttr>("lm.sources");
    auto shard = weight->getAttrOfType<lm::ShardAttr>("lm.shard");
    if (info.weightsByReference && !weight->hasAttr("lm.value") && sources &&
        !sources.empty()) {
      // Checkpoint tensors whose bytes, in order, are the weight's (one
      // tensor, or a stack of them, each whole or one range of a shard) stay
      // where they are.
      SmallVector<std::pair<importers::Checkpoint::Location, uint64_t>> parts;
      uint64_t total = 0;
      for (Attribute source : sources) {
        StringRef name = cast<StringAttr>(source).getValue();
        auto view = checkpoint.find(name);
        std::optional<importers::Checkpoint::Location> at =
            checkpoint.locate(name);
        if (!view) {
          llvm::consumeError(view.takeError());
          break;
        }
        auto ranges = shardRanges(**view, name, shard, weight.getSymName());
        if (!ranges)
          return ranges.takeError();
        if (!at || ranges->size() != 1)
          break;
        at->offset += ranges->front().first;
        parts.push_back({*at, ranges->front().second});
        total += ranges->front().second;
      }
      if (parts.size() == sources.size() && total == size) {
        Weight *w = manifest.add_weights();
        w->set_name(weight.getSymName().str());
        w->set_dtype(*dtype);
        for (int64_t d : type.getShape())
          w->add_shape(d);
        w->set_size(size);
        for (auto &[at, bytes] : parts) {
          auto [entry, added] = externalIndex.try_emplace(
              at.path, manifest.external_files_size());
          if (added) {
            ExternalFile *f = manifest.add_external_files();
            f->set_path(at.path);
            f->set_size(at.file->fileSize());
            f->set_head_bytes(at.file->headerBytes());
            f->set_head_xxh3(
                xxh3(at.file->fileData(), at.file->headerBytes()));
            f->set_xxh3(xxh3(at.file->fileData(), at.file->fileSize()));
          }
          // Adjacent ranges of one file merge into one piece.
          if (w->pieces_size() &&
              w->pieces(w->pieces_size() - 1).file() == entry->second &&
              w->pieces(w->pieces_size() - 1).offset() +
                      w->pieces(w->pieces_size() - 1).size() ==
                  at.offset) {
            WeightPiece *last = w->mutable_pieces(w->pieces_size() - 1);
            last->set_size(last->size() + bytes);
            continue;
          }
          WeightPiece *piece = w->add_pieces();
          piece->set_file(entry->second);
          piece->set_offset(at.offset);
          piece->set_size(bytes);
        }
        weightIndex[weight.getSymName()] = manifest.weights_size() - 1;
        continue;
      }
    }
    if (info.weightsByReference) {
      offset = packed;
      packed = (offset + size + 63) / 64 * 64;
    }
    weightSectionSize = std::max(weightSectionSize, offset + size);
    if (auto value = weight->getAttrOfType<DenseElementsAttr>("lm.value")) {
      llvm::Expected<ArrayRef<char>> raw = storedBytes(value, size, owned);
      if (!raw)
        return errorf("folded weight @" + weight.getSymName() + " " +
                      llvm::toString(raw.takeError()));
      weightPieces.push_back({offset, raw->data(), size});
    } else {
      if (!sources || sources.empty())
        return errorf("weight @" + weight.getSymName() + " has no data");
      uint64_t written = 0;
      for (Attribute source : sources) {
        StringRef name = cast<StringAttr>(source).getValue();
        auto view = checkpoint.find(name);
        if (!view)
          return view.takeError();
        auto ranges = shardRanges(**view, name, shard, weight.getSymName());
        if (!ranges)
          return ranges.takeError();
        for (auto [from, bytes] : *ranges) {
          if (written + bytes > size)
            return errorf("weight @" + weight.getSymName() +
                          ": its sources hold more bytes than its type");
          weightPieces.push_back(
              {offset + written, (*view)->data + from, bytes});
          written += bytes;
        }
      }
      if (written != size)
        return errorf("weight @" + weight.getSymName() + ": sources hold " +
                      Twine(written) + " bytes, its type " + Twine(size));
    }
    Weight *w = manifest.add_weights();
    w->set_name(weight.getSymName().str());
    w->set_dtype(*dtype);
    w->set_folded(weight->hasAttr("lm.value"));
    for (int64_t d : type.getShape())
      w->add_shape(d);
    w->set_section(0);
    w->set_offset(offset);
    w->set_size(size);
    weightIndex[weight.getSymName()] = manifest.weights_size() - 1;
  }

  // Caches: one per pool layer.
  llvm::StringMap<uint32_t> firstCache;
  uint64_t cacheBytesPerToken = 0, cacheBytes = 0, stateBytesPerSequence = 0;
  for (auto pool : module.getOps<plan::CachePoolOp>()) {
    lm::KVLayoutAttr layout = pool.getLayout();
    CacheFormat format;
    Type storage = layout.getStorageType();
    if (storage.isF32())
      format = CACHE_F32;
    else if (storage.isBF16())
      format = CACHE_BF16;
    else if (isa<Float8E4M3FNType>(storage))
      format = CACHE_FP8_SCALED;
    else
      return errorf("cache pool @" + pool.getSymName() +
                    " has an unsupported storage type");
    auto batch = pool->getAttrOfType<IntegerAttr>("batch");
    auto maxSeq = pool->getAttrOfType<IntegerAttr>("max_seq_len");
    if (!batch || !maxSeq)
      return errorf("cache pool @" + pool.getSymName() +
                    " lacks its batch and max_seq_len");
    manifest.set_max_batch(batch.getInt());
    // A k-pool cache's rows cover whole pools, up to rowTokens - 1 tokens
    // past the others': the model's limit is the least.
    if (!manifest.max_seq_len() || maxSeq.getInt() < manifest.max_seq_len())
      manifest.set_max_seq_len(maxSeq.getInt());
    int64_t rowTokens = 1;
    if (auto attr = pool->getAttrOfType<IntegerAttr>("row_tokens"))
      rowTokens = attr.getInt();
    firstCache[pool.getSymName()] = manifest.caches_size();
    int64_t rows = pool.getMaxTokensAttr().getInt();
    int64_t window = layout.getWindow();
    if (window) {
      if (rows % batch.getInt() != 0)
        return errorf("window cache pool @" + pool.getSymName() +
                      " holds rows no whole number of per-sequence rings");
    } else {
      // One page table serves every paged cache: one pool size.
      int64_t pages = rows / layout.getPageSize();
      if (pages >= INT32_MAX)
        return errorf("cache pool @" + pool.getSymName() + " needs " +
                      Twine(pages) +
                      " pages; the page table indexes fewer than 2^31 "
                      "(lower --max-batch, --max-seq-len or "
                      "--kv-cache-tokens)");
      if (manifest.cache_pages() && manifest.cache_pages() != pages)
        return errorf("cache pool @" + pool.getSymName() + " holds " +
                      Twine(pages) + " pages; the other paged pools hold " +
                      Twine(manifest.cache_pages()));
      manifest.set_cache_pages(pages);
    }
    for (int64_t l = 0; l < static_cast<int64_t>(pool.getLayers()); ++l) {
      Cache *c = manifest.add_caches();
      c->set_name((pool.getSymName() + "." + Twine(l)).str());
      c->set_kind(window ? CACHE_WINDOW : CACHE_PAGED);
      c->set_format(format);
      c->set_width(layout.getFeatureDim());
      c->set_tail_dim(layout.getTailDim());
      c->set_scale_block(layout.getScaleBlock());
      c->set_bytes_per_row(layout.getBytesPerToken());
      if (window) {
        c->set_window(window);
        c->set_window_rows(rows / batch.getInt());
      } else {
        c->set_page_size(layout.getPageSize());
        if (rowTokens > 1)
          c->set_row_tokens(rowTokens);
      }
    }
    cacheBytesPerToken +=
        layout.getBytesPerToken() * pool.getLayers() / rowTokens;
    // The runtime adds one zero page per paged cache (unmapped entries).
    cacheBytes += pool.getByteSize() +
                  (window ? 0
                          : layout.getPageSize() * layout.getBytesPerToken() *
                                pool.getLayers());
  }
  // Per-sequence state: one cache entry per layer, after the caches.
  for (auto pool : module.getOps<plan::StatePoolOp>()) {
    lm::StateLayoutAttr layout = pool.getLayout();
    std::optional<DType> dtype = toDType(layout.getStorageType());
    if (!dtype)
      return errorf("state pool @" + pool.getSymName() +
                    " has an unsupported storage type");
    if (manifest.max_batch() &&
        manifest.max_batch() != int64_t(pool.getBatch()))
      return errorf("state pool @" + pool.getSymName() + " has " +
                    Twine(pool.getBatch()) + " slots; the caches have " +
                    Twine(manifest.max_batch()));
    manifest.set_max_batch(pool.getBatch());
    firstCache[pool.getSymName()] = manifest.caches_size();
    for (int64_t l = 0; l < static_cast<int64_t>(pool.getLayers()); ++l) {
      Cache *c = manifest.add_caches();
      c->set_name((pool.getSymName() + "." + Twine(l)).str());
      c->set_kind(CACHE_SLOT_STATE);
      c->set_slot_bytes(pool.getSlotBytes());
      c->set_state_dtype(*dtype);
      for (int64_t d : pool.getSlotShape())
        c->add_state_shape(d);
    }
    stateBytesPerSequence += pool.getSlotBytes() * pool.getLayers();
    cacheBytes += pool.getByteSize();
  }

  // Steps.
  llvm::StringMap<StringRef> kernelEntry;
  for (auto kernel : module.getOps<plan::KernelOp>())
    kernelEntry[kernel.getSymName()] = kernel.getEntry();
  uint64_t arenaBytes = 0;
  for (auto step : module.getOps<plan::StepOp>()) {
    Step *s = manifest.add_steps();
    s->set_name(step.getSymName().str());
    for (Attribute name : step.getSizeNames())
      s->add_size_names(cast<StringAttr>(name).str());
    if (std::optional<ArrayRef<int64_t>> maxSizes = step.getMaxSizes())
      for (int64_t m : *maxSizes)
        s->add_max_sizes(m);
    // A step's most tokens: the largest is the artifact's (decode is
    // planned for one token a sequence).
    if (s->max_sizes_size())
      manifest.set_max_tokens(std::max(manifest.max_tokens(), s->max_sizes(0)));
    s->set_arena_size(step.getArenaSizeAttr().getInt());
    arenaBytes = std::max<uint64_t>(arenaBytes, s->arena_size());
    Block &body = step.getBody().front();
    llvm::DenseMap<Value, Operand> operands;
    for (Operation &op : body) {
      if (auto buffer = dyn_cast<plan::BufferOp>(op)) {
        auto type = cast<MemRefType>(buffer.getType());
        std::optional<DType> dtype = toDType(type.getElementType());
        if (!dtype)
          return errorf("buffer '" + buffer.getName() + "' has no dtype");
        Buffer *b = s->add_buffers();
        b->set_name(buffer.getName().str());
        b->set_dtype(*dtype);
        auto size = buffer.getSizes().begin();
        uint64_t maxElements = 1;
        for (int64_t d : type.getShape()) {
          SizeExpr *e = b->add_dims();
          if (!ShapedType::isDynamic(d)) {
            e->set_constant(d);
            maxElements *= d;
            continue;
          }
          auto arg = cast<BlockArgument>(*size++);
          for (unsigned i = 0; i < body.getNumArguments(); ++i)
            e->add_coeffs(i == arg.getArgNumber() ? 1 : 0);
          maxElements *= s->max_sizes(arg.getArgNumber());
        }
        b->set_offset(buffer.getOffsetAttr().getInt());
        b->set_max_bytes((maxElements * type.getElementTypeBitWidth() + 7) /
                         8);
        Operand operand;
        operand.set_buffer(s->buffers_size() - 1);
        operands[buffer.getResult()] = operand;
        if (auto io = buffer->getAttrOfType<StringAttr>("io")) {
          StepIO *entry = s->add_io();
          entry->set_buffer(s->buffers_size() - 1);
          entry->set_output(io.getValue() == "output");
          if (auto role = buffer->getAttrOfType<StringAttr>("role"))
            entry->set_role(role.str());
        }
      } else if (auto view = dyn_cast<plan::ColumnViewOp>(op)) {
        // The source's bytes from the view's first column, rows as far
        // apart as the source's.
        auto source = view.getSource().getDefiningOp<plan::BufferOp>();
        const Buffer &whole = s->buffers(operands[source].buffer());
        auto type = cast<MemRefType>(view.getType());
        int64_t elementBits = type.getElementTypeBitWidth();
        if (elementBits % 8 != 0)
          return errorf("column view of buffer '" + source.getName() +
                        "' has sub-byte elements");
        Buffer *b = s->add_buffers();
        *b = whole;
        b->mutable_dims(b->dims_size() - 1)
            ->set_constant(type.getShape().back());
        int64_t stride = view.getRowStride(), bytes = elementBits / 8;
        uint64_t rows = whole.max_bytes() / bytes / stride;
        b->set_offset(whole.offset() + view.getColumn() * bytes);
        b->set_row_stride(stride);
        b->set_max_bytes(
            rows ? ((rows - 1) * stride + type.getShape().back()) * bytes : 0);
        Operand operand;
        operand.set_buffer(s->buffers_size() - 1);
        operands[view.getResult()] = operand;
      } else if (auto ref = dyn_cast<plan::WeightRefOp>(op)) {
        Operand operand;
        operand.set_weight(weightIndex.lookup(ref.getWeight()));
        operands[ref.getResult()] = operand;
      } else if (auto ref = dyn_cast<plan::CacheRefOp>(op)) {
        Operand operand;
        operand.set_cache(firstCache.lookup(ref.getPool()) +
                          ref.getLayerAttr().getInt());
        operands[ref.getResult()] = operand;
      } else if (auto launch = dyn_cast<plan::LaunchOp>(op)) {
        Launch *l = s->add_launches();
        l->set_kernel(kernelEntry.lookup(launch.getKernel()).str());
        int64_t numResults = 0;
        if (auto n = launch->getAttrOfType<IntegerAttr>("num_results"))
          numResults = n.getInt();
        // Operands by declared slot: absent optional ones keep theirs.
        ArrayRef<int64_t> absent;
        if (auto a = launch->getAttrOfType<DenseI64ArrayAttr>(plan::kAbsentAttr))
          absent = a.asArrayRef();
        int64_t numOperands = launch.getArgs().size() - numResults;
        auto args = launch.getArgs();
        for (int64_t i = 0, slot = 0; i < numOperands; ++slot) {
          if (llvm::is_contained(absent, slot)) {
            l->add_operands()->set_absent(true);
            continue;
          }
          *l->add_operands() = operands.lookup(args[i++]);
        }
        for (int64_t slot : absent)
          if (slot >= l->operands_size())
            l->add_operands()->set_absent(true);
        for (Value arg : args.drop_front(numOperands))
          *l->add_results() = operands.lookup(arg);
        for (NamedAttribute attr : launch->getDiscardableAttrs()) {
          StringRef name = attr.getName();
          if (name == plan::kSpecializedAttr)
            l->set_specialized(cast<StringAttr>(attr.getValue()).str());
          else if (name == plan::kQueueAttr)
            l->set_queue(cast<IntegerAttr>(attr.getValue()).getInt());
          else if (name == plan::kJoinQueueAttr)
            l->set_join_queue(cast<IntegerAttr>(attr.getValue()).getInt());
          else if (!plan::isLaunchLevelAttr(name))
            addParam(*l, name, attr.getValue());
        }
      } else {
        return errorf("plan op '" + op.getName().getStringRef() +
                      "' has no artifact form");
      }
    }
  }

  // The devices hold every weight as stored, each 256-byte aligned; the
  // plan says how much is in each stored type and where it came from.
  uint64_t deviceWeightBytes = 0;
  MemoryPlan *memory = manifest.mutable_memory();
  for (const Weight &w : manifest.weights()) {
    deviceWeightBytes += (w.size() + 255) / 256 * 256;
    std::string origin = w.folded() ? "folded (lm-fold-weights)" : "checkpoint";
    WeightPrecision *group = nullptr;
    for (WeightPrecision &p : *memory->mutable_weight_precisions())
      if (p.dtype() == w.dtype() && p.origin() == origin)
        group = &p;
    if (!group) {
      group = memory->add_weight_precisions();
      group->set_dtype(w.dtype());
      group->set_origin(origin);
    }
    group->set_tensors(group->tensors() + 1);
    group->set_bytes(group->bytes() + w.size());
  }
  memory->set_weight_bytes(deviceWeightBytes);
  memory->set_stored_weight_bytes(weightSectionSize);
  memory->set_arena_bytes(arenaBytes);
  memory->set_cache_bytes_per_token(cacheBytesPerToken);
  memory->set_cache_bytes(cacheBytes);
  memory->set_state_bytes_per_sequence(stateBytesPerSequence);
  memory->set_total_bytes(deviceWeightBytes + arenaBytes + cacheBytes);
  if (auto route = module->getAttrOfType<StringAttr>("lm.mxfp4_route")) {
    memory->set_mxfp4_route(route.str());
    setMxfp4Figures(manifest, *memory);
  }

  ArtifactWriter writer;
  StatusOr<uint32_t> weightSection = writer.addSection(
      "weights", weightSectionSize, std::move(weightPieces));
  if (!weightSection.ok())
    return errorf("weights: " + weightSection.error().message());
  if (!info.cpuCode.empty())
    writer.addSection("code.x86_64", info.cpuCode);
  for (const EmitInfo::GpuModule &module : info.gpuModules) {
    CodeImage *ptx = manifest.add_code();
    ptx->set_module(module.name);
    ptx->set_format("ptx");
    ptx->set_arch(module.arch);
    ptx->set_library_fingerprint(module.libraryFingerprint);
    ptx->set_dependent_launch(module.dependentLaunch);
    ptx->set_section(writer.addSection("code.ptx." + module.name,
                                       module.ptx.data(), module.ptx.size()));
    if (module.cubin.empty())
      continue;
    CodeImage *cubin = manifest.add_code();
    cubin->set_module(module.name);
    cubin->set_format("cubin");
    cubin->set_arch(module.arch);
    cubin->set_library_fingerprint(module.libraryFingerprint);
    cubin->set_dependent_launch(module.dependentLaunch);
    cubin->set_section(writer.addSection("code.cubin." + module.name + "." +
                                             module.arch,
                                         module.cubin));
    for (const EmitInfo::GpuKernel &k : module.kernels) {
      KernelInfo *kernel = cubin->add_kernels();
      kernel->set_name(k.name);
      kernel->set_registers(k.registers);
      kernel->set_shared_bytes(k.sharedBytes);
      kernel->set_block(k.block);
    }
  }
  Status status = writer.write(path, manifest);
  if (!status.ok())
    return errorf(status.message());
  return manifest;
}
