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

// OpenMP threads (ours and oneDNN's, one libgomp team) that wait for work
// spin by default, for about 300,000 iterations after every parallel
// region. With another program busy on a core, the spinning thread takes
// its turns from the thread that has work: 2 threads ran 14 frames of the
// small model 4x slower than 1 (issue 22). Passive waiting (a futex) costs
// a wake-up per region instead, which on an idle machine is lost in the
// noise, at 2 threads and at 16 (docs/PERF.md, "Threads beside other
// load"). libgomp reads its settings once, when it is loaded, before
// main(); so unless the user set OMP_WAIT_POLICY or GOMP_SPINCOUNT, this
// sets OMP_WAIT_POLICY=passive and executes the program again (argv as
// given; /proc/self/exe). Returns only when it did nothing or the exec
// failed (the run then goes on spinning).
void exec_with_passive_openmp_threads(char** argv);

}  // namespace lingbot
