// The Backend interface's default implementations.
#include "backend/backend.h"

#include "backend/op_contracts.h"

#include <cstring>

namespace lingbot {

void Backend::download_async(const Tensor& device, Tensor& host) {
  contracts::check_download_async(contracts::Target::of(*this), device, host);
  // download() gives float32; a host tensor of another dtype gets it back.
  const Tensor t = download(device);
  const Tensor same = host.dtype() == DType::F32 ? t : t.to_dtype(host.dtype());
  std::memcpy(host.data(), same.data(), same.nbytes());
}

}  // namespace lingbot
