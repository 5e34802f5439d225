#!/usr/bin/env python3
"""Group-wise int4 weight-only linear (issue 50) against its anchors, one process, on a GPU:
  schedx        torch.ops.schedx.w4_linear (its untuned dispatch), symmetric, group 128
  torchao       torchao's Int4WeightOnlyConfig(group_size=128) with the packing that runs here:
                "tile_packed_to_4d" (tinygemm, aten._weight_int4pack_mm; no extra package);
                "plain" where mslk is installed
  gpt-fast      gpt-fast's int4 formulation (aten._weight_int4pack_mm on a weight packed by
                aten._convert_weight_to_int4pack, scales_and_zeros [K/g, N, 2]) under torch.compile
  bf16 cuBLAS   F.linear on the bf16 weight (the large-M anchor)
Each path's median over --calls calls after an L2-dirtying fill (as triton's do_bench), the
paths alternated round robin; ratios against schedx in the same round. The read-only anchor
over the same bytes is schedx-explore's (tools/gpu_check.sh w4 runs both). Every path's output
is checked before timing against x @ W^T in fp64 with the weight W it multiplies by: schedx's
dequantize() for schedx and gpt-fast (same quantization), its bf16 rounding for bf16 cuBLAS, and
for torchao, which quantizes the weight itself, its own: torchao 0.18's int4 tensors have no
dequantize(), so the module's output for the identity (each output one weight, as its kernel
dequantizes it to bf16).

Usage: SCHEDX_LIBRARY=$PWD/build/runtime/libschedx.so python3 bench/w4_linear.py [--calls 50] [MxNxK ...]
"""

import argparse
import os
import statistics
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "python"))

import schedx.nn as snn  # noqa: E402

GROUP = 128
# Issue 50: N = K = 8192 and Llama-3-8B's projections at M = 1; M = 2..64 and large M.
DEFAULT_SHAPES = ["1x8192x8192", "1x6144x4096", "1x4096x4096", "1x28672x4096", "1x4096x14336",
                  "2x8192x8192", "4x8192x8192", "8x8192x8192", "16x8192x8192", "32x8192x8192", "64x8192x8192",
                  "1024x8192x8192", "4096x8192x8192"]


def torchao_paths(linear):
    """{name: (module, the weight it multiplies by)} for torchao's int4 weight-only packings that
    quantize here (torchao's own scales and zero points: the module applied to the identity)."""
    from torchao.quantization import Int4WeightOnlyConfig, quantize_
    out = {}
    for fmt in ("tile_packed_to_4d", "plain"):
        m = torch.nn.Sequential(torch.nn.Linear(linear.in_features, linear.out_features, bias=False,
                                                device="cuda", dtype=torch.bfloat16))
        m[0].weight.data.copy_(linear.weight.data)
        try:
            quantize_(m, Int4WeightOnlyConfig(group_size=GROUP, int4_packing_format=fmt))
            m(torch.zeros(1, linear.in_features, device="cuda", dtype=torch.bfloat16))
            eye = torch.eye(linear.in_features, device="cuda", dtype=torch.bfloat16)
            out[f"torchao {fmt}"] = (m, m(eye).t())
        except Exception as e:  # noqa: BLE001 (a packing whose kernel is absent here)
            print(f"torchao {fmt}: not run ({type(e).__name__}: {str(e)[:120]})", file=sys.stderr)
    return out


def gpt_fast_path(layer):
    """gpt-fast's WeightOnlyInt4Linear math on schedx's quantization (symmetric: zero = 0,
    w = (u - 8) * s), as tinygemm takes it: u [N, K/2] uint8, scales_and_zeros [K/g, N, 2]."""
    u = snn.int4.unpack_nibbles(layer.weight).to(torch.int32)  # [N, K]
    packed = torch.ops.aten._convert_weight_to_int4pack((u[:, ::2] << 4 | u[:, 1::2]).to(torch.uint8), 8)
    s = layer.scales.t().to(torch.bfloat16)
    # tinygemm: w = (u - 8) * s + zero.
    scales_and_zeros = torch.stack([s, torch.zeros_like(s)], -1).contiguous()

    def fn(x):
        return torch.ops.aten._weight_int4pack_mm(x, packed, GROUP, scales_and_zeros)
    return torch.compile(fn, fullgraph=True)


# GPU cycles spun after each flush (about 100 us), so that the host has queued the call before the
# start event runs: without it a slow host (twice, a fresh machine's first run) timed every path,
# cuBLAS included, 2-6x slow, its launch inside the events.
HEAD_START_CYCLES = 200_000


def timed(fns, x, calls, flush):
    """{name: [us per call]} with the paths alternated call by call after a flush."""
    times = {k: [] for k in fns}
    for _ in range(calls):
        for name, fn in fns.items():
            flush.zero_()
            torch.cuda._sleep(HEAD_START_CYCLES)
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn(x)
            end.record()
            torch.cuda.synchronize()
            times[name].append(start.elapsed_time(end) * 1000)
    return times


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("shapes", nargs="*", default=DEFAULT_SHAPES)
    ap.add_argument("--calls", type=int, default=50)
    a = ap.parse_args()
    torch.manual_seed(0)
    flush = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}; median us after a 256 MiB fill; "
          f"ratio: path / schedx")
    for shape in a.shapes:
        m, n, k = (int(v) for v in shape.split("x"))
        linear = torch.nn.Linear(k, n, bias=False, device="cuda", dtype=torch.bfloat16)
        layer = snn.Int4WeightOnlyLinear.from_linear(linear, GROUP, symmetric=True)
        x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
        w_bf16 = layer.dequantize(torch.bfloat16)
        fns = {"schedx": layer, "bf16 cuBLAS": lambda x: F.linear(x, w_bf16)}
        weights = {"schedx": layer.dequantize(), "bf16 cuBLAS": w_bf16}
        for name, (module, weight) in torchao_paths(linear).items():
            fns[name], weights[name] = module, weight
        fns["gpt-fast compile"], weights["gpt-fast compile"] = gpt_fast_path(layer), weights["schedx"]
        xd = x.double()
        for name, fn in list(fns.items()):
            ref = xd @ weights[name].double().t()
            err = float(((fn(x).double() - ref).abs().max() / ref.abs().max()))
            if not err < 2e-2:
                print(f"{shape} {name}: max error {err:.3g} of max |y|: left out", file=sys.stderr)
                del fns[name]
        times = timed(fns, x, a.calls, flush)
        base = statistics.median(times["schedx"])
        weight_bytes = n * k // 2 + 2 * n * (k // GROUP)
        cells = [f"schedx {base:.1f} us ({weight_bytes / base / 1e3:.0f} GB/s of weights)"]
        cells += [f"{name} {statistics.median(t):.1f} ({statistics.median(t) / base:.2f}x)"
                  for name, t in times.items() if name != "schedx"]
        print(f"{shape}: " + "; ".join(cells))


if __name__ == "__main__":
    main()
