# The ways frames go in (a folder, a list of paths, arrays of either layout),
# the errors bad inputs raise, and Ctrl-C.
import os
import signal
import threading

import numpy as np
import pytest

import lingbot_map
from conftest import write_png
from test_parity import TOLERANCE, relative_error


@pytest.fixture(scope="module")
def model(weights, config):
    # image_size 126: the fixture frames' own width, so preprocessing keeps their 126x70.
    return lingbot_map.load(weights, config, device="cpu", image_size=126)


@pytest.fixture(scope="module")
def folder(tmp_path_factory, frames_u8):
    d = tmp_path_factory.mktemp("frames")
    for i, f in enumerate(frames_u8):
        write_png(d / f"frame_{i:03d}.png", np.ascontiguousarray(f.transpose(1, 2, 0)))
    return d


def test_a_folder_a_list_of_paths_and_rgb_arrays_give_the_same_result(model, folder, frames_u8, reference):
    from_folder = model.reconstruct(images=str(folder))
    paths = sorted(folder.iterdir())
    from_paths = model.reconstruct(images=paths)  # os.PathLike items
    from_rgb = model.reconstruct(images=[f.transpose(1, 2, 0) for f in frames_u8])  # HxWx3 uint8 (strided views)
    for key, array in from_folder.items():
        np.testing.assert_array_equal(from_paths[key], array, err_msg=key)
        np.testing.assert_array_equal(from_rgb[key], array, err_msg=key)
    ref = reference("default.safetensors")
    assert relative_error(from_folder["pose_enc"], ref["pose_enc"]) < TOLERANCE
    assert relative_error(from_folder["depth"][..., 0], ref["depth"]) < TOLERANCE
    np.testing.assert_array_equal(from_folder["images"], frames_u8.astype(np.float32) / np.float32(255))


def test_a_4d_array_of_frames_and_stream_push_of_paths(model, folder, frames):
    stacked = np.stack(frames)
    from_array = model.reconstruct(images=stacked)
    from_list = model.reconstruct(images=frames)
    np.testing.assert_array_equal(from_array["extrinsic"], from_list["extrinsic"])
    paths = sorted(str(p) for p in folder.iterdir())
    with model.stream() as stream:
        per_frame = [r for p in paths for r in stream.push(p)] + stream.finish()
    np.testing.assert_array_equal(np.stack([r["extrinsic"] for r in per_frame]),
                                  model.reconstruct(images=str(folder))["extrinsic"])


def test_folder_options_first_k_and_stride(model, folder):
    full = model.reconstruct(images=str(folder))
    picked = model.reconstruct(images=str(folder), first_k=10, stride=3)  # frames 0, 3, 6, 9
    assert picked["images"].shape[0] == 4
    np.testing.assert_array_equal(picked["images"], full["images"][[0, 3, 6, 9]])


@pytest.mark.parametrize("frame, shape", [
    (np.zeros((70, 126), np.uint8), "(70, 126)"),
    (np.zeros((70, 126, 4), np.uint8), "(70, 126, 4)"),
    (np.zeros((3, 70, 126), np.float64), "(3, 70, 126)"),
    (np.zeros((70, 126, 3), np.float32), "(70, 126, 3)"),
])
def test_a_frame_of_the_wrong_shape_or_dtype_raises_naming_the_shape(model, frame, shape):
    with pytest.raises(ValueError, match=r"frame 0: shape " + shape.replace("(", r"\(").replace(")", r"\)")):
        model.reconstruct(images=[frame])
    with model.stream() as stream:
        with pytest.raises(ValueError, match="shape " + shape.replace("(", r"\(").replace(")", r"\)")):
            stream.push(frame)


def test_a_float_frame_off_the_patch_grid_raises(model):
    with pytest.raises(ValueError, match=r"shape \(3, 20, 28\).*multiples of the patch size 14"):
        model.reconstruct(images=[np.zeros((3, 20, 28), np.float32)])


def test_frames_of_two_sizes_in_one_stream_raise(model):
    with pytest.raises(RuntimeError, match="differs from the stream's"):
        model.reconstruct(images=[np.zeros((3, 28, 28), np.float32), np.zeros((3, 42, 28), np.float32)])


def test_bad_arguments_raise(weights, config, model, tmp_path):
    with pytest.raises(FileNotFoundError, match="missing.pt"):
        lingbot_map.load(tmp_path / "missing.pt", config)
    with pytest.raises(FileNotFoundError, match="missing.json"):
        lingbot_map.load(weights, tmp_path / "missing.json")
    with pytest.raises(ValueError, match="option kv_window must be >= 1, got 0"):
        lingbot_map.load(weights, config, kv_window=0)
    with pytest.raises(ValueError, match="unknown option 'kv_windw'"):
        lingbot_map.load(weights, config, kv_windw=4)
    with pytest.raises(ValueError, match="option kv_cache must be one of paged, dense, got 'flat'"):
        lingbot_map.load(weights, config, kv_cache="flat")
    with pytest.raises(TypeError, match="option threads: expected an int, a bool or a str, got float"):
        lingbot_map.load(weights, config, threads=1.5)
    with pytest.raises(ValueError, match="device gpu|option device"):
        lingbot_map.load(weights, config, device="gpu")
    with pytest.raises(FileNotFoundError, match="no such folder"):
        model.reconstruct(images=str(tmp_path / "nowhere"))
    with pytest.raises(FileNotFoundError, match="gone.png"):
        model.reconstruct(images=[str(tmp_path / "gone.png")])
    with pytest.raises(ValueError, match="give images=... or video="):
        model.reconstruct()
    with pytest.raises(RuntimeError, match="no .png, .jpg or .jpeg images"):
        model.reconstruct(images=str(tmp_path))
    with pytest.raises(ValueError, match="option kv_window must be >= 1"):
        model.stream(kv_window=0)
    with pytest.raises(TypeError, match="expected an image path or a NumPy array, got int"):
        model.stream().push(3)
    (tmp_path / "junk.pt").write_bytes(b"not a checkpoint")
    with pytest.raises(RuntimeError, match="junk.pt"):
        lingbot_map.load(tmp_path / "junk.pt", config)


def test_errors_carry_the_clis_messages(cli, weights, config, tmp_path):
    if cli is None:
        pytest.skip("LINGBOT_CLI not set (ctest sets it)")
    import subprocess

    def cli_error(*args):
        r = subprocess.run([cli, *args], capture_output=True, text=True)
        assert r.returncode == 1
        return r.stderr.strip().splitlines()[-1].removeprefix("error: ")

    missing = str(tmp_path / "missing.pt")
    (tmp_path / "frames").mkdir()
    write_png(tmp_path / "frames" / "a.png", np.zeros((28, 28, 3), np.uint8))
    with pytest.raises(FileNotFoundError) as e:
        lingbot_map.load(missing, config)
    assert str(e.value) == cli_error("run", "--model", missing, "--config", config, "--images",
                                     str(tmp_path / "frames"), "--out", str(tmp_path / "out"))
    model = lingbot_map.load(weights, config, device="cpu")
    with pytest.raises(FileNotFoundError) as e:
        model.reconstruct(images=str(tmp_path / "nowhere"))
    assert str(e.value) == cli_error("run", "--model", weights, "--config", config, "--images",
                                     str(tmp_path / "nowhere"), "--out", str(tmp_path / "out"))


def test_ctrl_c_interrupts_a_long_reconstruct(weights, config):
    model = lingbot_map.load(weights, config, device="cpu", dense=False)
    # 100,000 frames (one buffer, broadcast): far more than run before the signal lands.
    frames = np.broadcast_to(np.full((3, 14, 14), 0.5, np.float32), (100_000, 3, 14, 14))
    timer = threading.Timer(1.0, os.kill, (os.getpid(), signal.SIGINT))
    timer.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            model.reconstruct(images=frames)
    finally:
        timer.cancel()


def test_reconstruct_gives_the_clis_predictions_npz(cli, weights, config, folder, tmp_path):
    # The same folder (and, with FFmpeg, the same video) through `lingbot-map run` and reconstruct().
    if cli is None:
        pytest.skip("LINGBOT_CLI not set (ctest sets it)")
    import shutil
    import subprocess

    model = lingbot_map.load(weights, config, device="cpu", image_size=126)
    inputs = [("images", str(folder))]
    if shutil.which("ffmpeg"):
        video = tmp_path / "clip.mp4"
        subprocess.run(["ffmpeg", "-loglevel", "error", "-framerate", "10", "-i", str(folder / "frame_%03d.png"),
                        "-c:v", "libx264", "-pix_fmt", "yuv444p", "-qp", "0", str(video)], check=True)
        inputs.append(("video", str(video)))
    for kind, source in inputs:
        out = tmp_path / f"run_{kind}"
        subprocess.run([cli, "run", "--model", weights, "--config", config, "--device", "cpu", "--image-size", "126",
                        f"--{kind}", source, "--out", str(out)], check=True, capture_output=True)
        npz = np.load(out / "predictions.npz")
        result = model.reconstruct(**{kind: source})
        # predictions.npz also names the input frames (`frames`, docs/outputs.md); reconstruct() does not.
        assert sorted(result) == sorted(set(npz.files) - {"frames"}), kind
        for key in result:
            assert result[key].shape == npz[key].shape and result[key].dtype == npz[key].dtype, (kind, key)
            np.testing.assert_array_equal(result[key], npz[key], err_msg=f"{kind}: {key}")
