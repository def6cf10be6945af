#!/usr/bin/env bash
# GPU machine, round 46: the paged attention kernel's tiles copied with TMA
# (one box of K and one of V per tile that lies inside a page; the cache's
# tensor maps, tensor_map.h) against the row-by-row cp.async copies
# (LB_NO_TMA=1: an experiment hook in the working tree only, since replaced
# by CudaKvCache::set_tma and the benchmark's tma argument; under it
# the cache makes no tensor maps). The attention and cache tests, the
# whole CUDA suite, the kernel alone and end to end, alternating.
set -uo pipefail
ROUND=r46
source tools/device/round_lib.sh
round_begin
round_deps
round_build lingbot-map cuda_tests attention_cuda_bench
log "attention and cache tests"
timeout 200 $B/bin/cuda_tests --gtest_filter='CudaAttention*:*KvCache*' > $R/attn_tests.log 2>&1
echo "rc=$?" | tee -a $S; grep -E "FAILED|PASSED|tests ran|Failure" $R/attn_tests.log | head -12 | cut -c1-220 | tee -a $S; keep
log "attention kernel alone: TMA / no TMA"
for i in 1 2 3; do
  timeout 40 $B/bin/attention_cuda_bench --benchmark_filter='PagedFullWindow/kernel:3/splits:0/' 2>&1 | grep -E "^BM_" | cut -c1-140 | tee -a $S
  LB_NO_TMA=1 timeout 40 $B/bin/attention_cuda_bench --benchmark_filter='PagedFullWindow/kernel:3/splits:0/' 2>&1 | grep -E "^BM_" | sed 's/^/no-TMA /' | cut -c1-140 | tee -a $S
done; keep
log "end to end"
bench tma --frames 200; keep
LB_NO_TMA=1 bench no_tma --frames 200; keep
log "CUDA suite"
timeout 240 $B/bin/cuda_tests > $R/cuda_tests.log 2>&1
echo "rc=$?" | tee -a $S; grep -E "FAILED|PASSED|tests ran|Failure|SKIPPED" $R/cuda_tests.log | head -20 | cut -c1-200 | tee -a $S
grep -E "vs upstream" $R/cuda_tests.log | sort -k5 -g | tail -3 | cut -c1-160 | tee -a $S; keep
log done
