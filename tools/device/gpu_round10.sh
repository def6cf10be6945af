#!/usr/bin/env bash
# Measured experiment code: the variants it selects (LINGBOT_WS_VARIANT,
# LINGBOT_WS_TILE) were removed once measured; figures in
# src/backend/cuda/attention_versions.md. Kept as the record.
# GPU machine, round 10: variants of the warp-specialised kernel
# (LINGBOT_WS_VARIANT="pingpong,poly": ping-pong on/off, every Nth
# exponential on the FMA pipe), tests of two, the full-window benchmark of
# each, Nsight Compute on two, end-to-end FPS of two.
set -uo pipefail
ROUND=r10
source tools/device/round_lib.sh
round_begin
round_deps
round_build lingbot-map cuda_tests attention_cuda_bench
for v in 1,0 1,4; do
  log "ws tests, variant $v"
  LINGBOT_WS_VARIANT=$v timeout 100 $B/bin/cuda_tests --gtest_filter='CudaAttentionWgmmaWs*' > $R/tests_$v.log 2>&1
  echo "rc=$?" | tee -a $S; grep -E "^\[  (FAILED|PASSED) |OK \]" $R/tests_$v.log | cut -c1-120 | tee -a $S
done
log "kernels"
for v in 1,0 1,4 1,8 0,0 0,4; do
  echo "variant $v" | tee -a $S
  LINGBOT_WS_VARIANT=$v timeout 40 $B/bin/attention_cuda_bench \
    --benchmark_filter='PagedFullWindow/kernel:3/splits:0|Dense/groups:1/n:7824/kernel:3' 2>&1 | grep -E "^BM_" | cut -c1-150 | tee -a $S
done
for v in 1,0 1,4; do
  log "ncu $v"
  LINGBOT_WS_VARIANT=$v timeout 100 ncu --kernel-name regex:wgmma_ws --launch-count 1 --launch-skip 3 \
    --section SpeedOfLight --section WarpStateStats --section SchedulerStats --section ComputeWorkloadAnalysis \
    --section InstructionStats --metrics smsp__inst_executed_pipe_xu.avg.pct_of_peak_sustained_active,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active,smsp__cycles_active.avg,sm__cycles_elapsed.avg.per_second \
    $B/bin/attention_cuda_bench --benchmark_filter='PagedFullWindow/kernel:3/splits:0' --benchmark_min_time=0.01 \
    > $R/ncu_$v.txt 2>&1; echo "ncu rc=$?" | tee -a $S
  grep -E "Duration|SM Frequency|Compute \(SM\) Throughput|Issue Slots Busy|No Eligible|Warp Cycles Per Issued|Executed Ipc A|pipe_xu|hmma|Stall" $R/ncu_$v.txt | head -24 | tee -a $S
done
log "end to end"
for v in 1,0 1,4; do
  LINGBOT_WS_VARIANT=$v bench "ws$v" --frames 200 --json $R/ours_$v.json
done
log done
