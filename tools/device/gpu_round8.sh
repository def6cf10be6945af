#!/usr/bin/env bash
# Measured commit dbe994b (lazy rescaling in the wgmma kernel), reverted in
# 2af0433: no gain (docs/PERF.md). Kept as the record of those figures.
# GPU machine, round 8 (short; the session's last device minutes): lazy
# rescaling in the wgmma attention kernel. Attention and model tests, the
# full-window kernel bench, end-to-end FPS, then upstream's gct_profile in the
# same call. The summary is written straight to $OUT so that it survives a
# timeout.
set -uo pipefail
S=$OUT/summary.txt
log() { echo "== $* ($(date +%T))" | tee -a $S; }
export PYTHONPATH=$PWD/.upstream:$PWD/tools/reference PYTHONUNBUFFERED=1
mkdir -p /tmp/deps && for f in .deps/debs/*.deb; do dpkg -x "$f" /tmp/deps; done
export LD_LIBRARY_PATH=/tmp/deps/usr/lib/x86_64-linux-gnu:/tmp/deps/usr/lib/x86_64-linux-gnu/openblas-openmp
B=$PWD/build-device
log build
cmake -S . -B $B -G Ninja -DCMAKE_BUILD_TYPE=Release -DLINGBOT_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90a \
  -DCMAKE_PREFIX_PATH=/tmp/deps/usr > /tmp/cmake.log 2>&1 && \
  ninja -C $B lingbot-map cuda_tests attention_cuda_bench > /tmp/build.log 2>&1 || { grep -E "error" /tmp/build.log | head | tee -a $S; exit 1; }
log "attention + model tests"
timeout 80 $B/bin/cuda_tests --gtest_filter='CudaAttention*:*CudaBackendModel*' > $OUT/cuda_tests.log 2>&1; echo "rc=$?" | tee -a $S
grep -E "FAILED|PASSED|tests ran" $OUT/cuda_tests.log | head -12 | tee -a $S
grep -E "vs upstream" $OUT/cuda_tests.log | sort -k6 -g | tail -3 | cut -c1-150 | tee -a $S
log "kernel"
timeout 30 $B/bin/attention_cuda_bench --benchmark_filter='PagedFullWindow/kernel:2/splits:0|Dense/groups:1/n:7824/kernel:2' 2>&1 | grep -E "^BM_" | cut -c1-150 | tee -a $S
log "end to end"
timeout 40 $B/bin/lingbot-map bench --device cuda --height 378 --width 504 --frames 200 --json $OUT/ours.json 2>&1 | tail -3 | cut -c1-260 | tee -a $S
log "upstream gct_profile (same call)"
timeout 80 python3 tools/reference/upstream_gpu_profile.py --num_frames 200 > $OUT/upstream_profile.log 2>&1
tail -16 $OUT/upstream_profile.log | tee -a $S
log done
