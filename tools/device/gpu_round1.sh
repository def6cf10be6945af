#!/usr/bin/env bash
# GPU machine, first round: build with CUDA, the CUDA tests, kernel
# benchmarks, and a first end-to-end timing of ours. Everything lands in
# $OUT/round1.tar (plus the summary printed at the end).
set -uo pipefail
REAL_OUT=$OUT
export OUT=/tmp/r1
rm -rf $OUT && mkdir -p $OUT
B=$PWD/build-device
BUILD_DIR=$B timeout 420 bash tools/device/cuda_checks.sh > $OUT/cuda_checks.txt 2>&1
export LD_LIBRARY_PATH=/tmp/deps/usr/lib/x86_64-linux-gnu:/tmp/deps/usr/lib/x86_64-linux-gnu/openblas-openmp:${LD_LIBRARY_PATH:-}
ninja -C $B lingbot-map cuda_ops_bench > $OUT/build2.log 2>&1 || grep -E "error" $OUT/build2.log | head -20
timeout 60 $B/bin/cuda_ops_bench --benchmark_min_time=0.05 > $OUT/ops_bench.txt 2>&1
timeout 120 $B/bin/lingbot-map bench --device cuda --frames 40 --height 378 --width 504 > $OUT/ours_bench.txt 2>&1
timeout 120 $B/bin/lingbot-map bench --device cuda --frames 16 --height 378 --width 504 --profile > $OUT/ours_profile.txt 2>&1
tar -C /tmp -cf $REAL_OUT/round1.tar r1
cat $OUT/summary.txt
echo "---- ours"; tail -4 $OUT/ours_bench.txt; tail -30 $OUT/ours_profile.txt
