// Minimal levelled logging to stderr. The CLI sets the level from -v/-q.
#pragma once

#include <fmt/format.h>

namespace lingbot {

enum class LogLevel { Debug = 0, Info = 1, Warn = 2, Error = 3, Quiet = 4 };

void set_log_level(LogLevel level);
LogLevel log_level();
void log_line(LogLevel level, const std::string& message);

template <typename... Args>
void log_debug(fmt::format_string<Args...> f, Args&&... a) {
  if (log_level() <= LogLevel::Debug) log_line(LogLevel::Debug, fmt::format(f, std::forward<Args>(a)...));
}
template <typename... Args>
void log_info(fmt::format_string<Args...> f, Args&&... a) {
  if (log_level() <= LogLevel::Info) log_line(LogLevel::Info, fmt::format(f, std::forward<Args>(a)...));
}
template <typename... Args>
void log_warn(fmt::format_string<Args...> f, Args&&... a) {
  if (log_level() <= LogLevel::Warn) log_line(LogLevel::Warn, fmt::format(f, std::forward<Args>(a)...));
}

}  // namespace lingbot
