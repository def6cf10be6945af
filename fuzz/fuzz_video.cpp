// libFuzzer target: the video reader (video/video_reader.cpp) on a file of
// the input's bytes: libavformat's probing and demuxing, our stream choice,
// the display-matrix rotation, decoding and the conversion to RGB, up to a
// few frames. FFmpeg itself is not instrumented; our code around it is.
#include "core/error.h"
#include "core/log.h"
#include "fuzz_common.h"
#include "fuzz_temp_file.h"
#include "video/video_reader.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace lingbot;
  static const bool quiet = [] {
    set_log_level(LogLevel::Error);  // damage after the first frame is a warning per input
    return true;
  }();
  (void)quiet;
  const std::string& path = fuzz::write_temp_file(data, size, ".video");
  try {
    video::VideoReader reader(path);
    video::DecodedFrame frame;
    for (int i = 0; i < 4 && reader.next(frame); ++i) {
      const video::VideoInfo& info = reader.info();
      if (frame.rgb.width != info.width || frame.rgb.height != info.height ||
          frame.rgb.rgb.size() != static_cast<size_t>(frame.rgb.width) * frame.rgb.height * 3) {
        std::fprintf(stderr, "frame %lld is %dx%d (%zu bytes), the video %dx%d\n",
                     static_cast<long long>(frame.index), frame.rgb.width, frame.rgb.height, frame.rgb.rgb.size(),
                     info.width, info.height);
        std::abort();
      }
      fuzz::keep(fuzz::touch(frame.rgb.rgb));
    }
  } catch (const Error& e) {
    fuzz::check_error(e, path.c_str());
  }
  return 0;
}
