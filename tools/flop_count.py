#!/usr/bin/env python3
"""Floating-point work of one LingBot-Map step at the official size.

Counts the multiply-adds of the matrix products, attention and the DPT
convolutions as 2 FLOPs each (what a kernel's GFLOP/s figure counts), from
the architecture alone: no model, no weights. docs/PERF.md uses it to put a
floor under the CPU path's time ("How far from the machine's peak"): a step
cannot take less than its FLOPs divided by the machine's measured FMA peak.

    python3 tools/flop_count.py [--height 378] [--width 504] [--scale 8]
                                [--frame 10] [--window 64]

Element-wise passes (norms, GELU, softmax's exponentials) are left out; they
are not FMAs and would only raise the floor.
"""
import argparse

EMBED = 1024          # encoder and aggregator width
MLP = 4 * EMBED       # MLP hidden width
BLOCKS = 24           # encoder blocks; aggregator frame blocks; global blocks
PATCH = 14
ENCODER_SPECIAL = 5   # DINOv2: class token + 4 registers
AGGREGATOR_SPECIAL = 6  # camera, 4 registers, scale
DPT_OUT = (256, 512, 1024, 1024)  # projections of the 4 selected layers
DPT_FEATURES = 256
CAMERA_WIDTH = 2 * EMBED
CAMERA_BLOCKS = 4
CAMERA_ITERATIONS = 4


def linear(rows, k, n):
    return 2.0 * rows * k * n


def block_products(rows):
    """qkv, projection, fc1, fc2 of one transformer block."""
    return linear(rows, EMBED, 3 * EMBED) + linear(rows, EMBED, EMBED) + linear(rows, EMBED, MLP) + linear(
        rows, MLP, EMBED)


def attention(queries, keys, width=EMBED):
    """Q K^T and P V over all heads: 4 * queries * keys * head_dim * heads."""
    return 4.0 * queries * keys * width


def conv(h, w, cin, cout, k, stride=1):
    oh, ow = (h + 2 * (k // 2) - k) // stride + 1, (w + 2 * (k // 2) - k) // stride + 1
    return 2.0 * oh * ow * cout * cin * k * k


def dpt(gh, gw):
    """One frame's DPT head: projections, resizes, refinenets, output convs."""
    H, W = gh * PATCH, gw * PATCH
    F = DPT_FEATURES
    total = sum(linear(gh * gw, 2 * EMBED, oc) for oc in DPT_OUT)
    # resize layers: transposed convs x4 and x2 (stride = kernel: one MAC per
    # input element, output channel and kernel tap), identity, conv s2.
    total += 2.0 * gh * gw * DPT_OUT[0] * DPT_OUT[0] * 16
    total += 2.0 * gh * gw * DPT_OUT[1] * DPT_OUT[1] * 4
    total += conv(gh, gw, DPT_OUT[3], DPT_OUT[3], 3, 2)
    levels = [(4 * gh, 4 * gw), (2 * gh, 2 * gw), (gh, gw), ((gh - 1) // 2 + 1, (gw - 1) // 2 + 1)]
    for (h, w), oc in zip(levels, DPT_OUT):
        total += conv(h, w, oc, F, 3)  # layer*_rn
    # refinenets 4..1: residual units (2 convs each; refinenet4 has one unit,
    # the others two) at the level's size, then a 1x1 out_conv after a 2x resize.
    for i, (h, w) in enumerate(reversed(levels)):
        units = 1 if i == 0 else 2
        total += units * 2 * conv(h, w, F, F, 3)
        nh, nw = (levels[-2 - i] if i < 3 else (2 * levels[0][0], 2 * levels[0][1]))
        total += conv(nh, nw, F, F, 1)
    total += conv(2 * levels[0][0], 2 * levels[0][1], F, F // 2, 3)  # output_conv1
    total += conv(H, W, F // 2, 32, 3) + conv(H, W, 32, 2, 1)  # output_conv2
    return total


def camera(stored_frames):
    per_iteration = CAMERA_BLOCKS * (
        linear(1, CAMERA_WIDTH, 3 * CAMERA_WIDTH) + linear(1, CAMERA_WIDTH, CAMERA_WIDTH) +
        linear(1, CAMERA_WIDTH, 4 * CAMERA_WIDTH) + linear(1, 4 * CAMERA_WIDTH, CAMERA_WIDTH) +
        attention(1, stored_frames, CAMERA_WIDTH))
    return CAMERA_ITERATIONS * per_iteration


def step(frames, keys, gh, gw, stored_frames):
    """`frames` frames together attending to `keys` cached keys in the global blocks."""
    n_enc = gh * gw + ENCODER_SPECIAL
    n = gh * gw + AGGREGATOR_SPECIAL
    parts = {
        "matrix products (encoder, frame and global blocks)":
            frames * BLOCKS * (block_products(n_enc) + 2 * block_products(n)),
        "encoder and frame attention": frames * BLOCKS * (attention(n_enc, n_enc) + attention(n, n)),
        "global attention": BLOCKS * attention(frames * n, keys),
        "depth head": frames * dpt(gh, gw),
        "camera head": frames * camera(stored_frames),
    }
    return parts


def show(title, parts):
    total = sum(parts.values())
    print(f"{title}: {total / 1e9:,.0f} GFLOP")
    for name, value in parts.items():
        print(f"  {name}: {value / 1e9:,.0f} GFLOP")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--height", type=int, default=378)
    ap.add_argument("--width", type=int, default=504)
    ap.add_argument("--scale", type=int, default=8, help="scale frames (phase 1)")
    ap.add_argument("--frame", type=int, default=10, help="the streamed frame to count (0-based)")
    ap.add_argument("--window", type=int, default=64, help="KV window in frames")
    a = ap.parse_args()
    gh, gw = a.height // PATCH, a.width // PATCH
    n = gh * gw + AGGREGATOR_SPECIAL
    show(f"phase 1 ({a.scale} frames, {a.scale * n} queries and keys)",
         step(a.scale, a.scale * n, gh, gw, a.scale))
    # Frame f sees the scale frames, the window's frames up to itself and, once
    # frames are evicted, their special tokens.
    stored = min(a.frame + 1, a.scale + a.window)
    evicted = a.frame + 1 - stored
    keys = stored * n + evicted * AGGREGATOR_SPECIAL
    show(f"frame {a.frame} ({keys} keys)", step(1, keys, gh, gw, a.frame + 1))
    full = a.scale + a.window
    show(f"frame {full} (full window, {full * n + AGGREGATOR_SPECIAL} keys)",
         step(1, full * n + AGGREGATOR_SPECIAL, gh, gw, full + 1))


if __name__ == "__main__":
    main()
