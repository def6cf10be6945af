#!/usr/bin/env bash
# The configure step's libjpeg handling (cmake/LibraryPairs.cmake), on
# stand-in installations made from this machine's libjpeg:
#  1. the system's own header and library: accepted;
#  2. a header of another ABI version (jconfig.h claiming 80 where the
#     library is 62, or the other way round) with that library: refused with
#     a one-line reason;
#  3. a complete installation in its own prefix (jconfig.h in the multiarch
#     folder, as Debian's libjpeg-turbo has it) while another version's
#     jconfig.h sits further along the compiler's search path (CPATH): the
#     prefix's own jconfig.h is used, and the configure step accepts it;
#     without that, the other jconfig.h is picked up and refused.
#   library_pairs_test.sh SOURCE_DIR   (ctest: Cmake.LibraryPairsJpeg)
set -euo pipefail
src="$1"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
arch=$(gcc -print-multiarch 2>/dev/null || echo x86_64-linux-gnu)

# Where the compiler finds jpeglib.h and jconfig.h now, and the library.
deps=$(printf '#include <stdio.h>\n#include <jpeglib.h>\n' | cc -M -x c - | tr ' \\' '\n\n')
jpeglib=$(grep '/jpeglib.h$' <<<"$deps" | head -1)
jconfig=$(grep '/jconfig.h$' <<<"$deps" | head -1)
jmorecfg=$(grep '/jmorecfg.h$' <<<"$deps" | head -1)
libjpeg=$(cc -print-file-name=libjpeg.so)
version=$(awk '/#define JPEG_LIB_VERSION/ {print $3}' "$jconfig")
other=$(( version == 80 ? 62 : 80 ))

configure() {  # header folder, library, extra cmake arguments
  rm -rf "$work/build"
  cmake -S "$src/tests/cmake/pair_project" -B "$work/build" -DLINGBOT_SOURCE_DIR="$src" \
    -DJPEG_INCLUDE_DIR="$1" -DJPEG_LIBRARY="$2" "${@:3}" 2>&1
}
expect_refused() {  # what, then configure's arguments
  local what=$1; shift
  if log=$(configure "$@"); then echo "$log"; echo "FAIL: accepted $what"; exit 1; fi
  grep -q "different installations" <<<"$log" || { echo "$log"; echo "FAIL: no one-line reason for $what"; exit 1; }
  echo "refused: $what"
}
expect_accepted() {
  local what=$1; shift
  log=$(configure "$@") || { echo "$log"; echo "FAIL: refused $what"; exit 1; }
  echo "accepted: $what"
}

expect_accepted "the system's header $(dirname "$jpeglib") with $libjpeg" "$(dirname "$jpeglib")" "$libjpeg"

# 2. A prefix of our own: its library a copy of the system's, its header claiming the other version.
mkdir -p "$work/other/include" "$work/other/lib"
cp "$jpeglib" "$jmorecfg" "$work/other/include/"
sed "s/#define JPEG_LIB_VERSION .*/#define JPEG_LIB_VERSION  $other/" "$jconfig" >"$work/other/include/jconfig.h"
cp -L "$libjpeg" "$work/other/lib/libjpeg.so"
expect_refused "a libjpeg $other header with the libjpeg $version library" \
  "$work/other/include" "$work/other/lib/libjpeg.so"

# 3. A whole installation laid out as Debian's, and another version's jconfig.h on CPATH.
mkdir -p "$work/prefix/include/$arch" "$work/prefix/lib/$arch" "$work/stray"
cp "$jpeglib" "$jmorecfg" "$work/prefix/include/"
cp "$jconfig" "$work/prefix/include/$arch/"
cp -L "$libjpeg" "$work/prefix/lib/$arch/libjpeg.so"
cp "$work/other/include/jconfig.h" "$work/stray/"
export CPATH="$work/stray"
expect_accepted "the prefix's own jconfig.h ahead of a stray one on CPATH" \
  "$work/prefix/include" "$work/prefix/lib/$arch/libjpeg.so"
expect_refused "the stray jconfig.h when the prefix's is not put first" \
  "$work/prefix/include" "$work/prefix/lib/$arch/libjpeg.so" -DWITHOUT_JCONFIG_FROM_PREFIX=ON
echo "PASS"
