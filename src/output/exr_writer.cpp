#include "output/exr_writer.h"

#include "core/error.h"
#include "output/temporary_files.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <random>

#ifdef LINGBOT_HAVE_OPENEXR
#include <OpenEXR/ImfChannelList.h>
#include <OpenEXR/ImfFrameBuffer.h>
#include <OpenEXR/ImfHeader.h>
#include <OpenEXR/ImfOutputFile.h>
#endif

namespace lingbot::io {

bool exr_supported() {
#ifdef LINGBOT_HAVE_OPENEXR
  return true;
#else
  return false;
#endif
}

void require_exr(const std::string& flag) {
  LB_CHECK(exr_supported(), "{}: this lingbot-map was built without OpenEXR (install libopenexr-dev and rebuild)",
           flag);
}

void write_exr_depth(const std::string& path, const float* depth, int width, int height) {
  require_exr("--depth-exr");
#ifdef LINGBOT_HAVE_OPENEXR
  // OpenEXR opens the file itself, so AtomicFile's FILE* does not fit: the
  // same scheme by hand (a temporary beside it, registered for the signal
  // handler, renamed when whole).
  const size_t slash = path.rfind('/');
  const std::string dir = slash == std::string::npos ? std::string() : path.substr(0, slash + 1);
  const std::string base = slash == std::string::npos ? path : path.substr(slash + 1);
  const std::string temp = dir + "." + base + ".tmp" + std::to_string(std::random_device{}());
  register_temporary(temp);
  try {
    Imf::Header header(width, height);
    header.compression() = Imf::ZIP_COMPRESSION;
    header.channels().insert("Z", Imf::Channel(Imf::FLOAT));
    Imf::FrameBuffer frame;
    frame.insert("Z", Imf::Slice(Imf::FLOAT, reinterpret_cast<char*>(const_cast<float*>(depth)), sizeof(float),
                                 sizeof(float) * static_cast<size_t>(width)));
    {
      Imf::OutputFile out(temp.c_str(), header);
      out.setFrameBuffer(frame);
      out.writePixels(height);
    }  // closed (and flushed) here
  } catch (const std::exception& e) {
    std::remove(temp.c_str());
    unregister_temporary(temp);
    fail("{}: cannot write: {}", path, e.what());
  }
  if (std::rename(temp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    std::remove(temp.c_str());
    unregister_temporary(temp);
    fail("{}: cannot rename into place: {}", path, std::strerror(err));
  }
  unregister_temporary(temp);
#else
  (void)path, (void)depth, (void)width, (void)height;
#endif
}

}  // namespace lingbot::io
