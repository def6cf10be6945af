#!/usr/bin/env bash
# The GPU machine's check of this tree, from the repository root: build, the
# CUDA tests, the end-to-end benchmark with upstream PyTorch's profile in the
# same call, official-size parity, the attention kernels alone; optionally
# per-kernel profiles and SASS reports. Results: $OUT/summary.txt and
# $OUT/logs.tar.gz (plus the profiles' own files). tools/device/README.md
# says how to run it with the device tool.
#
# Usage: bash tools/device/gpu_check.sh [options]
#
# Steps (on unless turned off; upstream and parity need .upstream/):
#   --no-build              use the build folder as it is
#   --no-tests              skip the CUDA tests
#   --tests FILTER          gtest filter for the CUDA test binary (default: all)
#   --ctest LABEL           run `ctest -L LABEL` instead of the binary
#   --no-bench              skip the end-to-end benchmark
#   --no-upstream           skip upstream's profile
#   --no-parity             skip the official-size parity check
#   --parity-variant ARGS   the parity check again with these run options
#                           (e.g. '--depth-head-dtype bf16'; repeatable)
#   --kernel-bench FILTER   attention_cuda_bench's --benchmark_filter
#                           (default 'PagedFullWindow/kernel:[0-9]+/splits:0/|PagedLongStream|Dense')
#   --no-kernel-bench       skip it
# Optional steps (off unless asked for):
#   --ops-bench FILTER      cuda_ops_bench (GEMMs, norms, camera layers, ...)
#   --stage-profile         lingbot-map bench --profile: time per stage
#                           (stages synchronised, no graphs)
#   --kernel-profile        one streaming frame's kernels under Nsight Compute
#   --ncu-skip N            launches it skips first (default 7000: the warm-up)
#   --ncu FILTER            Nsight Compute sections of one kernel launch of
#                           attention_cuda_bench --benchmark_filter=FILTER
#   --ncu-kernel REGEX      the kernel it profiles (default attention)
#   --sass                  registers, spills and SASS counts of the CUDA
#                           objects, main loops of the wgmma-ws kernels
#   --asan                  AddressSanitizer build and a 40-frame bench
#   --baseline DIR          another source tree (e.g. a git archive of an
#                           earlier commit) built beside this one; its bench
#                           and kernel bench run alternating with ours
# Parameters:
#   --frames N (200)  --height H (378)  --width W (504)  --window N (64)
#   --bench-args "ARGS"     more arguments for every lingbot-map bench run
#   --variant NAME=ARGS     another bench run, e.g. --variant nodense=--no-dense
#                           (repeatable; the default run is always first)
#   --repeat N              the bench and kernel bench N times (default 1)
#   --upstream-frames N     frames for upstream (default: --frames)
#   --arch A (90a)  --build-dir DIR (build-device)  --label TEXT (summary heading)
# Environment variables (LINGBOT_CUDA_GRAPHS=0, LINGBOT_ATTENTION_KERNEL=...)
# pass through to every run.
set -uo pipefail

usage() { sed -n '2,/^set -uo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit "${1:-0}"; }

BUILD=1 TESTS=1 TEST_FILTER='*' CTEST_LABEL='' BENCH=1 UPSTREAM=auto PARITY=auto
KERNEL_BENCH='PagedFullWindow/kernel:[0-9]+/splits:0/|PagedLongStream|Dense' OPS_BENCH='' STAGE_PROFILE=0
KERNEL_PROFILE=0 NCU_SKIP=7000 NCU_FILTER='' NCU_KERNEL=attention SASS=0 ASAN=0 BASELINE=''
FRAMES=200 HEIGHT=378 WIDTH=504 WINDOW=64 BENCH_ARGS='' REPEAT=1 UP_FRAMES='' LABEL=''
BUILD_DIR='build-device' PARITY_VARIANTS=()
export CUDA_ARCHS=90a
VARIANTS=()
OPTIONS="$*"
while [ $# -gt 0 ]; do
  case $1 in
    --no-build) BUILD=0 ;;
    --no-tests) TESTS=0 ;;
    --tests) TEST_FILTER=$2; shift ;;
    --ctest) CTEST_LABEL=$2; shift ;;
    --no-bench) BENCH=0 ;;
    --no-upstream) UPSTREAM=0 ;;
    --no-parity) PARITY=0 ;;
    --kernel-bench) KERNEL_BENCH=$2; shift ;;
    --parity-variant) PARITY_VARIANTS+=("$2"); shift ;;
    --no-kernel-bench) KERNEL_BENCH='' ;;
    --ops-bench) OPS_BENCH=$2; shift ;;
    --stage-profile) STAGE_PROFILE=1 ;;
    --kernel-profile) KERNEL_PROFILE=1 ;;
    --ncu-skip) NCU_SKIP=$2; shift ;;
    --ncu) NCU_FILTER=$2; shift ;;
    --ncu-kernel) NCU_KERNEL=$2; shift ;;
    --sass) SASS=1 ;;
    --asan) ASAN=1 ;;
    --baseline) BASELINE=$2; shift ;;
    --frames) FRAMES=$2; shift ;;
    --height) HEIGHT=$2; shift ;;
    --width) WIDTH=$2; shift ;;
    --window) WINDOW=$2; shift ;;
    --bench-args) BENCH_ARGS=$2; shift ;;
    --variant) VARIANTS+=("$2"); shift ;;
    --repeat) REPEAT=$2; shift ;;
    --upstream-frames) UP_FRAMES=$2; shift ;;
    --arch) CUDA_ARCHS=$2; shift ;;
    --build-dir) BUILD_DIR=$2; shift ;;
    --label) LABEL=$2; shift ;;
    -h|--help) usage 0 ;;
    *) echo "gpu_check.sh: unknown option $1" >&2; usage 1 ;;
  esac
  shift
done

source tools/device/device_lib.sh
device_begin gpu_check
case $BUILD_DIR in /*) B=$BUILD_DIR ;; *) B=$PWD/$BUILD_DIR ;; esac
BO=$PWD/build-baseline
UP_FRAMES=${UP_FRAMES:-$FRAMES}
export BENCH_TIMEOUT=$((90 + FRAMES / 4))
have_upstream=0
[ -f .upstream/gct_profile.py ] && [ -d .upstream/data/courthouse ] && have_upstream=1
[ "$UPSTREAM" = auto ] && UPSTREAM=$have_upstream
[ "$PARITY" = auto ] && PARITY=$have_upstream
if [ "$have_upstream" = 0 ] && [ "$UPSTREAM$PARITY" != 00 ]; then
  note "no .upstream/ (gct_profile.py, data/courthouse): upstream steps skipped"
  UPSTREAM=0 PARITY=0
fi

log "gpu_check ${LABEL:+$LABEL }($FRAMES frames of $HEIGHT x $WIDTH, window $WINDOW${BENCH_ARGS:+, $BENCH_ARGS})"
note "options: ${OPTIONS:-(defaults)}"
environment
deps
# shellcheck disable=SC2206  # the bench arguments split on spaces on purpose
BENCH_COMMON=(--frames "$FRAMES" --height "$HEIGHT" --width "$WIDTH" --kv-window "$WINDOW" $BENCH_ARGS)

# ---- build ------------------------------------------------------------------
# The upstream reference (GPU) runs while we build and test; every timing
# waits for it (reference_wait), so that nothing else shares the GPU then.
[ "$PARITY" = 1 ] && reference_start
if [ "$BUILD" = 1 ]; then
  log "configure and build ($B, sm_$CUDA_ARCHS)"
  configure . "$B" "$W/cmake.log" || { tail -20 "$W/cmake.log" | tee -a "$S"; exit 1; }
  targets=(lingbot-map)
  if [ "$TESTS" = 1 ]; then
    tests_target=$(target_matching "$B" cuda_tests)
    if [ -n "$tests_target" ]; then targets+=("$tests_target"); else note "no *cuda_tests target in $B"; fi
  fi
  [ -n "$KERNEL_BENCH$NCU_FILTER" ] && targets+=(attention_cuda_bench)
  [ -n "$OPS_BENCH" ] && targets+=(cuda_ops_bench)
  if [ -n "$BASELINE" ]; then
    ( configure "$BASELINE" "$BO" "$W/cmake_baseline.log" &&
      build "$BO" "$W/build_baseline.log" "${targets[@]}" ) > /dev/null 2>&1 &
    BASELINE_BUILD=$!
  fi
  start=$(date +%s)
  build "$B" "$W/build.log" "${targets[@]}" || exit 1
  note "built ${targets[*]} in $(( $(date +%s) - start )) s"
  if [ -n "$BASELINE" ]; then
    wait "$BASELINE_BUILD"
    note "baseline build rc=$? ($BASELINE)"
  fi
  keep
fi

# ---- kernel resources (no GPU time) ------------------------------------------
if [ "$SASS" = 1 ]; then
  log "registers, spills and SASS counts of the CUDA objects"
  find "$B" -name '*.cu.o' | sort | while read -r obj; do
    echo "### ${obj#"$B"/}"
    cuobjdump -res-usage "$obj" 2>&1 | grep -E "Function|REG|STACK" | sed 's/^ *//'
    cuobjdump -sass "$obj" 2>/dev/null |
      awk '/Function :/ { name = $3 }
           /HMMA|HGMMA/ { mma[name]++ } /LDL|STL/ { spill[name]++ } /MUFU.EX2/ { ex2[name]++ }
           END { for (n in mma) printf "%s HMMA/HGMMA %d MUFU.EX2 %d LDL/STL %d\n", n, mma[n], ex2[n], spill[n] }'
  done > "$W/resources.txt" 2>&1
  grep -E "STACK:[1-9]|LDL/STL [1-9]" "$W/resources.txt" | cut -c1-200 | head -20 | tee -a "$S"
  note "(kernels with a stack frame or spills listed above; all of them in resources.txt)"
  find "$B" -name '*wgmma_ws*.cu.o' | while read -r obj; do
    cuobjdump -sass "$obj" > "$W/wgmma_ws.sass" 2>&1
    python3 tools/device/sass_loops.py "$W/wgmma_ws.sass" > "$W/sass_loops.txt" 2>&1
    cut -c1-220 "$W/sass_loops.txt" | head -40 | tee -a "$S"
  done
  keep
fi

# ---- tests --------------------------------------------------------------------
if [ "$TESTS" = 1 ]; then
  if [ -n "$CTEST_LABEL" ]; then
    log "ctest -L $CTEST_LABEL"
    timeout 400 ctest --test-dir "$B" -L "$CTEST_LABEL" --timeout 120 --output-on-failure > "$W/tests.log" 2>&1
    note "rc=$?"
    grep -E "tests passed|tests failed|\*\*\*Failed|Timeout|Total Test time" "$W/tests.log" | head -20 | tee -a "$S"
  else
    tests_bin=$(find "$B/bin" -maxdepth 1 -name '*cuda_tests' -type f 2>/dev/null | head -1)
    log "$(basename "${tests_bin:-cuda_tests}") --gtest_filter='$TEST_FILTER'"
    if [ -n "$tests_bin" ]; then
      timeout 300 "$tests_bin" --gtest_filter="$TEST_FILTER" > "$W/tests.log" 2>&1
      note "rc=$?"
    else
      note "no $B/bin/*cuda_tests" | tee "$W/tests.log"
    fi
    grep -E "FAILED|PASSED|tests ran|Failure|SKIPPED" "$W/tests.log" | head -20 | cut -c1-200 | tee -a "$S"
  fi
  # The model tests print their errors against upstream's fixtures.
  grep -E "vs upstream|deferred heads" "$W/tests.log" | sort -k5 -g | tail -4 | cut -c1-160 | tee -a "$S"
  keep
fi
reference_wait

# ---- end to end -----------------------------------------------------------------
# Ours, then upstream, then ours again: upstream's figure moves from call to
# call far more than ours, so the ratio is only meaningful within one call.
median_of() { sed -n 's/.*steady-state median: \([0-9.]*\) ms.*/\1/p' "$W/bench_$1.txt" 2>/dev/null | head -1; }
run_variants() {  # suffix
  local v name args
  for v in "default=" "${VARIANTS[@]}"; do
    name=${v%%=*} args=${v#*=}
    # shellcheck disable=SC2086  # a variant's arguments split on spaces on purpose
    bench_in "$B" "$name$1" "${BENCH_COMMON[@]}" $args
    # shellcheck disable=SC2086
    [ -n "$BASELINE" ] && bench_in "$BO" "baseline_$name$1" "${BENCH_COMMON[@]}" $args
  done
}
if [ "$BENCH" = 1 ]; then
  log "end to end: lingbot-map bench --device cuda ${BENCH_COMMON[*]}"
  for i in $(seq 1 "$REPEAT"); do
    run_variants "$([ "$REPEAT" -gt 1 ] && echo "_$i")"
    keep
  done
fi
if [ "$PARITY" = 1 ]; then
  log "official-size parity: ours (bf16) against upstream fp32, 11 frames of 378 x 504"
  official_parity "$B"
  for variant in "${PARITY_VARIANTS[@]}"; do
    log "official-size parity with $variant"
    # shellcheck disable=SC2086  # the variant's options, split as given
    official_parity "$B" $variant
  done
  keep
fi
if [ "$UPSTREAM" = 1 ]; then
  log "upstream gct_profile (SDPA, bf16, eager), $UP_FRAMES frames, same call"
  upstream_profile "$UP_FRAMES" "$HEIGHT" "$WIDTH" "$WINDOW"
  if [ "$BENCH" = 1 ]; then
    log "ours again after upstream"
    bench_in "$B" default_after "${BENCH_COMMON[@]}"
    up_mid=$(sed -n 's/.*(50%): *\([0-9.]*\) ms.*/\1/p' "$W/upstream_profile.log" | head -1)
    up_all=$(sed -n 's/.*per frame *: *\([0-9.]*\) ms.*/\1/p' "$W/upstream_profile.log" | head -1)
    ours=$(median_of "$([ "$REPEAT" -gt 1 ] && echo default_1 || echo default)")
    if [ -n "$up_mid" ] && [ -n "$ours" ]; then
      note "$(awk -v u="$up_mid" -v a="$up_all" -v o="$ours" 'BEGIN {
        printf "speed-up: upstream 50%% window %.2f ms / our steady-state median %.2f ms = %.2fx", u, o, u / o
        if (a != "") printf "; upstream over all frames %.2f ms: %.2fx", a, a / o }')"
    fi
  fi
  keep
fi

# ---- kernels alone ------------------------------------------------------------------
if [ -n "$KERNEL_BENCH" ]; then
  log "attention_cuda_bench --benchmark_filter='$KERNEL_BENCH'"
  for i in $(seq 1 "$REPEAT"); do
    timeout 180 "$B/bin/attention_cuda_bench" --benchmark_filter="$KERNEL_BENCH" > "$W/attention_bench_$i.txt" 2>&1
    grep -E "^BM_" "$W/attention_bench_$i.txt" | cut -c1-160 | tee -a "$S"
    if [ -n "$BASELINE" ]; then
      timeout 180 "$BO/bin/attention_cuda_bench" --benchmark_filter="$KERNEL_BENCH" > "$W/attention_bench_baseline_$i.txt" 2>&1
      grep -E "^BM_" "$W/attention_bench_baseline_$i.txt" | cut -c1-150 | sed 's/^/baseline /' | tee -a "$S"
    fi
  done
  keep
fi
if [ -n "$OPS_BENCH" ]; then
  log "cuda_ops_bench --benchmark_filter='$OPS_BENCH'"
  timeout 180 "$B/bin/cuda_ops_bench" --benchmark_filter="$OPS_BENCH" > "$W/ops_bench.txt" 2>&1
  grep -E "^BM_" "$W/ops_bench.txt" | cut -c1-260 | tee -a "$S"
  keep
fi

# ---- profiles ---------------------------------------------------------------------------
if [ "$STAGE_PROFILE" = 1 ]; then
  log "time per stage (bench --profile: synchronised stages, no graphs)"
  bench_in "$B" stage_profile --frames 24 --height "$HEIGHT" --width "$WIDTH" --kv-window "$WINDOW" \
    --pipeline-depth 0 --profile
  tail -30 "$W/bench_stage_profile.txt" | cut -c1-200 >> "$S"
  keep
fi
if [ -n "$NCU_FILTER" ]; then
  log "Nsight Compute: one launch of /$NCU_KERNEL/ in attention_cuda_bench '$NCU_FILTER'"
  timeout 200 ncu --kernel-name "regex:$NCU_KERNEL" --launch-skip 3 --launch-count 1 \
    --section SpeedOfLight --section WarpStateStats --section SchedulerStats --section ComputeWorkloadAnalysis \
    --section MemoryWorkloadAnalysis --section InstructionStats --section LaunchStats --section Occupancy \
    "$B/bin/attention_cuda_bench" --benchmark_filter="$NCU_FILTER" --benchmark_min_time=0.01 > "$W/ncu_kernel.txt" 2>&1
  note "ncu rc=$?"
  grep -E "Duration|SM Frequency|DRAM Throughput|L2 Hit|Compute \(SM\) Throughput|Executed Ipc A|Issue Slots Busy|No Eligible|Warp Cycles Per Issued|Registers Per|Achieved Occupancy" \
    "$W/ncu_kernel.txt" | cut -c1-150 | head -30 | tee -a "$S"
  keep
fi
if [ "$KERNEL_PROFILE" = 1 ]; then
  log "one streaming frame's kernels, each timed alone (ncu, warm-up skipped)"
  kernel_profile "$B" 240 "$NCU_SKIP" "$HEIGHT" "$WIDTH"
  keep
fi

# ---- AddressSanitizer ------------------------------------------------------------------------
if [ "$ASAN" = 1 ]; then
  log "AddressSanitizer build (RelWithDebInfo) and a 40-frame bench"
  configure . build-asan "$W/cmake_asan.log" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DLINGBOT_SANITIZE=ON &&
    timeout 300 ninja -C build-asan lingbot-map > "$W/build_asan.log" 2>&1
  note "build rc=$?"
  # CUDA maps memory where ASan's shadow gap would be.
  ASAN_OPTIONS=protect_shadow_gap=0:detect_leaks=0 timeout 150 build-asan/bin/lingbot-map bench --device cuda \
    --height "$HEIGHT" --width "$WIDTH" --frames 40 --pipeline-depth 0 > "$W/asan.txt" 2>&1
  note "asan bench rc=$?"
  grep -E -m40 "ERROR|SUMMARY|#[0-9]+ |steady" "$W/asan.txt" | cut -c1-200 | tee -a "$S"
  keep
fi
log "done"
