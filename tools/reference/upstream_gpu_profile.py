"""Upstream's own FPS benchmark (gct_profile.py) in the configuration our
docs/PERF.md compares against: SDPA backend, bf16 autocast, eager (no
torch.compile: gct_profile's --compile flag cannot be switched off from the
command line, so it is disabled here), 378x504, window 64, 8 scale frames,
4 camera iterations. Prints gct_profile's report, then peak GPU memory.

  python3 upstream_gpu_profile.py --num_frames 300   (upstream on PYTHONPATH)
"""
import sys

import torch

import gct_profile

gct_profile.compile_model = lambda model: None
args = ["gct_profile.py", "--backend", "sdpa", "--dtype", "bf16", "--img_h", "378", "--img_w", "504",
        "--sliding_window", "64", "--camera_num_iterations", "4"] + sys.argv[1:]
sys.argv = args
torch.cuda.reset_peak_memory_stats()
gct_profile.main()
print(f"peak GPU memory allocated: {torch.cuda.max_memory_allocated() / 1e9:.2f} GB, "
      f"reserved: {torch.cuda.max_memory_reserved() / 1e9:.2f} GB")
