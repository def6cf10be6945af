// DerivedWeights (backend/cpu/derived_weights.h): a weight's derived tensor
// is made once and kept while the weight's memory lives; a tensor at the same
// address with other memory, another shape or another type gets its own;
// the entries of freed weights are dropped.
#include "backend/cpu/derived_weights.h"

#include <gtest/gtest.h>

#include <memory>
#include <vector>

using namespace lingbot;
using namespace lingbot::cpu;

namespace {

// A derived tensor that records what it was made from: the weight's first
// value, plus one per call of make so far.
struct CountingMake {
  int calls = 0;
  Tensor operator()(const Tensor& w) {
    ++calls;
    Tensor t = Tensor::empty({1});
    t.f32()[0] = w.f32()[0] + static_cast<float>(calls);
    return t;
  }
};

}  // namespace

TEST(DerivedWeights, MadeOnceWhileTheWeightLives) {
  DerivedWeights cache;
  CountingMake make;
  Tensor w = Tensor::empty({2, 3});
  w.f32()[0] = 10;
  const Tensor first = cache.get(w, std::ref(make));
  const Tensor second = cache.get(w, std::ref(make));
  EXPECT_EQ(make.calls, 1);
  EXPECT_EQ(first.data(), second.data());
  EXPECT_EQ(second.f32()[0], 11.0f);

  Tensor other = Tensor::empty({2, 3});
  other.f32()[0] = 20;
  EXPECT_EQ(cache.get(other, std::ref(make)).f32()[0], 22.0f);  // its own
  EXPECT_EQ(cache.get(w, std::ref(make)).f32()[0], 11.0f);      // w's kept
  EXPECT_EQ(make.calls, 2);
}

TEST(DerivedWeights, SameAddressOtherMemoryShapeOrTypeIsMadeAnew) {
  DerivedWeights cache;
  CountingMake make;
  // One buffer that two owners in turn present as their memory: the second
  // stands for a tensor allocated at the address of a freed first one.
  std::vector<float> buffer(6, 1.0f);
  Tensor first = Tensor::wrap(buffer.data(), {2, 3}, DType::F32, Device::CPU, std::make_shared<int>(1));
  EXPECT_EQ(cache.get(first, std::ref(make)).f32()[0], 2.0f);
  first = Tensor();  // its owner freed
  buffer[0] = 5.0f;
  const Tensor second = Tensor::wrap(buffer.data(), {2, 3}, DType::F32, Device::CPU, std::make_shared<int>(2));
  EXPECT_EQ(cache.get(second, std::ref(make)).f32()[0], 7.0f);
  EXPECT_EQ(make.calls, 2);

  // A view of another shape at the same address, with the same owner.
  const Tensor flat = second.reshape({6});
  EXPECT_EQ(cache.get(flat, std::ref(make)).f32()[0], 8.0f);
  EXPECT_EQ(make.calls, 3);
}

TEST(DerivedWeights, FreedWeightsEntriesAreDropped) {
  DerivedWeights cache;
  CountingMake make;
  Tensor kept = Tensor::empty({4});
  kept.f32()[0] = 0;
  cache.get(kept, std::ref(make));
  const void* gone_at = nullptr;
  {
    Tensor gone = Tensor::empty({1024});
    gone.f32()[0] = 0;
    gone_at = gone.data();
    cache.get(gone, std::ref(make));
    EXPECT_EQ(cache.size(), 2u);
  }
  // A new weight elsewhere (not at the freed one's address, whose entry it
  // would simply replace): making its derived tensor drops the freed one's.
  std::vector<Tensor> allocated;
  do {
    allocated.push_back(Tensor::empty({1024}));
  } while (allocated.back().data() == gone_at);
  Tensor& next = allocated.back();
  next.f32()[0] = 0;
  cache.get(next, std::ref(make));
  EXPECT_EQ(cache.size(), 2u);
}
