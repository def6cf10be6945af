#!/usr/bin/env bash
# GPU machine, round 4: where the steady-state time goes, by ablation with
# graphs on (no per-stage synchronisation): full model, no depth head, one
# camera iteration, small window; plus the kernel benches and the CUDA tests
# not run since the last refactor.
set -uo pipefail
REAL_OUT=$OUT
R=/tmp/r4; rm -rf $R; mkdir -p $R
S=$R/summary.txt
log() { echo "== $* ($(date +%T))" | tee -a $S; }
mkdir -p /tmp/deps && for f in .deps/debs/*.deb; do dpkg -x "$f" /tmp/deps; done
export LD_LIBRARY_PATH=/tmp/deps/usr/lib/x86_64-linux-gnu:/tmp/deps/usr/lib/x86_64-linux-gnu/openblas-openmp
B=$PWD/build-device
trap 'tar -C /tmp -cf $REAL_OUT/round4.tar r4; cat $S' EXIT
log build
cmake -S . -B $B -G Ninja -DCMAKE_BUILD_TYPE=Release -DLINGBOT_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90a \
  -DCMAKE_PREFIX_PATH=/tmp/deps/usr > $R/cmake.log 2>&1 && ninja -C $B > $R/build.log 2>&1 || \
  { grep -E "error" $R/build.log | head; exit 1; }
bench() {  # name, args...
  local name=$1; shift
  timeout 120 $B/bin/lingbot-map bench --device cuda --height 378 --width 504 "$@" > $R/bench_$name.txt 2>&1
  echo "-- $name: $*" | tee -a $S; tail -3 $R/bench_$name.txt | cut -c1-300 | tee -a $S
}
log "ablations"
bench full --frames 200
bench nodense --frames 200 --no-dense
bench cam1 --frames 200 --camera-iterations 1
bench cam1_nodense --frames 200 --camera-iterations 1 --no-dense
bench w8 --frames 100 --kv-window 8
bench w8_nodense_cam1 --frames 100 --kv-window 8 --no-dense --camera-iterations 1
bench profile --frames 24 --profile
log "kernels"
timeout 120 $B/bin/attention_cuda_bench --benchmark_filter='PagedFullWindow|Dense' > $R/attn_bench.txt 2>&1
grep -E "^BM_" $R/attn_bench.txt | cut -c1-160 | tee -a $S
timeout 120 $B/bin/cuda_ops_bench > $R/ops_bench.txt 2>&1
grep -E "^BM_" $R/ops_bench.txt | cut -c1-160 | tee -a $S
log "cuda tests"
timeout 240 $B/bin/cuda_tests > $R/cuda_tests.log 2>&1; echo "rc=$?" | tee -a $S
grep -E "FAILED|PASSED|tests ran" $R/cuda_tests.log | head -20 | tee -a $S
log done
