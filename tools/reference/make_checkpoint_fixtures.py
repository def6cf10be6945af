#!/usr/bin/env python3
"""Writes small real torch.save files for tests/checkpoint/checkpoint_torch_test.cpp.

Needs PyTorch (written for 2.11) and numpy; run it where torch is installed:

    python tools/reference/make_checkpoint_fixtures.py tests/fixtures/checkpoints/torch

Writes a few .pt files (each well under 1 MB) and manifest.json, which gives
for every tensor of every file its name, dtype, shape, storage offset,
contiguity, the name of another tensor it shares storage with, and reference
numbers computed by torch in float64: the sum, the sum of absolute values,
the first values and a few values at fixed flat indices. The C++ test
compares the loaded tensors with these numbers. Files that must fail to load
carry the text the error must contain instead.
"""

import argparse
import collections
import io
import json
import os
import sys

import torch

try:
    import numpy as np
except ImportError:  # numpy only decorates the metadata files
    np = None


def reference(name, t, all_tensors):
    """What the C++ reader must reproduce for tensor `t`."""
    t = t.detach()
    flat = t.cpu().reshape(-1).to(torch.float64)
    n = flat.numel()
    samples = sorted({0, n // 3, n // 2, n - 1} if n > 0 else set())
    shares = None
    for other_name, other in all_tensors.items():
        if other_name == name:
            break
        if other.untyped_storage().data_ptr() == t.untyped_storage().data_ptr():
            shares = other_name
            break
    return {
        "name": name,
        "dtype": str(t.dtype).replace("torch.", ""),
        "shape": list(t.shape),
        "storage_offset": t.storage_offset(),
        "contiguous": t.is_contiguous(),
        "shares_storage_with": shares,
        "sum": flat.sum().item(),
        "abs_sum": flat.abs().sum().item(),
        "first": flat[:8].tolist(),
        "samples": [[i, flat[i].item()] for i in samples],
    }


def tensors_of(sd):
    return collections.OrderedDict((k, v) for k, v in sd.items()
                                   if isinstance(k, str) and isinstance(v, torch.Tensor))


def skipped_of(sd):
    return [str(k) for k, v in sd.items() if not (isinstance(k, str) and isinstance(v, torch.Tensor))]


class Fixtures:
    def __init__(self, out):
        self.out = out
        self.files = []
        os.makedirs(out, exist_ok=True)

    def save(self, file, obj, state_dict, under="", **save_args):
        path = os.path.join(self.out, file)
        torch.save(obj, path, **save_args)
        tensors = tensors_of(state_dict)
        self.files.append({
            "file": file,
            "under": under,
            "tensors": [reference(k, v, tensors) for k, v in tensors.items()],
            "skipped": skipped_of(state_dict),
        })
        # Round trip through torch itself: the file must hold what we describe.
        back = torch.load(path, map_location="cpu", weights_only=False)
        back_sd = back[under] if under else back
        for k, v in tensors.items():
            assert torch.equal(back_sd[k].cpu(), v.detach().cpu()), (file, k)

    def save_raw(self, file, data, manifest_entry):
        with open(os.path.join(self.out, file), "wb") as f:
            f.write(data)
        self.files.append(dict(manifest_entry, file=file))

    def expect_error(self, file, obj, error, **save_args):
        torch.save(obj, os.path.join(self.out, file), **save_args)
        self.files.append({"file": file, "error": error})

    def write_manifest(self):
        with open(os.path.join(self.out, "manifest.json"), "w") as f:
            json.dump({"torch_version": torch.__version__,
                       "generator": "tools/reference/make_checkpoint_fixtures.py",
                       "files": self.files}, f, indent=1)


class SmallNet(torch.nn.Module):
    """A little of everything a state dict holds: weights, biases, norms,
    BatchNorm buffers (int64 num_batches_tracked), an embedding, a parameter."""

    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(8, 6)
        self.norm = torch.nn.LayerNorm(6)
        self.bn = torch.nn.BatchNorm1d(6)
        self.embed = torch.nn.Embedding(5, 4)
        self.blocks = torch.nn.ModuleList([torch.nn.Linear(6, 6, bias=False) for _ in range(2)])
        self.scale = torch.nn.Parameter(torch.full((6,), 0.5))
        self.register_buffer("pos", torch.arange(12, dtype=torch.float32).reshape(2, 6))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out", nargs="?", default=os.path.join(
        os.path.dirname(__file__), "..", "..", "tests", "fixtures", "checkpoints", "torch"))
    args = ap.parse_args()
    torch.manual_seed(0)
    fx = Fixtures(os.path.normpath(args.out))

    net = SmallNet()
    with torch.no_grad():
        net.bn.running_mean.uniform_(-1, 1)
        net.bn.num_batches_tracked += 7
    sd = net.state_dict()  # OrderedDict with _metadata, like every nn.Module

    # 1. A module's state dict at top level (fp32), and the same in fp16 / bf16.
    fx.save("module_fp32.pt", sd, sd)
    sd16 = collections.OrderedDict((k, v.half() if v.is_floating_point() else v) for k, v in sd.items())
    fx.save("module_fp16.pt", sd16, sd16)
    sdbf = collections.OrderedDict((k, v.bfloat16() if v.is_floating_point() else v)
                                   for k, v in sd.items())
    fx.save("module_bf16.pt", sdbf, sdbf)

    # 2. Views: storage offsets, strides, shared storage, 0-d, empty, broadcast.
    base = torch.arange(24, dtype=torch.float32).reshape(4, 6)
    hbase = torch.randn(32).to(torch.bfloat16)
    views = collections.OrderedDict([
        ("base", base),
        ("row2", base[2]),                        # offset 12, contiguous
        ("offset_flat", base.view(-1)[5:17]),     # offset 5, contiguous
        ("col1", base[:, 1]),                     # stride (6,)
        ("transposed", base.t()),                 # strides (1, 6)
        ("strided", base[::2, ::3]),              # strides (12, 3)
        ("expanded", torch.randn(1, 3).expand(4, 3)),  # stride 0
        ("scalar", torch.tensor(3.5)),
        ("empty", torch.empty(0, 3)),
        ("bf16_base", hbase),
        ("bf16_window", hbase[4:20].view(4, 4)),  # bf16 view with offset
        ("bf16_transposed", hbase[:16].view(4, 4).t()),
    ])
    fx.save("views.pt", views, views)

    # 3. Under "model", with training metadata around it (as upstream checkpoints).
    # One optimiser step, so the optimizer state holds tensors too (beside,
    # not inside, the state dict). The step updates `sd`'s tensors in place;
    # the files below describe them as they are when saved.
    opt = torch.optim.SGD(net.parameters(), lr=0.1, momentum=0.9)
    net.norm(net.proj(torch.randn(2, 8))).sum().backward()
    opt.step()
    meta = collections.OrderedDict([
        ("epoch", 12),
        ("args", argparse.Namespace(lr=1e-4, name="lingbot", layers=[4, 11, 17, 23])),
        ("config", {"img_size": 518, "nested": {"a": [1, 2.5, None, True], "s": "x"}}),
        ("model", sd),
        ("optimizer", opt.state_dict()),
    ])
    if np is not None:
        meta["np_scalar"] = np.float32(1.5)
        meta["np_int"] = np.int64(5)
        meta["np_array"] = np.arange(4, dtype=np.int32)
    fx.save("under_model.pt", meta, sd, under="model")

    # 4. Under "state_dict", saved through a buffer (archive name "archive").
    buf = io.BytesIO()
    wrapped = {"state_dict": sd, "meta": {"version": 2}}
    torch.save(wrapped, buf)
    with open(os.path.join(fx.out, "under_state_dict.pt"), "wb") as f:
        f.write(buf.getvalue())
    tensors = tensors_of(sd)
    fx.files.append({"file": "under_state_dict.pt", "under": "state_dict",
                     "tensors": [reference(k, v, tensors) for k, v in tensors.items()],
                     "skipped": []})

    # 5. Integer, bool and float64 tensors; non-tensor entries in the state dict.
    ints = collections.OrderedDict([
        ("i64", torch.tensor([-(2 ** 40), 0, 2 ** 40])),
        ("i32", torch.tensor([-5, 7], dtype=torch.int32)),
        ("i16", torch.tensor([-300, 300], dtype=torch.int16)),
        ("i8", torch.tensor([-128, 127], dtype=torch.int8)),
        ("u8", torch.tensor([0, 255], dtype=torch.uint8)),
        ("mask", torch.tensor([True, False, True])),
        ("f64", torch.tensor([1.0 / 3.0, -2.5e300], dtype=torch.float64)),
        ("step", 3),
        ("lr", 0.5),
        (7, torch.zeros(2)),
    ])
    fx.save("ints_and_notes.pt", ints, ints)

    # 6. Parameters saved directly (torch._utils._rebuild_parameter).
    params = collections.OrderedDict([("p", torch.nn.Parameter(torch.randn(3, 3))),
                                      ("frozen", torch.nn.Parameter(torch.randn(2), requires_grad=False))])
    fx.save("parameters.pt", params, params)

    # 7. Pickle protocol 4, and a file name with dots (archive name "my.model.v1").
    fx.save("protocol4.pt", sd, sd, pickle_protocol=4)
    fx.save("my.model.v1.pt", sd, sd)

    # 8. A bigger tensor (alignment and sizes past a few pages).
    big = collections.OrderedDict([("w", torch.randn(256, 300)), ("h", torch.randn(300, 64).half())])
    fx.save("bigger.pt", big, big)

    # 9. Saved from the GPU (location 'cuda:0' in the persistent ids).
    if torch.cuda.is_available():
        gpu = collections.OrderedDict((k, v.cuda()) for k, v in sd.items())
        fx.save("cuda.pt", gpu, gpu)

    # 10. Must fail, with these words in the one-line error.
    fx.expect_error("legacy.pt", sd, "legacy torch.save format", _use_new_zipfile_serialization=False)
    fx.expect_error("no_tensors.pt", {"epoch": 3, "args": {"lr": 0.1}}, "no state dict")
    fx.expect_error("list_top.pt", [torch.zeros(2)], "no state dict")
    if hasattr(torch, "uint16"):
        fx.expect_error("uint16.pt", {"w": torch.zeros(3, dtype=torch.uint16)}, "uint16")

    fx.write_manifest()
    total = sum(os.path.getsize(os.path.join(fx.out, f["file"])) for f in fx.files)
    print(f"wrote {len(fx.files)} files ({total} bytes) and manifest.json to {fx.out} "
          f"with torch {torch.__version__}", file=sys.stderr)


if __name__ == "__main__":
    main()
