// Frames in: upstream's load_and_preprocess_images (lingbot_map/utils/load_fn.py).
//
// For one image of W x H pixels (after EXIF orientation), with
// S = image_size and P = patch_size:
//   crop: resize to S x round(H * (S / W) / P) * P   (Python's round: half to even)
//         then keep the middle S rows if taller than S (top = (h - S) // 2)
//   pad:  the longer side becomes S, the other round(... / P) * P; then pad
//         with white (1.0) to S x S, the smaller half of the padding at the
//         top / left (negative amounts crop, as torch.nn.functional.pad does)
// Resizing is PIL's BICUBIC (resize.h); pixels become float32 v / 255 in
// [3, H, W] (torchvision's ToTensor). A set of frames whose sizes differ is
// padded with white to the largest height and width, centred the same way.
//
// The demo upstream runs uses mode "crop", S = 518, P = 14.
#pragma once

#include "core/tensor.h"
#include "image/image.h"

#include <string>
#include <vector>

namespace lingbot::io {

struct PreprocessOptions {
  enum class Mode { Crop, Pad } mode = Mode::Crop;
  int image_size = 518;
  int patch_size = 14;
};

// Where one image goes: the size it is resized to, the size of the
// preprocessed frame (before a set is padded to a common size) and where the
// resized image sits in that frame (white around it; a negative offset means
// rows / columns cut off, as the crop does).
struct FrameGeometry {
  int resized_width = 0, resized_height = 0;
  int height = 0, width = 0;  // of the [3, H, W] result
  int top = 0, left = 0;      // frame pixel (top, left) = resized pixel (0, 0)
};

// `name` labels errors (e.g. an image so wide its height would round to 0).
FrameGeometry frame_geometry(int width, int height, const PreprocessOptions& options,
                             const std::string& name = "image");

// One image -> float32 [3, H, W] in [0, 1], exactly as upstream.
Tensor preprocess(const RgbImage& image, const PreprocessOptions& options);

// The order of a folder's frames:
//   Natural: names compared with runs of digits as numbers (frame_2 before
//            frame_10); equal to Name for zero-padded numbers, the usual case
//   Name:    byte order of the names (Python's sorted(), upstream's order)
//   Mtime:   modification time, oldest first (ties by Natural)
enum class FrameOrder { Natural, Name, Mtime };
// "natural", "name", "mtime"; throws naming the flag otherwise.
FrameOrder parse_frame_order(const std::string& text);
// a < b in natural order: digit runs as numbers (leading zeros ignored, then
// the shorter run first), everything else byte by byte.
bool natural_less(const std::string& a, const std::string& b);

// The .png / .jpg / .jpeg files (any letter case) directly in `dir`, in
// `order`. Hidden files (".name") are skipped, as upstream's glob skips
// them. An empty, missing or image-less folder is an error naming it. When
// the natural order differs from the byte order upstream would use, the log
// says so.
std::vector<std::string> list_images(const std::string& dir, FrameOrder order = FrameOrder::Natural);

// A sequence of frames decoded on demand, so a long folder never has to be
// in memory at once. The constructor reads only headers, to learn every
// frame's size and so the common (max) output size; frame(i) then decodes,
// preprocesses and pads frame i.
class FrameSource {
 public:
  FrameSource(std::vector<std::string> paths, PreprocessOptions options);

  int size() const { return static_cast<int>(paths_.size()); }
  int output_height() const { return height_; }
  int output_width() const { return width_; }
  const std::vector<std::string>& paths() const { return paths_; }
  const PreprocessOptions& options() const { return options_; }

  // float32 [3, output_height(), output_width()].
  Tensor frame(int i) const;
  // Same, written into `out` (float32 [3, H, W], e.g. a slice of a batch).
  void frame_into(int i, Tensor& out) const;

 private:
  std::vector<std::string> paths_;
  PreprocessOptions options_;
  std::vector<FrameGeometry> geometry_;
  int height_ = 0, width_ = 0;
};

// All frames at once: float32 [S, 3, H, W] (decoded in parallel).
Tensor load_images(const std::vector<std::string>& paths, const PreprocessOptions& options);

}  // namespace lingbot::io
