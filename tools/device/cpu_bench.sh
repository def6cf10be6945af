#!/usr/bin/env bash
# The CPU path's speed on the GPU machine's 16-core CPU against upstream
# PyTorch fp32 in the same call: the official architecture with random
# weights, 378 x 504, 8 scale frames (issue 19; docs/PERF.md, "CPU"). From
# the repository root, carrying .upstream and .deps (tools/device/README.md;
# .deps/debs must hold oneDNN: libdnnl2, libdnnl-dev, ocl-icd-libopencl1).
# Results: $OUT/summary.txt, $OUT/logs.tar.gz (every log and JSON).
#
#   bash tools/device/cpu_bench.sh PART [PART...]      THREADS=N (default 16)
#
# Parts (a device call holds one or two; the first call also builds, ~3 min):
#   compare      upstream, then ours: 11 frames, phase 1 and frame 10, peak RSS
#   window       ours, 75 frames: the first full-window frame (72; bench times it
#                with pipeline depth 2 only if 2 frames follow) and the steady state
#   window-up    upstream, 73 frames, for the same figures; its streamed frames
#                before frame 70 skip the depth head (which keeps no state), so
#                that the run fits a call. It prints each step as it ends and a
#                run cut short keeps the last ones it finished; a call of
#                window-up alone builds nothing
#   scaling      ours at each of THREAD_LIST's counts (default "2 4 8 16"; the 2-
#                thread run alone takes minutes: split it, THREAD_LIST="2 4" then
#                THREAD_LIST="8 16"), 13 frames: phase 1, frame 10. Shorter:
#                SCALE=2 SCALING_FRAMES=6; SCALING_ARGS="--cpu-dtype bf16" and
#                SCALING_NAME=_bf16 for the bf16 mode
#   scaling-profile  ours with --profile at each of THREAD_LIST's counts (default
#                "2 16"), 4 frames, pipeline depth 0: which stages scale (with
#                SCALE=2, about 3 minutes)
#   profile      ours with --profile, 10 frames (phase 1 and frames 8-9), pipeline
#                depth 0: where a frame's time goes (about 3 minutes at 16 threads)
#   isa          ours with --cpu-isa avx2 (the baseline build of our kernels)
#   bf16         --cpu-dtype bf16 against upstream fp32 and ours fp32 in the same
#                call: 11/13 frames, phase 1 and frame 10, peak RSS (about 5-6
#                minutes after the build; the first call's build adds ~3).
#                BF16_FP32=0 leaves ours fp32 out; BF16_ALSO="ARGS" adds a second
#                bf16 run with those arguments (e.g. --cpu-bf16-products onednn)
#   bf16-window  ours bf16, 76 frames: a full-window frame (72), peak RSS and the
#                RSS every 16 frames (the peak is the load: fp32 random weights
#                and their bf16 copies side by side)
#   bf16-profile ours bf16 with --profile, 10 frames, pipeline depth 0
#   machine      the yardstick for thread scaling: the CPU topology (which CPUs
#                share a core), bench/cpu_peak_bench (FMA peak and read bandwidth
#                at 1-16 threads) and the attention kernel alone at 1-16 threads
#                (bench/attention_bench); about 1 minute after its build
#   wait-policy  how OpenMP's idle threads wait, at THREADS: for each of
#                WAIT_LIST (default "passive 1000 10000 300000": sleep at once,
#                or spin that many iterations of GOMP_SPINCOUNT first; 300000
#                is libgomp's default), ROUNDS times alternating (default 2),
#                6 frames: phase 1 and the streamed frames (use SCALE=2);
#                WAIT_FRAMES sets the frames, WAIT_ARGS adds bench arguments
#                (e.g. --cpu-dtype bf16)
#   attention-bf16  the bf16 mode's attention kernels (oneDNN's products, AMX
#                tiles): their tests (backend_cpu_tests AttentionBf16*) and
#                bench/attention_bench's full window (query tiles and key
#                splits) and self-attention at THREADS threads, medians of 5
#                (ATTENTION_FILTER: a regex of benchmark names); builds both
#                (about 1 minute after the build)
#   bf16-products  the bf16 mode's kernels on AMX: the AMX kernels' tests
#                on these tiles (LinearAmx*, ConvAmx*, the op table's CpuBf16Amx cases, the
#                small model's ParityBf16 against upstream), the products alone
#                (dev/cpu/amx_matmul_blocked.cpp: our blocked tile kernel and its
#                variants against oneDNN, at THREADS), then ours bf16 end to end
#                (13 frames) with --cpu-bf16-products onednn and amx, ROUNDS times
#                alternating (default 2; PRODUCTS_LIST sets the kernels and their
#                order, default "onednn amx"); PRODUCTS_ALONE=0 skips the products
#                alone, PRODUCTS_TESTS="backend_cpu_tests" runs (and builds) only
#                that binary's tests; about 5 minutes after the build
#   bf16-kernels the bf16 mode's Linear as the blocks call it (bias, GELU on
#                fc1, bf16 out) and convolutions as the depth head calls them
#                (float32 maps, bias, ReLU): bench/gemm_bench's BM_Bf16Linear
#                and BM_Bf16Conv, oneDNN's primitives against our AMX kernels
#                on the model's shapes at THREADS, medians of 3 interleaved
#                (KERNELS_FILTER: a regex of benchmark names); about 1-2
#                minutes; builds gemm_bench
#   gemm         bench/gemm_bench: a frame's and the scale phase's products, fp32
#                sgemm against the bf16 mode's oneDNN matmul (AMX here), at
#                THREADS and at 1 thread (GEMM_THREADS="16": one count;
#                GEMM_FILTER: a regex of benchmark names; about 2 minutes;
#                builds gemm_bench)
# Every part builds first (ninja: a warm machine rebuilds nothing).
set -uo pipefail
source tools/device/device_lib.sh
device_begin cpu_bench
T=${THREADS:-16}
H=378
WIDTH=504
SCALE=${SCALE:-8}  # scale frames (fewer for the thread-scaling part's short runs)
[ $# -ge 1 ] || set -- compare
case ${1:-} in -h | --help) sed -n '2,/^# Every part/p' "$0"; exit 0 ;; esac

environment
deps
note "$(lscpu | grep -E '^Model name' | tr -s ' '), $(nproc) CPUs"
note "CPU flags: $(grep -o -E 'avx512[a-z_0-9]*|amx[a-z_0-9]*' /proc/cpuinfo | sort -u | tr '\n' ' ')"
if [ "$*" = window-up ]; then
  note "window-up alone: upstream only, nothing to build"
else
  log "build (CPU only)"
  BENCH=OFF
  TESTS=OFF
  TARGETS=lingbot-map
  case " $* " in *" attention-bf16 "*) BENCH=ON TESTS=ON TARGETS="$TARGETS attention_bench backend_cpu_tests" ;; esac
  case " $* " in *" gemm "* | *" bf16-kernels "*) BENCH=ON TARGETS="$TARGETS gemm_bench" ;; esac
  PRODUCTS_TESTS=${PRODUCTS_TESTS:-backend_cpu_tests backend_tests model_tests}
  case " $* " in *" bf16-products "*) TESTS=ON TARGETS="$TARGETS $PRODUCTS_TESTS" ;; esac
  case " $* " in *" machine "*) BENCH=ON TARGETS="$TARGETS cpu_peak_bench attention_bench" ;; esac
  configure . /tmp/build-cpu "$W/cmake.log" -DLINGBOT_CUDA=OFF -DLINGBOT_TESTS=$TESTS -DLINGBOT_BENCH=$BENCH ||
    { tail -30 "$W/cmake.log" | tee -a "$S"; exit 1; }
  grep -E "oneDNN" "$W/cmake.log" | tee -a "$S"
  build /tmp/build-cpu "$W/build.log" $TARGETS || exit 1
fi
CLI=/tmp/build-cpu/bin/lingbot-map

# ours FRAMES THREADS NAME [ARGS...]: lingbot-map bench on the CPU; its
# header (the kernels in use), figures and peak RSS into the summary.
ours() {
  local frames=$1 threads=$2 name=$3
  shift 3
  timeout "${OURS_TIMEOUT:-560}" "$CLI" bench --device cpu --threads "$threads" --frames "$frames" --height $H \
    --width $WIDTH --num-scale-frames $SCALE --json "$W/ours_$name.json" "$@" > "$W/ours_$name.txt" 2>&1
  note "-- ours $name: $frames frames, $threads threads $* (rc=$?)"
  { grep -E "bench: |^phase 1|^frame 10|^frame 72|^frames [0-9]|steady-state|^not measured|^host memory|peak RSS" "$W/ours_$name.txt" ||
    tail -3 "$W/ours_$name.txt"; } | cut -c1-300 | tee -a "$S"
  # Single frames vary on these CPUs: the frames around 10 and 72 as well.
  if [ -f "$W/ours_$name.json" ]; then
    python3 - "$W/ours_$name.json" <<'JSONEOF' 2>&1 | tee -a "$S"
import json, sys
j = json.load(open(sys.argv[1]))
first, ms = j.get("first_timed_frame"), j.get("frame_ms") or []
for lo, hi in ((8, 12), (68, 72)):
    got = [f"{f}: {ms[f - first]:.0f}" for f in range(lo, hi + 1) if first is not None and 0 <= f - first < len(ms)]
    if got:
        print(f"frames {lo}-{hi} (ms): " + ", ".join(got))
JSONEOF
  fi
  keep
}

# upstream FRAMES NAME [ARGS...]: official_reference.py's CPU timing, same
# threads, frames and size; phase 1, frames 10 and 72 and peak RSS into the
# summary.
upstream() {
  local frames=$1 name=$2
  shift 2
  timeout "${UPSTREAM_TIMEOUT:-560}" python3 tools/reference/official_reference.py \
    --images .upstream/data/courthouse --frames "$frames" --height $H --width $WIDTH --num-scale $SCALE \
    --cpu-timing "$W/upstream_$name.json" --cpu-threads "$T" "$@" > "$W/upstream_$name.txt" 2>&1
  note "-- upstream $name: $frames frames, $T threads (rc=$?)"
  if [ ! -f "$W/upstream_$name.json" ]; then  # cut short: the steps it finished
    note "upstream did not finish; its last steps: $(grep -E '^step: ' "$W/upstream_$name.txt" | tail -4 | tr '\n' ';')"
    grep -E '^step: ' "$W/upstream_$name.txt" > "$W/upstream_${name}_steps.txt"
    keep
    return
  fi
  python3 - "$W/upstream_$name.json" "$SCALE" <<'EOF' 2>&1 | tee -a "$S"
import json, sys
t = json.load(open(sys.argv[1]))
scale = int(sys.argv[2])
frames = t["frame_ms"]  # frame_ms[i] is frame scale + i
line = [f"phase 1 ({scale} scale frames together): {t['phase1_ms']:.1f} ms"]
for f in (10, 72):
    if f - scale < len(frames):
        line.append(f"frame {f}: {frames[f - scale]:.1f} ms")
half = sorted(frames[len(frames) // 2:])
if half:
    line.append(f"steady-state median: {half[len(half) // 2]:.1f} ms")
line.append(f"peak RSS {t['peak_rss_mb']:.0f} MB")
print(" | ".join(line))
EOF
  keep
}

for part in "$@"; do
  case $part in
    compare)
      log "compare: upstream then ours, 11 frames, $T threads"
      upstream 11 compare
      ours 13 "$T" compare  # frame 10 is timed, not drained, with pipeline depth 2
      ;;
    window)
      log "window: ours, 75 frames (frame 72 with the 64-frame window full), $T threads"
      ours 75 "$T" window
      ;;
    window-up)
      log "window-up: upstream, 73 frames (the depth head from frame 70), $T threads"
      upstream 73 window --cpu-depth-from 70
      ;;
    scaling)
      log "scaling: ours at ${THREAD_LIST:-2 4 8 16} threads, ${SCALING_FRAMES:-13} frames ${SCALING_ARGS:-}"
      for t in ${THREAD_LIST:-2 4 8 16}; do
        # shellcheck disable=SC2086  # SCALING_ARGS: several bench arguments
        ours "${SCALING_FRAMES:-13}" "$t" "threads$t${SCALING_NAME:-}" ${SCALING_ARGS:-}
      done
      ;;
    scaling-profile)
      # Where the time goes at each thread count: which stages scale.
      log "scaling-profile: ours at ${THREAD_LIST:-2 16} threads, 4 frames, pipeline depth 0, stage tables ${SCALING_ARGS:-}"
      for t in ${THREAD_LIST:-2 16}; do
        # shellcheck disable=SC2086  # SCALING_ARGS: several bench arguments
        ours 4 "$t" "profile$t${SCALING_NAME:-}" --profile --pipeline-depth 0 ${SCALING_ARGS:-}
        sed -n '/stage/,$p' "$W/ours_profile$t${SCALING_NAME:-}.txt" | head -30 | tee -a "$S"
      done
      ;;
    profile)
      # 10 frames: the warm-up (scale + 3 pushes), phase 1 and two streamed
      # frames; depth 0 so each stage's time is its own, not overlapped.
      log "profile: ours, 10 frames, $T threads, pipeline depth 0, stage table"
      ours 10 "$T" profile --profile --pipeline-depth 0
      sed -n '/stage/,$p' "$W/ours_profile.txt" | head -60 | tee -a "$S"
      ;;
    bf16)
      log "bf16: upstream fp32, ours fp32, ours bf16; 11/13 frames, $T threads"
      upstream 11 bf16
      [ "${BF16_FP32:-1}" = 0 ] || ours 13 "$T" fp32
      ours 13 "$T" bf16 --cpu-dtype bf16
      # shellcheck disable=SC2086  # BF16_ALSO: several bench arguments
      [ -z "${BF16_ALSO:-}" ] || ours 13 "$T" bf16_also --cpu-dtype bf16 $BF16_ALSO
      ;;
    bf16-window)
      log "bf16-window: ours bf16, 76 frames (frame 72 with the 64-frame window full), $T threads"
      ours 76 "$T" bf16_window --cpu-dtype bf16 --intervals 16  # RSS while streaming, after the load peak
      ;;
    bf16-profile)
      log "bf16-profile: ours bf16, 10 frames, $T threads, pipeline depth 0, stage table"
      ours 10 "$T" bf16_profile --cpu-dtype bf16 --profile --pipeline-depth 0
      sed -n '/stage/,$p' "$W/ours_bf16_profile.txt" | head -60 | tee -a "$S"
      ;;
    isa)
      log "isa: ours with the AVX2 build of our kernels, 13 frames, $T threads"
      ours 13 "$T" avx2 --cpu-isa avx2
      ;;
    machine)
      log "machine: topology, FMA peak and bandwidth, the attention kernel alone, 1-16 threads"
      lscpu -e > "$W/lscpu_e.txt" 2>&1
      note "CPUs sharing a core: $(cat /sys/devices/system/cpu/cpu*/topology/thread_siblings_list 2>/dev/null | sort -u | tr '\n' ' ')"
      note "$(lscpu | grep -E '^(Thread|Core|Socket|NUMA node|L1d|L2|L3)' | tr -s ' ' | tr '\n' ';')"
      timeout 200 /tmp/build-cpu/bin/cpu_peak_bench > "$W/cpu_peak.txt" 2>&1
      grep -E '^BM_' "$W/cpu_peak.txt" | awk '{print $1, $2, $3, $NF}' | tee -a "$S"
      timeout 200 /tmp/build-cpu/bin/attention_bench --benchmark_filter='BM_AttentionFullWindow|BM_AttentionSelf' \
        > "$W/attention_threads.txt" 2>&1
      grep -E '^BM_' "$W/attention_threads.txt" | awk '{print $1, $2, $3, $(NF-2)}' | tee -a "$S"
      keep
      ;;
    wait-policy)
      log "wait-policy: ${WAIT_LIST:-passive 1000 10000 300000}, ${ROUNDS:-2} rounds, $T threads, ${WAIT_FRAMES:-6} frames ${WAIT_ARGS:-}"
      for round in $(seq "${ROUNDS:-2}"); do
        for wait in ${WAIT_LIST:-passive 1000 10000 300000}; do
          if [ "$wait" = passive ]; then
            OMP_WAIT_POLICY=passive ours "${WAIT_FRAMES:-6}" "$T" "wait_${wait}_$round" ${WAIT_ARGS:-}
          else
            GOMP_SPINCOUNT=$wait ours "${WAIT_FRAMES:-6}" "$T" "wait_${wait}_$round" ${WAIT_ARGS:-}
          fi
        done
      done
      ;;
    attention-bf16)
      log "attention-bf16: the kernels' tests, then the full window and self-attention at 1 and $T threads"
      timeout 120 /tmp/build-cpu/bin/backend_cpu_tests --gtest_filter='*AttentionBf16*' > "$W/attention_bf16_tests.txt" 2>&1
      note "tests (rc=$?): $(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' "$W/attention_bf16_tests.txt" | tr '\n' ' ')"
      grep -E '^\[  FAILED|Failure|Expected|Which is|worst' "$W/attention_bf16_tests.txt" | head -20 | tee -a "$S"
      # At THREADS, each kernel: the full window with the tile and key splits
      # chosen as the model does (0) or fixed at 512 rows and one range, and
      # a frame's self-attention with the tile chosen or 512 rows; medians of
      # 5 runs, interleaved.
      timeout 200 /tmp/build-cpu/bin/attention_bench \
        --benchmark_filter="${ATTENTION_FILTER:-BM_AttentionBf16FullWindow/$T/(0|1)/(0|512)/(0|1)/|BM_AttentionBf16Self/$T/(0|1)/(0|512)/|BM_AttentionFullWindow/$T/}" \
        --benchmark_repetitions=5 --benchmark_enable_random_interleaving=true --benchmark_report_aggregates_only=true \
        > "$W/attention_bf16_bench.txt" 2>&1
      grep -E '^BM_.*median' "$W/attention_bf16_bench.txt" | awk '{print $1, $2, $3, $NF}' | tee -a "$S"
      keep
      ;;
    bf16-products)
      log "bf16-products: the AMX Linear kernel's tests, the products alone, ours bf16 with onednn and amx"
      for t in backend_cpu_tests:'LinearAmx*:ConvAmx*:PackedWeights*' backend_tests:'*CpuBf16Amx*' \
        model_tests:'ParityBf16.*'; do
        case " $PRODUCTS_TESTS " in *" ${t%%:*} "*) ;; *) continue ;; esac
        timeout 150 /tmp/build-cpu/bin/"${t%%:*}" --gtest_filter="${t#*:}" > "$W/products_${t%%:*}.txt" 2>&1
        note "${t%%:*} ${t#*:} (rc=$?): $(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' "$W/products_${t%%:*}.txt" | tr '\n' ' ')"
        grep -E '^\[  FAILED|Failure|Expected|Which is|vs upstream fp32' "$W/products_${t%%:*}.txt" | head -30 | tee -a "$S"
      done
      if [ "${PRODUCTS_ALONE:-1}" != 0 ]; then
        g++ -O2 -std=c++20 -mamx-tile -mamx-bf16 -mavx512f -fopenmp ${PREFIX:+-I$PREFIX/include} \
          dev/cpu/amx_matmul_blocked.cpp ${PREFIX:+-L$PREFIX/lib/x86_64-linux-gnu} -ldnnl -o /tmp/amx_blocked \
          > "$W/amx_blocked_build.log" 2>&1 || tail -5 "$W/amx_blocked_build.log" | tee -a "$S"
        OMP_NUM_THREADS=$T timeout 200 /tmp/amx_blocked > "$W/amx_blocked.txt" 2>&1
        tee -a "$S" < "$W/amx_blocked.txt"
      fi
      for round in $(seq "${ROUNDS:-2}"); do
        for products in ${PRODUCTS_LIST:-onednn amx}; do
          ours 13 "$T" "products_${products}_$round" --cpu-dtype bf16 --cpu-bf16-products "$products"
        done
      done
      ;;
    bf16-kernels)
      log "bf16-kernels: the bf16 Linear and convolutions by oneDNN and by our AMX kernels, $T threads"
      OMP_NUM_THREADS=$T timeout 240 /tmp/build-cpu/bin/gemm_bench --benchmark_filter="${KERNELS_FILTER:-BM_Bf16(Linear|Conv)/}" \
        --benchmark_min_time=0.2 --benchmark_repetitions=3 --benchmark_enable_random_interleaving=true \
        --benchmark_report_aggregates_only=true > "$W/bf16_kernels.txt" 2>&1
      grep -E '^BM_.*median' "$W/bf16_kernels.txt" | sed -E 's/ +[0-9.]+ ms +[0-9]+ / /' | tr -s ' ' | tee -a "$S"
      grep -m1 -E 'ERROR|error' "$W/bf16_kernels.txt" | tee -a "$S"
      keep
      ;;
    gemm)
      log "gemm: fp32 Linear (sgemm + pass, or packed matmul), bf16 matmul (row-major, packed), $T threads and 1"
      for t in ${GEMM_THREADS:-$T 1}; do
        note "-- gemm_bench, $t threads (medians of 3, ms)"
        OMP_NUM_THREADS=$t timeout 280 /tmp/build-cpu/bin/gemm_bench \
          --benchmark_filter="${GEMM_FILTER:-(BM_F32Linear|BM_F32LinearPacked|BM_Bf16Matmul|BM_Bf16MatmulPacked)}/M:(978|7824)/" --benchmark_repetitions=3 \
          --benchmark_report_aggregates_only=true > "$W/gemm_$t.txt" 2>&1
        grep median "$W/gemm_$t.txt" | awk '{print $1, $2, $3, $4, $5, $NF}' | tee -a "$S"
      done
      keep
      ;;
    *)
      note "unknown part '$part' (compare, window, window-up, scaling, scaling-profile, profile, isa, bf16, bf16-window, bf16-profile, machine, wait-policy, attention-bf16, bf16-products, bf16-kernels, gemm)"
      ;;
  esac
done
log "done"
