#include "image/image_orientation.h"

#include <libexif/exif-data.h>

#include <climits>
#include <cstring>
#include <optional>

namespace lingbot::io::detail {

namespace {

constexpr uint8_t kExifHeader[6] = {'E', 'x', 'i', 'f', 0, 0};

// The IFD0 Orientation tag of an EXIF block.
//   nullopt   : no such tag (so XMP may supply one),
//   0         : a tag PIL would not act on (several values, odd type),
//   otherwise : its value.
std::optional<int> exif_orientation_tag(const std::vector<uint8_t>& exif) {
  // libexif wants the APP1 "Exif\0\0" header in front of the TIFF structure;
  // PNG eXIf chunks and ImageMagick's raw profiles may lack it (PIL accepts
  // both).
  std::vector<uint8_t> block;
  const bool has_header = exif.size() >= 6 && std::memcmp(exif.data(), kExifHeader, 6) == 0;
  if (!has_header) block.assign(kExifHeader, kExifHeader + 6);
  block.insert(block.end(), exif.begin(), exif.end());
  if (block.size() > UINT_MAX) return std::nullopt;

  ExifData* data = exif_data_new();
  if (data == nullptr) return std::nullopt;
  // "Follow the specification" would add or rewrite tags after loading; we
  // want to see what the file says, as PIL does.
  exif_data_unset_option(data, EXIF_DATA_OPTION_FOLLOW_SPECIFICATION);
  exif_data_load_data(data, block.data(), static_cast<unsigned int>(block.size()));

  std::optional<int> result;
  const ExifEntry* entry = exif_content_get_entry(data->ifd[EXIF_IFD_0], EXIF_TAG_ORIENTATION);
  if (entry != nullptr) {
    result = 0;
    const ExifByteOrder order = exif_data_get_byte_order(data);
    const unsigned element = exif_format_get_size(entry->format);
    if (entry->components == 1 && entry->data != nullptr && element > 0 && entry->size >= element) {
      switch (entry->format) {
        case EXIF_FORMAT_SHORT: result = exif_get_short(entry->data, order); break;
        case EXIF_FORMAT_SSHORT: result = exif_get_sshort(entry->data, order); break;
        case EXIF_FORMAT_LONG: {
          const ExifLong value = exif_get_long(entry->data, order);
          result = value <= 8 ? static_cast<int>(value) : 0;
          break;
        }
        case EXIF_FORMAT_SLONG: {
          const ExifSLong value = exif_get_slong(entry->data, order);
          result = value >= 0 && value <= 8 ? static_cast<int>(value) : 0;
          break;
        }
        case EXIF_FORMAT_BYTE: result = entry->data[0]; break;
        default: break;
      }
    }
  }
  exif_data_unref(data);
  return result;
}

// Pillow: re.search(r'tiff:Orientation(="|>)([0-9])', xmp) -> int(group 2).
std::optional<int> xmp_orientation(std::string_view xmp) {
  constexpr std::string_view kKey = "tiff:Orientation";
  for (size_t at = xmp.find(kKey); at != std::string_view::npos; at = xmp.find(kKey, at + 1)) {
    size_t next = at + kKey.size();
    if (xmp.substr(next, 2) == "=\"") {
      next += 2;
    } else if (xmp.substr(next, 1) == ">") {
      next += 1;
    } else {
      continue;
    }
    if (next < xmp.size() && xmp[next] >= '0' && xmp[next] <= '9') return xmp[next] - '0';
  }
  return std::nullopt;
}

}  // namespace

int resolve_orientation(const OrientationMetadata& meta) {
  std::optional<int> tag;
  if (meta.has_exif) tag = exif_orientation_tag(meta.exif);
  if (!tag && !meta.xmp.empty()) tag = xmp_orientation(meta.xmp);
  const int value = tag.value_or(1);
  return value >= 1 && value <= 8 ? value : 1;
}

bool orientation_swaps_axes(int orientation) { return orientation >= 5 && orientation <= 8; }

RgbImage apply_orientation(RgbImage image, int orientation) {
  if (orientation < 2 || orientation > 8) return image;
  const int64_t w = image.width, h = image.height;

  // Output pixel (dx, dy) reads source pixel number origin + dx*step_x + dy*step_y
  // (pixel numbers count row-major in the stored image). Derived from Pillow's
  // Geometry.c, e.g. ROTATE_270 writes out[x][h-1-y] = in[y][x].
  int64_t origin = 0, step_x = 1, step_y = w;
  switch (orientation) {
    case 2: origin = w - 1;               step_x = -1; step_y = w;  break;  // FLIP_LEFT_RIGHT
    case 3: origin = (w - 1) + (h - 1) * w; step_x = -1; step_y = -w; break;  // ROTATE_180
    case 4: origin = (h - 1) * w;         step_x = 1;  step_y = -w; break;  // FLIP_TOP_BOTTOM
    case 5: origin = 0;                   step_x = w;  step_y = 1;  break;  // TRANSPOSE
    case 6: origin = (h - 1) * w;         step_x = -w; step_y = 1;  break;  // ROTATE_270
    case 7: origin = (w - 1) + (h - 1) * w; step_x = -w; step_y = -1; break;  // TRANSVERSE
    case 8: origin = w - 1;               step_x = w;  step_y = -1; break;  // ROTATE_90
  }
  RgbImage out;
  out.width = static_cast<int>(orientation_swaps_axes(orientation) ? h : w);
  out.height = static_cast<int>(orientation_swaps_axes(orientation) ? w : h);
  out.rgb.resize(image.rgb.size());
  const uint8_t* src = image.rgb.data();
  const int out_w = out.width, out_h = out.height;

#pragma omp parallel for schedule(static) if (w * h > (int64_t{1} << 22))
  for (int dy = 0; dy < out_h; ++dy) {
    uint8_t* dst = out.row(dy);
    int64_t pixel = origin + dy * step_y;
    for (int dx = 0; dx < out_w; ++dx, pixel += step_x) {
      const uint8_t* s = src + pixel * 3;
      dst[3 * dx + 0] = s[0];
      dst[3 * dx + 1] = s[1];
      dst[3 * dx + 2] = s[2];
    }
  }
  return out;
}

}  // namespace lingbot::io::detail
