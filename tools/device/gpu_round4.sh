#!/usr/bin/env bash
# GPU machine, round 4: where the steady-state time goes, by ablation with
# graphs on (no per-stage synchronisation): full model, no depth head, one
# camera iteration, small window; plus the kernel benches and the CUDA tests.
set -uo pipefail
ROUND=r4
source tools/device/round_lib.sh
round_begin
round_deps
round_build
log "ablations"
bench full --frames 200
bench nodense --frames 200 --no-dense
bench cam1 --frames 200 --camera-iterations 1
bench cam1_nodense --frames 200 --camera-iterations 1 --no-dense
bench w8 --frames 100 --kv-window 8
bench w8_nodense_cam1 --frames 100 --kv-window 8 --no-dense --camera-iterations 1
bench profile --frames 24 --profile
log "kernels"
timeout 120 $B/bin/attention_cuda_bench --benchmark_filter='PagedFullWindow|Dense' > $R/attn_bench.txt 2>&1
grep -E "^BM_" $R/attn_bench.txt | cut -c1-160 | tee -a $S
timeout 120 $B/bin/cuda_ops_bench > $R/ops_bench.txt 2>&1
grep -E "^BM_" $R/ops_bench.txt | cut -c1-160 | tee -a $S
log "cuda tests"
timeout 240 $B/bin/cuda_tests > $R/cuda_tests.log 2>&1; echo "rc=$?" | tee -a $S
grep -E "FAILED|PASSED|tests ran" $R/cuda_tests.log | head -20 | tee -a $S
log done
