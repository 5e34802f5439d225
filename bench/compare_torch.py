#!/usr/bin/env python3
"""schedx against what PyTorch users run today, in one process, on one GPU.

For both seed patterns over the shapes of ../shared/ANCHORS.md: eager PyTorch,
torch.compile (default, coordinate-descent tuning, max-autotune where it compiles in the
time budget), cuBLAS on pre-dequantized weights (w8), a device copy or read-only
reduction for bandwidth, and schedx (dispatched, and the best variant found by forcing
each CUDA variant). Every schedx result is checked (fp8 bit-exact against eager, w8
against an fp64 reference) before its time counts. Also: exhaustive bf16/fp16 bit
patterns through every CUDA variant, a call on a busy non-default stream, replay inside a
CUDA graph, and the host-side cost of one call.

Usage (GPU machine, from the repository root, after building build/):
    SCHEDX_LIBRARY=$PWD/build/runtime/libschedx.so python3 bench/compare_torch.py [--quick]
Writes bench/results/compare_torch_<date>.md (and a copy into $OUT when set). Each
section runs under try/except: a failure shows as ERR[n] in the table, with the error
listed under it, and the run goes on.
"""

import argparse
import datetime
import gc
import os
import shlex
import statistics
import subprocess
import sys
import time
import traceback

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "python"))

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import schedx  # noqa: E402
from schedx import _capi  # noqa: E402  (raw C ABI calls for the host-cost measurement)

FP8 = {"e4m3fn": (torch.float8_e4m3fn, 448.0), "e5m2": (torch.float8_e5m2, 57344.0)}
FP8_SHAPES = [(4096, 4096), (8192, 8192), (4096, 14336), (16384, 4096)]
# --ragged (issue 29): sizes off the tiles and steps, each beside an aligned neighbour.
FP8_SHAPES_RAGGED = [(3072, 4096), (2999, 4001), (4096, 4096), (4097, 4096), (8192, 8192), (8000, 8000),
                     (1, 8192), (7, 16384), (16384, 7), (32, 16384), (48, 8192), (16384, 32),
                     (12288, 6144), (12000, 6000)]
W8_NK_RAGGED = [(4096, 4096), (4097, 4096), (4096, 4100), (4096, 4544), (4096, 5000), (4096, 11008), (4096, 11009)]
W8_MS_RAGGED = [1, 4, 16]
W8_MS = [1, 2, 4, 8, 16, 32, 128, 256, 1024, 4096]
W8_MS_QUICK = [1, 2, 8, 16, 1024, 4096]
W8_NK_OTHER = [(4096, 4096), (14336, 4096), (4096, 14336)]
W8_MS_OTHER = [1, 2, 4, 8, 16, 1024, 4096]
W8_MS_OTHER_QUICK = [1, 16]
AUTOTUNE_W8_MS = {1, 16, 128}
FP8_SCALE = 100.0  # randn * 100 reaches past 448: saturation and subnormals both occur
W8_REL_TOL = 1e-2


# ---------------------------------------------------------------- reporting

class Skipped(Exception):
    """A section left out on purpose (--only): its cell says so; not an error."""


class Report:
    """Collects errors; a failed section becomes the cell ERR[n] and a numbered note."""

    def __init__(self):
        self.errors = []

    def error(self, where, exc):
        text = f"{type(exc).__name__}: {exc}".strip().splitlines()
        short = text[0] if len(text) <= 2 else f"{text[0]} ... {text[-1]}"
        self.errors.append(f"{where}: {short[:400]}")
        print(f"[error] {where}", file=sys.stderr)
        traceback.print_exc(file=sys.stderr)
        return f"ERR[{len(self.errors)}]"

    def attempt(self, where, fn):
        try:
            return fn()
        except Skipped as e:
            return str(e)
        except Exception as e:  # noqa: BLE001  every failure is reported, the run goes on
            return self.error(where, e)


def cell(v, digits=1):
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.{digits}f}"
    return str(v)


def ratio(a, b):
    """a / b as '1.23x' when both are times, else '-'."""
    if isinstance(a, float) and isinstance(b, float) and b > 0:
        return f"{a / b:.2f}x"
    return "-"


def md_table(header, rows):
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(cell(c) for c in r) + " |" for r in rows]
    return "\n".join(lines)


def log(msg):
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


class Budget:
    """Wall-clock budget: compile sections are skipped, not started, once it is spent."""

    def __init__(self, seconds):
        self.end = time.monotonic() + seconds

    def left(self):
        return self.end - time.monotonic()


# ---------------------------------------------------------------- timing

class Timer:
    """Median microseconds of fn on the current stream with L2 flushed before each run:
    triton.testing.do_bench when Triton imports, else CUDA events around each run after
    zeroing a 256 MiB buffer."""

    def __init__(self, quick):
        self.warmup_ms, self.rep_ms = (10, 40) if quick else (25, 100)
        try:
            from triton.testing import do_bench
            self.do_bench = do_bench
            self.method = "triton.testing.do_bench (L2 flushed before each run), median"
        except Exception:  # noqa: BLE001
            self.do_bench = None
            self.flush = torch.empty(256 << 20, dtype=torch.int8, device="cuda")
            self.method = "CUDA events around each run after zeroing 256 MiB (L2 flush), median"

    def __call__(self, fn):
        if self.do_bench is not None:
            return float(self.do_bench(fn, warmup=self.warmup_ms, rep=self.rep_ms, return_mode="median")) * 1e3
        for _ in range(3):
            fn()
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        n = max(5, min(1000, int(self.rep_ms * 1e-3 / max(time.perf_counter() - t0, 1e-6))))
        starts = [torch.cuda.Event(enable_timing=True) for _ in range(n)]
        ends = [torch.cuda.Event(enable_timing=True) for _ in range(n)]
        for s, e in zip(starts, ends):
            self.flush.zero_()
            s.record()
            fn()
            e.record()
        torch.cuda.synchronize()
        return statistics.median(s.elapsed_time(e) for s, e in zip(starts, ends)) * 1e3


# ---------------------------------------------------------------- torch versions of the patterns

def fp8_fn(fmt):
    dt, fmax = FP8[fmt]

    def cast_transpose(x, scale):
        f = (x * scale).clamp(-fmax, fmax).to(dt)
        return f, f.t().contiguous().t()

    return cast_transpose


def fp8_amax_fn(fmt):
    ct = fp8_fn(fmt)

    def cast_transpose_amax(x, scale):
        f, ft = ct(x, scale)
        return f, ft, x.abs().amax().float().reshape(1), scale.reciprocal()

    return cast_transpose_amax


def w8_eager(x, w, scales):
    return F.linear(x, w.to(x.dtype)) * scales


def w8_reference(x, w, scales):
    return (x.double() @ w.double().t()) * scales.double()


def rel_err(y, ref):
    return ((y.double() - ref).abs().max() / ref.abs().max().clamp_min(1e-30)).item()


def codes(t):
    return t.view(torch.uint8)


def fp8_mismatch(got, want, x=None, check_strides=True):
    """None when the fp8 outputs agree bit for bit (where x is NaN, schedx writes 0x7F),
    else a description of the first difference."""
    for name, g, w in zip(("rows", "cols"), got, want):
        if g is None:
            continue
        gc, wc = codes(g), codes(w)
        if x is not None:
            wc = torch.where(torch.isnan(x), torch.full_like(wc, 0x7F), wc)
        bad = (gc != wc).nonzero()
        if len(bad):
            i, j = bad[0].tolist()
            return (f"{name}: {len(bad)} codes differ, first at ({i}, {j}): got 0x{gc[i, j].item():02x} "
                    f"want 0x{wc[i, j].item():02x}")
    if check_strides and got[1] is not None and got[1].stride() != want[1].stride():
        return f"cols strides {got[1].stride()} are not {want[1].stride()}, those of f.t().contiguous().t()"
    return None


def cuda_variants(op):
    return [v.name for v in schedx.variants() if v.op == op and v.device == "cuda"]


def chosen(op):
    """The variant dispatch picked for the last call, with why ("heuristic", "tuned ...")."""
    reason = (schedx.last_reason(op) or "").split(" (")[0]
    return f"{schedx.last_variant(op)} ({reason})"


def best_of(r, cols):
    ts = [r.get(c) for c in cols if isinstance(r.get(c), float)]
    return min(ts) if ts else None


def time_variants(rep, timer, op, where, call, check, r, per_variant, key):
    """Forces each CUDA variant of op in turn; those that cannot take the call say so and
    are skipped; each other one is checked, then timed. Sets r['best'], r['best_variant']."""
    best = None
    for name in cuda_variants(op):
        def one(name=name):
            with schedx.forcing(op, name):
                try:
                    check(call(), f"variant {name}")
                except schedx.SchedxError as e:
                    if e.status == schedx.Status.ERR_VARIANT_CANNOT_RUN:
                        return None
                    raise
                return timer(call)

        t = rep.attempt(f"{where} variant {name}", one)
        if t is not None:
            per_variant.setdefault(name, {})[key] = t
        if isinstance(t, float) and (best is None or t < best[0]):
            best = (t, name)
    r["best"], r["best_variant"] = best if best else ("-", "")


COMPILE_MODES = {
    "compile": {},
    "compile+cd": {"options": {"coordinate_descent_tuning": True}},
    # No CUDA graphs: kernel time is compared, like the other columns.
    "max-autotune": {"mode": "max-autotune-no-cudagraphs"},
}


ANCHOR_ROUNDS = 3


class CompileJob:
    """One torch.compile measurement, run after every schedx and eager number is in, in
    priority order, while the time budget lasts. `anchor` (schedx's call, run as the row's
    best variant where one was found) is timed alternately with the compiled function,
    ANCHOR_ROUNDS times each, medians kept: a long run of large GEMMs heats the GPU and
    moves its clock by up to 16% (bench/results/gpu_checks_2026-12-04_h200_34a0b15.md), so
    times taken minutes apart, or even one after the other, are not a fair comparison."""

    def __init__(self, r, col, where, fn, mode, inputs, check, autotune=False, anchor=None, anchor_op=None):
        self.r, self.col, self.where, self.fn, self.mode = r, col, where, fn, mode
        self.inputs, self.check, self.autotune, self.anchor = inputs, check, autotune, anchor
        self.anchor_op = anchor_op  # None: the anchor runs dispatched (no best variant applies)

    def time_anchor(self, timer):
        name = self.r.get("best_variant")
        if not (self.anchor_op and name):
            return timer(self.anchor)
        with schedx.forcing(self.anchor_op, name):
            return timer(self.anchor)

    def run(self, rep, timer, budget, autotune_left):
        if budget.left() < (60 if self.autotune else 20) or (self.autotune and autotune_left <= 0):
            self.r[self.col] = "skipped (time budget)"
            return
        log(f"{self.where}: compiling")

        def go():
            # A fresh dynamo state per job: each mode and shape compiles on its own terms.
            torch._dynamo.reset()
            c = torch.compile(self.fn, dynamic=False, **self.mode)
            bad = self.check(c(*self.inputs))
            if bad:
                raise AssertionError(f"compiled output differs: {bad}")
            if self.anchor is None:
                return timer(lambda: c(*self.inputs))
            compiled, anchored = [], []
            for _ in range(ANCHOR_ROUNDS):
                compiled.append(timer(lambda: c(*self.inputs)))
                anchored.append(self.time_anchor(timer))
            self.r[self.col + " anchor"] = statistics.median(anchored)
            return statistics.median(compiled)

        self.r[self.col] = rep.attempt(self.where, go)


# ---------------------------------------------------------------- pattern 1

def measure_fp8(args, rep, timer):
    """Eager, copy and schedx for every shape; returns (results, per-variant times, noise,
    compile jobs by priority)."""
    fmt = "e4m3fn"
    eager = fp8_fn(fmt)
    results, per_variant, noise = {}, {}, []
    jobs = {"compile": [], "compile+cd": [], "compile+amax": [], "max-autotune": []}
    for (m, k) in (FP8_SHAPES_RAGGED if args.ragged else FP8_SHAPES):
        r = results[(m, k)] = {}
        where = f"fp8 {m}x{k}"
        log(f"{where}: eager, copy, schedx")
        try:
            x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
            scale = torch.full((1,), FP8_SCALE, device="cuda", dtype=torch.float32)
            want = eager(x, scale)
        except Exception as e:  # noqa: BLE001
            r["eager"] = rep.error(f"{where} inputs", e)
            continue
        r["eager"] = rep.attempt(f"{where} eager", lambda: timer(lambda: eager(x, scale)))
        dst = torch.empty_like(x)
        r["copy"] = rep.attempt(f"{where} copy", lambda: timer(lambda: dst.copy_(x)))

        def call():
            return schedx.cast_transpose_fp8(x, scale, fmt)

        def check(got, label):
            bad = fp8_mismatch(got, want)
            if bad:
                raise AssertionError(f"{label} differs from eager: {bad}")

        def dispatched():
            check(call(), "schedx")
            name = chosen("cast_transpose")
            t = timer(call)
            noise.append((f"{m}x{k}", t, timer(call)))
            return t, name

        out = rep.attempt(f"{where} schedx", dispatched)
        r["schedx"], r["schedx_variant"] = out if isinstance(out, tuple) else (out, "")

        def with_amax():
            got = schedx.cast_transpose_fp8(x, scale, fmt, amax=True)
            check(got[:2], "schedx +amax")
            if not torch.equal(got[2], x.abs().amax().float().reshape(1)):
                raise AssertionError(f"amax {got[2].item()} != {x.abs().amax().item()}")
            if not torch.equal(got[3], scale.reciprocal()):
                raise AssertionError("scale_inv != 1/scale")
            return timer(lambda: schedx.cast_transpose_fp8(x, scale, fmt, amax=True))

        r["schedx_amax"] = rep.attempt(f"{where} schedx+amax", with_amax)
        time_variants(rep, timer, "cast_transpose", where, call, check, r, per_variant, (m, k))

        def compiled_check(got, want=want):
            return fp8_mismatch(got[:2], want, check_strides=False)

        # Bound now: the jobs run after the loop has moved on to other tensors.
        anchor = lambda x=x, s=scale: schedx.cast_transpose_fp8(x, s, fmt)  # noqa: E731
        anchor_amax = lambda x=x, s=scale: schedx.cast_transpose_fp8(x, s, fmt, amax=True)  # noqa: E731
        for col in ("compile", "compile+cd"):
            jobs[col].append(CompileJob(r, col, f"{where} {col}", eager, COMPILE_MODES[col], (x, scale),
                                        compiled_check, anchor=anchor, anchor_op="cast_transpose"))
        jobs["compile+amax"].append(CompileJob(r, "compile+amax", f"{where} compile+amax", fp8_amax_fn(fmt),
                                               COMPILE_MODES["compile"], (x, scale), compiled_check,
                                               anchor=anchor_amax))
        if not args.quick or not jobs["max-autotune"]:
            jobs["max-autotune"].append(CompileJob(r, "max-autotune", f"{where} max-autotune", eager,
                                                   COMPILE_MODES["max-autotune"], (x, scale), compiled_check,
                                                   autotune=True))
    return results, per_variant, noise, jobs


def fp8_tables(results, per_variant, ceil):
    rows = []
    copy_bw = ceil.get("copy")
    for (m, k), r in results.items():
        def pct(t):
            if isinstance(t, float) and isinstance(copy_bw, float):
                return f"{100 * 4 * m * k / (t * 1e-6) / copy_bw:.0f}%"
            return "-"

        torch_best = best_of(r, ("compile", "compile+cd", "max-autotune"))
        rows.append([f"{m}x{k}", r.get("eager"), r.get("compile"), r.get("compile+cd"), r.get("max-autotune"),
                     r.get("copy"), r.get("schedx"), r.get("schedx_variant"), r.get("best"), r.get("best_variant"),
                     ratio(r.get("compile"), r.get("schedx")), ratio(torch_best, r.get("schedx")),
                     ratio(torch_best, r.get("best")), pct(r.get("schedx")), pct(r.get("best")),
                     r.get("compile+amax"), r.get("schedx_amax"), ratio(r.get("compile+amax"), r.get("schedx_amax")),
                     r.get("compile anchor"), ratio(r.get("compile"), r.get("compile anchor")),
                     r.get("compile+cd anchor"), ratio(r.get("compile+cd"), r.get("compile+cd anchor")),
                     r.get("compile+amax anchor"), ratio(r.get("compile+amax"), r.get("compile+amax anchor"))])
    header = ["M x K", "eager us", "compile us", "compile+cd us", "max-autotune us", "copy of x us", "schedx us",
              "schedx variant", "best us", "best variant", "compile/schedx", "best compile/schedx",
              "best compile/best", "schedx % copy bw", "best % copy bw", "compile+amax us", "schedx+amax us",
              "compile+amax/schedx+amax", "schedx best us, alternated with compile", "compile/schedx alternated",
              "schedx best us, alternated with compile+cd", "compile+cd/schedx alternated",
              "schedx+amax us, alternated with compile+amax", "compile+amax/schedx+amax alternated"]
    shapes = list(results)
    variant_rows = [[n] + [per_variant[n].get(s) for s in shapes] for n in per_variant]
    return (md_table(header, rows),
            md_table(["variant"] + [f"{m}x{k} us" for m, k in shapes], variant_rows) if variant_rows else "")


# ---------------------------------------------------------------- pattern 2

def w8_shapes(args):
    """(M, N, K) to measure: the default lists, or --w8-nk / --w8-ms where given."""
    ms, ms_other = (W8_MS_QUICK, W8_MS_OTHER_QUICK) if args.quick else (W8_MS, W8_MS_OTHER)
    shapes = [(m, 8192, 8192) for m in ms] + [(m, n, k) for n, k in W8_NK_OTHER for m in ms_other]
    if args.ragged:
        shapes = [(m, n, k) for n, k in W8_NK_RAGGED for m in (args.w8_ms or W8_MS_RAGGED)]
    elif args.w8_nk:
        nks = [tuple(int(v) for v in nk.split("x")) for nk in args.w8_nk.split(",")]
        shapes = [(m, n, k) for n, k in nks for m in (args.w8_ms or W8_MS_OTHER)]
    elif args.w8_ms:
        shapes = [(m, n, k) for m, n, k in shapes if m in args.w8_ms]
    return shapes


def measure_w8(args, rep, timer):
    """Eager, cuBLAS and schedx for every shape; returns (results, per-variant times,
    note, compile jobs by priority)."""
    have = schedx.has_w8_linear()
    note = None if have else "this libschedx.so has no schedx_w8_linear (issue 3 not built in): no schedx columns"
    results, per_variant = {}, {}
    jobs = {"compile+cd": [], "compile": [], "max-autotune": []}
    for (m, n, k) in w8_shapes(args):
        r = results[(m, n, k)] = {}
        where = f"w8 M={m} N={n} K={k}"
        log(f"{where}: eager, cuBLAS, schedx")
        try:
            x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
            w = torch.randint(-128, 128, (n, k), device="cuda", dtype=torch.int8)
            scales = (torch.rand(n, device="cuda") * 0.01 + 0.001).to(torch.bfloat16)
            ref = w8_reference(x, w, scales)
        except Exception as e:  # noqa: BLE001
            r["eager"] = rep.error(f"{where} inputs", e)
            continue

        def check(y, label, ref=ref):
            err = rel_err(y, ref)
            if not err <= W8_REL_TOL:  # NaN fails too
                raise AssertionError(f"{label}: rel err {err:.2e} > {W8_REL_TOL}")
            return err

        def eager_run():
            r["err_eager"] = check(w8_eager(x, w, scales), "eager")
            return timer(lambda: w8_eager(x, w, scales))

        r["eager"] = rep.attempt(f"{where} eager", eager_run)

        def cublas():
            w_deq = w.to(torch.bfloat16) * scales[:, None]
            check(F.linear(x, w_deq), "cuBLAS on dequantized W")
            return timer(lambda: F.linear(x, w_deq))

        r["cublas"] = rep.attempt(f"{where} cuBLAS", cublas)
        if have:
            def call():
                return schedx.w8_linear(x, w, scales)

            def dispatched():
                r["err_schedx"] = check(call(), "schedx")
                return timer(call), chosen("w8_linear")

            out = rep.attempt(f"{where} schedx", dispatched)
            r["schedx"], r["schedx_variant"] = out if isinstance(out, tuple) else (out, "")
            time_variants(rep, timer, "w8_linear", where, call, check, r, per_variant, (m, n, k))

        def compiled_check(y, ref=ref):
            err = rel_err(y, ref)
            return None if err <= W8_REL_TOL else f"rel err {err:.2e}"

        # Bound now: the jobs run after the loop has moved on to other tensors.
        anchor = (lambda x=x, w=w, s=scales: schedx.w8_linear(x, w, s)) if have else None
        for col in ("compile+cd", "compile"):
            jobs[col].append(CompileJob(r, col, f"{where} {col}", w8_eager, COMPILE_MODES[col], (x, w, scales),
                                        compiled_check, anchor=anchor, anchor_op="w8_linear"))
        if (n, k) == (8192, 8192) and m in AUTOTUNE_W8_MS and (m == 1 or not args.quick):
            jobs["max-autotune"].append(CompileJob(r, "max-autotune", f"{where} max-autotune", w8_eager,
                                                   COMPILE_MODES["max-autotune"], (x, w, scales), compiled_check,
                                                   autotune=True))
    return results, per_variant, note, jobs


def w8_tables(results, per_variant, ceil):
    rows = []
    read_bw = ceil.get("read")
    for (m, n, k), r in results.items():
        nbytes = n * k + 2 * m * k + 2 * m * n + 2 * n

        def pct(t):
            if isinstance(t, float) and isinstance(read_bw, float):
                return f"{100 * nbytes / (t * 1e-6) / read_bw:.0f}%"
            return "-"

        def err(key):
            return f"{r[key]:.1e}" if isinstance(r.get(key), float) else "-"

        torch_best = best_of(r, ("eager", "compile", "compile+cd", "max-autotune", "cublas"))
        rows.append([m, n, k, r.get("eager"), r.get("compile"), r.get("compile+cd"), r.get("max-autotune"),
                     r.get("cublas"), r.get("schedx"), r.get("schedx_variant"), r.get("best"), r.get("best_variant"),
                     ratio(r.get("compile+cd"), r.get("schedx")), ratio(torch_best, r.get("schedx")),
                     ratio(torch_best, r.get("best")), r.get("compile+cd anchor"),
                     ratio(r.get("compile+cd"), r.get("compile+cd anchor")), r.get("compile anchor"),
                     ratio(r.get("compile"), r.get("compile anchor")), pct(r.get("schedx")), pct(r.get("best")),
                     err("err_schedx"), err("err_eager")])
    header = ["M", "N", "K", "eager us", "compile us", "compile+cd us", "max-autotune us", "cuBLAS deq-W us",
              "schedx us", "schedx variant", "best us", "best variant", "compile+cd/schedx", "best torch/schedx",
              "best torch/best", "schedx best us, alternated with compile+cd", "compile+cd/schedx alternated",
              "schedx best us, alternated with compile", "compile/schedx alternated", "schedx % read bw", "best % read bw",
              "schedx rel err", "eager rel err"]
    shapes = list(results)
    variant_rows = [[v] + [per_variant[v].get(s) for s in shapes] for v in per_variant]
    return (md_table(header, rows),
            md_table(["variant"] + [f"{m},{n},{k} us" for m, n, k in shapes], variant_rows) if variant_rows else "")


# ---------------------------------------------------------------- ceilings

def ceilings(args, rep, timer):
    n = (512 << 20) if args.quick else (1 << 30)  # bf16 elements: 1 or 2 GiB
    out = {}
    try:
        src = torch.randn(n, device="cuda", dtype=torch.bfloat16)
        dst = torch.empty_like(src)
        out["copy"] = rep.attempt("copy ceiling", lambda: 4 * n / (timer(lambda: dst.copy_(src)) * 1e-6))
        out["read"] = rep.attempt("read ceiling", lambda: 2 * n / (timer(lambda: src.amax()) * 1e-6))
    except Exception as e:  # noqa: BLE001
        out["copy"] = rep.error("ceiling buffers", e)
    out["bytes"] = 2 * n
    return out


# ---------------------------------------------------------------- correctness checks

def exhaustive_check():
    """Every bf16 and fp16 bit pattern, both formats, five scales, through dispatch and
    through every CUDA variant that takes the call, against eager."""
    bits = torch.arange(1 << 16, dtype=torch.int32, device="cuda").to(torch.int16).reshape(256, 256)
    inputs = {"bf16": bits.view(torch.bfloat16), "fp16": bits.view(torch.float16)}
    names = [None] + cuda_variants("cast_transpose")
    calls = 0
    ran = set()
    for in_type, x in inputs.items():
        for fmt in FP8:
            for s in (1.0, 10.0, 2.0**-7, 448.0 / 3.7, 2.0**-12):
                scale = torch.full((1,), s, device="cuda", dtype=torch.float32)
                want = fp8_fn(fmt)(x, scale)
                for name in names:
                    with schedx.forcing("cast_transpose", name):
                        for kw in ({}, {"cols": False}, {"rows": False}, {"amax": True}):
                            try:
                                got = schedx.cast_transpose_fp8(x, scale, fmt, **kw)
                            except schedx.SchedxError as e:
                                if name and e.status == schedx.Status.ERR_VARIANT_CANNOT_RUN:
                                    continue
                                raise
                            bad = fp8_mismatch(got[:2], want, x)
                            if bad:
                                raise AssertionError(f"{in_type} {fmt} scale {s} {kw} "
                                                     f"{schedx.last_variant('cast_transpose')}: {bad}")
                            calls += 1
                            ran.add(schedx.last_variant("cast_transpose"))
    return f"ok: {calls} calls, {len(ran)} variants ({', '.join(sorted(ran))})"


def odd_layouts_check():
    """Shapes off the tile grid, a row stride wider than the row, fp32 input, and torch
    CPU tensors (CPU variants) against eager."""
    done = []
    for m, k in [(1, 1), (3, 1000), (1000, 3), (1000, 1001), (4096 + 64, 4096 - 64)]:
        x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
        scale = torch.full((1,), FP8_SCALE, device="cuda")
        bad = fp8_mismatch(schedx.cast_transpose_fp8(x, scale), fp8_fn("e4m3fn")(x, scale))
        if bad:
            raise AssertionError(f"{m}x{k} ({schedx.last_variant('cast_transpose')}): {bad}")
        done.append(f"{m}x{k}")
    wide = torch.randn(512, 640, device="cuda", dtype=torch.bfloat16)
    x = wide[:, :600]
    scale = torch.full((1,), FP8_SCALE, device="cuda")
    bad = fp8_mismatch(schedx.cast_transpose_fp8(x, scale), fp8_fn("e4m3fn")(x, scale))
    if bad:
        raise AssertionError(f"row stride 640, 600 columns: {bad}")
    done.append("row stride > K")
    x32 = torch.randn(512, 512, device="cuda") * 100
    bad = fp8_mismatch(schedx.cast_transpose_fp8(x32, 1.0, "e5m2"), fp8_fn("e5m2")(x32, torch.ones(1, device="cuda")))
    if bad:
        raise AssertionError(f"fp32 input: {bad}")
    done.append("fp32")
    xc = torch.randn(300, 200, dtype=torch.bfloat16)
    sc = torch.full((1,), FP8_SCALE)
    got = schedx.cast_transpose_fp8(xc, sc)
    bad = fp8_mismatch(got, fp8_fn("e4m3fn")(xc, sc))
    if bad:
        raise AssertionError(f"torch CPU tensor ({schedx.last_variant('cast_transpose')}): {bad}")
    done.append(f"CPU tensor via {schedx.last_variant('cast_transpose')}")
    return "ok: " + ", ".join(done)


def error_check():
    """Mistakes raise SchedxError with a message, on the CUDA path too."""
    x = torch.randn(64, 64, device="cuda", dtype=torch.bfloat16)
    cases = [
        ("transposed x", lambda: schedx.cast_transpose_fp8(x.t(), 1.0)),
        ("scale on the CPU", lambda: schedx.cast_transpose_fp8(x, torch.ones(1))),
        ("float64 scale", lambda: schedx.cast_transpose_fp8(x, torch.ones(1, device="cuda", dtype=torch.float64))),
        ("no outputs", lambda: schedx.cast_transpose_fp8(x, 1.0, rows=False, cols=False)),
    ]
    seen = []
    for what, fn in cases:
        try:
            fn()
        except schedx.SchedxError as e:
            seen.append(f"{what}: {e.status.name}")
            continue
        raise AssertionError(f"{what} did not raise")
    return "ok: " + "; ".join(seen)


def stream_check():
    """schedx on a non-default stream behind a long kernel that writes its input: it must
    wait for that write, and work queued after it on the stream must see its outputs."""
    m, k = 8192, 8192
    src = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
    scale = torch.full((1,), FP8_SCALE, device="cuda")
    want = fp8_fn("e4m3fn")(src, scale)
    x = torch.full((m, k), -3.0, device="cuda", dtype=torch.bfloat16)  # stale contents differ from src
    results = []
    s = torch.cuda.Stream()
    torch.cuda.synchronize()
    with torch.cuda.stream(s):
        torch.cuda._sleep(100_000_000)  # about 50 ms of spinning before the write
        x.copy_(src)
        got = schedx.cast_transpose_fp8(x, scale)
        after = (got[0].view(torch.uint8).clone(), got[1].view(torch.uint8).clone())
    s.synchronize()
    bad = fp8_mismatch(got, want) or fp8_mismatch(tuple(a.view(torch.float8_e4m3fn) for a in after), want)
    if bad:
        raise AssertionError(f"cast_transpose on a busy stream: {bad}")
    results.append("cast_transpose")
    if schedx.has_w8_linear():
        xs = torch.randn(4, 4096, device="cuda", dtype=torch.bfloat16)
        w = torch.randint(-128, 128, (4096, 4096), device="cuda", dtype=torch.int8)
        scales = (torch.rand(4096, device="cuda") * 0.01 + 0.001).to(torch.bfloat16)
        ref = w8_reference(xs, w, scales)
        xw = torch.full_like(xs, -3.0)
        torch.cuda.synchronize()
        with torch.cuda.stream(s):
            torch.cuda._sleep(100_000_000)
            xw.copy_(xs)
            y = schedx.w8_linear(xw, w, scales)
            y_after = y.clone()
        s.synchronize()
        for t in (y, y_after):
            err = rel_err(t, ref)
            if not err <= W8_REL_TOL:
                raise AssertionError(f"w8_linear on a busy stream: rel err {err:.2e}")
        results.append("w8_linear")
    return "ok: " + ", ".join(results)


def graph_check():
    """A schedx call captured in a CUDA graph replays with correct results on new inputs."""
    m, k = 1024, 2048
    x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
    scale = torch.full((1,), FP8_SCALE, device="cuda")
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm-up off the capture, as torch.cuda.graph's docs ask
        for _ in range(3):
            schedx.cast_transpose_fp8(x, scale, amax=True)
    torch.cuda.current_stream().wait_stream(side)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        out = schedx.cast_transpose_fp8(x, scale, amax=True)
    w8 = None
    if schedx.has_w8_linear():
        xw = torch.randn(2, 4096, device="cuda", dtype=torch.bfloat16)
        w = torch.randint(-128, 128, (4096, 4096), device="cuda", dtype=torch.int8)
        scales = (torch.rand(4096, device="cuda") * 0.01 + 0.001).to(torch.bfloat16)
        with torch.cuda.stream(side):
            for _ in range(3):
                schedx.w8_linear(xw, w, scales)
        torch.cuda.current_stream().wait_stream(side)
        gw = torch.cuda.CUDAGraph()
        with torch.cuda.graph(gw):
            yw = schedx.w8_linear(xw, w, scales)
        w8 = (gw, xw, w, scales, yw)
    for trial in range(3):
        x.copy_(torch.randn(m, k, device="cuda", dtype=torch.bfloat16))
        scale.fill_(FP8_SCALE / (trial + 1))
        g.replay()
        torch.cuda.synchronize()
        bad = fp8_mismatch(out[:2], fp8_fn("e4m3fn")(x, scale))
        if bad or not torch.equal(out[2], x.abs().amax().float().reshape(1)) \
                or not torch.equal(out[3], scale.reciprocal()):
            raise AssertionError(f"cast_transpose graph replay {trial}: {bad or 'amax or scale_inv wrong'}")
        if w8:
            gw, xw, w, scales, yw = w8
            xw.copy_(torch.randn_like(xw))
            gw.replay()
            torch.cuda.synchronize()
            err = rel_err(yw, w8_reference(xw, w, scales))
            if not err <= W8_REL_TOL:
                raise AssertionError(f"w8_linear graph replay {trial}: rel err {err:.2e}")
    return "ok: 3 replays on new inputs" + (", cast_transpose and w8_linear" if w8 else ", cast_transpose")


# ---------------------------------------------------------------- host-side cost

def per_call_us(fn, n_calls=400, reps=7):
    """Host microseconds per call of fn, back to back (median of `reps` rounds of `n_calls`)."""
    sync = torch.cuda.synchronize if torch.cuda.is_available() else (lambda: None)
    fn()
    sync()
    ts = []
    # The collector's full passes walk every object torch.compile has cached by now;
    # they would be charged to whichever call happens to trigger them.
    gc.collect()
    gc.freeze()
    try:
        for _ in range(reps):
            t0 = time.perf_counter()
            for _ in range(n_calls):
                fn()
            ts.append((time.perf_counter() - t0) / n_calls * 1e6)
            sync()
    finally:
        gc.unfreeze()
    return statistics.median(ts)


def write_report(title, env, body, out):
    """Prints a results file (title, the environment's lines, then `body`'s lines) and
    writes it to `out` when given."""
    text = "\n".join([f"# {title}, {env['date'][:10]}", ""] + [f"- {k}: {v}" for k, v in env.items()] + [""] + body)
    print(text)
    if out:
        with open(out, "w") as f:
            f.write(text)


def host_cost(rep, timer):
    """Host microseconds per call, back-to-back launches on a small shape (the GPU keeps
    up, so the host is what is measured): the Python API, the raw C ABI through ctypes
    (argument checks, dispatch, launch, plus ~1 us of ctypes), and eager torch."""

    rows = []
    m, k = 256, 256
    x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
    scale = torch.full((1,), FP8_SCALE, device="cuda")
    rows_out = torch.empty(m, k, device="cuda", dtype=torch.float8_e4m3fn)
    cols_out = torch.empty(k, m, device="cuda", dtype=torch.float8_e4m3fn)
    lib = _capi.lib()
    stream = torch.cuda.current_stream().cuda_stream
    args = (x.data_ptr(), m, k, k, _capi.BF16, scale.data_ptr(), 0, rows_out.data_ptr(), k, cols_out.data_ptr(), m,
            None, None, _capi.DEVICE_CUDA, stream)

    def raw():
        lib.schedx_cast_transpose_fp8(*args)

    _capi.check(lib.schedx_cast_transpose_fp8(*args))
    kernel = rep.attempt("host cost kernel time", lambda: timer(lambda: schedx.cast_transpose_fp8(x, scale)))
    label = f"cast_transpose {m}x{k}"
    rows.append([label, "schedx Python API", rep.attempt("host cost python", lambda: per_call_us(
        lambda: schedx.cast_transpose_fp8(x, scale))), kernel])
    rows.append([label, "schedx Python API, outputs given (out=)", rep.attempt("host cost python out", lambda: per_call_us(
        lambda: schedx.cast_transpose_fp8(x, scale, out=(rows_out, cols_out.T)))), kernel])
    rows.append([label, "schedx C ABI via ctypes", rep.attempt("host cost C ABI", lambda: per_call_us(raw)), kernel])
    eager = fp8_fn("e4m3fn")
    rows.append([label, "eager torch (4 kernels)", rep.attempt("host cost eager", lambda: per_call_us(
        lambda: eager(x, scale))), rep.attempt("eager small kernel time", lambda: timer(lambda: eager(x, scale)))])
    if schedx.has_w8_linear():
        # N = K = 1024: the GEMV takes ~3 us, so back-to-back calls measure the host.
        nk = 1024
        xw = torch.randn(1, nk, device="cuda", dtype=torch.bfloat16)
        w = torch.randint(-128, 128, (nk, nk), device="cuda", dtype=torch.int8)
        scales = (torch.rand(nk, device="cuda") * 0.01 + 0.001).to(torch.bfloat16)
        y = torch.empty(1, nk, device="cuda", dtype=torch.bfloat16)
        wargs = (xw.data_ptr(), 1, nk, nk, _capi.BF16, w.data_ptr(), nk, nk, scales.data_ptr(), _capi.BF16,
                 None, y.data_ptr(), nk, _capi.DEVICE_CUDA, stream)
        _capi.check(lib.schedx_w8_linear(*wargs))
        # The same 15 arguments with M = 0: ctypes' conversions and the C ABI's first
        # check, no dispatch or launch; the floor under any ctypes binding of this call.
        rejected = (wargs[0], 0) + wargs[2:]
        kt = rep.attempt("host cost w8 kernel", lambda: timer(lambda: schedx.w8_linear(xw, w, scales)))
        wd = w.to(torch.bfloat16)
        label = f"w8_linear M=1 N=K={nk}"
        rows.append([label, "schedx Python API", rep.attempt("host cost w8 python", lambda: per_call_us(
            lambda: schedx.w8_linear(xw, w, scales))), kt])
        rows.append([label, "schedx Python API, output given (out=)", rep.attempt("host cost w8 python out",
                     lambda: per_call_us(lambda: schedx.w8_linear(xw, w, scales, out=y))), kt])
        rows.append([label, "schedx C ABI via ctypes", rep.attempt("host cost w8 C ABI", lambda: per_call_us(
            lambda: lib.schedx_w8_linear(*wargs))), kt])
        rows.append([label, "ctypes floor: the same call rejected at M = 0 (no launch)", rep.attempt(
            "host cost ctypes floor", lambda: per_call_us(lambda: lib.schedx_w8_linear(*rejected))), "-"])
        rows.append([label, "torch.empty of y alone", rep.attempt("host cost torch.empty", lambda: per_call_us(
            lambda: torch.empty((1, nk), dtype=torch.bfloat16, device=0))), "-"])
        rows.append([label, "eager F.linear on bf16 W (one kernel)", rep.attempt("host cost eager linear",
                     lambda: per_call_us(lambda: F.linear(xw, wd))), rep.attempt(
                         "eager linear kernel time", lambda: timer(lambda: F.linear(xw, wd)))])
    return md_table(["call", "path", "host us per call", "GPU kernel us"], rows)


# ---------------------------------------------------------------- environment

def command_line():
    """The command as typed, with the SCHEDX_LIBRARY it ran against."""
    words = [os.path.basename(sys.executable)] + sys.argv
    if "SCHEDX_LIBRARY" in os.environ:
        words.insert(0, f"SCHEDX_LIBRARY={os.environ['SCHEDX_LIBRARY']}")
    return " ".join(shlex.quote(w) for w in words)


def environment(args):
    def sh(cmd):
        try:
            return subprocess.run(cmd, capture_output=True, text=True, timeout=20, cwd=REPO).stdout.strip()
        except Exception:  # noqa: BLE001
            return ""

    commit = args.commit or sh(["git", "rev-parse", "HEAD"]) or os.environ.get("SCHEDX_COMMIT", "")
    if commit and not args.commit and sh(["git", "status", "--porcelain", "--untracked-files=no"]):
        commit += " (with uncommitted changes)"
    try:
        import triton
        triton_version = triton.__version__
    except Exception:  # noqa: BLE001
        triton_version = "not importable"
    if torch.cuda.is_available():
        props = torch.cuda.get_device_properties(0)
        gpu = f"{torch.cuda.get_device_name()} ({props.multi_processor_count} SMs, {props.total_memory / 2**30:.0f} GiB)"
    else:
        cpu = next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name")),
                   "unknown")
        gpu = f"none: CPU only ({cpu}, {os.cpu_count()} cores)"
    return {
        "date": datetime.datetime.now().strftime("%Y-%m-%d %H:%M:%S"),
        "GPU": gpu,
        "driver": (sh(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"]).splitlines()
                   or ["unknown"])[0],
        "torch": f"{torch.__version__} (CUDA {torch.version.cuda})",
        "triton": triton_version,
        "python": sys.version.split()[0],
        "schedx library": _capi.lib()._name,
        "git commit": commit or "unknown (no git metadata here: pass --commit)",
        "command": command_line(),
    }


# ---------------------------------------------------------------- main

def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="fewer w8 shapes, shorter timing, max-autotune on one "
                    "shape per pattern; about 5 minutes on an H200")
    ap.add_argument("--budget", type=float, help="seconds from the start after which no further torch.compile "
                    "is started (default 210 with --quick, 480 without)")
    ap.add_argument("--autotune-budget", type=float, help="seconds for all max-autotune compiles together "
                    "(default 60 with --quick, 180 without)")
    ap.add_argument("--out", help="markdown file to write (default bench/results/compare_torch_<date>.md)")
    ap.add_argument("--only", choices=("fp8", "w8"), help="measure one pattern (a short device session)")
    ap.add_argument("--w8-nk", help="w8 (N, K) pairs instead of the default list, e.g. 4096x4096,14336x4096 "
                    "(so that the compile columns of every shape fit in a few device calls)")
    ap.add_argument("--w8-ms", type=lambda s: [int(v) for v in s.split(",")],
                    help="w8 batch sizes, e.g. 1,2,4,8,16 (default: the mode's list)")
    ap.add_argument("--ragged", action="store_true", help="the ragged shape sets (issue 29: sizes off the tiles "
                    "and steps beside aligned neighbours) instead of the default shapes")
    ap.add_argument("--commit", help="git commit to record when the tree has no git metadata")
    args = ap.parse_args()
    if args.budget is None:
        args.budget = 210.0 if args.quick else 480.0
    if args.autotune_budget is None:
        args.autotune_budget = 60.0 if args.quick else 180.0
    if not torch.cuda.is_available():
        sys.exit("compare_torch.py needs a CUDA GPU")
    try:
        _capi.lib()
    except OSError as e:
        sys.exit(str(e))
    start = time.monotonic()
    # Every job compiles after torch._dynamo.reset(); raise the recompile limits anyway so
    # that a long run never falls back to eager silently.
    for name in ("cache_size_limit", "recompile_limit", "accumulated_cache_size_limit",
                 "accumulated_recompile_limit"):
        if hasattr(torch._dynamo.config, name):
            setattr(torch._dynamo.config, name, 1024)
    torch.manual_seed(0)
    rep = Report()
    timer = Timer(args.quick)
    budget = Budget(args.budget)
    env = environment(args)
    for key, v in env.items():
        log(f"{key}: {v}")

    # Cheap and most important first; torch.compile while the budget lasts; the graph
    # capture last, so that a failed capture cannot disturb the numbers.
    def skipped(name):
        raise Skipped(f"{name} skipped (--only {args.only})")

    log("ceilings")
    ceil = ceilings(args, rep, timer)
    log("checks")
    checks = [[name, rep.attempt(name, fn)] for name, fn in (
        ("exhaustive bf16/fp16 bit patterns, every CUDA variant",
         lambda: skipped("exhaustive fp8 check") if args.only == "w8" else exhaustive_check()),
        ("odd shapes, strided rows, fp32, torch CPU tensors", odd_layouts_check),
        ("argument errors raise SchedxError", error_check),
        ("non-default stream with work queued before and after", stream_check),
    )]
    log("host-side cost")
    host = rep.attempt("host-side cost", lambda: host_cost(rep, timer))
    log("pattern 1: fp8 cast + transpose")
    fp8 = rep.attempt("pattern 1", lambda: skipped("pattern 1") if args.only == "w8" else measure_fp8(args, rep, timer))
    log("pattern 2: w8 linear")
    w8 = rep.attempt("pattern 2", lambda: skipped("pattern 2") if args.only == "fp8" else measure_w8(args, rep, timer))
    fp8_jobs = fp8[3] if isinstance(fp8, tuple) else {}
    w8_jobs = w8[3] if isinstance(w8, tuple) else {}
    order = [fp8_jobs.get("compile", []), w8_jobs.get("compile+cd", []), fp8_jobs.get("compile+cd", []),
             w8_jobs.get("compile", []), fp8_jobs.get("compile+amax", []), fp8_jobs.get("max-autotune", []),
             w8_jobs.get("max-autotune", [])]
    autotune_left = args.autotune_budget
    for jobs in order:
        for job in jobs:
            t0 = time.monotonic()
            job.run(rep, timer, budget, autotune_left)
            if job.autotune:
                autotune_left -= time.monotonic() - t0
    checks.append(["CUDA graph capture and replay", rep.attempt("CUDA graph capture and replay", graph_check)])

    md = [f"# schedx vs PyTorch, {env['date'][:10]}", ""]
    md += [f"- {key}: {v}" for key, v in env.items()]
    md += [f"- timing: {timer.method}; warm-up {timer.warmup_ms} ms, {timer.rep_ms} ms of runs",
           f"- wall time: {time.monotonic() - start:.0f} s; torch.compile jobs start only in the first "
           f"{args.budget:.0f} s, max-autotune jobs within {args.autotune_budget:.0f} s together", ""]

    def gbs(key):
        v = ceil.get(key)
        return f"{v / 1e9:.0f}" if isinstance(v, float) else v

    md += ["## Ceilings", "",
           md_table(["what", "GB/s"], [[f"device copy, {ceil['bytes'] >> 20} MiB bf16 (read + write)", gbs("copy")],
                                       [f"read-only reduction (amax), {ceil['bytes'] >> 20} MiB bf16",
                                        gbs("read")]]), ""]
    md += ["## Pattern 1: fp8 cast + transpose (bf16 -> e4m3fn, rows and cols)", "",
           "`f = clamp(x * scale, -448, 448).to(float8_e4m3fn); f_t = f.t().contiguous().t()`, scale a "
           "1-element float32 tensor; 4 bytes moved per element. Times in us; a ratio above 1 means schedx is "
           "faster. 'best' is the fastest CUDA variant forced by name. Every schedx and compiled output was "
           "checked bit-exact against eager before it was timed; 'copy of x' moves the same bytes. "
           f"'alternated': the compiled function and schedx's best variant (dispatched, for +amax) timed in "
           f"turn, {ANCHOR_ROUNDS} times each, medians, for a ratio at the same GPU temperature and clock.", ""]
    if isinstance(fp8, tuple):
        results, per_variant, noise, _ = fp8
        table, variants = fp8_tables(results, per_variant, ceil)
        md += [table, ""]
        if noise:
            md += ["Noise, schedx dispatched timed twice: " +
                   "; ".join(f"{s} {a:.1f} / {b:.1f} us" for s, a, b in noise), ""]
        if variants:
            md += ["Every CUDA variant that takes the call (us):", "", variants, ""]
    else:
        md += [fp8, ""]
    md += ["## Pattern 2: weight-only int8 linear", "",
           "`y = F.linear(x, W.to(bf16)) * scales`, x bf16 [M, K], W int8 [N, K], scales bf16 [N]. Outputs "
           f"checked against an fp64 reference: max|y - ref| / max|ref| <= {W8_REL_TOL}. cuBLAS column: F.linear "
           "on W dequantized and scaled ahead of time. % read bw: (N*K + 2*M*K + 2*M*N) bytes over the time, "
           "against the read-only ceiling. \"alternated\": the compiled function and schedx's best variant "
           f"(dispatched where none was found) timed in turn, {ANCHOR_ROUNDS} times each, medians, for a ratio "
           "at the same GPU temperature and clock (the compile columns are measured minutes after the "
           "others).", ""]
    if isinstance(w8, tuple):
        results, per_variant, note, _ = w8
        table, variants = w8_tables(results, per_variant, ceil)
        if note:
            md += [f"Note: {note}.", ""]
        md += [table, ""]
        if variants:
            md += ["Every CUDA variant that takes the call (us):", "", variants, ""]
    else:
        md += [w8, ""]
    md += ["## Checks", "", md_table(["check", "result"], checks), ""]
    md += ["## Host-side cost of one call", "",
           "Back-to-back calls on a small shape, host time per call (median of 7 loops of 400); the C ABI row "
           "includes ctypes' own overhead (about 1 us). Target: at most 5 us.", "", host, ""]
    if rep.errors:
        md += ["## Errors", ""] + [f"{i}. {e}" for i, e in enumerate(rep.errors, 1)] + [""]
    text = "\n".join(md)
    print(text)

    path = args.out or os.path.join(REPO, "bench", "results", f"compare_torch_{env['date'][:10]}.md")
    if not args.out and os.path.exists(path):
        path = path[:-3] + f"_{env['date'][11:16].replace(':', '')}.md"
    targets = [path]
    if os.environ.get("OUT"):
        targets.append(os.path.join(os.environ["OUT"], os.path.basename(path)))
    for p in targets:
        try:
            os.makedirs(os.path.dirname(os.path.abspath(p)), exist_ok=True)
            with open(p, "w") as f:
                f.write(text)
            log(f"wrote {p}")
        except OSError as e:
            log(f"could not write {p}: {e}")
    return 1 if rep.errors else 0


if __name__ == "__main__":
    sys.exit(main())
