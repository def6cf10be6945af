#!/usr/bin/env bash
# Measured experiment code: the paged cache on three consumers, the shared
# last tile, the reordered grid and the simulated split choice were removed
# once measured (attention_versions.md, wgmma v3); the combine kernel for
# head_dim 64 stayed. Kept as the record.
# GPU machine, round 31: wgmma-ws v3 on the paged cache too: three
# consumers, the 18-row last query tile shared out by keys among them,
# those tiles started last, splits by simulation, and a combine kernel for
# head_dim 64 with few splits. The whole CUDA suite; the attention kernel
# alone; end to end; upstream's gct_profile in the same call (after ours).
set -uo pipefail
ROUND=r31
source tools/device/round_lib.sh
round_begin
round_deps
round_build lingbot-map cuda_tests attention_cuda_bench
log "attention tests"
timeout 120 $B/bin/cuda_tests --gtest_filter='CudaAttention*:CudaKvCache*' > $R/attn_tests.log 2>&1
rc=$?; echo "rc=$rc" | tee -a $S; grep -E "FAILED|PASSED|tests ran|Failure" $R/attn_tests.log | head -12 | cut -c1-200 | tee -a $S; keep
[ $rc -eq 0 ] || { tail -30 $R/attn_tests.log | cut -c1-200 >> $S; exit 1; }
log "attention kernel alone"
timeout 60 $B/bin/attention_cuda_bench --benchmark_filter='PagedFullWindow/kernel:3|Dense/groups:(1|8)/n:(7824|978)/kernel:3' \
  2>&1 | grep -E "^BM_" | cut -c1-160 | tee -a $S; keep
log "end to end"
bench default --frames 200; keep
log "rest of the CUDA suite"
timeout 150 $B/bin/cuda_tests --gtest_filter='-CudaAttention*:CudaKvCache*' > $R/rest_tests.log 2>&1
echo "rc=$?" | tee -a $S; grep -E "FAILED|PASSED|tests ran" $R/rest_tests.log | head -12 | cut -c1-160 | tee -a $S
grep -E "vs upstream" $R/rest_tests.log | sort -k5 -g | tail -2 | cut -c1-160 | tee -a $S; keep
upstream_profile; keep
log "ours again after upstream"
bench default_after --frames 200; keep
log done
