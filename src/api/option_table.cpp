#include "api/option_table.h"

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/cpu_capacity.h"
#include "backend/cuda_module.h"
#include "core/error.h"
#include "core/log.h"

#include <lingbot/lingbot.h>

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <type_traits>

namespace lingbot {

namespace {

// The official model's value of an integer config key (for help texts).
int official_int(std::string_view key) {
  const ModelConfig official = ModelConfig::official();
  int value = 0;
  bool found = false;
  for_each_config_key(official, [&](std::string_view k, const auto& field) {
    if constexpr (std::is_same_v<std::decay_t<decltype(field)>, int>) {
      if (k == key) {
        value = field;
        found = true;
      }
    }
  });
  LB_CHECK(found, "internal error: option default names '{}', which is no integer config key", key);
  return value;
}

void check_range(std::string_view name, int value, int min, int max) {
  if (value >= min && value <= max) return;
  if (max == INT_MAX) fail("option {} must be >= {}, got {}", name, min, value);
  fail("option {} must be in [{}, {}], got {}", name, min, max, value);
}

void check_choice(std::string_view name, const std::string& value, std::string_view choices) {
  const OptionInfo& info = option_info(name);
  for (const std::string& c : info.choice_list())
    if (value == c) return;
  fail("option {} must be one of {}, got '{}'", name, fmt::join(info.choice_list(), ", "), value);
}

int parse_int(std::string_view name, std::string_view text) {
  int value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  LB_CHECK(ec == std::errc() && end == text.data() + text.size() && !text.empty(),
           "option {}: '{}' is not an integer", name, text);
  return value;
}

bool parse_bool(std::string_view name, std::string_view text) {
  if (text == "true" || text == "1" || text == "on" || text == "yes") return true;
  if (text == "false" || text == "0" || text == "off" || text == "no") return false;
  fail("option {}: '{}' is not true or false", name, text);
}

}  // namespace

std::vector<std::string> OptionInfo::choice_list() const {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= choices.size() && !choices.empty()) {
    const size_t bar = choices.find('|', start);
    const size_t end = bar == std::string_view::npos ? choices.size() : bar;
    out.emplace_back(choices.substr(start, end - start));
    if (bar == std::string_view::npos) break;
    start = bar + 1;
  }
  return out;
}

std::string OptionInfo::flag() const {
  std::string dashed(name);
  for (char& c : dashed)
    if (c == '_') c = '-';
  if (kind == Kind::Bool && default_bool) return "--no-" + dashed;
  return "--" + dashed;
}

std::string OptionInfo::default_text() const {
  switch (kind) {
    case Kind::Int: return std::to_string(default_int);
    case Kind::ConfigInt:
      return fmt::format("the model config's {}, {} in the official model", config_key, official_int(config_key));
    case Kind::Bool: return default_bool ? "on" : "off";
    case Kind::Choice: return std::string(default_choice);
  }
  return "";
}

const std::vector<OptionInfo>& option_table() {
  using Kind = OptionInfo::Kind;
  auto row = [](OptionGroup group, Kind kind, std::string_view name, std::string_view help) {
    OptionInfo info;
    info.group = group;
    info.kind = kind;
    info.name = name;
    info.help = help;
    return info;
  };
#define LINGBOT_INT_ROW_(group_, name_, default_, min_, max_, help_)    \
  [&] {                                                                  \
    OptionInfo info = row(OptionGroup::group_, Kind::Int, #name_, help_); \
    info.default_int = default_;                                         \
    info.min = min_;                                                     \
    info.max = max_;                                                     \
    return info;                                                         \
  }(),
#define LINGBOT_CONFIG_INT_ROW_(group_, name_, config_key_, min_, help_)       \
  [&] {                                                                         \
    OptionInfo info = row(OptionGroup::group_, Kind::ConfigInt, #name_, help_); \
    info.min = min_;                                                            \
    info.max = INT_MAX;                                                         \
    info.config_key = config_key_;                                              \
    return info;                                                                \
  }(),
#define LINGBOT_BOOL_ROW_(group_, name_, default_, help_on_, help_off_)          \
  [&] {                                                                           \
    OptionInfo info = row(OptionGroup::group_, Kind::Bool, #name_, help_on_);     \
    info.help_off = help_off_;                                                    \
    info.default_bool = default_;                                                 \
    return info;                                                                  \
  }(),
#define LINGBOT_CHOICE_ROW_(group_, name_, default_, choices_, help_)     \
  [&] {                                                                    \
    OptionInfo info = row(OptionGroup::group_, Kind::Choice, #name_, help_); \
    info.default_choice = default_;                                        \
    info.choices = choices_;                                               \
    return info;                                                           \
  }(),
  static const std::vector<OptionInfo> table = {
      LINGBOT_OPTIONS(LINGBOT_INT_ROW_, LINGBOT_CONFIG_INT_ROW_, LINGBOT_BOOL_ROW_, LINGBOT_CHOICE_ROW_)};
#undef LINGBOT_INT_ROW_
#undef LINGBOT_CONFIG_INT_ROW_
#undef LINGBOT_BOOL_ROW_
#undef LINGBOT_CHOICE_ROW_
  return table;
}

const OptionInfo& option_info(std::string_view name) {
  for (const OptionInfo& info : option_table())
    if (info.name == name) return info;
  std::vector<std::string_view> names;
  for (const OptionInfo& info : option_table()) names.push_back(info.name);
  fail("unknown option '{}' (the options are {})", name, fmt::join(names, ", "));
}

void set_option(Options& o, std::string_view key, std::string_view value) {
  // The form is checked here, the range of an integer when the options are used.
#define LINGBOT_INT_SET_(group_, name_, default_, min_, max_, help_) \
  if (key == #name_) return void(o.name_ = parse_int(key, value));
#define LINGBOT_CONFIG_INT_SET_(group_, name_, config_key_, min_, help_) \
  if (key == #name_) return void(o.name_ = parse_int(key, value));
#define LINGBOT_BOOL_SET_(group_, name_, default_, help_on_, help_off_) \
  if (key == #name_) return void(o.name_ = parse_bool(key, value));
#define LINGBOT_CHOICE_SET_(group_, name_, default_, choices_, help_) \
  if (key == #name_) {                                                  \
    check_choice(key, std::string(value), choices_);                    \
    return void(o.name_ = std::string(value));                          \
  }
  LINGBOT_OPTIONS(LINGBOT_INT_SET_, LINGBOT_CONFIG_INT_SET_, LINGBOT_BOOL_SET_, LINGBOT_CHOICE_SET_)
#undef LINGBOT_INT_SET_
#undef LINGBOT_CONFIG_INT_SET_
#undef LINGBOT_BOOL_SET_
#undef LINGBOT_CHOICE_SET_
  option_info(key);  // throws: no such option
}

void check_options(const Options& o) {
#define LINGBOT_INT_CHECK_(group_, name_, default_, min_, max_, help_) check_range(#name_, o.name_, min_, max_);
#define LINGBOT_CONFIG_INT_CHECK_(group_, name_, config_key_, min_, help_) \
  if (o.name_) check_range(#name_, *o.name_, min_, INT_MAX);
#define LINGBOT_BOOL_CHECK_(group_, name_, default_, help_on_, help_off_)
#define LINGBOT_CHOICE_CHECK_(group_, name_, default_, choices_, help_) check_choice(#name_, o.name_, choices_);
  LINGBOT_OPTIONS(LINGBOT_INT_CHECK_, LINGBOT_CONFIG_INT_CHECK_, LINGBOT_BOOL_CHECK_, LINGBOT_CHOICE_CHECK_)
#undef LINGBOT_INT_CHECK_
#undef LINGBOT_CONFIG_INT_CHECK_
#undef LINGBOT_BOOL_CHECK_
#undef LINGBOT_CHOICE_CHECK_
}

StreamOptions stream_options(const Options& o, const ModelConfig& config) {
  check_options(o);
  StreamOptions s = StreamOptions::from_config(config);
  s.cache.dtype = kv::parse_kv_dtype(o.kv_dtype);
  if (o.num_scale_frames) {
    s.num_scale_frames = *o.num_scale_frames;
    s.cache.scale_frames = *o.num_scale_frames;
  }
  if (o.kv_window) s.cache.sliding_window = *o.kv_window;
  if (o.memory_profile == "low") {
    // The KV cache is most of the memory (docs/PERF.md): its window first.
    s.low_memory = true;
    if (!o.kv_window) s.cache.sliding_window = std::min(s.cache.sliding_window, kLowMemoryWindow);
    if (o.kv_dtype == "auto") s.cache.dtype = kv::KvDtype::Fp8;  // then half of bf16's KV bytes
  }
  s.camera_head_weights = o.camera_head_weights == "bf16"   ? StreamOptions::HeadWeights::Bf16
                          : o.camera_head_weights == "fp32" ? StreamOptions::HeadWeights::F32
                                                            : StreamOptions::HeadWeights::Auto;
  s.depth_head_layout =
      o.depth_head_layout == "nchw" ? StreamOptions::MapsLayout::ChannelsFirst : StreamOptions::MapsLayout::ChannelsLast;
  s.depth_head_bf16 = o.depth_head_dtype == "bf16";
  LB_CHECK(!s.depth_head_bf16 || s.depth_head_layout == StreamOptions::MapsLayout::ChannelsLast,
           "option depth_head_dtype bf16 needs depth_head_layout nhwc (--depth-head-layout nhwc)");
  if (o.camera_iterations) s.camera_iterations = *o.camera_iterations;
  s.cache_layout = o.kv_cache == "dense" ? kv::Layout::Dense : kv::Layout::Paged;
  s.keyframe_interval = o.keyframe_interval;
  s.pipeline_depth = o.pipeline_depth;
  s.keep_dense_outputs = o.dense;
  s.depth_head_batch = o.depth_head_batch;
  s.use_graphs = o.cuda_graphs;
  s.allow_extra_tensors = o.allow_extra_tensors;
  s.windowed = o.mode == "windowed";
  s.window.window_size = o.window_size;
  s.window.overlap_size = o.overlap_size;
  s.window.overlap_keyframes = o.overlap_keyframes;
  s.window_align = o.window_align == "sim3" ? WindowAlign::Sim3 : WindowAlign::Upstream;
  if (s.windowed) {  // checked here, before any heavy work
    (void)WindowPlan::from(s.window, s.num_scale_frames, s.keyframe_interval);
    LB_CHECK(s.keep_dense_outputs, "mode windowed scales each window by its depth maps: it cannot run with dense off "
                                   "(--no-dense)");
  }
  return s;
}

io::PreprocessOptions preprocess_options(const Options& o, const ModelConfig& config) {
  check_options(o);
  io::PreprocessOptions p;
  p.mode = o.preprocess == "pad" ? io::PreprocessOptions::Mode::Pad : io::PreprocessOptions::Mode::Crop;
  p.image_size = o.image_size;
  p.patch_size = config.patch_size;
  return p;
}

cuda::CudaBackendOptions cuda_backend_options(const Options& o) {
  check_options(o);
  cuda::CudaBackendOptions c;
  c.sync_after_each_op = o.cuda_sync;
  c.lane_priority = o.lane_priority == "main" ? cuda::CudaBackendOptions::LanePriority::Main
                                              : cuda::CudaBackendOptions::LanePriority::Equal;
  c.attention_kernel = o.attention_kernel == "mma"        ? cuda::AttentionKernel::Mma
                       : o.attention_kernel == "wgmma-ws" ? cuda::AttentionKernel::WgmmaWs
                                                          : cuda::AttentionKernel::Auto;
  c.conv_algorithm = o.conv_algorithm == "measured" ? cuda::ConvAlgorithm::Measured : cuda::ConvAlgorithm::Heuristic;
  c.gemm_algorithm = o.gemm_algorithm == "measured" ? cuda::GemmAlgorithm::Measured : cuda::GemmAlgorithm::Heuristic;
  c.low_memory = o.memory_profile == "low";
  return c;
}

int capped_threads(int threads) {
  const cpu::CpuCapacity capacity = cpu::cpu_capacity();
  if (threads <= capacity.usable()) return threads;
  log_warn("--threads {}: more than this process can run at once ({} hardware threads, {} CPUs in its affinity "
           "mask); using {}",
           threads, capacity.hardware_threads, capacity.affinity_cpus, capacity.usable());
  return capacity.usable();
}

std::unique_ptr<Backend> make_backend(const Options& o) {
  check_options(o);
  std::string device = o.device;
  if (device == "auto") {
    // The CUDA backend is a module loaded here (backend/cuda_module.h); a
    // machine without it, without the CUDA libraries or without a GPU runs
    // on the CPU, and the log says why.
    const std::string why_not = cuda_module::unavailable_reason();
    if (why_not.empty()) {
      device = "cuda";
    } else {
      log_info("device auto: running on the CPU, CUDA is unavailable: {}", why_not);
      device = "cpu";
    }
  }
  if (device == "cuda") return cuda_module::make_backend(cuda_backend_options(o));
  return make_cpu_backend(capped_threads(o.threads), o.cpu_isa, o.cpu_dtype, o.cpu_bf16_products);
}

}  // namespace lingbot
