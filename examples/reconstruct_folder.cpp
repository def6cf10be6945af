// Streams the images of a folder through LingBot-Map and prints one line per
// frame: its index and where its camera is. Uses only <lingbot/lingbot.h>.
//
//   reconstruct_folder CHECKPOINT FOLDER [config=FILE] [OPTION=VALUE ...]
//   e.g. reconstruct_folder lingbot-map-long.pt frames/ device=cuda kv_window=32
//
// OPTION is any field of lingbot::Options (include/lingbot/options.h).
#include <lingbot/lingbot.h>

#include <array>
#include <cstdio>
#include <string>
#include <vector>

namespace {

void print(const std::vector<lingbot::FrameOutput>& outputs) {
  for (const lingbot::FrameOutput& frame : outputs) {
    const std::array<double, 3> c = frame.camera_centre();
    std::printf("frame %lld%s camera centre %.6f %.6f %.6f\n", static_cast<long long>(frame.index),
                frame.keyframe ? "" : " (not a keyframe)", c[0], c[1], c[2]);
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s CHECKPOINT FOLDER [config=FILE] [OPTION=VALUE ...]  (lingbot %s)\n", argv[0],
                 lingbot::version());
    return 2;
  }
  try {
    std::string config;
    lingbot::Options options;
    for (int i = 3; i < argc; ++i) {
      const std::string arg = argv[i];
      const size_t eq = arg.find('=');
      if (eq == std::string::npos) throw lingbot::Error(arg + ": expected OPTION=VALUE");
      if (arg.substr(0, eq) == "config") {
        config = arg.substr(eq + 1);
      } else {
        lingbot::set_option(options, arg.substr(0, eq), arg.substr(eq + 1));
      }
    }
    const std::vector<std::string> images = lingbot::list_images(argv[2]);
    const lingbot::Model model(argv[1], config, options);
    std::printf("%zu images, model on %s\n", images.size(), model.device_name().c_str());
    lingbot::Stream stream = model.open_stream();
    for (const std::string& path : images) print(stream.push_file(path));
    print(stream.finish());  // the frames still in flight
  } catch (const lingbot::Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}
