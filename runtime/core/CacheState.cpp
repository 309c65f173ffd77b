//===- CacheState.cpp - Caches and per-slot state, and their pages --------===//

#include "runtime/core/CacheState.h"

#include <algorithm>
#include <climits>
#include <string>

using namespace daybreak;
using namespace daybreak::runtime;

const char *runtime::cacheKindName(CacheKind kind) {
  switch (kind) {
  case CacheKind::Paged:
    return "paged";
  case CacheKind::Window:
    return "window";
  case CacheKind::SlotState:
    return "slot state";
  }
  return "?";
}

int64_t runtime::cacheBytesPerRow(CacheFormat format, int64_t width,
                                  int64_t tailDim, int64_t scaleBlock) {
  switch (format) {
  case CacheFormat::F32:
    return 4 * width;
  case CacheFormat::BF16:
    return 2 * width;
  case CacheFormat::Fp8Scaled: {
    int64_t quantized = width - tailDim;
    return quantized + 4 * (quantized / scaleBlock) + 2 * tailDim;
  }
  }
  return 0;
}

static bool mulFits(uint64_t a, uint64_t b, uint64_t &out) {
  return !__builtin_mul_overflow(a, b, &out);
}

StatusOr<CachePlan> CachePlan::build(const artifact::Manifest &m) {
  CachePlan plan;
  plan.batch = m.max_batch();
  plan.maxSeqLen = m.max_seq_len();
  if (m.caches_size() && (plan.batch <= 0 || plan.maxSeqLen <= 0))
    return Status::error("the manifest's limits (max_batch " +
                         std::to_string(plan.batch) + ", max_seq_len " +
                         std::to_string(plan.maxSeqLen) +
                         ") cannot hold caches");
  for (const artifact::Cache &c : m.caches()) {
    CacheLayout layout;
    layout.cache = &c;
    auto fail = [&](const std::string &what) {
      return Status::error("cache '" + c.name() + "' " + what);
    };
    switch (c.kind()) {
    case artifact::CACHE_PAGED:
      layout.kind = CacheKind::Paged;
      break;
    case artifact::CACHE_WINDOW:
      layout.kind = CacheKind::Window;
      break;
    case artifact::CACHE_SLOT_STATE:
      layout.kind = CacheKind::SlotState;
      break;
    default:
      return fail("has no known kind (paged, window or slot state)");
    }
    if (layout.kind == CacheKind::SlotState) {
      layout.slotBytes = c.slot_bytes();
      if (layout.slotBytes <= 0 || layout.slotBytes % 4 != 0)
        return fail("declares " + std::to_string(layout.slotBytes) +
                    " bytes per slot; expected a positive multiple of 4");
      if (!mulFits(plan.batch, layout.slotBytes, layout.bytes))
        return fail("is too large");
      // The state's values, as stored: `format` says f32 or bf16.
      if (c.state_dtype() == artifact::BF16)
        layout.format = CacheFormat::BF16;
      else if (c.state_dtype() != artifact::F32)
        return fail("stores its state as " +
                    artifact::DType_Name(c.state_dtype()) +
                    "; expected F32 or BF16");
      plan.caches.push_back(layout);
      continue;
    }
    switch (c.format()) {
    case artifact::CACHE_F32:
      layout.format = CacheFormat::F32;
      break;
    case artifact::CACHE_BF16:
      layout.format = CacheFormat::BF16;
      break;
    case artifact::CACHE_FP8_SCALED:
      layout.format = CacheFormat::Fp8Scaled;
      if (c.scale_block() <= 0 || c.tail_dim() < 0 ||
          c.tail_dim() >= c.width() ||
          (c.width() - c.tail_dim()) % c.scale_block() != 0)
        return fail("has a scaled FP8 layout its width " +
                    std::to_string(c.width()) + " cannot hold");
      break;
    default:
      return fail("has an unknown format");
    }
    if (c.width() <= 0)
      return fail("has width " + std::to_string(c.width()));
    layout.width = c.width();
    layout.tailDim = c.tail_dim();
    layout.scaleBlock = c.scale_block();
    layout.bytesPerRow = cacheBytesPerRow(layout.format, layout.width,
                                          layout.tailDim, layout.scaleBlock);
    if (layout.bytesPerRow != c.bytes_per_row())
      return fail("declares " + std::to_string(c.bytes_per_row()) +
                  " bytes per row; its format needs " +
                  std::to_string(layout.bytesPerRow));
    if (layout.kind == CacheKind::Window) {
      layout.ringRows = c.window_rows();
      if (c.window() <= 0 || layout.ringRows < c.window() ||
          layout.ringRows >= INT32_MAX)
        return fail("keeps " + std::to_string(layout.ringRows) +
                    " rows per slot for a window of " +
                    std::to_string(c.window()));
      uint64_t rows;
      if (!mulFits(plan.batch, layout.ringRows, rows) ||
          !mulFits(rows, layout.bytesPerRow, layout.bytes))
        return fail("is too large");
    } else {
      layout.pageSize = c.page_size();
      layout.rowTokens = c.row_tokens() ? c.row_tokens() : 1;
      if (layout.pageSize <= 0 || layout.rowTokens < 1 ||
          layout.pageSize > INT32_MAX / layout.rowTokens)
        return fail("has pages of " + std::to_string(layout.pageSize) +
                    " rows of " + std::to_string(layout.rowTokens) + " tokens");
      // Pages span the same tokens in every paged cache.
      int64_t tokens = layout.pageSize * layout.rowTokens;
      if (plan.pageSize && plan.pageSize != tokens)
        return fail("has pages of " + std::to_string(tokens) +
                    " tokens; the model's other paged caches have " +
                    std::to_string(plan.pageSize) +
                    " (one page table serves them all)");
      plan.pageSize = tokens;
    }
    plan.caches.push_back(layout);
  }
  if (plan.pageSize) {
    plan.pagesPerSeq = (plan.maxSeqLen + plan.pageSize - 1) / plan.pageSize;
    int64_t full = plan.batch * plan.pagesPerSeq;
    plan.pages = m.cache_pages() ? m.cache_pages() : full;
    if (plan.pages <= 0 || plan.pages > full)
      return Status::error("the manifest's " +
                           std::to_string(m.cache_pages()) +
                           " cache pages are outside [1, " +
                           std::to_string(full) +
                           "] (max_batch x pages per sequence)");
    if (full >= INT32_MAX)
      return Status::error("max_batch x pages per sequence (" +
                           std::to_string(full) +
                           ") exceeds the page table's 2^31 entries");
    for (CacheLayout &layout : plan.caches) {
      if (layout.kind != CacheKind::Paged)
        continue;
      uint64_t rows;
      if (!mulFits(plan.pages + 1, layout.pageSize, rows) ||
          !mulFits(rows, layout.bytesPerRow, layout.bytes))
        return Status::error("cache '" + layout.cache->name() +
                             "' is too large");
    }
  }
  return plan;
}

uint64_t CachePlan::rowOffset(int c, int64_t seq, int64_t pos,
                              const int32_t *pageTable) const {
  const CacheLayout &layout = caches[c];
  switch (layout.kind) {
  case CacheKind::SlotState:
    return uint64_t(seq) * layout.slotBytes;
  case CacheKind::Window:
    return (uint64_t(seq) * layout.ringRows + pos % layout.ringRows) *
           layout.bytesPerRow;
  case CacheKind::Paged:
    break;
  }
  int64_t rows = layout.pageSize; // a page's rows
  int64_t page = pageTable[seq * pagesPerSeq + pos / rows];
  return (uint64_t(page) * rows + pos % rows) * layout.bytesPerRow;
}

uint64_t CachePlan::totalBytes() const {
  uint64_t total = 0;
  for (const CacheLayout &layout : caches)
    total += layout.bytes;
  return total;
}

PageAllocator::PageAllocator(const CachePlan &plan)
    : batch(plan.batch), pagesPerSeq(plan.pagesPerSeq),
      pageSize(plan.pageSize), pages(plan.pages) {
  pageTable.assign(plan.pageTableEntries(), plan.zeroPage());
  freeList.reserve(pages);
  // Handed out lowest first: a stack popped from the back.
  for (int64_t p = pages - 1; p >= 0; --p)
    freeList.push_back(static_cast<int32_t>(p));
  mapped.assign(batch, 0);
}

Status PageAllocator::grow(int64_t seq, int64_t rows, int64_t &firstEntry,
                           int64_t &count) {
  firstEntry = count = 0;
  if (!pageSize)
    return Status::success();
  if (seq < 0 || seq >= batch)
    return Status::error("slot " + std::to_string(seq) +
                         " is outside the compiled batch of " +
                         std::to_string(batch));
  int64_t needed = (rows + pageSize - 1) / pageSize;
  if (needed > pagesPerSeq)
    return Status::error(std::to_string(rows) +
                         " rows exceed the compiled maximum sequence length "
                         "(" +
                         std::to_string(pagesPerSeq * pageSize) + " rows)");
  int64_t have = mapped[seq];
  if (needed <= have)
    return Status::success();
  if (needed - have > freePages())
    return Status::error(
        "out of cache pages: slot " + std::to_string(seq) + " needs " +
        std::to_string(needed - have) + " more pages of " +
        std::to_string(pageSize) + " tokens for " + std::to_string(rows) +
        " tokens, and " + std::to_string(freePages()) + " of the " +
        std::to_string(pages) +
        " pages are free (daybreak-compile --kv-cache-tokens)");
  for (int64_t p = have; p < needed; ++p) {
    pageTable[seq * pagesPerSeq + p] = freeList.back();
    freeList.pop_back();
  }
  mapped[seq] = needed;
  firstEntry = seq * pagesPerSeq + have;
  count = needed - have;
  return Status::success();
}

void PageAllocator::release(int64_t seq, int64_t &firstEntry,
                            int64_t &count) {
  firstEntry = count = 0;
  if (!pageSize || seq < 0 || seq >= batch)
    return;
  int32_t zero = static_cast<int32_t>(pages);
  for (int64_t p = mapped[seq] - 1; p >= 0; --p) {
    int32_t &entry = pageTable[seq * pagesPerSeq + p];
    freeList.push_back(entry);
    entry = zero;
  }
  firstEntry = seq * pagesPerSeq;
  count = mapped[seq];
  mapped[seq] = 0;
}
