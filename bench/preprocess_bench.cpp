// Frames in: decoding, PIL-compatible bicubic resizing and the whole
// upstream preprocessing, on a real courthouse frame (518x294 PNG) and on a
// synthetic 1920x1080 picture encoded as PNG and as JPEG in memory.
//
//   build/bin/preprocess_bench [--benchmark_filter=1080p]
// The courthouse frame is the test fixture (tests/fixtures/courthouse).
#include "image/image.h"
#include "image/preprocess.h"
#include "image/resize.h"

#include <benchmark/benchmark.h>
#include <png.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <random>

// clang-format off
#include <jpeglib.h>
// clang-format on

using namespace lingbot;
using namespace lingbot::io;

namespace {

std::string courthouse_frame() { return std::string(LINGBOT_FIXTURES_DIR) + "/courthouse/000000.png"; }

// A photo-like 1920x1080 picture: smooth shading, edges and sensor noise.
RgbImage synthetic_1080p() {
  RgbImage img;
  img.width = 1920;
  img.height = 1080;
  img.rgb.resize(img.row_bytes() * img.height);
  std::mt19937 rng(42);
  std::normal_distribution<float> noise(0.f, 4.f);
  for (int y = 0; y < img.height; ++y) {
    for (int x = 0; x < img.width; ++x) {
      const float base[3] = {128 + 100 * std::sin(x * 0.004f) * std::cos(y * 0.006f), 40 + 0.18f * y,
                             ((x / 64 + y / 48) % 2) ? 200.f : 60.f};
      for (int c = 0; c < 3; ++c) {
        const float v = base[c] + noise(rng);
        img.row(y)[3 * x + c] = static_cast<uint8_t>(std::clamp(v, 0.f, 255.f));
      }
    }
  }
  return img;
}

std::vector<uint8_t> encode_png(const RgbImage& img) {
  png_image image{};
  image.version = PNG_IMAGE_VERSION;
  image.width = img.width;
  image.height = img.height;
  image.format = PNG_FORMAT_RGB;
  png_alloc_size_t size = 0;
  png_image_write_to_memory(&image, nullptr, &size, 0, img.rgb.data(), 0, nullptr);
  std::vector<uint8_t> out(size);
  if (!png_image_write_to_memory(&image, out.data(), &size, 0, img.rgb.data(), 0, nullptr)) std::abort();
  out.resize(size);
  return out;
}

std::vector<uint8_t> encode_jpeg(const RgbImage& img, int quality) {
  jpeg_compress_struct cinfo{};
  jpeg_error_mgr errors{};
  cinfo.err = jpeg_std_error(&errors);
  jpeg_create_compress(&cinfo);
  unsigned char* buffer = nullptr;
  unsigned long size = 0;
  jpeg_mem_dest(&cinfo, &buffer, &size);
  cinfo.image_width = img.width;
  cinfo.image_height = img.height;
  cinfo.input_components = 3;
  cinfo.in_color_space = JCS_RGB;
  jpeg_set_defaults(&cinfo);
  jpeg_set_quality(&cinfo, quality, TRUE);
  jpeg_start_compress(&cinfo, TRUE);
  while (cinfo.next_scanline < cinfo.image_height) {
    JSAMPROW row = const_cast<uint8_t*>(img.row(static_cast<int>(cinfo.next_scanline)));
    jpeg_write_scanlines(&cinfo, &row, 1);
  }
  jpeg_finish_compress(&cinfo);
  std::vector<uint8_t> out(buffer, buffer + size);
  jpeg_destroy_compress(&cinfo);
  std::free(buffer);
  return out;
}

const RgbImage& image_1080p() {
  static const RgbImage img = synthetic_1080p();
  return img;
}
const std::vector<uint8_t>& png_1080p() {
  static const std::vector<uint8_t> bytes = encode_png(image_1080p());
  return bytes;
}
const std::vector<uint8_t>& jpeg_1080p() {
  static const std::vector<uint8_t> bytes = encode_jpeg(image_1080p(), 90);
  return bytes;
}

// ---------------------------------------------------------------------------

void BM_CourthouseDecode(benchmark::State& state) {
  const std::string path = courthouse_frame();
  for (auto _ : state) benchmark::DoNotOptimize(load_image(path));
}
BENCHMARK(BM_CourthouseDecode)->Unit(benchmark::kMillisecond);

// image_size 518 leaves a 518x294 frame as it is; 224 resizes it.
void BM_CourthouseDecodeAndPreprocess(benchmark::State& state) {
  const std::string path = courthouse_frame();
  PreprocessOptions options;
  options.image_size = static_cast<int>(state.range(0));
  for (auto _ : state) benchmark::DoNotOptimize(preprocess(load_image(path), options));
}
BENCHMARK(BM_CourthouseDecodeAndPreprocess)->Arg(518)->Arg(224)->Unit(benchmark::kMillisecond);

void BM_CourthouseResize(benchmark::State& state) {
  const RgbImage img = load_image(courthouse_frame());
  for (auto _ : state) benchmark::DoNotOptimize(resize_bicubic(img, 224, 126));
}
BENCHMARK(BM_CourthouseResize)->Unit(benchmark::kMillisecond);

// 1920x1080 -> 518x294: what crop mode at 518 does to a 1080p frame.
void BM_1080pResize(benchmark::State& state) {
  const RgbImage& img = image_1080p();
  for (auto _ : state) benchmark::DoNotOptimize(resize_bicubic(img, 518, 294));
}
BENCHMARK(BM_1080pResize)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_1080pDecodePng(benchmark::State& state) {
  const auto& bytes = png_1080p();
  for (auto _ : state) benchmark::DoNotOptimize(decode_image(bytes.data(), bytes.size(), "1080p.png"));
  state.counters["file_MB"] = bytes.size() / 1e6;
}
BENCHMARK(BM_1080pDecodePng)->Unit(benchmark::kMillisecond);

void BM_1080pDecodeJpeg(benchmark::State& state) {
  const auto& bytes = jpeg_1080p();
  for (auto _ : state) benchmark::DoNotOptimize(decode_image(bytes.data(), bytes.size(), "1080p.jpg"));
  state.counters["file_MB"] = bytes.size() / 1e6;
}
BENCHMARK(BM_1080pDecodeJpeg)->Unit(benchmark::kMillisecond);

void BM_1080pDecodeAndPreprocess(benchmark::State& state) {
  const auto& bytes = state.range(0) ? jpeg_1080p() : png_1080p();
  const PreprocessOptions options;  // crop, 518, 14 -> [3, 294, 518]
  for (auto _ : state) {
    benchmark::DoNotOptimize(preprocess(decode_image(bytes.data(), bytes.size(), "1080p"), options));
  }
  state.SetLabel(state.range(0) ? "jpeg" : "png");
}
BENCHMARK(BM_1080pDecodeAndPreprocess)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
