#!/usr/bin/env bash
# GPU machine, round 21: LayerScale folded into proj / fc2 with the residual
# update in cuBLASLt's epilogue, and deferred heads (--pipeline-depth 2: a
# frame's heads run as a side branch of the next frame's step). The tests
# these touch; end to end at depths 1 and 2 with upstream's gct_profile in
# the same call; official-size parity.
set -uo pipefail
ROUND=r21
source tools/device/round_lib.sh
round_begin
round_deps
reference_start
round_build lingbot-map cuda_tests
log "CUDA tests (linear, model, graph, branch, kv cache)"
timeout 150 $B/bin/cuda_tests --gtest_filter='CudaBackendLinear.*:*CudaBackendModel*:CudaBackendGraph.*:CudaBackendBranch*:CudaKv*' \
  > $R/cuda_tests.log 2>&1
echo "rc=$?" | tee -a $S; grep -E "FAILED|PASSED|tests ran|Failure|deferred" $R/cuda_tests.log | head -40 | cut -c1-200 | tee -a $S; keep
log "end to end"
bench depth1 --frames 200 --pipeline-depth 1
bench depth2 --frames 200 --pipeline-depth 2 --json $R/ours.json
bench depth2_nodense --frames 200 --pipeline-depth 2 --no-dense
keep
wait $REF; tail -1 $R/upstream_ref.log | tee -a $S
official_parity; keep
upstream_profile; keep
log "ours again after upstream"
bench depth2_after --frames 200 --pipeline-depth 2
bench depth1_after --frames 200 --pipeline-depth 1; keep
log done
