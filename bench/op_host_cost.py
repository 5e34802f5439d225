"""Host time per eager call of the registered operators, against eager PyTorch, in one process.

Back-to-back calls on small shapes (the GPU keeps up, so the host is what is measured),
median of 7 rounds of 400 calls: torch.ops.schedx.* (dispatcher + the Python kernel +
libschedx), the Python kernel without the dispatcher, the raw C ABI through ctypes, and
eager F.linear on the same tensors; then the same w8_linear call captured 100 times in a
CUDA graph (host time per call of a replay).

Usage (GPU machine, repository root):
  SCHEDX_LIBRARY=build/runtime/libschedx.so python3 bench/op_host_cost.py --out f.md
"""

import argparse
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
import schedx  # noqa: E402
import schedx.ops  # noqa: E402
from schedx import _capi  # noqa: E402
from compare_torch import environment, md_table, per_call_us, write_report  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out")
    ap.add_argument("--commit")
    args = ap.parse_args()
    env = environment(args)
    lib = _capi.lib()
    stream = torch.cuda.current_stream().cuda_stream
    nk = 1024
    x = torch.randn(1, nk, device="cuda", dtype=torch.bfloat16)
    w = torch.randint(-128, 128, (nk, nk), device="cuda", dtype=torch.int8)
    s = (torch.rand(nk, device="cuda") / 64).to(torch.bfloat16)
    wd = w.to(torch.bfloat16)
    y = torch.empty(1, nk, device="cuda", dtype=torch.bfloat16)
    c_args = (x.data_ptr(), 1, nk, nk, _capi.BF16, w.data_ptr(), nk, nk, s.data_ptr(), _capi.BF16, None,
              y.data_ptr(), nk, _capi.DEVICE_CUDA, stream)
    op = torch.ops.schedx.w8_linear
    label = f"w8_linear M=1 N=K={nk}"
    rows = [
        [label, "eager F.linear on bf16 W", per_call_us(lambda: F.linear(x, wd))],
        [label, "torch.ops.schedx.w8_linear", per_call_us(lambda: op(x, w, s))],
        [label, "torch.ops.schedx.w8_linear.default", per_call_us(lambda: op.default(x, w, s))],
        [label, "torch.ops.schedx.w8_linear_out", per_call_us(lambda: torch.ops.schedx.w8_linear_out(x, w, s, None,
                                                                                                       out=y))],
        [label, "schedx.w8_linear (Python API over the op)", per_call_us(lambda: schedx.w8_linear(x, w, s))],
        [label, "the op's Python kernel, no dispatcher", per_call_us(lambda: schedx.ops.w8_linear(x, w, s))],
        [label, "C ABI through ctypes", per_call_us(lambda: lib.schedx_w8_linear(*c_args))],
        [label, "torch.empty of y alone", per_call_us(lambda: torch.empty((1, nk), dtype=torch.bfloat16, device=0))],
    ]
    graph = torch.cuda.CUDAGraph()
    op(x, w, s)
    torch.cuda.synchronize()
    with torch.cuda.graph(graph):
        for _ in range(100):
            op(x, w, s)
    rows.append([label, "100 calls in a CUDA graph, per call of a replay", per_call_us(graph.replay, 20) / 100])
    m = k = 256
    xc = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
    sc = torch.full((1,), 2.0, device="cuda")
    fp8 = torch.float8_e4m3fn
    r_out, c_out = torch.empty(m, k, device="cuda", dtype=fp8), torch.empty(k, m, device="cuda", dtype=fp8)
    cc_args = (xc.data_ptr(), m, k, k, _capi.BF16, sc.data_ptr(), 0, r_out.data_ptr(), k, c_out.data_ptr(), m,
               None, None, _capi.DEVICE_CUDA, stream)

    def eager_cast():
        f = torch.clamp(xc.float() * sc, -448, 448).to(fp8)
        return f, f.t().contiguous().t()

    label = f"cast_transpose {m}x{k}"
    rows += [
        [label, "eager PyTorch (cast, then transpose copy)", per_call_us(eager_cast)],
        [label, "torch.ops.schedx.cast_transpose_fp8", per_call_us(
            lambda: torch.ops.schedx.cast_transpose_fp8(xc, sc, fp8))],
        [label, "torch.ops.schedx.cast_transpose_fp8_amax", per_call_us(
            lambda: torch.ops.schedx.cast_transpose_fp8_amax(xc, sc, fp8))],
        [label, "torch.ops.schedx.abs_max", per_call_us(lambda: torch.ops.schedx.abs_max(xc))],
        [label, "C ABI through ctypes", per_call_us(lambda: lib.schedx_cast_transpose_fp8(*cc_args))],
    ]
    for r in rows:
        r[2] = f"{r[2]:.2f}"
    write_report("Host time per eager call", env, [md_table(["call", "path", "host us per call"], rows), ""], args.out)


if __name__ == "__main__":
    main()
