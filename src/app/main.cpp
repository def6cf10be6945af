// lingbot-map: the command-line tool.
//
//   lingbot-map inspect MODEL [--config C]    what a checkpoint holds, and whether it fits
//   lingbot-map run --model M --images DIR    reconstruct a folder of frames
//   lingbot-map bench                         the official architecture, random weights
//   lingbot-map export DIR --format F[,F...]  a saved result as COLMAP, nerfstudio, glTF, depth PNGs
//   lingbot-map view DIR                      a saved result in the browser viewer
//
// Every failure a user can cause ends with one line on stderr naming the
// file or option and the problem, and exit status 1.
#include "api/option_table.h"
#include "app/commands.h"
#include "app/environment.h"
#include "app/exit_status.h"
#include "core/error.h"
#include "core/log.h"

#include <lingbot/lingbot.h>

#include <CLI/CLI.hpp>

#include <cstdio>

int main(int argc, char** argv) {
  using namespace lingbot;
  exec_with_passive_openmp_threads(argv);
  CLI::App app{"lingbot-map: streaming 3D reconstruction (LingBot-Map) in C++", "lingbot-map"};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("lingbot-map ") + lingbot::version());
  const std::string footer = environment_help() + "\n" + exit_status::help();
  app.footer(footer);
  bool verbose = false, quiet = false;
  app.add_flag("-v,--verbose", verbose, "More log output");
  app.add_flag("-q,--quiet", quiet, "Only errors");

  InspectArgs inspect;
  add_inspect_command(app, inspect);
  RunArgs run;
  add_run_command(app, run);
  run.command_line.assign(argv, argv + argc);
  BenchArgs bench;
  add_bench_command(app, bench);
  ExportArgs export_args;
  add_export_command(app, export_args);
  ViewArgs view;
  add_view_command(app, view);
  for (const char* name : {"run", "bench"}) app.get_subcommand(name)->footer(footer);
  app.get_subcommand("inspect")->footer(exit_status::help());
  app.get_subcommand("export")->footer(exit_status::help());
  app.get_subcommand("view")->footer(exit_status::help());

  if (argc == 1) {  // no subcommand: show what there is
    std::fputs(app.help().c_str(), stderr);
    return exit_status::kUserError;
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // CLI11 prints the message (or the help text); a bad flag is a user
    // error like any other: exit status 1, whatever CLI11's own code.
    return app.exit(e) == 0 ? exit_status::kSuccess : exit_status::kUserError;
  }
  set_log_level(quiet ? LogLevel::Error : verbose ? LogLevel::Debug : LogLevel::Info);
  try {
    // The environment, for the command that runs (its flags win).
    auto read_for = [&](const char* command, Options& options) {
      const CLI::App* cmd = app.get_subcommand(command);
      return read_environment(options, [&](std::string_view option) {
        return cmd->count(option_info(option).flag()) > 0;
      });
    };
    if (app.got_subcommand("inspect")) return run_inspect(inspect);
    if (app.got_subcommand("run")) {
      run.profile = read_for("run", run.engine.options).profile;
      return run_run(run);
    }
    if (app.got_subcommand("bench")) {
      bench.profile = read_for("bench", bench.engine.options).profile || bench.profile;
      return run_bench(bench);
    }
    if (app.got_subcommand("export")) return run_export(export_args);
    if (app.got_subcommand("view")) return run_view(view);
  } catch (const Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return exit_status::kUserError;
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "error: out of memory\n");
    return exit_status::kUserError;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return exit_status::kUserError;
  }
  return 0;
}
