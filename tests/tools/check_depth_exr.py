#!/usr/bin/env python3
"""Checks `export --format depth --depth-exr` files against predictions.npz.

  check_depth_exr.py EXPORT_DIR PREDICTIONS_NPZ

The .exr files are decoded here from the OpenEXR file layout (magic, header
attributes, chunk offset table, scanline blocks; NO or ZIP compression:
zlib, then the byte predictor and the two-halves interleave undone), with
zlib and numpy only, independent of the OpenEXR library that wrote them.
Expected: the npz's depth, 0 where it is not finite or <= 0. Prints one JSON
line: frames, the largest difference (exact floats: 0), channel names,
the number of ZIP-compressed blocks decoded.
"""
import json
import os
import struct
import sys
import zlib

import numpy as np


def read_exr(path):
    with open(path, "rb") as f:
        data = f.read()
    assert data[:4] == b"\x76\x2f\x31\x01", path
    assert data[4] == 2 and data[5] & 0x02 == 0, "expected a single-part scanline file"
    pos, attrs = 8, {}
    while data[pos] != 0:
        end = data.index(b"\0", pos)
        name = data[pos:end].decode()
        tend = data.index(b"\0", end + 1)
        kind = data[end + 1:tend].decode()
        (size,) = struct.unpack("<i", data[tend + 1:tend + 5])
        attrs[name] = (kind, data[tend + 5:tend + 5 + size])
        pos = tend + 5 + size
    pos += 1
    channels, raw = [], attrs["channels"][1]
    p = 0
    while raw[p] != 0:
        end = raw.index(b"\0", p)
        pixel_type = struct.unpack("<i", raw[end + 1:end + 5])[0]
        channels.append((raw[p:end].decode(), pixel_type))
        p = end + 1 + 16
    assert channels and all(t == 2 for _, t in channels), channels  # 2 = FLOAT
    compression = attrs["compression"][1][0]
    assert compression in (0, 3), compression  # NO_COMPRESSION, ZIP_COMPRESSION (16 lines)
    xmin, ymin, xmax, ymax = struct.unpack("<4i", attrs["dataWindow"][1])
    w, h = xmax - xmin + 1, ymax - ymin + 1
    lines = 1 if compression == 0 else 16
    chunks = (h + lines - 1) // lines
    offsets = struct.unpack("<%dQ" % chunks, data[pos:pos + 8 * chunks])
    image = np.zeros((len(channels), h, w), np.float32)
    global zip_blocks
    for off in offsets:
        y, size = struct.unpack("<ii", data[off:off + 8])
        block = data[off + 8:off + 8 + size]
        n = min(lines, ymax + 1 - y)
        expected = n * w * 4 * len(channels)
        if compression == 3 and size < expected:
            zip_blocks += 1
            t = np.frombuffer(zlib.decompress(block), np.uint8).astype(np.int64)
            t = (np.cumsum(np.concatenate([[t[0]], t[1:] - 128])) & 0xFF).astype(np.uint8)
            half = (len(t) + 1) // 2
            out = np.empty_like(t)
            out[0::2], out[1::2] = t[:half], t[half:]
            block = out.tobytes()
        assert len(block) == expected, (path, len(block), expected)
        rows = np.frombuffer(block, "<f4").reshape(n, len(channels), w)
        for c in range(len(channels)):
            image[c, y - ymin:y - ymin + n] = rows[:, c]
    return [c for c, _ in channels], image


zip_blocks = 0  # blocks that were ZIP-compressed (the rest stored raw, as OpenEXR does when zlib does not help)


def main():
    out, npz = sys.argv[1], sys.argv[2]
    p = np.load(npz)
    depth = p["depth"][..., 0]
    names = [str(n) for n in p["frames"]]
    stems = [os.path.splitext(n)[0] for n in names]
    worst, channel_names = 0.0, None
    for f, stem in enumerate(stems):
        channel_names, image = read_exr(os.path.join(out, "depth_exr", stem + ".exr"))
        want = np.where(np.isfinite(depth[f]) & (depth[f] > 0), depth[f], 0).astype(np.float32)
        worst = max(worst, float(np.max(np.abs(image[0] - want))))
    print(json.dumps({"frames": len(stems), "max_difference": worst, "channels": channel_names,
                      "zip_blocks": zip_blocks}))


if __name__ == "__main__":
    main()
