// The viewer as the CLI uses it: its flags, and the glue between the run's
// results and src/viewer (shared by `run --view` and `view`).
#pragma once

#include "app/commands.h"
#include "model/streaming_model.h"
#include "output/sky_masks.h"
#include "video/frame_source.h"
#include "viewer/live_viewer.h"

#include <memory>
#include <string>

namespace lingbot {

// --host, --port, --view-downsample (and --view with `with_view_flag`).
void add_viewer_options(CLI::App& cmd, ViewerArgs& args, bool with_view_flag);

// Starts serving (binds now: a port in use fails before any model loads).
std::unique_ptr<viewer::LiveViewer> open_live_viewer(const ViewerArgs& args, const viewer::SceneInfo& scene);

// A finished frame as the viewer takes it: views of its tensors, no copies.
viewer::FrameInput viewer_frame(const FrameResult& result, const video::Frame& frame);

// --sky-masks for the viewer, as for the exports: the frame's confidence,
// copied (the run's outputs keep the model's), set to 0 where its mask
// (named after `frame_name`) says sky, so the page drops those points.
void mask_sky(viewer::FrameInput& frame, const io::SkyMasks& masks, const std::string& frame_name);

// The End message, then serving on until SIGINT or SIGTERM (said on stderr).
void keep_serving(viewer::LiveViewer& viewer, int frames);

}  // namespace lingbot
