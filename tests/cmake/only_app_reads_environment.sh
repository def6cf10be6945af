#!/bin/bash
# The library takes every setting as an option; only the CLI (src/app) reads
# environment variables. Fails listing any other getenv in src/.
set -u
cd "${1:?usage: only_app_reads_environment.sh SOURCE_DIR}"
found=$(grep -rn --include='*.cpp' --include='*.h' --include='*.cu' --include='*.cuh' -E '\b(getenv|secure_getenv|environ)\b' src |
        grep -v '^src/app/')
if [ -n "$found" ]; then
  echo "environment read outside src/app:"
  echo "$found"
  exit 1
fi
echo "only src/app reads the environment"
