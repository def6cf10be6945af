// The model's side of CUDA graphs: which single-frame steps are recorded,
// and when a step runs directly, is recorded, or is replayed.
//
// A streaming step's device work is the same kernel sequence every frame,
// except for what its kind changes (StepKind below), so each kind is
// recorded once and replayed on every later frame of that kind. The first
// step of a kind runs directly, which allocates every buffer it needs (a
// captured step must not allocate); the second is recorded and replayed;
// every later one is replayed. The backend's side (how a graph is captured
// and launched) is backend/cuda/graph_capture.h behind Backend::begin_capture,
// end_capture and replay.
#pragma once

#include "backend/backend.h"

#include <array>
#include <memory>
#include <utility>

namespace lingbot {

// What makes one single-frame step's device work differ from another's.
struct StepKind {
  bool store = true;            // the frame is stored in the KV caches (a keyframe)
  bool pending_heads = false;   // an earlier frame's heads run beside it (pipeline depth 2)
  bool pending_stored = false;  // that earlier frame was stored (its camera-head cache step appends)

  static constexpr int kCount = 8;
  int index() const {
    return (store ? 1 : 0) + (pending_heads ? 2 : 0) + (pending_heads && pending_stored ? 4 : 0);
  }
};

// How a step's device work ran.
enum class StepRun {
  Direct,    // its ops ran one by one (the first step of its kind, or no graphs)
  Recorded,  // its ops were recorded (their host side ran once, no kernel) and the graph replayed
  Replayed,  // an earlier recording was replayed: the ops' host side did not run
};

// Outputs: where a step leaves its results (pointers into the workspace);
// a recording keeps the outputs of the step it recorded, since a replay
// writes the same buffers.
template <typename Outputs>
class StepGraphs {
 public:
  explicit StepGraphs(Backend& backend) : be_(backend) {}

  // Runs compute(outputs) for a step of `kind`: directly, recorded, or as a
  // replay, as the header says. `graphable` false runs it directly always.
  template <typename Compute>
  std::pair<Outputs, StepRun> run(StepKind kind, bool graphable, Compute&& compute) {
    Entry& entry = entries_[static_cast<size_t>(kind.index())];
    Outputs outputs{};
    if (graphable && entry.graph) {
      be_.replay(entry.graph);
      return {*entry.outputs, StepRun::Replayed};
    }
    if (graphable && entry.warmed) {
      be_.begin_capture();
      try {
        compute(outputs);
      } catch (...) {
        be_.end_capture();  // leave capture mode before reporting
        throw;
      }
      entry.graph = be_.end_capture();
      entry.outputs = std::make_shared<Outputs>(outputs);
      be_.replay(entry.graph);
      return {outputs, StepRun::Recorded};
    }
    compute(outputs);
    entry.warmed = graphable;
    return {outputs, StepRun::Direct};
  }

  // Forgets every recording (buffers may change with the next stream's size).
  void clear() { entries_ = {}; }

 private:
  struct Entry {
    bool warmed = false;  // ran once directly: every buffer it needs exists
    std::shared_ptr<void> graph;
    std::shared_ptr<Outputs> outputs;
  };
  Backend& be_;
  std::array<Entry, StepKind::kCount> entries_{};
};

}  // namespace lingbot
