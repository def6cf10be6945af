#!/usr/bin/env bash
# Measured experiment code: LINGBOT_WS_CONSUMERS (three consumers for every
# launch) was removed once measured; figures in
# src/backend/cuda/attention_versions.md (wgmma v3). Kept as the record.
# GPU machine, round 28: wgmma-ws with three consumer warpgroups (192
# queries per CTA, 128-key tiles, Q in shared memory; LINGBOT_WS_CONSUMERS=3)
# against two, and idle consumers of a partial query tile leaving at once:
# attention tests under both shapes, kernel benchmarks, end to end.
set -uo pipefail
ROUND=r28
source tools/device/round_lib.sh
round_begin
round_deps
round_build lingbot-map cuda_tests attention_cuda_bench
for c in 2 3; do
  log "attention tests, $c consumers"
  LINGBOT_WS_CONSUMERS=$c timeout 150 $B/bin/cuda_tests --gtest_filter='CudaAttention*:CudaKvCache*' > $R/tests_$c.log 2>&1
  echo "rc=$?" | tee -a $S; grep -E "FAILED|PASSED|tests ran" $R/tests_$c.log | head -12 | cut -c1-160 | tee -a $S
done
keep
log "kernels"
for c in 2 3 2 3; do
  echo "consumers $c" | tee -a $S
  LINGBOT_WS_CONSUMERS=$c timeout 60 $B/bin/attention_cuda_bench \
    --benchmark_filter='PagedFullWindow/kernel:3|Dense/groups:(1|8)/n:(978|7824)/kernel:3' 2>&1 | grep -E "^BM_" | cut -c1-150 | tee -a $S
done
keep
log "model tests, 3 consumers"
LINGBOT_WS_CONSUMERS=3 timeout 200 $B/bin/cuda_tests --gtest_filter='CudaBackendModel*' > $R/model_3.log 2>&1
echo "rc=$?" | tee -a $S; grep -E "FAILED|PASSED|tests ran" $R/model_3.log | head -12 | cut -c1-160 | tee -a $S
keep
log "end to end"
LINGBOT_WS_CONSUMERS=3 bench ws3 --frames 200
bench ws2 --frames 200
LINGBOT_WS_CONSUMERS=3 bench ws3b --frames 200
keep
log done
