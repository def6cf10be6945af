// Streaming behaviour of the whole model on the small config: a clean reset
// between videos, bounded memory over long streams, and the protocol's
// edge cases (streams shorter than the scale phase, frame size changes).
#include "backend/backend.h"
#include "checkpoint/checkpoint.h"
#include "model/streaming_model.h"
#include "test_support.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>

using namespace lingbot;

namespace {

struct Fixture {
  ModelConfig config = ModelConfig::from_file(test::fixture_path("model_small/config.json"));
  io::StateDict weights = io::load_state_dict(test::fixture_path("model_small/weights.pt"));
};

std::vector<Tensor> random_frames(int n, int h, int w, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(0.f, 1.f);
  std::vector<Tensor> frames;
  for (int i = 0; i < n; ++i) {
    Tensor f = Tensor::empty({3, h, w});
    for (int64_t k = 0; k < f.numel(); ++k) f.f32()[k] = u(rng);
    frames.push_back(f);
  }
  return frames;
}

std::vector<FrameResult> stream(StreamingModel& m, const std::vector<Tensor>& frames) {
  std::vector<FrameResult> out;
  for (const Tensor& f : frames)
    for (FrameResult& r : m.push(f)) out.push_back(std::move(r));
  for (FrameResult& r : m.finish()) out.push_back(std::move(r));
  return out;
}

}  // namespace

TEST(Streaming, ResetGivesBitIdenticalReruns) {
  Fixture fx;
  auto be = make_cpu_backend(1);
  for (kv::Layout layout : {kv::Layout::Dense, kv::Layout::Paged}) {
    StreamOptions opt = StreamOptions::from_config(fx.config);
    opt.cache_layout = layout;
    opt.keyframe_interval = 2;
    StreamingModel m(*be, fx.weights, fx.config, opt);
    const auto frames = random_frames(12, 42, 56, 1);
    const auto first = stream(m, frames);
    // Another video in between, of another size.
    m.reset();
    stream(m, random_frames(7, 28, 70, 2));
    m.reset();
    const auto again = stream(m, frames);
    ASSERT_EQ(first.size(), again.size());
    for (size_t i = 0; i < first.size(); ++i) {
      EXPECT_EQ(first[i].pose_enc, again[i].pose_enc) << "frame " << i;
      EXPECT_EQ(test::max_abs_diff(first[i].depth, again[i].depth), 0.0) << "frame " << i;
      EXPECT_EQ(first[i].keyframe, again[i].keyframe);
    }
  }
}

// Issue #19: reset() keeps the KV pool (already faulted in), so a second
// video of the same size on the same model allocates no KV memory and
// gives the same results bit for bit, in every storage type.
TEST(Streaming, SecondStreamReusesTheKvPool) {
  Fixture fx;
  auto be = make_cpu_backend(1);
  for (kv::Layout layout : {kv::Layout::Dense, kv::Layout::Paged}) {
    for (kv::KvDtype dtype : {kv::KvDtype::Auto, kv::KvDtype::Fp8}) {
      StreamOptions opt = StreamOptions::from_config(fx.config);
      opt.cache_layout = layout;
      opt.cache.dtype = dtype;
      StreamingModel m(*be, fx.weights, fx.config, opt);
      const auto frames = random_frames(12, 28, 42, 4);
      const auto first = stream(m, frames);
      const kv::CacheStats before = m.cache_stats();
      ASSERT_GT(before.bytes_allocated_total, 0);
      m.reset();
      const auto again = stream(m, frames);
      const kv::CacheStats after = m.cache_stats();
      const std::string what = std::string(kv::layout_name(layout)) + " " + std::string(kv::kv_dtype_name(dtype));
      EXPECT_EQ(after.bytes_allocated_total, before.bytes_allocated_total) << what;
      EXPECT_EQ(after.bytes_reserved, before.bytes_reserved) << what;
      ASSERT_EQ(first.size(), again.size());
      for (size_t i = 0; i < first.size(); ++i) {
        EXPECT_EQ(first[i].pose_enc, again[i].pose_enc) << what << " frame " << i;
        EXPECT_EQ(test::max_abs_diff(first[i].depth, again[i].depth), 0.0) << what << " frame " << i;
      }
    }
  }
}

TEST(Streaming, LongStreamsKeepMemoryFlat) {
  Fixture fx;
  auto be = make_cpu_backend(1);
  StreamOptions opt = StreamOptions::from_config(fx.config);
  opt.keep_dense_outputs = false;
  StreamingModel m(*be, fx.weights, fx.config, opt);
  const auto frames = random_frames(4, 28, 42, 3);
  const int W = opt.cache.sliding_window, S = opt.cache.scale_frames;
  size_t workspace_after_warmup = 0;
  int64_t reserved_at_100 = 0;
  for (int i = 0; i < 400; ++i) {
    m.push(frames[static_cast<size_t>(i % 4)]);
    if (i == 20) workspace_after_warmup = m.workspace_bytes();
    const kv::CacheStats s = m.cache_stats();
    if (i >= opt.num_scale_frames + W) {
      // The frame list is pinned scale frames plus the window: constant.
      EXPECT_EQ(s.frames_listed, S + W) << "frame " << i;
    }
    if (i == 100) reserved_at_100 = s.frame_pages;
  }
  EXPECT_EQ(m.workspace_bytes(), workspace_after_warmup);  // no allocation per frame
  const kv::CacheStats s = m.cache_stats();
  EXPECT_EQ(s.frames_stored, 400);
  EXPECT_EQ(s.special_tokens_retained, 6 * (400 - S - W));  // every evicted frame leaves its 6 specials
  EXPECT_EQ(s.frame_pages, reserved_at_100);  // patch pages bounded
}

// The model's paged KV pool grows a page at a time on the CPU (by two in fp8
// on the GPU), so past the window it holds the pages in use and at most the
// one a step takes before it evicts: never a chunk of pages it never used.
TEST(Streaming, KvPoolHoldsNoUnusedChunk) {
  Fixture fx;
  auto be = make_cpu_backend(1);
  for (kv::KvDtype dtype : {kv::KvDtype::Auto, kv::KvDtype::Fp8}) {
    StreamOptions opt = StreamOptions::from_config(fx.config);
    opt.keep_dense_outputs = false;
    opt.cache.dtype = dtype;
    ASSERT_GT(opt.cache.pool_growth_pages, 1) << "the default would hide the policy";
    StreamingModel m(*be, fx.weights, fx.config, opt);
    const auto frames = random_frames(3, 28, 42, 5);
    int64_t most_in_use = 0;
    for (int i = 0; i < 40; ++i) {
      m.push(frames[static_cast<size_t>(i % 3)]);
      const kv::CacheStats s = m.cache_stats();
      most_in_use = std::max(most_in_use, s.pages_in_use);
      // Every page of the pool was in use at some point, plus at most the
      // one taken before an eviction within a step.
      EXPECT_LE(s.pages_pool, most_in_use + 1) << kv::kv_dtype_name(dtype) << " frame " << i;
      EXPECT_EQ(s.pages_pool, s.pages_in_use + s.pages_free);
    }
    EXPECT_GT(m.cache_stats().frames_evicted, 0);
  }
}

TEST(Streaming, StreamShorterThanTheScalePhase) {
  Fixture fx;
  auto be = make_cpu_backend(1);
  StreamingModel m(*be, fx.weights, fx.config, StreamOptions::from_config(fx.config));
  const auto frames = random_frames(2, 28, 42, 4);  // the config asks for 3 scale frames
  EXPECT_TRUE(m.push(frames[0]).empty());
  EXPECT_TRUE(m.push(frames[1]).empty());
  const auto results = m.finish();
  ASSERT_EQ(results.size(), 2u);
  EXPECT_EQ(results[1].index, 1);
  EXPECT_TRUE(m.finish().empty());
}

TEST(Streaming, WrongFramesAreClearErrors) {
  Fixture fx;
  auto be = make_cpu_backend(1);
  StreamingModel m(*be, fx.weights, fx.config, StreamOptions::from_config(fx.config));
  EXPECT_THROW(m.push(Tensor::zeros({3, 30, 42})), Error);  // not a multiple of 14
  EXPECT_THROW(m.push(Tensor::zeros({1, 28, 42})), Error);  // not RGB
  m.push(Tensor::zeros({3, 28, 42}));
  try {
    m.push(Tensor::zeros({3, 42, 42}));
    FAIL() << "a size change mid-stream must be refused";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("differs from the stream"), std::string::npos) << e.what();
  }
}

// Pipelined read-back (pipeline_depth 1) returns each frame's results one
// push later, deferred heads (2, the default) two pushes later, and both
// exactly the values the synchronous mode (0) returns.
class StreamingPipeline : public ::testing::TestWithParam<int> {};

TEST_P(StreamingPipeline, ResultsEqualSynchronousOnes) {
  const int depth = GetParam();
  Fixture fx;
  auto be = make_cpu_backend(1);
  StreamOptions sync_opt = StreamOptions::from_config(fx.config);
  sync_opt.keyframe_interval = 2;
  sync_opt.pipeline_depth = 0;  // the default is 2
  StreamOptions pipe_opt = sync_opt;
  pipe_opt.pipeline_depth = depth;
  StreamingModel sync_model(*be, fx.weights, fx.config, sync_opt);
  StreamingModel pipe_model(*be, fx.weights, fx.config, pipe_opt);
  const auto frames = random_frames(9, 28, 42, 5);
  const int scale = sync_opt.num_scale_frames;

  std::vector<FrameResult> expected = stream(sync_model, frames);
  std::vector<FrameResult> got;
  for (int i = 0; i < static_cast<int>(frames.size()); ++i) {
    std::vector<FrameResult> r = pipe_model.push(frames[static_cast<size_t>(i)]);
    // Nothing until the last scale frame's push, which returns the whole
    // scale phase (never held back: the next step waits for it anyway);
    // then one frame per push, `depth` pushes back.
    if (i < scale - 1) {
      EXPECT_TRUE(r.empty()) << "push " << i;
    } else if (i == scale - 1) {
      ASSERT_EQ(r.size(), static_cast<size_t>(scale)) << "push " << i;
      EXPECT_EQ(r.front().index, 0);
      EXPECT_EQ(r.back().index, scale - 1);
    } else if (i < scale + depth) {
      EXPECT_TRUE(r.empty()) << "push " << i;
    } else {
      ASSERT_EQ(r.size(), 1u) << "push " << i;
      EXPECT_EQ(r[0].index, i - depth);
    }
    for (FrameResult& x : r) got.push_back(std::move(x));
  }
  std::vector<FrameResult> last = pipe_model.finish();
  ASSERT_EQ(last.size(), static_cast<size_t>(depth));
  for (int j = 0; j < depth; ++j) {
    EXPECT_EQ(last[static_cast<size_t>(j)].index, static_cast<int64_t>(frames.size()) - depth + j);
    got.push_back(std::move(last[static_cast<size_t>(j)]));
  }
  EXPECT_TRUE(pipe_model.finish().empty());

  ASSERT_EQ(got.size(), expected.size());
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].index, expected[i].index);
    EXPECT_EQ(got[i].keyframe, expected[i].keyframe) << "frame " << i;
    EXPECT_EQ(got[i].pose_enc, expected[i].pose_enc) << "frame " << i;
    EXPECT_EQ(test::max_abs_diff(got[i].depth, expected[i].depth), 0.0) << "frame " << i;
    EXPECT_EQ(test::max_abs_diff(got[i].world_points, expected[i].world_points), 0.0) << "frame " << i;
  }

  // A reset with a step in flight discards it; the next video starts clean.
  pipe_model.reset();
  pipe_model.push(frames[0]);
  const auto again = stream(pipe_model, std::vector<Tensor>(frames.begin() + 1, frames.end()));
  EXPECT_EQ(again.size(), frames.size());
  EXPECT_EQ(again.back().pose_enc, expected.back().pose_enc);
}

INSTANTIATE_TEST_SUITE_P(Depth, StreamingPipeline, ::testing::Values(1, 2),
                         [](const auto& info) { return "depth" + std::to_string(info.param); });

// The scale phase's multi-frame buffers are freed once streaming starts:
// the workspace then holds what a single-frame step needs, and stays there.
TEST(Streaming, ScalePhaseBuffersAreReleased) {
  Fixture fx;
  auto be = make_cpu_backend(1);
  StreamOptions opt = StreamOptions::from_config(fx.config);
  StreamingModel m(*be, fx.weights, fx.config, opt);
  const auto frames = random_frames(4, 28, 42, 6);
  const int scale = opt.num_scale_frames;
  ASSERT_GT(scale, 1);
  for (int i = 0; i < scale; ++i) m.push(frames[static_cast<size_t>(i % 4)]);
  const size_t after_scale = m.workspace_bytes();
  m.push(frames[0]);  // the first streaming step notes what it uses ...
  m.push(frames[1]);  // ... and the second frees the rest
  const size_t after_first = m.workspace_bytes();
  EXPECT_LT(after_first, after_scale);
  for (int i = 0; i < 5; ++i) m.push(frames[static_cast<size_t>(i % 4)]);
  EXPECT_EQ(m.workspace_bytes(), after_first);

  // A single-frame workspace is what a model that never ran a scale phase of
  // more than one frame would hold.
  StreamOptions one = opt;
  one.num_scale_frames = 1;
  one.cache.scale_frames = 1;
  StreamingModel single(*be, fx.weights, fx.config, one);
  for (int i = 0; i < 3; ++i) single.push(frames[static_cast<size_t>(i % 4)]);
  EXPECT_EQ(single.workspace_bytes(), after_first);
}

// Outputs that are not finite are named, frame by frame, in a warning: the
// frames the warning names are exactly those whose results hold NaN or
// infinity (checked here on the results themselves).
TEST(Streaming, NonFiniteOutputsAreWarnedAboutPerFrame) {
  Fixture fx;
  auto be = make_cpu_backend(1);
  StreamingModel m(*be, fx.weights, fx.config, StreamOptions::from_config(fx.config));
  auto frames = random_frames(5, 28, 42, 5);
  frames[4].f32()[7] = NAN;  // a damaged pixel in the last (streaming) frame
  testing::internal::CaptureStderr();
  const auto results = stream(m, frames);
  const std::string log = testing::internal::GetCapturedStderr();
  ASSERT_EQ(results.size(), 5u);
  int damaged = 0;
  for (const FrameResult& r : results) {
    bool finite = std::all_of(r.pose_enc.begin(), r.pose_enc.end(), [](float x) { return std::isfinite(x); });
    if (r.depth.defined())
      for (int64_t k = 0; k < r.depth.numel(); ++k) finite = finite && std::isfinite(r.depth.f32()[k]);
    const bool named = log.find("frame " + std::to_string(r.index) + ":") != std::string::npos;
    EXPECT_EQ(named, !finite) << "frame " << r.index << "\n" << log;
    damaged += finite ? 0 : 1;
  }
  EXPECT_GE(damaged, 1) << "the NaN pixel did not reach the outputs; the test checks nothing";
}

// The scale phase's depth head in batches (StreamOptions::depth_head_batch,
// the GPU's default is 4) gives the frame-by-frame head's values: the head
// has no cross-frame interaction. Batches of 2 over 5 scale frames leave a
// last batch of one, and 8 takes them all at once. The CPU's convolutions
// may sum in another order with more frames in a pass, so the bar is float32
// rounding, not bit-identity; cameras do not go through the head at all.
TEST(Streaming, DepthHeadBatchesGiveTheFrameByFrameResults) {
  Fixture fx;
  auto be = make_cpu_backend(1);
  const auto frames = random_frames(7, 42, 56, 9);
  StreamOptions opt = StreamOptions::from_config(fx.config);
  opt.num_scale_frames = 5;
  opt.cache.scale_frames = 5;
  opt.depth_head_batch = 1;
  StreamingModel one(*be, fx.weights, fx.config, opt);
  const auto expected = stream(one, frames);
  for (int batch : {2, 8}) {
    opt.depth_head_batch = batch;
    StreamingModel batched(*be, fx.weights, fx.config, opt);
    const auto got = stream(batched, frames);
    ASSERT_EQ(got.size(), expected.size());
    for (size_t i = 0; i < got.size(); ++i) {
      SCOPED_TRACE("batch " + std::to_string(batch) + ", frame " + std::to_string(i));
      EXPECT_EQ(got[i].pose_enc, expected[i].pose_enc);
      EXPECT_LE(test::relative_error(got[i].depth, expected[i].depth), 1e-6);
      EXPECT_LE(test::relative_error(got[i].depth_conf, expected[i].depth_conf), 1e-6);
      EXPECT_LE(test::relative_error(got[i].world_points, expected[i].world_points), 1e-6);
    }
  }
}
