// The one list of options (include/lingbot/options.h): the library's
// internal defaults are its defaults, every row can be set by name, and
// the options that default to a config key do take that key's value.
#include "api/option_table.h"

#include <lingbot/lingbot.h>

#include "test_support.h"

#include <gtest/gtest.h>

#include <set>

using namespace lingbot;

namespace {

// The value of an integer key of `config`.
int config_int(const ModelConfig& config, std::string_view key) {
  int value = -1;
  for_each_config_key(config, [&](std::string_view k, const auto& field) {
    if constexpr (std::is_same_v<std::decay_t<decltype(field)>, int>)
      if (k == key) value = field;
  });
  return value;
}

// A value of the row's kind other than its default, as text.
std::string other_value(const OptionInfo& info) {
  switch (info.kind) {
    case OptionInfo::Kind::Int: return std::to_string(info.default_int == info.min ? info.min + 1 : info.min);
    case OptionInfo::Kind::ConfigInt: return std::to_string(info.min + 1);
    case OptionInfo::Kind::Bool: return info.default_bool ? "false" : "true";
    case OptionInfo::Kind::Choice:
      for (const std::string& c : info.choice_list())
        if (c != info.default_choice) return c;
  }
  return "";
}

}  // namespace

TEST(OptionTable, LibraryDefaultsAreTheTablesDefaults) {
  // What the public API and the CLI run with when no option is given ...
  const StreamOptions from_table = stream_options(Options{}, ModelConfig::official());
  // ... is what the library runs with when it is given nothing.
  EXPECT_EQ(from_table, StreamOptions{});
  EXPECT_EQ(from_table, StreamOptions::from_config(ModelConfig::official()));
  EXPECT_EQ(StreamOptions{}.pipeline_depth, 2);
  EXPECT_EQ(Options{}.pipeline_depth, 2);
  const io::PreprocessOptions prep = preprocess_options(Options{}, ModelConfig::official());
  const io::PreprocessOptions library_prep;
  EXPECT_EQ(prep.image_size, library_prep.image_size);
  EXPECT_EQ(prep.mode, library_prep.mode);
  EXPECT_EQ(prep.patch_size, library_prep.patch_size);
  const cuda::CudaBackendOptions cuda_from_table = cuda_backend_options(Options{});
  const cuda::CudaBackendOptions cuda_library;
  EXPECT_EQ(cuda_from_table.sync_after_each_op, cuda_library.sync_after_each_op);
  EXPECT_EQ(cuda_from_table.lane_priority, cuda_library.lane_priority);
  EXPECT_EQ(cuda_from_table.attention_kernel, cuda_library.attention_kernel);
  EXPECT_EQ(cuda_from_table.conv_algorithm, cuda_library.conv_algorithm);
  EXPECT_EQ(cuda_from_table.gemm_algorithm, cuda_library.gemm_algorithm);
  EXPECT_EQ(cuda_from_table.low_memory, cuda_library.low_memory);
}

// The two libraries' algorithm choices reach the CUDA backend, each on its own.
TEST(OptionTable, AlgorithmChoicesReachTheCudaBackend) {
  Options o;
  o.conv_algorithm = "measured";
  EXPECT_EQ(cuda_backend_options(o).conv_algorithm, cuda::ConvAlgorithm::Measured);
  EXPECT_EQ(cuda_backend_options(o).gemm_algorithm, cuda::GemmAlgorithm::Heuristic);
  o.gemm_algorithm = "measured";
  EXPECT_EQ(cuda_backend_options(o).gemm_algorithm, cuda::GemmAlgorithm::Measured);
  o.conv_algorithm = "heuristic";
  EXPECT_EQ(cuda_backend_options(o).conv_algorithm, cuda::ConvAlgorithm::Heuristic);
  EXPECT_EQ(cuda_backend_options(o).gemm_algorithm, cuda::GemmAlgorithm::Measured);
  o.gemm_algorithm = "heuristic";
  EXPECT_EQ(cuda_backend_options(o).gemm_algorithm, cuda::GemmAlgorithm::Heuristic);
}

TEST(OptionTable, EveryRowIsWellFormed) {
  std::set<std::string> flags;
  for (const OptionInfo& info : option_table()) {
    SCOPED_TRACE(std::string(info.name));
    EXPECT_FALSE(info.help.empty());
    EXPECT_TRUE(flags.insert(info.flag()).second) << "flag used twice: " << info.flag();
    EXPECT_EQ(&option_info(info.name), &info);
    EXPECT_FALSE(info.default_text().empty());  // ConfigInt: throws unless its key is an integer config key
    if (info.kind == OptionInfo::Kind::Int) {
      EXPECT_LE(info.min, info.default_int);
      EXPECT_LE(info.default_int, info.max);
    }
    if (info.kind == OptionInfo::Kind::Choice) {
      const std::vector<std::string> choices = info.choice_list();
      EXPECT_GE(choices.size(), 2u);
      EXPECT_NE(std::find(choices.begin(), choices.end(), info.default_choice), choices.end());
    }
    if (info.kind == OptionInfo::Kind::Bool) {
      EXPECT_FALSE(info.help_off.empty());
    }
  }
  EXPECT_EQ(option_info("dense").flag(), "--no-dense");
  EXPECT_EQ(option_info("cuda_sync").flag(), "--cuda-sync");
  EXPECT_EQ(option_info("kv_window").flag(), "--kv-window");
}

TEST(OptionTable, EveryRowCanBeSetByNameAndChecked) {
  for (const OptionInfo& info : option_table()) {
    SCOPED_TRACE(std::string(info.name));
    Options o;
    set_option(o, info.name, other_value(info));
    EXPECT_NE(o, Options{}) << "set_option did not reach the field";
    EXPECT_NO_THROW(check_options(o));
  }
}

TEST(OptionTable, ConfigOptionsDefaultToTheirConfigKey) {
  const ModelConfig small = ModelConfig::from_file(test::fixture_path("model_small/config.json"));
  ASSERT_NE(StreamOptions::from_config(small), StreamOptions{});  // the fixture's settings are not the defaults
  for (const OptionInfo& info : option_table()) {
    if (info.kind != OptionInfo::Kind::ConfigInt) continue;
    SCOPED_TRACE(std::string(info.name));
    const int from_config = config_int(small, info.config_key);
    Options same, other;
    set_option(same, info.name, std::to_string(from_config));
    set_option(other, info.name, std::to_string(from_config + 1));
    EXPECT_EQ(stream_options(same, small), stream_options(Options{}, small));   // unset is the key's value
    EXPECT_NE(stream_options(other, small), stream_options(Options{}, small));  // and setting it counts
  }
}

// --kv-dtype reaches the aggregator's cache config (kv::CacheConfig::dtype).
TEST(OptionTable, KvDtypeReachesTheCacheConfig) {
  const ModelConfig config = ModelConfig::official();
  EXPECT_EQ(stream_options(Options{}, config).cache.dtype, kv::KvDtype::Auto);
  for (const auto& [value, dtype] : {std::pair{"bf16", kv::KvDtype::Bf16}, std::pair{"fp8", kv::KvDtype::Fp8}}) {
    Options o;
    set_option(o, "kv_dtype", value);
    EXPECT_EQ(stream_options(o, config).cache.dtype, dtype) << value;
  }
  Options bad;
  bad.kv_dtype = "fp16";
  EXPECT_THROW(stream_options(bad, config), Error);
}

// --depth-head-dtype reaches the stream options; bf16 needs channels last.
TEST(OptionTable, DepthHeadDtypeNeedsChannelsLast) {
  const ModelConfig config = ModelConfig::official();
  EXPECT_FALSE(stream_options(Options{}, config).depth_head_bf16);
  Options bf16;
  set_option(bf16, "depth_head_dtype", "bf16");
  EXPECT_TRUE(stream_options(bf16, config).depth_head_bf16);
  set_option(bf16, "depth_head_layout", "nchw");
  try {
    (void)stream_options(bf16, config);
    ADD_FAILURE() << "bf16 maps channels first were accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("depth_head_layout nhwc"), std::string::npos) << e.what();
  }
}

TEST(OptionTable, LowMemoryProfileHalvesTheWindowUnlessItIsSet) {
  const ModelConfig official = ModelConfig::official();
  ASSERT_EQ(config_int(official, "kv_cache_sliding_window"), 64);
  Options low;
  set_option(low, "memory_profile", "low");
  const StreamOptions s = stream_options(low, official);
  EXPECT_TRUE(s.low_memory);
  EXPECT_EQ(s.cache.sliding_window, 32);
  EXPECT_EQ(s.cache.dtype, kv::KvDtype::Fp8);  // unless kv_dtype is set
  EXPECT_FALSE(stream_options(Options{}, official).low_memory);
  // The backend's part: smaller cuBLASLt workspaces.
  EXPECT_TRUE(cuda_backend_options(low).low_memory);
  EXPECT_FALSE(cuda_backend_options(Options{}).low_memory);
  Options low_bf16 = low;
  set_option(low_bf16, "kv_dtype", "bf16");
  EXPECT_EQ(stream_options(low_bf16, official).cache.dtype, kv::KvDtype::Bf16);
  // An explicit window wins, in either direction.
  set_option(low, "kv_window", "48");
  EXPECT_EQ(stream_options(low, official).cache.sliding_window, 48);
  set_option(low, "kv_window", "16");
  EXPECT_EQ(stream_options(low, official).cache.sliding_window, 16);
  // A config whose window is already shorter keeps it.
  ModelConfig narrow = official;
  narrow.kv_cache_sliding_window = 8;
  Options low_narrow;
  set_option(low_narrow, "memory_profile", "low");
  EXPECT_EQ(stream_options(low_narrow, narrow).cache.sliding_window, 8);
}
