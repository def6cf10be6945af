// The torch.save and safetensors readers against well-formed files built by
// tools/reference/make_hostile_checkpoints.py, whose manifest.json gives every
// tensor's dtype, shape and values as computed in Python.
#include "checkpoint/checkpoint.h"

#include "checkpoint_fixtures.h"

#include <gtest/gtest.h>

#include <set>

using namespace lingbot;
using namespace lingbot::io;
using lingbot::test::checkpoint_fixture;
using lingbot::test::element;

namespace {

const nlohmann::json& manifest() {
  static const nlohmann::json m = test::read_json(checkpoint_fixture("handmade/manifest.json"));
  return m;
}

DType dtype_from_name(const std::string& s) {
  for (DType t : {DType::F32, DType::F16, DType::BF16, DType::F64, DType::I64, DType::I32,
                  DType::I16, DType::I8, DType::U8, DType::Bool})
    if (dtype_name(t) == s) return t;
  throw std::runtime_error("unknown dtype in manifest: " + s);
}

// Checks a loaded state dict against one manifest entry: names in order,
// dtypes, shapes, every value, where the dict was found and what was skipped.
void expect_matches(const StateDict& sd, const nlohmann::json& entry) {
  const auto& tensors = entry["tensors"];
  ASSERT_EQ(sd.size(), tensors.size());
  EXPECT_EQ(sd.found_under(), entry["under"].get<std::string>());
  for (size_t i = 0; i < tensors.size(); ++i) {
    const auto& want = tensors[i];
    const std::string name = want["name"];
    SCOPED_TRACE(name);
    EXPECT_EQ(sd.entries()[i].first, name);  // file order preserved
    const Tensor& t = sd.at(name);
    EXPECT_EQ(t.dtype(), dtype_from_name(want["dtype"]));
    EXPECT_EQ(t.shape(), want["shape"].get<Shape>());
    const auto values = want["values"].get<std::vector<double>>();
    ASSERT_EQ(t.numel(), static_cast<int64_t>(values.size()));
    for (size_t k = 0; k < values.size(); ++k)
      EXPECT_EQ(element(t, static_cast<int64_t>(k)), values[k]) << "element " << k;
  }
  std::vector<std::string> skipped;
  for (const SkippedEntry& s : sd.skipped()) skipped.push_back(s.key);
  EXPECT_EQ(skipped, entry["skipped"].get<std::vector<std::string>>());
}

}  // namespace

TEST(CheckpointHandmade, EveryManifestFileLoadsWithExactValues) {
  ASSERT_GE(manifest()["files"].size(), 9u);
  for (const auto& entry : manifest()["files"]) {
    const std::string path = checkpoint_fixture("handmade/" + entry["file"].get<std::string>());
    SCOPED_TRACE(path);
    const StateDict sd = load_state_dict(path);
    EXPECT_EQ(sd.source(), path);
    EXPECT_EQ(sd.format(), path.ends_with(".safetensors") ? "safetensors" : "torch");
    expect_matches(sd, entry);
  }
}

TEST(CheckpointHandmade, SameResultFromMemoryAsFromFile) {
  for (const auto& entry : manifest()["files"]) {
    const std::string path = checkpoint_fixture("handmade/" + entry["file"].get<std::string>());
    SCOPED_TRACE(path);
    // An exact-size heap copy: under ASan any read past the end is caught.
    auto bytes = std::make_shared<std::vector<uint8_t>>(test::read_bytes(path));
    const StateDict sd = load_state_dict(*bytes, "in-memory", bytes);
    expect_matches(sd, entry);
  }
}

TEST(CheckpointHandmade, ContiguousTensorsAliasTheFileAndViewsShareStorage) {
  const std::string path = checkpoint_fixture("handmade/basic_v2.pt");
  auto bytes = std::make_shared<std::vector<uint8_t>>(test::read_bytes(path));
  const StateDict sd = load_state_dict(*bytes, path, bytes);
  // Zero-copy: contiguous tensors point into the archive bytes.
  for (const char* name : {"w_f32", "w_f16", "w_bf16", "bf16_offset", "shared_base", "shared_row2",
                           "scalar", "num_batches_tracked", "param"}) {
    SCOPED_TRACE(name);
    const Tensor& t = sd.at(name);
    EXPECT_TRUE(test::points_into(t.data(), t.nbytes(), *bytes));
    EXPECT_EQ(reinterpret_cast<uintptr_t>(t.data()) % dtype_size(t.dtype()), 0u);
  }
  // Two views of one storage alias each other: row 2 of a [4, 6] base.
  EXPECT_EQ(sd.at("shared_row2").data(), static_cast<const float*>(sd.at("shared_base").data()) + 12);
  // Strided views are materialised into their own contiguous memory.
  for (const char* name : {"shared_col1", "shared_transposed", "shared_strided"}) {
    SCOPED_TRACE(name);
    EXPECT_FALSE(test::points_into(sd.at(name).data(), 1, *bytes));
  }
}

TEST(CheckpointHandmade, TensorsOutliveTheirStateDictAndBuffer) {
  Tensor kept;
  {
    auto bytes = std::make_shared<std::vector<uint8_t>>(
        test::read_bytes(checkpoint_fixture("handmade/basic_v2.pt")));
    const StateDict sd = load_state_dict(*bytes, "x", bytes);
    kept = sd.at("shared_base");
  }
  // The buffer is kept alive by the tensor's owner (ASan would flag a use after free).
  EXPECT_EQ(element(kept, 23), 23.0);
}

TEST(CheckpointHandmade, LookupErrorsNameTheFileAndTheKey) {
  const std::string path = checkpoint_fixture("handmade/basic_v2.pt");
  const StateDict sd = load_state_dict(path);
  EXPECT_EQ(sd.find("nope"), nullptr);
  EXPECT_TRUE(sd.contains("w_f32"));
  try {
    sd.at("nope");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), path + ": no tensor 'nope'");
  }
}

TEST(CheckpointHandmade, TotalsAddUp) {
  const StateDict sd = load_state_dict(checkpoint_fixture("handmade/basic_v2.pt"));
  size_t bytes = 0;
  int64_t elements = 0;
  for (const auto& [name, t] : sd) {
    bytes += t.nbytes();
    elements += t.numel();
  }
  EXPECT_EQ(sd.total_bytes(), bytes);
  EXPECT_EQ(sd.total_elements(), elements);
  EXPECT_GT(elements, 0);
}

TEST(CheckpointHandmade, FormatIsSniffedFromContentNotName) {
  EXPECT_EQ(detect_checkpoint_format(test::read_bytes(checkpoint_fixture("handmade/basic_v2.pt"))),
            CheckpointFormat::Torch);
  EXPECT_EQ(detect_checkpoint_format(
                test::read_bytes(checkpoint_fixture("handmade/basic.safetensors"))),
            CheckpointFormat::Safetensors);
  EXPECT_EQ(detect_checkpoint_format(test::read_bytes(checkpoint_fixture("hostile/legacy.pt"))),
            CheckpointFormat::LegacyTorch);
  EXPECT_EQ(detect_checkpoint_format(
                test::read_bytes(checkpoint_fixture("hostile/wrong_magic.pt"))),
            CheckpointFormat::Unknown);
}

TEST(CheckpointHandmade, DuplicateKeysKeepFirstPositionAndLastValue) {
  StateDict sd("x", "torch");
  sd.insert("a", Tensor::from_vector({1}, {1}));
  sd.insert("b", Tensor::from_vector({2}, {1}));
  sd.insert("a", Tensor::from_vector({3}, {1}));
  ASSERT_EQ(sd.size(), 2u);
  EXPECT_EQ(sd.entries()[0].first, "a");
  EXPECT_EQ(sd.at("a").f32()[0], 3.f);
}
