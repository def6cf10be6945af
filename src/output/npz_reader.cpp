#include "output/npz_reader.h"

#include "core/mapped_file.h"
#include "core/printable.h"
#include "checkpoint/zip_archive.h"

#include <fmt/format.h>

#include <charconv>
#include <cstring>

namespace lingbot::io {

namespace {

// Header text as an error message may quote it: a damaged header holds any
// bytes, newlines included.
std::string printable(const std::string& text) { return io::printable(text, 40); }

DType dtype_of_descr(const std::string& d, const std::string& name) {
  if (d == "<f4") return DType::F32;
  if (d == "<f8") return DType::F64;
  if (d == "<f2") return DType::F16;
  if (d == "<i8") return DType::I64;
  if (d == "<i4") return DType::I32;
  if (d == "<i2") return DType::I16;
  if (d == "|i1") return DType::I8;
  if (d == "|u1") return DType::U8;
  if (d == "|b1") return DType::Bool;
  fail("{}: unsupported npy dtype '{}'", name, printable(d));
}

// The value of 'key' in the header dict, as the raw text up to the next ',' or '}' at depth 0.
std::string dict_value(const std::string& header, const std::string& key, const std::string& name) {
  const size_t k = header.find("'" + key + "'");
  LB_CHECK(k != std::string::npos, "{}: npy header has no '{}'", name, key);
  size_t p = header.find(':', k);
  LB_CHECK(p != std::string::npos, "{}: malformed npy header", name);
  ++p;
  while (p < header.size() && header[p] == ' ') ++p;
  int depth = 0;
  size_t e = p;
  for (; e < header.size(); ++e) {
    const char c = header[e];
    if (c == '(' || c == '[') ++depth;
    else if (c == ')' || c == ']') --depth;
    else if ((c == ',' || c == '}') && depth == 0) break;
  }
  return header.substr(p, e - p);
}

}  // namespace

Tensor parse_npy(const uint8_t* data, size_t size, const std::string& name) {
  LB_CHECK(size >= 10 && std::memcmp(data, "\x93NUMPY", 6) == 0, "{}: not an npy array", name);
  const int major = data[6];
  size_t header_len, offset;
  if (major == 1) {
    header_len = data[8] | (size_t{data[9]} << 8);
    offset = 10;
  } else {
    LB_CHECK(size >= 12, "{}: truncated npy header", name);
    header_len = data[8] | (size_t{data[9]} << 8) | (size_t{data[10]} << 16) | (size_t{data[11]} << 24);
    offset = 12;
  }
  LB_CHECK(offset + header_len <= size, "{}: truncated npy header", name);
  const std::string header(reinterpret_cast<const char*>(data + offset), header_len);
  std::string descr = dict_value(header, "descr", name);
  LB_CHECK(descr.size() >= 2, "{}: malformed descr", name);
  descr = descr.substr(1, descr.size() - 2);
  LB_CHECK(dict_value(header, "fortran_order", name) == "False", "{}: Fortran-order arrays are not supported", name);
  const std::string shape_text = dict_value(header, "shape", name);
  // NumPy unicode strings '<Un': n UTF-32 code units each, read as int32 [..., n].
  int64_t string_units = 0;
  if (descr.size() > 2 && descr.compare(0, 2, "<U") == 0) {
    const auto [end, ec] = std::from_chars(descr.data() + 2, descr.data() + descr.size(), string_units);
    LB_CHECK(ec == std::errc() && end == descr.data() + descr.size() && string_units > 0 &&
                 string_units < (int64_t{1} << 20),
             "{}: malformed descr '{}'", name, printable(descr));
  }
  const DType dtype = string_units > 0 ? DType::I32 : dtype_of_descr(descr, name);
  // The size the shape needs, checked against the data before anything is
  // allocated (a damaged header may declare any shape; found by fuzz_npz).
  const size_t available = size - offset - header_len;
  constexpr int64_t kMaxDim = int64_t{1} << 40;
  Shape shape;
  int64_t numel = 1;
  for (size_t i = 0; i < shape_text.size();) {
    if (std::isdigit(static_cast<unsigned char>(shape_text[i]))) {
      size_t j = i;
      while (j < shape_text.size() && std::isdigit(static_cast<unsigned char>(shape_text[j]))) ++j;
      int64_t dim = 0;
      const auto [end, ec] = std::from_chars(shape_text.data() + i, shape_text.data() + j, dim);
      LB_CHECK(ec == std::errc() && dim <= kMaxDim, "{}: npy shape ({}) has a dimension out of range", name,
               printable(shape_text));
      LB_CHECK(!__builtin_mul_overflow(numel, dim, &numel), "{}: npy shape ({}) has too many elements", name,
               printable(shape_text));
      shape.push_back(dim);
      i = j;
    } else {
      ++i;
    }
  }
  if (string_units > 0) {
    shape.push_back(string_units);
    LB_CHECK(!__builtin_mul_overflow(numel, string_units, &numel), "{}: npy shape ({}) has too many elements", name,
             printable(shape_text));
  }
  const uint64_t needed = static_cast<uint64_t>(numel) * dtype_size(dtype);
  LB_CHECK(numel <= static_cast<int64_t>(available) && needed <= available, "{}: {} bytes of data, shape {} needs {}",
           name, available, shape_str(shape), needed);
  Tensor t = Tensor::empty(shape, dtype);
  std::memcpy(t.data(), data + offset + header_len, t.nbytes());
  return t;
}

std::vector<std::string> decode_strings(const Tensor& t, const std::string& name) {
  LB_CHECK(t.dtype() == DType::I32 && t.shape().size() == 2, "{}: not a 1-D array of strings", name);
  std::vector<std::string> out;
  const int64_t n = t.shape()[1];
  for (int64_t i = 0; i < t.shape()[0]; ++i) {
    std::string s;
    for (int64_t k = 0; k < n; ++k) {
      const auto cp = static_cast<uint32_t>(t.data_as<int32_t>()[i * n + k]);
      if (cp == 0) break;
      if (cp < 0x80) {
        s += static_cast<char>(cp);
      } else if (cp < 0x800) {
        s += static_cast<char>(0xc0 | (cp >> 6));
        s += static_cast<char>(0x80 | (cp & 0x3f));
      } else if (cp < 0x10000) {
        s += static_cast<char>(0xe0 | (cp >> 12));
        s += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
        s += static_cast<char>(0x80 | (cp & 0x3f));
      } else {
        s += static_cast<char>(0xf0 | (cp >> 18));
        s += static_cast<char>(0x80 | ((cp >> 12) & 0x3f));
        s += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
        s += static_cast<char>(0x80 | (cp & 0x3f));
      }
    }
    out.push_back(std::move(s));
  }
  return out;
}

std::map<std::string, Tensor> read_npz(const std::string& path) {
  const auto file = MappedFile::open(path);
  const ZipArchive zip(file->bytes(), path);
  std::map<std::string, Tensor> out;
  for (const ZipEntry& e : zip.entries()) {
    std::string name = e.name;
    if (name.size() > 4 && name.compare(name.size() - 4, 4, ".npy") == 0) name.resize(name.size() - 4);
    const std::vector<uint8_t> bytes = zip.read(e, uint64_t{1} << 40);
    out.emplace(name, parse_npy(bytes.data(), bytes.size(), path + ":" + e.name));
  }
  return out;
}

}  // namespace lingbot::io
