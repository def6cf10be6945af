#!/usr/bin/env bash
# The configure step must refuse a libjpeg header and library of different
# versions. A header folder whose jconfig.h claims version 80 (libjpeg 8's
# ABI) stands in for a second installation ahead of Debian's libjpeg 62.
#   library_pairs_test.sh SOURCE_DIR  (ctest: Cmake.LibraryPairsRefuseMismatchedJpeg)
set -euo pipefail
src="$1"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

# Where the compiler finds jpeglib.h and jconfig.h now.
deps=$(printf '#include <stdio.h>\n#include <jpeglib.h>\n' | cc -M -x c - | tr ' \\' '\n\n')
jpeglib=$(grep '/jpeglib.h$' <<<"$deps" | head -1)
jconfig=$(grep '/jconfig.h$' <<<"$deps" | head -1)
jmorecfg=$(grep '/jmorecfg.h$' <<<"$deps" | head -1)
version=$(awk '/#define JPEG_LIB_VERSION/ {print $3}' "$jconfig")
other=$(( version == 80 ? 62 : 80 ))

configure() {  # configure the one-check project against header folder $1
  rm -rf "$work/build"
  cmake -S "$src/tests/cmake/pair_project" -B "$work/build" -DLINGBOT_SOURCE_DIR="$src" -DJPEG_INCLUDE_DIR="$1" 2>&1
}

echo "matching pair: $(dirname "$jpeglib") with its own library"
log=$(configure "$(dirname "$jpeglib")") || { echo "$log"; echo "FAIL: the matching pair was refused"; exit 1; }

mkdir -p "$work/other/include"
cp "$jpeglib" "$jmorecfg" "$work/other/include/"
sed "s/#define JPEG_LIB_VERSION .*/#define JPEG_LIB_VERSION  $other/" "$jconfig" >"$work/other/include/jconfig.h"
echo "mismatched pair: a header of version $other with the library of version $version"
if log=$(configure "$work/other/include"); then
  echo "$log"; echo "FAIL: the configure step accepted a libjpeg $other header with the $version library"; exit 1
fi
grep -q "different installations" <<<"$log" || { echo "$log"; echo "FAIL: no one-line reason"; exit 1; }
grep "different installations" <<<"$log" | head -1
echo "PASS"
