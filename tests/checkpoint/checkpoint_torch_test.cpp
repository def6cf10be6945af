// Real torch.save files (written by tools/reference/make_checkpoint_fixtures.py
// with PyTorch on the GPU machine) against the numbers torch computed for
// them in float64 (tests/fixtures/checkpoints/torch/manifest.json).
#include "checkpoint/checkpoint.h"

#include "checkpoint_fixtures.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

using namespace lingbot;
using namespace lingbot::io;
using lingbot::test::element;

namespace {

std::string torch_dir() { return test::checkpoint_fixture("torch"); }

DType dtype_from_torch_name(const std::string& s) {
  for (DType t : {DType::F32, DType::F16, DType::BF16, DType::F64, DType::I64, DType::I32,
                  DType::I16, DType::I8, DType::U8, DType::Bool})
    if (dtype_name(t) == s) return t;
  throw std::runtime_error("dtype not expected in the torch fixtures: " + s);
}

}  // namespace

TEST(CheckpointTorch, RealTorchSaveFilesMatchTorchsNumbers) {
  if (!std::filesystem::is_directory(torch_dir()))
    GTEST_SKIP() << torch_dir() << " is absent: generate it with PyTorch by running "
                 << "tools/reference/make_checkpoint_fixtures.py " << torch_dir();
  const auto manifest = test::read_json(torch_dir() + "/manifest.json");
  size_t loaded = 0, refused = 0;
  for (const auto& entry : manifest["files"]) {
    const std::string path = torch_dir() + "/" + entry["file"].get<std::string>();
    SCOPED_TRACE(path);
    if (entry.contains("error")) {
      try {
        load_state_dict(path);
        ADD_FAILURE() << "loaded, expected an error containing " << entry["error"];
      } catch (const Error& e) {
        const std::string msg = e.what();
        EXPECT_TRUE(msg.starts_with(path + ": ")) << msg;
        EXPECT_NE(msg.find(entry["error"].get<std::string>()), std::string::npos) << msg;
        EXPECT_EQ(msg.find('\n'), std::string::npos);
      }
      ++refused;
      continue;
    }
    const StateDict sd = load_state_dict(path);
    EXPECT_EQ(sd.found_under(), entry["under"].get<std::string>());
    const auto& tensors = entry["tensors"];
    ASSERT_EQ(sd.size(), tensors.size());
    for (size_t i = 0; i < tensors.size(); ++i) {
      const auto& want = tensors[i];
      const std::string name = want["name"];
      SCOPED_TRACE(name);
      EXPECT_EQ(sd.entries()[i].first, name);
      const Tensor& t = sd.at(name);
      EXPECT_EQ(t.dtype(), dtype_from_torch_name(want["dtype"]));
      EXPECT_EQ(t.shape(), want["shape"].get<Shape>());
      const auto first = want["first"].get<std::vector<double>>();
      for (size_t k = 0; k < first.size(); ++k) EXPECT_EQ(element(t, static_cast<int64_t>(k)), first[k]);
      for (const auto& s : want["samples"])
        EXPECT_EQ(element(t, s[0].get<int64_t>()), s[1].get<double>()) << "flat index " << s[0];
      double sum = 0, abs_sum = 0;
      for (int64_t k = 0; k < t.numel(); ++k) {
        sum += element(t, k);
        abs_sum += std::fabs(element(t, k));
      }
      // Same numbers summed in another order: equal up to float64 rounding.
      const double tol = 1e-12 * std::max(1.0, want["abs_sum"].get<double>());
      EXPECT_NEAR(sum, want["sum"].get<double>(), tol);
      EXPECT_NEAR(abs_sum, want["abs_sum"].get<double>(), tol);
      // Contiguous views of one storage alias each other in the mapped file.
      if (!want["shares_storage_with"].is_null() && want["contiguous"].get<bool>()) {
        const std::string other_name = want["shares_storage_with"];
        const auto& other_want = *std::find_if(tensors.begin(), tensors.end(), [&](const auto& x) {
          return x["name"] == other_name;
        });
        if (other_want["contiguous"].get<bool>() && t.numel() > 0) {
          const auto* a = static_cast<const uint8_t*>(t.data());
          const auto* b = static_cast<const uint8_t*>(sd.at(other_name).data());
          const int64_t delta = want["storage_offset"].get<int64_t>() -
                                other_want["storage_offset"].get<int64_t>();
          EXPECT_EQ(a - b, delta * static_cast<int64_t>(dtype_size(t.dtype())));
        }
      }
    }
    std::vector<std::string> skipped;
    for (const auto& s : sd.skipped()) skipped.push_back(s.key);
    EXPECT_EQ(skipped, entry["skipped"].get<std::vector<std::string>>());
    ++loaded;
  }
  EXPECT_GE(loaded, 10u);
  EXPECT_GE(refused, 3u);
}
