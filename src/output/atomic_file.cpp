#include "output/atomic_file.h"

#include "core/error.h"
#include "output/temporary_files.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <random>

namespace lingbot::io {

AtomicFile::AtomicFile(std::string path) : path_(std::move(path)) {
  // The process id and a random number keep two writers of one folder (two
  // processes, or two AtomicFiles of one) from sharing a temporary file.
  const size_t slash = path_.rfind('/');
  const std::string dir = slash == std::string::npos ? std::string() : path_.substr(0, slash + 1);
  const std::string base = slash == std::string::npos ? path_ : path_.substr(slash + 1);
  temp_path_ = dir + "." + base + ".tmp" + std::to_string(getpid()) + "-" + std::to_string(std::random_device{}());
  // Registered, so that a second Ctrl-C (which exits at once) removes it too.
  register_temporary(temp_path_);
  file_ = std::fopen(temp_path_.c_str(), "wb");
  if (!file_) {
    const int e = errno;
    unregister_temporary(temp_path_);
    fail("{}: cannot create: {}", path_, std::strerror(e));
  }
}

AtomicFile::~AtomicFile() {
  if (file_) {
    std::fclose(file_);
    std::remove(temp_path_.c_str());
  }
  unregister_temporary(temp_path_);
}

void AtomicFile::write(const void* data, size_t bytes) {
  if (bytes && std::fwrite(data, 1, bytes, file_) != bytes) fail("{}: write failed: {}", path_, std::strerror(errno));
}

void AtomicFile::commit() {
  const bool flushed = std::fflush(file_) == 0 && !std::ferror(file_);
  const int saved = errno;
  const bool closed = std::fclose(file_) == 0;
  file_ = nullptr;
  if (!flushed || !closed) {
    std::remove(temp_path_.c_str());
    fail("{}: write failed: {}", path_, std::strerror(flushed ? errno : saved));
  }
  if (std::rename(temp_path_.c_str(), path_.c_str()) != 0) {
    const int e = errno;
    std::remove(temp_path_.c_str());
    fail("{}: cannot rename into place: {}", path_, std::strerror(e));
  }
}

void make_dirs(const std::string& dir) {
  if (dir.empty()) return;
  struct stat st {};
  if (stat(dir.c_str(), &st) == 0) {
    LB_CHECK(S_ISDIR(st.st_mode), "{}: exists and is not a folder", dir);
    return;
  }
  const size_t slash = dir.find_last_of('/', dir.size() > 1 ? dir.size() - 2 : 0);
  if (slash != std::string::npos && slash > 0) make_dirs(dir.substr(0, slash));
  if (mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) fail("{}: cannot create the folder: {}", dir, std::strerror(errno));
}

}  // namespace lingbot::io
