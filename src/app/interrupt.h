// SIGINT, SIGTERM and SIGHUP during `run`: the first asks the run to stop
// after the frame in flight (it then writes valid outputs for the frames
// done and exits 128 + the signal: 130, 143, 129); a second one exits at
// once, removing the run's temporaries (output/temporary_files.h) first.
#pragma once

#include <string>

namespace lingbot {

class InterruptHandlers {
 public:
  InterruptHandlers();   // installs the handlers
  ~InterruptHandlers();  // restores the previous ones
  InterruptHandlers(const InterruptHandlers&) = delete;
  InterruptHandlers& operator=(const InterruptHandlers&) = delete;

  // The first signal received, or 0.
  static int received();
};

// "SIGINT", "SIGTERM", "SIGHUP".
std::string signal_name(int signal);

}  // namespace lingbot
