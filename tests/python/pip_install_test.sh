#!/bin/bash
# `pip install .` into a fresh virtual environment works offline and gives
# an importable lingbot_map that runs the small fixture model.
#   pip_install_test.sh SOURCE_DIR BUILD_DIR PYTHON
# BUILD_DIR is the configured build (setup.py relinks the module there if
# needed, so the test takes seconds, not an engine build). The venv sees the
# system's site-packages for NumPy, setuptools and wheel (Debian's).
set -euo pipefail
src=${1:?usage: pip_install_test.sh SOURCE_DIR BUILD_DIR PYTHON}
build=${2:?}
python=${3:?}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

"$python" -m venv --system-site-packages "$tmp/venv"
LINGBOT_BUILD_DIR="$build" "$tmp/venv/bin/pip" install --no-build-isolation --no-index --no-cache-dir \
  --disable-pip-version-check -q "$src"
cd "$tmp"  # away from the checkout and the build, so only the installed module can be found
"$tmp/venv/bin/python" - "$src/tests/fixtures/model_small" "$tmp/venv" <<'PY'
import sys
import numpy as np
import lingbot_map

fixtures, venv = sys.argv[1], sys.argv[2]
assert lingbot_map.__file__.startswith(venv), lingbot_map.__file__
model = lingbot_map.load(f"{fixtures}/weights.pt", f"{fixtures}/config.json", device="cpu")
result = model.reconstruct(images=[np.full((3, 28, 28), 0.5, np.float32)] * 4)
assert result["extrinsic"].shape == (4, 3, 4) and np.all(np.isfinite(result["extrinsic"]))
print("installed", lingbot_map.__version__, "at", lingbot_map.__file__)
PY
