"""The official architecture with fixed random weights: upstream's reference
outputs, its checkpoint as torch.save writes it, and upstream's own timings.

Runs on the GPU machine (upstream package on PYTHONPATH). Steps, each
optional:
  --save-checkpoint PATH   torch.save(model.state_dict()) in float32, the
                           layout of the published lingbot-map-long.pt
  --frames-out DIR         N frames of HxW as PNG (courthouse, resized)
  --reference-out FILE     upstream fp32 outputs (npz) for those frames,
                           computed on the GPU with TF32 off
  --cpu-timing FILE        upstream on the CPU: phase 1 and per-frame times
  --cpu-depth-from N       with --cpu-timing: streamed frames before frame N
                           skip the depth head (stateless, so frame N and
                           later take the same time), so that a run to the
                           full window fits one device call
  --gpu-timing FILE        upstream bf16 on the GPU (SDPA, eager), as gct_profile.py
"""

import argparse
import glob
import json
import os
import resource
import time

import numpy as np
import torch
from PIL import Image

from upstream_small_model import build_model, randomize_


def make_frames(src_dir, n, h, w, out_dir):
    os.makedirs(out_dir, exist_ok=True)
    paths = sorted(glob.glob(os.path.join(src_dir, "*.png")))
    frames = []
    for i in range(n):
        img = Image.open(paths[i % len(paths)]).convert("RGB").resize((w, h), Image.Resampling.BICUBIC)
        img.save(os.path.join(out_dir, f"{i:06d}.png"))
        frames.append(np.asarray(img, dtype=np.float32).transpose(2, 0, 1) / 255.0)
    return torch.from_numpy(np.stack(frames))


@torch.no_grad()
def stream(model, images, num_scale, dtype=None, device="cuda", timing=None, depth_from=0):
    """GCTStream.inference_streaming, step by step, optionally timed.

    Streamed frames before depth_from run without the depth head: it keeps no
    state between frames, so the frames from depth_from on do the same work
    as in a full run (the aggregator's and camera head's caches are filled
    the same way)."""
    model.clean_kv_cache()
    x = images[None].to(device)
    S = x.shape[1]
    s = min(num_scale, S)
    ctx = torch.amp.autocast("cuda", dtype=dtype) if dtype is not None else torch.autocast("cpu", enabled=False)
    outs, times = [], []

    def sync():
        if device == "cuda":
            torch.cuda.synchronize()

    with ctx:
        sync()
        t0 = time.perf_counter()
        outs.append(model.forward(x[:, :s], num_frame_for_scale=s, num_frame_per_block=s, causal_inference=True))
        sync()
        times.append(time.perf_counter() - t0)
        if timing is not None:  # each step as it ends: a run cut short still tells how far it got
            print(f"step: phase 1 {times[-1] * 1e3:.1f} ms", flush=True)
        depth_head = model.depth_head
        for i in range(s, S):
            model.depth_head = depth_head if i >= depth_from else None
            t0 = time.perf_counter()
            outs.append(model.forward(x[:, i:i + 1], num_frame_for_scale=s, num_frame_per_block=1,
                                      causal_inference=True))
            sync()
            times.append(time.perf_counter() - t0)
            if timing is not None:
                print(f"step: frame {i} {times[-1] * 1e3:.1f} ms"
                      f"{'' if i >= depth_from else ' (no depth head)'}", flush=True)
        model.depth_head = depth_head
    if timing is not None:
        timing["phase1_ms"] = times[0] * 1e3
        timing["frame_ms"] = [t * 1e3 for t in times[1:]]
    return outs


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--images", required=True)
    ap.add_argument("--frames", type=int, default=11)
    ap.add_argument("--height", type=int, default=378)
    ap.add_argument("--width", type=int, default=504)
    ap.add_argument("--num-scale", type=int, default=8)
    ap.add_argument("--seed", type=int, default=1130)
    ap.add_argument("--config", help="our JSON model config (default: the official architecture)")
    ap.add_argument("--load-checkpoint", help="weights to load instead of random ones")
    ap.add_argument("--save-checkpoint")
    ap.add_argument("--frames-out")
    ap.add_argument("--reference-out")
    ap.add_argument("--cpu-timing")
    ap.add_argument("--cpu-threads", type=int, default=16)
    ap.add_argument("--cpu-depth-from", type=int, default=0)
    args = ap.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False

    t0 = time.time()
    user_cfg = {}
    if args.config:
        with open(args.config) as f:
            user_cfg = json.load(f)
    model, cfg = build_model(user_cfg)
    if args.load_checkpoint:
        sd = torch.load(args.load_checkpoint, map_location="cpu", mmap=True)
        model.load_state_dict({k: v.float() for k, v in sd.items()}, strict=True)
    else:
        randomize_(model, args.seed, bf16_exact=False)
    print(f"official model: {sum(p.numel() for p in model.parameters())} parameters, "
          f"{len(model.state_dict())} tensors, built in {time.time() - t0:.1f} s", flush=True)
    if args.save_checkpoint:
        t0 = time.time()
        torch.save(model.state_dict(), args.save_checkpoint)
        print(f"saved {args.save_checkpoint}: {os.path.getsize(args.save_checkpoint)} bytes in "
              f"{time.time() - t0:.1f} s", flush=True)

    images = make_frames(args.images, args.frames, args.height, args.width, args.frames_out or "/tmp/frames")

    if args.reference_out:
        model.cuda()
        outs = stream(model, images, args.num_scale)
        pose = torch.cat([o["pose_enc"] for o in outs], 1)
        depth = torch.cat([o["depth"] for o in outs], 1)
        conf = torch.cat([o["depth_conf"] for o in outs], 1)
        wp = model._unproject_depth_to_world(depth, pose)
        np.savez(args.reference_out, pose_enc=pose[0].cpu().numpy(), depth=depth[0].cpu().numpy(),
                 depth_conf=conf[0].cpu().numpy(), world_points=wp[0].cpu().numpy())
        print("reference written", flush=True)
        model.cpu()
        torch.cuda.empty_cache()

    if args.cpu_timing:
        torch.set_num_threads(args.cpu_threads)
        timing = {"threads": args.cpu_threads, "frames": args.frames, "height": args.height,
                  "width": args.width, "depth_head_from_frame": args.cpu_depth_from}
        stream(model, images, args.num_scale, device="cpu", timing=timing, depth_from=args.cpu_depth_from)
        timing["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        with open(args.cpu_timing, "w") as f:
            json.dump(timing, f, indent=1)
        print("upstream cpu:", json.dumps(timing), flush=True)


if __name__ == "__main__":
    main()
