#!/usr/bin/env bash
# GPU machine, round 48: tiles across a page end also copied with TMA, in
# boxes of gcd(page size, 192) rows (12 at pages of 972: boxes that land
# 1,536 bytes apart, not on the 1,024-byte period of the 128-byte swizzle;
# 8 at the test's pages of 200). Against TMA for one-page tiles only
# (LB_TMA_NO_SMALL=1, an experiment hook in the working tree only) and
# row copies (tma:0). Attention and cache tests first: a swizzle that did
# not follow the address would fail TmaCopiesMatchRowCopies.
# What happened (attention_versions.md, wgmma v6): the tests passed; the
# LB_TMA_NO_SMALL runs hung (the hook left two maps per chunk but told the
# kernel one, so it read the wrong map: a bug of the hook, not of the
# code measured), so the comparison is against tma:0 only. The code is
# commit "Paged attention: tiles across a page end ... (tried)", reverted
# in the next commit.
set -uo pipefail
ROUND=r48
source tools/device/round_lib.sh
round_begin
round_deps
round_build lingbot-map cuda_tests attention_cuda_bench
log "attention and cache tests"
timeout 200 $B/bin/cuda_tests --gtest_filter='CudaAttention*:*KvCache*' > $R/attn_tests.log 2>&1
echo "rc=$?" | tee -a $S; grep -E "FAILED|PASSED|tests ran|Failure" $R/attn_tests.log | head -12 | cut -c1-220 | tee -a $S; keep
log "attention kernel alone"
for i in 1 2; do
  timeout 60 $B/bin/attention_cuda_bench --benchmark_filter='PagedFullWindow/kernel:3/splits:0/tma:(0|1)/' \
    2>&1 | grep -E "^BM_" | cut -c1-150 | tee -a $S
  LB_TMA_NO_SMALL=1 timeout 60 $B/bin/attention_cuda_bench --benchmark_filter='PagedFullWindow/kernel:3/splits:0/tma:1/' \
    2>&1 | grep -E "^BM_" | sed 's/^/no-small /' | cut -c1-150 | tee -a $S
done; keep
log "end to end"
bench default --frames 200; keep
LB_TMA_NO_SMALL=1 bench no_small --frames 200; keep
log done
