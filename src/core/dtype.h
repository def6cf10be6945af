// Element types and their sizes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace lingbot {

enum class DType : uint8_t { F32, F16, BF16, F64, I64, I32, I16, I8, U8, Bool };

constexpr size_t dtype_size(DType t) {
  switch (t) {
    case DType::F64: case DType::I64: return 8;
    case DType::F32: case DType::I32: return 4;
    case DType::F16: case DType::BF16: case DType::I16: return 2;
    case DType::I8: case DType::U8: case DType::Bool: return 1;
  }
  return 0;
}

constexpr std::string_view dtype_name(DType t) {
  switch (t) {
    case DType::F32: return "float32";
    case DType::F16: return "float16";
    case DType::BF16: return "bfloat16";
    case DType::F64: return "float64";
    case DType::I64: return "int64";
    case DType::I32: return "int32";
    case DType::I16: return "int16";
    case DType::I8: return "int8";
    case DType::U8: return "uint8";
    case DType::Bool: return "bool";
  }
  return "?";
}

constexpr bool is_floating(DType t) {
  return t == DType::F32 || t == DType::F16 || t == DType::BF16 || t == DType::F64;
}

}  // namespace lingbot
