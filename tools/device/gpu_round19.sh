#!/usr/bin/env bash
# GPU machine, round 19 (this stop's last call; the figures of docs/PERF.md):
# round 18's code plus the combine pass's weights by shuffle, the encoder's
# plain qkv split in one kernel, grid-stride launches capped at 4096 blocks
# and row grids for the DPT head's full-resolution passes, and the side
# branch's stream at high priority (compared with LINGBOT_CUDA_BRANCH_PRIORITY=0).
# The whole CUDA suite; end-to-end figures and upstream's gct_profile in the
# same call; the attention kernel alone; official-size parity; one frame's
# kernels under Nsight Compute.
# A record: the priority made no difference (27.63 against 27.60 ms) and was
# removed, so LINGBOT_CUDA_BRANCH_PRIORITY no longer exists; the committed
# code behaves as the equal_priority run.
set -uo pipefail
ROUND=r19
source tools/device/round_lib.sh
round_begin
round_deps
round_build lingbot-map cuda_tests attention_cuda_bench
reference_start
log "CUDA suite"
timeout 160 $B/bin/cuda_tests > $R/cuda_tests.log 2>&1
echo "rc=$?" | tee -a $S; grep -E "FAILED|PASSED|tests ran|Failure" $R/cuda_tests.log | head -20 | cut -c1-200 | tee -a $S; keep
log "end to end"
bench full --frames 200 --json $R/ours.json
(export LINGBOT_CUDA_BRANCH_PRIORITY=0; bench equal_priority --frames 200)
bench nodense --frames 200 --no-dense
bench sync --frames 200 --pipeline-depth 0
keep
log "attention kernel alone"
timeout 60 $B/bin/attention_cuda_bench \
  --benchmark_filter='PagedFullWindow/kernel:(0|2|3)/splits:0|Dense/groups:(1|8)/n:(7824|978)/kernel:0' \
  2>&1 | grep -E "^BM_" | cut -c1-150 | tee -a $S; keep
wait $REF; tail -1 $R/upstream_ref.log | tee -a $S
official_parity; keep
upstream_profile; keep
log "ours again after upstream"
bench full2 --frames 200; keep
kernel_profile 110
log done
