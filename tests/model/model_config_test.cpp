// The JSON model config: defaults, strictness, validation, and the list of
// parameters a config implies, checked against independent facts (the
// official checkpoint's published tensor count, a real upstream state dict).
#include "checkpoint/checkpoint.h"
#include "fuzz_regressions.h"
#include "model/checkpoint_check.h"
#include "model/model_config.h"
#include "test_support.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <fstream>
#include <map>
#include <sstream>

using namespace lingbot;

namespace {

std::string error_of(const std::string& json) {
  try {
    ModelConfig::from_json_text(json, "cfg.json");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// The rows "| `key` | official | meaning |" of docs/model-config.md, by
// full key ("encoder.depth"): a table belongs to the object that the text
// above it names ("`encoder` object"), or to the top level.
std::map<std::string, std::pair<std::string, std::string>> documented_keys() {
  std::ifstream in(test::fixture_path("../../docs/model-config.md"));
  std::map<std::string, std::pair<std::string, std::string>> rows;
  std::string line, object;
  while (std::getline(in, line)) {
    if (line.rfind("#", 0) == 0) object.clear();
    for (const char* name : {"encoder", "camera_head", "depth_head"})
      if (line.find(std::string("`") + name + "` object") != std::string::npos) object = name;
    if (line.rfind("| `", 0) != 0) continue;
    const size_t key_end = line.find('`', 3);
    const size_t cell_end = line.find('|', key_end);
    const size_t meaning_end = line.rfind('|');
    const std::string key = line.substr(3, key_end - 3);
    std::string official = line.substr(cell_end + 1, line.find('|', cell_end + 1) - cell_end - 1);
    official = official.substr(official.find_first_not_of(' '));
    official = official.substr(0, official.find_last_not_of(' ') + 1);
    rows[object.empty() ? key : object + "." + key] = {official, line.substr(0, meaning_end)};
  }
  return rows;
}

}  // namespace

TEST(ModelConfig, DocsListEveryKeyWithItsOfficialValue) {
  auto rows = documented_keys();
  ASSERT_FALSE(rows.empty());
  const ModelConfig official = ModelConfig::official();
  for_each_config_key(official, [&](const std::string& key, const auto& field) {
    auto it = rows.find(key);
    if (it == rows.end()) {
      ADD_FAILURE() << "docs/model-config.md does not list '" << key << "'";
      return;
    }
    const nlohmann::json documented = nlohmann::json::parse(it->second.first, nullptr, false);
    EXPECT_EQ(documented, nlohmann::json(field)) << key << ": the docs say " << it->second.first;
    rows.erase(it);
  });
  for (const char* key : kIgnoredConfigKeys) {
    ASSERT_TRUE(rows.count(key)) << "docs/model-config.md does not list '" << key << "'";
    EXPECT_NE(rows[key].second.find("ignored"), std::string::npos) << rows[key].second;
    rows.erase(key);
  }
  for (const auto& [key, row] : rows) ADD_FAILURE() << "docs/model-config.md lists '" << key << "', no config key";
}

TEST(ModelConfig, UpstreamsIgnoredKeysAreAccepted) {
  // Upstream's configs carry max_frame_num; it limits nothing here.
  const ModelConfig c = ModelConfig::from_json_text(R"({"max_frame_num": 2048})", "cfg.json");
  EXPECT_EQ(c.to_json(), ModelConfig::official().to_json());
  EXPECT_EQ(c.to_json().find("max_frame_num"), std::string::npos);
}

TEST(ModelConfig, EmptyObjectIsTheOfficialModel) {
  const ModelConfig c = ModelConfig::from_json_text("{}", "cfg.json");
  const ModelConfig o = ModelConfig::official();
  EXPECT_EQ(c.to_json(), o.to_json());
  EXPECT_EQ(o.embed_dim, 1024);
  EXPECT_EQ(o.head_dim(), 64);
  EXPECT_EQ(o.num_special_tokens(), 6);
  EXPECT_EQ(o.aggregator_output_layers, (std::vector<int>{4, 11, 17, 23}));
}

TEST(ModelConfig, RoundTripsThroughJson) {
  const ModelConfig small = ModelConfig::from_file(test::fixture_path("model_small/config.json"));
  EXPECT_EQ(small.embed_dim, 32);
  EXPECT_EQ(small.camera_head.trunk_depth, 2);
  const ModelConfig again = ModelConfig::from_json_text(small.to_json(), "again");
  EXPECT_EQ(again.to_json(), small.to_json());
}

TEST(ModelConfig, UnknownKeysAreErrors) {
  EXPECT_NE(error_of(R"({"embed_dimm": 1024})").find("unknown key 'embed_dimm'"), std::string::npos);
  EXPECT_NE(error_of(R"({"encoder": {"depht": 3}})").find("unknown key 'encoder.depht'"), std::string::npos);
}

TEST(ModelConfig, BadValuesNameTheKey) {
  EXPECT_NE(error_of(R"({"depth": "24"})").find("'depth' has the wrong type"), std::string::npos);
  EXPECT_NE(error_of(R"({"num_heads": 7})").find("not divisible by num_heads"), std::string::npos);
  EXPECT_NE(error_of(R"({"embed_dim": 512, "encoder": {"embed_dim": 512}, "camera_head": {"dim": 1024},
                       "rope3d_fhw_dim": [10, 11, 11]})")
                .find("rope3d_fhw_dim"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"aggregator_output_layers": [4, 11, 17, 24]})").find("aggregator_output_layers[3]"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"encoder": {"embed_dim": 768}})").find("encoder.embed_dim"), std::string::npos);
  EXPECT_NE(error_of("{not json").find("not valid JSON"), std::string::npos);
  EXPECT_NE(error_of("[1, 2]").find("the config must be a JSON object"), std::string::npos);
  EXPECT_NE(error_of(R"({"encoder": 3})").find("'encoder' must be a JSON object"), std::string::npos);
  EXPECT_NE(error_of(R"({"rope3d_fhw_dim": [20, 22]})").find("'rope3d_fhw_dim' must be an array of 3 numbers"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"aggregator_output_layers": [4, 1.5]})").find("'aggregator_output_layers' must hold integers"),
            std::string::npos);
  EXPECT_THROW(ModelConfig::from_file("/nonexistent/config.json"), Error);
}

TEST(ModelConfig, OfficialArchitectureHasThePublishedTensorCount) {
  // lingbot-map-long.pt, as published, holds 1342 tensors (issue 2).
  EXPECT_EQ(expected_parameters(ModelConfig::official()).size(), 1342u);
}

TEST(ModelConfig, MatchesARealUpstreamStateDict) {
  // weights.pt is torch.save(model.state_dict()) of upstream's GCTStream at
  // the small config (tools/reference/make_model_fixtures.py).
  const io::StateDict sd = io::load_state_dict(test::fixture_path("model_small/weights.pt"));
  const ModelConfig small = ModelConfig::from_file(test::fixture_path("model_small/config.json"));
  const CheckpointCheck check = check_checkpoint(sd, small);
  EXPECT_TRUE(check.ok()) << check.summary("weights.pt");
  EXPECT_TRUE(check.unexpected.empty()) << check.summary("weights.pt");
  EXPECT_EQ(check.parameter_count, 390188);  // printed by the generator from torch
}

TEST(ModelConfig, MismatchIsReportedByName) {
  const io::StateDict sd = io::load_state_dict(test::fixture_path("model_small/weights.pt"));
  ModelConfig other = ModelConfig::from_file(test::fixture_path("model_small/config.json"));
  other.depth = 7;  // one more block pair than the file has
  other.depth_head.features = 32;
  const CheckpointCheck check = check_checkpoint(sd, other);
  EXPECT_FALSE(check.ok());
  const std::string s = check.summary("weights.pt");
  EXPECT_NE(s.find("aggregator.frame_blocks.6.norm1.weight"), std::string::npos) << s;
  EXPECT_NE(s.find("mis-shaped"), std::string::npos) << s;
  EXPECT_EQ(s.find('\n'), std::string::npos) << "one line";
}

// Inputs fuzz/fuzz_model_config.cpp once failed on: a number beyond a
// double (1e309) escaped as the JSON library's own exception, with no file
// name; now every one is a one-line error naming the file.
TEST(ModelConfig, FuzzRegressionsFailInOneLineNamingTheFile) {
  const auto files = test::fuzz_regressions("fuzz_model_config");
  ASSERT_FALSE(files.empty());
  for (const auto& path : files) {
    const std::vector<uint8_t> bytes = test::file_bytes(path);
    try {
      ModelConfig::from_json_text(std::string(bytes.begin(), bytes.end()), "r.json");
    } catch (const Error& e) {
      EXPECT_TRUE(test::one_line_naming(e.what(), "r.json")) << path << ": " << e.what();
    }
  }
  EXPECT_NE(error_of(R"({"depth": 1e309})").find("not valid JSON"), std::string::npos);
  // A key is quoted with its control characters escaped, not printed raw.
  EXPECT_NE(error_of(R"({"a\nb": 6})").find(R"(unknown key 'a\x0ab')"), std::string::npos);
}
