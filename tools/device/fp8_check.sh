#!/usr/bin/env bash
# The fp8 KV cache on the GPU machine (issue #20 items 1 and 5), from the
# repository root, in about 4-6 minutes: build for sm_90a, the CUDA tests of
# the KV caches and the model (fp8 cases included), the paged attention
# kernels alone with the bf16 and the fp8 cache, then `bench` at 378 x 504
# window 64 with --kv-dtype bf16 and fp8 (FPS, device memory in use), the
# low-memory profile at window 64 (378 x 504) and at its own window (518 x
# 378), and the fp8 run once more with the sm_80 attention kernel forced (mma.sync, what
# Ampere and Ada run), and the quality of bf16 and fp8 against upstream fp32
# on the official-size random-weight checkpoint (as gpu_check.sh's parity
# step), with fp8 against bf16. Results: $OUT/summary.txt, $OUT/logs.tar.gz.
#
# Usage: bash tools/device/fp8_check.sh [--no-build] [--no-tests] [--frames N (120)]
#   carry [".upstream", ".deps"] as for gpu_check.sh (tools/device/README.md);
#   without .upstream/ the quality step is skipped.
set -uo pipefail

BUILD=1 TESTS=1 FRAMES=120
while [ $# -gt 0 ]; do
  case $1 in
    --no-build) BUILD=0 ;;
    --no-tests) TESTS=0 ;;
    --frames) FRAMES=$2; shift ;;
    *) echo "fp8_check.sh: unknown option $1" >&2; exit 1 ;;
  esac
  shift
done

source tools/device/device_lib.sh
device_begin fp8_check
export CUDA_ARCHS=90a BENCH_TIMEOUT=$((60 + FRAMES / 2))
B=$PWD/build-device
PARITY=0
[ -f .upstream/gct_profile.py ] && [ -d .upstream/data/courthouse ] && PARITY=1

log "fp8_check ($FRAMES frames of 378 x 504, window 64)"
environment
deps
[ "$PARITY" = 1 ] && reference_start || note "no .upstream/: the quality step is skipped"

if [ "$BUILD" = 1 ]; then
  log "configure and build ($B, sm_$CUDA_ARCHS)"
  configure . "$B" "$W/cmake.log" || { tail -20 "$W/cmake.log" | tee -a "$S"; exit 1; }
  tests_target=$(target_matching "$B" cuda_tests)
  start=$(date +%s)
  build "$B" "$W/build.log" lingbot-map attention_cuda_bench ${tests_target:+"$tests_target"} || exit 1
  note "built in $(( $(date +%s) - start )) s"
  keep
fi

if [ "$TESTS" = 1 ]; then
  log "CUDA tests: KV caches (fp8 included) and the small model with the fp8 cache on the GPU"
  tests_bin=$B/bin/$(target_matching "$B" cuda_tests)
  timeout 300 "$tests_bin" --gtest_filter='*KvCache*:*KvAppend*:*KvFp8*:*CudaBackendModel.Fp8*' > "$W/tests.log" 2>&1
  note "tests rc=$?"
  grep -E "^\[  (PASSED|FAILED) |^\[  FAILED|cuda fp8 kv .*(pose_enc|depth) " "$W/tests.log" | cut -c1-200 | tee -a "$S"
  keep
fi

reference_wait
log "the paged attention alone at full window (bf16 vs fp8: read-back + kernel) and the append"
timeout 150 "$B/bin/attention_cuda_bench" \
  --benchmark_filter='PagedFullWindow/kernel:(0|3)/splits:0/tma:1|PagedFullWindowFp8|KvAppend' > "$W/attention_bench.txt" 2>&1
note "attention_cuda_bench rc=$?"
grep -E "^BM_" "$W/attention_bench.txt" | cut -c1-200 | tee -a "$S"
keep

log "bench: bf16 and fp8 KV cache"
COMMON=(--frames "$FRAMES" --height 378 --width 504 --kv-window 64)
bench_in "$B" kv_bf16 "${COMMON[@]}" --kv-dtype bf16
bench_in "$B" kv_fp8 "${COMMON[@]}" --kv-dtype fp8
# The 8 GB and 6 GB cards' configurations (issue #20 item 2).
bench_in "$B" low_w64 "${COMMON[@]}" --memory-profile low
bench_in "$B" low_518x378 --frames "$FRAMES" --height 378 --width 518 --memory-profile low
# The sm_80 path (mma.sync, no TMA, no wgmma) forced on the H200: Ampere's and Ada's kernel.
export LINGBOT_ATTENTION_KERNEL=mma
bench_in "$B" kv_fp8_mma "${COMMON[@]}" --kv-dtype fp8
bench_in "$B" kv_bf16_mma "${COMMON[@]}" --kv-dtype bf16
unset LINGBOT_ATTENTION_KERNEL
keep

if [ "$PARITY" = 1 ]; then
  log "quality against upstream fp32 (official architecture, random weights, 11 frames)"
  for dtype in bf16 fp8; do
    timeout 120 "$B/bin/lingbot-map" run --model /tmp/official.pt --images /tmp/frames --image-size 504 \
      --device cuda --kv-dtype "$dtype" --out "/tmp/ours_$dtype" > "$W/parity_$dtype.log" 2>&1
    note "-- kv $dtype: run rc=$?; vs upstream fp32:"
    python3 tools/reference/compare_outputs.py "/tmp/ours_$dtype/predictions.npz" /tmp/ref.npz 2>&1 | tee -a "$S"
  done
  note "-- kv fp8 vs kv bf16 (ours):"
  python3 tools/reference/compare_outputs.py /tmp/ours_fp8/predictions.npz /tmp/ours_bf16/predictions.npz 2>&1 |
    tee -a "$S"
  keep
fi
log "done"
