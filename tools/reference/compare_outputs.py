"""Relative error per tensor between our predictions.npz and a reference npz
(numeric keys present in both; depth squeezed to the same shape; text keys
such as the frame names are skipped)."""
import sys

import numpy as np

ours, ref = np.load(sys.argv[1]), np.load(sys.argv[2])
print(f"{'tensor':16s} {'shape':22s} relative error ||ours - ref|| / ||ref||")
for k in ref.files:
    if k not in ours.files or not np.issubdtype(ref[k].dtype, np.number):
        continue
    a, b = ours[k].astype(np.float64), ref[k].astype(np.float64)
    a = a.reshape(b.shape)
    err = np.linalg.norm(a - b) / np.linalg.norm(b)
    print(f"{k:16s} {str(b.shape):22s} {err:.3g}")
