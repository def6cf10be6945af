#include "core/log.h"

#include <atomic>
#include <cstdio>

namespace lingbot {

namespace {
std::atomic<LogLevel> g_level{LogLevel::Info};
}

void set_log_level(LogLevel level) { g_level = level; }
LogLevel log_level() { return g_level; }

void log_line(LogLevel level, const std::string& message) {
  static const char* const kPrefix[] = {"debug: ", "", "warning: ", "error: ", ""};
  std::fprintf(stderr, "%s%s\n", kPrefix[static_cast<int>(level)], message.c_str());
}

}  // namespace lingbot
