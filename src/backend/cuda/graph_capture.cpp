#include "backend/cuda/graph_capture.h"

#include "backend/cuda/cuda_check.h"
#include "core/error.h"

#include <cuda_runtime.h>

namespace lingbot::cuda {

namespace {

// A captured graph and its executable instance, destroyed together.
struct RecordedGraph {
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  ~RecordedGraph() {
    if (exec) cudaGraphExecDestroy(exec);
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
  LB_CUDA_CHECK(cudaGraphInstantiate(&recorded->exec, recorded->graph, flags));
  return recorded;
}

void launch_graph(const std::shared_ptr<void>& graph, cudaStream_t stream) {
  LB_CHECK(graph != nullptr, "internal error: replay of an empty graph");
  LB_CUDA_CHECK(cudaGraphLaunch(static_cast<RecordedGraph*>(graph.get())->exec, stream));
}

}  // namespace lingbot::cuda
