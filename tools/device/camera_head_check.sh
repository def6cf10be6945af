#!/usr/bin/env bash
# The camera head's bf16 weights and the page pool's one-page growth on the
# GPU machine (issue 20, memory for 8 GB cards): builds the CLI and the CUDA
# tests (sm_90a), runs the tests of this work, then bench's device-memory
# account for fp8 KV at 378 x 504 window 64 (the default profile, and the
# low profile at window 64), the low profile at 518 x 378, and bf16 KV at
# 378 x 504 as the speed control; then the official-size quality of the
# low profile's camera head (bf16 weights, fp8 KV) against upstream fp32 on
# the courthouse frames. From the repository root, carrying .deps and
# .upstream. Results: $OUT/summary.txt, $OUT/logs.tar.gz. About 5 minutes.
set -uo pipefail
source tools/device/device_lib.sh
device_begin camera_head_check
environment
deps
reference_start
B=/tmp/build-camera
log "configure and build ($B, sm_90a)"
configure . "$B" "$W/cmake.log" -DLINGBOT_BENCH=OFF || { tail -20 "$W/cmake.log" | tee -a "$S"; exit 1; }
build "$B" "$W/build.log" lingbot-map "$(target_matching "$B" cuda_tests)" || exit 1
log "tests"
timeout 300 "$B/bin/backend_cuda_tests" \
  --gtest_filter='*bf16_weights*:*resize_bilinear*:CudaBackendModel*:CudaLowMemory*:CudaKvCache*:*Fp8*:CudaDeviceMemoryAccount*' \
  > "$W/tests.log" 2>&1
note "rc=$?"
grep -E "^\[  PASSED|^\[  FAILED|Failure" "$W/tests.log" | head -30 | cut -c1-220 | tee -a "$S"
keep
account() {
  local name=$1
  shift
  bench_in "$B" "$name" "$@"
  sed -n '/^device memory/,$p' "$W/bench_$name.txt" | head -14 | cut -c1-200 | tee -a "$S"
}
export BENCH_TIMEOUT=150
account fp8_w64 --frames 100 --height 378 --width 504 --kv-window 64 --kv-dtype fp8
account low_w64 --frames 100 --height 378 --width 504 --memory-profile low --kv-window 64
account low --frames 80 --height 378 --width 518 --memory-profile low
account bf16 --frames 100 --height 378 --width 504
keep
reference_wait
# parity NAME [RUN ARGS]: our outputs on upstream's checkpoint and frames
# against upstream fp32 (compare_outputs.py: relative error per tensor).
parity() {
  local name=$1
  shift
  timeout 120 "$B/bin/lingbot-map" run --model /tmp/official.pt --images /tmp/frames --image-size 504 \
    --device cuda --out "/tmp/ours_$name" "$@" > "$W/parity_$name.log" 2>&1
  note "-- parity $name: $* (rc=$?)"
  python3 tools/reference/compare_outputs.py "/tmp/ours_$name/predictions.npz" /tmp/ref.npz 2>&1 | tee -a "$S"
}
parity default
parity low --memory-profile low
keep
