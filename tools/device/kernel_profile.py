#!/usr/bin/env python3
"""Per-kernel time of one streaming frame, from Nsight Compute's CSV.

On the GPU machine `tools/device/gpu_check.sh --kernel-profile` runs it;
by hand:

  ncu --clock-control none --launch-skip 7000 --metrics gpu__time_duration.sum \\
      --csv --page raw build-device/bin/lingbot-map bench --device cuda --frames 10 ... > ncu.csv
  tools/device/kernel_profile.py ncu.csv

ncu serialises the kernels and times each alone, so the sum is the frame's
GPU work without overlap or launch gaps. Frames are cut at the encoder's
first kernel (patchify_kernel); the last cut is a steady streaming frame.
Prints the frame's kernels grouped by name (largest first) and writes the
kernel sequence, in launch order, next to the CSV for mapping to stages.
"""
import collections
import csv
import re
import sys


def short(name: str) -> str:
    name = name.replace("(anonymous namespace)::", "").replace("<unnamed>::", "")
    name = re.sub(r"\(.*", "", name)  # drop the argument list
    name = re.sub(r"^void ", "", name)
    name = re.sub(r"^(lingbot::)?(cuda::)?(attn::)?(kernels::)?", "", name)
    return name[:90]


def main() -> None:
    path = sys.argv[1]
    rows = []
    with open(path, newline="") as f:
        lines = [l for l in f if l.startswith('"')]
    reader = csv.DictReader(lines)
    for r in reader:
        v = r.get("gpu__time_duration.sum", "")
        try:
            ns = float(v.replace(",", ""))
        except ValueError:
            continue  # the units row
        rows.append((short(r["Kernel Name"]), r.get("Grid Size", ""), r.get("Block Size", ""), ns))
    starts = [i for i, r in enumerate(rows) if r[0].startswith("patchify_kernel")]
    if not starts:
        print("no patchify_kernel; first names:", sorted({r[0] for r in rows})[:40])
    print(f"{len(rows)} kernels, {len(starts)} frames (patchify launches)")
    if len(starts) < 2:
        return
    for k in range(max(0, len(starts) - 4), len(starts)):
        seg = rows[starts[k]: starts[k + 1] if k + 1 < len(starts) else len(rows)]
        print(f"segment {k}: {len(seg)} kernels, {sum(r[3] for r in seg) / 1e6:.3f} ms of kernel time")
    frame = rows[starts[-2]: starts[-1]]  # the last complete streaming frame
    total = sum(r[3] for r in frame)
    by_name = collections.defaultdict(lambda: [0, 0.0])
    for name, grid, block, ns in frame:
        key = f"{name} grid{grid} block{block}"
        by_name[key][0] += 1
        by_name[key][1] += ns
    print(f"\nlast complete frame: {len(frame)} kernels, {total / 1e6:.3f} ms")
    print(f"{'ms':>8} {'share':>6} {'calls':>5} {'us/call':>8}  kernel")
    for key, (n, ns) in sorted(by_name.items(), key=lambda kv: -kv[1][1]):
        print(f"{ns / 1e6:8.3f} {100 * ns / total:5.1f}% {n:5d} {ns / n / 1e3:8.1f}  {key}")
    with open(path + ".sequence.txt", "w") as out:
        for name, grid, block, ns in frame:
            out.write(f"{ns / 1e3:9.1f} us  {name}  grid{grid} block{block}\n")


if __name__ == "__main__":
    main()
