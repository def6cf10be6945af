#!/usr/bin/env bash
# GPU machine, round 5: the overlapped wgmma attention kernel, pipelined
# read-back, per-frame DPT; all CUDA tests; kernel and end-to-end benchmarks
# with upstream's gct_profile in the same call; official-architecture parity.
set -uo pipefail
REAL_OUT=$OUT
R=/tmp/r5; rm -rf $R; mkdir -p $R
S=$R/summary.txt
log() { echo "== $* ($(date +%T))" | tee -a $S; }
export PYTHONPATH=$PWD/.upstream:$PWD/tools/reference PYTHONUNBUFFERED=1
python3 tools/reference/official_reference.py --images .upstream/data/courthouse --frames 11 \
  --save-checkpoint /tmp/official.pt --frames-out /tmp/frames --reference-out /tmp/ref.npz > $R/upstream_ref.log 2>&1 &
REF=$!
mkdir -p /tmp/deps && for f in .deps/debs/*.deb; do dpkg -x "$f" /tmp/deps; done
export LD_LIBRARY_PATH=/tmp/deps/usr/lib/x86_64-linux-gnu:/tmp/deps/usr/lib/x86_64-linux-gnu/openblas-openmp
B=$PWD/build-device
trap 'tar -C /tmp -cf $REAL_OUT/round5.tar r5; cat $S' EXIT
log build
cmake -S . -B $B -G Ninja -DCMAKE_BUILD_TYPE=Release -DLINGBOT_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90a \
  -DCMAKE_PREFIX_PATH=/tmp/deps/usr > $R/cmake.log 2>&1 && ninja -C $B lingbot-map cuda_tests attention_cuda_bench > $R/build.log 2>&1 || \
  { grep -E "error" $R/build.log | head; exit 1; }
log "cuda tests"
timeout 200 $B/bin/cuda_tests > $R/cuda_tests.log 2>&1; echo "rc=$?" | tee -a $S
grep -E "FAILED|PASSED|tests ran|AggregatorLayout" $R/cuda_tests.log | head -20 | tee -a $S
grep -E "relative|bar" $R/cuda_tests.log | cut -c1-200 | head -30 >> $S
wait $REF  # the GPU is ours alone from here on
log "attention kernels"
timeout 60 $B/bin/attention_cuda_bench --benchmark_filter='PagedFullWindow/kernel:[02]/splits:0|Dense' > $R/attn_bench.txt 2>&1
grep -E "^BM_" $R/attn_bench.txt | cut -c1-150 | tee -a $S
bench() {  # name, args...
  local name=$1; shift
  timeout 100 $B/bin/lingbot-map bench --device cuda --height 378 --width 504 "$@" > $R/bench_$name.txt 2>&1
  echo "-- $name: $*" | tee -a $S; tail -3 $R/bench_$name.txt | cut -c1-220 | tee -a $S
}
log "end to end"
bench full --frames 200 --json $R/ours.json
bench sync --frames 200 --pipeline-depth 0
bench nodense --frames 200 --no-dense
log "upstream gct_profile (same call)"
timeout 150 python3 tools/reference/upstream_gpu_profile.py --num_frames 200 > $R/upstream_profile.log 2>&1
tail -25 $R/upstream_profile.log | tee -a $S
log "official parity"
timeout 60 $B/bin/lingbot-map run --model /tmp/official.pt --images /tmp/frames --image-size 504 --device cuda \
  --out /tmp/ours_gpu > $R/ours_run.log 2>&1; tail -1 $R/ours_run.log | cut -c1-200 | tee -a $S
python3 tools/reference/compare_outputs.py /tmp/ours_gpu/predictions.npz /tmp/ref.npz 2>&1 | tee -a $S
log done
