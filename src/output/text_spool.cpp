#include "output/text_spool.h"

#include "core/error.h"
#include "output/temporary_files.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <random>

namespace lingbot::io {

TextSpool::TextSpool(const std::string& final_path) : final_path_(final_path) {
  const size_t slash = final_path.rfind('/');
  const std::string dir = slash == std::string::npos ? std::string() : final_path.substr(0, slash + 1);
  const std::string base = slash == std::string::npos ? final_path : final_path.substr(slash + 1);
  path_ = dir + "." + base + ".part" + std::to_string(getpid()) + "-" + std::to_string(std::random_device{}());
  register_temporary(path_);
  file_ = std::fopen(path_.c_str(), "w+b");
  if (!file_) {
    const int e = errno;
    unregister_temporary(path_);
    fail("{}: cannot create: {}", final_path_, std::strerror(e));
  }
}

TextSpool::~TextSpool() {
  if (file_) std::fclose(file_);
  std::remove(path_.c_str());
  unregister_temporary(path_);
}

void TextSpool::append(const std::string& bytes) {
  if (!bytes.empty() && std::fwrite(bytes.data(), 1, bytes.size(), file_) != bytes.size())
    fail("{}: write failed: {}", final_path_, std::strerror(errno));
  ++entries_;
}

void TextSpool::copy_into(AtomicFile& out) {
  if (std::fflush(file_) != 0 || std::fseek(file_, 0, SEEK_SET) != 0)
    fail("{}: write failed: {}", final_path_, std::strerror(errno));
  char buffer[1 << 16];
  size_t n = 0;
  while ((n = std::fread(buffer, 1, sizeof buffer, file_)) > 0) out.write(buffer, n);
  if (std::ferror(file_)) fail("{}: cannot read back its parts: {}", final_path_, std::strerror(errno));
  std::fseek(file_, 0, SEEK_END);
}

}  // namespace lingbot::io
