// libFuzzer target: the npz reader (output/npz_reader.cpp: the zip archive
// through checkpoint/zip_archive, each member's .npy header and data).
// The input is the archive; its bytes are also tried as one .npy file.
#include "core/error.h"
#include "fuzz_common.h"
#include "fuzz_temp_file.h"
#include "output/npz_reader.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace lingbot;
  try {
    const Tensor t = io::parse_npy(data, size, "fuzz.npy");
    fuzz::keep(fuzz::touch({static_cast<const uint8_t*>(t.data()), t.nbytes()}));
  } catch (const Error& e) {
    fuzz::check_error(e, "fuzz.npy");
  }
  const std::string& path = fuzz::write_temp_file(data, size, ".npz");
  try {
    for (const auto& [name, t] : io::read_npz(path))
      fuzz::keep(fuzz::touch({static_cast<const uint8_t*>(t.data()), t.nbytes()}) + name.size());
  } catch (const Error& e) {
    fuzz::check_error(e, path.c_str());
  }
  return 0;
}
