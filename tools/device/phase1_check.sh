#!/usr/bin/env bash
# Where the scale phase (phase 1) of a GPU stream spends its time, and the
# CPU facts that the CPU path's scaling depends on, in one call:
#   - the CPU's topology (cores, threads per core, caches, NUMA) and what
#     the AMX tile unit delivers alone (dev/cpu/amx_peak.cpp);
#   - this tree built for sm_90a; `bench --profile --pipeline-depth 0
#     --frames 8` (phase 1 alone, stage by stage) at 378 x 504, then the
#     unprofiled bench (phase 1, steady state) twice, and the same with
#     OLD's tree (a git archive carried in DIR) when one is given.
# With TESTS set (a gtest filter), this tree's CUDA tests matching it run
# first. Results: $OUT/summary.txt, $OUT/logs.tar.gz. About 4 minutes (6
# with OLD, more with TESTS).
#
# BENCH_ARGS adds arguments to every bench run (e.g. "--memory-profile low").
#
#   [TESTS=FILTER] [BENCH_ARGS=...] bash tools/device/phase1_check.sh [DIR] [FRAMES (60)]
set -uo pipefail
OLD=${1:-}
FRAMES=${2:-60}
source tools/device/device_lib.sh
device_begin phase1_check
environment
deps

log "CPU topology"
{ lscpu; echo; lscpu -e; echo; grep -m4 -E "siblings|cpu cores|physical id|core id" /proc/cpuinfo; } > "$W/lscpu.txt" 2>&1
grep -E "^(Model name|Thread|Core|Socket|NUMA node|L1d|L2|L3|CPU\(s\))" "$W/lscpu.txt" | tee -a "$S"

log "AMX tiles alone"
g++ -O2 -std=c++20 -mamx-tile -mamx-bf16 -fopenmp dev/cpu/amx_peak.cpp -o /tmp/amx_peak > "$W/amx_build.log" 2>&1 &&
  timeout 60 /tmp/amx_peak 1 2 4 8 16 2>&1 | tee -a "$S"

log "build this tree${OLD:+ and $OLD}, sm_90a"
if [ -n "${TESTS:-}" ]; then
  { configure . /tmp/b-new "$W/cmake_new.log" -DLINGBOT_BENCH=OFF &&
    build /tmp/b-new "$W/build_new.log" lingbot-map "$(target_matching /tmp/b-new cuda_tests)"; } &
else
  { configure . /tmp/b-new "$W/cmake_new.log" -DLINGBOT_BENCH=OFF -DLINGBOT_TESTS=OFF &&
    build /tmp/b-new "$W/build_new.log" lingbot-map; } &
fi
if [ -n "$OLD" ]; then
  { configure "$OLD" /tmp/b-old "$W/cmake_old.log" -DLINGBOT_TESTS=OFF -DLINGBOT_BENCH=OFF &&
    build /tmp/b-old "$W/build_old.log" lingbot-map; } &
fi
wait
[ -x /tmp/b-new/bin/lingbot-map ] || { note "the build failed"; exit 1; }
keep

if [ -n "${TESTS:-}" ]; then
  log "CUDA tests matching $TESTS"
  timeout 300 "/tmp/b-new/bin/$(target_matching /tmp/b-new cuda_tests)" --gtest_filter="$TESTS" > "$W/tests.log" 2>&1
  note "rc=$?"
  grep -E "^\[  (PASSED|FAILED)|FAILED TEST|^\[==========\]" "$W/tests.log" | head -20 | cut -c1-200 | tee -a "$S"
  keep
fi

trees=new
[ -n "$OLD" ] && [ -x /tmp/b-old/bin/lingbot-map ] && trees="new old"
for tree in $trees; do
  B=/tmp/b-$tree
  log "$tree: phase 1 stage by stage"
  bench_in "$B" "${tree}_profile" --frames 8 --height 378 --width 504 --pipeline-depth 0 --profile ${BENCH_ARGS:-}
  sed -n '/^stage /,$p' "$W/bench_${tree}_profile.txt" | head -45 | cut -c1-100 | tee -a "$S"
  keep
done
for round in 1 2; do
  for tree in $trees; do
    log "round $round: $tree"
    bench_in "/tmp/b-$tree" "${tree}_$round" --frames "$FRAMES" --height 378 --width 504 --kv-window 64 ${BENCH_ARGS:-}
    keep
  done
done
