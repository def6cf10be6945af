#!/usr/bin/env bash
# GPU machine, round 43: wgmma v5, the balanced schedule with pair tiles
# (the leftover row blocks of each head as two-consumer tiles: no step
# loads more than one K/V tile). Kernel against the grid schedule; the
# attention tests; end to end against bd24898 (.old/) only if the kernel
# is faster.
# The code it ran is commit f4e41eb, reverted in the next commit. (The
# benchmark build of that tree had no grid-schedule case, so the
# comparison is with rounds 34-42: 712-741 us.)
set -uo pipefail
ROUND=r43
source tools/device/round_lib.sh
round_begin
round_deps
old_build_start lingbot-map
round_build lingbot-map cuda_tests attention_cuda_bench
log "kernel: splits 0 = balanced, splits 1 = grid"
for i in 1 2 3; do
  timeout 40 $B/bin/attention_cuda_bench --benchmark_filter='PagedFullWindow/kernel:3/splits:(0|1)/' 2>&1 | grep -E "^BM_" | cut -c1-150 | tee -a $S $R/kernel.txt
done; keep
log "attention tests"
timeout 150 $B/bin/cuda_tests --gtest_filter='CudaAttention*' > $R/attn_tests.log 2>&1
echo "rc=$?" | tee -a $S; grep -E "FAILED|PASSED|tests ran|Failure" $R/attn_tests.log | head -10 | cut -c1-200 | tee -a $S; keep
faster=$(awk '/splits:0/{b+=$2;nb++} /splits:1/{g+=$2;ng++} END{print (nb && ng && b/nb < g/ng) ? 1 : 0}' $R/kernel.txt)
echo "balanced faster: $faster" | tee -a $S
if [ "$faster" = 1 ]; then
  wait $OLD; echo "old build rc=$?" | tee -a $S
  log "end to end, alternating"
  for i in 1 2; do
    bench new$i --frames 200
    bench_old old$i --frames 200; keep
  done
fi
log done
