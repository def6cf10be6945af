#!/usr/bin/env bash
# GPU machine, round 36: why the balanced schedule runs the full window in
# ~910 us against ~712 us for the grid schedule (round 35). Nsight Compute
# on one launch of each (and the dense 7,824^2 group on three consumers, the
# per-step reference): throughput, warp stalls, memory.
# The balanced schedule's last version is commit f45b3ea, reverted in the
# next; rounds 34-41 ran its successive versions (attention_versions.md,
# wgmma v4, says what each changed). The environment variables some rounds
# set were experiment hooks that existed only in the working tree then.
set -uo pipefail
ROUND=r36
source tools/device/round_lib.sh
round_begin
round_deps
round_build attention_cuda_bench
SECTIONS="--section SpeedOfLight --section WarpStateStats --section SchedulerStats --section MemoryWorkloadAnalysis --section InstructionStats --section LaunchStats"
prof() {  # name filter
  log "ncu $1"
  timeout 120 ncu --kernel-name regex:attention_wgmma_ws --launch-skip 3 --launch-count 1 $SECTIONS \
    $B/bin/attention_cuda_bench --benchmark_filter="$2" > $R/ncu_$1.txt 2>&1
  echo "rc=$?" | tee -a $S
  grep -E "Duration|DRAM Throughput|Memory Throughput|L2 Hit|L1/TEX Hit|Compute \(SM\)|Executed Ipc A|Issue Slots Busy|No Eligible|Warp Cycles Per Issued|Stall|Executed Instructions  |Grid Size|Registers|Mem Busy|Max Bandwidth|dram__bytes|DRAM Bandwidth" $R/ncu_$1.txt | cut -c1-150 | tee -a $S
  keep
}
prof balanced 'PagedFullWindow/kernel:3/splits:0/'
prof grid 'PagedFullWindow/kernel:3/splits:1/'
prof dense3 'Dense/groups:1/n:7824/kernel:3'
log done
