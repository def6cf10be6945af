// The engine's options on the command line (shared by `run` and `bench`):
// one flag per option of include/lingbot/options.h, registered from that
// table, so names, defaults and help are the library's.
#pragma once

#include "api/option_table.h"
#include "app/commands.h"
#include "model/model_config.h"
#include "model/streaming_model.h"

#include <set>

namespace lingbot {

// The option groups a subcommand has as flags (Device, Stream and Cuda are
// every command's that runs the model; Preprocess is `run`'s).
void add_engine_options(CLI::App& cmd, EngineArgs& args, const std::set<OptionGroup>& groups);
ModelConfig load_config(const EngineArgs& args);

}  // namespace lingbot
