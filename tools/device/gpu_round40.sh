#!/usr/bin/env bash
# GPU machine, round 40: the balanced schedule with its ring position (and
# consumer index) broadcast from lane 0, so that the stage arithmetic and
# wgmma descriptors stay in uniform registers (round 38's SASS: 32 R2UR per
# tile in its main loop against 9 in the grid kernel's). SASS counts, the
# kernel against the grid schedule, tests.
# The balanced schedule's last version is commit f45b3ea, reverted in the
# next; rounds 34-41 ran its successive versions (attention_versions.md,
# wgmma v4, says what each changed). The environment variables some rounds
# set were experiment hooks that existed only in the working tree then.
set -uo pipefail
ROUND=r40
source tools/device/round_lib.sh
round_begin
round_deps
round_build cuda_tests attention_cuda_bench
OBJ=$(find $B -name 'attention_wgmma_ws.cu.o' | head -1)
cuobjdump -sass $OBJ > $R/all.sass 2>&1
python3 tools/device/sass_loops.py $R/all.sass 2>&1 | tee -a $S
for i in 1 2 3; do
  timeout 40 $B/bin/attention_cuda_bench --benchmark_filter='PagedFullWindow/kernel:3/splits:(0|1)/' 2>&1 | grep -E "^BM_" | cut -c1-120 | tee -a $S
done; keep
timeout 150 $B/bin/cuda_tests --gtest_filter='CudaAttention*' > $R/attn_tests.log 2>&1
echo "rc=$?" | tee -a $S; grep -E "FAILED|PASSED|tests ran|Failure" $R/attn_tests.log | head -10 | cut -c1-200 | tee -a $S; keep
log done
