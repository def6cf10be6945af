#include "app/live_view.h"

#include "app/flag_checks.h"
#include "core/log.h"

#include <csignal>
#include <chrono>
#include <thread>

namespace lingbot {

void add_viewer_options(CLI::App& cmd, ViewerArgs& a, bool with_view_flag) {
  if (with_view_flag)
    cmd.add_flag("--view", a.enabled,
                 "Serve a live 3D viewer on --host:--port while the run goes on (and after it, until Ctrl-C)");
  cmd.add_option("--port", a.port, "Viewer: the port to serve on (0: any free one)")->check(between(0, 65535));
  cmd.add_option("--host", a.host,
                 "Viewer: the address to serve on (default 127.0.0.1, this machine only; others expose the "
                 "result to the network)");
  cmd.add_option("--view-downsample", a.downsample, "Viewer: send every N-th pixel in x and y as a point")
      ->check(at_least(1));
}

std::unique_ptr<viewer::LiveViewer> open_live_viewer(const ViewerArgs& a, const viewer::SceneInfo& scene) {
  if (a.host != "127.0.0.1" && a.host != "localhost" && a.host != "::1")
    log_warn("--host {}: the viewer (and the reconstruction) can be reached from other machines, with no "
             "password",
             a.host);
  viewer::ViewerOptions options;
  options.server.host = a.host;
  options.server.port = a.port;
  options.stride = a.downsample;
  auto live = std::make_unique<viewer::LiveViewer>(options, scene);
  log_info("viewer: open {} in a browser", live->url());
  return live;
}

viewer::FrameInput viewer_frame(const FrameResult& r, const video::Frame& frame) {
  viewer::FrameInput in;
  in.index = r.index;
  in.timestamp = frame.timestamp;
  in.camera_to_world = r.camera.camera_to_world;
  in.intrinsic = r.camera.intrinsic;
  // The model allocates these afresh for every frame (streaming_model.cpp),
  // so holding them is safe while the run writes its own outputs.
  in.world_points = r.world_points;
  in.depth_conf = r.depth_conf;
  in.image = frame.image;
  return in;
}

void mask_sky(viewer::FrameInput& frame, const io::SkyMasks& masks, const std::string& frame_name) {
  if (!frame.depth_conf.defined()) return;
  frame.depth_conf = frame.depth_conf.clone();
  const int height = static_cast<int>(frame.depth_conf.dim(0)), width = static_cast<int>(frame.depth_conf.dim(1));
  masks.zero_sky_confidence(frame_name, frame.depth_conf.f32(), width, height);
}

namespace {

volatile std::sig_atomic_t g_stop_serving = 0;
extern "C" void stop_serving(int) { g_stop_serving = 1; }

}  // namespace

void keep_serving(viewer::LiveViewer& live, int frames) {
  live.finish(frames);
  if (live.dropped_frames() > 0)
    log_warn("viewer: {} of {} frames were not sent (packing fell behind the model)", live.dropped_frames(), frames);
  log_info("viewer: done; still serving {} until Ctrl-C", live.url());
  struct sigaction action {}, old_int {}, old_term {};
  action.sa_handler = stop_serving;
  sigemptyset(&action.sa_mask);
  sigaction(SIGINT, &action, &old_int);
  sigaction(SIGTERM, &action, &old_term);
  while (!g_stop_serving) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  sigaction(SIGINT, &old_int, nullptr);
  sigaction(SIGTERM, &old_term, nullptr);
  log_info("viewer: stopped");
}

}  // namespace lingbot
