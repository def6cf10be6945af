#include "image/resize.h"

#include "core/error.h"

#include <algorithm>
#include <cmath>

#if defined(__AVX2__)
#include <immintrin.h>
#endif

namespace lingbot::io {

namespace detail {

namespace {

constexpr int kPrecisionBits = 32 - 8 - 2;  // 22: 8 bits of result, 2 of headroom
constexpr int32_t kHalf = int32_t{1} << (kPrecisionBits - 1);

// The weights must come from exactly Pillow's double-precision operations:
// the compiler may not fuse a*b+c into one FMA (one rounding instead of
// two) in the two functions below. Pillow's x86-64 builds do not fuse either.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC push_options
#pragma GCC optimize("fp-contract=off")
#endif

// Cubic convolution kernel (Keys), a = -0.5, support 2; written as Pillow
// writes it so that every double rounding is the same.
double bicubic_kernel(double x) {
#if defined(__clang__)
#pragma clang fp contract(off)
#endif
  constexpr double a = -0.5;
  if (x < 0.0) x = -x;
  if (x < 1.0) return ((a + 2.0) * x - (a + 3.0)) * x * x + 1;
  if (x < 2.0) return (((x - 5) * x + 8) * x - 4) * a;
  return 0.0;
}

// Pillow's clip8: the sum carries 22 fractional bits; keep the integer part
// clamped to 0..255 (arithmetic shift: negative sums go below zero).
inline uint8_t clip8(int32_t sum) {
  const int32_t v = sum >> kPrecisionBits;
  return static_cast<uint8_t>(v < 0 ? 0 : (v > 255 ? 255 : v));
}

}  // namespace

ResampleWeights bicubic_weights(int in_size, int out_size) {
#if defined(__clang__)
#pragma clang fp contract(off)
#endif
  constexpr double kSupport = 2.0;
  // Pillow passes the box edges as C floats: in0 = 0, in1 = in_size.
  const float in0 = 0.0f, in1 = static_cast<float>(in_size);
  const double scale = static_cast<double>(in1 - in0) / out_size;
  const double filterscale = scale < 1.0 ? 1.0 : scale;
  const double support = kSupport * filterscale;

  ResampleWeights w;
  w.taps = static_cast<int>(std::ceil(support)) * 2 + 1;
  w.first.resize(out_size);
  w.count.resize(out_size);
  w.weights.assign(static_cast<size_t>(out_size) * w.taps, 0);
  std::vector<double> k(w.taps);
  const double inv_filterscale = 1.0 / filterscale;
  for (int i = 0; i < out_size; ++i) {
    const double center = in0 + (i + 0.5) * scale;
    // Truncation toward zero, as Pillow's (int) casts.
    int lo = static_cast<int>(center - support + 0.5);
    if (lo < 0) lo = 0;
    int hi = static_cast<int>(center + support + 0.5);
    if (hi > in_size) hi = in_size;
    const int n = hi - lo;
    double total = 0.0;
    for (int j = 0; j < n; ++j) {
      k[j] = bicubic_kernel((j + lo - center + 0.5) * inv_filterscale);
      total += k[j];
    }
    if (total != 0.0) {
      for (int j = 0; j < n; ++j) k[j] /= total;
    }
    int32_t* fixed = w.weights.data() + static_cast<size_t>(i) * w.taps;
    for (int j = 0; j < n; ++j) {
      const double scaled = k[j] * (1 << kPrecisionBits);
      fixed[j] = static_cast<int32_t>(k[j] < 0 ? -0.5 + scaled : 0.5 + scaled);
    }
    w.first[i] = lo;
    w.count[i] = n;
  }
  return w;
}

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC pop_options
#endif

}  // namespace detail

namespace {

// Multiply-adds (output samples x taps) below which a pass stays on one
// thread: about a millisecond of work, less than waking a team costs on a
// busy machine.
[[maybe_unused]] constexpr int64_t kParallelWork = int64_t{4} << 20;

using detail::clip8;
using detail::kHalf;
using detail::ResampleWeights;

// Horizontal pass, the plain version: out row r = in row (row_offset + r)
// resampled along x. in: [in_h][in_w][3] -> out: [out.height][out.width][3].
void resample_rows_scalar(const RgbImage& in, int row_offset, const ResampleWeights& w, RgbImage& out) {
  const int out_w = out.width;
  [[maybe_unused]] const int64_t work = static_cast<int64_t>(out.height) * out_w * w.taps;
#pragma omp parallel for schedule(static) if (work > kParallelWork)
  for (int r = 0; r < out.height; ++r) {
    const uint8_t* src = in.row(row_offset + r);
    uint8_t* dst = out.row(r);
    for (int x = 0; x < out_w; ++x) {
      const uint8_t* s = src + 3 * w.first[x];
      const int32_t* k = w.weights.data() + static_cast<size_t>(x) * w.taps;
      const int n = w.count[x];
      int32_t r0 = kHalf, g0 = kHalf, b0 = kHalf;
      for (int j = 0; j < n; ++j) {
        r0 += s[3 * j + 0] * k[j];
        g0 += s[3 * j + 1] * k[j];
        b0 += s[3 * j + 2] * k[j];
      }
      dst[3 * x + 0] = clip8(r0);
      dst[3 * x + 1] = clip8(g0);
      dst[3 * x + 2] = clip8(b0);
    }
  }
}

#if defined(__AVX2__)
// Horizontal pass with AVX2, four taps per step. pmaddwd multiplies 16-bit
// values and adds neighbouring products exactly; the 22-bit weights do not
// fit 16 bits, so each is split as k = hi * 2^11 + lo (lo in [0, 2^11))
// and sum(v * k) = 2^11 * sum(v * hi) + sum(v * lo), exact in int32.
// One 16-byte load holds taps t..t+3 (R G B x4, 12 bytes used); a byte
// shuffle makes 16-bit pairs [R_t R_t+1 G_t G_t+1 B_t B_t+1 0 0] in the low
// 128-bit lane and the same for t+2, t+3 in the high lane, against weights
// [k_t k_t+1 k_t k_t+1 k_t k_t+1 0 0 | ...]. Integer sums do not depend on
// their order, so the result equals resample_rows_scalar's bit for bit.
void resample_rows_avx2(const RgbImage& in, int row_offset, const ResampleWeights& w, RgbImage& out) {
  const int out_w = out.width;
  const int max_groups = (w.taps + 3) / 4;
  // split[x][g] = {hi weights, lo weights} of taps 4g..4g+3, as 16 int16; 0 past count[x].
  std::vector<int16_t> split(static_cast<size_t>(out_w) * max_groups * 32, 0);
  for (int x = 0; x < out_w; ++x) {
    const int32_t* k = w.weights.data() + static_cast<size_t>(x) * w.taps;
    int16_t* dst = split.data() + static_cast<size_t>(x) * max_groups * 32;
    for (int j = 0; j < w.count[x]; ++j) {
      const int32_t hi = k[j] >> 11, lo = k[j] & 2047;
      int16_t* group = dst + (j / 4) * 32;
      const int lane = (j % 4) / 2, slot = j % 2;  // 128-bit lane, position in each pair
      for (int c = 0; c < 3; ++c) {
        group[lane * 8 + 2 * c + slot] = static_cast<int16_t>(hi);
        group[16 + lane * 8 + 2 * c + slot] = static_cast<int16_t>(lo);
      }
    }
  }
  const __m256i pairs = _mm256_setr_epi8(0, -1, 3, -1, 1, -1, 4, -1, 2, -1, 5, -1, -1, -1, -1, -1,  //
                                         6, -1, 9, -1, 7, -1, 10, -1, 8, -1, 11, -1, -1, -1, -1, -1);
  // The 16-byte loads reach 4 bytes past the last tap: harmless inside the
  // image (zero weights), not past the end of its buffer.
  const size_t buffer_size = in.rgb.size();
  [[maybe_unused]] const int64_t work = static_cast<int64_t>(out.height) * out_w * w.taps;
#pragma omp parallel for schedule(static) if (work > kParallelWork)
  for (int r = 0; r < out.height; ++r) {
    const uint8_t* src = in.row(row_offset + r);
    uint8_t* dst = out.row(r);
    for (int x = 0; x < out_w; ++x) {
      const uint8_t* s = src + 3 * w.first[x];
      // Every output runs the same number of steps (zero weights pad the
      // shorter ones): a constant trip count keeps the branch predictable.
      const int groups = max_groups;
      int32_t sums[8];
      if (static_cast<size_t>(s - in.rgb.data()) + 12 * groups + 4 <= buffer_size) {
        const auto* k = reinterpret_cast<const __m256i*>(split.data() + static_cast<size_t>(x) * max_groups * 32);
        __m256i acc_hi = _mm256_setzero_si256(), acc_lo = _mm256_setzero_si256();
        for (int g = 0; g < groups; ++g) {
          const __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + 12 * g));
          const __m256i values = _mm256_shuffle_epi8(_mm256_broadcastsi128_si256(bytes), pairs);
          acc_hi = _mm256_add_epi32(acc_hi, _mm256_madd_epi16(values, _mm256_loadu_si256(k + 2 * g)));
          acc_lo = _mm256_add_epi32(acc_lo, _mm256_madd_epi16(values, _mm256_loadu_si256(k + 2 * g + 1)));
        }
        const __m256i acc = _mm256_add_epi32(_mm256_slli_epi32(acc_hi, 11), acc_lo);
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(sums), acc);
      } else {
        const int32_t* k = w.weights.data() + static_cast<size_t>(x) * w.taps;
        for (int& v : sums) v = 0;
        for (int j = 0; j < w.count[x]; ++j) {
          for (int c = 0; c < 3; ++c) sums[c] += s[3 * j + c] * k[j];
        }
      }
      for (int c = 0; c < 3; ++c) dst[3 * x + c] = clip8(kHalf + sums[c] + sums[4 + c]);
    }
  }
}
#endif

void resample_rows(const RgbImage& in, int row_offset, const ResampleWeights& w, RgbImage& out, bool fast) {
#if defined(__AVX2__)
  if (fast) return resample_rows_avx2(in, row_offset, w, out);
#endif
  resample_rows_scalar(in, row_offset, w, out);
}

// Vertical pass: out row r = sum_j in row (first[r] + j) * weight; every
// channel of a row is independent, so the inner loop runs over whole rows
// (and vectorises).
void resample_columns(const RgbImage& in, const ResampleWeights& w, RgbImage& out) {
  const size_t row_bytes = out.row_bytes();
  [[maybe_unused]] const int64_t work = static_cast<int64_t>(out.height) * out.width * w.taps;
#pragma omp parallel if (work > kParallelWork)
  {
    std::vector<int32_t> sums(row_bytes);
#pragma omp for schedule(static)
    for (int r = 0; r < out.height; ++r) {
      std::fill(sums.begin(), sums.end(), kHalf);
      const int32_t* k = w.weights.data() + static_cast<size_t>(r) * w.taps;
      for (int j = 0; j < w.count[r]; ++j) {
        const uint8_t* src = in.row(w.first[r] + j);
        const int32_t weight = k[j];
        for (size_t i = 0; i < row_bytes; ++i) sums[i] += src[i] * weight;
      }
      uint8_t* dst = out.row(r);
      for (size_t i = 0; i < row_bytes; ++i) dst[i] = clip8(sums[i]);
    }
  }
}

RgbImage resize_with(const RgbImage& image, int out_width, int out_height, bool fast) {
  LB_CHECK(out_width > 0 && out_height > 0, "resize: target size {}x{} must be positive", out_width,
           out_height);
  LB_CHECK(image.width > 0 && image.height > 0, "resize: empty source image ({}x{})", image.width,
           image.height);
  const bool need_horizontal = out_width != image.width;
  const bool need_vertical = out_height != image.height;
  if (!need_horizontal && !need_vertical) return image;

  ResampleWeights vertical = detail::bicubic_weights(image.height, out_height);
  // Rows the vertical pass will read; only those are resampled horizontally.
  const int first_row = vertical.first.front();
  const int end_row = vertical.first.back() + vertical.count.back();

  RgbImage horizontal_out;
  const RgbImage* source = &image;
  if (need_horizontal) {
    const ResampleWeights horizontal = detail::bicubic_weights(image.width, out_width);
    horizontal_out.width = out_width;
    horizontal_out.height = end_row - first_row;
    horizontal_out.rgb.resize(horizontal_out.row_bytes() * horizontal_out.height);
    resample_rows(image, first_row, horizontal, horizontal_out, fast);
    for (int& f : vertical.first) f -= first_row;
    source = &horizontal_out;
  }
  if (!need_vertical) return horizontal_out;

  RgbImage out;
  out.width = source->width;
  out.height = out_height;
  out.rgb.resize(out.row_bytes() * out_height);
  resample_columns(*source, vertical, out);
  return out;
}

}  // namespace

RgbImage resize_bicubic(const RgbImage& image, int out_width, int out_height) {
  return resize_with(image, out_width, out_height, /*fast=*/true);
}

RgbImage detail::resize_bicubic_scalar(const RgbImage& image, int out_width, int out_height) {
  return resize_with(image, out_width, out_height, /*fast=*/false);
}

}  // namespace lingbot::io
