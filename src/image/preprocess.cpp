#include "image/preprocess.h"

#include "core/error.h"
#include "core/log.h"
#include "image/resize.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <cmath>
#include <filesystem>
#include <optional>
#include <set>
#include <utility>

namespace lingbot::io {

namespace {

// Python's round() of a float: to nearest, ties to even.
int64_t round_half_even(double v) {
  const double lower = std::floor(v);
  const double fraction = v - lower;
  int64_t r = static_cast<int64_t>(lower);
  if (fraction > 0.5 || (fraction == 0.5 && (r % 2 != 0))) ++r;
  return r;
}

// Python's a // b for b > 0.
int floor_div(int a, int b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }

// round(side * (target / other) / patch) * patch, evaluated as Python does
// (true division in double, left to right).
int64_t scaled_to_patches(int side, int target, int other, int patch) {
  const double ratio = static_cast<double>(target) / other;
  return round_half_even(side * ratio / patch) * patch;
}

// v / 255 as float32, as torch computes uint8 -> float then .div(255).
const std::array<float, 256>& unit_scale() {
  static const std::array<float, 256> table = [] {
    std::array<float, 256> t{};
    for (int v = 0; v < 256; ++v) t[v] = static_cast<float>(v) / 255.0f;
    return t;
  }();
  return table;
}

// Writes `image` at (top, left) of a white float32 [3, height, width] frame.
void place_in_frame(const RgbImage& image, int top, int left, float* frame, int height, int width) {
  const auto& scale = unit_scale();
  const size_t plane = static_cast<size_t>(height) * width;
  std::fill(frame, frame + 3 * plane, 1.0f);
  const int y0 = std::max(0, top), y1 = std::min(height, top + image.height);
  const int x0 = std::max(0, left), x1 = std::min(width, left + image.width);
  for (int y = y0; y < y1; ++y) {
    const uint8_t* src = image.row(y - top);
    for (int c = 0; c < 3; ++c) {
      float* dst = frame + c * plane + static_cast<size_t>(y) * width;
      for (int x = x0; x < x1; ++x) dst[x] = scale[src[3 * (x - left) + c]];
    }
  }
}

bool is_image_name(const std::string& name) {
  if (name.empty() || name[0] == '.') return false;  // glob("*.png") skips hidden files
  const auto dot = name.rfind('.');
  if (dot == std::string::npos) return false;
  std::string ext = name.substr(dot + 1);
  for (char& c : ext) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return ext == "png" || ext == "jpg" || ext == "jpeg";
}

// Runs body(i) for i in [0, n) on all cores; rethrows the error of the
// lowest failing i (so the message does not depend on scheduling).
template <typename Body>
void parallel_for_each(int n, Body&& body) {
  std::vector<std::optional<std::string>> errors(n);
#pragma omp parallel for schedule(dynamic)
  for (int i = 0; i < n; ++i) {
    try {
      body(i);
    } catch (const std::exception& e) {
      errors[i] = e.what();
    }
  }
  for (const auto& e : errors) {
    if (e) throw Error(*e);
  }
}

void check_options(const PreprocessOptions& options) {
  LB_CHECK(options.image_size > 0, "preprocess: image_size must be positive, got {}", options.image_size);
  LB_CHECK(options.patch_size > 0, "preprocess: patch_size must be positive, got {}", options.patch_size);
}

}  // namespace

FrameGeometry frame_geometry(int width, int height, const PreprocessOptions& options, const std::string& name) {
  check_options(options);
  LB_CHECK(width > 0 && height > 0, "{}: invalid image size {}x{}", name, width, height);
  const int target = options.image_size, patch = options.patch_size;
  int64_t resized_w, resized_h;
  if (options.mode == PreprocessOptions::Mode::Pad && height > width) {
    resized_h = target;
    resized_w = scaled_to_patches(width, target, height, patch);
  } else {  // crop, or pad of a landscape / square image
    resized_w = target;
    resized_h = scaled_to_patches(height, target, width, patch);
  }
  LB_CHECK(resized_w > 0 && resized_h > 0,
           "{}: a {}x{} image would be resized to {}x{} (aspect ratio too extreme for image_size {})", name,
           width, height, resized_w, resized_h, target);
  LB_CHECK(resized_w <= (1 << 16) && resized_h <= (1 << 16), "{}: resized size {}x{} is too large", name,
           resized_w, resized_h);

  FrameGeometry g;
  g.resized_width = static_cast<int>(resized_w);
  g.resized_height = static_cast<int>(resized_h);
  g.width = g.resized_width;
  g.height = g.resized_height;
  if (options.mode == PreprocessOptions::Mode::Crop) {
    if (g.resized_height > target) {  // keep rows [start, start + target)
      g.top = -floor_div(g.resized_height - target, 2);
      g.height = target;
    }
  } else {
    const int h_padding = target - g.resized_height;
    const int w_padding = target - g.resized_width;
    // Upstream pads only when one side is short, then pads (or, with a
    // negative amount, crops) both axes to the target.
    if (h_padding > 0 || w_padding > 0) {
      g.top = floor_div(h_padding, 2);
      g.left = floor_div(w_padding, 2);
      g.height = target;
      g.width = target;
    }
  }
  return g;
}

Tensor preprocess(const RgbImage& image, const PreprocessOptions& options) {
  const FrameGeometry g = frame_geometry(image.width, image.height, options);
  const RgbImage resized = resize_bicubic(image, g.resized_width, g.resized_height);
  Tensor out = Tensor::empty({3, g.height, g.width});
  place_in_frame(resized, g.top, g.left, out.f32(), g.height, g.width);
  return out;
}

FrameOrder parse_frame_order(const std::string& text) {
  if (text == "natural") return FrameOrder::Natural;
  if (text == "name") return FrameOrder::Name;
  if (text == "mtime") return FrameOrder::Mtime;
  fail("--sort must be natural, name or mtime, got '{}'", text);
}

bool natural_less(const std::string& a, const std::string& b) {
  const auto digit = [](char c) { return c >= '0' && c <= '9'; };
  size_t i = 0, j = 0;
  while (i < a.size() && j < b.size()) {
    if (digit(a[i]) && digit(b[j])) {
      size_t ie = i, je = j;
      while (ie < a.size() && digit(a[ie])) ++ie;
      while (je < b.size() && digit(b[je])) ++je;
      size_t is = i, js = j;  // the runs without leading zeros
      while (is + 1 < ie && a[is] == '0') ++is;
      while (js + 1 < je && b[js] == '0') ++js;
      if (ie - is != je - js) return ie - is < je - js;  // fewer significant digits: smaller
      const int c = a.compare(is, ie - is, b, js, je - js);
      if (c != 0) return c < 0;
      if (ie - i != je - j) return ie - i < je - j;  // equal values: fewer leading zeros first
      i = ie;
      j = je;
      continue;
    }
    if (a[i] != b[j]) return static_cast<unsigned char>(a[i]) < static_cast<unsigned char>(b[j]);
    ++i;
    ++j;
  }
  return a.size() - i < b.size() - j;
}

std::vector<std::string> list_images(const std::string& dir, FrameOrder order) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::file_status status = fs::status(dir, ec);
  LB_CHECK(!ec || ec == std::errc::no_such_file_or_directory, "{}: cannot access folder ({})", dir,
           ec.message());
  LB_CHECK(fs::exists(status), "{}: no such folder", dir);
  LB_CHECK(fs::is_directory(status), "{}: not a folder", dir);
  std::vector<std::string> paths;
  fs::directory_iterator it(dir, ec);
  LB_CHECK(!ec, "{}: cannot list folder ({})", dir, ec.message());
  for (; it != fs::directory_iterator(); it.increment(ec)) {
    LB_CHECK(!ec, "{}: cannot list folder ({})", dir, ec.message());
    const std::string name = it->path().filename().string();
    std::error_code type_ec;
    if (is_image_name(name) && it->is_regular_file(type_ec)) paths.push_back((fs::path(dir) / name).string());
  }
  LB_CHECK(!ec, "{}: cannot list folder ({})", dir, ec.message());
  LB_CHECK(!paths.empty(), "{}: no .png, .jpg or .jpeg images in this folder", dir);
  std::vector<std::string> by_name = paths;
  std::sort(by_name.begin(), by_name.end());
  switch (order) {
    case FrameOrder::Name:
      return by_name;
    case FrameOrder::Natural:
      std::stable_sort(paths.begin(), paths.end(), natural_less);
      if (paths != by_name) {
        const auto [n, b] = std::mismatch(paths.begin(), paths.end(), by_name.begin());
        log_info("{}: frames in natural order ({} before {}); --sort name gives upstream's plain name order", dir,
                 fs::path(*n).filename().string(), fs::path(*b).filename().string());
      }
      return paths;
    case FrameOrder::Mtime: {
      std::vector<std::pair<fs::file_time_type, std::string>> timed;
      for (const std::string& p : paths) {
        std::error_code time_ec;
        const fs::file_time_type t = fs::last_write_time(p, time_ec);
        LB_CHECK(!time_ec, "{}: cannot read its modification time ({})", p, time_ec.message());
        timed.emplace_back(t, p);
      }
      std::sort(timed.begin(), timed.end(), [](const auto& x, const auto& y) {
        return x.first != y.first ? x.first < y.first : natural_less(x.second, y.second);
      });
      for (size_t i = 0; i < timed.size(); ++i) paths[i] = timed[i].second;
      return paths;
    }
  }
  return by_name;
}

FrameSource::FrameSource(std::vector<std::string> paths, PreprocessOptions options)
    : paths_(std::move(paths)), options_(options) {
  check_options(options_);
  LB_CHECK(!paths_.empty(), "no images given (at least 1 image is required)");
  geometry_.resize(paths_.size());
  parallel_for_each(size(), [&](int i) {
    const ImageInfo info = probe_image(paths_[i]);
    geometry_[i] = frame_geometry(info.width, info.height, options_, paths_[i]);
  });
  std::set<std::pair<int, int>> sizes;
  for (const FrameGeometry& g : geometry_) {
    height_ = std::max(height_, g.height);
    width_ = std::max(width_, g.width);
    sizes.insert({g.height, g.width});
  }
  if (sizes.size() > 1) {
    log_warn("frames come in {} different sizes; padding them with white to {}x{} (as upstream does)",
             sizes.size(), width_, height_);
  }
}

void FrameSource::frame_into(int i, Tensor& out) const {
  LB_CHECK(i >= 0 && i < size(), "frame index {} out of range [0, {})", i, size());
  LB_CHECK(out.dtype() == DType::F32 && out.is_cpu() && out.shape() == (Shape{3, height_, width_}),
           "frame {}: output must be float32[3, {}, {}] on cpu, got {}", i, height_, width_, out.describe());
  const std::string& path = paths_[i];
  const FrameGeometry& g = geometry_[i];
  const RgbImage image = load_image(path);
  const FrameGeometry now = frame_geometry(image.width, image.height, options_, path);
  LB_CHECK(now.resized_width == g.resized_width && now.resized_height == g.resized_height,
           "{}: decoded size {}x{} differs from the size its header announced", path, image.width,
           image.height);
  const RgbImage resized = resize_bicubic(image, g.resized_width, g.resized_height);
  // The frame's own placement, then centring within the set's common size.
  const int top = g.top + (height_ - g.height) / 2;
  const int left = g.left + (width_ - g.width) / 2;
  place_in_frame(resized, top, left, out.f32(), height_, width_);
}

Tensor FrameSource::frame(int i) const {
  Tensor out = Tensor::empty({3, height_, width_});
  frame_into(i, out);
  return out;
}

Tensor load_images(const std::vector<std::string>& paths, const PreprocessOptions& options) {
  const FrameSource source(paths, options);
  Tensor batch = Tensor::empty({source.size(), 3, source.output_height(), source.output_width()});
  parallel_for_each(source.size(), [&](int i) {
    Tensor slot = batch[i];
    source.frame_into(i, slot);
  });
  return batch;
}

}  // namespace lingbot::io
