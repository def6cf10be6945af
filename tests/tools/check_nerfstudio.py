#!/usr/bin/env python3
"""Checks an `export --format nerfstudio` folder against predictions.npz.

  check_nerfstudio.py EXPORT_DIR PREDICTIONS_NPZ

transforms.json is parsed with Python's json; each transform_matrix has its
OpenGL axis flip undone (y and z columns negated back) and is compared with
the npz's camera-to-world `extrinsic`. Prints one JSON line.
"""
import json
import os
import sys

import numpy as np

out, npz = sys.argv[1], np.load(sys.argv[2])
with open(os.path.join(out, "transforms.json")) as f:
    doc = json.load(f)
extrinsic, intrinsic = npz["extrinsic"], npz["intrinsic"]
S, H, W = npz["depth"].shape[:3]
frames = doc["frames"]
assert len(frames) == S, (len(frames), S)
pose_err = intr_err = 0.0
missing = 0
for i, fr in enumerate(frames):
    m = np.array(fr["transform_matrix"], dtype=np.float64)
    assert m.shape == (4, 4) and np.allclose(m[3], [0, 0, 0, 1])
    opencv = m[:3].copy()
    opencv[:, 1:3] *= -1
    pose_err = max(pose_err, float(np.abs(opencv - extrinsic[i]).max()))
    K = intrinsic[i]
    # nerfstudio's pixel centres are at +0.5, the model's at integers.
    want = [K[0, 0], K[1, 1], K[0, 2] + 0.5, K[1, 2] + 0.5]
    intr_err = max(intr_err, float(np.abs(np.array([fr["fl_x"], fr["fl_y"], fr["cx"], fr["cy"]]) - want).max()))
    assert fr["w"] == W and fr["h"] == H, (fr["w"], fr["h"])
    missing += not os.path.isfile(os.path.join(out, fr["file_path"]))
ply = os.path.join(out, doc["ply_file_path"])
with open(ply, "rb") as f:
    header = f.read(400).split(b"end_header\n")[0].decode()
vertices = int([l for l in header.splitlines() if l.startswith("element vertex")][0].split()[2])
print(json.dumps({"frames": len(frames), "max_pose_error": pose_err, "max_intrinsic_error": intr_err,
                  "missing_images": missing, "ply_vertices": vertices}))
