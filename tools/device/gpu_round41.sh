#!/usr/bin/env bash
# GPU machine, round 41 (experiment): is it the lone row blocks? The full
# window with 960 queries (five full tiles per head, no lone block) and
# with 978, balanced (splits 0) against grid (splits 1); and 192 queries
# (one full tile per head) against 64 (one lone block per head).
# The balanced schedule's last version is commit f45b3ea, reverted in the
# next; rounds 34-41 ran its successive versions (attention_versions.md,
# wgmma v4, says what each changed). The environment variables some rounds
# set were experiment hooks that existed only in the working tree then.
set -uo pipefail
ROUND=r41
source tools/device/round_lib.sh
round_begin
round_deps
round_build attention_cuda_bench
for i in 1 2; do
  for q in 960 978 192 64; do
    LINGBOT_BENCH_QUERIES=$q timeout 40 $B/bin/attention_cuda_bench --benchmark_filter='PagedFullWindow/kernel:3/splits:(0|1)/' 2>&1 | grep -E "^BM_" | cut -c1-150 | sed "s/^/q=$q /" | tee -a $S
  done
done
keep
log done
