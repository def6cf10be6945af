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

// OpenMP threads (ours and oneDNN's: one libgomp team) that wait for work
// spin by default for 300,000 iterations after every parallel region. With
// another program busy on a core, the spinning thread takes its turns from
// the thread that has work: 2 threads ran 14 frames of the small model 4x
// slower than 1 (issue 22). Sleeping at once (OMP_WAIT_POLICY=passive)
// fixed that, but costs a wake-up per region, and on a virtual machine's
// idle vCPUs that wake-up is slow: at 16 threads a streamed frame took 20%
// longer than with spinning (docs/PERF.md, "Threads beside other load").
// A short spin, kOpenMpSpinCount iterations (tens of microseconds), keeps
// the team awake between the back-to-back regions of a layer and still
// yields the core within that time when there is no work. libgomp reads its
// settings once, when it is loaded, before main(); so unless the user set
// OMP_WAIT_POLICY or GOMP_SPINCOUNT, this sets GOMP_SPINCOUNT and executes
// the program again (argv as given; /proc/self/exe). Returns only when it
// did nothing or the exec failed (the run then goes on with libgomp's
// defaults).
inline constexpr const char* kOpenMpSpinCount = "1000";
void exec_with_short_openmp_spin(char** argv);

}  // namespace lingbot
