// `lingbot-map view RESULT_DIR`: a saved result (run --out) in the browser
// viewer, served as `run --view` serves a live run (src/viewer).
#include "app/commands.h"
#include "app/live_view.h"
#include "core/log.h"
#include "output/predictions.h"


namespace lingbot {

void add_view_command(CLI::App& app, ViewArgs& a) {
  CLI::App* cmd = app.add_subcommand("view", "Show a saved result (run --out) in a browser: points, cameras, path");
  cmd->add_option("result_dir", a.result_dir, "A `run --out` folder holding predictions.npz")->required();
  cmd->add_option("--conf-threshold", a.conf_threshold, "The page's starting confidence threshold");
  cmd->add_option("--sky-masks", a.sky_masks,
                  "Precomputed sky masks (upstream's --sky_mask_dir naming): sky gets confidence 0, so the page "
                  "leaves those points out");
  add_viewer_options(*cmd, a.viewer, false);
}

int run_view(const ViewArgs& a) {
  const io::Predictions p = load_predictions_masked(a.result_dir, a.sky_masks);
  viewer::SceneInfo scene;
  scene.width = p.width;
  scene.height = p.height;
  scene.expected_frames = p.frames;
  scene.initial_conf_threshold = a.conf_threshold;
  auto live = open_live_viewer(a.viewer, scene);
  for (int f = 0; f < p.frames; ++f) {
    viewer::FrameInput in;
    in.index = f;
    in.timestamp = f;
    in.camera_to_world = p.camera_to_world(f);
    in.intrinsic = p.intrinsic_matrix(f);
    in.world_points = p.world_points[f];
    in.depth_conf = p.depth_conf[f];
    in.image = p.images[f];
    live->add_frame_waiting(std::move(in));
  }
  log_info("viewer: {} frames of {}x{} from {}", p.frames, p.width, p.height, p.path);
  keep_serving(*live, p.frames);
  return 0;
}

}  // namespace lingbot
