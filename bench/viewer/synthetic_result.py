"""A synthetic `run --out` result for the viewer's load figures: S frames of
H x W, every point finite and confident (so `view --view-downsample 1` sends
S*H*W points), a gently curved wall seen by a camera sliding along x.

  /usr/bin/python3 bench/viewer/synthetic_result.py OUT_DIR S H W
"""
import sys, numpy as np, os
out, S, H, W = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
os.makedirs(out, exist_ok=True)
rng = np.random.default_rng(0)
ys, xs = np.mgrid[0:H, 0:W].astype(np.float32)
ext = np.zeros((S, 3, 4), np.float32); ext[:, :3, :3] = np.eye(3); ext[:, 0, 3] = np.arange(S) * 0.05
K = np.tile(np.array([[W, 0, W / 2], [0, W, H / 2], [0, 0, 1]], np.float32), (S, 1, 1))
depth = (2 + 0.3 * np.sin(xs / 20)[None] + 0.01 * rng.standard_normal((S, H, W))).astype(np.float32)
pts = np.empty((S, H, W, 3), np.float32)
pts[..., 0] = (xs[None] - W / 2) / W * depth + ext[:, 0, 3][:, None, None]
pts[..., 1] = (ys[None] - H / 2) / W * depth
pts[..., 2] = depth
conf = np.full((S, H, W), 5.0, np.float32)
img = np.empty((S, 3, H, W), np.float32)
img[:, 0] = xs / W; img[:, 1] = ys / H; img[:, 2] = 0.5
np.savez(os.path.join(out, "predictions.npz"), pose_enc=np.zeros((S, 9), np.float32), depth=depth[..., None],
         depth_conf=conf, world_points=pts, extrinsic=ext, intrinsic=K, images=img)
