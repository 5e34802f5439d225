"""Where the w8 torch-GEMM CPU path's time goes: int8 W to bf16 by to() or by copy_ into a fresh or
a reused tensor, and W converted and multiplied in chunks of rows (python/csrc/torch_ops.cpp's
kCpuGemmChunkBytes). Best of 5 calls each, one thread, W of 4096 x 4096; prints a Markdown record."""
import argparse
import datetime
import platform
import subprocess
import sys
import time
from typing import Callable

import torch

N = K = 4096


def best_ms(fn: Callable[[], object], calls: int = 5) -> float:
    fn()
    best = float("inf")
    for _ in range(calls):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best * 1e3


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    g = torch.Generator().manual_seed(0)
    w = torch.randint(-128, 128, (N, K), dtype=torch.int8, generator=g)
    reused = torch.empty(N, K, dtype=torch.bfloat16)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    print(f"# int8 W to bf16 and chunked GEMM on the CPU, {datetime.date.today()}\n")
    print(f"- machine: {platform.node()}, {args.threads} thread(s); torch {torch.__version__}; commit {commit}")
    print(f"- command: `python3 {' '.join(sys.argv)}`\n")
    print("| conversion of W (4096 x 4096) | ms |\n|---|---|")
    print(f"| w.to(torch.bfloat16) | {best_ms(lambda: w.to(torch.bfloat16)):.2f} |")
    print(f"| fresh empty + copy_ | {best_ms(lambda: torch.empty(N, K, dtype=torch.bfloat16).copy_(w)):.2f} |")
    print(f"| copy_ into a reused tensor | {best_ms(lambda: reused.copy_(w)):.2f} |")
    print("\n| M | rows per chunk | convert + mm ms | mm only ms |\n|---|---|---|---|")
    for m in (16, 256):
        x = torch.randn(m, K, generator=g).to(torch.bfloat16)
        for rows in (128, 256, 512, 1024, 2048, 4096):
            buf = torch.empty(rows, K, dtype=torch.bfloat16)

            def both() -> None:
                for j in range(0, N, rows):
                    buf.copy_(w[j:j + rows])
                    torch.mm(x, buf.t())

            def mm_only() -> None:
                for _ in range(0, N, rows):
                    torch.mm(x, buf.t())

            print(f"| {m} | {rows} | {best_ms(both):.2f} | {best_ms(mm_only):.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
