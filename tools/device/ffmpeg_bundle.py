#!/usr/bin/env python3
"""FFmpeg's run-time libraries for the GPU machine, which has none.

The GPU machine (Ubuntu 24.04) has no libavcodec, and the full closure of
Debian's FFmpeg libraries is about 140 MB: far more than a device call can
carry. Decoding H.264 needs only FFmpeg's own libraries, so this copies those
(and the few small libraries they need that the machine lacks) and replaces
every other missing library (x265, aom, rsvg, codec2, ...: encoders and
decoders a measurement never opens) with a stub of the same SONAME that
defines the symbols FFmpeg imports from it. FFmpeg is linked with BIND_NOW,
so each imported symbol must exist at load time. Only libavformat's format
probes call into the stubs (each returns 0: "not this format"); a measurement
checks its predictions against the same frames read as PNG files.

  tools/device/ffmpeg_bundle.py DEVICE_LDCONFIG_TXT OUT_DIR

DEVICE_LDCONFIG_TXT: `ldconfig -p` as printed on the GPU machine. Use the
bundle with LD_LIBRARY_PATH=OUT_DIR (a measurement tool, not a product).
"""
import os, re, shutil, subprocess, sys

LIBDIR = "/usr/lib/x86_64-linux-gnu"
FFMPEG = ["libavformat.so.59", "libavcodec.so.59", "libswscale.so.6", "libavutil.so.57",
          "libavdevice.so.59", "libswresample.so.4"]
# A stub function returns 0, which the format probes that libavformat runs on
# every input read as "not mine"; gme's probe wants an empty string instead.
STUB_FUNCTIONS = {"gme_identify_header": 'const char* gme_identify_header(const void* h) { return ""; }'}
# Small libraries copied for real: those FFmpeg's H.264 path and its start-up use.
REAL = {"libdav1d.so.6"}


def needed(path):
    out = subprocess.run(["readelf", "-d", path], capture_output=True, text=True, check=True).stdout
    return re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", out)


def dynsyms(path, defined):
    flag = "--defined-only" if defined else "--undefined-only"
    out = subprocess.run(["nm", "-D", "-S", flag, path], capture_output=True, text=True, check=True).stdout
    syms = []
    for line in out.splitlines():
        parts = line.split()
        if defined and len(parts) == 4:
            syms.append((parts[3], parts[2], int(parts[1], 16)))
        elif defined and len(parts) == 3:
            syms.append((parts[2], parts[1], 0))
        elif not defined and len(parts) >= 2:
            syms.append((parts[-1], "U", 0))
    return syms


def main():
    device_libs = set(re.findall(r"^\s*(\S+) \(", open(sys.argv[1]).read(), re.M))
    out = sys.argv[2]
    os.makedirs(out, exist_ok=True)
    real = list(FFMPEG)
    stubs = {}
    i = 0
    while i < len(real):
        lib = real[i]
        i += 1
        for dep in needed(os.path.join(LIBDIR, lib)):
            if dep in device_libs or dep in real or dep in stubs:
                continue
            if dep in REAL:
                real.append(dep)
            else:
                stubs[dep] = set()
    # What the real libraries import, by name (and version, where one is given).
    imports = set()
    for lib in real:
        for name, _, _ in dynsyms(os.path.join(LIBDIR, lib), defined=False):
            imports.add(name)
    for lib in real:
        shutil.copy2(os.path.realpath(os.path.join(LIBDIR, lib)), os.path.join(out, lib))
    for stub in sorted(stubs):
        src = os.path.realpath(os.path.join(LIBDIR, stub))
        versions = {}
        body = ["#include <stdio.h>", "#include <stdlib.h>"]
        seen = set()
        for name, kind, size in dynsyms(src, defined=True):
            base, _, version = name.partition("@")
            version = version.lstrip("@")
            wanted = {imp.partition("@")[2] for imp in imports if imp.partition("@")[0] == base}
            if not wanted or base in seen or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", base):
                continue
            # One definition per name, in the version the importer asks for.
            version = next(iter(wanted)) if any(wanted) else version
            seen.add(base)
            if kind in "TtWiI":
                body.append(STUB_FUNCTIONS.get(base, f'void* {base}(void) {{ return 0; }}'))
            else:
                body.append(f"char {base}[{max(size, 8)}] __attribute__((aligned(64)));")
            versions.setdefault(version, []).append(base)
        c_path = os.path.join(out, stub + ".c")
        open(c_path, "w").write("\n".join(body) + "\n")
        args = ["gcc", "-shared", "-fPIC", "-O0", "-o", os.path.join(out, stub), c_path, f"-Wl,-soname,{stub}"]
        named = {v: s for v, s in versions.items() if v}
        if named:
            script = os.path.join(out, stub + ".map")
            with open(script, "w") as f:
                for v, syms in named.items():
                    f.write(f"{v} {{ global: {'; '.join(syms)}; }};\n")
                if "" in versions:
                    f.write(f"LINGBOT_STUB {{ global: {'; '.join(versions[''])}; }};\n")
            args.append(f"-Wl,--version-script,{script}")
        subprocess.run(args, check=True)
        os.remove(c_path)
    print(f"{len(real)} real libraries, {len(stubs)} stubs in {out}")


if __name__ == "__main__":
    main()
