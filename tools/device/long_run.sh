#!/usr/bin/env bash
# Long runs on the GPU machine, from the repository root (device tool, with
# .upstream and .deps carried): what grows over a 10,000-frame stream.
#
#   bash tools/device/long_run.sh [--no-build] [--stream N] [--windowed N] [--windowed-size W]
#
#   --stream N     lingbot-map bench: N frames streamed at 378 x 504, window
#                  64, 8 scale frames, cameras only (--no-dense: 10,000 dense
#                  frames would not fit on the disk), a line per 1,000
#                  frames: median frame time, device memory, RSS, KV cache
#                  (default 10000; 0 skips it)
#   --windowed N   lingbot-map run --mode windowed on N raw frames piped on
#                  stdin (the courthouse frames over and over, ping-pong),
#                  dense outputs streamed to disk, with --windowed-size W
#                  (default 252: frames W wide, so that N dense frames fit on
#                  the disk); RSS and device memory sampled every 5 s, frame
#                  rate per 1,000 frames from --emit jsonl (default 10000; 0
#                  skips it). Needs a checkpoint: the official architecture
#                  with random weights, written by upstream's reference
#                  script (tools/reference/official_reference.py).
# Results: $OUT/summary.txt, $OUT/logs.tar.gz.
set -uo pipefail
source tools/device/device_lib.sh
build_first=1 stream=10000 windowed=10000 wsize=252
while [ $# -gt 0 ]; do
  case $1 in
    --no-build) build_first=0 ;;
    --stream) stream=$2; shift ;;
    --windowed) windowed=$2; shift ;;
    --windowed-size) wsize=$2; shift ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
  shift
done
device_begin long_run
environment
deps
B=$PWD/build-device
if [ $windowed -gt 0 ]; then reference_start; fi
if [ $build_first = 1 ]; then
  log build
  configure . "$B" "$W/configure.log" -DLINGBOT_TESTS=OFF -DLINGBOT_BENCH=OFF -DLINGBOT_EXAMPLES=OFF &&
    build "$B" "$W/build.log" lingbot-map || exit 1
fi
keep

# Samples the process's RSS and the GPU's memory in use every 5 s.
sample() {  # pid, file
  while kill -0 "$1" 2>/dev/null; do
    echo "$(date +%s) rss_kb=$(awk '/VmRSS/{print $2}' /proc/$1/status 2>/dev/null)" \
      "gpu_mib=$(nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits | head -1)" >> "$2"
    sleep 5
  done
}

if [ $windowed -gt 0 ]; then
  log "windowed: $windowed frames, $wsize wide"
  reference_wait
  # Raw frames: the courthouse frames at 504 x 378, forwards then backwards.
  cat > /tmp/pipe_frames.py <<'PY'
import glob, sys
from PIL import Image
n = int(sys.argv[1])
paths = sorted(glob.glob(".upstream/data/courthouse/*.png"))
frames = [Image.open(p).convert("RGB").resize((504, 378)).tobytes() for p in paths]
order = frames + frames[-2:0:-1]
out = sys.stdout.buffer
for i in range(n):
    out.write(order[i % len(order)])
PY
  python3 /tmp/pipe_frames.py "$windowed" |
    "$B/bin/lingbot-map" run --model /tmp/official.pt --device cuda --video - --input-format rgb24 \
      --input-size 504x378 --image-size "$wsize" --mode windowed --emit jsonl --out /tmp/long_windowed \
      2> "$W/windowed.log" | python3 -c '
import sys, time
for line in sys.stdin:
    print(f"{time.monotonic():.4f} {line.strip()[:60]}")' > "$W/windowed_arrivals.txt" &
  RUN=$!
  sleep 2
  sample "$(pgrep -n -f 'lingbot-map run')" "$W/windowed_samples.txt" &
  wait $RUN
  note "windowed rc=$? $(tail -1 "$W/windowed.log" | cut -c1-300)"
  python3 - "$W/windowed_arrivals.txt" "$W/windowed_samples.txt" <<'PY' | tee -a "$S"
import sys
t = [float(l.split()[0]) for l in open(sys.argv[1])]
for a in range(0, len(t) - 1000, 1000):
    print(f"frames {a}-{a + 1000}: {1000 / (t[a + 1000] - t[a]):.1f} frames/s")
s = [l.split() for l in open(sys.argv[2])]
if s:
    for row in (s[2] if len(s) > 2 else s[0], s[len(s) // 2], s[-1]):
        print("sample", " ".join(row))
PY
  du -sh /tmp/long_windowed | tee -a "$S"
  rm -rf /tmp/long_windowed
  keep
fi

if [ $stream -gt 0 ]; then
  log "streaming: $stream frames, cameras only"
  BENCH_TIMEOUT=590 bench_in "$B" stream_long --frames "$stream" --no-dense --intervals 1000 \
    --images .upstream/data/courthouse
  grep -E "^frames [0-9]+-[0-9]+:" "$W/bench_stream_long.txt" | cut -c1-240 | tee -a "$S"
  keep
fi
