"""Host time per eager call of the registered operators, against eager PyTorch, in one process.

Back-to-back calls on small shapes (the GPU keeps up, so the host is what is measured),
median of 7 rounds of 400 calls, the paths of one call alternated over 3 rounds (the
least kept): torch.ops.schedx.w8_linear, w4_linear and the cast operators (current scaling
in one op against its steps as separate ops) with their C++ kernels
(libschedx_torch.so, where built) and the same schemas served by the Python kernels
(registered here under schedx_bench), the Python kernel without the dispatcher, the raw
C ABI through ctypes, and eager PyTorch on the same tensors; then, on CUDA, the
w8_linear call captured 100 times in a CUDA graph (host time per call of a replay).

Usage (repository root; --device cpu measures the host's share on a machine with no GPU,
with N = K small enough that the CPU kernels' own time stays small):
  SCHEDX_LIBRARY=build/runtime/libschedx.so python3 bench/op_host_cost.py --out f.md
  SCHEDX_LIBRARY=build/runtime/libschedx.so python3 bench/op_host_cost.py --device cpu --nk 64 --mk 16 --out f.md
"""

import argparse
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
import schedx  # noqa: E402
import schedx.nn as snn  # noqa: E402
import schedx.ops  # noqa: E402
from schedx import _capi  # noqa: E402
from compare_torch import environment, md_table, per_call_us, write_report  # noqa: E402

# The Python kernels behind their own ops, so that both kernels go through the dispatcher here.
_bench_lib = torch.library.Library("schedx_bench", "DEF")
_bench_lib.define("w8_linear_py(Tensor x, Tensor w, Tensor scales, Tensor? bias=None) -> Tensor")
_bench_lib.define("cast_transpose_fp8_py(Tensor x, Tensor scale, ScalarType dtype) -> (Tensor rows, Tensor cols)")
_bench_lib.define("abs_max_py(Tensor x) -> Tensor")
_bench_lib.define("w4_linear_py(Tensor x, Tensor w, Tensor scales, Tensor? zeros, Tensor? bias, int group_size) -> Tensor")
for _key in ("CPU", "CUDA"):
    _bench_lib.impl("w8_linear_py", schedx.ops.w8_linear, _key)
    _bench_lib.impl("w4_linear_py", schedx.ops.w4_linear, _key)
    _bench_lib.impl("cast_transpose_fp8_py", schedx.ops.cast_transpose_fp8, _key)
    _bench_lib.impl("abs_max_py", schedx.ops.abs_max, _key)


def alternated(label, paths, rounds=3):
    """[label, path, least host us over `rounds` rounds], each round timing every path."""
    times = {name: [] for name, _ in paths}
    for _ in range(rounds):
        for name, fn in paths:
            times[name].append(per_call_us(fn))
    return [[label, name, min(times[name])] for name, _ in paths]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out")
    ap.add_argument("--commit")
    ap.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    ap.add_argument("--nk", type=int, default=1024, help="N = K of the w8_linear call")
    ap.add_argument("--mk", type=int, default=256, help="M = K of the cast calls")
    args = ap.parse_args()
    env = environment(args)
    lib = _capi.lib()
    cuda = args.device == "cuda"
    dev = args.device
    stream = torch.cuda.current_stream().cuda_stream if cuda else None
    c_device = _capi.DEVICE_CUDA if cuda else _capi.DEVICE_CPU
    kernel = f"its {'C++' if schedx.ops.kernels == 'c++' else 'Python'} kernel"

    nk = args.nk
    x = torch.randn(1, nk, device=dev, dtype=torch.bfloat16)
    w = torch.randint(-128, 128, (nk, nk), device=dev, dtype=torch.int8)
    s = (torch.rand(nk, device=dev) / 64).to(torch.bfloat16)
    wd = w.to(torch.bfloat16)
    y = torch.empty(1, nk, device=dev, dtype=torch.bfloat16)
    c_args = (x.data_ptr(), 1, nk, nk, _capi.BF16, w.data_ptr(), nk, nk, s.data_ptr(), _capi.BF16, None,
              y.data_ptr(), nk, c_device, stream)
    op = torch.ops.schedx.w8_linear
    # Inference tensors carry no autograd dispatch key: the call skips the ops' Python
    # Autograd kernel, as every call does under torch.inference_mode().
    with torch.inference_mode():
        x_inf, w_inf, s_inf = x.clone(), w.clone(), s.clone()
    lin = torch.nn.Linear(nk, nk, bias=False, device=dev, dtype=torch.bfloat16)
    q8 = snn.Int8WeightOnlyLinear.from_linear(lin)
    rows = alternated(f"w8_linear M=1 N=K={nk}", [
        ("eager F.linear on bf16 W", lambda: F.linear(x, wd)),
        ("torch.nn.Linear, bf16 (a module call)", lambda: lin(x)),
        ("schedx.nn.Int8WeightOnlyLinear (a module call: below_autograd, x needs no grad)", lambda: q8(x)),
        (f"torch.ops.schedx.w8_linear.below_autograd, {kernel}", lambda: op.below_autograd(x, w, s)),
        (f"torch.ops.schedx.w8_linear, {kernel}", lambda: op(x, w, s)),
        (f"torch.ops.schedx.w8_linear.default, {kernel}", lambda: op.default(x, w, s)),
        (f"torch.ops.schedx.w8_linear on inference tensors (no Autograd kernel), {kernel}",
         lambda: op(x_inf, w_inf, s_inf)),
        (f"torch.ops.schedx.w8_linear_out, {kernel}", lambda: torch.ops.schedx.w8_linear_out(x, w, s, None, out=y)),
        ("the same schema with the Python kernel (schedx_bench)", lambda: torch.ops.schedx_bench.w8_linear_py(x, w, s)),
        ("schedx.w8_linear (Python API over the op)", lambda: schedx.w8_linear(x, w, s)),
        ("the Python kernel, no dispatcher", lambda: schedx.ops.w8_linear(x, w, s)),
        ("C ABI through ctypes", lambda: lib.schedx_w8_linear(*c_args)),
        ("torch.empty of y alone", lambda: torch.empty((1, nk), dtype=torch.bfloat16, device=dev)),
    ])
    if cuda:
        graph = torch.cuda.CUDAGraph()
        op(x, w, s)
        torch.cuda.synchronize()
        with torch.cuda.graph(graph):
            for _ in range(100):
                op(x, w, s)
        rows.append([rows[0][0], "100 calls in a CUDA graph, per call of a replay", per_call_us(graph.replay, 20) / 100])

    # w4_linear, symmetric, the largest group that divides K.
    group = max(g for g in (32, 64, 128) if nk % g == 0)
    w4 = snn.Int4WeightOnlyLinear.from_linear(torch.nn.Linear(nk, nk, bias=False, device=dev, dtype=torch.bfloat16),
                                             group)
    w4_args = (x, w4.weight, w4.scales, None, None, group)
    with torch.inference_mode():
        w4_inf = tuple(t.clone() if isinstance(t, torch.Tensor) else t for t in w4_args)
    rows += alternated(f"w4_linear M=1 N=K={nk} group {group}", [
        ("eager F.linear on bf16 W", lambda: F.linear(x, wd)),
        ("torch.nn.Linear, bf16 (a module call)", lambda: lin(x)),
        ("schedx.nn.Int4WeightOnlyLinear (a module call: below_autograd, x needs no grad)", lambda: w4(x)),
        (f"torch.ops.schedx.w4_linear, {kernel}", lambda: torch.ops.schedx.w4_linear(*w4_args)),
        (f"torch.ops.schedx.w4_linear.below_autograd, {kernel}",
         lambda: torch.ops.schedx.w4_linear.below_autograd(*w4_args)),
        (f"torch.ops.schedx.w4_linear on inference tensors (no Autograd kernel), {kernel}",
         lambda: torch.ops.schedx.w4_linear(*w4_inf)),
        ("the same schema with the Python kernel (schedx_bench)", lambda: torch.ops.schedx_bench.w4_linear_py(*w4_args)),
    ])

    m = k = args.mk
    xc = torch.randn(m, k, device=dev, dtype=torch.bfloat16)
    sc = torch.full((1,), 2.0, device=dev)
    fp8 = torch.float8_e4m3fn
    with torch.inference_mode():
        xc_inf, sc_inf = xc.clone(), sc.clone()
    r_out, c_out = torch.empty(m, k, device=dev, dtype=fp8), torch.empty(k, m, device=dev, dtype=fp8)
    cc_args = (xc.data_ptr(), m, k, k, _capi.BF16, sc.data_ptr(), 0, r_out.data_ptr(), k, c_out.data_ptr(), m,
               None, None, c_device, stream)

    def eager_cast():
        f = torch.clamp(xc.float() * sc, -448, 448).to(fp8)
        return f, f.t().contiguous().t()

    rows += alternated(f"cast_transpose {m}x{k}", [
        ("eager PyTorch (cast, then transpose copy)", eager_cast),
        (f"torch.ops.schedx.cast_transpose_fp8, {kernel}", lambda: torch.ops.schedx.cast_transpose_fp8(xc, sc, fp8)),
        (f"torch.ops.schedx.cast_transpose_fp8 on inference tensors (no Autograd kernel), {kernel}",
         lambda: torch.ops.schedx.cast_transpose_fp8(xc_inf, sc_inf, fp8)),
        ("the same schema with the Python kernel (schedx_bench)",
         lambda: torch.ops.schedx_bench.cast_transpose_fp8_py(xc, sc, fp8)),
        (f"torch.ops.schedx.cast_transpose_fp8_amax, {kernel}",
         lambda: torch.ops.schedx.cast_transpose_fp8_amax(xc, sc, fp8)),
        ("C ABI through ctypes", lambda: lib.schedx_cast_transpose_fp8(*cc_args)),
    ])

    def eager_current():
        scale = snn.amax_to_scale(xc.abs().amax().reshape(1), fp8)
        f = torch.clamp(xc.float() * scale, -448, 448).to(fp8)
        return f, f.t().contiguous().t(), scale.reciprocal()

    def separate_ops():  # schedx.nn.Float8Linear's current scaling before the fused op
        scale = snn.amax_to_scale(torch.ops.schedx.abs_max(xc), fp8)
        r, c = torch.ops.schedx.cast_transpose_fp8(xc, scale, fp8)
        return r, c, scale.reciprocal()

    rows += alternated(f"current scaling {m}x{k}", [
        ("eager PyTorch (amax, scale, cast, transpose copy, reciprocal)", eager_current),
        ("abs_max, the scale by torch ops, cast_transpose_fp8, reciprocal", separate_ops),
        (f"torch.ops.schedx.cast_transpose_fp8_current_scaling, {kernel}",
         lambda: torch.ops.schedx.cast_transpose_fp8_current_scaling(xc, fp8)),
    ])
    rows += alternated(f"abs_max {m}x{k}", [
        ("eager x.abs().amax()", lambda: xc.abs().amax()),
        (f"torch.ops.schedx.abs_max, {kernel}", lambda: torch.ops.schedx.abs_max(xc)),
        ("the same schema with the Python kernel (schedx_bench)", lambda: torch.ops.schedx_bench.abs_max_py(xc)),
    ])
    for r in rows:
        r[2] = f"{r[2]:.2f}"
    write_report("Host time per eager call", env, [md_table(["call", "path", "host us per call"], rows), ""], args.out)


if __name__ == "__main__":
    main()
