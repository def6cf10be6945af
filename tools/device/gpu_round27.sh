#!/usr/bin/env bash
# GPU machine, round 27: the whole CUDA suite on the final tree of this stop
# (after the experiments of rounds 23-26 were removed), and the default
# benchmark once more.
set -uo pipefail
ROUND=r27
source tools/device/round_lib.sh
round_begin
round_deps
round_build lingbot-map cuda_tests
log "CUDA suite"
timeout 200 $B/bin/cuda_tests > $R/cuda_tests.log 2>&1
echo "rc=$?" | tee -a $S; grep -E "FAILED|PASSED|tests ran|Failure" $R/cuda_tests.log | head -20 | cut -c1-200 | tee -a $S; keep
bench default --frames 200; keep
log done
