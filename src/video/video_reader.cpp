#include "video/video_reader.h"

#include "core/error.h"
#include "core/log.h"

#ifdef LINGBOT_WITH_FFMPEG
extern "C" {
#include <libavcodec/avcodec.h>
#include <libavdevice/avdevice.h>
#include <libavformat/avformat.h>
#include <libavutil/display.h>
#include <libavutil/pixdesc.h>
#include <libswscale/swscale.h>
}

#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

namespace lingbot::video {

bool ffmpeg_available() { return true; }

namespace {

std::string av_error_text(int code) {
  char text[AV_ERROR_MAX_STRING_SIZE] = {};
  av_strerror(code, text, sizeof(text));
  return text;
}

// While a reader reads on this thread, the first error FFmpeg reports goes
// here. Demuxers report some damage only this way: matroska's "File ended
// prematurely" comes with a plain end of file.
thread_local std::string* t_reported_error = nullptr;

// FFmpeg prints to stderr by default; the CLI promises one line per error,
// so its messages go to our debug log instead (visible with -v).
void forward_ffmpeg_log(void* avcl, int level, const char* format, va_list args) {
  if (level > AV_LOG_WARNING) return;
  const bool wanted = log_level() <= LogLevel::Debug || (level <= AV_LOG_ERROR && t_reported_error &&
                                                         t_reported_error->empty());
  if (!wanted) return;
  char line[1024];
  int print_prefix = 1;
  av_log_format_line2(avcl, level, format, args, line, sizeof(line), &print_prefix);
  std::string text(line);
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r' || text.back() == '.')) text.pop_back();
  if (text.empty()) return;
  log_debug("ffmpeg: {}", text);
  if (level <= AV_LOG_ERROR && t_reported_error && t_reported_error->empty()) {
    // Without the "[matroska,webm @ 0x...] " prefix.
    const auto prefix_end = text[0] == '[' ? text.find("] ") : std::string::npos;
    *t_reported_error = prefix_end == std::string::npos ? text : text.substr(prefix_end + 2);
  }
}

// Points t_reported_error at `sink` for one scope.
class ReportedErrorScope {
 public:
  explicit ReportedErrorScope(std::string* sink) : previous_(t_reported_error) { t_reported_error = sink; }
  ~ReportedErrorScope() { t_reported_error = previous_; }
  ReportedErrorScope(const ReportedErrorScope&) = delete;
  ReportedErrorScope& operator=(const ReportedErrorScope&) = delete;

 private:
  std::string* previous_;
};

void init_ffmpeg_once() {
  static std::once_flag once;
  std::call_once(once, [] {
    av_log_set_callback(forward_ffmpeg_log);
    avdevice_register_all();  // v4l2 and the other capture inputs
  });
}

// The clockwise turn that shows the stored pixels upright. FFmpeg's display
// matrix angle is counter-clockwise, the convention of ffmpeg's own autorotate.
int display_rotation_cw(const AVStream* stream) {
  const uint8_t* matrix = nullptr;
#if LIBAVFORMAT_VERSION_INT >= AV_VERSION_INT(60, 15, 100)
  const AVPacketSideData* side = av_packet_side_data_get(stream->codecpar->coded_side_data,
                                                         stream->codecpar->nb_coded_side_data,
                                                         AV_PKT_DATA_DISPLAYMATRIX);
  if (side && side->size >= 9 * sizeof(int32_t)) matrix = side->data;
#else
  size_t size = 0;
  matrix = av_stream_get_side_data(stream, AV_PKT_DATA_DISPLAYMATRIX, &size);
  if (size < 9 * sizeof(int32_t)) matrix = nullptr;
#endif
  if (!matrix) return 0;
  const double ccw = av_display_rotation_get(reinterpret_cast<const int32_t*>(matrix));
  if (std::isnan(ccw)) return 0;
  // Snap to the nearest quarter turn: phones write exact multiples of 90.
  const long quarter_turns = std::lround(-ccw / 90.0);
  return static_cast<int>(((quarter_turns % 4) + 4) % 4) * 90;
}

bool is_capture_device(const std::string& path) { return path.rfind("/dev/video", 0) == 0; }

// libavformat polls this during blocking reads; non-zero aborts them.
int stop_requested(void* flag) { return static_cast<std::atomic<bool>*>(flag)->load() ? 1 : 0; }

}  // namespace

struct VideoReader::State {
  AVFormatContext* format = nullptr;
  AVCodecContext* codec = nullptr;
  AVPacket* packet = nullptr;
  AVFrame* frame = nullptr;
  SwsContext* sws = nullptr;
  int stream_index = -1;
  AVRational time_base{0, 1};
  int64_t start_pts = 0;
  int stored_width = 0, stored_height = 0;  // before rotation
  // The colour conversion last configured, so it is set again only on change.
  int sws_format = -1, sws_colorspace = -1, sws_range = -1;
  // What sws_scale writes into: rows aligned and padded, as its SIMD paths
  // need (they store whole vectors past the last pixel of a row; a tight
  // RGB buffer overflowed, found by fuzz/fuzz_video.cpp), copied out after.
  std::vector<uint8_t> sws_rows;
  int64_t decoded = 0;       // frames handed out so far
  bool input_done = false;   // the decoder has been told the input ended
  bool finished = false;     // no more frames will be handed out
  bool warned_resize = false;
  std::string reported_error;  // the first error FFmpeg logged while reading
  std::string damage;          // why reading stopped early: warned when the decoder is drained
  std::atomic<bool> stop{false};

  ~State() {
    sws_freeContext(sws);
    av_frame_free(&frame);
    av_packet_free(&packet);
    avcodec_free_context(&codec);
    avformat_close_input(&format);
  }
};

VideoReader::VideoReader(const std::string& path, const std::string& input_format)
    : path_(path), state_(std::make_unique<State>()) {
  init_ffmpeg_once();
  const std::string format_name = !input_format.empty() ? input_format : is_capture_device(path) ? "v4l2" : "";
  // Local paths are checked here, for plain messages; URLs ("rtsp://...")
  // go to libavformat as they are.
  if (path.find("://") == std::string::npos) {
    struct stat st {};
    LB_CHECK(stat(path.c_str(), &st) == 0, "{}: no such file", path);
    LB_CHECK(!S_ISDIR(st.st_mode), "{}: is a folder, not a video file (use --images for a folder of frames)", path);
    LB_CHECK(!S_ISREG(st.st_mode) || st.st_size > 0, "{}: empty file (0 bytes), not a video", path);
  }

  const AVInputFormat* forced = nullptr;
  if (!format_name.empty()) {
    forced = av_find_input_format(format_name.c_str());
    LB_CHECK(forced, "{}: this FFmpeg has no input format '{}'", path, format_name);
  }
  State& s = *state_;
  s.format = avformat_alloc_context();
  LB_CHECK(s.format, "{}: out of memory for the demuxer", path);
  s.format->interrupt_callback.callback = stop_requested;
  s.format->interrupt_callback.opaque = &s.stop;
  int r = avformat_open_input(&s.format, path.c_str(), forced, nullptr);  // frees s.format on failure
  LB_CHECK(r >= 0, "{}: not a video FFmpeg can read ({})", path, av_error_text(r));
  r = avformat_find_stream_info(s.format, nullptr);
  LB_CHECK(r >= 0, "{}: cannot read the stream information ({})", path, av_error_text(r));

  const AVCodec* decoder = nullptr;
  r = av_find_best_stream(s.format, AVMEDIA_TYPE_VIDEO, -1, -1, &decoder, 0);
  if (r >= 0 && (s.format->streams[r]->disposition & AV_DISPOSITION_ATTACHED_PIC)) r = AVERROR_STREAM_NOT_FOUND;
  if (r == AVERROR_STREAM_NOT_FOUND) {
    std::string kinds;  // e.g. "audio, subtitle"
    for (unsigned i = 0; i < s.format->nb_streams; ++i) {
      const char* kind = av_get_media_type_string(s.format->streams[i]->codecpar->codec_type);
      kinds += fmt::format("{}{}", i ? ", " : "", kind ? kind : "unknown");
    }
    fail("{}: no video stream in this file ({})", path, kinds.empty() ? "no streams at all" : "only " + kinds);
  }
  if (r == AVERROR_DECODER_NOT_FOUND) {
    const int index = av_find_best_stream(s.format, AVMEDIA_TYPE_VIDEO, -1, -1, nullptr, 0);
    const AVCodecParameters* par = index >= 0 ? s.format->streams[index]->codecpar : nullptr;
    if (par && par->codec_id != AV_CODEC_ID_NONE)
      fail("{}: this FFmpeg has no decoder for the video codec '{}'", path, avcodec_get_name(par->codec_id));
    char tag[AV_FOURCC_MAX_STRING_SIZE] = "?";
    if (par) av_fourcc_make_string(tag, par->codec_tag);
    fail("{}: this FFmpeg has no decoder for the file's video codec (unknown to it; codec tag '{}')", path, tag);
  }
  LB_CHECK(r >= 0, "{}: cannot pick a video stream ({})", path, av_error_text(r));
  s.stream_index = r;
  AVStream* stream = s.format->streams[r];

  s.codec = avcodec_alloc_context3(decoder);
  LB_CHECK(s.codec, "{}: out of memory for the decoder", path);
  r = avcodec_parameters_to_context(s.codec, stream->codecpar);
  LB_CHECK(r >= 0, "{}: bad codec parameters ({})", path, av_error_text(r));
  // A few decoder threads keep up with the model without taking its cores.
  s.codec->thread_count = static_cast<int>(std::clamp(std::thread::hardware_concurrency(), 1u, 4u));
  r = avcodec_open2(s.codec, decoder, nullptr);
  LB_CHECK(r >= 0, "{}: cannot open the '{}' decoder ({})", path, decoder->name, av_error_text(r));
  s.packet = av_packet_alloc();
  s.frame = av_frame_alloc();
  LB_CHECK(s.packet && s.frame, "{}: out of memory for the decoder", path);

  s.stored_width = stream->codecpar->width;
  s.stored_height = stream->codecpar->height;
  LB_CHECK(s.stored_width > 0 && s.stored_height > 0, "{}: the video stream has no frame size ({}x{})", path,
           s.stored_width, s.stored_height);
  s.time_base = stream->time_base;
  s.start_pts = stream->start_time != AV_NOPTS_VALUE ? stream->start_time : 0;

  info_.codec = decoder->name;
  info_.rotation_cw = display_rotation_cw(stream);
  const bool quarter = info_.rotation_cw == 90 || info_.rotation_cw == 270;
  info_.width = quarter ? s.stored_height : s.stored_width;
  info_.height = quarter ? s.stored_width : s.stored_height;
  // The average rate first, as OpenCV's CAP_PROP_FPS (what upstream samples
  // by) reads it; FFmpeg's guess for streams that state none.
  AVRational rate = stream->avg_frame_rate;
  if (rate.num <= 0 || rate.den <= 0) rate = av_guess_frame_rate(s.format, stream, nullptr);
  info_.fps = rate.num > 0 && rate.den > 0 ? av_q2d(rate) : 0.0;
  if (stream->nb_frames > 0) {
    info_.frame_count = stream->nb_frames;
    info_.frame_count_exact = true;
  } else if (info_.fps > 0) {
    // As OpenCV (which upstream reads videos with) estimates it: duration x fps.
    double seconds = -1;
    if (stream->duration != AV_NOPTS_VALUE) seconds = static_cast<double>(stream->duration) * av_q2d(s.time_base);
    else if (s.format->duration != AV_NOPTS_VALUE) seconds = static_cast<double>(s.format->duration) / AV_TIME_BASE;
    if (seconds > 0) info_.frame_count = static_cast<int64_t>(std::floor(seconds * info_.fps + 0.5));
  }
}

VideoReader::~VideoReader() = default;

void VideoReader::request_stop() { state_->stop = true; }

bool VideoReader::next(DecodedFrame& out) {
  State& s = *state_;
  if (s.finished || s.stop) return false;
  // Damage before the first frame means there is nothing to keep: an error.
  // Later damage ends the video with a warning and keeps what came before.
  auto damaged = [&](const std::string& what) {
    s.finished = true;
    if (s.stop) return false;  // interrupted on purpose, not damage
    LB_CHECK(s.decoded > 0, "{}: {} before the first frame could be decoded", path_, what);
    log_warn("{}: {} at frame {}; ending the video there (the {} frame{} before it are used)", path_, what,
             s.decoded, s.decoded, s.decoded == 1 ? "" : "s");
    return false;
  };
  const ReportedErrorScope capture(&s.reported_error);
  // Stops reading; the frames still inside the decoder come out first.
  auto end_input = [&](std::string why) {
    avcodec_send_packet(s.codec, nullptr);
    s.input_done = true;
    s.damage = std::move(why);
  };
  while (true) {
    int r = avcodec_receive_frame(s.codec, s.frame);
    if (r == AVERROR_EOF) {
      if (!s.damage.empty()) return damaged(s.damage);
      s.finished = true;
      LB_CHECK(s.decoded > 0, "{}: the video stream holds no frames", path_);
      return false;
    }
    if (r == 0) break;
    if (r != AVERROR(EAGAIN)) return damaged(fmt::format("decoding failed ({})", av_error_text(r)));
    LB_ASSERT(!s.input_done);  // after the flush, the decoder ends with EOF, never EAGAIN
    r = av_read_frame(s.format, s.packet);
    if (!s.reported_error.empty()) {  // this packet (if any) is where the damage is: drop it
      if (r >= 0) av_packet_unref(s.packet);
      end_input(fmt::format("the file is damaged or truncated ({})", s.reported_error));
      continue;
    }
    if (r == AVERROR_EOF) {
      end_input("");
      continue;
    }
    if (r < 0) return damaged(fmt::format("the file cannot be read further ({})", av_error_text(r)));
    if (s.packet->stream_index != s.stream_index) {
      av_packet_unref(s.packet);
      continue;
    }
    const bool corrupt = (s.packet->flags & AV_PKT_FLAG_CORRUPT) != 0;
    if (corrupt) {
      av_packet_unref(s.packet);
      return damaged("the file is damaged or truncated");
    }
    r = avcodec_send_packet(s.codec, s.packet);
    av_packet_unref(s.packet);
    if (r < 0 && r != AVERROR(EAGAIN)) return damaged(fmt::format("decoding failed ({})", av_error_text(r)));
  }

  AVFrame* f = s.frame;
  if (f->decode_error_flags != 0 || (f->flags & AV_FRAME_FLAG_CORRUPT)) {
    av_frame_unref(f);
    return damaged("the picture is damaged");
  }
  if ((f->width != s.stored_width || f->height != s.stored_height) && !s.warned_resize) {
    log_warn("{}: frame {} is {}x{}, the stream started at {}x{}; later frames are scaled to the first size",
             path_, s.decoded, f->width, f->height, s.stored_width, s.stored_height);
    s.warned_resize = true;
  }
  s.sws = sws_getCachedContext(s.sws, f->width, f->height, static_cast<AVPixelFormat>(f->format), s.stored_width,
                               s.stored_height, AV_PIX_FMT_RGB24,
                               SWS_BICUBIC, nullptr, nullptr, nullptr);
  if (!s.sws) {
    av_frame_unref(f);
    const char* name = av_get_pix_fmt_name(static_cast<AVPixelFormat>(f->format));
    fail("{}: cannot convert pixel format '{}' to RGB", path_, name ? name : "unknown");
  }
  // YUV -> RGB with the matrix and range the stream declares (BT.601 when
  // it declares none, as swscale assumes); irrelevant for RGB streams.
  if (f->format != s.sws_format || f->colorspace != s.sws_colorspace || f->color_range != s.sws_range) {
    const int colorspace = f->colorspace == AVCOL_SPC_UNSPECIFIED ? SWS_CS_DEFAULT : f->colorspace;
    const int* coefficients = sws_getCoefficients(colorspace);
    sws_setColorspaceDetails(s.sws, coefficients, f->color_range == AVCOL_RANGE_JPEG ? 1 : 0, coefficients, 1, 0,
                             1 << 16, 1 << 16);
    s.sws_format = f->format;
    s.sws_colorspace = f->colorspace;
    s.sws_range = f->color_range;
  }
  io::RgbImage stored;
  stored.width = s.stored_width;
  stored.height = s.stored_height;
  stored.rgb.resize(stored.row_bytes() * static_cast<size_t>(stored.height));
  constexpr size_t kAlign = 64;
  const size_t stride = (stored.row_bytes() + 2 * kAlign - 1) / kAlign * kAlign;  // at least one vector of slack
  s.sws_rows.resize(stride * (static_cast<size_t>(stored.height) + 1) + kAlign);
  uint8_t* rows = s.sws_rows.data();
  rows += (kAlign - reinterpret_cast<uintptr_t>(rows) % kAlign) % kAlign;
  uint8_t* planes[4] = {rows, nullptr, nullptr, nullptr};
  int strides[4] = {static_cast<int>(stride), 0, 0, 0};
  sws_scale(s.sws, f->data, f->linesize, 0, f->height, planes, strides);
  for (int y = 0; y < stored.height; ++y)
    std::memcpy(stored.row(y), rows + static_cast<size_t>(y) * stride, stored.row_bytes());

  out.index = s.decoded;
  const int64_t pts = f->best_effort_timestamp;
  if (pts != AV_NOPTS_VALUE && s.time_base.den > 0)
    out.timestamp = static_cast<double>(pts - s.start_pts) * av_q2d(s.time_base);
  else
    out.timestamp = static_cast<double>(s.decoded) / (info_.fps > 0 ? info_.fps : 30.0);
  av_frame_unref(f);
  out.rgb = rotate_clockwise(stored, info_.rotation_cw);
  ++s.decoded;
  return true;
}

}  // namespace lingbot::video

#else  // built without FFmpeg: --video says so, folders still work

namespace lingbot::video {

bool ffmpeg_available() { return false; }

struct VideoReader::State {};

VideoReader::VideoReader(const std::string& path, const std::string&) : path_(path) {
  fail("{}: this build of lingbot-map reads no videos (install libavformat-dev, libavcodec-dev, libswscale-dev, "
       "libavutil-dev, libavdevice-dev and configure again)", path);
}
VideoReader::~VideoReader() = default;
bool VideoReader::next(DecodedFrame&) { return false; }
void VideoReader::request_stop() {}

}  // namespace lingbot::video
#endif

namespace lingbot::video {

io::RgbImage rotate_clockwise(const io::RgbImage& image, int degrees) {
  degrees = ((degrees % 360) + 360) % 360;
  LB_CHECK(degrees % 90 == 0, "rotate_clockwise: {} degrees is not a quarter turn", degrees);
  if (degrees == 0) return image;
  const int w = image.width, h = image.height;
  io::RgbImage out;
  const bool quarter = degrees != 180;
  out.width = quarter ? h : w;
  out.height = quarter ? w : h;
  out.rgb.resize(image.rgb.size());
  for (int y = 0; y < h; ++y) {
    const uint8_t* src = image.row(y);
    for (int x = 0; x < w; ++x) {
      // Where source pixel (x, y) lands.
      int dx, dy;
      if (degrees == 90) {
        dx = h - 1 - y;
        dy = x;
      } else if (degrees == 180) {
        dx = w - 1 - x;
        dy = h - 1 - y;
      } else {  // 270
        dx = y;
        dy = w - 1 - x;
      }
      uint8_t* dst = out.row(dy) + 3 * static_cast<size_t>(dx);
      dst[0] = src[3 * x];
      dst[1] = src[3 * x + 1];
      dst[2] = src[3 * x + 2];
    }
  }
  return out;
}

}  // namespace lingbot::video
