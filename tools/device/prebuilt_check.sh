#!/usr/bin/env bash
# A short GPU check without building on the GPU machine: the CUDA tests and
# `bench` runs of binaries built on the development machine (its build/ with
# CUDA_ARCHITECTURES 90a;80), for a call with little device time left.
#
# Carry: .deps/runtime .deps/ffmpeg.tar.xz build/bin/lingbot-map
#   build/bin/backend_cuda_tests build/lib/liblingbot_cuda.so
# (tools/device/video_fps.sh says how .deps/runtime and the FFmpeg bundle
# are made.)  Usage: bash tools/device/prebuilt_check.sh [GTEST_FILTER]
# Results: $OUT/summary.txt, $OUT/logs.tar.gz.
set -uo pipefail
source tools/device/device_lib.sh
FILTER=${1:-'*Fp8*:CudaDeviceCapability*:CudaDeviceMemoryAccount*:CudaLowMemory*'}
device_begin prebuilt_check
environment
mkdir -p /tmp/deps && for f in .deps/runtime/*.deb; do dpkg -x "$f" /tmp/deps; done
tar -C /tmp -xJf .deps/ffmpeg.tar.xz
export LD_LIBRARY_PATH=/tmp/ffmpeg:/tmp/deps/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
log "CUDA tests: $FILTER"
timeout 120 build/bin/backend_cuda_tests --gtest_filter="$FILTER" > "$W/tests.log" 2>&1
note "rc=$?: $(grep -E '^\[  PASSED  \]|^\[  FAILED  \]' "$W/tests.log" | tr '\n' ' ')"
grep -E "^\[  FAILED  \]|relative|differ|max " "$W/tests.log" | head -30 | tee -a "$S"
keep
B=$PWD/build
export BENCH_TIMEOUT=90
bench_in "$B" kv_bf16 --frames 100 --height 378 --width 504 --kv-window 64 --kv-dtype bf16
bench_in "$B" kv_fp8 --frames 100 --height 378 --width 504 --kv-window 64 --kv-dtype fp8
bench_in "$B" low --frames 100 --height 378 --width 518 --memory-profile low
for n in kv_bf16 kv_fp8 low; do
  note "-- account $n"; grep -iE "account|ledger|kv pages|weights|workspace|outside" "$W/bench_$n.txt" | head -12 | tee -a "$S"
done
