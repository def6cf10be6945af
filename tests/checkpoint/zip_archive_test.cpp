// The ZIP reader against Python's zipfile: for every handmade archive, the
// manifest lists each member's name, size, CRC-32, method and data offset as
// Python sees them.
#include "checkpoint/zip_archive.h"

#include "checkpoint_fixtures.h"

#include <gtest/gtest.h>

#include <zlib.h>

using namespace lingbot;
using namespace lingbot::io;
using lingbot::test::checkpoint_fixture;

namespace {

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST(ZipArchive, MembersMatchPythonZipfile) {
  const auto manifest = test::read_json(checkpoint_fixture("handmade/manifest.json"));
  size_t archives = 0;
  for (const auto& entry : manifest["files"]) {
    if (!entry.contains("zip_members")) continue;
    const std::string file = entry["file"];
    SCOPED_TRACE(file);
    const auto bytes = test::read_bytes(checkpoint_fixture("handmade/" + file));
    const ZipArchive zip(bytes, file);
    const auto& want = entry["zip_members"];
    ASSERT_EQ(zip.entries().size(), want.size());
    for (size_t i = 0; i < want.size(); ++i) {
      const ZipEntry& e = zip.entries()[i];
      EXPECT_EQ(e.name, want[i]["name"].get<std::string>());
      EXPECT_EQ(e.size, want[i]["size"].get<uint64_t>());
      EXPECT_EQ(e.crc32, want[i]["crc"].get<uint32_t>());
      EXPECT_EQ(e.method, want[i]["method"].get<uint16_t>());
      EXPECT_EQ(e.data_offset, want[i]["data_offset"].get<uint64_t>());
      EXPECT_EQ(zip.find(e.name), &e);
      // Reading (inflating if needed) gives bytes with the CRC Python computed.
      const std::vector<uint8_t> data = zip.read(e);
      EXPECT_EQ(data.size(), e.size);
      EXPECT_EQ(crc32_z(0, data.data(), data.size()), e.crc32);
    }
    ++archives;
  }
  EXPECT_GE(archives, 8u);
}

TEST(ZipArchive, TorchStoragesAreStoredAlignedAndZeroCopy) {
  const auto bytes = test::read_bytes(checkpoint_fixture("handmade/basic_v2.pt"));
  const ZipArchive zip(bytes, "basic_v2.pt");
  size_t storages = 0;
  for (const ZipEntry& e : zip.entries()) {
    if (e.name.find("/data/") == std::string::npos) continue;
    const auto span = zip.stored_bytes(e);
    EXPECT_EQ(span.data(), bytes.data() + e.data_offset);  // in place, no copy
    EXPECT_EQ(e.data_offset % 64, 0u) << e.name;          // torch aligns storages to 64 bytes
    ++storages;
  }
  EXPECT_GE(storages, 10u);
}

TEST(ZipArchive, DeflatedMemberIsNotZeroCopy) {
  const auto bytes = test::read_bytes(checkpoint_fixture("handmade/deflated.pt"));
  const ZipArchive zip(bytes, "deflated.pt");
  const ZipEntry& pkl = zip.at("deflated/data.pkl");
  EXPECT_EQ(pkl.method, ZipEntry::kDeflated);
  const std::string msg = error_of([&] { zip.stored_bytes(pkl); });
  EXPECT_NE(msg.find("deflated.pt: zip member 'deflated/data.pkl': compressed"), std::string::npos)
      << msg;
}

TEST(ZipArchive, ReadLimitIsEnforced) {
  const auto bytes = test::read_bytes(checkpoint_fixture("handmade/basic_v2.pt"));
  const ZipArchive zip(bytes, "m.pt");
  const ZipEntry& pkl = zip.at("basic_v2/data.pkl");
  const std::string msg = error_of([&] { zip.read(pkl, 10); });
  EXPECT_NE(msg.find("more than the 10 bytes allowed"), std::string::npos) << msg;
}

TEST(ZipArchive, MissingMemberNamesArchiveAndMember) {
  const auto bytes = test::read_bytes(checkpoint_fixture("handmade/basic_v2.pt"));
  const ZipArchive zip(bytes, "m.pt");
  EXPECT_EQ(zip.find("nope"), nullptr);
  EXPECT_EQ(error_of([&] { zip.at("nope"); }), "m.pt: no member 'nope' in the zip archive");
}

TEST(ZipArchive, HostileArchivesGiveErrorsNamingTheArchive) {
  // Broken archives (structure only; the checkpoint tests cover the rest).
  for (const char* file : {"truncated_half.pt", "truncated_tail.pt", "bad_cd_offset.pt",
                           "bad_cd_offset_classic.pt", "cd_count_huge.pt", "bad_local_offset.pt",
                           "bad_local_sig.pt", "bad_entry_size.pt", "zip64_extra_short.pt",
                           "zip64_locator_bad.pt", "zip64_huge_size.pt", "duplicate_member.pt"}) {
    SCOPED_TRACE(file);
    const auto bytes = test::read_bytes(checkpoint_fixture(std::string("hostile/") + file));
    const std::string msg = error_of([&] { ZipArchive zip(bytes, file); });
    EXPECT_TRUE(msg.starts_with(std::string(file) + ": ")) << msg;
  }
}

TEST(ZipArchive, EmptyAndTinyInputs) {
  const std::vector<uint8_t> empty;
  EXPECT_NE(error_of([&] { ZipArchive z(empty, "e.zip"); }).find("e.zip: truncated or not a zip"),
            std::string::npos);
  // A valid empty archive: just an end-of-central-directory record.
  std::vector<uint8_t> eocd(22, 0);
  eocd[0] = 'P';
  eocd[1] = 'K';
  eocd[2] = 5;
  eocd[3] = 6;
  const ZipArchive zip(eocd, "empty.zip");
  EXPECT_TRUE(zip.entries().empty());
  // The same with a comment that is longer than what follows: rejected.
  eocd[20] = 50;
  EXPECT_NE(error_of([&] { ZipArchive z(eocd, "c.zip"); }), "");
}
