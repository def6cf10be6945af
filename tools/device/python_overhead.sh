#!/usr/bin/env bash
# The Python module's overhead per frame against the CLI on the GPU machine,
# at full size: the official architecture with random weights (upstream's
# model, saved by tools/reference/official_reference.py: needs .upstream/
# and torch), FRAMES frames of 378 x 504 (courthouse's 11, repeated), on the
# GPU. bench/python_overhead.py runs `lingbot-map run --images` and the same
# through Model.reconstruct and Stream.push, alternately, REPEAT times.
# Results: $OUT/summary.txt and $OUT/logs.tar.gz.
#
# Usage: bash tools/device/python_overhead.sh [--frames N (200)] [--repeat N (3)]
#                                             [--build-dir DIR (build-device)] [--no-build]
# Needs pybind11-dev (carried in .deps/debs if the image lacks it) and the
# headers of the machine's python3 (with NumPy); the summary says which is missing.
set -uo pipefail
FRAMES=200 REPEAT=3 B=build-device BUILD=1
while [ $# -gt 0 ]; do
  case $1 in
    --frames) FRAMES=$2; shift ;;
    --repeat) REPEAT=$2; shift ;;
    --build-dir) B=$2; shift ;;
    --no-build) BUILD=0 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
  shift
done
# shellcheck source=tools/device/device_lib.sh
source tools/device/device_lib.sh
export CUDA_ARCHS=${CUDA_ARCHS:-90a}
device_begin python_overhead
log "python overhead: $FRAMES frames of 378 x 504, official architecture, cuda, $REPEAT rounds"
environment
deps
PY=$(command -v python3)
note "python: $PY $("$PY" -c 'import sys, numpy; print(sys.version.split()[0], "numpy", numpy.__version__)' 2>&1)"

reference_start  # the official-size random checkpoint /tmp/official.pt and /tmp/frames (11 PNGs)
if [ "$BUILD" = 1 ]; then
  log "configure and build ($B, sm_$CUDA_ARCHS)"
  # The carried zlib1g-dev has only a static libz beside a dangling .so link; a shared module needs the system one.
  zlib=(); [ -e /usr/lib/x86_64-linux-gnu/libz.so.1 ] && zlib=(-DZLIB_LIBRARY=/usr/lib/x86_64-linux-gnu/libz.so.1)
  configure . "$B" "$W/cmake.log" -DPython3_EXECUTABLE="$PY" "${zlib[@]}" || { tail -20 "$W/cmake.log" | tee -a "$S"; exit 1; }
  grep -E "Python module|pybind11|Python3" "$W/cmake.log" | cut -c1-200 | tee -a "$S"
  if ! ninja -C "$B" -t targets all 2>/dev/null | grep -q '^lingbot_map_python:'; then
    note "no Python module in this build (pybind11-dev or $PY's headers missing); carry pybind11-dev in .deps/debs"
    exit 1
  fi
  start=$(date +%s)
  build "$B" "$W/build.log" lingbot-map lingbot_map_python || exit 1
  note "built in $(( $(date +%s) - start )) s"
  keep
fi
reference_wait
[ -f /tmp/official.pt ] || { note "no /tmp/official.pt (the upstream reference failed: see its log)"; exit 1; }

# FRAMES frames: the reference's 11, over and over (links, so nothing is copied).
mkdir -p /tmp/frames_long
mapfile -t pngs < <(ls /tmp/frames/*.png | sort)
for ((i = 0; i < FRAMES; i++)); do ln -sf "${pngs[i % ${#pngs[@]}]}" "$(printf /tmp/frames_long/%05d.png "$i")"; done

log "bench/python_overhead.py"
PYTHONPATH=$B/python timeout 480 "$PY" bench/python_overhead.py --cli "$B/bin/lingbot-map" --model /tmp/official.pt \
  --images /tmp/frames_long --device cuda --repeat "$REPEAT" -- --image-size 504 > "$W/overhead.log" 2>&1
note "rc=$?"
tail -"$((REPEAT + 4))" "$W/overhead.log" | cut -c1-300 | tee -a "$S"
keep
