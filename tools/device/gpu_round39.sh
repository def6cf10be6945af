#!/usr/bin/env bash
# GPU machine, round 39 (experiment): where the balanced schedule loses.
# The paged full window on: the grid schedule with two consumers (splits
# 1) and with three (splits 4, LINGBOT_WS_PAGED_CONSUMERS=3; round 28 had
# 742-744 us); the balanced schedule over 132 persistent CTAs and over 264
# and 128 (LINGBOT_BALANCED_CTAS: one third per CTA in two waves).
# The balanced schedule's last version is commit f45b3ea, reverted in the
# next; rounds 34-41 ran its successive versions (attention_versions.md,
# wgmma v4, says what each changed). The environment variables some rounds
# set were experiment hooks that existed only in the working tree then.
set -uo pipefail
ROUND=r39
source tools/device/round_lib.sh
round_begin
round_deps
round_build attention_cuda_bench
b() { timeout 40 $B/bin/attention_cuda_bench --benchmark_filter="PagedFullWindow/kernel:3/splits:$1/" 2>&1 | grep -E "^BM_" | cut -c1-110 | sed "s/^/$2 /" | tee -a $S; }
for i in 1 2; do
  b 1 grid2
  LINGBOT_WS_PAGED_CONSUMERS=3 b 2 grid3_s2
  LINGBOT_WS_PAGED_CONSUMERS=3 b 4 grid3_s4
  b 0 bal132
  LINGBOT_BALANCED_CTAS=264 b 0 bal264
  LINGBOT_BALANCED_CTAS=128 b 0 bal128
  LINGBOT_BALANCED_CTAS=396 b 0 bal396
done
keep
log done
