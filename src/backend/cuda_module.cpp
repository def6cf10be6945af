#include "backend/cuda_module.h"

#include "core/error.h"

#include <dlfcn.h>

#include <filesystem>
#include <vector>

namespace lingbot::cuda_module {
namespace {

struct Loaded {
  const Table* table = nullptr;
  std::string error;  // why table is null
};

// Where to look: beside the program (or library) this code is part of, then
// in ../lib from there (the build tree's bin/ and lib/), then the loader's
// own search (LD_LIBRARY_PATH, the system's folders).
std::vector<std::string> candidate_paths() {
  std::vector<std::string> paths;
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&candidate_paths), &info) != 0 && info.dli_fname != nullptr) {
    std::error_code ec;
    const std::filesystem::path self = std::filesystem::canonical(info.dli_fname, ec);
    if (!ec) {
      paths.push_back((self.parent_path() / kFileName).string());
      paths.push_back((self.parent_path().parent_path() / "lib" / kFileName).string());
    }
  }
  return paths;
}

Loaded open_module() {
  void* handle = nullptr;
  std::string tried;
  for (const std::string& path : candidate_paths()) {
    std::error_code ec;
    if (!std::filesystem::exists(path, ec)) {
      tried += path + ", ";
      continue;
    }
    // Found: if it does not load, its error (a CUDA library missing) is the reason.
    handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) return {nullptr, dlerror()};
    break;
  }
  if (handle == nullptr) {
    handle = dlopen(kFileName, RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) {
      std::string error = fmt::format("{} (also not in {})", dlerror(), tried.substr(0, tried.size() - 2));
#ifndef LINGBOT_CUDA_MODULE
      error += "; this build has no CUDA backend (configure with -DLINGBOT_CUDA=ON)";
#endif
      return {nullptr, error};
    }
  }
  // The module stays loaded for the life of the process: its code frees the
  // device memory of every CUDA tensor.
  using Entry = const Table* (*)();
  const auto entry = reinterpret_cast<Entry>(dlsym(handle, kEntryPoint));
  if (entry == nullptr) return {nullptr, fmt::format("{}: no {} in it: {}", kFileName, kEntryPoint, dlerror())};
  const Table* table = entry();
  if (table == nullptr || table->abi_version != kAbiVersion || table->table_size != sizeof(Table) ||
      table->options_size != sizeof(cuda::CudaBackendOptions))
    return {nullptr, fmt::format("{} is from another build of lingbot-map (interface version {}, this program's {})",
                                 kFileName, table ? table->abi_version : -1, kAbiVersion)};
  return {table, ""};
}

const Loaded& module() {
  static const Loaded loaded = open_module();
  return loaded;
}

}  // namespace

std::string unavailable_reason() {
  const Loaded& m = module();
  if (m.table == nullptr) return m.error;
  return m.table->device_unavailable_reason();
}

std::unique_ptr<Backend> make_backend(const cuda::CudaBackendOptions& options) {
  const Loaded& m = module();
  LB_CHECK(m.table != nullptr, "device cuda: CUDA is unavailable: {}", m.error);
  std::unique_ptr<Backend> backend = m.table->make_backend(options);
  // Tensors the host makes on the device get the module's memory (the
  // module registered this allocator in its own copy of the registry).
  register_device_allocator(Device::CUDA, m.table->tensor_allocator(options.device));
  return backend;
}

DeviceMemoryAccount memory_account() {
  const Loaded& m = module();
  return m.table != nullptr ? m.table->memory_account() : DeviceMemoryAccount{};
}

}  // namespace lingbot::cuda_module
