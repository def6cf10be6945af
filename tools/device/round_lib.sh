# Shared by tools/device/gpu_round*.sh (sourced, from the repository root on
# the GPU machine). A round script sets ROUND (its name, e.g. r6) and then
# calls what it needs:
#   round_begin            results folder /tmp/$ROUND (tarred to $OUT/$ROUND.tar
#                          at exit) and the summary file $S; log "text"
#   round_deps             unpack the Debian packages carried in .deps/debs
#   round_build TARGETS    Release build with CUDA for sm_90a into build-device
#   old_build_start TARGETS the previous tree, carried in .old/ (a git archive
#                          of its commit; git-excluded), built the same way
#                          into build-old in the background (BO its folder,
#                          OLD the pid to wait for)
#   reference_start        upstream: official-size checkpoint, 11 frames and
#                          its fp32 reference, in the background (REF = pid)
#   bench NAME ARGS...     lingbot-map bench at 378 x 504, last lines to $S
#   bench_old NAME ARGS... the same with build-old's lingbot-map
#   upstream_profile       upstream's gct_profile (SDPA, bf16, eager), 200 frames
#   official_parity        our bf16 run on the reference frames vs upstream fp32
#   keep                   copy the summary so far to $OUT (kept if the call is cut off)
#   kernel_profile SECS    one streaming frame's kernels timed one by one under
#                          Nsight Compute (warm-up stream skipped), grouped by
#                          kernel_profile.py; the CSV gzipped to $OUT
export PYTHONPATH=$PWD/.upstream:$PWD/tools/reference PYTHONUNBUFFERED=1
B=$PWD/build-device

log() { echo "== $* ($(date +%T))" | tee -a "$S"; }

round_begin() {
  REAL_OUT=$OUT
  R=/tmp/$ROUND
  rm -rf "$R" && mkdir -p "$R"
  S=$R/summary.txt
  trap 'tar -C /tmp -cf "$REAL_OUT/$ROUND.tar" "$ROUND"; cat "$S"' EXIT
}

round_deps() {
  mkdir -p /tmp/deps && for f in .deps/debs/*.deb; do dpkg -x "$f" /tmp/deps; done
  export LD_LIBRARY_PATH=/tmp/deps/usr/lib/x86_64-linux-gnu:/tmp/deps/usr/lib/x86_64-linux-gnu/openblas-openmp
}

configure() {  # source folder, build folder, log
  cmake -S "$1" -B "$2" -G Ninja -DCMAKE_BUILD_TYPE=Release -DLINGBOT_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90a \
    -DCMAKE_PREFIX_PATH=/tmp/deps/usr > "$3" 2>&1
}

round_build() {
  log build
  configure . "$B" "$R/cmake.log" && ninja -C "$B" "$@" > "$R/build.log" 2>&1 || \
    { grep -E "error" "$R/build.log" | head | tee -a "$S"; exit 1; }
}

old_build_start() {
  BO=$PWD/build-old
  ( configure .old "$BO" "$R/cmake_old.log" && ninja -C "$BO" "$@" > "$R/build_old.log" 2>&1 ) &
  OLD=$!
}

reference_start() {
  python3 tools/reference/official_reference.py --images .upstream/data/courthouse --frames 11 \
    --save-checkpoint /tmp/official.pt --frames-out /tmp/frames --reference-out /tmp/ref.npz \
    > "$R/upstream_ref.log" 2>&1 &
  REF=$!
}

bench_in() {  # build folder, name, args...
  local build=$1 name=$2; shift 2
  timeout 100 "$build/bin/lingbot-map" bench --device cuda --height 378 --width 504 "$@" > "$R/bench_$name.txt" 2>&1
  echo "-- $name: $*" | tee -a "$S"; tail -3 "$R/bench_$name.txt" | cut -c1-260 | tee -a "$S"
}
bench() { bench_in "$B" "$@"; }
bench_old() { bench_in "$BO" "$@"; }

upstream_profile() {
  log "upstream gct_profile (same call)"
  timeout 150 python3 tools/reference/upstream_gpu_profile.py --num_frames 200 > "$R/upstream_profile.log" 2>&1
  tail -16 "$R/upstream_profile.log" | tee -a "$S"
}

official_parity() {
  log "official parity"
  timeout 60 "$B/bin/lingbot-map" run --model /tmp/official.pt --images /tmp/frames --image-size 504 --device cuda \
    --out /tmp/ours_gpu > "$R/ours_run.log" 2>&1; tail -1 "$R/ours_run.log" | cut -c1-200 | tee -a "$S"
  python3 tools/reference/compare_outputs.py /tmp/ours_gpu/predictions.npz /tmp/ref.npz 2>&1 | tee -a "$S"
}

keep() { cp "$S" "$REAL_OUT/summary_partial.txt"; }

kernel_profile() {  # seconds
  log "kernel profile of one streaming frame (ncu, serialised, warm-up skipped)"
  timeout "$1" ncu --clock-control none --launch-skip 7000 --metrics gpu__time_duration.sum --csv --page raw \
    "$B/bin/lingbot-map" bench --device cuda --height 378 --width 504 --frames 10 > "$R/ncu.csv" 2> "$R/ncu.err"
  echo "rc=$?" | tee -a "$S"
  python3 tools/device/kernel_profile.py "$R/ncu.csv" > "$R/kernel_profile.txt" 2>&1
  head -45 "$R/kernel_profile.txt" | cut -c1-170 | tee -a "$S"
  cp "$R/kernel_profile.txt" "$R/ncu.csv.sequence.txt" "$REAL_OUT/" 2>/dev/null
  gzip -c "$R/ncu.csv" > "$REAL_OUT/ncu.csv.gz"
  rm -f "$R/ncu.csv"
}
