// A torch-style archive larger than 4 GiB, as the official checkpoint is
// (4,632,303,465 bytes): a storage member of 4 GiB + 64 MiB (ZIP64 sizes), a
// member whose local header lies past 4 GiB (ZIP64 offset) and a central
// directory past 4 GiB (ZIP64 end records). The file is sparse: only headers
// and a few marker values are written, so it costs kilobytes of disk.
//
// The pickle (handmade/zip64_big_data.pkl) is written by Python's pickler in
// tools/reference/make_hostile_checkpoints.py; this test lays the zip around it.
#include "checkpoint/checkpoint.h"
#include "checkpoint/zip_archive.h"

#include "checkpoint_fixtures.h"
#include "core/mapped_file.h"

#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>
#include <zlib.h>

#include <filesystem>

using namespace lingbot;
using namespace lingbot::io;

namespace {

constexpr uint64_t kHugeNumel = (uint64_t{1} << 30) + (uint64_t{1} << 24);  // as in the generator
constexpr uint64_t kHugeBytes = kHugeNumel * 4;
constexpr uint32_t kMax32 = 0xffffffffu;

void le(std::string& out, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out += static_cast<char>((v >> (8 * i)) & 0xff);
}

// Writes a ZIP archive with pwrite, leaving holes where data is zero.
class SparseZipWriter {
 public:
  explicit SparseZipWriter(int fd) : fd_(fd) {}

  // Adds a stored member of `size` bytes whose non-zero parts are `pieces`
  // (offset within the member, bytes). Returns where its data starts.
  uint64_t add(const std::string& name, uint64_t size,
               const std::vector<std::pair<uint64_t, std::string>>& pieces, uint32_t crc) {
    const uint64_t header = pos_;
    const bool big_size = size >= kMax32;
    std::string zip64;  // local ZIP64 extra: sizes only when they need it
    if (big_size) {
      le(zip64, 1, 2);
      le(zip64, 16, 2);
      le(zip64, size, 8);
      le(zip64, size, 8);
    }
    // Pad so the data starts 64-byte aligned, as torch does ("FB" extra).
    const uint64_t start = header + 30 + name.size() + zip64.size() + 4;
    const uint64_t pad = (64 - start % 64) % 64;
    std::string extra = zip64 + "FB";
    le(extra, pad, 2);
    extra += std::string(pad, 'Z');
    std::string h;
    le(h, 0x04034b50, 4);
    le(h, 45, 2);  // version needed: ZIP64
    le(h, 0, 2);   // flags
    le(h, 0, 2);   // stored
    le(h, 0, 4);   // time, date
    le(h, crc, 4);
    le(h, big_size ? kMax32 : size, 4);
    le(h, big_size ? kMax32 : size, 4);
    le(h, name.size(), 2);
    le(h, extra.size(), 2);
    h += name + extra;
    write_at(header, h);
    const uint64_t data = header + h.size();
    for (const auto& [offset, bytes] : pieces) write_at(data + offset, bytes);
    pos_ = data + size;
    members_.push_back({name, size, crc, header});
    return data;
  }

  void finish() {
    const uint64_t cd_offset = pos_;
    std::string cd;
    for (const Member& m : members_) {
      const bool big_size = m.size >= kMax32, big_offset = m.header >= kMax32;
      std::string extra;
      if (big_size || big_offset) {
        std::string fields;
        if (big_size) {
          le(fields, m.size, 8);
          le(fields, m.size, 8);
        }
        if (big_offset) le(fields, m.header, 8);
        le(extra, 1, 2);
        le(extra, fields.size(), 2);
        extra += fields;
      }
      le(cd, 0x02014b50, 4);
      le(cd, 0x031e, 2);
      le(cd, 45, 2);
      le(cd, 0, 2);
      le(cd, 0, 2);
      le(cd, 0, 4);
      le(cd, m.crc, 4);
      le(cd, big_size ? kMax32 : m.size, 4);
      le(cd, big_size ? kMax32 : m.size, 4);
      le(cd, m.name.size(), 2);
      le(cd, extra.size(), 2);
      le(cd, 0, 2);  // comment
      le(cd, 0, 2);  // disk
      le(cd, 0, 2);  // internal attributes
      le(cd, 0, 4);  // external attributes
      le(cd, big_offset ? kMax32 : m.header, 4);
      cd += m.name + extra;
    }
    const uint64_t z64 = cd_offset + cd.size();
    std::string tail;
    le(tail, 0x06064b50, 4);
    le(tail, 44, 8);
    le(tail, 0x031e, 2);
    le(tail, 45, 2);
    le(tail, 0, 4);
    le(tail, 0, 4);
    le(tail, members_.size(), 8);
    le(tail, members_.size(), 8);
    le(tail, cd.size(), 8);
    le(tail, cd_offset, 8);
    le(tail, 0x07064b50, 4);
    le(tail, 0, 4);
    le(tail, z64, 8);
    le(tail, 1, 4);
    le(tail, 0x06054b50, 4);
    le(tail, 0, 4);
    le(tail, members_.size(), 2);
    le(tail, members_.size(), 2);
    le(tail, cd.size(), 4);
    le(tail, kMax32, 4);  // the real offset is in the ZIP64 record
    le(tail, 0, 2);
    write_at(cd_offset, cd + tail);
  }

 private:
  struct Member {
    std::string name;
    uint64_t size;
    uint32_t crc;
    uint64_t header;
  };
  void write_at(uint64_t offset, const std::string& bytes) {
    ASSERT_EQ(::pwrite(fd_, bytes.data(), bytes.size(), static_cast<off_t>(offset)),
              static_cast<ssize_t>(bytes.size()));
  }
  int fd_;
  uint64_t pos_ = 0;
  std::vector<Member> members_;
};

std::string floats(const std::vector<float>& v) {
  return {reinterpret_cast<const char*>(v.data()), v.size() * 4};
}

}  // namespace

TEST(CheckpointZip64, ArchiveLargerThan4GiBLoadsZeroCopy) {
  const std::filesystem::path dir = std::filesystem::temp_directory_path();
  struct statvfs fs {};
  if (::statvfs(dir.c_str(), &fs) == 0 &&
      static_cast<uint64_t>(fs.f_bavail) * fs.f_frsize < (uint64_t{1} << 30))
    GTEST_SKIP() << "less than 1 GiB free in " << dir << " (the sparse file needs only kilobytes, "
                 << "but a filesystem without holes would need 4.3 GB)";
  const std::string path = (dir / fmt::format("lingbot_zip64_{}.pt", ::getpid())).string();
  const int fd = ::open(path.c_str(), O_CREAT | O_TRUNC | O_WRONLY, 0600);
  ASSERT_GE(fd, 0);
  struct Cleanup {
    std::string p;
    ~Cleanup() { std::filesystem::remove(p); }
  } cleanup{path};

  const std::vector<uint8_t> pkl =
      test::read_bytes(test::checkpoint_fixture("handmade/zip64_big_data.pkl"));
  std::vector<float> small(1024);
  for (int i = 0; i < 1024; ++i) small[i] = 0.5f * static_cast<float>(i);
  const std::vector<float> head = {1.f, 2.f, 3.f, 4.f};
  const std::vector<float> tail = {-1.f, -2.f, -3.f, -4.f};

  SparseZipWriter w(fd);
  const std::string pkl_str(pkl.begin(), pkl.end());
  w.add("big/data.pkl", pkl.size(), {{0, pkl_str}}, crc32_z(0, pkl.data(), pkl.size()));
  w.add("big/byteorder", 6, {{0, "little"}}, crc32_z(0, reinterpret_cast<const Bytef*>("little"), 6));
  w.add("big/data/0", 4096, {{0, floats(small)}}, 0);
  w.add("big/data/1", kHugeBytes, {{0, floats(head)}, {kHugeBytes - 16, floats(tail)}}, 0);
  w.add("big/version", 2, {{0, "3\n"}}, crc32_z(0, reinterpret_cast<const Bytef*>("3\n"), 2));
  w.finish();
  ::close(fd);

  struct stat st {};
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  ASSERT_GT(static_cast<uint64_t>(st.st_size), uint64_t{1} << 32);

  {  // The directory: ZIP64 sizes and offsets decoded.
    const auto file = MappedFile::open(path);
    const ZipArchive zip(file->bytes(), path);
    EXPECT_EQ(zip.at("big/data/1").size, kHugeBytes);
    EXPECT_GT(zip.at("big/version").local_header_offset, uint64_t{1} << 32);
    EXPECT_EQ(zip.read(zip.at("big/version")), (std::vector<uint8_t>{'3', '\n'}));
  }

  const StateDict sd = load_state_dict(path);
  ASSERT_EQ(sd.size(), 3u);
  const Tensor& s = sd.at("small");
  for (int i = 0; i < 1024; ++i) ASSERT_EQ(s.f32()[i], 0.5f * static_cast<float>(i));
  const Tensor& huge = sd.at("huge");
  EXPECT_EQ(huge.shape(), (Shape{static_cast<int64_t>(kHugeNumel / 1024), 1024}));
  EXPECT_EQ(huge.nbytes(), kHugeBytes);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(huge.f32()[i], head[i]);
  const Tensor& t = sd.at("huge_tail");
  EXPECT_EQ(t.data(), huge.f32() + (kHugeNumel - 4));  // a view into the same mapped storage
  for (int i = 0; i < 4; ++i) EXPECT_EQ(t.f32()[i], tail[i]);
  EXPECT_EQ(sd.total_bytes(), 4096 + kHugeBytes + 16);
}
