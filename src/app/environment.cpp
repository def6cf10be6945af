#include "app/environment.h"

#include "api/option_table.h"
#include "core/error.h"

#include <lingbot/lingbot.h>

#include <fmt/format.h>

#include <cstdlib>

#include <unistd.h>

namespace lingbot {

const std::vector<EnvironmentVariable>& environment_variables() {
  static const std::vector<EnvironmentVariable> variables = {
      {"LINGBOT_CUDA_GRAPHS", "cuda_graphs", "0", "run every step eagerly, no CUDA graphs (as --no-cuda-graphs)"},
      {"LINGBOT_CUDA_SYNC", "cuda_sync", "1",
       "wait for the GPU after every op and name the op whose kernel failed (as --cuda-sync)"},
      {"LINGBOT_CUDA_LANE_PRIORITY", "lane_priority", "equal|main",
       "priorities of the GPU's two streams (as --lane-priority)"},
      {"LINGBOT_ATTENTION_KERNEL", "attention_kernel", "auto|mma|wgmma-ws",
       "the tensor-core attention kernel on Hopper (as --attention-kernel)"},
      {"LINGBOT_CONV_ALGORITHM", "conv_algorithm", "heuristic|measured",
       "how the depth head's cuDNN convolutions pick their algorithm (as --conv-algorithm)"},
      {"LINGBOT_GEMM_ALGORITHM", "gemm_algorithm", "heuristic|measured",
       "how the cuBLASLt matrix products pick their algorithm (as --gemm-algorithm)"},
      {"LINGBOT_PROFILE", "", "1", "time every stage of the model and print the table at the end (bench: as --profile)"},
  };
  return variables;
}

std::string environment_help() {
  std::string text = "Environment variables (a flag given on the command line wins):\n";
  for (const EnvironmentVariable& v : environment_variables())
    text += fmt::format("  {}={}\n      {}\n", v.name, v.values, v.meaning);
  text += "  OMP_WAIT_POLICY, GOMP_SPINCOUNT\n"
          "      OpenMP's, as the runtime reads them; unset, lingbot-map sets OMP_WAIT_POLICY=passive (idle threads "
          "sleep rather than spin)\n";
  return text;
}

EnvironmentSettings read_environment(Options& options, const std::function<bool(std::string_view)>& given) {
  EnvironmentSettings settings;
  for (const EnvironmentVariable& v : environment_variables()) {
    const char* raw = std::getenv(std::string(v.name).c_str());
    if (raw == nullptr || *raw == '\0') continue;
    const std::string value = raw;
    if (v.option.empty()) {  // LINGBOT_PROFILE: anything but 0 turns it on
      settings.profile = value != "0";
      continue;
    }
    if (given(v.option)) continue;
    // The two switches keep their historical spelling: graphs off with 0,
    // synchronisation on with 1; any other value leaves them alone.
    if (v.option == "cuda_graphs") {
      if (value == "0") options.cuda_graphs = false;
      continue;
    }
    if (v.option == "cuda_sync") {
      if (value == "1") options.cuda_sync = true;
      continue;
    }
    try {
      set_option(options, v.option, value);
    } catch (const Error&) {
      fail("{} must be one of {}, got '{}'", v.name, fmt::join(option_info(v.option).choice_list(), ", "), value);
    }
  }
  return settings;
}

void exec_with_passive_openmp_threads(char** argv) {
  if (std::getenv("OMP_WAIT_POLICY") != nullptr || std::getenv("GOMP_SPINCOUNT") != nullptr) return;
  if (setenv("OMP_WAIT_POLICY", "passive", 1) != 0) return;
  execv("/proc/self/exe", argv);
}

}  // namespace lingbot
