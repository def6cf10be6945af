#!/usr/bin/env bash
# GPU machine, round 37: the balanced schedule with shares in whole thirds
# of a tile and lone blocks split into thirds of the keys (every CTA reads
# at one of three places). Tests; the kernel against the grid schedule;
# Nsight Compute's memory figures for it; end to end against the previous
# tree (bd24898, .old/); the rest of the CUDA suite.
# The balanced schedule's last version is commit f45b3ea, reverted in the
# next; rounds 34-41 ran its successive versions (attention_versions.md,
# wgmma v4, says what each changed). The environment variables some rounds
# set were experiment hooks that existed only in the working tree then.
set -uo pipefail
ROUND=r37
source tools/device/round_lib.sh
round_begin
round_deps
old_build_start lingbot-map
round_build lingbot-map cuda_tests attention_cuda_bench
log "attention tests"
timeout 150 $B/bin/cuda_tests --gtest_filter='CudaAttention*:CudaBackendNorm*' > $R/attn_tests.log 2>&1
echo "rc=$?" | tee -a $S; grep -E "FAILED|PASSED|tests ran|Failure" $R/attn_tests.log | head -10 | cut -c1-200 | tee -a $S; keep
log "kernel alone: splits 0 = balanced, splits 1 = grid"
for i in 1 2 3; do
  timeout 40 $B/bin/attention_cuda_bench --benchmark_filter='PagedFullWindow/kernel:3/splits:(0|1)/' 2>&1 | grep -E "^BM_" | cut -c1-150 | tee -a $S
done; keep
log "ncu balanced"
timeout 60 ncu --kernel-name regex:attention_wgmma_ws --launch-skip 3 --launch-count 1 --section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats --section InstructionStats \
  $B/bin/attention_cuda_bench --benchmark_filter='PagedFullWindow/kernel:3/splits:0/' > $R/ncu_balanced.txt 2>&1
grep -E "Duration|DRAM Throughput|L2 Hit|No Eligible|Warp Cycles Per Issued|Executed Instructions  " $R/ncu_balanced.txt | cut -c1-150 | tee -a $S; keep
wait $OLD; echo "old build rc=$?" | tee -a $S
log "end to end, alternating"
for i in 1 2; do
  bench new$i --frames 200
  bench_old old$i --frames 200; keep
done
log "CUDA suite (the rest)"
timeout 200 $B/bin/cuda_tests --gtest_filter='-CudaAttention*:CudaBackendNorm*' > $R/cuda_tests.log 2>&1
echo "rc=$?" | tee -a $S; grep -E "FAILED|PASSED|tests ran|Failure" $R/cuda_tests.log | head -10 | cut -c1-200 | tee -a $S
grep -E "vs upstream" $R/cuda_tests.log | sort -k5 -g | tail -3 | cut -c1-160 | tee -a $S; keep
log done
