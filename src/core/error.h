// Errors with context.
//
// Every failure a user can cause (a bad file, a wrong shape, a mismatched
// checkpoint) is reported as a lingbot::Error whose message is one line that
// names the thing at fault and the problem, e.g.
//   "model.pt: storage 'data/7' holds 4096 bytes, tensor needs 8192"
// The CLI prints that line and exits with status 1; the library never aborts.
#pragma once

#include <lingbot/error.h>  // lingbot::Error, which the public API throws too

#include <fmt/format.h>

#include <string>

namespace lingbot {

template <typename... Args>
[[noreturn]] void fail(fmt::format_string<Args...> format, Args&&... args) {
  throw Error(fmt::format(format, std::forward<Args>(args)...));
}

}  // namespace lingbot

// LB_CHECK(cond, "fmt", args...) throws lingbot::Error when cond is false.
// For conditions the user can trigger; internal invariants use LB_ASSERT.
#define LB_CHECK(cond, ...)              \
  do {                                   \
    if (!(cond)) ::lingbot::fail(__VA_ARGS__); \
  } while (0)

// LB_ASSERT(cond): an internal invariant. Also throws (never aborts), but the
// message says it is a bug and where it is.
#define LB_ASSERT(cond)                                                        \
  do {                                                                         \
    if (!(cond))                                                               \
      ::lingbot::fail("internal error: {} failed at {}:{}", #cond, __FILE__,   \
                      __LINE__);                                               \
  } while (0)
