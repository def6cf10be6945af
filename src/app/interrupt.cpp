#include "app/interrupt.h"

#include "output/temporary_files.h"

#include <signal.h>
#include <unistd.h>

#include <cstring>

namespace lingbot {

namespace {

volatile sig_atomic_t first_signal = 0;
constexpr int kSignals[] = {SIGINT, SIGTERM, SIGHUP};
struct sigaction previous[3];

void say(const char* text) {
  const ssize_t ignored = write(STDERR_FILENO, text, std::strlen(text));
  (void)ignored;
}

// Async-signal-safe only: write, unlink, _exit.
void on_signal(int sig) {
  if (first_signal != 0) {
    say("\nlingbot-map: second signal: stopping now, outputs of this run dropped\n");
    io::remove_registered_temporaries_signal_safe();
    _exit(128 + sig);
  }
  first_signal = sig;
  say("\nlingbot-map: stopping after the frame in flight and writing the finished frames "
      "(signal again to stop at once)\n");
}

}  // namespace

InterruptHandlers::InterruptHandlers() {
  first_signal = 0;
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;  // reads and writes in flight carry on; the loop checks between frames
  for (int i = 0; i < 3; ++i) {
    sigaction(kSignals[i], nullptr, &previous[i]);
    // An ignored signal stays ignored: `nohup` must keep a hangup from stopping the run.
    if (previous[i].sa_handler != SIG_IGN) sigaction(kSignals[i], &sa, nullptr);
  }
}

InterruptHandlers::~InterruptHandlers() {
  for (int i = 0; i < 3; ++i) sigaction(kSignals[i], &previous[i], nullptr);
}

int InterruptHandlers::received() { return first_signal; }

std::string signal_name(int signal) {
  switch (signal) {
    case SIGINT: return "SIGINT";
    case SIGTERM: return "SIGTERM";
    case SIGHUP: return "SIGHUP";
    default: return "signal " + std::to_string(signal);
  }
}

}  // namespace lingbot
