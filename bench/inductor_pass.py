"""Unchanged user programs compiled with and without schedx.inductor, timed in one process.

  pattern1   the fp8 cast + transpose of PyTorch issue 130015 as its report writes it,
             torch.compile default mode, at 4096^2, 8192^2 and 16384x4096 (bf16 x)
  w8         gpt-fast's WeightOnlyInt8Linear forward (8192 x 8192, bf16) under
             torch.compile(mode="reduce-overhead") with coordinate-descent tuning, M = 1..16
  w4         gpt-fast's WeightOnlyInt4Linear forward (torch's int4pack, group 128, 8192 x 8192)
             the same way, with freezing on in both compiles (the pass repacks constants);
             with --device cpu (w4 alone): torch's CPU int4pack op, default mode, at --nk and
             --threads, each compile timed by the median of single calls, alternated (the pass
             let rewrite on the CPU, which schedx.inductor.INT4PACK_DEVICES leaves out by default)
Each program is compiled twice (pass off, pass on: two separate compiles with the FX graph
cache off), then both are timed in turn, ROUNDS rounds, with triton.testing.do_bench (which
flushes L2 before each call), medians; the ratio is off / on. Beside it, per call: the GPU time
of its kernels (torch.profiler, summed), the time of 50 calls queued back to back without a
flush, and the kernels' names, so that a gap between do_bench and the kernels shows whether it
is host time or a kernel.

Usage (GPU machine, repository root, build/ built):
  SCHEDX_LIBRARY=build/runtime/libschedx.so python3 bench/inductor_pass.py --out f.md
"""

import argparse
import os
import statistics
import sys
import time
import types

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
import schedx.inductor as si  # noqa: E402
import schedx.int4  # noqa: E402
from compare_torch import environment, md_table, write_report  # noqa: E402

ROUNDS = 5
EXTRA = ["kernels' GPU us without / with", "queued us without / with", "kernels with the pass"]


def test_pattern1(x, scale):  # issue 130015's pattern, unchanged
    f = (x * scale).clamp(-448.0, 448.0).to(torch.float8_e4m3fn)
    f_t = f.t().contiguous().t()
    return f, f_t


class WeightOnlyInt8Linear(torch.nn.Module):
    """gpt-fast's module: int8 weight, per-row scales, F.linear(x, W.to(x.dtype)) * scales."""

    def __init__(self, n, k):
        super().__init__()
        self.register_buffer("weight", torch.randint(-128, 128, (n, k), dtype=torch.int8, device="cuda"))
        self.register_buffer("scales", (torch.rand(n, device="cuda") / 64).to(torch.bfloat16))

    def forward(self, x):
        return F.linear(x, self.weight.to(dtype=x.dtype)) * self.scales


class WeightOnlyInt4Linear(torch.nn.Module):
    """gpt-fast's module: torch's int4pack weight (inner k tiles 8), scales_and_zeros [K/g, N, 2]
    bf16, aten._weight_int4pack_mm; the weight is (u - 8) * s + zero."""

    def __init__(self, n, k, group_size=128, device="cuda"):
        super().__init__()
        self.u = torch.randint(0, 16, (n, k), dtype=torch.int32, device=device)
        s = torch.rand(k // group_size, n, device=device) / 64 + 1e-3
        zero = (8 - torch.rand(k // group_size, n, device=device) * 15) * s  # gpt-fast: min + 8 s
        self.register_buffer("weight", torch.ops.aten._convert_weight_to_int4pack(
            (self.u[:, ::2] << 4 | self.u[:, 1::2]).to(torch.uint8), 8) if device == "cuda" else
            torch.ops.aten._convert_weight_to_int4pack_for_cpu(self.u, 2))
        self.register_buffer("scales_and_zeros", torch.stack([s, zero], -1).to(torch.bfloat16))
        self.group_size, self.out_features = group_size, n
        self.mm = schedx.int4.int4pack_mm(device)

    def forward(self, x):
        y = self.mm(x.reshape(-1, x.shape[-1]), self.weight, self.group_size, self.scales_and_zeros)
        return y.reshape(x.shape[:-1] + (self.out_features,))

    def reference(self, x):
        s, zero = (self.scales_and_zeros[..., i].double().repeat_interleave(self.group_size, 0) for i in (0, 1))
        return x.double() @ ((self.u.double().t() - 8) * s + zero)


def own_code(fn):
    """A function calling fn whose code object is its own: Dynamo keeps compiled code per code
    object, so two compiles of one function (or of two modules of one class) would otherwise
    serve each other's cache entries, whatever the pass's setting when each was made."""
    def call(*args):
        return fn(*args)
    return types.FunctionType(call.__code__.replace(), call.__globals__, call.__name__, None, call.__closure__)


def compile_both(fn, args, **kwargs):
    """{False: fn compiled without the pass, True: with it}, each warmed up on args, and the
    pattern counts the pass reported."""
    out, fired = {}, []
    for on in (False, True):
        torch._dynamo.reset()
        first = len(si.reports())
        (si.enable if on else si.disable)()
        c = torch.compile(own_code(fn), **kwargs)
        for _ in range(3):
            c(*args)
        sync()
        si.disable()
        out[on] = c
        if on:
            fired = [r.pattern.value for rep in si.reports()[first:] for r in rep.rewrites]
    return out, fired


def sync():
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def cpu_ms(f, calls=20):
    """Median ms of single calls on the CPU (each call synchronous)."""
    times = []
    for _ in range(calls):
        start = time.perf_counter()
        f()
        times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times)


def alternate(fns, args, device="cuda"):
    if device == "cuda":
        from triton.testing import do_bench
    times = {k: [] for k in fns}
    for _ in range(ROUNDS):
        for k, f in fns.items():
            times[k].append(do_bench(lambda: f(*args), warmup=25, rep=100) if device == "cuda" else cpu_ms(lambda: f(*args)))
    return {k: statistics.median(v) * 1e3 for k, v in times.items()}


def kernels(f, args, calls=20):
    """(GPU us per call summed over its kernels, the kernel names) from torch.profiler."""
    f(*args)
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            f(*args)
        torch.cuda.synchronize()
    gpu = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA
           and "memcpy" not in e.name.lower() and "memset" not in e.name.lower()]
    names = sorted({e.name[:48] for e in gpu})
    return sum(e.device_time_total for e in gpu) / calls, names


def queued(f, args, calls=50):
    """us per call, calls launched back to back (no flush): the GPU's pace when the host keeps up."""
    f(*args)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize()
    start.record()
    for _ in range(calls):
        f(*args)
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) * 1e3 / calls


def breakdown(fns, args):
    """Cells: GPU kernel us off / on, queued us off / on, and the kernels the pass's program runs."""
    q = {on: queued(fns[on], args) for on in fns}  # before any profiling: CUPTI may slow launches after it
    k = {on: kernels(fns[on], args) for on in fns}
    return [f"{k[False][0]:.1f} / {k[True][0]:.1f}", f"{q[False]:.1f} / {q[True]:.1f}", "; ".join(k[True][1])]


def linear_cells(mod, x, ref, weight_bytes, device="cuda", **compile_kwargs):
    """(the two compiles, cells: without us, with us, speed-up, weight GB/s with, rewritten, error)
    for a weight-only linear module on x, compiled without and with the pass."""
    fns, fired = compile_both(mod, (x,), **compile_kwargs)
    err = {on: ((fns[on](x).double() - ref).abs().max() / ref.abs().max()).item() for on in fns}
    t = alternate(fns, (x,), device)
    gbs = weight_bytes / t[True] / 1e3
    return fns, [f"{t[False]:.1f}", f"{t[True]:.1f}", f"{t[False] / t[True]:.2f}x", f"{gbs:.0f}" if gbs >= 100 else f"{gbs:.1f}",
                 ",".join(fired), f"{err[False]:.1e} / {err[True]:.1e}"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shapes", default="4096x4096,8192x8192,16384x4096")
    ap.add_argument("--ms", default="1,2,4,8,16")
    ap.add_argument("--sections", default="pattern1,w8,w4")
    ap.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    ap.add_argument("--nk", default="8192x8192", help="w4: N x K")
    ap.add_argument("--threads", default="", help="CPU: torch thread counts, e.g. 1,2")
    ap.add_argument("--out")
    ap.add_argument("--commit")
    args = ap.parse_args()
    torch._inductor.config.fx_graph_cache = False
    torch._dynamo.config.cache_size_limit = 1024
    env = environment(args)
    rows1, rows2, rows3 = [], [], []
    sections = args.sections.split(",")
    if args.device == "cpu":
        return cpu_w4(args, env)
    scale = torch.tensor([2.0], device="cuda")
    for shape in args.shapes.split(",") if "pattern1" in sections else []:
        m, k = (int(v) for v in shape.split("x"))
        x = torch.randn(m, k, device="cuda").to(torch.bfloat16)
        fns, fired = compile_both(test_pattern1, (x, scale))
        ref, got = fns[False](x, scale), fns[True](x, scale)
        exact = all(torch.equal(a.view(torch.uint8), b.view(torch.uint8)) and a.stride() == b.stride()
                    for a, b in zip(ref, got))
        t = alternate(fns, (x, scale))
        gbs = 4 * m * k / t[True] / 1e3
        rows1.append([shape, f"{t[False]:.1f}", f"{t[True]:.1f}", f"{t[False] / t[True]:.2f}x", f"{gbs:.0f}",
                      ",".join(fired), "yes" if exact else "NO"] + breakdown(fns, (x, scale)))
        print(rows1[-1], flush=True)
    torch._inductor.config.coordinate_descent_tuning = True
    mod = WeightOnlyInt8Linear(8192, 8192)
    for m in (int(v) for v in args.ms.split(",")) if "w8" in sections else []:
        x = torch.randn(m, 8192, device="cuda").to(torch.bfloat16)
        with torch.no_grad():
            ref = (x.double() @ mod.weight.double().t()) * mod.scales.double()
            fns, cells = linear_cells(mod, x, ref, 8192 * 8192, mode="reduce-overhead", fullgraph=True)
            # under no_grad as compiled: with grad enabled, Dynamo would recompile (the pass off by then)
            rows2.append([m] + cells + breakdown(fns, (x,)))
        print(rows2[-1], flush=True)
    n, k = (int(v) for v in args.nk.split("x"))
    mod4 = WeightOnlyInt4Linear(n, k)
    for m in (int(v) for v in args.ms.split(",")) if "w4" in sections else []:
        x = torch.randn(m, k, device="cuda").to(torch.bfloat16)
        with torch.no_grad(), torch._inductor.config.patch(freezing=True):
            fns, cells = linear_cells(mod4, x, mod4.reference(x), n * k / 2, mode="reduce-overhead", fullgraph=True)
            rows3.append([m] + cells + breakdown(fns, (x,)))
        print(rows3[-1], flush=True)
    parts = {
        "pattern1": ["Issue 130015's test_pattern1 (bf16 x, one-element fp32 scale on the GPU), torch.compile default mode; "
                     "GB/s counts 4 bytes per element (2 read, 1 + 1 written); 'equal' = both outputs bit-equal with "
                     "equal strides:", "",
                     md_table(["M x K", "without us", "with us", "speed-up", "GB/s with", "rewritten", "equal"] + EXTRA,
                              rows1), ""],
        "w8": ["gpt-fast's WeightOnlyInt8Linear, N = K = 8192, bf16, mode='reduce-overhead', coordinate-descent tuning; "
               "GB/s over the int8 weight; error = max |y - fp64 reference| / max |reference|, without / with:", "",
               md_table(["M", "without us", "with us", "speed-up", "weight GB/s with", "rewritten", "error"] + EXTRA,
                        rows2), ""],
        "w4": [f"gpt-fast's WeightOnlyInt4Linear (torch's int4pack, group 128), N x K = {args.nk}, bf16, the same "
               "settings with freezing on in both compiles; GB/s over the 4-bit weight; error as above, against the "
               "format's own (u - 8) * s + zero:", "",
               md_table(["M", "without us", "with us", "speed-up", "weight GB/s with", "rewritten", "error"] + EXTRA,
                        rows3), ""],
    }
    write_report("schedx.inductor on unchanged programs", env, [
        f"Each program compiled without and with the pass, timed in turn ({ROUNDS} rounds of "
        "triton.testing.do_bench, L2 flushed before each call), medians in us; ratio = without / with.", ""]
        + [line for name, lines in parts.items() if name in sections for line in lines],
        args.out)


def cpu_w4(args, env):
    """gpt-fast's int4 module on the CPU, compiled (default mode, freezing) without and with the pass."""
    n, k = (int(v) for v in args.nk.split("x"))
    mod = WeightOnlyInt4Linear(n, k, device="cpu")
    si.INT4PACK_DEVICES = ("cpu",)  # the CPU rewrite, off by default, is what this measures
    rows = []
    for threads in (int(v) for v in (args.threads or str(torch.get_num_threads())).split(",")):
        torch.set_num_threads(threads)
        for m in (int(v) for v in args.ms.split(",")):
            x = torch.randn(m, k).to(torch.bfloat16)
            with torch.no_grad(), torch._inductor.config.patch(freezing=True):
                _, cells = linear_cells(mod, x, mod.reference(x), n * k / 2, "cpu", fullgraph=True)
            rows.append([threads, m] + cells)
            print(rows[-1], flush=True)
    write_report("schedx.inductor on gpt-fast's int4 module, CPU", env, [
        f"gpt-fast's WeightOnlyInt4Linear on the CPU (torch's int4pack, aten._weight_int4pack_mm_for_cpu, group 128), "
        f"N x K = {args.nk}, bf16 x, torch.compile default mode with freezing, without and with the pass; "
        f"{ROUNDS} rounds alternated, each the median of 20 single calls; medians in us; ratio = without / with; "
        "GB/s over the 4-bit weight; error = max |y - fp64 reference| / max |reference| against the format's "
        "(u - 8) * s + zero, without / with:", "",
        md_table(["threads", "M", "without us", "with us", "speed-up", "weight GB/s with", "rewritten", "error"], rows),
        ""], args.out)


if __name__ == "__main__":
    main()
