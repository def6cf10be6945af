#!/usr/bin/env bash
# Device memory and speed of this tree against an earlier one (a git archive
# carried in DIR, e.g. `git archive COMMIT | tar -x -C .old`), in one call:
# both built for sm_90a, this tree's CUDA tests (all of them: a change to the
# backend's setup touches every kernel), then `bench` alternating between
# the two trees, twice, at the configurations issue 20 names:
#   bf16   378 x 504, window 64 (the default)
#   fp8    378 x 504, window 64, --kv-dtype fp8
#   low64  378 x 504, --memory-profile low --kv-window 64
#   low    518 x 378, --memory-profile low (window 32)
# and, with .upstream/ carried, the official-size parity of the default and
# the low profile against upstream fp32. Results: $OUT/summary.txt, $OUT/logs.tar.gz. About
# 6 minutes.
#
#   bash tools/device/memory_ab.sh DIR [FRAMES (120)]
set -uo pipefail
OLD=${1:?usage: memory_ab.sh DIR [FRAMES]}
FRAMES=${2:-120}
source tools/device/device_lib.sh
device_begin memory_ab
environment
deps
have_upstream=0
[ -f .upstream/gct_profile.py ] && [ -d .upstream/data/courthouse ] && have_upstream=1
[ "$have_upstream" = 1 ] && reference_start

log "build this tree (/tmp/b-new) and $OLD (/tmp/b-old), sm_90a"
{ configure . /tmp/b-new "$W/cmake_new.log" -DLINGBOT_BENCH=OFF &&
  build /tmp/b-new "$W/build_new.log" lingbot-map "$(target_matching /tmp/b-new cuda_tests)"; } &
{ configure "$OLD" /tmp/b-old "$W/cmake_old.log" -DLINGBOT_TESTS=OFF -DLINGBOT_BENCH=OFF &&
  build /tmp/b-old "$W/build_old.log" lingbot-map; } &
wait
[ -x /tmp/b-new/bin/lingbot-map ] && [ -x /tmp/b-old/bin/lingbot-map ] || { note "a build failed"; exit 1; }
keep

log "CUDA tests (this tree)"
timeout 300 "/tmp/b-new/bin/$(target_matching /tmp/b-new cuda_tests)" > "$W/tests.log" 2>&1
note "rc=$?"
grep -E "^\[  (PASSED|FAILED)|FAILED TEST|stack limit" "$W/tests.log" | head -20 | cut -c1-200 | tee -a "$S"
keep
reference_wait

# bench's "device memory:" line and the account after it.
account_of() { sed -n '/^device memory:/,/of the tensors/p' "$W/bench_$1.txt" | cut -c1-200 | tee -a "$S"; }
for round in 1 2; do
  for tree in new old; do
    log "round $round: $tree"
    B=/tmp/b-$tree
    bench_in "$B" "${tree}_bf16_$round" --frames "$FRAMES" --height 378 --width 504 --kv-window 64
    bench_in "$B" "${tree}_fp8_$round" --frames "$FRAMES" --height 378 --width 504 --kv-window 64 --kv-dtype fp8
    bench_in "$B" "${tree}_low64_$round" --frames "$FRAMES" --height 378 --width 504 --memory-profile low \
      --kv-window 64
    bench_in "$B" "${tree}_low_$round" --frames "$FRAMES" --height 378 --width 518 --memory-profile low
    [ "$round" = 1 ] && for c in bf16 fp8 low64 low; do account_of "${tree}_${c}_1"; done
    keep
  done
done

if [ "$have_upstream" = 1 ]; then
  for profile in default low; do
    log "official-size parity of the $profile profile (this tree) against upstream fp32"
    timeout 120 /tmp/b-new/bin/lingbot-map run --model /tmp/official.pt --images /tmp/frames --image-size 504 \
      --device cuda --out "/tmp/ours_$profile" --memory-profile "$profile" > "$W/parity_$profile.log" 2>&1
    note "run rc=$?"
    python3 tools/reference/compare_outputs.py "/tmp/ours_$profile/predictions.npz" /tmp/ref.npz 2>&1 | tee -a "$S"
  done
  keep
fi
log "done"
