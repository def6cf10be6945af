// The public API (include/lingbot/lingbot.h) over StreamingModel and WindowedStream.
#include <lingbot/lingbot.h>

#include "api/option_table.h"
#include "checkpoint/checkpoint.h"
#include "core/error.h"
#include "core/profiler.h"
#include "image/image.h"
#include "image/preprocess.h"
#include "model/checkpoint_check.h"
#include "model/streaming_model.h"
#include "model/windowed_stream.h"

#include <algorithm>
#include <limits>
#include <new>

namespace lingbot {

namespace {

// Runs f with only the documented exceptions leaving: lingbot::Error and
// std::bad_alloc pass, anything else (a library's own type) becomes an
// Error with the same message.
template <typename F>
auto guarded(F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (const Error&) {
    throw;
  } catch (const std::bad_alloc&) {
    throw;
  } catch (const std::exception& e) {
    throw Error(e.what());
  }
}

// width x height with `channels` values per pixel, or an error naming the
// argument (so that a wrong buffer never gets read out of bounds).
size_t checked_size(const char* what, int width, int height, int channels) {
  LB_CHECK(width > 0 && height > 0, "{}: width and height must be positive, got {}x{}", what, width, height);
  const int64_t n = int64_t{width} * height * channels;
  LB_CHECK(n <= std::numeric_limits<int32_t>::max(), "{}: {}x{} is too large", what, width, height);
  return static_cast<size_t>(n);
}

FrameOutput to_output(const lingbot::FrameResult& r) {
  FrameOutput out;
  out.index = r.index;
  out.keyframe = r.keyframe;
  out.frame_type = static_cast<int>(r.role);
  out.pose_enc = r.pose_enc;
  out.camera_to_world = r.camera.camera_to_world;
  out.intrinsic = r.camera.intrinsic;
  out.height = r.height;
  out.width = r.width;
  auto copy = [](const Tensor& t) {
    return t.defined() ? std::vector<float>(t.f32(), t.f32() + t.numel()) : std::vector<float>();
  };
  out.depth = copy(r.depth);
  out.confidence = copy(r.depth_conf);
  out.world_points = copy(r.world_points);
  return out;
}

std::vector<FrameOutput> to_outputs(const std::vector<lingbot::FrameResult>& results) {
  std::vector<FrameOutput> out;
  out.reserve(results.size());
  for (const lingbot::FrameResult& r : results) out.push_back(to_output(r));
  return out;
}

}  // namespace

const char* version() { return LINGBOT_VERSION; }

std::vector<std::string> list_images(const std::string& folder) {
  return guarded([&] { return io::list_images(folder); });
}

void set_profiling(bool on) { Profiler::set_enabled(on); }
std::string profiling_report() { return Profiler::report(); }

// ---- Model ------------------------------------------------------------------

struct Model::Impl {
  Options options;
  ModelConfig config;
  io::StateDict weights;  // memory-mapped; the device weights of every stream are made from it
  StreamOptions stream;
  io::PreprocessOptions preprocess;
  std::unique_ptr<Backend> backend;
};

Model::Model(const std::string& checkpoint, const std::string& config_path, const Options& options) {
  impl_ = guarded([&] {
    auto impl = std::make_shared<Impl>();
    impl->options = options;
    check_options(options);
    impl->config = config_path.empty() ? ModelConfig::official() : ModelConfig::from_file(config_path);
    impl->stream = stream_options(options, impl->config);
    impl->preprocess = preprocess_options(options, impl->config);
    LB_CHECK(!checkpoint.empty(), "no checkpoint given (a .pt or .safetensors file)");
    impl->weights = io::load_state_dict(checkpoint);
    // Here rather than at the first stream: a checkpoint that does not fit
    // is the caller's error at load time.
    require_loadable(check_checkpoint(impl->weights, impl->config), checkpoint, options.allow_extra_tensors);
    impl->backend = make_backend(options);
    return impl;
  });
}

Model::Model(Model&&) noexcept = default;
Model& Model::operator=(Model&&) noexcept = default;
Model::~Model() = default;

const Options& Model::options() const { return impl_->options; }
std::string Model::device_name() const { return impl_->backend->name(); }
int Model::patch_size() const { return impl_->config.patch_size; }

// ---- Stream -----------------------------------------------------------------

struct Stream::Impl {
  std::shared_ptr<const Model::Impl> model;  // keeps the backend and the weights alive
  std::unique_ptr<FrameStream> streaming;  // a StreamingModel, or a WindowedStream (Options::mode)
  int64_t frames_pushed = 0;

  explicit Impl(std::shared_ptr<const Model::Impl> m)
      : model(std::move(m)),
        streaming(make_frame_stream(*model->backend, model->weights, model->config, model->stream)) {}

  std::vector<FrameOutput> push(const Tensor& frame) {
    std::vector<FrameOutput> out = to_outputs(streaming->push(frame));
    ++frames_pushed;
    return out;
  }
};

Stream Model::open_stream() const {
  return guarded([&] { return Stream(std::make_unique<Stream::Impl>(impl_)); });
}

Stream::Stream(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Stream::Stream(Stream&&) noexcept = default;
Stream& Stream::operator=(Stream&&) noexcept = default;
Stream::~Stream() = default;

std::vector<FrameOutput> Stream::push_file(const std::string& path) {
  return guarded([&] { return impl_->push(io::preprocess(io::load_image(path), impl_->model->preprocess)); });
}

std::vector<FrameOutput> Stream::push_rgb(std::span<const uint8_t> rgb, int width, int height) {
  return guarded([&] {
    const size_t n = checked_size("push_rgb", width, height, 3);
    LB_CHECK(rgb.size() == n, "push_rgb: {}x{} RGB needs {} bytes, the buffer holds {}", width, height, n,
             rgb.size());
    io::RgbImage image;
    image.width = width;
    image.height = height;
    image.rgb.assign(rgb.begin(), rgb.end());
    return impl_->push(io::preprocess(image, impl_->model->preprocess));
  });
}

std::vector<FrameOutput> Stream::push_preprocessed(std::span<const float> chw, int width, int height) {
  return guarded([&] {
    const size_t n = checked_size("push_preprocessed", width, height, 3);
    LB_CHECK(chw.size() == n, "push_preprocessed: [3, {}, {}] needs {} floats, the buffer holds {}", height, width,
             n, chw.size());
    const int patch = impl_->model->config.patch_size;
    LB_CHECK(width % patch == 0 && height % patch == 0,
             "push_preprocessed: {}x{} is not a multiple of the patch size {}", width, height, patch);
    Tensor frame = Tensor::empty({3, height, width});
    std::copy(chw.begin(), chw.end(), frame.f32());
    return impl_->push(frame);
  });
}

std::vector<FrameOutput> Stream::finish() {
  return guarded([&] { return to_outputs(impl_->streaming->finish()); });
}

void Stream::reset() {
  guarded([&] {
    impl_->streaming->reset();
    impl_->frames_pushed = 0;
  });
}

int64_t Stream::frames_pushed() const { return impl_->frames_pushed; }

}  // namespace lingbot
