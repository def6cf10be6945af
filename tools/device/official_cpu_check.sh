#!/usr/bin/env bash
# The CPU path on the GPU machine's CPU, from the repository root: the
# official architecture (random weights, written by torch.save) against
# upstream PyTorch on the same weights and frames, for parity and for speed;
# the small config's speed; and the torch.save fixtures of the checkpoint
# reader (tools/reference/make_checkpoint_fixtures.py). Carry .upstream and
# .deps (tools/device/README.md). Results: $OUT/summary.txt,
# $OUT/logs.tar.gz, $OUT/checkpoint_fixtures.tar.
#
#   bash tools/device/official_cpu_check.sh        THREADS=N (default 16) for both sides
#
# Matrix products go through oneDNN, which picks its kernels from the CPU's
# features; the bench header names them (Debian's OpenBLAS 0.3.21, used
# before, fell back to SSE3 kernels on this Xeon: docs/PERF.md). The speed
# comparison proper is tools/device/cpu_bench.sh.
set -uo pipefail
source tools/device/device_lib.sh
device_begin official_cpu_check
T=${THREADS:-16}

log "official architecture on the CPU, $T threads"
environment
deps
log "build (CPU only)"
configure . /tmp/build-cpu "$W/cmake.log" -DLINGBOT_CUDA=OFF -DLINGBOT_TESTS=OFF -DLINGBOT_BENCH=OFF ||
  { tail -30 "$W/cmake.log" | tee -a "$S"; exit 1; }
build /tmp/build-cpu "$W/build.log" lingbot-map || exit 1
CLI=/tmp/build-cpu/bin/lingbot-map

log "torch.save fixtures for the checkpoint reader"
python3 tools/reference/make_checkpoint_fixtures.py /tmp/ckfix > "$W/checkpoint_fixtures.log" 2>&1 &&
  tar -C /tmp -cf "$OUT/checkpoint_fixtures.tar" ckfix
note "rc=$?"

log "upstream: official architecture, random weights: checkpoint, frames, fp32 reference"
reference_start
reference_wait
keep

log "lingbot-map inspect (the official-size torch.save file)"
/usr/bin/time -v "$CLI" inspect /tmp/official.pt > "$W/inspect.txt" 2>&1
grep -E "checkpoint,|model parameters|matches|does not fit|loaded in|Maximum resident|Elapsed" "$W/inspect.txt" | tee -a "$S"

log "lingbot-map run on the CPU ($T threads), then parity with upstream"
/usr/bin/time -v "$CLI" run --model /tmp/official.pt --images /tmp/frames --image-size 504 \
  --device cpu --threads "$T" --out /tmp/ours_cpu > "$W/run.txt" 2>&1
grep -E "frames|Maximum resident|error" "$W/run.txt" | tee -a "$S"
python3 tools/reference/compare_outputs.py /tmp/ours_cpu/predictions.npz /tmp/ref.npz 2>&1 | tee -a "$S"
keep

log "CPU speed, official architecture, 378 x 504, 11 frames, $T threads: upstream, then ours"
python3 tools/reference/official_reference.py --images .upstream/data/courthouse --frames 11 \
  --load-checkpoint /tmp/official.pt --cpu-timing "$W/upstream_official.json" --cpu-threads "$T" 2>&1 |
  grep "upstream cpu" | tee -a "$S"
"$CLI" bench --device cpu --threads "$T" --frames 11 --height 378 --width 504 \
  > "$W/bench_official.txt" 2>&1
grep -E "bench: |phase 1|steady-state|peak RSS" "$W/bench_official.txt" | tee -a "$S"
keep

log "CPU speed, small config, 126 x 70, 14 frames, $T threads: upstream, then ours"
small=tests/fixtures/model_small
python3 tools/reference/official_reference.py --config "$small/config.json" --load-checkpoint "$small/weights.pt" \
  --images .upstream/data/courthouse --frames 14 --height 70 --width 126 --num-scale 3 \
  --cpu-timing "$W/upstream_small.json" --cpu-threads "$T" 2>&1 | grep "upstream cpu" | tee -a "$S"
"$CLI" bench --config "$small/config.json" --device cpu --threads "$T" --frames 14 --height 70 --width 126 \
  > "$W/bench_small.txt" 2>&1
grep -E "phase 1|steady-state|peak RSS" "$W/bench_small.txt" | tee -a "$S"
log "done"
