#!/usr/bin/env python3
"""Where the host time of one schedx Python call goes (issue 5): cProfile over
back-to-back calls on a small shape, the functions with the most own time first.
compare_torch.py measures the per-call totals; this splits them.

Usage (GPU machine, repository root):
    SCHEDX_LIBRARY=$PWD/build/runtime/libschedx.so python3 bench/python_host_profile.py
"""

import cProfile
import os
import pstats
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "python"))

import schedx  # noqa: E402

CALLS = 4000


def profile(label, fn):
    fn()
    torch.cuda.synchronize()
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(CALLS):
        fn()
    prof.disable()
    torch.cuda.synchronize()
    print(f"\n## {label}: {CALLS} calls, own time per call, top 14\n")
    stats = pstats.Stats(prof)
    rows = sorted(stats.stats.items(), key=lambda kv: -kv[1][2])[:14]
    print("| function | calls per call | own us per call | total us per call |\n|---|---|---|---|")
    for (file, line, name), (_, ncalls, tottime, cumtime, _) in rows:
        where = f"{os.path.basename(file)}:{line} {name}" if line else name
        print(f"| `{where}` | {ncalls / CALLS:.1f} | {tottime / CALLS * 1e6:.2f} | {cumtime / CALLS * 1e6:.2f} |")


def main():
    print(f"# Python host profile, {torch.cuda.get_device_name()}, torch {torch.__version__}")
    x = torch.randn(256, 256, device="cuda", dtype=torch.bfloat16)
    scale = torch.full((1,), 2.0, device="cuda")
    rows = torch.empty(256, 256, device="cuda", dtype=torch.float8_e4m3fn)
    cols = torch.empty(256, 256, device="cuda", dtype=torch.float8_e4m3fn)
    profile("cast_transpose_fp8 256x256, out= given", lambda: schedx.cast_transpose_fp8(x, scale, out=(rows, cols.T)))
    profile("cast_transpose_fp8 256x256", lambda: schedx.cast_transpose_fp8(x, scale))
    xw = torch.randn(1, 1024, device="cuda", dtype=torch.bfloat16)
    w = torch.randint(-128, 128, (1024, 1024), device="cuda", dtype=torch.int8)
    scales = torch.rand(1024, device="cuda").to(torch.bfloat16)
    y = torch.empty(1, 1024, device="cuda", dtype=torch.bfloat16)
    profile("w8_linear M=1 N=K=1024", lambda: schedx.w8_linear(xw, w, scales))
    profile("w8_linear M=1 N=K=1024, out= given", lambda: schedx.w8_linear(xw, w, scales, out=y))


if __name__ == "__main__":
    main()
