#!/usr/bin/env bash
# Measured experiment code: the variants it selects (LINGBOT_WS_VARIANT,
# LINGBOT_WS_TILE) were removed once measured; figures in
# src/backend/cuda/attention_versions.md. Kept as the record.
# GPU machine, round 11: wgmma-ws variants (LINGBOT_WS_VARIANT="pingpong,
# poly[,e]": e = O rescaled while S runs, FlashAttention-3's order), the
# stall breakdown and per-instruction samples of the baseline under Nsight
# Compute.
set -uo pipefail
ROUND=r11
source tools/device/round_lib.sh
round_begin
round_deps
round_build lingbot-map cuda_tests attention_cuda_bench
log "ws tests, variant 1,0,e"
LINGBOT_WS_VARIANT=1,0,e timeout 100 $B/bin/cuda_tests --gtest_filter='CudaAttentionWgmmaWs*' > $R/tests.log 2>&1
echo "rc=$?" | tee -a $S; grep -E "^\[  (FAILED|PASSED) |OK \]" $R/tests.log | cut -c1-120 | tee -a $S
log "kernels"
for v in 1,0 1,0,e 1,4,e 0,0,e 1,0; do
  echo "variant $v" | tee -a $S
  LINGBOT_WS_VARIANT=$v timeout 40 $B/bin/attention_cuda_bench \
    --benchmark_filter='PagedFullWindow/kernel:3/splits:0|Dense/groups:1/n:7824/kernel:3' 2>&1 | grep -E "^BM_" | cut -c1-150 | tee -a $S
done
log "ncu 1,0"
LINGBOT_WS_VARIANT=1,0 timeout 200 ncu -o $R/ws --kernel-name regex:wgmma_ws --launch-count 1 --launch-skip 3 \
  --section SourceCounters --section WarpStateStats --section SpeedOfLight \
  --metrics regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio \
  $B/bin/attention_cuda_bench --benchmark_filter='PagedFullWindow/kernel:3/splits:0' --benchmark_min_time=0.01 \
  > $R/ncu.log 2>&1; echo "ncu rc=$?" | tee -a $S
ncu -i $R/ws.ncu-rep --page details --print-details all > $R/ncu_details.txt 2>&1
grep -E "issue_stalled" $R/ncu_details.txt | sort -k3 -g -r | head -14 | tee -a $S
ncu -i $R/ws.ncu-rep --page source --csv --print-source sass > $R/sass.csv 2>&1; echo "sass rows $(wc -l < $R/sass.csv)" | tee -a $S
log done
