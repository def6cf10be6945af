#!/usr/bin/env bash
# Measured commit 103cef5 (cuBLASLt autotuning), reverted in 3d37f5f: no gain
# (docs/PERF.md). Kept as the record of how those figures were made.
# GPU machine, round 7: cuBLASLt algorithms chosen by timing. Linear, graph
# and model tests; GEMM benchmarks; end-to-end (pipelined and synchronous)
# with upstream's gct_profile in the same call; official-architecture parity.
set -uo pipefail
ROUND=r7
source tools/device/round_lib.sh
round_begin
reference_start
round_deps
round_build lingbot-map cuda_tests cuda_ops_bench
log "cuda tests (linear, graph, model)"
timeout 120 $B/bin/cuda_tests --gtest_filter='*Linear*:*Graph*:*CudaBackendModel*:*Memory*' > $R/cuda_tests.log 2>&1; echo "rc=$?" | tee -a $S
grep -E "FAILED|PASSED|tests ran" $R/cuda_tests.log | head -20 | tee -a $S
grep -E "vs upstream" $R/cuda_tests.log | sort -k6 -g | tail -4 | cut -c1-160 | tee -a $S
wait $REF  # the GPU is ours alone from here on
log "gemm"
timeout 60 $B/bin/cuda_ops_bench --benchmark_filter='Linear' > $R/ops_bench.txt 2>&1
grep -E "^BM_" $R/ops_bench.txt | cut -c1-130 | tee -a $S
log "end to end"
bench full --frames 200 --json $R/ours.json
bench sync --frames 200 --pipeline-depth 0
upstream_profile
official_parity
log done
