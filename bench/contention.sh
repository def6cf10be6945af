#!/usr/bin/env bash
# Threads under contention (issue 22, item 5): the small fixture model on
# the CPU at 1 and 2 threads, with one core kept busy by `yes` and without,
# medians of several runs. Run it on an otherwise idle machine (it prints
# the load average before and after; figures go in docs/PERF.md).
#
#   bench/contention.sh [runs, default 5] [lingbot-map, default build/bin/lingbot-map]
#
# lingbot-map makes OpenMP's waiting threads sleep (OMP_WAIT_POLICY=passive)
# unless the environment sets OMP_WAIT_POLICY or GOMP_SPINCOUNT; to measure
# spinning threads as before, CONTENTION_POLICY=active bench/contention.sh
# (or a build without the fix and CONTENTION_POLICY unset); to measure a
# bounded spin, CONTENTION_SPINCOUNT=N (GOMP_SPINCOUNT: iterations before a
# waiting thread sleeps).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
runs=${1:-5}
cli=${2:-$root/build/bin/lingbot-map}
model=$root/tests/fixtures/model_small
out=$(mktemp -d)
trap 'rm -rf "$out"; [ -n "${busy:-}" ] && kill "$busy" 2>/dev/null || true' EXIT

one_run() {  # one_run <threads>: wall seconds of one run of the 14 courthouse frames
  local start end
  start=$(date +%s.%N)
  env ${CONTENTION_POLICY:+OMP_WAIT_POLICY=$CONTENTION_POLICY} ${CONTENTION_SPINCOUNT:+GOMP_SPINCOUNT=$CONTENTION_SPINCOUNT} "$cli" -q run --model "$model/weights.pt" \
    --config "$model/config.json" --images "$root/tests/fixtures/courthouse" --image-size 126 --no-dense \
    --device cpu --threads "$1" --out "$out/r" >/dev/null
  end=$(date +%s.%N)
  echo "$end - $start" | bc
}

median() { sort -n | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }

measure() {  # measure <label>
  for t in 1 2; do
    local times=()
    for _ in $(seq "$runs"); do times+=("$(one_run "$t")"); done
    printf '%-22s %d thread(s): median %.3f s  (runs: %s)\n' "$1" "$t" \
      "$(printf '%s\n' "${times[@]}" | median)" "${times[*]}"
  done
}

echo "OMP_WAIT_POLICY: ${CONTENTION_POLICY:-as lingbot-map sets it}; GOMP_SPINCOUNT: ${CONTENTION_SPINCOUNT:-as lingbot-map sets it}"
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
measure "idle"
yes >/dev/null &
busy=$!
measure "one core busy (yes)"
kill "$busy"
busy=
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
