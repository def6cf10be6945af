#!/usr/bin/env bash
# The viewer page's load time for about 1 and 5 million points (docs/PERF.md,
# "The browser viewer"): a synthetic result served by `lingbot-map view
# --view-downsample 1`, headless chromium through tests/tools/viewer_check.mjs.
# Without a GPU chromium draws with SwiftShader (software WebGL), which then
# dominates: the page's own work is message_handling_ms.
#
#   bash bench/viewer/load_time.sh [BUILD_DIR]      (tests/tools: npm ci first)
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for spec in "1m 7" "5m 33"; do
  set -- $spec
  /usr/bin/python3 bench/viewer/synthetic_result.py "$work/$1" "$2" 294 518
  "$build/bin/lingbot-map" view "$work/$1" --view-downsample 1 --port 0 2> "$work/$1.log" &
  server=$!
  node tests/tools/viewer_check.mjs --log "$work/$1.log" --timeout 600 --time-renders 5 > "$work/$1.json" || true
  kill -INT $server
  wait $server || true
  /usr/bin/python3 -c "
import json, sys
d = json.load(open('$work/$1.json'))
l = d['loaded']
print(f\"{l['points']:>9,} points in {l['frames']} frames: loaded {l['load_ms'] / 1000:.1f} s after navigation, \"
      f\"page's own message handling {d['message_handling_ms']:.0f} ms, longest frame gap {d['longest_frame_gap_ms']:.0f} ms, \"
      f\"{d['ms_per_render']:.0f} ms per render\")"
done
