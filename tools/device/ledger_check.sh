#!/usr/bin/env bash
# Where the GPU's memory and the scale phase's time go (issue 20): builds the
# CLI on the GPU machine (sm_90a), then prints the whole device-memory account
# of `bench` for fp8 KV at 378 x 504 window 64, for the low-memory profile at
# the same size and window and at 518 x 378 (its window 32), and the
# per-stage profile of the scale phase (bench --profile, pipeline depth 0,
# bf16 KV). From the repository root, carrying .deps. Results:
# $OUT/summary.txt, $OUT/logs.tar.gz. About 3 minutes.
#
#   bash tools/device/ledger_check.sh [EXTRA BENCH ARGS...]
set -uo pipefail
source tools/device/device_lib.sh
device_begin ledger_check
environment
deps
B=/tmp/build-ledger
log "configure and build ($B, sm_90a)"
configure . "$B" "$W/cmake.log" -DLINGBOT_TESTS=OFF -DLINGBOT_BENCH=OFF || { tail -20 "$W/cmake.log" | tee -a "$S"; exit 1; }
build "$B" "$W/build.log" lingbot-map || exit 1
account() {  # name, bench args: the figures and the whole account
  local name=$1
  shift
  bench_in "$B" "$name" "$@" "${EXTRA[@]}"
  sed -n '/^device memory/,$p' "$W/bench_$name.txt" | head -24 | cut -c1-220 | tee -a "$S"
}
EXTRA=("$@")
account fp8_w64 --frames 80 --height 378 --width 504 --kv-window 64 --kv-dtype fp8
account low_w64 --frames 80 --height 378 --width 504 --memory-profile low --kv-window 64
account low --frames 60 --height 378 --width 518 --memory-profile low
log "scale-phase profile (bf16 KV, 378 x 504, depth 0)"
timeout 120 "$B/bin/lingbot-map" bench --device cuda --frames 8 --height 378 --width 504 --profile \
  --pipeline-depth 0 "${EXTRA[@]}" > "$W/profile.txt" 2>&1
note "rc=$?"
sed -n '/^phase 1/p;/^stage/,$p' "$W/profile.txt" | head -60 | cut -c1-200 | tee -a "$S"
keep
