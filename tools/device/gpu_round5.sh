#!/usr/bin/env bash
# GPU machine, round 5: the overlapped wgmma attention kernel, pipelined
# read-back, per-frame DPT; all CUDA tests; kernel and end-to-end benchmarks
# with upstream's gct_profile in the same call; official-architecture parity.
set -uo pipefail
ROUND=r5
source tools/device/round_lib.sh
round_begin
reference_start
round_deps
round_build lingbot-map cuda_tests attention_cuda_bench
log "cuda tests"
timeout 200 $B/bin/cuda_tests > $R/cuda_tests.log 2>&1; echo "rc=$?" | tee -a $S
grep -E "FAILED|PASSED|tests ran|AggregatorLayout" $R/cuda_tests.log | head -20 | tee -a $S
grep -E "relative|bar" $R/cuda_tests.log | cut -c1-200 | head -30 >> $S
wait $REF  # the GPU is ours alone from here on
log "attention kernels"
timeout 60 $B/bin/attention_cuda_bench --benchmark_filter='PagedFullWindow/kernel:[02]/splits:0|Dense' > $R/attn_bench.txt 2>&1
grep -E "^BM_" $R/attn_bench.txt | cut -c1-150 | tee -a $S
log "end to end"
bench full --frames 200 --json $R/ours.json
bench sync --frames 200 --pipeline-depth 0
bench nodense --frames 200 --no-dense
upstream_profile
official_parity
log done
