#include "app/engine_setup.h"

#include "app/flag_checks.h"

#include <fmt/format.h>

#include <climits>

namespace lingbot {

namespace {

const char* group_title(OptionGroup group) {
  switch (group) {
    case OptionGroup::Device: return "Device";
    case OptionGroup::Stream: return "Streaming";
    case OptionGroup::Preprocess: return "Preprocessing";
    case OptionGroup::Cuda: return "CUDA (tuning and debugging)";
  }
  return "Options";
}

// The flag's range, with a message that names the bound ("must be >= 1").
CLI::Validator range(int min, int max) { return max == INT_MAX ? at_least(min) : between(min, max); }

std::string flag_help(const OptionInfo& info) {
  if (info.kind == OptionInfo::Kind::Bool) return std::string(info.default_bool ? info.help_off : info.help);
  return fmt::format("{} (default: {})", info.help, info.default_text());
}

}  // namespace

void add_engine_options(CLI::App& cmd, EngineArgs& a, const std::set<OptionGroup>& groups) {
  cmd.add_option("--config", a.config, "Model config JSON (default: the official architecture)");
  Options& o = a.options;
  // One flag per row of LINGBOT_OPTIONS, bound to the field of the same
  // name; its help and range come from the row (option_info).
#define LINGBOT_INT_FLAG_(group_, name_, default_, min_, max_, help_)                                      \
  if (groups.count(OptionGroup::group_)) {                                                                  \
    const OptionInfo& info = option_info(#name_);                                                            \
    cmd.add_option(info.flag(), o.name_, flag_help(info))                                                    \
        ->check(range(min_, max_))                                                                      \
        ->group(group_title(info.group));                                                                    \
  }
#define LINGBOT_CONFIG_INT_FLAG_(group_, name_, config_key_, min_, help_)                                   \
  if (groups.count(OptionGroup::group_)) {                                                                  \
    const OptionInfo& info = option_info(#name_);                                                            \
    cmd.add_option_function<int>(                                                                            \
           info.flag(), [&o](const int& value) { o.name_ = value; }, flag_help(info))                       \
        ->check(range(min_, INT_MAX))                                                                   \
        ->group(group_title(info.group));                                                                    \
  }
#define LINGBOT_BOOL_FLAG_(group_, name_, default_, help_on_, help_off_)                                    \
  if (groups.count(OptionGroup::group_)) {                                                                  \
    const OptionInfo& info = option_info(#name_);                                                            \
    cmd.add_flag_callback(                                                                                   \
           info.flag(), [&o] { o.name_ = !(default_); }, flag_help(info))                                   \
        ->group(group_title(info.group));                                                                    \
  }
#define LINGBOT_CHOICE_FLAG_(group_, name_, default_, choices_, help_)                                      \
  if (groups.count(OptionGroup::group_)) {                                                                  \
    const OptionInfo& info = option_info(#name_);                                                            \
    cmd.add_option(info.flag(), o.name_, flag_help(info))                                                    \
        ->check(CLI::IsMember(info.choice_list()))                                                           \
        ->group(group_title(info.group));                                                                    \
  }
  LINGBOT_OPTIONS(LINGBOT_INT_FLAG_, LINGBOT_CONFIG_INT_FLAG_, LINGBOT_BOOL_FLAG_, LINGBOT_CHOICE_FLAG_)
#undef LINGBOT_INT_FLAG_
#undef LINGBOT_CONFIG_INT_FLAG_
#undef LINGBOT_BOOL_FLAG_
#undef LINGBOT_CHOICE_FLAG_
  cmd.add_flag("--kv-stats", a.kv_stats, "Log KV cache occupancy after every frame");
}

ModelConfig load_config(const EngineArgs& a) {
  return a.config.empty() ? ModelConfig::official() : ModelConfig::from_file(a.config);
}

}  // namespace lingbot
