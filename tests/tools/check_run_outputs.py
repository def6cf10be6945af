#!/usr/bin/env python3
"""Checks a `run --out` folder is whole and self-consistent, independently of
lingbot-map's own readers.

  check_run_outputs.py OUT_DIR [CONF_THRESHOLD]

NumPy opens predictions.npz (and zipfile checks every member's CRC); the
frame count is compared across the npz arrays, trajectory.txt (whole lines of
8 numbers) and, for dense runs, points.ply, whose header count must match its
body's size and the points counted here from the npz (finite world points
with confidence > CONF_THRESHOLD, 1.5 by default). Prints one JSON line.
"""
import json
import os
import sys
import zipfile

import numpy as np


def main():
    out = sys.argv[1]
    threshold = float(sys.argv[2]) if len(sys.argv) > 2 else 1.5
    report = {}
    npz_path = os.path.join(out, "predictions.npz")
    report["npz_bad_member"] = zipfile.ZipFile(npz_path).testzip()
    npz = np.load(npz_path)
    report["arrays"] = sorted(npz.files)
    report["npz_frames"] = sorted({int(npz[k].shape[0]) for k in npz.files})
    report["frames"] = [str(f) for f in npz["frames"]] if "frames" in npz.files else None

    lines = [l for l in open(os.path.join(out, "trajectory.txt")).read().split("\n") if l and not l.startswith("#")]
    report["trajectory_lines"] = len(lines)
    report["trajectory_bad_lines"] = sum(1 for l in lines if len(l.split()) != 8)
    report["trajectory_ends_with_newline"] = open(os.path.join(out, "trajectory.txt")).read().endswith("\n")

    ply_path = os.path.join(out, "points.ply")
    if os.path.exists(ply_path):
        data = open(ply_path, "rb").read()
        end = data.index(b"end_header\n") + len(b"end_header\n")
        header = data[:end].decode()
        count = int([l for l in header.split("\n") if l.startswith("element vertex")][0].split()[2])
        report["ply_header_points"] = count
        report["ply_body_points"] = (len(data) - end) / 15.0
        conf = npz["depth_conf"]
        xyz = npz["world_points"]
        finite = np.isfinite(xyz).all(axis=-1)
        report["npz_confident_points"] = int(((conf > threshold) & finite).sum())

    report["temporaries"] = sorted(f for f in os.listdir(out) if f.startswith(".lingbot-") or ".tmp" in f)
    report["lock_left"] = os.path.exists(os.path.join(out, ".lingbot.lock"))
    manifest_path = os.path.join(out, "manifest.json")
    if os.path.exists(manifest_path):
        m = json.load(open(manifest_path))
        report["manifest_frames"] = m["frames"]
        report["manifest_interrupted_by"] = m["interrupted_by"]
        report["manifest_files"] = sorted(f["name"] for f in m["files"])
        report["manifest_sizes_match"] = all(
            os.path.getsize(os.path.join(out, f["name"])) == f["bytes"] for f in m["files"])
    print(json.dumps(report))


if __name__ == "__main__":
    main()
