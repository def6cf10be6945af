// libFuzzer target: the whole load_state_dict (format sniffing, torch zip
// archives and their pickles, safetensors) from a memory buffer.
#include "core/error.h"
#include "fuzz_common.h"
#include "checkpoint/checkpoint.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    const auto sd = lingbot::io::load_state_dict({data, size}, "fuzz.pt", nullptr);
    lingbot::fuzz::keep(lingbot::fuzz::touch(sd));
  } catch (const lingbot::Error& e) {
    lingbot::fuzz::check_error(e, "fuzz.pt");
  }
  return 0;
}
