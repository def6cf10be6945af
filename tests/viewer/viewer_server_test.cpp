// The viewer's server in-process, read with httplib's client: only the
// embedded page is served (compared with the files in src/viewer/web), the
// stream carries the log's messages in order, and a page that drops its
// stream mid-way and comes back gets everything from the start.
#include "viewer/frame_packer.h"
#include "viewer/viewer_server.h"

#include <gtest/gtest.h>
#include <httplib.h>

#include <chrono>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>

using namespace lingbot;
using namespace lingbot::viewer;

namespace {

std::string read_source(const std::string& name) {
  std::ifstream in(std::string(LINGBOT_VIEWER_WEB_DIR) + "/" + name, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// Splits a stream body into its messages (uint32 length, then the bytes).
std::vector<std::string> split_messages(const std::string& body) {
  std::vector<std::string> out;
  size_t at = 0;
  while (at + 4 <= body.size()) {
    uint32_t n;
    std::memcpy(&n, body.data() + at, 4);
    if (at + 4 + n > body.size()) break;
    out.push_back(body.substr(at + 4, n));
    at += 4 + n;
  }
  return out;
}

// Reads /stream until `messages` messages (heartbeats aside) have arrived, then hangs up.
std::vector<std::string> read_stream(int port, size_t messages) {
  httplib::Client client("127.0.0.1", port);
  std::string body;
  std::vector<std::string> got;
  client.Get("/stream", [&](const char* data, size_t n) {
    body.append(data, n);
    got.clear();
    for (std::string& m : split_messages(body))
      if (message_type(m) != MessageType::Heartbeat) got.push_back(std::move(m));
    return got.size() < messages;
  });
  return got;
}

SceneInfo small_scene() {
  SceneInfo s;
  s.width = 4;
  s.height = 4;
  s.expected_frames = 3;
  s.session = 42;
  return s;
}

FrameInput small_frame(int index) {
  FrameInput f;
  f.index = index;
  f.image = Tensor::zeros({3, 4, 4});
  f.world_points = Tensor::from_vector(std::vector<float>(48, float(index)), {4, 4, 3});
  f.depth_conf = Tensor::from_vector(std::vector<float>(16, 3.0f), {4, 4});
  return f;
}

}  // namespace

TEST(ViewerServer, ServesOnlyTheEmbeddedPage) {
  MessageLog log;
  log.append(encode_scene(small_scene()));
  ViewerServer server(log, small_scene(), {"127.0.0.1", 0});
  httplib::Client client("127.0.0.1", server.port());
  for (const char* name : {"index.html", "viewer.js", "vendor/three.module.min.js", "vendor/LICENSE"}) {
    auto r = client.Get((std::string("/") + name).c_str());
    ASSERT_TRUE(r) << name;
    EXPECT_EQ(r->status, 200) << name;
    EXPECT_TRUE(r->body == read_source(name)) << name << ": differs from src/viewer/web";
  }
  auto root = client.Get("/");
  ASSERT_TRUE(root);
  EXPECT_EQ(root->body, read_source("index.html"));
  // Paths that would reach files beside or above the page, were it served from a folder.
  for (const char* path : {"/../CMakeLists.txt", "/vendor/../../viewer_server.cpp", "/%2e%2e/%2e%2e/CMakeLists.txt",
                           "/etc/passwd", "//etc/passwd", "/index.html/", "/web/index.html"}) {
    auto r = client.Get(path);
    ASSERT_TRUE(r) << path;
    EXPECT_EQ(r->status, 404) << path;
  }
}

TEST(ViewerServer, StreamIsTheLogAndAReconnectGetsItAllAgain) {
  MessageLog log;
  log.append(encode_scene(small_scene()));
  ViewerServer server(log, small_scene(), {"127.0.0.1", 0});
  {
    FramePacker packer(log, 1);
    packer.submit_waiting(small_frame(0));
    packer.submit_waiting(small_frame(1));
    packer.finish(2);  // not the end of the run: one more frame follows below
  }
  // A page that hangs up after two messages, while the stream is still open.
  const std::vector<std::string> first = read_stream(server.port(), 2);
  ASSERT_EQ(first.size(), 2u);
  EXPECT_EQ(message_type(first[0]), MessageType::Scene);
  // More arrives; a new page (the reconnect) gets everything from the scene on.
  FramePacker packer(log, 1);
  packer.submit_waiting(small_frame(2));
  packer.finish(3);
  const std::vector<Message> all = log.snapshot();
  const std::vector<std::string> second = read_stream(server.port(), all.size());
  ASSERT_EQ(second.size(), all.size());
  for (size_t i = 0; i < all.size(); ++i) EXPECT_TRUE(second[i] == *all[i]) << "message " << i;
  EXPECT_EQ(decode_frame(second[4]).index, 2);
  EXPECT_EQ(decode_frame(second[4]).points[0].xyz[0], 2.0f);
  EXPECT_EQ(server.streams_served(), 2);
}

TEST(ViewerServer, PortInUseIsOneLineNamingTheFlag) {
  MessageLog log;
  ViewerServer first(log, small_scene(), {"127.0.0.1", 0});
  try {
    ViewerServer second(log, small_scene(), {"127.0.0.1", first.port()});
    FAIL() << "a second server bound the same port";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--port " + std::to_string(first.port())), std::string::npos) << e.what();
  }
}

TEST(ViewerPacker, DropsRatherThanWaitsWhenFull) {
  MessageLog log;
  FramePacker packer(log, 1, /*queue_capacity=*/1);
  int accepted = 0;
  for (int i = 0; i < 200; ++i) accepted += packer.submit(small_frame(i));
  packer.finish(200);
  EXPECT_EQ(accepted + packer.dropped(), 200);
  EXPECT_EQ(static_cast<int64_t>(log.size()), accepted + 1);  // every accepted frame, then End
}
