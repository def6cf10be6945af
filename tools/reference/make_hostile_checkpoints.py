#!/usr/bin/python3
"""Writes the checkpoint fixtures of tests/io, without torch.

Run with Debian's /usr/bin/python3 (standard library + numpy):

    /usr/bin/python3 tools/reference/make_hostile_checkpoints.py [tests/fixtures/checkpoints]

It writes three folders under the output directory:

  handmade/  well-formed files built byte for byte the way torch.save
             (PyTorch 2.x) writes them, plus safetensors files, and
             manifest.json giving every tensor's dtype, shape and values as
             computed here in Python (float64), so the C++ reader is checked
             against numbers it did not produce.
  hostile/   broken or malicious files and expected.json giving, per file,
             the text the one-line error must contain (or, for files that are
             odd but loadable, what must load).
  pickles/   plain Python values pickled with protocols 0-5 by Python itself,
             and pickles.json describing each value's structure.

How torch.save's output is reproduced (torch/serialization.py, _save, and
caffe2/serialize/inline_container.cc with its bundled miniz):
  * The pickle: Python's own pickler, protocol 2, with stand-in modules
    `torch` and `torch._utils` so that tensors pickle as
    torch._utils._rebuild_tensor_v2(storage, offset, size, stride,
    requires_grad, OrderedDict()) and storages as the persistent id
    ('storage', torch.FloatStorage, '<key>', 'cpu', numel): the same opcodes
    torch emits, since torch also uses this pickler.
  * The zip: members <prefix>/data.pkl, .format_version ("1"),
    .storage_alignment ("64"), byteorder ("little"), data/<key>..., version
    ("3\\n"), .data/serialization_id; stored (method 0); local headers with
    zero CRC/sizes, general-purpose bit 3 and a data descriptor after the
    data (miniz's way); an extra field "FB" of 'Z' padding so that every
    member's data starts on a 64-byte boundary; always a ZIP64 end of central
    directory record and locator before the classic EOCD (miniz is opened
    with MZ_ZIP_FLAG_WRITE_ZIP64).
Every well-formed archive is read back with Python's zipfile as a check of
the writer itself.
"""

import argparse
import collections
import io
import json
import os
import pickle
import struct
import sys
import types
import zipfile
import zlib

import numpy as np

# ---------------------------------------------------------------------------
# Stand-ins for the torch names that appear in torch.save pickles. They are
# only ever pickled (by reference: module + name), never called.


def _install_fake_torch():
    torch = types.ModuleType("torch")
    utils = types.ModuleType("torch._utils")
    torch._utils = utils
    sys.modules["torch"] = torch
    sys.modules["torch._utils"] = utils

    def stand_in(module, name):
        def f(*args):
            raise RuntimeError("stand-in, never called")

        f.__module__ = module.__name__
        f.__name__ = f.__qualname__ = name
        setattr(module, name, f)

    for name in ["_rebuild_tensor_v2", "_rebuild_tensor_v3", "_rebuild_parameter",
                 "_rebuild_qtensor"]:
        stand_in(utils, name)
    for name in ["FloatStorage", "HalfStorage", "BFloat16Storage", "DoubleStorage", "LongStorage",
                 "IntStorage", "ShortStorage", "CharStorage", "ByteStorage", "BoolStorage",
                 "UntypedStorage", "ComplexFloatStorage"]:
        setattr(torch, name, type(name, (), {"__module__": "torch"}))

    class dtype:  # pickles as the global torch.<name>, like torch.dtype
        __module__ = "torch"

        def __init__(self, name):
            self.name = name

        def __reduce__(self):
            return self.name

    for name in ["float32", "float16", "bfloat16"]:
        setattr(torch, name, dtype(name))
    return torch


torch = _install_fake_torch()

# dtype name -> (storage class, numpy dtype used to make the bytes, element size)
DTYPES = {
    "float32": ("FloatStorage", np.float32, 4),
    "float16": ("HalfStorage", np.float16, 2),
    "bfloat16": ("BFloat16Storage", None, 2),
    "float64": ("DoubleStorage", np.float64, 8),
    "int64": ("LongStorage", np.int64, 8),
    "int32": ("IntStorage", np.int32, 4),
    "int16": ("ShortStorage", np.int16, 2),
    "int8": ("CharStorage", np.int8, 1),
    "uint8": ("ByteStorage", np.uint8, 1),
    "bool": ("BoolStorage", np.bool_, 1),
}


class Storage:
    """One torch storage: `values` as little-endian elements of `dtype`."""

    def __init__(self, dtype, values, storage_class=None, numel=None, location="cpu"):
        self.dtype = dtype
        self.values = np.asarray(values, dtype=np.float64).reshape(-1)
        self.storage_class = storage_class or DTYPES[dtype][0]
        self.numel = len(self.values) if numel is None else numel
        self.location = location
        self.data = encode(dtype, self.values)


def encode(dtype, values):
    values = np.asarray(values, dtype=np.float64).reshape(-1)
    if dtype == "bfloat16":
        # Values are chosen exactly representable in bfloat16: the top 16
        # bits of their float32 pattern.
        bits = values.astype(np.float32).view(np.uint32)
        assert np.all(bits & 0xFFFF == 0), "bfloat16 test value not exact"
        return (bits >> 16).astype("<u2").tobytes()
    np_type = DTYPES[dtype][1]
    out = values.astype(np_type)
    assert np.array_equal(out.astype(np.float64), values), f"{dtype} test value not exact"
    return out.astype(np.dtype(np_type).newbyteorder("<")).tobytes()


class Tensor:
    """A strided view on a Storage, pickled the way torch pickles tensors."""

    def __init__(self, storage, shape, stride=None, offset=0, rebuild="v2", dtype=None):
        self.storage, self.shape, self.offset = storage, tuple(shape), offset
        self.stride = tuple(stride) if stride is not None else contiguous(shape)
        self.rebuild, self.dtype = rebuild, dtype

    def __reduce_ex__(self, protocol):
        hooks = collections.OrderedDict()
        if self.rebuild == "v3":
            return (torch._utils._rebuild_tensor_v3,
                    (self.storage, self.offset, self.shape, self.stride, False, hooks,
                     getattr(torch, self.dtype), {}))
        if self.rebuild == "qtensor":
            return (torch._utils._rebuild_qtensor,
                    (self.storage, self.offset, self.shape, self.stride, (0, 1.0, 0), False,
                     hooks))
        return (torch._utils._rebuild_tensor_v2,
                (self.storage, self.offset, self.shape, self.stride, False, hooks))

    def logical_values(self):
        """The tensor's elements in row-major order (what the reader must return)."""
        out = []
        for index in np.ndindex(*self.shape) if self.shape else [()]:
            flat = self.offset + sum(i * s for i, s in zip(index, self.stride))
            out.append(float(self.storage.values[flat]))
        return out


class Parameter:
    def __init__(self, tensor):
        self.tensor = tensor

    def __reduce_ex__(self, protocol):
        return (torch._utils._rebuild_parameter,
                (self.tensor, True, collections.OrderedDict()))


def contiguous(shape):
    stride, out = 1, []
    for d in reversed(shape):
        out.append(stride)
        stride *= d
    return tuple(reversed(out))


class TorchPickler(pickle.Pickler):
    """torch.save's pickler: storages become persistent ids, keys in first-use order."""

    def __init__(self, f, protocol=2):
        super().__init__(f, protocol=protocol)
        self.keys = {}
        self.storages = {}

    def persistent_id(self, obj):
        if isinstance(obj, Storage):
            key = self.keys.setdefault(id(obj), str(len(self.keys)))
            self.storages[key] = obj
            return ("storage", getattr(torch, obj.storage_class), key, obj.location, obj.numel)
        return None


def torch_pickle(obj, protocol=2):
    buf = io.BytesIO()
    p = TorchPickler(buf, protocol)
    p.dump(obj)
    return buf.getvalue(), p.storages


# ---------------------------------------------------------------------------
# A zip writer that lays members out as miniz does for torch.save.


class _Sink:
    """A bytearray, or a file that only counts its length (for multi-GB files)."""

    def __init__(self, stream):
        self.stream, self.data, self.size = stream, bytearray(), 0

    def __iadd__(self, b):
        if self.stream is None:
            self.data += b
        else:
            self.stream.write(b)
        self.size += len(b)
        return self

    def __len__(self):
        return self.size



class ZipWriter:
    """Writes into memory (`buf`) or, given `stream`, straight to a file."""

    def __init__(self, align=64, zip64_extra_always=False, descriptor=True, stream=None):
        self.stream = stream
        self.buf = _Sink(stream)
        self.central = []
        self.align = align
        self.zip64_extra_always = zip64_extra_always
        self.descriptor = descriptor

    def add(self, name, data, method=0, flags_extra=0, crc=None, size_override=None):
        name_b = name.encode()
        offset = len(self.buf)
        crc = zlib.crc32(data) if crc is None else crc
        size = len(data) if size_override is None else size_override
        packed = data
        if method == 8:
            c = zlib.compressobj(9, zlib.DEFLATED, -15)
            packed = c.compress(data) + c.flush()
        big = self.zip64_extra_always or offset >= 0xFFFFFFFF or size >= 0xFFFFFFFF
        z64_local = struct.pack("<HHQ", 1, 8, offset) if big else b""
        start = offset + 30 + len(name_b) + len(z64_local) + 4
        pad = (-start) % self.align if self.align else 0
        extra = z64_local + b"FB" + struct.pack("<H", pad) + b"Z" * pad
        flags = 0x0800 | flags_extra  # UTF-8 names
        if self.descriptor and data:
            flags |= 0x0008
        need = 20 if method else 0
        if self.descriptor:
            local = struct.pack("<IHHHHHIIIHH", 0x04034B50, need, flags, method, 0, 0x21, 0, 0, 0,
                                len(name_b), len(extra))
        else:
            local = struct.pack("<IHHHHHIIIHH", 0x04034B50, need, flags, method, 0, 0x21, crc,
                                len(packed), size, len(name_b), len(extra))
        self.buf += local + name_b + extra
        assert not self.align or len(self.buf) % self.align == 0
        self.buf += packed
        if self.descriptor and data:
            if big:
                self.buf += struct.pack("<IIQQ", 0x08074B50, crc, len(packed), size)
            else:
                self.buf += struct.pack("<IIII", 0x08074B50, crc, len(packed), size)
        self.central.append((name_b, method, flags, crc, len(packed), size, offset))

    def finish(self, zip64_eocd=True):
        cd_offset = len(self.buf)
        for name_b, method, flags, crc, csize, size, offset in self.central:
            fields, z64 = [csize, size, offset], b""
            if self.zip64_extra_always or offset >= 0xFFFFFFFF or size >= 0xFFFFFFFF:
                # APPNOTE order: uncompressed size, compressed size, offset.
                if self.zip64_extra_always or size >= 0xFFFFFFFF:
                    z64 += struct.pack("<QQ", size, csize)
                    fields[0] = fields[1] = 0xFFFFFFFF
                z64 += struct.pack("<Q", offset)
                fields[2] = 0xFFFFFFFF
                z64 = struct.pack("<HH", 1, len(z64)) + z64
            self.buf += struct.pack("<IHHHHHHIIIHHHHHII", 0x02014B50, 0x031E, 20 if method else 0,
                                    flags, method, 0, 0x21, crc, fields[0], fields[1], len(name_b),
                                    len(z64), 0, 0, 0, 0, fields[2])
            self.buf += name_b + z64
        cd_size = len(self.buf) - cd_offset
        count = len(self.central)
        if zip64_eocd:
            z64_pos = len(self.buf)
            self.buf += struct.pack("<IQHHIIQQQQ", 0x06064B50, 44, 0x031E, 0x2D, 0, 0, count, count,
                                    cd_size, cd_offset)
            self.buf += struct.pack("<IIQI", 0x07064B50, 0, z64_pos, 1)
        self.buf += struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, min(count, 0xFFFF),
                                min(count, 0xFFFF), min(cd_size, 0xFFFFFFFF),
                                min(cd_offset, 0xFFFFFFFF), 0)
        return bytes(self.buf.data)


def torch_zip(obj, prefix="archive", protocol=2, writer=None, storage_method=0,
              pickle_method=0, byteorder=b"little", raw_pickle=None, extra_members=(),
              skip_storages=()):
    """The bytes of a torch.save file holding `obj` (or the pickle `raw_pickle`)."""
    pkl, storages = torch_pickle(obj, protocol) if raw_pickle is None else (raw_pickle, {})
    w = writer or ZipWriter()
    w.add(f"{prefix}/data.pkl", pkl, method=pickle_method)
    w.add(f"{prefix}/.format_version", b"1")
    w.add(f"{prefix}/.storage_alignment", b"64")
    if byteorder is not None:
        w.add(f"{prefix}/byteorder", byteorder)
    for key, s in storages.items():
        if key not in skip_storages:
            w.add(f"{prefix}/data/{key}", s.data, method=storage_method)
    for name, data in extra_members:
        w.add(f"{prefix}/{name}", data)
    w.add(f"{prefix}/version", b"3\n")
    w.add(f"{prefix}/.data/serialization_id", b"1234567890123456789012345678901234567890")
    return w.finish()


def check_zip(data, label):
    """The writer's own test: Python's zipfile must read every member back."""
    with zipfile.ZipFile(io.BytesIO(data)) as z:
        bad = z.testzip()
        assert bad is None, f"{label}: zipfile finds {bad} corrupt"
        assert len(z.namelist()) > 0


# ---------------------------------------------------------------------------
# Well-formed files and their manifest.


def state_dict_with_metadata(entries):
    sd = collections.OrderedDict(entries)
    sd._metadata = collections.OrderedDict({"": {"version": 1}})  # as nn.Module.state_dict()
    return sd


def basic_state_dict():
    s_f32 = Storage("float32", [i * 0.5 - 1.0 for i in range(6)])
    s_f16 = Storage("float16", [0.5, -2.0, 1024.0, 6.103515625e-05])
    s_bf16 = Storage("bfloat16", [1.0, -0.5, 3.0, 256.0, -1024.0, 0.125, 7.0, 2.5])
    shared = Storage("float32", [float(i) for i in range(24)])
    tensors = collections.OrderedDict([
        ("w_f32", Tensor(s_f32, [2, 3])),
        ("w_f16", Tensor(s_f16, [4])),
        ("w_bf16", Tensor(s_bf16, [3, 2])),
        ("bf16_offset", Tensor(s_bf16, [2, 2], offset=3)),
        ("scalar", Tensor(Storage("float32", [3.25]), [])),
        ("num_batches_tracked", Tensor(Storage("int64", [7]), [])),
        ("shared_base", Tensor(shared, [4, 6])),
        ("shared_row2", Tensor(shared, [6], offset=12)),
        ("shared_col1", Tensor(shared, [4], stride=[6], offset=1)),
        ("shared_transposed", Tensor(shared, [6, 4], stride=[1, 6])),
        ("shared_strided", Tensor(shared, [2, 3], stride=[12, 2], offset=1)),
        ("f64", Tensor(Storage("float64", [1.0 / 3.0, -2.5e300]), [2])),
        ("i32", Tensor(Storage("int32", [-2147483648, 2147483647, 0]), [3])),
        ("i16", Tensor(Storage("int16", [-32768, 12345]), [2])),
        ("i8", Tensor(Storage("int8", [-128, 127]), [2])),
        ("u8", Tensor(Storage("uint8", [0, 255, 17]), [3])),
        ("mask", Tensor(Storage("bool", [1, 0, 1]), [3])),
        ("param", Parameter(Tensor(Storage("float32", [9.0, 8.0]), [2]))),
        ("empty", Tensor(Storage("float32", []), [0, 3])),
    ])
    return tensors


def describe_tensor(name, t):
    if isinstance(t, Parameter):
        t = t.tensor
    return {"name": name, "dtype": t.dtype or t.storage.dtype, "shape": list(t.shape),
            "values": t.logical_values()}


def manifest_entry(file, tensors, under="", skipped=(), data=None):
    entry = {"file": file, "under": under,
             "tensors": [describe_tensor(n, t) for n, t in tensors.items()],
             "skipped": list(skipped)}
    if data is not None:
        entry["zip_members"] = zip_members(data)
    return entry


def zip_members(data):
    """Each member as Python's zipfile sees it, with where its data starts."""
    out = []
    with zipfile.ZipFile(io.BytesIO(data)) as z:
        for info in z.infolist():
            n, e = struct.unpack_from("<HH", data, info.header_offset + 26)
            out.append({"name": info.filename, "size": info.file_size, "crc": info.CRC,
                        "method": info.compress_type,
                        "data_offset": info.header_offset + 30 + n + e})
    return out


def write(path, data):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)


def make_handmade(out):
    manifest = []
    tensors = basic_state_dict()

    data = torch_zip(state_dict_with_metadata(tensors), prefix="basic_v2")
    check_zip(data, "basic_v2")
    write(f"{out}/basic_v2.pt", data)
    manifest.append(manifest_entry("basic_v2.pt", tensors, data=data))

    # Under "model", with training metadata around it (as upstream checkpoints).
    ckpt = collections.OrderedDict([
        ("epoch", 12),
        ("args", argparse.Namespace(lr=1e-4, name="lingbot", layers=[4, 11, 17, 23])),
        ("np_scalar", np.float32(1.5)),
        ("np_int", np.int64(5)),
        ("np_array", np.arange(4, dtype=np.int32)),
        ("config", {"a": 1, "b": {"c": "d", "e": [1, 2.5, None, True]}}),
        ("model", state_dict_with_metadata(tensors)),
        ("optimizer", {"state": {}, "param_groups": [{"lr": 0.1, "params": [0, 1]}]}),
    ])
    data = torch_zip(ckpt, prefix="under_model")
    check_zip(data, "under_model")
    write(f"{out}/under_model.pt", data)
    manifest.append(manifest_entry("under_model.pt", tensors, under="model", data=data))

    # Under "state_dict", saved to a buffer (prefix "archive"), plain dict, with
    # non-tensor entries inside the state dict itself.
    inner = collections.OrderedDict(tensors)
    inner["note"] = "not a tensor"
    inner["step"] = 3
    data = torch_zip({"state_dict": inner, "meta": {"version": 2}}, prefix="archive")
    check_zip(data, "under_state_dict")
    write(f"{out}/under_state_dict.pt", data)
    manifest.append(manifest_entry("under_state_dict.pt", tensors, under="state_dict",
                                   skipped=["note", "step"], data=data))

    # Protocol 4: FRAME, MEMOIZE, SHORT_BINUNICODE, STACK_GLOBAL...
    data = torch_zip(state_dict_with_metadata(tensors), prefix="p4", protocol=4)
    check_zip(data, "protocol4")
    write(f"{out}/protocol4.pt", data)
    manifest.append(manifest_entry("protocol4.pt", tensors, data=data))

    # Every central directory record carries a ZIP64 extra field (as the
    # records past 4 GiB in the official checkpoint do).
    data = torch_zip(state_dict_with_metadata(tensors), prefix="zip64",
                     writer=ZipWriter(zip64_extra_always=True))
    check_zip(data, "zip64")
    write(f"{out}/zip64_records.pt", data)
    manifest.append(manifest_entry("zip64_records.pt", tensors, data=data))

    # Re-zipped by a general tool: deflated members, no alignment, no data
    # descriptors, no ZIP64 records.
    w = ZipWriter(align=0, descriptor=False)
    pkl, storages = torch_pickle(state_dict_with_metadata(tensors))
    w.add("deflated/data.pkl", pkl, method=8)
    w.add("deflated/byteorder", b"little")
    for key, s in storages.items():
        w.add(f"deflated/data/{key}", s.data, method=8)
    w.add("deflated/version", b"3\n")
    data = w.finish(zip64_eocd=False)
    check_zip(data, "deflated")
    write(f"{out}/deflated.pt", data)
    manifest.append(manifest_entry("deflated.pt", tensors, data=data))

    # _rebuild_tensor_v3 over an untyped storage (what torch writes for
    # dtypes without a typed storage class), file name with dots.
    raw = Storage("float16", [1.5, -3.0, 0.25, 8.0], storage_class="UntypedStorage", numel=8)
    v3 = collections.OrderedDict([("h", Tensor(raw, [2, 2], rebuild="v3", dtype="float16"))])
    data = torch_zip(v3, prefix="my.model.v1")
    check_zip(data, "v3")
    write(f"{out}/my.model.v1.pt", data)
    manifest.append(manifest_entry("my.model.v1.pt", v3, data=data))

    # A state dict next to hostile-looking but inert metadata: a call of
    # os.system stored as a value. Nothing runs; it is skipped.
    class Evil:
        def __reduce__(self):
            return (os.system, ("touch /tmp/lingbot_pwned_by_checkpoint",))

    small = collections.OrderedDict([("w_f32", tensors["w_f32"]), ("evil", Evil())])
    data = torch_zip({"model": small, "evil_meta": Evil()}, prefix="with_evil")
    check_zip(data, "with_evil")
    write(f"{out}/evil_metadata.pt", data)
    manifest.append(manifest_entry("evil_metadata.pt",
                                   collections.OrderedDict([("w_f32", tensors["w_f32"])]),
                                   under="model", skipped=["evil"], data=data))

    # safetensors, laid out like the reference writer: header padded with
    # spaces to a multiple of 8, tensors packed in order.
    st_tensors = collections.OrderedDict([  # in an order that keeps each aligned
        ("a.f32", ("F32", [2, 3], [0.5 * i - 1 for i in range(6)])),
        ("b.i64", ("I64", [], [-7])),
        ("c.f16", ("F16", [2], [0.5, -2.0])),
        ("d.bf16", ("BF16", [2, 2], [1.0, -0.5, 3.0, 256.0])),
        ("e.bool", ("BOOL", [3], [1, 0, 1])),
        ("f.empty", ("F32", [0, 4], [])),
        ("g.u8", ("U8", [5], [1, 2, 3, 4, 255])),
    ])
    write(f"{out}/basic.safetensors", safetensors_bytes(st_tensors, {"format": "pt"}))
    manifest.append({
        "file": "basic.safetensors", "under": "", "skipped": [],
        "tensors": [{"name": n, "dtype": ST_DTYPES[d][0], "shape": s, "values": [float(x) for x in v]}
                    for n, (d, s, v) in st_tensors.items()],
    })
    # A tensor at an odd offset: the reader must copy it, not alias misaligned memory.
    odd = collections.OrderedDict([("pad", ("U8", [1], [9])), ("x", ("F32", [3], [1.0, 2.0, 3.0]))])
    write(f"{out}/misaligned.safetensors", safetensors_bytes(odd, None))
    manifest.append({
        "file": "misaligned.safetensors", "under": "", "skipped": [],
        "tensors": [{"name": n, "dtype": ST_DTYPES[d][0], "shape": s, "values": [float(x) for x in v]}
                    for n, (d, s, v) in odd.items()],
    })

    with open(f"{out}/manifest.json", "w") as f:
        json.dump({"generator": "tools/reference/make_hostile_checkpoints.py", "files": manifest},
                  f, indent=1)


ST_DTYPES = {"F32": ("float32",), "F16": ("float16",), "BF16": ("bfloat16",),
             "F64": ("float64",), "I64": ("int64",), "I32": ("int32",), "I16": ("int16",),
             "I8": ("int8",), "U8": ("uint8",), "BOOL": ("bool",)}


def safetensors_bytes(tensors, metadata, header_override=None, data_override=None):
    header, blobs, pos = {}, [], 0
    if metadata is not None:
        header["__metadata__"] = metadata
    for name, (dt, shape, values) in tensors.items():
        blob = encode(ST_DTYPES[dt][0], values) if values else b""
        header[name] = {"dtype": dt, "shape": shape, "data_offsets": [pos, pos + len(blob)]}
        blobs.append(blob)
        pos += len(blob)
    text = json.dumps(header, separators=(",", ":")).encode() if header_override is None \
        else header_override
    text += b" " * ((-len(text)) % 8)
    data = b"".join(blobs) if data_override is None else data_override
    return struct.pack("<Q", len(text)) + text + data


# ---------------------------------------------------------------------------
# Hostile files.


def op_pickle(*parts):
    """Concatenates raw pickle opcodes (bytes) into one pickle."""
    return b"".join(parts)


def make_hostile(out):
    expected = []

    def add(name, data, error=None, loads=None):
        write(f"{out}/{name}", data)
        entry = {"file": name}
        if error is not None:
            entry["error"] = error
        if loads is not None:
            entry["loads"] = loads
        expected.append(entry)

    tensors = basic_state_dict()
    good = torch_zip(state_dict_with_metadata(tensors), prefix="good")

    # -- not a checkpoint at all --
    add("empty.pt", b"", error="empty file")
    add("wrong_magic.pt", b"GARBAGE! this is not a checkpoint\n" * 4,
        error="not a PyTorch or safetensors checkpoint")
    add("png_disguised.pt", b"\x89PNG\r\n\x1a\n" + bytes(64),
        error="not a PyTorch or safetensors checkpoint")
    add("legacy.pt", pickle.dumps(0x1950A86A20F9469CFC6C, protocol=2) +
        pickle.dumps(1001, protocol=2) + pickle.dumps({"protocol_version": 1001}, protocol=2),
        error="legacy torch.save format")
    add("legacy_p4.pt", pickle.dumps(0x1950A86A20F9469CFC6C, protocol=4) +
        pickle.dumps(1001, protocol=4), error="legacy torch.save format")
    add("plain_pickle.pt", pickle.dumps({"w": [1.0, 2.0]}, protocol=2), error="plain pickle file")

    # -- truncated archives --
    add("truncated_half.pt", good[: len(good) // 2], error="no end of central directory")
    add("truncated_tail.pt", good[:-30], error="no end of central directory")

    # -- zip structure --
    add("bad_cd_offset.pt", patch_eocd(good, cd_offset=len(good) * 2, zip64=True),
        error="central directory")
    add("bad_cd_offset_classic.pt", patch_classic_only(good, cd_offset=0x7FFFFFF0),
        error="central directory")
    add("cd_count_huge.pt", patch_classic_only(good, count=0xFFFE),
        error="central directory claims 65534 entries")
    add("bad_local_offset.pt", patch_central(good, 0, offset=0x7FFFFFF0),
        error="local header offset")
    add("bad_local_sig.pt", patch_central(good, 1, offset=3), error="no local header")
    add("bad_entry_size.pt", patch_central(good, 4, csize=0x7FFFFFF0, size=0x7FFFFFF0),
        error="past the end of the archive")
    add("zip64_extra_short.pt", zip64_short_extra(good), error="ZIP64 extra field too short")
    add("zip64_locator_bad.pt", patch_locator(good, 1 << 60), error="ZIP64 end of central directory")
    add("zip64_huge_size.pt", zip64_huge(), error="past the end of the archive")
    add("duplicate_member.pt", duplicate_member(), error="appears twice")
    add("encrypted.pt", single_member_archive(b"x" * 10, flags=1, name="e/data.pkl"),
        error="encrypted")
    add("unsupported_method.pt", single_member_archive(b"x" * 10, method=12, name="e/data.pkl"),
        error="compression method 12")
    add("corrupt_deflate.pt", single_member_archive(b"\xff" * 40, method=8, size=100,
                                                    name="e/data.pkl", raw=True),
        error="corrupt deflate data")
    add("zip_bomb.pt", single_member_archive(b"\x03\x00", method=8, size=0xFFFFFFF0,
                                             name="e/data.pkl", raw=True),
        error="allowed")
    add("zip_bomb_ratio.pt", single_member_archive(b"\x03\x00", method=8, size=100_000_000,
                                                   name="e/data.pkl", raw=True),
        error="more than deflate can produce")
    add("bad_crc.pt", single_member_archive(pickle.dumps({}, protocol=2), name="e/data.pkl",
                                            crc=0xDEADBEEF),
        error="CRC-32 mismatch")
    add("no_data_pkl.pt", single_member_archive(b"hello", name="x/readme.txt"),
        error="without a data.pkl")
    add("torchscript.pt", torch_zip({}, extra_members=[("constants.pkl", b"\x80\x02).")]),
        error="TorchScript")
    add("bigendian.pt", torch_zip(state_dict_with_metadata(tensors), byteorder=b"big"),
        error="big-endian")

    # -- pickle content --
    os_system = op_pickle(b"cos\nsystem\n(S'touch /tmp/lingbot_pwned_by_checkpoint'\ntR.")
    add("os_system.pt", torch_zip(None, raw_pickle=os_system),
        error="no state dict: the checkpoint holds a call to os.system")
    add("not_a_dict.pt", torch_zip([1, 2, 3]), error="no state dict: the checkpoint holds a list")
    add("model_is_string.pt", torch_zip({"model": "oops"}), error="'model' holds a str")
    add("no_tensors.pt", torch_zip({"a": 1, "b": {"c": 2}}),
        error="the top-level dict has no tensors")
    add("empty_dict.pt", torch_zip({}), error="the top-level dict is empty")
    deep = b"\x80\x02" + b"(" * 100000 + b"l" * 100000 + b"."
    add("deep_lists.pt", torch_zip(None, raw_pickle=deep), error="no state dict")
    deep_dicts = b"\x80\x02" + b"}(X\x01\x00\x00\x00a" * 20000 + b"}" + b"u" * 20000 + b"."
    add("deep_dicts.pt", torch_zip(None, raw_pickle=deep_dicts), error="no tensors")
    # {'model': <itself>}: a cycle through the memo.
    recursive = b"\x80\x02}q\x00X\x05\x00\x00\x00modelq\x01h\x00s."
    add("recursive_dict.pt", torch_zip(None, raw_pickle=recursive), error="no state dict")
    # A DAG whose expansion is 16^20 elements: must not be walked exhaustively.
    bomb = bytearray(b"\x80\x02K\x01p0\n0")  # memo[0] = 1
    for level in range(1, 21):  # memo[level] = [memo[level - 1]] * 16
        bomb += b"(" + b"g%d\n" % (level - 1) * 16 + b"lp%d\n0" % level
    bomb += b"}X\x05\x00\x00\x00modelg20\ns."
    add("list_bomb.pt", torch_zip(None, raw_pickle=bytes(bomb)), error="no state dict")
    add("bad_opcode.pt", torch_zip(None, raw_pickle=b"\x80\x02}\xff."), error="unknown opcode")
    add("pickle_truncated.pt", torch_zip(None, raw_pickle=torch_pickle(
        state_dict_with_metadata(tensors))[0][:200]), error="bad pickle")
    add("pickle_no_stop.pt", torch_zip(None, raw_pickle=b"\x80\x02}"), error="without a STOP")
    add("stack_underflow.pt", torch_zip(None, raw_pickle=b"\x80\x02s."), error="stack underflow")
    add("memo_missing.pt", torch_zip(None, raw_pickle=b"\x80\x02h\x07."), error="memo entry 7")
    add("next_buffer.pt", torch_zip(None, raw_pickle=b"\x80\x05\x97."), error="out-of-band")
    add("huge_length.pt", torch_zip(None, raw_pickle=b"\x80\x04\x8d" + struct.pack("<Q", 1 << 62)),
        error="truncated")

    # -- tensor records --
    short = Storage("float32", [1.0] * 10, numel=100)
    add("storage_short.pt", torch_zip({"w": Tensor(short, [100])}),
        error="storage 'archive/data/0' holds 40 bytes, the pickle says 100 float32 elements")
    s6 = Storage("float32", [1.0] * 6)
    add("tensor_past_storage.pt", torch_zip({"w": Tensor(s6, [4, 4])}),
        error="needs 16 elements, its storage holds 6")
    add("offset_past_storage.pt", torch_zip({"w": Tensor(s6, [2], offset=5)}),
        error="needs 7 elements, its storage holds 6")
    add("missing_storage.pt", torch_zip({"w": Tensor(s6, [6])}, skip_storages={"0"}),
        error="storage member 'archive/data/0' is missing")
    add("negative_stride.pt", torch_zip({"w": Tensor(s6, [3], stride=[-1], offset=4)}),
        error="negative stride")
    add("negative_offset.pt", torch_zip({"w": Tensor(s6, [3], offset=-1)}),
        error="negative storage offset")
    add("huge_shape.pt", torch_zip({"w": Tensor(s6, [1 << 40, 1 << 40])}),
        error="too many elements")
    add("huge_stride.pt", torch_zip({"w": Tensor(s6, [3, 2], stride=[1 << 62, 1])}),
        error="strides reach beyond")
    add("shape_stride_mismatch.pt", torch_zip({"w": Tensor(s6, [2, 3], stride=[3])}),
        error="strides are given")
    add("two_dtypes_one_storage.pt", two_dtype_storage(), error="is used as both")
    add("qtensor.pt", torch_zip({"w": Tensor(s6, [6], rebuild="qtensor")}),
        error="_rebuild_qtensor")
    add("unknown_storage_type.pt",
        torch_zip({"w": Tensor(Storage("float32", [1.0, 2.0], storage_class="ComplexFloatStorage"),
                               [1])}),
        error="torch.ComplexFloatStorage is not supported")
    add("storage_not_persistent.pt", torch_zip(None, raw_pickle=bad_storage_arg()),
        error="expected a storage reference")
    # Loadable oddities: a non-tensor inside a state dict, a non-string key.
    add("non_tensor_entry.pt", torch_zip({"w": Tensor(s6, [6]), "lr": 0.5, 3: Tensor(s6, [6])}),
        loads={"tensors": ["w"], "skipped": ["lr", "3"]})

    # -- safetensors --
    st = collections.OrderedDict([("a", ("F32", [2], [1.0, 2.0])), ("b", ("F16", [2], [0.5, 1.0]))])
    add("st_truncated_header.safetensors", safetensors_bytes(st, None)[:20], error="past the end")
    add("st_truncated_data.safetensors", safetensors_bytes(st, None)[:-2],
        error="run past the data buffer")
    add("st_header_absurd.safetensors",
        struct.pack("<Q", 1 << 62) + b"{" + b" " * 31, error="header length 4611686018427387904 is absurd")
    add("st_not_json.safetensors",
        safetensors_bytes(st, None, header_override=b'{"a": {"dtype": "F32",'),
        error="not valid JSON")
    add("st_not_object.safetensors",
        safetensors_bytes({}, None, header_override=b'{"a": [1, 2]}', data_override=b""),
        error="header entry is not an object")
    add("st_overlap.safetensors", safetensors_bytes(st, None, header_override=json.dumps(
        {"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
         "b": {"dtype": "F16", "shape": [2], "data_offsets": [6, 10]}}).encode(),
        data_override=bytes(12)), error="overlaps")
    add("st_gap.safetensors", safetensors_bytes(st, None, header_override=json.dumps(
        {"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
         "b": {"dtype": "F16", "shape": [2], "data_offsets": [10, 14]}}).encode(),
        data_override=bytes(14)), error="gap")
    add("st_out_of_range.safetensors", safetensors_bytes(st, None, header_override=json.dumps(
        {"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
         "b": {"dtype": "F16", "shape": [2], "data_offsets": [8, 1 << 40]}}).encode(),
        data_override=bytes(12)), error="run past the data buffer")
    add("st_shape_mismatch.safetensors", safetensors_bytes(st, None, header_override=json.dumps(
        {"a": {"dtype": "F32", "shape": [3], "data_offsets": [0, 8]}}).encode(),
        data_override=bytes(8)), error="needs 12 bytes")
    add("st_unknown_dtype.safetensors", safetensors_bytes(st, None, header_override=json.dumps(
        {"a": {"dtype": "F8_E4M3", "shape": [8], "data_offsets": [0, 8]}}).encode(),
        data_override=bytes(8)), error="dtype 'F8_E4M3' is not supported")
    add("st_negative_dim.safetensors", safetensors_bytes(st, None, header_override=json.dumps(
        {"a": {"dtype": "F32", "shape": [-2], "data_offsets": [0, 8]}}).encode(),
        data_override=bytes(8)), error="non-negative integers")
    add("st_bad_offsets.safetensors", safetensors_bytes(st, None, header_override=json.dumps(
        {"a": {"dtype": "F32", "shape": [2], "data_offsets": [8, 0]}}).encode(),
        data_override=bytes(8)), error="end before they begin")
    add("st_deep_json.safetensors",
        safetensors_bytes({}, None, header_override=b'{"a":' + b"[" * 20000 + b"]" * 20000 + b"}",
                          data_override=b""), error="nests deeper")
    add("st_duplicate.safetensors", safetensors_bytes(st, None, header_override=(
        b'{"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]},'
        b' "a": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}}'),
        data_override=bytes(8)), error="appears twice")
    add("st_metadata_not_string.safetensors",
        safetensors_bytes(st, None, header_override=b'{"__metadata__": {"k": 1}}', data_override=b""),
        error="is not a string")
    add("st_extra_field.safetensors", safetensors_bytes(st, None, header_override=json.dumps(
        {"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8], "exec": "rm -rf /"}}).encode(),
        data_override=bytes(8)), error="unexpected field 'exec'")
    add("st_huge_shape.safetensors", safetensors_bytes(st, None, header_override=json.dumps(
        {"a": {"dtype": "F32", "shape": [1 << 40, 1 << 40, 1 << 40], "data_offsets": [0, 8]}}).encode(),
        data_override=bytes(8)), error="too large")

    with open(f"{out}/expected.json", "w") as f:
        json.dump({"generator": "tools/reference/make_hostile_checkpoints.py", "files": expected},
                  f, indent=1)


# Helpers that break a good archive in one precise place. They locate records
# by signature, as a reader would.

def find_eocd(data):
    return data.rindex(b"PK\x05\x06")


def patch_eocd(data, cd_offset, zip64):
    data = bytearray(data)
    if zip64:
        z = data.rindex(b"PK\x06\x06")
        struct.pack_into("<Q", data, z + 48, cd_offset)
    else:
        struct.pack_into("<I", data, find_eocd(data) + 16, cd_offset)
    return bytes(data)


def patch_classic_only(data, cd_offset=None, count=None):
    """Drops the ZIP64 records, then patches the classic EOCD."""
    data = bytearray(data)
    z = data.rindex(b"PK\x06\x06")
    eocd = find_eocd(data)
    data = data[:z] + data[eocd:]
    eocd = find_eocd(data)
    if cd_offset is not None:
        struct.pack_into("<I", data, eocd + 16, cd_offset)
    if count is not None:
        struct.pack_into("<HH", data, eocd + 8, count, count)
    return bytes(data)


def central_offsets(data):
    z = data.rindex(b"PK\x06\x06")
    count, size, offset = struct.unpack_from("<QQQ", data, z + 32)
    out, pos = [], offset
    for _ in range(count):
        out.append(pos)
        n, e, c = struct.unpack_from("<HHH", data, pos + 28)
        pos += 46 + n + e + c
    return out


def patch_central(data, index, offset=None, csize=None, size=None):
    data = bytearray(data)
    pos = central_offsets(bytes(data))[index]
    if offset is not None:
        struct.pack_into("<I", data, pos + 42, offset)
    if csize is not None:
        struct.pack_into("<I", data, pos + 20, csize)
    if size is not None:
        struct.pack_into("<I", data, pos + 24, size)
    return bytes(data)


def zip64_short_extra(good):
    """A central record with an offset marker and a 4-byte ZIP64 field."""
    w = ZipWriter(zip64_extra_always=True)
    data = torch_zip({}, writer=w)
    data = bytearray(data)
    pos = central_offsets(bytes(data))[0]
    n, e = struct.unpack_from("<HH", data, pos + 28)
    extra = pos + 46 + n
    struct.pack_into("<HH", data, extra, 1, 4)  # claims only 4 bytes: too short
    return bytes(data)


def patch_locator(good, where):
    data = bytearray(good)
    loc = data.rindex(b"PK\x06\x07")
    struct.pack_into("<Q", data, loc + 8, where)
    return bytes(data)


def zip64_huge():
    w = ZipWriter(zip64_extra_always=True)
    data = bytearray(torch_zip({}, writer=w))
    pos = central_offsets(bytes(data))[0]
    n = struct.unpack_from("<H", data, pos + 28)[0]
    struct.pack_into("<QQ", data, pos + 46 + n + 4, 1 << 63, 1 << 63)
    return bytes(data)


def duplicate_member():
    w = ZipWriter()
    w.add("d/data.pkl", pickle.dumps({}, protocol=2))
    w.add("d/data.pkl", pickle.dumps({"x": 1}, protocol=2))
    return w.finish()


def single_member_archive(payload, name, method=0, flags=0, size=None, raw=False, crc=None):
    """One member, with chosen method/flags/sizes, written without a descriptor."""
    w = ZipWriter(align=0, descriptor=False)
    if raw:
        # payload is already the compressed bytes; the directory claims `size`.
        name_b = name.encode()
        off = len(w.buf)
        w.buf += struct.pack("<IHHHHHIIIHH", 0x04034B50, 20, flags, method, 0, 0x21, 0,
                             len(payload), size, len(name_b), 0) + name_b + payload
        w.central.append((name_b, method, flags, 0, len(payload), size, off))
    else:
        w.add(name, payload, method=method, flags_extra=flags, crc=crc, size_override=size)
    return w.finish()


def two_dtype_storage():
    s = Storage("float32", [1.0, 2.0, 3.0, 4.0])
    a = Tensor(s, [4])

    class AsHalf(Tensor):
        def __reduce_ex__(self, protocol):
            return (torch._utils._rebuild_tensor_v3,
                    (self.storage, 0, (8,), (1,), False, collections.OrderedDict(),
                     torch.float16, {}))

    return torch_zip(collections.OrderedDict([("a", a), ("b", AsHalf(s, [8]))]))


def bad_storage_arg():
    # {'w': _rebuild_tensor_v2('not a storage', 0, (1,), (1,), False, OrderedDict())}
    return (b"\x80\x02}X\x01\x00\x00\x00wctorch._utils\n_rebuild_tensor_v2\n"
            b"(X\x0d\x00\x00\x00not a storageK\x00K\x01\x85K\x01\x85\x89"
            b"ccollections\nOrderedDict\n)RtRs.")


# ---------------------------------------------------------------------------
# Plain pickles written by Python itself, with a structural description.


def describe_value(v, proto, seen=None):
    """What the C++ PickleValue tree must look like for v at this protocol."""
    seen = seen if seen is not None else {}
    if v is None:
        return {"t": "None"}
    if isinstance(v, bool):
        return {"t": "bool", "v": v}
    if isinstance(v, int):
        if -(1 << 63) <= v < (1 << 63):
            return {"t": "int", "v": v}
        return {"t": "bigint"}
    if isinstance(v, float):  # exact bits: JSON has no inf, and -0.0 must survive
        return {"t": "float", "bits": struct.pack("<d", v)[::-1].hex()}
    if isinstance(v, str):
        return {"t": "str", "hex": v.encode("utf-8", "surrogatepass").hex()}
    if isinstance(v, bytes):
        return {"t": "bytes", "hex": v.hex()}
    if id(v) in seen:
        return {"t": "ref"}
    seen[id(v)] = True
    if isinstance(v, tuple):
        out = {"t": "tuple", "items": [describe_value(x, proto, seen) for x in v]}
    elif isinstance(v, list):
        out = {"t": "list", "items": [describe_value(x, proto, seen) for x in v]}
    elif isinstance(v, (set, frozenset)):
        out = {"t": "set", "n": len(v)}
    elif isinstance(v, dict):
        out = {"t": "dict", "items": [[describe_value(k, proto, seen), describe_value(x, proto, seen)]
                                       for k, x in v.items()]}
    else:
        raise TypeError(type(v))
    del seen[id(v)]
    return out


def make_pickles(out):
    values = {
        "scalars": [None, True, False, 0, 1, -1, 255, 256, 65535, 65536, -2 ** 31, 2 ** 31 - 1,
                    2 ** 31, -2 ** 63, 2 ** 63 - 1, 2 ** 64, -(2 ** 100), 0.0, -0.0, 1.5, 1e-310,
                    1.7976931348623157e308, float("inf"), -float("inf")],
        "strings": ["", "a", "héllo ✓ \U0001F600", "back\\slash\nnew line\r\x00\x1a", "x" * 300,
                    "'quoted' \"both\""],
        "containers": {"list": [1, [2, [3, []]]], "tuple1": (1,), "tuple2": (1, 2),
                       "tuple3": (1, 2, 3), "tuple5": (1, 2, 3, 4, 5), "empty": (), "dict": {},
                       1: "int key", (1, 2): "tuple key", None: "none key"},
        "big_dict": {f"layer.{i}.weight": i for i in range(1100)},
    }
    shared = [1, 2]
    values["shared"] = [shared, shared, {"again": shared}]
    recursive = [1]
    recursive.append(recursive)
    values["recursive"] = recursive
    binary = {"bytes": [b"", b"\x00\xff", bytes(range(256)), b"y" * 300]}
    sets = {"set": {1, 2, 3}, "frozen": frozenset({"a"})}

    described = []
    for proto in range(0, 6):
        for name, v in list(values.items()) + ([("binary", binary)] if proto >= 3 else []) + \
                ([("sets", sets)] if proto >= 4 else []):
            file = f"{name}_p{proto}.pkl"
            write(f"{out}/{file}", pickle.dumps(v, protocol=proto))
            described.append({"file": file, "protocol": proto, "value": describe_value(v, proto)})
    with open(f"{out}/pickles.json", "w") as f:
        json.dump({"generator": "tools/reference/make_hostile_checkpoints.py", "files": described},
                  f, separators=(",", ":"))


# ---------------------------------------------------------------------------
# Large files: the >4 GiB layout test and the memory measurement.

ZIP64_HUGE_NUMEL = (1 << 30) + (1 << 24)  # float32 elements: 4 GiB + 64 MiB of storage


class LazyStorage(Storage):
    """A storage described but not held in memory (its bytes are written elsewhere)."""

    def __init__(self, dtype, numel):
        self.dtype, self.numel, self.location = dtype, numel, "cpu"
        self.storage_class = DTYPES[dtype][0]


def make_zip64_pickle(out):
    """data.pkl for tests/checkpoint/checkpoint_zip64_test.cpp, which writes a sparse
    archive around it with storage '1' (4 GiB + 64 MiB) ending past 4 GiB."""
    small = LazyStorage("float32", 1024)
    huge = LazyStorage("float32", ZIP64_HUGE_NUMEL)
    sd = collections.OrderedDict([
        ("small", Tensor(small, [1024])),
        ("huge", Tensor(huge, [ZIP64_HUGE_NUMEL // 1024, 1024])),
        ("huge_tail", Tensor(huge, [4], offset=ZIP64_HUGE_NUMEL - 4)),
    ])
    pkl, storages = torch_pickle(state_dict_with_metadata(sd))
    assert list(storages) == ["0", "1"]
    write(f"{out}/zip64_big_data.pkl", pkl)


def write_big_checkpoint(path, gib, tensors):
    """A torch-style checkpoint of about `gib` GiB of float32 weights, written
    streaming (for measuring a reader's memory use; not a fixture)."""
    numel = int(gib * (1 << 30) / 4 / tensors)
    rows = max(1, numel // 1024)
    numel = rows * 1024
    storages = [LazyStorage("float32", numel) for _ in range(tensors)]
    sd = collections.OrderedDict(
        (f"blocks.{i}.weight", Tensor(s, [rows, 1024])) for i, s in enumerate(storages))
    pkl, keys = torch_pickle(state_dict_with_metadata(sd))
    prefix = os.path.splitext(os.path.basename(path))[0]
    rng = np.random.default_rng(0)
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "wb") as f:
        w = ZipWriter(stream=f)
        w.add(f"{prefix}/data.pkl", pkl)
        w.add(f"{prefix}/.format_version", b"1")
        w.add(f"{prefix}/.storage_alignment", b"64")
        w.add(f"{prefix}/byteorder", b"little")
        for key in keys:
            w.add(f"{prefix}/data/{key}", rng.standard_normal(numel, dtype=np.float32).tobytes())
        w.add(f"{prefix}/version", b"3\n")
        w.finish()
    with zipfile.ZipFile(path) as z:  # the directory must read back
        assert len(z.namelist()) == tensors + 5
    print(f"wrote {path}: {os.path.getsize(path)} bytes, {tensors} tensors")



def make_torch_pickles(out):
    """The data.pkl of a few torch-style files, alone: seeds for the
    fuzz_torch_pickle target, which wraps a pickle into an archive whose
    storages data/0..15 hold 1 KiB each."""
    tensors = basic_state_dict()
    write(f"{out}/torch_basic_p2.pkl", torch_pickle(state_dict_with_metadata(tensors))[0])
    write(f"{out}/torch_basic_p4.pkl", torch_pickle(state_dict_with_metadata(tensors), 4)[0])
    raw = Storage("float16", [1.5, -3.0, 0.25, 8.0], storage_class="UntypedStorage", numel=8)
    write(f"{out}/torch_v3.pkl", torch_pickle(
        {"model": {"h": Tensor(raw, [2, 2], rebuild="v3", dtype="float16")}, "epoch": 1})[0])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out", nargs="?", default=os.path.join(
        os.path.dirname(__file__), "..", "..", "tests", "fixtures", "checkpoints"))
    ap.add_argument("--big", metavar="PATH", help="instead, write one large checkpoint to PATH")
    ap.add_argument("--gib", type=float, default=4.5, help="size of --big in GiB")
    ap.add_argument("--tensors", type=int, default=1342, help="tensor count of --big")
    args = ap.parse_args()
    if args.big:
        write_big_checkpoint(args.big, args.gib, args.tensors)
        return
    out = os.path.normpath(args.out)
    make_handmade(f"{out}/handmade")
    make_zip64_pickle(f"{out}/handmade")
    make_hostile(f"{out}/hostile")
    make_pickles(f"{out}/pickles")
    make_torch_pickles(f"{out}/pickles")
    print(f"wrote fixtures under {out}")


if __name__ == "__main__":
    main()
