#!/usr/bin/env bash
# The OpenMP wait policy on the GPU machine's 16-core CPU (issue 22, item 5):
# lingbot-map makes OpenMP's idle threads sleep (OMP_WAIT_POLICY=passive)
# unless the environment sets the policy; on the 2-core development machine
# that fixed 2 threads running 2-4x slower than 1 beside other load
# (docs/PERF.md). Here: does passive waiting cost speed with many threads
# and nothing else running? The small fixture model (126 and 518 wide) and
# the official architecture at 378 x 504 (bench, random weights), each at
# 16 threads with passive waiting (lingbot-map's default) and with
# libgomp's spinning default (GOMP_SPINCOUNT=300000, which lingbot-map
# leaves alone). Then with 8 of the 16 cores kept busy. Results in
# $OUT/summary.txt.
#
#   bash tools/device/omp_wait_check.sh        THREADS=N (default 16), RUNS=N (default 5)
set -uo pipefail
source tools/device/device_lib.sh
device_begin omp_wait_check
T=${THREADS:-16}
RUNS=${RUNS:-5}

log "build (CPU only)"
configure . /tmp/build-cpu "$W/cmake.log" -DLINGBOT_CUDA=OFF -DLINGBOT_TESTS=OFF -DLINGBOT_BENCH=OFF ||
  { tail -30 "$W/cmake.log" | tee -a "$S"; exit 1; }
build /tmp/build-cpu "$W/build.log" lingbot-map || exit 1
CLI=/tmp/build-cpu/bin/lingbot-map
M=tests/fixtures/model_small

median() { sort -n | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }
timed() {  # timed <label> <env assignment or -> <command...>: median wall seconds of RUNS runs
  local label=$1 envset=$2
  shift 2
  local times=()
  for _ in $(seq "$RUNS"); do
    local start end
    start=$(date +%s.%N)
    if [ "$envset" = - ]; then "$@" > "$W/last.log" 2>&1; else env "$envset" "$@" > "$W/last.log" 2>&1; fi
    end=$(date +%s.%N)
    times+=("$(echo "$end - $start" | bc)")
  done
  note "$(printf '%-58s median %.3f s  (%s)' "$label" "$(printf '%s\n' "${times[@]}" | median)" "${times[*]}")"
}
small_run() {  # small_run <image size>
  echo "$CLI" -q run --model "$M/weights.pt" --config "$M/config.json" --images tests/fixtures/courthouse \
    --image-size "$1" --no-dense --device cpu --threads "$T" --out "$W/out"
}

compare() {  # compare <condition>
  for size in 126 518; do
    # shellcheck disable=SC2046
    timed "$1, small model ${size} wide, passive (default)" - $(small_run "$size")
    # shellcheck disable=SC2046
    timed "$1, small model ${size} wide, spinning (GOMP_SPINCOUNT=300000)" GOMP_SPINCOUNT=300000 $(small_run "$size")
  done
  local bench=("$CLI" -q bench --device cpu --threads "$T" --frames 4 --num-scale-frames 2 --height 378 --width 504)
  RUNS=3 timed "$1, official architecture bench 4 frames, passive" - "${bench[@]}"
  RUNS=3 timed "$1, official architecture bench 4 frames, spinning" GOMP_SPINCOUNT=300000 "${bench[@]}"
}

log "idle CPU, $T threads, $RUNS runs each"
note "load: $(cut -d' ' -f1-3 /proc/loadavg), $(nproc) CPUs"
compare "idle"
log "8 cores busy (yes x 8), $T threads"
busy=()
for _ in 1 2 3 4 5 6 7 8; do yes > /dev/null & busy+=($!); done
compare "8 busy"
kill "${busy[@]}"
keep
