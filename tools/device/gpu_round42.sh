#!/usr/bin/env bash
# GPU machine, round 42: the final tree of this stop (the CUDA sources as
# in bd24898, the attention tests' new shapes): the whole CUDA suite, the
# paged full window kernel, end to end.
set -uo pipefail
ROUND=r42
source tools/device/round_lib.sh
round_begin
round_deps
round_build lingbot-map cuda_tests attention_cuda_bench
log "CUDA suite"
timeout 240 $B/bin/cuda_tests > $R/cuda_tests.log 2>&1
echo "rc=$?" | tee -a $S; grep -E "FAILED|PASSED|tests ran|Failure|SKIPPED" $R/cuda_tests.log | head -20 | cut -c1-200 | tee -a $S
grep -E "vs upstream" $R/cuda_tests.log | sort -k5 -g | tail -3 | cut -c1-160 | tee -a $S; keep
log "attention kernel alone"
timeout 40 $B/bin/attention_cuda_bench --benchmark_filter='PagedFullWindow/kernel:3/splits:0/' 2>&1 | grep -E "^BM_" | cut -c1-160 | tee -a $S; keep
log "end to end"
bench default --frames 200; keep
log done
