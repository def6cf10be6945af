#!/usr/bin/env bash
# Measured commit 103cef5 (cuBLASLt autotuning), reverted in 3d37f5f: no gain
# (docs/PERF.md). Kept as the record of how those figures were made.
# GPU machine, round 7: cuBLASLt algorithms chosen by timing. Linear, graph
# and model tests; GEMM benchmarks; end-to-end (pipelined and synchronous)
# with upstream's gct_profile in the same call; official-architecture parity.
set -uo pipefail
REAL_OUT=$OUT
R=/tmp/r7; rm -rf $R; mkdir -p $R
S=$R/summary.txt
log() { echo "== $* ($(date +%T))" | tee -a $S; }
export PYTHONPATH=$PWD/.upstream:$PWD/tools/reference PYTHONUNBUFFERED=1
python3 tools/reference/official_reference.py --images .upstream/data/courthouse --frames 11 \
  --save-checkpoint /tmp/official.pt --frames-out /tmp/frames --reference-out /tmp/ref.npz > $R/upstream_ref.log 2>&1 &
REF=$!
mkdir -p /tmp/deps && for f in .deps/debs/*.deb; do dpkg -x "$f" /tmp/deps; done
export LD_LIBRARY_PATH=/tmp/deps/usr/lib/x86_64-linux-gnu:/tmp/deps/usr/lib/x86_64-linux-gnu/openblas-openmp
B=$PWD/build-device
trap 'tar -C /tmp -cf $REAL_OUT/round7.tar r7; cat $S' EXIT
log build
cmake -S . -B $B -G Ninja -DCMAKE_BUILD_TYPE=Release -DLINGBOT_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90a \
  -DCMAKE_PREFIX_PATH=/tmp/deps/usr > $R/cmake.log 2>&1 && ninja -C $B lingbot-map cuda_tests cuda_ops_bench > $R/build.log 2>&1 || \
  { grep -E "error" $R/build.log | head; exit 1; }
log "cuda tests (linear, graph, model)"
timeout 120 $B/bin/cuda_tests --gtest_filter='*Linear*:*Graph*:*CudaBackendModel*:*Memory*' > $R/cuda_tests.log 2>&1; echo "rc=$?" | tee -a $S
grep -E "FAILED|PASSED|tests ran" $R/cuda_tests.log | head -20 | tee -a $S
grep -E "vs upstream" $R/cuda_tests.log | sort -k6 -g | tail -4 | cut -c1-160 | tee -a $S
wait $REF  # the GPU is ours alone from here on
log "gemm"
timeout 60 $B/bin/cuda_ops_bench --benchmark_filter='Linear' > $R/ops_bench.txt 2>&1
grep -E "^BM_" $R/ops_bench.txt | cut -c1-130 | tee -a $S
bench() {  # name, args...
  local name=$1; shift
  timeout 100 $B/bin/lingbot-map bench --device cuda --height 378 --width 504 "$@" > $R/bench_$name.txt 2>&1
  echo "-- $name: $*" | tee -a $S; tail -3 $R/bench_$name.txt | cut -c1-220 | tee -a $S
}
log "end to end"
bench full --frames 200 --json $R/ours.json
bench sync --frames 200 --pipeline-depth 0
log "upstream gct_profile (same call)"
timeout 150 python3 tools/reference/upstream_gpu_profile.py --num_frames 200 > $R/upstream_profile.log 2>&1
tail -16 $R/upstream_profile.log | tee -a $S
log "official parity"
timeout 60 $B/bin/lingbot-map run --model /tmp/official.pt --images /tmp/frames --image-size 504 --device cuda \
  --out /tmp/ours_gpu > $R/ours_run.log 2>&1; tail -1 $R/ours_run.log | cut -c1-200 | tee -a $S
python3 tools/reference/compare_outputs.py /tmp/ours_gpu/predictions.npz /tmp/ref.npz 2>&1 | tee -a $S
log done
