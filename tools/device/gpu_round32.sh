#!/usr/bin/env bash
# Measured experiment code: LINGBOT_WS_CONSUMERS and the paged cache on
# three consumers were removed after this comparison (attention_versions.md,
# wgmma v3). Kept as the record.
# GPU machine, round 32: the paged cache on three consumers (the default
# now) against two (LINGBOT_WS_CONSUMERS=2), alternating in one call: the
# attention kernel alone and end to end.
set -uo pipefail
ROUND=r32
source tools/device/round_lib.sh
round_begin
round_deps
round_build lingbot-map attention_cuda_bench
log "attention kernel alone"
for c in 3 2 3 2; do
  echo "paged consumers $c" | tee -a $S
  LINGBOT_WS_CONSUMERS=$c timeout 40 $B/bin/attention_cuda_bench \
    --benchmark_filter='PagedFullWindow/kernel:3/splits:0|Dense/groups:1/n:7824/kernel:3' 2>&1 | grep -E "^BM_" | cut -c1-160 | tee -a $S
done
keep
log "end to end"
LINGBOT_WS_CONSUMERS=3 bench three --frames 200; keep
LINGBOT_WS_CONSUMERS=2 bench two --frames 200; keep
LINGBOT_WS_CONSUMERS=3 bench three_again --frames 200; keep
LINGBOT_WS_CONSUMERS=2 bench two_again --frames 200; keep
log done
