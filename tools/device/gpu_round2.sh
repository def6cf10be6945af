#!/usr/bin/env bash
# GPU machine, round 2: build, CUDA tests, kernel benchmarks, bf16 parity of
# the official architecture against upstream fp32, and the FPS comparison
# with upstream's gct_profile in the same call. Output: $OUT/round2.tar and
# a summary at the end. Every stage has its own time limit.
set -uo pipefail
REAL_OUT=$OUT
R=/tmp/r2; rm -rf $R; mkdir -p $R
S=$R/summary.txt
log() { echo "== $* ($(date +%T))" | tee -a $S; }
export PYTHONPATH=$PWD/.upstream:$PWD/tools/reference PYTHONUNBUFFERED=1
mkdir -p /tmp/deps && for f in .deps/debs/*.deb; do dpkg -x "$f" /tmp/deps; done
export LD_LIBRARY_PATH=/tmp/deps/usr/lib/x86_64-linux-gnu:/tmp/deps/usr/lib/x86_64-linux-gnu/openblas-openmp
B=$PWD/build-device
finish() { tar -C /tmp -cf $REAL_OUT/round2.tar r2; cat $S; }
trap finish EXIT

log "build"
cmake -S . -B $B -G Ninja -DCMAKE_BUILD_TYPE=Release -DLINGBOT_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90a \
  -DCMAKE_PREFIX_PATH=/tmp/deps/usr > $R/cmake.log 2>&1 || { tail -20 $R/cmake.log | tee -a $S; exit 1; }
ninja -C $B lingbot-map cuda_tests attention_cuda_bench cuda_ops_bench > $R/build.log 2>&1 || \
  { grep -E "error" $R/build.log | head -20 | tee -a $S; exit 1; }

log "upstream: official weights + frames + fp32 reference (background)"
python3 tools/reference/official_reference.py --images .upstream/data/courthouse --frames 11 \
  --save-checkpoint /tmp/official.pt --frames-out /tmp/frames --reference-out /tmp/ref.npz > $R/upstream_ref.log 2>&1 &
REF_PID=$!

log "ctest -L cuda"
timeout 150 ctest --test-dir $B -L cuda --timeout 45 -E "AggregatorLayout" > $R/ctest.log 2>&1
grep -E "tests passed|tests failed|\*\*\*Failed|Timeout" $R/ctest.log | head -20 | tee -a $S
grep -E "relative error|pose|depth" $R/ctest.log | grep -iE "gpu|bf16|upstream" | head -30 >> $S

log "kernel benchmarks"
timeout 60 $B/bin/attention_cuda_bench --benchmark_filter='PagedFullWindow|Dense' --benchmark_repetitions=3 \
  --benchmark_report_aggregates_only=true > $R/attention_bench.txt 2>&1
grep -E "median" $R/attention_bench.txt | cut -c1-160 | tee -a $S
timeout 60 $B/bin/cuda_ops_bench --benchmark_min_time=0.05 > $R/ops_bench.txt 2>&1
grep -E "BM_" $R/ops_bench.txt | cut -c1-150 | tee -a $S

log "bf16 parity, official architecture: ours (cuda) vs upstream fp32"
wait $REF_PID; tail -3 $R/upstream_ref.log | tee -a $S
timeout 120 $B/bin/lingbot-map run --model /tmp/official.pt --images /tmp/frames --image-size 504 --device cuda \
  --out /tmp/ours_gpu > $R/ours_run.log 2>&1; tail -2 $R/ours_run.log | cut -c1-300 | tee -a $S
python3 tools/reference/compare_outputs.py /tmp/ours_gpu/predictions.npz /tmp/ref.npz 2>&1 | tee -a $S

log "FPS: upstream gct_profile (SDPA bf16 eager), 200 frames"
timeout 160 python3 tools/reference/upstream_gpu_profile.py --num_frames 200 > $R/upstream_profile.log 2>&1
grep -E "per frame|Phase 1|frame .*\(|peak GPU|total time" $R/upstream_profile.log | head -20 | tee -a $S

log "FPS: ours, 200 frames"
timeout 120 $B/bin/lingbot-map bench --device cuda --frames 200 --height 378 --width 504 > $R/ours_bench.txt 2>&1 || \
  { tail -3 $R/ours_bench.txt | tee -a $S; log "retry without CUDA graphs";
    LINGBOT_CUDA_GRAPHS=0 timeout 120 $B/bin/lingbot-map bench --device cuda --frames 200 --height 378 --width 504 \
      > $R/ours_bench.txt 2>&1; }
tail -4 $R/ours_bench.txt | cut -c1-400 | tee -a $S
timeout 60 $B/bin/lingbot-map bench --device cuda --frames 24 --height 378 --width 504 --profile > $R/ours_profile.txt 2>&1
tail -28 $R/ours_profile.txt | tee -a $S
log done
