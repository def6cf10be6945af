#!/usr/bin/env python3
"""Every kernel of the CUDA backend is launched by launch_kernel and begins
with await_previous_kernels() (src/backend/cuda/kernel_launch.cuh).

launch_kernel lets a kernel start while the kernel before it in the stream
is still running; only the wait at its first statement keeps its memory
accesses after that kernel's. A kernel without it would race, and a <<<>>>
launch would not be checked or able to start early. Fails naming each
kernel or launch that breaks the rule.

usage: check_kernel_launches.py SOURCE_DIR
"""
import pathlib
import re
import sys


def strip_comments(text):
    text = re.sub(r"/\*.*?\*/", lambda m: "\n" * m.group(0).count("\n"), text, flags=re.S)
    return re.sub(r"//[^\n]*", "", text)


def matching(text, start, open_char, close_char):
    """Index of the bracket closing the one at `start`."""
    depth = 0
    for i in range(start, len(text)):
        if text[i] == open_char:
            depth += 1
        elif text[i] == close_char:
            depth -= 1
            if depth == 0:
                return i
    raise ValueError("unbalanced")


def problems_in(path, text):
    found = []
    line_of = lambda i: text.count("\n", 0, i) + 1
    for m in re.finditer(r"<<<", text):
        found.append(f"{path}:{line_of(m.start())}: a <<<>>> launch (use launch_kernel)")
    for m in re.finditer(r"\b__global__\b", text):
        paren = text.index("(", m.end())
        head = text[m.end():paren]
        if "__launch_bounds__" in head or text[m.end():paren + 1].rstrip().endswith("__launch_bounds__("):
            paren = text.index("(", matching(text, paren, "(", ")") + 1)
        name = text[m.end():paren].split()[-1]
        after = matching(text, paren, "(", ")") + 1
        brace = text.index("{", after)
        if ";" in text[after:brace]:
            continue  # a declaration
        body = text[brace + 1:].lstrip()
        if not body.startswith("await_previous_kernels();"):
            found.append(f"{path}:{line_of(m.start())}: kernel {name} does not begin with await_previous_kernels()")
    return found


def main():
    root = pathlib.Path(sys.argv[1]) / "src" / "backend" / "cuda"
    sources = sorted(p for p in root.rglob("*") if p.suffix in (".cu", ".cuh", ".h", ".cpp"))
    problems, kernels = [], 0
    for path in sources:
        text = strip_comments(path.read_text())
        kernels += len(re.findall(r"\b__global__\b", text))
        problems += problems_in(path.relative_to(root.parent.parent.parent), text)
    for p in problems:
        print(p)
    if not problems:
        print(f"{kernels} kernels, each launched by launch_kernel and awaiting the previous ones")
    return 1 if problems or kernels == 0 else 0


if __name__ == "__main__":
    sys.exit(main())
