#!/usr/bin/env python3
"""Reads a COLMAP text model (as `colmap model_converter --output_type TXT`
wrote it) and, optionally, a second one to compare with (our `export --text`).

  check_colmap_text.py COLMAP_TXT_DIR [OTHER_TXT_DIR]

Prints one JSON line: counts, the reprojection error of every 3D point in
each image of its track (recomputed here from the poses, the PINHOLE
parameters and the POINTS2D positions, not taken from the ERROR column), and
with a second model the largest relative difference between the two.
"""
import json
import sys

import numpy as np


def data_lines(path):
    with open(path) as f:
        return [l.rstrip("\n") for l in f if not l.startswith("#")]


def read_model(d):
    cameras = {}
    for l in data_lines(d + "/cameras.txt"):
        if not l.strip():
            continue
        v = l.split()
        cameras[int(v[0])] = (v[1], int(v[2]), int(v[3]), [float(x) for x in v[4:]])
    images = {}
    lines = data_lines(d + "/images.txt")
    for i in range(0, len(lines) - 1, 2):
        v = lines[i].split()
        if not v:
            continue
        p2d = [float(x) for x in lines[i + 1].split()]
        images[int(v[0])] = ([float(x) for x in v[1:8]], int(v[8]), v[9], np.array(p2d).reshape(-1, 3))
    points = {}
    for l in data_lines(d + "/points3D.txt"):
        v = l.split()
        if not v:
            continue
        points[int(v[0])] = ([float(x) for x in v[1:8]], [int(x) for x in v[8:]])
    return cameras, images, points


def quat_to_matrix(w, x, y, z):
    return np.array([[1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
                     [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
                     [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)]])


def reprojection_errors(cameras, images, points):
    errors = []
    for pid, (vals, track) in points.items():
        X = np.array(vals[:3])
        for image_id, idx in zip(track[0::2], track[1::2]):
            q, camera_id, _, p2d = images[image_id]
            model, _, _, (fx, fy, cx, cy) = cameras[camera_id]
            assert model == "PINHOLE", model
            assert int(p2d[idx][2]) == pid, (pid, image_id, idx)
            c = quat_to_matrix(*q[:4]) @ X + np.array(q[4:7])
            errors.append(np.hypot(fx * c[0] / c[2] + cx - p2d[idx][0], fy * c[1] / c[2] + cy - p2d[idx][1]))
    return np.array(errors)


def max_relative_difference(a, b):
    worst = 0.0

    def cmp(x, y):
        nonlocal worst
        x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
        if x.shape != y.shape:
            raise SystemExit(f"shape mismatch {x.shape} vs {y.shape}")
        if x.size:
            worst = max(worst, float(np.max(np.abs(x - y) / np.maximum(1.0, np.abs(y)))))

    (ca, ia, pa), (cb, ib, pb) = a, b
    if ca.keys() != cb.keys() or ia.keys() != ib.keys() or pa.keys() != pb.keys():
        raise SystemExit("the models hold different ids")
    for k in ca:
        if ca[k][:3] != cb[k][:3]:
            raise SystemExit(f"camera {k}: {ca[k][:3]} vs {cb[k][:3]}")
        cmp(ca[k][3], cb[k][3])
    for k in ia:
        if ia[k][1:3] != ib[k][1:3]:
            raise SystemExit(f"image {k}: {ia[k][1:3]} vs {ib[k][1:3]}")
        qa, qb = np.array(ia[k][0]), np.array(ib[k][0])
        cmp(qa, qb)
        cmp(ia[k][3], ib[k][3])
    for k in pa:
        if pa[k][1] != pb[k][1]:
            raise SystemExit(f"point {k}: tracks differ")
        cmp(pa[k][0], pb[k][0])
    return worst


colmap = read_model(sys.argv[1])
errors = reprojection_errors(*colmap)
report = {
    "cameras": len(colmap[0]),
    "images": len(colmap[1]),
    "points": len(colmap[2]),
    "observations": int(errors.size),
    "mean_reprojection_error": float(errors.mean()) if errors.size else 0.0,
    "max_reprojection_error": float(errors.max()) if errors.size else 0.0,
}
if len(sys.argv) > 2:
    report["max_relative_difference"] = max_relative_difference(colmap, read_model(sys.argv[2]))
print(json.dumps(report))
