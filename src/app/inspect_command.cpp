// `lingbot-map inspect MODEL [--config C]`: what a checkpoint holds, grouped
// by module, and whether it fits the model config.
#include "app/commands.h"
#include "app/exit_status.h"
#include "app/process_stats.h"
#include "checkpoint/checkpoint.h"
#include "model/checkpoint_check.h"

#include <fmt/format.h>

#include <chrono>
#include <cstdio>
#include <map>

namespace lingbot {

const char* const kCheckpointHelp =
    "the official checkpoints are published on Hugging Face at robbyant/lingbot-map "
    "(lingbot-map-long.pt, lingbot-map.pt); download one and pass it with --model PATH "
    "(or try `lingbot-map bench`, which needs no download)";

void add_inspect_command(CLI::App& app, InspectArgs& args) {
  CLI::App* cmd = app.add_subcommand("inspect", "Show what a checkpoint holds and whether it fits a model config");
  cmd->add_option("model", args.model, "Checkpoint (.pt from torch.save, or .safetensors)")->required();
  cmd->add_option("--config", args.config, "Model config JSON (default: the official architecture)");
  cmd->add_flag("--all", args.list_all, "List every tensor, not only the module summary");
}

namespace {

// "aggregator.frame_blocks.3.attn.qkv.weight" -> "aggregator.frame_blocks";
// "camera_head.token_norm.weight" -> "camera_head.token_norm".
std::string module_of(const std::string& name) {
  std::string group;
  size_t start = 0;
  for (int part = 0; part < 3; ++part) {
    const size_t dot = name.find('.', start);
    if (dot == std::string::npos) break;
    const std::string piece = name.substr(start, dot - start);
    if (!piece.empty() && std::isdigit(static_cast<unsigned char>(piece[0]))) break;
    group += (group.empty() ? "" : ".") + piece;
    start = dot + 1;
    if (part == 1) break;
  }
  return group.empty() ? name : group;
}

std::string with_commas(int64_t n) {
  std::string digits = std::to_string(n < 0 ? -n : n), out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return n < 0 ? "-" + out : out;
}

struct Group {
  int tensors = 0;
  int64_t elements = 0;
  size_t bytes = 0;
  std::map<std::string, int> dtypes;
};

}  // namespace

int run_inspect(const InspectArgs& args) {
  const ModelConfig config = args.config.empty() ? ModelConfig::official() : ModelConfig::from_file(args.config);
  const auto t0 = std::chrono::steady_clock::now();
  const io::StateDict state = io::load_state_dict(args.model);
  const double load_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  std::map<std::string, Group> groups;
  for (const auto& [name, t] : state) {
    Group& g = groups[module_of(name)];
    ++g.tensors;
    g.elements += t.numel();
    g.bytes += t.nbytes();
    ++g.dtypes[std::string(dtype_name(t.dtype()))];
  }
  std::printf("%s: %s checkpoint%s, %zu tensors, %s parameters, %.2f GB\n", args.model.c_str(),
              state.format().c_str(),
              state.found_under().empty() ? "" : fmt::format(" (state dict under '{}')", state.found_under()).c_str(),
              state.size(), with_commas(state.total_elements()).c_str(), state.total_bytes() / 1e9);
  std::printf("\n%-44s %8s %16s %10s  %s\n", "module", "tensors", "parameters", "MB", "dtypes");
  for (const auto& [name, g] : groups) {
    std::string dtypes;
    for (const auto& [d, n] : g.dtypes) dtypes += fmt::format("{}{} x{}", dtypes.empty() ? "" : ", ", d, n);
    std::printf("%-44s %8d %16s %10.1f  %s\n", name.c_str(), g.tensors, with_commas(g.elements).c_str(),
                g.bytes / 1e6, dtypes.c_str());
  }
  if (args.list_all) {
    std::printf("\n");
    for (const auto& [name, t] : state)
      std::printf("%-72s %-9s %s\n", name.c_str(), std::string(dtype_name(t.dtype())).c_str(),
                  shape_str(t.shape()).c_str());
  }
  for (const io::SkippedEntry& s : state.skipped())
    std::printf("skipped non-tensor entry '%s' (%s)\n", s.key.c_str(), s.reason.c_str());

  const CheckpointCheck check = check_checkpoint(state, config);
  std::printf("\nconfig: %s\n", args.config.empty() ? "official architecture (no --config)" : args.config.c_str());
  std::printf("model parameters: %s in %lld tensors\n", with_commas(check.parameter_count).c_str(),
              static_cast<long long>(check.expected_count));
  std::printf("%s\n", check.summary(args.model, 20).c_str());
  std::printf("loaded in %.3f s, peak RSS %.1f MB\n", load_s, peak_rss_bytes() / 1e6);
  return check.fits() ? exit_status::kSuccess : exit_status::kDoesNotFit;
}

}  // namespace lingbot
