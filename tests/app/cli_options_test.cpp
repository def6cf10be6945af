// The CLI's engine flags are the option table's (include/lingbot/options.h):
// parsed from an empty command line they give the library's defaults, each
// flag sets its option, and the environment variables of src/app reach
// their options unless a flag was given.
#include "app/commands.h"
#include "app/engine_setup.h"
#include "app/environment.h"

#include <gtest/gtest.h>

#include <cstdlib>

using namespace lingbot;

namespace {

// Parses `args` after `lingbot-map`, as main() does.
struct Cli {
  CLI::App app{"lingbot-map", "lingbot-map"};
  RunArgs run;
  BenchArgs bench;
  Cli() {
    add_run_command(app, run);
    add_bench_command(app, bench);
  }
  void parse(std::vector<std::string> args) {
    std::reverse(args.begin(), args.end());  // CLI11 takes them last first
    app.parse(args);
  }
};

}  // namespace

TEST(CliOptions, DefaultsAreTheLibrarysDefaults) {
  for (const char* command : {"run", "bench"}) {
    SCOPED_TRACE(command);
    Cli cli;
    cli.parse({command, "--images", "frames"});
    const EngineArgs& engine = std::string(command) == "run" ? cli.run.engine : cli.bench.engine;
    EXPECT_EQ(engine.options, Options{});
    EXPECT_EQ(stream_options(engine.options, ModelConfig::official()), StreamOptions{});
    EXPECT_EQ(stream_options(engine.options, ModelConfig::official()).pipeline_depth, 2);
  }
}

TEST(CliOptions, EveryOptionHasItsFlagAndItsDefaultInTheHelp) {
  Cli cli;
  for (const char* command : {"run", "bench"}) {
    const CLI::App* cmd = cli.app.get_subcommand(command);
    for (const OptionInfo& info : option_table()) {
      SCOPED_TRACE(std::string(command) + " " + info.flag());
      if (info.group == OptionGroup::Preprocess && std::string(command) == "bench") {
        EXPECT_THROW(cmd->get_option(info.flag()), CLI::OptionNotFound);  // bench sizes frames with --width
        continue;
      }
      const CLI::Option* flag = cmd->get_option(info.flag());
      ASSERT_NE(flag, nullptr);
      EXPECT_NE(flag->get_description().find(info.kind == OptionInfo::Kind::Bool && info.default_bool
                                                 ? info.help_off
                                                 : info.help),
                std::string::npos);
      if (info.kind != OptionInfo::Kind::Bool) {
        EXPECT_NE(flag->get_description().find("(default: " + info.default_text() + ")"), std::string::npos)
            << flag->get_description();
      }
    }
  }
}

TEST(CliOptions, FlagsSetTheirOptions) {
  Cli cli;
  cli.parse({"run", "--images", "frames", "--pipeline-depth", "0", "--kv-window", "5", "--no-dense", "--cuda-sync",
             "--attention-kernel", "mma", "--kv-cache", "dense", "--image-size", "126", "--preprocess", "pad",
             "--device", "cpu", "--threads", "3", "--num-scale-frames", "2", "--camera-iterations", "1",
             "--keyframe-interval", "4", "--no-cuda-graphs", "--lane-priority", "main"});
  const Options& o = cli.run.engine.options;
  EXPECT_EQ(o.pipeline_depth, 0);
  EXPECT_EQ(o.kv_window, 5);
  EXPECT_FALSE(o.dense);
  EXPECT_TRUE(o.cuda_sync);
  EXPECT_EQ(o.attention_kernel, "mma");
  EXPECT_EQ(o.kv_cache, "dense");
  EXPECT_EQ(o.image_size, 126);
  EXPECT_EQ(o.preprocess, "pad");
  EXPECT_EQ(o.device, "cpu");
  EXPECT_EQ(o.threads, 3);
  EXPECT_EQ(o.num_scale_frames, 2);
  EXPECT_EQ(o.camera_iterations, 1);
  EXPECT_EQ(o.keyframe_interval, 4);
  EXPECT_FALSE(o.cuda_graphs);
  EXPECT_EQ(o.lane_priority, "main");
  // Out of range or not a choice: refused by the parser, naming the flag.
  for (std::vector<std::string> bad : {std::vector<std::string>{"run", "--images", "f", "--pipeline-depth", "3"},
                                       {"run", "--images", "f", "--kv-window", "0"},
                                       {"run", "--images", "f", "--kv-cache", "flat"}}) {
    Cli again;
    try {
      again.parse(bad);
      ADD_FAILURE() << bad[3] << " " << bad[4] << " was accepted";
    } catch (const CLI::ParseError& e) {
      EXPECT_NE(std::string(e.what()).find(bad[3]), std::string::npos) << e.what();
    }
  }
}

TEST(CliOptions, EnvironmentSetsOptionsTheCommandLineLeftAlone) {
  ::setenv("LINGBOT_CUDA_LANE_PRIORITY", "main", 1);
  ::setenv("LINGBOT_CUDA_GRAPHS", "0", 1);
  ::setenv("LINGBOT_CUDA_SYNC", "1", 1);
  ::setenv("LINGBOT_ATTENTION_KERNEL", "wgmma-ws", 1);
  ::setenv("LINGBOT_PROFILE", "1", 1);
  Options o;
  EnvironmentSettings s = read_environment(o, [](std::string_view) { return false; });
  EXPECT_EQ(o.lane_priority, "main");
  EXPECT_FALSE(o.cuda_graphs);
  EXPECT_TRUE(o.cuda_sync);
  EXPECT_EQ(o.attention_kernel, "wgmma-ws");
  EXPECT_TRUE(s.profile);

  Options flagged;  // as if --lane-priority equal was given
  read_environment(flagged, [](std::string_view option) { return option == "lane_priority"; });
  EXPECT_EQ(flagged.lane_priority, "equal");
  EXPECT_EQ(flagged.attention_kernel, "wgmma-ws");

  ::setenv("LINGBOT_CUDA_LANE_PRIORITY", "high", 1);
  try {
    Options bad;
    read_environment(bad, [](std::string_view) { return false; });
    ADD_FAILURE() << "LINGBOT_CUDA_LANE_PRIORITY=high was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("LINGBOT_CUDA_LANE_PRIORITY must be one of equal, main, got 'high'"),
              std::string::npos)
        << e.what();
  }
  for (const EnvironmentVariable& v : environment_variables()) ::unsetenv(std::string(v.name).c_str());
  Options clean;
  EXPECT_FALSE(read_environment(clean, [](std::string_view) { return false; }).profile);
  EXPECT_EQ(clean, Options{});
}

TEST(CliOptions, EveryEnvironmentVariableNamesARealOption) {
  for (const EnvironmentVariable& v : environment_variables()) {
    if (v.option.empty()) continue;
    EXPECT_NO_THROW(option_info(v.option)) << v.name;
  }
  const std::string help = environment_help();
  for (const char* name : {"LINGBOT_CUDA_GRAPHS", "LINGBOT_CUDA_SYNC", "LINGBOT_CUDA_LANE_PRIORITY",
                           "LINGBOT_ATTENTION_KERNEL", "LINGBOT_CONV_ALGORITHM", "LINGBOT_PROFILE"})
    EXPECT_NE(help.find(name), std::string::npos) << name;
}
