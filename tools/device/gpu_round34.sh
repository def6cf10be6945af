#!/usr/bin/env bash
# GPU machine, round 34: wgmma v4, the balanced schedule (three consumers
# over the paged cache, one persistent CTA per SM, attention_schedule.h).
# Its tests first; then the kernel alone and end to end against the
# previous tree (bd24898, built from .old/) in the same call, alternating;
# then the rest of the CUDA suite.
# The balanced schedule's last version is commit f45b3ea, reverted in the
# next; rounds 34-41 ran its successive versions (attention_versions.md,
# wgmma v4, says what each changed). The environment variables some rounds
# set were experiment hooks that existed only in the working tree then.
set -uo pipefail
ROUND=r34
source tools/device/round_lib.sh
round_begin
round_deps
old_build_start lingbot-map attention_cuda_bench
round_build lingbot-map cuda_tests attention_cuda_bench
wait $OLD; echo "old build rc=$?" | tee -a $S
log "attention tests"
timeout 150 $B/bin/cuda_tests --gtest_filter='CudaAttention*:CudaBackendNorm*' > $R/attn_tests.log 2>&1
echo "rc=$?" | tee -a $S; grep -E "FAILED|PASSED|tests ran|Failure|SKIPPED" $R/attn_tests.log | head -20 | cut -c1-200 | tee -a $S; keep
log "attention kernel alone: balanced (new, splits 0), grid (new, splits 1), grid (old, splits 0)"
for i in 1 2; do
  timeout 40 $B/bin/attention_cuda_bench --benchmark_filter='PagedFullWindow/kernel:3/splits:(0|1)$' 2>&1 | grep -E "^BM_" | cut -c1-150 | sed 's/^/new /' | tee -a $S
  timeout 40 $BO/bin/attention_cuda_bench --benchmark_filter='PagedFullWindow/kernel:3/splits:0$' 2>&1 | grep -E "^BM_" | cut -c1-150 | sed 's/^/old /' | tee -a $S
done; keep
log "end to end, alternating"
for i in 1 2; do
  bench new$i --frames 200
  bench_old old$i --frames 200; keep
done
log "CUDA suite"
timeout 200 $B/bin/cuda_tests --gtest_filter='-CudaAttention*:CudaBackendNorm*' > $R/cuda_tests.log 2>&1
echo "rc=$?" | tee -a $S; grep -E "FAILED|PASSED|tests ran|Failure|SKIPPED" $R/cuda_tests.log | head -20 | cut -c1-200 | tee -a $S
grep -E "vs upstream|deferred heads" $R/cuda_tests.log | sort -k5 -g | tail -4 | cut -c1-160 | tee -a $S; keep
log done
