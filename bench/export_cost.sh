#!/usr/bin/env bash
# Export cost per frame, per format (issue #17): `lingbot-map export` timed
# (wall clock, best of 3) on
#   1. the courthouse frames reconstructed by the small fixture model at the
#      default size (518 x 294 frames, 14 frames), and
#   2. synthetic predictions of the official size (378 x 504 frames,
#      FRAMES of them, default 40; random depth / points / colours, confidence
#      such that about half the points pass the default threshold).
# Prints a Markdown table: format, ms per frame for each input.
# Then the cost of streaming export (`run --export F`, written as frames
# stream): the courthouse run timed with and without --export F (wall clock,
# best of RUNS, default 2), the difference per frame, and the time the
# streaming exporter itself reports per frame (its own work, which the load
# of a shared machine disturbs less than a difference of two wall times).
#   bench/export_cost.sh BUILD_DIR [FRAMES [RUNS]]
set -euo pipefail
build=${1:?usage: export_cost.sh BUILD_DIR [FRAMES]}
frames=${2:-40}
runs=${3:-2}
cli="$build/bin/lingbot-map"
root=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
m="$root/tests/fixtures/model_small"
"$cli" -q run --model "$m/weights.pt" --config "$m/config.json" --images "$root/tests/fixtures/courthouse" \
  --threads 2 --out "$work/courthouse"
/usr/bin/python3 - "$work/official" "$frames" <<'PY'
import os, sys
import numpy as np
out, S = sys.argv[1], int(sys.argv[2])
H, W = 378, 504
os.makedirs(out, exist_ok=True)
rng = np.random.default_rng(0)
depth = rng.uniform(0.5, 5.0, (S, H, W, 1)).astype(np.float32)
fx = np.float32(400.0)
K = np.tile(np.array([[fx, 0, W / 2], [0, fx, H / 2], [0, 0, 1]], np.float32), (S, 1, 1))
ext = np.zeros((S, 3, 4), np.float32)
ext[:, :3, :3] = np.eye(3, dtype=np.float32)
ext[:, 0, 3] = np.arange(S, dtype=np.float32) * 0.1
ys, xs = np.mgrid[0:H, 0:W].astype(np.float32)
z = depth[..., 0]
pts = np.stack([(xs - W / 2) / fx * z, (ys - H / 2) / fx * z, z], -1) + ext[:, None, None, :, 3]
np.savez(os.path.join(out, "predictions.npz"), pose_enc=np.zeros((S, 9), np.float32), depth=depth,
         depth_conf=rng.uniform(1.0, 2.0, (S, H, W)).astype(np.float32), world_points=pts.astype(np.float32),
         extrinsic=ext, intrinsic=K, images=rng.uniform(0, 1, (S, 3, H, W)).astype(np.float32))
PY
ms_per_frame() {  # RESULT FORMAT -> best of 3, ms per frame
  local best=""
  for _ in 1 2 3; do
    rm -rf "$work/export"
    line=$("$cli" export "$1" --format "$2" --out "$work/export" 2>&1 | grep -o '([0-9.]* ms per frame)' | tr -d '(')
    v=${line%% ms*}
    if [[ -z "$best" ]] || awk "BEGIN{exit !($v < $best)}"; then best=$v; fi
  done
  echo "$best"
}
echo "| format | courthouse, small model (518 x 294, 14 frames) | official size (378 x 504, $frames synthetic frames) |"
echo "| --- | --- | --- |"
for f in colmap nerfstudio glb depth ply; do
  echo "| $f | $(ms_per_frame "$work/courthouse" $f) ms | $(ms_per_frame "$work/official" $f) ms |"
done

# Streaming: run with and without --export. Wall time and CPU time (user +
# system) of the whole process, each the best of RUNS; on a shared machine
# the CPU time is the steadier of the two.
run_courthouse() {  # EXTRA_ARGS... -> "WALL_S CPU_S EXPORTER_MS_PER_FRAME", each the best of RUNS
  local best_wall="" best_cpu="" best_own=""
  for _ in $(seq "$runs"); do
    rm -rf "$work/stream"
    local times log wall cpu own
    log=$( { TIMEFORMAT='%R %U %S'; time "$cli" run --model "$m/weights.pt" --config "$m/config.json" \
      --images "$root/tests/fixtures/courthouse" --threads 2 --out "$work/stream" "$@" 2>&1; } 2>&1)
    times=$(tail -n 1 <<<"$log")
    wall=$(cut -d' ' -f1 <<<"$times")
    cpu=$(awk '{print $2 + $3}' <<<"$times")
    own=$(grep -o '[0-9.]* ms per frame spent exporting' <<<"$log" | cut -d' ' -f1 || true)
    if [[ -z "$best_wall" ]] || awk "BEGIN{exit !($wall < $best_wall)}"; then best_wall=$wall; fi
    if [[ -z "$best_cpu" ]] || awk "BEGIN{exit !($cpu < $best_cpu)}"; then best_cpu=$cpu; fi
    if [[ -n "$own" ]] && { [[ -z "$best_own" ]] || awk "BEGIN{exit !($own < $best_own)}"; }; then best_own=$own; fi
  done
  echo "$best_wall $best_cpu ${best_own:--}"
}
n_frames=$(ls "$root/tests/fixtures/courthouse" | grep -c -i -E '\.(png|jpe?g)$')
read -r base_wall base_cpu _ < <(run_courthouse)
per_frame() { awk "BEGIN{printf \"%.1f\", 1000 * ($1) / $n_frames}"; }
echo
echo "Streaming export (run --export F), courthouse, small model (518 x 294, $n_frames frames), best of $runs;"
echo "run alone: $(per_frame "$base_wall") ms wall, $(per_frame "$base_cpu") ms CPU per frame"
echo
echo "| run --export | wall time added per frame | CPU time added per frame | exporter's own time per frame |"
echo "| --- | --- | --- | --- |"
for f in colmap nerfstudio glb depth ply colmap,nerfstudio,glb,depth; do
  read -r wall cpu own < <(run_courthouse --export "$f")
  echo "| $f | $(per_frame "$wall - $base_wall") ms | $(per_frame "$cpu - $base_cpu") ms | $own ms |"
done
