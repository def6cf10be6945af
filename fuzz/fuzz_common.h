// Shared by the fuzz targets: read every byte a result points at, so that a
// tensor or span reaching outside the input is caught by AddressSanitizer.
#pragma once

#include "checkpoint/state_dict.h"

#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <string_view>
#include <cstdint>
#include <span>

namespace lingbot::fuzz {

inline uint64_t touch(std::span<const uint8_t> bytes) {
  uint64_t sum = 0;
  for (const uint8_t b : bytes) sum += b;
  return sum;
}

inline uint64_t touch(const io::StateDict& sd) {
  uint64_t sum = 0;
  for (const auto& [name, t] : sd)
    sum += touch({static_cast<const uint8_t*>(t.data()), t.nbytes()}) + name.size();
  for (const auto& s : sd.skipped()) sum += s.key.size() + s.reason.size();
  return sum;
}

// Keeps the compiler from dropping the reads.
inline void keep(uint64_t v) { asm volatile("" : : "r"(v) : "memory"); }

// Errors are part of the contract too: one line, starting with the name of
// the input. Anything else is reported to libFuzzer as a crash.
inline void check_error(const std::exception& e, const char* name) {
  const std::string_view msg = e.what();
  if (msg.find('\n') != std::string_view::npos || !msg.starts_with(std::string(name) + ": ")) {
    std::fprintf(stderr, "malformed error message: %s\n", e.what());
    std::abort();
  }
}

}  // namespace lingbot::fuzz
