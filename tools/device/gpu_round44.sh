#!/usr/bin/env bash
# GPU machine, round 44: where the paged full window's time goes, and two
# consumer changes, as compile-time variants of the two-consumer wgmma-ws
# kernel picked by LB_WS_VARIANT (an experiment hook in the working tree
# only; attention_versions.md says what was kept):
#   0 the kernel as it is;   1 the producer copies nothing (diagnostic);
#   2 no exponentials (diagnostic);   3 both rows' maxima in one pass;
#   4 the row sums on the tensor cores (a ones column after V: P V is
#     m64n72k16);   5 = 3 + 4.
# Also the SM clock during the kernel (nvidia-smi), the SASS main loops and
# the attention tests under variants 3-5.
set -uo pipefail
ROUND=r44
source tools/device/round_lib.sh
round_begin
round_deps
round_build cuda_tests attention_cuda_bench
OBJ=$(find $B -name 'attention_wgmma_ws.cu.o' | head -1)
cuobjdump -sass $OBJ > $R/all.sass 2>&1
python3 tools/device/sass_loops.py $R/all.sass 2>&1 | grep -v DenseKeys | cut -c1-220 | head -80 >> $S
nvidia-smi --query-gpu=clocks.sm,clocks.mem,power.draw,temperature.gpu --format=csv -lms 250 > $R/clocks.txt 2>&1 &
SMI=$!
for v in 0 1 2 3 4 5 0 3 4 5; do
  echo "-- variant $v" | tee -a $S
  LB_WS_VARIANT=$v timeout 40 $B/bin/attention_cuda_bench --benchmark_filter='PagedFullWindow/kernel:3/splits:0/' 2>&1 | grep -E "^BM_" | cut -c1-140 | tee -a $S
done; keep
kill $SMI
sort $R/clocks.txt | uniq -c | sort -rn | head -8 | tee -a $S
for v in 3 4 5; do
  LB_WS_VARIANT=$v timeout 120 $B/bin/cuda_tests --gtest_filter='CudaAttention*' > $R/attn_tests_$v.log 2>&1
  echo "variant $v tests rc=$?" | tee -a $S; grep -E "FAILED|PASSED|Failure" $R/attn_tests_$v.log | head -6 | cut -c1-200 | tee -a $S
done; keep
log done
