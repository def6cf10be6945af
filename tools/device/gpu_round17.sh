#!/usr/bin/env bash
# GPU machine, round 17: the depth head as a side branch beside the camera
# head (CudaBackend lanes). Branch, graph and model tests; end-to-end
# figures (twice); official-size parity against upstream fp32; then one
# streaming frame's kernels timed one by one under Nsight Compute, the
# warm-up stream's kernels skipped (kernel_profile.py).
set -uo pipefail
ROUND=r17
source tools/device/round_lib.sh
round_begin
round_deps
round_build lingbot-map cuda_tests
reference_start
log "branch, graph and model tests"
timeout 150 $B/bin/cuda_tests --gtest_filter='CudaBackendBranch*:*Graph*:*CudaBackendModel*:CudaBackendLinear*:CudaBackendImage*' \
  > $R/tests.log 2>&1
echo "rc=$?" | tee -a $S; grep -E "^\[  (FAILED|PASSED) |OK \]|Failure|error" $R/tests.log | cut -c1-160 | head -40 | tee -a $S; keep
log "end to end"
bench full --frames 200 --json $R/ours.json
bench full2 --frames 200
bench nodense --frames 200 --no-dense
keep
wait $REF; tail -1 $R/upstream_ref.log | tee -a $S
official_parity; keep
kernel_profile 200
log done
