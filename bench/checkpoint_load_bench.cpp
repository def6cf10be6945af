// Load time and memory of io::load_state_dict on a real-size checkpoint.
//
//   LINGBOT_BENCH_CHECKPOINT=/path/model.pt build/bin/checkpoint_load_bench
//
// (A stand-in the size of the official file, 1342 float32 tensors in 4.6 GB:
//  /usr/bin/python3 tools/reference/make_hostile_checkpoints.py --big /tmp/big.pt --gib 4.3)
// Counters: tensors, GB in the file, and the process's
// resident memory (VmRSS), the part of it not backed by a file (RssAnon) and
// the peak (VmHWM), in MB after the run. Loading maps
// the file and points tensors into the mapping, so "Load" should need a few
// MB whatever the file size; "LoadAndRead" touches every weight once, which
// brings the file into the page cache (counted in RSS as shared, reclaimable
// pages) but still never makes a second copy.
#include "checkpoint/checkpoint.h"

#include <benchmark/benchmark.h>

#include <cstdlib>
#include <fstream>
#include <string>

namespace {

// A field of /proc/self/status in MB, e.g. "VmRSS" or "VmHWM".
double proc_status_mb(const std::string& field) {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind(field + ":", 0) == 0) return std::stod(line.substr(field.size() + 1)) / 1024.0;
  return 0;
}

const char* checkpoint_path() { return std::getenv("LINGBOT_BENCH_CHECKPOINT"); }

void report(benchmark::State& state, const lingbot::io::StateDict& sd) {
  state.counters["tensors"] = static_cast<double>(sd.size());
  state.counters["GB"] = static_cast<double>(sd.total_bytes()) / 1e9;
  state.counters["rss_MB"] = proc_status_mb("VmRSS");
  state.counters["anon_rss_MB"] = proc_status_mb("RssAnon");  // memory that is not the mapped file
  state.counters["peak_rss_MB"] = proc_status_mb("VmHWM");
}

void BM_Load(benchmark::State& state) {
  if (checkpoint_path() == nullptr) {
    state.SkipWithError("set LINGBOT_BENCH_CHECKPOINT to a checkpoint file");
    return;
  }
  lingbot::io::StateDict sd;
  for (auto _ : state) {
    sd = lingbot::io::load_state_dict(checkpoint_path());
    benchmark::DoNotOptimize(sd.size());
  }
  report(state, sd);
}
BENCHMARK(BM_Load)->Unit(benchmark::kMillisecond);

void BM_LoadAndRead(benchmark::State& state) {
  if (checkpoint_path() == nullptr) {
    state.SkipWithError("set LINGBOT_BENCH_CHECKPOINT to a checkpoint file");
    return;
  }
  lingbot::io::StateDict sd;
  for (auto _ : state) {
    sd = lingbot::io::load_state_dict(checkpoint_path());
    uint64_t sum = 0;
    for (const auto& [name, t] : sd) {
      const auto* p = static_cast<const uint8_t*>(t.data());
      for (size_t i = 0; i < t.nbytes(); i += 64) sum += p[i];  // one read per cache line
    }
    benchmark::DoNotOptimize(sum);
  }
  report(state, sd);
}
BENCHMARK(BM_LoadAndRead)->Unit(benchmark::kMillisecond)->Iterations(1);

}  // namespace

BENCHMARK_MAIN();
