#!/usr/bin/env bash
# GPU machine, round 15 (the session's last device minutes): float32 layers
# of a few rows (the camera head while streaming) through the
# weight-streaming kernel (gemv.cu). Linear and model tests, the camera
# layer benchmark (ours against cuBLASLt), end-to-end figures, bf16 parity
# of the official size against upstream fp32, then upstream's gct_profile.
# The summary is copied to $OUT after each step (the call may hit the
# session's device-time limit).
set -uo pipefail
ROUND=r15
source tools/device/round_lib.sh
round_begin
round_deps
round_build lingbot-map cuda_tests cuda_ops_bench
reference_start
log "linear, model and graph tests"
timeout 90 $B/bin/cuda_tests --gtest_filter='CudaBackendLinear*:*CudaBackendModel*:*Graph*' > $R/tests.log 2>&1
echo "rc=$?" | tee -a $S; grep -E "^\[  (FAILED|PASSED) |OK \]" $R/tests.log | cut -c1-120 | tee -a $S; keep
log "camera layers"
timeout 40 $B/bin/cuda_ops_bench --benchmark_filter='CameraLayer' 2>&1 | grep -E "^BM_" | cut -c1-150 | tee -a $S; keep
wait $REF; tail -1 $R/upstream_ref.log | tee -a $S
log "end to end"
bench full --frames 200 --json $R/ours.json; keep
official_parity; keep
upstream_profile; keep
log done
