# The small fixture model through reconstruct() and through a Stream gives
# upstream PyTorch's answers (tests/fixtures/model_small), with the C++
# parity tests' tolerances (tests/model/parity_test.cpp), for both KV-cache
# layouts; and the two ways in give the same arrays.
import json
import pathlib

import numpy as np
import pytest

import lingbot_map

FIXTURES = pathlib.Path(__file__).resolve().parent.parent / "fixtures" / "model_small"

TOLERANCE = 1e-4  # the project's fp32 parity bar
LAYOUT_TOLERANCE = 2e-5  # dense vs paged: summation order only


def relative_error(ours, theirs):
    ours = np.asarray(ours, np.float64).ravel()
    theirs = np.asarray(theirs, np.float64).ravel()
    assert ours.size == theirs.size
    num, den = np.sum((ours - theirs) ** 2), np.sum(theirs**2)
    return float(np.sqrt(num / den) if den else np.sqrt(num))


def variant(manifest, name):
    return next(v for v in manifest["variants"] if v["name"] == name)


# The fixture's reference arrays, from a reconstruct()-shaped result.
def comparable(result, v, S):
    out = {k: result[k] for k in ("pose_enc", "extrinsic", "intrinsic")}
    if v["name"] == "default":
        out["depth"] = result["depth"][..., 0]
        out["depth_conf"] = result["depth_conf"]
        for f in (0, S // 2, S - 1):
            out[f"world_points_f{f}"] = result["world_points"][f]
    else:
        for f in v["depth_frames"]:
            out[f"depth_f{f}"] = result["depth"][f]
            out[f"depth_conf_f{f}"] = result["depth_conf"][f]
    return out


def stacked(per_frame):
    keys = ("pose_enc", "extrinsic", "intrinsic", "depth", "depth_conf", "world_points")
    return {k: np.stack([r[k] for r in per_frame]) for k in keys}


def streamed(model, frames):
    results = []
    with model.stream() as stream:
        for frame in frames:
            results += stream.push(frame)
        results += stream.finish()
    return results


@pytest.mark.parametrize("name", ["default", "keyframe2"])
def test_reconstruct_and_stream_match_upstream_in_both_layouts(name, manifest, weights, config, frames, reference):
    v = variant(manifest, name)
    ref = reference(v["file"])
    S = manifest["frames"]
    by_layout = {}
    for layout in ("dense", "paged"):
        model = lingbot_map.load(weights, config, device="cpu", kv_cache=layout,
                                 keyframe_interval=v["keyframe_interval"],
                                 num_scale_frames=manifest["num_scale_frames"])
        result = model.reconstruct(images=frames)
        per_frame = streamed(model, frames)
        assert [r["index"] for r in per_frame] == list(range(S))
        for way, got in (("reconstruct", result), ("stream", stacked(per_frame))):
            for key, ours in comparable(got, v, S).items():
                err = relative_error(ours, ref[key])
                assert err < TOLERANCE, f"{name} / {layout} / {way}: {key} relative error {err}"
        by_layout[layout] = comparable(result, v, S)
    for key, dense in by_layout["dense"].items():
        err = relative_error(by_layout["paged"][key], dense)
        assert err < LAYOUT_TOLERANCE, f"{name}: paged vs dense {key} {err}"


def test_stream_results_equal_reconstruct_results(weights, config, frames):
    model = lingbot_map.load(weights, config, device="cpu")
    result = model.reconstruct(images=frames)
    per_frame = streamed(model, frames)
    for key, array in stacked(per_frame).items():
        np.testing.assert_array_equal(array, result[key], err_msg=key)
    np.testing.assert_array_equal(result["images"], np.stack(frames))
    assert result["depth"].shape == (14, 70, 126, 1)
    assert result["world_points"].shape == (14, 70, 126, 3)
    assert result["images"].shape == (14, 3, 70, 126)
    assert all(a.dtype == np.float32 for a in result.values())


def test_results_own_their_buffers_without_copies(weights, config, frames):
    model = lingbot_map.load(weights, config, device="cpu")
    result = model.reconstruct(images=frames[:4])
    for key, array in result.items():
        # A view of the engine's buffer (its base is the capsule that frees it), not a copy NumPy made.
        assert array.base is not None and not isinstance(array.base, np.ndarray), key
        assert array.flags["C_CONTIGUOUS"], key


def test_a_stream_trails_by_the_scale_phase_then_one_frame_per_push(weights, config, frames, manifest):
    # Upstream's streaming order (lingbot.h): nothing while the scale frames fill, then all of them.
    model = lingbot_map.load(weights, config, device="cpu", pipeline_depth=0)
    n = manifest["num_scale_frames"]
    with model.stream() as stream:
        counts = [len(stream.push(f)) for f in frames[:6]]
        assert counts == [0] * (n - 1) + [n] + [1] * (6 - n)
        assert stream.frames_pushed == 6
        stream.reset()
        assert stream.frames_pushed == 0
        assert stream.finish() == []
    assert stream.closed


def test_cameras_only_without_dense_outputs(weights, config, frames):
    model = lingbot_map.load(weights, config, device="cpu")
    full = model.reconstruct(images=frames)
    cameras = model.reconstruct(images=frames, dense=False)
    assert sorted(cameras) == ["extrinsic", "intrinsic", "pose_enc"]
    np.testing.assert_array_equal(cameras["extrinsic"], full["extrinsic"])


# Windowed mode (upstream's inference_windowed) through Python: the same
# answers as upstream's on one of the window fixtures
# (tools/reference/make_window_fixtures.py), frame types included.
def test_windowed_reconstruct_matches_upstream(manifest, weights, config, frames, reference):
    windows = json.loads((FIXTURES / "window_manifest.json").read_text())
    v = next(x for x in windows["variants"] if x["name"] == "w5_okf2_kf2")
    ref = reference(v["file"])
    model = lingbot_map.load(weights, config, device="cpu", num_scale_frames=manifest["num_scale_frames"],
                             mode="windowed", window_size=v["window_size"], overlap_size=v["overlap_size"],
                             overlap_keyframes=v["overlap_keyframes"], keyframe_interval=v["keyframe_interval"])
    result = model.reconstruct(images=frames)
    for key in ("pose_enc", "extrinsic", "intrinsic"):
        err = relative_error(result[key], ref[key])
        assert err < TOLERANCE, f"windowed {key} relative error {err}"
    for f in v["dense_frames"]:
        assert relative_error(result["depth"][f, ..., 0], ref[f"depth_f{f}"]) < TOLERANCE
    assert result["frame_type"].dtype == np.uint8
    assert result["frame_type"].tolist() == ref["frame_type"].astype(np.uint8).tolist()
