#!/usr/bin/env bash
# GPU machine, round 12 (the figures of docs/PERF.md for this code): the
# warp-specialised kernel with precomputed descriptors and per-tile page
# spans, now Auto's choice on Hopper. Attention tests, kernel benchmarks
# (v1 and ws), bf16 parity of the official size
# against upstream fp32, end-to-end figures and upstream's gct_profile in
# the same call, the model, graph and KV-cache tests. If the ws tests
# fail, the benchmarks pin wgmma v1.
set -uo pipefail
ROUND=r12
source tools/device/round_lib.sh
round_begin
round_deps
round_build lingbot-map cuda_tests attention_cuda_bench
reference_start
log "attention tests"
timeout 150 $B/bin/cuda_tests --gtest_filter='CudaAttention*' > $R/attn_tests.log 2>&1; rc=$?; echo "rc=$rc" | tee -a $S
grep -E "^\[  (FAILED|PASSED) |OK \]" $R/attn_tests.log | cut -c1-120 | tee -a $S
[ $rc -ne 0 ] && export LINGBOT_ATTENTION_KERNEL=wgmma && log "ws failed: v1 pinned"
wait $REF; tail -2 $R/upstream_ref.log | tee -a $S  # the GPU is ours alone from here on
log "kernels"
timeout 60 $B/bin/attention_cuda_bench \
  --benchmark_filter='PagedFullWindow/kernel:(2|3)/splits:0|Dense/groups:(1|8)/n:(7824|978)/kernel:(0|2|3)' \
  2>&1 | grep -E "^BM_" | cut -c1-150 | tee -a $S
log "end to end"
bench full --frames 200 --json $R/ours.json
upstream_profile
log "ours again after upstream"
bench full2 --frames 200
official_parity
bench profile --frames 24 --profile --pipeline-depth 0
tail -12 $R/bench_profile.txt >> $S
log "model, graph and kv-cache tests"
timeout 90 $B/bin/cuda_tests --gtest_filter='*CudaBackendModel*:*Graph*:CudaKvCache.*' > $R/cuda_tests.log 2>&1
echo "rc=$?" | tee -a $S; grep -E "FAILED|PASSED|tests ran" $R/cuda_tests.log | head -12 | tee -a $S
log done
