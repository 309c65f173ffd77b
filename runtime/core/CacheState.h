//===- CacheState.h - Caches and per-slot state, and their pages -*- C++ -*-===//
//
// The one description of a model's caches and states that both devices
// allocate from and the session manages:
//
// - CacheLayout: one cache or state of the manifest, checked, with its
//   addressing. Three kinds (artifact::CacheKind): PAGED rows, taken page
//   by page from a pool shared by all sequences; WINDOW rows, a ring of
//   `ringRows` per slot (sliding-window attention); SLOT_STATE, `slotBytes`
//   per slot (recurrent and convolution state), zeroed when a slot is
//   reused.
// - CachePlan: every layout of a model, the page pool's size and the page
//   table's shape. Unmapped logical pages point at one extra physical page
//   that is never written (zeros), so kernels that read past a sequence's
//   end before masking (the DSA indexer scans all key rows) read zeros.
// - PageAllocator: the host's page table and free list. Pages are taken as
//   a sequence grows and returned when it ends; running out is an error
//   that leaves every mapping as it was. Nothing allocates after
//   construction.
//
//===----------------------------------------------------------------------===//

#ifndef DAYBREAK_RUNTIME_CORE_CACHESTATE_H
#define DAYBREAK_RUNTIME_CORE_CACHESTATE_H

#include "runtime/artifact/Manifest.pb.h"
#include "runtime/core/KernelParams.h"
#include "runtime/support/Status.h"

#include <cstdint>
#include <string>
#include <vector>

namespace daybreak::runtime {

enum class CacheKind : uint8_t { Paged, Window, SlotState };

const char *cacheKindName(CacheKind kind);

/// Bytes per row of a format (see CacheFormat).
int64_t cacheBytesPerRow(CacheFormat format, int64_t width, int64_t tailDim,
                         int64_t scaleBlock);

struct CacheLayout {
  const artifact::Cache *cache = nullptr;
  CacheKind kind = CacheKind::Paged;
  CacheFormat format = CacheFormat::F32;
  int64_t width = 0, tailDim = 0, scaleBlock = 0, bytesPerRow = 0;
  int64_t pageSize = 0;  ///< Paged: rows a page
  int64_t rowTokens = 1; ///< Paged: tokens a row (a k-pool cache: > 1)
  int64_t ringRows = 0; ///< Window: rows per slot
  int64_t slotBytes = 0; ///< SlotState: bytes per slot (values as `format`:
                         ///< F32 or BF16)
  /// Bytes the device allocates for it (Paged: the pool plus the zero
  /// page).
  uint64_t bytes = 0;
};

struct CachePlan {
  int64_t batch = 0, maxSeqLen = 0;
  /// Paged caches: the tokens a page spans (the same in every one: a
  /// k-pool cache's pages hold fewer rows), logical pages per slot (the page
  /// table's row length) and physical pages (the pool; page `pages` is the
  /// zero page unmapped entries point at).
  int64_t pageSize = 0, pagesPerSeq = 0, pages = 0;
  std::vector<CacheLayout> caches;

  /// Checks every cache of `m` (formats, row sizes, kinds, limits) and
  /// sizes them; errors name the cache.
  static StatusOr<CachePlan> build(const artifact::Manifest &m);

  bool hasPaged() const { return pagesPerSeq > 0; }
  int64_t pageTableEntries() const { return batch * pagesPerSeq; }
  int32_t zeroPage() const { return static_cast<int32_t>(pages); }
  /// Byte offset of row `pos` of slot `seq` in cache `c`, pages resolved
  /// through `pageTable` (host mirror); for SlotState, of the slot.
  uint64_t rowOffset(int c, int64_t seq, int64_t pos,
                     const int32_t *pageTable) const;
  /// Bytes of all caches and states.
  uint64_t totalBytes() const;
};

/// Fills the addressing fields every device's cache view shares (format,
/// row geometry, batch, page size, ring) from cache `i` of `plan`; the
/// device sets the view's base and page table.
template <typename View> void fillCacheView(View &view, const CachePlan &plan,
                                            int i) {
  const CacheLayout &layout = plan.caches[i];
  view.format = layout.format;
  view.width = layout.width;
  view.tailDim = layout.tailDim;
  view.scaleBlock = layout.scaleBlock;
  view.bytesPerRow = layout.bytesPerRow;
  view.batch = plan.batch;
  // Rows a slot may fill (a k-pool cache: a row per rowTokens tokens).
  view.maxSeqLen = (plan.maxSeqLen + layout.rowTokens - 1) / layout.rowTokens;
  // A ring or a slot's state is one run of rows: pages of one row.
  view.pageSize = layout.kind == CacheKind::Paged ? layout.pageSize : 1;
  view.ringRows = layout.ringRows;
}

/// Fills the fields every device's state view shares (stored as bf16 or
/// f32, bytes per slot, slots) from slot-state cache `i` of `plan`; the
/// device sets the base.
template <typename View>
void fillStateView(View &view, const CachePlan &plan, int i) {
  view.bf16 = plan.caches[i].format == CacheFormat::BF16;
  view.slotBytes = plan.caches[i].slotBytes;
  view.slots = plan.batch;
}

/// The view of the first `columns` values of each row of `view`: an
/// attention launch's value_columns (absorbed MLA's values, the c_kv prefix
/// of its latent rows). A scaled FP8 row's prefix is its scaled part
/// (checked at load), whose scales follow it.
template <typename View> View columnPrefixView(View view, int64_t columns) {
  view.width = columns;
  view.tailDim = 0;
  return view;
}

/// Whether a dense attention launch of `tokens` tokens with `window` may
/// read the window cache `view` (any cache without a ring may): a ring
/// keeps the last ringRows positions, enough when every query's window and
/// the step's later rows fit (the plan gives window - 1 + max_tokens
/// rows), or when it holds every position (capped at the longest
/// sequence, it never wraps).
template <typename View>
Status checkAttentionRing(const View &view, int64_t window, int64_t tokens) {
  if (!view.ringRows ||
      (window > 0 && (view.ringRows >= view.maxSeqLen ||
                      window - 1 + tokens <= view.ringRows)))
    return Status::success();
  return Status::error("attention: a window cache of " +
                       std::to_string(view.ringRows) +
                       " rows per sequence cannot hold a window of " +
                       std::to_string(window) + " keys and " +
                       std::to_string(tokens) + " tokens");
}

class PageAllocator {
public:
  PageAllocator() = default;
  explicit PageAllocator(const CachePlan &plan);

  /// Maps pages so that rows [0, rows) of slot `seq` have one. On success
  /// `[firstEntry, firstEntry + count)` are the page-table entries that
  /// changed (count 0 when none). Out of pages or past the slot's length:
  /// an error naming the figures, and nothing changes.
  Status grow(int64_t seq, int64_t rows, int64_t &firstEntry, int64_t &count);
  /// Returns every page of slot `seq` to the pool; the page-table entries
  /// `[firstEntry, firstEntry + count)` changed (back to the zero page).
  void release(int64_t seq, int64_t &firstEntry, int64_t &count);

  /// Rows of slot `seq` that have pages.
  int64_t mappedRows(int64_t seq) const {
    return pageSize ? mapped[seq] * pageSize : 0;
  }
  int64_t freePages() const { return int64_t(freeList.size()); }
  int64_t totalPages() const { return pages; }
  const int32_t *table() const { return pageTable.data(); }
  int64_t tableEntries() const { return int64_t(pageTable.size()); }

private:
  int64_t batch = 0, pagesPerSeq = 0, pageSize = 0, pages = 0;
  std::vector<int32_t> pageTable; ///< [batch, pagesPerSeq]
  std::vector<int32_t> freeList;  ///< a stack, capacity reserved
  std::vector<int64_t> mapped;    ///< pages per slot, a prefix of its row
};

} // namespace daybreak::runtime

#endif // DAYBREAK_RUNTIME_CORE_CACHESTATE_H
