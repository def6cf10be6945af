#include "app/progress.h"

#include "core/log.h"

#include <unistd.h>

#include <cstdio>

namespace lingbot {

Progress::Progress(int total, std::string unit)
    : total_(total),
      unit_(std::move(unit)),
      tty_(isatty(fileno(stderr)) != 0 && log_level() <= LogLevel::Info),
      start_(std::chrono::steady_clock::now()),
      last_draw_(start_) {}

void Progress::update(int done) {
  if (!tty_) return;
  const auto now = std::chrono::steady_clock::now();
  if (done < total_ && now - last_draw_ < std::chrono::milliseconds(100)) return;
  last_draw_ = now;
  const double s = std::chrono::duration<double>(now - start_).count();
  constexpr int kWidth = 30;
  const int filled = total_ > 0 ? done * kWidth / total_ : kWidth;
  std::string bar(static_cast<size_t>(filled), '#');
  bar.resize(kWidth, '.');
  std::fprintf(stderr, "\r[%s] %d/%d %s, %.2f %s/s ", bar.c_str(), done, total_, unit_.c_str(),
               s > 0 ? done / s : 0.0, unit_.c_str());
  std::fflush(stderr);
}

void Progress::done() {
  if (tty_) std::fprintf(stderr, "\n");
}

}  // namespace lingbot
