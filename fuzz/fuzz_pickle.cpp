// libFuzzer target: the unpickler, and rendering what it built.
#include "core/error.h"
#include "fuzz_common.h"
#include "checkpoint/pickle.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  lingbot::io::PickleLimits limits;
  limits.max_values = 1 << 20;
  try {
    const auto doc = lingbot::io::unpickle({data, size}, "fuzz.pkl", limits);
    lingbot::fuzz::keep(doc.root().repr(300).size());
  } catch (const lingbot::Error& e) {
    lingbot::fuzz::check_error(e, "fuzz.pkl");
  }
  return 0;
}
