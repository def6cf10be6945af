#include "checkpoint/zip_archive.h"

#include "core/error.h"
#include "checkpoint/byte_order.h"
#include "core/printable.h"

#include <zlib.h>

#include <algorithm>
#include <limits>

namespace lingbot::io {

namespace {

// Record signatures and fixed sizes, from the PKWARE APPNOTE (section 4.3).
constexpr uint32_t kLocalHeaderSig = 0x04034b50;     // "PK\3\4"
constexpr uint32_t kCentralHeaderSig = 0x02014b50;   // "PK\1\2"
constexpr uint32_t kEndOfDirSig = 0x06054b50;        // "PK\5\6"
constexpr uint32_t kZip64EndOfDirSig = 0x06064b50;   // "PK\6\6"
constexpr uint32_t kZip64LocatorSig = 0x07064b50;    // "PK\6\7"
constexpr uint64_t kLocalHeaderSize = 30;
constexpr uint64_t kCentralHeaderSize = 46;
constexpr uint64_t kEndOfDirSize = 22;
constexpr uint64_t kZip64EndOfDirSize = 56;
constexpr uint64_t kZip64LocatorSize = 20;
constexpr uint64_t kMaxCommentSize = 0xffff;
constexpr uint16_t kZip64ExtraId = 0x0001;
constexpr uint32_t kMask32 = 0xffffffffu;  // "the real value is in the ZIP64 record"
constexpr uint16_t kMask16 = 0xffffu;

// Deflate cannot expand data by more than about 1032:1 (a run of one byte
// costs at least ~1 bit per 258 bytes). A member claiming more is corrupt or
// a decompression bomb; refusing it bounds what `read` allocates.
constexpr uint64_t kMaxDeflateRatio = 1032;

}  // namespace

ZipArchive::ZipArchive(std::span<const uint8_t> bytes, std::string display_name)
    : bytes_(bytes), display_name_(std::move(display_name)) {
  const Directory dir = locate_central_directory();
  parse_central_directory(dir);
}

ZipArchive::Directory ZipArchive::locate_central_directory() const {
  const uint64_t size = bytes_.size();
  const uint8_t* data = bytes_.data();
  if (size < kEndOfDirSize)
    fail("{}: truncated or not a zip archive ({} bytes, no end of central directory record)",
         display_name_, size);

  // The EOCD is the last record, followed only by its comment (<= 64 KiB).
  // Prefer a record whose comment reaches exactly to the end of the file; a
  // signature inside a comment or in trailing garbage is accepted only if
  // nothing better exists.
  const uint64_t last = size - kEndOfDirSize;
  const uint64_t first = last > kMaxCommentSize ? last - kMaxCommentSize : 0;
  uint64_t eocd = std::numeric_limits<uint64_t>::max();
  uint64_t fallback = std::numeric_limits<uint64_t>::max();
  for (uint64_t pos = last + 1; pos-- > first;) {
    if (load_le32(data + pos) != kEndOfDirSig) continue;
    const uint64_t comment = load_le16(data + pos + 20);
    if (pos + kEndOfDirSize + comment == size) {
      eocd = pos;
      break;
    }
    if (fallback == std::numeric_limits<uint64_t>::max() && fits(pos + kEndOfDirSize, comment, size))
      fallback = pos;
  }
  if (eocd == std::numeric_limits<uint64_t>::max()) eocd = fallback;
  if (eocd == std::numeric_limits<uint64_t>::max())
    fail("{}: truncated or not a zip archive (no end of central directory record)", display_name_);

  const uint8_t* e = data + eocd;
  const uint16_t disk = load_le16(e + 4);
  const uint16_t dir_disk = load_le16(e + 6);
  const uint16_t entries_on_disk = load_le16(e + 8);
  Directory dir;
  dir.entry_count = load_le16(e + 10);
  dir.size = load_le32(e + 12);
  dir.offset = load_le32(e + 16);
  uint64_t dir_limit = eocd;  // the directory must end before the record that describes it

  // ZIP64: a locator sits right before the EOCD and points at the ZIP64 EOCD,
  // which holds 64-bit versions of the counts and offsets.
  if (eocd >= kZip64LocatorSize && load_le32(data + eocd - kZip64LocatorSize) == kZip64LocatorSig) {
    const uint8_t* loc = data + eocd - kZip64LocatorSize;
    const uint32_t z64_disk = load_le32(loc + 4);
    const uint64_t z64_offset = load_le64(loc + 8);
    const uint32_t total_disks = load_le32(loc + 16);
    if (z64_disk != 0 || total_disks > 1)
      fail("{}: multi-disk zip archives are not supported (ZIP64 locator names disk {} of {})",
           display_name_, z64_disk, total_disks);
    const uint64_t locator_pos = eocd - kZip64LocatorSize;
    if (!fits(z64_offset, kZip64EndOfDirSize, locator_pos))
      fail("{}: ZIP64 end of central directory offset {} is outside the archive ({} bytes)",
           display_name_, z64_offset, size);
    const uint8_t* z = data + z64_offset;
    if (load_le32(z) != kZip64EndOfDirSig)
      fail("{}: no ZIP64 end of central directory record at offset {} (bad signature)",
           display_name_, z64_offset);
    if (load_le32(z + 16) != 0 || load_le32(z + 20) != 0)
      fail("{}: multi-disk zip archives are not supported", display_name_);
    const uint64_t z64_on_disk = load_le64(z + 24);
    dir.entry_count = load_le64(z + 32);
    dir.size = load_le64(z + 40);
    dir.offset = load_le64(z + 48);
    if (z64_on_disk != dir.entry_count)
      fail("{}: multi-disk zip archives are not supported ({} of {} entries on this disk)",
           display_name_, z64_on_disk, dir.entry_count);
    dir_limit = z64_offset;
  } else {
    if (disk != 0 || dir_disk != 0 || entries_on_disk != dir.entry_count)
      fail("{}: multi-disk zip archives are not supported", display_name_);
  }

  if (!fits(dir.offset, dir.size, dir_limit))
    fail("{}: central directory (offset {}, {} bytes) lies outside the archive ({} bytes)",
         display_name_, dir.offset, dir.size, size);
  // Each header is at least 46 bytes: a count that cannot fit is corrupt (and
  // must not size an allocation).
  if (dir.entry_count > dir.size / kCentralHeaderSize)
    fail("{}: central directory claims {} entries but holds only {} bytes", display_name_,
         dir.entry_count, dir.size);
  return dir;
}

void ZipArchive::parse_central_directory(const Directory& dir) {
  const uint8_t* data = bytes_.data();
  const uint64_t end = dir.offset + dir.size;  // checked by locate_central_directory
  uint64_t pos = dir.offset;
  entries_.reserve(dir.entry_count);
  for (uint64_t i = 0; i < dir.entry_count; ++i) {
    if (!fits(pos, kCentralHeaderSize, end))
      fail("{}: central directory entry {} is truncated", display_name_, i);
    const uint8_t* h = data + pos;
    if (load_le32(h) != kCentralHeaderSig)
      fail("{}: central directory entry {} at offset {} has a bad signature", display_name_, i, pos);
    const uint16_t flags = load_le16(h + 8);
    ZipEntry entry;
    entry.method = load_le16(h + 10);
    entry.crc32 = load_le32(h + 16);
    entry.compressed_size = load_le32(h + 20);
    entry.size = load_le32(h + 24);
    const uint16_t name_len = load_le16(h + 28);
    const uint16_t extra_len = load_le16(h + 30);
    const uint16_t comment_len = load_le16(h + 32);
    uint32_t disk_start = load_le16(h + 34);
    entry.local_header_offset = load_le32(h + 42);
    entry.encrypted = (flags & 0x1) != 0;
    const uint64_t variable = uint64_t{name_len} + extra_len + comment_len;
    if (!fits(pos + kCentralHeaderSize, variable, end))
      fail("{}: central directory entry {} overruns the directory", display_name_, i);
    entry.name.assign(reinterpret_cast<const char*>(h + kCentralHeaderSize), name_len);

    // ZIP64 extended information (APPNOTE 4.5.3): a 64-bit value is present,
    // in this order, for each header field that holds the 0xFFFFFFFF marker.
    const bool need_size = entry.size == kMask32;
    const bool need_csize = entry.compressed_size == kMask32;
    const bool need_offset = entry.local_header_offset == kMask32;
    const bool need_disk = disk_start == kMask16;
    const uint8_t* extra = h + kCentralHeaderSize + name_len;
    bool zip64_seen = false;
    for (uint64_t x = 0; x + 4 <= extra_len;) {
      const uint16_t id = load_le16(extra + x);
      const uint16_t len = load_le16(extra + x + 2);
      if (!fits(x + 4, len, extra_len))
        fail("{}: zip member '{}': extra field overruns its header", display_name_,
             printable(entry.name));
      if (id == kZip64ExtraId && !zip64_seen) {
        zip64_seen = true;
        const uint8_t* f = extra + x + 4;
        uint64_t used = 0;
        auto take64 = [&](uint64_t& out, const char* what) {
          if (used + 8 > len)
            fail("{}: zip member '{}': ZIP64 extra field too short for the {}", display_name_,
                 printable(entry.name), what);
          out = load_le64(f + used);
          used += 8;
        };
        if (need_size) take64(entry.size, "uncompressed size");
        if (need_csize) take64(entry.compressed_size, "compressed size");
        if (need_offset) take64(entry.local_header_offset, "local header offset");
        if (need_disk) {
          if (used + 4 > len)
            fail("{}: zip member '{}': ZIP64 extra field too short for the disk number",
                 display_name_, printable(entry.name));
          disk_start = load_le32(f + used);
        }
      }
      x += 4 + uint64_t{len};
    }
    // Without a ZIP64 field, 0xFFFFFFFF is taken as the genuine 32-bit value
    // (as Python's zipfile does); the range checks below still apply.
    if (disk_start != 0)
      fail("{}: zip member '{}': starts on disk {}, multi-disk archives are not supported",
           display_name_, printable(entry.name), disk_start);

    resolve_local_header(entry);
    if (!by_name_.emplace(entry.name, entries_.size()).second)
      fail("{}: zip member '{}': appears twice in the central directory", display_name_,
           printable(entry.name));
    entries_.push_back(std::move(entry));
    pos += kCentralHeaderSize + variable;
  }
}

void ZipArchive::resolve_local_header(ZipEntry& entry) const {
  const uint64_t size = bytes_.size();
  if (!fits(entry.local_header_offset, kLocalHeaderSize, size))
    fail_entry(entry, fmt::format("local header offset {} is outside the archive ({} bytes)",
                                  entry.local_header_offset, size));
  const uint8_t* h = bytes_.data() + entry.local_header_offset;
  if (load_le32(h) != kLocalHeaderSig)
    fail_entry(entry, fmt::format("no local header at offset {} (bad signature)",
                                  entry.local_header_offset));
  // Sizes and CRC in the local header may be zero (a data descriptor follows
  // the data, as torch.save's writer does); the central directory is the
  // authority for them. Only the name and extra lengths are needed here.
  const uint16_t name_len = load_le16(h + 26);
  const uint16_t extra_len = load_le16(h + 28);
  const uint64_t name_pos = entry.local_header_offset + kLocalHeaderSize;
  if (!fits(name_pos, uint64_t{name_len} + extra_len, size))
    fail_entry(entry, "local header overruns the archive");
  if (std::string_view(reinterpret_cast<const char*>(bytes_.data() + name_pos), name_len) !=
      entry.name)
    fail_entry(entry, "name in the local header differs from the central directory");
  entry.data_offset = name_pos + name_len + extra_len;
  if (!fits(entry.data_offset, entry.compressed_size, size))
    fail_entry(entry, fmt::format("data ({} bytes at offset {}) runs past the end of the archive "
                                  "({} bytes): truncated?",
                                  entry.compressed_size, entry.data_offset, size));
}

const ZipEntry* ZipArchive::find(std::string_view name) const {
  const auto it = by_name_.find(std::string(name));
  return it == by_name_.end() ? nullptr : &entries_[it->second];
}

const ZipEntry& ZipArchive::at(std::string_view name) const {
  const ZipEntry* e = find(name);
  if (e == nullptr) fail("{}: no member '{}' in the zip archive", display_name_, printable(name));
  return *e;
}

std::span<const uint8_t> ZipArchive::stored_bytes(const ZipEntry& entry) const {
  if (entry.encrypted) fail_entry(entry, "encrypted members are not supported");
  if (entry.method != ZipEntry::kStored)
    fail_entry(entry, fmt::format("compressed (method {}) where a stored member is needed",
                                  entry.method));
  if (entry.compressed_size != entry.size)
    fail_entry(entry, fmt::format("stored, but its sizes differ ({} vs {} bytes)",
                                  entry.compressed_size, entry.size));
  return bytes_.subspan(entry.data_offset, entry.size);
}

namespace {

uint32_t crc32_of(std::span<const uint8_t> bytes) {
  return static_cast<uint32_t>(::crc32_z(0L, bytes.data(), bytes.size()));
}

}  // namespace

std::vector<uint8_t> ZipArchive::read(const ZipEntry& entry, uint64_t max_bytes) const {
  if (entry.encrypted) fail_entry(entry, "encrypted members are not supported");
  if (entry.size > max_bytes)
    fail_entry(entry, fmt::format("{} bytes, more than the {} bytes allowed here", entry.size,
                                  max_bytes));
  const std::span<const uint8_t> packed = bytes_.subspan(entry.data_offset, entry.compressed_size);
  std::vector<uint8_t> out;
  if (entry.method == ZipEntry::kStored) {
    const std::span<const uint8_t> s = stored_bytes(entry);
    out.assign(s.begin(), s.end());
  } else if (entry.method == ZipEntry::kDeflated) {
    if (entry.size / kMaxDeflateRatio > entry.compressed_size)
      fail_entry(entry, fmt::format("claims {} bytes from {} compressed bytes, more than deflate "
                                    "can produce",
                                    entry.size, entry.compressed_size));
    out.resize(entry.size);
    uint8_t no_output = 0;  // zlib refuses a null output pointer even for empty output
    z_stream zs{};
    zs.next_out = &no_output;
    if (inflateInit2(&zs, -MAX_WBITS) != Z_OK) fail_entry(entry, "cannot initialise zlib");
    // zlib counts in 32-bit units: feed input and output in chunks.
    constexpr uint64_t kChunk = uint64_t{1} << 30;
    uint64_t in_done = 0, out_done = 0;
    int rc = Z_OK;
    while (rc == Z_OK) {
      if (zs.avail_in == 0 && in_done < packed.size()) {
        const uint64_t n = std::min<uint64_t>(kChunk, packed.size() - in_done);
        zs.next_in = const_cast<Bytef*>(packed.data() + in_done);
        zs.avail_in = static_cast<uInt>(n);
        in_done += n;
      }
      if (zs.avail_out == 0 && out_done < out.size()) {
        const uint64_t n = std::min<uint64_t>(kChunk, out.size() - out_done);
        zs.next_out = out.data() + out_done;
        zs.avail_out = static_cast<uInt>(n);
        out_done += n;
      }
      rc = inflate(&zs, Z_NO_FLUSH);
      if (rc == Z_BUF_ERROR) {
        // No progress possible: input exhausted or output full before the end of the stream.
        const bool out_full = zs.avail_out == 0 && out_done == out.size();
        inflateEnd(&zs);
        fail_entry(entry, out_full ? fmt::format("inflates to more than its declared {} bytes",
                                                 entry.size)
                                   : std::string("deflate data ends early (truncated)"));
      }
    }
    const uint64_t produced = zs.total_out;
    const std::string zmsg = zs.msg != nullptr ? zs.msg : "unknown error";
    inflateEnd(&zs);
    if (rc != Z_STREAM_END) fail_entry(entry, fmt::format("corrupt deflate data ({})", zmsg));
    if (produced != entry.size)
      fail_entry(entry, fmt::format("inflates to {} bytes, the directory says {}", produced,
                                    entry.size));
  } else {
    fail_entry(entry, fmt::format("compression method {} is not supported (only stored "
                                  "and deflate)",
                                  entry.method));
  }
  if (crc32_of(out) != entry.crc32)
    fail_entry(entry, fmt::format("CRC-32 mismatch (stored {:08x}, computed {:08x}): corrupt data",
                                  entry.crc32, crc32_of(out)));
  return out;
}

void ZipArchive::fail_entry(const ZipEntry& entry, const std::string& problem) const {
  fail("{}: zip member '{}': {}", display_name_, printable(entry.name), problem);
}

}  // namespace lingbot::io
