#!/usr/bin/env bash
# GPU machine, round 6 (final figures of this session): the scale-phase
# buffers freed at the second streaming step; the CUDA KV-cache and model
# tests; end-to-end benchmarks (pipelined, synchronous, synchronous with one
# host thread, no depth head, per-stage profile) with upstream's gct_profile
# in the same call.
set -uo pipefail
REAL_OUT=$OUT
R=/tmp/r6; rm -rf $R; mkdir -p $R
S=$R/summary.txt
log() { echo "== $* ($(date +%T))" | tee -a $S; }
export PYTHONPATH=$PWD/.upstream:$PWD/tools/reference PYTHONUNBUFFERED=1
mkdir -p /tmp/deps && for f in .deps/debs/*.deb; do dpkg -x "$f" /tmp/deps; done
export LD_LIBRARY_PATH=/tmp/deps/usr/lib/x86_64-linux-gnu:/tmp/deps/usr/lib/x86_64-linux-gnu/openblas-openmp
B=$PWD/build-device
trap 'tar -C /tmp -cf $REAL_OUT/round6.tar r6; cat $S' EXIT
log "host: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2)"
log build
cmake -S . -B $B -G Ninja -DCMAKE_BUILD_TYPE=Release -DLINGBOT_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90a \
  -DCMAKE_PREFIX_PATH=/tmp/deps/usr > $R/cmake.log 2>&1 && ninja -C $B lingbot-map cuda_tests > $R/build.log 2>&1 || \
  { grep -E "error" $R/build.log | head; exit 1; }
log "cuda tests (kv cache, model)"
timeout 150 $B/bin/cuda_tests --gtest_filter='CudaKvCache.*:*CudaBackendModel*:*Graph*' > $R/cuda_tests.log 2>&1; echo "rc=$?" | tee -a $S
grep -E "OK \]|FAILED|PASSED|tests ran" $R/cuda_tests.log | head -20 | tee -a $S
bench() {  # name, args...
  local name=$1; shift
  timeout 100 $B/bin/lingbot-map bench --device cuda --height 378 --width 504 "$@" > $R/bench_$name.txt 2>&1
  echo "-- $name: $*" | tee -a $S; tail -3 $R/bench_$name.txt | cut -c1-220 | tee -a $S
}
log "end to end"
bench full --frames 200 --json $R/ours.json
bench sync --frames 200 --pipeline-depth 0
OMP_NUM_THREADS=1 bench sync_omp1 --frames 200 --pipeline-depth 0
bench nodense --frames 200 --no-dense
bench profile --frames 24 --profile --pipeline-depth 0
tail -12 $R/bench_profile.txt >> $S
log "upstream gct_profile (same call)"
timeout 150 python3 tools/reference/upstream_gpu_profile.py --num_frames 200 > $R/upstream_profile.log 2>&1
tail -16 $R/upstream_profile.log | tee -a $S
log "ours again after upstream"
bench full2 --frames 200
log done
