#!/usr/bin/env python3
"""Checks an `export --format depth` folder against predictions.npz.

  check_depth_png.py EXPORT_DIR PREDICTIONS_NPZ

The PNGs are decoded here with zlib and numpy (a minimal reader: non-
interlaced greyscale, 8 or 16 bits, the five PNG row filters), independent of
libpng. Prints one JSON line with the worst depth error in world units
(quantisation allows 0.0005) and the worst confidence mismatch in 8-bit levels.
"""
import json
import os
import struct
import sys
import zlib

import numpy as np


def read_png(path):
    with open(path, "rb") as f:
        data = f.read()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", path
    pos, idat = 8, b""
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            width, height, depth, color, _, _, interlace = struct.unpack(">IIBBBBB", body)
            assert color == 0 and interlace == 0, (path, color, interlace)
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    bpp = depth // 8
    stride = width * bpp
    raw = zlib.decompress(idat)
    out = np.zeros((height, stride), dtype=np.uint8)
    prev = np.zeros(stride, dtype=np.int32)
    for y in range(height):
        kind = raw[y * (stride + 1)]
        row = np.frombuffer(raw, np.uint8, stride, y * (stride + 1) + 1).astype(np.int32)
        cur = np.zeros(stride, dtype=np.int32)
        for x in range(stride):
            a = cur[x - bpp] if x >= bpp else 0
            b = prev[x]
            c = prev[x - bpp] if x >= bpp else 0
            if kind == 0:
                pred = 0
            elif kind == 1:
                pred = a
            elif kind == 2:
                pred = b
            elif kind == 3:
                pred = (a + b) // 2
            else:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                pred = a if pa <= pb and pa <= pc else (b if pb <= pc else c)
            cur[x] = (row[x] + pred) & 0xFF
        out[y] = cur
        prev = cur
    if depth == 16:
        return out.reshape(height, width, 2).astype(np.uint16) @ np.array([256, 1], dtype=np.uint16)
    return out


def main():
    out, npz = sys.argv[1], np.load(sys.argv[2])
    depth, conf = npz["depth"][..., 0].astype(np.float64), npz["depth_conf"].astype(np.float64)
    with open(os.path.join(out, "depth_scale.json")) as f:
        scale = json.load(f)["depth_scale"]
    depth_err = conf_err = 0.0
    for i in range(depth.shape[0]):
        d = read_png(os.path.join(out, "depth", f"{i:06d}.png")).astype(np.float64)
        want = depth[i]
        valid = np.isfinite(want) & (want > 0) & (want < 65.535)
        assert d.shape == want.shape, (d.shape, want.shape)
        assert (d[~np.isfinite(want) | (want <= 0)] == 0).all()
        depth_err = max(depth_err, float(np.abs(d[valid] * scale - want[valid]).max()))
        c = read_png(os.path.join(out, "depth_conf", f"{i:06d}.png")).astype(np.float64)
        want_c = np.clip(np.round(255 * (1 - 1 / np.maximum(conf[i], 1))), 0, 255)
        conf_err = max(conf_err, float(np.abs(c - want_c).max()))
    print(json.dumps({"frames": int(depth.shape[0]), "depth_scale": scale, "max_depth_error": depth_err,
                      "max_confidence_levels": conf_err}))


if __name__ == "__main__":  # read_png is also imported by tests
    main()
