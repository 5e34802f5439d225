#!/usr/bin/env python3
"""Opcode counts per kernel of `cuobjdump -sass` listings (tools/ptx_stats.sh writes them
with SASS_DIR=...). Static counts, not executed ones, but a kernel's main loop dominates
them once unrolled: e.g. the M = 8 small-batch kernel's 1,024 SHFL against 512 FFMA showed
that its cross-lane sum outweighed the loop (bench/results/ncu_w8_2026-12-03_h200_52cbb5e.md).

Usage: tools/sass_opcodes.py [--top N] FILE.sass ...
"""
import argparse
import collections
import re

# "        /*0120*/                   @!P0 FFMA R13, R20, R15, R13 ;"
INSTRUCTION = re.compile(r"^\s+/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P[0-9T]\s+)?([A-Z][A-Z0-9]*)")
FUNCTION = re.compile(r"^\s+Function : (\S+)")


def kernels(path):
    """{kernel name: Counter of opcodes (modifiers dropped)} in file order."""
    found = {}
    current = None
    with open(path, encoding="latin-1") as f:
        for line in f:
            m = FUNCTION.match(line)
            if m:
                current = found.setdefault(m.group(1), collections.Counter())
                continue
            m = INSTRUCTION.match(line)
            if m and current is not None:
                current[m.group(1)] += 1
    return found


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--top", type=int, default=16, help="opcodes listed per kernel (default 16)")
    p.add_argument("files", nargs="+")
    args = p.parse_args()
    for path in args.files:
        for name, counts in kernels(path).items():
            top = " ".join(f"{op} {n}" for op, n in counts.most_common(args.top))
            print(f"{path}: {name}: {sum(counts.values())} instructions: {top}")


if __name__ == "__main__":
    main()
