//===- SafetensorsTest.cpp - Tests of the validating safetensors reader ---===//

#include "runtime/safetensors/Safetensors.h"

#include "gtest/gtest.h"

#include <cstdio>
#include <fstream>

using namespace daybreak::safetensors;

namespace {

/// Writes `header` (raw JSON text) and `data` as a safetensors file named
/// `name` in the test temp dir; `headerSize` overrides the length prefix.
std::string writeFile(const std::string &name, const std::string &header,
                      const std::vector<uint8_t> &data,
                      std::optional<uint64_t> headerSize = std::nullopt) {
  std::string path = ::testing::TempDir() + "/safetensors_" + name;
  std::ofstream stream(path, std::ios::binary | std::ios::trunc);
  uint64_t size = headerSize.value_or(header.size());
  for (int i = 0; i < 8; ++i)
    stream.put(char((size >> (8 * i)) & 0xff));
  stream.write(header.data(), std::streamsize(header.size()));
  stream.write(reinterpret_cast<const char *>(data.data()),
               std::streamsize(data.size()));
  return path;
}

std::vector<uint8_t> iota(size_t count) {
  std::vector<uint8_t> bytes(count);
  for (size_t i = 0; i < count; ++i)
    bytes[i] = uint8_t(i * 7 + 3);
  return bytes;
}

/// Opens `path`, expecting failure whose message contains every `needle`.
void expectError(const std::string &path,
                 std::initializer_list<std::string> needles) {
  File file;
  Status status = File::open(path, file);
  EXPECT_FALSE(status.ok);
  for (const std::string &needle : needles)
    EXPECT_NE(status.message.find(needle), std::string::npos)
        << "'" << needle << "' not in: " << status.message;
}

/// A one-tensor header, `entry` being the tensor's JSON object.
std::string oneTensor(const std::string &entry) {
  return "{\"w\":" + entry + "}";
}

TEST(SafetensorsTest, DTypeNamesAndSizes) {
  EXPECT_EQ(parseDType("F8_E4M3"), DType::F8E4M3);
  EXPECT_EQ(parseDType("BOOL"), DType::Bool);
  EXPECT_EQ(parseDType("F4"), std::nullopt);
  EXPECT_EQ(dtypeSize(DType::BF16), 2u);
  EXPECT_EQ(dtypeSize(DType::I64), 8u);
  EXPECT_EQ(dtypeName(DType::F8E4M3), "F8_E4M3");
}

TEST(SafetensorsTest, ReadsValidFile) {
  std::vector<uint8_t> data = iota(12 + 24);
  std::string header =
      "{\"__metadata__\":{\"format\":\"pt\"},"
      "\"a.bf16\":{\"dtype\":\"BF16\",\"shape\":[2,3],\"data_offsets\":[0,12]},"
      "\"b.i32\":{\"dtype\":\"I32\",\"shape\":[3,2],"
      "\"data_offsets\":[12,36]}}   ";
  std::string path = writeFile("valid", header, data);
  File file;
  Status status = File::open(path, file);
  ASSERT_TRUE(status.ok) << status.message;
  ASSERT_EQ(file.tensors().size(), 2u);
  EXPECT_EQ(file.metadata().at("format"), "pt");
  EXPECT_EQ(file.find("missing"), nullptr);

  File moved = std::move(file);
  const TensorView *a = moved.find("a.bf16");
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->dtype, DType::BF16);
  EXPECT_EQ(a->shape, (std::vector<int64_t>{2, 3}));
  ASSERT_EQ(a->byteSize, 12u);
  EXPECT_EQ(std::vector<uint8_t>(a->data, a->data + 12),
            std::vector<uint8_t>(data.begin(), data.begin() + 12));

  const TensorView *b = moved.find("b.i32");
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(b->dtype, DType::I32);
  EXPECT_EQ(b->shape, (std::vector<int64_t>{3, 2}));
  ASSERT_EQ(b->byteSize, 24u);
  EXPECT_EQ(std::vector<uint8_t>(b->data, b->data + 24),
            std::vector<uint8_t>(data.begin() + 12, data.end()));
}

TEST(SafetensorsTest, NonexistentPath) {
  expectError(::testing::TempDir() + "/safetensors_does_not_exist",
              {"does_not_exist", "cannot open"});
}

TEST(SafetensorsTest, EmptyFile) {
  std::string path = ::testing::TempDir() + "/safetensors_empty";
  std::ofstream(path, std::ios::binary | std::ios::trunc).close();
  expectError(path, {path, "0 bytes"});
}

TEST(SafetensorsTest, ShorterThanEightBytes) {
  std::string path = ::testing::TempDir() + "/safetensors_short";
  std::ofstream(path, std::ios::binary | std::ios::trunc) << "abc";
  expectError(path, {path, "3 bytes"});
}

TEST(SafetensorsTest, HeaderPastEnd) {
  expectError(writeFile("past_end", "{}", {}, 50), {"header length 50", "10"});
}

TEST(SafetensorsTest, HeaderTooLarge) {
  expectError(writeFile("too_large", "{}", {}, 200ull << 20),
              {"header length 209715200", "104857600"});
}

TEST(SafetensorsTest, HeaderNotJson) {
  expectError(writeFile("not_json", "{\"w\":", {}), {"not valid JSON"});
}

TEST(SafetensorsTest, HeaderNotObject) {
  expectError(writeFile("not_object", "[1,2]", {}), {"not a JSON object"});
}

TEST(SafetensorsTest, UnknownDType) {
  expectError(writeFile("unknown_dtype",
                        oneTensor("{\"dtype\":\"F4\",\"shape\":[2],"
                                  "\"data_offsets\":[0,1]}"),
                        iota(1)),
              {"'w'", "unknown dtype 'F4'"});
}

TEST(SafetensorsTest, MissingDType) {
  expectError(writeFile("missing_dtype",
                        oneTensor("{\"shape\":[2],\"data_offsets\":[0,2]}"),
                        iota(2)),
              {"'w'", "missing 'dtype'"});
}

TEST(SafetensorsTest, MissingShape) {
  expectError(writeFile("missing_shape",
                        oneTensor("{\"dtype\":\"U8\",\"data_offsets\":[0,2]}"),
                        iota(2)),
              {"'w'", "missing 'shape'"});
}

TEST(SafetensorsTest, MissingOffsets) {
  expectError(writeFile("missing_offsets",
                        oneTensor("{\"dtype\":\"U8\",\"shape\":[2]}"), iota(2)),
              {"'w'", "missing 'data_offsets'"});
}

TEST(SafetensorsTest, WrongJsonTypes) {
  expectError(writeFile("dtype_type",
                        oneTensor("{\"dtype\":3,\"shape\":[2],"
                                  "\"data_offsets\":[0,2]}"),
                        iota(2)),
              {"'w'", "'dtype' is not a string"});
  expectError(writeFile("shape_type",
                        oneTensor("{\"dtype\":\"U8\",\"shape\":\"2\","
                                  "\"data_offsets\":[0,2]}"),
                        iota(2)),
              {"'w'", "'shape' is not an array"});
  expectError(writeFile("dim_type",
                        oneTensor("{\"dtype\":\"U8\",\"shape\":[2.5],"
                                  "\"data_offsets\":[0,2]}"),
                        iota(2)),
              {"'w'", "non-integer 2.5"});
  expectError(writeFile("offsets_type",
                        oneTensor("{\"dtype\":\"U8\",\"shape\":[2],"
                                  "\"data_offsets\":[0]}"),
                        iota(2)),
              {"'w'", "'data_offsets' is not two"});
  expectError(writeFile("entry_type", oneTensor("7"), {}),
              {"'w'", "not a JSON object"});
}

TEST(SafetensorsTest, NegativeDimension) {
  expectError(writeFile("negative_dim",
                        oneTensor("{\"dtype\":\"U8\",\"shape\":[-2],"
                                  "\"data_offsets\":[0,2]}"),
                        iota(2)),
              {"'w'", "negative dimension -2"});
}

TEST(SafetensorsTest, ShapeOverflow) {
  expectError(writeFile("overflow",
                        oneTensor("{\"dtype\":\"F64\",\"shape\":"
                                  "[4294967296,4294967296],"
                                  "\"data_offsets\":[0,2]}"),
                        iota(2)),
              {"'w'", "[4294967296,4294967296]", "overflows"});
}

TEST(SafetensorsTest, SizeMismatch) {
  expectError(writeFile("mismatch",
                        oneTensor("{\"dtype\":\"F32\",\"shape\":[2],"
                                  "\"data_offsets\":[0,6]}"),
                        iota(6)),
              {"'w'", "needs 8 bytes", "span 6"});
}

TEST(SafetensorsTest, BeginAfterEnd) {
  expectError(writeFile("begin_after_end",
                        oneTensor("{\"dtype\":\"U8\",\"shape\":[2],"
                                  "\"data_offsets\":[4,2]}"),
                        iota(4)),
              {"'w'", "begin 4 > end 2"});
}

TEST(SafetensorsTest, RangeOutsideDataArea) {
  expectError(writeFile("outside",
                        oneTensor("{\"dtype\":\"U8\",\"shape\":[4],"
                                  "\"data_offsets\":[2,6]}"),
                        iota(5)),
              {"'w'", "[2, 6)", "5 bytes"});
}

TEST(SafetensorsTest, OverlappingRanges) {
  std::string header =
      "{\"a\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[0,4]},"
      "\"b\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[2,6]}}";
  expectError(writeFile("overlap", header, iota(6)),
              {"'b'", "[2, 6)", "'a'", "[0, 4)"});
}

TEST(SafetensorsTest, EmptyTensorsDoNotOverlap) {
  std::string header =
      "{\"a\":{\"dtype\":\"U8\",\"shape\":[0],\"data_offsets\":[2,2]},"
      "\"b\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[0,4]}}";
  File file;
  Status status = File::open(writeFile("empty_tensor", header, iota(4)), file);
  EXPECT_TRUE(status.ok) << status.message;
}

TEST(SafetensorsTest, MetadataMustBeStrings) {
  expectError(writeFile("metadata_value", "{\"__metadata__\":{\"n\":1}}", {}),
              {"__metadata__", "'n'"});
  expectError(writeFile("metadata_type", "{\"__metadata__\":[]}", {}),
              {"__metadata__", "not a JSON object"});
}

} // namespace
