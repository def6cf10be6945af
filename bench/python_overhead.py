#!/usr/bin/env python3
"""The Python module's overhead per frame against the CLI, on the same run.

Runs, alternately and --repeat times each:
  cli:          lingbot-map run --images DIR ... (its own "N frames in T s" line:
                decoding, the model, spooling the outputs; no model load)
  reconstruct:  lingbot_map Model.reconstruct(images=DIR) (decoding, the
                model, stacking the arrays; no model load)
  push:         Stream.push of the same frames already preprocessed
                (3xHxW float32), one Python call a frame, then finish()
and prints the median milliseconds per frame of each and the differences,
in wall time and in CPU time (all threads; the CLI's includes its model
load and writing its files, so it is an upper bound there). On a machine
shared with other work the CPU times are the steadier figures.

  PYTHONPATH=build/python python3 bench/python_overhead.py --cli build/bin/lingbot-map \
      --model M.pt [--config C.json] --images DIR [--device cpu] [--repeat 3] [-- more engine flags]
Engine options after "--" go to both, as CLI flags (--kv-window 16) and as
keyword arguments (kv_window=16).
"""
import argparse
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

import lingbot_map


def cli_flags_to_options(flags):
    """["--kv-window", "16", "--no-dense"] -> {"kv_window": "16", "dense": False}."""
    options, i = {}, 0
    while i < len(flags):
        name = flags[i].lstrip("-").replace("-", "_")
        if i + 1 < len(flags) and not flags[i + 1].startswith("--"):
            options[name] = flags[i + 1]
            i += 2
        elif name.startswith("no_"):
            options[name[3:]] = False
            i += 1
        else:
            options[name] = True
            i += 1
    return {k: (int(v) if isinstance(v, str) and v.isdigit() else v) for k, v in options.items()}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cli", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--config")
    ap.add_argument("--images", required=True)
    ap.add_argument("--device", default="auto")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("engine", nargs="*", help="engine flags, after --")
    args = ap.parse_args()
    options = cli_flags_to_options(args.engine)

    model = lingbot_map.load(args.model, args.config, device=args.device, **options)
    print(f"lingbot_map {lingbot_map.__version__}: {model}", flush=True)
    frames = list(model.reconstruct(images=args.images)["images"])  # preprocessed once, for push; also a warm-up
    S = len(frames)

    def cpu_seconds(who):
        u = resource.getrusage(who)
        return u.ru_utime + u.ru_stime

    def cli_run():  # (wall seconds of its frame loop, CPU seconds of the whole process)
        cpu = cpu_seconds(resource.RUSAGE_CHILDREN)
        with tempfile.TemporaryDirectory() as out:
            cmd = [args.cli, "run", "--model", args.model, "--images", args.images, "--device", args.device,
                   "--out", out, *(["--config", args.config] if args.config else []), *args.engine]
            log = subprocess.run(cmd, capture_output=True, text=True, check=True).stderr
        frames_run, seconds = re.search(r"(\d+) frames in ([0-9.]+) s", log).groups()
        assert int(frames_run) == S, log
        return float(seconds), cpu_seconds(resource.RUSAGE_CHILDREN) - cpu

    def timed(fn):
        t, cpu = time.perf_counter(), cpu_seconds(resource.RUSAGE_SELF)
        fn()
        return time.perf_counter() - t, cpu_seconds(resource.RUSAGE_SELF) - cpu

    def reconstruct_run():
        return timed(lambda: model.reconstruct(images=args.images))

    def push_all():
        with model.stream() as stream:
            for frame in frames:
                stream.push(frame)
            stream.finish()

    def push_run():
        return timed(push_all)

    wall = {"cli": [], "reconstruct": [], "push": []}
    cpu = {k: [] for k in wall}
    for r in range(args.repeat):
        for name, fn in (("cli", cli_run), ("reconstruct", reconstruct_run), ("push", push_run)):
            w, c = fn()
            wall[name].append(w * 1000 / S)
            cpu[name].append(c * 1000 / S)
        print(f"round {r + 1}: " + ", ".join(f"{k} {wall[k][-1]:.2f} ms/frame (CPU {cpu[k][-1]:.2f})" for k in wall),
              flush=True)
    print(f"{S} frames of {frames[0].shape[2]}x{frames[0].shape[1]}, median of {args.repeat}:")
    for label, runs in (("wall", wall), ("CPU", cpu)):
        med = {k: statistics.median(v) for k, v in runs.items()}
        print(f"  {label}: cli {med['cli']:.2f} ms/frame, reconstruct {med['reconstruct']:.2f} "
              f"({med['reconstruct'] - med['cli']:+.2f} ms, {100 * (med['reconstruct'] / med['cli'] - 1):+.1f}%), "
              f"push {med['push']:.2f} ({med['push'] - med['cli']:+.2f} ms, "
              f"{100 * (med['push'] / med['cli'] - 1):+.1f}%)")


if __name__ == "__main__":
    sys.exit(main())
