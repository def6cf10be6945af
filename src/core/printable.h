// Quoting untrusted text (zip member names, pickle strings, npy headers, JSON
// keys) inside error messages. Errors are one line: control characters are
// escaped as \xNN, so a hostile name cannot add lines or terminal escapes,
// and long text is cut.
#pragma once

#include <fmt/format.h>

#include <string>
#include <string_view>

namespace lingbot::io {

inline std::string printable(std::string_view s, size_t max_chars = 80) {
  std::string out;
  for (const char c : s.substr(0, max_chars)) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7f) {
      out += fmt::format("\\x{:02x}", u);
    } else {
      out += c;
    }
  }
  if (s.size() > max_chars) out += "...";
  return out;
}

}  // namespace lingbot::io
