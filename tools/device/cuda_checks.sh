#!/usr/bin/env bash
# GPU machine, from the repository root: Release build with CUDA, the CUDA
# tests (ctest -L cuda), the kernel resource report, and the GPU benchmarks.
# Start it with e.g.:   bash tools/device/cuda_checks.sh
#
# Dependencies the Ubuntu image lacks (GoogleTest, Google Benchmark, fmt,
# nlohmann-json, CLI11, libexif, ...): DEPS_PREFIX=<prefix with include/ and
# lib/>, or Debian .deb files carried under .deps/debs/ (unpacked here to
# /tmp/deps). Optional: BUILD_DIR (default /tmp/build-cuda), CUDA_ARCHS
# (default 90a), TEST_FILTER (a ctest -R regex), BENCH_FILTER (a
# --benchmark_filter regex), SKIP_BENCH=1.
#
# Writes under $OUT: env.txt, cmake.log, build.log (with compile times),
# resources.txt (registers / spills / SASS instruction counts of the
# attention kernels), ctest.log, attention_cuda_bench.{txt,json},
# summary.txt (printed again at the end).
set -uo pipefail
OUT=${OUT:-/tmp/cuda_checks_out}
mkdir -p "$OUT"
S=$OUT/summary.txt
: > "$S"
log() { echo "== $*" | tee -a "$S"; }
BUILD=${BUILD_DIR:-/tmp/build-cuda}
ARCHS=${CUDA_ARCHS:-90a}
status=0

# ---- dependencies -------------------------------------------------------------
PREFIX=${DEPS_PREFIX:-}
if [ -z "$PREFIX" ] && ls .deps/debs/*.deb > /dev/null 2>&1; then
  mkdir -p /tmp/deps
  for f in .deps/debs/*.deb; do dpkg -x "$f" /tmp/deps; done
  PREFIX=/tmp/deps/usr
fi
if [ -n "$PREFIX" ]; then
  export LD_LIBRARY_PATH=$PREFIX/lib/x86_64-linux-gnu:$PREFIX/lib/x86_64-linux-gnu/openblas-openmp:$PREFIX/lib:${LD_LIBRARY_PATH:-}
fi

# ---- environment ----------------------------------------------------------------
{
  date -u
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv 2>&1
  nvcc --version 2>&1 | tail -2
  cmake --version | head -1
  g++ --version | head -1
  nproc
  echo "deps prefix: ${PREFIX:-<system>}"
} > "$OUT/env.txt" 2>&1
log "environment"
head -3 "$OUT/env.txt" | tee -a "$S"

# ---- configure and build ----------------------------------------------------------
NVCC=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
log "configure (CUDA archs $ARCHS)"
# CMake < 3.26 does not know nvcc's C++20 flag: give it (newer CMake ignores these).
if ! cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DLINGBOT_CUDA=ON \
    -DCMAKE_CUDA_COMPILER="$NVCC" -DCMAKE_CUDA_ARCHITECTURES="$ARCHS" \
    -DCMAKE_CUDA20_STANDARD_COMPILE_OPTION=-std=c++20 -DCMAKE_CUDA20_EXTENSION_COMPILE_OPTION=-std=c++20 \
    ${PREFIX:+-DCMAKE_PREFIX_PATH=$PREFIX} > "$OUT/cmake.log" 2>&1; then
  tail -30 "$OUT/cmake.log" | tee -a "$S"
  exit 1
fi

log "build cuda_tests and attention_cuda_bench"
start=$(date +%s)
if ! ninja -C "$BUILD" cuda_tests attention_cuda_bench > "$OUT/build.log" 2>&1; then
  grep -E "error|FAILED" "$OUT/build.log" | head -40 | tee -a "$S"
  exit 1
fi
echo "build: $(( $(date +%s) - start )) s" | tee -a "$S"
# Per-object compile times of our CUDA sources (ninja's log: start, end in ms).
if [ -f "$BUILD/.ninja_log" ]; then
  awk '$4 ~ /backend\/cuda\/(attention|kv_|cuda_kv|dense_page)/ { t[$4] = ($2 - $1) / 1000 }
       END { for (k in t) printf "%8.1f s  %s\n", t[k], k }' "$BUILD/.ninja_log" |
    sort -rn | tee -a "$OUT/build.log" | head -8 | tee -a "$S"
fi

# ---- kernel resources (no device time) ----------------------------------------------
log "attention kernel resources"
CUOBJDUMP=$(command -v cuobjdump || echo /usr/local/cuda/bin/cuobjdump)
{
  for obj in "$BUILD"/src/CMakeFiles/lingbot_backend_cuda.dir/backend/cuda/{attention_mma,attention_wgmma,attention,kv_append}.cu.o; do
    [ -f "$obj" ] || continue
    echo "### $(basename "$obj")"
    "$CUOBJDUMP" -res-usage "$obj" 2>&1 | grep -E "Function|REG|STACK" | sed 's/^ *//'
    "$CUOBJDUMP" -sass "$obj" > /tmp/sass.txt 2>&1
    awk '/Function :/ { name = $3 }
         /HMMA|HGMMA/ { mma[name]++ } /LDL|STL/ { local[name]++ } /LDSM/ { ldsm[name]++ } /MUFU.EX2/ { ex2[name]++ }
         END { for (n in mma) printf "%-100s HMMA/HGMMA %d  LDSM %d  MUFU.EX2 %d  LDL/STL %d\n", n, mma[n], ldsm[n], ex2[n], local[n] }' /tmp/sass.txt
  done
} > "$OUT/resources.txt" 2>&1
grep -E "HMMA" "$OUT/resources.txt" | sed 's/_ZN7lingbot4cuda[^ ]*attention_mma_kernel/mma_kernel/' | cut -c1-160 | tee -a "$S"

# ---- tests ---------------------------------------------------------------------------
log "ctest -L cuda"
ctest --test-dir "$BUILD" -L cuda --output-on-failure ${TEST_FILTER:+-R "$TEST_FILTER"} > "$OUT/ctest.log" 2>&1 || status=1
grep -E "tests passed|tests failed|Failed|\*\*\*|Total Test time" "$OUT/ctest.log" | tail -25 | tee -a "$S"
# The measured errors of the attention tests (gtest properties) for the record.
"$BUILD/bin/cuda_tests" --gtest_filter='CudaAttention*' --gtest_output="xml:$OUT/attention_tests.xml" > /dev/null 2>&1 || true

# ---- benchmarks -----------------------------------------------------------------------
if [ "${SKIP_BENCH:-0}" != 1 ]; then
  log "attention_cuda_bench"
  "$BUILD/bin/attention_cuda_bench" --benchmark_repetitions=3 --benchmark_report_aggregates_only=true \
    ${BENCH_FILTER:+--benchmark_filter="$BENCH_FILTER"} \
    --benchmark_out="$OUT/attention_cuda_bench.json" --benchmark_out_format=json \
    > "$OUT/attention_cuda_bench.txt" 2>&1 || status=1
  grep -E "median|Benchmark|---" "$OUT/attention_cuda_bench.txt" | cut -c1-150 | tee -a "$S"
fi

echo
echo "================ summary ($OUT/summary.txt) ================"
cat "$S"
exit $status
