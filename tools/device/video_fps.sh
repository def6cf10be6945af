#!/usr/bin/env bash
# End-to-end frame rate of `lingbot-map run --video` on a 1080p H.264 file
# against the same frames as PNG files (issue #16), on the GPU machine.
#
# The GPU machine has no FFmpeg and no apt, so this runs a binary built on the
# development machine, with FFmpeg's libraries bundled beside it:
#   python3 tools/device/ffmpeg_bundle.py DEVICE_LDCONFIG .deps/ffmpeg
#   tar -C .deps -cJf .deps/ffmpeg.tar.xz ffmpeg   (a third of the size to carry)
#   .deps/runtime/*.deb   the Debian libraries the binary links (oneDNN, fmt, ...)
#   .deps/video/*.mp4     the video (e.g. the courthouse frames at 1920x1080,
#                         30 fps, libx264 crf 18: see docs/PERF.md)
# Device call: carry .upstream .deps/ffmpeg.tar.xz .deps/runtime .deps/video
#   build/bin/lingbot-map build/lib/liblingbot_cuda.so
#   bash tools/device/video_fps.sh [--repeat R]
# The PNGs are the video's frames decoded by OpenCV on the machine. Each
# input runs R times, alternating; the summary gives each run's frames/s
# (the run's own figure: first frame in to last result out), the time the
# model waited for the decoder, and the predictions' difference between the
# two inputs. Results: $OUT/summary.txt, $OUT/logs.tar.gz.
set -uo pipefail
source tools/device/device_lib.sh
REPEAT=2
while [ $# -gt 0 ]; do
  case $1 in
    --repeat) REPEAT=$2; shift ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
  shift
done
device_begin video_fps
environment
mkdir -p /tmp/deps && for f in .deps/runtime/*.deb; do dpkg -x "$f" /tmp/deps; done
tar -C /tmp -xJf .deps/ffmpeg.tar.xz
export LD_LIBRARY_PATH=/tmp/ffmpeg:/tmp/deps/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
BIN=$PWD/build/bin/lingbot-map
VIDEO=$(ls .deps/video/*.mp4 | head -1)
if ldd "$BIN" | grep -q "not found"; then
  note "missing libraries: $(ldd "$BIN" | grep 'not found' | tr '\n' ' ')"
  exit 1
fi
reference_start
log "PNG frames of $VIDEO (OpenCV)"
python3 - "$VIDEO" /tmp/png1080 <<'PY' | tee -a "$S"
import cv2, os, sys
os.makedirs(sys.argv[2], exist_ok=True)
cap = cv2.VideoCapture(sys.argv[1])
n, size = 0, (0, 0)
while True:
    ok, frame = cap.read()
    if not ok:
        break
    cv2.imwrite(os.path.join(sys.argv[2], f"{n:06d}.png"), frame)
    n, size = n + 1, (frame.shape[1], frame.shape[0])
print(f"{n} frames of {size[0]}x{size[1]} written")
PY
reference_wait
keep
run_one() {  # label, input arguments
  local label=$1
  shift
  "$BIN" run --model /tmp/official.pt --device cuda "$@" --out "/tmp/out_$label" > "$W/run_$label.log" 2>&1
  local rc=$?
  local rate wait
  rate=$(grep -oE "[0-9]+ frames in [0-9.]+ s \([0-9.]+ frames/s\)" "$W/run_$label.log" | tail -1)
  wait=$(grep -oE "waited [0-9.]+ s for the decoder \([0-9.]+% of the run\)" "$W/run_$label.log" | tail -1)
  note "$label (rc=$rc): $rate ${wait:+| model $wait}"
  cat "$W/run_$label.log" >> "$W/runs.log"
}
log "runs, $REPEAT each, alternating"
for r in $(seq 1 "$REPEAT"); do
  run_one "png_$r" --images /tmp/png1080
  run_one "video_$r" --video "$VIDEO" --fps 30
done
keep
log "predictions: video against PNG"
python3 - /tmp/out_png_1/predictions.npz /tmp/out_video_1/predictions.npz <<'PY' | tee -a "$S"
import numpy as np, sys
a, b = np.load(sys.argv[1]), np.load(sys.argv[2])
for k in ("pose_enc", "depth", "depth_conf", "world_points"):
    x, y = a[k].astype(np.float64), b[k].astype(np.float64)
    print(f"{k}: shapes {x.shape} {y.shape}, ||video - png|| / ||png|| = "
          f"{np.linalg.norm(y - x) / np.linalg.norm(x):.3e}" if x.shape == y.shape else f"{k}: shapes differ")
PY
