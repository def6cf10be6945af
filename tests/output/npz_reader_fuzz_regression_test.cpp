// The npz reader on damaged input (fuzz/fuzz_npz.cpp's findings, kept in
// fuzz/regressions/fuzz_npz/, and the shapes it led to): one-line errors
// naming the input, and nothing allocated for a shape the data cannot hold.
#include "core/error.h"
#include "fuzz_regressions.h"
#include "output/npz_reader.h"

#include <gtest/gtest.h>

#include <cstring>

using namespace lingbot;

namespace {

// An .npy file: magic, version 1.0, header length, header, data.
std::vector<uint8_t> npy(const std::string& header, size_t data_bytes) {
  std::vector<uint8_t> out = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0};
  out.push_back(static_cast<uint8_t>(header.size() & 0xff));
  out.push_back(static_cast<uint8_t>(header.size() >> 8));
  out.insert(out.end(), header.begin(), header.end());
  out.resize(out.size() + data_bytes, 0);
  return out;
}

std::string error_of(const std::vector<uint8_t>& bytes) {
  try {
    io::parse_npy(bytes.data(), bytes.size(), "a.npy");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST(NpzReaderFuzzRegressions, EachReadsOrFailsInOneLine) {
  const auto files = test::fuzz_regressions("fuzz_npz");
  ASSERT_FALSE(files.empty());
  for (const auto& path : files) {
    const std::vector<uint8_t> bytes = test::file_bytes(path);
    try {
      io::parse_npy(bytes.data(), bytes.size(), "r.npy");
    } catch (const Error& e) {
      EXPECT_TRUE(test::one_line_naming(e.what(), "r.npy")) << path << ": " << e.what();
    }
    try {
      io::read_npz(path.string());
    } catch (const Error& e) {
      EXPECT_TRUE(test::one_line_naming(e.what(), path.string())) << path << ": " << e.what();
    }
  }
}

TEST(NpzReaderFuzzRegressions, HeaderBytesAreQuotedPrintably) {
  const std::string e = error_of(npy("{'descr': '<f4\n', 'fortran_order': False, 'shape': (1,), }", 4));
  EXPECT_TRUE(test::one_line_naming(e, "a.npy")) << e;
  EXPECT_NE(e.find("unsupported npy dtype '<f4\\x0a'"), std::string::npos) << e;
}

TEST(NpzReaderFuzzRegressions, ShapesBeyondTheDataAreRefusedBeforeAllocating) {
  const std::string huge_dim = error_of(npy("{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,), }", 4));
  EXPECT_NE(huge_dim.find("a.npy: npy shape ((99999999999999999999,)) has a dimension out of range"),
            std::string::npos)
      << huge_dim;
  const std::string overflow =
      error_of(npy("{'descr': '<f4', 'fortran_order': False, 'shape': (1099511627776, 1099511627776), }", 4));
  EXPECT_NE(overflow.find("has too many elements"), std::string::npos) << overflow;
  // 2^40 floats would be 4 TiB: refused by the size check, not by the allocator.
  const std::string short_data = error_of(npy("{'descr': '<f4', 'fortran_order': False, 'shape': (1099511627776,), }", 4));
  EXPECT_NE(short_data.find("a.npy: 4 bytes of data, shape [1099511627776] needs 4398046511104"), std::string::npos)
      << short_data;
}
