// The safetensors reader: values against the manifest (see
// checkpoint_handmade_test.cpp for the full check), zero-copy views,
// metadata, and validation of headers built here byte by byte.
#include "checkpoint/safetensors.h"

#include "checkpoint_fixtures.h"
#include "checkpoint/checkpoint.h"

#include <gtest/gtest.h>

using namespace lingbot;
using namespace lingbot::io;
using lingbot::test::checkpoint_fixture;
using lingbot::test::element;

namespace {

// u64 header length, header padded to 8 bytes, then `data`.
std::vector<uint8_t> make_file(const std::string& header, const std::vector<uint8_t>& data) {
  std::string h = header;
  while (h.size() % 8 != 0) h += ' ';
  std::vector<uint8_t> out(8 + h.size() + data.size());
  const uint64_t n = h.size();
  for (int i = 0; i < 8; ++i) out[i] = static_cast<uint8_t>(n >> (8 * i));
  std::copy(h.begin(), h.end(), out.begin() + 8);
  std::copy(data.begin(), data.end(), out.begin() + 8 + static_cast<long>(h.size()));
  return out;
}

std::string error_of(const std::vector<uint8_t>& bytes) {
  try {
    read_safetensors(bytes, "m.safetensors", nullptr);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST(Safetensors, TensorsAreZeroCopyViewsInHeaderOrder) {
  auto bytes = std::make_shared<std::vector<uint8_t>>(
      test::read_bytes(checkpoint_fixture("handmade/basic.safetensors")));
  const StateDict sd = read_safetensors(*bytes, "basic.safetensors", bytes);
  std::vector<std::string> names;
  for (const auto& [name, t] : sd) {
    names.push_back(name);
    if (t.numel() > 0) {
      EXPECT_TRUE(test::points_into(t.data(), t.nbytes(), *bytes)) << name;
    }
  }
  EXPECT_EQ(names, (std::vector<std::string>{"a.f32", "b.i64", "c.f16", "d.bf16", "e.bool",
                                              "f.empty", "g.u8"}));
  EXPECT_EQ(sd.at("b.i64").shape(), Shape{});
  EXPECT_EQ(element(sd.at("b.i64"), 0), -7.0);
  EXPECT_EQ(sd.at("f.empty").shape(), (Shape{0, 4}));
  EXPECT_EQ(read_safetensors_metadata(*bytes, "x"),
            (std::map<std::string, std::string>{{"format", "pt"}}));
}

TEST(Safetensors, MisalignedTensorIsCopiedNotAliased) {
  auto bytes = std::make_shared<std::vector<uint8_t>>(
      test::read_bytes(checkpoint_fixture("handmade/misaligned.safetensors")));
  const StateDict sd = read_safetensors(*bytes, "m", bytes);
  const Tensor& x = sd.at("x");  // float32 at buffer offset 1
  EXPECT_FALSE(test::points_into(x.data(), 4, *bytes));
  EXPECT_EQ(reinterpret_cast<uintptr_t>(x.data()) % 4, 0u);
  EXPECT_EQ(element(x, 2), 3.0);
}

TEST(Safetensors, HandBuiltHeaders) {
  const std::vector<uint8_t> eight(8, 0);
  // Valid: one float32 pair, and an empty file with only metadata.
  EXPECT_EQ(error_of(make_file(R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", eight)),
            "");
  EXPECT_EQ(error_of(make_file(R"({"__metadata__":{"a":"b"}})", {})), "");
  const std::pair<std::string, std::string> bad[] = {
      {R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"v":1})", "'v': header entry"},
      {R"({"w":{"dtype":"F32","shape":[2]}})", "needs dtype, shape and data_offsets"},
      {R"({"w":{"dtype":7,"shape":[2],"data_offsets":[0,8]}})", "dtype is not a string"},
      {R"({"w":{"dtype":"F32","shape":2,"data_offsets":[0,8]}})", "shape is not an array"},
      {R"({"w":{"dtype":"F32","shape":[2.5],"data_offsets":[0,8]}})", "non-negative integers"},
      {R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0]}})", "[begin, end]"},
      {R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", "cover 4 bytes but the data buffer has 8"},
      {R"([1,2])", "does not start with '{'"},
      {R"({"w":{"dtype":"U16","shape":[4],"data_offsets":[0,8]}})", "dtype 'U16' is not supported"},
  };
  for (const auto& [header, want] : bad) {
    const std::string msg = error_of(make_file(header, eight));
    EXPECT_TRUE(msg.starts_with("m.safetensors: ")) << msg;
    EXPECT_NE(msg.find(want), std::string::npos) << header << " gave: " << msg;
  }
}

TEST(Safetensors, LengthFieldEdgeCases) {
  EXPECT_NE(error_of({}).find("truncated"), std::string::npos);
  EXPECT_NE(error_of({1, 0, 0, 0, 0, 0, 0, 0}).find("runs past the end"), std::string::npos);
  std::vector<uint8_t> zero_len(8, 0);
  EXPECT_NE(error_of(zero_len).find("does not start with '{'"), std::string::npos);
}
