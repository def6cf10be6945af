#!/usr/bin/env bash
# GPU machine, round 25 (this stop's last call; the figures of docs/PERF.md):
# LayerScale folded into the residual products, deferred heads
# (--pipeline-depth 2, the default) with the main lane first, the DPT
# head's one-pass resize. The whole CUDA suite; end to end at depths 2, 1
# and 0 and without the depth head; official-size parity; upstream's
# gct_profile in the same call (after ours, nothing else on the GPU); the
# attention kernel alone; one frame's kernels under Nsight Compute.
set -uo pipefail
ROUND=r25
source tools/device/round_lib.sh
round_begin
round_deps
reference_start
round_build lingbot-map cuda_tests attention_cuda_bench
wait $REF; tail -1 $R/upstream_ref.log | tee -a $S
log "CUDA suite"
timeout 200 $B/bin/cuda_tests > $R/cuda_tests.log 2>&1
echo "rc=$?" | tee -a $S; grep -E "FAILED|PASSED|tests ran|Failure|SKIPPED" $R/cuda_tests.log | head -20 | cut -c1-200 | tee -a $S
grep -E "vs upstream|deferred heads" $R/cuda_tests.log | sort -k5 -g | tail -4 | cut -c1-160 | tee -a $S; keep
log "end to end"
bench default --frames 200 --json $R/ours.json
bench depth1 --frames 200 --pipeline-depth 1
bench depth0 --frames 200 --pipeline-depth 0
bench nodense --frames 200 --no-dense
keep
official_parity; keep
upstream_profile; keep
log "ours again after upstream"
bench default_after --frames 200; keep
log "attention kernel alone"
timeout 60 $B/bin/attention_cuda_bench --benchmark_filter='PagedFullWindow/kernel:3/splits:0|Dense/groups:(1|8)/n:(7824|978)/kernel:0' \
  2>&1 | grep -E "^BM_" | cut -c1-150 | tee -a $S; keep
kernel_profile 100
log done
