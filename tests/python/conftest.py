# Shared fixtures of the Python module's tests: the small random-weight model
# (tests/fixtures/model_small) and its upstream PyTorch reference outputs.
import json
import os
import pathlib
import struct
import zlib

import numpy as np
import pytest

FIXTURES = pathlib.Path(__file__).resolve().parent.parent / "fixtures" / "model_small"

_DTYPES = {"F32": np.float32, "F64": np.float64, "U8": np.uint8, "I64": np.int64, "I32": np.int32}


def read_safetensors(path):
    """A .safetensors file as {name: array}, read here with NumPy alone (the
    format: an 8-byte little-endian header length, a JSON header, the data)."""
    blob = pathlib.Path(path).read_bytes()
    (n,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8 : 8 + n])
    data = blob[8 + n :]
    out = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        begin, end = entry["data_offsets"]
        out[name] = np.frombuffer(data[begin:end], dtype=_DTYPES[entry["dtype"]]).reshape(entry["shape"])
    return out


def write_png(path, rgb):
    """An HxWx3 uint8 array as an 8-bit RGB PNG (zlib and the PNG chunk layout,
    so the tests need no imaging package)."""
    h, w, _ = rgb.shape
    raw = b"".join(b"\x00" + rgb[y].tobytes() for y in range(h))

    def chunk(kind, body):
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body) & 0xFFFFFFFF)

    png = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0))
    png += chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b"")
    pathlib.Path(path).write_bytes(png)


@pytest.fixture(scope="session")
def manifest():
    return json.loads((FIXTURES / "manifest.json").read_text())


@pytest.fixture(scope="session")
def weights():
    return str(FIXTURES / "weights.pt")


@pytest.fixture(scope="session")
def config():
    return str(FIXTURES / "config.json")


@pytest.fixture(scope="session")
def frames_u8():
    """The fixture's frames as upstream preprocessed them, uint8 [S, 3, H, W]."""
    return read_safetensors(FIXTURES / "inputs.safetensors")["images_u8"]


@pytest.fixture(scope="session")
def frames(frames_u8):
    """The same as float32 3xHxW frames in [0, 1] (ToTensor's v / 255)."""
    return [f.astype(np.float32) / np.float32(255) for f in frames_u8]


@pytest.fixture(scope="session")
def reference():
    def load(variant_file):
        return read_safetensors(FIXTURES / variant_file)

    return load


@pytest.fixture(scope="session")
def cli():
    """The lingbot-map CLI of the same build (ctest sets LINGBOT_CLI), or None."""
    path = os.environ.get("LINGBOT_CLI")
    return path if path and os.path.exists(path) else None
