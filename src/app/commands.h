// The subcommands of lingbot-map: their options and entry points.
#pragma once

#include <lingbot/options.h>

#include <CLI/CLI.hpp>

#include <string>

namespace lingbot {

struct InspectArgs {
  std::string model;
  std::string config;
  bool list_all = false;
};
void add_inspect_command(CLI::App& app, InspectArgs& args);
int run_inspect(const InspectArgs& args);

// Options shared by `run` and `bench`: the engine's (one flag per row of
// LINGBOT_OPTIONS, include/lingbot/options.h, so the CLI's defaults are the
// library's), the model config and logging.
struct EngineArgs {
  std::string config;
  Options options;
  bool kv_stats = false;
};

struct RunArgs {
  EngineArgs engine;
  std::string model;
  std::string images;
  std::string out = "lingbot_output";
  double conf_threshold = 1.5;
  int first_k = 0;
  int stride = 1;
  bool profile = false;  // LINGBOT_PROFILE: print the stage times at the end
};
void add_run_command(CLI::App& app, RunArgs& args);
int run_run(const RunArgs& args);

struct BenchArgs {
  EngineArgs engine;
  int frames = 24;
  int height = 378;
  int width = 504;
  int warmup = 2;
  std::string images;  // optional real frames instead of random ones
  std::string json;    // optional: write the figures here
  bool profile = false;
};
void add_bench_command(CLI::App& app, BenchArgs& args);
int run_bench(const BenchArgs& args);

// Where to get the official weights (printed when --model is missing).
extern const char* const kCheckpointHelp;

}  // namespace lingbot
