#!/usr/bin/env python3
"""Checks that CUDA objects carry PTX for their portable kernels.

GPUs newer than the build's targets (Blackwell, sm_100/sm_120) cannot run
sm_80 or sm_90a machine code; the driver JIT-compiles their kernels from
compute_80 PTX instead, if the binary has it. This reads the binary's fat
binaries (no cuobjdump needed: the container layout is a 16-byte header
with the magic 0xBA55ED50 and the payload size, then entries of a header
-- kind 1 PTX, 2 ELF; the header size; the padded payload size; the
architecture at byte 28 -- and their payload) and fails unless every fat
binary with sm_ARCH machine code (one per CUDA source) also has
compute_ARCH PTX. It reads object files (the CUDA library's .cu.o), not the
linked module: there the CUDA runtime's own fat binary, machine code only,
sits beside ours.

Usage: check_cuda_ptx.py [--arch ARCH] OBJECT...   (ARCH: default 80)
"""
import struct
import sys

MAGIC = struct.pack("<I", 0xBA55ED50)
PTX, ELF = 1, 2


def fat_binaries(data):
    """Yields each fat binary's entries as a list of (kind, arch)."""
    start = 0
    while True:
        start = data.find(MAGIC, start)
        if start < 0:
            return
        _, _, header_size, payload_size = struct.unpack_from("<IHHQ", data, start)
        entry, end = start + header_size, start + header_size + payload_size
        entries = []
        while entry + 32 <= end:
            kind, _, entry_header, padded = struct.unpack_from("<HHII", data, entry)
            arch = struct.unpack_from("<I", data, entry + 28)[0]
            if entry_header == 0:
                break
            entries.append((kind, arch))
            entry += entry_header + padded
        yield entries
        start = max(end, start + 4)


def main():
    args = sys.argv[1:]
    arch = 80
    if args[:1] == ["--arch"] and len(args) >= 2:
        arch, args = int(args[1]), args[2:]
    if not args:
        sys.exit(__doc__)
    with_code, without_ptx = 0, []
    for path in args:
        with open(path, "rb") as f:
            data = f.read()
        for entries in fat_binaries(data):
            if (ELF, arch) not in entries:
                continue
            with_code += 1
            if (PTX, arch) not in entries:
                without_ptx.append(path)
    if with_code == 0:
        sys.exit(f"no sm_{arch} machine code in {len(args)} files")
    if without_ptx:
        sys.exit(f"{len(without_ptx)} of {with_code} CUDA objects with sm_{arch} code carry no compute_{arch} PTX "
                 f"(GPUs newer than the build's targets could not run them; CMAKE_CUDA_ARCHITECTURES needs "
                 f"'{arch}', not '{arch}-real'): {', '.join(without_ptx[:5])}")
    print(f"all {with_code} CUDA objects with sm_{arch} code carry compute_{arch} PTX")


if __name__ == "__main__":
    main()
