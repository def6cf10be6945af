#!/usr/bin/env bash
# Builds the fuzz targets (checkpoint readers, images, npz, model config,
# video) with clang-14 + libFuzzer and runs
# each for a fixed short time, two at a time. Exits non-zero if any target
# finds a crash, a leak, an overread or a timeout; the failing input is left
# in <build>/fuzz-artifacts/ (keep it under fuzz/regressions/<target>/ once
# fixed: fuzz/regressions/README.md names the test that replays each folder).
#
#   fuzz/run_short.sh [seconds per target, default 20] [build dir, default build-fuzz]
#
# Longer runs by hand, e.g. an hour of the unpickler:
#   build-fuzz/bin/fuzz_pickle -dict=fuzz/dicts/pickle.dict build-fuzz/fuzz-corpus/fuzz_pickle \
#       -max_total_time=3600
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
seconds=${1:-20}
build=${2:-$root/build-fuzz}
targets=(fuzz_zip fuzz_pickle fuzz_safetensors fuzz_checkpoint fuzz_torch_pickle
         fuzz_image fuzz_npz fuzz_model_config fuzz_video)
fixtures=$root/tests/fixtures/checkpoints

CC=${CC:-clang-14} CXX=${CXX:-clang++-14} cmake -S "$root" -B "$build" -G Ninja \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo -DLINGBOT_FUZZ=ON -DLINGBOT_CUDA=OFF \
  -DLINGBOT_TESTS=OFF -DLINGBOT_BENCH=OFF >/dev/null
ninja -C "$build" fuzz_all

# Seed corpora from the test fixtures, by the kind of input each target takes.
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
  "$build/bin/$t" "$build/fuzz-corpus/$t" -dict="$(dict_for "$t")" \
    -max_total_time="$seconds" -max_len=65536 -timeout=10 -rss_limit_mb=2048 \
    -artifact_prefix="$build/fuzz-artifacts/$t-" -print_final_stats=1 \
    >"$build/fuzz-logs/$t.log" 2>&1
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
      if ! wait "${pids[$i]}"; then status=1; echo "FAILED: ${names[$i]} (see $build/fuzz-logs/${names[$i]}.log)"; fi
    done
    pids=()
    names=()
  fi
done
for i in "${!pids[@]}"; do
  if ! wait "${pids[$i]}"; then status=1; echo "FAILED: ${names[$i]} (see $build/fuzz-logs/${names[$i]}.log)"; fi
done

for t in "${targets[@]}"; do
  runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$build/fuzz-logs/$t.log" | grep -o '[0-9]*$' || echo "?")
  echo "$t: $runs executions in ${seconds}s"
done
exit $status
