// libFuzzer target: the safetensors header parser and tensor views.
#include "core/error.h"
#include "fuzz_common.h"
#include "checkpoint/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    const auto sd = lingbot::io::read_safetensors({data, size}, "fuzz.safetensors", nullptr);
    lingbot::fuzz::keep(lingbot::fuzz::touch(sd));
  } catch (const lingbot::Error& e) {
    lingbot::fuzz::check_error(e, "fuzz.safetensors");
  }
  return 0;
}
