// The viewer's HTTP server (cpp-httplib, Debian's libcpp-httplib-dev):
//   GET /, /viewer.js, /vendor/...   the page (web_assets.h; nothing else is served)
//   GET /stream                      every message so far, then each new one as it
//                                    comes: one chunked binary response per page
//   GET /scene.glb?conf=K&downsample=D&first=A&last=B   the shown cloud as glTF
//
// Why a chunked HTTP response rather than a WebSocket: Debian 12's httplib
// (0.11) has no WebSocket support, and the stream only ever flows from the
// server to the page (the sliders act in the page), which a fetch() body read
// through a ReadableStream carries with no second library (websocketpp +
// asio) to keep. A page that closes is noticed at the next write (a heartbeat
// goes out every 2 s while idle); one that reconnects gets the stream from
// the start (MessageLog).
#pragma once

#include "viewer/frame_packet.h"
#include "viewer/message_log.h"

#include <atomic>
#include <memory>
#include <string>
#include <thread>

namespace httplib {
class Server;
}

namespace lingbot::viewer {

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8080;  // 0: any free port
};

class ViewerServer {
 public:
  // Binds now (so a port in use fails before the model loads: a one-line
  // Error naming --port) and serves on a thread of its own.
  ViewerServer(MessageLog& log, const SceneInfo& scene, const ServerOptions& options);
  ~ViewerServer();
  ViewerServer(const ViewerServer&) = delete;
  ViewerServer& operator=(const ViewerServer&) = delete;

  std::string url() const;  // "http://127.0.0.1:8080/"
  int port() const { return port_; }
  int open_streams() const { return open_streams_; }
  int64_t streams_served() const { return streams_served_; }

 private:
  void add_routes();

  MessageLog& log_;
  const SceneInfo scene_;
  std::string host_;
  int port_ = 0;
  std::unique_ptr<httplib::Server> server_;
  std::thread thread_;
  std::atomic<int> open_streams_{0};
  std::atomic<int64_t> streams_served_{0};
};

}  // namespace lingbot::viewer
