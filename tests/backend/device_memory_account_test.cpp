// The device-memory ledger's arithmetic (backend/device_memory_account.h):
// live and peak bytes, in total and per purpose, against sums worked out by
// hand; and the account's text.
#include "backend/device_memory_account.h"

#include <gtest/gtest.h>

using namespace lingbot;

namespace {

// Fake addresses: the ledger only compares them.
const void* at(uintptr_t a) { return reinterpret_cast<const void*>(a); }

const MemoryUse* find(const DeviceMemoryAccount& a, const std::string& what) {
  for (const MemoryUse& u : a.uses)
    if (u.what == what) return &u;
  return nullptr;
}

}  // namespace

TEST(MemoryLedger, CountsLiveAndPeakBytesByPurpose) {
  MemoryLedger ledger;
  ledger.add(at(0x1000), 100, "a tensor");
  ledger.add(at(0x2000), 50, "a tensor");
  ledger.add(at(0x3000), 30, "kv cache pages");
  ledger.remove(at(0x1000));  // tensors: 50 live, 150 at most
  ledger.add(at(0x4000), 70, "the cuDNN workspace");
  // Totals: 180 after the third add, 80 after the remove, 150 now.
  const DeviceMemoryAccount a = ledger.account();
  EXPECT_EQ(a.live_bytes, 150);
  EXPECT_EQ(a.peak_bytes, 180);
  ASSERT_EQ(a.uses.size(), 3u);
  EXPECT_EQ(a.uses[0].what, "the cuDNN workspace") << "largest live first";
  EXPECT_EQ(a.uses[1].what, "a tensor");
  EXPECT_EQ(a.uses[2].what, "kv cache pages");
  EXPECT_EQ(*find(a, "a tensor"), (MemoryUse{"a tensor", 50, 150, 1}));
  EXPECT_EQ(*find(a, "kv cache pages"), (MemoryUse{"kv cache pages", 30, 30, 1}));
  EXPECT_EQ(*find(a, "the cuDNN workspace"), (MemoryUse{"the cuDNN workspace", 70, 70, 1}));
}

TEST(MemoryLedger, IgnoresUnknownPointersAndDoubleRecords) {
  MemoryLedger ledger;
  ledger.add(at(0x1000), 10, "a tensor");
  ledger.add(at(0x1000), 999, "a tensor");  // the same block again: not counted twice
  ledger.remove(nullptr);
  ledger.remove(at(0x9000));
  const DeviceMemoryAccount a = ledger.account();
  EXPECT_EQ(a.live_bytes, 10);
  EXPECT_EQ(a.peak_bytes, 10);
  ledger.remove(at(0x1000));
  ledger.remove(at(0x1000));
  EXPECT_EQ(ledger.account().live_bytes, 0);
  EXPECT_EQ(find(ledger.account(), "a tensor")->allocations, 0);
}

TEST(MemoryLedger, ResetPeaksStartsFromWhatIsLive) {
  MemoryLedger ledger;
  ledger.add(at(1), 1000, "scale phase");
  ledger.add(at(2), 10, "stream");
  ledger.remove(at(1));
  ledger.reset_peaks();
  ledger.add(at(3), 5, "stream");
  const DeviceMemoryAccount a = ledger.account();
  EXPECT_EQ(a.peak_bytes, 15);
  EXPECT_EQ(find(a, "scale phase")->peak_bytes, 0);
  EXPECT_EQ(find(a, "stream")->peak_bytes, 15);
}

TEST(MemoryAccount, NamesWhatIsOutsideTheLedger) {
  DeviceMemoryAccount a;
  a.uses = {{"kv cache pages", 7'000'000'000, 7'000'000'000, 24}, {"a tensor", 3'000'000'000, 3'500'000'000, 1}};
  a.live_bytes = 10'000'000'000;
  a.peak_bytes = 10'500'000'000;
  a.device_in_use = 11'200'000'000;
  a.device_total = 150'000'000'000;
  EXPECT_EQ(a.outside_ledger(), 1'200'000'000);
  EXPECT_EQ(format_memory_account(a),
            "device memory: 11200 MB in use of 150000 (cudaMemGetInfo), 10000 MB allocated by lingbot (peak 10500 "
            "MB), 1200 MB outside it (CUDA context, cuBLASLt's and cuDNN's own)\n"
            "  kv cache pages 7000 MB (peak 7000 MB, 24 allocations)\n"
            "  a tensor 3000 MB (peak 3500 MB, 1 allocation)\n");
  a.thread_stack_bytes = 256;  // the driver's per-thread stack limit, when known
  const std::string with_stack = format_memory_account(a);
  EXPECT_EQ(with_stack.substr(0, with_stack.find('\n')),
            "device memory: 11200 MB in use of 150000 (cudaMemGetInfo), 10000 MB allocated by lingbot (peak 10500 "
            "MB), 1200 MB outside it (CUDA context with a 256 B stack per thread, cuBLASLt's and cuDNN's own)");
  a.device_in_use = -1;  // the driver could not be asked
  EXPECT_EQ(a.outside_ledger(), 0);
  const std::string text = format_memory_account(a);
  EXPECT_EQ(text.substr(0, text.find('\n')), "device memory: 10000 MB allocated by lingbot (peak 10500 MB)");
}
