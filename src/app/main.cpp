// lingbot-map: the command-line tool.
//
//   lingbot-map inspect MODEL [--config C]    what a checkpoint holds, and whether it fits
//   lingbot-map run --model M --images DIR    reconstruct a folder of frames
//   lingbot-map bench                         the official architecture, random weights
//   lingbot-map export DIR --format F[,F...]  a saved result as COLMAP, nerfstudio, glTF, depth PNGs
//
// Every failure a user can cause ends with one line on stderr naming the
// file or option and the problem, and exit status 1.
#include "app/commands.h"
#include "core/error.h"
#include "core/log.h"

#include <CLI/CLI.hpp>

#include <cstdio>

int main(int argc, char** argv) {
  using namespace lingbot;
  CLI::App app{"lingbot-map: streaming 3D reconstruction (LingBot-Map) in C++", "lingbot-map"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "lingbot-map 0.1.0");
  bool verbose = false, quiet = false;
  app.add_flag("-v,--verbose", verbose, "More log output");
  app.add_flag("-q,--quiet", quiet, "Only errors");

  InspectArgs inspect;
  add_inspect_command(app, inspect);
  RunArgs run;
  add_run_command(app, run);
  BenchArgs bench;
  add_bench_command(app, bench);
  ExportArgs export_args;
  add_export_command(app, export_args);

  if (argc == 1) {  // no subcommand: show what there is
    std::fputs(app.help().c_str(), stderr);
    return 1;
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // CLI11 prints the message (or the help text); a bad flag is a user
    // error like any other: exit status 1, whatever CLI11's own code.
    return app.exit(e) == 0 ? 0 : 1;
  }
  set_log_level(quiet ? LogLevel::Error : verbose ? LogLevel::Debug : LogLevel::Info);
  try {
    if (app.got_subcommand("inspect")) return run_inspect(inspect);
    if (app.got_subcommand("run")) return run_run(run);
    if (app.got_subcommand("bench")) return run_bench(bench);
    if (app.got_subcommand("export")) return run_export(export_args);
  } catch (const Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "error: out of memory\n");
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}
