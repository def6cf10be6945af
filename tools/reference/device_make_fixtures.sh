#!/usr/bin/env bash
# Run on the GPU machine (device tool) with .upstream carried:
#   .upstream/lingbot_map   upstream package (copied from Robbyant/lingbot-map)
# Produces $OUT/model_small.tar (the CI parity fixtures) and $OUT/env.txt.
set -euo pipefail
export PYTHONPATH=$PWD/.upstream:$PWD/tools/reference
export PYTHONUNBUFFERED=1
{
  echo "== env"; date -u; uname -a; cat /etc/os-release | head -3
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv || true
  g++ --version | head -1 || true; cmake --version | head -1 || true; nvcc --version | tail -1 || true
  python3 -c "import torch, PIL, numpy, safetensors; print('torch', torch.__version__, 'PIL', PIL.__version__, 'numpy', numpy.__version__, 'safetensors', safetensors.__version__)"
  ls /usr/lib/x86_64-linux-gnu | grep -i -E "blas|png|jpeg|exif" | head -20 || true
  nproc; free -g | head -2
} > $OUT/env.txt 2>&1
cat $OUT/env.txt
work=$(mktemp -d)
python3 tools/reference/make_model_fixtures.py --config tests/fixtures/model_small/config.json \
  --images tests/fixtures/courthouse --out $work/model_small 2>&1 | tee $OUT/make_model_fixtures.log
tar -C $work -cf $OUT/model_small.tar model_small
ls -la $work/model_small
