#!/usr/bin/env bash
# GPU machine, round 47 (this stop's last call; the figures of docs/PERF.md):
# the paged cache's tiles copied with TMA (attention_versions.md, wgmma
# v6). The whole CUDA suite; end to end; official-size parity; upstream's
# gct_profile in the same call (after ours, nothing else on the GPU); the
# attention kernel alone, with TMA and without (tma:0), alternating.
set -uo pipefail
ROUND=r47
source tools/device/round_lib.sh
round_begin
round_deps
reference_start
round_build lingbot-map cuda_tests attention_cuda_bench
log "CUDA suite"
timeout 240 $B/bin/cuda_tests > $R/cuda_tests.log 2>&1
echo "rc=$?" | tee -a $S; grep -E "FAILED|PASSED|tests ran|Failure|SKIPPED" $R/cuda_tests.log | head -20 | cut -c1-200 | tee -a $S
grep -E "vs upstream|deferred heads" $R/cuda_tests.log | sort -k5 -g | tail -4 | cut -c1-160 | tee -a $S; keep
wait $REF; tail -1 $R/upstream_ref.log | tee -a $S
log "end to end"
bench default --frames 200; keep
official_parity; keep
upstream_profile; keep
log "ours again after upstream"
bench default_after --frames 200; keep
log "attention kernel alone"
for i in 1 2; do
  timeout 60 $B/bin/attention_cuda_bench --benchmark_filter='PagedFullWindow/kernel:3/splits:0/tma:(0|1)/' \
    2>&1 | grep -E "^BM_" | cut -c1-150 | tee -a $S
done; keep
log done
