// One writer per output folder: `DIR/.lingbot.lock` holds the writer's pid
// and an flock() on it. A second run on the same folder is refused while the
// first holds it; the kernel drops the flock when its holder dies, so a lock
// file left by a killed run is taken over (and said so) rather than blocking
// the folder forever.
#pragma once

#include <string>

namespace lingbot::io {

class OutputLock {
 public:
  // Throws "FLAG DIR: another lingbot-map run (pid N) is writing there" when held.
  OutputLock(const std::string& dir, const std::string& flag);
  ~OutputLock();  // removes the lock file, then releases the lock
  OutputLock(const OutputLock&) = delete;
  OutputLock& operator=(const OutputLock&) = delete;

  // The pid a dead run left in the lock file, or 0 when the folder was free.
  long stale_pid() const { return stale_pid_; }

 private:
  std::string path_;
  int fd_ = -1;
  long stale_pid_ = 0;
};

}  // namespace lingbot::io
