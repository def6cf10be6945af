// The rows of LINGBOT_OPTIONS (include/lingbot/options.h) as data, and the
// public Options turned into what the layers below take. Shared by the
// public API (lingbot.cpp) and the lingbot-map CLI (src/app), so that both
// read every option the same way.
#pragma once

#include "backend/backend.h"
#include "backend/cuda/cuda_backend_options.h"
#include "image/preprocess.h"
#include "model/model_config.h"
#include "model/stream_options.h"

#include <lingbot/options.h>

#include <memory>
#include <string>
#include <string_view>
#include <vector>


namespace lingbot {

struct OptionInfo {
  enum class Kind { Int, ConfigInt, Bool, Choice };
  OptionGroup group = OptionGroup::Stream;
  Kind kind = Kind::Int;
  std::string_view name;
  std::string_view help;      // Bool: what true does
  std::string_view help_off;  // Bool: what false does
  int default_int = 0;        // Int
  int min = 0, max = 0;       // Int; ConfigInt: min only
  bool default_bool = false;  // Bool
  std::string_view default_choice;  // Choice
  std::string_view choices;         // Choice: "a|b|c"
  std::string_view config_key;      // ConfigInt: the model config key it defaults to

  std::vector<std::string> choice_list() const;
  // The CLI flag: "--kv-window"; a Bool that defaults to true "--no-dense",
  // one that defaults to false "--cuda-sync".
  std::string flag() const;
  // What the option is when not set: "2", "paged", "on", "off", or for a
  // ConfigInt "the model config's kv_cache_sliding_window, 64 in the
  // official model".
  std::string default_text() const;
};

// Every option, in LINGBOT_OPTIONS order.
const std::vector<OptionInfo>& option_table();
// The row of `name`; throws Error naming it if there is none.
const OptionInfo& option_info(std::string_view name);

// Throws Error ("option kv_window must be >= 1, got 0") for a value out of
// its range or not one of its choices.
void check_options(const Options& options);

// The KV window of memory_profile low where kv_window is not set (or the
// config's, if smaller): 32 frames, half the official config's 64.
inline constexpr int kLowMemoryWindow = 32;

// The settings of a stream: the config's, with the options set in `options`
// over them (num_scale_frames also sets the KV cache's scale frames, as
// upstream demo.py's --num_scale_frames does; memory_profile low lowers the
// window to kLowMemoryWindow unless kv_window is set).
StreamOptions stream_options(const Options& options, const ModelConfig& config);
io::PreprocessOptions preprocess_options(const Options& options, const ModelConfig& config);
// --threads as the CPU backend gets it: more than the process can run at
// once (backend/cpu/cpu_capacity.h) is capped there, with a warning naming
// both numbers (1000 threads on 2 cores only take turns).
int capped_threads(int threads);
std::unique_ptr<Backend> make_backend(const Options& options);
cuda::CudaBackendOptions cuda_backend_options(const Options& options);

}  // namespace lingbot
