// `lingbot-map bench`: frames per second of the streaming model, with random
// weights of the official architecture (or --config), so it needs no
// download. Reports the scale phase, the intervals of frames 10 and 72 and
// the steady-state median (second half of the streamed frames), FPS and peak
// memory: each only where the stream was long enough to measure it.
#include "app/commands.h"
#include "app/flag_checks.h"
#include "app/engine_setup.h"
#include "app/process_stats.h"
#include "backend/cuda_module.h"
#include "core/log.h"
#include "core/profiler.h"
#include "image/preprocess.h"
#include "model/random_weights.h"
#include "output/atomic_file.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <optional>
#include <random>
#include <string>
#include <vector>

namespace lingbot {

void add_bench_command(CLI::App& app, BenchArgs& a) {
  CLI::App* cmd = app.add_subcommand("bench", "Measure frames per second with random weights (no download needed)");
  cmd->add_option("--frames", a.frames, "Frames to stream, scale frames included")->check(at_least(1));
  cmd->add_option("--height", a.height, "Frame height (multiple of the patch size)")->check(at_least(1));
  cmd->add_option("--width", a.width, "Frame width (multiple of the patch size)")->check(at_least(1));
  cmd->add_option("--images", a.images, "Use these frames (preprocessed to --width) instead of random ones");
  cmd->add_option("--json", a.json, "Also write the figures, and each timed frame's time, to this JSON file");
  cmd->add_flag("--profile", a.profile, "Time each stage (serialises the device; slower overall)");
  cmd->add_option("--intervals", a.intervals,
                  "Also report every N streamed frames: their median frame time, device memory in use, RSS and "
                  "the KV cache (how a long stream grows)")
      ->check(at_least(1));
  add_engine_options(*cmd, a.engine, {OptionGroup::Device, OptionGroup::Stream, OptionGroup::Cuda});
}

int run_bench(const BenchArgs& a) {
  const ModelConfig config = load_config(a.engine);
  auto backend = make_backend(a.engine.options);
  StreamOptions options = stream_options(a.engine.options, config);
  LB_CHECK(!options.windowed,
           "bench times streaming mode; for --mode windowed, time `lingbot-map run --mode windowed` (it logs frames/s)");
  // Stage timing synchronises inside the step, which a graph capture forbids.
  if (a.profile) options.use_graphs = false;
  LB_CHECK(a.height % config.patch_size == 0 && a.width % config.patch_size == 0,
           "--height {} / --width {} must be multiples of the patch size {}", a.height, a.width, config.patch_size);
  // --json: opened before the run, so that a folder it cannot be written to
  // fails now and not after minutes of streaming; it appears when complete.
  std::optional<io::AtomicFile> json_file;
  if (!a.json.empty()) json_file.emplace(a.json);

  std::vector<Tensor> frames;
  if (!a.images.empty()) {
    io::PreprocessOptions prep;
    prep.image_size = a.width;
    prep.patch_size = config.patch_size;
    io::FrameSource source(io::list_images(a.images), prep);
    for (int i = 0; i < a.frames; ++i) frames.push_back(source.frame(i % source.size()));
  } else {
    std::mt19937 rng(7);
    std::uniform_real_distribution<float> u(0.0f, 1.0f);
    for (int i = 0; i < std::min(a.frames, 16); ++i) {
      Tensor f = Tensor::empty({3, a.height, a.width});
      for (int64_t k = 0; k < f.numel(); ++k) f.f32()[k] = u(rng);
      frames.push_back(f);
    }
  }
  const auto t_weights = std::chrono::steady_clock::now();
  // Made one tensor at a time: no whole float32 state dict exists beside
  // the model's own (converted or folded) weights.
  StreamingModel model(*backend, RandomWeights(config), config, options);
  // Host memory, measured: the peak while the weights were made and
  // uploaded, what stays after, and (from a new peak) the stream's.
  // The current RSS first: the peak read after it is at least that (the
  // other order let a page faulted in between put "after" above the peak).
  const size_t after_load_rss = current_rss_bytes();
  const size_t load_peak_rss = peak_rss_bytes();
  const bool stream_peak_measured = reset_peak_rss();
  log_info("bench: {} | {}x{} | {} frames | {} KV cache, window {}, scale {} | pipeline depth {} | "
           "weights ready in {:.1f} s",
           backend->name(), a.width, a.height, a.frames, kv::layout_name(options.cache_layout),
           options.cache.sliding_window, options.num_scale_frames, options.pipeline_depth,
           std::chrono::duration<double>(std::chrono::steady_clock::now() - t_weights).count());

  // Warm-up, as upstream's gct_profile does: one scale phase and a few
  // frames (library initialisation, kernel and algorithm choice, every
  // buffer allocated), then a new stream is measured.
  for (int i = 0; i < options.num_scale_frames + 3; ++i) model.push(frames[static_cast<size_t>(i) % frames.size()]);
  model.finish();
  model.reset();
  backend->synchronize();
  if (a.profile) Profiler::set_enabled(true);
  // A frame's time is the interval between the arrival of its results and
  // the previous frame's: the per-frame latency when each push waits for its
  // frame (--pipeline-depth 0), the throughput when read-back and host work
  // overlap the next frame (1). Phase 1 runs from the last scale frame's
  // push to the arrival of the scale frames' results.
  using Clock = std::chrono::steady_clock;
  std::vector<Clock::time_point> arrival(static_cast<size_t>(a.frames));
  Clock::time_point phase1_start;
  auto note = [&](const std::vector<FrameResult>& results) {
    const auto now = Clock::now();
    for (const FrameResult& r : results) arrival[static_cast<size_t>(r.index)] = now;
  };
  // The scale phase has min(num_scale_frames, frames) frames; a stream
  // shorter than num_scale_frames runs it in finish().
  const int scale = std::min(options.num_scale_frames, a.frames);
  // --intervals: memory and cache at the end of each block of streamed frames.
  struct Snapshot {
    int last_frame;
    double device_gb, rss_mb;
    std::string cache;
  };
  std::vector<Snapshot> snapshots;
  size_t scale_workspace_bytes = 0;
  for (int i = 0; i < a.frames; ++i) {
    const Tensor& f = frames[static_cast<size_t>(i) % frames.size()];
    if (i + 1 == scale && scale == options.num_scale_frames) phase1_start = Clock::now();
    note(model.push(f));
    if (i + 1 == scale) scale_workspace_bytes = model.workspace_bytes();  // the scale step's buffers
    if (a.intervals > 0 && i >= scale && (i - scale + 1) % a.intervals == 0)
      snapshots.push_back({i, backend->device_memory_in_use() / 1e9, current_rss_bytes() / 1e6,
                           kv::format_stats(model.cache_stats())});
  }
  if (scale < options.num_scale_frames) phase1_start = Clock::now();
  // With pipeline depth 1 or 2 the last frames' results arrive together when
  // the stream is drained: they are not timed one by one.
  int drained_from = a.frames;
  {
    const std::vector<FrameResult> rest = model.finish();
    for (const FrameResult& r : rest) drained_from = std::min(drained_from, static_cast<int>(r.index));
    note(rest);
  }
  auto ms_between = [](Clock::time_point a0, Clock::time_point a1) {
    return std::chrono::duration<double, std::milli>(a1 - a0).count();
  };
  const double phase1_ms = ms_between(phase1_start, arrival[static_cast<size_t>(scale - 1)]);
  std::vector<double> frame_ms;  // the streamed frames' intervals, frame `scale + k` at k
  const int last_timed = std::max(drained_from, scale) - 1;
  for (int i = scale; i <= last_timed; ++i)
    frame_ms.push_back(ms_between(arrival[static_cast<size_t>(i - 1)], arrival[static_cast<size_t>(i)]));
  auto at = [&](int frame_index) -> std::optional<double> {  // stream frame `frame_index`, if it was timed
    const int k = frame_index - scale;
    if (k < 0 || k >= static_cast<int>(frame_ms.size())) return std::nullopt;
    return frame_ms[static_cast<size_t>(k)];
  };
  // Steady state: the second half of the streamed frames.
  const size_t first_steady = frame_ms.size() / 2;
  std::vector<double> steady(frame_ms.begin() + static_cast<std::ptrdiff_t>(first_steady), frame_ms.end());
  std::sort(steady.begin(), steady.end());
  const std::optional<double> median =
      steady.empty() ? std::nullopt : std::optional<double>(steady[steady.size() / 2]);

  // Only what was measured is printed; a figure the stream was too short
  // for is named as missing, with the frames it would need.
  std::printf("phase 1 (%d scale frames together): %.1f ms\n", scale, phase1_ms);
  std::string frames_line;
  std::vector<std::string> missing;
  for (const int f : {10, 72}) {
    if (const auto ms = at(f)) {
      frames_line += fmt::format("{}frame {}: {:.1f} ms", frames_line.empty() ? "" : ", ", f, *ms);
    } else {
      // The frame must be timed, not drained: pipeline_depth more frames after it.
      missing.push_back(fmt::format("frame {} (needs --frames {})", f, f + 1 + options.pipeline_depth));
    }
  }
  if (!frames_line.empty()) std::printf("%s\n", frames_line.c_str());
  if (median) {
    std::printf("steady-state median: %.2f ms (%.2f FPS) over frames %d-%d\n", *median, 1000.0 / *median,
                scale + static_cast<int>(first_steady), last_timed);
  } else {
    missing.push_back(fmt::format("the steady state (needs a timed frame after the {} scale frames)", scale));
  }
  if (drained_from < a.frames && drained_from >= scale)
    missing.push_back(fmt::format("frames {}-{} one by one (their results arrived together at the end of the "
                                  "stream, pipeline depth {})",
                                  drained_from, a.frames - 1, options.pipeline_depth));
  for (const Snapshot& snap : snapshots) {
    const int first = snap.last_frame - a.intervals + 1;
    std::vector<double> block;
    for (int i = first; i <= snap.last_frame; ++i)
      if (const auto ms = at(i)) block.push_back(*ms);
    std::string timing = "not timed one by one (drained at the end)";
    if (!block.empty()) {
      std::sort(block.begin(), block.end());
      const double ms = block[block.size() / 2];
      timing = fmt::format("median {:.2f} ms ({:.2f} FPS)", ms, 1000.0 / ms);
    }
    std::printf("frames %d-%d: %s | device memory in use %.2f GB, RSS %.0f MB | %s\n", first, snap.last_frame,
                timing.c_str(), snap.device_gb, snap.rss_mb, snap.cache.c_str());
  }
  if (!missing.empty()) std::printf("not measured: %s\n", fmt::format("{}", fmt::join(missing, "; ")).c_str());
  const size_t stream_peak_rss = stream_peak_measured ? peak_rss_bytes() : 0;
  const size_t run_peak_rss = std::max(load_peak_rss, stream_peak_measured ? stream_peak_rss : peak_rss_bytes());
  std::printf("host memory: load peak %.0f MB, after load %.0f MB, streaming peak %s\n", load_peak_rss / 1e6,
              after_load_rss / 1e6,
              stream_peak_measured ? fmt::format("{:.0f} MB", stream_peak_rss / 1e6).c_str()
                                   : "not measured (no /proc/self/clear_refs)");
  std::printf("peak RSS %.0f MB, weights %.0f MB, workspace %.0f MB, device memory in use %.2f GB | %s\n",
              run_peak_rss / 1e6, model.weight_bytes() / 1e6, model.workspace_bytes() / 1e6,
              backend->device_memory_in_use() / 1e9, kv::format_stats(model.cache_stats()).c_str());
  // The CUDA backend's own account: what it allocated, by purpose, and the
  // rest of what the driver reports in use (backend/device_memory_account.h).
  std::optional<DeviceMemoryAccount> account;
  if (backend->device() == Device::CUDA) {
    account = cuda_module::memory_account();
    std::printf("%s", format_memory_account(*account).c_str());
    std::printf("  (of the tensors: weights %.0f MB, workspace %.0f MB; %.0f MB of workspace after the scale "
                "phase)\n",
                model.weight_bytes() / 1e6, model.workspace_bytes() / 1e6, scale_workspace_bytes / 1e6);
  }
  if (a.profile) std::printf("%s", Profiler::report().c_str());
  if (!a.json.empty()) {
    // Figures that were not measured are null.
    nlohmann::json j;
    j["backend"] = backend->name();
    j["width"] = a.width;
    j["height"] = a.height;
    j["frames"] = a.frames;
    j["pipeline_depth"] = options.pipeline_depth;
    j["scale_frames"] = scale;
    j["phase1_ms"] = phase1_ms;
    const auto or_null = [](const std::optional<double>& v) { return v ? nlohmann::json(*v) : nlohmann::json(); };
    j["frame10_ms"] = or_null(at(10));
    j["frame72_ms"] = or_null(at(72));
    j["steady_median_ms"] = or_null(median);
    j["first_timed_frame"] = scale;
    j["frame_ms"] = frame_ms;  // each timed streamed frame, frame first_timed_frame + k at k
    j["fps"] = median ? nlohmann::json(1000.0 / *median) : nlohmann::json();
    j["peak_rss_mb"] = run_peak_rss / 1e6;
    j["host_memory_mb"] = {{"load_peak", load_peak_rss / 1e6},
                           {"after_load", after_load_rss / 1e6},
                           {"streaming_peak", stream_peak_measured ? nlohmann::json(stream_peak_rss / 1e6)
                                                                   : nlohmann::json()},
                           {"weights", model.weight_bytes() / 1e6},
                           {"workspace", model.workspace_bytes() / 1e6}};
    if (account) {
      j["device_in_use_mb"] = account->device_in_use / 1e6;
      j["allocated_mb"] = account->live_bytes / 1e6;
      j["allocated_peak_mb"] = account->peak_bytes / 1e6;
      j["thread_stack_bytes"] = account->thread_stack_bytes;
      nlohmann::json uses = nlohmann::json::object();
      for (const MemoryUse& u : account->uses)
        uses[u.what] = {{"mb", u.live_bytes / 1e6}, {"peak_mb", u.peak_bytes / 1e6}};
      j["allocated_by_use"] = uses;
      j["weights_mb"] = model.weight_bytes() / 1e6;
      j["workspace_mb"] = model.workspace_bytes() / 1e6;
      j["scale_workspace_mb"] = scale_workspace_bytes / 1e6;
    }
    json_file->write(j.dump() + "\n");
    json_file->commit();
  }
  return 0;
}

}  // namespace lingbot
