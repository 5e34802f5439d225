"""Host time per eager call of the registered operators, against eager PyTorch, in one process.

Back-to-back calls on small shapes (the GPU keeps up, so the host is what is measured),
median of 7 rounds of 400 calls: torch.ops.schedx.w8_linear with its C++ kernel
(libschedx_torch.so, where built) and the same schema served by the Python kernel
(registered here as schedx_bench::w8_linear_py), the Python kernel without the
dispatcher, the raw C ABI through ctypes, and eager F.linear on the same tensors; then, on
CUDA, the same w8_linear call captured 100 times in a CUDA graph (host time per call of a
replay) and the cast operators.

Usage (repository root; --device cpu measures the host's share on a machine with no GPU,
with N = K small enough that the CPU kernels' own time stays small):
  SCHEDX_LIBRARY=build/runtime/libschedx.so python3 bench/op_host_cost.py --out f.md
  SCHEDX_LIBRARY=build/runtime/libschedx.so python3 bench/op_host_cost.py --device cpu --nk 64 --out f.md
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

# The Python kernel behind its own op, so that both kernels go through the dispatcher here.
_bench_lib = torch.library.Library("schedx_bench", "DEF")
_bench_lib.define("w8_linear_py(Tensor x, Tensor w, Tensor scales, Tensor? bias=None) -> Tensor")
for _key in ("CPU", "CUDA"):
    _bench_lib.impl("w8_linear_py", schedx.ops.w8_linear, _key)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out")
    ap.add_argument("--commit")
    ap.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    ap.add_argument("--nk", type=int, default=1024, help="N = K of the w8_linear call")
    args = ap.parse_args()
    env = environment(args)
    lib = _capi.lib()
    cuda = args.device == "cuda"
    stream = torch.cuda.current_stream().cuda_stream if cuda else None
    nk, dev = args.nk, args.device
    x = torch.randn(1, nk, device=dev, dtype=torch.bfloat16)
    w = torch.randint(-128, 128, (nk, nk), device=dev, dtype=torch.int8)
    s = (torch.rand(nk, device=dev) / 64).to(torch.bfloat16)
    wd = w.to(torch.bfloat16)
    y = torch.empty(1, nk, device=dev, dtype=torch.bfloat16)
    c_args = (x.data_ptr(), 1, nk, nk, _capi.BF16, w.data_ptr(), nk, nk, s.data_ptr(), _capi.BF16, None,
              y.data_ptr(), nk, _capi.DEVICE_CUDA if cuda else _capi.DEVICE_CPU, stream)
    op = torch.ops.schedx.w8_linear
    label = f"w8_linear M=1 N=K={nk}"
    kernel = f"its {'C++' if schedx.ops.w8_kernels == 'c++' else 'Python'} kernel"
    rows = []
    # Alternated: each path timed in every round, so drift touches all alike.
    paths = [
        ("eager F.linear on bf16 W", lambda: F.linear(x, wd)),
        (f"torch.ops.schedx.w8_linear, {kernel}", lambda: op(x, w, s)),
        (f"torch.ops.schedx.w8_linear.default, {kernel}", lambda: op.default(x, w, s)),
        (f"torch.ops.schedx.w8_linear_out, {kernel}", lambda: torch.ops.schedx.w8_linear_out(x, w, s, None, out=y)),
        ("the same schema with the Python kernel (schedx_bench::w8_linear_py)",
         lambda: torch.ops.schedx_bench.w8_linear_py(x, w, s)),
        ("schedx.w8_linear (Python API over the op)", lambda: schedx.w8_linear(x, w, s)),
        ("the Python kernel, no dispatcher", lambda: schedx.ops.w8_linear(x, w, s)),
        ("C ABI through ctypes", lambda: lib.schedx_w8_linear(*c_args)),
        ("torch.empty of y alone", lambda: torch.empty((1, nk), dtype=torch.bfloat16, device=dev)),
    ]
    times = {name: [] for name, _ in paths}
    for _ in range(3):
        for name, fn in paths:
            times[name].append(per_call_us(fn))
    rows += [[label, name, min(times[name])] for name, _ in paths]
    if not cuda:
        for r in rows:
            r[2] = f"{r[2]:.2f}"
        write_report("Host time per eager call", env, [md_table(["call", "path", "host us per call"], rows), ""],
                     args.out)
        return
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
