#!/usr/bin/env bash
# GPU machine, round 18: the depth head beside the camera head (side
# branch) plus the kernels the round 17 profile pointed at: the split
# combine pass (one warp per 32 dims, at most 32 splits for the camera
# head), split_qkv for head_dim 64 (one warp per token and head),
# LayerNorm with the row in registers, biases rounded to bf16 once, and
# the DPT head's full-resolution passes without 64-bit division. The whole
# CUDA suite; end-to-end figures, upstream's gct_profile in the same call;
# official-size parity; one frame's kernels under Nsight Compute.
set -uo pipefail
ROUND=r18
source tools/device/round_lib.sh
round_begin
round_deps
round_build lingbot-map cuda_tests
reference_start
log "CUDA suite"
timeout 200 $B/bin/cuda_tests > $R/cuda_tests.log 2>&1
echo "rc=$?" | tee -a $S; grep -E "FAILED|PASSED|tests ran|Failure" $R/cuda_tests.log | head -20 | cut -c1-200 | tee -a $S; keep
log "end to end"
bench full --frames 200 --json $R/ours.json
bench nodense --frames 200 --no-dense
bench sync --frames 200 --pipeline-depth 0
keep
wait $REF; tail -1 $R/upstream_ref.log | tee -a $S
official_parity; keep
upstream_profile; keep
log "ours again after upstream"
bench full2 --frames 200; keep
kernel_profile 150
log done
