#!/usr/bin/env bash
# GPU machine, round 23: the DPT head's cost with deferred heads and the
# main lane first (--no-dense against the default), and cuDNN's algorithms
# chosen by timing (LINGBOT_CUDNN_FIND=1) against its heuristic.
# A record: timing cuDNN's algorithms gained nothing (26.83 / 27.00 ms
# against 26.92 / 26.86 ms), so the option was removed and
# LINGBOT_CUDNN_FIND no longer exists.
set -uo pipefail
ROUND=r23
source tools/device/round_lib.sh
round_begin
round_deps
round_build lingbot-map cuda_tests
log "CUDA conv tests with timed algorithms"
LINGBOT_CUDNN_FIND=1 timeout 100 $B/bin/cuda_tests --gtest_filter='CudaBackendImage*:CudaBackendGraph.*' > $R/cuda_tests.log 2>&1
echo "rc=$?" | tee -a $S; grep -E "FAILED|PASSED|tests ran|Failure" $R/cuda_tests.log | head -20 | cut -c1-200 | tee -a $S; keep
log "end to end"
bench default --frames 200
(export LINGBOT_CUDNN_FIND=1; bench find --frames 200)
bench nodense --frames 200 --no-dense
(export LINGBOT_CUDNN_FIND=1; bench find_b --frames 200)
bench default_b --frames 200
keep
log done
