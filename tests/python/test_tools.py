# inspect(), export(), the version, and memory over a long stream.
import json
import pathlib
import re

import numpy as np
import pytest

import lingbot_map
from conftest import FIXTURES, read_safetensors


def test_version_is_the_projects():
    cmake = (pathlib.Path(__file__).resolve().parents[2] / "CMakeLists.txt").read_text()
    assert lingbot_map.__version__ == re.search(r"project\(lingbot_map VERSION ([0-9.]+)", cmake).group(1)


def test_inspect_lists_the_tensors_and_checks_the_config(weights, config, tmp_path, cli):
    info = lingbot_map.inspect(weights, config)
    assert info["fits"] and info["ok"] and info["missing"] == [] and info["unexpected"] == []
    assert info["parameters"] == sum(int(np.prod(shape)) for _, shape in info["tensors"].values())
    if cli is not None:  # the same tensors as `lingbot-map inspect --all` lists
        import subprocess

        listing = subprocess.run([cli, "inspect", weights, "--config", config, "--all"], capture_output=True,
                                 text=True, check=True).stdout
        rows = re.findall(r"^(\S+)\s+(\w+)\s+\[([0-9, ]*)\]$", listing, re.M)
        assert len(rows) == len(info["tensors"]) > 0
        for name, dtype, shape in rows:
            assert info["tensors"][name] == (dtype, tuple(int(n) for n in shape.split(",") if n.strip())), name
    official = lingbot_map.inspect(weights)  # the official architecture: the small weights do not fit
    assert not official["ok"] and official["mis_shaped"]
    with pytest.raises(FileNotFoundError):
        lingbot_map.inspect(tmp_path / "missing.pt")


def test_export_ply_writes_the_confident_points(weights, config, frames, tmp_path):
    model = lingbot_map.load(weights, config, device="cpu")
    result = model.reconstruct(images=frames)
    threshold = float(np.median(result["depth_conf"]))
    summary = lingbot_map.export(result, "ply", tmp_path, conf_threshold=threshold)
    # Counted here, independently: finite points whose confidence exceeds the threshold.
    conf, points = result["depth_conf"], result["world_points"]
    expected = int(np.sum((conf > threshold) & np.all(np.isfinite(points), axis=-1)))
    assert summary["points"] == expected > 0
    header = (tmp_path / "points.ply").read_bytes().split(b"end_header")[0].decode()
    assert f"element vertex {expected}" in header
    with pytest.raises(ValueError, match="formats"):
        lingbot_map.export(result, "pdf", tmp_path)
    with pytest.raises(ValueError, match="'depth' has shape"):
        lingbot_map.export({**result, "depth": result["depth"][..., 0]}, "ply", tmp_path)
    with pytest.raises(FileNotFoundError):
        lingbot_map.export(tmp_path / "no-run", "ply")


def rss_kib():
    for line in pathlib.Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS")


def test_memory_does_not_grow_over_1000_pushes(weights, tmp_path):
    # Without the cross-frame special tokens, which upstream's KV cache keeps
    # for every frame by design, the engine's memory is bounded by the window.
    cfg = json.loads((FIXTURES / "config.json").read_text())
    cfg["kv_cache_cross_frame_special"] = False
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    model = lingbot_map.load(weights, tmp_path / "config.json", device="cpu")
    frame = np.random.default_rng(0).random((3, 42, 42), dtype=np.float32)
    per_frame_results_kib = 42 * 42 * (1 + 1 + 3) * 4 / 1024  # depth, depth_conf, world_points
    with model.stream() as stream:
        for i in range(1000):
            for r in stream.push(frame):
                assert r["depth"].shape == (42, 42, 1)
            if i == 199:
                after_warm_up = rss_kib()
        growth = rss_kib() - after_warm_up
    # 800 frames' results kept by mistake would be 800 * 34 KiB = 27 MiB; the
    # engine itself keeps about 4 KiB a frame (`lingbot-map bench` shows the same).
    assert growth < 800 * per_frame_results_kib / 3, f"RSS grew {growth} KiB over 800 pushes"
