#!/usr/bin/env bash
# GPU machine, round 45: more of round 44's variants of the two-consumer
# wgmma-ws kernel (LB_WS_VARIANT, an experiment hook in the working tree
# only): 6 K and V with barriers of their own (K released once S is done);
# 7 every tile copied from the first tile's rows (diagnostic); 9 the 8
# threads of a row read the same 16 bytes (diagnostic: an eighth of the L2
# bytes, the same instructions); 1 no copies, as in round 44.
set -uo pipefail
ROUND=r45
source tools/device/round_lib.sh
round_begin
round_deps
round_build cuda_tests attention_cuda_bench
for v in 0 6 9 7 1 0 6 9 7 1; do
  echo "-- variant $v" | tee -a $S
  LB_WS_VARIANT=$v timeout 40 $B/bin/attention_cuda_bench --benchmark_filter='PagedFullWindow/kernel:3/splits:0/' 2>&1 | grep -E "^BM_" | cut -c1-140 | tee -a $S
done; keep
LB_WS_VARIANT=6 timeout 120 $B/bin/cuda_tests --gtest_filter='CudaAttention*' > $R/attn_tests_6.log 2>&1
echo "variant 6 tests rc=$?" | tee -a $S; grep -E "FAILED|PASSED|Failure" $R/attn_tests_6.log | head -6 | cut -c1-200 | tee -a $S
log done
