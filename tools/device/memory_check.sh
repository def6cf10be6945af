#!/usr/bin/env bash
# The GPU machine's check of device memory, the low-memory profile and the
# sm_80 path (issue #20 items 2 and 4), from the repository root: build
# (sm_90a and sm_80, so the compute_80 PTX check has something to check),
# the tests of this work, then
#   1. bench 378 x 504, window 64, default profile: FPS, cudaMemGetInfo and
#      the allocator's account (bench prints both);
#   2. bench 518 x 378 with --memory-profile low (window 32): the same;
#   3. parity of the low profile against the default one on the official
#      architecture's 11 reference frames (same window: the profile's
#      mechanism must not change results), and of each against upstream fp32;
#   4. the forced sm_80 path (--attention-kernel mma: no wgmma, no TMA):
#      bench FPS at 378 x 504, parity against upstream, and Nsight Compute's
#      word that no wgmma-ws kernel ran (the default run as the control).
# Results: $OUT/summary.txt and $OUT/logs.tar.gz. About 4 minutes; parity
# needs .upstream/ (carried), as gpu_check.sh's does.
#
# Usage: bash tools/device/memory_check.sh [--no-build] [--frames N (200)]
set -uo pipefail

BUILD=1 FRAMES=200
while [ $# -gt 0 ]; do
  case $1 in
    --no-build) BUILD=0 ;;
    --frames) FRAMES=$2; shift ;;
    -h|--help) sed -n '2,/^set -uo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "memory_check.sh: unknown option $1" >&2; exit 1 ;;
  esac
  shift
done

source tools/device/device_lib.sh
device_begin memory_check
export CUDA_ARCHS='90a;80'
B=$PWD/build-memory
export BENCH_TIMEOUT=$((90 + FRAMES / 4))
have_upstream=0
[ -f .upstream/gct_profile.py ] && [ -d .upstream/data/courthouse ] && have_upstream=1

log "memory_check ($FRAMES frames per bench)"
environment
deps
[ "$have_upstream" = 1 ] && reference_start
if [ "$BUILD" = 1 ]; then
  log "configure and build ($B, sm_$CUDA_ARCHS)"
  configure . "$B" "$W/cmake.log" || { tail -20 "$W/cmake.log" | tee -a "$S"; exit 1; }
  start=$(date +%s)
  build "$B" "$W/build.log" lingbot-map "$(target_matching "$B" cuda_tests)" || exit 1
  note "built in $(( $(date +%s) - start )) s"
  keep
fi

log "tests: PTX for newer GPUs, capability rule, allocator account, low-memory parity"
mapfile -t cuda_objects < <(find "$B" -path '*lingbot_backend_cuda.dir*' -name '*.cu.o' | sort)
timeout 60 python3 tests/tools/check_cuda_ptx.py --arch 80 "${cuda_objects[@]}" 2>&1 | tee -a "$S"
timeout 200 "$B/bin/backend_cuda_tests" \
  --gtest_filter='CudaDeviceCapability*:CudaDeviceMemoryAccount*:CudaLowMemory*' > "$W/tests.log" 2>&1
note "rc=$?"
grep -E "FAILED|PASSED|Failure|SKIPPED|low vs default" "$W/tests.log" | head -20 | cut -c1-200 | tee -a "$S"
keep
reference_wait

# bench prints "device memory: ..." and the account's lines after it.
account_of() { sed -n '/^device memory:/,/of the tensors/p' "$W/bench_$1.txt" | cut -c1-200 | tee -a "$S"; }
log "bench 378 x 504, window 64, default profile"
bench_in "$B" default --frames "$FRAMES" --height 378 --width 504 --kv-window 64
account_of default
log "bench 518 x 378, --memory-profile low (window 32)"
bench_in "$B" low --frames "$FRAMES" --height 378 --width 518 --memory-profile low
account_of low
log "bench 378 x 504, window 64, forced sm_80 path (--attention-kernel mma)"
bench_in "$B" sm80 --frames "$FRAMES" --height 378 --width 504 --kv-window 64 --attention-kernel mma
account_of sm80
# Which attention kernels ran: Nsight Compute profiles the first launch of a
# wgmma-ws kernel if there is one (graph nodes included), so the forced run
# must show none and the default run (the control) one.
if command -v ncu > /dev/null; then
  for v in "auto=" "sm80=--attention-kernel mma"; do
    name=${v%%=*}
    # shellcheck disable=SC2086  # the variant's arguments split on spaces on purpose
    timeout 150 ncu --kernel-name regex:attention_wgmma_ws --launch-count 1 "$B/bin/lingbot-map" bench \
      --device cuda --frames 12 --height 378 --width 504 ${v#*=} > "$W/ncu_$name.txt" 2>&1
    rc=$?
    note "$name: $(grep -c '==PROF== Profiling "attention_wgmma_ws' "$W/ncu_$name.txt") wgmma-ws launch profiled" \
      "(ncu rc=$rc; expected 1 for auto, 0 for sm80)"
  done
else
  note "no ncu: the kernels of the forced sm_80 run are not checked"
fi
keep

if [ "$have_upstream" = 1 ]; then
  parity_run() {  # name, more run arguments
    local name=$1
    shift
    timeout 120 "$B/bin/lingbot-map" run --model /tmp/official.pt --images /tmp/frames --image-size 504 \
      --device cuda --out "/tmp/ours_$name" "$@" > "$W/parity_$name.log" 2>&1
    note "-- run $name $* rc=$?: $(tail -1 "$W/parity_$name.log" | cut -c1-160)"
  }
  log "parity on the 11 official-size reference frames (window 32 in the three runs)"
  parity_run default --kv-window 32
  parity_run low --memory-profile low
  parity_run sm80 --kv-window 32 --attention-kernel mma
  note "low profile against the default profile (same window):"
  python3 tools/reference/compare_outputs.py /tmp/ours_low/predictions.npz /tmp/ours_default/predictions.npz 2>&1 |
    tee -a "$S"
  for name in default low sm80; do
    note "$name against upstream fp32:"
    python3 tools/reference/compare_outputs.py "/tmp/ours_$name/predictions.npz" /tmp/ref.npz 2>&1 | tee -a "$S"
  done
  keep
else
  note "no .upstream/ (gct_profile.py, data/courthouse): parity skipped"
fi
log "done"
