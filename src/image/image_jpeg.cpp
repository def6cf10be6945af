// JPEG through libjpeg-turbo, configured as PIL configures it.
//
// PIL (JpegImagePlugin + JpegDecode.c) picks the mode from the component
// count (1 "L", 3 "RGB", 4 "CMYK"; anything else or a precision other than
// 8 bits is refused), lets libjpeg guess the stored colour space, and keeps
// libjpeg's defaults (islow DCT, fancy upsampling): so do we, which makes the
// decoded samples identical. Four-channel files are read as "CMYK;I"
// (Adobe's inverted CMYK, always) and convert("RGB") then applies
// cmyk2rgb: nk = 255 - K, R = clip(nk - nk * C / 255) with Pillow's rounded
// division, where C and K are the inverted samples.
//
// A file that ends early is an error, as it is for PIL ("image file is
// truncated"); libjpeg's other warnings (corrupt entropy data and the like)
// are ignored, as PIL ignores them.
//
// libjpeg reports errors through error_exit, which must not return: ours
// longjmps back into the small function that made the failing call. Those
// functions call setjmp first and hold no C++ object with a destructor, so
// the jump skips no cleanup; the caller owns everything and turns a `false`
// into a lingbot::Error.
#include "image/image_codecs.h"

#include "core/error.h"

#include <csetjmp>
#include <cstdio>
#include <cstring>
#include <string_view>

// clang-format off
#include <jpeglib.h>
#include <jerror.h>
// clang-format on

namespace lingbot::io::detail {

namespace {

struct JpegReader {
  jpeg_decompress_struct cinfo{};
  jpeg_error_mgr errors{};
  std::jmp_buf jump{};
  char message[JMSG_LENGTH_MAX] = {};
  bool created = false;
};

JpegReader& reader_of(j_common_ptr cinfo) { return *static_cast<JpegReader*>(cinfo->client_data); }

void on_jpeg_error(j_common_ptr cinfo) {
  JpegReader& reader = reader_of(cinfo);
  (*cinfo->err->format_message)(cinfo, reader.message);
  std::longjmp(reader.jump, 1);
}

void on_jpeg_message(j_common_ptr cinfo, int level) {
  // level < 0: a warning. Only running out of data matters to PIL.
  if (level < 0 && cinfo->err->msg_code == JWRN_JPEG_EOF) {
    JpegReader& reader = reader_of(cinfo);
    std::snprintf(reader.message, sizeof reader.message, "file is truncated");
    std::longjmp(reader.jump, 1);
  }
}

// Creates the decompressor on `data` (or `file` when not null) and reads the
// headers, keeping APP1 segments (EXIF, XMP).
bool read_jpeg_header(JpegReader& r, const uint8_t* data, size_t size, std::FILE* file) {
  if (setjmp(r.jump)) return false;
  r.cinfo.err = jpeg_std_error(&r.errors);
  r.errors.error_exit = on_jpeg_error;
  r.errors.emit_message = on_jpeg_message;
  r.cinfo.client_data = &r;
  jpeg_create_decompress(&r.cinfo);
  r.created = true;
  if (file != nullptr) {
    jpeg_stdio_src(&r.cinfo, file);
  } else {
    jpeg_mem_src(&r.cinfo, data, static_cast<unsigned long>(size));
  }
  jpeg_save_markers(&r.cinfo, JPEG_APP0 + 1, 0xFFFF);
  jpeg_read_header(&r.cinfo, TRUE);
  return true;
}

// Decodes every scanline into `out` (rows of `row_bytes`).
bool read_jpeg_pixels(JpegReader& r, uint8_t* out, size_t row_bytes) {
  if (setjmp(r.jump)) return false;
  jpeg_start_decompress(&r.cinfo);
  if (r.cinfo.output_width != r.cinfo.image_width || r.cinfo.output_height != r.cinfo.image_height ||
      static_cast<size_t>(r.cinfo.output_width) * r.cinfo.output_components != row_bytes) {
    std::snprintf(r.message, sizeof r.message, "unexpected output geometry");
    return false;
  }
  while (r.cinfo.output_scanline < r.cinfo.output_height) {
    JSAMPROW row = out + static_cast<size_t>(r.cinfo.output_scanline) * row_bytes;
    jpeg_read_scanlines(&r.cinfo, &row, 1);
  }
  jpeg_finish_decompress(&r.cinfo);
  return true;
}

class JpegReadGuard {
 public:
  explicit JpegReadGuard(JpegReader& r) : r_(r) {}
  ~JpegReadGuard() {
    if (r_.created) jpeg_destroy_decompress(&r_.cinfo);
  }
  JpegReadGuard(const JpegReadGuard&) = delete;
  JpegReadGuard& operator=(const JpegReadGuard&) = delete;

 private:
  JpegReader& r_;
};

std::string one_line(const char* message) {
  std::string s(message);
  for (char& c : s) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  return s;
}

// EXIF and XMP from the saved APP1 segments, as recent Pillow collects them:
// the first "Exif\0\0" segment, followed by the payload of any later ones;
// the XMP packet after "http://ns.adobe.com/xap/1.0/\0".
OrientationMetadata orientation_metadata(const jpeg_decompress_struct& cinfo) {
  constexpr std::string_view kExif("Exif\0\0", 6);
  constexpr std::string_view kXmp("http://ns.adobe.com/xap/1.0/\0", 29);
  OrientationMetadata meta;
  for (jpeg_saved_marker_ptr m = cinfo.marker_list; m != nullptr; m = m->next) {
    if (m->marker != JPEG_APP0 + 1) continue;
    const std::string_view body(reinterpret_cast<const char*>(m->data), m->data_length);
    if (body.substr(0, kExif.size()) == kExif) {
      if (!meta.has_exif) {
        meta.exif.assign(body.begin(), body.end());
        meta.has_exif = true;
      } else {
        meta.exif.insert(meta.exif.end(), body.begin() + kExif.size(), body.end());
      }
    } else if (body.substr(0, kXmp.size()) == kXmp) {
      meta.xmp.assign(body.substr(kXmp.size()));
    }
  }
  return meta;
}

// Checks what PIL checks, and asks libjpeg for PIL's output colour space.
void choose_output_space(JpegReader& r, const std::string& name) {
  LB_CHECK(r.cinfo.data_precision == 8, "{}: cannot handle {}-bit JPEG samples", name,
           r.cinfo.data_precision);
  switch (r.cinfo.num_components) {
    case 1: r.cinfo.out_color_space = JCS_GRAYSCALE; break;
    case 3: r.cinfo.out_color_space = JCS_RGB; break;
    case 4: r.cinfo.out_color_space = JCS_CMYK; break;
    default: fail("{}: cannot handle {}-layer JPEG images", name, r.cinfo.num_components);
  }
  check_pixel_count(r.cinfo.image_width, r.cinfo.image_height, name);
}

uint8_t muldiv255(unsigned a, unsigned b) {
  const unsigned tmp = a * b + 128;
  return static_cast<uint8_t>(((tmp >> 8) + tmp) >> 8);
}

// Samples as libjpeg outputs them -> RGB (in place when already RGB).
void to_rgb(int components, const std::vector<uint8_t>& samples, RgbImage& out) {
  const size_t n = static_cast<size_t>(out.width) * out.height;
  if (components == 3) {
    return;  // decoded straight into out.rgb
  }
  uint8_t* dst = out.rgb.data();
  if (components == 1) {
    for (size_t i = 0; i < n; ++i) dst[3 * i] = dst[3 * i + 1] = dst[3 * i + 2] = samples[i];
    return;
  }
  for (size_t i = 0; i < n; ++i) {
    const uint8_t* s = samples.data() + 4 * i;
    const unsigned k_inverted = 255u - s[3];
    const unsigned nk = 255u - k_inverted;
    for (int c = 0; c < 3; ++c) {
      const int v = static_cast<int>(nk) - muldiv255(255u - s[c], nk);
      dst[3 * i + c] = static_cast<uint8_t>(v < 0 ? 0 : v);
    }
  }
}

}  // namespace

DecodedImage decode_jpeg(const uint8_t* data, size_t size, const std::string& name) {
  JpegReader reader;
  JpegReadGuard guard(reader);
  LB_CHECK(read_jpeg_header(reader, data, size, nullptr), "{}: corrupt JPEG ({})", name,
           one_line(reader.message));
  choose_output_space(reader, name);

  DecodedImage out;
  out.orientation = orientation_metadata(reader.cinfo);
  out.pixels.width = static_cast<int>(reader.cinfo.image_width);
  out.pixels.height = static_cast<int>(reader.cinfo.image_height);
  out.pixels.rgb.resize(out.pixels.row_bytes() * out.pixels.height);
  const int components = reader.cinfo.num_components;
  std::vector<uint8_t> samples;
  uint8_t* target = out.pixels.rgb.data();
  if (components != 3) {
    samples.resize(static_cast<size_t>(out.pixels.width) * out.pixels.height * components);
    target = samples.data();
  }
  LB_CHECK(read_jpeg_pixels(reader, target, static_cast<size_t>(out.pixels.width) * components),
           "{}: corrupt JPEG ({})", name, one_line(reader.message));
  to_rgb(components, samples, out.pixels);
  return out;
}

StoredImageInfo probe_jpeg(std::FILE* file, const std::string& name) {
  JpegReader reader;
  JpegReadGuard guard(reader);
  LB_CHECK(read_jpeg_header(reader, nullptr, 0, file), "{}: corrupt JPEG ({})", name,
           one_line(reader.message));
  choose_output_space(reader, name);
  StoredImageInfo info;
  info.width = static_cast<int>(reader.cinfo.image_width);
  info.height = static_cast<int>(reader.cinfo.image_height);
  info.orientation = orientation_metadata(reader.cinfo);
  return info;
}

}  // namespace lingbot::io::detail
