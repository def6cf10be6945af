// DeviceWeights: LayerScale folded into the layer before it. Checked against
// the state dict itself (the gain times each row, computed here in double),
// and end to end by the parity tests, which run the folded model against
// upstream's unfolded one. Also: random weights made one tensor at a time
// upload to the same bits, the weights hold one copy of each parameter, and
// channels-last storage moves exactly the depth head's convolution weights.
#include "backend/cpu/cpu_backend.h"
#include "core/half.h"
#include "model/depth_head.h"
#include "model/model_config.h"
#include "model/random_weights.h"
#include "model/weights.h"
#include "test_support.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <regex>
#include <string_view>

using namespace lingbot;

TEST(DeviceWeights, NamesTheGainFoldedIntoEachParameter) {
  EXPECT_EQ(DeviceWeights::folded_gain("aggregator.global_blocks.3.attn.proj.weight"),
            "aggregator.global_blocks.3.ls1.gamma");
  EXPECT_EQ(DeviceWeights::folded_gain("camera_head.trunk.0.mlp.fc2.bias"), "camera_head.trunk.0.ls2.gamma");
  EXPECT_EQ(DeviceWeights::folded_gain("aggregator.frame_blocks.0.mlp.fc1.weight"), "");
  EXPECT_EQ(DeviceWeights::folded_gain("aggregator.frame_blocks.0.attn.qkv.weight"), "");
  EXPECT_EQ(DeviceWeights::folded_gain("aggregator.frame_blocks.0.ls1.gamma"), "");
  EXPECT_EQ(DeviceWeights::folded_gain("depth_head.projects.0.weight"), "");
}

TEST(DeviceWeights, FoldsLayerScaleIntoProjAndFc2AndLeavesTheRest) {
  const ModelConfig config = ModelConfig::from_file(test::fixture_path("model_small/config.json"));
  const io::StateDict state = random_state_dict(config, 7);
  const std::unique_ptr<Backend> cpu = make_cpu_backend(1);
  const DeviceWeights weights(*cpu, state, config);

  int folded = 0, gains = 0;
  for (const auto& [name, source] : state) {
    const Tensor* stored = weights.find(name);
    ASSERT_NE(stored, nullptr) << name;
    // Through the backend: a Linear weight may be stored in its own layout.
    const Tensor got = cpu->download(*stored);
    const Tensor src = source.to_dtype(DType::F32);
    ASSERT_EQ(got.numel(), src.numel()) << name;
    if (name.size() > 6 && name.compare(name.size() - 6, 6, ".gamma") == 0) ++gains;
    const std::string gain_name = DeviceWeights::folded_gain(name);
    if (gain_name.empty()) {
      for (int64_t i = 0; i < src.numel(); ++i) ASSERT_EQ(got.f32()[i], src.f32()[i]) << name << " [" << i << "]";
      continue;
    }
    ++folded;
    const Tensor gain = state.at(gain_name).to_dtype(DType::F32);
    const int64_t rows = src.dim(0), cols = src.numel() / rows;
    ASSERT_EQ(gain.numel(), rows) << name;
    bool any_gain_differs_from_one = false;
    for (int64_t r = 0; r < rows; ++r) {
      any_gain_differs_from_one |= gain.f32()[r] != 1.0f;
      for (int64_t c = 0; c < cols; ++c) {
        const double want = static_cast<double>(gain.f32()[r]) * src.f32()[r * cols + c];
        ASSERT_NEAR(got.f32()[r * cols + c], want, 1e-7 * std::fabs(want) + 1e-30) << name << " [" << r << ", " << c << "]";
      }
    }
    EXPECT_TRUE(any_gain_differs_from_one) << gain_name << ": the test needs gains other than 1";
  }
  // Two gains per block, each folded into a weight and a bias.
  EXPECT_GT(gains, 0);
  EXPECT_EQ(folded, 2 * gains);
}

// A damaged checkpoint with a NaN or an infinity in one weight is refused at
// load, naming the tensor, instead of running to NaN cameras and points.
TEST(DeviceWeights, RefusesANonFiniteWeightNamingTheTensor) {
  const ModelConfig config = ModelConfig::from_file(test::fixture_path("model_small/config.json"));
  const std::unique_ptr<Backend> cpu = make_cpu_backend(1);
  const std::string victim = "aggregator.global_blocks.1.attn.qkv.weight";
  struct Case {
    DType dtype;
    float value;
    const char* shown;
  };
  for (const Case& c : {Case{DType::F32, NAN, "NaN"}, Case{DType::F32, -INFINITY, "-inf"},
                        Case{DType::BF16, INFINITY, "+inf"}, Case{DType::F16, NAN, "NaN"}}) {
    io::StateDict state = random_state_dict(config, 7);
    Tensor damaged = state.at(victim).to_dtype(DType::F32);  // a copy, writable
    damaged.f32()[5] = c.value;
    state.insert(victim, damaged.to_dtype(c.dtype));
    try {
      DeviceWeights weights(*cpu, state, config);
      ADD_FAILURE() << "a weight holding " << c.shown << " was accepted (" << dtype_name(c.dtype) << ")";
    } catch (const Error& e) {
      const std::string message = e.what();
      EXPECT_NE(message.find(victim), std::string::npos) << message;
      EXPECT_NE(message.find(c.shown), std::string::npos) << message;
      EXPECT_NE(message.find("element 5 "), std::string::npos) << message;
    }
  }
  // The same weights without the damage load.
  const io::StateDict clean = random_state_dict(config, 7);
  EXPECT_NO_THROW(DeviceWeights(*cpu, clean, config));
}

namespace {

// What the model's parameters take in the dtypes DeviceWeights stores them
// in, from the config alone: aggregator matrices (2+ dimensions) in the
// compute dtype, everything else float32.
size_t parameter_bytes(const ModelConfig& config, DType compute) {
  size_t n = 0;
  for (const ExpectedTensor& e : expected_parameters(config)) {
    int64_t numel = 1;
    for (const int64_t d : e.shape) numel *= d;
    const bool compute_dtype = e.shape.size() >= 2 && e.name.rfind("aggregator.", 0) == 0;
    n += static_cast<size_t>(numel) * dtype_size(compute_dtype ? compute : DType::F32);
  }
  return n;
}

}  // namespace

// Tensor by tensor, the random weights are the random state dict's: the
// uploaded weights agree bit for bit whichever way they were made.
TEST(DeviceWeights, RandomWeightsOneTensorAtATimeEqualTheRandomStateDict) {
  const ModelConfig config = ModelConfig::from_file(test::fixture_path("model_small/config.json"));
  const io::StateDict state = random_state_dict(config, 7);
  const RandomWeights source(config, 7);
  for (const auto& [name, t] : state) {
    const Tensor made = source.tensor(name);
    ASSERT_EQ(made.shape(), t.shape()) << name;
    ASSERT_EQ(std::memcmp(made.data(), t.data(), t.nbytes()), 0) << name;
  }
  for (const std::string_view dtype : {"fp32", "bf16"}) {
    const std::unique_ptr<Backend> cpu = make_cpu_backend(1, "auto", dtype);
    const DeviceWeights from_dict(*cpu, state, config);
    const DeviceWeights from_source(*cpu, source, config);
    for (const ExpectedTensor& e : expected_parameters(config)) {
      const Tensor& a = from_dict.get(e.name);
      const Tensor& b = from_source.get(e.name);
      ASSERT_EQ(a.dtype(), b.dtype()) << e.name;
      ASSERT_EQ(a.nbytes(), b.nbytes()) << e.name;
      ASSERT_EQ(std::memcmp(a.data(), b.data(), a.nbytes()), 0) << e.name << " (" << dtype << ")";
    }
  }
}

// One copy of each parameter in host memory: the device tensors take the
// parameters' bytes in their stored dtypes, and the host copies kept beside
// them are only the few tokens host() reads that are stored converted. A
// folded matrix keeps no float32 source (it used to: ~1.4 GB on the
// official model in fp32).
TEST(DeviceWeights, HoldsOneCopyOfEachParameter) {
  const ModelConfig config = ModelConfig::from_file(test::fixture_path("model_small/config.json"));
  const RandomWeights source(config, 7);
  for (const DType compute : {DType::F32, DType::BF16}) {
    const std::unique_ptr<Backend> cpu = make_cpu_backend(1, "auto", compute == DType::BF16 ? "bf16" : "fp32");
    const DeviceWeights weights(*cpu, source, config);
    EXPECT_EQ(weights.device_bytes(), parameter_bytes(config, compute)) << dtype_name(compute);
    // Converted and kept for host(): aggregator tensors of 2+ dimensions
    // that are not layer weights (the camera, scale and register tokens).
    size_t tokens = 0;
    if (compute != DType::F32) {
      for (const ExpectedTensor& e : expected_parameters(config)) {
        if (e.shape.size() < 2 || e.name.rfind("aggregator.", 0) != 0 || e.name.ends_with(".weight")) continue;
        int64_t numel = 1;
        for (const int64_t d : e.shape) numel *= d;
        tokens += static_cast<size_t>(numel) * 4;
      }
    }
    EXPECT_EQ(weights.host_copy_bytes(), tokens) << dtype_name(compute);
  }
}

// Channels-last storage (WeightStorage::depth_head_channels_last): exactly
// the depth head's Conv2d weights, named here by upstream's DPT modules,
// are stored [Cout, k, k, Cin] with each value moved, not changed; its
// ConvTranspose2d and 1x1 projection weights and everything else stay as
// the checkpoint has them.
TEST(DeviceWeights, ChannelsLastStoresTheDepthHeadConvolutionsAsOhwi) {
  const ModelConfig config = ModelConfig::from_file(test::fixture_path("model_small/config.json"));
  const io::StateDict state = random_state_dict(config, 7);
  const std::unique_ptr<Backend> cpu = make_cpu_backend(1);
  const DeviceWeights weights(*cpu, state, config, false, WeightStorage{.depth_head_channels_last = true});
  const std::regex conv2d(
      R"(depth_head\.(resize_layers\.3|scratch\.(layer[1-4]_rn|refinenet[1-4]\.(out_conv|resConfUnit[12]\.conv[12])|)"
      R"(output_conv1|output_conv2\.[02]))\.weight)");
  int permuted = 0;
  for (const auto& [name, source] : state) {
    const bool is_conv = std::regex_match(name, conv2d);
    EXPECT_EQ(is_depth_head_conv_weight(name), is_conv) << name;
    if (!DeviceWeights::folded_gain(name).empty()) continue;  // changed by folding (the test above)
    const Tensor got = cpu->download(weights.get(name));
    const Tensor src = source.to_dtype(DType::F32);
    if (!is_conv) {
      ASSERT_EQ(got.shape(), src.shape()) << name;
      ASSERT_EQ(std::memcmp(got.data(), src.data(), src.nbytes()), 0) << name;
      continue;
    }
    ++permuted;
    ASSERT_EQ(src.ndim(), 4) << name;
    const int64_t O = src.dim(0), I = src.dim(1), KH = src.dim(2), KW = src.dim(3);
    ASSERT_EQ(got.shape(), (Shape{O, KH, KW, I})) << name;
    for (int64_t o = 0; o < O; ++o)
      for (int64_t i = 0; i < I; ++i)
        for (int64_t y = 0; y < KH; ++y)
          for (int64_t x = 0; x < KW; ++x)
            ASSERT_EQ(got.f32()[((o * KH + y) * KW + x) * I + i], src.f32()[((o * I + i) * KH + y) * KW + x])
                << name << " [" << o << ", " << i << ", " << y << ", " << x << "]";
  }
  // resize_layers.3, 4 layer_rn, 4 out_conv, 2 units x 2 convs in refinenets 1-3
  // and the second unit's 2 in refinenet4 (upstream's has no first unit),
  // output_conv1, output_conv2.0 and .2.
  EXPECT_EQ(permuted, 1 + 4 + 4 + 3 * 4 + 2 + 3);
}

// bfloat16 depth-head storage (WeightStorage::depth_head_bf16): exactly the
// weights that multiply its maps (the Conv2d weights above and the two
// ConvTranspose2d ones, named by upstream's modules) are stored rounded to
// bfloat16, value for value; their biases, the 1x1 projections and
// everything else stay float32 and bit-identical.
TEST(DeviceWeights, DepthHeadBf16StoresTheMapWeightsInBf16) {
  const ModelConfig config = ModelConfig::from_file(test::fixture_path("model_small/config.json"));
  const io::StateDict state = random_state_dict(config, 7);
  const std::unique_ptr<Backend> cpu = make_cpu_backend(1);
  const DeviceWeights weights(*cpu, state, config, false, WeightStorage{.depth_head_bf16 = true});
  const std::regex map_weight(
      R"(depth_head\.(resize_layers\.[013]|scratch\.(layer[1-4]_rn|refinenet[1-4]\.(out_conv|resConfUnit[12]\.conv[12])|)"
      R"(output_conv1|output_conv2\.[02]))\.weight)");
  int rounded = 0;
  for (const auto& [name, source] : state) {
    const bool multiplies_maps = std::regex_match(name, map_weight);
    EXPECT_EQ(is_depth_head_map_weight(name), multiplies_maps) << name;
    if (!DeviceWeights::folded_gain(name).empty()) continue;
    const Tensor& stored = weights.get(name);
    const Tensor src = source.to_dtype(DType::F32);
    if (!multiplies_maps) {
      if (!name.starts_with("depth_head.")) continue;
      EXPECT_EQ(stored.dtype(), DType::F32) << name;
      const Tensor got = cpu->download(stored);
      ASSERT_EQ(std::memcmp(got.data(), src.data(), src.nbytes()), 0) << name;
      continue;
    }
    ++rounded;
    EXPECT_EQ(stored.dtype(), DType::BF16) << name;
    const Tensor got = cpu->download(stored).to_dtype(DType::F32);
    ASSERT_EQ(got.shape(), src.shape()) << name;
    for (int64_t i = 0; i < src.numel(); ++i)
      ASSERT_EQ(got.f32()[i], bf16_to_f32(f32_to_bf16(src.f32()[i]))) << name << " element " << i;
  }
  EXPECT_EQ(rounded, 1 + 4 + 4 + 3 * 4 + 2 + 3 + 2);
}
