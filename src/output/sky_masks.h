// Precomputed sky masks, read as upstream reads its mask cache
// (lingbot_map/vis/sky_segmentation.py, demo.py --sky_mask_dir):
//   * one 8-bit grayscale image per frame, named after the frame's input file
//     (DIR/frame_0001.jpg for images/frame_0001.jpg); frames of a video are
//     NNNNNN (upstream extracts them to <video>_frames/NNNNNN.jpg), looked up
//     as DIR/NNNNNN.jpg, then DIR/NNNNNN.png;
//   * the value is a NON-sky score (255 = surely not sky). Upstream converts
//     a cached mask to [0,1] by clipping, not dividing by 255, and keeps a
//     pixel when that exceeds 0.1: so a pixel is sky exactly when its 8-bit
//     value is 0. We do the same, so a cache gives the points upstream's
//     viewer shows;
//   * a mask of another size than the frame is resized to it bilinearly
//     (cv2.INTER_LINEAR, pixel centres aligned, rounded to 8 bits), as
//     upstream does for masks made from the original files;
//   * where it is sky, the depth confidence becomes 0, so every confidence
//     filter drops the pixel.
// Upstream computes a missing mask with its skyseg.onnx model; lingbot-map
// does not run that model, so a missing mask is an error naming the file.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace lingbot::io {

struct Predictions;

// `value` of an 8-bit non-sky mask: sky or not, as upstream decides it.
inline bool is_sky(uint8_t value) { return value == 0; }

// The mask of one frame at `width` x `height`, resized if needed: 1 where sky.
std::vector<uint8_t> load_sky_mask(const std::string& path, int width, int height);

class SkyMasks {
 public:
  // `flag` names the option in messages; throws when `dir` is not a folder.
  SkyMasks(std::string dir, std::string flag = "--sky-masks");

  // The mask file of a frame (a name from predictions.npz's `frames`);
  // throws a one-line error naming the expected file when there is none.
  std::string mask_path(const std::string& frame_name) const;

  // Sets conf[y * width + x] = 0 where the frame's mask says sky; returns
  // the number of sky pixels. For viewers and writers alike.
  int64_t zero_sky_confidence(const std::string& frame_name, float* conf, int width, int height) const;

  const std::string& dir() const { return dir_; }

 private:
  std::string dir_, flag_;
};

// Every frame of a saved result (masks looked up by p.frame_files): the
// confidence becomes 0 where sky. Returns the number of sky pixels.
int64_t apply_sky_masks(const SkyMasks& masks, Predictions& p);

}  // namespace lingbot::io
