// The JSON model config: defaults, strictness, validation, and the list of
// parameters a config implies, checked against independent facts (the
// official checkpoint's published tensor count, a real upstream state dict).
#include "checkpoint/checkpoint.h"
#include "model/checkpoint_check.h"
#include "model/model_config.h"
#include "test_support.h"

#include <gtest/gtest.h>

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

}  // namespace

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
