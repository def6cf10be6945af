// Where the time goes: wall time per named stage, summed over calls.
//
// Off by default (a scope then costs one branch); set_enabled(true) turns it
// on (`lingbot-map bench --profile`; LINGBOT_PROFILE=1 for any lingbot-map
// command). For asynchronous devices a scope takes a `sync` callback that
// waits for the device at both ends, so the numbers are honest at the price
// of serialising the stages.
#pragma once

#include <chrono>
#include <functional>
#include <string>

namespace lingbot {

class Profiler {
 public:
  static bool enabled();
  static void set_enabled(bool on);
  static void add(const std::string& stage, double seconds);
  static void reset();
  // One line per stage, slowest first: "stage  total ms  calls  ms/call  share".
  static std::string report();
};

class ProfileScope {
 public:
  ProfileScope(std::string stage, std::function<void()> sync = {});
  ~ProfileScope();
  ProfileScope(const ProfileScope&) = delete;
  ProfileScope& operator=(const ProfileScope&) = delete;

 private:
  bool on_;
  std::string stage_;
  std::function<void()> sync_;
  std::chrono::steady_clock::time_point start_;
};

}  // namespace lingbot
