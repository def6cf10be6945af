#!/usr/bin/env bash
# GPU machine, round 26: a second same-call comparison of this code with
# upstream's gct_profile, and one kernel experiment: skipping the rescale of
# O in the warp-specialised kernel when no row of a warp found a new
# maximum (LINGBOT_ATTENTION_SKIP_RESCALE=1; its tests, then the kernel
# alone with and without, alternating).
# A record: the skip changed nothing measurable (731 / 729 us against
# 734 / 731 us at the full window, alternating runs) and was removed, so
# LINGBOT_ATTENTION_SKIP_RESCALE no longer exists.
set -uo pipefail
ROUND=r26
source tools/device/round_lib.sh
round_begin
round_deps
round_build lingbot-map cuda_tests attention_cuda_bench
log "attention tests with the rescale skipped"
LINGBOT_ATTENTION_SKIP_RESCALE=1 timeout 100 $B/bin/cuda_tests --gtest_filter='CudaAttention*:*CudaBackendModel*Bf16*' \
  > $R/cuda_tests.log 2>&1
echo "rc=$?" | tee -a $S; grep -E "FAILED|PASSED|tests ran|Failure" $R/cuda_tests.log | head -10 | cut -c1-200 | tee -a $S; keep
log "attention kernel alone: off, on, off, on"
for skip in 0 1 0 1; do
  echo "skip=$skip" | tee -a $S
  LINGBOT_ATTENTION_SKIP_RESCALE=$skip timeout 40 $B/bin/attention_cuda_bench \
    --benchmark_filter='PagedFullWindow/kernel:3/splits:0|Dense/groups:1/n:7824/kernel:0' 2>&1 | grep -E "^BM_" | cut -c1-150 | tee -a $S
done; keep
log "end to end, then upstream, then ours again"
bench default --frames 200
upstream_profile; keep
bench default_after --frames 200; keep
log done
