// Helpers shared by the checkpoint reader tests (tests/checkpoint/checkpoint_*,
// zip_*, pickle_*, safetensors_*). Fixtures come from
// tools/reference/make_hostile_checkpoints.py (handmade/, hostile/,
// pickles/) and tools/reference/make_checkpoint_fixtures.py (torch/).
#pragma once

#include "core/half.h"
#include "core/tensor.h"
#include "test_support.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

namespace lingbot::test {

inline std::string checkpoint_fixture(const std::string& name) {
  return fixture_path("checkpoints/" + name);
}

inline std::vector<uint8_t> read_bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw std::runtime_error("test fixture missing: " + path);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

inline nlohmann::json read_json(const std::string& path) {
  std::ifstream f(path);
  if (!f) throw std::runtime_error("test fixture missing: " + path);
  return nlohmann::json::parse(f);
}

// Element i (row-major) of a CPU tensor of any dtype, as a double. Exact for
// every dtype we read (float16/bfloat16 widen exactly; int64 values in the
// fixtures fit in a double).
inline double element(const Tensor& t, int64_t i) {
  const void* p = t.data();
  switch (t.dtype()) {
    case DType::F32: { float v; std::memcpy(&v, static_cast<const float*>(p) + i, 4); return v; }
    case DType::F64: { double v; std::memcpy(&v, static_cast<const double*>(p) + i, 8); return v; }
    case DType::F16: return f16_to_f32(static_cast<const uint16_t*>(p)[i]);
    case DType::BF16: return bf16_to_f32(static_cast<const uint16_t*>(p)[i]);
    case DType::I64: return static_cast<double>(static_cast<const int64_t*>(p)[i]);
    case DType::I32: return static_cast<const int32_t*>(p)[i];
    case DType::I16: return static_cast<const int16_t*>(p)[i];
    case DType::I8: return static_cast<const int8_t*>(p)[i];
    case DType::U8: return static_cast<const uint8_t*>(p)[i];
    case DType::Bool: return static_cast<const uint8_t*>(p)[i];
  }
  return 0;
}

// True when [p, p + n) lies inside `buffer`.
inline bool points_into(const void* p, size_t n, const std::vector<uint8_t>& buffer) {
  const auto* b = static_cast<const uint8_t*>(p);
  return b >= buffer.data() && b + n <= buffer.data() + buffer.size();
}

}  // namespace lingbot::test
