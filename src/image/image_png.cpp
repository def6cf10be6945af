// PNG: pixels through libpng, metadata through a small chunk walker.
//
// PIL opens a PNG in a mode chosen from (bit depth, colour type)
// (PngImagePlugin._MODES) and upstream then calls convert("RGB"), compositing
// onto white only when the mode is "RGBA". Per colour type that gives:
//   gray 1/2/4/8 bit   "1"/"L"  -> v scaled to 0..255 (x255, x85, x17, x1)
//   gray 16 bit        "I"      -> min(v, 255)          (i2rgb / I16_RGB clip)
//   RGB 8 / 16 bit     "RGB"    -> high byte of each sample
//   palette 1..8 bit   "P"      -> palette colour; tRNS ignored; indices past
//                                  the palette are black (Pillow >= 10.1)
//   gray+alpha 8 bit   "LA"     -> gray, alpha dropped (la2rgb)
//   gray+alpha 16 bit  "RGBA"   -> high bytes, composited onto white
//   RGBA 8 / 16 bit    "RGBA"   -> high bytes, composited onto white
// tRNS, gAMA, iCCP and the like never change the pixels PIL returns.
//
// libpng reports errors by longjmp. Every libpng call that can fail runs in
// a small function that calls setjmp first and holds no C++ object with a
// destructor, so the jump skips no cleanup; the caller owns the libpng
// structs and all buffers and turns a `false` into a lingbot::Error.
#include "image/image_codecs.h"

#include "core/error.h"

#include <png.h>
#include <zlib.h>

#include <algorithm>
#include <array>
#include <climits>
#include <csetjmp>
#include <cstring>
#include <string_view>

namespace lingbot::io::detail {

namespace {

// ---------------------------------------------------------------------------
// Chunk walker: IHDR size and the chunks orientation can come from.
// ---------------------------------------------------------------------------

constexpr uint8_t kPngSignature[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
// Metadata chunks larger than this are skipped, not read.
constexpr uint32_t kMaxMetadataChunk = 16u << 20;
// Pillow refuses to decompress text chunks beyond ImageFile's MAX_TEXT_CHUNK.
constexpr size_t kMaxTextBytes = 1u << 20;

// Forward-only bytes: memory when decoding, a FILE when probing.
class ByteSource {
 public:
  virtual ~ByteSource() = default;
  virtual bool read(void* dst, size_t n) = 0;  // exactly n bytes, or false
  virtual bool skip(uint64_t n) = 0;
};

class MemorySource final : public ByteSource {
 public:
  MemorySource(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  bool read(void* dst, size_t n) override {
    if (n > size_ - pos_) return false;
    if (n == 0) return true;  // dst may be null then (an empty chunk), which memcpy does not allow
    std::memcpy(dst, data_ + pos_, n);
    pos_ += n;
    return true;
  }
  bool skip(uint64_t n) override {
    if (n > size_ - pos_) return false;
    pos_ += n;
    return true;
  }

 private:
  const uint8_t* data_;
  size_t size_, pos_ = 0;
};

class FileSource final : public ByteSource {
 public:
  explicit FileSource(std::FILE* file) : file_(file) {}
  bool read(void* dst, size_t n) override { return std::fread(dst, 1, n, file_) == n; }
  bool skip(uint64_t n) override {
    return n <= static_cast<uint64_t>(LONG_MAX) && std::fseek(file_, static_cast<long>(n), SEEK_CUR) == 0;
  }

 private:
  std::FILE* file_;
};

uint32_t read_be32(const uint8_t* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | p[3];
}

// zlib stream -> bytes, at most `limit` of them; false when corrupt or too big.
bool inflate_bounded(const uint8_t* data, size_t size, size_t limit, std::string& out) {
  z_stream z{};
  if (inflateInit(&z) != Z_OK) return false;
  out.clear();
  std::array<char, 16384> chunk;
  z.next_in = const_cast<Bytef*>(data);
  z.avail_in = static_cast<uInt>(size);
  int status = Z_OK;
  while (status == Z_OK) {
    z.next_out = reinterpret_cast<Bytef*>(chunk.data());
    z.avail_out = chunk.size();
    status = inflate(&z, Z_NO_FLUSH);
    out.append(chunk.data(), chunk.size() - z.avail_out);
    if (out.size() > limit) status = Z_MEM_ERROR;
    if (status == Z_BUF_ERROR && z.avail_in == 0) break;  // input ended early
  }
  inflateEnd(&z);
  return status == Z_STREAM_END;
}

// One tEXt / zTXt / iTXt chunk -> (keyword, text). False if not decodable.
bool parse_text_chunk(std::string_view type, const std::vector<uint8_t>& body, std::string& keyword,
                      std::string& text) {
  const auto* bytes = body.data();
  const auto nul = std::find(body.begin(), body.end(), uint8_t{0});
  if (nul == body.end()) return false;
  keyword.assign(body.begin(), nul);
  size_t pos = static_cast<size_t>(nul - body.begin()) + 1;
  if (type == "tEXt") {
    text.assign(reinterpret_cast<const char*>(bytes) + pos, body.size() - pos);
    return true;
  }
  if (type == "zTXt") {
    if (pos >= body.size() || bytes[pos] != 0) return false;  // compression method 0 only
    return inflate_bounded(bytes + pos + 1, body.size() - pos - 1, kMaxTextBytes, text);
  }
  // iTXt: keyword \0 compressed-flag method language \0 translated-keyword \0 text
  if (pos + 2 > body.size()) return false;
  const bool compressed = bytes[pos] != 0;
  const uint8_t method = bytes[pos + 1];
  pos += 2;
  for (int field = 0; field < 2; ++field) {
    const auto end = std::find(body.begin() + static_cast<std::ptrdiff_t>(pos), body.end(), uint8_t{0});
    if (end == body.end()) return false;
    pos = static_cast<size_t>(end - body.begin()) + 1;
  }
  if (!compressed) {
    text.assign(reinterpret_cast<const char*>(bytes) + pos, body.size() - pos);
    return true;
  }
  if (method != 0) return false;
  return inflate_bounded(bytes + pos, body.size() - pos, kMaxTextBytes, text);
}

// ImageMagick's "Raw profile type exif": "\nexif\n   <length>\n<hex lines>".
// Pillow: bytes.fromhex("".join(text.split("\n")[3:])).
bool decode_raw_profile(const std::string& text, std::vector<uint8_t>& out) {
  size_t pos = 0;
  for (int line = 0; line < 3; ++line) {
    pos = text.find('\n', pos);
    if (pos == std::string::npos) return false;
    ++pos;
  }
  out.clear();
  int high = -1;
  for (size_t i = pos; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '\n') continue;  // the lines are joined before parsing
    if (c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f') {
      if (high >= 0) return false;  // whitespace only between byte pairs
      continue;
    }
    int digit;
    if (c >= '0' && c <= '9') digit = c - '0';
    else if (c >= 'a' && c <= 'f') digit = c - 'a' + 10;
    else if (c >= 'A' && c <= 'F') digit = c - 'A' + 10;
    else return false;
    if (high < 0) {
      high = digit;
    } else {
      out.push_back(static_cast<uint8_t>(high * 16 + digit));
      high = -1;
    }
  }
  return high < 0;
}

struct PngChunkScan {
  uint32_t width = 0, height = 0;
  uint8_t bit_depth = 0, color_type = 0;
  OrientationMetadata orientation;
};

// Walks every chunk header, reading only IHDR and the metadata chunks and
// seeking past the rest (pixel data included). A file that ends early just
// ends the walk: PIL does not need IEND either.
PngChunkScan scan_png_chunks(ByteSource& src, const std::string& name) {
  uint8_t signature[8];
  LB_CHECK(src.read(signature, 8) && std::memcmp(signature, kPngSignature, 8) == 0, "{}: not a PNG file",
           name);
  PngChunkScan scan;
  bool have_exif_chunk = false;
  std::vector<uint8_t> raw_profile;
  bool have_raw_profile = false;
  bool first = true;
  for (;;) {
    uint8_t header[8];
    if (!src.read(header, 8)) break;
    const uint32_t length = read_be32(header);
    const std::string_view type(reinterpret_cast<const char*>(header + 4), 4);
    if (length > 0x7FFFFFFFu) break;  // not a valid chunk length: stop
    if (first) {
      LB_CHECK(type == "IHDR" && length == 13, "{}: corrupt PNG (first chunk is not IHDR)", name);
      uint8_t ihdr[13];
      LB_CHECK(src.read(ihdr, 13), "{}: corrupt PNG (file is truncated in IHDR)", name);
      scan.width = read_be32(ihdr);
      scan.height = read_be32(ihdr + 4);
      scan.bit_depth = ihdr[8];
      scan.color_type = ihdr[9];
      first = false;
      if (!src.skip(4)) break;
      continue;
    }
    if (type == "IEND") break;
    const bool metadata = type == "eXIf" || type == "tEXt" || type == "zTXt" || type == "iTXt";
    if (metadata && length <= kMaxMetadataChunk) {
      std::vector<uint8_t> body(length);
      if (!src.read(body.data(), length)) break;
      if (type == "eXIf") {
        // The last one wins, as in recent Pillow (whose exif_transpose loads the pixels, and
        // with them any chunks after IDAT, before reading the EXIF).
        have_exif_chunk = true;
        scan.orientation.exif = std::move(body);
      } else {
        std::string keyword, text;
        if (parse_text_chunk(type, body, keyword, text)) {
          if (keyword == "Raw profile type exif") {
            have_raw_profile = decode_raw_profile(text, raw_profile);
          } else if (keyword == "XML:com.adobe.xmp") {
            scan.orientation.xmp = std::move(text);
          }
        }
      }
      if (!src.skip(4)) break;
    } else if (!src.skip(uint64_t{length} + 4)) {
      break;
    }
  }
  LB_CHECK(!first, "{}: corrupt PNG (file is truncated before IHDR)", name);
  if (have_exif_chunk) {
    scan.orientation.has_exif = true;
  } else if (have_raw_profile) {
    scan.orientation.has_exif = true;
    scan.orientation.exif = std::move(raw_profile);
  }
  return scan;
}

// ---------------------------------------------------------------------------
// libpng, behind setjmp.
// ---------------------------------------------------------------------------

// Everything a longjmp must not lose is plain data in here.
struct PngReader {
  png_structp png = nullptr;
  png_infop info = nullptr;
  const uint8_t* data = nullptr;
  size_t size = 0, pos = 0;
  char message[256] = {};
};

void on_png_error(png_structp png, png_const_charp message) {
  auto* reader = static_cast<PngReader*>(png_get_error_ptr(png));
  std::snprintf(reader->message, sizeof reader->message, "%s", message);
  png_longjmp(png, 1);
}

void on_png_warning(png_structp, png_const_charp) {}  // what libpng only warns about, PIL accepts

void read_png_bytes(png_structp png, png_bytep out, size_t n) {
  auto* reader = static_cast<PngReader*>(png_get_io_ptr(png));
  if (n > reader->size - reader->pos) png_error(png, "file is truncated");
  std::memcpy(out, reader->data + reader->pos, n);
  reader->pos += n;
}

struct PngLayout {
  png_uint_32 width = 0, height = 0;
  int bit_depth = 0, color_type = 0;
  size_t row_bytes = 0;  // after png_set_packing: one byte per sample below 8 bits
  std::array<uint8_t, 256 * 3> palette{};  // black past the PLTE entries
  int palette_size = 0;
};

// Chunks whose content never changes PIL's pixels; libpng need not parse them.
constexpr png_byte kIgnoredChunks[] =
    "bKGD\0cHRM\0eXIf\0gAMA\0hIST\0iCCP\0iTXt\0oFFs\0pCAL\0pHYs\0sBIT\0sCAL\0sPLT\0sRGB\0tEXt\0tIME\0"
    "tRNS\0zTXt";

bool read_png_layout(PngReader& r, PngLayout& layout) {
  if (setjmp(png_jmpbuf(r.png))) return false;
  png_set_read_fn(r.png, &r, read_png_bytes);
  png_set_keep_unknown_chunks(r.png, PNG_HANDLE_CHUNK_NEVER, kIgnoredChunks,
                              static_cast<int>(sizeof kIgnoredChunks / 5));
  png_read_info(r.png, r.info);
  int interlace = 0;
  png_get_IHDR(r.png, r.info, &layout.width, &layout.height, &layout.bit_depth, &layout.color_type,
               &interlace, nullptr, nullptr);
  if (layout.color_type == PNG_COLOR_TYPE_PALETTE) {
    png_colorp entries = nullptr;
    int count = 0;
    if (png_get_PLTE(r.png, r.info, &entries, &count) & PNG_INFO_PLTE) {
      layout.palette_size = count < 256 ? count : 256;
      for (int i = 0; i < layout.palette_size; ++i) {
        layout.palette[3 * i + 0] = entries[i].red;
        layout.palette[3 * i + 1] = entries[i].green;
        layout.palette[3 * i + 2] = entries[i].blue;
      }
    }
  }
  if (layout.bit_depth < 8) png_set_packing(r.png);  // samples as raw values, one per byte
  png_set_interlace_handling(r.png);                 // Adam7 is assembled by libpng
  png_read_update_info(r.png, r.info);
  layout.row_bytes = png_get_rowbytes(r.png, r.info);
  return true;
}

bool read_png_rows(PngReader& r, png_bytepp rows) {
  if (setjmp(png_jmpbuf(r.png))) return false;
  png_read_image(r.png, rows);
  return true;
}

class PngReadGuard {
 public:
  explicit PngReadGuard(PngReader& r) : r_(r) {}
  ~PngReadGuard() { png_destroy_read_struct(&r_.png, r_.info ? &r_.info : nullptr, nullptr); }
  PngReadGuard(const PngReadGuard&) = delete;
  PngReadGuard& operator=(const PngReadGuard&) = delete;

 private:
  PngReader& r_;
};

// One row of raw samples -> RGB, per the table at the top of this file.
void convert_png_row(const PngLayout& layout, const uint8_t* raw, uint8_t* rgb) {
  const int n = static_cast<int>(layout.width);
  const bool wide = layout.bit_depth == 16;
  const int step = wide ? 2 : 1;  // bytes per sample; the high byte comes first
  auto put = [&](int x, uint8_t r, uint8_t g, uint8_t b) {
    rgb[3 * x + 0] = r;
    rgb[3 * x + 1] = g;
    rgb[3 * x + 2] = b;
  };
  switch (layout.color_type) {
    case PNG_COLOR_TYPE_GRAY:
      if (wide) {
        for (int x = 0; x < n; ++x) {
          const uint8_t* s = raw + 2 * x;
          const uint8_t v = s[0] != 0 ? 255 : s[1];  // 16-bit value clipped to 255
          put(x, v, v, v);
        }
      } else {
        const int scale = 255 / ((1 << layout.bit_depth) - 1);  // 255, 85, 17, 1
        for (int x = 0; x < n; ++x) {
          const auto v = static_cast<uint8_t>(raw[x] * scale);
          put(x, v, v, v);
        }
      }
      break;
    case PNG_COLOR_TYPE_RGB:
      for (int x = 0; x < n; ++x) {
        const uint8_t* s = raw + 3 * step * x;
        put(x, s[0], s[step], s[2 * step]);
      }
      break;
    case PNG_COLOR_TYPE_PALETTE:
      for (int x = 0; x < n; ++x) {
        const uint8_t* c = layout.palette.data() + 3 * raw[x];
        put(x, c[0], c[1], c[2]);
      }
      break;
    case PNG_COLOR_TYPE_GRAY_ALPHA:
      for (int x = 0; x < n; ++x) {
        const uint8_t* s = raw + 2 * step * x;
        const uint8_t v = wide ? composite_over_white(s[0], s[step]) : s[0];
        put(x, v, v, v);
      }
      break;
    case PNG_COLOR_TYPE_RGB_ALPHA:
      for (int x = 0; x < n; ++x) {
        const uint8_t* s = raw + 4 * step * x;
        const uint8_t a = s[3 * step];
        put(x, composite_over_white(s[0], a), composite_over_white(s[step], a),
            composite_over_white(s[2 * step], a));
      }
      break;
  }
}

std::string one_line(const char* message) {
  std::string s(message);
  for (char& c : s) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  return s;
}

}  // namespace

DecodedImage decode_png(const uint8_t* data, size_t size, const std::string& name) {
  MemorySource source(data, size);
  PngChunkScan scan = scan_png_chunks(source, name);
  check_pixel_count(scan.width, scan.height, name);

  PngReader reader;
  reader.data = data;
  reader.size = size;
  reader.png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &reader, on_png_error, on_png_warning);
  LB_CHECK(reader.png != nullptr, "{}: out of memory creating the PNG reader", name);
  PngReadGuard guard(reader);
  reader.info = png_create_info_struct(reader.png);
  LB_CHECK(reader.info != nullptr, "{}: out of memory creating the PNG reader", name);

  PngLayout layout;
  LB_CHECK(read_png_layout(reader, layout), "{}: corrupt PNG ({})", name, one_line(reader.message));

  std::vector<uint8_t> raw(layout.row_bytes * layout.height);
  std::vector<png_bytep> rows(layout.height);
  for (png_uint_32 y = 0; y < layout.height; ++y) rows[y] = raw.data() + y * layout.row_bytes;
  LB_CHECK(read_png_rows(reader, rows.data()), "{}: corrupt PNG ({})", name, one_line(reader.message));

  DecodedImage out;
  out.orientation = std::move(scan.orientation);
  out.pixels.width = static_cast<int>(layout.width);
  out.pixels.height = static_cast<int>(layout.height);
  out.pixels.rgb.resize(out.pixels.row_bytes() * layout.height);
  for (png_uint_32 y = 0; y < layout.height; ++y) {
    convert_png_row(layout, rows[y], out.pixels.row(static_cast<int>(y)));
  }
  return out;
}

StoredImageInfo probe_png(std::FILE* file, const std::string& name) {
  FileSource source(file);
  PngChunkScan scan = scan_png_chunks(source, name);
  LB_CHECK(scan.width > 0 && scan.height > 0 && scan.width <= 0x7FFFFFFFu && scan.height <= 0x7FFFFFFFu,
           "{}: corrupt PNG (image size {}x{})", name, scan.width, scan.height);
  check_pixel_count(scan.width, scan.height, name);
  StoredImageInfo info;
  info.width = static_cast<int>(scan.width);
  info.height = static_cast<int>(scan.height);
  info.orientation = std::move(scan.orientation);
  return info;
}

}  // namespace lingbot::io::detail
