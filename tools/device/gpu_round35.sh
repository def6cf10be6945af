#!/usr/bin/env bash
# GPU machine, round 35: the balanced schedule with shares in multiples of
# a third of a tile (LINGBOT_BALANCED_ALIGNED, experiment: CTAs then read
# the keys at three places at a time instead of ~6 per head) against even
# shares and the grid schedule, kernel alone and end to end.
# The balanced schedule's last version is commit f45b3ea, reverted in the
# next; rounds 34-41 ran its successive versions (attention_versions.md,
# wgmma v4, says what each changed). The environment variables some rounds
# set were experiment hooks that existed only in the working tree then.
set -uo pipefail
ROUND=r35
source tools/device/round_lib.sh
round_begin
round_deps
old_build_start lingbot-map
round_build lingbot-map cuda_tests attention_cuda_bench
log "kernel alone: splits 0 = balanced (even, then aligned), splits 1 = grid"
F='PagedFullWindow/kernel:3/splits:(0|1)/'
for i in 1 2; do
  timeout 40 $B/bin/attention_cuda_bench --benchmark_filter=$F 2>&1 | grep -E "^BM_" | cut -c1-150 | sed 's/^/even    /' | tee -a $S
  LINGBOT_BALANCED_ALIGNED=1 timeout 40 $B/bin/attention_cuda_bench --benchmark_filter=$F 2>&1 | grep -E "^BM_" | cut -c1-150 | sed 's/^/aligned /' | tee -a $S
done; keep
log "aligned: attention tests"
LINGBOT_BALANCED_ALIGNED=1 timeout 150 $B/bin/cuda_tests --gtest_filter='CudaAttention*' > $R/attn_tests.log 2>&1
echo "rc=$?" | tee -a $S; grep -E "FAILED|PASSED|tests ran|Failure" $R/attn_tests.log | head -10 | cut -c1-200 | tee -a $S; keep
wait $OLD; echo "old build rc=$?" | tee -a $S
log "end to end"
export LINGBOT_BALANCED_ALIGNED=1
bench aligned --frames 200
bench_old old --frames 200; keep
bench aligned2 --frames 200
log done
