// The browser viewer behind one object, for `run --view` and `view`: frames
// go in (add_frame, from the model's thread: it only queues references),
// pages at url() fill in as they are packed. See docs/viewer.md.
#pragma once

#include "viewer/frame_packer.h"
#include "viewer/frame_packet.h"
#include "viewer/message_log.h"
#include "viewer/viewer_server.h"

#include <memory>

namespace lingbot::viewer {

struct ViewerOptions {
  ServerOptions server;
  int stride = 2;  // every stride-th pixel in x and y is sent
};

class LiveViewer {
 public:
  // Binds the port (an Error naming --port or --host if it cannot) and starts serving.
  LiveViewer(const ViewerOptions& options, SceneInfo scene);
  ~LiveViewer();

  // Never waits; a frame the packer has no room for is dropped (and counted).
  void add_frame(FrameInput frame) { packer_.submit(std::move(frame)); }
  // Waits for room (a saved result: nothing else is waiting).
  void add_frame_waiting(FrameInput frame) { packer_.submit_waiting(std::move(frame)); }
  // Every queued frame packed, then the End message.
  void finish(int frames) { packer_.finish(frames); }

  std::string url() const { return server_->url(); }
  int64_t dropped_frames() const { return packer_.dropped(); }
  int open_pages() const { return server_->open_streams(); }

 private:
  MessageLog log_;
  FramePacker packer_;
  std::unique_ptr<ViewerServer> server_;
};

}  // namespace lingbot::viewer
