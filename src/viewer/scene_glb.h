// The page's "download GLB": the frames the server has sent, filtered as the
// page shows them, written by the same writer as `export --format glb`
// (output/glb_writer.h). Positions are the wire's (quantised to 1/65535 of
// each frame's bounding box), which is what the page draws.
#pragma once

#include "viewer/frame_packet.h"
#include "viewer/message_log.h"

#include <string>
#include <vector>

namespace lingbot::viewer {

struct GlbFilter {
  int min_confidence_level = 0;  // points with level >= this (confidence > confidence_of_level(it))
  int min_grid_level = 0;        // downsample by 2^this
  int first_frame = 0;           // frames [first_frame, last_frame]
  int last_frame = -1;           // -1: to the last
};

// The .glb file's bytes.
std::string scene_glb(const std::vector<Message>& messages, const SceneInfo& scene, const GlbFilter& filter);

}  // namespace lingbot::viewer
