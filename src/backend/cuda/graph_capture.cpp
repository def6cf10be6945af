#include "backend/cuda/graph_capture.h"

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/device_memory.h"
#include "core/error.h"

#include <cuda_runtime.h>

namespace lingbot::cuda {

namespace {

// A captured graph and its executable instance, destroyed together; the
// device memory the instance took stays in the ledger while it lives.
struct RecordedGraph {
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  ~RecordedGraph() {
    if (exec) {
      forget_driver_memory(exec);
      cudaGraphExecDestroy(exec);
    }
    if (graph) cudaGraphDestroy(graph);
  }
};

}  // namespace

void begin_graph_capture(cudaStream_t stream) {
  // Work queued before the capture (a step's uploads) stays outside it;
  // waiting here also keeps the backend's staging-buffer reuse checks simple.
  LB_CUDA_CHECK(cudaStreamSynchronize(stream));
  LB_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
}

std::shared_ptr<void> end_graph_capture(cudaStream_t stream, bool node_priorities) {
  auto recorded = std::make_shared<RecordedGraph>();
  LB_CUDA_CHECK(cudaStreamEndCapture(stream, &recorded->graph));
  const unsigned long long flags = node_priorities ? cudaGraphInstantiateFlagUseNodePriority : 0;
  // What the instance costs on the device, for the memory account: the
  // driver's free memory before and after instantiating it and uploading it
  // (which the first launch would otherwise do).
  const int64_t free_before = device_free_bytes();
  LB_CUDA_CHECK(cudaGraphInstantiate(&recorded->exec, recorded->graph, flags));
  LB_CUDA_CHECK(cudaGraphUpload(recorded->exec, stream));
  LB_CUDA_CHECK(cudaStreamSynchronize(stream));
  record_driver_memory(recorded->exec, free_before - device_free_bytes(),
                       "CUDA graphs (as the driver's free memory fell)");
  return recorded;
}

void launch_graph(const std::shared_ptr<void>& graph, cudaStream_t stream) {
  LB_CHECK(graph != nullptr, "internal error: replay of an empty graph");
  LB_CUDA_CHECK(cudaGraphLaunch(static_cast<RecordedGraph*>(graph.get())->exec, stream));
}

}  // namespace lingbot::cuda
