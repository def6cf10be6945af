#!/usr/bin/env bash
# GPU machine, round 6 (the figures of docs/PERF.md for this code): the
# scale-phase buffers freed at the second streaming step; the CUDA KV-cache,
# graph and model tests; end-to-end benchmarks (pipelined, synchronous,
# synchronous with one host thread, no depth head, per-stage profile) with
# upstream's gct_profile in the same call.
set -uo pipefail
ROUND=r6
source tools/device/round_lib.sh
round_begin
round_deps
log "host: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2)"
round_build lingbot-map cuda_tests
log "cuda tests (kv cache, model)"
timeout 150 $B/bin/cuda_tests --gtest_filter='CudaKvCache.*:*CudaBackendModel*:*Graph*' > $R/cuda_tests.log 2>&1; echo "rc=$?" | tee -a $S
grep -E "OK \]|FAILED|PASSED|tests ran" $R/cuda_tests.log | head -20 | tee -a $S
log "end to end"
bench full --frames 200 --json $R/ours.json
bench sync --frames 200 --pipeline-depth 0
OMP_NUM_THREADS=1 bench sync_omp1 --frames 200 --pipeline-depth 0
bench nodense --frames 200 --no-dense
bench profile --frames 24 --profile --pipeline-depth 0
tail -12 $R/bench_profile.txt >> $S
upstream_profile
log "ours again after upstream"
bench full2 --frames 200
log done
