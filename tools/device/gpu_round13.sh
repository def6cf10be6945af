#!/usr/bin/env bash
# Measured experiment code: the variants it selects (LINGBOT_WS_VARIANT,
# LINGBOT_WS_TILE) were removed once measured; figures in
# src/backend/cuda/attention_versions.md. Kept as the record.
# GPU machine, round 13: wgmma-ws with 192-key tiles (LINGBOT_WS_TILE=192)
# against 128: tests, kernel benchmarks, end-to-end; Nsight Compute counters
# of the 128-key kernel after round 12's changes.
set -uo pipefail
ROUND=r13
source tools/device/round_lib.sh
round_begin
round_deps
round_build lingbot-map cuda_tests attention_cuda_bench
log "ws tests, 192-key tiles"
LINGBOT_WS_TILE=192 timeout 100 $B/bin/cuda_tests --gtest_filter='CudaAttentionWgmmaWs*' > $R/tests.log 2>&1
echo "rc=$?" | tee -a $S; grep -E "^\[  (FAILED|PASSED) |OK \]" $R/tests.log | cut -c1-120 | tee -a $S
log "kernels"
for tile in 128 192 128 192; do
  echo "tile $tile" | tee -a $S
  LINGBOT_WS_TILE=$tile timeout 40 $B/bin/attention_cuda_bench \
    --benchmark_filter='PagedFullWindow/kernel:3/splits:0|Dense/groups:1/n:7824/kernel:3' 2>&1 | grep -E "^BM_" | cut -c1-150 | tee -a $S
done
log "ncu 128"
timeout 100 ncu --kernel-name regex:wgmma_ws --launch-count 1 --launch-skip 3 --section SpeedOfLight \
  --section InstructionStats --section WarpStateStats \
  --metrics regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio,smsp__inst_executed_pipe_xu.avg.pct_of_peak_sustained_active,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active \
  $B/bin/attention_cuda_bench --benchmark_filter='PagedFullWindow/kernel:3/splits:0' --benchmark_min_time=0.01 \
  > $R/ncu.txt 2>&1; echo "ncu rc=$?" | tee -a $S
grep -E "Duration|Issue Slots Busy|Executed Instructions  |pipe_xu|hmma|issue_stalled" $R/ncu.txt | sort -k3 -g -r | head -20 | tee -a $S
log "end to end"
LINGBOT_WS_TILE=192 bench ws192 --frames 200
bench ws128 --frames 200
log done
