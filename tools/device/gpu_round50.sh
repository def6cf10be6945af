#!/usr/bin/env bash
# GPU machine, round 50: the cache and attention tests after the review
# clean-up (TMA as a view trait, the wgmma operand macro; sm_90a PTX
# identical to round 49's tree up to debug line info).
set -uo pipefail
ROUND=r50
source tools/device/round_lib.sh
round_begin
round_deps
round_build cuda_tests
log "attention and cache tests"
timeout 200 $B/bin/cuda_tests --gtest_filter='CudaAttention*:*KvCache*' > $R/attn_tests.log 2>&1
echo "rc=$?" | tee -a $S; grep -E "FAILED|PASSED|tests ran|Failure" $R/attn_tests.log | head -12 | cut -c1-220 | tee -a $S; keep
log done
