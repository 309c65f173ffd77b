//===- SessionTest.cpp - Pages, slot state and the session layer ----------===//
//
// The cache plan and page allocator on hand-made manifests; slot state
// zeroed on reuse and window rings on a device (a hand-written artifact
// with caches and no steps); and the session over a compiled artifact
// named by DAYBREAK_ARTIFACT (test/tools/session.test compiles one with 2
// slots and 2 cache pages of 64 tokens, once computing every prefill row's
// logits and once 2 rows a step; scripts/gpu-tests.sh passes a CUDA one
// with DAYBREAK_DEVICE=cuda): slots and pages run out and are refused
// without disturbing the other sequences, batched decode agrees with each
// sequence run alone, sampling asks prefill for the prompts' last rows and
// agrees with scoring every row, and 1,000 admit/generate/release cycles
// leak no page and no host memory.
//
//===----------------------------------------------------------------------===//

#include "runtime/artifact/ArtifactWriter.h"
#include "runtime/core/CacheState.h"
#include "runtime/executor/Session.h"

#include "gtest/gtest.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <new>
#include <optional>

// Host memory of this test binary: blocks live, counted.
static std::atomic<int64_t> liveBlocks{0};

// Not inlined, so the compiler does not pair malloc with sized delete.
__attribute__((noinline)) void *operator new(size_t size) {
  ++liveBlocks;
  if (void *p = std::malloc(size ? size : 1))
    return p;
  std::abort();
}
__attribute__((noinline)) void operator delete(void *p) noexcept {
  if (p)
    --liveBlocks;
  std::free(p);
}
__attribute__((noinline)) void operator delete(void *p, size_t) noexcept {
  if (p)
    --liveBlocks;
  std::free(p);
}
// The nothrow forms too (std::stable_sort's buffer), so that every block
// freed by the deletes above came from malloc: a sanitizer build replaces
// whichever forms are left, and would see its block freed with free().
__attribute__((noinline)) void *operator new(size_t size,
                                             const std::nothrow_t &) noexcept {
  void *p = std::malloc(size ? size : 1);
  if (p)
    ++liveBlocks;
  return p;
}
__attribute__((noinline)) void
operator delete(void *p, const std::nothrow_t &) noexcept {
  if (p)
    --liveBlocks;
  std::free(p);
}

using namespace daybreak;
using namespace daybreak::runtime;

namespace {

artifact::Cache *addCache(artifact::Manifest &m, const std::string &name,
                          artifact::CacheKind kind) {
  artifact::Cache *c = m.add_caches();
  c->set_name(name);
  c->set_kind(kind);
  if (kind == artifact::CACHE_SLOT_STATE) {
    c->set_slot_bytes(64);
    c->add_state_shape(16);
    c->set_state_dtype(artifact::F32);
    return c;
  }
  c->set_format(artifact::CACHE_F32);
  c->set_width(4);
  c->set_bytes_per_row(16);
  if (kind == artifact::CACHE_PAGED) {
    c->set_page_size(4);
  } else {
    c->set_window(5);
    c->set_window_rows(8);
  }
  return c;
}

/// 3 slots of up to 16 tokens; a paged cache (4-token pages, a pool of
/// `pages`), a window ring and a slot state.
artifact::Manifest cacheManifest(int64_t pages) {
  artifact::Manifest m;
  m.set_model_type("test");
  m.set_target("cpu");
  m.set_vocab_size(8);
  m.set_max_batch(3);
  m.set_max_seq_len(16);
  m.set_max_tokens(4);
  m.set_cache_pages(pages);
  addCache(m, "kv.0", artifact::CACHE_PAGED);
  addCache(m, "ring.0", artifact::CACHE_WINDOW);
  addCache(m, "state.0", artifact::CACHE_SLOT_STATE);
  return m;
}

std::string errorOf(const Status &status) {
  return status.ok() ? "" : status.message();
}

TEST(CachePlan, SizesEachKind) {
  StatusOr<CachePlan> plan = CachePlan::build(cacheManifest(5));
  ASSERT_TRUE(plan.ok()) << plan.error().message();
  EXPECT_EQ(plan->pageSize, 4);
  EXPECT_EQ(plan->pagesPerSeq, 4);
  EXPECT_EQ(plan->pages, 5);
  ASSERT_EQ(plan->caches.size(), 3u);
  EXPECT_EQ(plan->caches[0].bytes, uint64_t(6 * 4 * 16)); // + zero page
  EXPECT_EQ(plan->caches[1].bytes, uint64_t(3 * 8 * 16));
  EXPECT_EQ(plan->caches[2].bytes, uint64_t(3 * 64));
  // 0 pages in the manifest: every slot at full length.
  StatusOr<CachePlan> full = CachePlan::build(cacheManifest(0));
  ASSERT_TRUE(full.ok());
  EXPECT_EQ(full->pages, 12);
  // Ring rows wrap; slot state is one block per slot.
  std::vector<int32_t> table(12, 0);
  EXPECT_EQ(plan->rowOffset(1, 2, 13, table.data()), uint64_t((2 * 8 + 5) * 16));
  EXPECT_EQ(plan->rowOffset(2, 2, 0, table.data()), uint64_t(2 * 64));
}

TEST(CachePlan, RejectsInconsistentCaches) {
  artifact::Manifest m = cacheManifest(13);
  EXPECT_NE(errorOf(CachePlan::build(m).error()).find("outside [1, 12]"),
            std::string::npos);
  m = cacheManifest(4);
  m.mutable_caches(1)->set_window_rows(4);
  EXPECT_NE(errorOf(CachePlan::build(m).error())
                .find("cache 'ring.0' keeps 4 rows per slot for a window of 5"),
            std::string::npos);
  m = cacheManifest(4);
  m.mutable_caches(0)->set_kind(artifact::CACHE_KIND_UNSPECIFIED);
  EXPECT_NE(errorOf(CachePlan::build(m).error()).find("cache 'kv.0' has no known kind"),
            std::string::npos);
  m = cacheManifest(4);
  addCache(m, "kv.1", artifact::CACHE_PAGED)->set_page_size(8);
  EXPECT_NE(errorOf(CachePlan::build(m).error()).find("one page table serves them all"),
            std::string::npos);
  m = cacheManifest(4);
  m.mutable_caches(0)->set_bytes_per_row(12);
  EXPECT_NE(errorOf(CachePlan::build(m).error()).find("declares 12 bytes per row"),
            std::string::npos);
}

TEST(PageAllocator, TakesAndReturnsPages) {
  StatusOr<CachePlan> plan = CachePlan::build(cacheManifest(5));
  ASSERT_TRUE(plan.ok());
  PageAllocator pages(*plan);
  int64_t first, count;
  // Nothing mapped: every entry at the zero page.
  for (int64_t e = 0; e < pages.tableEntries(); ++e)
    EXPECT_EQ(pages.table()[e], plan->zeroPage());
  ASSERT_TRUE(pages.grow(0, 9, first, count).ok());
  EXPECT_EQ(first, 0);
  EXPECT_EQ(count, 3);
  EXPECT_EQ(pages.mappedRows(0), 12);
  ASSERT_TRUE(pages.grow(0, 12, first, count).ok());
  EXPECT_EQ(count, 0); // already there
  ASSERT_TRUE(pages.grow(1, 5, first, count).ok());
  EXPECT_EQ(first, 4);
  EXPECT_EQ(count, 2);
  EXPECT_EQ(pages.freePages(), 0);
  // Distinct physical pages.
  std::vector<int32_t> used = {pages.table()[0], pages.table()[1],
                               pages.table()[2], pages.table()[4],
                               pages.table()[5]};
  std::sort(used.begin(), used.end());
  EXPECT_EQ(std::unique(used.begin(), used.end()), used.end());
  // Out of pages: an error naming the figures, and nothing changes.
  Status full = pages.grow(2, 1, first, count);
  EXPECT_NE(errorOf(full).find("out of cache pages: slot 2 needs 1 more pages"),
            std::string::npos)
      << errorOf(full);
  EXPECT_EQ(pages.mappedRows(2), 0);
  Status tooLong = pages.grow(1, 17, first, count);
  EXPECT_NE(errorOf(tooLong).find("exceed the compiled maximum sequence length"),
            std::string::npos);
  EXPECT_EQ(pages.mappedRows(1), 8);
  // Released pages go back, the entries to the zero page.
  pages.release(0, first, count);
  EXPECT_EQ(count, 3);
  EXPECT_EQ(pages.freePages(), 3);
  for (int64_t e = 0; e < 4; ++e)
    EXPECT_EQ(pages.table()[e], plan->zeroPage());
  ASSERT_TRUE(pages.grow(2, 12, first, count).ok());
  // 1,000 cycles leave the pool whole.
  pages.release(2, first, count);
  pages.release(1, first, count);
  for (int i = 0; i < 1000; ++i) {
    ASSERT_TRUE(pages.grow(i % 3, 1 + i % 16, first, count).ok());
    pages.release(i % 3, first, count);
  }
  EXPECT_EQ(pages.freePages(), 5);
}

const char *deviceName() {
  const char *name = std::getenv("DAYBREAK_DEVICE");
  return name ? name : "cpu";
}
const char *artifactPath() { return std::getenv("DAYBREAK_ARTIFACT"); }

/// A hand-written artifact with the caches of cacheManifest and no steps,
/// for the device under test: a CUDA one takes its GPU code from the
/// compiled artifact DAYBREAK_ARTIFACT.
std::string writeCacheArtifact(int64_t pages) {
  std::string path = ::testing::TempDir() + "/caches.daybreak";
  artifact::Manifest m = cacheManifest(pages);
  artifact::ArtifactWriter writer;
  writer.addSection("weights", std::vector<uint8_t>(8, 0));
  std::optional<artifact::ArtifactFile> compiled;
  if (std::string(deviceName()) != "cpu") {
    m.set_target("cuda");
    StatusOr<artifact::ArtifactFile> file =
        artifact::ArtifactFile::open(artifactPath() ? artifactPath() : "");
    EXPECT_TRUE(file.ok()) << "the CUDA device needs DAYBREAK_ARTIFACT";
    if (file.ok()) {
      compiled.emplace(std::move(*file));
      for (const artifact::CodeImage &image : compiled->manifest().code()) {
        const artifact::Section &s =
            compiled->manifest().sections(image.section());
        artifact::CodeImage *copy = m.add_code();
        *copy = image;
        copy->set_section(writer.addSection(
            s.name(), compiled->sectionData(image.section()), s.size()));
      }
    }
  }
  Status status = writer.write(path, m);
  EXPECT_TRUE(status.ok()) << status.message();
  return path;
}

StatusOr<std::unique_ptr<Model>> loadCacheArtifact(int64_t pages) {
  LoadOptions options;
  options.device = deviceName();
  return Model::load(writeCacheArtifact(pages), options);
}

TEST(SlotState, ZeroedWhenASlotIsReused) {
  StatusOr<std::unique_ptr<Model>> model = loadCacheArtifact(5);
  ASSERT_TRUE(model.ok()) << model.error().message();
  Device &device = (*model)->onDevice();
  std::vector<float> garbage(16), got(16);
  for (int64_t slot = 0; slot < 3; ++slot) {
    for (int i = 0; i < 16; ++i)
      garbage[i] = float(slot * 100 + i + 1);
    ASSERT_TRUE(device.writeSlotState(2, slot, garbage.data()).ok());
  }
  ASSERT_TRUE((*model)->resetSlot(1).ok());
  ASSERT_TRUE(device.readSlotState(2, 1, got.data()).ok());
  for (float v : got)
    EXPECT_EQ(v, 0.0f);
  // The other slots keep theirs.
  ASSERT_TRUE(device.readSlotState(2, 2, got.data()).ok());
  EXPECT_EQ(got[0], 201.0f);
  EXPECT_EQ(got[15], 216.0f);
  EXPECT_NE(errorOf(device.readSlotState(0, 0, got.data())).find("holds rows"),
            std::string::npos);
}

TEST(CacheRows, NeedPagesAndWrapInRings) {
  StatusOr<std::unique_ptr<Model>> model = loadCacheArtifact(5);
  ASSERT_TRUE(model.ok()) << model.error().message();
  Model &m = **model;
  Device &device = m.onDevice();
  std::vector<uint8_t> row(16);
  // Paged rows without pages are refused by name.
  EXPECT_NE(errorOf(device.readCacheRows(0, 1, 0, 1, row.data()))
                .find("row 0 of slot 1 of cache 'kv.0' has no page"),
            std::string::npos);
  ASSERT_TRUE(m.reserve(1, 6).ok());
  ASSERT_TRUE(m.reserve(0, 6).ok());
  EXPECT_EQ(m.pages().freePages(), 1);
  // A copy across pages lands row for row (the pages are not adjacent).
  std::vector<uint8_t> rows(6 * 16), back(6 * 16);
  ASSERT_TRUE(device.readCacheRows(0, 1, 0, 6, rows.data()).ok());
  ASSERT_TRUE(device.copyCacheRows(0, 1, 0, 0, 0, 6).ok());
  ASSERT_TRUE(device.readCacheRows(0, 0, 0, 6, back.data()).ok());
  EXPECT_EQ(rows, back);
  // A ring holds at most its rows at once.
  EXPECT_NE(errorOf(device.readCacheRows(1, 0, 0, 9, back.data()))
                .find("do not fit the 8-row ring"),
            std::string::npos);
  ASSERT_TRUE(m.release(1).ok());
  ASSERT_TRUE(m.release(0).ok());
  EXPECT_EQ(m.pages().freePages(), 5);
}

//===----------------------------------------------------------------------===//
// The session over a compiled artifact.
//===----------------------------------------------------------------------===//

class SessionTest : public ::testing::Test {
protected:
  void SetUp() override {
    if (!artifactPath())
      GTEST_SKIP() << "set DAYBREAK_ARTIFACT to an artifact of 2 slots and "
                      "2 cache pages of 64 tokens (test/tools/session.test)";
    LoadOptions options;
    options.device = deviceName();
    options.threads = 2;
    StatusOr<std::unique_ptr<Model>> loaded =
        Model::load(artifactPath(), options);
    if (!loaded.ok())
      GTEST_SKIP() << "cannot load here: " << loaded.error().message();
    model = std::move(*loaded);
    ASSERT_EQ(model->maxBatch(), 2);
    ASSERT_EQ(model->pages().totalPages(), 2);
  }

  static SequenceRequest greedy(std::vector<int32_t> prompt,
                                int64_t newTokens) {
    SequenceRequest r;
    r.prompt = std::move(prompt);
    r.maxNewTokens = newTokens;
    r.sampling.temperature = 0;
    return r;
  }
  static std::vector<int32_t> promptOf(int64_t n, int32_t seed) {
    std::vector<int32_t> ids;
    for (int64_t i = 0; i < n; ++i)
      ids.push_back(static_cast<int32_t>((seed + 37 * i) % 200 + 1));
    return ids;
  }
  /// Tokens 1..n at positions 0..n-1 of slot 0, for Model::run.
  static StepInputs promptInSlot0(int32_t n) {
    StepInputs in;
    for (int32_t t = 0; t < n; ++t) {
      in.ids.push_back(t + 1);
      in.positions.push_back(t);
      in.sequences.push_back(0);
    }
    return in;
  }
  /// The tokens `request` generates alone in a fresh session.
  std::vector<int32_t> alone(SequenceRequest request) {
    Session session(*model);
    StatusOr<SequenceId> id = session.admit(std::move(request));
    EXPECT_TRUE(id.ok()) << id.error().message();
    Status status = session.runToCompletion();
    EXPECT_TRUE(status.ok()) << status.message();
    std::vector<int32_t> tokens = session.status(*id)->generated;
    EXPECT_TRUE(session.release(*id).ok());
    return tokens;
  }

  std::unique_ptr<Model> model;
};

TEST_F(SessionTest, MoreSequencesThanSlotsAreRefused) {
  Session session(*model);
  StatusOr<SequenceId> a = session.admit(greedy(promptOf(3, 1), 4));
  StatusOr<SequenceId> b = session.admit(greedy(promptOf(3, 2), 4));
  ASSERT_TRUE(a.ok() && b.ok());
  StatusOr<SequenceId> c = session.admit(greedy(promptOf(3, 3), 4));
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.error().message().find("all 2 sequence slots are in use"),
            std::string::npos)
      << c.error().message();
  ASSERT_TRUE(session.runToCompletion().ok());
  EXPECT_EQ(session.status(*a)->generated, alone(greedy(promptOf(3, 1), 4)));
  EXPECT_EQ(session.status(*b)->generated, alone(greedy(promptOf(3, 2), 4)));
  // A released slot serves the next request.
  ASSERT_TRUE(session.release(*a).ok());
  EXPECT_FALSE(session.release(*a).ok());
  StatusOr<SequenceId> d = session.admit(greedy(promptOf(3, 3), 4));
  ASSERT_TRUE(d.ok()) << d.error().message();
  ASSERT_TRUE(session.runToCompletion().ok());
  EXPECT_EQ(session.status(*d)->generated, alone(greedy(promptOf(3, 3), 4)));
}

TEST_F(SessionTest, RequestsPastTheLimitsAreRefused) {
  Session session(*model);
  EXPECT_FALSE(session.admit(greedy({}, 1)).ok());
  StatusOr<SequenceId> tooLong =
      session.admit(greedy(promptOf(model->maxSeqLen(), 1), 2));
  ASSERT_FALSE(tooLong.ok());
  EXPECT_NE(tooLong.error().message().find(
                "exceeds the compiled maximum sequence length"),
            std::string::npos);
  StatusOr<SequenceId> badToken =
      session.admit(greedy({1, int32_t(model->vocabSize())}, 1));
  ASSERT_FALSE(badToken.ok());
  EXPECT_NE(badToken.error().message().find("outside the vocabulary"),
            std::string::npos);
  EXPECT_EQ(session.active(), 0);
  EXPECT_EQ(session.freeSlots(), 2);
}

TEST_F(SessionTest, OutOfPagesFailsOneSequenceAndTheOtherContinues) {
  // A long prompt takes both pages (over two prefill chunks); the short one
  // finds none and fails; the long one finishes as it would alone.
  Session session(*model);
  SequenceRequest longer = greedy(promptOf(70, 5), 6);
  StatusOr<SequenceId> a = session.admit(longer);
  StatusOr<SequenceId> b = session.admit(greedy(promptOf(5, 9), 3));
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_TRUE(session.runToCompletion().ok());
  const SequenceStatus &failed = *session.status(*b);
  EXPECT_EQ(failed.state, SequenceState::Failed);
  EXPECT_NE(failed.error.find("out of cache pages"), std::string::npos)
      << failed.error;
  EXPECT_EQ(session.status(*a)->state, SequenceState::Finished);
  std::vector<int32_t> together = session.status(*a)->generated;
  ASSERT_TRUE(session.release(*a).ok());
  ASSERT_TRUE(session.release(*b).ok());
  EXPECT_EQ(model->pages().freePages(), 2);
  EXPECT_EQ(together, alone(longer));
  // With the pages back, the refused request runs.
  EXPECT_EQ(alone(greedy(promptOf(5, 9), 3)).size(), 3u);
}

TEST_F(SessionTest, AnEndedSequenceRunsNoFurther) {
  // `a` ends after 2 tokens while `b` decodes 6: the later steps leave `a`
  // as it ended, and `b` generates what it would alone.
  Session session(*model);
  StatusOr<SequenceId> a = session.admit(greedy(promptOf(3, 4), 2));
  StatusOr<SequenceId> b = session.admit(greedy(promptOf(4, 6), 6));
  ASSERT_TRUE(a.ok() && b.ok());
  int steps = 0;
  while (session.status(*a)->state != SequenceState::Finished) {
    StatusOr<bool> ran = session.step();
    ASSERT_TRUE(ran.ok()) << ran.error().message();
    ASSERT_TRUE(*ran);
    ASSERT_LT(++steps, 16) << "the 2-token sequence never finished";
  }
  const SequenceStatus ended = *session.status(*a);
  EXPECT_EQ(ended.generated.size(), 2u);
  ASSERT_TRUE(session.runToCompletion().ok());
  EXPECT_EQ(session.status(*a)->state, SequenceState::Finished);
  EXPECT_EQ(session.status(*a)->generated, ended.generated);
  EXPECT_EQ(session.status(*a)->position, ended.position);
  EXPECT_EQ(session.status(*b)->generated, alone(greedy(promptOf(4, 6), 6)));
  // Nothing is left to run: a step is a no-op, not an error.
  StatusOr<bool> idle = session.step();
  ASSERT_TRUE(idle.ok()) << idle.error().message();
  EXPECT_FALSE(*idle);
  EXPECT_EQ(session.status(*a)->generated, ended.generated);
  // Once released, the sequence is gone: asking for it again is an error
  // naming it, and the other sequence keeps its slot and tokens.
  ASSERT_TRUE(session.release(*a).ok());
  EXPECT_EQ(session.status(*a), nullptr);
  Status again = session.release(*a);
  ASSERT_FALSE(again.ok());
  EXPECT_NE(again.message().find("no sequence " + std::to_string(*a)),
            std::string::npos)
      << again.message();
  EXPECT_EQ(session.active(), 1);
  EXPECT_EQ(session.status(*b)->state, SequenceState::Finished);
  ASSERT_TRUE(session.release(*b).ok());
  EXPECT_EQ(model->pages().freePages(), model->pages().totalPages());
}

TEST_F(SessionTest, PrefillAsksForThePromptsLastRows) {
  // Two prompts prefilled and decoded twice: sampling (the prompts' last
  // rows only) and scoring (every row, in prefill steps of at most the
  // artifact's logit rows). The rows both compute agree, and so do the
  // tokens generated.
  struct Row {
    SequenceId sequence;
    int64_t position;
    bool prefill;
    std::vector<float> logits;
  };
  int64_t vocab = model->vocabSize();
  const PreparedStep *prefill = *model->step("prefill");
  int64_t maxRows = model->maxLogitRows(*prefill);
  auto run = [&](bool everyRow, std::vector<Row> &rows,
                 std::vector<std::vector<int32_t>> &generated) {
    Session session(*model);
    int64_t stepRows = 0;
    session.setObserver(
        [&](const TokenLogits &r) {
          ++stepRows;
          rows.push_back({r.sequence, r.position, r.prefill,
                          std::vector<float>(r.logits, r.logits + vocab)});
        },
        everyRow);
    StatusOr<SequenceId> a = session.admit(greedy(promptOf(5, 3), 3));
    StatusOr<SequenceId> b = session.admit(greedy(promptOf(3, 9), 2));
    ASSERT_TRUE(a.ok() && b.ok());
    for (;;) {
      stepRows = 0;
      StatusOr<bool> ran = session.step();
      ASSERT_TRUE(ran.ok()) << ran.error().message();
      if (!*ran)
        break;
      EXPECT_LE(stepRows, std::max<int64_t>(maxRows, 2));
    }
    generated = {session.status(*a)->generated, session.status(*b)->generated};
    ASSERT_TRUE(session.release(*a).ok());
    ASSERT_TRUE(session.release(*b).ok());
  };
  std::vector<Row> sampled, scored;
  std::vector<std::vector<int32_t>> sampledTokens, scoredTokens;
  run(false, sampled, sampledTokens);
  run(true, scored, scoredTokens);
  EXPECT_EQ(sampledTokens, scoredTokens);
  ASSERT_EQ(sampledTokens[0].size(), 3u);

  // Sampling: the prompts' last rows (positions 4 and 2), then decode rows.
  std::vector<std::pair<int64_t, int64_t>> prefillRows;
  for (const Row &r : sampled)
    if (r.prefill)
      prefillRows.push_back({r.sequence, r.position});
  std::sort(prefillRows.begin(), prefillRows.end());
  ASSERT_EQ(prefillRows.size(), 2u);
  EXPECT_EQ(prefillRows[0].second, 4);
  EXPECT_EQ(prefillRows[1].second, 2);
  // Scoring: every prompt row; each sampled row equals its scored one.
  EXPECT_EQ(std::count_if(scored.begin(), scored.end(),
                          [](const Row &r) { return r.prefill; }),
            8);
  EXPECT_EQ(sampled.size() + 6, scored.size());
  for (const Row &s : sampled) {
    auto match = std::find_if(scored.begin(), scored.end(), [&](const Row &r) {
      return r.sequence == s.sequence && r.position == s.position &&
             r.prefill == s.prefill;
    });
    ASSERT_NE(match, scored.end()) << "position " << s.position;
    float worst = 0;
    for (int64_t v = 0; v < vocab; ++v)
      worst = std::max(worst, std::fabs(s.logits[v] - match->logits[v]));
    // Prefill chunks of other lengths sum in the same order per row.
    EXPECT_LE(worst, 1e-5f)
        << "sequence " << s.sequence << " position " << s.position;
  }

  // The model's own checks: rows outside the step, or more than computed.
  StepInputs in = promptInSlot0(5);
  std::vector<float> logits;
  in.everyLogitRow = false;
  in.logitRows = {5};
  EXPECT_NE(errorOf(model->run(*prefill, in, logits))
                .find("logit row 5 is not a token of the step's 5"),
            std::string::npos);
  in.logitRows = {4, 0};
  ASSERT_TRUE(model->run(*prefill, in, logits).ok());
  EXPECT_EQ(logits.size(), size_t(2 * vocab));
  in.everyLogitRow = true;
  Status every = model->run(*prefill, in, logits);
  if (maxRows < 5)
    EXPECT_NE(errorOf(every).find("at most " + std::to_string(maxRows) +
                                  " token rows (--max-logit-rows)"),
              std::string::npos)
        << errorOf(every);
  else
    EXPECT_TRUE(every.ok()) << every.message();
  ASSERT_TRUE(model->release(0).ok());
}

TEST_F(SessionTest, DecodeHoldsOneTokenPerSequence) {
  // The decode step is planned for max_batch tokens (its arena a batch of
  // rows, not a prefill chunk's): a third token is refused by name.
  const PreparedStep *decode = *model->step("decode");
  EXPECT_EQ(decode->maxTokens, model->maxBatch());
  EXPECT_EQ((*model->step("prefill"))->maxTokens, model->maxTokens());
  StepInputs in = promptInSlot0(3);
  std::vector<float> logits;
  EXPECT_NE(errorOf(model->run(*decode, in, logits))
                .find("step 'decode' of 3 tokens exceeds the compiled maximum "
                      "of 2 tokens per step (one a sequence, --max-batch)"),
            std::string::npos);
}

TEST_F(SessionTest, ThousandCyclesLeakNoPageAndNoMemory) {
  Session session(*model);
  auto cycle = [&](int i) {
    StatusOr<SequenceId> id =
        session.admit(greedy(promptOf(1 + i % 5, i), 1 + i % 3));
    ASSERT_TRUE(id.ok()) << id.error().message();
    ASSERT_TRUE(session.runToCompletion().ok());
    ASSERT_EQ(session.status(*id)->state, SequenceState::Finished);
    ASSERT_TRUE(session.release(*id).ok());
  };
  // One round of every request shape first: the session's, the model's and
  // the kernels' reusable buffers reach their sizes (a leak grows with the
  // cycles, a buffer does not).
  for (int i = 0; i < 15; ++i)
    cycle(i);
  int64_t before = liveBlocks.load();
  for (int i = 15; i < 1015; ++i) {
    cycle(i);
    if (HasFatalFailure())
      return;
  }
  EXPECT_EQ(liveBlocks.load() - before, 0) << "host blocks leaked";
  EXPECT_EQ(model->pages().freePages(), model->pages().totalPages());
  EXPECT_EQ(session.active(), 0);
  EXPECT_EQ(session.freeSlots(), 2);
}

} // namespace
