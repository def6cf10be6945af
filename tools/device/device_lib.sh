# shellcheck shell=bash
# Helpers for the scripts in tools/device/, sourced from the repository root
# on the GPU machine (gpu_check.sh, official_cpu_check.sh).
#
# The device tool brings back at most 8 files from $OUT, so a script keeps
# its logs in a work folder and packs them at the end; the summary is written
# straight into $OUT so that it comes back even when the call is cut off.
#
#   device_begin NAME        work folder $W = /tmp/NAME, summary $S =
#                            $OUT/summary.txt, logs packed into
#                            $OUT/logs.tar.gz at exit (and at each `keep`)
#   log TEXT                 a "== TEXT (time)" line in the summary
#   note TEXT                a plain line in the summary
#   keep                     pack the logs so far (call after each step)
#   environment              GPU, driver, CUDA, CPU and tool versions
#   deps                     Debian packages carried in .deps/debs unpacked
#                            to /tmp/deps (or DEPS_PREFIX); sets $PREFIX
#   configure SRC BUILD LOG [CMAKE ARGS...]
#                            Release, CUDA on, CUDA_ARCHS (default 90a), Ninja
#   build BUILD LOG TARGETS...
#   target_matching BUILD SUFFIX
#                            the build's target whose name ends in SUFFIX
#                            (cuda_tests or backend_cuda_tests)
#   reference_start / reference_wait
#                            upstream in the background: the official
#                            architecture's checkpoint, 11 frames of 378 x 504
#                            and its fp32 outputs for them (needs .upstream)
#   bench_in BUILD NAME ARGS...
#                            lingbot-map bench --device cuda ARGS, its
#                            figures to the summary, JSON beside the log
#   upstream_profile FRAMES HEIGHT WIDTH WINDOW [ARGS...]
#                            upstream's gct_profile (SDPA, bf16, eager)
#   official_parity BUILD [ARGS...]
#                            our bf16 run on the reference frames against
#                            upstream's fp32 outputs; ARGS: more run options
#   kernel_profile BUILD SECONDS SKIP HEIGHT WIDTH
#                            one streaming frame's kernels timed one by one
#                            under Nsight Compute, grouped by kernel_profile.py
#
# Upstream steps need .upstream/ (carried): upstream's repository root
# (lingbot_map/, gct_profile.py) and its courthouse frames in
# .upstream/data/courthouse.
export PYTHONPATH=$PWD/.upstream:$PWD/tools/reference PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/device_out}

log() { echo "== $* ($(date +%T))" | tee -a "$S"; }
note() { echo "$*" | tee -a "$S"; }

device_begin() {
  W=/tmp/$1
  rm -rf "$W" && mkdir -p "$W" "$OUT"
  S=$OUT/summary.txt
  : > "$S"
  trap keep EXIT
}

# Everything in the work folder but the bulky profiler files, which the
# steps that make them compress into $OUT themselves.
keep() {
  tar -C "$(dirname "$W")" --exclude='*.ncu-rep' --exclude='*.csv' --exclude='*.sass' \
    -czf "$OUT/logs.tar.gz" "$(basename "$W")" 2>/dev/null
}

environment() {
  {
    date -u
    nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader 2>&1
    nvcc --version 2>&1 | tail -1
    cmake --version 2>&1 | head -1
    g++ --version 2>&1 | head -1
    echo "$(nproc) CPU cores:$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2)"
    python3 -c 'import torch; print("torch", torch.__version__)' 2>&1 | tail -1
  } > "$W/env.txt" 2>&1
  cat "$W/env.txt" >> "$S"
}

# Packages the image lacks (GoogleTest, Google Benchmark, fmt, CLI11,
# nlohmann-json, libexif, OpenBLAS, ...) travel as .deb files; dpkg -x
# unpacks them without installing anything.
deps() {
  PREFIX=${DEPS_PREFIX:-}
  if [ -z "$PREFIX" ] && ls .deps/debs/*.deb > /dev/null 2>&1; then
    mkdir -p /tmp/deps
    for f in .deps/debs/*.deb; do dpkg -x "$f" /tmp/deps; done
    PREFIX=/tmp/deps/usr
  fi
  if [ -n "$PREFIX" ]; then
    export LD_LIBRARY_PATH=$PREFIX/lib/x86_64-linux-gnu:$PREFIX/lib/x86_64-linux-gnu/openblas-openmp:$PREFIX/lib:${LD_LIBRARY_PATH:-}
  fi
}

configure() {  # source folder, build folder, log, extra CMake arguments (later ones win)
  local src=$1 build=$2 logfile=$3
  shift 3
  cmake -S "$src" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DLINGBOT_CUDA=ON \
    -DCMAKE_CUDA_ARCHITECTURES="${CUDA_ARCHS:-90a}" ${PREFIX:+-DCMAKE_PREFIX_PATH=$PREFIX} "$@" > "$logfile" 2>&1
}

build() {  # build folder, log, targets
  local build=$1 logfile=$2
  shift 2
  ninja -C "$build" "$@" > "$logfile" 2>&1 || { grep -E "error|FAILED" "$logfile" | head -20 | tee -a "$S"; return 1; }
}

# Target names move with the sources (tests/cuda -> cuda_tests,
# tests/backend/cuda -> backend_cuda_tests): find them instead of naming them.
target_matching() {  # build folder, name suffix
  ninja -C "$1" -t targets all 2>/dev/null | sed -n "s/^\([A-Za-z0-9_-]*$2\): \(phony\|CXX_EXECUTABLE\).*/\1/p" |
    grep -v '^cmake_' | head -1
}

reference_start() {
  python3 tools/reference/official_reference.py --images .upstream/data/courthouse --frames 11 \
    --save-checkpoint /tmp/official.pt --frames-out /tmp/frames --reference-out /tmp/ref.npz \
    > "$W/upstream_reference.log" 2>&1 &
  REF=$!
}

# The reference runs on the GPU: no timing may start before it is done.
reference_wait() {
  [ -n "${REF:-}" ] || return 0
  wait "$REF"
  note "upstream reference rc=$?: $(tail -1 "$W/upstream_reference.log" | cut -c1-200)"
  REF=
}

bench_in() {  # build folder, name, bench arguments
  local build=$1 name=$2
  shift 2
  timeout "${BENCH_TIMEOUT:-150}" "$build/bin/lingbot-map" bench --device cuda --json "$W/bench_$name.json" "$@" \
    > "$W/bench_$name.txt" 2>&1
  local rc=$?
  note "-- $name: $* (rc=$rc)"
  # The figures (phase 1, frames 10 and 72, steady state, what was not
  # measured, memory), or the end of the log if the run stopped before
  # printing them.
  { grep -E "^phase 1|^frame 10|steady-state median|^not measured|device memory in use" "$W/bench_$name.txt" ||
    tail -3 "$W/bench_$name.txt"; } | cut -c1-260 | tee -a "$S"
}

upstream_profile() {  # frames, height, width, window, more gct_profile arguments
  local frames=$1 h=$2 w=$3 window=$4
  shift 4
  timeout $((90 + frames / 2)) python3 tools/reference/upstream_gpu_profile.py --num_frames "$frames" \
    --img_h "$h" --img_w "$w" --sliding_window "$window" "$@" > "$W/upstream_profile.log" 2>&1
  note "upstream rc=$?"
  grep -E "Phase 1|total time|per frame|\((10|50|90)%\)|peak GPU" "$W/upstream_profile.log" | tee -a "$S"
}

official_parity() {  # build folder, more run options
  local build=$1
  shift
  rm -rf /tmp/ours_gpu
  timeout 120 "$build/bin/lingbot-map" run --model /tmp/official.pt --images /tmp/frames --image-size 504 \
    --device cuda --out /tmp/ours_gpu "$@" > "$W/parity_run.log" 2>&1
  note "run rc=$?: $(tail -1 "$W/parity_run.log" | cut -c1-200)"
  python3 tools/reference/compare_outputs.py /tmp/ours_gpu/predictions.npz /tmp/ref.npz 2>&1 | tee -a "$S"
}

# ncu serialises the kernels and times each alone; SKIP launches (the
# warm-up stream) are passed over before it starts recording.
kernel_profile() {  # build folder, seconds, launches to skip, height, width
  timeout "$2" ncu --clock-control none --launch-skip "$3" --metrics gpu__time_duration.sum --csv --page raw \
    "$1/bin/lingbot-map" bench --device cuda --height "$4" --width "$5" --frames 10 > "$W/ncu.csv" 2> "$W/ncu.err"
  note "ncu rc=$?"
  python3 tools/device/kernel_profile.py "$W/ncu.csv" > "$W/kernel_profile.txt" 2>&1
  head -45 "$W/kernel_profile.txt" | cut -c1-170 | tee -a "$S"
  cp "$W/kernel_profile.txt" "$OUT/"
  cp "$W/ncu.csv.sequence.txt" "$OUT/kernel_sequence.txt" 2>/dev/null
  gzip -c "$W/ncu.csv" > "$OUT/ncu.csv.gz"
}
