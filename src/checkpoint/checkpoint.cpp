#include "checkpoint/checkpoint.h"

#include "core/error.h"
#include "core/mapped_file.h"
#include "checkpoint/safetensors.h"
#include "checkpoint/torch_checkpoint.h"

#include <cstring>

namespace lingbot::io {

CheckpointFormat detect_checkpoint_format(std::span<const uint8_t> bytes) {
  if (bytes.size() >= 4 && std::memcmp(bytes.data(), "PK\x03\x04", 4) == 0)
    return CheckpointFormat::Torch;
  if (is_legacy_torch_file(bytes)) return CheckpointFormat::LegacyTorch;
  if (looks_like_safetensors(bytes)) return CheckpointFormat::Safetensors;
  return CheckpointFormat::Unknown;
}

StateDict load_state_dict(std::span<const uint8_t> bytes, const std::string& display_name,
                          std::shared_ptr<void> owner) {
  switch (detect_checkpoint_format(bytes)) {
    case CheckpointFormat::Torch: return read_torch_checkpoint(bytes, display_name, std::move(owner));
    case CheckpointFormat::Safetensors: return read_safetensors(bytes, display_name, std::move(owner));
    case CheckpointFormat::LegacyTorch: throw Error(legacy_torch_message(display_name));
    case CheckpointFormat::Unknown: break;
  }
  if (bytes.empty()) fail("{}: empty file, not a checkpoint", display_name);
  if (bytes[0] == 0x80 && bytes.size() >= 2 && bytes[1] <= 5)
    fail("{}: a plain pickle file, not a torch.save checkpoint (zip archive) or safetensors; "
         "re-save it with torch.save",
         display_name);
  fail("{}: not a PyTorch or safetensors checkpoint (unrecognised first bytes)", display_name);
}

StateDict load_state_dict(const std::string& path) {
  std::shared_ptr<MappedFile> file = MappedFile::open(path);
  const std::span<const uint8_t> bytes = file->bytes();
  StateDict dict = load_state_dict(bytes, path, std::move(file));
  dict.set_mapped_file(bytes);
  return dict;
}

}  // namespace lingbot::io
