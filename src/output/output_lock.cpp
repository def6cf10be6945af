#include "output/output_lock.h"

#include "core/error.h"
#include "output/temporary_files.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string>

namespace lingbot::io {

namespace {

long read_pid(int fd) {
  char text[32] = {};
  const ssize_t n = pread(fd, text, sizeof text - 1, 0);
  return n > 0 ? std::strtol(text, nullptr, 10) : 0;
}

}  // namespace

OutputLock::OutputLock(const std::string& dir, const std::string& flag) : path_(dir + "/.lingbot.lock") {
  // The holder removes the file before unlocking, so a lock won on a file
  // already unlinked (or replaced) is worthless: check the inode and retry.
  for (;;) {
    fd_ = open(path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd_ < 0) fail("{} {}: cannot create the lock file {}: {}", flag, dir, path_, std::strerror(errno));
    if (flock(fd_, LOCK_EX | LOCK_NB) != 0) {
      const int e = errno;
      const long holder = read_pid(fd_);
      close(fd_);
      fd_ = -1;
      if (e == EWOULDBLOCK)
        fail("{} {}: another lingbot-map run (pid {}) is writing there; wait for it or choose another folder", flag,
             dir, holder);
      fail("{} {}: cannot lock {}: {}", flag, dir, path_, std::strerror(e));
    }
    struct stat held {}, named {};
    if (fstat(fd_, &held) == 0 && stat(path_.c_str(), &named) == 0 && held.st_ino == named.st_ino &&
        held.st_dev == named.st_dev)
      break;
    close(fd_);
    fd_ = -1;
  }
  stale_pid_ = read_pid(fd_);  // a pid here: its run died without removing the file
  const std::string pid = std::to_string(getpid()) + "\n";
  if (ftruncate(fd_, 0) != 0 || pwrite(fd_, pid.data(), pid.size(), 0) != static_cast<ssize_t>(pid.size())) {
    const int e = errno;
    unlink(path_.c_str());
    close(fd_);
    fd_ = -1;
    fail("{} {}: cannot write the lock file {}: {}", flag, dir, path_, std::strerror(e));
  }
  register_temporary(path_);  // a second Ctrl-C removes it on its way out
}

OutputLock::~OutputLock() {
  if (fd_ < 0) return;
  unregister_temporary(path_);
  unlink(path_.c_str());
  close(fd_);  // releases the flock
}

}  // namespace lingbot::io
