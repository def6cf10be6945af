#!/usr/bin/env bash
# GPU machine, round 33: the whole CUDA suite on this stop's final tree,
# and the attention kernel alone once more.
set -uo pipefail
ROUND=r33
source tools/device/round_lib.sh
round_begin
round_deps
round_build cuda_tests attention_cuda_bench
log "CUDA suite"
timeout 200 $B/bin/cuda_tests > $R/cuda_tests.log 2>&1
echo "rc=$?" | tee -a $S; grep -E "FAILED|PASSED|tests ran|Failure|SKIPPED" $R/cuda_tests.log | head -20 | cut -c1-200 | tee -a $S; keep
timeout 30 $B/bin/attention_cuda_bench --benchmark_filter='PagedFullWindow/kernel:3/splits:0|PagedFullWindow/kernel:0/splits:0|Dense/groups:1/n:7824/kernel:3' \
  2>&1 | grep -E "^BM_" | cut -c1-150 | tee -a $S; keep
log done
