#!/usr/bin/env bash
# GPU machine: the official architecture on the CPU path, against upstream.
# Carry: .upstream (upstream package + courthouse frames) and .deps (Debian
# packages the Ubuntu image lacks). Writes $OUT/results.txt and
# $OUT/checkpoint_fixtures.tar.
set -uo pipefail
export PYTHONPATH=$PWD/.upstream:$PWD/tools/reference PYTHONUNBUFFERED=1
R=$OUT/results.txt
log() { echo "== $*" | tee -a $R; }
T=${THREADS:-16}

log "deps + build (CPU only)"
mkdir -p /tmp/deps && for f in .deps/debs/*.deb; do dpkg -x "$f" /tmp/deps; done
cmake -S . -B /tmp/build -G Ninja -DCMAKE_BUILD_TYPE=Release -DLINGBOT_CUDA=OFF -DLINGBOT_TESTS=OFF \
  -DLINGBOT_BENCH=OFF -DCMAKE_PREFIX_PATH=/tmp/deps/usr > /tmp/cmake.log 2>&1 || { tail -30 /tmp/cmake.log | tee -a $R; exit 1; }
ninja -C /tmp/build lingbot-map > /tmp/ninja.log 2>&1 || { tail -40 /tmp/ninja.log | tee -a $R; exit 1; }

log "torch.save fixtures for the checkpoint reader"
python3 tools/reference/make_checkpoint_fixtures.py /tmp/ckfix >> $R 2>&1 && tar -C /tmp -cf $OUT/checkpoint_fixtures.tar ckfix

log "upstream: official architecture, random weights, checkpoint + frames + GPU fp32 reference"
python3 tools/reference/official_reference.py --images .upstream/data/courthouse --frames 11 \
  --save-checkpoint /tmp/official.pt --frames-out /tmp/frames --reference-out /tmp/ref.npz 2>&1 | grep -v Warning | tee -a $R

log "lingbot-map inspect (official-size torch.save file)"
/usr/bin/time -v /tmp/build/bin/lingbot-map inspect /tmp/official.pt > /tmp/inspect.txt 2>&1
grep -E "checkpoint,|model parameters|matches|does not fit|loaded in|Maximum resident|Elapsed" /tmp/inspect.txt | tee -a $R

log "lingbot-map run on the CPU ($T threads), then parity with upstream"
/usr/bin/time -v /tmp/build/bin/lingbot-map run --model /tmp/official.pt --images /tmp/frames --image-size 504 \
  --device cpu --threads $T --out /tmp/ours > /tmp/run.txt 2>&1
grep -E "frames|Maximum resident|error" /tmp/run.txt | tee -a $R
python3 tools/reference/compare_outputs.py /tmp/ours/predictions.npz /tmp/ref.npz 2>&1 | tee -a $R

log "CPU speed, official architecture 378x504, 11 frames, $T threads: upstream, then ours"
python3 tools/reference/official_reference.py --images .upstream/data/courthouse --frames 11 \
  --load-checkpoint /tmp/official.pt --cpu-timing /tmp/up_off.json --cpu-threads $T 2>&1 | grep "upstream cpu" | tee -a $R
/tmp/build/bin/lingbot-map bench --device cpu --threads $T --frames 11 --height 378 --width 504 2>&1 | tee -a $R

log "CPU speed, small config 126x70, 14 frames, $T threads: upstream, then ours"
S=tests/fixtures/model_small
python3 tools/reference/official_reference.py --config $S/config.json --load-checkpoint $S/weights.pt \
  --images .upstream/data/courthouse --frames 14 --height 70 --width 126 --num-scale 3 \
  --cpu-timing /tmp/up_small.json --cpu-threads $T 2>&1 | grep "upstream cpu" | tee -a $R
/tmp/build/bin/lingbot-map bench --config $S/config.json --device cpu --threads $T --frames 14 --height 70 \
  --width 126 2>&1 | tee -a $R
log done
