// A progress bar with frames per second on a terminal; silent otherwise
// (the caller logs one summary line at the end).
#pragma once

#include <chrono>
#include <string>

namespace lingbot {

class Progress {
 public:
  Progress(int total, std::string unit);
  void update(int done);
  void done();

 private:
  int total_;
  std::string unit_;
  bool tty_;
  std::chrono::steady_clock::time_point start_;
  std::chrono::steady_clock::time_point last_draw_;
};

}  // namespace lingbot
