#!/usr/bin/env python3
"""schedx's CPU variants against PyTorch's CPU kernels and the machine's own ceilings.

In one process, alternated call by call (one timed batch of each, round after round), at
1 thread, 2 threads and all cores (torch.set_num_threads; schedx's torch ops follow it), the
rows of issue 46's "Done when":
  w8         schedx's w8_linear (bf16) against torch.ops.aten._weight_int8pack_mm, a read-only
             pass over W (an int64 sum of its bytes) and a copy of W's bytes, at M = 1, 4, 16
             and (N, K) = (4096, 4096), (14336, 4096), (4096, 14336); at the large Ms (--large-m,
             default 256; 4096^2) also dequantize + torch.mm in bf16 (W converted on every call),
             schedx's own tiles (SCHEDX_CPU_GEMM_MIN_ROWS=off) and its torch GEMM path (=1),
             which the default call takes from 32 rows on a CPU with AVX512-BF16 (w4 the same);
  cast       schedx's cast + transpose with amax (both fp8 outputs) against eager PyTorch,
             torch.compile of the same code, a read-only pass over x and a copy of x (the
             cast moves as many bytes: x's 2 per element in, 1 + 1 out), 2048^2 and 4096^2;
  cast1      one output alone, as issue 130015's pattern and Float8Linear's forward write it
             (rows: the cast; cols: its .t().contiguous()), schedx into preallocated outputs
             against eager PyTorch, torch.compile, a read and a copy of x, at the cast's shapes;
  w4         schedx's w4_linear (bf16 x, symmetric groups of 128, bf16 scales) against
             torch.ops.aten._weight_int4pack_mm_for_cpu on the same nibbles and scales (gpt-fast's
             and torchao's CPU int4 kernel), a read and a copy of W's bytes, at the w8 shapes;
  quantize   schedx's quantize_fp8 (1x128, 128x128 and MXFP8 RCEIL, bf16 to e4m3, both
             outputs) against the reference math of bench/quantize_compare.py (TE's reference
             quantizer, torchao's to_mx) run eagerly and under torch.compile (MXFP8's fails on
             the CPU: no C++ type for E8M0) and the same read and copy, 4096^2.
Inputs rotate through enough copies to exceed twice the last-level cache, so no call finds
its operands in cache from the call before. Every schedx result is checked first (w8
within 1e-2 relative of an fp64 reference, fp8 codes and scales bit-exact against eager).

Usage, from the repository root after tools/setup.sh --tests:
    SCHEDX_LIBRARY=$PWD/build/runtime/libschedx.so .venv/bin/python bench/cpu_compare.py [--quick] [--ops w8 cast quantize]
Writes bench/results/cpu_compare_<date>_<host>_<commit>[_<ops>][_quick].md (and a copy into
$OUT when set); SCHEDX_BENCH_MACHINE names the host, SCHEDX_COMMIT the commit where the tree
has no .git.
"""

import argparse
import datetime
import os
import platform
import shlex
import statistics
import subprocess
import sys
import time
from typing import Callable, Dict, List, Sequence

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "python"))

import torch  # noqa: E402

import schedx  # noqa: E402
import schedx.ops  # noqa: E402,F401  (registers torch.ops.schedx)
from schedx import int4  # noqa: E402
from quantize_compare import check_equal, reference_fn, schedx_fn  # noqa: E402  (bench/ is sys.path[0])

W8_NK = [(4096, 4096), (14336, 4096), (4096, 14336)]
W8_MS = [1, 4, 16]
LARGE_MS = [256]  # at (4096, 4096) only: against dequantize + torch.mm and schedx's two paths
CAST_SHAPES = [(2048, 2048), (4096, 4096)]
QUANTIZE_SHAPES = [(4096, 4096)]
# quantize_compare's recipe names and the option each runs with (TE's pow2 scales, MX RCEIL).
QUANTIZE_RECIPES = {"block1x128": True, "block128x128": True, "mxfp8": "rceil"}
QUICK_W8_NK, QUICK_W8_MS, QUICK_CAST, QUICK_QUANTIZE = [(1024, 1024)], [1, 4], [(512, 512)], [(512, 512)]
GEMM_ENV = "SCHEDX_CPU_GEMM_MIN_ROWS"
W4_GROUP = 128  # torchao's and gpt-fast's default group size
OPS = ("w8", "w4", "cast", "cast1", "quantize")
E4M3_MAX = 448.0
ROUNDS = 7          # alternation rounds; the median of each candidate's rounds is reported
SAMPLE_S = 0.02     # a timed batch lasts about this long
SEEN: Dict[str, List[str]] = {}  # operator: the schedx variants that ran its checked calls


def saw(op: str) -> None:
    name = schedx.last_variant(op)
    if name not in SEEN.setdefault(op, []):
        SEEN[op].append(name)


def cache_bytes() -> int:
    try:
        return os.sysconf("SC_LEVEL3_CACHE_SIZE") or (32 << 20)
    except (ValueError, OSError):
        return 32 << 20


def copies_for(bytes_per_set: int) -> int:
    return max(2, min(64, 2 * cache_bytes() // max(bytes_per_set, 1) + 1))


def time_alternated(cands: Dict[str, Callable[[int], object]], sets: int) -> Dict[str, float]:
    """Median microseconds per call of each candidate, batches alternated round by round."""
    calls = {}
    for name, fn in cands.items():
        fn(0)  # warm-up (torch.compile compiles here)
        t = time.perf_counter()
        fn(1 % sets)
        one = max(time.perf_counter() - t, 1e-6)
        calls[name] = max(1, min(1000, int(SAMPLE_S / one)))
    samples: Dict[str, List[float]] = {n: [] for n in cands}
    nxt = 0
    for _ in range(ROUNDS):
        for name, fn in cands.items():
            n = calls[name]
            t = time.perf_counter()
            for i in range(n):
                fn((nxt + i) % sets)
            samples[name].append((time.perf_counter() - t) / n * 1e6)
            nxt = (nxt + n) % sets
    return {n: statistics.median(s) for n, s in samples.items()}


def check_w8(x: torch.Tensor, w: torch.Tensor, s: torch.Tensor) -> None:
    y = torch.ops.schedx.w8_linear(x, w, s, None).double()
    ref = (x.double() @ w.double().t()) * s.double()
    # Against the sum of |terms|: from 32 rows on AVX512-BF16 the op rounds x @ W to bf16 before
    # scaling, as gpt-fast does, so an output near zero by cancellation keeps no relative digits.
    terms = (x.double().abs() @ w.double().abs().t()) * s.double()
    rel = ((y - ref).abs() / terms).max().item()
    if rel > 2 ** -7:
        raise AssertionError(f"schedx w8_linear off by {rel:.3g} of the sum of |terms|")


def with_gemm_rule(min_rows: str, call: Callable[[], torch.Tensor]) -> torch.Tensor:
    """call() with SCHEDX_CPU_GEMM_MIN_ROWS set: "off" keeps schedx's own CPU tiles at any M,
    "1" sends every bf16 call to its torch GEMM path."""
    before = os.environ.get(GEMM_ENV)
    os.environ[GEMM_ENV] = min_rows
    try:
        return call()
    finally:
        if before is None:
            del os.environ[GEMM_ENV]
        else:
            os.environ[GEMM_ENV] = before


def bench_w8(m: int, n: int, k: int, rows: list, threads: int, large: bool = False) -> None:
    g = torch.Generator().manual_seed(m * 7 + n + k)
    per_set = n * k + m * k * 2
    sets = copies_for(per_set)
    ws = [torch.randint(-128, 128, (n, k), dtype=torch.int8, generator=g) for _ in range(sets)]
    xs = [torch.randn(m, k, generator=g).to(torch.bfloat16) for _ in range(sets)]
    s = (torch.rand(n, generator=g) / 64).to(torch.bfloat16)
    check_w8(xs[0], ws[0], s)
    saw("w8_linear")
    dst = torch.empty_like(ws[0])
    cands = {
        "schedx": lambda i: torch.ops.schedx.w8_linear(xs[i], ws[i], s, None),
        "aten int8pack": lambda i: torch.ops.aten._weight_int8pack_mm(xs[i], ws[i], s),
        "read W": lambda i: ws[i].view(torch.int64).sum(),
        "copy W": lambda i: dst.copy_(ws[i]),
    }
    if large:
        cands["dequant+mm"] = lambda i: torch.mm(xs[i], ws[i].to(torch.bfloat16).t()) * s
        cands["schedx tiles"] = lambda i: with_gemm_rule("off", lambda: torch.ops.schedx.w8_linear(xs[i], ws[i], s, None))
        cands["schedx torch GEMM"] = lambda i: with_gemm_rule("1", lambda: torch.ops.schedx.w8_linear(xs[i], ws[i], s, None))
    t = time_alternated(cands, sets)
    rows.append(("w8_linear", f"M={m} N={n} K={k}", threads, t, n * k))


def bench_w4(m: int, n: int, k: int, rows: list, threads: int, large: bool = False) -> None:
    g = torch.Generator().manual_seed(m * 5 + n + k)
    groups = k // W4_GROUP
    sets = copies_for(n * k // 2 + n * groups * 2 + m * k * 2)
    us = [torch.randint(0, 16, (n, k), dtype=torch.int32, generator=g) for _ in range(sets)]
    ws = [int4.pack_nibbles(u) for u in us]
    # aten's CPU packing of the same nibbles (innerKTiles 8, as gpt-fast packs); tinygemm's
    # w = (u - 8) * s + zero is schedx's symmetric form with zero = 0.
    packed = [torch.ops.aten._convert_weight_to_int4pack_for_cpu(u, 8) for u in us]
    del us
    xs = [torch.randn(m, k, generator=g).to(torch.bfloat16) for _ in range(sets)]
    s = (torch.rand(n, groups, generator=g) / 64 + 1e-3).to(torch.bfloat16)
    scales_and_zeros = torch.stack([s.t(), torch.zeros_like(s.t())], -1).contiguous()
    wd = int4.dequantize(int4.PackedInt4(ws[0], s, None, W4_GROUP), torch.float64)
    ref, terms = xs[0].double() @ wd.t(), xs[0].double().abs() @ wd.abs().t()
    # Against the sum of |terms|: aten rounds each weight to bf16 first (2^-8 relative each).
    for name, y in (("schedx", torch.ops.schedx.w4_linear(xs[0], ws[0], s, None, None, W4_GROUP)),
                    ("aten", torch.ops.aten._weight_int4pack_mm_for_cpu(xs[0], packed[0], W4_GROUP, scales_and_zeros))):
        rel = ((y.double() - ref).abs() / terms).max().item()
        if rel > 2 ** -7:
            raise AssertionError(f"{name} w4 linear off by {rel:.3g} of the sum of |terms|")
    saw("w4_linear")
    dst = torch.empty_like(ws[0])
    cands = {
        "schedx": lambda i: torch.ops.schedx.w4_linear(xs[i], ws[i], s, None, None, W4_GROUP),
        "aten int4pack": lambda i: torch.ops.aten._weight_int4pack_mm_for_cpu(xs[i], packed[i], W4_GROUP,
                                                                              scales_and_zeros),
        "read W": lambda i: ws[i].view(torch.int64).sum(),
        "copy W": lambda i: dst.copy_(ws[i]),
    }
    if large:
        def w4(i: int) -> torch.Tensor:
            return torch.ops.schedx.w4_linear(xs[i], ws[i], s, None, None, W4_GROUP)
        cands["dequant+mm"] = lambda i: torch.nn.functional.linear(
            xs[i], int4.dequantize(int4.PackedInt4(ws[i], s, None, W4_GROUP), torch.bfloat16))
        cands["schedx tiles"] = lambda i: with_gemm_rule("off", lambda: w4(i))
        cands["schedx torch GEMM"] = lambda i: with_gemm_rule("1", lambda: w4(i))
    t = time_alternated(cands, sets)
    rows.append(("w4_linear group 128", f"M={m} N={n} K={k}", threads, t, n * k // 2))


def drop_compile_if_unavailable(cands: Dict[str, Callable[[int], object]]) -> None:
    """Removes the "torch.compile" candidate where its first call fails: the CPU backend needs a
    C++ compiler and Python.h, and without them there is no column."""
    try:
        cands["torch.compile"](0)
    except Exception as e:  # noqa: BLE001  (inductor raises many kinds)
        print(f"torch.compile unavailable, column left out: {type(e).__name__}: {e}"[:300], file=sys.stderr)
        del cands["torch.compile"]


def cast_one_eager(x: torch.Tensor, scale: torch.Tensor, transposed: bool) -> torch.Tensor:
    f = (x.float() * scale).clamp(-E4M3_MAX, E4M3_MAX).to(torch.float8_e4m3fn)
    return f.t().contiguous() if transposed else f


def cast_eager(x: torch.Tensor, scale: torch.Tensor):
    amax = x.abs().max().float()
    rows = cast_one_eager(x, scale, False)
    return rows, rows.t().contiguous(), amax


def bench_cast(m: int, k: int, rows: list, threads: int, compiled) -> None:
    g = torch.Generator().manual_seed(m + k)
    sets = copies_for(m * k * 4)
    xs = [(torch.randn(m, k, generator=g) * 100).to(torch.bfloat16) for _ in range(sets)]
    scale = torch.tensor([1.5], dtype=torch.float32)
    got = torch.ops.schedx.cast_transpose_fp8_amax(xs[0], scale, torch.float8_e4m3fn)
    want = cast_eager(xs[0], scale)
    # schedx's cols is rows' values in column-major storage (f.t().contiguous().t()).
    for a in got[:2]:
        if not torch.equal(a.view(torch.uint8), want[0].view(torch.uint8)):
            raise AssertionError("schedx cast differs from eager")
    saw("cast_transpose")
    dst = torch.empty_like(xs[0])
    # Outputs allocated once, as the copy's destination is: new tensors of 16 MiB and more come
    # from fresh pages each call, whose faults the other columns pay too.
    out = torch.ops.schedx.cast_transpose_fp8_amax(xs[0], scale, torch.float8_e4m3fn)
    into = dict(zip(("rows", "cols", "amax", "scale_inv"), out))
    cands = {
        "schedx": lambda i: torch.ops.schedx.cast_transpose_fp8_amax(xs[i], scale, torch.float8_e4m3fn),
        "schedx out=": lambda i: torch.ops.schedx.cast_transpose_fp8_out(xs[i], scale, **into),
        "eager": lambda i: cast_eager(xs[i], scale),
        "torch.compile": lambda i: compiled(xs[i], scale),
        "read x": lambda i: xs[i].view(torch.int64).sum(),
        "copy x": lambda i: dst.copy_(xs[i]),
    }
    drop_compile_if_unavailable(cands)
    t = time_alternated(cands, sets)
    rows.append(("cast_transpose+amax bf16->e4m3", f"{m}x{k}", threads, t, m * k * 2))


def bench_cast_one(m: int, k: int, rows: list, threads: int, transposed: bool, compiled) -> None:
    g = torch.Generator().manual_seed(m + k)
    sets = copies_for(m * k * 3)
    xs = [(torch.randn(m, k, generator=g) * 100).to(torch.bfloat16) for _ in range(sets)]
    scale = torch.tensor([1.5], dtype=torch.float32)
    # cols: [K, M] row-major is x's transpose, the buffer schedx's cols output of [M, K] views.
    out = torch.empty((k, m) if transposed else (m, k), dtype=torch.float8_e4m3fn)
    view = out.t() if transposed else out
    into = {"rows": None, "cols": view} if transposed else {"rows": view, "cols": None}
    torch.ops.schedx.cast_transpose_fp8_out(xs[0], scale, **into)
    if not torch.equal(out.view(torch.uint8), cast_one_eager(xs[0], scale, transposed).view(torch.uint8)):
        raise AssertionError("schedx cast differs from eager")
    saw("cast_transpose")
    dst = torch.empty_like(xs[0])
    cands = {  # schedx writes preallocated outputs, as the copy does
        "schedx": lambda i: torch.ops.schedx.cast_transpose_fp8_out(xs[i], scale, **into),
        "eager": lambda i: cast_one_eager(xs[i], scale, transposed),
        "torch.compile": lambda i: compiled(xs[i], scale, transposed),
        "read x": lambda i: xs[i].view(torch.int64).sum(),
        "copy x": lambda i: dst.copy_(xs[i]),
    }
    drop_compile_if_unavailable(cands)
    t = time_alternated(cands, sets)
    # One output moves 2 bytes in and 1 out per element, the copy 2 and 2: its bytes are 3/4 of
    # the copy's, so "% of copy" reads 75% at the copy's rate.
    rows.append((f"cast bf16->e4m3, {'cols' if transposed else 'rows'} alone", f"{m}x{k}", threads, t, m * k * 2))


# recipe: (its reference, the compiled reference or None where Inductor's CPU backend cannot
# compile it), made once and kept across thread counts (each compile takes tens of seconds).
QUANTIZE_REFERENCES: Dict[str, tuple] = {}


def quantize_reference(recipe: str, x: torch.Tensor) -> tuple:
    if recipe not in QUANTIZE_REFERENCES:
        reference = reference_fn(recipe, torch.float8_e4m3fn, QUANTIZE_RECIPES[recipe])
        compiled = torch.compile(reference, dynamic=False)
        try:  # as drop_compile_if_unavailable: e.g. MXFP8's E8M0 bytes, a dtype the CPU backend has no C++ type for
            check_equal(f"{recipe} torch.compile", compiled(x), reference(x))
        except Exception as e:  # noqa: BLE001
            print(f"torch.compile unavailable for {recipe}, column left out: {type(e).__name__}: {e}"[:300], file=sys.stderr)
            compiled = None
        QUANTIZE_REFERENCES[recipe] = (reference, compiled)
    return QUANTIZE_REFERENCES[recipe]


def bench_quantize(recipe: str, m: int, k: int, rows: list, threads: int) -> None:
    g = torch.Generator().manual_seed(m + 3 * k)
    sets = copies_for(m * k * 4)
    xs = [torch.randn(m, k, generator=g).to(torch.bfloat16) for _ in range(sets)]
    run = schedx_fn(recipe, torch.float8_e4m3fn, QUANTIZE_RECIPES[recipe])
    reference, compiled = quantize_reference(recipe, xs[0])
    check_equal(f"{recipe} {m}x{k} schedx", run(xs[0]), reference(xs[0]))
    saw("quantize_fp8")
    dst = torch.empty_like(xs[0])
    cands = {
        "schedx": lambda i: run(xs[i]),
        "eager": lambda i: reference(xs[i]),
        "torch.compile": lambda i: compiled(xs[i]),
        "read x": lambda i: xs[i].view(torch.int64).sum(),
        "copy x": lambda i: dst.copy_(xs[i]),
    }
    if compiled is None:
        del cands["torch.compile"]
    t = time_alternated(cands, sets)
    rows.append((f"quantize_fp8 {recipe} bf16->e4m3", f"{m}x{k}", threads, t, m * k * 2))


def table(rows: list) -> List[str]:
    """One markdown table per operator: medians, schedx's ratios to each anchor, to the read and
    copy ceilings at the same thread count, and schedx's speedup over its own 1-thread time."""
    out = []
    for op in dict.fromkeys(r[0] for r in rows):
        group = [r for r in rows if r[0] == op]
        names = list(dict.fromkeys(n for r in group for n in r[3]))
        anchors = [n for n in names if not n.startswith(("schedx", "read", "copy"))]
        into = "schedx out=" in names  # schedx writing preallocated outputs, as the copy does
        one_thread = {r[1]: r[3]["schedx"] for r in group if r[2] == 1}
        out += [f"### {op}", "",
                "| shape | threads | " + " | ".join(f"{n} us" for n in names) +
                " | schedx speedup vs " + (" / ".join(anchors) or "-") +
                " | schedx % of read | schedx % of copy | " + ("schedx out= % of copy | " if into else "") +
                "schedx vs 1 thread |",
                "|" + "---|" * (len(names) + 6 + into)]
        for _, shape, threads, t, _bytes in group:
            speed = " / ".join(f"{t[a] / t['schedx']:.2f}x" if a in t else "-" for a in anchors)
            read = next((t[n] for n in t if n.startswith("read")), None)
            copy = next((t[n] for n in t if n.startswith("copy")), None)
            cells = [f"{t[n]:.1f}" if n in t else "-" for n in names]
            scaling = f"{one_thread[shape] / t['schedx']:.2f}x" if shape in one_thread and threads != 1 else "-"
            out_copy = f"{100 * copy / t['schedx out=']:.0f}% | " if into else ""
            out.append(f"| {shape} | {threads} | " + " | ".join(cells) + f" | {speed or '-'} | "
                       f"{100 * read / t['schedx']:.0f}% | {100 * copy / t['schedx']:.0f}% | {out_copy}{scaling} |")
        out.append("")
    return out


def git_commit() -> str:
    """SCHEDX_COMMIT where given (the GPU machine's copy of the tree has no .git), else HEAD's."""
    if os.environ.get("SCHEDX_COMMIT"):
        return os.environ["SCHEDX_COMMIT"]
    try:
        return subprocess.run(["git", "-C", REPO, "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                              check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def cpu_name() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def main(argv: Sequence[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="small shapes only (proves the script runs)")
    ap.add_argument("--threads", type=int, nargs="*", help="thread counts (default: 1, 2 and all cores)")
    ap.add_argument("--ops", nargs="*", choices=OPS, default=list(OPS), help="operators to run (default: all)")
    ap.add_argument("--large-m", type=int, nargs="*", default=LARGE_MS,
                    help="w8 and w4 Ms at 4096^2 also timed against dequantize + mm and schedx's two paths")
    ap.add_argument("--note", default="", help="a line about the conditions, e.g. 'shared machine, noisy'")
    args = ap.parse_args(argv)
    cores = os.cpu_count() or 1
    thread_counts: List[int] = args.threads or sorted({1, min(2, cores), cores})
    ops = [o for o in OPS if o in args.ops]
    nk, ms, casts = (QUICK_W8_NK, QUICK_W8_MS, QUICK_CAST) if args.quick else (W8_NK, W8_MS, CAST_SHAPES)
    quantizes = QUICK_QUANTIZE if args.quick else QUANTIZE_SHAPES
    # Compiled once each, kept across shapes and thread counts (each compile takes seconds).
    compiled = torch.compile(cast_eager)
    compiled_one = torch.compile(cast_one_eager)
    rows: list = []
    for threads in thread_counts:
        torch.set_num_threads(threads)
        if "w8" in ops:
            for n, k in nk:
                for m in ms:
                    bench_w8(m, n, k, rows, threads)
            if not args.quick:
                for m in args.large_m:
                    bench_w8(m, 4096, 4096, rows, threads, large=True)
        if "w4" in ops:
            for n, k in nk:
                for m in ms:
                    bench_w4(m, n, k, rows, threads)
            if not args.quick:
                for m in args.large_m:
                    bench_w4(m, 4096, 4096, rows, threads, large=True)
        if "cast" in ops:
            for m, k in casts:
                bench_cast(m, k, rows, threads, compiled)
        if "cast1" in ops:
            for m, k in casts:
                for transposed in (False, True):
                    bench_cast_one(m, k, rows, threads, transposed, compiled_one)
        if "quantize" in ops:
            for recipe in QUANTIZE_RECIPES:
                for m, k in quantizes:
                    bench_quantize(recipe, m, k, rows, threads)
        print("\n".join(table([r for r in rows if r[2] == threads])), flush=True)
    date = datetime.datetime.now(datetime.timezone.utc)
    commit = git_commit()
    host = os.environ.get("SCHEDX_BENCH_MACHINE", platform.node() or "host")
    lines = [f"# schedx CPU variants against PyTorch's CPU kernels, {date:%Y-%m-%d}", "",
             f"- date: {date:%Y-%m-%d %H:%M} UTC",
             f"- machine: {host}, {cpu_name()}, {cores} cores",
             f"- torch: {torch.__version__}",
             f"- commit: {commit}",
             "- command: `" + " ".join(shlex.quote(a) for a in [sys.executable, *sys.argv]) + "`",
             "- timing: medians of 7 rounds, candidates alternated in one process; inputs rotate past 2x the "
             "last-level cache; read = int64 sum over the same bytes, copy = Tensor.copy_ of them, at the same "
             "thread count; schedx vs 1 thread = its 1-thread time over this one",
             "- schedx variants that ran: " + "; ".join(f"{op}: {', '.join(v)}" for op, v in SEEN.items())]
    if args.note:
        lines.append(f"- conditions: {args.note}")
    lines += ["", *table(rows)]
    part = "" if ops == list(OPS) else "_" + "_".join(ops)
    name = f"cpu_compare_{date:%Y-%m-%d}_{host}_{commit}{part}{'_quick' if args.quick else ''}.md"
    path = os.path.join(REPO, "bench", "results", name)
    for p in [path] + ([os.path.join(os.environ["OUT"], name)] if os.environ.get("OUT") else []):
        with open(p, "w") as f:
            f.write("\n".join(lines) + "\n")
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
