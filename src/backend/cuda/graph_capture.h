// The CUDA side of graph capture: a stream's work recorded into a CUDA
// graph once and launched again as one unit.
//
// CudaBackend's begin_capture / end_capture / replay (the Backend interface)
// call these; the model decides what to record and when (model/step_graphs.h).
// Capture is in thread-local mode, so another thread's CUDA calls cannot
// join or break it; work enqueued before the capture began stays outside it.
#pragma once

#include <cuda_runtime_api.h>

#include <memory>

namespace lingbot::cuda {

// Starts recording the work enqueued on `stream` (after waiting for what is
// already queued there).
void begin_graph_capture(cudaStream_t stream);
// Ends the recording, instantiates it and uploads it to the device (waiting
// for that, so that the memory it takes is known: the ledger records it,
// device_memory.h). `node_priorities`: launches keep the priority of the
// stream they were captured on (a graph ignores it unless asked).
std::shared_ptr<void> end_graph_capture(cudaStream_t stream, bool node_priorities);
// Launches a graph from end_graph_capture on `stream`.
void launch_graph(const std::shared_ptr<void>& graph, cudaStream_t stream);

}  // namespace lingbot::cuda
