"""One float8 linear training step (forward + backward) with tensorwise scales, in one process.

For each (M, K, N): x [M, K] bf16, W [N, K] bf16, grad_out [M, N]; one step is y = x @ W.T
then y.backward(grad_out), timed by CUDA events, every variant in turn for 7 rounds of 3 steps (medians):
  bf16             torch.nn.Linear, eager
  torchao          torchao.float8 Float8Linear (tensorwise, dynamic scaling), torch.compile
  math compiled    the same math in plain PyTorch (amax, scale, clamp + .to(), torch._scaled_mm), torch.compile
  schedx           schedx.nn.Float8Linear, current scaling, eager and torch.compile
  schedx delayed   schedx.nn.Float8Linear, delayed scaling (amax fused into the cast), eager
The casts' share of a step is the GPU time of its kernels that are not GEMMs (torch
profiler). schedx's y, dgrad and wgrad are compared bit for bit with torchao's.

Usage (GPU machine, repository root; torchao from carried wheels on PYTHONPATH):
  SCHEDX_LIBRARY=build/runtime/libschedx.so python3 bench/float8_train_step.py --out f.md
"""

import argparse
import contextlib
import os
import statistics
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
import schedx.inductor  # noqa: E402
import schedx.nn as snn  # noqa: E402
from compare_torch import environment, md_table, write_report  # noqa: E402
from inductor_pass import own_code  # noqa: E402

SHAPES = [(16384, 4096, 14336), (16384, 14336, 4096), (8192, 8192, 8192)]
ROUNDS = 7
GEMM_KERNEL_WORDS = ("gemm", "xmma", "cutlass", "nvjet", "cublas", "sm90_", "ampere_", "wgmma")


def tensorwise_cast(t, dtype):
    """torchao's tensorwise rule and cast in plain PyTorch: (fp8 t, 1/scale)."""
    amax = t.abs().max().to(torch.float64)
    scale = (torch.finfo(dtype).max / torch.clamp(amax, min=1e-12)).to(torch.float32)
    fmax = torch.finfo(dtype).max
    return torch.clamp(t.float() * scale, -fmax, fmax).to(dtype), scale.reciprocal()


class MathFloat8Matmul(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, w):
        xq, xi = tensorwise_cast(x, torch.float8_e4m3fn)
        wq, wi = tensorwise_cast(w, torch.float8_e4m3fn)
        ctx.save_for_backward(xq, wq, xi, wi)
        return torch._scaled_mm(xq, wq.t(), scale_a=xi, scale_b=wi, out_dtype=x.dtype, use_fast_accum=True)

    @staticmethod
    def backward(ctx, g):
        xq, wq, xi, wi = ctx.saved_tensors
        gq, gi = tensorwise_cast(g, torch.float8_e5m2)
        gx = torch._scaled_mm(gq, wq.t().contiguous().t(), scale_a=gi, scale_b=wi, out_dtype=g.dtype)
        gw = torch._scaled_mm(gq.t().contiguous(), xq.t().contiguous().t(), scale_a=gi, scale_b=xi, out_dtype=g.dtype)
        return gx, gw


class MathFloat8Linear(torch.nn.Linear):
    def forward(self, x):
        return MathFloat8Matmul.apply(x, self.weight)


def step_fn(run, weight, x, grad):
    def step():
        x.grad = None
        weight.grad = None
        run(x).backward(grad)
    return step


def time_step(step, n, warm):
    for _ in range(warm):
        step()
    ts = []
    for _ in range(n):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        step()
        b.record()
        b.synchronize()
        ts.append(a.elapsed_time(b) * 1e3)
    return statistics.median(ts)


def time_steps_back_to_back(step, n):
    """Microseconds per step over n steps queued without a sync between them, as a training
    loop runs: the host's time before a step's first kernel hides behind the previous step."""
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    a.record()
    for _ in range(n):
        step()
    b.record()
    b.synchronize()
    return a.elapsed_time(b) * 1e3 / n


def kernel_time_us(step, steps=3):
    """GPU microseconds per step in kernels that are not GEMMs, in all kernels, and per GEMM
    kernel name (calls and microseconds per step)."""
    from torch.profiler import ProfilerActivity, profile
    step()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(steps):
            step()
        torch.cuda.synchronize()
    other = busy = 0.0
    gemms = {}
    for e in prof.key_averages():
        if e.device_type.name != "CUDA" and getattr(e, "self_device_time_total", 0) == 0:
            continue
        name = e.key.lower()
        t = getattr(e, "self_device_time_total", None) or getattr(e, "self_cuda_time_total", 0)
        busy += t
        if any(w in name for w in GEMM_KERNEL_WORDS):
            gemms[e.key] = (e.count / steps, t / steps)
        else:
            other += t
    return other / steps, busy / steps, gemms


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shapes", default=",".join("x".join(map(str, s)) for s in SHAPES))
    ap.add_argument("--variants", help="comma-separated 'kind (mode)' labels to run, e.g. "
                    "'bf16 (eager),torchao (compile),torchao+pass (compile)'; default: all")
    ap.add_argument("--out")
    ap.add_argument("--commit")
    args = ap.parse_args()
    torch._dynamo.config.cache_size_limit = 1024
    env = environment(args)
    try:
        import torchao
        from torchao.float8 import convert_to_float8_training
        env["torchao"] = torchao.__version__
    except ImportError as e:
        convert_to_float8_training = None
        env["torchao"] = f"not importable ({e})"
    rows, exact, gemm_rows = [], [], []
    for shape in args.shapes.split(","):
        m, k, n = (int(v) for v in shape.split("x"))
        torch.manual_seed(0)
        x = (torch.randn(m, k, device="cuda") * 2).to(torch.bfloat16).requires_grad_()
        grad = (torch.randn(m, n, device="cuda") / 10).to(torch.bfloat16)
        lin = torch.nn.Linear(k, n, bias=False, device="cuda", dtype=torch.bfloat16)

        def make(kind):
            if kind == "bf16":
                return lin
            if kind in ("torchao", "torchao+pass"):
                return convert_to_float8_training(torch.nn.Sequential(lin))[0]
            if kind == "math":
                mm = MathFloat8Linear(k, n, bias=False, device="meta")
                mm.weight = lin.weight
                return mm
            cfg = snn.Float8LinearConfig(scaling="delayed" if kind == "schedx delayed" else "current")
            return snn.Float8Linear.from_float(lin, cfg)

        variants = [("bf16", "eager"), ("torchao", "compile"), ("torchao+pass", "compile"), ("math", "compile"),
                    ("schedx", "eager"), ("schedx", "compile"), ("schedx delayed", "eager"),
                    ("schedx delayed", "compile")]
        if args.variants:
            variants = [v for v in variants if f"{v[0]} ({v[1]})" in args.variants.split(",")]
        steps, results, failed = {}, {}, []
        for kind, mode in variants:
            if kind.startswith("torchao") and convert_to_float8_training is None:
                continue
            label = f"{kind} ({mode})"
            try:
                module = make(kind)
                run = torch.compile(own_code(module)) if mode == "compile" else module
                step = step_fn(run, lin.weight, x, grad)
                with schedx.inductor.enabled() if kind.endswith("+pass") else contextlib.nullcontext():
                    for _ in range(3):  # compile (forward and backward graphs) and warm up
                        step()
                x.grad = None
                lin.weight.grad = None
                out = run(x)
                out.backward(grad)
                results[label] = (out.detach(), x.grad.clone(), lin.weight.grad.clone())
                steps[label] = step
            except Exception as e:  # noqa: BLE001  (a failed variant is a row, not the end of the run)
                failed.append([shape, label, f"failed: {type(e).__name__}: {str(e).splitlines()[0][:120]}",
                               "", "", "", ""])
                print(failed[-1], flush=True)
        # Rounds in turn, so that every variant sees the same clocks and temperature.
        times = {label: [] for label in steps}
        queued = {label: [] for label in steps}
        for _ in range(ROUNDS):
            for label, step in steps.items():
                times[label].append(time_step(step, n=3, warm=0))
                queued[label].append(time_steps_back_to_back(step, n=3))
        base = statistics.median(times["bf16 (eager)"])
        anchor = statistics.median(times["torchao (compile)"]) if "torchao (compile)" in times else None
        queued_anchor = statistics.median(queued["torchao (compile)"]) if "torchao (compile)" in queued else None
        for label, step in steps.items():
            t, q = statistics.median(times[label]), statistics.median(queued[label])
            casts, busy, gemms = kernel_time_us(step)
            rows.append([shape, label, f"{t:.0f}", f"{casts:.0f} ({100 * casts / t:.0f}%)", f"{busy:.0f}",
                         f"{base / t:.2f}x", f"{anchor / t:.3f}x" if anchor else "", f"{q:.0f}",
                         f"{queued_anchor / q:.3f}x" if queued_anchor else ""])
            if label != "bf16 (eager)":
                for name, (calls, us) in sorted(gemms.items(), key=lambda kv: -kv[1][1]):
                    gemm_rows.append([shape, label, name[:90], f"{calls:.0f}", f"{us:.0f}"])
            print(rows[-1], flush=True)
        rows += [r + ["", ""] for r in failed]
        ref = results.get("torchao (compile)")
        for label, got in results.items():
            if ref is not None and label.startswith(("schedx (", "torchao+pass")):
                same = [torch.equal(a, b) for a, b in zip(got, ref)]
                exact.append([shape, label, *("yes" if s else "no" for s in same)])
    table = md_table(["M x K x N", "step", "us per step", "casts us (share)", "GPU busy us", "speed-up over bf16",
                      "speed-up over torchao", "us per step, queued", "speed-up over torchao, queued"], rows)
    write_report("Float8 linear training step, tensorwise", env, [
        "Forward + backward of one linear, CUDA events; the variants timed in turn, 7 rounds of 3 steps, medians; "
        "'us per step': each step synchronized alone (its host time before the first kernel counts); 'queued': "
        "3 steps queued between two events, as a training loop runs them; "
        "casts = GPU time in kernels other than the three GEMMs, GPU busy = in all kernels (torch profiler, "
        "3 steps).", "", table, "", "schedx against torchao's compiled Float8Linear, bit for bit:", "",
        md_table(["M x K x N", "schedx", "y", "grad x", "grad W"], exact), "",
        "The GEMM kernels of each step (torch profiler, 3 steps; names as the profiler gives them, cut at 90 characters):",
        "", md_table(["M x K x N", "step", "GEMM kernel", "calls per step", "us per step"], gemm_rows), ""], args.out)

if __name__ == "__main__":
    main()
