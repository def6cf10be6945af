#include "output/npz_writer.h"

#include <fcntl.h>
#include <unistd.h>
#include <zlib.h>

#include <cerrno>
#include <cstring>
#include <vector>

namespace lingbot::io {

namespace {

const char* npy_descr(DType t) {
  switch (t) {
    case DType::F32: return "<f4";
    case DType::F64: return "<f8";
    case DType::F16: return "<f2";
    case DType::I64: return "<i8";
    case DType::I32: return "<i4";
    case DType::I16: return "<i2";
    case DType::I8: return "|i1";
    case DType::U8: return "|u1";
    case DType::Bool: return "|b1";
    case DType::BF16: break;  // numpy has no bfloat16
  }
  fail("npz: cannot store {} arrays (numpy has no such type)", dtype_name(t));
}

// Little-endian field writers.
void le16(std::vector<uint8_t>& b, uint16_t v) {
  b.push_back(static_cast<uint8_t>(v));
  b.push_back(static_cast<uint8_t>(v >> 8));
}
void le32(std::vector<uint8_t>& b, uint32_t v) {
  for (int i = 0; i < 4; ++i) b.push_back(static_cast<uint8_t>(v >> (8 * i)));
}
void le64(std::vector<uint8_t>& b, uint64_t v) {
  for (int i = 0; i < 8; ++i) b.push_back(static_cast<uint8_t>(v >> (8 * i)));
}

constexpr uint32_t kLocalHeader = 0x04034b50, kCentralHeader = 0x02014b50;
constexpr uint32_t kZip64End = 0x06064b50, kZip64Locator = 0x07064b50, kEnd = 0x06054b50;
constexpr uint16_t kVersion = 45;  // 4.5: ZIP64
constexpr uint16_t kDosTime = 0, kDosDate = (1 << 5) | 1;  // 1980-01-01: reproducible archives

// A stored member's local header, sizes in the ZIP64 extra field.
std::vector<uint8_t> local_header(const std::string& name, uint32_t crc, uint64_t size) {
  std::vector<uint8_t> b;
  le32(b, kLocalHeader);
  le16(b, kVersion);
  le16(b, 0);  // flags
  le16(b, 0);  // stored
  le16(b, kDosTime);
  le16(b, kDosDate);
  le32(b, crc);
  le32(b, 0xffffffff);  // sizes live in the ZIP64 extra field
  le32(b, 0xffffffff);
  le16(b, static_cast<uint16_t>(name.size()));
  le16(b, 20);
  b.insert(b.end(), name.begin(), name.end());
  le16(b, 0x0001);
  le16(b, 16);
  le64(b, size);  // uncompressed
  le64(b, size);  // compressed
  return b;
}

size_t local_header_size(const std::string& name) { return 30 + name.size() + 20; }

// The central directory and the (ZIP64) end records, for members at `entries`.
template <class Entries>
std::vector<uint8_t> central_directory(const Entries& entries, uint64_t cd_start) {
  std::vector<uint8_t> b;
  for (const auto& e : entries) {
    le32(b, kCentralHeader);
    le16(b, kVersion);  // made by
    le16(b, kVersion);  // needed
    le16(b, 0);
    le16(b, 0);
    le16(b, kDosTime);
    le16(b, kDosDate);
    le32(b, e.crc);
    le32(b, 0xffffffff);
    le32(b, 0xffffffff);
    le16(b, static_cast<uint16_t>(e.name.size()));
    le16(b, 28);  // ZIP64 extra: sizes and offset
    le16(b, 0);   // comment
    le16(b, 0);   // disk
    le16(b, 0);   // internal attributes
    le32(b, 0);   // external attributes
    le32(b, 0xffffffff);
    b.insert(b.end(), e.name.begin(), e.name.end());
    le16(b, 0x0001);
    le16(b, 24);
    le64(b, e.size);
    le64(b, e.size);
    le64(b, e.offset);
  }
  const uint64_t cd_size = b.size();
  const uint64_t zip64_end = cd_start + cd_size;
  le32(b, kZip64End);
  le64(b, 44);
  le16(b, kVersion);
  le16(b, kVersion);
  le32(b, 0);
  le32(b, 0);
  le64(b, entries.size());
  le64(b, entries.size());
  le64(b, cd_size);
  le64(b, cd_start);
  le32(b, kZip64Locator);
  le32(b, 0);
  le64(b, zip64_end);
  le32(b, 1);
  le32(b, kEnd);
  le16(b, 0);
  le16(b, 0);
  le16(b, 0xffff);
  le16(b, 0xffff);
  le32(b, 0xffffffff);
  le32(b, 0xffffffff);
  le16(b, 0);
  return b;
}

}  // namespace

std::string npy_header(DType dtype, const Shape& shape) {
  std::string dict = "{'descr': '" + std::string(npy_descr(dtype)) + "', 'fortran_order': False, 'shape': (";
  for (size_t i = 0; i < shape.size(); ++i) {
    dict += std::to_string(shape[i]);
    if (i + 1 < shape.size() || shape.size() == 1) dict += ",";
    if (i + 1 < shape.size()) dict += " ";
  }
  dict += "), }";
  // magic (6) + version (2) + length (2) + dict + padding + '\n' = multiple of 64.
  const size_t unpadded = 10 + dict.size() + 1;
  dict.append((64 - unpadded % 64) % 64, ' ');
  dict += '\n';
  std::string h = "\x93NUMPY";
  h += '\x01';
  h += '\x00';
  h += static_cast<char>(dict.size() & 0xff);
  h += static_cast<char>(dict.size() >> 8);
  return h + dict;
}

std::string npy_file(const Tensor& t) {
  LB_CHECK(t.is_cpu(), "npy: the tensor must be on the cpu");
  std::string npy = npy_header(t.dtype(), t.shape());
  npy.append(static_cast<const char*>(t.data()), t.nbytes());
  return npy;
}

std::string npy_strings(const std::vector<std::string>& utf8) {
  // UTF-8 -> code points; a malformed byte stands for itself (names come from the file system).
  std::vector<std::vector<uint32_t>> decoded;
  size_t longest = 1;  // numpy's '<U0' is not an array of strings
  for (const std::string& s : utf8) {
    std::vector<uint32_t> cps;
    for (size_t i = 0; i < s.size();) {
      const auto c = static_cast<unsigned char>(s[i]);
      const int extra = c >= 0xf0 ? 3 : c >= 0xe0 ? 2 : c >= 0xc0 ? 1 : 0;
      uint32_t cp = extra ? c & (0x3f >> extra) : c;
      bool ok = i + extra < s.size();
      for (int k = 1; ok && k <= extra; ++k) {
        const auto n = static_cast<unsigned char>(s[i + k]);
        ok = (n & 0xc0) == 0x80;
        cp = (cp << 6) | (n & 0x3f);
      }
      if (!ok) {
        cps.push_back(c);
        ++i;
      } else {
        cps.push_back(cp);
        i += 1 + extra;
      }
    }
    longest = std::max(longest, cps.size());
    decoded.push_back(std::move(cps));
  }
  std::string dict = "{'descr': '<U" + std::to_string(longest) + "', 'fortran_order': False, 'shape': (" +
                     std::to_string(utf8.size()) + ",), }";
  const size_t unpadded = 10 + dict.size() + 1;
  dict.append((64 - unpadded % 64) % 64, ' ');
  dict += '\n';
  std::string npy = "\x93NUMPY";
  npy += '\x01';
  npy += '\x00';
  npy += static_cast<char>(dict.size() & 0xff);
  npy += static_cast<char>(dict.size() >> 8);
  npy += dict;
  for (const auto& cps : decoded)
    for (size_t i = 0; i < longest; ++i) {
      const uint32_t cp = i < cps.size() ? cps[i] : 0;
      for (int b = 0; b < 4; ++b) npy += static_cast<char>((cp >> (8 * b)) & 0xff);
    }
  return npy;
}

NpzWriter::NpzWriter(const std::string& path) : path_(path) {
  file_ = std::fopen(path.c_str(), "wb");
  if (!file_) fail("{}: cannot create: {}", path, std::strerror(errno));
}

NpzWriter::~NpzWriter() {
  if (file_) {
    try {
      close();
    } catch (...) {
    }
  }
}

void NpzWriter::put(const void* data, size_t bytes) {
  if (bytes && std::fwrite(data, 1, bytes, file_) != bytes) fail("{}: write failed: {}", path_, std::strerror(errno));
}

void NpzWriter::add(const std::string& name, const Tensor& t) {
  LB_CHECK(t.is_cpu(), "npz: {} must be on the cpu", name);
  begin_array(name, t.dtype(), t.shape());
  write(t.data(), t.nbytes());
  end_array();
}

void NpzWriter::begin_array(const std::string& name, DType dtype, const Shape& shape) {
  LB_CHECK(file_ && !in_array_, "{}: begin_array('{}') while another array is open or after close", path_, name);
  const std::string header = npy_header(dtype, shape);
  Entry e;
  e.name = name + ".npy";
  e.offset = static_cast<uint64_t>(std::ftell(file_));
  // Local header with ZIP64 sizes; size and CRC are patched in end_array().
  const std::vector<uint8_t> b = local_header(e.name, 0, 0);
  put(b.data(), b.size());
  entries_.push_back(e);
  in_array_ = true;
  data_start_ = static_cast<uint64_t>(std::ftell(file_));
  written_bytes_ = 0;
  expected_bytes_ = static_cast<uint64_t>(shape_numel(shape)) * dtype_size(dtype);
  crc_ = static_cast<uint32_t>(crc32(0L, Z_NULL, 0));
  put(header.data(), header.size());
  crc_ = static_cast<uint32_t>(crc32(crc_, reinterpret_cast<const Bytef*>(header.data()), static_cast<uInt>(header.size())));
}

void NpzWriter::write(const void* data, size_t bytes) {
  LB_CHECK(in_array_, "{}: write without begin_array", path_);
  LB_CHECK(written_bytes_ + bytes <= expected_bytes_, "{}: array '{}' given more data than its shape holds", path_,
           entries_.back().name);
  put(data, bytes);
  const auto* p = static_cast<const Bytef*>(data);
  for (size_t done = 0; done < bytes;) {  // crc32 takes 32-bit lengths
    const size_t n = std::min<size_t>(bytes - done, size_t{1} << 30);
    crc_ = static_cast<uint32_t>(crc32(crc_, p + done, static_cast<uInt>(n)));
    done += n;
  }
  written_bytes_ += bytes;
}

void NpzWriter::end_array() {
  LB_CHECK(in_array_, "{}: end_array without begin_array", path_);
  Entry& e = entries_.back();
  LB_CHECK(written_bytes_ == expected_bytes_, "{}: array '{}' got {} bytes, its shape needs {}", path_, e.name,
           written_bytes_, expected_bytes_);
  const uint64_t end = static_cast<uint64_t>(std::ftell(file_));
  e.size = end - data_start_;
  e.crc = crc_;
  // Patch the CRC (offset 14) and the ZIP64 sizes (after the name, +4).
  std::vector<uint8_t> crc, sizes;
  le32(crc, e.crc);
  le64(sizes, e.size);
  le64(sizes, e.size);
  std::fseek(file_, static_cast<long>(e.offset + 14), SEEK_SET);
  put(crc.data(), crc.size());
  std::fseek(file_, static_cast<long>(e.offset + 30 + e.name.size() + 4), SEEK_SET);
  put(sizes.data(), sizes.size());
  std::fseek(file_, static_cast<long>(end), SEEK_SET);
  in_array_ = false;
}

void NpzWriter::close() {
  if (!file_) return;
  LB_CHECK(!in_array_, "{}: close() with array '{}' still open", path_, entries_.back().name);
  const uint64_t cd_start = static_cast<uint64_t>(std::ftell(file_));
  const std::vector<uint8_t> b = central_directory(entries_, cd_start);
  put(b.data(), b.size());
  const int rc = std::fclose(file_);
  file_ = nullptr;
  if (rc != 0) fail("{}: cannot finish writing: {}", path_, std::strerror(errno));
}

ArraySpool::ArraySpool(std::string name, DType dtype, Shape item_shape, const std::string& temp_path)
    : name_(std::move(name)), dtype_(dtype), item_shape_(std::move(item_shape)), temp_path_(temp_path) {
  file_ = std::fopen(temp_path_.c_str(), "w+b");
  if (!file_) fail("{}: cannot create temporary file: {}", temp_path_, std::strerror(errno));
}

ArraySpool::~ArraySpool() {
  if (file_) std::fclose(file_);
  std::remove(temp_path_.c_str());
}

void ArraySpool::append(const Tensor& item) {
  LB_CHECK(item.is_cpu() && item.dtype() == dtype_ && item.shape() == item_shape_, "array '{}': item {} expected {} {}",
           name_, item.describe(), dtype_name(dtype_), shape_str(item_shape_));
  if (std::fwrite(item.data(), 1, item.nbytes(), file_) != item.nbytes())
    fail("{}: write failed: {}", temp_path_, std::strerror(errno));
  ++items_;
}

std::string ArraySpool::npy_header() const {
  Shape shape = item_shape_;
  shape.insert(shape.begin(), items_);
  return io::npy_header(dtype_, shape);
}

uint64_t ArraySpool::data_bytes() const {
  return static_cast<uint64_t>(items_) * static_cast<uint64_t>(shape_numel(item_shape_)) * dtype_size(dtype_);
}

namespace {

void pwrite_all(int fd, const void* data, size_t bytes, uint64_t offset, const std::string& target) {
  const auto* p = static_cast<const char*>(data);
  while (bytes > 0) {
    const ssize_t n = pwrite(fd, p, bytes, static_cast<off_t>(offset));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) fail("{}: write failed: {}", target, std::strerror(n < 0 ? errno : ENOSPC));
    p += n;
    bytes -= static_cast<size_t>(n);
    offset += static_cast<uint64_t>(n);
  }
}

}  // namespace

uint32_t ArraySpool::move_to(int fd, uint64_t offset, const std::string& target) {
  if (std::fflush(file_) != 0) fail("{}: write failed: {}", temp_path_, std::strerror(errno));
  const int spool = fileno(file_);
  const uint64_t item = static_cast<uint64_t>(shape_numel(item_shape_)) * dtype_size(dtype_);
  const uint64_t chunk = std::max<uint64_t>(item, 1) * std::max<uint64_t>(1, (uint64_t{1} << 20) / std::max<uint64_t>(item, 1));
  std::vector<char> buf(static_cast<size_t>(std::min(chunk, std::max<uint64_t>(data_bytes(), 1))));
  uint64_t end = data_bytes();
  uint32_t crc_after = static_cast<uint32_t>(crc32(0L, Z_NULL, 0));  // of the bytes already moved
  uint64_t moved = 0;
  while (end > 0) {
    const uint64_t start = end > chunk ? end - chunk : 0;
    const size_t n = static_cast<size_t>(end - start);
    for (size_t got = 0; got < n;) {
      const ssize_t r = pread(spool, buf.data() + got, n - got, static_cast<off_t>(start + got));
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) fail("{}: cannot read back: {}", temp_path_, r < 0 ? std::strerror(errno) : "file shorter than written");
      got += static_cast<size_t>(r);
    }
    pwrite_all(fd, buf.data(), n, offset + start, target);
    if (ftruncate(spool, static_cast<off_t>(start)) != 0) fail("{}: cannot truncate: {}", temp_path_, std::strerror(errno));
    const auto c = static_cast<uint32_t>(crc32(0L, reinterpret_cast<const Bytef*>(buf.data()), static_cast<uInt>(n)));
    crc_after = static_cast<uint32_t>(crc32_combine(c, crc_after, static_cast<z_off_t>(moved)));
    moved += n;
    end = start;
  }
  items_ = 0;
  std::rewind(file_);
  return crc_after;
}

void write_npz_moving_spools(const std::string& path, const std::vector<NpzMember>& members,
                             const std::string& target) {
  struct Placed {
    std::string name;  // "<array>.npy"
    uint64_t offset = 0, size = 0;
    uint32_t crc = 0;
  };
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) fail("{}: cannot create: {}", target, std::strerror(errno));
  try {
    std::vector<Placed> placed;
    uint64_t offset = 0;
    for (const NpzMember& m : members) {
      Placed e;
      e.name = m.name + ".npy";
      e.offset = offset;
      const uint64_t data = offset + local_header_size(e.name);
      if (m.spool) {
        const std::string header = m.spool->npy_header();
        e.size = header.size() + m.spool->data_bytes();
        const uint64_t body = m.spool->data_bytes();
        pwrite_all(fd, header.data(), header.size(), data, target);
        const uint32_t body_crc = m.spool->move_to(fd, data + header.size(), target);
        const auto header_crc =
            static_cast<uint32_t>(crc32(0L, reinterpret_cast<const Bytef*>(header.data()), static_cast<uInt>(header.size())));
        e.crc = static_cast<uint32_t>(crc32_combine(header_crc, body_crc, static_cast<z_off_t>(body)));
      } else {
        e.size = m.npy.size();
        pwrite_all(fd, m.npy.data(), m.npy.size(), data, target);
        e.crc = static_cast<uint32_t>(crc32(0L, reinterpret_cast<const Bytef*>(m.npy.data()), static_cast<uInt>(m.npy.size())));
      }
      const std::vector<uint8_t> lh = local_header(e.name, e.crc, e.size);
      pwrite_all(fd, lh.data(), lh.size(), e.offset, target);
      offset = data + e.size;
      placed.push_back(std::move(e));
    }
    const std::vector<uint8_t> cd = central_directory(placed, offset);
    pwrite_all(fd, cd.data(), cd.size(), offset, target);
  } catch (...) {
    close(fd);
    throw;
  }
  if (close(fd) != 0) fail("{}: write failed: {}", target, std::strerror(errno));
}

void ArraySpool::copy_into(NpzWriter& npz) {
  Shape shape = item_shape_;
  shape.insert(shape.begin(), items_);
  npz.begin_array(name_, dtype_, shape);
  std::fflush(file_);
  std::rewind(file_);
  std::vector<char> buf(size_t{8} << 20);
  size_t n;
  while ((n = std::fread(buf.data(), 1, buf.size(), file_)) > 0) npz.write(buf.data(), n);
  npz.end_array();
}

}  // namespace lingbot::io
