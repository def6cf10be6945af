// The one exception type of the engine (part of <lingbot/lingbot.h>).
//
// Every failure a user can cause (a missing file, a bad option, a wrong
// buffer size, a checkpoint that does not fit the config) throws a
// lingbot::Error whose message is one line naming the thing at fault and
// the problem, e.g. "frames/0001.png: not a PNG or JPEG file". The library
// never aborts and never prints errors itself.
#pragma once

#include <stdexcept>
#include <string>

namespace lingbot {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what) : std::runtime_error(what) {}
};

}  // namespace lingbot
