#!/usr/bin/env python3
"""Which GPU kernels a w8_linear call becomes, and how long each takes: torch.compile's
default mode and coordinate-descent tuning, cuBLAS on pre-dequantized weights, and
schedx's dispatched path, each under torch.profiler. compare_torch.py gives the end-to-end
times; this splits them, to say where a gap between two paths comes from.

By default the calls run back to back (no L2 flush). With --flush each call follows a
256 MiB zero fill, as in triton's do_bench, and the table adds the span from the end of the
fill to the end of the call's last kernel (idle gaps included, as do_bench's events see
them) next to do_bench's own time of the same function in the same process, so that a
difference between the kernels and do_bench's number shows.

The paths are measured round robin (--rounds passes, each over every path), and each
kernel's time is given per round as well as averaged: over a run of large GEMMs the GPU's
clock drifts by up to 16%, which paths measured one after another would take for a gap.

Usage (GPU machine, repository root):
    SCHEDX_LIBRARY=$PWD/build/runtime/libschedx.so python3 bench/torch_kernels.py [--flush] 4096x8192x8192 16x8192x8192
"""

import argparse
import collections
import os
import statistics
import sys

import torch
from torch.profiler import ProfilerActivity, profile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "python"))

import schedx  # noqa: E402
from compare_torch import COMPILE_MODES, w8_eager  # noqa: E402

CALLS = 20


def profiled(fn, flush):
    """[(kernel name, calls per fn call, mean us)] over CALLS calls of fn, the fill's kernel
    left out; and with `flush` the median span from each fill's end to the call's last end."""
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(CALLS):
            if flush is not None:
                flush.zero_()
            fn()
        torch.cuda.synchronize()
    events = sorted((e.time_range.start, e.time_range.end, e.name) for e in prof.events()
                    if e.device_type == torch.autograd.DeviceType.CUDA)
    # The fill is the first kernel of each iteration: CALLS of them, the first in time order.
    fill = events[0][2] if flush is not None else None
    per_kernel = collections.defaultdict(list)
    spans, start, last = [], None, None
    for begin, end, name in events:
        if name == fill:
            if start is not None:
                spans.append(last - start)
            start = end
            continue
        per_kernel[name].append(end - begin)
        last = end
    if start is not None:
        spans.append(last - start)
    rows = [(name, len(ts) / CALLS, sum(ts) / len(ts)) for name, ts in per_kernel.items()]
    span = sorted(spans)[len(spans) // 2] if spans else None
    return sorted(rows, key=lambda r: -r[1] * r[2]), span


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--flush", action="store_true", help="a 256 MiB fill before each call, as do_bench does")
    ap.add_argument("--rounds", type=int, default=3, help="round-robin passes over the paths")
    ap.add_argument("shapes", nargs="*", default=["4096x8192x8192"], help="MxNxK")
    args = ap.parse_args()
    flush = torch.empty(256 << 20, dtype=torch.int8, device="cuda") if args.flush else None
    if args.flush:
        import triton  # only here: the back-to-back mode needs no triton
    for shape in args.shapes:
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
        print(f"## M={m} N={n} K={k} ({torch.cuda.get_device_name()}, torch {torch.__version__}"
              f"{', L2 flushed before each call' if args.flush else ''}, {args.rounds} rounds)\n")
        fns = {label: make() for label, make in paths.items()}
        rounds = collections.defaultdict(list)
        for _ in range(args.rounds):
            for label, fn in fns.items():
                rows, span = profiled(fn, flush)
                bench = triton.testing.do_bench(fn, return_mode="median") * 1e3 if args.flush else None
                rounds[label].append((rows, span, bench))
        print("| path | kernel | launches per call | mean us | per round |")
        print("|---|---|---|---|---|")
        for label, runs in rounds.items():
            kernels = collections.defaultdict(list)
            for rows, _, _ in runs:
                for name, per_call, us in rows:
                    kernels[name].append((per_call, us))
            for name, vals in sorted(kernels.items(), key=lambda kv: -sum(p * u for p, u in kv[1])):
                print(f"| {label} | `{name[:110]}` | {vals[0][0]:g} | {statistics.mean(u for _, u in vals):.1f} | "
                      f"{' / '.join(f'{u:.1f}' for _, u in vals)} |")
            sums = [sum(p * us for _, p, us in rows) for rows, _, _ in runs]
            print(f"| {label} | **sum per call** | | {statistics.median(sums):.1f} | {' / '.join(f'{v:.1f}' for v in sums)} |")
            if args.flush:
                for what, i in (("fill end to last kernel end, median", 1), ("triton do_bench, median", 2)):
                    vals = [run[i] for run in runs]
                    print(f"| {label} | **{what}** | | {statistics.median(vals):.1f} | "
                          f"{' / '.join(f'{v:.1f}' for v in vals)} |")
        print()


if __name__ == "__main__":
    main()
