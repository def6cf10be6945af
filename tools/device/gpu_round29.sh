#!/usr/bin/env bash
# Measured experiment code: this round's tree had the paged cache on three
# consumers with key splits chosen by simulation; that was removed once
# measured (attention_versions.md, wgmma v3). Kept as the record.
# GPU machine, round 29: wgmma-ws v3 (three consumers for the paged cache
# and long dense groups, partial query tiles last, splits by simulation)
# and the packed split_qkv / LayerNorm kernels: the whole CUDA suite, the
# attention kernel alone, the two norm kernels alone, end to end, and one
# frame's kernels under Nsight Compute.
set -uo pipefail
ROUND=r29
source tools/device/round_lib.sh
round_begin
round_deps
round_build lingbot-map cuda_tests attention_cuda_bench cuda_ops_bench
log "CUDA suite"
timeout 240 $B/bin/cuda_tests > $R/cuda_tests.log 2>&1
echo "rc=$?" | tee -a $S; grep -E "FAILED|PASSED|tests ran|Failure|SKIPPED" $R/cuda_tests.log | head -20 | cut -c1-200 | tee -a $S
grep -E "vs upstream|deferred heads" $R/cuda_tests.log | sort -k5 -g | tail -4 | cut -c1-160 | tee -a $S; keep
log "attention kernel alone"
for i in 1 2; do
  timeout 60 $B/bin/attention_cuda_bench --benchmark_filter='PagedFullWindow/kernel:3|Dense/groups:(1|8)/n:(7824|978)/kernel:(0|3)' \
    2>&1 | grep -E "^BM_" | cut -c1-160 | tee -a $S
done
keep
log "norm kernels alone"
timeout 60 $B/bin/cuda_ops_bench --benchmark_filter='LayerNorm|SplitQkv' 2>&1 | grep -E "^BM_" | cut -c1-150 | tee -a $S; keep
log "end to end"
bench default --frames 200
bench nodense --frames 200 --no-dense
bench default2 --frames 200
keep
kernel_profile 110
log done
