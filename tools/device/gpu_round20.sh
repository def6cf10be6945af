#!/usr/bin/env bash
# GPU machine, round 20: round 19's `--pipeline-depth 0` bench stopped with
# "kv cache: append: k/v must be at least 2-byte aligned" (an odd address:
# a damaged or dangling tensor on the host). Repeat it (the message now
# names the tensors), without graphs, and under AddressSanitizer.
set -uo pipefail
ROUND=r20
source tools/device/round_lib.sh
round_begin
round_deps
round_build lingbot-map
bench sync --frames 200 --pipeline-depth 0; keep
bench sync_b --frames 60 --pipeline-depth 0; keep
(export LINGBOT_CUDA_GRAPHS=0; bench sync_nographs --frames 60 --pipeline-depth 0); keep
log "AddressSanitizer build"
cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DLINGBOT_CUDA=ON -DLINGBOT_SANITIZE=ON \
  -DCMAKE_CUDA_ARCHITECTURES=90a -DCMAKE_PREFIX_PATH=/tmp/deps/usr > $R/cmake_asan.log 2>&1 && \
  timeout 150 ninja -C build-asan lingbot-map > $R/build_asan.log 2>&1
echo "build rc=$?" | tee -a $S; grep -m5 error $R/build_asan.log | tee -a $S; keep
ASAN_OPTIONS=protect_shadow_gap=0:detect_leaks=0 timeout 120 build-asan/bin/lingbot-map bench --device cuda \
  --height 378 --width 504 --frames 40 --pipeline-depth 0 > $R/asan.txt 2>&1
echo "asan rc=$?" | tee -a $S; grep -E -m40 "ERROR|SUMMARY|#[0-9]+ |error|steady" $R/asan.txt | cut -c1-200 | tee -a $S
log done
