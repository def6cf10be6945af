// The Python module `lingbot_map` (pybind11): the public API of
// include/lingbot/lingbot.h for Python, plus what `lingbot-map run`,
// `inspect` and `export` do, so that a notebook needs no CLI.
//
//   import lingbot_map
//   model = lingbot_map.load("model.pt", device="cpu", kv_cache="dense")
//   result = model.reconstruct(images="frames/")     # predictions.npz's arrays
//   with model.stream() as stream:
//       for frame in frames: use(stream.push(frame))  # per-frame dicts
//       use(stream.finish())
//
// Rules kept throughout (docs/python.md):
//   * Options are passed by name to lingbot::set_option, so every row of
//     LINGBOT_OPTIONS is a keyword argument with no list kept here.
//   * The engine runs with the GIL released; reconstruct() takes it back
//     between frames to let Ctrl-C (KeyboardInterrupt) through.
//   * Arrays are NumPy arrays over the engine's own buffers (a capsule frees
//     them), not copies; reconstruct() stacks frames once, into its result.
//   * Errors keep the engine's one-line messages: FileNotFoundError when a
//     file given does not exist, ValueError for a bad option or argument,
//     RuntimeError for the rest (lingbot::Error).
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <lingbot/lingbot.h>

#include "api/option_table.h"
#include "checkpoint/checkpoint.h"
#include "image/image.h"
#include "image/preprocess.h"
#include "model/checkpoint_check.h"
#include "model/model_config.h"
#include "output/exporters.h"
#include "output/predictions.h"
#include "video/frame_source.h"

#include <fmt/format.h>

#include <filesystem>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <vector>

namespace py = pybind11;
using namespace pybind11::literals;

namespace lingbot::python {

// ---- Errors -------------------------------------------------------------------

// Raised as FileNotFoundError / ValueError (see the translator in the module
// definition); both keep the engine's message. Thrown where the GIL may be
// released, so they carry only text.
struct FileMissing : Error {
  using Error::Error;
};
struct BadArgument : Error {
  using Error::Error;
};

bool is_missing(const std::string& path) {
  return !path.empty() && path != "-" && !std::filesystem::exists(path);
}

// Runs f; an engine error while one of `files` does not exist is that
// file's absence, reported as FileMissing with the engine's own message.
template <typename F>
auto naming_files(const std::vector<std::string>& files, F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (const FileMissing&) {
    throw;
  } catch (const BadArgument&) {
    throw;
  } catch (const Error& e) {
    for (const std::string& file : files)
      if (is_missing(file)) throw FileMissing(e.what());
    throw;
  }
}

// Runs f; an engine error is the caller's argument (an option, a format name).
template <typename F>
auto as_bad_argument(F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (const Error& e) {
    throw BadArgument(e.what());
  }
}

// ---- Conversions ----------------------------------------------------------------

bool is_path_like(py::handle obj) {
  return py::isinstance<py::str>(obj) || py::hasattr(obj, "__fspath__");
}

std::string path_text(py::handle obj) {
  return py::str(py::module_::import("os").attr("fspath")(obj)).cast<std::string>();
}

// A NumPy array that owns `values` (no copy): the capsule frees them with the array.
template <typename T>
py::array_t<T> owning_array(std::vector<T>&& values, std::vector<py::ssize_t> shape) {
  auto* owned = new std::vector<T>(std::move(values));
  py::capsule free_when_done(owned, [](void* p) { delete static_cast<std::vector<T>*>(p); });
  return py::array_t<T>(std::move(shape), owned->data(), free_when_done);
}

// A keyword argument as the text set_option reads: True/False, an integer,
// or a choice's name.
std::string option_text(const std::string& name, py::handle value) {
  if (py::isinstance<py::bool_>(value)) return value.cast<bool>() ? "true" : "false";
  if (py::isinstance<py::int_>(value)) return py::str(value).cast<std::string>();
  if (py::isinstance<py::str>(value)) return value.cast<std::string>();
  throw py::type_error(fmt::format("option {}: expected an int, a bool or a str, got {}", name,
                                   py::str(py::type::handle_of(value).attr("__name__")).cast<std::string>()));
}

// `base` with the engine options of `kwargs` set over it (None leaves an
// option as it is); the names set go into `given`.
Options with_options(Options base, const py::dict& kwargs, std::set<std::string>& given) {
  for (const auto& [key, value] : kwargs) {
    const std::string name = py::str(key).cast<std::string>();
    if (value.is_none()) continue;
    const std::string text = option_text(name, value);
    as_bad_argument([&] { set_option(base, name, text); });
    given.insert(name);
  }
  as_bad_argument([&] { check_options(base); });
  return base;
}

// A value popped from kwargs (the options that are not the engine's).
template <typename T>
T pop(py::dict& kwargs, const char* name, T fallback) {
  if (!kwargs.contains(name)) return fallback;
  py::object value = kwargs.attr("pop")(name);
  if (value.is_none()) return fallback;
  try {
    return value.cast<T>();
  } catch (const py::cast_error&) {
    throw py::type_error(fmt::format("{}: wrong type {}", name,
                                     py::str(py::type::handle_of(value).attr("__name__")).cast<std::string>()));
  }
}

std::string shape_text(const py::array& a) {
  std::string s = "(";
  for (py::ssize_t i = 0; i < a.ndim(); ++i) s += (i ? ", " : "") + std::to_string(a.shape(i));
  return s + (a.ndim() == 1 ? ",)" : ")");
}

// One frame given from Python, taken apart while the GIL is held so that it
// can be decoded and preprocessed without it.
struct FrameInput {
  std::string path;       // an image file, or
  py::array array;        // HxWx3 uint8 (rgb) or 3xHxW float32 (chw), C-contiguous
  bool rgb = false;
  int width = 0, height = 0;
};

FrameInput frame_input(py::handle obj, const std::string& label) {
  FrameInput in;
  if (is_path_like(obj)) {
    in.path = path_text(obj);
    return in;
  }
  if (!py::isinstance<py::array>(obj))
    throw py::type_error(fmt::format("{}: expected an image path or a NumPy array, got {}", label,
                                     py::str(py::type::handle_of(obj).attr("__name__")).cast<std::string>()));
  py::array a = py::reinterpret_borrow<py::array>(obj);
  const bool u8 = a.dtype().is(py::dtype::of<uint8_t>()), f32 = a.dtype().is(py::dtype::of<float>());
  if (u8 && a.ndim() == 3 && a.shape(2) == 3) {
    in.rgb = true;
    in.array = py::array_t<uint8_t, py::array::c_style>::ensure(a);
    in.height = static_cast<int>(a.shape(0));
    in.width = static_cast<int>(a.shape(1));
  } else if (f32 && a.ndim() == 3 && a.shape(0) == 3) {
    in.array = py::array_t<float, py::array::c_style>::ensure(a);
    in.height = static_cast<int>(a.shape(1));
    in.width = static_cast<int>(a.shape(2));
  } else {
    throw BadArgument(fmt::format("{}: shape {} of {}: expected an HxWx3 uint8 image or a 3xHxW float32 frame in "
                                  "[0, 1]",
                                  label, shape_text(a), py::str(a.dtype()).cast<std::string>()));
  }
  if (in.width <= 0 || in.height <= 0)
    throw BadArgument(fmt::format("{}: shape {} has no pixels", label, shape_text(a)));
  return in;
}

// The preprocessed frame, float32 [3, H, W], as `lingbot-map run` makes it
// from a file (push_file) or 8-bit pixels (push_rgb); a float frame goes in
// as it is. Needs no GIL.
Tensor preprocessed(const FrameInput& in, const io::PreprocessOptions& preprocess, const std::string& label) {
  if (!in.path.empty())
    return naming_files({in.path}, [&] { return io::preprocess(io::load_image(in.path), preprocess); });
  if (in.rgb) {
    io::RgbImage image;
    image.width = in.width;
    image.height = in.height;
    const auto* pixels = static_cast<const uint8_t*>(in.array.data());
    image.rgb.assign(pixels, pixels + size_t{3} * in.width * in.height);
    return io::preprocess(image, preprocess);
  }
  const int patch = preprocess.patch_size;
  if (in.width % patch != 0 || in.height % patch != 0)
    throw BadArgument(fmt::format("{}: shape (3, {}, {}): height and width must be multiples of the patch size {}",
                                  label, in.height, in.width, patch));
  Tensor frame = Tensor::empty({3, in.height, in.width});
  const auto* values = static_cast<const float*>(in.array.data());
  std::copy(values, values + frame.numel(), frame.f32());
  return frame;
}

// One frame's results as a dict, with predictions.npz's keys and shapes less
// the frame axis (so stacking the dicts of a stream gives reconstruct()'s).
py::dict frame_dict(FrameOutput&& r) {
  py::dict d;
  d["index"] = r.index;
  d["keyframe"] = r.keyframe;
  d["frame_type"] = r.frame_type;  // 0 scale frame, 1 keyframe, 2 non-keyframe (upstream windowed mode's codes)
  d["pose_enc"] = owning_array(std::vector<float>(r.pose_enc.begin(), r.pose_enc.end()), {9});
  std::vector<float> extrinsic, intrinsic;
  for (int i = 0; i < 3; ++i) {
    for (int j = 0; j < 4; ++j) extrinsic.push_back(static_cast<float>(r.camera_to_world[i][j]));
    for (int j = 0; j < 3; ++j) intrinsic.push_back(static_cast<float>(r.intrinsic[i][j]));
  }
  d["extrinsic"] = owning_array(std::move(extrinsic), {3, 4});
  d["intrinsic"] = owning_array(std::move(intrinsic), {3, 3});
  if (!r.depth.empty()) {
    const py::ssize_t H = r.height, W = r.width;
    d["depth"] = owning_array(std::move(r.depth), {H, W, 1});
    d["depth_conf"] = owning_array(std::move(r.confidence), {H, W});
    d["world_points"] = owning_array(std::move(r.world_points), {H, W, 3});
  }
  return d;
}

py::list frame_dicts(std::vector<FrameOutput>&& results) {
  py::list out;
  for (FrameOutput& r : results) out.append(frame_dict(std::move(r)));
  return out;
}

// ---- Model ------------------------------------------------------------------------

// What a loaded model and the streams made from it share. The engine is
// used from one thread at a time (lingbot.h), so every call into it holds
// `engine_lock` while the GIL is released.
struct ModelState {
  std::string checkpoint, config_path;
  ModelConfig config;
  Options options;
  std::set<std::string> given;  // options named at load()
  std::optional<Model> model;
  std::mutex engine_lock;
};

// An engine for one call: the loaded model, or one with the call's options
// over the load's (the checkpoint is memory-mapped, so this costs little).
struct Engine {
  std::shared_ptr<ModelState> state;
  std::shared_ptr<const Model> own;  // set when the call's options differ
  Options options;
  io::PreprocessOptions preprocess;
  const Model& model() const { return own ? *own : *state->model; }
};

Engine engine_for(const std::shared_ptr<ModelState>& state, const Options& options) {
  Engine e;
  e.state = state;
  e.options = options;
  e.preprocess = as_bad_argument([&] { return preprocess_options(options, state->config); });
  if (!(options == state->options)) {
    as_bad_argument([&] { stream_options(options, state->config); });
    py::gil_scoped_release release;
    std::lock_guard lock(state->engine_lock);
    e.own = std::make_shared<const Model>(state->checkpoint, state->config_path, options);
  }
  return e;
}

class PyStream;

class PyModel {
 public:
  PyModel(const std::string& checkpoint, const std::string& config_path, const std::string& device, py::dict options)
      : state_(std::make_shared<ModelState>()) {
    state_->checkpoint = checkpoint;
    state_->config_path = config_path;
    Options o;
    as_bad_argument([&] { set_option(o, "device", device); });
    state_->options = with_options(o, options, state_->given);
    state_->config = naming_files({config_path}, [&] {
      return config_path.empty() ? ModelConfig::official() : ModelConfig::from_file(config_path);
    });
    as_bad_argument([&] { stream_options(state_->options, state_->config); });
    py::gil_scoped_release release;
    state_->model.emplace(naming_files({checkpoint, config_path},
                                       [&] { return Model(checkpoint, config_path, state_->options); }));
  }

  py::dict reconstruct(py::object images, py::object video, py::kwargs kwargs);
  PyStream stream(py::kwargs kwargs);

  std::string device() const { return state_->model->device_name(); }
  int patch_size() const { return state_->model->patch_size(); }
  py::dict options() const;
  std::string repr() const {
    return fmt::format("<lingbot_map.Model {} on {}>", state_->checkpoint, device());
  }

 private:
  std::shared_ptr<ModelState> state_;
};

// Every option's value, by name (set or the engine's default; the model
// config's values for the options left to it).
py::dict PyModel::options() const {
  py::dict d;
  const Options& o = state_->options;
  const StreamOptions s = stream_options(o, state_->config);
#define LINGBOT_INT_GET_(group, name, default_value, min, max, help) d[#name] = o.name;
#define LINGBOT_CONFIG_INT_GET_(group, name, config_key, min, help) d[#name] = py::none();
#define LINGBOT_BOOL_GET_(group, name, default_value, help_on, help_off) d[#name] = o.name;
#define LINGBOT_CHOICE_GET_(group, name, default_value, choices, help) d[#name] = o.name;
  LINGBOT_OPTIONS(LINGBOT_INT_GET_, LINGBOT_CONFIG_INT_GET_, LINGBOT_BOOL_GET_, LINGBOT_CHOICE_GET_)
#undef LINGBOT_INT_GET_
#undef LINGBOT_CONFIG_INT_GET_
#undef LINGBOT_BOOL_GET_
#undef LINGBOT_CHOICE_GET_
  d["num_scale_frames"] = s.num_scale_frames;
  d["kv_window"] = s.cache.sliding_window;
  d["camera_iterations"] = s.camera_iterations;
  return d;
}

// ---- reconstruct ----------------------------------------------------------------------

// Where reconstruct()'s frames come from, one at a time.
class FrameFeed {
 public:
  virtual ~FrameFeed() = default;
  virtual int64_t expected() const = 0;  // -1: not known in advance
  // The next preprocessed frame, or false at the end. Called with the GIL
  // held; releases it for the decoding.
  virtual bool next(Tensor& frame) = 0;
};

// A folder or a video, exactly as `lingbot-map run --images / --video` reads it.
class SourceFeed : public FrameFeed {
 public:
  explicit SourceFeed(const video::SourceOptions& options) {
    const std::string named = options.images.empty() ? options.video : options.images;
    py::gil_scoped_release release;
    source_ = naming_files({named}, [&] { return video::open_frame_source(options); });
  }
  int64_t expected() const override { return source_->expected_frames(); }
  bool next(Tensor& frame) override {
    py::gil_scoped_release release;
    video::Frame f;
    if (!source_->next(f)) return false;
    frame = std::move(f.image);
    return true;
  }

 private:
  std::unique_ptr<video::FrameSource> source_;
};

// A list of image files: as a folder of them (padded to a common size).
class PathsFeed : public FrameFeed {
 public:
  PathsFeed(std::vector<std::string> paths, const io::PreprocessOptions& preprocess) {
    py::gil_scoped_release release;
    source_.emplace(naming_files(paths, [&] { return io::FrameSource(paths, preprocess); }));
  }
  int64_t expected() const override { return source_->size(); }
  bool next(Tensor& frame) override {
    if (i_ >= source_->size()) return false;
    py::gil_scoped_release release;
    frame = naming_files(source_->paths(), [&] { return source_->frame(i_); });
    ++i_;
    return true;
  }

 private:
  std::optional<io::FrameSource> source_;
  int i_ = 0;
};

// Frames as arrays (or paths mixed with arrays), each taken as Stream.push takes it.
class ObjectsFeed : public FrameFeed {
 public:
  ObjectsFeed(py::sequence items, const io::PreprocessOptions& preprocess)
      : items_(std::move(items)), preprocess_(preprocess) {}
  int64_t expected() const override { return static_cast<int64_t>(py::len(items_)); }
  bool next(Tensor& frame) override {
    if (i_ >= expected()) return false;
    const std::string label = fmt::format("frame {}", i_);
    const FrameInput in = frame_input(items_[static_cast<size_t>(i_)], label);
    {
      py::gil_scoped_release release;
      frame = preprocessed(in, preprocess_, label);
    }
    ++i_;
    return true;
  }

 private:
  py::sequence items_;
  io::PreprocessOptions preprocess_;
  int64_t i_ = 0;
};

// reconstruct()'s arrays, one frame appended at a time (predictions.npz's keys).
struct Stacked {
  bool dense = true;
  bool windowed = false;  // adds upstream windowed mode's frame_type
  int64_t frames = 0;
  int height = 0, width = 0;
  std::vector<float> pose_enc, extrinsic, intrinsic, depth, depth_conf, world_points, images;
  std::vector<uint8_t> frame_type;

  void reserve(int64_t expected) {
    if (expected <= 0) return;
    const size_t S = static_cast<size_t>(expected), plane = size_t(height) * width;
    pose_enc.reserve(S * 9);
    extrinsic.reserve(S * 12);
    intrinsic.reserve(S * 9);
    if (!dense) return;
    depth.reserve(S * plane);
    depth_conf.reserve(S * plane);
    world_points.reserve(S * plane * 3);
    images.reserve(S * plane * 3);
  }
  void add_image(const Tensor& frame) {
    if (dense) images.insert(images.end(), frame.f32(), frame.f32() + frame.numel());
  }
  void add(const std::vector<FrameOutput>& results) {
    for (const FrameOutput& r : results) {
      pose_enc.insert(pose_enc.end(), r.pose_enc.begin(), r.pose_enc.end());
      frame_type.push_back(static_cast<uint8_t>(r.frame_type));
      for (int i = 0; i < 3; ++i) {
        for (int j = 0; j < 4; ++j) extrinsic.push_back(static_cast<float>(r.camera_to_world[i][j]));
        for (int j = 0; j < 3; ++j) intrinsic.push_back(static_cast<float>(r.intrinsic[i][j]));
      }
      if (dense) {
        depth.insert(depth.end(), r.depth.begin(), r.depth.end());
        depth_conf.insert(depth_conf.end(), r.confidence.begin(), r.confidence.end());
        world_points.insert(world_points.end(), r.world_points.begin(), r.world_points.end());
      }
      ++frames;
    }
  }
  py::dict to_dict() && {
    const py::ssize_t S = frames, H = height, W = width;
    py::dict d;
    d["pose_enc"] = owning_array(std::move(pose_enc), {S, 9});
    if (dense) {
      d["depth"] = owning_array(std::move(depth), {S, H, W, 1});
      d["depth_conf"] = owning_array(std::move(depth_conf), {S, H, W});
      d["world_points"] = owning_array(std::move(world_points), {S, H, W, 3});
    }
    d["extrinsic"] = owning_array(std::move(extrinsic), {S, 3, 4});
    d["intrinsic"] = owning_array(std::move(intrinsic), {S, 3, 3});
    if (dense) d["images"] = owning_array(std::move(images), {S, 3, H, W});
    if (windowed) d["frame_type"] = owning_array(std::move(frame_type), {S});
    return d;
  }
};

// Upstream demo.py (and `lingbot-map run`) keeps every ceil(N / 320)-th
// frame in the KV cache when a run of N > 320 frames names no keyframe_interval.
int automatic_keyframe_interval(int64_t frames) {
  constexpr int64_t kFramesAtFullRate = 320;
  return frames > kFramesAtFullRate ? static_cast<int>((frames + kFramesAtFullRate - 1) / kFramesAtFullRate) : 1;
}

py::dict PyModel::reconstruct(py::object images, py::object video, py::kwargs kwargs) {
  py::dict rest(kwargs);
  video::SourceOptions from;
  from.fps = pop<int>(rest, "fps", from.fps);
  from.first_k = pop<int>(rest, "first_k", 0);
  from.stride = pop<int>(rest, "stride", 1);
  from.rotate_cw90 = pop<bool>(rest, "rotate_cw90", false);
  const std::string sort = pop<std::string>(rest, "sort", "natural");
  std::set<std::string> given = state_->given;
  Options options = with_options(state_->options, rest, given);
  if (images.is_none() == video.is_none()) throw BadArgument("reconstruct: give images=... or video=..., one of them");
  if (from.fps < 1) throw BadArgument(fmt::format("fps must be >= 1, got {}", from.fps));
  if (from.stride < 1) throw BadArgument(fmt::format("stride must be >= 1, got {}", from.stride));
  if (from.first_k < 0) throw BadArgument(fmt::format("first_k must be >= 0, got {}", from.first_k));

  // The frames, opened before the engine so that a bad path fails first.
  const io::PreprocessOptions preprocess = as_bad_argument([&] { return preprocess_options(options, state_->config); });
  std::unique_ptr<FrameFeed> feed;
  if (!video.is_none() || is_path_like(images)) {
    from.order = as_bad_argument([&] { return io::parse_frame_order(sort); });
    (video.is_none() ? from.images : from.video) = path_text(video.is_none() ? images : video);
    from.preprocess = preprocess;
    feed = std::make_unique<SourceFeed>(from);
  } else if (py::isinstance<py::array>(images) || py::isinstance<py::sequence>(images)) {
    py::sequence items = py::isinstance<py::array>(images) ? py::sequence(py::list(images))
                                                           : py::reinterpret_borrow<py::sequence>(images);
    bool all_paths = py::len(items) > 0;
    for (py::handle item : items) all_paths = all_paths && is_path_like(item);
    if (all_paths) {
      std::vector<std::string> paths;
      for (py::handle item : items) paths.push_back(path_text(item));
      feed = std::make_unique<PathsFeed>(std::move(paths), preprocess);
    } else {
      feed = std::make_unique<ObjectsFeed>(items, preprocess);
    }
  } else {
    throw py::type_error("reconstruct: images must be a folder, a list of image paths or a list / array of frames");
  }
  if (options.mode == "streaming" && !given.count("keyframe_interval") &&
      automatic_keyframe_interval(feed->expected()) > 1)
    options.keyframe_interval = automatic_keyframe_interval(feed->expected());

  const Engine engine = engine_for(state_, options);
  std::optional<Stream> stream;
  {
    py::gil_scoped_release release;
    std::lock_guard lock(state_->engine_lock);
    stream.emplace(engine.model().open_stream());
  }
  Stacked out;
  out.dense = options.dense;
  out.windowed = options.mode == "windowed";
  for (Tensor frame; feed->next(frame);) {
    {
      py::gil_scoped_release release;
      std::lock_guard lock(state_->engine_lock);
      if (stream->frames_pushed() == 0) {  // the first frame gives the size of every array
        out.height = static_cast<int>(frame.dim(1));
        out.width = static_cast<int>(frame.dim(2));
        out.reserve(feed->expected());
      }
      out.add_image(frame);
      out.add(stream->push_preprocessed(std::span<const float>(frame.f32(), static_cast<size_t>(frame.numel())),
                                        static_cast<int>(frame.dim(2)), static_cast<int>(frame.dim(1))));
    }
    if (PyErr_CheckSignals() != 0) throw py::error_already_set();  // Ctrl-C: KeyboardInterrupt
  }
  if (stream->frames_pushed() == 0) throw BadArgument("reconstruct: no frames to reconstruct");
  {
    py::gil_scoped_release release;
    std::lock_guard lock(state_->engine_lock);
    out.add(stream->finish());
  }
  return std::move(out).to_dict();
}

// ---- Stream -------------------------------------------------------------------------

class PyStream {
 public:
  explicit PyStream(Engine engine) : engine_(std::move(engine)) {
    py::gil_scoped_release release;
    std::lock_guard lock(engine_.state->engine_lock);
    stream_.emplace(engine_.model().open_stream());
  }

  py::list push(py::handle frame) {
    Stream& s = open();
    const std::string label = fmt::format("frame {}", s.frames_pushed());
    const FrameInput in = frame_input(frame, label);
    std::vector<FrameOutput> results;
    {
      py::gil_scoped_release release;
      const Tensor t = preprocessed(in, engine_.preprocess, label);
      std::lock_guard lock(engine_.state->engine_lock);
      results = s.push_preprocessed(std::span<const float>(t.f32(), static_cast<size_t>(t.numel())),
                                    static_cast<int>(t.dim(2)), static_cast<int>(t.dim(1)));
    }
    return frame_dicts(std::move(results));
  }
  py::list finish() {
    Stream& s = open();
    std::vector<FrameOutput> results;
    {
      py::gil_scoped_release release;
      std::lock_guard lock(engine_.state->engine_lock);
      results = s.finish();
    }
    return frame_dicts(std::move(results));
  }
  void reset() {
    Stream& s = open();
    py::gil_scoped_release release;
    std::lock_guard lock(engine_.state->engine_lock);
    s.reset();
  }
  // Frees the stream's weights and KV cache now rather than when Python
  // collects it (the end of a `with` block).
  void close() {
    py::gil_scoped_release release;
    std::lock_guard lock(engine_.state->engine_lock);
    stream_.reset();
  }
  int64_t frames_pushed() { return open().frames_pushed(); }
  bool closed() const { return !stream_.has_value(); }

 private:
  Stream& open() {
    if (!stream_) throw py::value_error("the stream is closed");
    return *stream_;
  }
  Engine engine_;
  std::optional<Stream> stream_;
};

PyStream PyModel::stream(py::kwargs kwargs) {
  std::set<std::string> given = state_->given;
  return PyStream(engine_for(state_, with_options(state_->options, kwargs, given)));
}

// ---- inspect and export -------------------------------------------------------------------

py::dict inspect(py::object model_path, py::object config) {
  const std::string path = path_text(model_path), config_path = config.is_none() ? "" : path_text(config);
  const ModelConfig model_config = naming_files({config_path}, [&] {
    return config_path.empty() ? ModelConfig::official() : ModelConfig::from_file(config_path);
  });
  std::optional<io::StateDict> state;
  {
    py::gil_scoped_release release;
    state.emplace(naming_files({path}, [&] { return io::load_state_dict(path); }));
  }
  py::dict tensors;
  for (const auto& [name, t] : *state)
    tensors[py::str(name)] = py::make_tuple(std::string(dtype_name(t.dtype())), py::tuple(py::cast(t.shape())));
  const CheckpointCheck check = check_checkpoint(*state, model_config);
  py::list mis_shaped;
  for (const auto& m : check.mis_shaped)
    mis_shaped.append(py::make_tuple(m.name, py::tuple(py::cast(m.expected)), py::tuple(py::cast(m.found))));
  return py::dict("path"_a = path, "format"_a = state->format(), "found_under"_a = state->found_under(),
                  "tensors"_a = tensors, "parameters"_a = state->total_elements(), "bytes"_a = state->total_bytes(),
                  "model_parameters"_a = check.parameter_count, "fits"_a = check.fits(), "ok"_a = check.ok(),
                  "missing"_a = check.missing, "unexpected"_a = check.unexpected, "mis_shaped"_a = mis_shaped,
                  "non_float"_a = check.non_float, "summary"_a = check.summary(path, 20));
}

// A Tensor copied from result[key], which must have `shape` (-1: any size,
// the same as where else it appears).
Tensor result_array(const py::dict& result, const char* key, const Shape& shape) {
  if (!result.contains(key)) throw BadArgument(fmt::format("export: the result has no '{}' array", key));
  auto a = py::array_t<float, py::array::c_style | py::array::forcecast>::ensure(result[key]);
  if (!a) throw BadArgument(fmt::format("export: '{}' is not an array of numbers", key));
  bool fits = a.ndim() == static_cast<py::ssize_t>(shape.size());
  for (size_t i = 0; fits && i < shape.size(); ++i) fits = shape[i] < 0 || a.shape(i) == shape[i];
  if (!fits) {
    std::string want = "(";
    for (size_t i = 0; i < shape.size(); ++i) want += (i ? ", " : "") + (shape[i] < 0 ? "?" : std::to_string(shape[i]));
    throw BadArgument(fmt::format("export: '{}' has shape {}, expected {})", key, shape_text(a), want));
  }
  Shape actual;
  for (py::ssize_t i = 0; i < a.ndim(); ++i) actual.push_back(a.shape(i));
  Tensor t = Tensor::empty(actual);
  std::copy(a.data(), a.data() + t.numel(), t.f32());
  return t;
}

// A reconstruct() result (a dict of predictions.npz's arrays) as the exporters read it.
io::Predictions predictions_of(const py::dict& result) {
  io::Predictions p;
  p.path = "the result";
  p.extrinsic = result_array(result, "extrinsic", {-1, 3, 4});
  const int64_t S = p.extrinsic.dim(0);
  p.intrinsic = result_array(result, "intrinsic", {S, 3, 3});
  Tensor depth = result_array(result, "depth", {S, -1, -1, 1});
  const int64_t H = depth.dim(1), W = depth.dim(2);
  p.depth = depth.reshape({S, H, W});
  p.depth_conf = result_array(result, "depth_conf", {S, H, W});
  p.world_points = result_array(result, "world_points", {S, H, W, 3});
  p.images = result_array(result, "images", {S, 3, H, W});
  p.frames = static_cast<int>(S);
  p.height = static_cast<int>(H);
  p.width = static_cast<int>(W);
  for (int i = 0; i < p.frames; ++i) p.frame_names.push_back(fmt::format("{:06d}", i));
  return p;
}

py::dict export_result(py::object result, py::object formats, py::object out_dir, bool text, double conf_threshold,
                       double conf_percentile, double voxel_size, int downsample, int64_t max_points,
                       py::object frames) {
  std::string format_list;
  if (py::isinstance<py::str>(formats)) {
    format_list = formats.cast<std::string>();
  } else {
    for (py::handle f : formats) format_list += (format_list.empty() ? "" : ",") + py::str(f).cast<std::string>();
  }
  io::ExportOptions o;
  o.formats = as_bad_argument([&] { return io::parse_export_formats(format_list, "formats"); });
  o.colmap_text = text;
  o.points.conf_threshold = conf_threshold;
  o.points.conf_percentile = conf_percentile;
  o.points.voxel_size = voxel_size;
  o.points.downsample = downsample;
  o.points.max_points = max_points;
  if (downsample < 1) throw BadArgument(fmt::format("downsample must be >= 1, got {}", downsample));

  std::optional<io::Predictions> p;
  if (py::isinstance<py::dict>(result)) {
    if (out_dir.is_none()) throw BadArgument("export: out_dir is required when the result is a dict");
    p.emplace(predictions_of(result.cast<py::dict>()));
    o.out_dir = path_text(out_dir);
  } else {
    // A `run --out` folder or its predictions.npz; the output goes beside it by default, as `lingbot-map export`.
    const std::string where = path_text(result);
    p.emplace(naming_files({where}, [&] { return io::load_predictions(where); }));
    const std::filesystem::path wp(where);
    o.out_dir = !out_dir.is_none()              ? path_text(out_dir)
                : std::filesystem::is_directory(wp) ? where
                : wp.has_parent_path()          ? wp.parent_path().string()
                                                : std::string(".");
  }
  if (!frames.is_none()) {
    const std::string range = py::str(frames).cast<std::string>();
    as_bad_argument([&] { io::parse_frame_range(range, p->frames, o.points); });
  }
  std::error_code ec;
  std::filesystem::create_directories(o.out_dir, ec);
  if (ec) throw Error(fmt::format("{}: cannot create the folder: {}", o.out_dir, ec.message()));
  io::ExportSummary s;
  {
    py::gil_scoped_release release;
    s = io::export_predictions(*p, o);
  }
  return py::dict("out_dir"_a = o.out_dir, "formats"_a = o.formats, "points"_a = s.points,
                  "colmap_mean_reprojection_error"_a =
                      s.colmap_mean_reprojection_error >= 0 ? py::cast(s.colmap_mean_reprojection_error) : py::none(),
                  "seconds"_a = s.seconds);
}

}  // namespace lingbot::python

PYBIND11_MODULE(lingbot_map, m) {
  using namespace lingbot::python;
  m.doc() = "lingbot-map: streaming 3D reconstruction (LingBot-Map) in C++, from Python. See docs/python.md.";
  m.attr("__version__") = lingbot::version();

  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const FileMissing& e) {
      PyErr_SetString(PyExc_FileNotFoundError, e.what());
    } catch (const BadArgument& e) {
      PyErr_SetString(PyExc_ValueError, e.what());
    }
  });

  py::class_<PyStream>(m, "Stream",
                       "One video through a model, frame by frame (Model.stream()); a context manager.")
      .def("push", &PyStream::push, "frame"_a,
           "Pushes one frame (an image path, an HxWx3 uint8 array, or a 3xHxW float32 array in [0, 1]); returns "
           "the per-frame results that became ready, in frame order (dicts with index, keyframe, pose_enc, "
           "extrinsic, intrinsic and, unless dense=False, depth, depth_conf, world_points).")
      .def("finish", &PyStream::finish, "Runs the frames held back and returns every result not yet returned.")
      .def("reset", &PyStream::reset, "Forgets the video: the next push starts a new one.")
      .def("close", &PyStream::close, "Frees the stream (its weights copy and KV cache).")
      .def_property_readonly("frames_pushed", &PyStream::frames_pushed)
      .def_property_readonly("closed", &PyStream::closed)
      .def("__enter__", [](PyStream& s) -> PyStream& { return s; }, py::return_value_policy::reference)
      .def("__exit__", [](PyStream& s, py::args) { s.close(); });

  py::class_<PyModel>(m, "Model", "A loaded checkpoint (lingbot_map.load()).")
      .def("reconstruct", &PyModel::reconstruct, "images"_a = py::none(), "video"_a = py::none(),
           "Reconstructs a folder of images, a list of image paths, a list / array of frames, or a video; returns "
           "predictions.npz's arrays as a dict (pose_enc, depth, depth_conf, world_points, extrinsic, intrinsic, "
           "images). Options: fps, first_k, stride, sort, rotate_cw90 (as `lingbot-map run`) and any engine "
           "option, for this call.")
      .def("stream", &PyModel::stream, "Opens a Stream; engine options given here apply to it alone.")
      .def_property_readonly("device", &PyModel::device)
      .def_property_readonly("patch_size", &PyModel::patch_size)
      .def_property_readonly("options", &PyModel::options)
      .def("__repr__", &PyModel::repr);

  m.def(
      "load",
      [](py::object model_path, py::object config, const std::string& device, py::kwargs options) {
        return PyModel(path_text(model_path), config.is_none() ? "" : path_text(config), device, options);
      },
      "model_path"_a, "config"_a = py::none(), "device"_a = "auto",
      "Loads a checkpoint (.pt or .safetensors) with a model config JSON (None: the official architecture). "
      "Options are the CLI's, by name: kv_cache, num_scale_frames, kv_window, keyframe_interval, "
      "camera_iterations, image_size, preprocess, mode, threads, dense, ...");
  m.def("inspect", &inspect, "model_path"_a, "config"_a = py::none(),
        "What a checkpoint holds (tensors: name -> (dtype, shape)) and whether it fits the model config.");
  m.def("export", &export_result, "result"_a, "formats"_a, "out_dir"_a = py::none(), "text"_a = false,
        "conf_threshold"_a = 1.5, "conf_percentile"_a = -1.0, "voxel_size"_a = 0.0, "downsample"_a = 1,
        "max_points"_a = 0, "frames"_a = py::none(),
        "Writes a result (a reconstruct() dict, or a `run --out` folder) as colmap, nerfstudio, glb, depth or ply "
        "(as `lingbot-map export`); returns a summary.");
  m.def("option_names", [] {
    std::vector<std::string> names;
    for (const lingbot::OptionInfo& info : lingbot::option_table()) names.emplace_back(info.name);
    return names;
  }, "The engine options load(), reconstruct() and stream() take by name.");
}
