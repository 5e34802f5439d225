"""Instructions per eager torch.ops.schedx.w8_linear call with and without the ops' Python
Autograd kernel, for callgrind (deterministic on a shared machine, where timings are not).

Inference tensors carry no autograd dispatch key, so calls on them skip the Autograd kernel,
as every call does under torch.inference_mode(). Run each mode at two call counts; the
difference of the totals over the difference of the counts is the cost of one call:
  for mode in normal inference; do for n in 200 1200; do
    SCHEDX_LIBRARY=build/runtime/libschedx.so PYTHONPATH=python valgrind --tool=callgrind \
      --callgrind-out-file=/tmp/cg.$mode.$n .venv/bin/python bench/autograd_kernel_cost.py $mode $n
  done; done
"""
import sys, torch, schedx.ops
op = torch.ops.schedx.w8_linear
x = torch.randn(1, 64, dtype=torch.bfloat16); w = torch.randint(-128, 128, (64, 64), dtype=torch.int8)
s = torch.rand(64).to(torch.bfloat16)
with torch.inference_mode():
    xi, wi, si = x.clone(), w.clone(), s.clone()
args = (xi, wi, si) if sys.argv[1] == "inference" else (x, w, s)
n = int(sys.argv[2])
for _ in range(200): op(*args)  # warm
for _ in range(n): op(*args)
