#!/usr/bin/env bash
# Measured commit dbe994b (lazy rescaling in the wgmma kernel), reverted in
# 2af0433: no gain (docs/PERF.md). Kept as the record of those figures.
# GPU machine, round 8 (short; the session's last device minutes): attention
# and model tests, the full-window kernel bench, end-to-end FPS, then
# upstream's gct_profile in the same call.
set -uo pipefail
ROUND=r8
source tools/device/round_lib.sh
round_begin
round_deps
round_build lingbot-map cuda_tests attention_cuda_bench
log "attention + model tests"
timeout 80 $B/bin/cuda_tests --gtest_filter='CudaAttention*:*CudaBackendModel*' > $R/cuda_tests.log 2>&1; echo "rc=$?" | tee -a $S
grep -E "FAILED|PASSED|tests ran" $R/cuda_tests.log | head -12 | tee -a $S
grep -E "vs upstream" $R/cuda_tests.log | sort -k6 -g | tail -3 | cut -c1-150 | tee -a $S
log "kernel"
timeout 30 $B/bin/attention_cuda_bench --benchmark_filter='PagedFullWindow/kernel:2/splits:0|Dense/groups:1/n:7824/kernel:2' 2>&1 | grep -E "^BM_" | cut -c1-150 | tee -a $S
log "end to end"
bench full --frames 200 --json $R/ours.json
upstream_profile
log done
