#!/usr/bin/env bash
# GPU machine, round 3 (short): the float32 residual stream and the wgmma
# attention default. bf16 tests, official-architecture parity, 200-frame FPS.
set -uo pipefail
REAL_OUT=$OUT
R=/tmp/r3; rm -rf $R; mkdir -p $R
S=$R/summary.txt
log() { echo "== $* ($(date +%T))" | tee -a $S; }
export PYTHONPATH=$PWD/.upstream:$PWD/tools/reference PYTHONUNBUFFERED=1
python3 tools/reference/official_reference.py --images .upstream/data/courthouse --frames 11 \
  --save-checkpoint /tmp/official.pt --frames-out /tmp/frames --reference-out /tmp/ref.npz > $R/upstream_ref.log 2>&1 &
REF=$!
mkdir -p /tmp/deps && for f in .deps/debs/*.deb; do dpkg -x "$f" /tmp/deps; done
export LD_LIBRARY_PATH=/tmp/deps/usr/lib/x86_64-linux-gnu:/tmp/deps/usr/lib/x86_64-linux-gnu/openblas-openmp
B=$PWD/build-device
trap 'tar -C /tmp -cf $REAL_OUT/round3.tar r3; cat $S' EXIT
log build
cmake -S . -B $B -G Ninja -DCMAKE_BUILD_TYPE=Release -DLINGBOT_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90a \
  -DCMAKE_PREFIX_PATH=/tmp/deps/usr > $R/cmake.log 2>&1 && ninja -C $B lingbot-map cuda_tests > $R/build.log 2>&1 || \
  { grep -E "error" $R/build.log | head; exit 1; }
log "bf16 model tests"
timeout 60 $B/bin/cuda_tests --gtest_filter='*CudaBackendModel*:CudaAttentionPaged.FullWindow' > $R/model_tests.log 2>&1
grep -E "OK \]|FAILED \]|error|bar|relative" $R/model_tests.log | cut -c1-200 | head -60 | tee -a $S
log "FPS: ours, 200 frames"
timeout 90 $B/bin/lingbot-map bench --device cuda --frames 200 --height 378 --width 504 > $R/ours_bench.txt 2>&1
tail -4 $R/ours_bench.txt | cut -c1-400 | tee -a $S
log "official parity"
wait $REF
timeout 60 $B/bin/lingbot-map run --model /tmp/official.pt --images /tmp/frames --image-size 504 --device cuda \
  --out /tmp/ours_gpu > $R/ours_run.log 2>&1; tail -1 $R/ours_run.log | cut -c1-200 | tee -a $S
python3 tools/reference/compare_outputs.py /tmp/ours_gpu/predictions.npz /tmp/ref.npz 2>&1 | tee -a $S
log done
