#!/usr/bin/env bash
# GPU machine, round 49: the final tree's cache and attention tests (the
# cache test's token layout now comes from one helper; nothing else changed
# since round 47).
set -uo pipefail
ROUND=r49
source tools/device/round_lib.sh
round_begin
round_deps
round_build cuda_tests
log "attention and cache tests"
timeout 200 $B/bin/cuda_tests --gtest_filter='CudaAttention*:*KvCache*' > $R/attn_tests.log 2>&1
echo "rc=$?" | tee -a $S; grep -E "FAILED|PASSED|tests ran|Failure" $R/attn_tests.log | head -12 | cut -c1-220 | tee -a $S; keep
log done
