#!/usr/bin/env bash
# What the browser viewer costs a GPU run (issue #18's budget: at most 10%
# of the frames per second): `lingbot-map run` on the official architecture
# with random weights, N frames of HxW, without --view and with --view plus
# a page reading the stream, alternating, REPEAT times each. The page is
# headless chromium when the machine has one (tests/tools/viewer_check.mjs
# with node and playwright-core), else a simulated page: curl reading
# /stream as fast as it comes, and a slow one (curl --limit-rate), which
# must cost no more than the fast one (the server drops nothing for a slow
# page: it lags on its own, the model never waits).
#
# Usage (repository root, GPU machine): bash tools/device/viewer_cost.sh [--frames N] [--repeat R]
# Needs .upstream (carried) for the checkpoint: tools/reference/official_reference.py.
# Results: $OUT/summary.txt, $OUT/logs.tar.gz.
set -uo pipefail
FRAMES=200 HEIGHT=378 WIDTH=504 REPEAT=3 BUILD_DIR=build-device
while [ $# -gt 0 ]; do
  case $1 in
    --frames) FRAMES=$2; shift ;;
    --repeat) REPEAT=$2; shift ;;
    --build-dir) BUILD_DIR=$2; shift ;;
    *) echo "unknown option $1" >&2; exit 1 ;;
  esac
  shift
done
source tools/device/device_lib.sh
device_begin viewer_cost
environment
deps
log "build"
configure . "$BUILD_DIR" "$W/configure.log" -DLINGBOT_TESTS=OFF -DLINGBOT_BENCH=OFF -DLINGBOT_EXAMPLES=OFF ||
  { note "configure failed"; tail -20 "$W/configure.log" | tee -a "$S"; exit 1; }
build "$BUILD_DIR" "$W/build.log" lingbot-map || exit 1
keep
log "official architecture, random weights; $FRAMES frames of ${HEIGHT}x$WIDTH"
python3 tools/reference/official_reference.py --images .upstream/data/courthouse --frames "$FRAMES" \
  --height "$HEIGHT" --width "$WIDTH" --save-checkpoint /tmp/official.pt --frames-out /tmp/viewer_frames \
  > "$W/checkpoint.log" 2>&1 || { note "checkpoint failed"; tail -5 "$W/checkpoint.log" | tee -a "$S"; exit 1; }

page_kind=curl
if command -v chromium > /dev/null && command -v node > /dev/null && [ -d tests/tools/node_modules/playwright-core ]; then
  page_kind=chromium
fi
note "page: $page_kind"

# One run; prints its frames per second. $1: a name, $2: view mode (none, page, slow).
one_run() {
  local name=$1 mode=$2 logf=$W/run_$1.log
  local flags=""
  [ "$mode" != none ] && flags="--view --port 0"
  "$BUILD_DIR/bin/lingbot-map" run --model /tmp/official.pt --images /tmp/viewer_frames --image-size "$WIDTH" \
    --device cuda --out "/tmp/viewer_out_$name" $flags > "$logf" 2>&1 &
  local run=$! client=""
  if [ "$mode" != none ]; then
    local url=""
    for _ in $(seq 600); do
      url=$(grep -o 'viewer: open http://[^ ]*' "$logf" | cut -d' ' -f3)
      [ -n "$url" ] && break
      sleep 0.1
    done
    if [ "$mode" = page ] && [ $page_kind = chromium ]; then
      node tests/tools/viewer_check.mjs --url "$url" --frames "$FRAMES" --timeout 300 > "$W/page_$name.json" 2>&1 &
    elif [ "$mode" = slow ]; then
      curl -sN --limit-rate 2M "${url}stream" > /dev/null &
    else
      curl -sN "${url}stream" > /dev/null &
    fi
    client=$!
    for _ in $(seq 3000); do grep -q "viewer: done" "$logf" && break; sleep 0.1; done
    # The browser page reports what it received once it has everything: let it.
    if [ "$mode" = page ] && [ $page_kind = chromium ]; then
      for _ in $(seq 1200); do kill -0 $client 2> /dev/null || break; sleep 0.1; done
    fi
    kill -INT $run
  fi
  wait $run
  [ -n "$client" ] && kill $client 2> /dev/null
  grep -o '[0-9.]* frames/s' "$logf" | head -1 | cut -d' ' -f1
}

declare -A fps
for r in $(seq "$REPEAT"); do
  for mode in none page slow; do
    v=$(one_run "${mode}_$r" $mode)
    fps[$mode]="${fps[$mode]:-} $v"
    note "repeat $r, view $mode: $v frames/s"
    keep
  done
done
median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
log "medians"
off=$(echo "${fps[none]}" | median)
for mode in none page slow; do
  m=$(echo "${fps[$mode]}" | median)
  note "$(printf '%-5s %8s frames/s  (%+.1f%% against no viewer)' "$mode" "$m" "$(echo "$m $off" | awk '{print 100*($1/$2-1)}')")"
done
[ $page_kind = chromium ] && tail -1 "$W"/page_page_1.json | cut -c1-300 | tee -a "$S"
keep
