#!/usr/bin/env python3
"""The Triton source torch.compile generates for w8_linear at one shape, per compile mode,
with each kernel's launch grid and time: what the anchor's kernel does that ours does not
(block shape, warps, split of K). torch_kernels.py names the kernels; this shows them.

Usage (GPU machine, repository root):
    python3 bench/torch_codegen.py 1x8192x8192 [max-autotune compile+cd ...] > codegen.md
"""

import os
import sys

import torch
from torch._inductor.utils import run_and_get_code

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from compare_torch import COMPILE_MODES, w8_eager  # noqa: E402
from torch_kernels import kernel_table  # noqa: E402


def main():
    m, n, k = (int(v) for v in sys.argv[1].split("x"))
    modes = sys.argv[2:] or ["max-autotune", "compile+cd"]
    x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
    w = torch.randint(-128, 128, (n, k), device="cuda", dtype=torch.int8)
    scales = (torch.rand(n, device="cuda") * 0.01 + 0.001).to(torch.bfloat16)
    print(f"# torch.compile's code for w8_linear {m}x{n}x{k}, {torch.cuda.get_device_name()}, torch {torch.__version__}")
    for mode in modes:
        torch._dynamo.reset()
        fn = torch.compile(w8_eager, dynamic=False, **COMPILE_MODES[mode])
        _, code = run_and_get_code(fn, x, w, scales)
        print(f"\n## {mode}\n")
        print("| kernel | launches per call | mean us |\n|---|---|---|")
        for name, calls, us in kernel_table(lambda: fn(x, w, scales)):
            print(f"| `{name}` | {calls:g} | {us:.2f} |")
        for source in code:
            print("\n```python\n" + source + "\n```")


if __name__ == "__main__":
    main()
