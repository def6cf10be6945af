// Shared by the image / resize / preprocess tests: the PIL reference data in
// tests/fixtures/preprocess (made by tools/reference/make_preprocess_fixtures.py).
//
// Expected outputs are stored as 8-bit RGB PNGs. They are read here with
// libpng's simplified API, not with the decoder under test, so a decoder bug
// cannot hide in the reference.
#pragma once

#include "image/image.h"
#include "test_support.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <png.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <string>

namespace lingbot::test {

using io::RgbImage;

inline const nlohmann::json& preprocess_cases() {
  static const nlohmann::json cases = [] {
    std::ifstream in(fixture_path("preprocess/cases.json"));
    if (!in) throw Error("cannot open " + fixture_path("preprocess/cases.json"));
    return nlohmann::json::parse(in);
  }();
  return cases;
}

// "courthouse/000000.png" -> tests/fixtures/courthouse/..., else tests/fixtures/preprocess/<p>.
inline std::string case_path(const std::string& p) {
  if (p.rfind("courthouse/", 0) == 0) return fixture_path(p);
  return fixture_path("preprocess/" + p);
}

// An 8-bit RGB PNG through libpng's simplified reader (independent of src/io).
inline RgbImage read_reference_png(const std::string& path) {
  png_image image{};
  image.version = PNG_IMAGE_VERSION;
  if (!png_image_begin_read_from_file(&image, path.c_str())) throw Error("cannot read " + path);
  image.format = PNG_FORMAT_RGB;
  RgbImage out;
  out.width = static_cast<int>(image.width);
  out.height = static_cast<int>(image.height);
  out.rgb.resize(PNG_IMAGE_SIZE(image));
  if (!png_image_finish_read(&image, nullptr, out.rgb.data(), 0, nullptr)) {
    png_image_free(&image);
    throw Error("cannot decode " + path + ": " + image.message);
  }
  return out;
}

// How close a result is to PIL's, over all values.
struct Agreement {
  double max_abs_diff = 0;     // in units of 1 (a value of 1/255 is one 8-bit level)
  double exact_fraction = 1;   // share of values bit-identical to PIL's
  size_t count = 0;
};

inline Agreement compare_bytes(const uint8_t* got, const uint8_t* want, size_t n) {
  Agreement a;
  a.count = n;
  size_t exact = 0;
  int worst = 0;
  for (size_t i = 0; i < n; ++i) {
    const int d = std::abs(int{got[i]} - int{want[i]});
    worst = std::max(worst, d);
    exact += d == 0;
  }
  a.max_abs_diff = worst / 255.0;
  a.exact_fraction = n ? static_cast<double>(exact) / n : 1.0;
  return a;
}

// float32 values against k/255 references.
inline Agreement compare_unit_floats(const float* got, const uint8_t* want, size_t n) {
  Agreement a;
  a.count = n;
  size_t exact = 0;
  for (size_t i = 0; i < n; ++i) {
    const float reference = static_cast<float>(want[i]) / 255.0f;  // torch's uint8 -> float / 255
    const double d = std::fabs(static_cast<double>(got[i]) - reference);
    if (std::isnan(d)) {
      a.max_abs_diff = INFINITY;
      continue;
    }
    a.max_abs_diff = std::max(a.max_abs_diff, d);
    exact += got[i] == reference;
  }
  a.exact_fraction = n ? static_cast<double>(exact) / n : 1.0;
  return a;
}

inline void report(const std::string& name, const Agreement& a) {
  std::printf("  %-34s max|diff| = %.6f (%.2f/255)  bit-exact %.4f%% of %zu values\n", name.c_str(),
              a.max_abs_diff, a.max_abs_diff * 255.0, 100.0 * a.exact_fraction, a.count);
}

// The project's bound: every value within 1/255 of PIL's (plus float slack).
constexpr double kOneLevel = 1.0 / 255.0 + 1e-6;

}  // namespace lingbot::test
