"""Reference data for the CPU parity tests: upstream GCTStream, fp32, fixed
random weights, real frames.

Runs upstream's own modules (see upstream_small_model.py for the wiring) in
float32 on the CPU, through the same streaming protocol as upstream's
GCTStream.inference_streaming: phase 1 over the scale frames together, then
one frame at a time, non-keyframes attending without being stored.

Writes into --out:
  weights.pt            torch.save(state_dict), bfloat16 (the weights are
                        bf16-exact, so the model is the same function)
  config.json           our model config for this architecture
  inputs.safetensors    images_u8 [S,3,H,W]: upstream-preprocessed frames * 255
  <variant>.safetensors outputs of one KV-cache variant (manifest.json lists them)
  manifest.json

Usage (GPU machine, upstream package on PYTHONPATH):
  python3 make_model_fixtures.py --config tests/fixtures/model_small/config.json \
      --images DIR --out OUT
"""

import argparse
import glob
import json
import os
import time

import torch
from safetensors.torch import save_file

from lingbot_map.utils.geometry import closed_form_inverse_se3_general
from lingbot_map.utils.load_fn import load_and_preprocess_images
from lingbot_map.utils.pose_enc import pose_encoding_to_extri_intri

from upstream_small_model import build_model, randomize_

VARIANTS = [
    # name, kv flag overrides, keyframe interval
    ("default", {}, 1),
    ("keyframe2", {}, 2),
    ("camera_only", {"kv_cache_camera_only": True}, 1),
    ("no_cross_frame_special", {"kv_cache_cross_frame_special": False}, 1),
    ("no_scale_frames_in_cache", {"kv_cache_include_scale_frames": False}, 1),
]


def set_kv_flags(model, cfg, overrides):
    flags = {k: cfg[k] for k in ("kv_cache_sliding_window", "kv_cache_scale_frames",
                                 "kv_cache_cross_frame_special", "kv_cache_include_scale_frames",
                                 "kv_cache_camera_only")}
    flags.update(overrides)
    for blk in model.aggregator.global_blocks:
        for k, v in flags.items():
            setattr(blk.attn, k, v)
    return flags


@torch.no_grad()
def run_stream(model, images, num_scale, keyframe_interval, capture=None):
    """Mirror of GCTStream.inference_streaming, keeping every step's outputs."""
    model.clean_kv_cache()
    x = images[None]
    S = x.shape[1]
    s = min(num_scale, S)
    steps = [model.forward(x[:, :s], num_frame_for_scale=s, num_frame_per_block=s, causal_inference=True)]
    for i in range(s, S):
        keyframe = keyframe_interval <= 1 or (i - s) % keyframe_interval == 0
        if not keyframe:
            model._set_skip_append(True)
        steps.append(model.forward(x[:, i:i + 1], num_frame_for_scale=s, num_frame_per_block=1,
                                   causal_inference=True))
        if not keyframe:
            model._set_skip_append(False)
    out = {}
    for key in ("pose_enc", "depth", "depth_conf"):
        out[key] = torch.cat([st[key] for st in steps], dim=1)[0]
    out["pose_enc_iter"] = torch.stack(
        [torch.cat([st["pose_enc_list"][j] for st in steps], dim=1)[0]
         for j in range(len(steps[0]["pose_enc_list"]))], dim=1)  # [S, iters, 9]
    return out


def postprocess(out, H, W):
    """demo.py postprocess(): camera-to-world extrinsics, intrinsics."""
    ext, intr = pose_encoding_to_extri_intri(out["pose_enc"][None], (H, W))
    e4 = torch.zeros(ext.shape[:-2] + (4, 4), dtype=ext.dtype)
    e4[..., :3, :4] = ext
    e4[..., 3, 3] = 1.0
    c2w = closed_form_inverse_se3_general(e4)[..., :3, :4]
    return c2w[0], intr[0]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", required=True)
    ap.add_argument("--images", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--frames", type=int, default=14)
    ap.add_argument("--image-size", type=int, default=126)
    ap.add_argument("--seed", type=int, default=20261130)
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    torch.set_grad_enabled(False)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False

    with open(args.config) as f:
        user_cfg = json.load(f)
    model, cfg = build_model(user_cfg)
    randomize_(model, args.seed)
    sd = {k: v.to(torch.bfloat16) for k, v in model.state_dict().items()}
    torch.save(sd, os.path.join(args.out, "weights.pt"))
    with open(os.path.join(args.out, "config.json"), "w") as f:
        json.dump(user_cfg, f, indent=2)
    print(f"weights: {len(sd)} tensors, {sum(v.numel() for v in sd.values())} parameters")

    paths = sorted(glob.glob(os.path.join(args.images, "*.png")))[: args.frames]
    images = load_and_preprocess_images(paths, mode="crop", image_size=args.image_size,
                                        patch_size=cfg["patch_size"])
    u8 = (images * 255).round()
    inputs = {"images_u8": u8.to(torch.uint8).contiguous()}
    if not torch.equal(u8 / 255, images):  # not expected: ToTensor is uint8 / 255
        print("warning: preprocessed frames are not exactly k/255; storing float32 too")
        inputs["images_f32"] = images.contiguous()
    save_file(inputs, os.path.join(args.out, "inputs.safetensors"),
              metadata={"source": "courthouse", "frames": str(len(paths)), "image_size": str(args.image_size)})
    S, _, H, W = images.shape
    print(f"images: {tuple(images.shape)}")

    manifest = {"config": "config.json", "weights": "weights.pt", "inputs": "inputs.safetensors",
                "num_scale_frames": cfg["num_scale_frames"], "frames": S, "height": H, "width": W,
                "seed": args.seed, "variants": []}

    # Intermediates of the default run: encoder tokens of frame 0 and the
    # aggregator's selected outputs for the first and last frame.
    captured = {"agg": [], "enc": []}
    h1 = model.aggregator.register_forward_hook(lambda m, i, o: captured["agg"].append([t[0] for t in o[0]]))
    h2 = model.aggregator.patch_embed.register_forward_hook(
        lambda m, i, o: captured["enc"].append(o["x_norm_patchtokens"]))

    for name, overrides, kf in VARIANTS:
        flags = set_kv_flags(model, cfg, overrides)
        t0 = time.time()
        out = run_stream(model, images, cfg["num_scale_frames"], kf)
        dt = time.time() - t0
        c2w, intr = postprocess(out, H, W)
        tensors = {"pose_enc": out["pose_enc"], "pose_enc_iter": out["pose_enc_iter"],
                   "extrinsic": c2w, "intrinsic": intr}
        if name == "default":
            tensors["depth"] = out["depth"][..., 0]
            tensors["depth_conf"] = out["depth_conf"]
            depth_frames = list(range(S))
            wp = model._unproject_depth_to_world(out["depth"][None], out["pose_enc"][None])[0]
            for f in (0, S // 2, S - 1):
                tensors[f"world_points_f{f}"] = wp[f]
            tensors["encoder_tokens_f0"] = captured["enc"][0][0]
            first, last = captured["agg"][0], captured["agg"][-1]
            for j in range(len(first)):
                tensors[f"aggregated_f0_l{j}"] = first[j][0]
                tensors[f"aggregated_f{S - 1}_l{j}"] = last[j][0]
            h1.remove()
            h2.remove()
        else:
            depth_frames = [cfg["num_scale_frames"], S // 2 + 1, S - 1]
            for f in depth_frames:
                tensors[f"depth_f{f}"] = out["depth"][f, ..., 0]
                tensors[f"depth_conf_f{f}"] = out["depth_conf"][f]
        tensors = {k: v.float().contiguous().clone() for k, v in tensors.items()}
        save_file(tensors, os.path.join(args.out, f"{name}.safetensors"))
        manifest["variants"].append({"name": name, "file": f"{name}.safetensors", "kv_flags": flags,
                                     "keyframe_interval": kf, "depth_frames": depth_frames})
        print(f"variant {name}: {dt:.2f}s, pose_enc[-1] = {out['pose_enc'][-1].tolist()}")

    # Noise floor: the same default run in float64. Our fp32 port is judged at
    # 1e-4; upstream's own fp32 error against fp64 shows how much of that is rounding.
    set_kv_flags(model, cfg, {})
    ref32 = run_stream(model, images, cfg["num_scale_frames"], 1)
    # Upstream casts head inputs with .float(); keep them double for this run.
    to_float = torch.Tensor.float
    torch.Tensor.float = lambda self, *a, **k: self
    try:
        ref64 = run_stream(model.double(), images.double(), cfg["num_scale_frames"], 1)
    finally:
        torch.Tensor.float = to_float
    floor = {}
    for key in ("pose_enc", "depth", "depth_conf"):
        a, b = ref32[key].double(), ref64[key]
        floor[key] = float((a - b).norm() / b.norm())
    manifest["upstream_fp32_vs_fp64_relative_error"] = floor
    print("upstream fp32 vs fp64:", floor)
    with open(os.path.join(args.out, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=2)


if __name__ == "__main__":
    main()
