// libFuzzer target: the torch state-dict interpreter. The input is a pickle;
// the harness wraps it into a torch.save-like archive with 16 storages of
// 1 KiB (tests/checkpoint/zip_builder.h), so mutations reach tensor records
// (persistent ids, offsets, sizes, strides) instead of dying in the zip layer.
#include "core/error.h"
#include "fuzz_common.h"
#include "checkpoint/torch_checkpoint.h"
#include "zip_builder.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::vector<uint8_t> archive = lingbot::test::torch_archive_around(data, size);
  try {
    const auto sd = lingbot::io::read_torch_checkpoint(archive, "fuzz.pt", nullptr);
    lingbot::fuzz::keep(lingbot::fuzz::touch(sd));
  } catch (const lingbot::Error& e) {
    lingbot::fuzz::check_error(e, "fuzz.pt");
  }
  return 0;
}
