"""Reference data for windowed mode: upstream GCTStream.inference_windowed
(lingbot_map/models/gct_stream_window.py, fixed-interval keyframes), fp32 on
the CPU, on the small fixture model and its frames.

The model is the one make_model_fixtures.py built (upstream_small_model.py's
wiring, the committed weights.pt loaded back); its class is switched to the
windowed module's GCTStream so that upstream's own inference_windowed, window
list, pairwise alignment, warp and stitching run unchanged. Non-keyframes
attend without being stored (the paged path's semantics; see
upstream_small_model._honour_skip_append).

Writes into --out (default: the fixture folder itself):
  window_<name>.safetensors   pose_enc [S,9], extrinsic [S,3,4] (camera-to-world,
                              demo.py postprocess), intrinsic [S,3,3],
                              frame_type [S], chunk_scales [W], chunk_transforms [W,4,4],
                              depth_f<i>, depth_conf_f<i>, world_points_f<i> for
                              a few frames (world points unprojected from the
                              stitched depth and pose_enc, GCTBase._unproject_depth_to_world)
  window_manifest.json        the settings and the window list of each variant

Usage (GPU machine; upstream package on PYTHONPATH):
  python3 make_window_fixtures.py --fixtures tests/fixtures/model_small
"""

import argparse
import json
import os

import torch
from safetensors.torch import load_file, save_file

from lingbot_map.models import gct_stream_window
from lingbot_map.utils.geometry import closed_form_inverse_se3_general
from lingbot_map.utils.pose_enc import pose_encoding_to_extri_intri

from upstream_small_model import build_model

VARIANTS = [
    # name, window_size, overlap_size, overlap_keyframes, keyframe_interval
    ("w6_o4", 6, 4, None, 1),
    ("w5_okf2_kf2", 5, 16, 2, 2),
    ("w8_o3", 8, 3, None, 1),
    ("w4_o2_kf2", 4, 2, None, 2),
]


def window_list(S, ws, window_size, overlap_size, overlap_keyframes, kf):
    """Upstream's fixed-interval window list (inference_windowed), for the manifest only."""
    ws = min(ws, S)
    if overlap_keyframes is not None:
        ov = max(ws, overlap_keyframes * max(kf, 1))
    elif overlap_size is not None:
        ov = overlap_size
    else:
        ov = ws
    ov = min(ov, S - 1) if S > 1 else 0
    eff = min(ws + max(window_size - ws, 0) * max(kf, 1), S)
    step = max(eff - ov, 1)
    if eff >= S:
        return ov, [(0, S)]
    out = []
    for s in range(0, S, step):
        e = min(s + eff, S)
        if e - s >= ov or e == S:
            out.append((s, e))
        if e == S:
            break
    return ov, out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--fixtures", required=True)
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    out_dir = args.out or args.fixtures
    os.makedirs(out_dir, exist_ok=True)
    torch.set_grad_enabled(False)

    with open(os.path.join(args.fixtures, "config.json")) as f:
        user_cfg = json.load(f)
    model, cfg = build_model(user_cfg)
    sd = torch.load(os.path.join(args.fixtures, "weights.pt"), map_location="cpu")
    missing, unexpected = model.load_state_dict({k: v.float() for k, v in sd.items()}, strict=True)
    model.__class__ = gct_stream_window.GCTStream
    images = load_file(os.path.join(args.fixtures, "inputs.safetensors"))["images_u8"].float() / 255
    S, _, H, W = images.shape
    num_scale = cfg["num_scale_frames"]

    manifest = {"source": "upstream gct_stream_window.GCTStream.inference_windowed, fp32 CPU",
                "frames": S, "height": H, "width": W, "num_scale_frames": num_scale,
                "kv_cache_sliding_window": cfg["kv_cache_sliding_window"], "variants": []}
    for name, window_size, overlap_size, overlap_keyframes, kf in VARIANTS:
        pred = model.inference_windowed(images, window_size=window_size, overlap_size=overlap_size,
                                        overlap_keyframes=overlap_keyframes, num_scale_frames=num_scale,
                                        keyframe_interval=kf)
        pe = pred["pose_enc"]  # [1, S, 9]
        ext, intr = pose_encoding_to_extri_intri(pe, (H, W))
        e4 = torch.zeros(ext.shape[:-2] + (4, 4), dtype=ext.dtype)
        e4[..., :3, :4] = ext
        e4[..., 3, 3] = 1.0
        c2w = closed_form_inverse_se3_general(e4)[..., :3, :4]
        wp = model._unproject_depth_to_world(pred["depth"], pe)[0]
        frames = [num_scale, S // 2, S - 1]
        tensors = {"pose_enc": pe[0], "extrinsic": c2w[0], "intrinsic": intr[0],
                   "frame_type": pred["frame_type"][0].float(),
                   "chunk_scales": pred["chunk_scales"][0], "chunk_transforms": pred["chunk_transforms"][0]}
        for f in frames:
            tensors[f"depth_f{f}"] = pred["depth"][0, f, ..., 0]
            tensors[f"depth_conf_f{f}"] = pred["depth_conf"][0, f]
            tensors[f"world_points_f{f}"] = wp[f]
        tensors = {k: v.float().contiguous().clone() for k, v in tensors.items()}
        save_file(tensors, os.path.join(out_dir, f"window_{name}.safetensors"))
        ov, wins = window_list(S, num_scale, window_size, overlap_size, overlap_keyframes, kf)
        assert len(wins) == pred["chunk_scales"].shape[1], (wins, pred["chunk_scales"].shape)
        manifest["variants"].append({
            "name": name, "file": f"window_{name}.safetensors", "window_size": window_size,
            "overlap_size": overlap_size, "overlap_keyframes": overlap_keyframes, "keyframe_interval": kf,
            "overlap_frames": ov, "windows": wins, "dense_frames": frames,
            "chunk_scales": pred["chunk_scales"][0].tolist()})
        print(f"{name}: windows {wins}, scales {pred['chunk_scales'][0].tolist()}")
    with open(os.path.join(out_dir, "window_manifest.json"), "w") as f:
        json.dump(manifest, f, indent=2)


if __name__ == "__main__":
    main()
