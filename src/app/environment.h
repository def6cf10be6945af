// The environment variables lingbot-map reads. The library reads none: each
// of these sets an engine option (include/lingbot/options.h) or the
// profiler, and read_environment() is the one place that looks at the
// environment.
#pragma once

#include <lingbot/options.h>

#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace lingbot {

struct EnvironmentVariable {
  std::string_view name;
  std::string_view option;   // the option it sets, or "" (LINGBOT_PROFILE)
  std::string_view values;   // what it takes
  std::string_view meaning;  // for --help
};
const std::vector<EnvironmentVariable>& environment_variables();

// The "Environment variables:" section of --help.
std::string environment_help();

struct EnvironmentSettings {
  bool profile = false;  // LINGBOT_PROFILE
};

// Reads every variable above and sets its option in `options`, unless
// `given(option)` says the command line set that option (a flag wins over
// the environment). Throws Error naming the variable for a value it does
// not take.
EnvironmentSettings read_environment(Options& options, const std::function<bool(std::string_view)>& given);

}  // namespace lingbot
