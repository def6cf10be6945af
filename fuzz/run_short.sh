#!/usr/bin/env bash
# Builds the fuzz targets (checkpoint readers, images, npz, model config,
# video) with clang-14 + libFuzzer and runs each, two at a time. Exits
# non-zero if any target finds a crash, a leak, an overread or a timeout;
# the failing input is left in <build>/fuzz-artifacts/ (keep it under
# fuzz/regressions/<target>/ once fixed: fuzz/regressions/README.md names the
# test that replays each folder).
#
#   fuzz/run_short.sh                      the CI gate: a fixed seed and a fixed
#                                          number of inputs per target (about
#                                          20 s each on a CI machine)
#   fuzz/run_short.sh explore [SECONDS]    new ground: a random seed for SECONDS
#                                          (default 60) per target
#
# The gate is deterministic, so a run that passes here passes in CI: a gate
# that failed on whatever a random seed happened to reach would block
# unrelated work. Finding new inputs is the explore mode's job, by hand or
# before a stop; what it finds becomes a regression input and a fix.
# Longer runs by hand, e.g. an hour of the unpickler:
#   build-fuzz/bin/fuzz_pickle -dict=fuzz/dicts/pickle.dict build-fuzz/fuzz-corpus/fuzz_pickle \
#       -max_total_time=3600
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
mode=${1:-gate}
seconds=${2:-60}
build=${LINGBOT_FUZZ_BUILD:-$root/build-fuzz}
case $mode in
  gate | explore) ;;
  *) echo "fuzz/run_short.sh: unknown mode '$mode' (gate or explore)" >&2; exit 1 ;;
esac
targets=(fuzz_zip fuzz_pickle fuzz_safetensors fuzz_checkpoint fuzz_torch_pickle
         fuzz_image fuzz_npz fuzz_model_config fuzz_video)
# Inputs per target in the gate: what a 2-core CI machine runs in ~20 s.
declare -A gate_runs=([fuzz_zip]=500000 [fuzz_pickle]=80000 [fuzz_safetensors]=150000
  [fuzz_checkpoint]=150000 [fuzz_torch_pickle]=60000 [fuzz_image]=40000 [fuzz_npz]=60000
  [fuzz_model_config]=50000 [fuzz_video]=15000)
fixtures=$root/tests/fixtures/checkpoints

CC=${CC:-clang-14} CXX=${CXX:-clang++-14} cmake -S "$root" -B "$build" -G Ninja \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo -DLINGBOT_FUZZ=ON -DLINGBOT_CUDA=OFF \
  -DLINGBOT_TESTS=OFF -DLINGBOT_BENCH=OFF >/dev/null
ninja -C "$build" fuzz_all

# Seed corpora from the test fixtures, by the kind of input each target takes.
# The gate starts from the seeds alone each time, so that its inputs do not
# depend on earlier runs; explore keeps and grows its corpus.
[ "$mode" = gate ] && rm -rf "$build/fuzz-corpus"
seed() {  # seed <target> <glob>...
  local dir=$build/fuzz-corpus/$1
  shift
  mkdir -p "$dir"
  for f in "$@"; do [ -f "$f" ] && cp -n "$f" "$dir/" 2>/dev/null || true; done
}
seed fuzz_zip "$fixtures"/handmade/*.pt "$fixtures"/hostile/*.pt
seed fuzz_pickle "$fixtures"/pickles/*.pkl
seed fuzz_torch_pickle "$fixtures"/pickles/torch_*.pkl
seed fuzz_safetensors "$fixtures"/handmade/*.safetensors "$fixtures"/hostile/*.safetensors
seed fuzz_checkpoint "$fixtures"/handmade/*.pt "$fixtures"/handmade/*.safetensors \
  "$fixtures"/hostile/*.pt "$fixtures"/hostile/*.safetensors "$fixtures"/torch/*.pt
seed fuzz_image "$root"/tests/fixtures/preprocess/inputs/*
for t in "${targets[@]}"; do seed "$t" "$root"/fuzz/seeds/"$t"/* "$root"/fuzz/regressions/"$t"/*; done

dict_for() {
  case $1 in
    fuzz_pickle | fuzz_torch_pickle) echo "$root/fuzz/dicts/pickle.dict" ;;
    fuzz_safetensors) echo "$root/fuzz/dicts/safetensors.dict" ;;
    fuzz_image) echo "$root/fuzz/dicts/image.dict" ;;
    fuzz_npz) echo "$root/fuzz/dicts/npz.dict" ;;
    fuzz_model_config) echo "$root/fuzz/dicts/model_config.dict" ;;
    fuzz_video) echo "$root/fuzz/dicts/video.dict" ;;
    *) echo "$root/fuzz/dicts/zip.dict" ;;
  esac
}

mkdir -p "$build/fuzz-artifacts" "$build/fuzz-logs"
run() {  # run <target>: returns libFuzzer's status
  local t=$1
  local budget
  if [ "$mode" = gate ]; then budget=(-seed=1 -runs="${gate_runs[$t]}"); else budget=(-max_total_time="$seconds"); fi
  "$build/bin/$t" "$build/fuzz-corpus/$t" -dict="$(dict_for "$t")" "${budget[@]}" \
    -max_len=65536 -timeout=10 -rss_limit_mb=2048 \
    -artifact_prefix="$build/fuzz-artifacts/$t-" -print_final_stats=1 \
    >"$build/fuzz-logs/$t.log" 2>&1
}

# A failure's own words, so that a CI log alone says what broke.
failed() {  # failed <target>
  echo "FAILED: $1 (see $build/fuzz-logs/$1.log); the input is in $build/fuzz-artifacts/"
  grep -v '^ *#[0-9]' "$build/fuzz-logs/$1.log" | grep -A12 -m1 -E 'ERROR|malformed|deadly|Timeout|leak' | sed 's/^/    /' || true
  grep -m1 '^Base64:' "$build/fuzz-logs/$1.log" | sed 's/^/    input as /' || true
}

status=0
pids=()
names=()
for t in "${targets[@]}"; do
  run "$t" &
  pids+=($!)
  names+=("$t")
  if [ ${#pids[@]} -eq 2 ]; then
    for i in 0 1; do
      if ! wait "${pids[$i]}"; then status=1; failed "${names[$i]}"; fi
    done
    pids=()
    names=()
  fi
done
for i in "${!pids[@]}"; do
  if ! wait "${pids[$i]}"; then status=1; failed "${names[$i]}"; fi
done

for t in "${targets[@]}"; do
  runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$build/fuzz-logs/$t.log" | grep -o '[0-9]*$' || echo "?")
  secs=$(grep -o 'stat::average_exec_per_sec: *[0-9]*' "$build/fuzz-logs/$t.log" | grep -o '[0-9]*$' || echo "?")
  echo "$t: $runs executions ($secs per second)"
done
exit $status
