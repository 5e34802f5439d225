#!/usr/bin/env python3
"""schedx's block-scaled fp8 quantize (issue 32) against torchao, TransformerEngine's reference
quantizer and torch.compile, in one process.

Exactness, bit for bit, of torch.ops.schedx.quantize_fp8 (both outputs and both scale arrays):
  block1x128, block128x128  a transcription of TE's tests/pytorch/references/
                            blockwise_quantizer_reference.py and quantize_scale_calc.py
  axiswise                  torchao 0.18's hp_tensor_to_float8_dynamic (AXISWISE, dims -1 and 0)
  mxfp8                     torchao 0.18's to_mx, FLOOR and RCEIL, on x (dim0) and x.t() (dim1)
on a random bf16 matrix and on one with zero, tiny (E8M0 byte 0) and subnormal blocks, at
small shapes (one ragged), then on the timing inputs.

Timing (GPU), at each shape and recipe: schedx; a device copy of the same bytes (x read
once, both fp8 outputs and both scale arrays written); torch.compile of the reference math
above; torchao's Triton kernels for the same two outputs where torchao 0.18 has them on this
GPU; for axiswise, the tensorwise cast (torch.ops.schedx.cast_transpose_fp8) at the same
shape. Every output is checked before its time counts; the columns are timed in turn,
ROUNDS times each (medians), so that clock drift hits all of them alike.

Usage (GPU machine, repository root; torchao 0.18 on PYTHONPATH):
  SCHEDX_LIBRARY=$PWD/build/runtime/libschedx.so python3 bench/quantize_compare.py --out f.md
  ... --recipes block1x128 --shapes 8192x8192   (a part of the run, to fit one device call)
Exactness only, on the CPU variants (small shapes, no timing):
  SCHEDX_LIBRARY=build/runtime/libschedx.so PYTHONPATH=python:/path/to/torchao \\
    python3 bench/quantize_compare.py --device cpu --quick
"""

import argparse
import math
import statistics
import sys
import time

import torch
import torch.nn.functional as F

from compare_torch import Report, Timer, environment, log, md_table, ratio, write_report  # puts python/ on sys.path
import schedx  # noqa: E402
import schedx.nn  # noqa: E402,F401  registers torch.ops.schedx

RECIPES = ("block1x128", "block128x128", "axiswise", "mxfp8")
SHAPES = [(8192, 8192), (4096, 14336), (16384, 4096)]
QUICK_SHAPES = [(256, 384), (130, 260)]
FP8 = {"e4m3fn": torch.float8_e4m3fn, "e5m2": torch.float8_e5m2}
ROUNDS = 3
# The bandwidth targets (fraction of a same-size copy): 2D blocks encode each element
# once, 1D blocks and MXFP8 twice (the orientations' scales differ); axiswise is held to
# the tensorwise cast instead.
COPY_TARGET = {"block128x128": 0.88, "block1x128": 0.85, "mxfp8": 0.85}
COMPILE_TARGET = 1.5
TENSORWISE_TARGET = 1.6


# ---------------------------------------------------------------- references

def saturated(v, fp8):
    """clamp then cast, as both references write it (eager casts before torch 2.12 do not saturate)."""
    fmax = torch.finfo(fp8).max
    return torch.clamp(v, -fmax, fmax).to(fp8)


def pad_last_to(t, multiple):
    return F.pad(t, (0, (-t.shape[-1]) % multiple))


def te_scale(amax, fp8, x_dtype, pow2, eps):
    """TE's reference scale rule (quantize_scale_calc.py, scale_from_amax_tensor): fp32
    (scale, scale_inv) from a float32 amax."""
    amax = torch.maximum(amax, torch.full_like(amax, eps))  # NaN propagates, as torch.max does
    # TE divides with torch.div, the correctly rounded fp32 quotient (`fp8_max / amax` would be
    # amax.reciprocal() * fp8_max, rounded twice). In fp64 rounded once to fp32 the quotient is the
    # same (53 >= 2 * 24 + 2 bits), and stays so under Inductor, whose fp32 division can differ
    # from eager's (torchao's amax_to_scale says why it divides in fp64).
    scale = torch.div(torch.finfo(fp8).max, amax.double()).float()
    scale = torch.where(scale == math.inf, torch.finfo(x_dtype).max, scale)
    if pow2:
        # frexp's mantissa lies in [0.5, 1): 2^(exponent - 1) is the power of two at or below.
        _, exponent = torch.frexp(scale)
        scale = torch.ldexp(torch.ones_like(scale), exponent - 1)
        scale = torch.where(amax == math.inf, 0.0, scale)
    scale = torch.where(amax == 0, 1.0, scale)
    return scale, torch.reciprocal(scale.double()).float()


def te_vectorwise(x, fp8, pow2, eps):
    """Rows of x in 1 x 128 blocks, TE's GEMM-ready layout: codes [M, K] and scale_inv
    [ceil(K/128), pad4(M)] ([kb][m]); a ragged last block is padded with zeros (TE does)."""
    m, k = x.shape
    blocks = pad_last_to(x, 128).reshape(m, -1, 128)
    scale, inv = te_scale(blocks.abs().amax(dim=-1).float(), fp8, x.dtype, pow2, eps)
    codes = saturated(blocks * scale[:, :, None], fp8).reshape(m, -1)[:, :k]
    return codes.contiguous(), pad_last_to(inv.t(), 4).contiguous()


def te_block1x128(x, fp8, pow2=True, eps=0.0):
    """(rows, rows scale_inv, cols, cols scale_inv): cols quantizes x transposed, its blocks
    running along M, as TE's reference does with return_transpose."""
    rows, rows_inv = te_vectorwise(x, fp8, pow2, eps)
    cols, cols_inv = te_vectorwise(x.t().contiguous(), fp8, pow2, eps)
    return rows, rows_inv, cols, cols_inv


def te_block128x128(x, fp8, pow2=True, eps=0.0):
    """One scale per 128 x 128 tile; cols is the byte transpose of rows; scale_inv
    [ceil(M/128), pad4(ceil(K/128))] and its transpose padded the same way."""
    m, k = x.shape
    padded = F.pad(x, (0, (-k) % 128, 0, (-m) % 128))
    tiles = padded.reshape(padded.shape[0] // 128, 128, padded.shape[1] // 128, 128)
    scale, inv = te_scale(tiles.abs().amax(dim=(1, 3)).float(), fp8, x.dtype, pow2, eps)
    rows = saturated(tiles * scale[:, None, :, None], fp8).reshape(padded.shape)[:m, :k].contiguous()
    return (rows, pad_last_to(inv, 4).contiguous(), rows.t().contiguous(),
            pad_last_to(inv.t(), 4).contiguous())


def torchao_axiswise(x, fp8, pow2=True):
    """torchao's rowwise recipe: rows scaled per row ([M, 1] scales), the wgrad operand scaled
    per column ([1, K]) and stored transposed; the scales as torchao keeps them (not inverted)."""
    from torchao.float8.config import ScalingGranularity
    from torchao.float8.float8_scaling_utils import hp_tensor_to_float8_dynamic
    from torchao.float8.float8_training_tensor import LinearMMConfig

    def one(dim):
        return hp_tensor_to_float8_dynamic(x, fp8, LinearMMConfig(), scaling_granularity=ScalingGranularity.AXISWISE,
                                           axiswise_dim=dim, round_scales_to_power_of_2=pow2)

    rows, cols = one(-1), one(0)
    return rows._data, rows._scale, cols._data.t().contiguous(), cols._scale


def torchao_mx(x, fp8, mode="rceil"):
    """torchao's to_mx on x (dim0) and on x.t().contiguous() (dim1, its triton_to_mxfp8_dim1
    reference): codes and E8M0 bytes. to_mx takes only whole 32-element blocks: a ragged
    edge is padded with zeros, which leave amax as it is, and cropped after."""
    from torchao.prototype.mx_formats.config import ScaleCalculationMode
    from torchao.prototype.mx_formats.mx_tensor import to_mx

    def one(t):
        scale, data = to_mx(pad_last_to(t, 32).contiguous(), fp8, 32, scaling_mode=ScaleCalculationMode(mode))
        return data[:, :t.shape[1]].contiguous(), scale.view(torch.uint8)

    rows, rows_scale = one(x)
    cols, cols_scale = one(x.t().contiguous())
    return rows, rows_scale, cols, cols_scale


def reference_fn(recipe, fp8, option):
    """The reference each recipe follows, as a function of x alone (compiled as the anchor)."""
    if recipe == "block1x128":
        return lambda x: te_block1x128(x, fp8, pow2=option)
    if recipe == "block128x128":
        return lambda x: te_block128x128(x, fp8, pow2=option)
    if recipe == "axiswise":
        return lambda x: torchao_axiswise(x, fp8, pow2=option)
    return lambda x: torchao_mx(x, fp8, mode=option)


def schedx_fn(recipe, fp8, option):
    if recipe == "mxfp8":
        return lambda x: torch.ops.schedx.quantize_fp8(x, recipe, fp8, True, 0.0, option)
    return lambda x: torch.ops.schedx.quantize_fp8(x, recipe, fp8, option)


# Exactness cases: (recipe, fp8 format, option), the option being pow2_scales or the MX mode.
CASES = ([(r, f, p) for r in ("block1x128", "block128x128") for f in FP8 for p in (True, False)]
         + [("axiswise", "e4m3fn", p) for p in (True, False)]
         + [("mxfp8", f, mode) for f in FP8 for mode in ("floor", "rceil")])
DEFAULT_OPTION = {"block1x128": True, "block128x128": True, "axiswise": True, "mxfp8": "rceil"}
REFERENCE_NAME = {"block1x128": "TE reference quantizer (transcribed)",
                  "block128x128": "TE reference quantizer (transcribed)",
                  "axiswise": "torchao hp_tensor_to_float8_dynamic", "mxfp8": "torchao to_mx"}


def option_label(recipe, option):
    return option if recipe == "mxfp8" else ("pow2" if option else "no pow2")


# ---------------------------------------------------------------- comparison

def bits(t):
    """t's bits with every NaN as one pattern: schedx encodes NaN as 0x7F whatever its sign
    (schedx.h), where the CPU's default NaN is negative."""
    b = t.view(torch.uint8) if t.element_size() == 1 else t.view(torch.int32)
    if not t.dtype.is_floating_point:
        return b
    return torch.where(t.float().isnan(), 0x7F if t.element_size() == 1 else 0x7FC00000, b)


def difference(got, want):
    """None when got and want hold the same bits (by value, whatever their strides), else
    what differs."""
    if tuple(got.shape) != tuple(want.shape):
        return f"shape {tuple(got.shape)} != {tuple(want.shape)}"
    g, w = bits(got), bits(want)
    bad = (g != w).nonzero()
    if len(bad) == 0:
        return None
    at = tuple(bad[0].tolist())
    return f"{len(bad)} of {g.numel()} differ, first at {at}: got 0x{g[at].item() & 0xFFFFFFFF:x} " \
           f"want 0x{w[at].item() & 0xFFFFFFFF:x}"


OUTPUT_NAMES = ("rows", "rows scale", "cols", "cols scale")


def differences(got, want):
    """Per output: 'equal' or what differs."""
    return [difference(g, w) or "equal" for g, w in zip(got, want)]


def check_equal(label, got, want, names=OUTPUT_NAMES):
    bad = [f"{n}: {d}" for n, d in zip(names, differences(got, want)) if d != "equal"]
    if bad:
        raise AssertionError(f"{label} differs: " + "; ".join(bad))


# ---------------------------------------------------------------- inputs

def make_input(m, k, kind, device, seed=0):
    """bf16 x [m, k]: randn with rows scaled by powers of two from 2^-8 to 2^7; 'edges' adds a
    zero 128 x 128 tile, a row segment of tiny normals (MX byte 0: amax < 2^-119), a 1 x 32
    block of subnormals and subnormals inside ordinary blocks; 'specials' adds to those an inf,
    a -inf and a NaN in three blocks (checked for axiswise and mxfp8 only: TE's Python
    reference and its kernels part on them, docs/quantize_fp8.md)."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(m, k, generator=g) * torch.exp2(torch.randint(-8, 8, (m, 1), generator=g).float())
    if kind in ("edges", "specials"):
        x[:128, :128] = 0
        x[-1, :64] = torch.randn(min(k, 64), generator=g) * 2.0 ** -122
        x[-2, :32] = torch.randn(min(k, 32), generator=g) * 2.0 ** -130
        x[1, 5::17] = 2.0 ** -133
    if kind == "specials":
        x[2, 40], x[4, 100], x[3, 70] = float("inf"), float("-inf"), float("nan")
    return x.to(torch.bfloat16).to(device)


# ---------------------------------------------------------------- exactness

def exactness(device, shapes):
    """Rows of the exactness table: every case, shape and input kind on `device`."""
    rows = []
    for m, k in shapes:
        for kind in ("random", "edges", "specials"):
            x = make_input(m, k, kind, device)
            for recipe, fmt, option in CASES:
                if kind == "specials" and recipe.startswith("block"):
                    continue
                fp8 = FP8[fmt]
                label = [recipe, fmt, option_label(recipe, option), f"{m}x{k}", kind]
                try:
                    got = schedx_fn(recipe, fp8, option)(x)
                    want = reference_fn(recipe, fp8, option)(x)
                    rows.append(label + differences(got, want) + [REFERENCE_NAME[recipe]])
                except Exception as e:  # noqa: BLE001  a failed case is a row, not the end of the run
                    rows.append(label + [f"error: {type(e).__name__}: {str(e).splitlines()[0][:200]}"] + [""] * 3
                                + [REFERENCE_NAME[recipe]])
                log(" | ".join(str(c) for c in rows[-1]))
    return rows


# ---------------------------------------------------------------- torchao's Triton kernels

def torchao_triton_fn(recipe, fp8):
    """(fn returning schedx's four outputs from torchao's Triton kernels, what it is), or
    (None, why not). torchao's blockwise kernels use fp32(fp8_max / fp64(max(amax, 1e-12)))
    without power-of-two rounding: they are checked against schedx with pow2_scales off."""
    if recipe == "axiswise":
        return None, "torchao's rowwise recipe has no kernel of its own: Inductor (the compile column)"
    if recipe == "mxfp8":
        from torchao.prototype.mx_formats import kernels as mx_kernels
        if not mx_kernels._triton_kernels_available:
            return None, "torchao 0.18 defines triton_to_mxfp8_dim0/dim1 only on sm_100+ (and MI350)"

        def mx(x):
            rows, rows_scale = mx_kernels.triton_to_mxfp8_dim0(x, 32, "rceil")
            cols_t, cols_scale = mx_kernels.triton_to_mxfp8_dim1(x, 32, "rceil")
            return rows, rows_scale.view(torch.uint8), cols_t.t(), cols_scale.view(torch.uint8)

        return mx, "triton_to_mxfp8_dim0 + triton_to_mxfp8_dim1 (rceil)"
    from torchao.prototype.blockwise_fp8_training import kernels as bk
    if fp8 != torch.float8_e4m3fn:
        return None, "torchao's blockwise kernels take e4m3 only"
    if recipe == "block1x128":
        def act(x):
            rows, rows_inv = bk.triton_fp8_blockwise_act_quant_lhs(x, 128, fp8)
            cols, cols_inv = bk.triton_fp8_blockwise_act_quant_transposed_lhs(x, 128, fp8)
            return rows, rows_inv.t(), cols, cols_inv.t()

        return act, "triton_fp8_blockwise_act_quant_lhs + _transposed_lhs"

    # weight_quant_rhs writes x quantized column-major (the bytes of cols); _transposed_rhs
    # writes x transposed, column-major (the bytes of rows).
    def weight(x):
        cols_cm, cols_inv = bk.triton_fp8_blockwise_weight_quant_rhs(x, 128, fp8)
        rows_cm, rows_inv = bk.triton_fp8_blockwise_weight_quant_transposed_rhs(x, 128, fp8)
        return rows_cm.t(), rows_inv.t(), cols_cm.t(), cols_inv.t()

    return weight, "triton_fp8_blockwise_weight_quant_rhs + _transposed_rhs"


def unpadded(recipe, outputs):
    """schedx's outputs with the scale arrays' pad4 columns dropped (torchao writes none)."""
    rows, rows_scale, cols, cols_scale = outputs
    m, k = rows.shape
    widths = {"block1x128": (m, k), "block128x128": (math.ceil(k / 128), math.ceil(m / 128))}.get(
        recipe, (rows_scale.shape[1], cols_scale.shape[1]))
    return rows, rows_scale[:, :widths[0]], cols, cols_scale[:, :widths[1]]


# ---------------------------------------------------------------- timing

def scale_bytes(outputs):
    return sum(t.numel() * t.element_size() for t in (outputs[1], outputs[3]))


def measure(recipe, m, k, device, rep, timer):
    """Checks, then times in turn, every column of one row; returns the row's dict."""
    fp8 = torch.float8_e4m3fn
    option = DEFAULT_OPTION[recipe]
    where = f"{recipe} {m}x{k}"
    r = {}
    x = torch.randn(m, k, device=device, dtype=torch.bfloat16)
    want = reference_fn(recipe, fp8, option)(x)
    run_schedx = schedx_fn(recipe, fp8, option)
    got = run_schedx(x)
    check_equal(f"{where} schedx", got, want)
    r["variant"] = schedx.last_variant("quantize_fp8")
    r["bytes"] = 2 * m * k + 2 * m * k + scale_bytes(got)
    # A copy moving the same bytes: half read, half written.
    src = torch.randint(0, 255, (r["bytes"] // 2,), device=device, dtype=torch.uint8)
    dst = torch.empty_like(src)
    columns = {"schedx": lambda: run_schedx(x), "copy": lambda: dst.copy_(src)}

    def add(column, what, prepare):
        """prepare() checks the column's outputs and returns the call to time; its failure is the cell."""
        call = rep.attempt(f"{where} {what}", prepare)
        if callable(call):
            columns[column] = call
        else:
            r[column] = call

    def compiled():
        torch._dynamo.reset()
        c = torch.compile(reference_fn(recipe, fp8, option), dynamic=False)
        check_equal(f"{where} torch.compile", c(x), want)
        return lambda: c(x)

    add("compile", "torch.compile", compiled)
    tao, r["torchao kernels"] = torchao_triton_fn(recipe, fp8)
    if tao is not None:
        def torchao_checked():
            same_rule = schedx_fn(recipe, fp8, option if recipe == "mxfp8" else False)(x)
            check_equal(f"{where} torchao Triton", tao(x), unpadded(recipe, same_rule))
            return lambda: tao(x)

        add("torchao", "torchao Triton", torchao_checked)
    if recipe == "axiswise":
        scale = torch.full((1,), 100.0, device=device)

        def tensorwise():
            rows, cols = torch.ops.schedx.cast_transpose_fp8(x, scale, fp8)
            cast = saturated(x.float() * scale, fp8)  # cols is [M, K] too, column-major
            check_equal(f"{where} tensorwise cast", (rows, cols), (cast, cast), ("rows", "cols"))
            return lambda: torch.ops.schedx.cast_transpose_fp8(x, scale, fp8)

        add("tensorwise", "tensorwise cast", tensorwise)
    times = {c: [] for c in columns}
    for _ in range(ROUNDS):
        for c, call in columns.items():
            times[c].append(rep.attempt(f"{where} {c}", lambda call=call: timer(call)))
    for c, ts in times.items():
        errors = [t for t in ts if not isinstance(t, float)]
        r[c] = errors[0] if errors else statistics.median(ts)
    return r


def verdict(ok):
    return "-" if ok is None else ("met" if ok else "missed")


def timing_row(recipe, m, k, r):
    t = r.get("schedx")

    def per_schedx(key):
        """r[key] / schedx's time, or None where either is missing."""
        v = r.get(key)
        return v / t if isinstance(v, float) and isinstance(t, float) else None

    def holds(value, test):
        return None if value is None else test(value)

    copy_share = per_schedx("copy")
    targets = []
    if recipe in COPY_TARGET:
        targets.append(f">= {COPY_TARGET[recipe]:.0%} copy: "
                       + verdict(holds(copy_share, lambda v: v >= COPY_TARGET[recipe])))
    targets.append(f">= {COMPILE_TARGET}x compile: "
                   + verdict(holds(per_schedx("compile"), lambda v: v >= COMPILE_TARGET)))
    # torchao's axiswise casts are Inductor's: the compile column is torchao's own path.
    tao = "compile" if recipe == "axiswise" else "torchao"
    targets.append("faster than torchao: " + (verdict(holds(per_schedx(tao), lambda v: v > 1.0))
                                              if tao in r else "n/a"))
    if recipe == "axiswise":
        targets.append(f"<= {TENSORWISE_TARGET}x tensorwise: "
                       + verdict(holds(per_schedx("tensorwise"), lambda v: 1 / v <= TENSORWISE_TARGET)))
    return [f"{m}x{k}", recipe, t, r.get("variant", ""), r.get("copy"),
            f"{100 * copy_share:.0f}%" if copy_share else "-", r.get("compile"), ratio(r.get("compile"), t),
            r.get("torchao", "-"), ratio(r.get("torchao"), t), r.get("tensorwise"), ratio(t, r.get("tensorwise")),
            "; ".join(targets)]


# ---------------------------------------------------------------- main

def parse_shapes(text):
    return [tuple(int(v) for v in s.split("x")) for s in text.split(",")]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", choices=("cuda", "cpu"), default="cuda",
                    help="cpu: exactness of the CPU variants only (no timing)")
    ap.add_argument("--quick", action="store_true", help="exactness at the small shapes only, no timing")
    ap.add_argument("--recipes", default=",".join(RECIPES), help="recipes to time, e.g. block1x128,mxfp8")
    ap.add_argument("--shapes", type=parse_shapes, default=SHAPES, help="M x K to time, e.g. 8192x8192,16384x4096")
    ap.add_argument("--out", help="markdown file to write (printed either way)")
    ap.add_argument("--commit", help="git commit to record when the tree has no git metadata")
    args = ap.parse_args()
    if args.device == "cuda" and not torch.cuda.is_available():
        sys.exit("no CUDA GPU: run with --device cpu --quick")
    start = time.monotonic()
    env = environment(args)
    try:
        import torchao
        env["torchao"] = torchao.__version__
    except ImportError as e:
        sys.exit(f"torchao is not importable ({e}): put torchao 0.18 on PYTHONPATH")
    for key, v in env.items():
        log(f"{key}: {v}")
    torch.set_grad_enabled(False)
    for name in ("cache_size_limit", "recompile_limit"):
        if hasattr(torch._dynamo.config, name):
            setattr(torch._dynamo.config, name, 1024)
    rep = Report()

    log(f"exactness on {args.device}")
    exact = exactness(args.device, QUICK_SHAPES)
    body = [f"Exactness on the {args.device} variants (schedx against the reference each recipe follows, bits of "
            "every output; scale arrays compared with their padding, which TE's reference pads with 0 too). "
            "Input kinds: 'random' bf16 randn, rows scaled by 2^-8..2^7; 'edges' the same with a zero 128 x 128 "
            "tile, a row segment of tiny normals (~2^-122: MX byte 0) and a block of subnormals (~2^-130), and "
            "subnormals inside ordinary blocks. mxfp8 on a ragged shape: to_mx on x zero-padded to whole blocks, "
            "cropped.", "",
            md_table(["recipe", "format", "scales", "M x K", "input", *OUTPUT_NAMES, "reference"], exact), ""]
    failed = sum(1 for r in exact if any(c != "equal" for c in r[5:9]))

    if args.device == "cuda" and not args.quick:
        timer = Timer(quick=False)
        results = []
        for m, k in args.shapes:
            for recipe in args.recipes.split(","):
                log(f"{recipe} {m}x{k}")
                r = rep.attempt(f"{recipe} {m}x{k}", lambda: measure(recipe, m, k, args.device, rep, timer))
                results.append((recipe, m, k, r if isinstance(r, dict) else {"schedx": r}))
                # Each row to the log as it is measured: a run cut short by its time limit keeps them.
                log(" | ".join(str(c) for c in timing_row(*results[-1])))
        rows = [timing_row(recipe, m, k, r) for recipe, m, k, r in results]
        kernels = sorted({(recipe, r.get("torchao kernels", "-")) for recipe, _, _, r in results})
        body += ["## Time", "",
                 f"bf16 in, e4m3fn out, both orientations; scales: the recipe's default (power-of-two for the block "
                 f"recipes and axiswise, RCEIL for mxfp8). {timer.method}; the columns timed in turn, {ROUNDS} "
                 "rounds, medians. 'copy': a device copy of the same bytes (x read once, both fp8 outputs and both "
                 "scale arrays written); % copy bw = copy time / schedx time. 'compile': torch.compile of the "
                 "reference above (TE's quantizer, torchao's axiswise functions, torchao's to_mx), checked bit-exact "
                 "first. 'torchao': its Triton kernels for the same two outputs, checked against schedx with the "
                 "same scale rule (torchao's blockwise kernels round no scale to a power of two). 'tensorwise': "
                 "torch.ops.schedx.cast_transpose_fp8 at the same shape. Ratios above 1 mean schedx is faster, "
                 "except axiswise / tensorwise.", "",
                 md_table(["M x K", "recipe", "schedx us", "variant", "copy us", "% copy bw", "compile us",
                           "compile / schedx", "torchao us", "torchao / schedx", "tensorwise us",
                           "axiswise / tensorwise", "issue 32 targets"], rows), "",
                 "torchao kernels per recipe:", ""] + [f"- {recipe}: {what}" for recipe, what in kernels] + [""]
    body.append(f"Wall time {time.monotonic() - start:.0f} s; {failed} exactness rows with a difference.")
    if rep.errors:
        body += ["", "## Errors", ""] + [f"{i}. {e}" for i, e in enumerate(rep.errors, 1)]
    write_report("schedx quantize_fp8 against torchao, TE's reference and torch.compile", env, body, args.out)
    return 1 if failed or rep.errors else 0


if __name__ == "__main__":
    sys.exit(main())
