// libFuzzer target: the model config parser (model/model_config.cpp:
// ModelConfig::from_json_text, every key's type and range checks), and
// what a config it accepts implies (expected_parameters: the tensor list).
#include "core/error.h"
#include "fuzz_common.h"
#include "model/model_config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace lingbot;
  try {
    const ModelConfig config =
        ModelConfig::from_json_text(std::string(reinterpret_cast<const char*>(data), size), "fuzz.json");
    // A config that parses must describe a model whose tensor list can be
    // made (sizes positive, no overflow): keep that list small enough to
    // build, as the parser's ranges promise.
    uint64_t sum = 0;
    for (const ExpectedTensor& e : expected_parameters(config)) sum += e.name.size() + e.shape.size();
    fuzz::keep(sum);
  } catch (const Error& e) {
    fuzz::check_error(e, "fuzz.json");
  }
  return 0;
}
