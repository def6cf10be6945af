#include "viewer/live_viewer.h"

#include <chrono>

namespace lingbot::viewer {

LiveViewer::LiveViewer(const ViewerOptions& options, SceneInfo scene) : packer_(log_, options.stride) {
  scene.stride = options.stride;
  if (scene.session == 0)  // a page that reconnects to a new run starts afresh
    scene.session = static_cast<uint32_t>(std::chrono::system_clock::now().time_since_epoch().count() | 1);
  log_.append(encode_scene(scene));
  server_ = std::make_unique<ViewerServer>(log_, scene, options.server);
}

LiveViewer::~LiveViewer() {
  server_.reset();  // pages' streams end before the packer and the log go
}

}  // namespace lingbot::viewer
