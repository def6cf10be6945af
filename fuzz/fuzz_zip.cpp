// libFuzzer target: the ZIP reader (directory parsing, ZIP64, inflate, CRC).
#include "core/error.h"
#include "fuzz_common.h"
#include "checkpoint/zip_archive.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    const lingbot::io::ZipArchive zip({data, size}, "fuzz.zip");
    for (const auto& entry : zip.entries()) {
      try {
        lingbot::fuzz::keep(lingbot::fuzz::touch(zip.read(entry, 1 << 20)));
      } catch (const lingbot::Error& e) {
        lingbot::fuzz::check_error(e, "fuzz.zip");
      }
      try {
        lingbot::fuzz::keep(lingbot::fuzz::touch(zip.stored_bytes(entry)));
      } catch (const lingbot::Error& e) {
        lingbot::fuzz::check_error(e, "fuzz.zip");
      }
    }
  } catch (const lingbot::Error& e) {
    lingbot::fuzz::check_error(e, "fuzz.zip");
  }
  return 0;
}
