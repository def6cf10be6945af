#!/usr/bin/env bash
# Runs a command on this machine as if the CUDA libraries were not installed
# (issue 22, item 7): in a private mount namespace, every folder holding a
# CUDA library that the CUDA module (liblingbot_cuda.so) needs is covered by
# an empty folder (a library in a system folder, by an empty file), so the
# dynamic loader, its cache and the module's RUNPATH find none of them.
# Needs unshare(1) and mount rights (root in a container is enough); exits
# 77 when it has none, so a caller can skip rather than pass.
#
#   tests/tools/without_cuda_libraries.sh MODULE COMMAND [ARGS...]
set -euo pipefail
if [ "${1:-}" = "--inside" ]; then
  shift
  module=$1
  shift
  empty_dir=$(mktemp -d)
  empty_file=$(mktemp)
  pattern='libcudart|libcublas|libcudnn|libcuda\.so'
  # Resolved paths, until none resolves (a second copy may sit elsewhere).
  for _ in 1 2 3 4 5; do
    libs=$(ldd "$module" | awk -v p="$pattern" '$0 ~ p && $3 ~ /^\// {print $3}')
    [ -z "$libs" ] && break
    for lib in $libs; do
      real=$(readlink -f "$lib")
      dir=$(dirname "$real")
      if [ -e "$dir/libc.so.6" ] || [ -e "$dir/libstdc++.so.6" ]; then
        mount --bind "$empty_file" "$real"   # a system folder: hide only the library
      else
        mount --bind "$empty_dir" "$dir"
      fi
    done
  done
  if ldd "$module" | awk -v p="$pattern" '$0 ~ p && $3 ~ /^\// {found=1} END {exit !found}'; then
    echo "without_cuda_libraries.sh: CUDA libraries still resolve:" >&2
    ldd "$module" >&2
    exit 1
  fi
  exec "$@"
fi

[ $# -ge 2 ] || { echo "usage: $0 MODULE COMMAND [ARGS...]" >&2; exit 2; }
if ! unshare --mount --propagation private true 2>/dev/null; then
  echo "without_cuda_libraries.sh: no mount namespace here (unshare --mount failed): cannot hide the CUDA libraries" >&2
  exit 77
fi
exec unshare --mount --propagation private bash "$0" --inside "$@"
