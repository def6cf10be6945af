// A read-only ZIP archive over bytes already in memory (usually a mapped file).
//
// torch.save writes a ZIP archive whose members are stored uncompressed and
// 64-byte aligned, so a member's bytes can be used in place: `stored_bytes`
// returns a span into the caller's buffer, no copy. Deflated members (.npz
// files, archives re-zipped by other tools) are inflated by `read`.
//
// What is parsed, and checked, when the archive is opened:
//   end of central directory record (EOCD), searched backwards over the
//   trailing comment; the ZIP64 locator and ZIP64 EOCD when present (needed
//   once the archive passes 4 GiB, as the official checkpoint does);
//   every central directory header, with its ZIP64 extra field; every local
//   header, to find where the member's data starts.
// Every offset and length is checked against the buffer before use, so a
// truncated or hostile archive gives a one-line lingbot::Error naming the
// archive (and the member, where there is one) rather than a read out of
// bounds. Encrypted members, multi-disk archives and duplicate member names
// are refused.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace lingbot::io {

struct ZipEntry {
  enum Method : uint16_t { kStored = 0, kDeflated = 8 };

  std::string name;
  uint16_t method = kStored;     // compression method as written; others are refused on read
  uint32_t crc32 = 0;            // of the uncompressed bytes
  uint64_t compressed_size = 0;  // bytes in the archive
  uint64_t size = 0;             // bytes once uncompressed
  uint64_t local_header_offset = 0;
  uint64_t data_offset = 0;      // first byte of the member's (compressed) data
  bool encrypted = false;        // general purpose flag bit 0; such members cannot be read
};

class ZipArchive {
 public:
  // Parses the directory of the archive in `bytes`. `bytes` must stay alive
  // and unchanged for as long as this object and any span it returns.
  // `display_name` (usually the file path) starts every error message.
  ZipArchive(std::span<const uint8_t> bytes, std::string display_name);

  const std::string& display_name() const { return display_name_; }
  std::span<const uint8_t> bytes() const { return bytes_; }

  // Members in central-directory order.
  const std::vector<ZipEntry>& entries() const { return entries_; }
  const ZipEntry* find(std::string_view name) const;
  const ZipEntry& at(std::string_view name) const;  // throws "<archive>: no member 'x'"

  // The member's bytes in place. Throws if the member is compressed.
  std::span<const uint8_t> stored_bytes(const ZipEntry& entry) const;

  // A copy of the member's uncompressed bytes, inflating if needed and
  // checking the CRC-32. Throws if the member is larger than `max_bytes`
  // (protects against members that claim absurd sizes).
  std::vector<uint8_t> read(const ZipEntry& entry, uint64_t max_bytes = kDefaultReadLimit) const;

  static constexpr uint64_t kDefaultReadLimit = uint64_t{1} << 30;  // 1 GiB

 private:
  struct Directory {
    uint64_t entry_count = 0;
    uint64_t offset = 0;
    uint64_t size = 0;
  };
  Directory locate_central_directory() const;
  void parse_central_directory(const Directory& dir);
  void resolve_local_header(ZipEntry& entry) const;
  [[noreturn]] void fail_entry(const ZipEntry& entry, const std::string& problem) const;

  std::span<const uint8_t> bytes_;
  std::string display_name_;
  std::vector<ZipEntry> entries_;
  std::unordered_map<std::string, size_t> by_name_;  // name -> index into entries_
};

}  // namespace lingbot::io
