//===- ArtifactTest.cpp - Tests of the .daybreak writer and reader --------===//

#include "runtime/artifact/ArtifactFile.h"
#include "runtime/artifact/ArtifactWriter.h"

#include "gtest/gtest.h"

#include <cstring>
#include <fstream>
#include <functional>
#include <iterator>

using namespace daybreak;
using namespace daybreak::artifact;

namespace {

std::string tempPath(const std::string &name) {
  return ::testing::TempDir() + "/artifact_" + name + ".daybreak";
}

std::vector<uint8_t> readBytes(const std::string &path) {
  std::ifstream stream(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(stream), {});
}

void writeBytes(const std::string &path, const std::vector<uint8_t> &bytes) {
  std::ofstream stream(path, std::ios::binary | std::ios::trunc);
  stream.write(reinterpret_cast<const char *>(bytes.data()),
               std::streamsize(bytes.size()));
}

uint64_t loadLE64(const uint8_t *bytes) {
  uint64_t value = 0;
  for (int i = 7; i >= 0; --i)
    value = (value << 8) | bytes[i];
  return value;
}

void storeLE64(uint8_t *bytes, uint64_t value) {
  for (int i = 0; i < 8; ++i)
    bytes[i] = uint8_t(value >> (8 * i));
}

/// Six distinct fp32 values (not zeros), as bytes.
std::vector<uint8_t> weightBytes() {
  const float values[6] = {0.5f, -1.25f, 3.0f, 7.75f, -0.125f, 42.0f};
  std::vector<uint8_t> bytes(sizeof(values));
  std::memcpy(bytes.data(), values, sizeof(values));
  return bytes;
}

/// Section 0 "weights": 8 bytes of padding, the 24-byte weight, 8 more bytes.
std::vector<uint8_t> weightsSection() {
  std::vector<uint8_t> bytes(8, 0xa5);
  std::vector<uint8_t> weight = weightBytes();
  bytes.insert(bytes.end(), weight.begin(), weight.end());
  bytes.insert(bytes.end(), 8, 0x5a);
  return bytes;
}

const std::string kTokenizer = "{\"model\":{\"type\":\"BPE\",\"vocab\":{}}}";

Manifest sampleManifest() {
  Manifest manifest;
  manifest.set_model_type("deepseek_v32");
  manifest.set_config_json("{\"hidden_size\": 3}");
  manifest.set_vocab_size(129280);
  manifest.set_max_seq_len(4096);
  manifest.set_max_batch(8);
  manifest.set_max_tokens(512);
  manifest.set_eos_token_id(1);
  manifest.set_target("cpu");

  Weight *weight = manifest.add_weights();
  weight->set_name("model.embed_tokens.weight");
  weight->set_dtype(F32);
  weight->add_shape(2);
  weight->add_shape(3);
  weight->set_section(0);
  weight->set_offset(8);
  weight->set_size(24);

  Step *step = manifest.add_steps();
  step->set_name("decode");
  step->add_size_names("tokens");
  step->add_max_sizes(8);
  step->set_arena_size(1024);
  Buffer *buffer = step->add_buffers();
  buffer->set_name("hidden");
  buffer->set_dtype(F32);
  SizeExpr *dim = buffer->add_dims();
  dim->set_constant(0);
  dim->add_coeffs(3);
  buffer->set_max_bytes(96);
  Launch *launch = step->add_launches();
  launch->set_kernel("embedding");
  launch->add_operands()->set_weight(0);
  launch->add_results()->set_buffer(0);
  Attr *attr = launch->add_attrs();
  attr->set_name("scale");
  attr->set_f(1.0);
  return manifest;
}

Status writeSample(const std::string &path,
                   Manifest manifest = sampleManifest()) {
  ArtifactWriter writer;
  writer.addSection("weights", weightsSection());
  writer.addSection("tokenizer", kTokenizer.data(), kTokenizer.size());
  return writer.write(path, std::move(manifest));
}

/// Writes the sample to a file named `name` and returns its path.
std::string samplePath(const std::string &name) {
  std::string path = tempPath(name);
  Status status = writeSample(path);
  EXPECT_TRUE(status.ok()) << status.message();
  return path;
}

/// Replaces the manifest of `path` by `edit` applied to it, keeping the
/// sections where they are and fixing the header's size and checksum, so that
/// only the edit is wrong.
void editManifest(const std::string &path,
                  const std::function<void(Manifest &)> &edit) {
  std::vector<uint8_t> bytes = readBytes(path);
  ASSERT_GE(bytes.size(), kHeaderSize);
  uint64_t oldSize = loadLE64(bytes.data() + kManifestSizeOffset);
  Manifest manifest;
  ASSERT_TRUE(
      manifest.ParseFromArray(bytes.data() + kHeaderSize, int(oldSize)));
  uint64_t dataStart = kSectionAlignment;
  for (const Section &section : manifest.sections())
    dataStart = std::min<uint64_t>(dataStart, section.offset());
  edit(manifest);
  std::string text;
  ASSERT_TRUE(manifest.SerializeToString(&text));
  ASSERT_LE(kHeaderSize + text.size(), dataStart);
  std::fill(bytes.begin() + kHeaderSize, bytes.begin() + dataStart, 0);
  std::memcpy(bytes.data() + kHeaderSize, text.data(), text.size());
  storeLE64(bytes.data() + kManifestSizeOffset, text.size());
  storeLE64(
      bytes.data() + kManifestChecksumOffset,
      fnv1a64(reinterpret_cast<const uint8_t *>(text.data()), text.size()));
  writeBytes(path, bytes);
}

/// Opens `path`, expecting failure whose message names the file and contains
/// every `needle`.
void expectError(const std::string &path,
                 std::initializer_list<std::string> needles) {
  StatusOr<ArtifactFile> file = ArtifactFile::open(path);
  ASSERT_FALSE(file.ok());
  const std::string &message = file.error().message();
  EXPECT_NE(message.find(path), std::string::npos)
      << "path not in: " << message;
  for (const std::string &needle : needles)
    EXPECT_NE(message.find(needle), std::string::npos)
        << "'" << needle << "' not in: " << message;
}

TEST(ArtifactTest, Fnv1a64KnownValues) {
  EXPECT_EQ(fnv1a64(nullptr, 0), 0xcbf29ce484222325ull);
  const uint8_t a = 'a';
  EXPECT_EQ(fnv1a64(&a, 1), 0xaf63dc4c8601ec8cull);
  const std::string foobar = "foobar";
  EXPECT_EQ(fnv1a64(reinterpret_cast<const uint8_t *>(foobar.data()), 6),
            0x85944171f73967e8ull);
}

TEST(ArtifactTest, RoundTrip) {
  std::string path = samplePath("round_trip");
  StatusOr<ArtifactFile> opened = ArtifactFile::open(path);
  ASSERT_TRUE(opened.ok()) << opened.error().message();
  ArtifactFile file = std::move(*opened);

  const Manifest &manifest = file.manifest();
  EXPECT_EQ(manifest.format_version(), kFormatVersion);
  EXPECT_EQ(manifest.model_type(), "deepseek_v32");
  EXPECT_EQ(manifest.config_json(), "{\"hidden_size\": 3}");
  EXPECT_EQ(manifest.vocab_size(), 129280);
  EXPECT_EQ(manifest.max_batch(), 8);
  EXPECT_EQ(manifest.target(), "cpu");

  ASSERT_EQ(manifest.sections_size(), 2);
  EXPECT_EQ(manifest.sections(0).name(), "weights");
  EXPECT_EQ(manifest.sections(1).name(), "tokenizer");
  EXPECT_EQ(manifest.sections(0).offset(), kSectionAlignment);
  EXPECT_EQ(manifest.sections(1).offset(), 2 * kSectionAlignment);
  EXPECT_EQ(manifest.sections(1).size(), kTokenizer.size());
  EXPECT_EQ(readBytes(path).size(), 2 * kSectionAlignment + kTokenizer.size());

  std::vector<uint8_t> section0 = weightsSection();
  EXPECT_EQ(std::memcmp(file.sectionData(0), section0.data(), section0.size()),
            0);
  EXPECT_EQ(std::string(reinterpret_cast<const char *>(file.sectionData(1)),
                        kTokenizer.size()),
            kTokenizer);
  EXPECT_EQ(file.sectionData(2), nullptr);
  EXPECT_EQ(file.findSection("tokenizer"), 1u);
  EXPECT_EQ(file.findSection("code"), std::nullopt);

  ASSERT_EQ(manifest.weights_size(), 1);
  const Weight &weight = manifest.weights(0);
  std::vector<uint8_t> expected = weightBytes();
  EXPECT_EQ(weight.name(), "model.embed_tokens.weight");
  EXPECT_EQ(
      std::memcmp(file.weightData(weight), expected.data(), expected.size()),
      0);

  ASSERT_EQ(manifest.steps_size(), 1);
  const Step &step = manifest.steps(0);
  EXPECT_EQ(step.name(), "decode");
  ASSERT_EQ(step.launches_size(), 1);
  EXPECT_EQ(step.launches(0).kernel(), "embedding");
  EXPECT_EQ(step.launches(0).operands(0).weight(), 0u);
  EXPECT_EQ(step.buffers(0).dims(0).coeffs(0), 3);
}

TEST(ArtifactTest, SameInputsGiveIdenticalBytes) {
  std::string first = samplePath("determinism_a");
  std::string second = samplePath("determinism_b");
  std::vector<uint8_t> bytes = readBytes(first);
  EXPECT_EQ(bytes, readBytes(second));
  // Writing over an existing file replaces it with the same bytes.
  ASSERT_TRUE(writeSample(second).ok());
  EXPECT_EQ(bytes, readBytes(second));
}

TEST(ArtifactTest, BorrowedPiecesWriteTheSameBytesAsOwnedSections) {
  // A section with data, a zero gap wider than the writer's zero block, and
  // a zero tail, given once as owned bytes and once as pieces in scrambled
  // order that leave the zeros to the writer: the files are equal.
  std::vector<uint8_t> bytes(10000, 0);
  for (size_t i = 0; i < 100; ++i)
    bytes[i] = uint8_t(i + 1);
  for (size_t i = 5000; i < 9000; ++i)
    bytes[i] = uint8_t(i * 7);
  Manifest manifest = sampleManifest();
  ArtifactWriter owned;
  owned.addSection("weights", bytes);
  owned.addSection("tokenizer", kTokenizer.data(), kTokenizer.size());
  std::string ownedPath = tempPath("owned_sections");
  ASSERT_TRUE(owned.write(ownedPath, manifest).ok());

  ArtifactWriter borrowed;
  StatusOr<uint32_t> index = borrowed.addSection(
      "weights", bytes.size(),
      {{7000, bytes.data() + 7000, 2000},
       {0, bytes.data(), 100},
       {5000, bytes.data() + 5000, 2000}});
  ASSERT_TRUE(index.ok()) << index.error().message();
  EXPECT_EQ(*index, 0u);
  borrowed.addSection("tokenizer", kTokenizer.data(), kTokenizer.size());
  std::string borrowedPath = tempPath("borrowed_sections");
  ASSERT_TRUE(borrowed.write(borrowedPath, manifest).ok());
  EXPECT_EQ(readBytes(borrowedPath), readBytes(ownedPath));
  StatusOr<ArtifactFile> file = ArtifactFile::open(borrowedPath);
  ASSERT_TRUE(file.ok()) << file.error().message();
}

TEST(ArtifactTest, OverlappingOrOutsidePiecesAreRejected) {
  uint8_t bytes[8] = {};
  ArtifactWriter writer;
  StatusOr<uint32_t> overlap =
      writer.addSection("w", 16, {{0, bytes, 8}, {4, bytes, 8}});
  ASSERT_FALSE(overlap.ok());
  EXPECT_NE(overlap.error().message().find("section 'w': bytes [4, 12)"),
            std::string::npos)
      << overlap.error().message();
  EXPECT_FALSE(writer.addSection("w", 16, {{12, bytes, 8}}).ok());
  EXPECT_EQ(writer.numSections(), 0u);
}

TEST(ArtifactTest, WriterReplacesSectionsOfTheGivenManifest) {
  Manifest manifest = sampleManifest();
  Section *stale = manifest.add_sections();
  stale->set_name("stale");
  stale->set_offset(12345);
  manifest.set_format_version(7);
  std::string path = tempPath("replaces_sections");
  ASSERT_TRUE(writeSample(path, manifest).ok());
  StatusOr<ArtifactFile> file = ArtifactFile::open(path);
  ASSERT_TRUE(file.ok()) << file.error().message();
  EXPECT_EQ(file->manifest().sections_size(), 2);
  EXPECT_EQ(file->manifest().format_version(), kFormatVersion);
  EXPECT_EQ(readBytes(path), readBytes(samplePath("replaces_reference")));
}

TEST(ArtifactTest, LargeManifestMovesSectionsPastIt) {
  Manifest manifest = sampleManifest();
  manifest.set_config_json(std::string(10000, 'x'));
  std::string path = tempPath("large_manifest");
  ASSERT_TRUE(writeSample(path, manifest).ok());
  StatusOr<ArtifactFile> file = ArtifactFile::open(path);
  ASSERT_TRUE(file.ok()) << file.error().message();
  EXPECT_EQ(file->manifest().sections(0).offset(), 3 * kSectionAlignment);
  EXPECT_EQ(file->manifest().config_json().size(), 10000u);
}

TEST(ArtifactTest, NoSections) {
  Manifest manifest;
  manifest.set_model_type("empty");
  std::string path = tempPath("no_sections");
  ASSERT_TRUE(ArtifactWriter().write(path, manifest).ok());
  StatusOr<ArtifactFile> file = ArtifactFile::open(path);
  ASSERT_TRUE(file.ok()) << file.error().message();
  EXPECT_EQ(file->manifest().model_type(), "empty");
}

TEST(ArtifactTest, WriteToMissingDirectoryFails) {
  std::string path = ::testing::TempDir() + "/no/such/dir/model.daybreak";
  Status status = writeSample(path);
  ASSERT_FALSE(status.ok());
  EXPECT_NE(status.message().find(path), std::string::npos);
}

TEST(ArtifactTest, NonexistentPath) {
  expectError(tempPath("does_not_exist"), {"cannot open"});
}

TEST(ArtifactTest, ShorterThanHeader) {
  std::string path = samplePath("shorter_than_header");
  std::vector<uint8_t> bytes = readBytes(path);
  bytes.resize(10);
  writeBytes(path, bytes);
  expectError(path, {"10 bytes", "shorter than the 64-byte"});
}

TEST(ArtifactTest, Truncated) {
  std::string path = samplePath("truncated");
  std::vector<uint8_t> bytes = readBytes(path);
  bytes.pop_back();
  writeBytes(path, bytes);
  expectError(path, {"file size of " + std::to_string(bytes.size() + 1),
                     "has " + std::to_string(bytes.size())});
}

TEST(ArtifactTest, BadMagic) {
  std::string path = samplePath("bad_magic");
  std::vector<uint8_t> bytes = readBytes(path);
  bytes[0] = 'X';
  writeBytes(path, bytes);
  expectError(path, {"bad magic"});
}

TEST(ArtifactTest, OtherVersion) {
  std::string path = samplePath("other_version");
  std::vector<uint8_t> bytes = readBytes(path);
  uint32_t other = kFormatVersion + 1;
  bytes[kVersionOffset] = static_cast<uint8_t>(other);
  writeBytes(path, bytes);
  expectError(path, {"was written by format version " + std::to_string(other) +
                     "; this runtime reads version " +
                     std::to_string(kFormatVersion)});
}

TEST(ArtifactTest, UnknownFlags) {
  std::string path = samplePath("unknown_flags");
  std::vector<uint8_t> bytes = readBytes(path);
  bytes[kFlagsOffset] = 1;
  writeBytes(path, bytes);
  expectError(path, {"unknown header flags"});
}

TEST(ArtifactTest, ManifestChecksumFlipped) {
  std::string path = samplePath("manifest_checksum");
  std::vector<uint8_t> bytes = readBytes(path);
  bytes[kManifestChecksumOffset] ^= 1;
  writeBytes(path, bytes);
  expectError(path, {"manifest checksum mismatch"});
}

TEST(ArtifactTest, ManifestByteFlipped) {
  std::string path = samplePath("manifest_byte");
  std::vector<uint8_t> bytes = readBytes(path);
  bytes[kHeaderSize + 5] ^= 0x40;
  writeBytes(path, bytes);
  expectError(path, {"manifest checksum mismatch"});
}

TEST(ArtifactTest, ManifestOutsideFile) {
  std::string path = samplePath("manifest_outside");
  std::vector<uint8_t> bytes = readBytes(path);
  storeLE64(bytes.data() + kManifestSizeOffset, bytes.size());
  writeBytes(path, bytes);
  expectError(path, {"manifest byte range", "outside"});
}

TEST(ArtifactTest, ManifestDoesNotParse) {
  std::string path = samplePath("manifest_garbage");
  std::vector<uint8_t> bytes = readBytes(path);
  uint64_t size = loadLE64(bytes.data() + kManifestSizeOffset);
  std::fill(bytes.begin() + kHeaderSize, bytes.begin() + kHeaderSize + size,
            0xff);
  storeLE64(bytes.data() + kManifestChecksumOffset,
            fnv1a64(bytes.data() + kHeaderSize, size));
  writeBytes(path, bytes);
  expectError(path, {"manifest does not parse"});
}

TEST(ArtifactTest, ManifestVersionDisagreesWithHeader) {
  std::string path = samplePath("manifest_version");
  uint32_t other = kFormatVersion + 1;
  editManifest(path, [&](Manifest &m) { m.set_format_version(other); });
  expectError(path,
              {"manifest says format version " + std::to_string(other)});
}

TEST(ArtifactTest, SectionByteFlipped) {
  std::string path = samplePath("section_byte");
  std::vector<uint8_t> bytes = readBytes(path);
  bytes[2 * kSectionAlignment + 3] ^= 0x01;
  writeBytes(path, bytes);
  expectError(path, {"section 1 'tokenizer'", "checksum mismatch"});
}

TEST(ArtifactTest, SectionMisaligned) {
  std::string path = samplePath("section_misaligned");
  editManifest(path, [](Manifest &m) {
    m.mutable_sections(1)->set_offset(2 * kSectionAlignment + 8);
  });
  expectError(
      path, {"section 1 'tokenizer'", "offset 8200", "not a multiple of 4096"});
}

TEST(ArtifactTest, SectionsOverlap) {
  std::string path = samplePath("sections_overlap");
  editManifest(path, [](Manifest &m) {
    m.mutable_sections(1)->set_offset(m.sections(0).offset());
  });
  expectError(path,
              {"section 1 'tokenizer'", "overlaps", "section 0 'weights'"});
}

TEST(ArtifactTest, SectionOverlapsManifest) {
  std::string path = samplePath("section_over_manifest");
  editManifest(path, [](Manifest &m) { m.mutable_sections(0)->set_offset(0); });
  expectError(path, {"section 0 'weights'", "overlaps the header"});
}

TEST(ArtifactTest, SectionOutsideFile) {
  std::string path = samplePath("section_outside");
  editManifest(path, [](Manifest &m) {
    m.mutable_sections(1)->set_offset(3 * kSectionAlignment);
  });
  expectError(path, {"section 1 'tokenizer'", "outside the"});
}

TEST(ArtifactTest, SectionSizeOverflows) {
  std::string path = samplePath("section_overflow");
  editManifest(path,
               [](Manifest &m) { m.mutable_sections(1)->set_size(~0ull); });
  expectError(path, {"section 1 'tokenizer'", "outside the"});
}

TEST(ArtifactTest, WeightOutsideSection) {
  std::string path = samplePath("weight_outside");
  editManifest(path, [](Manifest &m) { m.mutable_weights(0)->set_offset(24); });
  expectError(path, {"weight 'model.embed_tokens.weight'",
                     "lies outside section 0 'weights'"});
}

TEST(ArtifactTest, WeightSectionOutOfRange) {
  std::string path = samplePath("weight_section");
  editManifest(path, [](Manifest &m) { m.mutable_weights(0)->set_section(2); });
  expectError(path, {"weight 'model.embed_tokens.weight'",
                     "section index 2 is out of range"});
}

TEST(ArtifactTest, WeightSizeDisagreesWithShape) {
  std::string path = samplePath("weight_size");
  editManifest(path,
               [](Manifest &m) { m.mutable_weights(0)->set_dtype(BF16); });
  expectError(path, {"weight 'model.embed_tokens.weight'",
                     "size 24 bytes disagrees", "BF16, which need 12 bytes"});
}

TEST(ArtifactTest, WeightWithoutDType) {
  std::string path = samplePath("weight_dtype");
  editManifest(path, [](Manifest &m) {
    m.mutable_weights(0)->set_dtype(DTYPE_UNSPECIFIED);
  });
  expectError(path, {"weight 'model.embed_tokens.weight'", "unknown dtype"});
}

} // namespace
