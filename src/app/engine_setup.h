// Turning command-line options into a backend, a model config and stream
// options (shared by `run` and `bench`).
#pragma once

#include "app/commands.h"
#include "backend/backend.h"
#include "model/streaming_model.h"

#include <memory>

namespace lingbot {

std::unique_ptr<Backend> make_backend(const EngineArgs& args);
ModelConfig load_config(const EngineArgs& args);
StreamOptions stream_options(const EngineArgs& args, const ModelConfig& config);
void add_engine_options(CLI::App& cmd, EngineArgs& args);

}  // namespace lingbot
