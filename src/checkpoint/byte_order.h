// Little-endian integer loads and overflow-safe range checks.
//
// The readers of untrusted files (zip, pickle, safetensors) never index a
// byte span before asking `fits(offset, length, size)`; these helpers keep
// that check in one place and free of integer overflow.
#pragma once

#include <cstdint>
#include <cstring>

namespace lingbot::io {

// True when [offset, offset + length) lies inside a buffer of `size` bytes.
// Written so that no intermediate sum can wrap around.
constexpr bool fits(uint64_t offset, uint64_t length, uint64_t size) {
  return offset <= size && length <= size - offset;
}

inline uint16_t load_le16(const uint8_t* p) {
  return static_cast<uint16_t>(p[0] | (p[1] << 8));
}

inline uint32_t load_le32(const uint8_t* p) {
  return static_cast<uint32_t>(p[0]) | (static_cast<uint32_t>(p[1]) << 8) |
         (static_cast<uint32_t>(p[2]) << 16) | (static_cast<uint32_t>(p[3]) << 24);
}

inline uint64_t load_le64(const uint8_t* p) {
  return static_cast<uint64_t>(load_le32(p)) | (static_cast<uint64_t>(load_le32(p + 4)) << 32);
}

}  // namespace lingbot::io
