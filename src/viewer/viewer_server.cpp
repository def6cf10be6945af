#include "viewer/viewer_server.h"

#include "core/error.h"
#include "core/log.h"
#include "viewer/scene_glb.h"
#include "viewer/web_assets.h"

#if LINGBOT_WITH_HTTPLIB
#include <httplib.h>
#include <sys/socket.h>
#else
namespace httplib {
class Server {};  // built without cpp-httplib: the constructor below refuses
}  // namespace httplib
#endif

#include <chrono>
#include <cstring>

namespace lingbot::viewer {

#if LINGBOT_WITH_HTTPLIB

namespace {

constexpr auto kPollInterval = std::chrono::milliseconds(500);
constexpr auto kHeartbeatInterval = std::chrono::seconds(2);
// Open pages each hold a thread for their stream; the page's files and the
// GLB need a few more.
constexpr size_t kServerThreads = 24;

int int_param(const httplib::Request& req, const char* name, int fallback) {
  if (!req.has_param(name)) return fallback;
  try {
    return std::stoi(req.get_param_value(name));
  } catch (const std::exception&) {
    return fallback;
  }
}

// One page's stream: its place in the log, written out as length-prefixed messages.
struct StreamCursor {
  size_t next = 0;
  std::chrono::steady_clock::time_point last_write = std::chrono::steady_clock::now();
};

bool write_message(httplib::DataSink& sink, const std::string& message) {
  const uint32_t n = static_cast<uint32_t>(message.size());
  char prefix[4];
  std::memcpy(prefix, &n, 4);
  return sink.write(prefix, 4) && sink.write(message.data(), message.size());
}

}  // namespace

ViewerServer::ViewerServer(MessageLog& log, const SceneInfo& scene, const ServerOptions& options)
    : log_(log), scene_(scene), host_(options.host), server_(std::make_unique<httplib::Server>()) {
  server_->new_task_queue = [] { return new httplib::ThreadPool(kServerThreads); };
  server_->set_write_timeout(std::chrono::seconds(10));
  // httplib's default also sets SO_REUSEPORT, with which a second viewer on
  // the same port would bind and share the connections instead of failing.
  server_->set_socket_options([](int sock) {
    const int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
  });
  add_routes();
  if (options.port == 0) {
    port_ = server_->bind_to_any_port(host_);
    LB_CHECK(port_ > 0, "--host {}: cannot listen there", host_);
  } else {
    LB_CHECK(server_->bind_to_port(host_, options.port), "--port {}: cannot listen on {}:{} (in use, or not "
             "an address of this machine)", options.port, host_, options.port);
    port_ = options.port;
  }
  thread_ = std::thread([this] { server_->listen_after_bind(); });
  // httplib's stop() does nothing to a server whose loop has not started
  // yet, so a server stopped at once would never end: wait for the loop.
  for (int i = 0; i < 5000 && !server_->is_running(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
}

ViewerServer::~ViewerServer() {
  log_.close();  // streams end at their next read
  server_->stop();
  thread_.join();
}

std::string ViewerServer::url() const {
  const bool ipv6 = host_.find(':') != std::string::npos;
  return "http://" + (ipv6 ? "[" + host_ + "]" : host_) + ":" + std::to_string(port_) + "/";
}

void ViewerServer::add_routes() {
  server_->Get("/stream", [this](const httplib::Request&, httplib::Response& res) {
    auto cursor = std::make_shared<StreamCursor>();
    ++open_streams_;
    ++streams_served_;
    res.set_header("Cache-Control", "no-store");
    res.set_chunked_content_provider(
        "application/octet-stream",
        [this, cursor](size_t, httplib::DataSink& sink) {
          const std::vector<Message> batch = log_.read_from(cursor->next, kPollInterval);
          if (log_.closed()) {
            sink.done();
            return true;
          }
          for (const Message& m : batch)
            if (!write_message(sink, *m)) return false;  // the page went away
          cursor->next += batch.size();
          const auto now = std::chrono::steady_clock::now();
          if (!batch.empty()) {
            cursor->last_write = now;
          } else if (now - cursor->last_write > kHeartbeatInterval) {
            if (!write_message(sink, encode_heartbeat())) return false;
            cursor->last_write = now;
          }
          return true;
        },
        [this](bool) { --open_streams_; });
  });
  server_->Get("/scene.glb", [this](const httplib::Request& req, httplib::Response& res) {
    GlbFilter filter;
    filter.min_confidence_level = int_param(req, "conf", 0);
    filter.min_grid_level = int_param(req, "downsample", 0);
    filter.first_frame = int_param(req, "first", 0);
    filter.last_frame = int_param(req, "last", -1);
    try {
      res.set_content(scene_glb(log_.snapshot(), scene_, filter), "model/gltf-binary");
      res.set_header("Content-Disposition", "attachment; filename=\"scene.glb\"");
    } catch (const std::exception& e) {
      log_warn("viewer: scene.glb: {}", e.what());
      res.status = 500;
      res.set_content(e.what(), "text/plain");
    }
  });
  // The page's own files and nothing else: the path is looked up among the
  // embedded assets, never joined to a folder.
  server_->Get(R"(/.*)", [](const httplib::Request& req, httplib::Response& res) {
    const WebAsset* asset = find_web_asset(req.path);
    if (!asset) {
      res.status = 404;
      res.set_content("not found\n", "text/plain");
      return;
    }
    res.set_content(asset->bytes.data(), asset->bytes.size(), std::string(asset->content_type).c_str());
  });
}

#else  // built without cpp-httplib

ViewerServer::ViewerServer(MessageLog& log, const SceneInfo& scene, const ServerOptions& options)
    : log_(log), scene_(scene), host_(options.host) {
  fail("--view: this lingbot-map was built without the viewer's server (apt install libcpp-httplib-dev, "
       "then configure again)");
}
ViewerServer::~ViewerServer() = default;
std::string ViewerServer::url() const { return {}; }

#endif

}  // namespace lingbot::viewer
