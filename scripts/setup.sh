#!/usr/bin/env bash
# Install the Debian packages lingbot-map needs, then configure and build it
# (Release, into build/; the CLI ends up at build/bin/lingbot-map).
#
#   scripts/setup.sh               packages + build (CUDA backend too if nvcc is found)
#   SKIP_APT=1 scripts/setup.sh    build only
#   BUILD_DIR=out scripts/setup.sh another build folder; extra CMake flags after --
set -euo pipefail
cd "$(dirname "$0")/.."

# FFmpeg's libraries read videos (run --video); the ffmpeg program only
# makes the tests' small videos.
packages=(
  build-essential cmake ninja-build pkg-config
  libdnnl-dev libpng-dev libjpeg-dev zlib1g-dev libexif-dev
  libavformat-dev libavcodec-dev libswscale-dev libavutil-dev libavdevice-dev ffmpeg
  nlohmann-json3-dev libcli11-dev libfmt-dev libgtest-dev libbenchmark-dev
  clang-14 libclang-rt-14-dev python3-numpy
  pybind11-dev python3-dev python3-pytest python3-venv python3-pip python3-setuptools python3-wheel  # the Python module (python/)
  colmap nodejs  # the peers tests/app/export_test.cpp checks exports with (COLMAP, the glTF validator)
  libopenexr-dev openexr  # export --depth-exr (optional at build time); openexr's exrheader checks the files in tests
  libcpp-httplib-dev  # the browser viewer's server (run --view, view: src/viewer)
  chromium  # the browser tests/viewer drives headless (through playwright-core, tests/tools)
)
if [[ "${SKIP_APT:-0}" != 1 ]]; then
  missing=()
  for p in "${packages[@]}"; do
    dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
  done
  # Debian packages npm apart from nodejs; NodeSource's nodejs carries its own.
  command -v npm >/dev/null 2>&1 || missing+=(npm)
  if ((${#missing[@]})); then
    sudo=""
    [[ $(id -u) -ne 0 ]] && sudo="sudo"
    echo "installing: ${missing[*]}"
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  fi
fi

build_dir="${BUILD_DIR:-build}"
extra=()
[[ "${1:-}" == "--" ]] && shift && extra=("$@")
cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release "${extra[@]}"
cmake --build "$build_dir"
echo "built: $build_dir/bin/lingbot-map"
