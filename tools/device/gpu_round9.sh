#!/usr/bin/env bash
# GPU machine, round 9: the warp-specialised wgmma kernel (wgmma-ws,
# attention_wgmma_ws.cu). Its tests and the other attention tests, the
# kernel benchmarks (v1 against ws), a short Nsight Compute look at ws,
# end-to-end FPS with ws (Auto) and with v1 pinned, then the whole CUDA
# suite (the items compiled but not run on the GPU last stop).
set -uo pipefail
ROUND=r9
source tools/device/round_lib.sh
round_begin
round_deps
round_build lingbot-map cuda_tests attention_cuda_bench
log "attention tests"
timeout 150 $B/bin/cuda_tests --gtest_filter='CudaAttention*' > $R/attn_tests.log 2>&1; echo "rc=$?" | tee -a $S
grep -E "^\[  (FAILED|PASSED) |OK \]|tests ran" $R/attn_tests.log | cut -c1-120 | tee -a $S
log "kernels"
timeout 90 $B/bin/attention_cuda_bench --benchmark_filter='PagedFullWindow/kernel:(2|3)|Dense/groups:(1|8)/n:(7824|978)/kernel:(2|3)' \
  2>&1 | grep -E "^BM_" | cut -c1-150 | tee -a $S
log "ncu"
timeout 120 ncu --kernel-name regex:wgmma_ws --launch-count 1 --launch-skip 3 --section SpeedOfLight \
  --section WarpStateStats --section SchedulerStats --section ComputeWorkloadAnalysis --section Occupancy \
  $B/bin/attention_cuda_bench --benchmark_filter='PagedFullWindow/kernel:3/splits:0' --benchmark_min_time=0.01s \
  > $R/ncu_ws.txt 2>&1; echo "ncu rc=$?" | tee -a $S
grep -E "Duration|Compute \(SM\) Throughput|Issue Slots Busy|No Eligible|Stall|Warp Cycles Per Issued|Registers Per|Executed Ipc A" $R/ncu_ws.txt | head -30 | tee -a $S
log "end to end"
bench ws --frames 200 --json $R/ours_ws.json
LINGBOT_ATTENTION_KERNEL=wgmma bench v1 --frames 200 --json $R/ours_v1.json
log "whole CUDA suite"
timeout 300 $B/bin/cuda_tests > $R/cuda_tests.log 2>&1; echo "rc=$?" | tee -a $S
grep -E "FAILED|PASSED|tests ran" $R/cuda_tests.log | head -12 | tee -a $S
log done
