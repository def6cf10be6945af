#!/usr/bin/env python3
"""Writes 8-bit grayscale sky masks as upstream caches them (255 = not sky,
0 = sky), one per frame, with a minimal PNG encoder (zlib only).

  make_sky_masks.py DIR WIDTH HEIGHT SKY_ROWS NAME [NAME...]

Each mask is WIDTH x HEIGHT with its top SKY_ROWS rows 0 (sky), the rest 255;
pixel (0, WIDTH-1) of the lower part is 1, which upstream counts as not sky.
"""
import os
import struct
import sys
import zlib


def png_gray8(path, rows):
    height, width = len(rows), len(rows[0])
    raw = b"".join(b"\x00" + bytes(r) for r in rows)

    def chunk(kind, body):
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body) & 0xffffffff)

    with open(path, "wb") as f:
        f.write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)) +
                chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))


def main():
    out, width, height, sky_rows = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    os.makedirs(out, exist_ok=True)
    rows = [[0] * width if y < sky_rows else [255] * width for y in range(height)]
    if sky_rows < height:
        rows[height - 1][width - 1] = 1
    for name in sys.argv[5:]:
        png_gray8(os.path.join(out, name), rows)


if __name__ == "__main__":
    main()
