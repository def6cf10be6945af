// The engine's options, each defined once, in LINGBOT_OPTIONS below: its
// name, type, default, range and help text (part of <lingbot/lingbot.h>).
//
// Everything else is made from that list, so nothing can disagree with it:
//   * lingbot::Options, the public API's options (one field per row);
//   * lingbot::option_defaults, the defaults the library's internal structs
//     (StreamOptions, CudaBackendOptions) initialise their fields with;
//   * the lingbot-map CLI's flags: one per row, named as the row with '-'
//     for '_' (kv_window is --kv-window); a boolean that defaults to true is
//     turned off with --no-NAME (dense: --no-dense), one that defaults to
//     false is turned on with --NAME; the help is the row's;
//   * lingbot::set_option(options, "kv_window", "32"), by name.
//
// Options that the model config file also sets (docs/model-config.md) have
// no default of their own: unset, the config's value applies.
#pragma once

#include <climits>
#include <optional>
#include <string>

// One row per option, by kind:
//   INT(group, name, default, min, max, help)
//   CONFIG_INT(group, name, config_key, min, help)   unset: the config's `config_key`
//   BOOL(group, name, default, help_on, help_off)    what true and false do
//   CHOICE(group, name, default, choices, help)      choices: "a|b|c"
// group: the part of the engine that reads it (lingbot::OptionGroup).
// Help texts are sentences without the final full stop; the CLI appends the
// default.
#define LINGBOT_OPTIONS(INT, CONFIG_INT, BOOL, CHOICE)                                                          \
  CHOICE(Device, device, "auto", "cpu|cuda|auto",                                                              \
         "Where the model runs: cpu, cuda (the first GPU) or auto (the GPU if one is usable, else the CPU)")    \
  INT(Device, threads, 0, 0, INT_MAX, "CPU threads (0: all cores)")                                            \
  CHOICE(Device, cpu_isa, "auto", "auto|avx2|avx512",                                                          \
         "Instruction set of the CPU path's own kernels: auto (the best this CPU has), or avx2 or avx512 "      \
         "forced (testing every path on one machine; a CPU without it is an error)")                            \
  CHOICE(Device, cpu_dtype, "fp32", "fp32|bf16",                                                             \
         "Number type of the CPU path's transformer: fp32, or bf16 (bfloat16 weights and activations with "    \
         "float32 sums, through oneDNN; for CPUs with AVX512-BF16 or AMX; half the weight memory)")             \
  CHOICE(Device, cpu_bf16_products, "auto", "auto|amx|onednn|widened",                                       \
         "Kernel of the bf16 mode's matrix products (--cpu-dtype bf16): auto (amx where the CPU has AMX-BF16, "  \
         "else whichever of onednn and widened runs faster here), amx (ours on AMX tiles), onednn (oneDNN's "  \
         "bf16 matmul; needs AVX512-BF16) or widened (bf16 weights widened to float32 for sgemm). The same "   \
         "results up to float32 rounding")                                                                      \
  CHOICE(Stream, kv_cache, "paged", "paged|dense", "Layout of the KV cache: paged or dense (same results)")     \
  CHOICE(Stream, kv_dtype, "auto", "auto|bf16|fp8",                                                          \
         "Storage of the KV cache's keys and values: auto (the compute type: bfloat16 on the GPU, float32 on "  \
         "the CPU), bf16, or fp8 (e4m3 with a float32 scale per token and head: 53% of bf16's memory)")       \
  CHOICE(Stream, camera_head_weights, "auto", "auto|fp32|bf16",                                               \
         "Storage of the camera head's matrix weights (0.85 GB in float32 on the official model): fp32 as "      \
         "upstream, or bf16 (half the memory; its products stay float32). auto: bf16 with memory_profile low "  \
         "or cpu_dtype bf16 on the CPU, else fp32")                                                             \
  CONFIG_INT(Stream, num_scale_frames, "num_scale_frames", 1,                                                   \
             "Frames processed together at the start of a stream; the KV cache also keeps this many first "    \
             "frames for good (kv_cache_scale_frames), as upstream demo.py's --num_scale_frames does")          \
  CONFIG_INT(Stream, kv_window, "kv_cache_sliding_window", 1,                                                   \
             "Sliding window of the KV cache: the most recent frames kept whole")                               \
  INT(Stream, keyframe_interval, 1, 1, INT_MAX,                                                                \
      "Store every N-th frame after the scale frames in the KV cache (1: every frame)")                         \
  CONFIG_INT(Stream, camera_iterations, "camera_num_iterations", 1, "Refinement iterations of the camera head") \
  INT(Stream, pipeline_depth, 2, 0, 2,                                                                          \
      "How many pushes a frame's results trail its own: 2 runs a frame's camera and depth heads beside the "    \
      "next frame's encoder and aggregator and reads its results back while the frame after runs; 1 only "     \
      "overlaps the read-back; 0 waits for each frame. The results are the same for all three")               \
  CHOICE(Stream, mode, "streaming", "streaming|windowed",                                                      \
         "As upstream demo.py's --mode: streaming (one KV cache over the whole video) or windowed (windows of " \
         "window_size keyframes, each with a fresh cache, aligned into the first window's frame)")             \
  INT(Stream, window_size, 64, 2, INT_MAX,                                                                      \
      "Windowed mode: keyframes per window, the scale frames included")                                        \
  INT(Stream, overlap_size, 16, 1, INT_MAX, "Windowed mode: frames shared by consecutive windows")              \
  INT(Stream, overlap_keyframes, 0, 0, INT_MAX,                                                                 \
      "Windowed mode: if set, the overlap is max(num_scale_frames, overlap_keyframes x keyframe_interval) "    \
      "frames instead of overlap_size (0: unset)")                                                             \
  CHOICE(Stream, window_align, "upstream", "upstream|sim3",                                                     \
         "Windowed mode: how a window is brought into the previous one's frame: upstream (upstream's Sim(3), " \
         "exactly) or sim3 (the similarity of the overlap's cameras read as the world-to-camera poses they "   \
         "are; docs/video.md)")                                                                                \
  BOOL(Stream, allow_extra_tensors, false,                                                                     \
       "Run on a checkpoint that also holds tensors the model does not use (named in a warning)",              \
       "Refuse a checkpoint that holds tensors the model does not use (another variant, renamed layers)")      \
  BOOL(Stream, dense, true, "Keep depth, confidence and world points of every frame",                          \
       "Cameras only: skip the depth head and keep no per-pixel outputs (for long runs)")                      \
  INT(Stream, depth_head_batch, 0, 0, 64,                                                                      \
      "Frames the depth head takes in one pass in the scale phase (0: 4 on a GPU, 1 on the CPU and with "       \
      "memory_profile low). 4 is faster on a GPU than 1 and holds about 1.8 GB more device memory at 378 x "   \
      "504 while the scale phase runs (freed when streaming starts); the results are the same")             \
  CHOICE(Stream, depth_head_layout, "nhwc", "nhwc|nchw",                                                       \
         "Layout of the depth head's feature maps: nhwc (channels last: the convolutions run without layout "   \
         "transposes, faster on GPU and CPU) or nchw (channels first, as upstream). Same results up to "        \
         "float32 rounding")                                                                                   \
  CHOICE(Stream, depth_head_dtype, "fp32", "fp32|bf16",                                                         \
         "Number type of the depth head's feature maps and convolution weights: fp32 (as upstream; TF32 "       \
         "convolutions on a GPU) or bf16 (bfloat16 with float32 sums: half the bytes and bf16 tensor cores on " \
         "a GPU; on the CPU only with --cpu-dtype bf16, computed widened). Needs depth_head_layout nhwc")      \
  INT(Preprocess, image_size, 518, 1, INT_MAX,                                                                  \
      "Frame width after preprocessing (crop) or its longest side (pad), in pixels")                            \
  CHOICE(Preprocess, preprocess, "crop", "crop|pad",                                                            \
         "Preprocessing, as upstream's load_and_preprocess_images mode: crop (resize to the width, keep the "   \
         "middle rows) or pad (resize the longest side, pad with white to a square)")                           \
  BOOL(Cuda, cuda_graphs, true, "Replay streaming steps as CUDA graphs", "Run every step eagerly (no CUDA graphs)") \
  BOOL(Cuda, cuda_sync, false,                                                                                  \
       "Wait for the GPU after every op and name the op whose kernel failed (debugging; slow)",               \
       "Ops only enqueue work on the GPU")                                                                      \
  CHOICE(Cuda, lane_priority, "equal", "equal|main",                                                            \
         "Priorities of the GPU's two streams: equal, or main (the main stream's kernels before the side "     \
         "branch's, which fills what the main work leaves idle)")                                               \
  CHOICE(Cuda, attention_kernel, "auto", "auto|mma|wgmma-ws",                                                   \
         "Tensor-core attention kernel where one applies (bfloat16, head_dim 64): auto is wgmma-ws on Hopper "  \
         "and mma elsewhere; mma or wgmma-ws pins that kernel on Hopper")                                     \
  CHOICE(Cuda, conv_algorithm, "heuristic", "heuristic|measured",                                              \
         "How the depth head's cuDNN convolutions pick their algorithm, once per shape: heuristic (cuDNN's "   \
         "ranking, no trial runs) or measured (every algorithm timed on the first call, as PyTorch's "        \
         "cudnn.benchmark; the first frame takes longer)")                                                    \
  CHOICE(Cuda, gemm_algorithm, "heuristic", "heuristic|measured",                                              \
         "How the cuBLASLt matrix products pick their algorithm, once per problem: heuristic (cuBLASLt's "     \
         "first candidate) or measured (its first 16 candidates timed on the first call, the fastest kept "    \
         "where it is at least 5% faster than the first; the first frame takes longer)")                      \
  CHOICE(Cuda, memory_profile, "default", "default|low",                                                       \
         "Device memory: default, or low for small GPUs (kv_window 32, kv_dtype fp8 and camera_head_weights "   \
         "bf16 unless set, the scale phase's buffers freed before the first streamed frame, 4 MiB cuBLASLt "    \
         "workspaces)")

namespace lingbot {

// The part of the engine an option belongs to (the CLI groups its flags so:
// `run` has them all, `bench` all but Preprocess).
enum class OptionGroup { Device, Stream, Preprocess, Cuda };

// The options of lingbot::Model (see LINGBOT_OPTIONS for each one's meaning).
struct Options {
#define LINGBOT_INT_FIELD_(group, name, default_value, min, max, help) int name = default_value;
#define LINGBOT_CONFIG_INT_FIELD_(group, name, config_key, min, help) std::optional<int> name;
#define LINGBOT_BOOL_FIELD_(group, name, default_value, help_on, help_off) bool name = default_value;
#define LINGBOT_CHOICE_FIELD_(group, name, default_value, choices, help) std::string name = default_value;
  LINGBOT_OPTIONS(LINGBOT_INT_FIELD_, LINGBOT_CONFIG_INT_FIELD_, LINGBOT_BOOL_FIELD_, LINGBOT_CHOICE_FIELD_)
#undef LINGBOT_INT_FIELD_
#undef LINGBOT_CONFIG_INT_FIELD_
#undef LINGBOT_BOOL_FIELD_
#undef LINGBOT_CHOICE_FIELD_

  bool operator==(const Options&) const = default;
};

// Each option's default as a constant (none for the CONFIG_INT rows), for
// the library's internal structs.
namespace option_defaults {
#define LINGBOT_INT_DEFAULT_(group, name, default_value, min, max, help) inline constexpr int name = default_value;
#define LINGBOT_CONFIG_INT_DEFAULT_(group, name, config_key, min, help)
#define LINGBOT_BOOL_DEFAULT_(group, name, default_value, help_on, help_off) \
  inline constexpr bool name = default_value;
#define LINGBOT_CHOICE_DEFAULT_(group, name, default_value, choices, help) \
  inline constexpr const char* name = default_value;
LINGBOT_OPTIONS(LINGBOT_INT_DEFAULT_, LINGBOT_CONFIG_INT_DEFAULT_, LINGBOT_BOOL_DEFAULT_, LINGBOT_CHOICE_DEFAULT_)
#undef LINGBOT_INT_DEFAULT_
#undef LINGBOT_CONFIG_INT_DEFAULT_
#undef LINGBOT_BOOL_DEFAULT_
#undef LINGBOT_CHOICE_DEFAULT_
}  // namespace option_defaults

}  // namespace lingbot
