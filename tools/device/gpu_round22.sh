#!/usr/bin/env bash
# GPU machine, round 22: the DPT head's resize kernel (one block per row)
# with the position embedding added in the same pass, and the lane priority
# experiment (LINGBOT_CUDA_LANE_PRIORITY=main against equal) with deferred
# heads. Image, model and graph tests; end to end; the DPT head's kernels.
set -uo pipefail
ROUND=r22
source tools/device/round_lib.sh
round_begin
round_deps
round_build lingbot-map cuda_tests
log "CUDA tests (image, model, graph, branch)"
timeout 150 $B/bin/cuda_tests --gtest_filter='CudaBackendImage*:*CudaBackendModel*Bf16*:CudaBackendGraph.*:CudaBackendBranch*' \
  > $R/cuda_tests.log 2>&1
echo "rc=$?" | tee -a $S; grep -E "FAILED|PASSED|tests ran|Failure" $R/cuda_tests.log | head -20 | cut -c1-200 | tee -a $S; keep
log "end to end"
bench depth2 --frames 200 --pipeline-depth 2
(export LINGBOT_CUDA_LANE_PRIORITY=main; bench depth2_main_priority --frames 200 --pipeline-depth 2)
bench depth1 --frames 200 --pipeline-depth 1
(export LINGBOT_CUDA_LANE_PRIORITY=main; bench depth1_main_priority --frames 200 --pipeline-depth 1)
bench depth2_b --frames 200 --pipeline-depth 2
(export LINGBOT_CUDA_LANE_PRIORITY=main; bench depth2_main_priority_b --frames 200 --pipeline-depth 2)
keep
log done
