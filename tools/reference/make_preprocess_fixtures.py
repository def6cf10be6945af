#!/usr/bin/python3
"""Reference data for the image decoding, resizing and preprocessing tests.

Run with Debian's Python (it has PIL and numpy; no torch needed):

    /usr/bin/python3 tools/reference/make_preprocess_fixtures.py

It writes tests/fixtures/preprocess/:
    inputs/     small synthetic PNG / JPEG files covering the PIL modes,
                EXIF orientations and odd sizes the C++ decoder must handle
    expected/   PIL's results, stored as 8-bit RGB PNGs (every expected value
                is k/255, so 8 bits store it exactly)
    cases.json  what each test case feeds in and where its answer is

Every expected output is produced by PIL itself, with the calls upstream's
lingbot_map/utils/load_fn.py `load_and_preprocess_images` makes:
    Image.open -> ImageOps.exif_transpose -> (RGBA: alpha_composite onto
    white) -> convert("RGB") -> resize(BICUBIC) -> ToTensor (uint8 / 255,
    CHW) -> centre crop / white padding, then white padding of a set of
    frames to the largest height and width.
Only the tensor steps (ToTensor, crop, torch.nn.functional.pad) are
re-implemented here, in numpy on the uint8 values (1.0 == 255 / 255).

Storage layouts (all PNG, RGB, 8 bit):
    decode      the decoded image itself, H x W
    resize      the resized image itself
    preprocess  a [S, 3, H, W] result as an image of W x (S * H) pixels whose
                pixel (s * H + y, x) holds the three channels of frame s
"""

import io
import json
import os
import struct
import sys
import warnings
import zlib

import numpy as np
import PIL
from PIL import Image, ImageOps

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OUT = os.path.join(ROOT, "tests", "fixtures", "preprocess")
COURTHOUSE = os.path.join(ROOT, "tests", "fixtures", "courthouse")  # real frames, see its README.md


# ---------------------------------------------------------------------------
# Upstream's steps, with PIL
# ---------------------------------------------------------------------------

def pil_rgb(path):
    """load_fn.py's decode: exif_transpose, RGBA onto white, convert('RGB')."""
    img = Image.open(path)
    img = ImageOps.exif_transpose(img)
    if img.mode == "RGBA":
        background = Image.new("RGBA", img.size, (255, 255, 255, 255))
        img = Image.alpha_composite(background, img)
    return img.convert("RGB")


def torch_pad(chw, top, bottom, left, right):
    """torch.nn.functional.pad(value=1.0) on uint8 k/255 values: negative
    amounts crop, positive ones add white (255)."""
    c, h, w = chw.shape
    chw = chw[:, max(0, -top): h - max(0, -bottom), max(0, -left): w - max(0, -right)]
    return np.pad(chw, ((0, 0), (max(0, top), max(0, bottom)), (max(0, left), max(0, right))),
                  constant_values=255)


def upstream_one(path, mode, image_size, patch_size):
    """load_fn.py's _load_one for a single path, as uint8 CHW."""
    img = pil_rgb(path)
    width, height = img.size
    target_size = image_size
    if mode == "pad":
        if width >= height:
            new_width = target_size
            new_height = round(height * (new_width / width) / patch_size) * patch_size
        else:
            new_height = target_size
            new_width = round(width * (new_height / height) / patch_size) * patch_size
    else:
        new_width = target_size
        new_height = round(height * (new_width / width) / patch_size) * patch_size
    img = img.resize((new_width, new_height), Image.Resampling.BICUBIC)
    chw = np.asarray(img).transpose(2, 0, 1)  # ToTensor's layout, still k (for k/255)
    if mode == "crop" and new_height > target_size:
        start_y = (new_height - target_size) // 2
        chw = chw[:, start_y: start_y + target_size, :]
    if mode == "pad":
        h_padding = target_size - chw.shape[1]
        w_padding = target_size - chw.shape[2]
        if h_padding > 0 or w_padding > 0:
            pad_top = h_padding // 2
            pad_left = w_padding // 2
            chw = torch_pad(chw, pad_top, h_padding - pad_top, pad_left, w_padding - pad_left)
    return chw


def upstream_batch(paths, mode, image_size, patch_size):
    """load_and_preprocess_images: every frame, then white padding to the max size."""
    images = [upstream_one(p, mode, image_size, patch_size) for p in paths]
    shapes = set((im.shape[1], im.shape[2]) for im in images)
    if len(shapes) > 1:
        max_height = max(s[0] for s in shapes)
        max_width = max(s[1] for s in shapes)
        padded = []
        for im in images:
            h_padding = max_height - im.shape[1]
            w_padding = max_width - im.shape[2]
            if h_padding > 0 or w_padding > 0:
                pad_top = h_padding // 2
                pad_left = w_padding // 2
                im = torch_pad(im, pad_top, h_padding - pad_top, pad_left, w_padding - pad_left)
            padded.append(im)
        images = padded
    return np.stack(images)


# ---------------------------------------------------------------------------
# Writing PNGs byte by byte (PIL cannot write 16-bit RGB, 2-bit gray,
# interlaced files or chunks after IDAT)
# ---------------------------------------------------------------------------

def png_chunk(kind, data):
    body = kind + data
    return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body) & 0xFFFFFFFF)


def pack_row(row, bit_depth):
    """One row of samples (1-D, uint) -> PNG bytes (MSB first, big-endian)."""
    if bit_depth == 16:
        return row.astype(">u2").tobytes()
    if bit_depth == 8:
        return row.astype(np.uint8).tobytes()
    per_byte = 8 // bit_depth
    padded = np.zeros(-(-len(row) // per_byte) * per_byte, dtype=np.uint16)
    padded[: len(row)] = row
    groups = padded.reshape(-1, per_byte)
    out = np.zeros(len(groups), dtype=np.uint16)
    for i in range(per_byte):
        out |= groups[:, i] << (8 - bit_depth * (i + 1))
    return out.astype(np.uint8).tobytes()


ADAM7 = [(0, 0, 8, 8), (4, 0, 8, 8), (0, 4, 4, 8), (2, 0, 4, 4), (0, 2, 2, 4), (1, 0, 2, 2), (0, 1, 1, 2)]


def write_png(path, samples, bit_depth, color_type, palette=None, trns=None, interlace=False,
              before_idat=(), after_idat=()):
    """samples: H x W x channels (or H x W) array of raw sample values."""
    if samples.ndim == 2:
        samples = samples[:, :, None]
    h, w, _ = samples.shape

    def scanlines(img):
        return b"".join(b"\x00" + pack_row(img[y].reshape(-1), bit_depth) for y in range(img.shape[0]))

    if interlace:
        raw = b""
        for x0, y0, dx, dy in ADAM7:
            sub = samples[y0::dy, x0::dx]
            if sub.shape[0] and sub.shape[1]:
                raw += scanlines(sub)
    else:
        raw = scanlines(samples)
    out = b"\x89PNG\r\n\x1a\n"
    out += png_chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, bit_depth, color_type, 0, 0, 1 if interlace else 0))
    if palette is not None:
        out += png_chunk(b"PLTE", bytes(np.asarray(palette, dtype=np.uint8).reshape(-1)))
    if trns is not None:
        out += png_chunk(b"tRNS", trns)
    for kind, data in before_idat:
        out += png_chunk(kind, data)
    out += png_chunk(b"IDAT", zlib.compress(raw, 9))
    for kind, data in after_idat:
        out += png_chunk(kind, data)
    out += png_chunk(b"IEND", b"")
    with open(path, "wb") as f:
        f.write(out)


def exif_bytes(orientation):
    exif = Image.Exif()
    exif[0x0112] = orientation
    return exif.tobytes()  # starts with b"Exif\x00\x00"


def save_rgb_png(path, hwc):
    Image.fromarray(np.ascontiguousarray(hwc, dtype=np.uint8), "RGB").save(path, optimize=True)


# ---------------------------------------------------------------------------
# Synthetic content: smooth ramps (they compress), sharp stripes and a small
# noise patch (they exercise the resampler), asymmetric so a wrong
# orientation shows.
# ---------------------------------------------------------------------------

def pattern(w, h, seed=0):
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:h, 0:w]
    r = x * 255.0 / max(w - 1, 1)
    g = y * 255.0 / max(h - 1, 1)
    b = 255.0 - (x + 2.0 * y) * 255.0 / max(w + 2 * h - 3, 1)
    img = np.stack([r, g, b], axis=-1)
    band = slice(h // 2, h // 2 + max(1, min(12, h // 8)))  # sharp stripes across the middle
    img[band, :, 2] = np.where((x[band] // 2) % 3 == 0, 235.0, 20.0)
    ph, pw = max(1, min(12, h // 6)), max(1, min(12, w // 6))
    img[:ph, -pw:] = rng.integers(0, 256, size=(ph, pw, 3))  # noise, top right
    img[-ph:, :pw] = [255, 0, 128]                          # a block, bottom left
    return np.clip(np.round(img), 0, 255).astype(np.uint8)


# ---------------------------------------------------------------------------

def main():
    # convert("RGB") of a palette image with tRNS warns; that is upstream's path.
    warnings.filterwarnings("ignore", message="Palette images with Transparency")
    rng = np.random.default_rng(1234)
    inputs = os.path.join(OUT, "inputs")
    expected = os.path.join(OUT, "expected")
    os.makedirs(inputs, exist_ok=True)
    os.makedirs(expected, exist_ok=True)
    for d in (inputs, expected):
        for name in os.listdir(d):
            os.remove(os.path.join(d, name))

    def inp(name):
        return os.path.join(inputs, name)

    cases = {"generator": "tools/reference/make_preprocess_fixtures.py",
             "pillow_version": PIL.__version__, "numpy_version": np.__version__,
             "decode": [], "decode_hashes": [], "resize": [], "preprocess": [], "same_as": []}

    # ---- decode cases ------------------------------------------------------
    decode_inputs = []

    def add_decode(name, note):
        decode_inputs.append((name, note))

    base = pattern(41, 29, seed=1)
    Image.fromarray(base).save(inp("png_rgb8.png"))
    add_decode("png_rgb8.png", "8-bit RGB")

    Image.fromarray(base[:, :, 1]).save(inp("png_gray8.png"))
    add_decode("png_gray8.png", "8-bit gray (L)")

    for depth in (1, 2, 4):
        samples = rng.integers(0, 1 << depth, size=(13, 19))
        write_png(inp(f"png_gray{depth}.png"), samples, depth, 0)
        add_decode(f"png_gray{depth}.png", f"{depth}-bit gray, scaled to 0..255 by PIL")

    gray16 = np.concatenate([rng.integers(0, 256, size=(6, 23)), rng.integers(0, 65536, size=(6, 23))])
    gray16[0, :4] = [0, 255, 256, 65535]
    write_png(inp("png_gray16.png"), gray16, 16, 0)
    add_decode("png_gray16.png", "16-bit gray: PIL mode I / I;16, convert('RGB') clips to 255")

    rgb16 = rng.integers(0, 65536, size=(11, 17, 3))
    write_png(inp("png_rgb16.png"), rgb16, 16, 2)
    add_decode("png_rgb16.png", "16-bit RGB: PIL keeps the high byte")

    pal = rng.integers(0, 256, size=(200, 3))
    idx = rng.integers(0, 200, size=(21, 27))
    trns = bytes(rng.integers(0, 256, size=150).astype(np.uint8))
    write_png(inp("png_palette8_trns.png"), idx, 8, 3, palette=pal, trns=trns)
    add_decode("png_palette8_trns.png", "8-bit palette with tRNS: alpha dropped, not composited")

    pal16 = rng.integers(0, 256, size=(16, 3))
    write_png(inp("png_palette4.png"), rng.integers(0, 16, size=(9, 31)), 4, 3, palette=pal16)
    add_decode("png_palette4.png", "4-bit palette")
    write_png(inp("png_palette1_interlaced.png"), rng.integers(0, 2, size=(17, 23)), 1, 3,
              palette=[[10, 200, 30], [250, 240, 5]], interlace=True)
    add_decode("png_palette1_interlaced.png", "1-bit palette, Adam7")

    la = np.stack([base[:, :, 0], (np.arange(41)[None, :] * 6 % 256).repeat(29, 0)], axis=-1)
    Image.fromarray(la.astype(np.uint8), "LA").save(inp("png_la8.png"))
    add_decode("png_la8.png", "8-bit gray+alpha (LA): alpha dropped, not composited")

    la16 = rng.integers(0, 65536, size=(10, 14, 2))
    la16[0, :3, 1] = [0, 255, 65535]
    write_png(inp("png_la16.png"), la16, 16, 4)
    add_decode("png_la16.png", "16-bit gray+alpha: PIL opens it as RGBA, so it is composited")

    # Every (value, alpha) pair: alpha = x, values 0..257 over the rows' channels.
    alpha = np.arange(256)[None, :].repeat(86, 0)
    values = (np.arange(86)[:, None, None] * 3 + np.arange(3)[None, None, :]).repeat(256, 1) % 256
    rgba = np.concatenate([values, alpha[:, :, None]], axis=-1).astype(np.uint8)
    Image.fromarray(rgba, "RGBA").save(inp("png_rgba8_all_alphas.png"))
    add_decode("png_rgba8_all_alphas.png", "8-bit RGBA, every value x alpha, composited onto white")

    rgba16 = rng.integers(0, 65536, size=(12, 15, 4))
    rgba16[:2, :, 3] = 0
    write_png(inp("png_rgba16.png"), rgba16, 16, 6)
    add_decode("png_rgba16.png", "16-bit RGBA: high bytes, composited")

    write_png(inp("png_gray8_trns.png"), base[:, :, 2], 8, 0, trns=struct.pack(">H", 40))
    add_decode("png_gray8_trns.png", "gray with tRNS: ignored by convert('RGB')")
    write_png(inp("png_rgb8_trns_interlaced.png"), base, 8, 2, trns=struct.pack(">HHH", 255, 0, 128),
              interlace=True)
    add_decode("png_rgb8_trns_interlaced.png", "RGB with tRNS, Adam7")

    tall = pattern(13, 22, seed=2)
    write_png(inp("png_exif6_after_idat.png"), tall, 8, 2, after_idat=[(b"eXIf", exif_bytes(6)[6:])])
    add_decode("png_exif6_after_idat.png", "eXIf chunk after IDAT, orientation 6")
    write_png(inp("png_exif3.png"), tall, 8, 2, before_idat=[(b"eXIf", exif_bytes(3)[6:])])
    add_decode("png_exif3.png", "eXIf chunk before IDAT, orientation 3")
    hexed = exif_bytes(8).hex()
    profile = "\nexif\n%8d\n" % (len(hexed) // 2) + "\n".join(hexed[i:i + 72] for i in range(0, len(hexed), 72))
    write_png(inp("png_raw_profile_exif8.png"), tall, 8, 2,
              before_idat=[(b"zTXt", b"Raw profile type exif\x00\x00" + zlib.compress(profile.encode()))])
    add_decode("png_raw_profile_exif8.png", "ImageMagick 'Raw profile type exif' zTXt, orientation 8")
    xmp = ('<x:xmpmeta xmlns:x="adobe:ns:meta/"><rdf:RDF><rdf:Description '
           'tiff:Orientation="5" xmlns:tiff="http://ns.adobe.com/tiff/1.0/"/></rdf:RDF></x:xmpmeta>')
    write_png(inp("png_xmp5.png"), tall, 8, 2,
              before_idat=[(b"iTXt", b"XML:com.adobe.xmp\x00\x00\x00\x00\x00" + xmp.encode())])
    add_decode("png_xmp5.png", "XMP tiff:Orientation=5 in iTXt, no EXIF")

    # JPEGs: EXIF orientations 1..8 on the same pixels.
    photo = pattern(48, 32, seed=3)
    for o in range(1, 9):
        Image.fromarray(photo).save(inp(f"jpeg_exif{o}.jpg"), quality=90, exif=exif_bytes(o))
        add_decode(f"jpeg_exif{o}.jpg", f"JPEG 4:2:0, EXIF orientation {o}")
    Image.fromarray(photo[:, :, 0]).save(inp("jpeg_gray.jpg"), quality=90)
    add_decode("jpeg_gray.jpg", "grayscale JPEG")
    Image.fromarray(photo).convert("CMYK").save(inp("jpeg_cmyk.jpg"), quality=90)
    add_decode("jpeg_cmyk.jpg", "CMYK JPEG (Adobe inverted)")
    Image.fromarray(photo).save(inp("jpeg_progressive.jpg"), quality=85, progressive=True)
    add_decode("jpeg_progressive.jpg", "progressive JPEG")
    odd = pattern(37, 23, seed=4)
    Image.fromarray(odd).save(inp("jpeg_444.jpg"), quality=95, subsampling=0)
    add_decode("jpeg_444.jpg", "JPEG 4:4:4, odd size")
    Image.fromarray(odd).save(inp("jpeg_422.jpg"), quality=75, subsampling=1)
    add_decode("jpeg_422.jpg", "JPEG 4:2:2, odd size")
    # EXIF 3 wins over XMP 6 (Pillow reads XMP only when IFD0 has no Orientation).
    plain = io.BytesIO()
    Image.fromarray(photo).save(plain, "JPEG", quality=90, exif=exif_bytes(3))
    xmp6 = xmp.replace('"5"', '"6"').encode()
    app1 = b"\xff\xe1" + struct.pack(">H", 2 + 29 + len(xmp6)) + b"http://ns.adobe.com/xap/1.0/\x00" + xmp6
    data = plain.getvalue()
    with open(inp("jpeg_exif3_xmp6.jpg"), "wb") as f:
        f.write(data[:2] + app1 + data[2:])
    add_decode("jpeg_exif3_xmp6.jpg", "EXIF orientation 3 and XMP 6: EXIF wins")
    # A PNG whose name says JPEG: the content decides.
    Image.fromarray(base).save(inp("png_named.jpg"), format="PNG")
    add_decode("png_named.jpg", "PNG content behind a .jpg name")

    for name, note in decode_inputs:
        img = pil_rgb(inp(name))
        arr = np.asarray(img)
        out = "decode_" + os.path.splitext(name)[0] + ".png"
        save_rgb_png(os.path.join(expected, out), arr)
        cases["decode"].append({"name": name, "note": note, "input": "inputs/" + name,
                                "width": img.size[0], "height": img.size[1], "expected": "expected/" + out})

    # JPEG XMP orientation without EXIF: recent Pillow (>= 10.x, info["xmp"])
    # rotates it; Pillow 9.4 does not look at JPEG XMP, so it cannot be the
    # reference: the same pixels must come out as with EXIF orientation 6.
    plain = io.BytesIO()
    Image.fromarray(photo).save(plain, "JPEG", quality=90)
    data = plain.getvalue()
    with open(inp("jpeg_xmp6.jpg"), "wb") as f:
        f.write(data[:2] + app1 + data[2:])
    cases["same_as"].append({"input": "inputs/jpeg_xmp6.jpg", "same_as": "jpeg_exif6.jpg",
                             "note": "XMP tiff:Orientation=6 in a JPEG without EXIF (Pillow >= 10 behaviour)"})

    # ---- the real frames: PIL's decode, as a hash ---------------------------
    courthouse = sorted(f for f in os.listdir(COURTHOUSE) if f.endswith(".png"))
    for name in courthouse:
        arr = np.asarray(pil_rgb(os.path.join(COURTHOUSE, name)))
        h = 0xcbf29ce484222325
        for byte in arr.tobytes():
            h = ((h ^ byte) * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
        cases["decode_hashes"].append({"input": "courthouse/" + name, "width": arr.shape[1],
                                       "height": arr.shape[0], "fnv1a64": "%016x" % h})

    # ---- resize cases: random pixels, PIL's BICUBIC ------------------------
    resize_cases = [
        ("down", 37, 23, 11, 7), ("horizontal_only", 300, 10, 7, 10),
        ("vertical_only", 10, 300, 10, 7), ("near_identity", 50, 40, 49, 41), ("one_pixel_up", 1, 1, 5, 3),
        ("to_one_pixel", 5, 3, 1, 1), ("identity", 24, 24, 24, 24), ("up_x4", 29, 17, 120, 70),
        ("huge_factor", 601, 4, 3, 4), ("courthouse_like", 67, 41, 58, 33),
    ]
    for name, w, h, ow, oh in resize_cases:
        src = rng.integers(0, 256, size=(h, w, 3)).astype(np.uint8)
        save_rgb_png(os.path.join(expected, f"resize_{name}_in.png"), src)
        out = np.asarray(Image.fromarray(src, "RGB").resize((ow, oh), Image.Resampling.BICUBIC))
        save_rgb_png(os.path.join(expected, f"resize_{name}_out.png"), out)
        cases["resize"].append({"name": name, "input": f"expected/resize_{name}_in.png", "width": w, "height": h,
                                "out_width": ow, "out_height": oh, "expected": f"expected/resize_{name}_out.png"})
    checker = ((np.indices((40, 40)).sum(axis=0) % 2) * 255).astype(np.uint8)
    checker = np.stack([checker, 255 - checker, checker], axis=-1)
    save_rgb_png(os.path.join(expected, "resize_checker_in.png"), checker)
    out = np.asarray(Image.fromarray(checker, "RGB").resize((17, 23), Image.Resampling.BICUBIC))
    save_rgb_png(os.path.join(expected, "resize_checker_out.png"), out)
    cases["resize"].append({"name": "checker_clipping", "input": "expected/resize_checker_in.png", "width": 40,
                            "height": 40, "out_width": 17, "out_height": 23,
                            "expected": "expected/resize_checker_out.png"})

    # ---- preprocess cases ---------------------------------------------------
    Image.fromarray(pattern(1000, 750, seed=5)).save(inp("landscape_1000x750.jpg"), quality=90)
    Image.fromarray(pattern(333, 777, seed=6)).save(inp("portrait_333x777.png"))
    Image.fromarray(pattern(20, 15, seed=7)).save(inp("tiny_20x15.png"))
    Image.fromarray(pattern(224, 231, seed=8)).save(inp("tie_224x231.png"))   # 231/14 = 16.5 -> 16
    Image.fromarray(pattern(100, 100, seed=9)).save(inp("square_100x100.png"))
    Image.fromarray(pattern(90, 100, seed=10)).save(inp("portrait_90x100.png"))
    Image.fromarray(pattern(900, 40, seed=11)).save(inp("strip_900x40.png"))

    preprocess_cases = [
        ("courthouse0_crop224", ["courthouse/000000.png"], "crop", 224),
        ("courthouse7_pad224", ["courthouse/000007.png"], "pad", 224),
        ("landscape_crop224", ["inputs/landscape_1000x750.jpg"], "crop", 224),
        ("portrait_crop224", ["inputs/portrait_333x777.png"], "crop", 224),
        ("portrait_pad518", ["inputs/portrait_333x777.png"], "pad", 518),
        ("tiny_crop518", ["inputs/tiny_20x15.png"], "crop", 518),
        ("tiny_pad224", ["inputs/tiny_20x15.png"], "pad", 224),
        ("tie_crop224", ["inputs/tie_224x231.png"], "crop", 224),
        ("strip_crop518", ["inputs/strip_900x40.png"], "crop", 518),
        ("exif6_crop224", ["inputs/jpeg_exif6.jpg"], "crop", 224),
        ("raw_profile_exif8_pad350", ["inputs/png_raw_profile_exif8.png"], "pad", 350),
        ("rgba_crop224", ["inputs/png_rgba8_all_alphas.png"], "crop", 224),
        ("square_pad250_not_multiple", ["inputs/square_100x100.png"], "pad", 250),
        ("square_crop250_not_multiple", ["inputs/square_100x100.png"], "crop", 250),
        ("mixed_sizes_crop224", ["inputs/tiny_20x15.png", "inputs/strip_900x40.png",
                                 "inputs/portrait_90x100.png"], "crop", 224),
        ("mixed_sizes_pad250", ["inputs/square_100x100.png", "inputs/portrait_90x100.png"], "pad", 250),
    ]

    def resolve(p):
        return os.path.join(COURTHOUSE, p[len("courthouse/"):]) if p.startswith("courthouse/") else os.path.join(OUT, p)

    for name, paths, mode, size in preprocess_cases:
        batch = upstream_batch([resolve(p) for p in paths], mode, size, 14)  # [S, 3, H, W] uint8
        s, c, h, w = batch.shape
        stored = batch.transpose(0, 2, 3, 1).reshape(s * h, w, c)
        save_rgb_png(os.path.join(expected, f"pre_{name}.png"), stored)
        cases["preprocess"].append({"name": name, "inputs": paths, "mode": mode, "image_size": size,
                                    "patch_size": 14, "shape": [s, c, h, w], "expected": f"expected/pre_{name}.png"})

    with open(os.path.join(OUT, "cases.json"), "w") as f:
        json.dump(cases, f, indent=1)
        f.write("\n")
    total = sum(os.path.getsize(os.path.join(d, n)) for d in (inputs, expected) for n in os.listdir(d))
    print(f"wrote {len(cases['decode'])} decode, {len(cases['resize'])} resize, "
          f"{len(cases['preprocess'])} preprocess cases to {OUT} ({total / 1024:.0f} KiB) with Pillow {PIL.__version__}")


if __name__ == "__main__":
    sys.exit(main())
