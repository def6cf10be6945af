#!/usr/bin/env python3
"""The wgmma-ws attention kernels' loops in a cuobjdump -sass listing.

Usage: sass_loops.py LISTING, where LISTING is `cuobjdump -sass` of the
object that holds the kernels (gpu_check.sh --sass finds it in the build
tree and runs this). For each kernel: every backward branch whose body
holds HGMMA instructions (a main loop), with its length and its most
frequent opcodes, and the spill instructions (STL/LDL) with their
addresses. Many R2UR in a loop mean that the wgmma descriptors are built
per thread instead of staying in uniform registers, which costs issue
slots in the consumers' critical phase."""
import re
import sys

text = open(sys.argv[1]).read()
for f in re.split(r'\n\s*Function : ', text)[1:]:
    name = f.split('\n')[0]
    m = re.search(r'attention_wgmma_ws_kernelILi(\d)E(?:L[ib](\d)E)?NS1_9(\w+?)I', name)
    if not m:
        continue
    ins = []
    for line in f.split('\n'):
        mm = re.match(r'\s*/\*([0-9a-f]+)\*/\s+(.*?);', line)
        if mm:
            ins.append((int(mm.group(1), 16), mm.group(2).strip()))
    print(m.groups(), 'instructions', len(ins),
          'spills at', [hex(a) for a, o in ins if re.search(r'\b(STL|LDL)\b', o)])
    for addr, op in ins:
        b = re.search(r'BRA\s+(?:`\(\.L_x_\d+\)|)(0x[0-9a-f]+)', op)
        if not b or int(b.group(1), 16) >= addr:
            continue
        body = [o for a, o in ins if int(b.group(1), 16) <= a <= addr]
        if not any('HGMMA' in o for o in body):
            continue
        counts = {}
        for o in body:
            k = re.sub(r'^@!?U?P\w+\s+', '', o).split()[0].split('.')[0]
            counts[k] = counts.get(k, 0) + 1
        top = sorted(counts.items(), key=lambda x: -x[1])[:12]
        print('  loop %#x..%#x: %d instructions, R2UR %d, LDL %d:' % (int(b.group(1), 16), addr, len(body),
              counts.get('R2UR', 0), counts.get('LDL', 0)), top)
