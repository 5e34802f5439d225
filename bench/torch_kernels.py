#!/usr/bin/env python3
"""Which GPU kernels a w8_linear call becomes, and how long each takes: torch.compile's
default mode and coordinate-descent tuning, cuBLAS on pre-dequantized weights, and
schedx's dispatched path, each run back to back under torch.profiler (no L2 flush
between calls). compare_torch.py gives the end-to-end times; this splits them, to say
where a gap between two paths comes from.

Usage (GPU machine, repository root):
    SCHEDX_LIBRARY=$PWD/build/runtime/libschedx.so python3 bench/torch_kernels.py 4096x8192x8192 16x8192x8192
"""

import collections
import os
import sys

import torch
from torch.profiler import ProfilerActivity, profile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "python"))

import schedx  # noqa: E402
from compare_torch import COMPILE_MODES, w8_eager  # noqa: E402

CALLS = 20


def kernel_table(fn):
    """[(kernel name, calls per fn call, mean us)] of CALLS back-to-back calls of fn."""
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(CALLS):
            fn()
        torch.cuda.synchronize()
    per_kernel = collections.defaultdict(list)
    for e in prof.events():
        if e.device_type == torch.autograd.DeviceType.CUDA:
            per_kernel[e.name].append(e.device_time)
    rows = [(name, len(ts) / CALLS, sum(ts) / len(ts)) for name, ts in per_kernel.items()]
    return sorted(rows, key=lambda r: -r[1] * r[2])


def main():
    for shape in sys.argv[1:] or ["4096x8192x8192"]:
        m, n, k = (int(v) for v in shape.split("x"))
        x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
        w = torch.randint(-128, 128, (n, k), device="cuda", dtype=torch.int8)
        scales = (torch.rand(n, device="cuda") * 0.01 + 0.001).to(torch.bfloat16)
        w_bf16 = w.to(torch.bfloat16)

        def compiled(mode):
            def make():
                torch._dynamo.reset()  # else the second mode reuses the first one's code
                c = torch.compile(w8_eager, dynamic=False, **COMPILE_MODES[mode])
                return lambda: c(x, w, scales)
            return make

        paths = {
            "torch.compile (default)": compiled("compile"),
            "torch.compile (coordinate descent)": compiled("compile+cd"),
            "cuBLAS on pre-dequantized W (F.linear)": lambda: lambda: torch.nn.functional.linear(x, w_bf16),
            "schedx (dispatched)": lambda: lambda: schedx.w8_linear(x, w, scales),
        }
        print(f"## M={m} N={n} K={k} ({torch.cuda.get_device_name()}, torch {torch.__version__})\n")
        print("| path | kernel | launches per call | mean us |")
        print("|---|---|---|---|")
        for label, make in paths.items():
            rows = kernel_table(make())
            for name, per_call, us in rows:
                print(f"| {label} | `{name[:110]}` | {per_call:g} | {us:.1f} |")
            print(f"| {label} | **sum per call** | | {sum(p * us for _, p, us in rows):.1f} |")
        print()


if __name__ == "__main__":
    main()
