// The read-back queue (model/readback_queue.h): a step's outputs land in a
// host slot with their values; a slot's memory only grows, so a scale step
// (several frames) and the streamed frames after it share it; and after
// discard_all() (a reset) the next step takes the first slot again, so a
// new stream's scale step finds the memory the previous one grew.
#include "backend/backend.h"
#include "model/readback_queue.h"
#include "test_support.h"

#include <gtest/gtest.h>

namespace lingbot {
namespace {

struct Outputs {
  Tensor poses, raw;
};

// A step of `frames` frames whose outputs hold values of their own.
Outputs step_outputs(int frames, float base) {
  Outputs o{Tensor::empty({4, frames, 9}), Tensor::empty({frames, 2, 6, 10})};
  for (int64_t i = 0; i < o.poses.numel(); ++i) o.poses.f32()[i] = base + static_cast<float>(i);
  for (int64_t i = 0; i < o.raw.numel(); ++i) o.raw.f32()[i] = -base - static_cast<float>(i);
  return o;
}

void expect_landed(const LandedStep& landed, const Outputs& sent, const std::string& what) {
  ASSERT_NE(landed.raw, nullptr) << what;
  EXPECT_EQ(landed.poses->shape(), sent.poses.shape()) << what;
  EXPECT_EQ(landed.raw->shape(), sent.raw.shape()) << what;
  EXPECT_EQ(test::max_abs_diff(*landed.poses, sent.poses), 0.0) << what;
  EXPECT_EQ(test::max_abs_diff(*landed.raw, sent.raw), 0.0) << what;
}

TEST(ReadbackQueue, SlotsGrowOnlyAndAResetStartsAtTheFirst) {
  auto be = make_cpu_backend(1);
  ReadbackQueue queue(*be);
  const Outputs scale = step_outputs(8, 100);
  queue.enqueue(StepInfo{8, 6, 10, true, 0}, scale.poses, &scale.raw);
  LandedStep landed = queue.pop();
  expect_landed(landed, scale, "scale step");
  const void* first_slot = landed.raw->data();

  // Streamed frames alternate between the slots; the first slot's frame
  // lands at the start of the scale step's memory.
  const Outputs a = step_outputs(1, 1), b = step_outputs(1, 2), c = step_outputs(1, 3);
  queue.enqueue(StepInfo{1, 6, 10, true, 8}, b.poses, &b.raw);  // second slot
  queue.enqueue(StepInfo{1, 6, 10, true, 9}, c.poses, &c.raw);  // first slot
  landed = queue.pop();
  expect_landed(landed, b, "frame 8");
  const void* second_slot = landed.raw->data();
  EXPECT_NE(second_slot, first_slot);
  landed = queue.pop();
  expect_landed(landed, c, "frame 9");
  EXPECT_EQ(landed.raw->data(), first_slot) << "the first slot's memory was replaced for a smaller step";

  // A reset with a step in flight (in the second slot): the next stream's
  // scale step goes to the first slot, into the memory it had.
  queue.enqueue(StepInfo{1, 6, 10, true, 10}, a.poses, &a.raw);
  queue.discard_all();
  EXPECT_EQ(queue.in_flight(), 0u);
  const Outputs again = step_outputs(8, 200);
  queue.enqueue(StepInfo{8, 6, 10, true, 0}, again.poses, &again.raw);
  landed = queue.pop();
  expect_landed(landed, again, "the next stream's scale step");
  EXPECT_EQ(landed.raw->data(), first_slot) << "the next stream's scale step did not reuse the first slot";
}

}  // namespace
}  // namespace lingbot
