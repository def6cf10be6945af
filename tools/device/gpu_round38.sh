#!/usr/bin/env bash
# GPU machine, round 38: the balanced schedule with each lone-block
# consumer doing its tile's P V at once (one stage held per consumer, so
# the producer can load ahead). Tests; the kernel against the grid
# schedule; where its few spilled registers are (SASS) and how much local
# memory they move (Nsight Compute); end to end against bd24898 (.old/).
# The balanced schedule's last version is commit f45b3ea, reverted in the
# next; rounds 34-41 ran its successive versions (attention_versions.md,
# wgmma v4, says what each changed). The environment variables some rounds
# set were experiment hooks that existed only in the working tree then.
set -uo pipefail
ROUND=r38
source tools/device/round_lib.sh
round_begin
round_deps
old_build_start lingbot-map
round_build lingbot-map cuda_tests attention_cuda_bench
log "attention tests"
timeout 150 $B/bin/cuda_tests --gtest_filter='CudaAttention*' > $R/attn_tests.log 2>&1
echo "rc=$?" | tee -a $S; grep -E "FAILED|PASSED|tests ran|Failure" $R/attn_tests.log | head -10 | cut -c1-200 | tee -a $S; keep
log "kernel alone: splits 0 = balanced, splits 1 = grid"
for i in 1 2 3; do
  timeout 40 $B/bin/attention_cuda_bench --benchmark_filter='PagedFullWindow/kernel:3/splits:(0|1)/' 2>&1 | grep -E "^BM_" | cut -c1-150 | tee -a $S
done; keep
log "spills in SASS"
OBJ=$(find $B -name 'attention_wgmma_ws.cu.o' | head -1)
cuobjdump -sass $OBJ > $R/all.sass 2>&1
ls -la $R/*.sass | tee -a $S
python3 - $R <<'PY' | tee -a $S
import sys, re, glob
r = sys.argv[1]
f = glob.glob(r + '/all.sass')
text = open(f[0]).read()
# the balanced kernel's function body
m = re.search(r'Function : (\S*ILi3ELb1E\S*)', text)
if m:
    start = m.start(); nxt = text.find('Function :', start + 10); text = text[start: nxt if nxt > 0 else len(text)]
lines = [l for l in text.split('\n') if re.search(r'/\*[0-9a-f]{4}\*/', l)]
print('sass lines', len(lines))
for i, l in enumerate(lines):
    if re.search(r'\b(STL|LDL)\b', l):
        ctx = [re.sub(r'\s+', ' ', x.strip())[:70] for x in lines[max(0, i - 2): i + 3]]
        print(i, ' | '.join(ctx))
PY
keep
log "ncu balanced: local memory"
timeout 60 ncu --kernel-name regex:attention_wgmma_ws --launch-skip 3 --launch-count 1 --section SpeedOfLight --section MemoryWorkloadAnalysis_Tables \
  --metrics l1tex__t_bytes_pipe_lsu_mem_local_op_ld.sum,l1tex__t_bytes_pipe_lsu_mem_local_op_st.sum,lts__t_sector_hit_rate.pct,smsp__inst_executed.sum \
  $B/bin/attention_cuda_bench --benchmark_filter='PagedFullWindow/kernel:3/splits:0/' > $R/ncu_balanced.txt 2>&1
grep -E "Duration|local_op|hit_rate|inst_executed|DRAM Throughput" $R/ncu_balanced.txt | cut -c1-150 | tee -a $S; keep
wait $OLD; echo "old build rc=$?" | tee -a $S
log "end to end, alternating"
for i in 1 2; do
  bench new$i --frames 200
  bench_old old$i --frames 200; keep
done
log done
