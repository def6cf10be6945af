#include "output/sky_masks.h"

#include "core/error.h"
#include "image/image.h"
#include "output/predictions.h"

#include <sys/stat.h>

#include <algorithm>
#include <cmath>

namespace lingbot::io {

namespace {

bool is_file(const std::string& p) {
  struct stat st {};
  return stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

bool has_extension(const std::string& name) {
  const size_t dot = name.rfind('.');
  return dot != std::string::npos && dot > 0 && name.find('/', dot) == std::string::npos;
}

// cv2.IMREAD_GRAYSCALE of a colour image: ITU-R 601 luma; a gray image reads back unchanged.
std::vector<uint8_t> to_gray(const RgbImage& image) {
  std::vector<uint8_t> gray(static_cast<size_t>(image.width) * image.height);
  for (size_t i = 0; i < gray.size(); ++i) {
    const uint8_t* p = image.rgb.data() + 3 * i;
    gray[i] = static_cast<uint8_t>((299 * p[0] + 587 * p[1] + 114 * p[2] + 500) / 1000);
  }
  return gray;
}

// One source coordinate of cv2.INTER_LINEAR: pixel centres aligned, clamped at the borders.
struct Tap {
  int lo, hi;
  float w_hi;
};
std::vector<Tap> linear_taps(int in, int out) {
  std::vector<Tap> taps(static_cast<size_t>(out));
  const double scale = static_cast<double>(in) / out;
  for (int o = 0; o < out; ++o) {
    const double src = std::max(0.0, (o + 0.5) * scale - 0.5);
    const int lo = std::min(static_cast<int>(std::floor(src)), in - 1);
    taps[static_cast<size_t>(o)] = {lo, std::min(lo + 1, in - 1), static_cast<float>(src - lo)};
  }
  return taps;
}

}  // namespace

std::vector<uint8_t> load_sky_mask(const std::string& path, int width, int height) {
  const RgbImage image = load_image(path);
  const std::vector<uint8_t> gray = to_gray(image);
  std::vector<uint8_t> sky(static_cast<size_t>(width) * height);
  if (image.width == width && image.height == height) {
    for (size_t i = 0; i < sky.size(); ++i) sky[i] = is_sky(gray[i]);
    return sky;
  }
  const std::vector<Tap> xs = linear_taps(image.width, width), ys = linear_taps(image.height, height);
  for (int y = 0; y < height; ++y) {
    const Tap& ty = ys[static_cast<size_t>(y)];
    const uint8_t* r0 = gray.data() + static_cast<size_t>(ty.lo) * image.width;
    const uint8_t* r1 = gray.data() + static_cast<size_t>(ty.hi) * image.width;
    for (int x = 0; x < width; ++x) {
      const Tap& tx = xs[static_cast<size_t>(x)];
      const float top = r0[tx.lo] + tx.w_hi * (r0[tx.hi] - r0[tx.lo]);
      const float bottom = r1[tx.lo] + tx.w_hi * (r1[tx.hi] - r1[tx.lo]);
      const long v = std::lround(top + ty.w_hi * (bottom - top));
      sky[static_cast<size_t>(y) * width + x] = is_sky(static_cast<uint8_t>(std::clamp(v, 0L, 255L)));
    }
  }
  return sky;
}

SkyMasks::SkyMasks(std::string dir, std::string flag) : dir_(std::move(dir)), flag_(std::move(flag)) {
  struct stat st {};
  LB_CHECK(stat(dir_.c_str(), &st) == 0 && S_ISDIR(st.st_mode), "{} {}: not a folder", flag_, dir_);
}

std::string SkyMasks::mask_path(const std::string& frame_name) const {
  const std::string base = dir_ + "/" + frame_name;
  if (has_extension(frame_name)) {
    if (is_file(base)) return base;
  } else {
    for (const char* ext : {".jpg", ".png"})
      if (is_file(base + ext)) return base + ext;
  }
  fail("{} {}: no mask for frame '{}' (expected {}{}); upstream makes missing masks with skyseg.onnx, which "
       "lingbot-map does not run",
       flag_, dir_, frame_name, base, has_extension(frame_name) ? "" : ".jpg or .png");
}

int64_t SkyMasks::zero_sky_confidence(const std::string& frame_name, float* conf, int width, int height) const {
  const std::vector<uint8_t> sky = load_sky_mask(mask_path(frame_name), width, height);
  int64_t n = 0;
  for (size_t i = 0; i < sky.size(); ++i)
    if (sky[i]) {
      conf[i] = 0;
      ++n;
    }
  return n;
}

int64_t apply_sky_masks(const SkyMasks& masks, Predictions& p) {
  LB_CHECK(p.height > 0, "{}: holds cameras only; sky masks need its depth confidence", p.path);
  const int64_t plane = int64_t{p.height} * p.width;
  int64_t sky = 0;
  for (int f = 0; f < p.frames; ++f)
    sky += masks.zero_sky_confidence(p.frame_files[static_cast<size_t>(f)], p.depth_conf.f32() + plane * f, p.width,
                                     p.height);
  return sky;
}

}  // namespace lingbot::io
