// OpenEXR float images out (Debian's libopenexr-dev), for `--depth-exr`.
// Optional at build time (CMake finds OpenEXR or not): a build without it
// still links, and asking it for an EXR is a one-line error.
#pragma once

#include <string>

namespace lingbot::io {

// Whether this build writes OpenEXR.
bool exr_supported();

// Throws "... built without OpenEXR ..." naming `flag` when !exr_supported().
void require_exr(const std::string& flag);

// A single-channel (Z) 32-bit float image, ZIP-compressed (lossless), rows
// top to bottom; written under a temporary name and renamed into place.
void write_exr_depth(const std::string& path, const float* depth, int width, int height);

}  // namespace lingbot::io
